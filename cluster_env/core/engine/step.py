"""The compiled step: N episodes (the vector env's, or the parallel env's one), one numba call per step.

For every env it applies the acting agent's action (start / place / preempt / advance, as
``ClusterParallelEnv.step``), skips the idle epochs, counts the step, computes the default reward
and the end flags, and writes the next observation straight into the stacked buffers with the
simulator's compiled observation kernel (``cluster_env.core.kernels`` ``observe``). The dynamics
are :mod:`cluster_env.core.engine.sim`. This module imports numba.

Per env, besides the engine state ``S`` (:mod:`cluster_env.core.engine.layout`), an observation
tuple ``O``: the episode's arrays the observation kernel reads (its two arenas, as
``ObservationBuilder.bind`` makes them, and its private machine block), the candidate rows, and
two small arrays of per-episode scalars (indices ``E_*`` and ``EF_*``).
"""
from __future__ import annotations

import math

import numba
import numpy as np

from cluster_env.core import kernels as _kernels
from cluster_env.core.engine import ref as _ref
from cluster_env.core.engine import sim as _sim
from cluster_env.core.engine.layout import *  # noqa: F401,F403 - compile-time constants
from cluster_env.core.engine.sim import (advance, finish_step, observe_kernel, place, preempt,  # noqa: F401
                                         skip_idle, stash, start, sync_running, top_running)
from cluster_env.core.engine.state import STATE_ITEMS

_sim.prune_stale_cache(__file__, _kernels.__file__, _sim.__file__, _sim._ref.__file__,
                       _sim._npy.__file__)
jit = _sim.jit


def jit_inline(fn):
    """A helper inlined into its caller at numba's IR level: a call taking the state tuples would
    update the reference count of every array they hold, atomically, at each call."""
    dispatcher = numba.njit(error_model="numpy", inline="always")(fn)
    _kernels._attach_cache(dispatcher)
    return dispatcher

ORDER, PLACE = 0, 1

# O: (ep_int, ep_float, job_static, allowed, job_speed, rows, job_state, machine_int, machine_float, cand, E,
#     EF, pc_n, pc_at); ep_int, ep_float and rows: the observation kernel's arenas and machine block (see
#     kernels.observe); job_state (progress, attained, executed), machine_int (free, jobs), machine_float
#     (measured, measured at): views of the engine state's rows
(O_EP_INT, O_EP_FLOAT, O_JOB_STATIC, O_ALLOWED, O_JOB_SPEED, O_ROWS, O_JOB_STATE, O_MACHINE_INT,
 O_MACHINE_FLOAT, O_CAND, O_E, O_EF, O_PC_N, O_PC_AT) = range(14)
# E (int64): phase, candidates shown (pending, running), measure version the machine block shows,
# K, R, preemption, clairvoyant, total GPUs, n_order, n_place (the steps, the step bound and the
# reward's denominator are the engine state's: finish_step)
(E_PHASE, E_NP, E_NR, E_AGE_VER, E_K, E_R, E_PREEMPTION, E_CLAIRVOYANT, E_TOTAL_GPUS, E_NORDER,
 E_NPLACE) = range(11)
E_SIZE = 11
# EF (float64): the clock the machine block's age column shows, the instant of the last preemption
(EF_AGE_NOW, EF_PREEMPT_AT) = range(2)
EF_SIZE = 2
#: O's items, dtype and number of dimensions each (``CompiledBackend._episode_arrays`` builds it).
OBS_ITEMS = (("i8", 1), ("f8", 1), ("f4", 2), ("b1", 2), ("f8", 2), ("f4", 2), ("f8", 2), ("i8", 2), ("f8", 2),
             ("i8", 1), ("i8", 1), ("f8", 1), ("i8", 1), ("f8", 1))

# Each env's S and O live in the backend's arrays; the step reads them through two byte images
# per env, rows of two uint8 arrays (cluster_env.core.engine.ref: one pointer per env, no tuple
# to fetch from a list and no reference counts to update per env and call).
STATE_TYPE = _ref.tuple_type(STATE_ITEMS)
OBS_TYPE = _ref.tuple_type(OBS_ITEMS)
STATE_BYTES = _ref.image_size(STATE_TYPE)
OBS_BYTES = _ref.image_size(OBS_TYPE)
store_state, load_state = _ref.image_access(STATE_TYPE)
store_obs, load_obs = _ref.image_access(OBS_TYPE)

