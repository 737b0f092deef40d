"""No finished result is lost, no file is written through a link: the lock files, the one writer
every file goes through, output names checked before any episode, the previous complete set kept
until a new one is complete, the episodes that finished kept when a run stops (Ctrl-C, an
episode's error), standard JSON. What they guard is stated in docs/reference.md, "Guarantees"."""
from __future__ import annotations

import errno
import json
import math
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from baselines.cli import main as cluster_bench
from baselines.harness import files
from tests.helpers import StopsAtSeed1

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
ENV = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(
    [str(ROOT), str(TESTS), os.environ.get("PYTHONPATH", "")]))
TOY = ["--scenario", "toy-v0", "--seeds", "0-2", "--backend", "serial", "--quiet"]
HERE = __name__          # how pytest imported this module: the policies below are named through it


class CtrlCAtSeed1(StopsAtSeed1):
    """Ctrl-C during the episode of seed 1 (KeyboardInterrupt, as the serial backend gets it)."""


class FailsAtSeed1(StopsAtSeed1):
    """An episode that raises (as an agent with ``invalid_action: raise`` does)."""

    name = "fifo-fails"
    error = ValueError


class MarkedFifo(StopsAtSeed1):
    """FIFO that leaves a marker file per episode (in ``$RESULTS_KEPT_MARKERS``) when it starts."""

    name = "fifo-marked"

    def reset(self, seed=None):
        super().reset(seed)
        Path(os.environ["RESULTS_KEPT_MARKERS"], f"fifo-{seed}").touch()

    def act(self, observations, infos):
        return self.inner.act(observations, infos)


class FailsAfterOthers(FailsAtSeed1):
    """Raises at seed 1 once the three MarkedFifo episodes have started, and a second more (they
    take milliseconds): the episodes that finished are known."""

    def act(self, observations, infos):
        if self.seed == 1:
            import time

            deadline = time.monotonic() + 60
            while len(list(Path(os.environ["RESULTS_KEPT_MARKERS"]).glob("fifo-*"))) < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(1.0)
        return super().act(observations, infos)


class LongName(StopsAtSeed1):
    """A policy whose label makes a timeline name longer than a file system takes."""

    name = "x" * 236

    def act(self, observations, infos):
        return self.inner.act(observations, infos)


def _snapshot(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.name != files.LOCK_NAME}


def _strict_json(path: Path):
    """Parse as standard JSON does: a bare NaN or Infinity token is an error."""
    def refuse(token):
        raise ValueError(f"{path.name} holds the non-standard token {token}")

    return json.loads(path.read_text(), parse_constant=refuse)


# ------------------------------------------------------------------ 2. the lock never follows a link
@pytest.mark.parametrize("command", ["run", "compare"])
def test_a_linked_lock_file_is_refused_and_its_target_left_as_it_was(tmp_path, command, capsys):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = tmp_path / "out"
    out.mkdir()
    if command == "run":
        argv = ["run", "--policies", "fifo", "--no-plots", "--out", str(out)] + TOY
        lock = out / files.LOCK_NAME
    else:
        argv = ["compare", "fifo", "sjf", "--out", str(out / "c.json")] + TOY
        lock = out / ".c.json.lock"
    lock.symlink_to(victim)
    assert cluster_bench(argv) == 2
    err = capsys.readouterr().err
    assert "symbolic link" in err and str(lock) in err and "Traceback" not in err
    assert victim.read_text() == "precious\n" and lock.is_symlink()


