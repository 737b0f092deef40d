"""Reliability: the attacks that once changed what is scored, lost work or died, kept
as tests. What they guard is stated in docs/reference.md, "Guarantees".

1. a checkpoint cannot change the environment it is scored on;   2. compiled kernels load from
numba's cache in a second process, and a broken cache never stops a run;   3. NaN weights are
refused;   4. result files are written atomically and the output folder is checked first;
5. the process backend survives a killed worker, dies with its parent, and Ctrl-C keeps what
finished;   6. world parameters have sane ranges and ``max_time`` holds inside a step;
7. a crash between the log row and the checkpoint does not duplicate an iteration, and a full
disk says so;   8. arguments are checked.

Several tests run a child Python process (a fresh process, a signal, a file size limit); the
slowest ones are marked ``slow`` and have a fast sibling.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

import cluster_env
from baselines.cli import main as cluster_bench
from baselines.harness import episode
from baselines.harness.episode import env_settings
from baselines.harness.report import write_json
from baselines.harness.sweep import make_tasks, run_tasks
from cluster_env.core import kernels
from cluster_env.errors import DataError
from cluster_env.world.fluctuation import DEFAULT_FLUCTUATION

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
ENV = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(
    [str(ROOT), str(TESTS), os.environ.get("PYTHONPATH", "")]))


def python(code: str, timeout: float = 300, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter (the repository and tests on its path)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=env or ENV, cwd=ROOT, **kw)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def wait_for(predicate, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


# Policies for the worker tests: importable by name from the child processes (tests/ on the path).
class DiesOnce:
    """FIFO that kills its own worker process (SIGKILL) the first time it plays ``seed``."""

    name = "fifo"

    def __init__(self, marker: str = "", seed: int = 1) -> None:
        import baselines

        self.inner, self.marker, self.kill_seed, self.seed = baselines.make_policy("fifo"), marker, seed, None

    def reset(self, seed=None):
        self.seed = seed
        self.inner.reset(seed)

    def act(self, observations, infos):
        if self.seed == self.kill_seed and not os.path.exists(self.marker):
            Path(self.marker).write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return self.inner.act(observations, infos)


class Fifo:
    """FIFO named by import path: the process pool hands out policies without a baseline name
    first (``longest_first``), so naming both policies of a test this way keeps the tasks' order."""

    name = "fifo"

    def __init__(self) -> None:
        import baselines

        self.inner = baselines.make_policy("fifo")

    def reset(self, seed=None):
        self.inner.reset(seed)

    def act(self, observations, infos):
        return self.inner.act(observations, infos)


class Hangs:
    """A policy that writes its pid to ``$RELIABILITY_MARKERS/hang-<pid>`` and sleeps (a long episode)."""

    name = "hangs"

    def reset(self, seed=None):
        pass

    def act(self, observations, infos):
        folder = Path(os.environ["RELIABILITY_MARKERS"])
        (folder / f"hang-{os.getpid()}").write_text(str(os.getpid()))
        time.sleep(600)
        raise AssertionError("not reached")


def hang_pids(folder: Path) -> list[int]:
    return [int(p.read_text()) for p in folder.glob("hang-*") if p.read_text()]


def kill_leftovers(pids) -> None:
    """Clean up after a failing run: end the worker processes this test started."""
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


# ------------------------------------------------------------------ 1. the environment of a comparison
class NeedsWorld:
    """A policy claiming world settings, as a checkpoint trained on a toy world would."""

    name = "needs-world"

    def __init__(self, **overrides) -> None:
        self.env_overrides = overrides

    def reset(self, seed=None):
        pass

    def act(self, observations, infos):
        return {a: int(np.flatnonzero(o["action_mask"])[0]) for a, o in observations.items()}


def test_policy_requirements_apply_only_to_the_scheduling_interface():
    EnvMismatchError, env_mismatch = episode.EnvMismatchError, episode.env_mismatch
    assert env_settings(NeedsWorld(preemption=True, clairvoyant=True)) == {"preemption": True, "clairvoyant": True}
    with pytest.raises(EnvMismatchError, match="jobs_per_episode=5"):
        env_settings(NeedsWorld(jobs_per_episode=5, all_effects_off=True), {}, scenario="philly-v0")
    # What the run sets (or the scenario's default) is no mismatch.
    assert env_settings(NeedsWorld(jobs_per_episode=5), {"jobs_per_episode": 5}) == {"jobs_per_episode": 5}
    assert env_mismatch(NeedsWorld(fluctuation=True, all_effects_off=False), {}, "philly-v0") == {}
    assert env_mismatch(NeedsWorld(fluctuation=False), {}, "philly-v0") == {
        "fluctuation": {"policy": False, "run": True}}
    # Allowed: the policy runs on the run's environment, never its own.
    assert env_settings(NeedsWorld(jobs_per_episode=5), {"jobs_per_episode": 40}, allow_env_mismatch=True) == {
        "jobs_per_episode": 40}


