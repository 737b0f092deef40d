"""The simulator's dynamics as compiled functions over a handful of state arrays: the shared
core of the compiled engines (the batched vector env's compiled backend,
:mod:`cluster_env.vector.compiled`, and the compiled baselines, :mod:`baselines.engine`).

Every function mirrors one piece of the reference, operation for operation, so that an episode
gives the same bits as :class:`cluster_env.core.simulator.ClusterSimulator` (``advance``,
``_measure``, ``_launch``, ``_release``, ``start``, ``place``, ``preempt``,
``advance_while_idle``, ``sync_running``) and
:class:`cluster_env.world.fluctuation.FluctuationProcess`; the per-event arithmetic calls the
simulator's own compiled kernels (:mod:`cluster_env.core.kernels`). The state layout is
:mod:`cluster_env.core.engine.layout`; :func:`cluster_env.core.engine.state.build_state` builds it.

Where the reference calls a numpy ufunc on an array (``np.exp`` of the fluctuation factors), the
loop calls numpy's own loop too: numpy's vectorised transcendental functions can differ from the
C library's in the last bit. It calls the C function of numpy's loop directly
(:mod:`cluster_env.core.engine.npy_loops`, its address in the state's parameters), or, where
that is unavailable, numpy through ``numba.objmode``.

This module imports numba: import it only when numba is available.
"""
from __future__ import annotations

import math
import os

import numba
import numpy as np

from cluster_env.core import kernels as _kernels
from cluster_env.core.engine.layout import *  # noqa: F401,F403 - numba reads them as compile-time constants
from cluster_env.core.engine.ref import stash  # noqa: F401 - the episode loops' entry (see ref)
from cluster_env.core.engine import ref as _ref
from cluster_env.core.engine import npy_loops as _npy
from cluster_env.world import interconnect as _interconnect

# The simulator's compiled kernels, as module globals (numba caches a function that calls other
# compiled functions through globals; through a closure it would recompile in every process).
_K = _kernels._load("numba")
refresh_rates = _K.refresh_rates
measurable_count = _K.measurable_count
measure_kernel = _K.measure
ou_step = _K.ou_step
switch_due = _K.switch_due
switch_apply = _K.switch_apply
observe_kernel = _K.observe
TIME_EPS = _kernels.TIME_EPS


def prune_stale_cache(module_file: str, *dependencies: str) -> None:
    """Remove ``module_file``'s cached machine code older than it or the files it calls into:
    numba stamps a cache entry with its own source file only, so a changed callee would
    otherwise be served stale from the cache."""
    here = os.path.dirname(os.path.abspath(module_file))
    stem = os.path.splitext(os.path.basename(module_file))[0] + "."
    try:
        newest = max(os.stat(f).st_mtime for f in (module_file,) + dependencies)
    except OSError:
        return
    folders = {os.path.join(here, "__pycache__")}
    if os.environ.get("NUMBA_CACHE_DIR"):
        folders.add(os.environ["NUMBA_CACHE_DIR"])
    for folder in folders:
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if name.startswith(stem) and name.endswith((".nbi", ".nbc")):
                path = os.path.join(folder, name)
                try:
                    if os.stat(path).st_mtime < newest:
                        os.remove(path)
                except OSError:
                    pass


prune_stale_cache(__file__, _kernels.__file__, _ref.__file__, _npy.__file__, _interconnect.__file__)


def jit(fn):
    """numba.njit with the kernels' guarded, bounded disk cache."""
    dispatcher = numba.njit(error_model="numpy")(fn)
    _kernels._attach_cache(dispatcher)
    return dispatcher


_jit = jit

# The "allreduce" spread model's launch factor: the simulator's own function, compiled (the same
# arithmetic in the same order, so the same bits).
allreduce_speed_factor = jit(_interconnect.allreduce_speed_factor)

# ------------------------------------------------------------------------------ numpy calls
_unary_inplace = _npy.unary_inplace()


@_jit
def np_exp_inplace(a, pi):
    """numpy's exp (vectorised: not always the C library's last bit), as the reference calls it
    (``np.exp(a, out=a)``): numpy's loop at ``pi[EXP_LOOP]`` called directly, or numpy through
    objmode when there is none (see npy_loops)."""
    if pi[EXP_LOOP] != 0:
        _unary_inplace(pi[EXP_LOOP], pi[EXP_CTX], pi[EXP_AUX], a)
    else:
        with numba.objmode():
            np.exp(a, out=a)