def test_a_hard_linked_or_foreign_lock_file_is_never_truncated(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    os.link(victim, out / files.LOCK_NAME)                    # a hard link: writing would reach the victim
    with pytest.raises(files.OutputError, match="other hard links"):
        files.reserve_folder(out)
    assert victim.read_text() == "precious\n"
    (out / files.LOCK_NAME).unlink()
    (out / files.LOCK_NAME).write_text("not a lock: someone's notes\n")
    with pytest.raises(files.OutputError, match="not a cluster-bench lock file"):
        files.reserve_folder(out)
    assert (out / files.LOCK_NAME).read_text() == "not a lock: someone's notes\n"
    (out / files.LOCK_NAME).write_text("1234567\n")            # an old lock (a longer process id)
    with files.reserve_folder(out):
        assert (out / files.LOCK_NAME).read_text().split() == [str(os.getpid())]


# ------------------------------------------------------------------ 3. one writer, no fixed temporary names
def test_a_priority_agent_is_never_written_through_a_planted_temporary_link(tmp_path):
    from dual_agent.priority.agent import PriorityAgentPolicy, PriorityAgentSpec, PriorityModel, save_priority_agent

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    run = tmp_path / "RUN"
    run.mkdir()
    (run / "best.priority.json.tmp").symlink_to(victim)        # the old fixed temporary name
    agent = PriorityAgentPolicy(PriorityModel.zeros(), PriorityAgentSpec("philly-hetero-v1", "fastest"))
    save_priority_agent(agent, run / "best.priority.json")
    assert victim.read_text() == "precious\n"
    assert json.loads((run / "best.priority.json").read_text())["placer"] == "fastest"
    (run / "last.priority.json").symlink_to(victim)            # the file itself a link: refused, not replaced
    with pytest.raises(files.OutputError, match="symbolic link"):
        save_priority_agent(agent, run / "last.priority.json")
    assert victim.read_text() == "precious\n"


def test_a_log_is_never_appended_through_a_link(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "log.csv").symlink_to(victim)
    with pytest.raises(files.OutputError, match="symbolic link"):
        files.open_append(tmp_path / "log.csv")
    os.link(victim, tmp_path / "hard.csv")
    with pytest.raises(files.OutputError, match="other hard links"):
        files.open_append(tmp_path / "hard.csv")
    assert victim.read_text() == "precious\n"
    with files.open_append(tmp_path / "own.csv") as fh:
        fh.write("a,b\n")
    assert (tmp_path / "own.csv").read_text() == "a,b\n"


def test_train_priority_locks_its_run_folder(tmp_path, capsys):
    run = tmp_path / "RUN"
    with files.reserve_folder(run):                            # another run holds it
        assert cluster_bench(["train-priority", "--smoke", "--iterations", "1", "--out", str(run)]) == 2
    err = capsys.readouterr().err
    assert f"another run (process {os.getpid()}) is writing to {str(run)!r}" in err
    assert not (run / "log.csv").exists()


def test_a_full_disk_in_train_priority_names_the_file_and_leaves_no_temporary(tmp_path, monkeypatch, capsys):
    run = tmp_path / "RUN"
    real_fsync = os.fsync

    def full_at_best(fd):
        if ".best.priority.json." in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(files.os, "fsync", full_at_best)
    assert cluster_bench(["train-priority", "--smoke", "--iterations", "1", "--out", str(run)]) == 2
    err = capsys.readouterr().err
    assert f"cannot write {run / 'best.priority.json'}: No space left on device (is the disk full?)" in err
    assert "Traceback" not in err
    assert not [p.name for p in run.iterdir() if p.name.endswith(".tmp")]


# ------------------------------------------------------------------ 5. every output name checked first
def test_a_folder_where_a_timeline_goes_fails_before_any_episode(tmp_path, capsys):
    out = tmp_path / "out"
    (out / "timeline_sjf.png").mkdir(parents=True)
    assert cluster_bench(["run", "--policies", "fifo,sjf", "--out", str(out)] + TOY) == 2
    captured = capsys.readouterr()
    assert "policies x" not in captured.out                    # no episode ran
    assert str(out / "timeline_sjf.png") in captured.err and "not a regular file" in captured.err


def test_a_timeline_name_too_long_fails_before_any_episode(tmp_path, capsys):
    out = tmp_path / "out"
    assert cluster_bench(["run", "--policies", f"fifo,{HERE}:LongName", "--out", str(out)] + TOY) == 2
    captured = capsys.readouterr()
    assert "policies x" not in captured.out
    assert "timeline_xxxx" in captured.err and "too long" in captured.err


def test_a_plot_that_fails_after_the_episodes_keeps_the_results(tmp_path, monkeypatch, capsys):
    from baselines.harness import plots

    def broken(*args, **kwargs):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(plots, "plot_utilization", broken)
    out = tmp_path / "out"
    assert cluster_bench(["run", "--policies", "fifo,sjf", "--reference", "fifo", "--out", str(out)] + TOY) == 2
    err = capsys.readouterr().err
    assert "a plot could not be written" in err and "Input/output error" in err
    data = _strict_json(out / "results.json")
    assert data["meta"]["complete"] is True and len(data["episodes"]) == 6
    assert len((out / "results.csv").read_text().splitlines()) == 7 and (out / "summary.csv").is_file()


# ------------------------------------------------------------------ 6. the previous complete set stays
def test_an_interrupted_rerun_keeps_the_previous_complete_results(tmp_path, capsys):
    out = tmp_path / "out"
    assert cluster_bench(["run", "--policies", "fifo,sjf", "--out", str(out)] + TOY) == 0
    before = _snapshot(out)
    assert {"results.json", "summary.csv", "jct_cdf.png", "timeline_fifo.png"} <= set(before)
    assert cluster_bench(["run", "--policies", f"sjf,{HERE}:CtrlCAtSeed1", "--out", str(out)] + TOY) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"to {out / 'results.partial.json'}" in err
    after = _snapshot(out)
    assert {k: after[k] for k in before} == before             # every file of the complete run, unchanged
    partial = _strict_json(out / "results.partial.json")
    assert partial["meta"]["complete"] is False
    assert sorted((e["policy"], e["seed"]) for e in partial["episodes"]) == [
        ("fifo-stops", 0), ("sjf", 0), ("sjf", 1), ("sjf", 2)]
    # A complete run replaces the whole set: no plot, timeline or partial file of the runs before.
    assert cluster_bench(["run", "--policies", "fifo", "--no-plots", "--out", str(out)] + TOY) == 0
    assert sorted(_snapshot(out)) == ["results.csv", "results.json", "summary.csv"]


# ------------------------------------------------------------------ 7. an episode's error keeps the others
def test_an_episode_that_raises_on_the_process_backend_keeps_every_finished_episode(tmp_path):
    out, markers = tmp_path / "out", tmp_path / "markers"
    markers.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "baselines", "run", "--scenario", "toy-v0", "--policies",
         "test_results_kept:MarkedFifo,test_results_kept:FailsAfterOthers", "--seeds", "0-2", "--backend", "process",
         "--workers", "2", "--no-plots", "--quiet", "--out", str(out)],
        env=dict(ENV, RESULTS_KEPT_MARKERS=str(markers)), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "the episode of fifo-fails on toy-v0/test seed 1 failed: ValueError: stopped at seed 1" in proc.stderr
    data = _strict_json(out / "results.partial.json")
    done = {(e["policy"], e["seed"]) for e in data["episodes"]}
    assert {("fifo-marked", s) for s in range(3)} | {("fifo-fails", 0)} <= done     # every one that finished
    assert ("fifo-fails", 1) not in done and data["meta"]["complete"] is False
    assert not (out / "results.json").exists()