@pytest.fixture(scope="module")
def toy_world_checkpoint(tmp_path_factory) -> Path:
    """The shipped philly-v0 agent with a training environment of 5 jobs and no effects added."""
    from dual_agent.paper.checkpoint import load_checkpoint, pretrained_path

    data = load_checkpoint(pretrained_path("philly-v0"))
    data["config"]["env_overrides"] = {**data["config"]["env_overrides"], "jobs_per_episode": 5,
                                       "all_effects_off": True}
    data.pop("path")
    path = tmp_path_factory.mktemp("ckpt") / "toy-world.pt"
    torch.save(data, path)
    return path


def test_checkpoint_environment_mismatch_is_an_error_then_recorded_when_allowed(toy_world_checkpoint, tmp_path,
                                                                                 capsys):
    args = ["run", "--scenario", "philly-v0", "--policies", f"fifo,{toy_world_checkpoint}", "--seeds", "0",
            "--env", "jobs_per_episode=30", "--backend", "serial", "--no-plots", "--quiet"]
    # EnvMismatchError: one line and a hint, exit code 2 (the CLI's rule for a user's mistake)
    assert cluster_bench([*args, "--out", str(tmp_path / "refused")]) == 2
    assert "jobs_per_episode=5" in capsys.readouterr().err
    assert not (tmp_path / "refused" / "results.json").exists()

    assert cluster_bench([*args, "--allow-env-mismatch", "--out", str(tmp_path / "ok")]) == 0
    data = json.loads((tmp_path / "ok" / "results.json").read_text())
    by_policy = {e["policy"]: e for e in data["episodes"]}
    dual = next(name for name in by_policy if name != "fifo")
    # Scored on the same 30 jobs as fifo, not on its own 5 jobs without effects.
    assert by_policy[dual]["jobs_finished"] == by_policy["fifo"]["jobs_finished"] == 30
    meta = data["meta"]
    assert meta["allow_env_mismatch"] is True
    assert meta["policy_env_kwargs"][str(toy_world_checkpoint)] == {"jobs_per_episode": 30, "preemption": True}
    assert meta["policy_env_kwargs"]["fifo"] == {"jobs_per_episode": 30}
    assert meta["env_mismatch"][str(toy_world_checkpoint)] == {
        "jobs_per_episode": {"policy": 5, "run": 30}, "all_effects_off": {"policy": True, "run": False}}


def test_training_refuses_agent_settings_that_change_the_world(tmp_path):
    from dual_agent import DualAgentConfig, MAPPOTrainer, TrainConfig

    with pytest.raises(ValueError, match=r"\['all_effects_off'\] change the environment"):
        MAPPOTrainer(TrainConfig(scenario="toy-v0", n_envs=0), DualAgentConfig(env_overrides={"all_effects_off": True}),
                     tmp_path, subprocess=False, tensorboard=False)


# ------------------------------------------------------------------ 2. compiled kernels and their cache
KERNEL_STATS = """
    import json, warnings
    warnings.simplefilter("always")
    from cluster_env.core import kernels
    with warnings.catch_warnings(record=True) as caught:
        kernels.warm_up(engines=("python",))      # the Python simulator's kernels, what this checks
    k = kernels.active()
    stats = {n: getattr(k, n).stats for n in vars(k) if hasattr(getattr(k, n), "stats")}
    print(json.dumps({"misses": sum(len(s.cache_misses) for s in stats.values()),
                      "most_misses": max(len(s.cache_misses) for s in stats.values()),
                      "hits": sum(len(s.cache_hits) for s in stats.values()),
                      # the kernels built with compiled parts as globals (run_to_next inside event;
                      # event, release_slot, measure_rates and the fluctuation step inside
                      # idle_events, the skip-idle loop)
                      "fused_hits": len(stats["event"].cache_hits) + len(stats["idle_events"].cache_hits),
                      "warnings": [str(w.message) for w in caught if "kernel cache" in str(w.message)
                                   or "compiled-kernel cache" in str(w.message)]}))
"""


