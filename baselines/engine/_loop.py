"""The compiled event loop of the named baselines: their decision rules in numba around the
simulator's compiled dynamics (:mod:`cluster_env.core.engine.sim`), one call per episode (no
Python per decision).

Every function mirrors one piece of the reference, operation for operation, so that an episode
gives the same bits as through the PettingZoo API:

* dynamics: :mod:`cluster_env.core.engine.sim` (the simulator's, shared with the vector env's
  compiled backend);
* environment: :class:`cluster_env.envs.cluster_parallel.ClusterParallelEnv`'s phases, skip of
  idle epochs, step count and default reward;
* decisions: :mod:`baselines.orderers` and :mod:`baselines.placers`, reading the same quantities
  the observation shows, rounded to float32 where the observation rounds them.

Where the reference calls a numpy ufunc on an array (``np.expm1`` of Tiresias' features), the
loop calls numpy too (``numba.objmode``): numpy's vectorised transcendental functions can differ
from the C library's in the last bit.

This module imports numba; :mod:`baselines.engine` imports it only when numba is available.
"""
from __future__ import annotations

import math

import numba
import numpy as np

from baselines import orderers as _orderers
from baselines import placers as _placers
from baselines.orderers import QUANTUM_TOLERANCE_S
from baselines.placers import SPREAD_MARGIN
from cluster_env.core import kernels as _kernels
from cluster_env.core.engine import layout as _layout
from cluster_env.core.engine import sim as _sim
from cluster_env.core.engine.layout import *  # noqa: F401,F403 - numba reads them as compile-time constants
from baselines.engine import codes as _codes
from baselines.engine.codes import *  # noqa: F401,F403 - the rules' codes, compile-time constants too
from baselines import learned_key as _learned_key
from baselines.learned_key import PLACER_BONUS  # noqa: F401 - a compile-time constant of the residual placer
from cluster_env.envs.observation_ext import RECENT_WEIGHT

# The dynamics, as module globals (numba caches calls to compiled functions through globals).
from cluster_env.core.engine.sim import (advance, finish_step, stash, place, preempt, skip_idle,  # noqa: F401
                                         start, sync_running, top_running, usable_free)

START, PREEMPT_JOB, ADVANCE = 0, 1, 2
# The migration rule's array (run_episode's ``mig``): threshold, float32 since-start threshold,
# the job preempted to move (-1: none) and when, the number of moves, and whether the rule is on
# (``las-migrate``, or the priority agent with ``migrate``; any priority orderer reads it).
MG_THRESHOLD, MG_SINCE, MG_JOB, MG_TIME, MG_COUNT, MG_ON = range(6)
_F32_SIGN = 0x7FFFFFFF

# The layout, the orderers' and the placers' constants (QUANTUM_TOLERANCE_S, the spread guard's
# factor) are compiled in as constants too.
_sim.prune_stale_cache(__file__, _kernels.__file__, _sim.__file__, _sim._ref.__file__,
                       _sim._npy.__file__, _learned_key.__file__, _layout.__file__, _codes.__file__,
                       _orderers.__file__, _placers.__file__)
_SPREAD_GAIN = 1.0 + SPREAD_MARGIN
_jit = _sim.jit

@_jit
def np_expm1_f32(x32):
    """numpy's expm1 of one float32 feature value widened to float64 (``baselines.obs.from_log``)."""
    out = np.empty(1)
    out[0] = x32
    with numba.objmode():
        np.expm1(out, out=out)
    return out[0]



# ------------------------------------------------------------------------------ orderers
@_jit
def advance_or_first(S):
    """``baselines.orderers._advance``: advance when the mask allows it, else the first allowed
    action (a fitting pending job; nothing else can be allowed then: nothing runs)."""
    ji, ic, pi = S[1], S[11], S[13]
    ti, allowed = S[6], S[16]
    if ic[NEXT_ARRIVAL] < pi[NJ] or ic[N_RUN] > 0 or ic[FINISHED] == pi[NJ]:
        return ADVANCE, -1
    j = ic[P_HEAD]
    c = 0
    while j >= 0 and c < pi[K]:
        if (ji[GPUS, j] <= (ic[FREE_TOTAL] if pi[HAS_ALLOWED] == 0 else usable_free(ti, allowed, j))):
            return START, j
        j = ji[P_NEXT, j]
        c += 1
    ic[ERROR] = E_STUCK
    return ADVANCE, -1


@_jit
def order_fifo(S, strict):
    """``FIFO``: the oldest fitting job of the window (``strict``: only the oldest, if it fits)."""
    ji, ic, pi = S[1], S[11], S[13]
    ti, allowed = S[6], S[16]
    j = ic[P_HEAD]
    c = 0
    while j >= 0 and c < pi[K]:
        if (ji[GPUS, j] <= (ic[FREE_TOTAL] if pi[HAS_ALLOWED] == 0 else usable_free(ti, allowed, j))):
            return START, j
        if strict:
            break
        j = ji[P_NEXT, j]
        c += 1
    return advance_or_first(S)