# ------------------------------------------------------------------ 8. Ctrl-C in sweep and compare
def test_ctrl_c_during_sweep_writes_what_finished_and_exits_130(tmp_path, capsys):
    out = tmp_path / "sweep"
    argv = ["sweep", "--scenario", "toy-v0", "--loads", "0.5,0.9", "--policies", f"sjf,{HERE}:CtrlCAtSeed1",
            "--reference", "sjf", "--seeds", "0-2", "--backend", "serial", "--quiet", "--no-plots", "--out", str(out)]
    assert cluster_bench(argv) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("cluster-bench sweep: interrupted")
    data = _strict_json(out / "load_sweep.partial.json")
    assert data["meta"]["complete"] is False
    # tasks run load by load, policy by policy: at load 0.5 sjf's three seeds and seed 0 of the other
    assert sorted((e["policy"], e["load"], e["seed"]) for e in data["episodes"]) == [
        ("fifo-stops", 0.5, 0), ("sjf", 0.5, 0), ("sjf", 0.5, 1), ("sjf", 0.5, 2)]
    assert not (out / "load_sweep.json").exists()


def test_ctrl_c_during_compare_writes_what_finished_and_exits_130(tmp_path, capsys):
    out = tmp_path / "c.json"
    argv = ["compare", "sjf", f"{HERE}:CtrlCAtSeed1", "--out", str(out)] + TOY
    assert cluster_bench(argv) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("cluster-bench compare: interrupted")
    data = _strict_json(tmp_path / "c.partial.json")
    assert data["meta"]["complete"] is False and len(data["episodes"]) == 4
    assert not out.exists()
    assert cluster_bench(["compare", "sjf", f"{HERE}:CtrlCAtSeed1"] + TOY) == 130      # no --out: one line
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("cluster-bench compare: interrupted") and "give --out" in err[-1]


