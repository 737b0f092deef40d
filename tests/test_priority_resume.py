"""train-priority's files: best.priority.json whenever validation improves, the
checkpoint before the log row, Ctrl-C saved with exit 130, and --resume giving the weights of a
run never stopped. Tiny runs: 20-job windows, one direction, one validation window."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from baselines.cli import main as cluster_bench
from dual_agent.priority import es
from dual_agent.priority.es import ESConfig, train_priority

TINY = dict(scenario="philly-hetero-v1", iterations=3, pairs=1, windows=1, jobs_per_episode=20, eval_every=1,
            eval_seeds=1, eval_jobs_per_episode=20, workers=1, validation="split", test_windows=0)
# --smoke is TINY with two iterations; three make the interruption fall in the middle.
CLI = ["train-priority", "--smoke", "--iterations", "3"]


def _fail_at_call(monkeypatch, n: int, exc: BaseException) -> None:
    """Episode batch ``n`` (1: iteration 0's validation, then per iteration training, validation)
    raises ``exc``: a crash (kill -9 loses the same) or Ctrl-C in the middle of an iteration."""
    real, calls = es._Runner.costs, []

    def costs(self, tasks):
        calls.append(1)
        if len(calls) == n:
            raise exc
        return real(self, tasks)

    monkeypatch.setattr(es._Runner, "costs", costs)


def _log(run: Path) -> list[dict]:
    with open(run / "log.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def _weights(path: Path) -> dict:
    return json.loads(path.read_text())["weights"]


def test_best_is_on_disk_after_a_crash_and_is_the_best_validated_so_far(tmp_path, monkeypatch):
    _fail_at_call(monkeypatch, 4, RuntimeError("the machine went down"))      # iteration 2's training
    with pytest.raises(RuntimeError):
        train_priority(ESConfig(**TINY, out=str(tmp_path)), log=lambda _: None)
    rows = _log(tmp_path)
    assert [r["iteration"] for r in rows] == ["0", "1"]
    best_row = min(rows, key=lambda r: (float(r["val_ratio"]), int(r["iteration"])))
    best = _weights(tmp_path / "best.priority.json")["linear"]
    n = len(best)
    assert best == pytest.approx([float(best_row[f"w_{i}"]) for i in range(n)], rel=0, abs=0)
    last = json.loads((tmp_path / "last.priority.json").read_text())
    assert last["training"]["iterations"] == 1


def test_the_checkpoint_is_written_before_the_log_row(tmp_path, monkeypatch):
    real = es.save_priority_agent

    def full_disk_at_iteration_2(policy, path):
        if Path(path).name == "last.priority.json" and policy.spec.training["iterations"] == 2:
            raise OSError(28, "No space left on device")
        return real(policy, path)

    monkeypatch.setattr(es, "save_priority_agent", full_disk_at_iteration_2)
    with pytest.raises(OSError):
        train_priority(ESConfig(**TINY, out=str(tmp_path)), log=lambda _: None)
    assert [r["iteration"] for r in _log(tmp_path)] == ["0", "1"]          # no row without its checkpoint


def test_ctrl_c_saves_exits_130_and_resume_gives_the_uninterrupted_weights(tmp_path, monkeypatch, capsys):
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    assert cluster_bench(CLI + ["--out", str(straight)]) == 0
    _fail_at_call(monkeypatch, 5, KeyboardInterrupt())                       # iteration 2's validation
    assert cluster_bench(CLI + ["--out", str(stopped)]) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and "interrupted; resume with" in err
    assert (stopped / "best.priority.json").is_file()
    assert [r["iteration"] for r in _log(stopped)] == ["0", "1"]
    monkeypatch.undo()
    assert cluster_bench(["train-priority", "--resume", str(stopped / "last.priority.json")]) == 0
    for name in ("last.priority.json", "best.priority.json"):
        assert _weights(stopped / name) == _weights(straight / name), name
    drop = ("wall_s",)
    assert ([{k: v for k, v in r.items() if k not in drop} for r in _log(stopped)]
            == [{k: v for k, v in r.items() if k not in drop} for r in _log(straight)])


def test_resume_refuses_other_settings(tmp_path, capsys):
    assert cluster_bench(["train-priority", "--smoke", "--iterations", "1", "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    assert cluster_bench(["train-priority", "--resume", str(tmp_path / "last.priority.json"), "--sigma", "0.5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "--sigma cannot change" in err[0]
    # A budget that adds no iteration is refused, not "resumed" into an exit 0 that trained nothing.
    for more in ([], ["--iterations", "1"]):
        assert cluster_bench(["train-priority", "--resume", str(tmp_path / "last.priority.json"), *more]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 2 and "has already run 1 iterations" in err[0] and "--iterations 11" in err[0]


def _no_wall(row: dict) -> dict:
    """A log row without what may differ between backends: wall time and the worker count."""
    return {k: v for k, v in row.items() if k not in ("wall_s", "workers")}


def test_ray_backend_trains_the_same_weights_as_one_process(tmp_path):
    # ESConfig(backend="ray"): the episodes run as Ray tasks (a local instance of 2 CPUs here, a
    # cluster with ray_address); each episode is a pure function of its task, so the same seed
    # gives the same weights bit for bit.
    pytest.importorskip("ray")      # the test extra installs it; a base install has no Ray
    local = train_priority(ESConfig(**TINY, out=str(tmp_path / "one")), log=lambda _: None)
    remote = train_priority(ESConfig(**{**TINY, "workers": 2}, backend="ray", out=str(tmp_path / "ray")),
                            log=lambda _: None)
    assert local.iterations == remote.iterations == TINY["iterations"]
    assert _weights(tmp_path / "ray" / "best.priority.json") == _weights(tmp_path / "one" / "best.priority.json")
    assert [_no_wall(r) for r in _log(tmp_path / "ray")] == [_no_wall(r) for r in _log(tmp_path / "one")]
    assert {r["workers"] for r in _log(tmp_path / "ray")} == {"2"} and {r["workers"] for r in _log(tmp_path / "one")} == {"1"}
    with pytest.raises(ValueError, match="backend must be one of"):
        ESConfig(**TINY, backend="dask")