@_jit
def order_sjf(S):
    """``SJF``: the fitting job of the window with the least remaining time (the float32
    ``remaining_log`` feature; ties to the oldest)."""
    jf, ji, ic, pi = S[0], S[1], S[11], S[13]
    ti, allowed = S[6], S[16]
    best = -1
    best_key = np.float32(0.0)
    j = ic[P_HEAD]
    c = 0
    while j >= 0 and c < pi[K]:
        if (ji[GPUS, j] <= (ic[FREE_TOTAL] if pi[HAS_ALLOWED] == 0 else usable_free(ti, allowed, j))):
            key = np.float32(math.log1p((jf[DURATION, j] - jf[PROGRESS, j]) / jf[BEST_SPEED, j]))
            if best < 0 or key < best_key:
                best, best_key = j, key
        j = ji[P_NEXT, j]
        c += 1
    if best >= 0:
        return START, best
    return advance_or_first(S)


@_jit
def order_random(S, orng):
    """``RandomOrderer``: a uniformly random allowed action (``Generator.choice`` over the mask's
    allowed indices is ``integers(0, count)``; without preemption they are the fitting pending
    rows, then advance)."""
    ji, ic, pi = S[1], S[11], S[13]
    ti, allowed = S[6], S[16]
    cand = S[24]
    count = 0
    j = ic[P_HEAD]
    c = 0
    while j >= 0 and c < pi[K]:
        if (ji[GPUS, j] <= (ic[FREE_TOTAL] if pi[HAS_ALLOWED] == 0 else usable_free(ti, allowed, j))):
            cand[count] = j
            count += 1
        j = ji[P_NEXT, j]
        c += 1
    can_advance = ic[NEXT_ARRIVAL] < pi[NJ] or ic[N_RUN] > 0 or ic[FINISHED] == pi[NJ]
    total = count + (1 if can_advance else 0)
    if total == 0:
        ic[ERROR] = E_STUCK
        return ADVANCE, -1
    i = orng.integers(0, total)
    if i < count:
        return START, cand[i]
    return ADVANCE, -1




@_jit
def f32_bits(S, x):
    """Order-preserving integer of a non-negative value rounded to float32 (through a one-element
    float32 buffer and its int32 view, both in the state: no allocation)."""
    S[27][0] = np.float32(x)
    return np.int64(S[28][0]) & _F32_SIGN


@_jit
def expm1_memo(S, job, x32, key_row, val_row):
    """numpy's expm1 of a job's float32 feature, remembered per job (a pending job's features stay
    put, so each costs one numpy call per wait)."""
    jf, ic = S[0], S[11]
    key = np.float64(x32)
    if jf[key_row, job] == key:
        return jf[val_row, job]
    value = np_expm1_f32(x32)
    ic[EXPM1_CALLS] += 1
    jf[key_row, job] = key
    jf[val_row, job] = value
    return value


@_jit
def tiresias_queue(S, job, running, now, thresholds, limits):
    """``Tiresias.priorities`` for one visible candidate (promotion included)."""
    jf, ji = S[0], S[1]
    ic, pf = S[11], S[12]
    a32 = np.float32(math.log1p(jf[ATTAINED, job]))
    promoted = ji[PROMOTED, job] != 0
    queue = 0
    if promoted:
        x = expm1_memo(S, job, a32, A_KEY, A_VAL) - jf[ATT0, job]
        for q in range(len(limits)):
            if limits[q] <= x:
                queue += 1
    else:
        # Without an offset, expm1(a32) >= limit exactly when a32 reaches the limit's float32
        # threshold (numpy's expm1 is monotonic over float32 inputs): no numpy call needed.
        for q in range(len(thresholds)):
            if a32 >= thresholds[q]:
                queue += 1
    starvation = pf[STARVATION]
    if starvation != 0 and not running and queue > 0 and not math.isnan(jf[STOPPED_AT, job]):
        # ran > 0 needs executed > exe0; a job this policy never stopped has now - now = 0 < ran.
        e32 = np.float32(math.log1p(jf[EXECUTED, job]))
        executed = expm1_memo(S, job, e32, E_KEY, E_VAL)
        ran = executed - jf[EXE0, job]
        if ran > 0 and now - jf[STOPPED_AT, job] >= starvation * ran:
            jf[ATT0, job] = expm1_memo(S, job, a32, A_KEY, A_VAL)
            jf[EXE0, job] = executed
            ji[PROMOTED, job] = 1
            ic[PROMOTIONS] += 1
            queue = 0
    return queue


@_jit
def np_expm1_inplace(a):
    """numpy's expm1 of an array, in place (one ``objmode`` call for many values)."""
    with numba.objmode():
        np.expm1(a, out=a)


@_jit
def update_expm1_memo(jf, ic, cand, nv, keys):
    """Bring the memo of the candidates ``cand[:nv]`` up to their float32 keys ``keys`` (a log1p):
    the jobs whose key changed get it and its expm1, taken in one numpy call (the oracle's and
    Gittins' keys)."""
    x = np.empty(nv)
    miss = np.empty(nv, np.int64)
    n_miss = 0
    for i in range(nv):
        j = cand[i]
        if jf[A_KEY, j] != np.float64(keys[i]):
            x[n_miss] = keys[i]
            miss[n_miss] = j
            n_miss += 1
    if n_miss == 0:
        return
    values = x[:n_miss].copy()
    np_expm1_inplace(values)
    ic[EXPM1_CALLS] += 1
    for i in range(n_miss):
        j = miss[i]
        jf[A_KEY, j] = x[i]
        jf[A_VAL, j] = values[i]


