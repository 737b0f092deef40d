"""How a scenario's jobs drift across its trace: the train split's slices against validation and test.

An agent trained on windows drawn from the whole train split learns the jobs of the trace's
early months; the test period's jobs can differ (on Philly, more multi-GPU and shorter jobs). This
prints, per slice of the workload (fractions of the whole trace), the share of multi-GPU jobs and of
jobs over 8 GPUs, the mean GPUs, the median and mean duration (the trace's durations, before any
time scaling) and the share of GPU-seconds in jobs over 8 GPUs: what ``--train-range`` of
``cluster-bench train-priority`` chooses between.

    python benchmarks/trace_drift.py --scenario modern-v1
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from cluster_env.scenarios import get_scenario  # noqa: E402


def slices(scenario) -> list[tuple[str, float, float]]:
    """The train split in halves and its last fifth, then the held-out splits (fractions of the trace)."""
    spans = [scenario.with_train_range(r).splits["train"] for r in ((0.0, 0.5), (0.5, 1.0), (0.8, 1.0))]
    out = [(label, *span) for label, span in zip(
        ("train, first half", "train, second half", "train, last fifth (--train-range 0.8,1)"), spans)]
    return out + [(name, *scenario.splits[name]) for name in scenario.splits if name != "train"]


def drift_rows(name: str) -> list[dict]:
    """One row of job statistics per slice of scenario ``name``'s workload."""
    scenario = get_scenario(name)
    w = scenario.workload()
    rows = []
    for label, lo, hi in slices(scenario):
        i, j = int(round(lo * w.num_jobs)), int(round(hi * w.num_jobs))
        g, d = np.asarray(w.gpus[i:j], dtype=np.float64), np.asarray(w.duration[i:j], dtype=np.float64)
        rows.append({"slice": label, "jobs": j - i, "multi_gpu": float(np.mean(g > 1)), "over_8": float(np.mean(g > 8)),
                     "mean_gpus": float(g.mean()), "median_duration_s": float(np.median(d)),
                     "mean_duration_s": float(d.mean()),
                     "gpu_s_over_8": float(np.sum(g[g > 8] * d[g > 8]) / np.sum(g * d))})
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="modern-v1")
    args = parser.parse_args(argv)
    print(f"{args.scenario}: jobs per slice of the trace (durations as in the trace)")
    print("| slice | jobs | multi-GPU | > 8 GPUs | mean GPUs | median duration (s) | mean duration (s) | "
          "GPU-s in > 8-GPU jobs |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in drift_rows(args.scenario):
        print(f"| {r['slice']} | {r['jobs']:,} | {r['multi_gpu']:.3f} | {r['over_8']:.3f} | {r['mean_gpus']:.2f} | "
              f"{r['median_duration_s']:,.0f} | {r['mean_duration_s']:,.0f} | {r['gpu_s_over_8']:.3f} |")


if __name__ == "__main__":
    main()
