"""Parallel-env steps per CPU second of two checkouts, measured alternately (before/after a change).

Usage::

    python benchmarks/ab_steps.py /path/to/main /path/to/branch --rounds 30
    OFF=1 python benchmarks/ab_steps.py A B          # with all_effects_off=True
    python benchmarks/ab_steps.py A B --scenario philly-hetero-v2 --jobs 300

On a machine shared with other jobs the CPU time of a run moves by 20 to 30% with the load, so
one run of each side is no comparison. Here each checkout gets a long-lived worker process (its
own ``PYTHONPATH`` and numba cache folder; kernels loaded and warmed up once), and the workers
take turns: each round, one run of 5 episodes per side (FIFO + first-fit, what
``replay_philly.py --skip-replay`` times; philly-v0's train windows unless ``--scenario`` and
``--jobs`` say otherwise), the order alternating. Both sides see the same load;
the minimum and the quartiles of the CPU time per step (this thread's, ``time.thread_time``)
are printed for each, and their ratios.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

WORKER = r"""
import os, sys, time
sys.path.insert(0, "benchmarks")
import cluster_env
from replay_philly import run_timed
from cluster_env.core import kernels
kernels.warm_up()
kw = {"all_effects_off": True} if os.environ.get("OFF") else {}
if os.environ.get("AB_JOBS"):
    kw["jobs_per_episode"] = int(os.environ["AB_JOBS"])
env = cluster_env.parallel_env(os.environ.get("AB_SCENARIO", "philly-v0"), split="train", **kw)
run_timed(env, 0)
print("ready", flush=True)
for line in sys.stdin:
    steps = cpu = 0
    for seed in range(5):
        n, _, c, _ = run_timed(env, seed)
        steps += n
        cpu += c
    print(cpu / steps * 1e6, flush=True)
"""


def start(root: Path, cache: Path, scenario: str, jobs: "int | None") -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(root), OMP_NUM_THREADS="1", NUMBA_CACHE_DIR=str(cache),
               AB_SCENARIO=scenario, AB_JOBS="" if jobs is None else str(jobs))
    proc = subprocess.Popen([sys.executable, "-c", WORKER], cwd=root, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    if proc.stdout.readline().strip() != "ready":
        raise RuntimeError(f"the worker of {root} did not start")
    return proc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path, help="checkout A (its benchmarks/replay_philly.py is used)")
    parser.add_argument("after", type=Path, help="checkout B")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/ab-steps-numba"),
                        help="numba cache folders go under it, one per side")
    parser.add_argument("--scenario", default="philly-v0", help="the scenario whose train windows are played")
    parser.add_argument("--jobs", type=int, default=None, help="jobs per episode (default: the scenario's)")
    args = parser.parse_args()
    sides = {"A": args.before.resolve(), "B": args.after.resolve()}
    workers = {name: start(root, args.cache / name, args.scenario, args.jobs) for name, root in sides.items()}
    times: dict[str, list[float]] = {name: [] for name in sides}
    for i in range(args.rounds):
        for name in (("A", "B") if i % 2 == 0 else ("B", "A")):
            proc = workers[name]
            proc.stdin.write("go\n")
            proc.stdin.flush()
            times[name].append(float(proc.stdout.readline()))
    for proc in workers.values():
        proc.stdin.close()
        proc.wait()
    stats = {}
    for name, values in times.items():
        values.sort()
        stats[name] = (values[0], values[len(values) // 4], statistics.median(values))
        print(f"{name} {sides[name]}: CPU us per step: min {stats[name][0]:.2f}, first quartile "
              f"{stats[name][1]:.2f}, median {stats[name][2]:.2f} -> {1e6 / stats[name][0]:,.0f} steps per CPU "
              f"second at best, {1e6 / stats[name][1]:,.0f} at the first quartile")
    ratios = [a / b for a, b in zip(stats["A"], stats["B"])]
    print(f"B / A speed: min {ratios[0]:.3f}, first quartile {ratios[1]:.3f}, median {ratios[2]:.3f}")


if __name__ == "__main__":
    main()