@_jit
def insert_by_key(keys, order, n, key, j):
    """Insert job ``j`` with ``key`` into the first ``n`` entries of ``keys`` / ``order``, sorted by
    (key, job id): ``np.lexsort((ids, keys))``'s order, one insertion-sort step."""
    p = n
    while p > 0 and (keys[p - 1] > key or (keys[p - 1] == key and order[p - 1] > j)):
        keys[p] = keys[p - 1]
        order[p] = order[p - 1]
        p -= 1
    keys[p] = key
    order[p] = j


@_jit
def oracle_order(S, cand, nv):
    """The ``nv`` candidates' job ids in ``np.lexsort((ids, keys))`` order of ``OracleSRPT.keys``:
    remaining GPU-time (numpy's expm1 of the float32 ``remaining_log`` feature times the GPUs),
    then job id. The expm1 values are remembered per job (a pending job's stay put); the others
    are computed in one numpy call. Then an insertion sort (a window is tens of jobs)."""
    jf, ji, ic = S[0], S[1], S[11]
    keys = np.empty(nv, np.float32)
    for i in range(nv):
        j = cand[i]
        keys[i] = np.float32(math.log1p((jf[DURATION, j] - jf[PROGRESS, j]) / jf[BEST_SPEED, j]))
    update_expm1_memo(jf, ic, cand, nv, keys)
    rem = np.empty(nv)
    order = np.empty(nv, np.int64)
    for i in range(nv):
        j = cand[i]
        insert_by_key(rem, order, i, jf[A_VAL, j] * np.float64(ji[GPUS, j]), j)
    return order


