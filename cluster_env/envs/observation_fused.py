"""The ``extended`` and ``extended-v2`` columns in one compiled call (numba kernel backend).

:class:`~cluster_env.envs.observation_ext.ExtendedObservationBuilder` fills its columns with a
dozen numpy calls per step, and :func:`~cluster_env.envs.observation_place.placement_rows`
gathers the running jobs' allocations from the simulator's dictionaries: at tens of thousands of
decisions per episode that Python is a large part of the step. Under the compiled kernels the
builders call :func:`compiled` instead: the default layout's kernel writes its columns into the
wide ``jobs`` array, then this kernel writes the appended columns, reading the allocations from
the simulator's slot arrays and machine pools (``_mpool`` / ``_gpool``).

Every value has the bits of the numpy path (tested, step by step, on busy windows):

* the two ``log1p`` columns that numpy computes (``tenant_seen_log``, ``attained_all_log``) are
  still numpy's ``np.log1p``: the caller passes them in (one call over every row, and a table per
  tenant kept until the next finish), so the kernel only copies them (numpy computes each element
  on its own: its value does not depend on the array around it);
* the placement columns go through the same :func:`_columns_loop`
  (compiled), on the same inputs in the same row order;
* every float64 value is rounded to float32 once, on its way into ``jobs`` or ``global``, as the
  numpy path's assignment does.
"""
from __future__ import annotations

import math
import types

import numpy as np

from cluster_env.core import kernels as _kernels

#: The ``extended`` columns the kernel writes after the default ones (observation_ext's order).
_N_EXTENDED = 5
#: The arguments of a layout without placement columns (typed as the real ones: one compilation).
NO_PLACEMENT = (np.zeros(0, dtype=np.float32), np.zeros((0, 0)), np.zeros(0), np.zeros(0, dtype=np.int64))


def _extended_columns(jobs, glob, ids, tenant_log, attained_log, running, K, width, phase, mean_all, all_recent,
                      slot32, tenant, mean, recent,
                      placement, not_running, n, s_float, s_int, s_flag, mpool, gpool, job_speed, nominal32,
                      machine_type, measured32, free, gpus, allowed, restricted, fewest, now):
    """Write the ``extended`` columns (``width`` onwards) of every valid row of ``jobs`` and the
    last three ``global`` values; with ``placement``, also the ``extended-v2`` columns after them
    (``not_running`` on every row, then the running rows ``K`` onwards, in ``running``'s order).

    ``tenant_log`` (per tenant) and ``attained_log`` (per row of ``jobs``) are numpy's ``log1p``
    of the tenants' finished counts and of each row's attained service; ``n``: running slots."""
    rows = ids.shape[0]
    for r in range(rows):
        j = ids[r]
        if j >= 0:
            t = tenant[j]
            jobs[r, width] = slot32[j]
            jobs[r, width + 1] = tenant_log[t]
            jobs[r, width + 2] = mean[t]
            jobs[r, width + 3] = recent[t]
            jobs[r, width + 4] = attained_log[r]
    g = glob.shape[0]
    glob[g - 3] = phase
    glob[g - 2] = mean_all
    glob[g - 1] = all_recent
    if not placement:
        return
    base = width + _N_EXTENDED
    cols = not_running.shape[0]
    for r in range(rows):
        for c in range(cols):
            jobs[r, base + c] = not_running[c]
    count = running.shape[0]
    if count == 0:
        return
    # placement_rows' inputs, gathered from the slot arrays: each job's (machine, GPUs) pairs in
    # allocation order (a single machine: the slot's first machine, all the job's GPUs; spread:
    # the pools), its nominal speeds, needs and placement time.
    n_types = job_speed.shape[1]
    counts = np.empty(count, dtype=np.int64)
    slots = np.empty(count, dtype=np.int64)
    total = 0
    for i in range(count):
        job = running[i]
        k = 0
        while k < n - 1 and s_int[0, k] != job:      # its slot (a running job has one)
            k += 1
        slots[i] = k
        counts[i] = s_int[3, k] if s_flag[0, k] else 1
        total += counts[i]
    held = np.empty(total, dtype=np.int64)
    given = np.empty(total, dtype=np.int64)
    nominal = np.empty((count, n_types))
    nominal_32 = np.empty((count, n_types))
    need = np.empty(count, dtype=np.int64)
    few = np.empty(count, dtype=np.int64)
    t0 = np.empty(count)
    allowed_rows = np.empty((count if restricted else 0, allowed.shape[1]), dtype=np.bool_)
    p = 0
    for i in range(count):
        job, k = running[i], slots[i]
        if s_flag[0, k]:
            off = s_int[2, k]
            for q in range(counts[i]):
                held[p + q] = mpool[off + q]
                given[p + q] = gpool[off + q]
        else:
            held[p] = s_int[1, k]
            given[p] = gpus[job]
        p += counts[i]
        for t in range(n_types):
            nominal[i, t] = job_speed[job, t]
            nominal_32[i, t] = nominal32[job, t]
        if restricted:
            for t in range(allowed.shape[1]):
                allowed_rows[i, t] = allowed[job, t]
        need[i] = gpus[job]
        few[i] = fewest[job]
        t0[i] = s_float[5, k]
    out = np.empty((count, cols))
    columns_loop(counts, held, given, nominal, nominal_32, machine_type, measured32, free, need,  # noqa: F821
                 allowed_rows, restricted, few, t0, now, out)
    for i in range(count):
        for c in range(cols):
            jobs[K + i, base + c] = out[i, c]


