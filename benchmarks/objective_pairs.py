"""Paired tables on several metrics at once, from episodes already run: the "objective, average
JCT and fee side by side" tables of docs/objectives.md ("Learned agent").

``cluster-bench compare A B --metric M`` pairs two policies on one metric; its ``--out`` file (and
``cluster-bench run --out``'s ``results.json``) holds every metric of every episode. This script
reads such files (episodes of several files are merged: e.g. a run of the rules and a compare of
an agent with the strongest of them) and pairs them with :func:`baselines.harness.stats.paired_summary`
(the same 95% bootstrap interval of the geometric-mean ratio and win rate as ``compare``):

    # one policy against the reference, one row per metric
    python benchmarks/objective_pairs.py runs/agent-vs-quota.json --policy AGENT --reference quota \\
        --metrics tenant_max_slowdown,avg_jct,total_fee,quota_violation,preemptions
    # every policy of the files against the reference on one metric (which rule is strongest)
    python benchmarks/objective_pairs.py runs/tenants-rules/results.json --reference quota \\
        --metrics tenant_max_slowdown

``--json FILE`` also writes the summaries (the figures docs/objectives.md quotes are tested against
such a file: tests/test_priority_objective.py).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def load_episodes(paths: Sequence["str | Path"]) -> list[dict[str, Any]]:
    """The episode records of ``compare --out`` / ``run --out`` JSON files, merged (a record of the
    same policy and window in two files is kept once: the first file's)."""
    from baselines.harness.stats import window_key

    seen, records = set(), []
    for path in paths:
        try:
            doc = json.loads(Path(path).read_text())
        except (OSError, ValueError) as err:
            raise SystemExit(f"{path}: not a readable JSON file of episodes ({err})")
        if not isinstance(doc, dict) or not isinstance(doc.get("episodes"), list):
            raise SystemExit(f"{path}: no 'episodes' list (expected a cluster-bench compare/run --out file)")
        for record in doc["episodes"]:
            key = (record.get("policy"), window_key(record))
            if key not in seen:
                seen.add(key)
                records.append(record)
    return records


def summaries(records: Sequence[dict[str, Any]], reference: str, metrics: Sequence[str],
              policies: Optional[Sequence[str]] = None) -> list[dict[str, Any]]:
    """One row per (policy, metric): the paired summary of the policy against ``reference`` as a
    dict (policy, reference, metric, n, mean, reference_mean, geo_mean, ci_low, ci_high, wins,
    ties, units, undefined)."""
    from baselines.harness.stats import paired_summary

    names = list(policies) if policies else [p for p in dict.fromkeys(r["policy"] for r in records) if p != reference]
    rows = []
    for policy in names:
        for metric in metrics:
            s = paired_summary(records, policy, reference, metric)
            ties = sum(1 for r in s.ratios if r == 1.0)
            rows.append({"policy": policy, "reference": reference, "metric": metric, "n": s.n, "mean": s.mean,
                         "reference_mean": s.reference_mean, "geo_mean": s.geo_mean, "ci_low": s.ci_low,
                         "ci_high": s.ci_high, "wins": s.wins, "ties": ties, "units": s.units,
                         "undefined": s.undefined})
    return rows


def policy_means(records: Sequence[dict[str, Any]], metrics: Sequence[str]) -> dict[str, dict[str, float]]:
    """Each policy's plain mean of each metric over its episodes (None values left out): e.g. the
    share of JCT spent pending, ``avg_pending_time`` over ``avg_jct``, that says how much room
    an order has on a scenario."""
    from baselines.harness.files import number

    out: dict[str, dict[str, float]] = {}
    for policy in dict.fromkeys(r["policy"] for r in records):
        mine = [r for r in records if r["policy"] == policy]
        out[policy] = {m: float(np.nanmean([number(r.get(m)) for r in mine])) for m in metrics}
    return out


def _value(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.4g}"


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The rows as the Markdown table docs/objectives.md quotes."""
    lines = ["| policy | metric | policy (mean) | reference (mean) | ratio, geometric mean [95% interval] | policy better | ties |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| `{r['policy']}` | `{r['metric']}` | {_value(r['mean'])} | `{r['reference']}` "
                     f"{_value(r['reference_mean'])} | {r['geo_mean']:.4f} [{r['ci_low']:.4f}, {r['ci_high']:.4f}] "
                     f"| {r['wins']}/{r['units']} | {r['ties']} |")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", help="cluster-bench compare/run --out JSON files")
    parser.add_argument("--reference", required=True, help="the policy every ratio is taken against")
    parser.add_argument("--policy", action="append", help="policy to pair (repeatable; default: all but the reference)")
    parser.add_argument("--metrics", default="avg_jct", help="comma-separated metrics (default avg_jct)")
    parser.add_argument("--means", default="", help="also print each policy's plain mean of these comma-separated metrics")
    parser.add_argument("--json", help="also write the rows (and the means) to this JSON file")
    args = parser.parse_args(argv)
    records = load_episodes(args.files)
    rows = summaries(records, args.reference, [m for m in args.metrics.split(",") if m], args.policy)
    print(markdown(rows))
    means = policy_means(records, [m for m in args.means.split(",") if m])
    for policy, values in means.items():
        if values:
            print(f"{policy}: " + ", ".join(f"{m} {_value(v)}" for m, v in values.items()))
    if args.json:
        from baselines.harness.files import atomic_write, json_text

        atomic_write(Path(args.json), lambda f: f.write(json_text({"rows": rows, "means": means})))
    return 0


if __name__ == "__main__":
    sys.exit(main())
