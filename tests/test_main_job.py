"""The README's main job, exactly as a user runs it: a bare ``cluster-bench run`` on the base install
(no extra: the README's command installs none).

It must work on a fresh install with no argument: the default scenario (philly-v1), 20 test
windows, every named baseline, the paired table and the files. About a minute and a half on two
cores: the one test that pays for the real defaults.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

from helpers import BLOCK_TORCH

import baselines
from cluster_env.scenarios.registry import DEFAULT_SCENARIO


def test_bare_cluster_bench_run(tmp_path):
    # From the base install, as the README's command installs it: no torch, SB3, SuperSuit or Ray.
    env = dict(os.environ, OMP_NUM_THREADS="1")
    program = BLOCK_TORCH + "from baselines.cli import main\nsys.exit(main(['run', '--quiet']))\n"
    done = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "cluster-bench-results"
    data = json.loads((out / "results.json").read_text())
    assert data["meta"]["scenario"] == DEFAULT_SCENARIO == "philly-v1"
    assert data["meta"]["seeds"] == list(range(20))
    episodes = data["episodes"]
    assert {e["policy"] for e in episodes} >= set(baselines.BASELINE_NAMES)
    assert len(episodes) == 20 * len({e["policy"] for e in episodes})
    assert all(abs(e["offered_load"] - 1.5) < 1e-9 and not e["truncated"] for e in episodes)
    # The printed table carries the paired ratio to the scenario's yardstick and the fallback's
    # share; the plots exist.
    from baselines.yardstick import yardstick

    assert data["meta"]["reference"] == yardstick(DEFAULT_SCENARIO) == "las-migrate"
    assert "vs las-migrate, the scenario's yardstick" in done.stdout and "fallback" in done.stdout
    assert "Traceback" not in done.stderr
    assert {"fifo", "random"} <= {e["policy"] for e in episodes}
    for name in ("results.csv", "summary.csv", "jct_cdf.png", "paired_avg_jct.png", "utilization.png"):
        assert (out / name).stat().st_size > 0, name
