"""Where the room is: the shipped references, paired against the yardstick.

Runs ``las``, ``las+fastest``, ``las-migrate``, the clairvoyant ``srpt-clairvoyant``, ``tiresias`` and the
shipped agent ``dual`` (when it loads for the scenario) on the same test windows, then
prints per policy the paired summary against the reference (``las+fastest`` by default, ``las``
on philly-v1): the geometric mean of the per-window ratio of average JCT, its 95% bootstrap
interval, the win rate and the number of distinct windows (``baselines.harness.stats``, what
``cluster-bench compare`` prints). Policies the compiled engine supports run there.

    python benchmarks/headroom.py [--scenario philly-hetero-v1] [--windows 100] [--reference las+fastest]
        [--policies las,las+fastest,...] [--jobs-per-episode N (smoke runs only)] [--out headroom.json]

``--optimality`` prints instead the room table (docs/optimality.md, "The room per scenario") from the shipped optimality table
(``baselines/optimality/tables/<scenario>.json``, test windows 0..N-1 that it holds): the certified
lower bound, the best-known schedule, the best rule of each window (the best of the search's rules,
picked per window in hindsight), the strongest single rule (``las-migrate``) and the shipped agent
(``dual``, where one ships), each as the geometric mean of its per-window ratio to the best-known
value with a 95% bootstrap interval, and to the lower bound::

    python benchmarks/headroom.py --optimality --scenario philly-hetero-v2 [--windows 100]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Optional

os.environ.setdefault("OMP_NUM_THREADS", "1")

import baselines  # noqa: E402
from baselines.harness.stats import paired_summary  # noqa: E402

#: The policies of the headroom table, in its order.
POLICIES = ("las", "las+fastest", "las-migrate", "srpt-clairvoyant", "tiresias", "dual")


def default_reference(scenario: str) -> str:
    """The yardstick: ``las`` on philly-v1 (no reference beats it there), else ``las+fastest``."""
    return "las" if scenario.startswith("philly-v") else "las+fastest"


def headroom(scenario: str, windows: int, reference: Optional[str] = None, policies=POLICIES,
             env_kwargs: Optional[dict] = None, workers: int = 1) -> dict:
    """Records and paired summaries of ``policies`` against ``reference`` on test windows
    0..windows-1. A policy that cannot be built here (the shipped agent without its file) is
    listed under ``skipped`` with the reason."""
    reference = reference or default_reference(scenario)
    names = list(dict.fromkeys([reference, *policies]))
    seeds = list(range(windows))
    records, walls, skipped = [], {}, {}
    for name in names:
        t0 = time.perf_counter()
        try:
            records += baselines.evaluate(name, scenario, "test", seeds, env_kwargs=env_kwargs, workers=workers)
        except (ValueError, ImportError, FileNotFoundError) as exc:
            if name == reference:
                raise
            skipped[name] = f"{type(exc).__name__}: {exc}"
            continue
        walls[name] = time.perf_counter() - t0
    rows = {}
    for name in walls:
        s = paired_summary(records, name, reference)
        rows[name] = {"ratio": s.geo_mean, "lo": s.ci_low, "hi": s.ci_high, "win_rate": s.win_rate,
                      "distinct": s.distinct, "n": s.n, "mean": s.mean, "preemptions": _mean(records, name,
                                                                                            "preemptions")}
    return {"scenario": scenario, "reference": reference, "windows": windows, "env_kwargs": env_kwargs or {},
            "rows": rows, "skipped": skipped, "wall_s": walls, "records": records}


def _mean(records: list[dict], policy: str, key: str) -> float:
    values = [float(r[key]) for r in records if r["policy"] == policy]
    return sum(values) / len(values) if values else float("nan")


def format_table(result: dict) -> str:
    """The table as Markdown (ratio to the reference, interval, win rate, distinct windows)."""
    ref = result["reference"]
    lines = [f"| policy | ratio to `{ref}` | 95% CI | win rate | distinct windows | mean avg JCT (s) | "
             f"preemptions / window |", "|---|---|---|---|---|---|---|"]
    for name, r in result["rows"].items():
        ci = "-" if name == ref else f"[{r['lo']:.3f}, {r['hi']:.3f}]"
        win = "-" if name == ref else f"{r['win_rate']:.2f}"
        lines.append(f"| `{name}` | {r['ratio']:.3f} | {ci} | {win} | {r['distinct']} | {r['mean']:,.0f} | "
                     f"{r['preemptions']:,.0f} |")
    for name, why in result["skipped"].items():
        lines.append(f"| `{name}` | not run: {why} | | | | | |")
    return "\n".join(lines)


#: Rows of the room table read from the shipped optimality table, and the policies run beside them.
ROOM_TABLE_ROWS = ("lower bound", "best-known", "best rule per window")
#: The yardstick (``baselines.yardstick``) comes first; ``fifo`` and ``random`` are always shown.
ROOM_POLICIES = ("las-migrate", "las", "fifo", "random", "dual")


def room_policies(scenario: str) -> tuple:
    """The policies of ``scenario``'s room table: its yardstick, then :data:`ROOM_POLICIES`."""
    from baselines.yardstick import yardstick

    return tuple(dict.fromkeys((yardstick(scenario), *ROOM_POLICIES)))