@pytest.mark.skipif("numba" not in kernels.available(), reason="numba is not installed")
def test_second_process_loads_every_kernel_from_the_cache(tmp_path):
    env = dict(ENV, NUMBA_CACHE_DIR=str(tmp_path / "cache"), CLUSTER_ENV_KERNELS="numba")
    first = python(KERNEL_STATS, env=env)
    assert first.returncode == 0, first.stderr
    files = sorted(p.name for p in (tmp_path / "cache").rglob("*") if p.is_file())
    compiled = json.loads(first.stdout.splitlines()[-1])
    # One specialisation per kernel: a compiled caller passing other argument types (a literal
    # instead of a bool) would compile a second one in every fresh install.
    assert compiled["misses"] > 0 and compiled["most_misses"] == 1 and files, compiled
    assert first.stderr.count(kernels.COMPILE_NOTE) == 1        # the one-time compile is announced
    second = python(KERNEL_STATS, env=env)
    assert second.returncode == 0, second.stderr
    assert kernels.COMPILE_NOTE not in second.stderr            # and only when it happens
    stats = json.loads(second.stdout.splitlines()[-1])
    # Nothing compiled; the kernels built on compiled parts (run_to_next's kind, whose cache used
    # to miss in every process) among those loaded.
    assert stats["misses"] == 0 and stats["fused_hits"] == 2 and stats["hits"] >= 5, stats
    assert sorted(p.name for p in (tmp_path / "cache").rglob("*") if p.is_file()) == files   # no new file


def test_cache_is_bounded(tmp_path):
    source = os.stat(kernels.__file__).st_mtime
    stale = tmp_path / "kernels._np_refresh_rates-1.py311.1.nbc"
    stale.write_bytes(b"x" * 100)
    os.utime(stale, (source - 10, source - 10))
    fresh = [tmp_path / f"kernels.run_to_next-{i}.py311.nbi" for i in range(3)]
    for f in fresh:
        f.write_bytes(b"x" * 400)
    other = tmp_path / "someone_else.f-1.py311.nbi"
    other.write_bytes(b"x")
    os.utime(other, (source - 10, source - 10))
    assert kernels.prune_cache(str(tmp_path), limit=10_000) == 1          # the stale file only
    assert not stale.exists() and all(f.exists() for f in fresh)
    assert kernels.prune_cache(str(tmp_path), limit=1000) == 3            # over the bound: all ours
    assert not any(f.exists() for f in fresh) and other.exists()          # never another module's


@pytest.mark.skipif("numba" not in kernels.available(), reason="numba is not installed")
def test_a_full_cache_disk_turns_caching_off_with_one_warning(tmp_path):
    """ENOSPC while numba writes its cache (the disk filled up) must not stop the episode."""
    code = """
        import errno
        import numba.core.caching as caching
        def full(self, key, data):
            raise OSError(errno.ENOSPC, "No space left on device")
        caching.IndexDataCacheFile.save = full
    """
    code = textwrap.dedent(code) + textwrap.dedent(KERNEL_STATS)
    out = python(code, env=dict(ENV, NUMBA_CACHE_DIR=str(tmp_path / "cache"), CLUSTER_ENV_KERNELS="numba"))
    assert out.returncode == 0, out.stderr
    stats = json.loads(out.stdout.splitlines()[-1])
    assert len(stats["warnings"]) == 1 and "No space left" in stats["warnings"][0]


@pytest.mark.skipif("numba" not in kernels.available(), reason="numba is not installed")
def test_too_little_free_space_turns_caching_off_before_writing(monkeypatch):
    import types

    import numba

    monkeypatch.setattr(kernels, "_cache_state", {"disabled": False, "warned": False, "pruned": set()})
    monkeypatch.setattr(kernels.shutil, "disk_usage", lambda path: types.SimpleNamespace(free=10 * 2**20))

    def reliability_plus_one(x):
        return x + 1

    dispatcher = numba.njit(reliability_plus_one)
    with pytest.warns(RuntimeWarning, match="only 10 MiB free"):
        kernels._attach_cache(dispatcher)
    assert dispatcher(1) == 2
    folder = Path(dispatcher.stats.cache_path)
    assert not list(folder.glob("*reliability_plus_one*"))          # nothing written
    assert not dispatcher.stats.cache_hits