# ------------------------------------------------------------------------------ next event
@_jit
def run_running(S, now, t_other):
    """The kernels' ``run_to_next`` (:func:`cluster_env.core.kernels._run_to_next`: the same
    operations in the same order, hence the same bits) on the state's running-job slots: the
    speeds refreshed when dirty, the next event time, every job's remaining work brought to it and
    the jobs due then (into the state's due slots). Returns (next event time, earliest finish,
    restart overhead still running, due count).

    Written over the slot rows in place rather than through row views (each view a reference
    count update and a descriptor to pass), and with the next-finish divisions in a loop of their
    own, which the compiler vectorises (the search, with its early exit on NaN, it does not)."""
    sf, ic = S[7], S[11]
    scratch, due = S[19], S[20]
    n = ic[N_RUN]
    if ic[DIRTY] != 0:
        refresh_all(S)
    best = np.inf
    if ic[RESTARTING] != 0:                        # next_finish, restarting
        restarting = False
        for i in range(n):
            u = sf[S_UNTIL, i]
            if u > now:
                restarting = True
            v = (u if u > now else now) + sf[S_LEFT, i] / sf[S_RATE, i]
            if v < best or v != v:
                best = v
                if v != v:
                    break
        finish = best
    else:                                          # next_finish
        restarting = False
        for i in range(n):
            scratch[i] = sf[S_LEFT, i] / sf[S_RATE, i]
        for i in range(n):
            v = scratch[i]
            if v < best or v != v:
                best = v
                if v != v:
                    break
        finish = now + best
    t_next = min(t_other, finish)
    if not math.isfinite(t_next):
        return t_next, finish, restarting, 0
    check = finish <= t_next * (1 + TIME_EPS) + TIME_EPS
    tol = max(1e-6, 4.0 * (np.nextafter(t_next, np.inf) - t_next)) if check else 0.0
    dt = t_next - now
    if dt > 0:                                     # accrue_due
        if restarting:
            end = now + dt
            for i in range(n):
                u = sf[S_UNTIL, i]
                e = end - (u if u > now else now)
                e = min(max(e, 0.0), dt)
                sf[S_LEFT, i] -= sf[S_RATE, i] * e
        else:
            for i in range(n):
                sf[S_LEFT, i] -= sf[S_RATE, i] * dt
    if not check:
        return t_next, finish, restarting, 0
    count = 0
    for i in range(n):
        if sf[S_LEFT, i] <= sf[S_RATE, i] * tol + 1e-12:
            due[count] = i
            count += 1
    return t_next, finish, restarting, count


# ------------------------------------------------------------------------------ pending queue
@_jit
def p_append(ji, ic, job):
    tail = ic[P_TAIL]
    ji[P_PREV, job] = tail
    ji[P_NEXT, job] = -1
    if tail >= 0:
        ji[P_NEXT, tail] = job
    else:
        ic[P_HEAD] = job
    ic[P_TAIL] = job
    ic[P_COUNT] += 1


@_jit
def p_remove(ji, ic, job):
    prv = ji[P_PREV, job]
    nxt = ji[P_NEXT, job]
    if prv >= 0:
        ji[P_NEXT, prv] = nxt
    else:
        ic[P_HEAD] = nxt
    if nxt >= 0:
        ji[P_PREV, nxt] = prv
    else:
        ic[P_TAIL] = prv
    ic[P_COUNT] -= 1


@_jit
def p_insort(ji, ic, job):
    """Insert ``job`` in job-id order (the simulator's ``bisect.insort``)."""
    after = -1
    j = ic[P_HEAD]
    while j >= 0 and j < job:
        after = j
        j = ji[P_NEXT, j]
    if j < 0:
        p_append(ji, ic, job)
        return
    ji[P_NEXT, job] = j
    ji[P_PREV, job] = after
    ji[P_PREV, j] = job
    if after >= 0:
        ji[P_NEXT, after] = job
    else:
        ic[P_HEAD] = job
    ic[P_COUNT] += 1




