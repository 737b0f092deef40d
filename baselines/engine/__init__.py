"""Compiled heuristics: the named info-agnostic baselines run as compiled decision rules inside a
compiled event loop, one call per episode, with the same episodes as through the PettingZoo API.

``run_compiled_episode("fifo", "philly-v1", "test", seed=0)`` returns the same
:class:`~baselines.harness.episode.EpisodeResult` record as
``run_episode(make_policy("fifo"), "philly-v1", "test", 0)`` (every metric, the return and the
step count bit for bit; only ``wall_s`` differs), tens of times faster. The harness
(``cluster-bench run/compare/sweep/scores``, ``baselines.evaluate``) uses it by itself for the
policies it supports and falls back to the API otherwise.

Supported: the orderers ``fifo``, ``fifo-strict``, ``sjf``, ``las`` (and ``las-q<minutes>``, its
minimum quantum; ``las-migrate`` / ``las-migrate<x>``, its migration rule, which the API path plays on
the ``extended-v2`` observation it sets itself), ``tiresias`` (``2dlas``), ``gittins`` (its
GPU-service table from the scenario's training split, :func:`_gittins_table`),
``srpt`` (deprecated ``oracle``) and ``random`` (without preemption) with their default settings, each with
the placers ``first-fit``, ``consolidate`` (``best-fit``), ``spread``, ``fastest``, ``clairvoyant`` (deprecated ``oracle``) and
``random``: the named baselines ``fifo``, ``fifo-strict``, ``sjf``, ``las``, ``tiresias``, ``gittins``,
``srpt-clairvoyant``, ``random`` and any ``ORDERER+PLACER`` composition of those; every scenario and every
world effect; ``max_steps`` / ``max_time`` (without ``max_steps``, the harness's bound of
``DEFAULT_STEPS_PER_JOB`` steps per job, as the API path sets it). Not supported (API path): ``sjf-noisy``, the random
orderer with ``preemption=True``, policy objects and plugins, a non-default reward, another
observation layout (``observation="extended"``), a render mode, recorded episodes
(``record=True``: timelines and series come from the simulator's logs), and the numpy kernel
backend (``CLUSTER_ENV_KERNELS=numpy``).

Set ``CLUSTER_BENCH_ENGINE=api`` to run everything through the API (for debugging), or
``compiled`` to make an unsupported request an error instead of a silent fallback.
"""
from __future__ import annotations

import functools
import gc
import math
import os
import time
from typing import Any, Optional

import numpy as np

from baselines.learned_key import PLACER_FEATURES, PRIORITY_FEATURES, TENANT_FEATURES  # noqa: F401 (re-exported)
from baselines.engine import codes as C
from cluster_env.core.engine import layout as L

#: Environment variable choosing the engine: ``auto`` (default), ``api`` or ``compiled``.
ENGINE_ENV_VAR = "CLUSTER_BENCH_ENGINE"
ENGINE_MODES = ("auto", "api", "compiled")


class Unsupported(ValueError):
    """The compiled engine cannot run this request exactly; the API path must."""


def engine_mode() -> str:
    """The engine the harness uses (``CLUSTER_BENCH_ENGINE``): auto, api or compiled."""
    mode = os.environ.get(ENGINE_ENV_VAR, "auto").strip().lower() or "auto"
    if mode not in ENGINE_MODES:
        raise ValueError(f"{ENGINE_ENV_VAR} must be one of {ENGINE_MODES}, got {mode!r}")
    return mode


