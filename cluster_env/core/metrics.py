"""Episode metrics: the one implementation every part of the project uses.

Keys (docs/design.md section 7; times in seconds, fee in US dollars; :func:`episode_metrics` adds the
service objectives' metrics of ``cluster_env.core.objectives`` for a workload that has them):

=================  =============================================================================
``jobs_finished``  jobs that completed
``avg_jct``        mean job completion time (finish - submit) over finished jobs
``p50_jct``        median JCT; ``p95_jct`` and ``p99_jct`` the 95th and 99th percentiles
``avg_queue_delay`` mean of (first start - submit) over jobs that started: the wait before the
                   first start only
``avg_pending_time`` mean over finished jobs of the total time spent pending (JCT - time holding
                   GPUs): every wait, including those after preemptions
``avg_slowdown``   mean of JCT / ideal runtime; the ideal runtime is the job's work divided by its
                   nominal speed on the fastest GPU type it may use, consolidated and alone
``makespan``       last finish - first submit
``gpu_utilization`` GPU-seconds held by jobs / (cluster GPUs x makespan), in [0, 1]
``total_fee``      sum over held GPUs of the GPU type's price per GPU-hour x hours held
``energy_kwh``     busy power x held GPU time + idle power x idle GPU time, over the makespan
``preemptions``    number of preemptions
``fairness``       Jain's index of the tenants' mean slowdowns, in (0, 1]
``jobs_per_hour``  finished jobs / makespan in hours
=================  =============================================================================
"""
from __future__ import annotations

import numpy as np

from cluster_env.core.instance import Workload
from cluster_env.core.objectives import objective_metrics

METRIC_KEYS = (
    "jobs_finished", "avg_jct", "p50_jct", "p95_jct", "p99_jct", "avg_queue_delay", "avg_pending_time",
    "avg_slowdown", "makespan", "gpu_utilization", "total_fee", "energy_kwh", "preemptions",
    "fairness", "jobs_per_hour",
)


def jain_index(values: np.ndarray) -> float:
    """Jain's fairness index: (sum x)^2 / (n * sum x^2); 1 when all values are equal."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) == 0 or not np.any(values):
        return 1.0
    return float(values.sum() ** 2 / (len(values) * np.square(values).sum()))


def compute_metrics(submit: np.ndarray, first_start: np.ndarray, finish: np.ndarray,
                    ideal_runtime: np.ndarray, tenant: np.ndarray, *, total_gpus: int,
                    busy_gpu_seconds: float, total_fee: float, energy_joules: float,
                    preemptions: int, end_time: float, held: "np.ndarray | None" = None) -> dict[str, float]:
    """Metrics of one episode from per-job times (nan = not started / not finished).

    ``held`` (N,) is each job's time holding GPUs (restart overheads included); without it
    ``avg_pending_time`` is nan.

    ``end_time`` is the clock at the end of the episode; it bounds the makespan of a truncated
    episode. Utilisation, fee and energy are accounted up to ``end_time``.
    """
    done = ~np.isnan(finish)
    started = ~np.isnan(first_start)
    jct = (finish - submit)[done]
    slowdown = jct / ideal_runtime[done]
    first_submit = float(submit.min()) if len(submit) else 0.0
    last = float(finish[done].max()) if done.any() else end_time
    makespan = max(max(last, end_time) - first_submit, 0.0) if len(submit) else 0.0
    capacity = total_gpus * makespan

    def pct(q: float) -> float:
        return float(np.percentile(jct, q)) if len(jct) else float("nan")

    tenants = np.unique(tenant[done])
    per_tenant = np.array([slowdown[tenant[done] == t].mean() for t in tenants])
    pending = (jct - held[done]) if held is not None else np.zeros(0)
    return {
        "jobs_finished": int(done.sum()),
        "avg_jct": float(jct.mean()) if len(jct) else float("nan"),
        "p50_jct": pct(50), "p95_jct": pct(95), "p99_jct": pct(99),
        "avg_queue_delay": float((first_start - submit)[started].mean()) if started.any() else float("nan"),
        "avg_pending_time": float(pending.mean()) if len(pending) else float("nan"),
        "avg_slowdown": float(slowdown.mean()) if len(slowdown) else float("nan"),
        "makespan": makespan,
        "gpu_utilization": float(busy_gpu_seconds / capacity) if capacity > 0 else 0.0,
        "total_fee": float(total_fee),
        "energy_kwh": float(energy_joules / 3.6e6),
        "preemptions": int(preemptions),
        "fairness": jain_index(per_tenant),
        "jobs_per_hour": float(done.sum() / (makespan / 3600.0)) if makespan > 0 else 0.0,
    }


def episode_metrics(workload: Workload, submit: np.ndarray, first_start: np.ndarray, finish: np.ndarray,
                    ideal_runtime: np.ndarray, *, total_gpus: int, busy_gpu_seconds: float, total_fee: float,
                    energy_joules: float, preemptions: int, end_time: float, held: "np.ndarray | None" = None,
                    allocations: "list | None" = None) -> dict[str, float]:
    """Every metric of one episode: :func:`compute_metrics`' and, for a workload with service
    objectives, :func:`cluster_env.core.objectives.objective_metrics`' (the parallel env, the vector
    env's backends and the compiled harness all call this one function).

    ``allocations`` is the simulator's allocation log; a workload with tenant quotas needs it
    (``quota_violation`` integrates each tenant's GPUs over time), and a ``ValueError`` says so
    when it is missing rather than leaving the metric out."""
    metrics = compute_metrics(submit, first_start, finish, ideal_runtime, workload.tenant, total_gpus=total_gpus,
                              busy_gpu_seconds=busy_gpu_seconds, total_fee=total_fee, energy_joules=energy_joules,
                              preemptions=preemptions, end_time=end_time, held=held)
    if workload.has_objectives:     # classes, deadlines, quotas: docs/objectives.md
        if workload.tenant_quota is not None and allocations is None:
            raise ValueError(f"workload {workload.name!r} has tenant quotas: quota_violation needs the "
                             f"episode's allocation log")
        metrics.update(objective_metrics(workload, finish, ideal_runtime, total_gpus, allocations=allocations,
                                         now=end_time))
    return metrics


def format_metrics(metrics: dict[str, float], indent: str = "  ") -> str:
    """One aligned line per metric, in ``METRIC_KEYS`` order (for scripts and examples)."""
    lines = []
    for key in METRIC_KEYS:
        value = metrics[key]
        text = f"{value:>14,.3f}" if isinstance(value, float) else f"{value:>14,}"
        lines.append(f"{indent}{key:<16} {text}")
    return "\n".join(lines)