@_jit
def usable_free(ti, allowed, job):
    """Free GPUs of the types ``job`` may use (jobs with allowed GPU types)."""
    usable = 0
    for t in range(ti.shape[1]):
        if allowed[job, t]:
            usable += ti[FREE_T, t]
    return usable


# ``ClusterSimulator.fits`` and ``placeable`` are written out where they are used: numba
# reference-counts every array handed to an inlined helper, atomically, at each call, which in a
# loop over jobs or machines cost more than the rest of an event.


@_jit
def head_fits(S):
    """Whether one of the K oldest pending jobs fits (``advance_while_idle``'s test)."""
    ji, ic, pi = S[1], S[11], S[13]
    ti, allowed = S[6], S[16]
    j = ic[P_HEAD]
    c = 0
    while j >= 0 and c < pi[K]:
        ic[C_WALK] += 1
        if (ji[GPUS, j] <= (ic[FREE_TOTAL] if pi[HAS_ALLOWED] == 0 else usable_free(ti, allowed, j))):
            return True
        j = ji[P_NEXT, j]
        c += 1
    return False


# ------------------------------------------------------------------------------ dynamics
@_jit
def refresh_all(S):
    """``ClusterSimulator._refresh_rates`` (the compiled backend refreshes every speed)."""
    mf, sf, si, ic, pf = S[2], S[7], S[8], S[11], S[12]
    pool_m, empty_i = S[17], S[21]
    n = ic[N_RUN]
    ic[DIRTY] = 0
    if n == 0:
        return
    if ic[N_MULTI] > 0:
        refresh_rates(n, si[S_FM], mf[FACTOR], mf[CROWD], sf[S_NOMINAL], sf[S_ACOMM], sf[S_RATE], pf[ALPHA],
                      pool_m, si[S_MOFF], si[S_MLEN])
    else:
        refresh_rates(n, si[S_FM], mf[FACTOR], mf[CROWD], sf[S_NOMINAL], sf[S_ACOMM], sf[S_RATE], pf[ALPHA],
                      empty_i, empty_i, empty_i)


@_jit
def refresh_slot(mf, sf, si, pf, pool_m, k):
    """The true speed of running slot ``k``: ``refresh_rates``' arithmetic for one slot (the same
    bits). Launches and releases refresh only the slots whose inputs they change, instead of
    every slot as the simulator's compiled backend does; the values are the same."""
    m = si[S_FM, k]
    alpha = pf[ALPHA]
    f = mf[FACTOR, m]
    c = mf[CROWD, m]
    lo = si[S_MOFF, k]
    count = si[S_MLEN, k]
    if count > 1:
        f = mf[FACTOR, pool_m[lo]]
        c = mf[CROWD, pool_m[lo]]
        for p in range(lo + 1, lo + count):
            f = min(f, mf[FACTOR, pool_m[p]])
            c = max(c, mf[CROWD, pool_m[p]])
    rate = sf[S_NOMINAL, k] * f
    if alpha != 0.0:
        rate = rate / (c * sf[S_ACOMM, k] + 1.0)
    sf[S_RATE, k] = rate


@_jit
def refresh_machines(S, job):
    """After a launch or release of ``job``: with contention, every job on its machines changes
    speed; without, no other job does."""
    pf = S[12]
    if pf[ALPHA] == 0.0:
        return
    ji, mf, mi, sf, si = S[1], S[2], S[3], S[7], S[8]
    pool_m, table = S[17], S[29]
    off = ji[AOFF, job]
    for p in range(off, off + ji[ALEN, job]):
        m = pool_m[p]
        for q in range(mi[MJOBS, m]):
            refresh_slot(mf, sf, si, pf, pool_m, ji[SLOT_OF, table[m, q]])