# B: the stacked buffers the step reads and writes (cluster_env.envs.buffers) and the per-env
# images, as one more byte image: one argument instead of twenty arrays to unbox per call. The
# feature arrays are views into the flat block (layout "A"; a C-contiguous one, N = 1, is stored
# as "A" too: one specialisation of the step).
(B_JOBS, B_MACHINES, B_GLOBAL, B_PLACING, B_ORDER_PAD, B_PLACE_PAD, B_JOB_IDS, B_REWARDS, B_TERMINATED,
 B_TRUNCATED, B_NUM_STEPS, B_PHASE, B_TIME, B_PLACING_JOB, B_TICK, B_ENDED, B_ACTION_MASK, B_INVALID, B_PLAYED,
 B_STATE_IMAGES, B_OBS_IMAGES, B_RNGS) = range(22)
BUF_ITEMS = (("f4", 3, "A"), ("f4", 3, "A"), ("f4", 2, "A"), ("f4", 2, "A"), ("i1", 2), ("i1", 2), ("i8", 2),
             ("f8", 1), ("b1", 1), ("b1", 1), ("i8", 1), ("i1", 1), ("f8", 1), ("i8", 1), ("b1", 1), ("i8", 1),
             ("i1", 2), ("b1", 1), ("i8", 1), ("u1", 2), ("u1", 2), ("u1", 1))
BUF_TYPE = _ref.tuple_type(BUF_ITEMS)
BUF_BYTES = _ref.image_size(BUF_TYPE)
store_bufs, load_bufs = _ref.image_access(BUF_TYPE)
# B_RNGS: the image of the episodes' generators, a numba typed list (one per env, see rng_list),
# read by the step without unboxing the list from Python at each call.
RNGS_TYPE = numba.types.ListType(numba.typeof(np.random.default_rng(0)))
RNGS_BYTES = _ref.image_size(RNGS_TYPE)
store_rngs, load_rngs = _ref.container_image_access(RNGS_TYPE)

# step_all's ``mode`` (layout: UNCHECKED, RAISE, NOOP, FALLBACK): UNCHECKED, ``flags`` says which
# actions are allowed (the backend contract's ``valid``); the others check against ``action_mask``
# before any env steps (``flags``: the dict form's other agent did not send its no-op).
#: ``step_all``'s result when the checks refuse the actions (nothing was stepped): an action
#: outside ``Discrete(A)``, or a forbidden one in mode RAISE.
REFUSED = -(1 << 62)


@jit_inline
def candidates(S, O):
    """``ObservationBuilder.candidates``: the K oldest pending jobs, then (with preemption) the R
    running jobs with the most attained service (ties to the lower id), into ``O[O_CAND]``."""
    ji, ic = S[1], S[11]
    cand, E = O[O_CAND], O[O_E]
    K, R = E[E_K], E[E_R]
    n_p = 0
    j = ic[P_HEAD]
    while j >= 0 and n_p < K:
        cand[n_p] = j
        n_p += 1
        j = ji[P_NEXT, j]
    E[E_NP] = n_p
    r = 0
    if R > 0 and ic[N_RUN] > 0:
        sync_running(S)
        r = top_running(S, cand, K, R)
    E[E_NR] = r


