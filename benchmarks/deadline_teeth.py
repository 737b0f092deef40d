"""Does deadline order matter on a scenario? Each deadline-aware rule's missed deadlines against
the scenario's yardstick, paired over the same test windows.

Prints, per rule: the ratio of the summed miss rates (1 - deadline attainment) of the rule over the
yardstick's on the same windows, with a 95% paired bootstrap interval that resamples the windows
(:func:`baselines.harness.stats.share_ci`), the windows where the rule misses fewer / more, and both
policies' average JCT. A ratio whose interval lies below 1 means the rule misses fewer deadlines
than the yardstick on these windows. Usage::

    python benchmarks/deadline_teeth.py --scenario philly-slo-v2 --seeds 0-29
    python benchmarks/deadline_teeth.py --scenario philly-slo-v1 --seeds 0-9 --rules edf

``docs/objectives.md`` ("Where the room is") quotes its output; a slow test
(``tests/test_scenarios_v3.py``) checks the interval of the best rule on philly-slo-v2.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Sequence

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

#: The named rules that read deadlines or classes (docs/objectives.md).
DEADLINE_RULES = ("edf", "edf-clairvoyant", "tias", "priority")


def miss_pairs(scenario: str, rules: Sequence[str], seeds: Sequence[int], reference: str,
               backend: str = "auto") -> dict[str, dict]:
    """Per rule: its and the reference's miss rates and average JCTs per window, and the paired
    miss-rate ratio with its interval."""
    from baselines.harness.evaluate import evaluate
    from baselines.harness.stats import share_ci

    ref = evaluate(reference, scenario, "test", seeds, backend=backend)
    ref_miss = np.array([1.0 - r["deadline_attainment"] for r in ref])
    out = {}
    for rule in rules:
        got = evaluate(rule, scenario, "test", seeds, backend=backend)
        miss = np.array([1.0 - r["deadline_attainment"] for r in got])
        ratio, lo, hi = share_ci(miss, ref_miss)
        out[rule] = {"ratio": ratio, "low": lo, "high": hi, "fewer": int((miss < ref_miss).sum()),
                     "more": int((miss > ref_miss).sum()), "windows": len(seeds),
                     "miss": float(miss.mean()), "reference_miss": float(ref_miss.mean()),
                     "avg_jct": float(np.mean([r["avg_jct"] for r in got])),
                     "reference_avg_jct": float(np.mean([r["avg_jct"] for r in ref]))}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    from baselines.cli import parse_seeds
    from baselines.yardstick import yardstick

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scenario", default="philly-slo-v2")
    p.add_argument("--seeds", default="0-29")
    p.add_argument("--rules", default=",".join(DEADLINE_RULES))
    p.add_argument("--reference", default=None, help="default: the scenario's yardstick (average JCT)")
    p.add_argument("--backend", default="auto")
    args = p.parse_args(argv)
    reference = args.reference or yardstick(args.scenario)
    try:
        seeds = parse_seeds(args.seeds)
    except argparse.ArgumentTypeError as e:
        p.error(f"argument --seeds: {e}")
    pairs = miss_pairs(args.scenario, args.rules.split(","), seeds, reference, args.backend)
    print(f"{args.scenario}, test windows {args.seeds}: missed deadlines against {reference} "
          f"(ratio of summed miss rates, 95% paired bootstrap interval)")
    for rule, r in pairs.items():
        print(f"  {rule:<16} {r['ratio']:.3f} [{r['low']:.3f}, {r['high']:.3f}], fewer on {r['fewer']}/{r['windows']}, "
              f"more on {r['more']}; miss rate {r['miss']:.3f} vs {r['reference_miss']:.3f}; "
              f"average JCT {r['avg_jct']:,.0f} s vs {r['reference_avg_jct']:,.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
