"""benchmarks/es_learning_curve.py: the logged weights of an ES run, scored on fixed windows."""
from __future__ import annotations

import json

import numpy as np

from baselines.engine import run_weighted_las_episode
from dual_agent.priority.es import ESConfig, train_priority
from tests.helpers import load_script


def test_the_curve_scores_each_logged_iteration_against_the_untrained_agent(tmp_path):
    run = tmp_path / "run"
    train_priority(ESConfig(scenario="philly-hetero-v2", iterations=3, pairs=1, windows=1, jobs_per_episode=60,
                            eval_every=2, eval_seeds=1, eval_jobs_per_episode=20, workers=1, validation="split",
                            test_windows=0, migrate=1.5, sigma=1.0, lr=0.5, out=str(run)), log=lambda _: None)
    out = tmp_path / "curve.json"
    load_script("benchmarks/es_learning_curve.py").main([str(run), "--every", "1", "--windows", "3", "--out", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [r["iteration"] for r in rows] == [0, 1, 2, 3]
    assert rows[0]["ratio"] == 1.0 and rows[0]["val_ratio"] == 1.0
    assert rows[1]["val_ratio"] is None and rows[2]["val_ratio"] is not None
    # The last row is the last weights against las-migrate on test windows 0-2, recomputed here.
    last = json.loads((run / "last.priority.json").read_text())["weights"]
    ratios = []
    for seed in range(3):
        def jct(w, pw):
            return run_weighted_las_episode(w, "fastest", "philly-hetero-v2", "test", seed, placer_weights=pw,
                                            migrate=1.5).record["avg_jct"]
        ratios.append(jct(np.array(last["linear"]), np.array(last["placer"])) / jct(np.zeros(9), np.zeros(5)))
    assert abs(rows[-1]["ratio"] - float(np.exp(np.mean(np.log(ratios))))) < 1e-12
    assert rows[-1]["wins"] == sum(r < 1 for r in ratios)


def test_cpu_hours_follow_each_iterations_workers_and_old_logs_take_the_last_setting():
    curve = load_script("benchmarks/es_learning_curve.py")
    # 100 s on one worker, then (resumed) 50 s more on two; an old log's rows have no workers.
    rows = [{"wall_s": "0", "workers": "1"}, {"wall_s": "100", "workers": "1"}, {"wall_s": "150", "workers": "2"}]
    assert curve.cpu_hours(rows, default_workers=7) == [0.0, 100 / 3600, 200 / 3600]
    old = [{"wall_s": "0", "workers": ""}, {"wall_s": "100"}]
    assert curve.cpu_hours(old, default_workers=2) == [0.0, 200 / 3600]


def test_the_training_log_records_each_iterations_workers(tmp_path):
    import csv

    run = tmp_path / "run"
    train_priority(ESConfig(scenario="philly-hetero-v2", iterations=2, pairs=1, windows=1, jobs_per_episode=30,
                            eval_every=2, eval_seeds=1, eval_jobs_per_episode=20, workers=1, validation="split",
                            test_windows=0, migrate=1.5, out=str(run)), log=lambda _: None)
    with open(run / "log.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["workers"] for r in rows] == ["1", "1", "1"]