@jit_inline
def observe_row(S, O, i, jobs, machines, glob, plc, order_pad, place_pad, job_ids, force_age):
    """``ClusterParallelEnv._observe`` into row ``i`` (``jobs``, ``plc`` and the masks zero-filled)."""
    ji, ti, sc, ic = S[1], S[6], S[10], S[11]
    E, EF = O[O_E], O[O_EF]
    placing = E[E_PHASE] == PLACE
    if not placing:
        candidates(S, O)
    K = E[E_K]
    cand = O[O_CAND]
    now = sc[NOW]
    # ObservationBuilder.build_into: the measured column when the measure version moved, the age
    # column when the version or the clock moved (both at reset, a fresh machine block).
    if force_age:
        # (not ``force_age or ...``: a literal True would reach the kernel as another argument type)
        E[E_AGE_VER] = -1
        EF[EF_AGE_NOW] = np.nan
    version = ic[MEASURE_VERSION]
    refresh_measured = version != E[E_AGE_VER]
    refresh_age = refresh_measured or now != EF[EF_AGE_NOW]
    E[E_AGE_VER] = version
    EF[EF_AGE_NOW] = now
    job = ic[PLACING]
    order_mask = order_pad[i, :E[E_NORDER]]
    place_mask = place_pad[i, :E[E_NPLACE]]
    need, used = 0, 0
    if job >= 0:
        need, used = ic[NEED], ji[ALEN, job]
    pending, running = cand[:E[E_NP]], cand[K:K + E[E_NR]]
    observe_kernel(
        jobs[i], machines[i], glob[i], plc[i], order_mask, place_mask, job_ids[i],
        pending, running, placing, refresh_measured, refresh_age, now,
        job, need, used, ic[P_COUNT], ic[N_RUN], ic[NEXT_ARRIVAL], ic[FINISHED], ic[P_GPUS],
        O[O_EP_INT], O[O_EP_FLOAT], O[O_JOB_STATIC], O[O_ALLOWED], O[O_JOB_SPEED],
        O[O_JOB_STATE], ji[RESTARTS], ti[FREE_T], O[O_MACHINE_INT], O[O_MACHINE_FLOAT], O[O_ROWS])
    if not placing and EF[EF_PREEMPT_AT] == now:
        # ClusterParallelEnv._guard_zero_time_restart: a job preempted MAX_PREEMPTIONS_PER_INSTANT
        # times in this instant may not be preempted again in it.
        pc_n, pc_at = O[O_PC_N], O[O_PC_AT]
        for r in range(E[E_NR]):
            j = cand[K + r]
            if pc_at[j] == now and pc_n[j] >= MAX_PREEMPTIONS_PER_INSTANT:
                order_mask[K + r] = 0
        empty = True
        for r in range(len(order_mask)):
            if order_mask[r] != 0:
                empty = False
        if empty:
            order_mask[len(order_mask) - 1] = 1


# The generators in a numba typed list, made and changed by compiled (disk-cached) functions: the
# typed list's own Python methods compile their numba code in every new process (seconds).
@jit
def rng_list(rng):
    """A typed list holding ``rng``."""
    out = numba.typed.List()
    out.append(rng)
    return out


@jit
def rng_append(rngs, rng):
    rngs.append(rng)


@jit
def rng_set(rngs, i, rng):
    rngs[i] = rng


@jit
def reset_row(S, O, state_images, obs_images, rng, i, jobs, machines, glob, plc, order_pad, place_pad, job_ids):
    """The end of ``ClusterParallelEnv.reset``: skip the idle epochs, observe into row ``i``; keep
    images of the new episode's ``S`` and ``O`` in row ``i`` of ``state_images`` / ``obs_images``
    (for :func:`step_all`; the caller keeps the arrays alive while the images are used)."""
    store_state(state_images[i], S)
    store_obs(obs_images[i], O)
    S = load_state(state_images[i])
    O = load_obs(obs_images[i])
    jobs[i, :, :] = 0.0
    plc[i, :] = 0.0
    order_pad[i, :] = 0
    place_pad[i, :] = 0
    skip_idle(S, rng)
    observe_row(S, O, i, jobs, machines, glob, plc, order_pad, place_pad, job_ids, True)
    return S[11][ERROR]


@jit
def store_state_row(state_images, i, S):
    """Store again the image of env ``i``'s state ``S`` (after its allocation log grew; the caller
    keeps the arrays alive)."""
    store_state(state_images[i], S)


@jit
def store_rng_image(image, rngs):
    """Write the image of the typed list ``rngs`` (the caller keeps it alive)."""
    store_rngs(image, rngs)


@jit
def store_buffers(image, B):
    """Write the image of the buffers tuple ``B`` (the caller keeps its arrays alive)."""
    store_bufs(image, B)


