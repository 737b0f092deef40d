"""The baseline examples run as students run them (subprocesses, tiny budgets) and show what they say."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def run_example(name: str, *args: str, cwd: Path) -> str:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, str(EXAMPLES / name), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_02_compare_baselines(tmp_path):
    out = run_example("02_compare_baselines.py", "--scenario", "philly-v0", "--policies", "fifo", "sjf",
                      "--seeds", "0", "1", "--jobs-per-episode", "60", "--out", "res", cwd=tmp_path)
    assert "fifo" in out and "sjf" in out and "lowest average JCT" in out
    assert (tmp_path / "res" / "results.csv").read_text().count("\n") == 1 + 4
    assert (tmp_path / "res" / "jct_cdf.png").stat().st_size > 5000


def test_05_custom_trace_and_cluster(tmp_path):
    out = run_example("05_custom_trace_and_cluster.py", "--policies", "fifo", "fifo+fastest", "--seeds", "0",
                      cwd=tmp_path)
    assert "workload: 40 jobs (40 rows read, filtered none)" in out
    assert "cluster: 4 machines, 24 GPUs" in out and "fifo+fastest" in out


def test_05_reports_bad_rows_with_file_row_and_field(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("submit_time,duration,num_gpus\n0,100,1\n10,-5,1\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(EXAMPLES / "05_custom_trace_and_cluster.py"),
                           "--workload-csv", str(bad)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0
    assert "bad.csv" in proc.stderr and "row 2" in proc.stderr and "duration" in proc.stderr


def test_06_render_timeline(tmp_path):
    out = run_example("06_render_timeline.py", "--scenario", "toy-v0", "--policy", "sjf", "--frames", "2",
                      "--out", "tl", cwd=tmp_path)
    assert "toy-m0" in out and "V100" in out                  # the text frames
    assert "average JCT 71.7 s" in out                         # the hand-computed SJF schedule
    assert (tmp_path / "tl" / "timeline_toy-v0_sjf.png").stat().st_size > 5000


def test_07_custom_heuristic(tmp_path):
    out = run_example("07_custom_heuristic.py", "--scenario", "philly-v0", "--seeds", "0",
                      "--jobs-per-episode", "60", cwd=tmp_path)
    assert "smallest-gpus+consolidate" in out and "tiresias" in out


def test_07_heuristic_orders_by_gpu_demand():
    import numpy as np

    from baselines.obs import J

    from tests.helpers import load_script

    ex07 = load_script("examples/07_custom_heuristic.py", "ex07")
    orderer = ex07.SmallestDemandFirst()
    jobs = np.zeros((4, len(J)), dtype=np.float32)
    jobs[:3, J["valid"]] = 1
    jobs[:3, J["gpus_log2"]] = [3, 1, 1]                      # 8, 2, 2 GPUs
    obs = {"jobs": jobs, "action_mask": np.array([1, 0, 1, 0, 1], dtype=np.int8)}
    assert orderer.order(obs, {}) == 2                         # job 1 does not fit; job 2 asks least
    obs["action_mask"] = np.array([0, 0, 0, 0, 1], dtype=np.int8)
    assert orderer.order(obs, {}) == 4                         # nothing fits: advance
