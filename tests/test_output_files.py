"""Output files: a second Ctrl-C, a full disk, a link or a
device as --out, two runs on one folder, and out-of-range arguments never lose or mix results or
end in a traceback. What they guard is stated in docs/reference.md, "Guarantees"."""
from __future__ import annotations

import errno
import json
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
RUN = ["run", "--scenario", "toy-v0", "--policies", "fifo,sjf", "--seeds", "0-1", "--backend", "serial",
       "--no-plots", "--quiet"]


class InterruptsAtSeed1(StopsAtSeed1):
    """FIFO whose episode of seed 1 is cut by Ctrl-C (KeyboardInterrupt, as the serial backend gets it)."""

    name = "fifo"


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and ": error: " in err[0] and err[1].startswith("hint: "), err
    return err[0]


# ------------------------------------------------------------------ 8. a second Ctrl-C while writing
def test_a_second_ctrl_c_while_writing_partial_results_waits_for_them(tmp_path):
    """The first Ctrl-C stops the run (a policy raises KeyboardInterrupt at seed 1); the second
    one arrives while results.json is being built (inside the bootstrap): the files must still be
    written in full, one line on stderr, exit 130, no traceback."""
    out = tmp_path / "out"
    code = f"""
        import os, signal, sys
        signal.signal(signal.SIGINT, signal.default_int_handler)   # a terminal's foreground job
        from baselines.harness import report
        real, sent = report.summarize, []
        def second_ctrl_c(*args, **kwargs):
            if not sent:
                sent.append(1)
                os.kill(os.getpid(), signal.SIGINT)
            return real(*args, **kwargs)
        report.summarize = second_ctrl_c
        from baselines.cli import main
        sys.exit(main(["run", "--scenario", "toy-v0", "--policies", "test_output_files:InterruptsAtSeed1",
                       "--seeds", "0-2", "--backend", "serial", "--no-plots", "--quiet", "--out", {str(out)!r}]))
    """
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=300, env=ENV, cwd=ROOT)
    assert proc.returncode == 130, proc.stderr
    assert "Traceback" not in proc.stderr and "writing the episodes that finished first" in proc.stderr
    data = json.loads((out / "results.partial.json").read_text())
    assert data["meta"]["complete"] is False and [e["seed"] for e in data["episodes"]] == [0]
    assert len((out / "results.partial.csv").read_text().splitlines()) == 2          # header and seed 0


def test_written_together_defers_sigint_and_restores_the_handler():
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with files.sigint_deferred() as deferred:
            os.kill(os.getpid(), signal.SIGINT)
        assert deferred == [signal.SIGINT]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)