@pytest.mark.slow
@pytest.mark.skipif("numba" not in kernels.available(), reason="numba is not installed")
def test_no_writable_cache_location_turns_caching_off_with_one_warning(tmp_path):
    code = """
        import numba.core.caching as caching
        caching.CacheImpl._locator_classes = []       # nowhere to write: numba raises at decoration
    """
    code = textwrap.dedent(code) + textwrap.dedent(KERNEL_STATS)
    out = python(code, env=dict(ENV, CLUSTER_ENV_KERNELS="numba"))
    assert out.returncode == 0, out.stderr
    stats = json.loads(out.stdout.splitlines()[-1])
    assert len(stats["warnings"]) == 1 and "no writable cache folder" in stats["warnings"][0]


# ------------------------------------------------------------------ 3. non-finite weights
def _nan_policy():
    from dual_agent import DualAgentPolicy

    policy = DualAgentPolicy.pretrained("openb-v0")
    with torch.no_grad():
        for p in policy.model.parameters():
            p.fill_(float("nan"))
    return policy


def test_nan_checkpoint_is_refused_when_loaded(tmp_path):
    from dual_agent import CheckpointError
    from dual_agent.paper.checkpoint import load_checkpoint, save_checkpoint

    policy = _nan_policy()
    path = save_checkpoint(tmp_path / "nan.pt", policy.model, policy.config, policy.spaces, "openb-v0")
    with pytest.raises(CheckpointError, match="non-finite weights"):
        load_checkpoint(path)


def test_nan_logits_stop_the_episode():
    from baselines.harness.episode import run_episode

    with pytest.raises(FloatingPointError, match="non-finite"):
        run_episode(_nan_policy(), "openb-v0", "test", 0, {"jobs_per_episode": 20})


# ------------------------------------------------------------------ 4. atomic results, output folder first
def test_results_json_is_replaced_atomically_on_a_full_disk(tmp_path):
    """A file size limit stands in for a full disk: the write fails part-way (EFBIG, like ENOSPC)."""
    from cluster_env.core.metrics import METRIC_KEYS

    path = tmp_path / "results.json"
    write_json([{"policy": "fifo", "scenario": "toy-v0", **dict.fromkeys(METRIC_KEYS, 1.0)}], path, note="old")
    old = path.read_text()
    code = f"""
        import resource, signal
        from baselines.harness.report import write_json
        from cluster_env.core.metrics import METRIC_KEYS
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
        records = [{{"policy": "fifo", "scenario": "toy-v0", "seed": i, **dict.fromkeys(METRIC_KEYS, 1.5)}}
                   for i in range(500)]
        try:
            write_json(records, {str(path)!r}, note="new")
        except OSError as exc:
            print("OSError", exc.errno)
    """
    out = python(code, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "OSError" in out.stdout
    assert path.read_text() == old and json.loads(old)["meta"]["note"] == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]       # no temporary file left