def policy_codes(name: Any) -> Optional[tuple[int, int]]:
    """(orderer code, placer code) of a policy name the engine runs (a string, or a name parsed
    already: :class:`baselines.registry.PolicyName`, read as parsed), None for any other."""
    from baselines.migrate import las_migrate_threshold
    from baselines.registry import PolicyName, las_quantum_minutes, policy_parts

    if isinstance(name, PolicyName):
        parts: Optional[tuple[str, str]] = name.parts
    elif isinstance(name, str):
        parts = policy_parts(name)
    else:
        return None
    if parts is None:
        return None
    orderer, placer = parts
    # las-q<minutes> is LAS's rule; its quantum goes into the parameters (_build_state); a
    # las-migrate<x>'s threshold into the migration array (_run_codes).
    code = C.O_LAS if las_quantum_minutes(orderer) is not None else C.ORDERER_CODES.get(orderer)
    if las_migrate_threshold(orderer) is not None:
        code = C.O_MIGRATE
    if code is None or placer not in C.PLACER_CODES:
        return None
    return code, C.PLACER_CODES[placer]


@functools.lru_cache(maxsize=1)
def _loop_module():
    """The compiled loop module (imports numba; compiles or loads the cached machine code)."""
    from baselines.engine import _loop as loop

    return loop


def available() -> bool:
    """Whether the engine can run here: numba imports and the kernels are the compiled ones."""
    from cluster_env.core import kernels

    return kernels.backend() == "numba"


def warm_up() -> bool:
    """Put the compiled loop in numba's disk cache if it is not there yet (a fresh install), by
    running one tiny episode: worker processes then load it (about 2 s) instead of each compiling
    it (tens of seconds). Returns True when it compiled. Any trouble is left to the episodes."""
    if not available():
        return False
    try:
        loop = _loop_module()
        path = loop.run_episode._cache.cache_path
        if any(f.startswith("_loop.run_episode") and f.endswith(".nbi") for f in os.listdir(path)):
            return False
        run_compiled_episode("tiresias+fastest", "toy-v0", "test", 0)
        return True
    except Exception:  # noqa: BLE001 - a warm-up never stops a run; the episodes report errors
        return False


_UNSUPPORTED_KEYS = {"reward", "render_mode", "invalid_action"}


def no_compiled_rule(policy: Any) -> Unsupported:
    """The :class:`Unsupported` error for a policy (a name, a parsed name or an object) that has no
    compiled rule."""
    from baselines.registry import PolicyName

    shown = (policy.text or policy.key) if isinstance(policy, PolicyName) else policy
    return Unsupported(f"policy {shown!r} has no compiled rule (compiled: ORDERER+PLACER with orderers "
                       f"{sorted(C.ORDERER_CODES)} and placers {sorted(C.PLACER_CODES)})")


def check_request(policy: Any, env_kwargs: Optional[dict] = None, record: bool = False) -> tuple[int, int]:
    """The codes of ``policy`` (a name or a parsed one, as :func:`policy_codes` takes) if the engine
    can run it with ``env_kwargs``; else :class:`Unsupported` saying why."""
    codes = policy_codes(policy)
    if codes is None:
        raise no_compiled_rule(policy)
    if record:
        raise Unsupported("recorded episodes (timelines, series) run through the API")
    bad = sorted(set(env_kwargs or {}) & _UNSUPPORTED_KEYS)
    if (env_kwargs or {}).get("observation", "default") != "default":
        bad.append("observation")            # another layout: the rules read the default one (and
                                             # las-migrate the placement columns it sets itself)
    if bad:
        raise Unsupported(f"environment settings {bad} run through the API")
    if not available():
        raise Unsupported("the compiled engine needs numba and the numba kernel backend")
    return codes


@functools.lru_cache(maxsize=8)
def _cached_env(scenario: str, split: str, settings: tuple):
    import cluster_env

    return cluster_env.parallel_env(scenario, split=split, **dict(settings))


def _make(policy: Any, scenario: Any):
    """The named ``policy`` (a name or a parsed one) as the API path builds it
    (:func:`baselines.registry.make_policy_for`: a ``gittins`` orderer takes its GPU-service
    distribution from ``scenario``'s training split)."""
    from baselines.registry import make_policy_for

    return make_policy_for(policy, scenario)


