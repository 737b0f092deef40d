"""Row and slot indices of the compiled engine's state arrays (shared by the loop and its front).

The engine keeps one episode's state in a handful of preallocated numpy arrays (no jitclass, so
that every compiled function caches on disk): per-job rows, per-machine rows, the simulator's
running-job slots (the same layout as :class:`cluster_env.core.simulator.ClusterSimulator`),
and small scalar arrays. Each name below is the row (or entry) index of one quantity.
"""
from __future__ import annotations

#: How many times one job may be preempted in one instant of simulated time: the guard against
#: zero-time livelocks (``ClusterParallelEnv._guard_zero_time_restart``, the compiled step's mask).
MAX_PREEMPTIONS_PER_INSTANT = 16
#: The compiled step's ``mode`` (``cluster_env.core.engine.step.step_all``): the actions are not
#: checked (the caller did), or checked against ``action_mask`` before any env steps with the
#: vector env's invalid-action mode.
UNCHECKED, RAISE, NOOP, FALLBACK = -1, 0, 1, 2

# ---- per-job float64 rows, array jf (rows, N) (Q_EXEC0: executed seconds at the job's last start, as
# the priority orderers read them, kept with a minimum quantum only; SPREAD_FLOOR: the simulator's
# spread_floor, NaN under Gavel's spread model)
(SUBMIT, DURATION, PROGRESS, ATTAINED, EXECUTED, HELD, FIRST_START, FINISH, NOMINAL, EXEC_BEFORE,
 HELD_BEFORE, BEST_SPEED, COMM, STOPPED_AT, STARTED_NOW, PREEMPTED_NOW, ATT0, EXE0, A_KEY, A_VAL, E_KEY,
 E_VAL, Q_EXEC0, SPREAD_FLOOR) = range(24)
JF_ROWS = 24
# ---- per-job int64 rows, array ji (rows, N)
(GPUS, STATUS, RESTARTS, FREE_SPREAD, SLOT_OF, P_NEXT, P_PREV, AOFF, ALEN, PROMOTED) = range(10)
JI_ROWS = 10
# ---- per-machine float64 rows, array mf (rows, M)
(STATIC, MEASURED, MEASURED_AT, FACTOR, CROWD, GPUS_INV, LOG_SPEED, LOG_MULT, NEXT_SWITCH, DYN, ZBUF,
 SINCE, EXP_TMP) = range(13)
MF_ROWS = 13
# ---- per-machine int64 rows, array mi (rows, M)
(FREE, MJOBS, MTYPE, MGPUS, MDUE) = range(5)
MI_ROWS = 5
# ---- per-GPU-type rows: tf float64 (rows, T), ti int64 (rows, T)
PRICE_S, EXTRA_W = range(2)
TF_ROWS = 2
FREE_T, HELD_T = range(2)
TI_ROWS = 2
# ---- running-job slots (the simulator's blocks): sf float64, si int64, sb bool
S_LEFT, S_RATE, S_NOMINAL, S_ACOMM, S_UNTIL, S_T0 = range(6)
S_JOB, S_FM, S_MOFF, S_MLEN = range(4)
S_MULTI, S_SINGLE = range(2)
# ---- float64 scalars, array sc
(NOW, FLUCT_TIME, NEXT_FLUCT, MEASURE_TIME, NEXT_TICK, LAST_TICK, BUSY, FEE, ENERGY, JOB_SECONDS,
 FEE_RATE, POWER, NEXT_FINISH, F_TIME, F_NEXT_MIN, F_CACHE_DT, F_DECAY, F_NOISE, JS_LAST, RETURN) = range(20)
SC_SIZE = 20
# ---- int64 scalars, array ic (C_*: diagnostic counters: pending-window steps, placer scans,
# pool compactions, ORDER decisions; LOG_N: entries of the allocation log, see state.build_state)
(N_RUN, N_MULTI, NEXT_ARRIVAL, FINISHED, ARRIVED, EVENTS, PREEMPTIONS, HELD_TOTAL, FREE_TOTAL, DIRTY,
 RESTARTING, P_COUNT, P_GPUS, P_HEAD, P_TAIL, PLACING, NEED, POOL_END, STEPS, TRUNCATED, ERROR,
 MEASURE_VERSION, PROMOTIONS, EXPM1_CALLS, C_WALK, C_SCAN, C_COMPACT, C_DECIDE, LOG_N) = range(29)
IC_SIZE = 29
# ---- float64 parameters, array pf (MIN_QUANTUM: the priority orderers' minimum quantum, seconds)
(ALPHA, TIME_LIMIT, TICK, OVERHEAD, INTERVAL, QUIET, NOISE, TAU, SIGMA, THETA, STRAG_RATE, ON_MEAN, OFF_MEAN,
 SHIFT, LOG_SLOW, DENOM, TOL_FACTOR, MAX_TIME, STARVATION, ORACLE_TOL, ORACLE_SLACK, MIN_QUANTUM) = range(22)
PF_SIZE = 22
# ---- int64 parameters, array pi (ORDERER, PLACER: the decision rules' codes, which the rules' owner,
# baselines.engine.codes, names; EXP_LOOP, EXP_CTX, EXP_AUX: the addresses of numpy's float64 exp
# loop, its context and auxdata, or zeros: see cluster_env.core.engine.npy_loops)
(NJ, NM, K, R, PREEMPT, FLUCT_ON, HAS_ALLOWED, ORDERER, PLACER, MAX_STEPS, PREEMPT_AT_EVENT, READS_MEASURED,
 MAX_CROWD, EXP_LOOP, EXP_CTX, EXP_AUX) = range(16)
PI_SIZE = 16

# Error codes (ic[ERROR]); the front raises with a message.
E_NONE, E_NO_EVENT, E_NO_MACHINE, E_STUCK, E_LOG_FULL = range(5)
# Job status codes (the simulator's).
ST_NOT_ARRIVED, ST_PENDING, ST_RUNNING, ST_FINISHED = 0, 1, 2, 3
