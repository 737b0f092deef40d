"""Service objectives beyond average JCT: job classes, deadlines, tenant quotas, and their metrics.

A workload may carry (all optional, :class:`cluster_env.core.instance.Workload`):

* ``job_class`` (N,): an index into :data:`JOB_CLASSES` (``best-effort``, the spot work a
  scheduler may preempt for higher classes, or ``high-priority``);
* ``deadline`` (N,): seconds after the job's submit time by which it should finish (a relative
  deadline, so load scaling and time tiling keep its meaning); NaN: no deadline;
* ``tenant_quota`` (T,): a tenant's guaranteed share of the cluster's GPUs in [0, 1]; NaN: none;
* ``tenant_borrow`` (T,): whether the tenant may run beyond its quota on idle GPUs (borrowing),
  at the risk of being preempted when an owner reclaims them.

Metrics (:data:`OBJECTIVE_KEYS`, added to an episode's metrics when its workload has objectives;
see docs/objectives.md for the sources):

=======================  =========================================================================
``deadline_jobs``        jobs with a deadline in the episode
``deadline_attainment``  share of them that finished within their deadline (unfinished: missed);
                         NaN without deadline jobs
``hp_avg_jct``           mean JCT of the finished high-priority jobs (NaN: none)
``be_avg_jct``           mean JCT of the finished best-effort jobs (every job without classes)
``tenant_max_slowdown``  the largest tenant mean slowdown (``avg_slowdown`` per tenant)
``ftf_max_rho``          Themis' finish-time fairness: the largest tenant mean of
                         rho = JCT / T_ideal, T_ideal = ideal runtime x max(1, GPUs / (G / N)),
                         the job alone on a 1/N share of the G GPUs (N tenants in the episode)
``quota_violation``      (tenant quotas only) share of the guaranteed GPU-time a tenant asked for
                         and did not get: the integral over time of sum over tenants of
                         max(0, min(quota x G, GPUs its arrived unfinished jobs ask) - GPUs they
                         hold), over the integral of sum of min(quota x G, GPUs asked); in [0, 1]
=======================  =========================================================================
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

# The class vocabulary is the workload's (it validates its fields against it); kept importable here.
from cluster_env.core.instance import BEST_EFFORT, HIGH_PRIORITY, JOB_CLASSES, Workload  # noqa: F401

#: Spellings the workload CSV accepts for each class (case-insensitive).
CLASS_SPELLINGS = {"best-effort": 0, "be": 0, "spot": 0, "high-priority": 1, "hp": 1}
OBJECTIVE_KEYS = ("deadline_jobs", "deadline_attainment", "hp_avg_jct", "be_avg_jct", "tenant_max_slowdown",
                  "ftf_max_rho", "quota_violation")


def measured_objective_keys(w: Workload) -> tuple[str, ...]:
    """The :data:`OBJECTIVE_KEYS` an episode on ``w`` measures (a value, not NaN by construction):
    none without objectives; ``deadline_jobs`` and ``deadline_attainment`` with deadlines,
    ``hp_avg_jct`` with classes, ``quota_violation`` with tenant quotas, and ``be_avg_jct``,
    ``tenant_max_slowdown`` and ``ftf_max_rho`` with any of them."""
    if not w.has_objectives:
        return ()
    has = {"deadline_jobs": w.deadline is not None, "deadline_attainment": w.deadline is not None,
           "hp_avg_jct": w.job_class is not None, "quota_violation": w.tenant_quota is not None}
    return tuple(k for k in OBJECTIVE_KEYS if has.get(k, True))


def job_classes(w: Workload) -> np.ndarray:
    """(N,) class index per job (every job best-effort when the workload has no classes)."""
    return w.job_class if w.job_class is not None else np.zeros(w.num_jobs, dtype=np.int64)


def deadlines(w: Workload) -> np.ndarray:
    """(N,) relative deadline per job in seconds (NaN: none)."""
    return w.deadline if w.deadline is not None else np.full(w.num_jobs, np.nan)


def objective_metrics(w: Workload, finish: np.ndarray, ideal_runtime: np.ndarray, total_gpus: int,
                      allocations: "list | None" = None, now: float = float("nan")) -> dict[str, float]:
    """The :data:`OBJECTIVE_KEYS` of one episode from its workload and per-job finish times (NaN:
    unfinished). ``ideal_runtime`` is the metrics' (:func:`cluster_env.core.metrics.compute_metrics`).
    ``quota_violation`` is there for a workload with quotas when ``allocations`` (the simulator's
    allocation log) and the clock ``now`` are given."""
    done = ~np.isnan(finish)
    jct = finish - w.submit
    due = deadlines(w)
    has = ~np.isnan(due)
    met = has & done & (jct <= due)
    cls = job_classes(w)

    def mean(mask: np.ndarray, values: np.ndarray) -> float:
        return float(values[mask].mean()) if mask.any() else float("nan")

    slowdown = jct / ideal_runtime
    tenants = np.unique(w.tenant)
    share = total_gpus / max(len(tenants), 1)
    rho = jct / (ideal_runtime * np.maximum(1.0, w.gpus / share))
    per_tenant_slow = [mean(done & (w.tenant == t), slowdown) for t in tenants]
    per_tenant_rho = [mean(done & (w.tenant == t), rho) for t in tenants]
    out = {
        "deadline_jobs": int(has.sum()),
        "deadline_attainment": float(met.sum() / has.sum()) if has.any() else float("nan"),
        "hp_avg_jct": mean(done & (cls == HIGH_PRIORITY), jct),
        "be_avg_jct": mean(done & (cls == BEST_EFFORT), jct),
        "tenant_max_slowdown": float(np.nanmax(per_tenant_slow)) if done.any() else float("nan"),
        "ftf_max_rho": float(np.nanmax(per_tenant_rho)) if done.any() else float("nan"),
    }
    if w.tenant_quota is not None and allocations is not None:
        out["quota_violation"] = quota_violation(w, finish, allocations, total_gpus, now)
    return out


def quota_violation(w: Workload, finish: np.ndarray, allocations: list, total_gpus: int, now: float) -> float:
    """``quota_violation`` (module docstring) from the simulator's allocation log
    ``[(time, job, [(machine, gpus), ...] or None)]``, over [first submit, ``now``]; NaN when no
    tenant with a quota asked for GPUs."""
    tenants = max(w.num_tenants, 1)
    guaranteed = np.nan_to_num(w.tenant_quota[:tenants], nan=0.0) * total_gpus
    end = np.where(np.isnan(finish), now, finish)
    # Piecewise-constant demand and holding per tenant: +/- GPUs at each change.
    times = [w.submit, end, np.array([t for t, _, _ in allocations], dtype=np.float64)]
    grid = np.unique(np.concatenate([*times, [now]]))
    grid = grid[grid <= now]
    demand = np.zeros((len(grid), tenants))
    held = np.zeros((len(grid), tenants))
    np.add.at(demand, (np.searchsorted(grid, w.submit), w.tenant), w.gpus)
    np.add.at(demand, (np.searchsorted(grid, np.minimum(end, now)), w.tenant), -w.gpus)
    holding: dict[int, int] = {}
    for t, job, alloc in allocations:
        i = int(np.searchsorted(grid, t))
        gpus = 0 if alloc is None else sum(g for _, g in alloc)
        held[i, w.tenant[job]] += gpus - holding.get(job, 0)
        holding[job] = gpus
    demand, held = np.cumsum(demand, axis=0)[:-1], np.cumsum(held, axis=0)[:-1]
    dt = np.diff(grid)[:, None]
    owed = np.minimum(guaranteed[None, :], demand)
    total = float((owed * dt).sum())
    return float((np.maximum(owed - held, 0.0) * dt).sum() / total) if total > 0 else float("nan")


def attainment_bound(w: Workload, ideal_runtime: np.ndarray) -> float:
    """An upper bound on ``deadline_attainment`` no schedule can beat: the share of deadline jobs
    whose deadline is at least their ideal runtime (alone, on the fastest type they may use)."""
    due = deadlines(w)
    has = ~np.isnan(due)
    return float((has & (due >= ideal_runtime)).sum() / has.sum()) if has.any() else float("nan")


class ObjectiveTotals(NamedTuple):
    """Running totals of an episode at one instant, from which objective rewards take differences."""

    hp_seconds: float            # time in the system so far summed over high-priority jobs
    be_seconds: float            # the same over best-effort jobs
    deadline_misses: int         # deadline jobs missed so far (finished late, or unfinished past due)
    num_hp: int                  # high-priority jobs of the episode
    num_be: int                  # best-effort jobs of the episode
    num_deadline: int            # deadline jobs of the episode


def objective_totals(w: Workload, finish: np.ndarray, now: float) -> ObjectiveTotals:
    """:class:`ObjectiveTotals` at time ``now`` (``finish``: NaN for jobs not finished)."""
    end = np.where(np.isnan(finish), now, finish)
    in_system = np.maximum(end - w.submit, 0.0)
    high = job_classes(w) == HIGH_PRIORITY
    due = deadlines(w)
    has = ~np.isnan(due)
    missed = has & (end - w.submit > due)
    return ObjectiveTotals(float(in_system[high].sum()), float(in_system[~high].sum()), int(missed.sum()),
                           int(high.sum()), int((~high).sum()), int(has.sum()))