def test_an_output_folder_that_cannot_be_created_is_an_error_before_any_episode(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    t0 = time.perf_counter()
    code = cluster_bench(["run", "--scenario", "toy-v0", "--policies", "fifo", "--seeds", "0",
                          "--backend", "serial", "--no-plots", "--quiet", "--out", str(blocker / "results")])
    assert code == 2
    err = capsys.readouterr()
    assert "cannot write results to" in err.err and str(blocker / "results") in err.err
    assert "policies x" not in err.out       # no episode started
    assert time.perf_counter() - t0 < 60


# ------------------------------------------------------------------ 5. process backend
def test_a_killed_worker_is_replaced_and_finished_episodes_are_kept(tmp_path):
    marker = tmp_path / "killed"
    tasks = make_tasks([DiesOnce(str(marker), seed=2)], ["toy-v0"], "test", [0, 1, 2, 3])
    with pytest.warns(RuntimeWarning, match="worker process died"):
        results = run_tasks(tasks, backend="process", workers=2)
    assert marker.exists()                                        # a worker really died
    serial = run_tasks(make_tasks(["fifo"], ["toy-v0"], "test", [0, 1, 2, 3]), backend="serial")
    keys = ("seed", "avg_jct", "makespan", "jobs_finished")
    assert [{k: r.record[k] for k in keys} for r in results] == [{k: r.record[k] for k in keys} for r in serial]


def test_workers_die_with_their_parent(tmp_path):
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        from baselines.harness.sweep import make_tasks, run_tasks
        run_tasks(make_tasks(["test_reliability:Hangs"], ["toy-v0"], "test", [0, 1]), backend="process", workers=2)
    """)], env=dict(ENV, RELIABILITY_MARKERS=str(tmp_path)), cwd=ROOT,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pids: list[int] = []
    try:
        wait_for(lambda: len(hang_pids(tmp_path)) == 2, 120, "both workers to start their episode")
        pids = hang_pids(tmp_path)
        parent.kill()
        parent.wait(timeout=30)
        wait_for(lambda: not any(alive(p) for p in pids), 15, "the orphaned workers to exit")
    finally:
        parent.kill()
        kill_leftovers(pids or hang_pids(tmp_path))


def _default_sigint() -> None:
    """A terminal's foreground job has Ctrl-C's default action. pytest itself may run with SIGINT
    ignored (started as a background job by a non-interactive shell: POSIX then ignores SIGINT),
    which its children would inherit, and Python installs no KeyboardInterrupt handler then."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_during_run_writes_what_finished_and_exits_130(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "baselines", "run", "--scenario", "toy-v0", "--policies",
         "test_reliability:Fifo,test_reliability:Hangs",
         "--seeds", "0,1", "--backend", "process", "--workers", "2", "--no-plots", "--quiet", "--out", str(out)],
        env=dict(ENV, RELIABILITY_MARKERS=str(tmp_path)), cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,     # its own group, like a terminal's job
        preexec_fn=_default_sigint)
    pids: list[int] = []
    try:
        # Tasks run in order (fifo 0, fifo 1, hangs 0, hangs 1: both unnamed policies, one cost
        # class): both hanging means fifo finished.
        wait_for(lambda: len(hang_pids(tmp_path)) == 2, 120, "the hanging episodes to start")
        pids = hang_pids(tmp_path)
        os.killpg(proc.pid, signal.SIGINT)                 # Ctrl-C reaches the whole group
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
        kill_leftovers(pids)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and stderr.strip().splitlines()[-1].startswith("cluster-bench run: interrupted")
    data = json.loads((out / "results.partial.json").read_text())
    assert data["meta"]["complete"] is False
    assert sorted((e["policy"], e["seed"]) for e in data["episodes"]) == [("fifo", 0), ("fifo", 1)]
    wait_for(lambda: not any(alive(p) for p in pids), 15, "the workers to exit")


def test_interrupted_serial_run_keeps_finished_episodes():
    from baselines.harness.sweep import RunInterrupted

    class InterruptAtSeed:
        name = "fifo"

        def __init__(self):
            import baselines

            self.inner = baselines.make_policy("fifo")

        def reset(self, seed=None):
            self.seed = seed
            self.inner.reset(seed)

        def act(self, observations, infos):
            if self.seed == 2:
                raise KeyboardInterrupt
            return self.inner.act(observations, infos)

    with pytest.raises(RunInterrupted) as stop:
        run_tasks(make_tasks([InterruptAtSeed()], ["toy-v0"], "test", [0, 1, 2, 3]), backend="serial")
    assert [r is not None for r in stop.value.results] == [True, True, False, False]


# ------------------------------------------------------------------ 6. world ranges, max_time
@pytest.mark.parametrize("overrides, match", [
    ({"fluctuation_params": replace(DEFAULT_FLUCTUATION, sigma=5.0)}, "fluctuation_params.sigma=5.0 is outside"),
    ({"contention_alpha": 1e300}, "contention_alpha=1e[+]?300 is outside its sane range"),
    ({"restart_overhead": 1e9}, "restart_overhead"),
    ({"fluctuation_params": replace(DEFAULT_FLUCTUATION, straggler_slowdown=1e-9)}, "straggler_slowdown"),
    ({"measurement_tau": 1e-6}, "measurement_tau"),
])
def test_world_parameters_outside_their_sane_range_are_refused(overrides, match):
    with pytest.raises(ValueError, match=match):
        cluster_env.parallel_env("toy-v0", **overrides)


@pytest.mark.parametrize("max_time", [50.0, 5000.0])
def test_max_time_holds_inside_every_step(max_time):
    env = cluster_env.parallel_env("philly-v0", max_time=max_time, jobs_per_episode=200)
    obs, _ = env.reset(seed=0)
    assert env.sim.now <= max_time
    while env.agents:
        obs, _, terms, truncs, _ = env.step({a: int(np.flatnonzero(o["action_mask"])[0]) for a, o in obs.items()})
        assert env.sim.now <= max_time
    assert all(truncs.values()) and env.sim.now == max_time


