"""Evolution strategies for the priority-mode agents (:mod:`dual_agent.priority`): the ordering
agent's score, the residual placer's, or both (``learn``).

Why not the policy gradient of :mod:`dual_agent.paper.rloo` here: on Philly a window's average JCT moves
by 20-25% (standard deviation of the log) under small changes of the ordering, so a per-decision
credit signal drowns; and the priority agent is deterministic and has a handful of parameters.
Antithetic ES (Salimans et al., 2017) with *common random numbers* fits that: each iteration
draws ``windows`` training windows and ``pairs`` directions ``eps``; every ``theta +- sigma eps``
plays the same windows (same jobs, same world), and the gradient estimate of ``-log(avg JCT)`` is

    g = sum_p mean_w [log J(theta - sigma eps_p, w) - log J(theta + sigma eps_p, w)] eps_p / (2 sigma P)

a same-window difference: the windows' own load cancels in each pair (``pairing="same-window"``,
the default). Two ablations of that baseline: ``"independent"`` gives every episode its own window
(the antithetic difference then carries the window-to-window variance), and ``"reference"`` does
too but subtracts from each episode's log cost the untrained agent's (LAS's) on the same window: an
input-dependent baseline that knows the window's future arrivals, the exact value of the
training-only critic of Mao et al. ("Variance Reduction for Reinforcement Learning in
Input-Driven Environments", ICLR 2019), paid for with one reference episode per episode. Adam
takes the step. Every ``eval_every`` iterations the current weights play ``eval_seeds`` full validation windows and are
compared, window by window, with the untrained agent (LAS with the heuristic placer); the best
validation ratio is kept (``best.priority.json``), the last weights too (``last.priority.json``),
with ``log.csv`` one row per iteration. The validation windows are matched to the test period's
contention by default (``validation="matched"``, :mod:`dual_agent.validation`; ``"split"``: the
validation split's seeds). A finished run scores the best weights against the untrained agent on
``test_windows`` test windows (default 100, the number a claim rests on), paired, with the 95%
bootstrap interval of the geometric mean and the win rate.

Episodes run in ``workers`` processes (fork); the figures are the same for any number of workers
(each episode is deterministic given its weights and window). With ``engine="compiled"`` (the
default for a linear score where numba is available) an episode is one call of the baselines'
compiled loop (:func:`baselines.engine.run_weighted_las_episode`: about 0.13 s of CPU for a
1,000-job Philly window against 2-45 s through the PettingZoo API, with the same records on the windows
tested, tenant statistics included), so an iteration can afford tens of windows.
``engine="api"`` plays hidden layers too. ``tenant_features=False`` keeps the three tenant weights
at zero (the ablation without the tenants' finished-duration statistics). ``migrate`` (a threshold
> 1) trains the agent under ``las-migrate``'s migration rule
(:class:`dual_agent.priority.agent.MigratingLearnedOrderer`): the untrained agent is then
``las-migrate`` itself, the reference every validation and the test report compare with.
"""
from __future__ import annotations

import csv
import math
import os
import signal
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, fields
from multiprocessing import get_context
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np

from baselines.learned_key import TENANT_FEATURES
from baselines.startup import is_interrupt
from cluster_env.scenarios.base import check_train_range
from dual_agent.priority.agent import (MAX_HIDDEN_UNITS, PriorityAgentPolicy, PriorityAgentSpec, PriorityModel, SUFFIX,
                                       check_migrate, load_priority_agent, save_priority_agent)
from dual_agent.validation import VALIDATION_MODES, ValidationSet, validation_set


#: Values of ``ESConfig.pairing``.
PAIRINGS = ("same-window", "independent", "reference")
#: The most episode processes of a run (each a simulator; beyond the cores they only cost memory).
MAX_WORKERS = 256
#: Values of ``ESConfig.learn``.
LEARN = ("orderer", "placer", "both")
#: Episode metrics ES may minimise (``ESConfig.objective``): average JCT (the default) and the
#: service objectives of docs/objectives.md. A metric where higher is better (in [0, 1]) is turned
#: into a shortfall, see :func:`episode_objective_cost`.
OBJECTIVES = ("avg_jct", "deadline_attainment", "hp_avg_jct", "be_avg_jct", "tenant_max_slowdown",
              "ftf_max_rho", "fairness", "total_fee")
#: Weight of the average JCT, per hour, added to the shortfall ``1 - metric`` of a higher-is-better
#: objective: one hour of average JCT weighs as much as 1% of deadline jobs missed. It keeps the
#: cost positive (ES compares log costs) and breaks ties between orders that miss the same jobs.
SHORTFALL_JCT_WEIGHT_PER_HOUR = 0.01


def episode_objective_cost(record: dict, objective: str = "avg_jct") -> float:
    """The cost ES minimises for one episode's ``record`` (positive; ES compares its log).

    A lower-is-better objective is its own cost (``avg_jct``, ``hp_avg_jct``, ``total_fee``, ...);
    a higher-is-better one (``deadline_attainment``, ``fairness``, in [0, 1]) costs
    ``1 - metric + SHORTFALL_JCT_WEIGHT_PER_HOUR x avg_jct / 3600``. ``RuntimeError`` naming the
    metric when the cost is not a positive number (e.g. a window without deadline jobs).
    """
    from baselines.harness.stats import lower_is_better

    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {list(OBJECTIVES)}, got {objective!r}")
    value = record.get(objective)
    if value is None or not math.isfinite(float(value)):
        raise RuntimeError(f"episode {record.get('scenario')}/{record.get('split')} seed {record.get('seed')}: "
                           f"no finite {objective} (is it a scenario with that objective? docs/objectives.md)")
    value = float(value)
    if lower_is_better(objective):
        cost = value
    else:
        cost = 1.0 - value + SHORTFALL_JCT_WEIGHT_PER_HOUR * float(record["avg_jct"]) / 3600.0
    if not (math.isfinite(cost) and cost > 0):
        raise RuntimeError(f"episode {record.get('scenario')}/{record.get('split')} seed {record.get('seed')}: "
                           f"{objective} cost {cost!r} is not a positive number")
    return cost


