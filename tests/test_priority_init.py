"""train-priority --init: a run that starts from an agent's weights (fine-tuning a shipped agent).
Iteration 0 scores the start against the untrained agent, the start is the best until weights
validate better, and a file meaning another agent (placer, migration rule) is refused."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from baselines.cli import main as cluster_bench
from dual_agent.priority import PriorityAgentPolicy, PriorityAgentSpec, PriorityModel, save_priority_agent
from dual_agent.priority.es import ESConfig, train_priority

# Validation windows of 400 jobs: long enough for the start's order to differ from LAS's.
TINY = dict(scenario="philly-hetero-v1", iterations=2, pairs=1, windows=1, jobs_per_episode=20, eval_every=1,
            eval_seeds=2, eval_jobs_per_episode=400, workers=1, validation="split", test_windows=0)


def _start(tmp_path, placer="fastest", migrate=None):
    model = PriorityModel.zeros()
    model.linear[:] = np.linspace(-1.0, 1.0, model.linear.size)
    path = tmp_path / f"start-{placer}-{migrate}.priority.json"
    save_priority_agent(PriorityAgentPolicy(model, PriorityAgentSpec("philly-hetero-v1", placer, migrate=migrate)), path)
    return path, model.flat()


def _rows(run):
    with open(run / "log.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def test_a_run_starts_from_the_given_weights_and_keeps_them_unless_beaten(tmp_path):
    path, theta0 = _start(tmp_path)
    run = tmp_path / "run"
    result = train_priority(ESConfig(**TINY, init=str(path), out=str(run)), log=lambda _: None)
    rows = _rows(run)
    start = np.array([float(rows[0][f"w_{i}"]) for i in range(theta0.size)])
    np.testing.assert_array_equal(start, theta0)
    start_ratio = float(rows[0]["val_ratio"])
    assert start_ratio != 1.0                       # the start was scored, not the untrained agent
    assert result.best_ratio == min(1.0, *(float(r["val_ratio"]) for r in rows))
    best = json.loads((run / "best.priority.json").read_text())
    if result.best_ratio == start_ratio:            # nothing beat the start: it is the best on disk
        assert best["weights"]["linear"] == pytest.approx(theta0[:len(best["weights"]["linear"])].tolist(), abs=0)
    assert best["training"]["config"]["init"] == str(path)
    plain = train_priority(ESConfig(**TINY, out=str(tmp_path / "plain")), log=lambda _: None)
    assert float(_rows(tmp_path / "plain")[0]["val_ratio"]) == 1.0 and plain.best_ratio <= 1.0


def test_a_start_meaning_another_agent_is_refused(tmp_path):
    other, _ = _start(tmp_path, placer="consolidate")
    with pytest.raises(ValueError, match=r"start-consolidate.*placer 'consolidate' \(the run: 'fastest'\)"):
        train_priority(ESConfig(**TINY, init=str(other), out=str(tmp_path / "a")), log=lambda _: None)
    moving, _ = _start(tmp_path, migrate=1.5)
    with pytest.raises(ValueError, match="migrate 1.5"):
        train_priority(ESConfig(**TINY, init=str(moving), out=str(tmp_path / "b")), log=lambda _: None)
    assert not (tmp_path / "a" / "log.csv").exists()             # refused before any episode or file


def test_the_cli_flag_starts_the_run_from_the_file(tmp_path, capsys):
    path, theta0 = _start(tmp_path)
    run = tmp_path / "cli"
    assert cluster_bench(["train-priority", "--smoke", "--init", str(path), "--out", str(run)]) == 0
    rows = _rows(run)
    np.testing.assert_array_equal([float(rows[0][f"w_{i}"]) for i in range(theta0.size)], theta0)
