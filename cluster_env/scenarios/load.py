"""Offered load: how hard a workload pushes a cluster, and arrivals rescaled to a target load.

Definition (DESIGN section 9)::

    offered_load = sum_j(duration_j * gpus_j) / (cluster GPUs * arrival span)
    arrival span = last submit time - first submit time

``duration_j`` is the job's work in seconds on the scenario's reference GPU type (what the trace
measured), so the numerator is the GPU-seconds the jobs demand on that type. A load of 1.0 means
that the jobs ask for exactly the cluster's GPU-seconds over the time they arrive in; above 1 the
queue must grow during the arrivals, below it the cluster can keep up on average. The definition
ignores how much faster or slower the cluster's GPU types are than the reference, so on a
heterogeneous cluster the same load can queue more or less than on a homogeneous one: the
scenarios document their default load with what it means in queueing (``docs/reference.md``).

:func:`scale_to_load` multiplies every submit time by one factor (order and relative gaps kept,
the first arrival stays at 0) so that the offered load equals the target.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from cluster_env.core.config import check_range
from cluster_env.core.instance import Workload


def arrival_span(workload: Workload) -> float:
    """Seconds between the first and the last submit time (0 for fewer than two jobs)."""
    if workload.num_jobs < 2:
        return 0.0
    return float(workload.submit[-1] - workload.submit[0])


def demanded_gpu_seconds(workload: Workload) -> float:
    """GPU-seconds the jobs demand on the reference GPU type: sum of duration x GPUs."""
    return float(np.dot(workload.duration, workload.gpus.astype(np.float64)))


def offered_load(workload: Workload, total_gpus: int) -> float:
    """The offered load of ``workload`` on a cluster of ``total_gpus`` GPUs (see the module doc).

    ``inf`` when every job arrives at the same instant (no arrival span).
    """
    span = arrival_span(workload)
    demand = demanded_gpu_seconds(workload)
    if span <= 0.0:
        return math.inf if demand > 0 else 0.0
    return demand / (float(total_gpus) * span)


#: Sane range of a target load: beyond it the rescaled arrivals stop meaning anything (a load of
#: 1e-300 stretches a window over 1e300 s).
LOAD_RANGE = (1e-3, 1e3)


def check_load(load: object, name: str = "load") -> float:
    """A target load must be a number in :data:`LOAD_RANGE`; returns it as a float."""
    check_range(name, load, *LOAD_RANGE)
    return float(load)  # type: ignore[arg-type]


def scale_to_load(workload: Workload, total_gpus: int, target: float) -> Workload:
    """``workload`` with its submit times scaled so that its offered load equals ``target``.

    Raises:
        ValueError: the workload has no arrival span (fewer than two jobs, or all submitted at
            the same instant), so no scaling of its arrivals can reach a finite load.
    """
    target = check_load(target)
    span = arrival_span(workload)
    if span <= 0.0:
        raise ValueError(f"workload {workload.name!r}: cannot scale its arrivals to load={target:g}: its "
                         f"{workload.num_jobs} job(s) all arrive at the same instant (no arrival span)")
    factor = offered_load(workload, total_gpus) / target
    first = workload.submit[0]
    submit = first + (workload.submit - first) * factor
    return replace(workload, submit=submit)


__all__ = ["LOAD_RANGE", "arrival_span", "check_load", "demanded_gpu_seconds", "offered_load", "scale_to_load"]