class SettingError(ValueError):
    """A bad :class:`ESConfig` setting. ``field`` names it and ``problem`` says what is wrong (the
    message is the two joined), so that the command line can name the flag (``--windows``) and a
    resume file's check the file's field instead."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}{problem}")
        self.field, self.problem = field, problem

    def named(self, name: str) -> str:
        """The message with ``name`` for the setting."""
        return f"{name}{self.problem}"


#: Memory that one batch of episode tasks may take (an iteration's, the validation's, the test
#: report's): each task carries its own copy of the weights (8 bytes each) and, on the process
#: backend, a future and its work item (about 2.5 KiB measured; 4 KiB reserved).
MAX_BATCH_BYTES = 2**30
TASK_BYTES = 4096


def max_batch_episodes(hidden: int) -> int:
    """The most episodes one batch may hold for an agent of ``hidden`` units: MAX_BATCH_BYTES /
    (TASK_BYTES + 8 x weights), e.g. 255,166 for the linear agent (14 weights) and 2,944 at
    4,096 units (45,070 weights); the defaults (6 pairs x 2 signs x 16 windows, 100 validation
    windows) sit far below both."""
    weights = PriorityModel.placer_slice(hidden).stop
    return MAX_BATCH_BYTES // (TASK_BYTES + 8 * weights)


def check_batch_sizes(config: "ESConfig") -> None:
    """Refuse sizes whose episode batches would not fit :data:`MAX_BATCH_BYTES` (before anything
    is allocated): ``pairs`` and ``windows`` (an iteration plays 2 x pairs x windows episodes,
    twice that with ``pairing="reference"``), ``eval_seeds`` and ``test_windows`` (2 episodes a
    window). The error names the setting whose value is out of bounds."""
    limit = max_batch_episodes(config.hidden)
    per_window = 2 * (2 if config.pairing == "reference" else 1)
    why = (f"a batch of episodes may hold {limit:,} at hidden={config.hidden} (each task carries its weights; "
           "docs/reference.md, Guarantees)")
    # The larger of pairs and windows is the one to name (both are >= 1 here).
    if per_window * config.pairs * config.windows > limit:
        name = "windows" if config.windows >= config.pairs else "pairs"
        raise SettingError(name, f"={getattr(config, name):,} is above its bound: an iteration would play "
                                 f"{per_window * config.pairs * config.windows:,} episodes ({per_window} x pairs "
                                 f"{config.pairs:,} x windows {config.windows:,}); {why}")
    for name, per in (("eval_seeds", 1), ("test_windows", 2)):
        if per * getattr(config, name) > limit:
            raise SettingError(name, f"={getattr(config, name):,} is above its bound {limit // per:,}: {why}")


@dataclass
class ESConfig:
    """Settings of :func:`train_priority` (defaults: what the shipped runs used unless noted)."""

    scenario: str = "philly-hetero-v1"
    placer: str = "fastest"           # the heuristic placer the orderer is composed with
    hidden: int = 0                   # 0: linear score; H: plus a tanh layer of H units
    sigma: float = 0.3                # perturbation scale (parameters are about unit scale)
    lr: float = 0.1                   # Adam step
    pairs: int = 6                    # antithetic directions per iteration
    windows: int = 16                 # training windows per iteration (every direction plays all)
    # Training windows' jobs; None: the scenario's full windows. Short windows mislead: on Philly
    # the queue builds up over a window, and 150-400-job windows have few or no preemptions.
    jobs_per_episode: Optional[int] = None
    iterations: int = 40
    max_minutes: Optional[float] = None     # stop after this wall time (checked between iterations)
    eval_every: int = 5
    eval_seeds: int = 100             # validation windows (how many; which: ``validation``)
    eval_jobs_per_episode: Optional[int] = None   # validation windows' jobs (None: full windows)
    # Offered load of the training windows (the environment's ``load``; None: the scenario's).
    # Validation always runs at the scenario's own load.
    train_load: Optional[float] = None
    # Where in the train split the training windows lie: (a, b) fractions of it (the environment's
    # ``train_range``); None: all of it. A trace whose jobs drift (Philly's later periods hold more
    # multi-GPU and shorter jobs) is better learned from its recent past, e.g. (0.8, 1).
    train_range: Optional[tuple] = None
    workers: int = 2
    # Where the episodes run: "process" (a fork pool of ``workers`` on this machine) or "ray" (Ray
    # tasks: a local instance of ``workers`` CPUs, or the cluster at ``ray_address``). Every episode
    # is a pure function of its task, so the weights are the same on any backend and worker count.
    backend: str = "process"
    ray_address: Optional[str] = None
    seed: int = 0
    out: str = ""                     # run folder (default runs/priority-<scenario>)
    # "compiled": episodes in the compiled engine (linear score); "api": through the PettingZoo
    # API (hidden layers too); "auto": compiled when hidden == 0 and numba runs here, else api.
    engine: str = "auto"
    # False: the tenant statistics' weights stay at zero (ablation; the hetero agent shipped at
    # stop 22 was trained so, when the compiled engine had no tenant statistics).
    tenant_features: bool = True
    # How the episodes of a direction are compared (module docstring): "same-window" (default),
    # "independent" or "reference" (ablations of the same-window baseline).
    pairing: str = "same-window"
    # Which agents learn: "orderer" (the placer is the heuristic ``placer``), "placer" (the
    # orderer is LAS; the residual placer learns on top of ``placer``) or "both".
    learn: str = "orderer"
    # Validation windows (dual_agent.validation): "matched" to the test period's contention by
    # LAS's preemptions per window (default), or "split" (the validation split's seeds 0 ..
    # eval_seeds - 1: what runs made before this option used; their saved settings resume so).
    validation: str = "matched"
    # Test windows (seeds 0 .. test_windows - 1) the finished run's best weights are scored on,
    # paired with the untrained agent; 0: none.
    test_windows: int = 100
    # las-migrate's threshold (> 1): the migration rule on top of the learned key, so the untrained
    # agent is las-migrate; None (default): no migration, the untrained agent is LAS.
    migrate: Optional[float] = None
    # The episode metric ES minimises (OBJECTIVES; episode_objective_cost orients it): "avg_jct"
    # (default), or a service objective of docs/objectives.md (those scenarios need engine="api").
    objective: str = "avg_jct"
    # A .priority.json whose weights the run starts from (fine-tuning a shipped agent); None: zeros.
    # The untrained agent stays the reference of every validation; iteration 0 scores the start,
    # and best.priority.json is replaced only by weights that validate better than it.
    init: Optional[str] = None

    def __post_init__(self) -> None:
        # Every error names the setting (SettingError.field): the CLI shows it as its flag, a
        # resume file's check as the file's field. The one check for both.
        for name in ("pairs", "windows", "iterations", "eval_every", "eval_seeds", "workers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SettingError(name, f" must be an integer >= 1, got {value!r}")
        hidden = self.hidden          # checked before a run folder is reserved, in the agent's own words
        if isinstance(hidden, bool) or not isinstance(hidden, int) or not 0 <= hidden <= MAX_HIDDEN_UNITS:
            raise SettingError("hidden", f" must be an integer in 0 .. {MAX_HIDDEN_UNITS:,}, got {self.hidden!r}")
        if self.workers > MAX_WORKERS:
            raise SettingError("workers", f"={self.workers:,} is above its bound {MAX_WORKERS:,} (episode processes; "
                               "docs/reference.md, Guarantees)")
        if isinstance(self.test_windows, bool) or not isinstance(self.test_windows, int) or self.test_windows < 0:
            raise SettingError("test_windows", f" must be an integer >= 0, got {self.test_windows!r}")
        if self.pairing not in PAIRINGS:
            raise SettingError("pairing", f" must be one of {list(PAIRINGS)}, got {self.pairing!r}")
        check_batch_sizes(self)
        for name in ("sigma", "lr"):
            value = getattr(self, name)
            if isinstance(value, bool) or not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise SettingError(name, f" must be a positive number, got {value!r}")
        for name in ("jobs_per_episode", "eval_jobs_per_episode"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise SettingError(name, f" must be an integer >= 1 or None, got {value!r}")
        if self.backend not in ES_BACKENDS:
            raise SettingError("backend", f" must be one of {ES_BACKENDS}, got {self.backend!r}")
        if self.engine not in ("auto", "compiled", "api"):
            raise SettingError("engine", f" must be 'auto', 'compiled' or 'api', got {self.engine!r}")
        if self.train_load is not None and (isinstance(self.train_load, bool) or not (
                isinstance(self.train_load, (int, float)) and math.isfinite(self.train_load) and self.train_load > 0)):
            raise SettingError("train_load", f" must be a positive number or None, got {self.train_load!r}")
        if self.train_range is not None:
            try:
                check_train_range(self.train_range)
            except ValueError as exc:
                text = str(exc)
                raise SettingError("train_range", text[len("train_range"):] if text.startswith("train_range")
                                   else f": {text}") from None
        minutes = self.max_minutes
        if minutes is not None and (isinstance(minutes, bool) or not (
                isinstance(minutes, (int, float)) and math.isfinite(minutes) and minutes > 0)):
            raise SettingError("max_minutes", f" must be a positive number or None, got {self.max_minutes!r}")
        if self.learn not in LEARN:
            raise SettingError("learn", f" must be one of {list(LEARN)}, got {self.learn!r}")
        if self.validation not in VALIDATION_MODES:
            raise SettingError("validation", f" must be one of {list(VALIDATION_MODES)}, got {self.validation!r}")
        if not isinstance(self.tenant_features, bool):
            raise SettingError("tenant_features", f" must be True or False, got {self.tenant_features!r}")
        if self.engine == "compiled" and self.hidden:
            raise SettingError("engine", "='compiled' runs a linear score only (hidden=0); use engine='api'")
        try:
            check_migrate(self.migrate)
        except ValueError as exc:
            raise SettingError("migrate", str(exc)[len("migrate"):]) from None
        if self.objective not in OBJECTIVES:
            raise SettingError("objective", f" must be one of {list(OBJECTIVES)}, got {self.objective!r}")
        for name in ("scenario", "placer", "out"):
            if not isinstance(getattr(self, name), str):
                raise SettingError(name, f" must be a string, got {getattr(self, name)!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise SettingError("seed", f" must be an integer >= 0, got {self.seed!r}")
        if self.init is not None and not isinstance(self.init, str):
            raise SettingError("init", f" must be the path of a .priority.json or None, got {self.init!r}")
        if not self.out:
            self.out = f"runs/priority-{self.scenario}"

    def untrained_name(self) -> str:
        """The baseline the untrained agent is: ``las+<placer>``, or with ``migrate``
        ``las-migrate<x>+<placer>`` (``las-migrate`` for x = 1.5 and the fastest placer)."""
        if self.migrate is None:
            return f"las+{self.placer}"
        from baselines.migrate import MigratingLAS

        name = MigratingLAS(self.migrate).name
        return name if (name, self.placer) == ("las-migrate", "fastest") else f"{name}+{self.placer}"

    def resolved_engine(self) -> str:
        """The engine the episodes run in ("compiled" or "api")."""
        if self.engine != "auto":
            return self.engine
        from baselines import engine as compiled

        return "compiled" if self.hidden == 0 and compiled.available() else "api"


@dataclass
class ESResult:
    """What :func:`train_priority` returns."""

    best: Optional[PriorityAgentPolicy]  # the weights with the best validation ratio (iteration 0: LAS); None:
                                         # interrupted before anything was saved
    best_ratio: float                  # its geometric-mean ratio of the objective cost (avg JCT by default) to the untrained agent
    last: Optional[PriorityAgentPolicy]
    iterations: int
    wall_s: float
    run_dir: Path
    interrupted: bool = False          # Ctrl-C ended the run (the files hold the last finished iteration)
    test: Optional[dict] = None        # the best weights against the untrained agent on test windows


class Adam:
    """Adam on a flat parameter vector (ascent)."""

    def __init__(self, size: int, lr: float, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8) -> None:
        self.lr, self.b1, self.b2, self.eps = lr, beta1, beta2, eps
        self.m, self.v, self.t = np.zeros(size), np.zeros(size), 0

    def step(self, grad: np.ndarray) -> np.ndarray:
        """The update to add to the parameters for the ascent direction ``grad``."""
        self.t += 1
        self.m = self.b1 * self.m + (1 - self.b1) * grad
        self.v = self.b2 * self.v + (1 - self.b2) * grad * grad
        m_hat = self.m / (1 - self.b1 ** self.t)
        v_hat = self.v / (1 - self.b2 ** self.t)
        return self.lr * m_hat / (np.sqrt(v_hat) + self.eps)


def antithetic_gradient(log_cost_plus: np.ndarray, log_cost_minus: np.ndarray, eps: np.ndarray,
                        sigma: float) -> np.ndarray:
    """ES estimate of the gradient of ``-log cost`` from paired episodes.

    Args:
        log_cost_plus: (P, W) log cost of ``theta + sigma eps_p`` on window ``w``.
        log_cost_minus: (P, W) the same for ``theta - sigma eps_p`` (same windows).
        eps: (P, D) the directions.
        sigma: the perturbation scale.
    """
    diff = (log_cost_minus - log_cost_plus).mean(axis=1)          # (P,): improvement along +eps
    return diff @ eps / (2.0 * sigma * len(eps))


# ---------------------------------------------------------------- episodes (worker side)
def _episode_cost(task: tuple) -> float:
    """The objective cost of one episode (:func:`episode_objective_cost`): (flat weights, hidden,
    spec fields, split, seed, env_kwargs, engine, migrate[, objective]); avg JCT without objective."""
    theta, hidden, scenario, placer, split, seed, env_kwargs, engine, migrate = task[:9]
    objective = task[9] if len(task) > 9 else "avg_jct"
    if engine == "compiled":
        from baselines.engine import run_weighted_las_episode

        model = PriorityModel.zeros().with_flat(theta)
        record = run_weighted_las_episode(model.linear, placer, scenario, split, int(seed), env_kwargs,
                                          placer_weights=model.placer, migrate=migrate).record
    else:
        from baselines.harness.episode import run_episode

        model = PriorityModel.zeros(hidden).with_flat(theta)
        policy = PriorityAgentPolicy(model, PriorityAgentSpec(scenario, placer, migrate=migrate))
        record = run_episode(policy, scenario, split, int(seed), env_kwargs=env_kwargs).record
    return episode_objective_cost({"scenario": scenario, "split": split, "seed": seed, **record}, objective)


#: Values of ``ESConfig.backend``.
ES_BACKENDS = ("process", "ray")


class _Runner:
    """Maps episode tasks to costs, in order: in-process for 1 worker, else a fork pool of
    ``workers`` processes, or Ray tasks (``backend="ray"``; ``address``: an existing cluster)."""

    def __init__(self, workers: int, backend: str = "process", address: Optional[str] = None) -> None:
        self.pool = None
        self.ray = None
        self._own_ray = False
        if backend == "ray":
            self._start_ray(workers, address)
        elif workers > 1:
            os.environ.setdefault("OMP_NUM_THREADS", "1")
            self.pool = ProcessPoolExecutor(max_workers=workers, mp_context=get_context("fork"),
                                            initializer=_ignore_sigint)

    def _start_ray(self, workers: int, address: Optional[str]) -> None:
        try:
            import ray
        except ImportError as exc:
            from cluster_env.extras import missing_extra

            raise missing_extra("ray", "backend='ray'", exc) from None
        if not ray.is_initialized():
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
            self._own_ray = True
        self.ray = ray
        self._remote = ray.remote(num_cpus=1)(_episode_cost)

    def costs(self, tasks: Sequence[tuple]) -> np.ndarray:
        if self.ray is not None:
            return np.array(self.ray.get([self._remote.remote(t) for t in tasks]))
        if self.pool is None:
            return np.array([_episode_cost(t) for t in tasks])
        return np.array(list(self.pool.map(_episode_cost, tasks, chunksize=1)))

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)     # after Ctrl-C: no new episode starts
        if self._own_ray:
            self.ray.shutdown()


def _ignore_sigint() -> None:
    """Workers leave Ctrl-C to the parent, which stops them (no traceback from each worker)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