@_jit
def measure(S, rng):
    """``ClusterSimulator._measure``."""
    sf, sb, sc, ic, pf, pi = S[7], S[9], S[10], S[11], S[12], S[13]
    now = sc[NOW]
    dt = now - sc[MEASURE_TIME]
    sc[MEASURE_TIME] = now
    n = ic[N_RUN]
    if n == 0 or dt <= 0:
        return
    if pi[READS_MEASURED] == 0:
        # No rule of this policy reads measured speeds and they change nothing else: only the
        # noise draws are kept, when fluctuation draws from the same generator afterwards.
        if pf[NOISE] > 0 and pi[FLUCT_ON] != 0:
            restarting = ic[RESTARTING] != 0
            count = measurable_count(n, sb[S_SINGLE], sf[S_UNTIL], now) if restarting else n - ic[N_MULTI]
            for _ in range(count):
                rng.standard_normal()
        return
    if ic[DIRTY] != 0:
        refresh_all(S)
    mf, si = S[2], S[8]
    scratch, empty_f = S[19], S[22]
    restarting = ic[RESTARTING] != 0
    if restarting:
        count = measurable_count(n, sb[S_SINGLE], sf[S_UNTIL], now)
    else:
        count = n - ic[N_MULTI]
    if count == 0:
        return
    noise = pf[NOISE]
    if noise > 0:
        z = rng.standard_normal(count)
    else:
        z = empty_f
    measure_kernel(n, sb[S_SINGLE], sf[S_UNTIL], now, restarting, ic[N_MULTI], sf[S_RATE], sf[S_NOMINAL],
                   si[S_FM], z, noise, -math.expm1(-dt / pf[TAU]), mf[MEASURED], mf[MEASURED_AT], scratch)
    ic[MEASURE_VERSION] += 1


@_jit
def fluct_switch(S, rng):
    """``FluctuationProcess._switch``."""
    mf, mi, mb, sc, pf = S[2], S[3], S[4], S[10], S[12]
    nxt = mf[NEXT_SWITCH]
    strag = mb[0]
    log_mult = mf[LOG_MULT]
    lam = pf[STRAG_RATE]
    mu = 1.0 / pf[ON_MEAN]
    tot = lam + mu
    pi_ = lam / tot
    t = sc[F_TIME]
    count = switch_due(nxt, t, mi[MDUE], mf[SINCE])
    if count == 1:
        i = mi[MDUE, 0]
        entered = not strag[i]
        ex = math.exp(-tot * mf[SINCE, 0])
        p_on = pi_ + (1.0 - pi_) * ex if entered else pi_ * (1.0 - ex)
        on = rng.random() < p_on
        strag[i] = on
        log_mult[i] = (pf[LOG_SLOW] if on else 0.0) - pf[SHIFT]
        e = rng.standard_exponential()
        if on:
            nxt[i] = t + pf[ON_MEAN] * e
        elif lam > 0:
            nxt[i] = t + pf[OFF_MEAN] * e
        else:
            nxt[i] = np.inf
        best = np.inf
        for v in nxt:
            if v < best:
                best = v
        sc[F_NEXT_MIN] = best
    elif count > 1:
        ex = mf[EXP_TMP][:count]
        for k in range(count):
            ex[k] = -tot * mf[SINCE, k]
        np_exp_inplace(ex, S[13])
        u = rng.random(count)
        e = rng.standard_exponential(count)
        sc[F_NEXT_MIN] = switch_apply(count, mi[MDUE], ex, u, e, strag, log_mult, nxt, pi_, pf[LOG_SLOW], pf[SHIFT],
                                      t, pf[ON_MEAN], pf[OFF_MEAN] if lam > 0 else np.inf)
    else:
        best = np.inf
        for v in nxt:
            if v < best:
                best = v
        sc[F_NEXT_MIN] = best


@_jit
def fluct_advance(S, rng, dt):
    """``FluctuationProcess.advance``."""
    mf, sc, pf, pi = S[2], S[10], S[12], S[13]
    empty_f = S[22]
    m = pi[NM]
    if dt == 0 or m == 0:
        return
    sc[F_TIME] += dt
    dyn = mf[DYN]
    if pf[SIGMA] > 0:
        if dt != sc[F_CACHE_DT]:
            theta = pf[THETA]
            sc[F_DECAY] = math.exp(-theta * dt)
            sc[F_NOISE] = pf[SIGMA] * math.sqrt(-math.expm1(-2.0 * theta * dt))
            sc[F_CACHE_DT] = dt
        z = mf[ZBUF]
        for i in range(m):
            z[i] = rng.standard_normal()
        if sc[F_TIME] >= sc[F_NEXT_MIN]:
            ou_step(mf[LOG_SPEED], z, sc[F_NOISE], sc[F_DECAY], mf[LOG_MULT], empty_f)
            fluct_switch(S, rng)
            for i in range(m):
                dyn[i] = mf[LOG_SPEED, i] + mf[LOG_MULT, i]
        else:
            ou_step(mf[LOG_SPEED], z, sc[F_NOISE], sc[F_DECAY], mf[LOG_MULT], dyn)
    else:
        if sc[F_TIME] >= sc[F_NEXT_MIN]:
            fluct_switch(S, rng)
        for i in range(m):
            dyn[i] = mf[LOG_SPEED, i] + mf[LOG_MULT, i]
    np_exp_inplace(dyn, pi)