def _gittins_table(orderer: Any) -> np.ndarray:
    """The loop's ``gtab`` for a :class:`baselines.gittins.Gittins` orderer: row 0 its sorted
    GPU-service samples then their mean, row 1 their prefix sums (``ServiceDistribution``'s own
    arrays, so the index has the same bits); a one-column placeholder for any other orderer."""
    dist = getattr(orderer, "distribution", None)
    if dist is None:
        return np.zeros((2, 1))
    n = len(dist.samples)
    gtab = np.empty((2, n + 1))
    gtab[0, :n] = dist.samples
    gtab[0, n] = dist.mean
    gtab[1] = dist.prefix
    return gtab


def _env_for(composed: Any, scenario: Any, split: str, env_kwargs: Optional[dict], allow_env_mismatch: bool):
    """The environment the API path would build for the policy object ``composed`` (cached per
    settings: the engine only reads it)."""
    from baselines.harness.episode import env_settings

    settings = env_settings(composed, env_kwargs, allow_env_mismatch, scenario)
    if isinstance(scenario, str) and not any(settings.get(k) for k in ("workload_csv", "cluster_csv")):
        try:
            return _cached_env(scenario, split, tuple(sorted(settings.items())))
        except TypeError:          # an unhashable setting (a column mapping): no cache
            pass
    import cluster_env

    return cluster_env.parallel_env(scenario, split=split, **settings)


def _exact_features(sim) -> None:
    """The rules read GPU counts back from float32 features (log2 of the GPUs, free GPUs / 8);
    check that the round trip is exact for this episode (it is for any realistic size)."""
    gpus = sim.gpus
    back = np.rint(np.exp2(np.log2(gpus).astype(np.float32).astype(np.float64))).astype(np.int64)
    if not np.array_equal(back, gpus):
        raise Unsupported("a GPU count does not survive the float32 gpus_log2 feature")
    need = np.arange(1, int(gpus.max()) + 1)
    back = np.rint(2.0 ** np.float32(np.log2(1.0 + need)).astype(np.float64) - 1.0)
    if not np.array_equal(back, need):
        raise Unsupported("a GPU count does not survive the float32 need_log2 feature")
    if int(sim.machine_gpus.max()) >= 2**24:
        raise Unsupported("machines too large for the float32 free_gpus feature")


def _expm1_threshold(limit: float) -> np.float32:
    """The smallest float32 x with numpy's expm1(float64(x)) >= limit (Tiresias' queue limits)."""
    def expm1(x):
        return float(np.expm1(np.array([x], dtype=np.float32).astype(np.float64))[0])

    x = np.float32(math.log1p(limit))
    up, down = np.float32(np.inf), np.float32(-np.inf)
    while expm1(x) < limit:
        x = np.nextafter(x, up)
    while expm1(np.nextafter(x, down)) >= limit:
        x = np.nextafter(x, down)
    return x


def _build_state(env, sim, codes: tuple[int, int], min_quantum: float = 0.0, log_capacity: int = 0):
    """The engine's state arrays from a simulator right after construction, with the policy's codes
    and knobs (``min_quantum``: the priority orderer's; the simulator part and ``log_capacity`` are
    :func:`cluster_env.core.engine.state.build_state`'s)."""
    from baselines.orderers import TIRESIAS_STARVATION_KNOB
    from baselines.placers import FastestFirst, OraclePlacer
    from cluster_env.core.engine.state import build_state

    state = build_state(env, sim, log_capacity)
    pf, pi = state[12], state[13]
    pf[L.TOL_FACTOR] = 1.0 - FastestFirst().tolerance
    pf[L.STARVATION] = TIRESIAS_STARVATION_KNOB
    oracle = OraclePlacer()
    pf[L.ORACLE_TOL], pf[L.ORACLE_SLACK] = 1.0 - oracle.tolerance, oracle.slack
    pf[L.MIN_QUANTUM] = min_quantum
    pi[L.ORDERER], pi[L.PLACER] = codes
    pi[L.READS_MEASURED] = int(codes[1] in (C.P_FASTEST, C.P_ORACLE))
    return state


