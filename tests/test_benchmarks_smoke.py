"""The benchmark scripts stay runnable: a small smoke run in CI, the full replay marked slow."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "replay_philly.py"


def _run(*args: str) -> str:
    out = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_replay_benchmark_smoke():
    out = _run("--jobs", "1500", "--episodes", "1", "--repeat", "1")
    assert "full replay: 1,500 jobs" in out and "steps/s" in out and "philly-v0:" in out


@pytest.mark.slow
def test_full_philly_replay():
    out = _run("--episodes", "5")
    assert "full replay: 82,247 jobs of 82,247" in out