@_jit
def fluct_period(S):
    pf, ic = S[12], S[11]
    if ic[P_COUNT] > 0:
        return pf[INTERVAL]
    return max(pf[INTERVAL], pf[QUIET])


@_jit
def update_fluctuation(S, rng):
    """``ClusterSimulator._update_fluctuation``."""
    mf, sc, ic, pi = S[2], S[10], S[11], S[13]
    measure(S, rng)
    fluct_advance(S, rng, sc[NOW] - sc[FLUCT_TIME])
    sc[FLUCT_TIME] = sc[NOW]
    for i in range(pi[NM]):
        mf[FACTOR, i] = mf[STATIC, i] * mf[DYN, i]
    sc[NEXT_FLUCT] = sc[NOW] + fluct_period(S)
    ic[DIRTY] = 1


@_jit
def arrive_until(S, t):
    jf, ji, ic, pi = S[0], S[1], S[11], S[13]
    n = pi[NJ]
    while ic[NEXT_ARRIVAL] < n and jf[SUBMIT, ic[NEXT_ARRIVAL]] <= t:
        job = ic[NEXT_ARRIVAL]
        ji[STATUS, job] = ST_PENDING
        p_append(ji, ic, job)
        ic[P_GPUS] += ji[GPUS, job]
        ic[NEXT_ARRIVAL] += 1
        ic[ARRIVED] += 1


@_jit
def log_allocation(S, job, gpus):
    """The allocation log's entry (``ClusterSimulator.allocation_log``; kept when its arrays have
    room for one: ``build_state(log_capacity=...)``): now, the job, the GPUs it holds from now on."""
    times = S[33]
    if len(times) == 0:
        return
    ic = S[11]
    n = ic[LOG_N]
    if n >= len(times):
        ic[ERROR] = E_LOG_FULL
        return
    times[n] = S[10][NOW]
    S[34][n] = job
    S[35][n] = gpus
    ic[LOG_N] = n + 1


@_jit
def release(S, job):
    """``ClusterSimulator._release``."""
    jf, ji, mf, mi, tf, ti, sf, si, sb, sc, ic = S[0], S[1], S[2], S[3], S[5], S[6], S[7], S[8], S[9], S[10], S[11]
    pool_m, pool_g = S[17], S[18]
    k = ji[SLOT_OF, job]
    ji[SLOT_OF, job] = -1
    now = sc[NOW]
    until = sf[S_UNTIL, k]
    t0 = sf[S_T0, k]
    started = t0 if t0 > until else until          # Python's max(until, t0)
    jf[PROGRESS, job] = jf[DURATION, job] - sf[S_LEFT, k]
    d = now - started
    jf[EXEC_BEFORE, job] += 0.0 if 0.0 > d else d  # max(now - started, 0.0)
    jf[EXECUTED, job] = jf[EXEC_BEFORE, job]
    jf[ATTAINED, job] = ji[GPUS, job] * jf[EXECUTED, job]
    jf[HELD_BEFORE, job] += now - t0
    jf[HELD, job] = jf[HELD_BEFORE, job]
    last = ic[N_RUN] - 1
    if sb[S_MULTI, k]:
        ic[N_MULTI] -= 1
    if k != last:
        moved = si[S_JOB, last]
        for r in range(sf.shape[0]):
            sf[r, k] = sf[r, last]
        for r in range(si.shape[0]):
            si[r, k] = si[r, last]
        for r in range(sb.shape[0]):
            sb[r, k] = sb[r, last]
        ji[SLOT_OF, moved] = k
    ic[N_RUN] = last
    table = S[29]
    off = ji[AOFF, job]
    for p in range(off, off + ji[ALEN, job]):
        m = pool_m[p]
        g = pool_g[p]
        mi[FREE, m] += g
        last_q = mi[MJOBS, m] - 1
        for q in range(last_q + 1):
            if table[m, q] == job:
                table[m, q] = table[m, last_q]
                break
        mi[MJOBS, m] -= 1
        mf[CROWD, m] -= 1.0
        t = mi[MTYPE, m]
        ti[FREE_T, t] += g
        ti[HELD_T, t] -= g
        ic[HELD_TOTAL] -= g
        ic[FREE_TOTAL] += g
        sc[FEE_RATE] += -g * tf[PRICE_S, t]
        sc[POWER] += -g * tf[EXTRA_W, t]
    log_allocation(S, job, 0)
    if ic[DIRTY] == 0:
        refresh_machines(S, job)