def _migration_array(orderer: Any) -> np.ndarray:
    """The loop's ``mig`` array (``_loop.MG_*``) for a :class:`baselines.migrate.MigratingLAS`
    (zeros but the marker for any other orderer, the rule off): its threshold, the smallest
    float32 ``since_start_log`` whose numpy expm1 reaches ``min_run`` less the tolerance (-inf
    when that is not positive), no job moving, no move yet, the rule on."""
    from baselines.orderers import QUANTUM_TOLERANCE_S

    mig = np.array([0.0, 0.0, -1.0, math.nan, 0.0, 0.0])
    threshold = getattr(orderer, "threshold", None)
    if threshold is not None:
        limit = orderer.min_run - QUANTUM_TOLERANCE_S
        mig[0] = threshold
        mig[1] = float(_expm1_threshold(limit)) if limit > 0 else -math.inf
        mig[5] = 1.0
    return mig


_ERRORS = {L.E_NO_EVENT: "no future event: nothing running and no arrival left",
           L.E_NO_MACHINE: "the placer found no machine for the job being placed",
           L.E_STUCK: "no legal action",
           L.E_LOG_FULL: "the allocation log is full"}


def run_compiled_episode(policy: Any, scenario: Any, split: str, seed: int, env_kwargs: Optional[dict] = None,
                         allow_env_mismatch: bool = False, built: Any = None):
    """Run one episode of the named baseline ``policy`` in the compiled engine.

    Same arguments and result as :func:`baselines.harness.episode.run_episode` (without
    recording). ``policy`` may be a name parsed already (:class:`baselines.registry.PolicyName`),
    and ``built`` the policy object made from it (the harness resolves a run's names once: the
    engine then parses and builds nothing; it only reads the object). Raises :class:`Unsupported`
    when the engine cannot run it exactly.
    """
    codes = check_request(policy, env_kwargs)
    return _run_codes(policy, codes, scenario, split, seed, env_kwargs, allow_env_mismatch, None, None,
                      composed=built)


#: Lengths of :data:`baselines.learned_key.PRIORITY_FEATURES` (the linear key's weights) and of
#: :data:`~baselines.learned_key.PLACER_FEATURES` (the residual placer's weights).
N_PRIORITY_FEATURES = len(PRIORITY_FEATURES)
N_PLACER_FEATURES = len(PLACER_FEATURES)


