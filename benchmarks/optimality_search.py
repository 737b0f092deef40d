"""How the hindsight search's best-known value moves with its budget: runs
``search_window`` with the largest budget on test windows 0..N-1 and prints, per budget, the
geometric mean of best-known / best rule (the search is deterministic, so the value at a smaller
budget is the one the same run had reached by then: the shipped rows' values at their budget).

    python benchmarks/optimality_search.py --scenario modern-v1 [--windows 10] [--budgets 100,200,400]
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from baselines.optimality.search import search_window  # noqa: E402


def value_at(trace: list, budget: int) -> float:
    """The best value the search had after ``budget`` episodes (its trace: (episodes, value))."""
    return min(v for spent, v in trace if spent <= budget)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenario", default="modern-v1")
    p.add_argument("--windows", type=int, default=10)
    p.add_argument("--budgets", default="100,200,400")
    args = p.parse_args(argv)
    budgets = sorted(int(b) for b in args.budgets.split(","))
    t0 = time.perf_counter()
    logs = {b: [] for b in budgets}
    for seed in range(args.windows):
        found = search_window(args.scenario, "test", seed, episodes=budgets[-1])
        for b in budgets:
            logs[b].append(math.log(value_at(found.trace, b) / found.best_rule_value))
    print(f"{args.scenario}, test windows 0-{args.windows - 1} ({time.perf_counter() - t0:.0f} s)")
    for b in budgets:
        print(f"  budget {b:4d} episodes: best-known / best rule, geometric mean {math.exp(sum(logs[b]) / len(logs[b])):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