def room(scenario: str, windows: int = 100, policies=None, workers: int = 1) -> dict:
    """The room table of ``scenario``: per row, the paired ratio to the best-known value and the
    geometric-mean ratio to the lower bound, over the table's test windows below ``windows``
    (``policies``: default :func:`room_policies`)."""
    from baselines.optimality import load_table

    if policies is None:
        policies = room_policies(scenario)

    table = load_table(scenario)
    if not table:
        raise SystemExit(f"no optimality table ships for {scenario}")
    seeds = sorted(s for s in table if s < windows)
    doc = json.loads((Path(baselines.__file__).parent / "optimality" / "tables" / f"{scenario}.json").read_text())
    base = {"scenario": scenario, "split": "test", "env": "", "truncated": False}
    records = []
    for s in seeds:
        row = doc["windows"][str(s)]
        for name, value in zip(ROOM_TABLE_ROWS, (row["lower_bound"], row["best_known"], row["best_rule_value"])):
            records.append({**base, "policy": name, "seed": s, "window": row["window"], "avg_jct": float(value)})
    skipped = {}
    for name in policies:
        try:
            records += baselines.evaluate(name, scenario, "test", seeds, workers=workers)
        except (ValueError, ImportError, FileNotFoundError) as exc:
            skipped[name] = f"{type(exc).__name__}: {exc}"
    rows = {}
    for name in dict.fromkeys(r["policy"] for r in records):
        s = paired_summary(records, name, "best-known")
        to_bound = paired_summary(records, name, "lower bound")
        rows[name] = {"ratio": s.geo_mean, "lo": s.ci_low, "hi": s.ci_high, "distinct": s.distinct, "mean": s.mean,
                      "to_bound": to_bound.geo_mean, "bound_lo": to_bound.ci_low, "bound_hi": to_bound.ci_high}
    return {"scenario": scenario, "windows": seeds, "rows": rows, "skipped": skipped, "records": records,
            "best_known_by": sorted({doc["windows"][str(s)]["best_known_by"] for s in seeds})}


def format_room(result: dict) -> str:
    """The room table as Markdown."""
    lines = ["| row | ratio to best-known | 95% CI | ratio to lower bound | 95% CI | mean avg JCT (s) |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, r in result["rows"].items():
        ci = "-" if name == "best-known" else f"[{r['lo']:.3f}, {r['hi']:.3f}]"
        bci = "-" if name == "lower bound" else f"[{r['bound_lo']:.3f}, {r['bound_hi']:.3f}]"
        lines.append(f"| {name} | {r['ratio']:.3f} | {ci} | {r['to_bound']:.3f} | {bci} | {r['mean']:,.0f} |")
    for name, why in result["skipped"].items():
        lines.append(f"| `{name}` | not run: {why.split(';')[0]} | | | | |")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenario", default="philly-hetero-v1")
    p.add_argument("--windows", type=int, default=100, help="test windows 0..N-1 (default 100)")
    p.add_argument("--reference", default=None, help="default: las on philly-v1, else las+fastest")
    p.add_argument("--policies", default=",".join(POLICIES))
    p.add_argument("--jobs-per-episode", type=int, default=None, help="shorter windows (smoke runs only)")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--out", default=None, help="write the records and the table's rows as JSON")
    p.add_argument("--optimality", action="store_true",
                   help="the room table: lower bound, best-known, best rule, the yardstick, las-migrate, fifo, "
                        "random, dual (shipped tables)")
    args = p.parse_args(argv)
    if args.windows < 1:
        p.error("--windows must be >= 1")
    if args.optimality:
        t0 = time.perf_counter()
        result = room(args.scenario, args.windows, workers=args.workers)
        seeds = result["windows"]
        print(f"{args.scenario}/test, {len(seeds)} windows ({seeds[0]}-{seeds[-1]}) of the shipped optimality "
              f"table, average JCT paired against the best-known schedule ({time.perf_counter() - t0:.0f} s)")
        print(format_room(result))
        print("best-known by: " + "; ".join(result["best_known_by"]))
        if args.out:
            with open(args.out, "w") as fh:
                json.dump(result, fh, indent=1, default=float)
        return 0
    env_kwargs = {"jobs_per_episode": args.jobs_per_episode} if args.jobs_per_episode else None
    t0 = time.perf_counter()
    result = headroom(args.scenario, args.windows, args.reference,
                      [x.strip() for x in args.policies.split(",") if x.strip()], env_kwargs, args.workers)
    print(f"{args.scenario}/test, windows 0-{args.windows - 1}, average JCT, paired against {result['reference']} "
          f"({time.perf_counter() - t0:.0f} s)")
    print(format_table(result))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(result, fh, indent=1, default=float)
    return 0


if __name__ == "__main__":
    sys.exit(main())
