"""Training runs and command results are kept, and Ctrl-C always ends in one line and 130.

* a new ``train-priority`` or ``train`` never replaces a run already in its ``--out`` (``--resume``
  continues it, ``--overwrite`` replaces it);
* Ctrl-C after the last episode of ``run``/``compare``/``sweep`` and before its files keeps every
  episode (the ``.partial`` files), and Ctrl-C while the files are written exits 130, not 0;
* Ctrl-C inside a compiled (numba) function, which surfaces as a ``SystemError`` whose cause is
  the ``KeyboardInterrupt``, is an interrupt like any other;
* the sizes of ``train-priority`` are bounded before anything is allocated, on the command line
  and in a resume file alike, and a resume file, a priority agent file or a dual-agent checkpoint
  with a bad field is named by file and field.

Interrupts are injected at a chosen moment (a patched function raises, or sends SIGINT to this
process), never raced against a timer. Training runs are tiny (20- and 30-job windows, 1 iteration).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import tracemalloc
from pathlib import Path

import pytest

from baselines.cli import main as cluster_bench
from baselines.harness import files
from tests.helpers import StopsAtSeed1

HERE = __name__
TOY = ["--scenario", "toy-v0", "--seeds", "0-2", "--backend", "serial", "--quiet"]
PRIORITY = ["train-priority", "--smoke", "--iterations", "1", "--test-windows", "0", "--validation", "split"]
PRIORITY_FILES = ("best.priority.json", "last.priority.json", "log.csv")
# The paper agent: in this process (no worker start-up), one iteration of 30-job windows.
DUAL = ["train", "--smoke", "--n-envs", "0", "--timesteps", "150", "--quiet"]
DUAL_FILES = ("best.pt", "last.pt", "log.csv")


def _snapshot(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.name != files.LOCK_NAME}


def _numba_interrupt(name: str = "_placer_logits") -> SystemError:
    """What a numba-compiled function raises when Ctrl-C's KeyboardInterrupt lands while it runs."""
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as ki:
        try:
            raise SystemError(f"CPUDispatcher(<function {name}>) returned a result with an exception set") from ki
        except SystemError as exc:
            return exc


@pytest.fixture
def ctrl_c_raises():
    """Ctrl-C's default action in this process (pytest may run with SIGINT ignored as a background
    job, and a command keeps ignoring an ignored SIGINT)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _sigint_then(real):
    """``real``, after a Ctrl-C (SIGINT to this process) at its first call."""
    sent = []

    def wrapper(*args, **kwargs):
        if not sent:
            sent.append(1)
            os.kill(os.getpid(), signal.SIGINT)
        return real(*args, **kwargs)

    return wrapper


def _err_lines(capsys) -> list[str]:
    return capsys.readouterr().err.strip().splitlines()


@pytest.fixture(scope="module")
def priority_run(tmp_path_factory) -> Path:
    """A finished train-priority run (one iteration)."""
    run = tmp_path_factory.mktemp("priority") / "run"
    assert cluster_bench([*PRIORITY, "--out", str(run)]) == 0
    return run


@pytest.fixture(scope="module")
def dual_run(tmp_path_factory) -> Path:
    """A finished train run of the paper agent (one iteration); skipped without torch."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    run = tmp_path_factory.mktemp("dual") / "run"
    assert cluster_bench([*DUAL, "--out", str(run)]) == 0
    return run


# ------------------------------------------------------------------ a finished run is never replaced
def _refused_then_overwritten(argv: list, finished: Path, tmp_path: Path, capsys) -> tuple[dict, dict]:
    """A copy of the ``finished`` run: a new run of ``argv`` (seed 1) into it is refused in one line
    that names the folder, ``--resume`` and ``--overwrite``, and leaves every file as it was; with
    ``--overwrite`` it runs. The run's files before and after."""
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    before = _snapshot(run)
    capsys.readouterr()
    assert cluster_bench([*argv, "--seed", "1", "--out", str(run)]) == 2
    err = _err_lines(capsys)
    assert f"--out {run} holds a run already" in err[0] and "--resume" in err[0] and "--overwrite" in err[0]
    assert len(err) == 2 and "Traceback" not in "".join(err)
    assert _snapshot(run) == before                            # every file as it was
    assert cluster_bench([*argv, "--seed", "1", "--out", str(run), "--overwrite"]) == 0
    return before, _snapshot(run)


