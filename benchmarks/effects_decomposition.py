"""How much each world-model effect adds to the average JCT: a per-effect decomposition.

For a scenario and a policy, over the same windows (seeds), the script runs:

* every effect off (textbook dynamics);
* each effect alone on (static factors, fluctuation, contention, spread penalty, restart overhead);
* every effect on (the scenario's default);
* with ``--legacy-spread``, also every effect on under the v0 spread rule
  (``spread_reference="one_machine"``: any job on more than one machine pays the penalty,
  even one that can never fit on one machine);
* with ``--spread-models gavel,allreduce``, the spread penalty alone and every effect on under
  each spread model (``WorldConfig.spread_model``; docs/world_model.md, "Interconnect").

It prints, per scenario, the mean average JCT of each configuration and its geometric-mean ratio
to the all-off run on the same windows (the factor by which the effect multiplies FIFO's average
JCT). Usage::

    python benchmarks/effects_decomposition.py --scenario philly-v1 --policy fifo --seeds 0-4
    python benchmarks/effects_decomposition.py --scenario philly-hetero-v1,modern-v1 --seeds 0-19 \
        --spread-models gavel,allreduce
    python benchmarks/effects_decomposition.py --cluster-csv my_nodes.csv --scenario philly-v1 --legacy-spread
"""
from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

EFFECTS = ("static_factors", "fluctuation", "contention", "spread_penalty", "restart_overhead")


def configurations(legacy_spread: bool, spread_models: "tuple[str, ...]" = ()) -> list[tuple[str, dict]]:
    """(label, environment arguments) of every configuration, all-off first."""
    out = [("all effects off", {"all_effects_off": True})]
    for effect in EFFECTS:
        value = 30.0 if effect == "restart_overhead" else True
        out.append((f"only {effect}", {"all_effects_off": True, effect: value}))
    out.append(("all effects on", {}))
    if legacy_spread:
        out.append(("all on, v0 spread rule", {"spread_reference": "one_machine"}))
    for model in spread_models:
        out.append((f"only spread_penalty, {model}",
                    {"all_effects_off": True, "spread_penalty": True, "spread_model": model}))
        out.append((f"all on, spread {model}", {"spread_model": model}))
    return out


def main(argv: "list[str] | None" = None) -> int:
    import baselines
    from baselines.cli import parse_seeds

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenario", default="philly-v1", help="a scenario, or several separated by commas")
    p.add_argument("--split", default="test")
    p.add_argument("--policy", default="fifo")
    p.add_argument("--seeds", default="0-4")
    p.add_argument("--cluster-csv", default=None, help="a cluster CSV to use instead of the scenario's")
    p.add_argument("--legacy-spread", action="store_true", help="also run the v0 spread rule")
    p.add_argument("--spread-models", default="",
                   help="comma-separated spread models to run too (gavel, allreduce)")
    args = p.parse_args(argv)
    seeds = parse_seeds(args.seeds)
    models = tuple(m for m in args.spread_models.split(",") if m)
    common = {"cluster_csv": args.cluster_csv} if args.cluster_csv else {}
    for scenario in args.scenario.split(","):
        base = None
        print(f"{args.policy} on {scenario}/{args.split}, windows {seeds}")
        for label, kwargs in configurations(args.legacy_spread, models):
            recs = baselines.evaluate(args.policy, scenario, split=args.split, seeds=seeds,
                                      env_kwargs={**common, **kwargs}, backend="serial")
            jct = np.array([r["avg_jct"] for r in recs])
            if base is None:
                base = jct
            ratio = float(np.exp(np.mean(np.log(jct / base))))
            print(f"  {label:<34} avg JCT {jct.mean():>12,.0f} s   x{ratio:.3f} of all-off")
    return 0


if __name__ == "__main__":
    sys.exit(main())
