"""The RL researcher's examples: CleanRL-style PPO on the parallel env (tiny budget, one thread)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _run(script: str, *args: str, timeout: float = 180) -> str:
    out = subprocess.run([sys.executable, str(ROOT / "examples" / script), *args], capture_output=True, text=True,
                         env=ENV, cwd=ROOT, timeout=timeout)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_cleanrl_ppo_parallel_tiny_budget():
    pytest.importorskip("torch")
    text = _run("08_cleanrl_ppo_parallel.py", "--total-timesteps", "256", "--num-envs", "2", "--num-steps", "64",
                "--jobs-per-episode", "20", "--eval-seeds", "2", "--eval-jobs", "20", "--hidden", "16")
    assert "iteration 2/2" in text
    for name in ("ppo (this run)", "fifo+first-fit", "random"):
        assert name in text
    assert "FIFO" in text and "A real run" in text and "minutes" in text