def test_train_priority_keeps_a_finished_run_unless_resumed_or_overwritten(priority_run, tmp_path, capsys):
    # --overwrite replaces the run: a new log, and agents of the new seed.
    before, after = _refused_then_overwritten(PRIORITY, priority_run, tmp_path, capsys)
    assert set(PRIORITY_FILES) <= set(after)
    assert json.loads(after["last.priority.json"])["training"]["seed"] == 1
    assert json.loads(before["last.priority.json"])["training"]["seed"] == 0


def test_train_priority_resumed_into_another_runs_folder_is_refused(priority_run, tmp_path, capsys):
    other = tmp_path / "other"
    shutil.copytree(priority_run, other)
    before = _snapshot(other)
    capsys.readouterr()
    argv = ["train-priority", "--resume", str(priority_run / "last.priority.json"), "--iterations", "2"]
    assert cluster_bench([*argv, "--out", str(other)]) == 2
    assert f"--out {other} holds a run already" in _err_lines(capsys)[0]
    assert _snapshot(other) == before


def test_train_keeps_a_finished_run_unless_overwritten(dual_run, tmp_path, capsys):
    before, after = _refused_then_overwritten(DUAL, dual_run, tmp_path, capsys)
    assert set(DUAL_FILES) <= set(after)
    assert after["last.pt"] != before["last.pt"] and after["best.pt"] != before["best.pt"]
    assert json.loads(after["config.json"])["train"]["seed"] == 1


# ------------------------------------------------------------------ Ctrl-C after the last episode
def test_ctrl_c_after_the_last_episode_of_run_keeps_every_episode(tmp_path, monkeypatch, capsys):
    from baselines.harness import report

    def interrupted(*args, **kwargs):          # the table's intervals: the first thing after the episodes
        raise KeyboardInterrupt

    monkeypatch.setattr(report, "format_table", interrupted)
    out = tmp_path / "out"
    assert cluster_bench(["run", "--policies", "fifo,sjf", "--reference", "fifo", "--out", str(out)] + TOY) == 130
    err = _err_lines(capsys)
    assert err[-1].startswith("cluster-bench run: interrupted; wrote the 6 of 6 episodes")
    data = json.loads((out / "results.partial.json").read_text())
    assert data["meta"]["complete"] is False and len(data["episodes"]) == 6
    assert not (out / "results.json").exists()


def test_ctrl_c_after_the_last_episode_of_compare_keeps_every_episode(tmp_path, monkeypatch, capsys):
    from baselines.harness import stats

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(stats, "paired_summary", interrupted)
    out = tmp_path / "c.json"
    assert cluster_bench(["compare", "fifo", "sjf", "--out", str(out)] + TOY) == 130
    assert _err_lines(capsys)[-1].startswith("cluster-bench compare: interrupted; wrote the 6 of 6 episodes")
    data = json.loads((tmp_path / "c.partial.json").read_text())
    assert data["meta"]["complete"] is False and len(data["episodes"]) == 6
    assert not out.exists()


def test_ctrl_c_after_the_last_episode_of_sweep_keeps_every_episode(tmp_path, monkeypatch, capsys):
    from baselines.harness import load_sweep

    def interrupted(*args, **kwargs):          # the rows' intervals, computed once every episode is in
        raise KeyboardInterrupt

    monkeypatch.setattr(load_sweep, "sweep_rows", interrupted)
    out = tmp_path / "sweep"
    argv = ["sweep", "--scenario", "toy-v0", "--loads", "0.5,0.9", "--policies", "fifo,sjf", "--reference", "fifo",
            "--seeds", "0-1", "--backend", "serial", "--quiet", "--no-plots", "--out", str(out)]
    assert cluster_bench(argv) == 130
    assert _err_lines(capsys)[-1].startswith("cluster-bench sweep: interrupted; wrote the 8 of 8 episodes")
    data = json.loads((out / "load_sweep.partial.json").read_text())
    assert data["meta"]["complete"] is False and len(data["episodes"]) == 8
    assert not (out / "load_sweep.json").exists()


