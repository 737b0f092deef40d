"""The result tables and summary.csv report preemptions per finished job, a column derived from the
``preemptions`` and ``jobs_finished`` metrics (the environment's metric keys are unchanged)."""
from __future__ import annotations

import csv
import math

import pytest

from baselines.cli import main as cluster_bench
from baselines.harness.report import format_table, metric_value, summarize, write_summary_csv
from cluster_env.core.metrics import METRIC_KEYS


def record(policy: str, seed: int, preemptions: int, finished: int) -> dict:
    metrics = {k: 1.0 for k in METRIC_KEYS}
    metrics.update(preemptions=preemptions, jobs_finished=finished, avg_jct=100.0 + seed)
    return {"policy": policy, "scenario": "s-v0", "split": "test", "seed": seed, "env": "", "truncated": False,
            "jobs_unfinished": 0, "pending_window": 32, **metrics}


RECORDS = [record("fifo", 0, 0, 100), record("fifo", 1, 0, 100),
           record("las", 0, 150, 100), record("las", 1, 250, 50)]       # 1.5 and 5.0 per job


def test_preemptions_per_finished_job_in_the_summary_and_the_table(tmp_path):
    assert "preemptions_per_job" not in METRIC_KEYS
    rows = {r["policy"]: r for r in summarize(RECORDS)}
    assert rows["las"]["preemptions_per_job"] == pytest.approx(3.25)          # mean of 1.5 and 5.0
    assert rows["las"]["preemptions_per_job_std"] == pytest.approx(math.sqrt(2 * 1.75 ** 2))
    assert rows["las"]["preemptions"] == pytest.approx(200.0)                # the count stays
    assert rows["fifo"]["preemptions_per_job"] == 0.0
    table = format_table(RECORDS).splitlines()
    header = next(line for line in table if line.startswith("scenario"))
    assert header.split()[-1] == "preemptions_per_job"
    las = next(line for line in table if line.split()[1] == "las")
    assert las.endswith("3.250 ± 2.475")
    path = write_summary_csv(RECORDS, tmp_path / "summary.csv")
    with open(path, newline="") as f:
        by_policy = {r["policy"]: r for r in csv.DictReader(f)}
    assert float(by_policy["las"]["preemptions_per_job"]) == pytest.approx(3.25)


def test_no_finished_job_gives_nan_not_a_division_error():
    assert math.isnan(metric_value(record("las", 0, 3, 0), "preemptions_per_job"))
    assert metric_value(record("las", 0, 3, 4), "preemptions_per_job") == 0.75


def test_cluster_bench_run_writes_the_column(tmp_path, capsys):
    out = tmp_path / "res"
    assert cluster_bench(["run", "--scenario", "philly-v1", "--policies", "fifo,las", "--seeds", "0",
                          "--env", "jobs_per_episode=200", "--out", str(out), "--no-plots", "--quiet"]) == 0
    assert "preemptions_per_job" in capsys.readouterr().out
    with open(out / "summary.csv", newline="") as f:
        rows = {r["policy"]: r for r in csv.DictReader(f)}
    las = rows["las"]
    assert float(las["preemptions"]) > 0
    assert float(las["preemptions_per_job"]) == pytest.approx(float(las["preemptions"]) / float(las["jobs_finished"]))
