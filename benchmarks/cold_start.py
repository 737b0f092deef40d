"""Time to first result on a fresh install: numba's one-time compile included.

Usage::

    python benchmarks/cold_start.py                  # cold and warm env.reset, then the main job
    python benchmarks/cold_start.py --no-main-job    # the resets only (seconds)

Each measurement is a fresh interpreter with ``NUMBA_CACHE_DIR`` set to a new, empty temporary
folder (what a fresh clone has: nothing compiled), then, for the warm figures, a second one on the
same folder. It prints, per measurement, the wall time and the user + system CPU time of the child
(on a shared machine the CPU time is the steadier figure), and whether the compile note appeared:

* ``reset``: ``import cluster_env``, build ``philly-v1`` and ``env.reset(seed=0)`` (the README's
  quickstart up to its first observation);
* ``10 steps``: the same, then ten steps with the first allowed actions (a reset reaches its first
  decision without the compiled skip-idle loop: the first steps compile it on a fresh install);
* ``main job``: the README's ``cluster-bench run`` (philly-v1, 20 test windows, every named
  baseline, tables and plots), compile included.

Targets: a cold reset under 3 s and the cold main job within 45 s on 2 idle cores.
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESET = ("import cluster_env; env = cluster_env.parallel_env('philly-v1', split='test'); "
         "obs, _ = env.reset(seed=0)")
STEPS = RESET + ("\nfor _ in range(10):\n"
                 "    obs, *_ = env.step({a: int(o['action_mask'].argmax()) for a, o in obs.items()})")


def timed(argv: list[str], cache: str, cwd: str) -> tuple[float, float, bool]:
    """(wall seconds, child CPU seconds, whether the compile note was printed) of one process."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache, OMP_NUM_THREADS="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"error: {' '.join(argv)} failed:\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, "compiling the simulator's kernels" in done.stderr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-main-job", action="store_true", help="time the resets only")
    args = parser.parse_args(argv)
    jobs = [("reset", [sys.executable, "-c", RESET]), ("10 steps", [sys.executable, "-c", STEPS])]
    if not args.no_main_job:
        jobs.append(("main job", [sys.executable, "-m", "baselines", "run", "--quiet"]))
    print(f"{'what':<10} {'cache':<5} {'wall s':>8} {'cpu s':>8}  compile note")
    for name, cmd in jobs:
        with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as work:
            for state in ("cold", "warm"):
                wall, cpu, noted = timed(cmd, cache, work)
                print(f"{name:<10} {state:<5} {wall:8.1f} {cpu:8.1f}  {'yes' if noted else 'no'}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