@_jit
def complete_due(S, count):
    """``ClusterSimulator._complete_due``."""
    jf, ji, sf, si, sc, ic = S[0], S[1], S[7], S[8], S[10], S[11]
    due, jobs = S[20], S[23]
    for c in range(count):
        jobs[c] = si[S_JOB, due[c]]
    for c in range(count):
        job = jobs[c]
        sf[S_LEFT, ji[SLOT_OF, job]] = 0.0
        release(S, job)
        jf[PROGRESS, job] = jf[DURATION, job]
        jf[FINISH, job] = sc[NOW]
        ji[STATUS, job] = ST_FINISHED
        ic[FINISHED] += 1


@_jit
def advance(S, rng):
    """``ClusterSimulator.advance``."""
    jf, sc, ic, pf, pi = S[0], S[10], S[11], S[12], S[13]
    now = sc[NOW]
    if now >= pf[TIME_LIMIT]:
        return
    fluct = pi[FLUCT_ON] != 0
    if fluct and sc[NEXT_FLUCT] <= now:
        update_fluctuation(S, rng)
    if sc[NEXT_TICK] <= now:
        sc[NEXT_TICK] = now + pf[TICK]
    arrival = ic[NEXT_ARRIVAL]
    n_jobs = pi[NJ]
    t_next = jf[SUBMIT, arrival] if arrival < n_jobs else np.inf
    if t_next > pf[TIME_LIMIT]:
        t_next = pf[TIME_LIMIT]
    n = ic[N_RUN]
    count = 0
    if n:
        t_other = min(t_next, sc[NEXT_FLUCT], sc[NEXT_TICK])
        t_next, finish, restarting, count = run_running(S, now, t_other)
        sc[NEXT_FINISH] = finish
        ic[RESTARTING] = 1 if restarting else 0
        ic[DIRTY] = 0
    if not math.isfinite(t_next):
        ic[ERROR] = E_NO_EVENT
        return
    dt = t_next - now
    if dt > 0:
        sc[JOB_SECONDS] += (ic[ARRIVED] - ic[FINISHED]) * dt
        sc[FEE] += sc[FEE_RATE] * dt
        sc[ENERGY] += sc[POWER] * dt
        if n:
            sc[BUSY] += ic[HELD_TOTAL] * dt
    now = t_next
    sc[NOW] = now
    ic[EVENTS] += 1
    if not fluct:
        measure(S, rng)
    if count:
        complete_due(S, count)
    if arrival < n_jobs and jf[SUBMIT, arrival] <= now:
        arrive_until(S, now)
    if fluct and now >= sc[NEXT_FLUCT] - TIME_EPS:
        update_fluctuation(S, rng)
    if now >= sc[NEXT_TICK] - TIME_EPS:
        sc[LAST_TICK] = now
        sc[NEXT_TICK] = now + pf[TICK]


@_jit
def skip_idle(S, rng):
    """``ClusterSimulator.advance_while_idle(K, R > 0)``."""
    sc, ic, pf, pi = S[10], S[11], S[12], S[13]
    n_jobs = pi[NJ]
    while ic[FINISHED] != n_jobs and sc[NOW] < pf[TIME_LIMIT]:
        if ic[N_RUN] and pi[R] > 0:
            return
        if ic[P_COUNT] > 0 and head_fits(S):
            return
        if not (ic[NEXT_ARRIVAL] < n_jobs or ic[N_RUN]):
            return
        advance(S, rng)
        if ic[ERROR]:
            return


