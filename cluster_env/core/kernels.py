"""The simulator's per-event arithmetic and the observation's per-step fill, in two
interchangeable backends that give the same bits.

At the cluster sizes of the scenarios (tens to hundreds of running jobs) a numpy call costs about
a microsecond whatever its array size, so an event's cost is the number of calls on its path. The
``numba`` backend fuses each group of calls into one compiled loop; the ``numpy`` backend is the
reference, written with whole-array operations. Both perform the same IEEE operations in the same
order on every element (no fast-math, no fused multiply-add; minimum and maximum are exact), so
an episode gives bit-identical observations, rewards and metrics under either (tested).

The backend is chosen once, at import: ``numba`` when it imports and the environment variable
``CLUSTER_ENV_KERNELS`` is not ``numpy``. :func:`use` switches it for simulators built afterwards
(the tests compare the two). Compiled kernels are cached on disk (numba's ``cache=True``): the
first simulator of a fresh install compiles them once, in a few seconds, and every later process
loads them (about a second). The cache is bounded (:func:`prune_cache`), and a cache folder that
is read-only, full or broken turns caching off with one warning, never an error.

Every kernel works on the first ``n`` entries of the simulator's slot arrays (running jobs).
Random numbers are drawn by the caller from numpy's generator (the kernels take the draws), and
``exp`` / ``expm1`` stay numpy or ``math`` calls, so the streams and dynamics are the reference's.
The observation kernel (numba only; the numpy path is ``ObservationBuilder``'s own code) uses the
C library's ``log1p`` and ``log2``, which numpy's equal on CPUs without AVX-512. ``rank_running``
(numba only too) is ``sync_running`` plus the running candidates' order, the builder's
``candidates`` in one call.

The compiled backend has a few more kernels that fuse a whole step of the simulator on its blocks
of arrays (fewer arguments to convert per call): ``event`` (``run_to_next`` plus the time stamps
of a trivial measurement), ``measure_rates``, ``place_launch``, ``release_slot`` and
``ou_switch_due`` (both backends); the simulator uses them when the compiled backend is active
and its numpy reference code otherwise. ``idle_events`` runs the simulator's whole skip-idle loop
(every event until the next decision) in one call, on the simulator's arrays in three arenas
(``arenas``), drawing from its numpy generator through ``rng_addresses``.

Spread jobs' machines reach ``refresh_rates`` / ``run_to_next`` as three arrays whose meaning is
the backend's: numpy takes (slots, concatenated machine lists, segment starts); numba takes
(machine pool, offset per slot, machine count per slot). The simulator passes the right ones.
numba writes its cache next to this module, or under ``NUMBA_CACHE_DIR`` when set.
"""
from __future__ import annotations

import contextlib
import math
import os
import shutil
import sys
import types
import warnings
from types import SimpleNamespace

import numpy as np

BACKENDS = ("numba", "numpy")
# A job whose earliest finish is within this relative (and absolute) margin of an event's time is
# looked at for completion at that event.
TIME_EPS = 1e-9


# ---------------------------------------------------------------------------------- numpy backend
def _np_refresh_rates(n, fm, machine_factor, crowd, nominal, acomm, rate, alpha, multi_slots, flat, seg):
    """True speed of every running slot: nominal x slowest machine factor / (1 + alpha comm crowd)."""
    factor = machine_factor.take(fm[:n])
    most = crowd.take(fm[:n])
    if len(multi_slots):
        factor[multi_slots] = np.minimum.reduceat(machine_factor.take(flat), seg)
        most[multi_slots] = np.maximum.reduceat(crowd.take(flat), seg)
    out = rate[:n]
    np.multiply(nominal[:n], factor, out=out)
    if alpha:
        most *= acomm[:n]          # the slowdown 1 + alpha * comm * crowd, in place
        most += 1.0
        out /= most


def _np_next_finish(n, left, rate, until, now, restarting, scratch):
    """(earliest finish time, whether a restart overhead is still running)."""
    ttf = np.divide(left[:n], rate[:n], out=scratch[:n])
    if restarting:
        u = until[:n]
        still = bool((u > now).any())
        return float((np.maximum(u, now) + ttf).min()), still
    return now + float(np.minimum.reduce(ttf)), False


def _np_accrue_due(n, left, rate, until, now, dt, restarting, check, tol, scratch, due_out):
    """Progress over ``dt`` (no progress inside a restart overhead), then, if ``check``, write the
    slots whose remaining work takes under ``tol`` seconds at their speed into ``due_out``; return
    their count."""
    lf = left[:n]
    if dt > 0:
        if restarting:
            exec_dt = np.clip(now + dt - np.maximum(until[:n], now), 0.0, dt)
            lf -= rate[:n] * exec_dt
        else:
            lf -= np.multiply(rate[:n], dt, out=scratch[:n])
    if not check:
        return 0
    threshold = np.multiply(rate[:n], tol, out=scratch[:n])
    threshold += 1e-12
    due = (lf <= threshold).nonzero()[0]
    due_out[: len(due)] = due
    return len(due)


def _run_to_next(n, dirty, fm, machine_factor, crowd, nominal, acomm, rate, alpha, multi_slots, flat,
                 seg, left, until, now, restarting, t_other, scratch, due_out):
    """One event of the running jobs: refresh the speeds if ``dirty``, find the next event time
    (the earliest finish or ``t_other``), progress to it and find the jobs finished then.

    Returns (next event time, earliest finish, restart overhead still running, finished count);
    nothing progresses when the next event time is not finite (the caller raises).

    A template: ``refresh_rates``, ``next_finish`` and ``accrue_due`` are the globals that
    :func:`_make_run_to_next` gives each backend's copy."""
    if dirty:
        refresh_rates(n, fm, machine_factor, crowd, nominal, acomm, rate, alpha, multi_slots, flat, seg)  # noqa: F821
    finish, restarting = next_finish(n, left, rate, until, now, restarting, scratch)  # noqa: F821
    t_next = min(t_other, finish)
    if not math.isfinite(t_next):
        return t_next, finish, restarting, 0
    check = finish <= t_next * (1 + TIME_EPS) + TIME_EPS
    # Beyond ~1.7e10 s (very long, slow jobs) half an ulp of the clock exceeds a microsecond:
    # a finish time that rounds to ``now`` would give zero-length advances forever. (The ulp
    # of a time >= 0, as math.ulp, which numba lacks.)
    tol = max(1e-6, 4.0 * (np.nextafter(t_next, np.inf) - t_next)) if check else 0.0
    due = accrue_due(n, left, rate, until, now, t_next - now, restarting, check, tol, scratch, due_out)  # noqa: F821
    return t_next, finish, restarting, due


def _make_run_to_next(refresh_rates, next_finish, accrue_due):
    """``run_to_next`` built on one backend's parts: called as is for numpy, compiled for numba.

    The parts are the copy's *globals*, not closure cells: numba keys its disk cache on the
    pickled closure, and a dispatcher pickles with a per-process id, so a closure missed the
    cache in every new process (seconds of compiling and a new cache file each time)."""
    namespace = dict(globals(), refresh_rates=refresh_rates, next_finish=next_finish, accrue_due=accrue_due)
    fn = types.FunctionType(_run_to_next.__code__, namespace, "run_to_next")
    fn.__doc__ = _run_to_next.__doc__
    return fn


_np_run_to_next = _make_run_to_next(_np_refresh_rates, _np_next_finish, _np_accrue_due)


def _event(n, dirty, s_float, s_int, s_flag, machine_rows, alpha, pool, now, restarting, t_other, scratch,
           due_out, stamp, measure_time, measured_at):
    """``run_to_next`` on the simulator's blocks (compiled backend: fewer arguments to convert per
    call). ``s_float`` rows: left, rate, nominal, alpha x comm, restart end, launch time; ``s_int``
    rows: job, first machine, pool offset, machine count; ``s_flag`` row 1: single-machine;
    ``machine_rows``: machine factor, crowd; ``pool`` is empty unless spread jobs' machines are
    needed.

    ``stamp``: the measurement at the new time is trivial (every measured speed is exactly 1 and
    stays so: no machine factor, contention, noise or restart overhead), so only its time is
    written: ``measured_at`` of every single-machine job's machine, when time passed since
    ``measure_time``. Returns run_to_next's values."""
    t_next, finish, restarting, due = run_to_next(  # noqa: F821
        n, dirty, s_int[1], machine_rows[0], machine_rows[1], s_float[2], s_float[3], s_float[1], alpha,
        pool, s_int[2], s_int[3], s_float[0], s_float[4], now, restarting, t_other, scratch, due_out)
    if stamp and t_next - measure_time > 0 and math.isfinite(t_next):
        single, fm = s_flag[1], s_int[1]
        for i in range(n):
            if single[i]:
                measured_at[fm[i]] = t_next
    return t_next, finish, restarting, due


