"""Paired ablation table of priority-mode agents: every variant and one reference
heuristic on the same windows, ratios with 95% bootstrap intervals.

Each variant is ``LABEL=PATH`` (a ``.priority.json`` file, :mod:`dual_agent.priority`), optionally
``LABEL=PATH@PLACER`` to compose the same learned orderer with another heuristic placer (how much
of the agent is the placer). Every variant and the ``--reference`` heuristic play the same windows
(default: test windows 0-99, durations hidden; the linear agents run in the compiled engine, so a
100-window column costs seconds). The table has, per variant: its training budget (episodes, from
the file's training record), the paired ratio of average JCT to the reference (geometric mean of
per-window ratios, 95% bootstrap interval, win rate) and the paired ratio to the first variant
(the one the others ablate).

    python benchmarks/priority_ablations.py --scenario philly-hetero-v1 --reference las+fastest \\
        shipped=dual_agent/pretrained/philly-hetero-v1.priority.json \\
        independent=runs/ablate-independent/best.priority.json [--seeds 0-99] [--out table.json]
"""
from __future__ import annotations

import argparse
import json
import os
from dataclasses import replace

os.environ.setdefault("OMP_NUM_THREADS", "1")

import baselines  # noqa: E402
from baselines.cli import parse_seeds  # noqa: E402
from baselines.harness.stats import paired_summary  # noqa: E402


def parse_variant(text: str) -> tuple[str, str, "str | None"]:
    """``LABEL=PATH[@PLACER]`` -> (label, path, placer or None); ValueError naming the text."""
    label, sep, rest = text.partition("=")
    if not sep or not label or not rest:
        raise ValueError(f"variant {text!r}: expected LABEL=PATH or LABEL=PATH@PLACER")
    path, _, placer = rest.partition("@")
    return label, path, placer or None


def load_variant(label: str, path: str, placer: "str | None"):
    """The priority agent of ``path`` named ``label`` (with ``placer`` in place of its own)."""
    from dual_agent.priority import PriorityAgentPolicy, load_priority_agent

    agent = load_priority_agent(path, name=label)
    if placer is None:
        return agent
    return PriorityAgentPolicy(agent.model, replace(agent.spec, placer=placer), name=label)


def ablation_table(variants: list[str], scenario: str, reference: str, split: str = "test",
                   seeds: "list[int] | None" = None, env_kwargs: "dict | None" = None) -> dict:
    """Records and paired summaries of every variant against ``reference`` and the first variant."""
    seeds = list(range(100)) if seeds is None else seeds
    parsed = [parse_variant(v) for v in variants]
    labels = [p[0] for p in parsed]
    if len(set(labels)) != len(labels) or reference in labels:
        raise ValueError(f"variant labels must be unique and differ from the reference: {labels}")
    records = baselines.evaluate(reference, scenario, split=split, seeds=seeds, env_kwargs=env_kwargs)
    rows = []
    for label, path, placer in parsed:
        agent = load_variant(label, path, placer)
        records += baselines.evaluate(agent, scenario, split=split, seeds=seeds, env_kwargs=env_kwargs)
        training = agent.spec.training
        rows.append({"variant": label, "path": path, "placer": agent.spec.placer,
                     "episodes": training.get("episodes"), "train_wall_s": training.get("wall_s"),
                     "validation_ratio": training.get("validation_ratio_to_untrained"),
                     "weights": [round(float(w), 3) for w in agent.model.linear]})
    for row in rows:
        for key, ref in (("vs_reference", reference), ("vs_first", labels[0])):
            if key == "vs_first" and row["variant"] == labels[0]:
                continue
            s = paired_summary(records, row["variant"], ref)
            row[key] = {"ratio": s.geo_mean, "lo": s.ci_low, "hi": s.ci_high, "win_rate": s.win_rate, "n": s.n}
    return {"scenario": scenario, "split": split, "seeds": seeds, "reference": reference, "rows": rows,
            "records": records}


def _fmt(s: "dict | None") -> str:
    if s is None:
        return "-"
    return f"{s['ratio']:.3f} [{s['lo']:.3f}, {s['hi']:.3f}], win {s['win_rate']:.2f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("variants", nargs="+", help="LABEL=PATH or LABEL=PATH@PLACER (the first is the one ablated)")
    p.add_argument("--scenario", default="philly-hetero-v1")
    p.add_argument("--reference", default="las+fastest")
    p.add_argument("--split", default="test")
    p.add_argument("--seeds", default="0-99")
    p.add_argument("--jobs-per-episode", type=int, default=None, help="shorter windows (smoke runs only)")
    p.add_argument("--out", default=None, help="write the rows and records as JSON")
    args = p.parse_args()
    try:
        res = ablation_table(args.variants, args.scenario, args.reference, args.split, parse_seeds(args.seeds),
                             {"jobs_per_episode": args.jobs_per_episode} if args.jobs_per_episode else None)
    except ValueError as exc:       # a malformed variant, a bad agent file (the message names it)
        p.error(str(exc))
    first = res["rows"][0]["variant"]
    print(f"{args.scenario}/{args.split}, windows {args.seeds}; paired ratio of average JCT (geometric mean, 95% "
          f"bootstrap interval, win rate)\n")
    print(f"| variant | placer | training episodes | validation ratio | vs {args.reference} | vs {first} |")
    print("|---|---|---:|---:|---|---|")
    for row in res["rows"]:
        val = row["validation_ratio"]
        print(f"| {row['variant']} | {row['placer']} | {row['episodes'] or '-'} | "
              f"{'-' if val is None else f'{val:.3f}'} | {_fmt(row['vs_reference'])} | {_fmt(row.get('vs_first'))} |")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(res, fh, indent=1, default=float)


if __name__ == "__main__":
    main()
