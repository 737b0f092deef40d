"""How much each world-model effect adds to the average JCT: a per-effect decomposition.

For a scenario and a policy, over the same windows (seeds), the script runs:

* every effect off (textbook dynamics);
* each effect alone on (static factors, fluctuation, contention, spread penalty, restart overhead);
* every effect on (the scenario's default);
* with ``--legacy-spread``, also every effect on under the v0 spread rule
  (``spread_reference="one_machine"``: any job on more than one machine pays the penalty,
  even one that can never fit on one machine);
* with ``--spread-models gavel,allreduce``, the spread penalty alone and every effect on under
  each spread model (``WorldConfig.spread_model``; docs/world_model.md, "Interconnect");
* with ``--sensitivity``, every effect on with one assumption moved at a time
  (:data:`SENSITIVITIES`: Gavel's testbed bandwidth 25 Gb/s instead of 10, the contention alpha at
  half and twice its default, no static machine factors): the sensitivity column of
  docs/world_model.md's effects table.

It prints, per scenario, the mean average JCT of each configuration and its geometric-mean ratio
to the all-off run on the same windows (the factor by which the effect multiplies FIFO's average
JCT). Usage::

    python benchmarks/effects_decomposition.py --scenario philly-v1 --policy fifo --seeds 0-4
    python benchmarks/effects_decomposition.py --scenario philly-hetero-v1,modern-v1 --seeds 0-19 \
        --spread-models gavel,allreduce
    python benchmarks/effects_decomposition.py --cluster-csv my_nodes.csv --scenario philly-v1 --legacy-spread
    nice -n 10 python benchmarks/effects_decomposition.py --scenario modern-v1,philly-hetero-v2 --seeds 0-19 \
        --sensitivity
"""
from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

EFFECTS = ("static_factors", "fluctuation", "contention", "spread_penalty", "restart_overhead")
#: One assumption moved at a time, every effect on: (label, environment arguments). The defaults
#: and their labels ("measured (source)" or "assumption") are in docs/world_model.md.
SENSITIVITIES = (
    # The testbed bandwidth is also the NIC of the K80/P100/V100 servers (INTERCONNECT_DEFAULTS):
    # both move together, or a Gavel-server cluster would pay 2.5x its own measured ratio.
    ("testbed 25 Gb/s (default 10)", {"gavel_testbed_gbps": 25.0, "interconnect": tuple(
        (t, "nic_per_machine", 25.0) for t in ("K80", "P100", "V100"))}),
    ("contention alpha 0.05 (default 0.1)", {"contention_alpha": 0.05}),
    ("contention alpha 0.2 (default 0.1)", {"contention_alpha": 0.2}),
    ("no static factors (default sigma 0.072)", {"static_factors": False}),
)


def configurations(legacy_spread: bool, spread_models: "tuple[str, ...]" = (),
                   sensitivity: bool = False) -> list[tuple[str, dict]]:
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
    if sensitivity:
        out.extend((f"all on, {label}", kwargs) for label, kwargs in SENSITIVITIES)
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
    p.add_argument("--load", type=float, default=None, help="offered load of every window (default: the scenario's)")
    p.add_argument("--legacy-spread", action="store_true", help="also run the v0 spread rule")
    p.add_argument("--sensitivity", action="store_true",
                   help="also every effect on with one assumption moved at a time (SENSITIVITIES)")
    p.add_argument("--spread-models", default="",
                   help="comma-separated spread models to run too (gavel, allreduce)")
    args = p.parse_args(argv)
    seeds = parse_seeds(args.seeds)
    models = tuple(m for m in args.spread_models.split(",") if m)
    common = {"cluster_csv": args.cluster_csv} if args.cluster_csv else {}
    if args.load is not None:
        common["load"] = args.load
    for scenario in args.scenario.split(","):
        base = None
        print(f"{args.policy} on {scenario}/{args.split}, windows {seeds}")
        import cluster_env

        print("  " + cluster_env.parallel_env(scenario, split=args.split, **common).world_summary().line())
        for label, kwargs in configurations(args.legacy_spread, models, args.sensitivity):
            recs = baselines.evaluate(args.policy, scenario, split=args.split, seeds=seeds,
                                      env_kwargs={**common, **kwargs}, backend="serial")
            jct = np.array([r["avg_jct"] for r in recs])
            if base is None:
                base = jct
            ratio = float(np.exp(np.mean(np.log(jct / base))))
            print(f"  {label:<50} avg JCT {jct.mean():>12,.0f} s   x{ratio:.3f} of all-off")
    return 0


if __name__ == "__main__":
    sys.exit(main())
