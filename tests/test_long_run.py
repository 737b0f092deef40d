"""Long runs: no file-descriptor or heap growth over many episodes, the stability benchmark stays
runnable, and the same seed gives the same metrics in a fresh process whatever its hash seed."""
from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import cluster_env
from tests.helpers import random_actions

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "long_run_stability.py"
HAS_PROC_FD = Path("/proc/self/fd").is_dir()

JOBS = ("job_id,submit_time,duration,num_gpus,tenant,allowed_gpu_types,job_type\n"
        "a,0,300,2,alice,,\nb,0,120,4,bob,V100|T4,\nc,5,60,1,carol,K80,LM (batch size 20)\n"
        "d,7,900,8,alice,,\ne,30,45,3,bob,T4|K80|V100,\nf,31,10,1,dave,V100,\n")
NODES = "machine,gpu_type,num_gpus,count\nv,V100,4,2\nk,K80,2,1\nt,T4,1,3\n"


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _episode(env, seed: int, render: bool = False) -> dict:
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    steps = 0
    while env.agents:
        obs, rewards, terms, truncs, infos = env.step(random_actions(obs, rng, lazy=0.5))
        steps += 1
        if render and steps % 10 == 1:
            env.render()      # a labelled rgb_array frame is a matplotlib figure (~70 ms): sample
    return infos["orderer"]["metrics"]


def _aec_episode(seed: int) -> None:
    aec = cluster_env.env("toy-v0", split="validation")
    aec.reset(seed=seed)
    rng = np.random.default_rng(seed)
    for agent in aec.agent_iter(max_iter=10_000):
        obs, reward, term, trunc, info = aec.last()
        if term or trunc:
            aec.step(None)
        else:
            aec.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
    aec.close()


def _mixed_workload(tmp_path: Path, toy, csv_files: tuple[Path, Path], k: int) -> None:
    """One round of everything that might hold a file or a buffer: a reused env, a fresh env
    from CSV files (one gzip-compressed), both render modes, the AEC version."""
    _episode(toy, k, render=k % 3 == 0)
    w, c = csv_files
    env = cluster_env.parallel_env("philly-v0", workload_csv=str(w), cluster_csv=str(c),
                                   preemption=True, render_mode="rgb_array" if k % 2 else "ansi")
    _episode(env, k, render=k % 4 == 1)
    env.close()
    if k % 5 == 0:
        _aec_episode(k)


@pytest.fixture
def csv_files(tmp_path):
    import gzip

    w = tmp_path / "jobs.csv"
    w.write_text(JOBS)
    c = tmp_path / "nodes.csv.gz"
    c.write_bytes(gzip.compress(NODES.encode()))
    return w, c


@pytest.mark.skipif(not HAS_PROC_FD, reason="needs /proc/self/fd")
def test_no_file_descriptor_growth_over_30_episodes(tmp_path, csv_files):
    toy = cluster_env.parallel_env("toy-v0", split="test", preemption=True, render_mode="ansi")
    for k in range(2):                                    # warm-up: imports, caches, and the
        _mixed_workload(tmp_path, toy, csv_files, k)      # fonts matplotlib keeps open after
    gc.collect()                                          # its first rgb_array frame (k=1)
    before = _fds()
    for k in range(2, 32):
        _mixed_workload(tmp_path, toy, csv_files, k)
    gc.collect()
    assert _fds() == before


def test_python_heap_stays_flat_over_60_episodes(tmp_path, csv_files):
    """tracemalloc counts Python allocations exactly: after a warm-up, 60 more episodes (reused
    and fresh environments) leave the traced heap where it was, up to a small slack for
    interpreter-level free lists."""
    toy = cluster_env.parallel_env("toy-v0", split="test", preemption=True, render_mode="ansi")
    philly = cluster_env.parallel_env("philly-v0", jobs_per_episode=20)
    tracemalloc.start()
    try:
        for k in range(3):
            _mixed_workload(tmp_path, toy, csv_files, k)
            _episode(philly, k)
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for k in range(3, 23):
            _mixed_workload(tmp_path, toy, csv_files, k)
            _episode(philly, k)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    # A leak of one small object per step or of one episode's arrays would exceed this.
    assert after - before < 200_000, (before, after)


def test_stability_benchmark_runs_with_a_tiny_budget():
    out = subprocess.run([sys.executable, str(SCRIPT), "--scenarios", "toy-v0", "philly-v0",
                          "--episodes", "4", "--every", "2", "--jobs", "30"],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    for scenario in ("toy-v0", "philly-v0"):
        summary = [ln for ln in lines if ln.strip().startswith(f"{scenario}: RSS")]
        assert len(summary) == 1, out.stdout
        assert "open fds" in summary[0] and "steps in" in summary[0]
    table = [ln.split() for ln in lines if ln.strip()[:1].isdigit()]
    assert [int(r[0]) for r in table] == [2, 4, 2, 4]
    if HAS_PROC_FD:
        assert all(float(r[2]) > 0 and int(r[4]) > 0 for r in table)
    bad = subprocess.run([sys.executable, str(SCRIPT), "--episodes", "0"], capture_output=True,
                         text=True, timeout=120, cwd=ROOT)
    assert bad.returncode == 2 and "--episodes" in bad.stderr


_DETERMINISM = r"""
import hashlib, json, sys
import numpy as np
import cluster_env
from tests.helpers import random_actions

def run(env, seed):
    rng = np.random.default_rng(seed)
    h = hashlib.sha256()
    obs, infos = env.reset(seed=seed)
    while env.agents:
        for a in sorted(obs):
            for k in sorted(obs[a]):
                h.update(obs[a][k].tobytes())
        obs, rewards, terms, truncs, infos = env.step(random_actions(obs, rng, lazy=0.5))
        h.update(repr((rewards["orderer"], infos["orderer"]["time"])).encode())
    return {"metrics": infos["orderer"]["metrics"], "trajectory": h.hexdigest()}

w, c = sys.argv[1], sys.argv[2]
out = {
    "philly": run(cluster_env.parallel_env("philly-v0", jobs_per_episode=60, preemption=True), 3),
    "openb": run(cluster_env.parallel_env("openb-v0", split="test", jobs_per_episode=60), 4),
    "csv": run(cluster_env.parallel_env("philly-v0", workload_csv=w, cluster_csv=c, preemption=True), 5),
}
print(json.dumps(out, sort_keys=True))
"""


def test_same_seed_same_metrics_in_fresh_processes_with_other_hash_seeds(csv_files):
    w, c = csv_files

    def run(hash_seed: str) -> dict:
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "OMP_NUM_THREADS": "1"}
        out = subprocess.run([sys.executable, "-c", _DETERMINISM, str(w), str(c)], capture_output=True,
                             text=True, timeout=600, cwd=ROOT, env=env)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    a, b = run("0"), run("4242")
    assert a == b
    for name, result in a.items():
        assert result["metrics"]["jobs_finished"] > 0, name
    assert a["philly"]["metrics"]["preemptions"] > 0