# ------------------------------------------------------------------ Ctrl-C while the files are written
def test_ctrl_c_while_run_writes_its_files_completes_them_and_exits_130(tmp_path, monkeypatch, capsys,
                                                                        ctrl_c_raises):
    from baselines.harness import report

    monkeypatch.setattr(report, "write_summary_csv", _sigint_then(report.write_summary_csv))
    out = tmp_path / "out"
    assert cluster_bench(["run", "--policies", "fifo,sjf", "--reference", "fifo", "--no-plots",
                          "--out", str(out)] + TOY) == 130
    err = _err_lines(capsys)
    assert err[-1] == f"cluster-bench run: interrupted while writing; the files in {out} were completed first"
    assert json.loads((out / "results.json").read_text())["meta"]["complete"] is True
    assert (out / "summary.csv").is_file() and not (out / "results.partial.json").exists()


def test_ctrl_c_while_compare_writes_its_file_completes_it_and_exits_130(tmp_path, monkeypatch, capsys,
                                                                         ctrl_c_raises):
    monkeypatch.setattr(files, "atomic_write", _sigint_then(files.atomic_write))
    out = tmp_path / "c.json"
    assert cluster_bench(["compare", "fifo", "sjf", "--out", str(out)] + TOY) == 130
    assert _err_lines(capsys)[-1].startswith("cluster-bench compare: interrupted while writing")
    assert json.loads(out.read_text())["meta"]["complete"] is True


def test_ctrl_c_while_sweep_writes_its_files_completes_them_and_exits_130(tmp_path, monkeypatch, capsys,
                                                                          ctrl_c_raises):
    from baselines.harness import load_sweep

    monkeypatch.setattr(load_sweep, "write_sweep", _sigint_then(load_sweep.write_sweep))
    out = tmp_path / "sweep"
    argv = ["sweep", "--scenario", "toy-v0", "--loads", "0.5,0.9", "--policies", "fifo,sjf", "--reference", "fifo",
            "--seeds", "0-1", "--backend", "serial", "--quiet", "--no-plots", "--out", str(out)]
    assert cluster_bench(argv) == 130
    assert _err_lines(capsys)[-1].startswith("cluster-bench sweep: interrupted while writing")
    assert json.loads((out / "load_sweep.json").read_text())["meta"]["complete"] is True


# ------------------------------------------------------------------ Ctrl-C inside a compiled function
class NumbaInterruptAtSeed1(StopsAtSeed1):
    """The episode of seed 1 gets Ctrl-C inside a compiled function."""

    name = "fifo-numba"

    def act(self, observations, infos):
        if self.seed == 1:
            raise _numba_interrupt("_kernel")
        return self.inner.act(observations, infos)


def test_ctrl_c_inside_a_compiled_function_is_an_interrupt_of_run(tmp_path, capsys):
    out = tmp_path / "out"
    assert cluster_bench(["run", "--policies", f"sjf,{HERE}:NumbaInterruptAtSeed1", "--reference", "sjf",
                          "--out", str(out)] + TOY) == 130
    err = _err_lines(capsys)
    assert err[-1].startswith("cluster-bench run: interrupted; wrote the 4 of 6 episodes")
    assert "SystemError" not in "".join(err)


def test_ctrl_c_inside_a_compiled_episode_of_train_priority_saves_and_exits_130(tmp_path, monkeypatch, capsys):
    from dual_agent.priority import es

    real, calls = es._Runner.costs, []

    def costs(self, tasks):                    # batch 3: iteration 1's validation
        calls.append(1)
        if len(calls) == 3:
            raise _numba_interrupt("run_weighted_las_episode")
        return real(self, tasks)

    monkeypatch.setattr(es._Runner, "costs", costs)
    run = tmp_path / "run"
    assert cluster_bench(["train-priority", "--smoke", "--out", str(run)]) == 130
    err = _err_lines(capsys)
    assert err[-1].startswith("cluster-bench train-priority: interrupted; resume with")
    assert "SystemError" not in "".join(err)
    assert json.loads((run / "last.priority.json").read_text())["training"]["iterations"] == 0