def _columns_loop(counts, held, given, nominal, nominal32, machine_type, measured32, free, need, allowed,
                  restricted, fewest, t0, now, out):
    """The placement columns of :func:`~cluster_env.envs.observation_place.placement_rows`, one row at a time: the same products, quotients and
    exact minima and maxima as the numpy path, and ``since_start_log`` by the C library's
    ``log1p`` (the one ``math.log1p`` calls; it leaves a zero as it is) of ``max(now - t0, 0.0)``
    as Python's ``max`` takes it."""
    for i in range(counts.shape[0]):
        since = now - t0[i]
        if 0.0 > since:
            since = 0.0
        out[i, 7] = math.log1p(since)
    p = 0
    for i in range(counts.shape[0]):
        n = counts[i]
        current, slowest = np.inf, np.inf
        low, high = machine_type[held[p]], machine_type[held[p]]
        for q in range(p, p + n):
            t = machine_type[held[q]]
            speed = nominal32[i, t] * measured32[held[q]]
            current = min(current, speed)
            slowest = min(slowest, nominal[i, t])
            low, high = min(low, t), max(high, t)
        best, fits = -np.inf, False
        for m in range(free.shape[0]):
            capacity = free[m]
            for q in range(p, p + n):
                if held[q] == m:
                    capacity += given[q]
            t = machine_type[m]
            if capacity >= need[i] and (not restricted or allowed[i, t]):
                best = max(best, nominal32[i, t] * measured32[m])
                fits = True
        out[i, 0] = n
        out[i, 1] = slowest
        out[i, 2] = 1.0 if low != high else 0.0
        out[i, 3] = current
        out[i, 4] = best if fits else -1.0
        out[i, 5] = best / current if fits else -1.0
        out[i, 6] = 1.0 if n > fewest[i] else 0.0
        p += n


_LOOP = {"kernel": None}
NO_ALLOWED = np.zeros((0, 1), dtype=bool)     # the loop's ``allowed`` when no job is restricted


def compiled_loop(wanted: "bool | None"):
    """:func:`_columns_loop` compiled by numba (disk-cached with the simulator's kernels), or None
    for the numpy path: ``wanted`` None follows the simulator's kernel backend (numpy under
    ``CLUSTER_ENV_KERNELS=numpy``), True asks for the loop, False for numpy."""
    if wanted is False or (wanted is None and _kernels.backend() != "numba"):
        return None
    if _LOOP["kernel"] is None:
        import numba

        dispatcher = numba.njit(nogil=True, error_model="numpy")(_columns_loop)
        _kernels._attach_cache(dispatcher)
        _LOOP["kernel"] = dispatcher
    return _LOOP["kernel"]


_KERNEL = {"fn": None}


def compiled():
    """:func:`_extended_columns` compiled by numba (disk-cached with the simulator's kernels); the
    builders call it when their simulator runs the compiled kernels."""
    if _KERNEL["fn"] is None:
        import numba

        # numba compiles a call only to a global that is a dispatcher, and numba is imported lazily
        # (the numpy backend never imports it): the kernel's code is rebound to globals in which
        # ``columns_loop`` is the compiled placement loop, so one source serves both backends.
        fn = types.FunctionType(_extended_columns.__code__,
                                dict(globals(), columns_loop=compiled_loop(True)), "extended_columns")
        fn.__doc__ = _extended_columns.__doc__
        dispatcher = numba.njit(nogil=True, error_model="numpy")(fn)
        _kernels._attach_cache(dispatcher)
        _KERNEL["fn"] = dispatcher
    return _KERNEL["fn"]
