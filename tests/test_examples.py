"""The runnable examples under examples/ work end to end (tiny budgets, one thread, no network)."""
from __future__ import annotations

import json
import re

import pytest

from tests.helpers import run_example


def test_quickstart_random_agent_prints_the_metrics():
    text = run_example("01_quickstart_random_agent.py", "--scenario", "philly-v0", "--split", "test",
                       "--jobs-per-episode", "60", "--seed", "3")
    assert "random masked agent" in text
    for key in ("avg_jct", "p95_jct", "gpu_utilization", "jobs_finished"):
        assert key in text
    assert "60" in text.split("jobs_finished")[1].splitlines()[0]


def test_train_maskable_ppo_tiny_budget(tmp_path):
    pytest.importorskip("sb3_contrib")
    text = run_example("03_train_maskable_ppo.py", "--timesteps", "256", "--n-envs", "2", "--n-steps", "64",
                       "--batch-size", "64", "--n-epochs", "1", "--hidden", "16", "--jobs-per-episode", "30",
                       "--eval-seeds", "2", "--eval-jobs", "30", "--out", str(tmp_path))
    assert "mean" in text and "ppo" in text and "fifo" in text
    assert "the best reference here" in text and "A real run is 400,000 steps: about" in text
    # Progress says something before the first training episode ends (30-job episodes of 2 envs
    # take more than the first tenth of 256 steps): where the running episodes are.
    progress = [line for line in text.splitlines() if " steps " in line and line.strip()[0].isdigit()]
    assert progress and "n/a" not in text
    assert "no training episode finished yet; the 2 running episodes: " in progress[0]
    assert re.search(r"\d+% of their jobs arrived, \d+% finished, return so far -?\d", progress[0]), progress[0]
    # One column per reference: the scenario's yardstick (baselines.yardstick), fifo and random.
    from baselines.yardstick import yardstick
    from cluster_env import DEFAULT_SCENARIO

    yard = yardstick(DEFAULT_SCENARIO)
    header = next(line for line in text.splitlines() if line.split()[:1] == ["seed"])
    assert header.split() == ["seed", "ppo", yard, "(yardstick)", "fifo", "random"], header
    assert f"that of {yard}, the scenario's yardstick" in text
    result = json.loads((tmp_path / "results.json").read_text())
    assert result["timesteps"] >= 256 and result["seeds"] == [0, 1]
    assert result["references"] == [yard, "fifo", "random"] and result["yardstick"] == yard
    for name in ("ppo", yard, "random", "fifo"):
        assert len(result[name]["avg_jct_per_seed"]) == 2 and result[name]["mean_avg_jct"] > 0
    assert (tmp_path / "model.zip").exists() and (tmp_path / "model.agent.json").exists()
    # The saved model (the example's own policy class) scores through the line the example prints.
    from baselines.cli import main

    assert f"--policies fifo,sjf,tiresias,las,{tmp_path / 'model.zip'}" in text and "run --trust-model" in text
    out = tmp_path / "scored"
    # Its rows policy is a class of the script, pickled in the zip: refused without --trust-model.
    assert main(["run", "--policies", f"fifo,{tmp_path / 'model.zip'}", "--out", str(out), "--quiet"]) == 2
    assert not (out / "results.json").exists()
    assert main(["run", "--trust-model", "--policies", f"fifo,{tmp_path / 'model.zip'}", "--seeds", "0-1", "--env",
                 "jobs_per_episode=30", "--no-plots", "--quiet", "--backend", "serial", "--out", str(out)]) == 0
    # (las-migrate, philly-v1's yardstick, is added as the reference of the paired ratios)
    episodes = [r for r in json.loads((out / "results.json").read_text())["episodes"]
                if r["policy"] not in ("fifo", "las-migrate")]
    assert [r["jobs_finished"] for r in episodes] == [30, 30] and episodes[0]["policy"] == "MaskablePPO(model)"


def test_train_dual_agent_tiny_budget(tmp_path):
    text = run_example("04_train_dual_agent.py", "--timesteps", "300", "--steps-per-worker", "80", "--jobs-per-episode",
                       "20", "--imitate-iterations", "1", "--hidden", "16", "--eval-seeds", "2", "--eval-jobs", "30",
                       "--out", str(tmp_path / "run"), "--quiet", timeout=300)
    assert "dual (this run)" in text and "fifo+fastest" in text
    assert "mean avg JCT" in text
    # Paired with philly-v0's yardstick (las, added), and no verdict on two windows.
    assert "avg_jct vs las" in text and "dual (this run): " in text and "x las [" in text
    assert "no verdict: 2 distinct windows" in text and "A real run" in text
    assert (tmp_path / "run" / "last.pt").is_file()
    log = (tmp_path / "run" / "log.csv").read_text().splitlines()
    assert len(log) >= 3       # header + the imitation iteration + at least one MAPPO iteration