# ---------------------------------------------------------------- training
def _jsonable_row(row: dict) -> dict:
    return {k: (float(v) if isinstance(v, (float, np.floating)) else v) for k, v in row.items()}


def load_es_state(path: "str | Path") -> tuple[ESConfig, dict]:
    """The settings and the ES state (weights, Adam, the random generator, the best so far, the
    log) that a run stored in its ``last.priority.json``, to continue it with
    :func:`train_priority` (``state=``); ``ValueError`` naming the file when it holds none."""
    training = load_priority_agent(path).spec.training
    state, config = training.get("resume"), training.get("config")
    if not isinstance(state, dict) or not isinstance(config, dict):
        raise ValueError(f"{path}: no training state to resume from (resume needs the last.priority.json "
                         "of a train-priority run made by this version)")
    # Runs saved before these settings existed validated on the validation split and scored no test.
    config = {"validation": "split", "test_windows": 0, **config}
    known = [f.name for f in fields(ESConfig)]
    unknown = sorted(set(config) - set(known))
    if unknown:
        raise ValueError(f"{path}: field training.config.{unknown[0]} is not a setting of train-priority "
                         f"(settings: {', '.join(known)})")
    try:
        settings = ESConfig(**config)
    except SettingError as exc:
        raise ValueError(f"{path}: field {exc.named('training.config.' + exc.field)}") from None
    return settings, check_es_state(path, state, settings)