@jit
def step_all(buf_image, actions, flags, mode, penalty):
    """One decision in every env (``PythonBackend.step``'s calls, compiled), the buffers those of
    the image ``buf_image`` (``B_*``). With a checking ``mode`` (RAISE, NOOP, FALLBACK) first the
    vector env's action checks (``ClusterVectorEnv.step``): every action in ``Discrete(A)`` and, in
    mode RAISE, allowed by ``action_mask`` (and ``flags`` False), else REFUSED before any env steps;
    NOOP ignores a forbidden action, FALLBACK plays the row's lowest allowed action; the invalid
    flags, the played actions and the penalty are written. Then every env steps and its
    ``action_mask`` row is written. Writes the envs whose episode ended into ``ended`` and returns
    their count (negative: -1 - the env whose simulator met an error, or REFUSED)."""
    B = load_bufs(buf_image)
    jobs, machines, glob, plc, order_pad, place_pad, job_ids = B[0], B[1], B[2], B[3], B[4], B[5], B[6]
    rewards, terminated, truncated, num_steps, phase, times = B[7], B[8], B[9], B[10], B[11], B[12]
    placing_job, tick, ended, action_mask, invalid, played = B[13], B[14], B[15], B[16], B[17], B[18]
    state_images, obs_images = B[19], B[20]
    rngs = load_rngs(B[21])
    n = len(rngs)
    n_act = action_mask.shape[1]
    if mode != UNCHECKED:
        # Every check before any write: a refused step leaves every buffer as it was.
        for i in range(n):
            a = actions[i]
            if a < 0 or a >= n_act:
                return REFUSED
            if mode == RAISE and (action_mask[i, a] == 0 or flags[i]):
                return REFUSED
        for i in range(n):
            a = actions[i]
            forbidden = action_mask[i, a] == 0
            invalid[i] = forbidden or flags[i]
            if forbidden and mode == FALLBACK:
                # np.argmax over the row: the first of its largest entries
                best = 0
                for j in range(1, n_act):
                    if action_mask[i, j] > action_mask[i, best]:
                        best = j
                a = best
            played[i] = a
    jobs[:] = 0.0
    plc[:] = 0.0
    order_pad[:] = 0
    place_pad[:] = 0
    n_ended = 0
    for i in range(n):
        S = load_state(state_images[i])
        O = load_obs(obs_images[i])
        rng = rngs[i]
        sc, ic = S[10], S[11]
        E, EF = O[O_E], O[O_EF]
        if mode == UNCHECKED:
            a = actions[i]
            ok = flags[i]
        else:
            a = played[i]
            ok = mode != NOOP or action_mask[i, a] != 0
        K = E[E_K]
        if E[E_PHASE] == ORDER:
            if not ok:
                pass
            elif a < K:
                start(S, O[O_CAND][a])
                E[E_PHASE] = PLACE
            elif a < E[E_NORDER] - 1:
                job = O[O_CAND][a]
                preempt(S, job)
                now = sc[NOW]
                EF[EF_PREEMPT_AT] = now
                pc_n, pc_at = O[O_PC_N], O[O_PC_AT]
                if pc_at[job] != now:
                    pc_at[job] = now
                    pc_n[job] = 0
                pc_n[job] += 1
            else:
                advance(S, rng)
        elif ok and place(S, a):
            E[E_PHASE] = ORDER
        if E[E_PHASE] == ORDER:
            skip_idle(S, rng)
        if ic[ERROR] != 0:
            return -1 - i
        reward, done, trunc = finish_step(S)
        if mode != UNCHECKED and penalty != 0.0 and invalid[i]:
            reward -= penalty
        rewards[i] = reward
        now = sc[NOW]
        terminated[i] = done
        truncated[i] = trunc
        num_steps[i] = ic[STEPS]
        observe_row(S, O, i, jobs, machines, glob, plc, order_pad, place_pad, job_ids, False)
        p = E[E_PHASE]
        phase[i] = p
        # ClusterVectorEnv._update_action_mask: the acting agent's padded mask
        src = place_pad if p == PLACE else order_pad
        for j in range(n_act):
            action_mask[i, j] = src[i, j]
        times[i] = now
        placing_job[i] = ic[PLACING]
        tick[i] = sc[LAST_TICK] == now
        if done or trunc:
            ended[n_ended] = i
            n_ended += 1
    return n_ended
