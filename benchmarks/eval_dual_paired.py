"""Paired statistics of a dual-agent checkpoint against the strongest heuristics.

The checkpoint is a ``.pt`` file (:class:`dual_agent.DualAgentPolicy`) or a priority-mode agent
(``.priority.json``, :mod:`dual_agent.priority`).

Runs the checkpoint and every reference on the same windows (default: philly-v1, test split,
windows 0-99, durations hidden: a claim rests on 100 test windows, docs/design.md section 9; fewer are
said in the output) once, then prints, per reference, the harness's paired summary
(``baselines.harness.stats.paired_summary``, what ``cluster-bench compare`` prints): the geometric
mean of the per-window ratio of average JCT, its 95% bootstrap interval and the win rate. With
``--clairvoyant`` the clairvoyant reference ``srpt-clairvoyant`` is scored too (it reads durations;
not an upper bound; ``--oracle`` is a deprecated alias of the flag, the policy's old name), and the
share of the headroom between the best reference and it that the agent takes is printed. ``--references agnostic`` scores every info-agnostic heuristic (``fifo``,
``fifo-strict``, ``tiresias``, ``las``, each with each of the placers ``first-fit``,
``consolidate``, ``spread``, ``fastest``) and compares the agent with the best of them on these
windows (lowest mean average JCT; chosen on the test windows themselves, which favours the
heuristic); ``agnostic,las-migrate`` adds ``las-migrate`` (the yardstick on heterogeneous clusters)
to them. ``--optimality`` also pairs the agent and each reference with the best-known value of
each window (the shipped optimality table, ``baselines/optimality/tables/<scenario>.json``; the
windows it holds) and prints the share of each reference's gap to best-known that the agent
closes: ``(r_ref - r_agent) / (r_ref - 1)`` of the geometric-mean ratios to best-known. ``--out``
writes the records and summaries as JSON.

    python benchmarks/eval_dual_paired.py runs/mine/best.pt [--scenario philly-v1] [--seeds 0-99]
        [--references las,tiresias|agnostic|agnostic,las-migrate] [--clairvoyant] [--optimality]
        [--out paired.json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import baselines  # noqa: E402
from baselines.cli import parse_seeds  # noqa: E402
from baselines.harness.stats import paired_summary  # noqa: E402

#: Test windows a claim rests on (docs/design.md section 9): per-window log-ratio spreads of 0.04-0.35.
CLAIM_WINDOWS = 100

#: The clairvoyant reference ``--clairvoyant`` scores (formerly ``oracle``: docs/baselines.md).
CLAIRVOYANT = "srpt-clairvoyant"

#: The info-agnostic heuristics, every orderer with every placer, a reference set (``--references agnostic``).
AGNOSTIC = tuple(f"{o}+{p}" for o in ("fifo", "fifo-strict", "tiresias", "las")
                 for p in ("first-fit", "consolidate", "spread", "fastest"))


def _row(s) -> dict:
    return {"n": s.n, "ratio": s.geo_mean, "lo": s.ci_low, "hi": s.ci_high, "win_rate": s.win_rate,
            "mean": s.mean, "ref_mean": s.reference_mean}


def evaluate_paired(checkpoint: str, scenario: str, split: str, seeds: list[int], references: list[str],
                    clairvoyant: bool = False, workers: int = 1, env_kwargs: "dict | None" = None,
                    allow_transfer: bool = False) -> dict:
    """Records of the agent and references on the same windows, and the paired summaries."""
    if checkpoint.endswith(".priority.json"):     # the priority-mode agent: numpy, no torch
        from dual_agent.priority import load_priority_agent

        policy = load_priority_agent(checkpoint, name="dual")
    else:
        import torch

        from dual_agent import DualAgentPolicy

        torch.set_num_threads(1)
        policy = DualAgentPolicy.load(checkpoint, name="dual", allow_transfer=allow_transfer)
    records, walls = [], {}
    for who in [policy, *references, *([CLAIRVOYANT] if clairvoyant else [])]:
        t0 = time.perf_counter()
        # --allow-transfer scores an agent trained on another scenario: the harness's env-mismatch check allows it.
        records += baselines.evaluate(who, scenario, split=split, seeds=seeds, workers=workers, env_kwargs=env_kwargs,
                                      allow_env_mismatch=allow_transfer)
        walls[getattr(who, "name", who)] = time.perf_counter() - t0
    out = {"scenario": scenario, "split": split, "seeds": seeds, "wall_s": walls, "summaries": {}, "records": records}
    means = {ref: sum(r["avg_jct"] for r in records if r["policy"] == ref) / len(seeds) for ref in references}
    out["best_reference"] = min(references, key=means.__getitem__)
    for ref in [*references, *([CLAIRVOYANT] if clairvoyant else [])]:
        s = paired_summary(records, "dual", ref)
        out["summaries"][ref] = _row(s)
    if clairvoyant:
        for ref in references:
            s = paired_summary(records, CLAIRVOYANT, ref)
            out["summaries"][f"clairvoyant_vs_{ref}"] = _row(s)
    return out


BEST_KNOWN = "best-known"


def gap_to_best_known(records: list[dict], scenario: str, references: list[str]) -> dict:
    """Per policy (``dual`` and ``references``), the paired ratio to the best-known value of each
    window (the shipped optimality table; only windows it holds whose workload digest matches),
    and per reference the share of its gap to best-known that ``dual`` closes. Empty where no
    table ships for ``scenario`` or no record's window is in it."""
    from baselines.optimality.table import reference_for

    known = []
    for r in records:
        ref = reference_for(r) if r["policy"] == "dual" else None
        if ref is not None:
            known.append({**r, "policy": BEST_KNOWN, "avg_jct": ref.best_known})
    if not known:
        return {}
    seeds = {r["seed"] for r in known}
    pool = known + [r for r in records if r["seed"] in seeds and not r.get("env") and not r.get("truncated")]
    out = {"windows": len(seeds), "ratios": {}, "gap_closed": {}}
    for who in ["dual", *references]:
        s = paired_summary(pool, who, BEST_KNOWN)
        out["ratios"][who] = _row(s)
    for ref in references:
        r_ref, r_dual = out["ratios"][ref]["ratio"], out["ratios"]["dual"]["ratio"]
        out["gap_closed"][ref] = (r_ref - r_dual) / (r_ref - 1) if r_ref > 1 else float("nan")
    return out