def test_ctrl_c_inside_a_compiled_kernel_of_train_is_one_line_and_130(dual_run, tmp_path, monkeypatch, capsys):
    import torch

    from dual_agent.paper import portable

    portable._compile()                        # the compiled kernels in place, then the interrupted one

    def interrupted(*args, **kwargs):
        raise _numba_interrupt()

    monkeypatch.setattr(portable, "_placer_logits", interrupted)
    run = tmp_path / "run"
    # Two iterations, validated after the second: iteration 1 is saved, then the validation plays the kernel.
    assert cluster_bench([*DUAL, "--timesteps", "300", "--eval-every", "2", "--out", str(run)]) == 130
    err = _err_lines(capsys)
    assert err[-1] == f"cluster-bench train: interrupted; resume with: cluster-bench train --resume {run / 'last.pt'}"
    assert "SystemError" not in "".join(err)
    assert torch.load(run / "last.pt", weights_only=True)["train"]["iteration"] == 1     # the iteration that finished


# ------------------------------------------------------------------ sizes bounded before any allocation
@pytest.mark.parametrize("flag, value", [("--windows", "1000000000"), ("--pairs", "10000000"),
                                         ("--eval-seeds", "1000000000"), ("--test-windows", "1000000000")])
def test_train_priority_sizes_are_bounded_before_anything_is_allocated(tmp_path, monkeypatch, capsys, flag, value):
    from dual_agent.priority import es

    def started(*args, **kwargs):
        raise AssertionError("the run started")

    monkeypatch.setattr(es, "train_priority", started)
    tracemalloc.start()
    try:
        assert cluster_bench(["train-priority", "--smoke", flag, value, "--out", str(tmp_path / "run")]) == 2
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20
    err = _err_lines(capsys)
    assert len(err) == 2 and err[0].startswith(f"cluster-bench train-priority: error: {flag}={int(value):,} is "
                                               "above its bound")


def test_a_resume_file_with_an_unbounded_size_is_refused_naming_the_file_and_field(priority_run, tmp_path,
                                                                                   monkeypatch, capsys):
    from dual_agent.priority import es

    monkeypatch.setattr(es, "train_priority", lambda *a, **k: pytest.fail("the run started"))
    last = tmp_path / "last.priority.json"
    doc = json.loads((priority_run / "last.priority.json").read_text())
    doc["training"]["config"]["windows"] = 10**9
    last.write_text(json.dumps(doc))
    capsys.readouterr()
    assert cluster_bench(["train-priority", "--resume", str(last), "--iterations", "5"]) == 2
    err = _err_lines(capsys)
    assert err[0].startswith(f"cluster-bench train-priority: error: {last}: field training.config.windows="
                             "1,000,000,000 is above its bound")


# ------------------------------------------------------------------ files named by file and field
@pytest.mark.parametrize("edit, message", [
    (lambda r: r.pop("adam"), "field training.resume.adam is missing"),
    (lambda r: r.update(iteration="1"), "field training.resume.iteration must be an integer >= 0, got '1'"),
    (lambda r: r.update(theta=[0.0]), "field training.resume.theta must be a list of finite numbers, 14 of them"),
    (lambda r: r.update(best=None), "field training.resume.best must be an object, got None"),
    (lambda r: r["adam"].update(v="x"), "field training.resume.adam.v must be a list of finite numbers"),
])
def test_a_damaged_resume_state_is_named_by_file_and_field(priority_run, tmp_path, capsys, edit, message):
    last = tmp_path / "last.priority.json"
    doc = json.loads((priority_run / "last.priority.json").read_text())
    edit(doc["training"]["resume"])
    last.write_text(json.dumps(doc))
    capsys.readouterr()
    assert cluster_bench(["train-priority", "--resume", str(last), "--iterations", "5"]) == 2
    err = _err_lines(capsys)
    assert len(err) == 2 and err[0].startswith(f"cluster-bench train-priority: error: {last}: {message}")


