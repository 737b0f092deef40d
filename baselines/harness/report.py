"""Result tables and files: mean and spread per metric per policy, CSV and JSON."""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from cluster_env.core.metrics import METRIC_KEYS

RECORD_KEYS = ("policy", "scenario", "split", "seed", *METRIC_KEYS, "return", "steps", "wall_s")
#: Metrics shown in the printed table (the files have all of them).
TABLE_METRICS = ("avg_jct", "p95_jct", "avg_queue_delay", "avg_slowdown", "gpu_utilization", "total_fee",
                 "preemptions")


def summarize(records: Sequence[dict[str, Any]], metrics: Iterable[str] = METRIC_KEYS) -> list[dict[str, Any]]:
    """One row per (scenario, policy): mean and sample standard deviation of each metric over seeds."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in records:
        groups.setdefault((r["scenario"], r["policy"]), []).append(r)
    rows = []
    for (scenario, policy), rs in groups.items():
        row: dict[str, Any] = {"scenario": scenario, "policy": policy, "seeds": len(rs)}
        for key in metrics:
            values = np.array([float(r[key]) for r in rs], dtype=np.float64)
            row[key] = float(values.mean())
            row[key + "_std"] = float(values.std(ddof=1)) if len(values) > 1 else 0.0
        rows.append(row)
    return rows


def _fmt(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3f}"


def format_table(records: Sequence[dict[str, Any]], metrics: Sequence[str] = TABLE_METRICS,
                 markdown: bool = False) -> str:
    """A table with one line per scenario and policy, ``mean ± std`` per metric (plain or Markdown)."""
    rows = summarize(records, metrics)
    header = ["scenario", "policy", "seeds", *metrics]
    cells = [[r["scenario"], r["policy"], str(r["seeds"]),
              *[f"{_fmt(r[m])} ± {_fmt(r[m + '_std'])}" for m in metrics]] for r in rows]
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" if i < 2 else "---:" for i in range(len(header))) + "|"]
        lines += ["| " + " | ".join(c) + " |" for c in cells]
        return "\n".join(lines)
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) if i < 2 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths)))]
    lines.append("  ".join("-" * w for w in widths))
    for c in cells:
        lines.append("  ".join(v.ljust(w) if i < 2 else v.rjust(w) for i, (v, w) in enumerate(zip(c, widths))))
    return "\n".join(lines)


def write_csv(records: Sequence[dict[str, Any]], path: "str | Path") -> Path:
    """One row per episode, every metric (written atomically: a failure keeps the old file)."""
    from baselines.harness.files import atomic_write

    def write(f) -> None:
        writer = csv.DictWriter(f, fieldnames=list(RECORD_KEYS), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(records)

    return atomic_write(path, write, newline="")


def write_json(records: Sequence[dict[str, Any]], path: "str | Path", **meta: Any) -> Path:
    """Episodes and their per-policy summary, with ``meta`` (scenario, seeds, versions...);
    written atomically (a failure, e.g. a full disk, keeps the old file)."""
    from baselines.harness.files import atomic_write

    payload = {"meta": meta, "summary": summarize(records), "episodes": [dict(r) for r in records]}
    text = json.dumps(payload, indent=2, allow_nan=True)
    return atomic_write(path, lambda f: f.write(text))
