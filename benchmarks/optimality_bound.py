"""Time the certified lower bound: wall time of ``window_lower_bound`` per window, on test
windows of the shipped scenarios, one core. Prints per scenario the median and the largest time and
the bound's binding part.

    python benchmarks/optimality_bound.py [--scenarios philly-v1,philly-hetero-v2,modern-v1] [--windows 10]
"""
from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from baselines.optimality.bound import window_lower_bound  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenarios", default="philly-v1,philly-hetero-v2,modern-v1")
    p.add_argument("--windows", type=int, default=10)
    args = p.parse_args(argv)
    window_lower_bound("toy-v0", "test", 0)              # imports and the env's first build
    for scenario in [s for s in args.scenarios.split(",") if s]:
        walls, binding = [], collections.Counter()
        for seed in range(args.windows):
            t0 = time.perf_counter()
            b = window_lower_bound(scenario, "test", seed)
            walls.append(time.perf_counter() - t0)
            binding[b.binding] += 1
        print(f"{scenario}: {args.windows} windows, bound wall median {statistics.median(walls):.3f} s, "
              f"max {max(walls):.3f} s; binding {dict(binding)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
