"""Learning curve of a priority-agent ES run against wall time, on a fixed set of test windows.

``cluster-bench train-priority`` logs every iteration's weights in ``<run>/log.csv`` with its wall
time and validation ratio. This script scores the logged weights of every ``--every``-th iteration
(and every validated one with ``--validated``) on the same windows (test windows 0-99 by default),
paired with the untrained agent (LAS + the run's placer, or ``las-migrate`` with ``--migrate``),
and prints one row per checkpoint: wall time, CPU-hours (each iteration's wall time x its episode
workers, summed: the main process waits while they play; logs written before ``log.csv`` had a
``workers`` column take the run's last setting for those rows), validation ratio, test ratio
with its 95% bootstrap interval and wins. No test score selects anything here: it is the curve the docs report beside validation.

    python benchmarks/es_learning_curve.py runs/es-modern-v1 --every 20
    python benchmarks/es_learning_curve.py runs/es-modern-v1 --validated --out curve.json

Episodes run in the compiled engine (about 0.1 s of CPU for a 1,000-job window); a 100-window
checkpoint takes seconds.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from baselines.engine import run_weighted_las_episode  # noqa: E402
from baselines.harness.stats import geo_mean_ci  # noqa: E402
from dual_agent.priority import PriorityModel  # noqa: E402


def _avg_jct(task: tuple) -> float:
    linear, placer_w, placer, scenario, split, seed, migrate = task
    return float(run_weighted_las_episode(linear, placer, scenario, split, seed, placer_weights=placer_w,
                                          migrate=migrate).record["avg_jct"])


def run_config(run: Path) -> dict:
    """The ES config a run recorded in its agent files."""
    for name in ("last.priority.json", "best.priority.json"):
        if (run / name).exists():
            return json.loads((run / name).read_text())["training"]["config"]
    raise SystemExit(f"{run}: no last.priority.json or best.priority.json (not a train-priority run folder)")


def cpu_hours(rows: list[dict], default_workers: int) -> list[float]:
    """Cumulative CPU-hours at each row of ``log.csv``: every iteration's wall time times the
    workers it ran with (``default_workers`` where a row does not say)."""
    out, total, before = [], 0.0, 0.0
    for r in rows:
        wall = float(r["wall_s"])
        workers = int(r["workers"]) if r.get("workers") not in (None, "") else default_workers
        total += (wall - before) * workers
        before = wall
        out.append(total / 3600.0)
    return out


def checkpoints(run: Path, every: int, validated: bool, default_workers: int = 1) -> list[dict]:
    """Rows of ``log.csv`` to score: every ``every``-th iteration, the validated ones, the last;
    each with its cumulative ``cpu_hours`` (:func:`cpu_hours`)."""
    with open(run / "log.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    if not rows:
        raise SystemExit(f"{run / 'log.csv'}: no iteration logged")
    for r, hours in zip(rows, cpu_hours(rows, default_workers)):
        r["cpu_hours"] = hours
    keep = [r for r in rows if int(r["iteration"]) % every == 0 or (validated and r["val_ratio"] != "")]
    if keep[-1] is not rows[-1]:
        keep.append(rows[-1])
    return keep


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a train-priority run folder (log.csv and its agent files)")
    parser.add_argument("--every", type=int, default=10, help="score every N-th iteration (default 10)")
    parser.add_argument("--validated", action="store_true", help="also every iteration that was validated")
    parser.add_argument("--split", default="test", help="windows' split (default test)")
    parser.add_argument("--windows", type=int, default=100, help="windows 0..N-1 of the split (default 100)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    if args.every < 1 or args.windows < 1:
        parser.error("--every and --windows must be >= 1")
    config = run_config(args.run)
    if config.get("hidden", 0):
        raise SystemExit(f"{args.run}: hidden units ({config['hidden']}) do not run in the compiled engine")
    scenario, placer, migrate = config["scenario"], config["placer"], config.get("migrate")
    workers = int(config.get("workers", 1))
    seeds = range(args.windows)

    def costs(pool, theta: np.ndarray) -> np.ndarray:
        model = PriorityModel.zeros().with_flat(theta)
        tasks = [(model.linear, model.placer, placer, scenario, args.split, s, migrate) for s in seeds]
        return np.array(list((pool.map if pool else map)(_avg_jct, tasks)))

    rows = []
    with (ProcessPoolExecutor(args.workers) if args.workers > 1 else contextlib.nullcontext()) as pool:
        n = PriorityModel.zeros().flat().size
        reference = costs(pool, np.zeros(n))
        untrained = "las-migrate" if migrate == 1.5 else f"las+{placer}" + (f" moving at {migrate}" if migrate else "")
        print(f"{args.run}: {scenario}, {args.split} windows 0-{args.windows - 1}, paired with the untrained agent "
              f"({untrained}); CPU-hours = each iteration's wall x its workers (rows logged without "
              f"workers: {workers}, the run's last setting)")
        print(f"| iteration | wall (min) | CPU-h | episodes | validation ratio | {args.split} ratio | 95% CI | wins |")
        print("|---:|---:|---:|---:|---:|---:|---|---:|")
        for r in checkpoints(args.run, args.every, args.validated, workers):
            theta = np.array([float(r[f"w_{i}"]) for i in range(n)])
            ratio = costs(pool, theta) / reference
            g, lo, hi = geo_mean_ci(ratio)
            row = {"iteration": int(r["iteration"]), "wall_s": float(r["wall_s"]), "episodes": int(r["episodes"]),
                   "cpu_hours": r["cpu_hours"],
                   "val_ratio": float(r["val_ratio"]) if r["val_ratio"] else None,
                   "ratio": g, "ci": [lo, hi], "wins": int((ratio < 1).sum())}
            rows.append(row)
            val = "" if row["val_ratio"] is None else f"{row['val_ratio']:.4f}"
            print(f"| {row['iteration']} | {row['wall_s'] / 60:.1f} | {row['cpu_hours']:.2f} | {row['episodes']:,} | "
                  f"{val} | {g:.4f} | [{lo:.4f}, {hi:.4f}] | {row['wins']} |", flush=True)
    if args.out:
        args.out.write_text(json.dumps({"run": str(args.run), "scenario": scenario, "split": args.split,
                                        "windows": args.windows, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