def _measure_rates(n, dirty, s_float, s_int, s_flag, machine_rows, alpha, pool, now, restarting, n_multi,
                   z, noise, w_fresh, machine_float, scratch):
    """The measurement on the simulator's blocks (compiled backend): the speeds refreshed first
    when ``dirty`` (``refresh_rates``), then ``measure`` (``machine_float``: measured speed, time)."""
    if dirty:
        refresh_rates(n, s_int[1], machine_rows[0], machine_rows[1], s_float[2], s_float[3], s_float[1],  # noqa: F821
                      alpha, pool, s_int[2], s_int[3])
    measure(n, s_flag[1], s_float[4], now, restarting, n_multi, s_float[1], s_float[2], s_int[1], z, noise,  # noqa: F821
            w_fresh, machine_float[0], machine_float[1], scratch)


# The arrays of the compiled skip-idle loop (``idle_events``) live in three arenas, one per dtype
# (one argument each: numba converts every argument of every call, about 70 ns apiece): the
# simulator's blocks are views of them from the start. Each part: (name, rows, length), in order.
ARENA_FLOAT = (("s_float", 6, "cap"), ("job_block", 9, "n"), ("machine_rows", 2, "m"), ("machine_float", 2, "m"),
               ("fluct", 5, "m"), ("static", 1, "m"), ("submit", 1, "n"), ("duration", 1, "n"),
               ("type_float", 2, "t"), ("scratch", 1, "cap"), ("normals", 1, "cap+m"), ("draws", 3, "m"))
ARENA_INT = (("s_int", 4, "cap"), ("machine_int", 2, "m"), ("type_int", 2, "t"), ("gpus", 1, "n"),
             ("machine_type", 1, "m"), ("due", 1, "cap"), ("released", 3, "cap"), ("fluct_due", 1, "m"))
ARENA_BOOL = (("s_flag", 2, "cap"), ("straggling", 1, "m"))
_ARENA_HEADER = 4 + len(ARENA_FLOAT) + len(ARENA_INT) + len(ARENA_BOOL)   # cap, n, m, t, offsets