# ------------------------------------------------------------------ 14. standard JSON, quiet start, messages
def test_result_files_are_standard_json_and_read_back(tmp_path):
    from baselines.harness.report import summarize
    from baselines.harness.stats import paired_summary

    out = tmp_path / "out"
    # max_time=10: no job finishes, so avg_jct and the ratios are undefined (NaN in memory)
    assert cluster_bench(["run", "--policies", "fifo,sjf", "--no-plots", "--env", "max_time=10",
                          "--out", str(out)] + TOY) == 0
    data = _strict_json(out / "results.json")
    assert data["episodes"][0]["avg_jct"] is None
    rows = summarize(data["episodes"])                        # our readers take null as NaN
    assert math.isnan(next(r for r in rows if r["policy"] == "fifo")["avg_jct"])
    untruncated = [dict(e, truncated=False) for e in data["episodes"]]   # so that the ratio reads the nulls
    assert paired_summary(untruncated, "sjf", "fifo", "avg_jct").undefined == 3
    assert cluster_bench(["compare", "sjf", "fifo", "--env", "max_time=10", "--out", str(tmp_path / "c.json")]
                         + TOY) == 0
    _strict_json(tmp_path / "c.json")


def test_a_scores_file_with_null_is_checked_as_nan(tmp_path):
    from baselines.harness.scores import _compare

    data = {"scores": {"toy-v0": {"fifo": {"0": {"avg_jct": None, "steps": 3.0}}}}}
    got = {"toy-v0": {"fifo": {"0": {"avg_jct": math.nan, "steps": 3.0}}}}
    assert _compare(data, ["toy-v0"], [0], got) == ([], 2)


def test_ctrl_c_while_the_command_imports_is_one_line_and_130(tmp_path):
    """SIGINT at the first import of numpy, as a Ctrl-C in the first second of ``cluster-bench``
    lands (its console script is the first line of the program below)."""
    code = """
        import builtins, os, signal, sys
        signal.signal(signal.SIGINT, signal.default_int_handler)   # a terminal's foreground job
        sys.argv[0] = os.path.join(os.getcwd(), "cluster-bench")   # as the console script starts
        real = builtins.__import__
        def ctrl_c_at_numpy(name, *args, **kwargs):
            if name == "numpy" and "numpy" not in sys.modules:
                os.kill(os.getpid(), signal.SIGINT)
            return real(name, *args, **kwargs)
        builtins.__import__ = ctrl_c_at_numpy
        from baselines.cli import main
        sys.exit(main(["scenarios"]))
    """
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=ENV, cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.strip() == "cluster-bench: interrupted while starting"


def test_a_library_import_keeps_ctrl_c_as_keyboard_interrupt():
    code = ("import signal; signal.signal(signal.SIGINT, signal.default_int_handler); import baselines; "
            "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, signal.getsignal(signal.SIGINT)")
    subprocess.run([sys.executable, "-c", code], env=ENV, cwd=ROOT, check=True, timeout=120)


def test_a_mapped_column_blames_the_field_it_was_mapped_to(tmp_path, capsys):
    # num_gpus read from a text column that no other field reads (two fields on one column are refused as such)
    csv = tmp_path / "cluster.csv"
    csv.write_text("machine,gpu_type,gpus,kind,count\nk80-node,K80,4,big,2\nv100-node,V100,8,small,1\n")
    assert cluster_bench(["run", "--scenario", "toy-v0", "--cluster-csv", str(csv),
                          "--cluster-columns", "num_gpus=kind", "--policies", "fifo", "--seeds", "0",
                          "--no-plots", "--quiet", "--out", str(tmp_path / "out")]) == 2
    line = capsys.readouterr().err.splitlines()[0]
    assert "field 'num_gpus'" in line and "column 'kind'" in line and "field 'kind'" not in line


def test_a_sweep_plot_that_fails_after_the_episodes_keeps_the_results(tmp_path, monkeypatch, capsys):
    from baselines.harness import paired_plots

    def broken(*args, **kwargs):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(paired_plots, "plot_load_sweep", broken)
    out = tmp_path / "sweep"
    assert cluster_bench(["sweep", "--scenario", "toy-v0", "--loads", "0.5", "--policies", "fifo,sjf", "--reference", "fifo",
                          "--seeds", "0-1",
                          "--backend", "serial", "--quiet", "--out", str(out)]) == 2
    assert "a plot could not be written" in capsys.readouterr().err
    data = _strict_json(out / "load_sweep.json")
    assert data["meta"]["complete"] is True and len(data["episodes"]) == 4
    assert (out / "load_sweep.csv").is_file() and not (out / "load_sweep.png").exists()
