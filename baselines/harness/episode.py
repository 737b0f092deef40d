"""One evaluation episode: build the environment a policy needs, run it, collect its record.

The harness reads the simulator only to *record* (utilisation and queue over time, which job held
which machine, per-job completion times) after the policy has acted; policies never see it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

import cluster_env
from cluster_env.core.metrics import METRIC_KEYS
from cluster_env.core.objectives import OBJECTIVE_KEYS
from cluster_env.scenarios.base import Scenario

#: Columns of :attr:`EpisodeResult.series`.
SERIES_COLUMNS = ("time", "busy_gpus", "pending_jobs", "running_jobs")


@dataclass(frozen=True)
class JobOutcomes:
    """What happened to each job of one episode, indexed by job id (the workload's order, so two
    episodes of the same window pair job by job). Every array has shape (N,); times in seconds.

    A finished job's JCT splits exactly into ``pending + executed + overhead``: the time it waited
    (before its first start and after every preemption), the time it ran making progress, and the
    restart overheads it paid (:attr:`pending`, :attr:`overhead`).
    """

    submit: np.ndarray          # arrival time
    duration: np.ndarray        # true work, seconds on the reference GPU (hindsight: no policy sees it)
    gpus: np.ndarray            # int64 GPUs the job asks for
    best_speed: np.ndarray      # nominal speed of the fastest GPU type the job may use
    first_start: np.ndarray     # nan if never started
    finish: np.ndarray          # nan if not finished
    held: np.ndarray            # seconds holding GPUs (restart overheads included)
    executed: np.ndarray        # seconds running (restart overheads excluded)
    restarts: np.ndarray        # int64 preemptions suffered (a move is one)
    nominal: np.ndarray         # nominal speed of the job's last placement (GPU type, spread)
    #: The episode's moves (the migration rule's preemptions: ``las-migrate``, a priority agent with
    #: ``migrate``), counted in :attr:`restarts` too; None when the policy does not say.
    moves: Optional[int] = None

    @classmethod
    def of_episode(cls, sim: Any, first_start: Any, finish: Any, held: Any, executed: Any, restarts: Any,
                   nominal: Any, moves: Optional[int] = None) -> "JobOutcomes":
        """The outcomes (copied) with the workload's fields read from the episode's simulator
        (:class:`~cluster_env.core.simulator.ClusterSimulator`): the one place both engines build them."""
        f64 = lambda a: np.array(a, dtype=np.float64)   # noqa: E731  (a copy: the sources may be reused)
        return cls(submit=f64(sim.submit), duration=f64(sim.duration), gpus=np.array(sim.gpus, dtype=np.int64),
                   best_speed=f64(sim.best_speed), first_start=f64(first_start), finish=f64(finish),
                   held=f64(held), executed=f64(executed), restarts=np.array(restarts, dtype=np.int64),
                   nominal=f64(nominal), moves=None if moves is None else int(moves))

    @property
    def jct(self) -> np.ndarray:
        """finish - submit (nan for an unfinished job)."""
        return self.finish - self.submit

    @property
    def pending(self) -> np.ndarray:
        """Time waiting for GPUs: JCT - held (the metrics' ``avg_pending_time`` per job)."""
        return self.jct - self.held

    @property
    def overhead(self) -> np.ndarray:
        """Restart overheads paid: held - executed."""
        return self.held - self.executed


def job_outcomes(sim: Any, moves: Optional[int] = None) -> JobOutcomes:
    """The :class:`JobOutcomes` of a :class:`~cluster_env.core.simulator.ClusterSimulator` (or an
    :class:`~cluster_env.core.simulator.EpisodeView`) at the end of its episode (copies: the
    simulator may be reused)."""
    js = sim.jobs
    return JobOutcomes.of_episode(sim, js.first_start, js.finish, js.held, js.executed, js.restarts, js.nominal, moves)


@dataclass
class EpisodeResult:
    """What one episode produced.

    ``record`` is the flat result row (policy, scenario, split, seed, ``env`` (the user's
    environment settings as text: part of the window's identity), ``window`` (the digest of the
    jobs the episode played, :meth:`cluster_env.core.instance.Workload.digest`: seeds that play
    the same jobs count as one window in the confidence intervals), every metric, ``truncated``,
    ``jobs_unfinished``, ``offered_load``, ``pending_window``, steps, return, wall time,
    ``fallbacks`` and ``fallback_share``: :func:`fallback_columns`). ``jct``
    is there for every episode (compiled ones too); ``jobs`` (:class:`JobOutcomes`, per job by job
    id) too; the other arrays when it was recorded.
    """

    record: dict[str, Any]
    jct: Optional[np.ndarray] = None                 # (finished jobs,) completion times, seconds
    series: Optional[np.ndarray] = None              # (samples, 4) SERIES_COLUMNS, one row per instant
    allocations: Optional[list] = None               # [(time, job, [(machine, gpus)] or None)]
    machine_names: tuple[str, ...] = field(default_factory=tuple)
    machine_gpus: Optional[np.ndarray] = None        # (M,)
    total_gpus: int = 0
    machine_types: tuple[str, ...] = field(default_factory=tuple)   # (M,) GPU type name of each machine
    engine: str = "api"                              # "api" (PettingZoo steps) or "compiled" (baselines.engine)
    jobs: Optional[JobOutcomes] = None               # per job, by job id


#: What a policy may require of the environment (its ``env_overrides``): how it is scheduled and
#: what it sees (SJF needs ``clairvoyant=True``, Tiresias ``preemption=True``, a dual agent trained on
#: ``observation="extended"`` that layout), never the world or
#: the workload. Any other key (``jobs_per_episode``, ``all_effects_off``, an effect switch, a
#: world parameter, ``max_time``...) would change what is scored: it is checked against the run's
#: environment instead (:func:`env_mismatch`).
INTERFACE_KEYS = frozenset({"preemption", "clairvoyant", "pending_window", "running_window",
                            "scheduling_tick", "invalid_action", "observation"})

#: Effective values of keys a run does not set, beyond the scenario's configs.
_ENV_DEFAULTS = {"all_effects_off": False, "reward": "jct", "render_mode": None}
_UNSET = object()


class EnvMismatchError(ValueError):
    """A policy was made for another environment than the one its comparison runs on."""


def _effective(key: str, settings: dict, scenario: Any) -> Any:
    """The value of ``key`` in the run's environment: set by the run, else the scenario's."""
    if key in settings:
        return settings[key]
    if scenario is not None:
        if isinstance(scenario, str):
            scenario = cluster_env.get_scenario(scenario)
        if settings.get("workload_csv") or settings.get("cluster_csv"):
            # A user's cluster brings its own world (cluster_env.scenarios.hardware).
            from cluster_env.scenarios import custom_scenario

            scenario = custom_scenario(scenario, **{k: settings.get(k) for k in (
                "workload_csv", "cluster_csv", "workload_columns", "cluster_columns")})
        for part in (scenario.world, scenario.scheduling):
            if key in getattr(type(part), "__dataclass_fields__", {}):
                return getattr(part, key)
        if key in ("jobs_per_episode", "time_scale", "load", "load_measure") and hasattr(scenario, key):
            return getattr(scenario, key)
    return _ENV_DEFAULTS.get(key, _UNSET)


def env_mismatch(policy: Any, env_kwargs: Optional[dict] = None, scenario: Any = None) -> dict:
    """Environment settings ``policy`` was made for (e.g. a checkpoint's training environment)
    that differ from the run's: ``{key: {"policy": value, "run": value}}``; empty when it fits.

    Only keys outside :data:`INTERFACE_KEYS` are compared (those are requirements, applied by
    :func:`env_settings`). ``scenario`` resolves the values the run leaves at the scenario's default.
    A policy's ``scenario`` attribute (a string: the scenario a checkpoint or a priority agent was
    trained on), when it has one, must be the run's scenario: otherwise the result has the key
    ``"scenario"``.
    """
    settings = dict(env_kwargs or {})
    out = {}
    made_for = getattr(policy, "scenario", None)
    run_name = getattr(scenario, "name", scenario)
    if isinstance(made_for, str) and isinstance(run_name, str) and made_for != run_name:
        out["scenario"] = {"policy": made_for, "run": run_name}
    for key, value in dict(getattr(policy, "env_overrides", {}) or {}).items():
        if key in INTERFACE_KEYS:
            continue
        run = _effective(key, settings, scenario)
        if run is _UNSET or run != value:
            out[key] = {"policy": value, "run": "(scenario default)" if run is _UNSET else run}
    return out


def env_settings(policy: Any, env_kwargs: Optional[dict] = None, allow_env_mismatch: bool = False,
                 scenario: Any = None) -> dict:
    """The environment arguments for ``policy``: the user's, plus what the policy requires.

    A policy's requirements are limited to :data:`INTERFACE_KEYS`; a user setting that contradicts
    one (e.g. ``clairvoyant=False`` for SJF) is an error rather than a silent override. Any other
    key of its ``env_overrides`` never changes the environment (every policy of a comparison runs
    on the same one): it must agree with the run's (``env_kwargs``, else ``scenario``'s defaults),
    or :class:`EnvMismatchError` is raised unless ``allow_env_mismatch`` (the policy then runs on
    the run's environment; :func:`env_mismatch` says what differs, for the results).
    """
    settings = dict(env_kwargs or {})
    name = getattr(policy, "name", type(policy).__name__)
    for key, value in dict(getattr(policy, "env_overrides", {}) or {}).items():
        if key not in INTERFACE_KEYS:
            continue
        if key in settings and settings[key] != value:
            raise ValueError(f"policy {name!r} needs {key}={value!r} but env_kwargs sets {key}={settings[key]!r}")
        settings[key] = value
    mismatch = env_mismatch(policy, env_kwargs, scenario)
    if mismatch and not allow_env_mismatch:
        what = ", ".join(f"{k}={v['policy']!r} (this run: {v['run']!r})" for k, v in mismatch.items())
        fix = (f"run it on its scenario (--scenario {mismatch['scenario']['policy']})" if "scenario" in mismatch
               else "set it for the whole run (--env KEY=VALUE / env_kwargs)")
        raise EnvMismatchError(
            f"policy {name!r} was made for another environment: {what}. Every policy of a comparison "
            f"runs on the same environment: {fix}, or "
            f"score the policy on this run's environment anyway with cluster-bench run --allow-env-mismatch "
            f"(allow_env_mismatch=True in Python; recorded in results.json)")
    return settings


def env_label(env_kwargs: Optional[dict] = None) -> str:
    """The user's environment settings as canonical text (``"load=0.9,preemption=True"``; ``""``
    for none): records with the same scenario, split, seed and label ran on the same window."""
    return ",".join(f"{k}={v!r}" for k, v in sorted(dict(env_kwargs or {}).items()))


def policy_name(policy: Any) -> str:
    return str(getattr(policy, "name", type(policy).__name__))


def run_episode(policy: Any, scenario: "str | Scenario", split: str, seed: int, env_kwargs: Optional[dict] = None,
                record: bool = False, env: Any = None, allow_env_mismatch: bool = False) -> EpisodeResult:
    """Run ``policy`` for one episode of ``scenario``/``split`` with ``seed``.

    Args:
        policy: any object with ``act(observations, infos)`` and ``reset(seed)``.
        scenario, split, seed: the episode (a scenario name or object; the seed drives both the
            environment and the policy).
        env_kwargs: environment overrides (merged with the policy's ``env_overrides``).
        record: also keep completion times, the utilisation/queue series and the allocations.
        env: an environment to reuse (must have been built with the same settings).
        allow_env_mismatch: score a policy made for another environment on this one anyway
            (see :func:`env_settings`).
    """
    if not callable(getattr(policy, "act", None)) or not callable(getattr(policy, "reset", None)):
        raise TypeError(f"a policy needs act(observations, infos) and reset(seed); got {policy!r}")
    if env is None:
        env = cluster_env.parallel_env(scenario, split=split, **env_settings(policy, env_kwargs, allow_env_mismatch,
                                                                            scenario))
    check_fits(policy, env)
    base = getattr(env, "unwrapped", env)
    bound_steps(base)
    t0 = time.perf_counter()
    policy.reset(seed)
    obs, infos = env.reset(seed=seed)
    if record:
        # The logs live in the Python simulator (reading sim hands a compiled episode to it).
        # Before this point nothing has run (reset only advances to the first decision), so the
        # event log misses no busy GPU-second.
        sim = base.sim
        sim.allocation_log = []
        sim.event_log = []
    total, steps, truncated = 0.0, 0, False
    while env.agents:
        obs, rewards, _, truncations, infos = env.step(policy.act(obs, infos))
        total += rewards["orderer"]
        steps += 1
        truncated = bool(truncations["orderer"])
    wall = time.perf_counter() - t0
    metrics = infos["orderer"]["metrics"]
    view = base.episode_view()           # from whichever engine ran the episode (no hand-off)
    # A user's CSV files name the scenario: "philly-v0+my_jobs.csv" on a philly-v0 base.
    name = getattr(scenario, "name", scenario)
    if any((env_kwargs or {}).get(k) for k in ("workload_csv", "cluster_csv")):
        name = getattr(getattr(base, "scenario", None), "name", None) or name
    row: dict[str, Any] = {"policy": policy_name(policy), "scenario": name,
                           "split": split, "seed": int(seed), "env": env_label(env_kwargs),
                           "window": view.workload.digest()}
    row.update({k: metrics[k] for k in METRIC_KEYS})
    row.update({k: metrics[k] for k in OBJECTIVE_KEYS if k in metrics})   # a workload with objectives
    row.update({"truncated": truncated, "jobs_unfinished": int(view.num_jobs) - int(metrics["jobs_finished"]),
                "offered_load": float(getattr(base, "offered_load", float("nan"))),
                "pending_window": _pending_window(base), "world": world_line(base),
                "return": total, "steps": steps, "wall_s": wall})
    row.update(fallback_columns(int(infos["orderer"].get("fallbacks", 0)), steps))
    result = EpisodeResult(record=row)
    done = ~np.isnan(view.jobs.finish)
    result.jct = (view.jobs.finish - view.submit)[done]      # every episode: the JCT CDF pools all seeds
    result.jobs = job_outcomes(view, _moves(policy))
    if record:
        result.series = _series(sim)
        result.allocations = sim.allocation_log
        result.machine_names = tuple(base.cluster.machine_names)
        result.machine_gpus = np.asarray(sim.machine_gpus).copy()
        result.machine_types = tuple(base.cluster.gpu_type_names[int(t)] for t in sim.machine_type)
        result.total_gpus = int(sim.total_gpus)
    return result


def _moves(policy: Any) -> Optional[int]:
    """The moves a policy's migration rule made in its last episode (its orderer's ``migrations``
    counter, :class:`baselines.migrate.MigratingLAS`), 0 for a policy without that rule that says
    how it orders, None when it cannot be told."""
    orderer = getattr(policy, "orderer", None)
    count = getattr(orderer, "migrations", None)
    if count is not None:
        return int(count)
    return 0 if orderer is not None and not hasattr(orderer, "movable") else None


def world_line(env: Any) -> str:
    """The one-line world summary of ``env`` (a parallel env; ``cluster_env.world.summary``), or
    ``""`` for an environment that does not give one. Metadata: not part of the window's identity
    (``baselines.harness.stats.window_key``)."""
    summary = getattr(env, "world_summary", None)
    return summary().line() if callable(summary) else ""


def fallback_columns(fallbacks: int, steps: int) -> dict[str, Any]:
    """A record's ``fallbacks`` (decisions the fallback rule played instead of a policy's forbidden
    action, ``invalid_action="fallback"``) and ``fallback_share`` (of the episode's decisions, its
    steps; 0 for an episode without steps)."""
    return {"fallbacks": int(fallbacks), "fallback_share": fallbacks / steps if steps else 0.0}


def bound_steps(env: Any) -> None:
    """Give ``env`` (a parallel env) the harness's step bound when it has none: every scored
    episode ends, whatever the policy does (one that repeats an ignored forbidden action under
    ``invalid_action="noop"`` would otherwise never end). The bound is the single-agent views' own
    default, ``DEFAULT_STEPS_PER_JOB`` (1000) steps per job of the episode, far above what a policy
    that follows the masks needs; an episode cut there is recorded ``truncated`` with its unfinished
    jobs, flagged ``TRUNCATED`` in tables and left out of the paired ratios."""
    from dataclasses import replace


    sched = getattr(env, "sched", None)
    if sched is not None and sched.max_steps is None:
        env.sched = replace(sched, max_steps=env.default_max_steps())


def check_fits(policy: Any, env: Any) -> None:
    """Refuse, before its first step, a policy built for other spaces than ``env``'s: a policy with
    ``check_env(env)`` (e.g. :class:`cluster_env.wrappers.FlatViewPolicy`, a trained flat-view
    agent) raises :class:`EnvMismatchError` naming both shapes and the fix."""
    check = getattr(policy, "check_env", None)
    if callable(check):
        try:
            check(getattr(env, "unwrapped", env))
        except ValueError as exc:
            raise EnvMismatchError(str(exc)) from None


def has_env_check(policy: Any) -> bool:
    """Whether :func:`check_fits` has anything to check for ``policy``: its own ``check_env``, or
    for a policy of two halves (:class:`baselines.policy.ComposedPolicy`, whose ``check_env`` asks
    its halves) a half's. Without one, no environment needs building to check the policy."""
    from baselines.policy import ComposedPolicy

    if isinstance(policy, ComposedPolicy) and type(policy).check_env is ComposedPolicy.check_env:
        return any(callable(getattr(half, "check_env", None)) for half in (policy.orderer, policy.placer))
    return callable(getattr(policy, "check_env", None))


def _pending_window(env: Any) -> int:
    """K, the pending jobs a policy sees (-1 when the environment does not say)."""
    sched = getattr(env, "sched", None)
    return int(getattr(sched, "pending_window", -1))


def _series(sim: Any) -> np.ndarray:
    """The simulator's event log plus the final state, one row per instant (the last state of an
    instant wins): a step curve whose time integral of busy GPUs is the metrics' busy GPU-seconds."""
    rows = list(sim.event_log or [])
    rows.append((sim.now, sim.total_gpus - sim.free_total, len(sim.pending), sim.num_running))
    series = np.array(rows, dtype=np.float64).reshape(-1, len(SERIES_COLUMNS))
    last_of_instant = np.append(series[1:, 0] != series[:-1, 0], True)
    return series[last_of_instant]