def check_es_state(path: "str | Path", state: dict, config: ESConfig) -> dict:
    """``state`` (a ``last.priority.json``'s ``training.resume``) if every field has the type and
    size the run of ``config`` gives it; else a ``ValueError`` naming the file and the field."""
    size = PriorityModel.placer_slice(config.hidden).stop

    def bad(field: str, what: str, value: object) -> ValueError:
        shown = repr(value) if len(repr(value)) <= 60 else f"{type(value).__name__} of {len(repr(value)):,} characters"
        return ValueError(f"{path}: field training.resume.{field} must be {what}, got {shown}")

    def integer(field: str, value: object, low: int = 0) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise bad(field, f"an integer >= {low}", value)
        return value

    def numbers(field: str, value: object, n: Optional[int], positive: bool = False) -> None:
        ok = (isinstance(value, list) and (n is None or len(value) == n)
              and all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
                      and (x > 0 or not positive) for x in value))
        if not ok:
            what = f"{'positive' if positive else 'finite'} numbers" + (f", {n} of them" if n is not None else "")
            raise bad(field, f"a list of {what}", value)

    def number(field: str, value: object, positive: bool = False) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or (
                value <= 0 if positive else value < 0):
            raise bad(field, "a positive number" if positive else "a number >= 0", value)

    def section(field: str, keys: Sequence[str]) -> dict:
        value = state.get(field) if field else state
        if not isinstance(value, dict):
            raise bad(field, "an object", value)
        missing = [k for k in keys if k not in value]
        if missing:
            raise ValueError(f"{path}: field training.resume.{field + '.' if field else ''}{missing[0]} is missing")
        return value

    section("", ("iteration", "theta", "rng", "adam", "best", "las_val", "episodes", "wall_s", "log"))
    if integer("iteration", state["iteration"]) > config.iterations:
        raise bad("iteration", f"at most the run's iterations ({config.iterations})", state["iteration"])
    numbers("theta", state["theta"], size)
    rng = section("rng", ("bit_generator", "state"))
    try:
        np.random.default_rng().bit_generator.state = rng
    except (TypeError, ValueError, KeyError, OverflowError):
        raise bad("rng", "the state of numpy's PCG64 generator", rng) from None
    adam = section("adam", ("m", "v", "t"))
    numbers("adam.m", adam["m"], size)
    numbers("adam.v", adam["v"], size)
    integer("adam.t", adam["t"])
    best = section("best", ("theta", "ratio", "iteration"))
    numbers("best.theta", best["theta"], size)
    number("best.ratio", best["ratio"], positive=True)
    integer("best.iteration", best["iteration"])
    validation = state.get("validation")
    if validation is not None:
        windows = section("validation", ("windows",))["windows"]
        if not (isinstance(windows, list) and 0 < len(windows) <= config.eval_seeds
                and all(isinstance(w, list) and len(w) == 2 and isinstance(w[0], str)
                        and isinstance(w[1], int) and not isinstance(w[1], bool) and w[1] >= 0 for w in windows)):
            raise bad("validation.windows", f"a list of 1 to {config.eval_seeds} [split, seed] pairs", windows)
        n_val = len(windows)
    else:
        n_val = config.eval_seeds
    numbers("las_val", state["las_val"], n_val, positive=True)
    integer("episodes", state["episodes"])
    number("wall_s", state["wall_s"])
    log = state["log"]
    if not (isinstance(log, list) and len(log) <= state["iteration"] + 1 and all(isinstance(r, dict) for r in log)):
        raise bad("log", f"a list of at most {state['iteration'] + 1} rows (objects)", log)
    return state