# ------------------------------------------------------------------ 9. a full disk: found first, or all-or-nothing
def test_too_little_free_space_is_found_before_any_episode(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(files, "free_bytes", lambda folder: 3000)
    assert cluster_bench(RUN + ["--out", str(tmp_path / "out")]) == 2
    line = _one_line_error(capsys)
    assert "only 3 KiB free" in line and str(tmp_path / "out") in line
    assert "policies x" not in capsys.readouterr().out and not (tmp_path / "out" / "results.csv").exists()


def test_a_disk_that_fills_up_while_writing_keeps_every_old_file(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    assert cluster_bench(RUN + ["--out", str(out)]) == 0
    old = {p.name: p.read_bytes() for p in out.iterdir()}
    real_fsync = os.fsync

    def full_at_results_json(fd):          # ext4 reports ENOSPC of delayed allocation at fsync
        if ".results.json." in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(files.os, "fsync", full_at_results_json)
    assert cluster_bench(RUN + ["--out", str(out)]) == 2
    line = _one_line_error(capsys)
    assert f"cannot write {out / 'results.json'}" in line and "is the disk full?" in line
    assert {p.name: p.read_bytes() for p in out.iterdir()} == old           # all old, no temporary file


@pytest.mark.parametrize("command", [["compare", "fifo", "sjf", "--scenario", "toy-v0", "--seeds", "0",
                                      "--backend", "serial", "--quiet", "--out"],
                                     ["sweep", "--scenario", "toy-v0", "--loads", "0.5", "--policies", "fifo",
                                      "--seeds", "0", "--backend", "serial", "--quiet", "--no-plots", "--out"]])
def test_compare_and_sweep_check_their_output_before_any_episode(tmp_path, command, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    target = blocker / "sub" / ("c.json" if command[0] == "compare" else "sweep")
    assert cluster_bench(command + [str(target)]) == 2
    line = _one_line_error(capsys)
    assert "cannot write results to" in line and str(blocker / "sub") in line
    assert "vs" not in capsys.readouterr().out                         # no episode ran, nothing printed


# ------------------------------------------------------------------ 11. links and devices are never replaced
def test_compare_refuses_a_symlink_and_leaves_it(tmp_path, capsys):
    target = tmp_path / "real.json"
    target.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert cluster_bench(["compare", "fifo", "sjf", "--scenario", "toy-v0", "--seeds", "0", "--backend", "serial",
                          "--quiet", "--out", str(link)]) == 2
    assert "is a symbolic link" in _one_line_error(capsys)
    assert link.is_symlink() and target.read_text() == "{}"


def test_a_device_or_pipe_is_refused_as_an_output_file(tmp_path, capsys):
    pipe = tmp_path / "pipe.json"          # a FIFO stands in for /dev/full: never a regular file
    os.mkfifo(pipe)
    assert cluster_bench(["compare", "fifo", "sjf", "--scenario", "toy-v0", "--seeds", "0", "--backend", "serial",
                          "--quiet", "--out", str(pipe)]) == 2
    assert "is not a regular file" in _one_line_error(capsys)
    assert not pipe.is_file() and pipe.exists()


def test_run_refuses_a_linked_folder_or_a_linked_result_file(tmp_path, capsys):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "linked").symlink_to(real)
    assert cluster_bench(RUN + ["--out", str(tmp_path / "linked")]) == 2
    assert "is a symbolic link" in _one_line_error(capsys)
    (real / "results.csv").symlink_to(tmp_path / "elsewhere.csv")
    assert cluster_bench(RUN + ["--out", str(real)]) == 2
    assert "results.csv is a symbolic link" in _one_line_error(capsys)
    assert (real / "results.csv").is_symlink() and not (tmp_path / "elsewhere.csv").exists()


# ------------------------------------------------------------------ 12. one run at a time per output folder
def test_a_second_run_on_a_locked_folder_fails_fast_naming_it(tmp_path, capsys):
    out = tmp_path / "out"
    with files.reserve_folder(out):            # another run holds the folder (flock is per open file)
        assert cluster_bench(RUN + ["--out", str(out)]) == 2
        line = _one_line_error(capsys)
        assert f"is writing to {str(out)!r} right now" in line and str(os.getpid()) in line
        assert not (out / "results.csv").exists()
    assert cluster_bench(RUN + ["--out", str(out)]) == 0                 # released: the next run goes


# ------------------------------------------------------------------ 13, 16. arguments out of range, hints
@pytest.mark.parametrize("argv, words", [
    (["replay", "--fps", "0"], "argument --fps: must be between 0.01 and 100"),
    (["replay", "--fps", "-5"], "argument --fps: must be between"),
    (["replay", "--fps", "nan"], "argument --fps: must be between"),
    (["replay", "--max-frames", "0"], "argument --max-frames: must be between 1 and"),
    (["run", "--seeds", "0-99999999999"], "lists 100,000,000,000 seeds; at most 100,000"),
])
def test_out_of_range_arguments_are_one_line_errors(argv, words, capsys):
    assert cluster_bench(argv) == 2
    assert words in _one_line_error(capsys)


def test_a_deeply_nested_priority_file_is_a_one_line_error(tmp_path, capsys):
    path = tmp_path / "deep.priority.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    assert cluster_bench(["run", "--scenario", "toy-v0", "--policies", f"fifo,{path}", "--seeds", "0",
                          "--out", str(tmp_path / "out"), "--quiet"]) == 2
    assert str(path) in _one_line_error(capsys)


def test_replay_into_an_unwritable_place_hints_at_gif(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    assert cluster_bench(["replay", "--gif", str(blocker / "r.gif")]) == 2
    err = capsys.readouterr().err
    assert "--gif" in err.splitlines()[1] and "--out" not in err


def test_replay_refuses_a_linked_gif(tmp_path, capsys):
    (tmp_path / "r.gif").symlink_to(tmp_path / "elsewhere.gif")
    assert cluster_bench(["replay", "--gif", str(tmp_path / "r.gif")]) == 2
    assert "--gif" in _one_line_error(capsys) and (tmp_path / "r.gif").is_symlink()


def test_a_sub_millisecond_duration_prints_a_plain_number(tmp_path):
    import cluster_env
    from cluster_env.errors import DataError

    path = tmp_path / "tiny.csv"
    path.write_text("submit,duration,gpus\n0,100,1\n5,0.0005,1\n")
    with pytest.raises(DataError, match=r"duration 0\.0005 s is below") as err:
        cluster_env.parallel_env("toy-v0", workload_csv=str(path))
    assert "np.float64" not in str(err.value)