# ------------------------------------------------------------------ 7. training: crash between files, full disk
TINY = dict(scenario="philly-v0", timesteps=400, steps_per_worker=100, jobs_per_episode=20, minibatch=64,
            epochs=2, eval_every=0, n_envs=2, seed=3)


def test_a_crash_between_log_row_and_checkpoint_does_not_duplicate_an_iteration(tmp_path, monkeypatch):
    from dual_agent import MAPPOTrainer, TrainConfig

    trainer = MAPPOTrainer(TrainConfig(**TINY), out_dir=tmp_path, subprocess=False, tensorboard=False)
    trainer.train(progress=False, max_iterations=1)
    real_save = MAPPOTrainer.save

    def crash_on_last(self, path, with_train=True):
        if Path(path).name == "last.pt":
            raise OSError(28, "No space left on device")
        return real_save(self, path, with_train)

    monkeypatch.setattr(MAPPOTrainer, "save", crash_on_last)
    with pytest.raises(OSError):
        trainer.train(progress=False, max_iterations=1)           # iteration 2 dies writing last.pt
    monkeypatch.setattr(MAPPOTrainer, "save", real_save)
    resumed = MAPPOTrainer.resume(tmp_path / "last.pt", subprocess=False, tensorboard=False)
    assert resumed.iteration == 1
    resumed.train(progress=False, max_iterations=1)
    rows = (tmp_path / "log.csv").read_text().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == ["1", "2"]


def test_a_full_disk_while_saving_a_checkpoint_says_so(tmp_path):
    old = tmp_path / "last.pt"
    code = f"""
        import resource, signal, torch
        torch.set_num_threads(1)
        from dual_agent import DualAgentPolicy
        from dual_agent.paper.checkpoint import save_checkpoint
        p = DualAgentPolicy.pretrained("openb-v0")
        save_checkpoint({str(old)!r}, p.model, p.config, p.spaces, "openb-v0")
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (20000, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
        try:
            save_checkpoint({str(old)!r}, p.model, p.config, p.spaces, "openb-v0", train={{"pad": torch.zeros(10**6)}})
        except OSError as exc:
            print("MESSAGE", exc)
    """
    out = python(code, timeout=180)
    assert out.returncode == 0, out.stderr
    assert "MESSAGE" in out.stdout and "is the disk full?" in out.stdout and str(old) in out.stdout
    from dual_agent.paper.checkpoint import load_checkpoint

    assert "train" not in load_checkpoint(old)                     # the previous file is intact
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]


# ------------------------------------------------------------------ 8. arguments
@pytest.fixture
def trace(tmp_path) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text("submit,duration,gpus\n0,100,1\n5,200,1\n")
    return path


@pytest.mark.parametrize("columns", [{"duration": 5}, "duration", {3: "duration"}])
def test_column_maps_are_type_checked_naming_the_argument(trace, columns):
    with pytest.raises(TypeError, match="workload_columns="):
        cluster_env.parallel_env("toy-v0", workload_csv=str(trace), workload_columns=columns)


def test_durations_below_the_minimum_name_file_row_and_field(tmp_path):
    path = tmp_path / "tiny.csv"
    path.write_text("submit,duration,gpus\n0,100,1\n5,1e-300,1\n")
    with pytest.raises(DataError) as err:
        cluster_env.parallel_env("toy-v0", workload_csv=str(path))
    assert "tiny.csv" in str(err.value) and "row 2" in str(err.value) and "duration" in str(err.value)
    assert "below the minimum" in str(err.value)


def test_dropped_zero_duration_rows_are_reported_with_a_warning(tmp_path):
    from cluster_env.loaders import load_workload_csv

    path = tmp_path / "zero.csv"
    path.write_text("submit,duration,gpus\n0,0,1\n1,5,1\n2,0,2\n3,7,2\n")
    with pytest.warns(UserWarning, match="2 of 4 jobs have a zero duration and were dropped"):
        w = load_workload_csv(path)
    assert w.num_jobs == 2


@pytest.mark.parametrize("time_scale", [1e300, 1e-300])
def test_time_scale_outside_its_range_is_refused(time_scale):
    with pytest.raises(ValueError, match="time_scale"):
        cluster_env.parallel_env("toy-v0", time_scale=time_scale)