def initial_weights(config: ESConfig) -> np.ndarray:
    """The flat weights ``config.init`` names, checked to mean the same agent as the run trains: the
    same hidden units, placer and migration rule (another scenario's agent may start a run)."""
    agent = load_priority_agent(config.init)
    mismatched = [f"{name} {mine!r} (the run: {theirs!r})" for name, mine, theirs in (
        ("hidden", agent.model.hidden, config.hidden), ("placer", agent.spec.placer, config.placer),
        ("migrate", agent.spec.migrate, config.migrate)) if mine != theirs]
    if mismatched:
        raise ValueError(f"{config.init}: cannot start this run from it: " + ", ".join(mismatched))
    return agent.model.flat()


def train_priority(config: ESConfig, log: Callable[[str], None] = print,
                   command: Optional[str] = None, state: Optional[dict] = None) -> ESResult:
    """Train the priority-mode ordering agent with antithetic ES; see the module docstring.

    Files (``config.out``): ``best.priority.json`` whenever validation improves (iteration 0: the
    untrained agent), ``last.priority.json`` after every iteration, with the ES state, *then* the
    iteration's row of ``log.csv``, each written atomically with Ctrl-C held off. ``state`` (from
    :func:`load_es_state`) continues that run: the same weights as a run never stopped. Ctrl-C
    ends the run at the last finished iteration (``ESResult.interrupted``).
    """
    from baselines.harness.files import atomic_write, open_append, sigint_deferred

    start = time.monotonic()
    init_theta = initial_weights(config) if config.init is not None and state is None else None
    run_dir = Path(config.out)
    run_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(config.seed)
    model0 = PriorityModel.zeros(config.hidden, seed=config.seed)
    theta = model0.flat()
    hidden = config.hidden
    train_range = None if config.train_range is None else check_train_range(config.train_range)
    train_kw = {k: v for k, v in (("jobs_per_episode", config.jobs_per_episode), ("load", config.train_load),
                                  ("train_range", train_range)) if v is not None} or None
    eval_kw = {"jobs_per_episode": config.eval_jobs_per_episode} if config.eval_jobs_per_episode else None
    adam = Adam(theta.size, config.lr)
    engine = config.resolved_engine()
    # Coordinates ES may move: the learning agents' weights, without the tenant ones in that ablation.
    # The placer's block is drawn after the orderer's, and only when it learns, so that an
    # orderer-only run draws the numbers it drew before the residual placer existed.
    placer_block = PriorityModel.placer_slice(hidden)
    n_orderer = placer_block.start
    free = np.ones(theta.size)
    if config.learn == "placer":
        free[:n_orderer] = 0.0
    if not config.tenant_features:
        free[list(TENANT_FEATURES)] = 0.0     # frozen by tenant_features=False

    def directions() -> np.ndarray:
        eps = np.zeros((config.pairs, theta.size))
        eps[:, :n_orderer] = rng.standard_normal((config.pairs, n_orderer))
        if config.learn != "orderer":
            eps[:, placer_block] = rng.standard_normal((config.pairs, placer_block.stop - n_orderer))
        return eps * free
    runner = _Runner(config.workers, config.backend, config.ray_address)
    command = command or " ".join(sys.argv)
    if state is not None and isinstance(state.get("validation"), dict):   # the run's own windows, as chosen
        val_record = dict(state["validation"])
    else:
        val_record = validation_record(validation_set(config.validation, config.scenario, config.placer,
                                                      config.eval_seeds, config.eval_jobs_per_episode, log=log))
    eval_windows = [(str(w), int(x)) for w, x in val_record["windows"]]

    def spec(extra: dict) -> PriorityAgentSpec:
        return PriorityAgentSpec(config.scenario, config.placer, training={
            "algorithm": "es", "command": command, "config": asdict(config), "engine": engine, **extra},
            migrate=config.migrate)

    def validation(th: np.ndarray) -> np.ndarray:
        return runner.costs([(th, hidden, config.scenario, config.placer, split, s, eval_kw, engine,
                              config.migrate, config.objective) for split, s in eval_windows])

    def validation_ratio(th: np.ndarray) -> tuple[float, int]:
        """``th``'s validation against the untrained agent's (``las_val``): the geometric-mean ratio
        of the costs and the windows it wins."""
        val = validation(th)
        return float(np.exp(np.mean(np.log(val / las_val)))), int((val < las_val).sum())

    log_path = run_dir / "log.csv"
    # ``workers``: the iteration's episode workers (wall x workers is its CPU, the main process
    # waiting); a resumed run may use another count.
    fields = ["iteration", "episodes", "wall_s", "workers", "grad_norm", "step_norm", "train_log_cost", "pair_spread",
              "val_ratio", "val_wins"] + [f"w_{i}" for i in range(theta.size)]
    rows: list[dict] = []
    wall_before = 0.0

    def wall() -> float:
        return round(wall_before + time.monotonic() - start, 1)

    def commit(it: int, row: dict, improved: bool) -> None:
        """best (when it improved), then last with the ES state, then the log row: a crash or
        Ctrl-C between them leaves a checkpoint a resumed run continues without a gap or a repeat."""
        resume = {"iteration": it, "theta": theta.tolist(), "rng": rng.bit_generator.state,
                  "adam": {"m": adam.m.tolist(), "v": adam.v.tolist(), "t": adam.t},
                  "best": {"theta": best_theta.tolist(), "ratio": best_ratio, "iteration": best_iter},
                  "las_val": las_val.tolist(), "episodes": episodes, "wall_s": row["wall_s"],
                  "log": rows + [_jsonable_row(row)], "validation": val_record}
        with sigint_deferred("\n(Ctrl-C: saving the iteration first)\n") as deferred:
            if improved:
                save_priority_agent(PriorityAgentPolicy(model0.with_flat(best_theta), spec(
                    {"iterations": it, "seed": config.seed, "best_iteration": best_iter,
                     "validation_ratio_to_untrained": round(best_ratio, 5), "validation": val_record})),
                    run_dir / f"best{SUFFIX}")
            save_priority_agent(PriorityAgentPolicy(model0.with_flat(theta), spec(
                {"iterations": it, "seed": config.seed, "resume": resume})), run_dir / f"last{SUFFIX}")
            writer.writerow({k: row.get(k) for k in fields})
            fh.flush()
            rows.append(_jsonable_row(row))
            committed.update(iteration=it, best_ratio=best_ratio)
        if deferred:                   # Ctrl-C came while saving: stop now that the files agree
            raise KeyboardInterrupt

    committed: dict = {}
    it, interrupted = 0, False
    try:
        if state is None:
            las_val = validation(theta)
            best_theta, best_ratio, best_iter = theta.copy(), 1.0, 0
            episodes = len(eval_windows)
            log(f"iteration 0: untrained agent ({config.untrained_name()}) validation mean {config.objective} cost "
                f"{las_val.mean():,.4g} "
                f"on {len(eval_windows)} windows; episodes in the {engine} engine")
            start_row = {"val_ratio": 1.0, "val_wins": 0}
            if config.init is not None:       # fine-tuning: the start is the best so far when it validates better
                theta = init_theta
                ratio, wins = validation_ratio(theta)
                episodes += len(eval_windows)
                start_row = {"val_ratio": ratio, "val_wins": wins}
                if ratio < best_ratio:
                    best_theta, best_ratio = theta.copy(), ratio
                log(f"iteration 0: starting from {config.init}: validation ratio to the untrained agent {ratio:.4f} "
                    f"({wins}/{len(eval_windows)} wins)")
            atomic_write(log_path, lambda f: _write_rows(f, fields, []), newline="")    # a fresh log
            fh = open_append(log_path, newline="")
            writer = csv.DictWriter(fh, fieldnames=fields)
            commit(0, {"iteration": 0, "episodes": episodes, "wall_s": wall(), "workers": config.workers, **start_row,
                       **{f"w_{i}": v for i, v in enumerate(theta)}}, improved=True)
        else:
            it = int(state["iteration"])
            theta = np.array(state["theta"], dtype=np.float64)
            rng.bit_generator.state = state["rng"]
            adam.m, adam.v = (np.array(state["adam"][k], dtype=np.float64) for k in ("m", "v"))
            adam.t = int(state["adam"]["t"])
            best = state["best"]
            best_theta = np.array(best["theta"], dtype=np.float64)
            best_ratio, best_iter = float(best["ratio"]), int(best["iteration"])
            las_val = np.array(state["las_val"], dtype=np.float64)
            episodes, wall_before = int(state["episodes"]), float(state["wall_s"])
            rows = [dict(r) for r in state["log"]]
            # The checkpoint's log is the truth: rows written after it (a crash between) go.
            atomic_write(log_path, lambda f: _write_rows(f, fields, rows), newline="")
            fh = open_append(log_path, newline="")
            writer = csv.DictWriter(fh, fieldnames=fields)
            log(f"resuming after iteration {it} of {config.iterations} (best validation ratio {best_ratio:.4f} at "
                f"iteration {best_iter})")
        with fh:
            first = it + 1
            for it in range(first, config.iterations + 1):
                if config.max_minutes is not None and time.monotonic() - start > 60.0 * config.max_minutes:
                    it -= 1
                    log(f"stopping before iteration {it + 1}: max_minutes={config.max_minutes} reached")
                    break
                shared = config.pairing == "same-window"
                windows = rng.integers(0, 2**31 - 1, size=config.windows if shared else
                                       (config.pairs, 2, config.windows))
                eps = directions()
                tasks = [(theta + sign * config.sigma * e, hidden, config.scenario, config.placer, "train",
                          int(windows[i] if shared else windows[p, k, i]), train_kw, engine, config.migrate,
                          config.objective)
                         for p, e in enumerate(eps) for k, sign in enumerate((1.0, -1.0))
                         for i in range(config.windows)]
                costs = np.log(runner.costs(tasks)).reshape(config.pairs, 2, config.windows)
                episodes += len(tasks)
                if config.pairing == "reference":     # minus the untrained agent's log cost, window by window
                    refs = [(model0.flat(), hidden) + t[2:] for t in tasks]
                    costs = costs - np.log(runner.costs(refs)).reshape(costs.shape)
                    episodes += len(refs)
                grad = antithetic_gradient(costs[:, 0], costs[:, 1], eps, config.sigma)
                step = adam.step(grad)
                theta = theta + step
                row = {"iteration": it, "episodes": episodes, "grad_norm": float(np.linalg.norm(grad)),
                       "step_norm": float(np.linalg.norm(step)), "train_log_cost": float(costs.mean()),
                       "pair_spread": float(np.abs(costs[:, 0] - costs[:, 1]).mean()),
                       **{f"w_{i}": float(v) for i, v in enumerate(theta)}}
                msg = f"iteration {it}: |g| {row['grad_norm']:.3f}, pair spread {row['pair_spread']:.3f}"
                improved = False
                if it % config.eval_every == 0 or it == config.iterations:
                    ratio, wins = validation_ratio(theta)
                    episodes += len(eval_windows)
                    row["episodes"] = episodes
                    row.update(val_ratio=ratio, val_wins=wins)
                    msg += f"; validation ratio to the untrained agent {ratio:.4f} ({wins}/{len(eval_windows)} wins)"
                    if ratio < best_ratio:
                        best_theta, best_ratio, best_iter, improved = theta.copy(), ratio, it, True
                row["wall_s"], row["workers"] = wall(), config.workers
                commit(it, row, improved)
                log(msg)
    except (KeyboardInterrupt, SystemError) as exc:      # SystemError: Ctrl-C inside a compiled episode
        if not is_interrupt(exc):
            raise
        interrupted = True
    finally:
        runner.close()
    if interrupted:                  # the files hold the last finished iteration; nothing more is written
        if not committed:
            log("interrupted before the untrained agent was scored: nothing saved")
            return ESResult(None, math.nan, None, 0, wall(), run_dir, interrupted=True)
        log(f"interrupted: {run_dir / ('last' + SUFFIX)} holds iteration {committed['iteration']} (continue with "
            f"--resume), {run_dir / ('best' + SUFFIX)} the best so far")
        return ESResult(load_priority_agent(run_dir / f"best{SUFFIX}"), committed["best_ratio"],
                        load_priority_agent(run_dir / f"last{SUFFIX}"), committed["iteration"], wall(), run_dir,
                        interrupted=True)
    wall_s = wall()
    test = None
    if config.test_windows:
        try:
            test = test_report(best_theta, model0.flat(), config, hidden, engine, log)
        except (KeyboardInterrupt, SystemError) as exc:    # the run's files are complete; only the report is skipped
            if not is_interrupt(exc):
                raise
            log("test report interrupted: the run's files are complete; score best.priority.json with "
                "benchmarks/eval_dual_paired.py")
    record = {"iterations": it, "seed": config.seed, "wall_s": wall_s, "episodes": episodes,
              "best_iteration": best_iter, "validation_ratio_to_untrained": round(best_ratio, 5),
              "validation": val_record, **({"test": test} if test else {})}
    best = PriorityAgentPolicy(model0.with_flat(best_theta), spec(record))
    last = load_priority_agent(run_dir / f"last{SUFFIX}")
    save_priority_agent(best, run_dir / f"best{SUFFIX}")
    log(f"done: {it} iterations, {episodes} episodes, {wall_s / 60:.1f} min; best validation ratio {best_ratio:.4f} "
        f"(iteration {best_iter}) -> {run_dir / ('best' + SUFFIX)}")
    return ESResult(best, best_ratio, last, it, wall_s, run_dir, test=test)


