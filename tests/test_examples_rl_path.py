"""The RL researcher's examples: CleanRL-style PPO on the parallel env (tiny budget, one thread)."""
from __future__ import annotations

import pytest

from tests.helpers import run_example


def test_cleanrl_ppo_parallel_tiny_budget():
    pytest.importorskip("torch")
    text = run_example("08_cleanrl_ppo_parallel.py", "--total-timesteps", "256", "--num-envs", "2",
                       "--num-steps", "64", "--jobs-per-episode", "20", "--eval-seeds", "2", "--eval-jobs", "20",
                       "--hidden", "16", timeout=180)
    assert "iteration 2/2" in text
    for name in ("ppo (this run)", "fifo+first-fit", "random"):
        assert name in text
    assert "FIFO" in text and "A real run" in text and "minutes" in text