# ------------------------------------------------------------------------------ decisions (sim side)
@_jit
def compact_pool(S):
    """Move the running jobs' allocations to the front of the pool (their order kept)."""
    ji, si, ic = S[1], S[8], S[11]
    pool_m, pool_g = S[17], S[18]
    n = ic[N_RUN]
    ic[C_COMPACT] += 1
    live = 0
    for k in range(n):
        live += ji[ALEN, si[S_JOB, k]]
    tmp_m = np.empty(live, np.int64)
    tmp_g = np.empty(live, np.int64)
    end = 0
    for k in range(n):
        job = si[S_JOB, k]
        off = ji[AOFF, job]
        for p in range(off, off + ji[ALEN, job]):
            tmp_m[end + p - off] = pool_m[p]
            tmp_g[end + p - off] = pool_g[p]
        ji[AOFF, job] = end
        si[S_MOFF, k] = end
        end += ji[ALEN, job]
    pool_m[:live] = tmp_m
    pool_g[:live] = tmp_g
    ic[POOL_END] = live


@_jit
def start(S, job):
    """``ClusterSimulator.start``: the job's allocation begins at the pool's end."""
    ji, ic = S[1], S[11]
    pool_m = S[17]
    ic[PLACING] = job
    ic[NEED] = ji[GPUS, job]
    if ic[POOL_END] + ji[GPUS, job] > len(pool_m):
        compact_pool(S)
    ji[AOFF, job] = ic[POOL_END]
    ji[ALEN, job] = 0


@_jit
def launch(S, job):
    """``ClusterSimulator._launch``."""
    jf, ji, mf, mi, sf, si, sb, sc = S[0], S[1], S[2], S[3], S[7], S[8], S[9], S[10]
    ic, pf, job_speed, job_spread = S[11], S[12], S[14], S[15]
    pool_m = S[17]
    off = ji[AOFF, job]
    ln = ji[ALEN, job]
    table = S[29]
    for p in range(off, off + ln):
        m = pool_m[p]
        table[m, mi[MJOBS, m]] = job
        mi[MJOBS, m] += 1
        mf[CROWD, m] += 1.0
    m0 = pool_m[off]
    if ln == 1:
        nominal = job_speed[job, mi[MTYPE, m0]]
    else:
        nominal = job_speed[job, mi[MTYPE, m0]]
        for p in range(off + 1, off + ln):
            nominal = min(nominal, job_speed[job, mi[MTYPE, pool_m[p]]])
        if ln > ji[FREE_SPREAD, job]:
            if len(S[31]) > 0:       # spread_model "allreduce": the simulator's own function
                nominal *= allreduce_speed_factor(job, pool_m, S[18], off, ln, mi[MTYPE], S[30], S[31], S[32])
            else:
                spread = job_spread[job, mi[MTYPE, m0]]
                for p in range(off + 1, off + ln):
                    spread = min(spread, job_spread[job, mi[MTYPE, pool_m[p]]])
                nominal *= spread
    now = sc[NOW]
    jf[NOMINAL, job] = nominal
    if math.isnan(jf[FIRST_START, job]):
        jf[FIRST_START, job] = now
    p_remove(ji, ic, job)
    ic[P_GPUS] -= ji[GPUS, job]
    ji[STATUS, job] = ST_RUNNING
    until = now
    if ji[RESTARTS, job] > 0 and pf[OVERHEAD] > 0:
        until = now + pf[OVERHEAD]
        ic[RESTARTING] = 1
    k = ic[N_RUN]
    ji[SLOT_OF, job] = k
    si[S_JOB, k] = job
    sf[S_LEFT, k] = jf[DURATION, job] - jf[PROGRESS, job]
    sf[S_NOMINAL, k] = nominal
    sf[S_ACOMM, k] = pf[ALPHA] * jf[COMM, job]
    si[S_FM, k] = m0
    sb[S_MULTI, k] = ln > 1
    sb[S_SINGLE, k] = ln == 1
    sf[S_UNTIL, k] = until
    sf[S_T0, k] = now
    si[S_MOFF, k] = off
    si[S_MLEN, k] = ln
    if ln > 1:
        ic[N_MULTI] += 1
    ic[N_RUN] = k + 1
    log_allocation(S, job, ji[GPUS, job])
    if ic[DIRTY] == 0:
        refresh_slot(mf, sf, si, pf, S[17], k)
        refresh_machines(S, job)