@_jit
def searchsorted_right(s, n, v):
    """``np.searchsorted(s[:n], v, side="right")``: the number of the ``n`` sorted values <= ``v``."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) >> 1
        if s[mid] <= v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@_jit
def gittins_index(gtab, a, d):
    """``ServiceDistribution.index`` for one job: attained service ``a``, quantum ``d`` (inf: none),
    with the same float operations in the same order. ``gtab``: row 0 the ``n`` sorted samples
    (then their mean), row 1 the ``n + 1`` prefix sums."""
    s, c = gtab[0], gtab[1]
    n = len(s) - 1
    finite = math.isfinite(d)
    ia = searchsorted_right(s, n, a)
    ib = searchsorted_right(s, n, a + d) if finite else n
    done = ib - ia                                           # finish within the quantum
    spent = (c[ib] - c[ia]) - a * np.float64(done) + (d if finite else 0.0) * np.float64(n - ib)
    if ia < n and spent > 0:
        return np.float64(done) / spent
    return 0.0


@_jit
def gittins_order(S, cand, nv, now, thresholds, limits, gtab):
    """The ``nv`` candidates' job ids in ``np.lexsort((ids, keys))`` order of ``Gittins.keys``:
    Tiresias' queue (promotion included), then ``1 / (1 + index x mean)`` of the Gittins index of
    the service attained since the last promotion with the quantum left to the queue's limit,
    then job id. The attained service is numpy's expm1 of the float32 ``attained_log`` feature,
    remembered per job (:func:`expm1_memo`'s rows; the missing ones in one numpy call)."""
    jf, ji, ic = S[0], S[1], S[11]
    queue = np.empty(nv, np.int64)
    for i in range(nv):
        j = cand[i]
        queue[i] = tiresias_queue(S, j, ji[STATUS, j] == ST_RUNNING, now, thresholds, limits)
    keys = np.empty(nv, np.float32)
    for i in range(nv):
        keys[i] = np.float32(math.log1p(jf[ATTAINED, cand[i]]))
    update_expm1_memo(jf, ic, cand, nv, keys)
    mean = gtab[0, len(gtab[0]) - 1]
    key = np.empty(nv)
    order = np.empty(nv, np.int64)
    for i in range(nv):
        j = cand[i]
        # The offset is the attained service at the last promotion (0 for a job never promoted).
        since = jf[A_VAL, j] - (jf[ATT0, j] if ji[PROMOTED, j] != 0 else 0.0)
        q = queue[i]
        delta = (limits[q] if q < len(limits) else math.inf) - since
        index = gittins_index(gtab, since, delta)
        insert_by_key(key, order, i, np.float64(q) + 1.0 / (1.0 + index * mean), j)
    return order


@_jit
def fold_finished(S, tenant, tstat, tfold):
    """Fold the jobs finished since the last call into the tenants' running statistics of
    ``log1p(executed seconds)``, in (finish time, job id) order: the extended observation's
    ``RunningStats`` (:mod:`cluster_env.envs.observation_ext`), whose batches, one per
    observation, add up to that same global order. ``tstat`` (3, T + 1): count, total and moving
    average (-1 before the first finish) per tenant, column T for every job; ``tfold`` (NJ + 1,):
    1 for a folded job, the number folded in its last entry."""
    jf, ic, pi = S[0], S[11], S[13]
    nj = pi[NJ]
    if ic[FINISHED] == tfold[nj]:
        return
    new = np.empty(ic[NEXT_ARRIVAL], np.int64)
    times = np.empty(ic[NEXT_ARRIVAL])
    n = 0
    for j in range(ic[NEXT_ARRIVAL]):
        if tfold[j] == 0 and not math.isnan(jf[FINISH, j]):
            insert_by_key(times, new, n, jf[FINISH, j], j)
            n += 1
    all_col = tstat.shape[1] - 1
    for i in range(n):
        j = new[i]
        value = math.log1p(jf[EXECUTED, j])
        for col in (tenant[j], all_col):
            if tstat[0, col] == 0:
                tstat[2, col] = value
            else:
                tstat[2, col] = (1 - RECENT_WEIGHT) * tstat[2, col] + RECENT_WEIGHT * value
            tstat[0, col] += 1
            tstat[1, col] += value
        tfold[j] = 1
    tfold[nj] += n


@_jit
def stat_f32(tstat, row, col):
    """A running statistic as the observation shows it: float32, widened back (-1 when none
    finished; the mean is the total over the count)."""
    if tstat[0, col] == 0:
        return -1.0
    value = tstat[1, col] / tstat[0, col] if row == 1 else tstat[2, col]
    return np.float64(np.float32(value))


@_jit
def weighted_order(S, cand, nv, weights, feat, tenant, tstat, tfold):
    """The ``nv`` candidates' job ids ordered by the priority-mode agent's linear key
    (:class:`dual_agent.priority.LearnedPriorityOrderer`), then job id: ``log1p(attained)`` plus
    ``weights . phi`` summed in feature order, each feature rounded to the observation's float32
    (``feat``: per-job float32 gpus_log2, comm_intensity, best_speed; the tenant features from
    :func:`fold_finished`'s statistics, kept only when a tenant weight is not zero, since their
    terms then add nothing), the same operations in the same order as ``PriorityModel.score``.
    Then an insertion sort (a window is tens of jobs)."""
    jf, ji, sc = S[0], S[1], S[10]
    now = sc[NOW]
    tenants = weights[1] != 0.0 or weights[2] != 0.0 or weights[3] != 0.0
    fm = fr = -1.0
    if tenants:
        fold_finished(S, tenant, tstat, tfold)
        all_col = tstat.shape[1] - 1
        fm, fr = stat_f32(tstat, 1, all_col), stat_f32(tstat, 2, all_col)
    vals = np.empty(nv)
    order = np.empty(nv, np.int64)
    for i in range(nv):
        j = cand[i]
        run = 1.0 if ji[STATUS, j] == ST_RUNNING else 0.0
        score = weights[0] * feat[0, j]
        if tenants:
            tm, tr = stat_f32(tstat, 1, tenant[j]), stat_f32(tstat, 2, tenant[j])
            known = tm >= 0.0 and fm >= 0.0
            score += weights[1] * (tm - fm if known else 0.0)
            score += weights[2] * (tr - fr if known else 0.0)
            score += weights[3] * (1.0 if known else 0.0)
        score += weights[4] * feat[1, j]
        score += weights[5] * feat[2, j]
        score += weights[6] * (np.float64(np.float32(math.log1p(ji[RESTARTS, j]))) / 3.0)
        score += weights[7] * (np.float64(np.float32(math.log1p(now - jf[SUBMIT, j]))) / 10.0)
        score += weights[8] * run
        insert_by_key(vals, order, i, np.float64(np.float32(math.log1p(jf[ATTAINED, j]))) + score, j)
    return order


@_jit
def executed_f32(S, job):
    """The job's executed seconds as a priority orderer reads them: numpy's expm1 of the float32
    ``executed_log`` feature (``baselines.obs.from_log``)."""
    return np_expm1_f32(np.float32(math.log1p(S[0][EXECUTED, job])))


@_jit
def quantum_served(S, job):
    """``PreemptivePriority._quantum_served`` for one running job: it has executed the minimum
    quantum since its last start (always, without a quantum)."""
    quantum = S[12][MIN_QUANTUM]
    return quantum == 0 or executed_f32(S, job) - S[0][Q_EXEC0, job] >= quantum - QUANTUM_TOLERANCE_S


@_jit
def start_priority(S, job, now):
    """``PreemptivePriority._start``: remember the start (and, with a quantum, the job's executed
    seconds then)."""
    jf = S[0]
    jf[STARTED_NOW, job] = now
    if S[12][MIN_QUANTUM] != 0:
        jf[Q_EXEC0, job] = executed_f32(S, job)
    return START, job


@_jit
def migrate_pick(S, cand, nv, mig, now):
    """``MigratingLAS.movable`` over the ``nv`` candidates: the running one-machine job, not
    started now, whose float32 ``since_start_log`` reaches ``mig[MG_SINCE]`` (the float32
    threshold of ``min_run`` less the tolerance) and whose float32 ``speedup_free`` (its best
    :func:`placed_speed` on a machine whose free GPUs of an allowed type, plus its own, hold it
    whole, over its current one; the quotient in float64) reaches ``mig[MG_THRESHOLD]``; the
    largest speed-up, then the lowest job id. -1 when none."""
    jf, ji, mi, sf, pi = S[0], S[1], S[3], S[7], S[13]
    allowed, pool_m = S[16], S[17]
    has_allowed = pi[HAS_ALLOWED] != 0
    pick = -1
    pick_sp = np.float32(0.0)
    for i in range(nv):
        j = cand[i]
        if ji[STATUS, j] != ST_RUNNING or ji[ALEN, j] != 1 or jf[STARTED_NOW, j] == now:
            continue
        since = np.float32(math.log1p(max(now - sf[S_T0, ji[SLOT_OF, j]], 0.0)))
        if np.float64(since) < mig[MG_SINCE]:
            continue
        m0 = pool_m[ji[AOFF, j]]
        current = placed_speed(S, j, m0)
        best = current
        g = ji[GPUS, j]
        for m in range(pi[NM]):
            if m != m0 and mi[FREE, m] >= g and (not has_allowed or allowed[j, mi[MTYPE, m]]):
                speed = placed_speed(S, j, m)
                if speed > best:
                    best = speed
        sp = np.float32(best / current)
        if np.float64(sp) < mig[MG_THRESHOLD]:
            continue
        if pick < 0 or sp > pick_sp or (sp == pick_sp and j < pick):
            pick, pick_sp = j, sp
    return pick


@_jit
def migrate_restart(S, mig, now):
    """``MigratingLAS.order``'s first step: the job preempted to move at this instant, if it is in
    the pending window and fits, starts again (-1 otherwise); the marker is cleared either way."""
    ji, ic, pi = S[1], S[11], S[13]
    ti, allowed = S[6], S[16]
    job = np.int64(mig[MG_JOB])
    same = mig[MG_TIME] == now
    mig[MG_JOB] = -1.0
    if not same or ji[STATUS, job] != ST_PENDING:
        return -1
    j = ic[P_HEAD]
    c = 0
    while j >= 0 and c < pi[K]:
        if j == job:
            if ji[GPUS, j] <= (ic[FREE_TOTAL] if pi[HAS_ALLOWED] == 0 else usable_free(ti, allowed, j)):
                return j
            return -1
        j = ji[P_NEXT, j]
        c += 1
    return -1


@_jit
def order_priority(S, rule, thresholds, limits, weights, feat, tenant, tstat, tfold, mig, gtab):
    """``PreemptivePriority.order`` with LAS's, Tiresias', the SRPT oracle's, 2D-Gittins' or the
    priority-mode agent's keys (``rule``: the orderer's code; ``weights`` to ``tfold``:
    :func:`weighted_order`'s; ``gtab``: :func:`gittins_index`'s table); with ``mig[MG_ON]``
    (``O_MIGRATE``: LAS; ``O_WEIGHTED``: the priority agent with ``migrate``), plus
    ``MigratingLAS``'s moves (``mig``: its parameters and marker)."""
    jf, ji, sc, ic, pi = S[0], S[1], S[10], S[11], S[13]
    ti, allowed = S[6], S[16]
    cand, keys = S[24], S[25]
    now = sc[NOW]
    if mig[MG_ON] != 0 and mig[MG_JOB] >= 0:
        j = migrate_restart(S, mig, now)
        if j >= 0:
            return start_priority(S, j, now)
    nv = 0
    j = ic[P_HEAD]
    while j >= 0 and nv < pi[K]:
        cand[nv] = j
        nv += 1
        j = ji[P_NEXT, j]
    if pi[R] > 0 and ic[N_RUN] > 0:
        sync_running(S)
        nv += top_running(S, cand, nv, pi[R])
    if nv == 0:
        return advance_or_first(S)
    # Priority order: key, then job id (np.lexsort((ids, keys))).
    if rule == O_ORACLE:
        order = oracle_order(S, cand, nv)
    elif rule == O_GITTINS:
        order = gittins_order(S, cand, nv, now, thresholds, limits, gtab)
    elif rule == O_WEIGHTED:
        order = weighted_order(S, cand, nv, weights, feat, tenant, tstat, tfold)
    else:
        for i in range(nv):
            j = cand[i]
            if rule == O_TIRESIAS:
                key = tiresias_queue(S, j, ji[STATUS, j] == ST_RUNNING, now, thresholds, limits)
            else:
                key = f32_bits(S, math.log1p(jf[ATTAINED, j]))
            keys[i] = (key << 32) | j
        order = np.sort(keys[:nv])
    capacity = ic[FREE_TOTAL]
    for i in range(nv):
        j = cand[i]
        if ji[STATUS, j] == ST_RUNNING:
            capacity += ji[GPUS, j]
    should = np.zeros(nv, np.bool_)
    waiting = False
    need = np.int64(1) << 62
    for i in range(nv):
        j = order[i] & 0xFFFFFFFF
        g = ji[GPUS, j]
        if g <= capacity:
            should[i] = True
            capacity -= g
    for i in range(nv):
        j = order[i] & 0xFFFFFFFF
        if should[i] and ji[STATUS, j] != ST_RUNNING:
            if (ji[GPUS, j] <= (ic[FREE_TOTAL] if pi[HAS_ALLOWED] == 0 else usable_free(ti, allowed, j))):
                if jf[PREEMPTED_NOW, j] != now:
                    return start_priority(S, j, now)
            else:
                waiting = True
                need = min(need, ji[GPUS, j])
    tick = sc[LAST_TICK] == now
    if (pi[PREEMPT_AT_EVENT] != 0 or tick) and waiting:
        room = ic[FREE_TOTAL]
        victims = False
        victim = np.zeros(nv, np.bool_)
        for i in range(nv):
            j = order[i] & 0xFFFFFFFF
            if (ji[STATUS, j] == ST_RUNNING and not should[i] and jf[STARTED_NOW, j] != now
                    and quantum_served(S, j)):
                victim[i] = True
                victims = True
                room += ji[GPUS, j]
        if victims and room >= need:
            for i in range(nv - 1, -1, -1):
                j = order[i] & 0xFFFFFFFF
                if victim[i]:
                    jf[STOPPED_AT, j] = now
                    jf[PREEMPTED_NOW, j] = now
                    return PREEMPT_JOB, j
    for i in range(nv):
        j = order[i] & 0xFFFFFFFF
        fit = ji[GPUS, j] <= (ic[FREE_TOTAL] if pi[HAS_ALLOWED] == 0 else usable_free(ti, allowed, j))
        if ji[STATUS, j] != ST_RUNNING and fit and jf[PREEMPTED_NOW, j] != now:
            return start_priority(S, j, now)
    if mig[MG_ON] != 0 and tick:
        j = migrate_pick(S, cand, nv, mig, now)
        if j >= 0:
            jf[STOPPED_AT, j] = now
            mig[MG_JOB], mig[MG_TIME] = j, now
            mig[MG_COUNT] += 1
            return PREEMPT_JOB, j
    return advance_or_first(S)


# ------------------------------------------------------------------------------ placers
@_jit
def placed_speed(S, job, m):
    """The speed ``job`` would run at on machine ``m``: nominal x measured, each rounded to the
    observation's float32, the product in float64."""
    mf, mi, job_speed = S[2], S[3], S[14]
    return np.float64(np.float32(job_speed[job, mi[MTYPE, m]])) * np.float64(np.float32(mf[MEASURED, m]))


@_jit
def fastest_speed(S, ok, job, need):
    """(whether a machine ``ok`` allows holds the whole ``need``, the best :func:`placed_speed`
    among the allowed machines that do, or among all allowed ones when none does); the speed is
    ``-inf`` when no machine is allowed. Shared by the fastest-first and oracle placers."""
    mi, m_count = S[3], S[13][NM]
    any_whole = False
    any_ok = False
    for m in range(m_count):
        if ok[m]:
            any_ok = True
            if mi[FREE, m] >= need:
                any_whole = True
    best = -np.inf
    if any_ok:
        for m in range(m_count):
            if ok[m] and (mi[FREE, m] >= need or not any_whole):
                speed = placed_speed(S, job, m)
                if speed > best:
                    best = speed
    return any_whole, best


@_jit
def split_pieces(hist, need):
    """``baselines.placers._pieces``: the fewest machines, largest free first, holding ``need``."""
    held = 0
    pieces = 0
    for v in range(len(hist) - 1, 0, -1):
        count = hist[v]
        if count == 0:
            continue
        if held + count * v >= need:
            return pieces + (need - held + v - 1) // v
        held += count * v
        pieces += count
    return pieces


@_jit
def split_members(S, by_speed, length, k, maxf, mask):
    """Set ``mask`` for the first ``k`` machines of the fastest ``length`` (``by_speed`` order),
    largest free first, then in speed order; returns their slowest :func:`placed_speed`."""
    mi, job = S[3], S[11][PLACING]
    taken = 0
    slowest = np.inf
    for v in range(maxf, 0, -1):
        for p in range(length):
            if taken == k:
                return slowest
            m = by_speed[p]
            if mi[FREE, m] == v:
                mask[m] = True
                taken += 1
                speed = placed_speed(S, job, m)
                if speed < slowest:
                    slowest = speed
    return slowest


@_jit
def split_choice(S, ok, job, need, tol_factor, mask):
    """``baselines.placers.split_choice`` for a job no allowed machine holds whole: sets ``mask``
    (M,) for the machines of the placement taken. Candidate placements: the fewest machines
    (largest free first) among the fastest p allowed ones, where that count drops; the expected
    speed, the slowest :func:`placed_speed` times the job's spread floor under the all-reduce model,
    else ``max(0, 1 - 3 x comm_intensity)`` (the float32 feature), when the job's machines would outnumber the cluster's fewest for its GPUs. The consolidating
    placement unless one is faster by the margin, then the fewest machines within the tolerance."""
    jf, ji, mi, pi = S[0], S[1], S[3], S[13]
    m_count = pi[NM]
    n = 0
    maxf = 0
    total = 0
    for m in range(m_count):
        mask[m] = False
        if ok[m]:
            n += 1
            total += mi[FREE, m]
            maxf = max(maxf, mi[FREE, m])
    if total < need:
        for m in range(m_count):
            mask[m] = ok[m]
        return
    ids = np.empty(n, np.int64)
    neg_speed = np.empty(n)
    hist = np.zeros(maxf + 1, np.int64)
    i = 0
    for m in range(m_count):
        if ok[m]:
            ids[i] = m
            neg_speed[i] = -placed_speed(S, job, m)
            hist[mi[FREE, m]] += 1
            i += 1
    by_speed = ids[np.argsort(neg_speed, kind="mergesort")]        # fastest first, then lower index
    k_min = split_pieces(hist, need)
    # The cluster's fewest machines for the job's GPUs (every machine, largest first).
    caps = np.sort(mi[MGPUS, :m_count])
    fewest = 0
    held = 0
    for i in range(m_count - 1, -1, -1):
        if held >= ji[GPUS, job]:
            break
        held += caps[i]
        fewest += 1
    fewest = max(fewest, 1)
    used = ji[ALEN, job]
    ratio = jf[SPREAD_FLOOR, job]              # the all-reduce model's floor, NaN under Gavel's
    if ratio != ratio:
        ratio = max(0.0, 1.0 - 3.0 * np.float64(np.float32(jf[COMM, job])))
    plan_k = np.empty(n, np.int64)
    plan_e = np.empty(n)
    plan_len = np.empty(n, np.int64)
    n_plans = 0
    hist[:] = 0
    held = 0
    scratch = np.zeros(m_count, np.bool_)
    for p in range(n):
        m = by_speed[p]
        hist[mi[FREE, m]] += 1
        held += mi[FREE, m]
        if held < need:
            continue
        k = split_pieces(hist, need)
        if n_plans > 0 and k >= plan_k[n_plans - 1]:
            continue
        slowest = split_members(S, by_speed, p + 1, k, maxf, scratch)
        plan_k[n_plans] = k
        plan_e[n_plans] = slowest * ratio if used + k > fewest else slowest
        plan_len[n_plans] = p + 1
        n_plans += 1
        if k == k_min:
            break
    best = -np.inf
    for i in range(n_plans):
        if plan_e[i] > best:
            best = plan_e[i]
    pick = n_plans - 1                                             # the consolidating placement
    if best > plan_e[pick] * _SPREAD_GAIN:
        bar = best * tol_factor
        for i in range(n_plans):
            if plan_e[i] >= bar:
                pick = i
    split_members(S, by_speed, plan_len[pick], plan_k[pick], maxf, mask)


@_jit
def place_oracle(S, ok):
    """``OraclePlacer.place`` over the allowed machines ``ok``: machines holding the whole need
    (else all) whose speed (``FastestFirst``'s float32 features, product in float64) is within the
    tolerance of the best or where the job loses at most ``slack`` seconds,
    ``duration x (1/speed - 1/best)`` (duration: numpy's expm1 of the float32 ``duration_log``);
    of those the tightest fit (fewest free GPUs; most when none holds the need), then the slowest,
    then the lowest index (``np.lexsort((ok, speed, tight))``)."""
    jf, mi, ic, pf, pi = S[0], S[3], S[11], S[12], S[13]
    job = ic[PLACING]
    need = ic[NEED]
    m_count = pi[NM]
    any_whole, best = fastest_speed(S, ok, job, need)
    if best == -np.inf:
        return -1
    cand = S[26]
    if not any_whole or S[1][ALEN, job] > 0:
        any_whole = False
        # The spread guard (the oracle's tolerance, the default margin; also once the job is
        # split): only split_choice's machines, the best speed among them, most free first.
        cand = np.zeros(m_count, np.bool_)
        split_choice(S, ok, job, need, pf[ORACLE_TOL], cand)
        best = -np.inf
        for m in range(m_count):
            if cand[m]:
                speed = placed_speed(S, job, m)
                if speed > best:
                    best = speed
    duration = expm1_memo(S, job, np.float32(math.log1p(jf[DURATION, job])), E_KEY, E_VAL)
    bar = best * pf[ORACLE_TOL]
    inv_best = 1.0 / best
    slack = pf[ORACLE_SLACK]
    pick = -1
    pick_tight = 0
    pick_speed = 0.0
    for m in range(m_count):
        if not (cand[m] and (mi[FREE, m] >= need or not any_whole)):
            continue
        speed = placed_speed(S, job, m)
        lost = duration * (1.0 / speed - inv_best)
        if not (speed >= bar or lost <= slack):
            continue
        tight = mi[FREE, m] if any_whole else -mi[FREE, m]
        if pick < 0 or tight < pick_tight or (tight == pick_tight and speed < pick_speed):
            pick, pick_tight, pick_speed = m, tight, speed
    return pick


@_jit
def place_decide(S, code, prng):
    """The placer's machine for the job being placed (-1: none allowed)."""
    mf, mi, ic, pf, pi = S[2], S[3], S[11], S[12], S[13]
    allowed = S[16]
    job = ic[PLACING]
    need = ic[NEED]
    m_count = pi[NM]
    ok = S[26]
    has_allowed = pi[HAS_ALLOWED] != 0
    for m in range(m_count):
        ok[m] = mi[FREE, m] > 0 and (not has_allowed or allowed[job, mi[MTYPE, m]])
    ic[C_SCAN] += 1
    if code == P_ORACLE:
        return place_oracle(S, ok)
    if code == P_FIRST:
        for m in range(m_count):
            if ok[m]:
                return m
        return -1
    if code == P_BEST:
        # Tightest machine holding the whole need, else the most free GPUs; ties to the lowest.
        best_whole, best_free = -1, -1
        for m in range(m_count):
            if not ok[m]:
                continue
            f = mi[FREE, m]
            if f >= need and (best_whole < 0 or f < mi[FREE, best_whole]):
                best_whole = m
            if best_free < 0 or f > mi[FREE, best_free]:
                best_free = m
        return best_whole if best_whole >= 0 else best_free
    if code == P_SPREAD:
        # Largest free fraction (float32 feature), then fewest jobs, then the lowest index.
        best = -1
        best_frac = np.float32(0.0)
        for m in range(m_count):
            if not ok[m]:
                continue
            frac = np.float32(mi[FREE, m] * mf[GPUS_INV, m])
            if best < 0 or frac > best_frac or (frac == best_frac and mi[MJOBS, m] < mi[MJOBS, best]):
                best, best_frac = m, frac
        return best
    if code == P_RANDOM:
        # ``RandomPlacer``: Generator.choice over the allowed machines.
        count = 0
        for m in range(m_count):
            if ok[m]:
                count += 1
        if count == 0:
            return -1
        i = prng.integers(0, count)
        for m in range(m_count):
            if ok[m]:
                if i == 0:
                    return m
                i -= 1
        return -1
    # P_FASTEST: nominal speed x measured speed (float32 features, product in float64); prefer
    # machines that hold the whole need, near ties to the tightest fit, unless the job already
    # holds a machine (is being split); else the spread guard's
    # placement, most free GPUs first, then fastest, then the lowest index.
    any_whole, best = fastest_speed(S, ok, job, need)
    if best == -np.inf:
        return -1
    pick = -1
    if any_whole and S[1][ALEN, job] == 0:
        bar = best * pf[TOL_FACTOR]
        for m in range(m_count):
            if not (ok[m] and mi[FREE, m] >= need):
                continue
            if not placed_speed(S, job, m) >= bar:
                continue
            if pick < 0 or mi[FREE, m] < mi[FREE, pick]:
                pick = m
        return pick
    pool = np.zeros(m_count, np.bool_)
    split_choice(S, ok, job, need, pf[TOL_FACTOR], pool)
    pick_speed = 0.0
    for m in range(m_count):
        if not pool[m]:
            continue
        speed = placed_speed(S, job, m)
        if pick < 0 or mi[FREE, m] > mi[FREE, pick] or (mi[FREE, m] == mi[FREE, pick] and speed > pick_speed):
            pick, pick_speed = m, speed
    return pick


@_jit
def place_residual(S, pick, pw):
    """``dual_agent.priority.ResidualPlacer`` on the heuristic's ``pick``: the allowed machine with
    the highest ``pw . psi + PLACER_BONUS x [m == pick]`` (ties to the lowest index), the features
    as the observation rounds them (``placed_speed`` over the best allowed machine's, free
    fraction and free GPUs / 8 in float32, jobs / 4), summed in feature order as the API does."""
    mf, mi, ic, pi = S[2], S[3], S[11], S[13]
    if pick < 0:
        return pick
    job, need, ok = ic[PLACING], ic[NEED], S[26]
    best = -np.inf
    for m in range(pi[NM]):
        if ok[m]:
            speed = placed_speed(S, job, m)
            if speed > best:
                best = speed
    top = -1
    top_score = 0.0
    for m in range(pi[NM]):
        if not ok[m]:
            continue
        free = mi[FREE, m]
        score = pw[0] * (1.0 if free >= need else 0.0)
        score += pw[1] * (placed_speed(S, job, m) / best)
        score += pw[2] * np.float64(np.float32(free * mf[GPUS_INV, m]))
        score += pw[3] * np.float64(np.float32(free * 0.125))
        score += pw[4] * (np.float64(mi[MJOBS, m]) / 4.0)
        score += PLACER_BONUS if m == pick else 0.0
        if top < 0 or score > top_score:
            top, top_score = m, score
    return top


# ------------------------------------------------------------------------------ the episode
@_jit
def end_step(S):
    """``ClusterParallelEnv._finish_step``: count the step, add its default reward to the return;
    True when the episode ends (terminated or truncated)."""
    sc, ic = S[10], S[11]
    reward, done, truncated = finish_step(S)
    sc[RETURN] += reward
    if done:
        return True
    if truncated:
        ic[TRUNCATED] = 1
        return True
    return ic[ERROR] != 0


@_jit
def run_episode(S, rng, orng, prng, thresholds, limits, weights, feat, tenant, tstat, tfold, pw, mig, gtab):
    """One episode from the state right after the simulator's construction (``env.reset``);
    ``weights`` to ``tfold`` are read by the weighted orderer only (empty arrays otherwise); ``pw``,
    when not empty, are the residual placer's weights on top of the placer; ``mig`` (5,) the
    migration rule's parameters and state (``MG_*``; read by the priority orderers when ``MG_ON``);
    ``gtab`` the 2D-Gittins table (:func:`gittins_index`; read by ``O_GITTINS`` only)."""
    S = stash(S)            # one pointer to uncounted arrays for every call below (engine.ref)
    ic, pi = S[11], S[13]
    orderer = pi[ORDERER]
    placer = pi[PLACER]
    residual = len(pw) > 0
    skip_idle(S, rng)
    if ic[ERROR]:
        return
    while True:
        ic[C_DECIDE] += 1
        if orderer == O_FIFO:
            kind, job = order_fifo(S, False)
        elif orderer == O_STRICT:
            kind, job = order_fifo(S, True)
        elif orderer == O_SJF:
            kind, job = order_sjf(S)
        elif orderer == O_RANDOM:
            kind, job = order_random(S, orng)
        else:
            kind, job = order_priority(S, orderer, thresholds, limits, weights, feat, tenant, tstat, tfold, mig,
                                       gtab)
        if ic[ERROR]:
            return
        if kind == START:
            start(S, job)
            if end_step(S):
                return
            while True:
                m = place_decide(S, placer, prng)
                if residual:
                    m = place_residual(S, m, pw)
                if m < 0:
                    ic[ERROR] = E_NO_MACHINE
                    return
                placed = place(S, m)
                if placed:
                    skip_idle(S, rng)
                if end_step(S):
                    return
                if placed:
                    break
        elif kind == PREEMPT_JOB:
            preempt(S, job)
            skip_idle(S, rng)
            if end_step(S):
                return
        else:
            advance(S, rng)
            skip_idle(S, rng)
            if end_step(S):
                return