def arenas(n: int, m: int, t: int, cap: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """The three zero-filled arenas (float64, int64 with a header of sizes and offsets, bool) for
    ``n`` jobs, ``m`` machines, ``t`` GPU types and ``cap`` slots, and every part as a view
    (shape ``(length,)`` for one row, else ``(rows, length)``)."""
    sizes = {"cap": cap, "n": n, "m": m, "t": t, "cap+m": cap + m}
    header = [cap, n, m, t]
    out, views = [], {}
    for parts, dtype, start in ((ARENA_FLOAT, np.float64, 0), (ARENA_INT, np.int64, _ARENA_HEADER),
                                (ARENA_BOOL, np.bool_, 0)):
        offset, spans = start, []
        for name, rows, length in parts:
            spans.append((name, rows, sizes[length], offset))
            header.append(offset)
            offset += rows * sizes[length]
        buf = np.zeros(offset, dtype=dtype)
        for name, rows, length, off in spans:
            view = buf[off: off + rows * length]
            views[name] = view if rows == 1 else view.reshape(rows, length)
        out.append(buf)
    out[1][:_ARENA_HEADER] = header
    return out[0], out[1], out[2], views


def _arena_views(fa, ia, ba):
    """``arenas``' parts inside the compiled loop (the order of ``ARENA_*``)."""
    cap, n, m, t = ia[0], ia[1], ia[2], ia[3]
    o = ia[4:]
    return (fa[o[0]: o[0] + 6 * cap].reshape((6, cap)), fa[o[1]: o[1] + 9 * n].reshape((9, n)),
            fa[o[2]: o[2] + 2 * m].reshape((2, m)), fa[o[3]: o[3] + 2 * m].reshape((2, m)),
            fa[o[4]: o[4] + 5 * m].reshape((5, m)), fa[o[5]: o[5] + m], fa[o[6]: o[6] + n], fa[o[7]: o[7] + n],
            fa[o[8]: o[8] + 2 * t].reshape((2, t)), fa[o[9]: o[9] + cap], fa[o[10]: o[10] + cap + m],
            fa[o[11]: o[11] + 3 * m].reshape((3, m)),
            ia[o[12]: o[12] + 4 * cap].reshape((4, cap)), ia[o[13]: o[13] + 2 * m].reshape((2, m)),
            ia[o[14]: o[14] + 2 * t].reshape((2, t)), ia[o[15]: o[15] + n], ia[o[16]: o[16] + m],
            ia[o[17]: o[17] + cap], ia[o[18]: o[18] + 3 * cap].reshape((3, cap)), ia[o[19]: o[19] + m],
            ba[o[20]: o[20] + 2 * cap].reshape((2, cap)), ba[o[21]: o[21] + m])


# The compiled skip-idle loop's scalar state (``idle_events``): the simulator's Python scalars,
# packed into two small arrays for the call and read back after it. Constants of the episode
# first, then the values the caller writes before a fresh call (``IF_NOW`` to ``IF_F_NOISE``,
# ``II_N`` to ``II_RELEASED``: one ``struct`` pack of the adjacent arrays), then outputs.
(IF_TIME_LIMIT, IF_ALPHA, IF_TICK, IF_NOISE, IF_TAU, IF_SIGMA, IF_THETA, IF_LAM, IF_TOT, IF_PI, IF_ON_MEAN,
 IF_OFF_MEAN, IF_SHIFT, IF_LOG_SLOW, IF_INTERVAL, IF_QUIET) = range(16)
(IF_NOW, IF_JOB_SECONDS, IF_FEE, IF_ENERGY, IF_BUSY, IF_FEE_RATE, IF_POWER, IF_NEXT_FLUCT, IF_NEXT_TICK,
 IF_LAST_TICK, IF_MEASURE_TIME, IF_NEXT_FINISH, IF_FLUCT_TIME, IF_F_TIME, IF_F_NEXT_MIN, IF_F_CACHE_DT,
 IF_F_DECAY, IF_F_NOISE) = range(16, 34)
IF_SIZE = 34
(II_N, II_N_MULTI, II_HELD, II_FREE, II_NEXT_ARRIVAL, II_ARRIVED, II_FINISHED, II_EVENTS, II_MEASURE_VERSION,
 II_RESTARTING, II_DIRTY, II_PENDING, II_SMALLEST, II_PENDING_GPUS, II_WINDOW, II_RUNNING_CHOICE, II_RELEASED,
 II_NUM_JOBS, II_FLUCT, II_STAMP, II_STATIC_RATES, II_DUE, II_NORMALS, II_SWITCHES, II_MEASURED, II_AT) = range(26)
II_RNG = 26         # 6 words: the addresses of the simulator's numpy bit generator (rng_addresses)
II_SIZE = 32
#: What ``idle_events`` returns: a decision epoch (or nothing left to happen) was reached; a
#: fluctuation update with more than one straggler switch needs numpy's ``exp`` of the switches'
#: decay exponents (``II_SWITCHES`` of them, into the arena's ``draws`` row 2: resume with
#: ``IDLE_RESUME_SWITCH``); the update needs numpy's ``exp`` of the fluctuation factors (resume
#: with ``IDLE_RESUME_EXP``); the event's completions include a job spread over several machines
#: (``II_DUE`` slots in ``due_out``: the caller finishes the event); no future event.
IDLE_DONE, IDLE_SWITCH_EXP, IDLE_EXP, IDLE_MULTI, IDLE_NO_EVENT = range(5)
IDLE_FRESH, IDLE_RESUME_SWITCH, IDLE_RESUME_EXP = range(3)


def rng_addresses(rng: np.random.Generator) -> np.ndarray:
    """(6,) int64: what numba's ``Generator`` holds of ``rng``'s bit generator (its state and the
    addresses of its ``next_*`` functions), so that a compiled loop draws from the very same
    stream without converting the Python object at each call (about 8 us apiece). ``rng`` must
    outlive every use of the addresses."""
    import ctypes

    ct = rng.bit_generator.ctypes
    address = lambda f: ctypes.cast(f, ctypes.c_void_p).value  # noqa: E731
    return np.array([ct.state_address, ct.state.value, address(ct.next_uint64), address(ct.next_uint32),
                     address(ct.next_double), ct.bit_generator.value], dtype=np.int64)


def _idle_events(resume, fs, ist, fa, ia, ba, status, pool):
    """The simulator's ``advance_while_idle`` (no allowed-type restrictions, compiled backend):
    advance through decision epochs where advancing is the only legal decision, event after event,
    in one call. ``fs`` / ``ist``: the simulator's float and integer scalars (``IF_*`` / ``II_*``),
    read and written in place; ``fa`` / ``ia`` / ``ba``: the arenas of its arrays (``arenas``);
    ``pool``: the spread jobs' machines. Each event is ``ClusterSimulator.advance`` operation for operation:
    ``event`` (``run_to_next`` plus the trivial measurement's time stamps), the accounting, the
    completions of single-machine jobs (``release_slot``), the arrivals, the fluctuation update
    (``fluct_apply`` and ``fluct_finish``) and the scheduling tick. The fluctuation arrays are
    ``FluctuationProcess``'s (the simulator gives it arena views; ``switch_due_out`` / ``since``: its
    ``_due`` / ``_since``).

    The random draws come from the simulator's numpy generator (``rng_addresses`` in ``ist``:
    numba's ``Generator``, numpy's streams). What needs Python is handed back with the state in
    ``fs`` / ``ist`` (see ``IDLE_*``): numpy's ``exp`` of several switches' decay exponents (then
    ``IDLE_RESUME_SWITCH``) and of ``factors`` (then ``IDLE_RESUME_EXP``; nothing else may change
    in between), the
    completions of an event that include a spread job, no future event. Each completed job is
    recorded in ``released`` (rows: job, the job moved into its slot or -1, its machine;
    ``II_RELEASED`` of them) for the caller's dictionaries. Returns an ``IDLE_*`` code."""
    (s_float, job_block, machine_rows, machine_float, fluct_rows, static, submit, duration, type_float, scratch,
     z, draws, s_int, machine_int, type_int, gpus, machine_type, due_out, released, switch_due_out, s_flag,
     straggling) = arena_views(fa, ia, ba)  # noqa: F821
    log_speed, log_mult, factors, next_switch, since = (fluct_rows[0], fluct_rows[1], fluct_rows[2], fluct_rows[3],
                                                        fluct_rows[4])
    u, e, ex = draws[0], draws[1], draws[2]
    price_s, extra_w = type_float[0], type_float[1]
    empty = due_out[:0]
    num_jobs, window = ist[II_NUM_JOBS], ist[II_WINDOW]
    time_limit, alpha, tick = fs[IF_TIME_LIMIT], fs[IF_ALPHA], fs[IF_TICK]
    fluct, stamp, static_rates = ist[II_FLUCT] != 0, ist[II_STAMP] != 0, ist[II_STATIC_RATES] != 0
    # A completion: True, typed as a plain bool (a literal True would compile a second
    # specialisation of release_slot beside the Python caller's).
    finished = ist[II_NUM_JOBS] >= 0
    # Where the loop resumes: -1 at its checks; 0 at an event (after the update of a fluctuation
    # that fell due while nothing ran); 1 at the end of an event (after its fluctuation update).
    at = -1
    if resume != IDLE_FRESH:
        at = ist[II_AT]
        if resume == IDLE_RESUME_SWITCH and fluct_apply(  # noqa: F821
                fs, ist, s_float, s_int, s_flag, machine_rows, pool, empty, machine_float, scratch, log_speed,
                log_mult, factors, next_switch, since, switch_due_out, straggling, z, u, e, ex):
            return IDLE_EXP
        fluct_finish(fs, ist, machine_rows[0], static, factors)  # noqa: F821
    while True:
        if at == -1:
            # advance_while_idle's checks, then advance's periodic events due while nothing ran.
            if ist[II_FINISHED] == num_jobs or not fs[IF_NOW] < time_limit:
                return IDLE_DONE
            if ist[II_N] and ist[II_RUNNING_CHOICE]:
                return IDLE_DONE
            if ist[II_PENDING] and ist[II_SMALLEST] <= ist[II_FREE]:
                return IDLE_DONE
            if not (ist[II_NEXT_ARRIVAL] < num_jobs or ist[II_N]):
                return IDLE_DONE
            if fluct and fs[IF_NEXT_FLUCT] <= fs[IF_NOW]:
                code = fluct_update(  # noqa: F821
                    0, fs, ist, s_float, s_int, s_flag, machine_rows, pool, empty, machine_float, scratch, log_speed,
                    log_mult, factors, next_switch, since, switch_due_out, straggling, z, u, e, ex, static)
                if code != _FLUCT_DONE:
                    return code
        if at != 1:
            now = fs[IF_NOW]
            if fs[IF_NEXT_TICK] <= now:
                fs[IF_NEXT_TICK] = now + tick
            arrival = ist[II_NEXT_ARRIVAL]
            t_next = submit[arrival] if arrival < num_jobs else np.inf
            if t_next > time_limit:
                t_next = time_limit
            n = ist[II_N]
            due = 0
            if n:
                dirty = ist[II_DIRTY] != 0
                t_other = min(t_next, fs[IF_NEXT_FLUCT], fs[IF_NEXT_TICK])
                t_next, finish, restarting, due = event(  # noqa: F821
                    n, dirty, s_float, s_int, s_flag, machine_rows, alpha,
                    pool if dirty and ist[II_N_MULTI] else empty, now, ist[II_RESTARTING] != 0, t_other,
                    scratch, due_out, stamp, fs[IF_MEASURE_TIME], machine_float[1])
                fs[IF_NEXT_FINISH] = finish
                ist[II_RESTARTING] = 1 if restarting else 0
                ist[II_DIRTY] = 0
            if not math.isfinite(t_next):
                return IDLE_NO_EVENT
            dt = t_next - now
            if dt > 0:
                fs[IF_JOB_SECONDS] += (ist[II_ARRIVED] - ist[II_FINISHED]) * dt
                fs[IF_FEE] += fs[IF_FEE_RATE] * dt
                fs[IF_ENERGY] += fs[IF_POWER] * dt
                if n:
                    fs[IF_BUSY] += ist[II_HELD] * dt
            now = t_next
            fs[IF_NOW] = now
            ist[II_EVENTS] += 1
            if not fluct:
                # The trivial measurement (the caller uses this loop without fluctuation only then).
                if n and now - fs[IF_MEASURE_TIME] > 0 and n != ist[II_N_MULTI]:
                    ist[II_MEASURE_VERSION] += 1
                fs[IF_MEASURE_TIME] = now
            if due:
                for c in range(due):
                    if s_flag[0, due_out[c]]:
                        ist[II_DUE] = due
                        return IDLE_MULTI
                # _complete_due: the due jobs in slot order, each released in turn (a release moves
                # the last slot into the freed one).
                for c in range(due):
                    k = due_out[c]
                    last = ist[II_N] - 1
                    job = s_int[0, k]
                    m = s_int[1, k]
                    g = gpus[job]
                    r = ist[II_RELEASED]
                    released[0, r] = job
                    released[1, r] = s_int[0, last] if k != last else -1
                    released[2, r] = m
                    ist[II_RELEASED] = r + 1
                    for d in range(c + 1, due):
                        if due_out[d] == last:
                            due_out[d] = k
                    release_slot(k, last, job, now, s_float, s_int, s_flag, job_block, duration, gpus, m, g,  # noqa: F821
                                 machine_int, machine_rows[1], type_int, machine_type, finished, status)
                    t = machine_type[m]
                    ist[II_HELD] -= g
                    ist[II_FREE] += g
                    fs[IF_FEE_RATE] += -g * price_s[t]
                    fs[IF_POWER] += -g * extra_w[t]
                    ist[II_N] = last
                    if not static_rates:
                        ist[II_DIRTY] = 1
                    ist[II_FINISHED] += 1
            if arrival < num_jobs and submit[arrival] <= now:
                while ist[II_NEXT_ARRIVAL] < num_jobs and submit[ist[II_NEXT_ARRIVAL]] <= now:
                    job = ist[II_NEXT_ARRIVAL]
                    status[job] = 1                                   # PENDING
                    # The smallest request among the queue's ``window`` oldest jobs.
                    if ist[II_PENDING] == 0 or (ist[II_PENDING] < window and gpus[job] < ist[II_SMALLEST]):
                        ist[II_SMALLEST] = gpus[job]
                    ist[II_PENDING] += 1
                    ist[II_PENDING_GPUS] += gpus[job]
                    ist[II_NEXT_ARRIVAL] += 1
                    ist[II_ARRIVED] += 1
            if fluct and now >= fs[IF_NEXT_FLUCT] - TIME_EPS:
                code = fluct_update(  # noqa: F821
                    1, fs, ist, s_float, s_int, s_flag, machine_rows, pool, empty, machine_float, scratch, log_speed,
                    log_mult, factors, next_switch, since, switch_due_out, straggling, z, u, e, ex, static)
                if code != _FLUCT_DONE:
                    return code
        at = -1
        now = fs[IF_NOW]
        if now >= fs[IF_NEXT_TICK] - TIME_EPS:
            fs[IF_LAST_TICK] = now
            fs[IF_NEXT_TICK] = now + tick


#: ``_fluct_update``'s result when the update finished in the loop (else an ``IDLE_*`` hand-back).
_FLUCT_DONE = -1


def _fluct_update(at, fs, ist, s_float, s_int, s_flag, machine_rows, pool, empty, machine_float, scratch, log_speed,
                  log_mult, factors, next_switch, since, switch_due_out, straggling, z, u, e, ex, static):
    """The fluctuation update due now in ``_idle_events`` (inlined at its two places: before an
    event, ``at`` 0, and at an event's end, ``at`` 1, where the loop resumes after a hand-back):
    ``_fluct_draws``, ``_fluct_apply``, ``_fluct_finish``. Returns ``_FLUCT_DONE``, or the
    ``IDLE_*`` code handing numpy's ``exp`` back to Python."""
    ist[II_AT] = at
    if fluct_draws(fs, ist, s_float, s_flag, next_switch, since, switch_due_out):  # noqa: F821
        return IDLE_SWITCH_EXP
    if fluct_apply(fs, ist, s_float, s_int, s_flag, machine_rows, pool, empty, machine_float,  # noqa: F821
                   scratch, log_speed, log_mult, factors, next_switch, since, switch_due_out,
                   straggling, z, u, e, ex):
        return IDLE_EXP
    fluct_finish(fs, ist, machine_rows[0], static, factors)  # noqa: F821
    return _FLUCT_DONE


def _fluct_draws(fs, ist, s_float, s_flag, next_switch, since, switch_due_out):
    """How many random draws the fluctuation update due now makes (``_update_fluctuation``): the
    measurement's normals (one per measured job, when there is noise), the OU step's (one per
    machine), then one uniform and one exponential per straggler switch due (found here with
    ``switch_due``, into ``switch_due_out`` / ``since``). Writes ``II_MEASURED`` (jobs measured),
    ``II_NORMALS`` and ``II_SWITCHES``; returns whether the switches need numpy's ``exp`` of their
    decay exponents (more than one switch: ``_switch`` calls numpy then)."""
    now = fs[IF_NOW]
    n = ist[II_N]
    count = 0
    if n and now - fs[IF_MEASURE_TIME] > 0:
        if ist[II_RESTARTING]:
            count = measurable_count(n, s_flag[1], s_float[4], now)  # noqa: F821
        else:
            count = n - ist[II_N_MULTI]
    ist[II_MEASURED] = count
    normals = count if fs[IF_NOISE] > 0 else 0
    switches = 0
    dt = now - fs[IF_FLUCT_TIME]
    n_machines = len(next_switch)
    if dt != 0 and n_machines != 0:
        if fs[IF_SIGMA] > 0:
            normals += n_machines
        if fs[IF_F_TIME] + dt >= fs[IF_F_NEXT_MIN]:
            switches = switch_due(next_switch, fs[IF_F_TIME] + dt, switch_due_out, since)  # noqa: F821
    ist[II_NORMALS] = normals
    ist[II_SWITCHES] = switches
    return switches > 1


def _fluct_apply(fs, ist, s_float, s_int, s_flag, machine_rows, pool, empty, machine_float, scratch, log_speed,
                 log_mult, factors, next_switch, since, switch_due_out, straggling, z, u, e, ex):
    """``_update_fluctuation`` up to the factors' exp, drawing what ``_fluct_draws`` counted from
    the simulator's generator in the reference's order (into ``z``: the measurement's normals then
    the OU step's; ``u`` / ``e``: the switches' uniforms, then their exponentials; ``ex``: numpy's
    exp of their decay exponents, when more than one): the measurement (``measure_rates``), then
    ``FluctuationProcess.advance`` (``ou_step``, the switches as ``_switch`` makes them, the
    log-factors). Returns whether the factors need their exp (not when no time passed)."""
    rng = generator_from(ist[II_RNG: II_RNG + 6])  # noqa: F821
    for i in range(ist[II_NORMALS]):
        z[i] = rng.standard_normal()
    now = fs[IF_NOW]
    dt = now - fs[IF_FLUCT_TIME]
    dt_measure = now - fs[IF_MEASURE_TIME]
    fs[IF_MEASURE_TIME] = now
    count = ist[II_MEASURED]
    used = 0
    if count:
        n = ist[II_N]
        dirty = ist[II_DIRTY] != 0
        noise = fs[IF_NOISE]
        if noise > 0:
            used = count
        measure_rates(n, dirty, s_float, s_int, s_flag, machine_rows, fs[IF_ALPHA],  # noqa: F821
                      pool if dirty and ist[II_N_MULTI] else empty, now, ist[II_RESTARTING] != 0, ist[II_N_MULTI],
                      z[:used], noise, -math.expm1(-dt_measure / fs[IF_TAU]), machine_float, scratch)
        ist[II_DIRTY] = 0
        ist[II_MEASURE_VERSION] += 1
    n_machines = len(log_speed)
    if dt == 0 or n_machines == 0:
        return False
    ftime = fs[IF_F_TIME] + dt
    fs[IF_F_TIME] = ftime
    switching = ftime >= fs[IF_F_NEXT_MIN]
    if fs[IF_SIGMA] > 0:
        if dt != fs[IF_F_CACHE_DT]:
            theta = fs[IF_THETA]
            fs[IF_F_DECAY] = math.exp(-theta * dt)
            fs[IF_F_NOISE] = fs[IF_SIGMA] * math.sqrt(-math.expm1(-2.0 * theta * dt))
            fs[IF_F_CACHE_DT] = dt
        ou_step(log_speed, z[used: used + n_machines], fs[IF_F_NOISE], fs[IF_F_DECAY], log_mult,  # noqa: F821
                factors[:0] if switching else factors)
    if switching:
        count = ist[II_SWITCHES]
        pi, tot = fs[IF_PI], fs[IF_TOT]
        for k in range(count):
            u[k] = rng.random()
        for k in range(count):
            e[k] = rng.standard_exponential()
        if count == 1:                             # FluctuationProcess._switch, scalar work
            i = switch_due_out[0]
            x = math.exp(-tot * since[0])
            p_on = pi + (1.0 - pi) * x if not straggling[i] else pi * (1.0 - x)
            on = u[0] < p_on
            straggling[i] = on
            log_mult[i] = (fs[IF_LOG_SLOW] if on else 0.0) - fs[IF_SHIFT]
            if on:
                next_switch[i] = ftime + fs[IF_ON_MEAN] * e[0]
            elif fs[IF_LAM] > 0:
                next_switch[i] = ftime + fs[IF_OFF_MEAN] * e[0]
            else:
                next_switch[i] = np.inf
        elif count:
            fs[IF_F_NEXT_MIN] = switch_apply(  # noqa: F821
                count, switch_due_out, ex, u, e, straggling, log_mult, next_switch, pi, fs[IF_LOG_SLOW],
                fs[IF_SHIFT], ftime, fs[IF_ON_MEAN], fs[IF_OFF_MEAN] if fs[IF_LAM] > 0 else np.inf)
        if count <= 1:
            # np.minimum.reduce of the next switch times (nan first, as it propagates nan)
            best = np.inf
            for v in next_switch:
                if v < best or v != v:
                    best = v
                    if v != v:
                        break
            fs[IF_F_NEXT_MIN] = best
    if switching or not fs[IF_SIGMA] > 0:
        for i in range(n_machines):
            factors[i] = log_speed[i] + log_mult[i]
    return True


def _fluct_finish(fs, ist, machine_factor, static, factors):
    """The end of ``_update_fluctuation`` after the factors' exp: the machine factors, the time of
    the update and of the next one (``_fluct_period``), every speed to refresh."""
    now = fs[IF_NOW]
    fs[IF_FLUCT_TIME] = now
    for i in range(len(static)):
        machine_factor[i] = static[i] * factors[i]
    interval = fs[IF_INTERVAL]
    fs[IF_NEXT_FLUCT] = now + (interval if ist[II_PENDING] else max(interval, fs[IF_QUIET]))
    ist[II_DIRTY] = 1

def _with_globals(template, name, **parts):
    """A copy of ``template`` whose globals name the given compiled parts (see _make_run_to_next)."""
    fn = types.FunctionType(template.__code__, dict(globals(), **parts), name)
    fn.__doc__ = template.__doc__
    return fn


def _np_measurable_count(n, single, until, now):
    """How many running slots are measured now while restart overheads run: single-machine jobs
    past theirs (otherwise every single-machine job is, and the caller counts them)."""
    return int(np.count_nonzero(single[:n] & (until[:n] <= now)))


def _np_measure(n, single, until, now, restarting, n_multi, rate, nominal, fm, z, noise, w_fresh,
                measured, measured_at, scratch):
    """Moving-average update of the measured speed of each measured job's machine (z: one standard
    normal per measured job, empty when noise is 0). Later jobs on a machine win, as numpy's
    scatter does."""
    if restarting:
        ok = single[:n] & (until[:n] <= now)
    elif n_multi == 0:
        ok = slice(0, n)
    else:
        ok = single[:n]
    ratio = rate[:n][ok] / nominal[:n][ok]
    if noise > 0:
        z *= noise
        z += 1.0
        ratio *= z
    machines = fm[:n][ok]
    w = np.where(np.isfinite(measured_at[machines]), w_fresh, 1.0)
    old = measured[machines]
    old += w * (ratio - old)
    measured[machines] = old
    measured_at[machines] = now


def _np_ou_step(log_speed, z, noise, decay, log_mult, out):
    """Exact OU step ``x = x decay + noise z`` (z: standard normals, scaled in place); then, if
    ``out`` is not empty, ``out = x + log_mult`` (the log of the factors)."""
    z *= noise
    log_speed *= decay
    log_speed += z
    if len(out):
        np.add(log_speed, log_mult, out=out)


def _np_switch_due(next_switch, time, due_out, since_out):
    """Machines whose straggler switch is due by ``time`` into ``due_out`` and the time since
    their switch into ``since_out``; returns their count."""
    due = (next_switch <= time).nonzero()[0]
    k = len(due)
    due_out[:k] = due
    np.subtract(time, next_switch[due], out=since_out[:k])
    return k


def _ou_switch_due(log_speed, z, noise, decay, log_mult, out, switching, next_switch, time, due_out, since_out):
    """``ou_step``, then, if ``switching``, ``switch_due`` (one call); returns the due count (0
    when not switching). A template: each backend's copy has its own parts as globals."""
    ou_step(log_speed, z, noise, decay, log_mult, out)  # noqa: F821
    return switch_due(next_switch, time, due_out, since_out) if switching else 0  # noqa: F821


def _np_switch_apply(count, due, ex, u, e, straggling, log_mult, next_switch, pi, log_slow, shift, time,
                     on_mean, off_mean):
    """New straggler states of ``count`` due machines from the chain's transition law (``ex``:
    exp(-(lam + mu) x time since the switch), ``u`` uniforms, ``e`` exponentials; ``off_mean``
    inf when stragglers never start); returns the next switch time of all machines."""
    d = due[:count]
    entered = ~straggling[d]
    p_on = np.where(entered, pi + (1.0 - pi) * ex, pi * (1.0 - ex))
    on = u < p_on
    straggling[d] = on
    log_mult[d] = np.where(on, log_slow, 0.0) - shift
    off = off_mean * e if off_mean != np.inf else np.inf
    next_switch[d] = time + np.where(on, on_mean * e, off)
    return float(np.minimum.reduce(next_switch))


# ---------------------------------------------------------------------------------- numba's disk cache
#: The kernels' files in numba's cache directory are kept under this size: past it they are all
#: removed and this process writes a fresh set (one compile). A set is about 0.6 MB.
CACHE_LIMIT_BYTES = 16 * 2**20
#: With less free space than this where the cache lives, the kernels compile without caching.
CACHE_MIN_FREE_BYTES = 64 * 2**20

_cache_state = {"disabled": False, "warned": False, "pruned": set()}
_compile_announced = [False]       # the note below is printed once per process
#: Printed (stderr, once per process) when a kernel is about to compile: a fresh install's first
#: run would otherwise sit silent, and a progress bar started meanwhile would show a false ETA.
COMPILE_NOTE = ("cluster_env: compiling the simulator's kernels with numba (one time: later processes load "
                "them from numba's cache in about a second); this takes about 20-60 s on 2 idle cores")


def _announce_compile() -> None:
    if not _compile_announced[0]:
        _compile_announced[0] = True
        print(COMPILE_NOTE, file=sys.stderr, flush=True)


def cache_is_cold() -> bool:
    """Whether none of the compiled backend's kernels is in numba's disk cache (a fresh install, or
    this module changed: the next episode compiles them). False for the numpy backend or without a
    cache. Kernels of rare paths (restarts) may still compile later; the note says so then."""
    if backend() != "numba":
        return False
    indexes = [index for index in map(_index_path, vars(active()).values()) if index is not None]
    return bool(indexes) and not any(os.path.exists(index) for index in indexes)


def kernel_is_cold(name: str) -> bool:
    """Whether the compiled kernel ``name`` (e.g. ``"idle_events"``) is not in numba's disk cache:
    its first use in a process compiles it. False for the numpy backend or without a cache."""
    if backend() != "numba":
        return False
    index = _index_path(getattr(active(), name))
    return index is not None and not os.path.exists(index)


def _index_path(dispatcher) -> "str | None":
    """The path of a compiled kernel's cache index file (None: not a cached kernel)."""
    cache = getattr(getattr(dispatcher, "_cache", None), "_cache", None)
    return getattr(getattr(cache, "_cache_file", None), "_index_path", None)


def _cache_off(why: str) -> None:
    """Stop reading and writing the disk cache in this process; warn once. The kernels still
    compile and run (a few seconds more per process), so a bad cache location never stops a run."""
    _cache_state["disabled"] = True
    if not _cache_state["warned"]:
        _cache_state["warned"] = True
        warnings.warn(f"cluster_env: compiled-kernel cache off ({why}); the kernels compile in this "
                      f"process instead (a few seconds). Set NUMBA_CACHE_DIR to a writable folder "
                      f"to cache them.", RuntimeWarning, stacklevel=3)


class _GuardedCache:
    """numba's cache of one kernel, whose failures (a full disk, a folder made read-only, a
    truncated file) turn the cache off with one warning instead of raising inside an episode."""

    def __init__(self, cache) -> None:
        self._cache = cache

    def __getattr__(self, name):
        return getattr(self._cache, name)

    def load_overload(self, sig, target_context):
        loaded = None
        if not _cache_state["disabled"]:
            try:
                loaded = self._cache.load_overload(sig, target_context)
            except Exception as exc:  # noqa: BLE001 - any cache trouble means "compile instead"
                _cache_off(f"reading {self._cache.cache_path} failed: {type(exc).__name__}: {exc}")
        if loaded is None:       # numba compiles it now
            _announce_compile()
        return loaded

    def save_overload(self, sig, data) -> None:
        if _cache_state["disabled"]:
            return
        try:
            self._cache.save_overload(sig, data)
        except Exception as exc:  # noqa: BLE001
            _cache_off(f"writing {self._cache.cache_path} failed: {type(exc).__name__}: {exc}")


def _attach_cache(dispatcher) -> None:
    """Give a kernel numba's disk cache (``cache=True``), guarded, bounded and checked for space."""
    if _cache_state["disabled"]:
        return
    try:
        dispatcher.enable_caching()      # numba picks NUMBA_CACHE_DIR, the module's folder, or ~/.cache
    except Exception as exc:  # noqa: BLE001 - "no locator available": nowhere writable
        _cache_off(f"no writable cache folder: {exc}")
        return
    dispatcher._cache = _GuardedCache(dispatcher._cache)
    path = dispatcher._cache.cache_path
    if path not in _cache_state["pruned"]:
        _cache_state["pruned"].add(path)
        try:
            free = shutil.disk_usage(path).free
        except OSError as exc:
            free, why = 0, str(exc)
        else:
            why = f"only {free / 2**20:.0f} MiB free in {path}"
        if free < CACHE_MIN_FREE_BYTES:
            _cache_off(why)
            return
        prune_cache(path)


def cache_files(path: str) -> list[str]:
    """This module's files in numba's cache folder ``path`` (index ``.nbi`` and data ``.nbc``)."""
    stem = os.path.splitext(os.path.basename(__file__))[0] + "."
    try:
        names = os.listdir(path)
    except OSError:
        return []
    return [os.path.join(path, f) for f in names if f.startswith(stem) and f.endswith((".nbi", ".nbc"))]


def prune_cache(path: str, limit: int = CACHE_LIMIT_BYTES) -> int:
    """Bound the kernels' cache in ``path``: remove files older than this module's source (numba
    never loads them again: its index is stamped with the source's time and size), then, if the
    rest is still over ``limit`` bytes, all of them. Returns the number of files removed."""
    try:
        source_time = os.stat(__file__).st_mtime
    except OSError:
        return 0
    removed, kept = 0, []
    for f in cache_files(path):
        try:
            st = os.stat(f)
            if st.st_mtime < source_time:
                os.remove(f)
                removed += 1
            else:
                kept.append((f, st.st_size))
        except OSError:          # another process removed it first, or a read-only folder
            pass
    if sum(size for _, size in kept) > limit:
        for f, _ in kept:
            with contextlib.suppress(OSError):
                os.remove(f)
                removed += 1
    return removed


# ---------------------------------------------------------------------------------- numba backend
def _generator_intrinsic():
    """A compiled ``generator_from(addresses)``: numba's ``Generator`` on the bit generator whose
    ``rng_addresses`` are given (what numba's own conversion of a ``Generator`` argument builds,
    without the Python object: no reference is kept, the caller keeps the generator alive)."""
    from numba.core import cgutils
    from numba.core import types as nt
    from numba.extending import intrinsic

    generator = nt.NumPyRandomGeneratorType("numpy_random_generator")
    bit_generator = nt.NumPyRandomBitGeneratorType("bit_generator")

    @intrinsic
    def generator_from(typingctx, addresses):
        def codegen(context, builder, sig, args):
            words = context.make_array(sig.args[0])(context, builder, args[0])

            def word(i):
                return builder.load(cgutils.gep_inbounds(builder, words.data, i))

            bits = cgutils.create_struct_proxy(bit_generator)(context, builder)
            bits.parent = cgutils.get_null_value(bits.parent.type)
            bits.state_address, bits.state = word(0), word(1)
            bits.fnptr_next_uint64, bits.fnptr_next_uint32, bits.fnptr_next_double = word(2), word(3), word(4)
            bits.bit_generator = word(5)
            gen = cgutils.create_struct_proxy(generator)(context, builder)
            gen.bit_generator = bits._getvalue()
            gen.meminfo = cgutils.get_null_value(gen.meminfo.type)
            gen.parent = cgutils.get_null_value(gen.parent.type)
            return gen._getvalue()

        return generator(addresses), codegen

    return generator_from


def _numba_kernels():
    """Compile-on-first-use versions of the numpy kernels (same operations, element by element)."""
    import numba

    compile_ = numba.njit(nogil=True, error_model="numpy")

    def jit(fn):
        dispatcher = compile_(fn)
        _attach_cache(dispatcher)
        return dispatcher

    generator_from = _generator_intrinsic()

    @jit
    def refresh_rates(n, fm, machine_factor, crowd, nominal, acomm, rate, alpha, multi_slots, flat, seg):
        for i in range(n):
            m = fm[i]
            rate[i] = nominal[i] * machine_factor[m]
            if alpha != 0.0:
                rate[i] = rate[i] / (crowd[m] * acomm[i] + 1.0)
        if len(multi_slots) == 0:
            return
        # The compiled layout: multi_slots is the machine pool, flat the offset of each slot's
        # machines in it and seg their count (> 1 for a spread job).
        pool, offset, count = multi_slots, flat, seg
        for i in range(n):
            if count[i] <= 1:
                continue
            lo = offset[i]
            f = machine_factor[pool[lo]]
            c = crowd[pool[lo]]
            for p in range(lo + 1, lo + count[i]):
                f = min(f, machine_factor[pool[p]])
                c = max(c, crowd[pool[p]])
            rate[i] = nominal[i] * f
            if alpha != 0.0:
                rate[i] = rate[i] / (c * acomm[i] + 1.0)

    @jit
    def next_finish(n, left, rate, until, now, restarting, scratch):
        best = np.inf
        if restarting:
            still = False
            for i in range(n):
                u = until[i]
                if u > now:
                    still = True
                v = (u if u > now else now) + left[i] / rate[i]
                if v < best or v != v:
                    best = v
                    if v != v:
                        break
            return best, still
        for i in range(n):
            v = left[i] / rate[i]
            if v < best or v != v:
                best = v
                if v != v:
                    break
        return now + best, False

    @jit
    def accrue_due(n, left, rate, until, now, dt, restarting, check, tol, scratch, due_out):
        if dt > 0:
            if restarting:
                end = now + dt
                for i in range(n):
                    u = until[i]
                    e = end - (u if u > now else now)
                    e = min(max(e, 0.0), dt)
                    left[i] -= rate[i] * e
            else:
                for i in range(n):
                    left[i] -= rate[i] * dt
        if not check:
            return 0
        count = 0
        for i in range(n):
            if left[i] <= rate[i] * tol + 1e-12:
                due_out[count] = i
                count += 1
        return count

    run_to_next = jit(_make_run_to_next(refresh_rates, next_finish, accrue_due))

    @jit
    def measurable_count(n, single, until, now):
        count = 0
        for i in range(n):
            if single[i] and until[i] <= now:
                count += 1
        return count

    @jit
    def measure(n, single, until, now, restarting, n_multi, rate, nominal, fm, z, noise, w_fresh,
                measured, measured_at, scratch):
        # Two passes: every new value from the old ones, then the writes (numpy's gather/scatter).
        new = scratch
        j = 0
        for i in range(n):
            if (restarting and not (single[i] and until[i] <= now)) or (not restarting and n_multi > 0
                                                                         and not single[i]):
                continue
            ratio = rate[i] / nominal[i]
            if noise > 0:
                ratio = ratio * (z[j] * noise + 1.0)
            m = fm[i]
            w = w_fresh if np.isfinite(measured_at[m]) else 1.0
            old = measured[m]
            new[j] = old + w * (ratio - old)
            j += 1
        j = 0
        for i in range(n):
            if (restarting and not (single[i] and until[i] <= now)) or (not restarting and n_multi > 0
                                                                         and not single[i]):
                continue
            m = fm[i]
            measured[m] = new[j]
            measured_at[m] = now
            j += 1

    @jit
    def observe(jobs, machines, glob, plc, order_mask, place_mask, ids,                # outputs
                pending, running, placing_phase, refresh_measured, refresh_age, now,            # this step
                placing_job, placing_need, machines_used, pending_count, running_count, next_arrival,
                finished, pending_gpus,
                ep_int, ep_float, job_static, allowed, job_speed,                               # the episode
                job_state, restarts, free_per_type, machine_int, machine_float, rows):          # in place
        """Both agents' observation arrays in one pass, what ObservationBuilder's numpy path builds,
        written into the given zero-filled arrays (numba's boxing of returned arrays costs more).

        The episode's arrays travel in two arenas (numba converts each argument at every call):
        ``ep_int`` = K, R, preemption, clairvoyant, total GPUs, jobs N, then GPUs per job (N), GPU
        type per machine (M), and the free GPUs and jobs each machine row shows (2 M);
        ``ep_float`` = submit times, durations, best speeds (N each), 1 / GPUs per machine (M), a
        memo of ages (16), and a memo of each job's wait feature: the instant it was last computed
        at (N, NaN: never) and its value, ``log1p(now - submit)`` (N; a decision that does not move
        the clock shows the same waits, not recomputed per row). ``job_state``: progress, attained,
        executed; ``machine_int``: free GPUs, jobs; ``machine_float``: measured speed, time
        measured. ``rows`` is the private (M, 11) machine block, brought up to date incrementally:
        a row's free/jobs columns only when its values differ from those it shows, the measured
        column when a measurement happened, the age column when the clock or a measurement moved
        (one log1p per distinct measurement time); then it is copied out."""
        K, R, preemption, clairvoyant = ep_int[0], ep_int[1], ep_int[2] != 0, ep_int[3] != 0
        total_gpus, num_jobs = ep_int[4], ep_int[5]
        M = rows.shape[0]
        N = num_jobs
        gpus = ep_int[6: 6 + N]
        machine_type = ep_int[6 + N: 6 + N + M]
        shown_free = ep_int[6 + N + M: 6 + N + 2 * M]
        shown_jobs = ep_int[6 + N + 2 * M: 6 + N + 3 * M]
        submit, duration, best_speed = ep_float[0: N], ep_float[N: 2 * N], ep_float[2 * N: 3 * N]
        gpus_inv = ep_float[3 * N: 3 * N + M]
        memo_at = ep_float[3 * N + M: 3 * N + M + 8]
        memo_age = ep_float[3 * N + M + 8: 3 * N + M + 16]
        wait_at = ep_float[3 * N + M + 16: 4 * N + M + 16]
        wait_log = ep_float[4 * N + M + 16: 5 * N + M + 16]
        progress, attained, executed = job_state[0], job_state[1], job_state[2]
        free_total = 0
        for t in range(free_per_type.shape[0]):
            free_total += free_per_type[t]
        can_advance = next_arrival < num_jobs or running_count > 0 or finished == num_jobs
        free, mjobs = machine_int[0], machine_int[1]
        measured, measured_at = machine_float[0], machine_float[1]
        n_rows = K + R
        n_feat = job_static.shape[1]
        ids[:] = -1
        has_allowed = allowed.shape[0] > 0
        n_types = free_per_type.shape[0]
        for r in range(len(pending) + len(running)):
            is_running = r >= len(pending)
            j = running[r - len(pending)] if is_running else pending[r]
            row = K + r - len(pending) if is_running else r
            ids[row] = j
            for c in range(n_feat):
                jobs[row, c] = job_static[j, c]
            if wait_at[j] == now:        # the wait shown at this instant already (a memo per job)
                jobs[row, 3] = wait_log[j]
            else:
                w = math.log1p(now - submit[j])
                wait_at[j] = now
                wait_log[j] = w
                jobs[row, 3] = w
            if is_running or preemption:
                jobs[row, 4] = math.log1p(attained[j])
                jobs[row, 5] = math.log1p(executed[j])
                jobs[row, 8] = math.log1p(restarts[j])
            if is_running:
                jobs[row, 1] = 1.0
                order_mask[row] = 1
            else:
                usable = free_total
                if has_allowed:
                    usable = 0
                    for t in range(n_types):
                        if allowed[j, t]:
                            usable += free_per_type[t]
                fits = gpus[j] <= usable
                jobs[row, 11] = 1.0 if fits else 0.0
                if fits and not placing_phase:
                    order_mask[row] = 1
            if clairvoyant:
                jobs[row, 10] = math.log1p((duration[j] - progress[j]) / best_speed[j])
        if placing_phase:
            for r in range(n_rows):
                order_mask[r] = 0
        n_memo = 0
        for m in range(M):
            f = free[m]
            if f != shown_free[m]:
                shown_free[m] = f
                rows[m, 3] = f * 0.125
                rows[m, 4] = f * gpus_inv[m]
            b = mjobs[m]
            if b != shown_jobs[m]:
                shown_jobs[m] = b
                rows[m, 5] = b
            if refresh_measured:
                rows[m, 6] = measured[m]
            if refresh_age:
                at = measured_at[m]
                if at == -np.inf:
                    v = -1.0
                else:
                    # Machines measured together share their age: one log1p per distinct time.
                    hit = -1
                    for s in range(min(n_memo, 8)):
                        if memo_at[s] == at:
                            hit = s
                            break
                    if hit >= 0:
                        v = memo_age[hit]
                    else:
                        v = math.log1p(now - at)
                        s = n_memo % 8
                        memo_at[s] = at
                        memo_age[s] = v
                        n_memo += 1
                rows[m, 7] = v
        n_cols = rows.shape[1]
        for m in range(M):           # a plain loop: ``machines`` may be a row of a stacked buffer
            for c in range(n_cols):
                machines[m, c] = rows[m, c]
        if placing_phase:
            for m in range(M):
                ok = free[m] > 0 and (not has_allowed or allowed[placing_job, machine_type[m]])
                machines[m, 9] = 1.0 if ok else 0.0
                machines[m, 10] = job_speed[placing_job, machine_type[m]]
                place_mask[m] = 1 if ok else 0
        glob[0] = 1.0 if placing_phase else 0.0
        glob[1] = math.log1p(now)
        glob[2] = math.log1p(pending_count)
        glob[3] = math.log1p(running_count)
        glob[4] = free_total / total_gpus
        glob[5] = (num_jobs - next_arrival) / num_jobs
        glob[6] = finished / num_jobs
        glob[7] = math.log1p(pending_gpus)
        glob[8] = 1.0 if preemption else 0.0
        glob[9] = 1.0 if clairvoyant else 0.0
        if placing_phase:
            j = placing_job
            plc[0] = 1.0
            plc[1] = job_static[j, 2]
            plc[2] = math.log2(1 + placing_need)
            plc[3] = job_static[j, 6]
            plc[4] = math.log1p(now - submit[j])
            plc[5] = math.log1p(attained[j])
            plc[6] = math.log1p(duration[j]) if clairvoyant else -1.0
            plc[7] = job_static[j, 12]
            plc[8] = machines_used
            order_mask[n_rows] = 1
        else:
            plc[6] = -1.0
            order_mask[n_rows] = 1 if can_advance else 0
            place_mask[M] = 1

    @jit
    def place_launch(k, job, m, take, now, overhead, alpha, s_float, s_int, s_flag, job_block, restarts, status,
                     duration, comm, job_speed, machine_type, machine_int, crowd, type_int, static_rate,
                     machine_factor):
        """The simulator's ``place`` and ``_launch`` of a job taking all its ``take`` GPUs on machine
        ``m``, compiled: GPUs and counts per machine and type, the job's nominal speed (``job_block``
        row 6), first start (row 7) and status, and its new slot ``k``. ``static_rate`` (no
        fluctuation, no contention): the slot's true speed too, which then never changes (what
        ``refresh_rates`` computes). Returns whether a restart overhead began. The same
        operations as the Python path."""
        t = machine_type[m]
        machine_int[0, m] -= take
        type_int[0, t] -= take
        type_int[1, t] += take
        machine_int[1, m] += 1
        crowd[m] += 1.0
        nominal = job_speed[job, t]
        job_block[6, job] = nominal
        if np.isnan(job_block[7, job]):
            job_block[7, job] = now
        status[job] = 2                                   # RUNNING
        until = now
        restarting = False
        if restarts[job] > 0 and overhead > 0:
            until = now + overhead
            restarting = True
        # s_float rows: left, rate, nominal, alpha x comm, restart end, launch time; s_int rows:
        # job, first machine, pool offset, machine count; s_flag rows: multi, single.
        s_int[0, k] = job
        s_float[0, k] = duration[job] - job_block[0, job]
        s_float[2, k] = nominal
        s_float[3, k] = alpha * comm[job]
        s_int[1, k] = m
        s_flag[0, k] = False
        s_flag[1, k] = True
        s_float[4, k] = until
        s_float[5, k] = now
        s_int[3, k] = 1
        if static_rate:
            s_float[1, k] = nominal * machine_factor[m]
        return restarting

    @jit
    def release_slot(k, last, job, now, s_float, s_int, s_flag, job_block, duration, gpus, m, g,
                     machine_int, crowd, type_int, machine_type, finished, status):
        """Release running slot ``k`` of ``job`` (the simulator's ``_release``, compiled): fold it
        into the per-job arrays (``job_block`` rows: progress, attained, executed, held, executed
        and held before this run, ..., finish time), move the ``last`` slot into it and, for a job
        on the single machine ``m >= 0`` with ``g`` GPUs, give them back (free / jobs per machine,
        ``crowd``, free / held per type). ``finished``: the job completes now (no work left,
        finish time, status FINISHED: the simulator's ``_complete_due``). The same IEEE
        operations as the Python path."""
        # s_float rows: left, rate, nominal, alpha x comm, end of restart overhead, launch time.
        if finished:
            s_float[0, k] = 0.0
        until, t0 = s_float[4, k], s_float[5, k]
        started = t0 if t0 > until else until             # Python's max(until, t0)
        job_block[0, job] = duration[job] - s_float[0, k]
        e = now - started
        job_block[4, job] += 0.0 if 0.0 > e else e        # Python's max(e, 0.0)
        job_block[2, job] = job_block[4, job]
        job_block[1, job] = gpus[job] * job_block[2, job]
        job_block[5, job] += now - t0
        job_block[3, job] = job_block[5, job]
        if k != last:
            for r in range(s_float.shape[0]):
                s_float[r, k] = s_float[r, last]
            for r in range(s_int.shape[0]):
                s_int[r, k] = s_int[r, last]
            for r in range(s_flag.shape[0]):
                s_flag[r, k] = s_flag[r, last]
        if m >= 0:
            machine_int[0, m] += g
            machine_int[1, m] -= 1
            crowd[m] -= 1.0
            t = machine_type[m]
            type_int[0, t] += g
            type_int[1, t] -= g
        if finished:
            job_block[0, job] = duration[job]
            job_block[8, job] = now
            status[job] = 3                               # FINISHED

    @jit
    def rank_running(n, now, s_float, s_int, job_block, duration, gpus, out):
        """The simulator's ``sync_running`` on its ``n`` running slots (``job_block`` rows:
        progress, attained, executed, held, executed and held before this run), then the running
        jobs with the most attained service first (ties: the lower job id), at most ``len(out)``
        of them, written into ``out``; returns how many. The order of ``np.lexsort((jobs,
        -attained))`` and the same IEEE operations as ``sync_running``."""
        size = out.shape[0]
        count = 0
        for k in range(n):
            job = s_int[0, k]
            until, t0 = s_float[4, k], s_float[5, k]
            started = until if until >= t0 else t0        # np.maximum(until, t0)
            e = now - started
            if e < 0.0:                                   # np.maximum(e, 0.0)
                e = 0.0
            job_block[0, job] = duration[job] - s_float[0, k]
            job_block[2, job] = job_block[4, job] + e
            attained = gpus[job] * job_block[2, job]
            job_block[1, job] = attained
            job_block[3, job] = job_block[5, job] + (now - t0)
            # Insertion into the ranked head (a few dozen running jobs, a window of 16 or so).
            at = count
            while at > 0:
                other = out[at - 1]
                a = job_block[1, other]
                if attained > a or (attained == a and job < other):
                    at -= 1
                else:
                    break
            if at < size:
                end = count if count < size else size - 1
                for q in range(end, at, -1):
                    out[q] = out[q - 1]
                out[at] = job
                if count < size:
                    count += 1
        return count

    @jit
    def ou_step(log_speed, z, noise, decay, log_mult, out):
        add = len(out) > 0
        for i in range(len(log_speed)):
            x = log_speed[i] * decay + z[i] * noise
            log_speed[i] = x
            if add:
                out[i] = x + log_mult[i]

    @jit
    def switch_due(next_switch, time, due_out, since_out):
        k = 0
        for i in range(len(next_switch)):
            if next_switch[i] <= time:
                due_out[k] = i
                since_out[k] = time - next_switch[i]
                k += 1
        return k

    ou_switch_due = jit(_with_globals(_ou_switch_due, "ou_switch_due", ou_step=ou_step, switch_due=switch_due))

    @jit
    def switch_apply(count, due, ex, u, e, straggling, log_mult, next_switch, pi, log_slow, shift, time,
                     on_mean, off_mean):
        for k in range(count):
            i = due[k]
            p_on = pi + (1.0 - pi) * ex[k] if not straggling[i] else pi * (1.0 - ex[k])
            on = u[k] < p_on
            straggling[i] = on
            log_mult[i] = (log_slow if on else 0.0) - shift
            if on:
                next_switch[i] = time + on_mean * e[k]
            else:
                next_switch[i] = time + (off_mean * e[k] if off_mean != np.inf else np.inf)
        best = np.inf
        for i in range(len(next_switch)):
            v = next_switch[i]
            if v < best or v != v:
                best = v
                if v != v:
                    break
        return best

    event = jit(_with_globals(_event, "event", run_to_next=run_to_next))
    measure_rates = jit(_with_globals(_measure_rates, "measure_rates", refresh_rates=refresh_rates,
                                      measure=measure))
    fluct_draws = jit(_with_globals(_fluct_draws, "fluct_draws", measurable_count=measurable_count,
                                    switch_due=switch_due))
    fluct_apply = jit(_with_globals(_fluct_apply, "fluct_apply", measure_rates=measure_rates, ou_step=ou_step,
                                    switch_apply=switch_apply, generator_from=generator_from))
    fluct_finish = jit(_fluct_finish)
    # Inlined into the loop (a call would pass, and reference-count, its twenty arrays).
    fluct_update = numba.njit(inline="always", error_model="numpy")(
        _with_globals(_fluct_update, "fluct_update", fluct_draws=fluct_draws, fluct_apply=fluct_apply,
                      fluct_finish=fluct_finish))
    # Inlined: each caller takes only the views it uses (building all of them costs a microsecond).
    arena_views = numba.njit(inline="always", error_model="numpy")(_arena_views)
    idle_events = jit(_with_globals(_idle_events, "idle_events", event=event, release_slot=release_slot,
                                    fluct_apply=fluct_apply, fluct_finish=fluct_finish, fluct_update=fluct_update,
                                    arena_views=arena_views))

    return SimpleNamespace(name="numba", ou_step=ou_step, switch_due=switch_due, switch_apply=switch_apply,
                           ou_switch_due=ou_switch_due,
                           event=event, measure_rates=measure_rates,
                           refresh_rates=refresh_rates, next_finish=next_finish,
                           accrue_due=accrue_due, run_to_next=run_to_next,
                           measurable_count=measurable_count, measure=measure, observe=observe,
                           release_slot=release_slot, place_launch=place_launch, idle_events=idle_events,
                           rank_running=rank_running)


_NUMPY = SimpleNamespace(name="numpy", ou_step=_np_ou_step, switch_due=_np_switch_due,
                         ou_switch_due=_with_globals(_ou_switch_due, "ou_switch_due", ou_step=_np_ou_step,
                                                     switch_due=_np_switch_due),
                         switch_apply=_np_switch_apply, refresh_rates=_np_refresh_rates, next_finish=_np_next_finish,
                         accrue_due=_np_accrue_due, run_to_next=_np_run_to_next,
                         measurable_count=_np_measurable_count,
                         measure=_np_measure, observe=None, release_slot=None,
                         place_launch=None, idle_events=None, rank_running=None)
_loaded: dict[str, SimpleNamespace] = {"numpy": _NUMPY}


def _load(name: str) -> SimpleNamespace:
    if name not in BACKENDS:
        raise ValueError(f"unknown kernel backend {name!r}; choose one of {BACKENDS}")
    if name not in _loaded:
        _loaded[name] = _numba_kernels()
    return _loaded[name]


def _default() -> str:
    wanted = os.environ.get("CLUSTER_ENV_KERNELS", "numba").strip().lower() or "numba"
    if wanted not in BACKENDS:
        raise ValueError(f"CLUSTER_ENV_KERNELS must be one of {BACKENDS}, got {wanted!r}")
    if wanted == "numba":
        try:
            import numba  # noqa: F401
        except ImportError:       # optional speed-up: the numpy reference works everywhere
            return "numpy"
    return wanted


_active = _default()


def active() -> SimpleNamespace:
    """The kernels new simulators use (compiled on first use for numba)."""
    return _load(_active)


def backend() -> str:
    """Name of the active backend: ``"numba"`` or ``"numpy"``."""
    return _active


@contextlib.contextmanager
def use(name: str):
    """Build simulators with the ``name`` backend inside the block (``"numba"`` or ``"numpy"``)."""
    global _active
    _load(name)
    previous, _active = _active, name
    try:
        yield _loaded[name]
    finally:
        _active = previous


def warm_up(recorded: bool = False, engines: tuple[str, ...] = ("compiled", "python")) -> float:
    """Load the compiled kernels now (compiling them on a fresh install) instead of at their first
    use, by running one tiny episode; returns the seconds it took. Benchmarks call it so that a
    timed episode measures the simulation, not the one-off load (about 0.4 s from numba's cache,
    a few seconds to compile).

    ``recorded``: only what recorded episodes use (the harness's timelines and series: the
    Python simulator with its logs on, so the per-event path, without the compiled step, the
    skip-idle loop and placement, the largest compiles). ``engines``: the parallel env's engines
    to load, ``"compiled"`` (its default) and ``"python"`` (the Python simulator's kernels)."""
    import time

    import cluster_env

    t0 = time.perf_counter()
    # 300 jobs of philly-v0 (every effect on): all but the restart paths run, in the compiled step
    # (the parallel env's default) and in the Python simulator (other layouts and rewards,
    # recordings). The first allowed action mostly (the compiled skip-idle loop's path), now and
    # then "advance" where allowed (the per-event Python path and its kernels).
    unknown = set(engines) - {"compiled", "python"}
    if unknown:
        raise ValueError(f"engines must name 'compiled' and/or 'python', got {sorted(unknown)}")
    wanted = ("python",) if recorded else tuple(e for e in ("compiled", "python") if e in engines)
    for backend in (("auto" if e == "compiled" else e) for e in wanted):
        env = cluster_env.parallel_env("philly-v0", jobs_per_episode=300, backend=backend)
        obs, _ = env.reset(seed=0)
        if recorded:                     # as baselines.harness.episode.run_episode(record=True)
            env.sim.allocation_log, env.sim.event_log = [], []
        steps = 0
        while env.agents:
            actions = {agent: int(o["action_mask"].argmax()) for agent, o in obs.items()}
            mask = obs["orderer"]["action_mask"]
            if steps % 7 == 3 and mask[-1]:
                actions["orderer"] = len(mask) - 1
            obs, *_ = env.step(actions)
            steps += 1
    return time.perf_counter() - t0


def available() -> tuple[str, ...]:
    """Backends usable here (numba only when it imports)."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return ("numpy",)
    return BACKENDS


__all__ = ["BACKENDS", "COMPILE_NOTE", "active", "available", "backend", "cache_is_cold", "kernel_is_cold", "use",
           "warm_up"]
