"""A large user workload CSV is parsed once per process, not once per environment built.

Usage::

    python benchmarks/workload_csv_cache.py                  # 1,000,000 jobs
    python benchmarks/workload_csv_cache.py --rows 200000 --episodes 4

Writes a synthetic trace of ``--rows`` jobs (job_id, submit_time, duration, num_gpus, job_type,
tenant; seeded) to a temporary folder, then prints, in one process:

* ``parse``: one ``load_workload_csv`` of the file (what every environment build cost before
  the cache);
* ``first env``: the first ``cluster_env.parallel_env(..., workload_csv=...)`` (parses it);
* ``later envs``: the next ``--builds`` builds, each (the cache's hit: no parse);
* ``episodes``: ``--episodes`` FIFO episodes of ``--jobs`` jobs each through
  ``baselines.evaluate`` (serial backend, then two worker processes), and how many times the file
  was parsed during them;
* the peak resident memory of the process.
"""
from __future__ import annotations

import argparse
import csv
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def write_trace(path: Path, rows: int, seed: int = 0) -> None:
    """``rows`` jobs with Philly-like shapes: Poisson arrivals, log-normal durations, 1-8 GPUs."""
    from cluster_env.world.throughputs import JOB_TYPES

    rng = np.random.default_rng(seed)
    submit = np.cumsum(rng.exponential(30.0, rows)).round().astype(np.int64)
    duration = np.clip(rng.lognormal(7.5, 1.5, rows), 60, 7 * 86400).round().astype(np.int64)
    gpus = rng.choice([1, 1, 1, 2, 4, 8], rows)
    types = rng.integers(0, len(JOB_TYPES), rows)
    tenants = rng.integers(0, 20, rows)
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["job_id", "submit_time", "duration", "num_gpus", "job_type", "tenant"])
        for i in range(rows):
            out.writerow([f"j{i}", submit[i], duration[i], gpus[i], JOB_TYPES[types[i]], f"t{tenants[i]}"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--builds", type=int, default=3, help="environment builds after the first")
    parser.add_argument("--episodes", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=200, help="jobs per episode")
    parser.add_argument("--scenario", default="philly-v1")
    args = parser.parse_args(argv)

    import baselines
    import cluster_env
    import cluster_env.loaders.workload_csv as wc

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "jobs.csv"
        t0 = time.perf_counter()
        write_trace(path, args.rows)
        print(f"trace: {args.rows:,} jobs, {path.stat().st_size / 1e6:.1f} MB written in "
              f"{time.perf_counter() - t0:.1f} s")

        t0 = time.perf_counter()
        wc.load_workload_csv(path)
        print(f"parse (load_workload_csv, once per env before the cache): {time.perf_counter() - t0:.2f} s")

        parses = []
        real = wc.load_workload_csv
        wc.load_workload_csv = lambda p, **kw: parses.append(p) or real(p, **kw)
        kw = {"workload_csv": str(path)}
        t0 = time.perf_counter()
        cluster_env.parallel_env(args.scenario, split="test", **kw)
        print(f"first env (parses): {time.perf_counter() - t0:.2f} s")
        for i in range(args.builds):
            t0 = time.perf_counter()
            cluster_env.parallel_env(args.scenario, split="test", **kw)
            print(f"env build {i + 2} (cached): {time.perf_counter() - t0:.3f} s")
        t0 = time.perf_counter()
        before = len(parses)
        baselines.evaluate("fifo", args.scenario, seeds=range(args.episodes),
                           env_kwargs={**kw, "jobs_per_episode": args.jobs}, backend="serial")
        print(f"{args.episodes} fifo episodes of {args.jobs} jobs: {time.perf_counter() - t0:.2f} s, "
              f"{len(parses) - before} parses during them ({len(parses)} in all)")
        # Worker processes (forked after the parent's first build) inherit the parsed workload:
        # each parse in any process appends a line to a file.
        log = Path(tmp) / "parses.log"
        wc.load_workload_csv = lambda p, **kw: log.open("a").write("parse\n") and real(p, **kw)
        t0 = time.perf_counter()
        baselines.evaluate("fifo", args.scenario, seeds=range(args.episodes),
                           env_kwargs={**kw, "jobs_per_episode": args.jobs}, backend="process", workers=2)
        worker_parses = len(log.read_text().splitlines()) if log.exists() else 0
        print(f"{args.episodes} fifo episodes on 2 worker processes: {time.perf_counter() - t0:.2f} s, "
              f"{worker_parses} parses in any process")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory: {peak:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