@_jit
def place(S, m):
    """``ClusterSimulator.place``; True when the job holds all its GPUs and has started."""
    ji, mi, tf, ti, sc, ic = S[1], S[3], S[5], S[6], S[10], S[11]
    pool_m, pool_g = S[17], S[18]
    job = ic[PLACING]
    take = min(mi[FREE, m], ic[NEED])
    mi[FREE, m] -= take
    t = mi[MTYPE, m]
    ti[FREE_T, t] -= take
    ti[HELD_T, t] += take
    ic[HELD_TOTAL] += take
    ic[FREE_TOTAL] -= take
    sc[FEE_RATE] += take * tf[PRICE_S, t]
    sc[POWER] += take * tf[EXTRA_W, t]
    p = ic[POOL_END]
    pool_m[p] = m
    pool_g[p] = take
    ic[POOL_END] = p + 1
    ji[ALEN, job] += 1
    ic[NEED] -= take
    if ic[NEED] == 0:
        launch(S, job)
        ic[PLACING] = -1
        return True
    return False


@_jit
def preempt(S, job):
    """``ClusterSimulator.preempt``."""
    ji, ic = S[1], S[11]
    release(S, job)
    ji[STATUS, job] = ST_PENDING
    ji[RESTARTS, job] += 1
    ic[PREEMPTIONS] += 1
    p_insort(ji, ic, job)
    ic[P_GPUS] += ji[GPUS, job]


@_jit
def finish_step(S):
    """The end of a decision, every compiled path's (``ClusterParallelEnv._finish_step``): count
    it, its default reward (the job-seconds since the last step, over the episode's jobs times the
    reward's time unit) and whether the episode ended: (reward, terminated, truncated), truncated
    at ``max_steps`` decisions (``pi[MAX_STEPS]``, 0: no bound) or ``max_time`` seconds."""
    sc, ic, pf, pi = S[10], S[11], S[12], S[13]
    ic[STEPS] += 1
    js = sc[JOB_SECONDS]
    reward = -(js - sc[JS_LAST]) / pf[DENOM]
    sc[JS_LAST] = js
    done = ic[FINISHED] == pi[NJ]
    truncated = not done and ((pi[MAX_STEPS] > 0 and ic[STEPS] >= pi[MAX_STEPS]) or sc[NOW] >= pf[MAX_TIME])
    return reward, done, truncated




@_jit
def sync_running(S):
    """``ClusterSimulator.sync_running`` (what the running candidates' features show)."""
    jf, ji, sf, si, sc, ic = S[0], S[1], S[7], S[8], S[10], S[11]
    now = sc[NOW]
    for k in range(ic[N_RUN]):
        job = si[S_JOB, k]
        until = sf[S_UNTIL, k]
        t0 = sf[S_T0, k]
        started = until if until >= t0 else t0        # np.maximum
        e = now - started
        exec_now = e if e >= 0.0 else 0.0
        jf[PROGRESS, job] = jf[DURATION, job] - sf[S_LEFT, k]
        jf[EXECUTED, job] = jf[EXEC_BEFORE, job] + exec_now
        jf[ATTAINED, job] = ji[GPUS, job] * jf[EXECUTED, job]
        jf[HELD, job] = jf[HELD_BEFORE, job] + (now - t0)




@jit
def top_running(S, cand, base, top):
    """The ``top`` running jobs with the most attained service (ties to the lower job id), sorted,
    into ``cand[base:base + top]`` (``ObservationBuilder.candidates``' running rows); returns how
    many were written. The caller brings attained service up to date (``sync_running``) first.
    Kept sorted by insertion: one comparison rejects most jobs."""
    jf, si, ic = S[0], S[8], S[11]
    n = ic[N_RUN]
    top = min(top, n)
    r = 0
    for k in range(n):
        job = si[S_JOB, k]
        a = jf[ATTAINED, job]
        if r == top:
            last = cand[base + r - 1]
            b = jf[ATTAINED, last]
            if a < b or (a == b and job > last):
                continue
            r -= 1
        i = base + r
        while i > base:
            prev = cand[i - 1]
            b = jf[ATTAINED, prev]
            if a > b or (a == b and job < prev):
                cand[i] = prev
                i -= 1
            else:
                break
        cand[i] = job
        r += 1
    return r