def expand_references(text: str) -> list[str]:
    """``--references``: comma-separated policy names, where ``agnostic`` stands for the 16
    :data:`AGNOSTIC` heuristics (``agnostic,las-migrate`` adds the migration rule to them)."""
    refs: list[str] = []
    for name in (r for r in text.split(",") if r):
        for ref in (AGNOSTIC if name == "agnostic" else (name,)):
            if ref not in refs:
                refs.append(ref)
    return refs


def few_windows_note(windows: int) -> str:
    """The line that flags a comparison over fewer than :data:`CLAIM_WINDOWS` distinct windows
    (empty when there are enough)."""
    if windows >= CLAIM_WINDOWS:
        return ""
    return (f"note: {windows} distinct windows, fewer than the {CLAIM_WINDOWS} a claim rests on: a pilot figure, "
            f"not a claim")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoint")
    p.add_argument("--scenario", default="philly-v1")
    p.add_argument("--split", default="test")
    p.add_argument("--seeds", default=f"0-{CLAIM_WINDOWS - 1}",
                   help=f"test windows (default 0-{CLAIM_WINDOWS - 1}; fewer are flagged as not carrying a claim)")
    p.add_argument("--references", default="las,tiresias")
    p.add_argument("--clairvoyant", action="store_true",
                   help=f"also score the clairvoyant reference {CLAIRVOYANT} (reads durations; not an upper bound)")
    p.add_argument("--oracle", action="store_true", help="deprecated alias of --clairvoyant")
    p.add_argument("--optimality", action="store_true",
                   help="also pair everything with the best-known value of each window (shipped optimality "
                        "table) and print the share of each reference's gap to it that the agent closes")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--out", default=None)
    p.add_argument("--jobs-per-episode", type=int, default=None, help="shorter windows (smoke runs only)")
    p.add_argument("--allow-transfer", action="store_true",
                   help="score the agent on another scenario than it was trained for, with other numbers of "
                        "machines or rows too (generalisation)")
    args = p.parse_args()
    if args.oracle:
        print("eval_dual_paired.py: --oracle is deprecated, use --clairvoyant (it scores srpt-clairvoyant, "
              "formerly oracle)", file=sys.stderr)
        args.clairvoyant = True
    refs = expand_references(args.references)
    res = evaluate_paired(args.checkpoint, args.scenario, args.split, parse_seeds(args.seeds), refs, args.clairvoyant,
                          args.workers, {"jobs_per_episode": args.jobs_per_episode} if args.jobs_per_episode else None,
                          args.allow_transfer)
    print(f"{args.checkpoint} on {args.scenario}/{args.split}, windows {args.seeds}; ratio of average JCT "
          f"(geometric mean of per-window ratios, 95% bootstrap interval), win rate")
    note = few_windows_note(min(s["n"] for s in res["summaries"].values()))
    if note:
        print(f"  {note}")
    for name, s in res["summaries"].items():
        print(f"  dual vs {name:18s} ratio {s['ratio']:.3f} [{s['lo']:.3f}, {s['hi']:.3f}]  win rate "
              f"{s['win_rate']:.2f}  mean JCT {s['mean']:,.0f} s vs {s['ref_mean']:,.0f} s (n={s['n']})"
              if not name.startswith("clairvoyant_vs_") else
              f"  {CLAIRVOYANT} vs {name[15:]:16s} ratio {s['ratio']:.3f} [{s['lo']:.3f}, {s['hi']:.3f}]  win rate "
              f"{s['win_rate']:.2f}")
    best = res["best_reference"]
    s = res["summaries"][best]
    print(f"  best info-agnostic reference on these windows: {best}; dual/{best} ratio {s['ratio']:.3f} "
          f"[{s['lo']:.3f}, {s['hi']:.3f}], win rate {s['win_rate']:.2f}")
    if args.clairvoyant:
        a, o = res["summaries"][best]["ratio"], res["summaries"][f"clairvoyant_vs_{best}"]["ratio"]
        if o < 1:
            print(f"  headroom taken: {(1 - a) / (1 - o):.0%} of the way from {best} to {CLAIRVOYANT} "
                  "(geometric ratios)")
        else:
            print(f"  headroom: none; {CLAIRVOYANT} is not better than {best} on these windows (ratio {o:.3f})")
    if args.optimality:
        gap = gap_to_best_known(res["records"], args.scenario, refs)
        res["best_known"] = gap
        if not gap:
            print(f"  best-known: no optimality table holds these windows of {args.scenario}")
        else:
            print(f"  ratio to best-known (shipped optimality table, {gap['windows']} windows):")
            for name, s in gap["ratios"].items():
                closed = (f"; dual closes {gap['gap_closed'][name]:.0%} of its gap to best-known"
                          if name in gap["gap_closed"] else "")
                print(f"    {name:18s} {s['ratio']:.3f} [{s['lo']:.3f}, {s['hi']:.3f}]{closed}")
    print("  wall seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in res["wall_s"].items()))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(res, fh, indent=1, default=float)


if __name__ == "__main__":
    main()
