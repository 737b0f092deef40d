"""What world model v3 (docs/world_model.md, "World model v3") changes for the baselines: paired before/after figures.

For each (old, new) scenario pair (``modern-v1`` -> ``modern-v2``, ``philly-hetero-v2`` ->
``philly-hetero-v3``: the same windows and load), the script runs each policy on the same windows
(seeds) of both, and on the old scenario with one v3 change at a time (``speeds="measured"``,
``gavel_shape="capped"``, ``comm_source="measured"``, ``spread_floor=True``), and prints the mean average JCT and the
geometric-mean ratio to the old scenario with its 95% bootstrap interval and the share of windows
where it is lower. Usage::

    python benchmarks/world_v3_effect.py --seeds 0-19
    python benchmarks/world_v3_effect.py --pairs modern-v1:modern-v2 --policies fifo,fifo+fastest --seeds 0-99
"""
from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

PAIRS = "modern-v1:modern-v2,philly-hetero-v2:philly-hetero-v3"
POLICIES = "fifo,fifo+fastest,sjf,las,las+fastest,tiresias,srpt-clairvoyant,las-migrate"
#: One v3 change at a time on the old scenario.
PARTS = (("measured speeds", {"speeds": "measured"}), ("capped Gavel shape", {"gavel_shape": "capped"}),
         ("measured comm", {"comm_source": "measured"}),
         ("spread floor", {"spread_floor": True}))


def _jct(policy: str, scenario: str, split: str, seeds: list, kwargs: dict) -> np.ndarray:
    import baselines

    recs = baselines.evaluate(policy, scenario, split=split, seeds=seeds, env_kwargs=kwargs, backend="serial")
    return np.array([r["avg_jct"] for r in recs])


def main(argv: "list[str] | None" = None) -> int:
    from baselines.cli import parse_seeds
    from baselines.harness.stats import geo_mean_ci

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", default=PAIRS, help="old:new scenario pairs, comma-separated")
    p.add_argument("--policies", default=POLICIES)
    p.add_argument("--split", default="test")
    p.add_argument("--seeds", default="0-19")
    p.add_argument("--parts", action="store_true", help="also each v3 change alone on the old scenario")
    args = p.parse_args(argv)
    seeds = parse_seeds(args.seeds)
    for pair in args.pairs.split(","):
        old, new = pair.split(":")
        print(f"{old} -> {new}, {args.split} windows {seeds[0]}-{seeds[-1]} ({len(seeds)})")
        print(f"  {'policy':<18} {'old avg JCT':>12} {'new avg JCT':>12}  new/old [95% CI]  lower in")
        for policy in args.policies.split(","):
            before = _jct(policy, old, args.split, seeds, {})
            rows = [("", _jct(policy, new, args.split, seeds, {}))]
            if args.parts:
                rows += [(f"  only {label}", _jct(policy, old, args.split, seeds, kw)) for label, kw in PARTS]
            for label, after in rows:
                g, lo, hi = geo_mean_ci(after / before)
                lower = float(np.mean(after < before))
                print(f"  {policy + label:<18} {before.mean():>12,.0f} {after.mean():>12,.0f}  "
                      f"{g:.3f} [{lo:.3f}, {hi:.3f}]  {lower:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
