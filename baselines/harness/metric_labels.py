"""What each metric is called for a reader, and its unit: the one label map that plots and tables use.

Records, CSV columns and score files keep the code names (``avg_jct``); a plot's axis or legend
and a table's header say what the number is and in which unit. Stored values are in the units of
:mod:`cluster_env.core.metrics` (times in seconds, fee in US dollars); plots show times in hours.
"""
from __future__ import annotations

from typing import NamedTuple


class MetricLabel(NamedTuple):
    """A metric's reader-facing name and the unit its values are stored in ("" if none)."""

    name: str
    unit: str


#: Every metric of :data:`cluster_env.core.metrics.METRIC_KEYS`, the summaries' derived columns
#: and the harness's per-episode fields that tables show (a test checks the map covers them).
METRIC_LABELS: dict[str, MetricLabel] = {
    "jobs_finished": MetricLabel("jobs finished", "jobs"),
    "avg_jct": MetricLabel("average JCT", "s"),
    "p50_jct": MetricLabel("median JCT", "s"),
    "p95_jct": MetricLabel("95th-percentile JCT", "s"),
    "p99_jct": MetricLabel("99th-percentile JCT", "s"),
    "avg_queue_delay": MetricLabel("average wait before the first start", "s"),
    "avg_pending_time": MetricLabel("average time pending", "s"),
    "avg_slowdown": MetricLabel("average slowdown (JCT / ideal runtime)", "x"),
    "makespan": MetricLabel("makespan", "s"),
    "gpu_utilization": MetricLabel("GPU utilisation", "fraction"),
    "total_fee": MetricLabel("cloud fee", "US$"),
    "energy_kwh": MetricLabel("energy", "kWh"),
    "preemptions": MetricLabel("preemptions", "count"),
    "fairness": MetricLabel("fairness (Jain's index of tenants' slowdowns)", "0-1"),
    "jobs_per_hour": MetricLabel("throughput", "jobs/h"),
    "preemptions_per_job": MetricLabel("preemptions per finished job", ""),
    "offered_load": MetricLabel("offered load", "x capacity"),
    # Service objectives (cluster_env.core.objectives, docs/objectives.md)
    "deadline_jobs": MetricLabel("jobs with a deadline", "jobs"),
    "deadline_attainment": MetricLabel("deadline attainment", "fraction"),
    "hp_avg_jct": MetricLabel("average JCT of high-priority jobs", "s"),
    "be_avg_jct": MetricLabel("average JCT of best-effort jobs", "s"),
    "tenant_max_slowdown": MetricLabel("largest tenant mean slowdown", "x"),
    "ftf_max_rho": MetricLabel("finish-time fairness (largest tenant mean rho)", "x"),
    "quota_violation": MetricLabel("share of guaranteed GPU-time not delivered", "fraction"),
}

_HOUR = 3600.0


def metric_name(key: str) -> str:
    """The reader's name of ``key`` (``"average JCT"``); an unknown key is shown as it is."""
    label = METRIC_LABELS.get(key)
    return label.name if label else key


def table_header(key: str) -> str:
    """A table column head: the code name (the CSV column) and the stored unit, ``avg_jct (s)``."""
    label = METRIC_LABELS.get(key)
    return f"{key} ({label.unit})" if label and label.unit else key


def plot_scale(key: str) -> tuple[float, str]:
    """``(divisor, axis label)`` for plotting ``key``: times in hours, others in their own unit."""
    label = METRIC_LABELS.get(key)
    if label is None:
        return 1.0, key
    if label.unit == "s":
        return _HOUR, f"{label.name} (hours)"
    return 1.0, f"{label.name} ({label.unit})" if label.unit not in ("", "count") else label.name
