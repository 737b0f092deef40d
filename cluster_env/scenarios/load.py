"""Offered load: how hard a workload pushes a cluster, and arrivals rescaled to a target load.

Three measures (``load_measure``; one default everywhere, ``"total"``, the measure of every
scenario before the v3 scenarios and of a user's trace unless the run asks for another):

``"total"`` (the default; docs/design.md section 9)::

    offered_load = sum_j(duration_j * gpus_j) / (cluster GPUs * arrival span)
    arrival span = last submit time - first submit time

``duration_j`` is the job's work in seconds on the scenario's reference GPU type (what the trace
measured), so the numerator is the GPU-seconds the jobs demand on that type. A load of 1.0 means
that the jobs ask for exactly the cluster's GPU-seconds over the time they arrive in; above 1 the
queue must grow during the arrivals, below it the cluster can keep up on average. On a heavy-tailed
trace this counts the work of the few jobs that outlast the arrivals by days as if it were spread
over the arrivals: a window can be "loaded" while nothing ever waits (openb queues only at a
nominal load of 5, ``docs/reference.md``).

``"concurrent"`` (opt-in, ``load_measure="concurrent"``)::

    offered_load = sum_j(gpus_j * min(duration_j, last submit - submit_j)) / (cluster GPUs * arrival span)

the mean number of GPUs the jobs would hold at once during the arrival span on a cluster that
never makes them wait, over the cluster's GPUs: each job counts only the GPU-seconds it demands
before the last arrival. A job that outlasts the arrivals counts as holding its GPUs until then,
which is what it does to the jobs that arrive with it; the work it does after the last arrival
queues nobody and is not counted. Light-tailed traces get almost the same load under both
measures; on heavy-tailed ones a load of 1.0 makes comparable queues (``docs/world_model.md``,
"Offered load on heavy-tailed traces", and ``tests/test_load_measure.py``).

``"capped"`` (the v3 scenarios: ``philly-hetero-v4``, ``modern-v3``, ``philly-slo-v2``,
``philly-tenants-v2``)::

    offered_load = sum_j(gpus_j * min(duration_j, LOAD_CAP_S)) / (cluster GPUs * arrival span)

the total measure with every job's work counted for at most :data:`LOAD_CAP_S` seconds (one day) of
its runtime. On a heavy-tailed trace the total measure lets a handful of multi-day jobs set the
arrival rate of everything else (a window "at load 8" whose other jobs never wait); the concurrent
measure fixes that but cannot be reached by windows whose arrivals end in a burst (every job of
the burst counts almost nothing: the most a 1,000-job window of the modern scenario's trace can
reach is 0.31 in the worst train window), nor by short windows. The cap does not depend on the
arrivals, so, like the total measure, every window of any size reaches any load, in closed form.
On Philly's trace a day keeps 39% of the GPU-seconds and caps 3% of the jobs.

All three ignore how much faster or slower the cluster's GPU types are than the reference, so on a
heterogeneous cluster the same load can queue more or less than on a homogeneous one: the
scenarios document their default load with what it means in queueing (``docs/reference.md``).

:func:`scale_to_load` multiplies every submit time by one factor (order and relative gaps kept,
the first arrival stays at 0) so that the offered load under the chosen measure equals the target:
``"total"`` and ``"capped"`` in closed form, ``"concurrent"`` exactly too (the measure is
piecewise ``A / f + B`` in the factor ``f``, decreasing).
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


#: Values of ``load_measure`` (module docstring); the first is the default everywhere.
LOAD_MEASURES = ("total", "concurrent", "capped")
DEFAULT_LOAD_MEASURE = LOAD_MEASURES[0]


def check_load_measure(measure: object) -> str:
    """``measure`` must be one of :data:`LOAD_MEASURES`; returns it."""
    if not isinstance(measure, str) or measure not in LOAD_MEASURES:
        raise ValueError(f"load_measure must be one of {LOAD_MEASURES}, got {measure!r}")
    return measure


def _time_to_last_arrival(workload: Workload) -> np.ndarray:
    """(N,) seconds from each job's submit time to the last one's."""
    return float(workload.submit[-1]) - workload.submit.astype(np.float64)


def concurrent_gpu_seconds(workload: Workload) -> float:
    """GPU-seconds the jobs demand before the last arrival, each started at its submit time:
    sum of gpus x min(duration, last submit - submit)."""
    reach = np.minimum(workload.duration.astype(np.float64), _time_to_last_arrival(workload))
    return float(np.dot(reach, workload.gpus.astype(np.float64)))


#: Seconds of a job's runtime the ``"capped"`` measure counts at most (module docstring).
LOAD_CAP_S = 24 * 3600.0


def capped_gpu_seconds(workload: Workload, cap: float = LOAD_CAP_S) -> float:
    """GPU-seconds the jobs demand with each job's work capped at ``cap`` seconds:
    sum of gpus x min(duration, cap)."""
    reach = np.minimum(workload.duration.astype(np.float64), float(cap))
    return float(np.dot(reach, workload.gpus.astype(np.float64)))


def offered_load(workload: Workload, total_gpus: int, measure: str = DEFAULT_LOAD_MEASURE) -> float:
    """The offered load of ``workload`` on a cluster of ``total_gpus`` GPUs under ``measure``
    (one of :data:`LOAD_MEASURES`, see the module doc).

    ``inf`` when every job arrives at the same instant (no arrival span) and they demand work.
    """
    check_load_measure(measure)
    span = arrival_span(workload)
    demand = demanded_gpu_seconds(workload)
    if span <= 0.0:
        return math.inf if demand > 0 else 0.0
    if measure == "concurrent":
        demand = concurrent_gpu_seconds(workload)
    elif measure == "capped":
        demand = capped_gpu_seconds(workload)
    return demand / (float(total_gpus) * span)


def max_concurrent_load(workload: Workload, total_gpus: int) -> float:
    """The largest load the ``"concurrent"`` measure can give this window by compressing its
    arrivals: every job still running at the last arrival (the limit of an infinitely fast arrival
    process): ``sum(gpus x (last submit - submit)) / (total_gpus x span)``."""
    span = arrival_span(workload)
    if span <= 0.0:
        return 0.0
    weight = np.dot(_time_to_last_arrival(workload), workload.gpus.astype(np.float64))
    return float(weight) / (float(total_gpus) * span)


#: Sane range of a target load: beyond it the rescaled arrivals stop meaning anything (a load of
#: 1e-300 stretches a window over 1e300 s).
LOAD_RANGE = (1e-3, 1e3)


def check_load(load: object, name: str = "load") -> float:
    """A target load must be a number in :data:`LOAD_RANGE`; returns it as a float."""
    check_range(name, load, *LOAD_RANGE)
    return float(load)  # type: ignore[arg-type]


def _concurrent_factor(workload: Workload, total_gpus: int, target: float) -> float:
    """The factor ``f`` on the arrival gaps that gives ``"concurrent"`` load ``target``.

    With ``a_j`` the time from job j's arrival to the last one and ``S`` the span, the load after
    scaling by ``f`` is ``(sum_{d_j <= f a_j} g_j d_j / f + sum_{d_j > f a_j} g_j a_j) / (G S)``:
    decreasing in ``f``, of the form ``A / f + B`` between the breakpoints ``d_j / a_j``. The
    interval whose solution lies in it gives ``f`` exactly.
    """
    span = arrival_span(workload)
    a = _time_to_last_arrival(workload)
    g = workload.gpus.astype(np.float64)
    d = workload.duration.astype(np.float64)
    need = target * float(total_gpus) * span
    live = (a > 0) & (g > 0) & (d > 0)         # the others count 0 at any factor
    a, g, d = a[live], g[live], d[live]
    top = float(np.dot(g, a))                  # every job capped: the limit f -> 0
    if need >= top:
        raise ValueError(
            f"workload {workload.name!r}: load_measure='concurrent' cannot reach load={target:g} on "
            f"{total_gpus} GPUs: even arriving all at once its jobs would hold at most "
            f"{top / (float(total_gpus) * span):.3g} of the cluster on average over the arrivals "
            f"(cluster_env.scenarios.load.max_concurrent_load); give a lower load or more jobs")
    order = np.argsort(d / a, kind="stable")
    breaks = (d / a)[order]
    # Below breakpoint k the first k jobs (in breakpoint order) are uncapped.
    uncapped = np.concatenate(([0.0], np.cumsum((g * d)[order])))
    capped = top - np.concatenate(([0.0], np.cumsum((g * a)[order])))
    for k in range(len(breaks) + 1):
        if uncapped[k] <= 0.0:
            continue                           # no uncapped job yet: the load is `capped`, too high
        f = uncapped[k] / (need - capped[k])
        lo = breaks[k - 1] if k > 0 else 0.0
        hi = breaks[k] if k < len(breaks) else math.inf
        if need > capped[k] and lo <= f <= hi:
            return float(f)
    raise AssertionError("unreachable: the concurrent load is continuous and decreasing")  # pragma: no cover


def scale_to_load(workload: Workload, total_gpus: int, target: float,
                  measure: str = DEFAULT_LOAD_MEASURE) -> Workload:
    """``workload`` with its submit times scaled so that its offered load under ``measure``
    equals ``target``.

    Raises:
        ValueError: the workload has no arrival span (fewer than two jobs, or all submitted at
            the same instant), so no scaling of its arrivals can reach a finite load; or, under
            ``"concurrent"``, the target is above what the window can reach
            (:func:`max_concurrent_load`).
    """
    target = check_load(target)
    check_load_measure(measure)
    span = arrival_span(workload)
    if span <= 0.0:
        raise ValueError(f"workload {workload.name!r}: cannot scale its arrivals to load={target:g}: its "
                         f"{workload.num_jobs} job(s) all arrive at the same instant (no arrival span)")
    if measure == "concurrent":
        factor = _concurrent_factor(workload, total_gpus, target)
    else:                                   # linear in 1 / factor: closed form
        factor = offered_load(workload, total_gpus, measure) / target
    first = workload.submit[0]
    submit = first + (workload.submit - first) * factor
    return replace(workload, submit=submit)


__all__ = ["DEFAULT_LOAD_MEASURE", "LOAD_MEASURES", "LOAD_RANGE", "arrival_span", "check_load",
           "LOAD_CAP_S", "capped_gpu_seconds", "check_load_measure", "concurrent_gpu_seconds",
           "demanded_gpu_seconds", "max_concurrent_load",
           "offered_load", "scale_to_load"]