def test_priority_agent_files_name_a_nan_weight_and_refuse_unknown_fields(tmp_path):
    from dual_agent.priority.agent import PriorityCheckpointError, load_priority_agent
    from dual_agent.shared import PRETRAINED_DIR

    doc = json.loads((PRETRAINED_DIR / "philly-hetero-v2.priority.json").read_text())
    path = tmp_path / "a.priority.json"
    for edit, message in (
            (lambda d: d["weights"]["linear"].__setitem__(2, float("nan")),
             "field weights.linear[2] is nan; weights must be finite numbers"),
            (lambda d: d.update(migrat=1.5), "field migrat is not a field of a priority agent file"),
            (lambda d: d["weights"].update(bias=[0.0]), "field weights.bias is not a weight of a priority agent")):
        changed = json.loads(json.dumps(doc))
        edit(changed)
        path.write_text(json.dumps(changed))
        with pytest.raises(PriorityCheckpointError) as err:
            load_priority_agent(path)
        assert str(err.value).startswith(f"{path}: {message}")
    path.write_text(json.dumps(doc))
    assert load_priority_agent(path).spec.scenario == "philly-hetero-v2"       # the file itself loads


def test_a_config_given_as_a_string_is_refused_whole_not_read_letter_by_letter():
    from dual_agent.paper.config import DualAgentConfig, TrainConfig

    with pytest.raises(ValueError, match=r"^x\.pt: field config: DualAgentConfig settings must be an object of "
                                         r"fields, got 'acd'$"):
        DualAgentConfig.from_dict("acd", where="x.pt: field config")
    with pytest.raises(ValueError, match=r"^x\.pt: field train\.config: timesteps must be > 0, got 0$"):
        TrainConfig.from_dict({"timesteps": 0}, where="x.pt: field train.config")


def test_a_checkpoint_whose_config_is_a_string_is_named_by_file_and_field(dual_run, tmp_path):
    import torch

    from dual_agent.paper.checkpoint import CheckpointError
    from dual_agent.paper.policy import DualAgentPolicy

    data = torch.load(dual_run / "last.pt", weights_only=True)
    for edit, message in (
            (lambda d: d.update(config="acd"), "field config: DualAgentConfig settings must be an object"),
            (lambda d: d["config"].update(hidden="64"), "field config: hidden must be an integer, got '64'")):
        changed = dict(data, config=dict(data["config"]))
        edit(changed)
        path = tmp_path / "agent.pt"
        torch.save(changed, path)
        with pytest.raises(CheckpointError) as err:
            DualAgentPolicy.load(path)
        assert str(err.value).startswith(f"{path}: {message}")


@pytest.mark.parametrize("edit, message", [
    (lambda s: s.update(iteration="1"), "field train.iteration must be an integer >= 0, got '1'"),
    (lambda s: s.update(config="abc"), "field train.config must be an object, got 'abc'"),
    (lambda s: s["config"].update(timesteps="5"), "field train.config: timesteps must be an integer, got '5'"),
    (lambda s: s.update(log="x"), "field train.log must be a list of rows (objects), got 'x'"),
])
def test_a_damaged_training_checkpoint_is_named_by_file_and_field(dual_run, tmp_path, capsys, edit, message):
    import torch

    data = torch.load(dual_run / "last.pt", weights_only=True)
    state = dict(data["train"], config=dict(data["train"]["config"]))
    edit(state)
    path = tmp_path / "last.pt"
    torch.save(dict(data, train=state), path)
    capsys.readouterr()
    assert cluster_bench(["train", "--resume", str(path), "--timesteps", "300", "--quiet"]) == 2
    err = _err_lines(capsys)
    assert len(err) == 2 and err[0] == f"cluster-bench train: error: {path}: {message}"
