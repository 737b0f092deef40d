"""The RL researcher's examples: CleanRL-style PPO on the parallel env (tiny budget, one thread)."""
from __future__ import annotations

import pytest

from tests.helpers import run_example


def test_cleanrl_ppo_parallel_tiny_budget(tmp_path):
    pytest.importorskip("torch")
    text = run_example("08_cleanrl_ppo_parallel.py", "--total-timesteps", "256", "--num-envs", "2",
                       "--num-steps", "64", "--jobs-per-episode", "20", "--eval-seeds", "2", "--eval-jobs", "20",
                       "--hidden", "16", "--out", str(tmp_path), timeout=180)
    assert "iteration 2/2" in text
    # saved, then scored by the harness next to the baselines on the default scenario
    assert (tmp_path / "agent.zip").is_file() and (tmp_path / "agent.agent.json").is_file()
    for name in ("cleanrl-ppo(agent)", "fifo", "random", "las-migrate", "vs las-migrate, the scenario's yardstick",
                 "philly-v1"):
        assert name in text
    assert "paired with las-migrate" in text and "no verdict: 2 distinct windows" in text
    assert "A real run" in text and "minutes" in text
    assert "cluster-bench run --trust-model --scenario philly-v1 --policies " in text and str(tmp_path / "agent.zip") in text
