"""The compiled engine's state arrays built from a freshly constructed simulator.

The state is a tuple of preallocated numpy arrays (no jitclass, so that every compiled function
caches on disk), indexed by :mod:`cluster_env.core.engine.layout`: per-job rows, per-machine rows,
the running-job slots (the simulator's layout), scalars and parameters, and scratch space.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from cluster_env.core.engine import layout as L
from cluster_env.core.engine import npy_loops

#: The state tuple's items, dtype and number of dimensions each (what :func:`build_state` returns;
#: the compiled loops that read states from memory, :mod:`cluster_env.core.engine.ref`, are typed
#: from it).
STATE_ITEMS = (("f8", 2), ("i8", 2), ("f8", 2), ("i8", 2), ("b1", 2), ("f8", 2), ("i8", 2),   # jf ji mf mi mb tf ti
               ("f8", 2), ("i8", 2), ("b1", 2),                                                # sf si sb
               ("f8", 1), ("i8", 1), ("f8", 1), ("i8", 1),                                     # sc ic pf pi
               ("f8", 2), ("f8", 2), ("b1", 2),                                                # speed spread allowed
               ("i8", 1), ("i8", 1), ("f8", 1), ("i8", 1), ("i8", 1), ("f8", 1), ("i8", 1),   # pool .. due jobs
               ("i8", 1), ("i8", 1), ("b1", 1), ("f4", 1), ("i4", 1), ("i8", 2),              # cand .. table
               ("f8", 2), ("f8", 1), ("f8", 2),                                                # allreduce model
               ("f8", 1), ("i8", 1), ("i8", 1))                                                # allocation log


def build_state(env: Any, sim: Any, log_capacity: int = 0) -> tuple:
    """The engine's state arrays from ``env``'s simulator ``sim`` right after construction (nothing
    has run): no decision rule (codes 0), measured speeds kept up to date (what observations show).

    ``log_capacity`` > 0 keeps the allocation log (the simulator's ``allocation_log``, which a
    workload with tenant quotas needs for ``quota_violation``) in its last three arrays: at each
    launch and release the time, the job and the GPUs it holds from then on (0 at a release),
    ``ic[LOG_N]`` entries so far; a full log sets ``ic[ERROR] = E_LOG_FULL`` (the caller grows it
    before that: :func:`allocation_log` reads it back, :func:`grow_log` enlarges it)."""
    n, m = sim.num_jobs, sim.num_machines
    js, ms, fl, world = sim.jobs, sim.machines, sim.fluct, sim.world
    if sim._n or sim.placing >= 0 or sim.events:
        raise RuntimeError("the engine starts from a simulator that has not run")
    jf = np.zeros((L.JF_ROWS, n))
    jf[L.SUBMIT], jf[L.DURATION] = sim.submit, sim.duration
    jf[L.PROGRESS], jf[L.ATTAINED], jf[L.EXECUTED], jf[L.HELD] = js.progress, js.attained, js.executed, js.held
    jf[L.FIRST_START], jf[L.FINISH], jf[L.NOMINAL] = js.first_start, js.finish, js.nominal
    jf[L.EXEC_BEFORE], jf[L.HELD_BEFORE] = sim._exec_before, sim._held_before
    jf[L.BEST_SPEED], jf[L.COMM] = sim.best_speed, sim.comm
    jf[L.SPREAD_FLOOR] = sim.spread_floor if env.sched.spread_floor else np.nan   # as the env's info
    jf[[L.STOPPED_AT, L.STARTED_NOW, L.PREEMPTED_NOW, L.A_KEY, L.E_KEY]] = np.nan
    ji = np.zeros((L.JI_ROWS, n), dtype=np.int64)
    ji[L.GPUS], ji[L.STATUS], ji[L.RESTARTS] = sim.gpus, js.status, js.restarts
    ji[L.FREE_SPREAD] = sim.free_spread_machines
    ji[[L.SLOT_OF, L.P_NEXT, L.P_PREV]] = -1
    pending = list(sim.pending)
    for a, b in zip(pending, pending[1:]):
        ji[L.P_NEXT, a], ji[L.P_PREV, b] = b, a

    mf = np.zeros((L.MF_ROWS, m))
    mf[L.STATIC], mf[L.MEASURED], mf[L.MEASURED_AT] = ms.static, ms.measured, ms.measured_at
    mf[L.FACTOR], mf[L.CROWD] = sim.machine_factor, sim._crowd
    mf[L.GPUS_INV] = 1.0 / sim.machine_gpus
    mi = np.zeros((L.MI_ROWS, m), dtype=np.int64)
    mi[L.FREE], mi[L.MJOBS], mi[L.MTYPE], mi[L.MGPUS] = ms.free, ms.jobs, sim.machine_type, sim.machine_gpus
    mb = np.zeros((1, m), dtype=np.bool_)
    if fl is not None:
        mf[L.LOG_SPEED], mf[L.LOG_MULT], mf[L.NEXT_SWITCH], mf[L.DYN] = (
            fl.log_speed, fl._log_mult, fl._next_switch, fl.factors)
        mb[0] = fl.straggling
    tf = np.array([sim._price_per_s, sim._extra_watts], dtype=np.float64).reshape(L.TF_ROWS, -1)
    ti = np.array([sim.free_per_type, sim.held_per_type], dtype=np.int64).reshape(L.TI_ROWS, -1)
    cap = max(1, min(n, sim.total_gpus))
    sf = np.zeros((6, cap))
    si = np.zeros((4, cap), dtype=np.int64)
    sb = np.zeros((2, cap), dtype=np.bool_)

    sc = np.zeros(L.SC_SIZE)
    sc[L.NOW], sc[L.FLUCT_TIME], sc[L.NEXT_FLUCT] = sim.now, sim._fluct_time, sim._next_fluct
    sc[L.MEASURE_TIME], sc[L.NEXT_TICK], sc[L.LAST_TICK] = sim._measure_time, sim._next_tick, sim.last_tick
    sc[L.BUSY], sc[L.FEE], sc[L.ENERGY], sc[L.JOB_SECONDS] = (sim.busy_gpu_seconds, sim.fee, sim.energy_joules,
                                                              sim.job_seconds)
    sc[L.FEE_RATE], sc[L.POWER], sc[L.NEXT_FINISH] = sim._fee_rate, sim._power, sim._next_finish
    if fl is not None:
        sc[L.F_TIME], sc[L.F_NEXT_MIN] = fl.time, fl._next_min
        sc[L.F_CACHE_DT] = np.nan if fl._cache_dt is None else fl._cache_dt
        sc[L.F_DECAY], sc[L.F_NOISE] = fl._decay, fl._noise
    ic = np.zeros(L.IC_SIZE, dtype=np.int64)
    ic[L.NEXT_ARRIVAL], ic[L.FINISHED], ic[L.ARRIVED] = sim.next_arrival, sim.finished_count, sim.arrived_count
    ic[L.EVENTS], ic[L.PREEMPTIONS] = sim.events, sim.preemptions
    ic[L.HELD_TOTAL], ic[L.FREE_TOTAL] = sim._held_total, sim.free_total
    ic[L.DIRTY], ic[L.RESTARTING] = int(sim._dirty), int(sim._restarting)
    ic[L.P_COUNT], ic[L.P_GPUS] = len(pending), sim.pending_gpus
    ic[L.P_HEAD], ic[L.P_TAIL] = (pending[0], pending[-1]) if pending else (-1, -1)
    ic[L.PLACING] = -1

    params = world.fluctuation_params
    pf = np.zeros(L.PF_SIZE)
    pf[L.ALPHA], pf[L.TIME_LIMIT], pf[L.TICK] = sim.alpha, sim.time_limit, sim.scheduling_tick
    pf[L.OVERHEAD] = float(world.restart_overhead)
    pf[L.INTERVAL], pf[L.QUIET] = float(params.interval), float(world.quiet_fluctuation_interval)
    pf[L.NOISE], pf[L.TAU] = float(world.measurement_noise), float(world.measurement_tau)
    pf[L.SIGMA], pf[L.THETA], pf[L.STRAG_RATE] = float(params.sigma), float(params.theta), float(params.straggler_rate)
    if fl is not None:
        pf[L.ON_MEAN], pf[L.OFF_MEAN], pf[L.SHIFT], pf[L.LOG_SLOW] = fl._on_mean, fl._off_mean, fl._shift, fl._log_slow
    # The default reward's denominator (another reward is computed outside the engine).
    pf[L.DENOM] = max(sim.num_jobs, 1) * (env._jct_unit or 1.0)
    max_time = env.sched.max_time
    pf[L.MAX_TIME] = math.inf if max_time is None else float(max_time)
    pi = np.zeros(L.PI_SIZE, dtype=np.int64)
    pi[L.NJ], pi[L.NM], pi[L.K], pi[L.R] = n, m, env.builder.K, env.builder.R
    pi[L.PREEMPT], pi[L.FLUCT_ON] = int(sim.preemption), int(fl is not None)
    pi[L.HAS_ALLOWED] = int(sim.allowed is not None)
    pi[L.MAX_STEPS] = env.sched.max_steps or 0
    pi[L.READS_MEASURED] = 1
    # numpy's exp loop called directly (zeros: through numba.objmode), see npy_loops.
    pi[L.EXP_LOOP], pi[L.EXP_CTX], pi[L.EXP_AUX] = npy_loops.exp_loop()

    allowed = sim.allowed if sim.allowed is not None else np.zeros((0, sim.num_types), dtype=np.bool_)
    pool = 2 * sim.total_gpus + 64
    window = env.builder.K + env.builder.R + 1
    state = (jf, ji, mf, mi, mb, tf, ti, sf, si, sb, sc, ic, pf, pi,
             np.ascontiguousarray(sim.job_speed, dtype=np.float64),
             np.ascontiguousarray(sim.job_spread, dtype=np.float64),
             np.ascontiguousarray(allowed, dtype=np.bool_),
             np.zeros(pool, dtype=np.int64), np.zeros(pool, dtype=np.int64),      # allocation pool
             np.zeros(cap), np.zeros(cap, dtype=np.int64),                       # scratch, due slots
             np.zeros(0, dtype=np.int64), np.zeros(0),                           # empty layouts / draws
             np.zeros(cap, dtype=np.int64),                                      # due jobs
             np.zeros(window, dtype=np.int64), np.zeros(window, dtype=np.int64),  # candidates, keys
             np.zeros(m, dtype=np.bool_))                                        # placeable machines
    bits = np.zeros(1, dtype=np.float32)
    # Jobs on each machine (a job holds at least one GPU there, so at most its GPUs of them).
    table = np.full((m, int(sim.machine_gpus.max())), -1, dtype=np.int64)
    # The "allreduce" spread model's arrays (empty job_xref: the "gavel" model), see the simulator.
    comm = tuple(np.ascontiguousarray(a, dtype=np.float64) for a in (sim.job_demand, sim.job_xref, sim.net))
    log = (np.zeros(log_capacity), np.zeros(log_capacity, dtype=np.int64), np.zeros(log_capacity, dtype=np.int64))
    return state + (bits, bits.view(np.int32), table) + comm + log           # float32 -> its bits


#: Where the allocation log's arrays sit in the state tuple (time, job, GPUs held from then on).
LOG_ITEMS = (33, 34, 35)


def log_capacity(workload: Any, max_steps: "int | None", per_job: int = 8) -> int:
    """The allocation log an episode of ``workload`` keeps: none (0) without tenant quotas. With a
    step bound, two entries per step, which always suffice: a launch completes a placement step
    and a release ends a launch (``np.zeros`` only reserves the pages it touches). Without one,
    ``per_job`` entries per job to start with; the caller grows the log before a step that could
    fill it (:func:`grow_log`)."""
    if workload.tenant_quota is None:
        return 0
    return 2 * max_steps + 2 if max_steps else per_job * workload.num_jobs + 64


def state_metrics(state: tuple, sim: Any) -> dict:
    """Every metric of the episode in ``state`` (:func:`cluster_env.core.metrics.episode_metrics`
    on the engine's arrays, with its allocation log where the episode keeps one); ``sim`` is the
    simulator the state was built from (the workload and its static figures)."""
    from cluster_env.core.metrics import episode_metrics

    jf, sc, ic = state[0], state[10], state[11]
    return episode_metrics(
        sim.workload, sim.submit, jf[L.FIRST_START], jf[L.FINISH], sim.ideal_runtime,
        total_gpus=sim.total_gpus, busy_gpu_seconds=float(sc[L.BUSY]), total_fee=float(sc[L.FEE]),
        energy_joules=float(sc[L.ENERGY]), preemptions=int(ic[L.PREEMPTIONS]), end_time=float(sc[L.NOW]),
        held=jf[L.HELD], allocations=allocation_log(state) if len(state[LOG_ITEMS[0]]) else None)


def allocation_log(state: tuple) -> list:
    """The log as the simulator keeps it, ``[(time, job, [(machine, gpus)] or None)]`` (only the
    GPU count matters to its readers; the machine is given as -1)."""
    times, jobs, gpus = (state[i] for i in LOG_ITEMS)
    n = int(state[11][L.LOG_N])
    return [(t, j, [(-1, g)] if g else None) for t, j, g in zip(times[:n].tolist(), jobs[:n].tolist(),
                                                              gpus[:n].tolist())]


def grow_log(state: tuple, capacity: int) -> tuple:
    """``state`` with its allocation log's arrays enlarged to ``capacity`` entries (the entries so
    far kept); the caller stores the new tuple wherever the old one was referenced."""
    n = int(state[11][L.LOG_N])
    grown = []
    for i in LOG_ITEMS:
        arr = np.zeros(capacity, dtype=state[i].dtype)
        arr[:n] = state[i][:n]
        grown.append(arr)
    return state[:LOG_ITEMS[0]] + tuple(grown) + state[LOG_ITEMS[-1] + 1:]