def run_weighted_las_episode(weights: Any, placer: str, scenario: Any, split: str, seed: int,
                             env_kwargs: Optional[dict] = None, name: Optional[str] = None,
                             allow_env_mismatch: bool = False, placer_weights: Any = None,
                             migrate: Optional[float] = None):
    """One episode of the priority-mode agent's linear key on LAS (``log1p(attained) + w . phi``,
    :mod:`dual_agent.priority`) composed with the named ``placer``, in the compiled engine.

    ``weights``: the 9 linear weights in ``PRIORITY_FEATURES`` order (the tenant statistics are
    kept, as the extended observation keeps them, when a tenant weight is not zero). The key is
    computed with the same float operations, in the same order, as ``PriorityModel.score`` (a sum
    in feature order), so the records are the API agent's (``tests/test_dual_priority.py``). ``name``: the record's policy
    name (default ``weighted-las+<placer>``). ``placer_weights``: the residual placer's
    ``N_PLACER_FEATURES`` weights on top of ``placer`` (``dual_agent.priority.ResidualPlacer``;
    None or zeros: the placer itself). ``migrate``: ``las-migrate``'s threshold (> 1) for the
    migration rule on top of the key (``dual_agent.priority.MigratingLearnedOrderer``; zero weights
    and 1.5 give ``las-migrate``'s records); None: no migration. Raises :class:`Unsupported` where
    the API path must run, ValueError for bad weights.
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (N_PRIORITY_FEATURES,) or not np.isfinite(w).all():
        raise ValueError(f"weights must be {N_PRIORITY_FEATURES} finite numbers, got {np.asarray(weights)!r}")
    pw = None if placer_weights is None else np.asarray(placer_weights, dtype=np.float64)
    if pw is not None and (pw.shape != (N_PLACER_FEATURES,) or not np.isfinite(pw).all()):
        raise ValueError(f"placer_weights must be {N_PLACER_FEATURES} finite numbers, got {placer_weights!r}")
    base = f"las+{placer}"
    codes = check_request(base, env_kwargs)
    mig = None
    if migrate is not None:
        from baselines.migrate import MigratingLAS

        mig = _migration_array(MigratingLAS(migrate))     # validates the threshold
    return _run_codes(base, (C.O_WEIGHTED, codes[1]), scenario, split, seed, env_kwargs, allow_env_mismatch, w,
                      name or f"weighted-las+{placer}", pw if np.any(pw) else None, mig)


def _run_codes(policy: str, codes: tuple[int, int], scenario: Any, split: str, seed: int,
               env_kwargs: Optional[dict], allow_env_mismatch: bool, weights: Optional[np.ndarray],
               name_override: Optional[str], placer_weights: Optional[np.ndarray] = None,
               mig: Optional[np.ndarray] = None, composed: Any = None):
    """:func:`run_compiled_episode` with the codes given (the environment is ``policy``'s);
    ``placer_weights``: the residual placer's, None for the placer alone; ``mig``: the migration
    array (:func:`_migration_array`), None for ``policy``'s orderer's; ``composed``: the policy
    object of ``policy`` when the caller has it (else made here, once)."""
    from baselines.harness.episode import EpisodeResult, check_fits, env_label, fallback_columns, world_line
    from baselines.orderers import TIRESIAS_QUEUE_LIMITS
    from cluster_env.core.engine.state import log_capacity, state_metrics
    from cluster_env.core.metrics import METRIC_KEYS
    from cluster_env.core.objectives import OBJECTIVE_KEYS
    from cluster_env.world.throughputs import comm_intensity

    loop = _loop_module()
    if composed is None:
        composed = _make(policy, scenario)
    env = _env_for(composed, scenario, split, env_kwargs, allow_env_mismatch)
    if env._jct_unit is None:
        raise Unsupported("a non-default reward runs through the API")
    check_fits(composed, env)          # the API path's refusals (gittins on a user's workload)
    t0 = time.perf_counter()
    sim = env.start_episode(seed, None, observed=False)      # what env.reset(seed) starts from
    rng, workload, load = sim.rng, sim.workload, env.offered_load
    _exact_features(sim)
    if codes[0] == C.O_RANDOM and env.builder.R:
        raise Unsupported("the random orderer with preemption runs through the API")
    if (codes[0] == C.O_ORACLE or codes[1] == C.P_ORACLE) and not env.sched.clairvoyant:
        raise Unsupported("the oracle reads durations: without clairvoyant=True it runs (and fails) "
                          "through the API")
    # The API path's step bound (baselines.harness.episode.bound_steps) when none is set: the
    # same truncated records, and every episode ends (a tiny scheduling tick otherwise loops on).
    max_steps = env.sched.max_steps or env.default_max_steps()
    state = _build_state(env, sim, codes, getattr(composed.orderer, "min_quantum", 0.0),
                         log_capacity(workload, max_steps))      # tenant quotas: quota_violation's log
    state[13][L.MAX_STEPS] = max_steps
    if mig is None:
        mig = _migration_array(composed.orderer)
    if placer_weights is not None or mig[5] != 0:
        state[13][L.READS_MEASURED] = 1          # the residual placer and the move rule read measured speeds
    gtab = _gittins_table(composed.orderer)
    # ComposedPolicy.reset(seed): one generator per half (the random halves draw from them).
    order_seq, place_seq = np.random.SeedSequence(seed).spawn(2)
    order_rng, place_rng = np.random.default_rng(order_seq), np.random.default_rng(place_seq)
    if weights is None:
        w, feat = np.zeros(N_PRIORITY_FEATURES), np.zeros((3, 0))
        tenant, tstat, tfold = np.zeros(0, np.int64), np.zeros((3, 1)), np.zeros(1, np.int64)
    else:       # the observation's float32 gpus_log2, comm_intensity and best_speed columns
        w = weights
        feat = np.vstack([np.log2(sim.gpus).astype(np.float32), comm_intensity()[sim.job_type].astype(np.float32),
                          np.asarray(sim.best_speed).astype(np.float32)]).astype(np.float64)
        # The tenants' running statistics (RunningStats of the extended observation): count,
        # total, moving average per tenant, the last column for every job; folded-job flags.
        tenant = np.asarray(workload.tenant, dtype=np.int64)
        n_tenants = int(tenant.max()) + 1 if len(tenant) else 1
        tstat = np.zeros((3, n_tenants + 1))
        tstat[2] = -1.0
        tfold = np.zeros(len(tenant) + 1, np.int64)
    limits = np.array(TIRESIAS_QUEUE_LIMITS, dtype=np.float64)
    thresholds = np.array([_expm1_threshold(x) for x in limits], dtype=np.float32)
    # The loop calls numpy for a few ufuncs (numba.objmode); Python's cyclic garbage collector,
    # triggered by those small allocations, would scan every object of the process each time.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        loop.run_episode(state, rng, order_rng, place_rng, thresholds, limits, w, feat, tenant, tstat, tfold,
                         np.zeros(0) if placer_weights is None else placer_weights, mig, gtab)
    finally:
        if gc_was_on:
            gc.enable()
    jf, ji, sc, ic = state[0], state[1], state[10], state[11]
    if ic[L.ERROR]:
        raise RuntimeError(f"compiled engine: {_ERRORS.get(int(ic[L.ERROR]), 'error')} "
                           f"({policy}, {getattr(scenario, 'name', scenario)}, seed {seed})")
    metrics = state_metrics(state, sim)
    wall = time.perf_counter() - t0
    name = getattr(scenario, "name", scenario)
    if any((env_kwargs or {}).get(k) for k in ("workload_csv", "cluster_csv")):
        name = getattr(env.scenario, "name", None) or name
    row: dict[str, Any] = {"policy": name_override or composed.name, "scenario": name, "split": split,
                           "seed": int(seed), "env": env_label(env_kwargs), "window": workload.digest()}
    row.update({k: metrics[k] for k in METRIC_KEYS})
    row.update({k: metrics[k] for k in OBJECTIVE_KEYS if k in metrics})   # a workload with objectives
    row.update({"truncated": bool(ic[L.TRUNCATED]),
                "jobs_unfinished": int(sim.num_jobs) - int(metrics["jobs_finished"]),
                "offered_load": float(load), "pending_window": int(env.sched.pending_window),
                "world": world_line(env),
                "return": float(sc[L.RETURN]), "steps": int(ic[L.STEPS]), "wall_s": wall})
    row.update(fallback_columns(0, int(ic[L.STEPS])))      # the compiled rules never choose a forbidden action
    done = ~np.isnan(jf[L.FINISH])
    return EpisodeResult(record=row, engine="compiled", jct=(jf[L.FINISH] - sim.submit)[done],
                         jobs=_job_outcomes(sim, jf, ji, int(mig[_loop_module().MG_COUNT])))


def _job_outcomes(sim, jf: np.ndarray, ji: np.ndarray, moves: int):
    """The episode's :class:`~baselines.harness.episode.JobOutcomes` from the loop's per-job rows
    (the simulator's own job table stays as it was built: the loop plays on copies)."""
    from baselines.harness.episode import JobOutcomes

    return JobOutcomes.of_episode(sim, jf[L.FIRST_START], jf[L.FINISH], jf[L.HELD], jf[L.EXECUTED], ji[L.RESTARTS],
                                  jf[L.NOMINAL], moves)


__all__ = ["ENGINE_ENV_VAR", "Unsupported", "available", "check_request", "engine_mode", "no_compiled_rule",
           "policy_codes", "run_compiled_episode", "run_weighted_las_episode", "warm_up"]