def validation_record(vset: ValidationSet) -> dict:
    """What a run stores of its validation windows (in the ES state and the agent files): the
    windows, how they were chosen, and for matched windows LAS's mean preemptions on them and on
    the test windows."""
    out = {"mode": vset.mode, "source": vset.source, "placer": vset.placer,
           "windows": [[w, int(x)] for w, x in vset.windows]}
    if vset.mode == "matched":
        out.update(las_preemptions_mean=float(np.mean(vset.las_preemptions)),
                   test_las_preemptions_mean=float(np.mean(vset.test_las_preemptions)))
    return out


def test_report(theta: np.ndarray, theta0: np.ndarray, config: ESConfig, hidden: int, engine: str,
                log: Callable[[str], None] = print) -> dict:
    """``theta`` against the untrained agent (:meth:`ESConfig.untrained_name`) on test windows ``0 ..
    config.test_windows - 1``: the geometric mean of the per-window ratio of the objective cost, its 95%
    bootstrap interval and the win rate (the figures a claim quotes, over that many windows)."""
    from baselines.harness.stats import geo_mean_ci

    kw = {"jobs_per_episode": config.eval_jobs_per_episode} if config.eval_jobs_per_episode else None
    seeds = range(config.test_windows)
    runner = _Runner(config.workers)
    try:
        costs = runner.costs([(th, hidden, config.scenario, config.placer, "test", s, kw, engine, config.migrate,
                               config.objective)
                              for th in (theta, theta0) for s in seeds]).reshape(2, -1)
    finally:
        runner.close()
    ratios = costs[0] / costs[1]
    g, lo, hi = geo_mean_ci(ratios)
    out = {"windows": config.test_windows, "reference": config.untrained_name(), "ratio": g, "ci_low": lo,
           "ci_high": hi, "win_rate": float(np.mean(costs[0] < costs[1]))}
    note = "" if config.test_windows >= 100 else " (fewer than 100 windows: not enough to carry a claim)"
    log(f"test windows 0-{config.test_windows - 1}: best / {config.untrained_name()} = {g:.3f} [{lo:.3f}, {hi:.3f}] "
        f"(95% bootstrap interval of the geometric mean), win rate {out['win_rate']:.2f}, over "
        f"{config.test_windows} windows{note}")
    return out


def _write_rows(f, fields: Sequence[str], rows: Sequence[dict]) -> None:
    writer = csv.DictWriter(f, fieldnames=list(fields))
    writer.writeheader()
    for row in rows:
        writer.writerow({k: row.get(k) for k in fields})
