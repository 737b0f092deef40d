"""Heterogeneous GPU cluster scheduling: a PettingZoo parallel environment (``hetero_cluster_v1``).

======================  =====================================================================
Import                  ``cluster_env.parallel_env(scenario=DEFAULT_SCENARIO, split="train", **overrides)``
                        (``DEFAULT_SCENARIO`` is the benchmark's, ``philly-v1``, as in
                        ``cluster-bench run`` and the single-agent views)
AEC version             ``cluster_env.env(...)`` (PettingZoo's conversion plus order enforcing)
Registered id           ``cluster_env/HeteroCluster-v1`` (``cluster_env.make(id, ...)``; the
                        ``-v0`` id keeps its default scenario ``philly-v0``)
Agents                  ``["orderer", "placer"]``, both present for the whole episode, cooperative
Action spaces           orderer ``Discrete(K + R + 1)``, placer ``Discrete(M + 1)``
Observation spaces      ``Dict(jobs, machines, global, placing, action_mask)`` (see below)
Reward                  shared; default ``-(job-seconds in system) / (num_jobs * 3600)``
Episode end             terminated when every job finished; truncated at ``max_steps`` / ``max_time``
Render modes            ``"ansi"``, ``"rgb_array"`` (a labelled image), ``"human"`` (a matplotlib window,
                        drawn at every step)
======================  =====================================================================

**Phases.** Each ``step`` is one scheduling decision; only one agent acts, the other must send
its no-op (the last action index; its mask allows nothing else).

* ORDER: the orderer picks action ``i < K`` to start the i-th pending candidate (oldest first),
  ``K <= i < K + R`` to preempt a running candidate (only with ``preemption=True``), or ``K + R``
  = ``advance``: the clock runs to the next event (arrival, completion, restart end, fluctuation
  update, scheduling tick). Decision epochs where ``advance`` is the only legal action are skipped
  automatically (their reward is included in the step that caused them).
* PLACE: after a job is picked, the placer picks machine ``m < M``; the job takes as many free
  GPUs there as it still needs; the placer picks again until the job holds all its GPUs, then the
  job starts and the ORDER phase resumes.

**Masks** (``action_mask``, int8) never allow an impossible decision: a pending job that does not
fit the free GPUs of the types it may use, a machine without such a free GPU, ``advance`` when no
future event exists. A forbidden action raises :class:`cluster_env.errors.InvalidActionError`
(``invalid_action="noop"`` ignores it instead, ``invalid_action="fallback"`` plays the acting
agent's lowest allowed action instead, as the single-agent views do by default; both set
``infos[agent]["invalid_action"]``; a forbidden action of the agent that is not acting, anything
but its no-op, is ignored under both).

**Observations** (float32, identical feature arrays for both agents; only the mask differs):

* ``jobs`` (K + R, 14): per candidate, ``observation.JOB_FEATURES`` (valid, running, gpus_log2,
  wait_log, attained_log, executed_log, job_type, tenant, restarts_log, duration_log,
  remaining_log, fits, comm_intensity, best_speed); durations are -1 unless clairvoyant.
* ``machines`` (M, 11): ``observation.MACHINE_FEATURES`` (gpu_type, type_speed, gpus, free_gpus,
  free_frac, jobs, measured_speed, measured_age_log, price, usable, job_speed). The measured speed
  is a noisy moving average of observed progress; true machine factors are never shown.
  ``job_speed`` is the nominal speed of the job being placed on the machine's GPU type (Gavel's
  table), what a heterogeneity-aware scheduler knows.
* ``global`` (10,): ``observation.GLOBAL_FEATURES`` (phase, time_log, pending_log, running_log,
  free_gpu_frac, arrivals_left, finished_frac, pending_gpus_log, preemption, clairvoyant).
* ``placing`` (9,): ``observation.PLACING_FEATURES`` of the job being placed (zeros in ORDER).

**Infos**: ``phase`` ("order"/"place"), ``time`` (simulated seconds), ``job_ids`` ((K + R,) int64:
the job id of each row of ``jobs``, -1 for empty rows), ``placing_job`` (the job being placed, -1
in ORDER), ``tick`` (True at a scheduling tick, the periodic epoch of ``scheduling_tick`` seconds
that exists with preemption). Job ids are what a real scheduler knows; they let a policy keep
per-job state.

**Metrics** (``infos[agent]["metrics"]`` on the final step and ``env.unwrapped.metrics()``):
``cluster_env.core.metrics.METRIC_KEYS``. The final step's infos also carry ``fallbacks``: the
decisions of the episode that the fallback rule played instead of a forbidden action (under
``invalid_action="fallback"``, here or in a single-agent view; ``env.unwrapped.fallbacks`` while
it runs), so that a score can say how much of it is FIFO's and first-fit's.

**World**: ``env.unwrapped.world_summary()`` (:mod:`cluster_env.world.summary`) says which world the
environment plays in: spread model, straggler preset, interconnect source, the effects that are on,
the GPU types priced by the spec-sheet fallback rule, and whether the world is the scenario's or
follows a user's cluster (``.line()``, the line ``cluster-bench run`` prints; ``.as_dict()``; the
single-agent views' ``unwrapped.world_summary()`` is the same). A
cluster given by the user (``cluster_csv``, or ``custom_scenario(base, cluster=...)``) takes the
spread model and straggler preset of its GPU generation whatever the base
(:mod:`cluster_env.scenarios.hardware`); world arguments given here win.

**Engines.** An episode runs in one of two engines that play the same dynamics bit for bit
(tests/test_parallel_engine.py): the compiled step over the engine's state arrays
(:mod:`cluster_env.core.engine`, the one the vector env and the compiled harness run) or the
Python simulator (:class:`cluster_env.core.simulator.ClusterSimulator`). ``backend="auto"`` (the
default) uses the compiled step wherever it runs the episode exactly: numba's kernels and no render
mode, with every observation layout (the step writes the default columns, the layout's builder
appends its own from the engine's live state) and every reward (one other than the default is
computed from the engine's totals after each step); otherwise the Python simulator, as
``backend="python"`` always does (``backend="compiled"`` is an error where it cannot run).
``env.engine`` says which one runs the current episode. Observations are fresh arrays either way:
the compiled step hands out arrays nothing else still holds and copies otherwise. Reading
``env.sim`` while the compiled step runs the episode hands it to the Python simulator: the episode
is played again there with the same decisions (checked to end in the engine's state to the last
bit, else an error) and goes on in Python until the next reset; ``env.episode_view()``
(:class:`cluster_env.core.simulator.EpisodeView`: every job's state, the clock, the events) and
``env.metrics()`` read either engine without that. A copy (``copy.deepcopy``, ``pickle``) of an
env in the middle of an episode plays the episode again from its start and its decisions and goes
on from there, bit for bit like the original, in the Python simulator.

**Arguments** (``overrides``): world model switches and parameters of
:class:`cluster_env.core.config.WorldConfig` (``static_factors``, ``fluctuation``,
``contention``, ``spread_penalty``, ``restart_overhead``, ...), ``all_effects_off=True``;
scheduling options of :class:`cluster_env.core.config.SchedulingConfig` (``preemption``,
``clairvoyant``, ``pending_window``, ``running_window``, ``scheduling_tick``, ``invalid_action``,
``max_steps``, ``max_time``); ``reward`` (``"jct"``, ``"cost"`` or a callable on
:class:`cluster_env.core.rewards.StepStats`); ``jobs_per_episode``, ``time_scale``,
``train_range`` (``(a, b)``: draw the train split's windows from that fraction of it, e.g.
``(0.8, 1)`` for its most recent fifth; validation and test are unchanged; default all of it);
``load`` (the offered load each episode's arrivals are rescaled to, see
:mod:`cluster_env.scenarios.load`; default: the scenario's); ``load_measure`` (how that load is
measured; default: the scenario's, ``"total"`` before the v3 scenarios, ``"capped"`` (each job's
work counted for at most a day) on them; or ``"concurrent"``, the GPUs demanded at once during the
arrivals);
``workload_csv`` / ``cluster_csv`` (and ``workload_columns`` / ``cluster_columns``) for a user's
own trace and cluster; ``render_mode``; ``observation`` (``"default"``, the layout above, or
``"extended"``: five more ``jobs`` columns, a stable tenant encoding, the tenant's finished run
times so far, attained service of every candidate, and three more ``global`` columns, the tick
phase and the finished run times; see :mod:`cluster_env.envs.observation_ext`; or
``"extended-v2"``: ``"extended"`` plus eight ``jobs`` columns with each running candidate's
placement, machines, GPU types, its speed against the best one free machine offers now, spread,
time since its start; see :mod:`cluster_env.envs.observation_place`; or ``"objectives-v1"``: the default
layout plus each candidate's class, deadline and tenant quota, :mod:`cluster_env.envs.observation_obj`);
``backend`` (``"auto"``, ``"compiled"``, ``"python"``: see **Engines**). Every argument is checked when the environment is
built: a wrong type or value is a ``TypeError`` or ``ValueError`` that names it.

**Version history.** v1: the default scenario of ``parallel_env()``, ``env()``,
``ClusterParallelEnv()`` and the ``-v1`` ids is ``DEFAULT_SCENARIO`` (``philly-v1``); the
dynamics, spaces and every scenario are unchanged, and ``cluster_env.hetero_cluster_v0`` and the
``-v0`` ids keep ``philly-v0`` (the split default stays ``train``). v0 (0.1.0): first release. Same environment version, new scenario versions:
``philly-v1``, ``openb-v1``, ``openb-full-v1``, ``philly-hetero-v1`` (offered load as a parameter,
spread penalty relative to the fewest machines, pending window 256); the ``load`` argument; the
``avg_pending_time`` metric; ``offered_load`` in the final infos. Unreleased: the opt-in
``observation="extended"`` layout and ``"extended-v2"`` (placement columns) (the default layout of every
scenario is unchanged); the ``train_range`` argument (default: the whole train split, as before);
the compiled step runs the episodes it supports (``backend``, ``env.engine``, ``episode_view()``;
every episode is unchanged, bit for bit), and reading ``env.sim`` then hands the episode to the
Python simulator.
"""
from __future__ import annotations

import array
import functools
from dataclasses import replace
from typing import Any, Optional

import numpy as np
from gymnasium.utils import seeding
from pettingzoo import ParallelEnv

from cluster_env.core.engine.layout import EVENTS as _EVENTS
from cluster_env.core.engine.layout import FINISHED as _FINISHED
from cluster_env.core.engine.layout import JOB_SECONDS as _JOB_SECONDS
from cluster_env.core.engine.layout import MAX_PREEMPTIONS_PER_INSTANT
from cluster_env.core.engine.layout import NOW as _NOW
from cluster_env.core.config import (DEFAULT_STEPS_PER_JOB, TIME_SCALE_RANGE, SchedulingConfig, WorldConfig, check_bool, check_int,
                                     check_range, split_overrides)
from cluster_env.core.metrics import episode_metrics
from cluster_env.core.rewards import JCTReward, StepStats, make_reward
from cluster_env.core.simulator import ClusterSimulator, EpisodeView
from cluster_env.envs.compiled_episodes import OneEpisode, unsupported_reason
from cluster_env.envs.observation import ObservationBuilder
from cluster_env.envs.observation_ext import ExtendedObservationBuilder, check_observation_mode
from cluster_env.envs.observation_obj import ObjectiveObservationBuilder
from cluster_env.envs.observation_place import PlacementObservationBuilder
from cluster_env.errors import InvalidActionError
from cluster_env.loaders.csvio import check_column_map
from cluster_env.scenarios.base import Scenario
from cluster_env.scenarios.load import check_load, check_load_measure, offered_load
from cluster_env.scenarios.registry import DEFAULT_SCENARIO
from cluster_env.world.summary import WorldSummary, world_summary

ORDER, PLACE = 0, 1
AGENTS = ("orderer", "placer")
_INVALID_HINT = (". Choose only actions the mask allows: each observation's 'action_mask' (or "
                 "env.action_masks() in the single-agent views, what sb3-contrib's MaskablePPO reads), "
                 "or pass invalid_action='fallback' to play the lowest allowed action instead (the "
                 "single-agent views' default, what an agent trained on them expects)")
#: Values of the ``backend`` argument: ``"auto"`` (the compiled step where it runs the episode
#: exactly, the Python simulator otherwise), ``"compiled"`` (an error where it cannot), ``"python"``.
BACKENDS = ("auto", "compiled", "python")
#: The keys ``reset(options=...)`` reads. ``"options"`` is also accepted and ignored: PettingZoo's
#: own API test passes ``{"options": 1}`` to check that reset takes the argument.
RESET_OPTIONS = ("split",)
_PROBE_OPTIONS = ("options",)


class _WorkloadOnly:
    """The workload of a copied env's episode, before the copy plays it again."""

    def __init__(self, workload: Any) -> None:
        self.workload = workload


def reset_split(options: Optional[dict], default: str) -> str:
    """The split ``reset(options=...)`` asks for (``default`` when none); unknown keys are refused
    (environment settings such as ``load`` are arguments of ``parallel_env``, not reset options)."""
    if options is None:
        return default
    if not isinstance(options, dict):
        raise TypeError(f"reset options must be None or a dict (key 'split'), got {options!r}")
    unknown = sorted((k for k in options if k not in RESET_OPTIONS + _PROBE_OPTIONS), key=repr)
    if unknown:
        raise TypeError(f"unknown reset option(s) {unknown}; reset(options=...) accepts {list(RESET_OPTIONS)} "
                        "(settings such as load are arguments of cluster_env.parallel_env)")
    return options.get("split", default)


def _world_origin(scenario: Scenario, world_kw: dict) -> str:
    """Where the world comes from, in words: the scenario's, or the hardware rule on a user's
    cluster (``cluster_env.scenarios.hardware``), with the world fields the user set."""
    hw = scenario.hardware
    if hw is None:
        text = f"the scenario's world ({scenario.name})"
    else:
        text = f"world of the cluster's hardware, {hw.describe()}, on base {scenario.name.split('+')[0]}"
    if world_kw:
        text += "; set by the user: " + ", ".join(sorted(world_kw))
    return text


_ENV_KEYS = {"reward", "render_mode", "jobs_per_episode", "time_scale", "load", "load_measure", "all_effects_off",
             "workload_csv", "cluster_csv", "workload_columns", "cluster_columns", "observation",
             "train_range", "backend"}


class ClusterParallelEnv(ParallelEnv):
    """See the module docstring: it is the environment's card."""

    metadata = {"name": "hetero_cluster_v1", "render_modes": ["ansi", "rgb_array", "human"], "is_parallelizable": True,
                "render_fps": 4}

    def __init__(self, scenario: "str | Scenario" = DEFAULT_SCENARIO, split: str = "train", **overrides: Any) -> None:
        from cluster_env.scenarios.registry import custom_scenario, get_scenario

        world_kw, sched_kw, other = split_overrides(overrides)
        unknown = set(other) - _ENV_KEYS
        if unknown:
            valid = sorted(set(WorldConfig.__dataclass_fields__) | set(SchedulingConfig.__dataclass_fields__) | _ENV_KEYS)
            raise TypeError(f"unknown argument(s) {sorted(unknown)}; valid arguments: {valid}")
        base = get_scenario(scenario) if isinstance(scenario, str) else scenario
        if not isinstance(base, Scenario):
            raise TypeError(f"scenario must be a scenario name (see cluster_env.list_scenarios()) or a "
                            f"Scenario, got {scenario!r}")
        for csv_key in ("workload", "cluster"):
            check_column_map(other.get(f"{csv_key}_columns"), f"{csv_key}_columns")
            # A column mapping without its file was silently ignored.
            if other.get(f"{csv_key}_columns") is not None and not other.get(f"{csv_key}_csv"):
                raise TypeError(f"{csv_key}_columns needs {csv_key}_csv (the file it maps)")
        if other.get("workload_csv") or other.get("cluster_csv"):
            base = custom_scenario(base, workload_csv=other.get("workload_csv"),
                                   cluster_csv=other.get("cluster_csv"),
                                   workload_columns=other.get("workload_columns"),
                                   cluster_columns=other.get("cluster_columns"))
        # all_effects_off first, then the explicit flags: all_effects_off=True, spread_penalty=True
        # studies the spread penalty alone (it used to cancel the explicit flag silently).
        check_bool("all_effects_off", other.get("all_effects_off", False))
        world = base.world.all_effects_off() if other.get("all_effects_off") else base.world
        world = replace(world, **world_kw)
        #: What the world follows: the scenario's own, or the hardware rule on a user's cluster.
        self._world_origin = _world_origin(base, world_kw)
        sched = replace(base.scheduling, **sched_kw)
        world.validate()
        sched.validate()
        if "time_scale" in other:
            check_range("time_scale", other["time_scale"], *TIME_SCALE_RANGE)
            base = replace(base, time_scale=float(other["time_scale"]))
        if other.get("load") is not None:
            base = replace(base, load=check_load(other["load"]))
        if "load_measure" in other:
            base = replace(base, load_measure=check_load_measure(other["load_measure"]))
        if other.get("train_range") is not None:
            base = base.with_train_range(other["train_range"])
        self.scenario = base
        self.split = split
        base.split_range(split, 1)  # validates the split name early
        self.world, self.sched = world, sched
        self.jobs_per_episode = other.get("jobs_per_episode")
        if self.jobs_per_episode is not None:
            check_int("jobs_per_episode", self.jobs_per_episode, minimum=1)
        self.reward_fn = make_reward(other.get("reward"))
        self._jct_unit = self.reward_fn.time_unit if type(self.reward_fn) is JCTReward else None
        render_mode = other.get("render_mode")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.render_mode = render_mode

        self.cluster = base.cluster()
        from cluster_env.loaders import check_workload_fits

        check_workload_fits(base.workload(), self.cluster, file=base.workload_file)
        self.possible_agents = list(AGENTS)
        self.agents: list[str] = []
        self.fallbacks = 0
        #: The observation layout: "default" (the scenario's, pinned), "extended" (observation_ext) or
        #: "extended-v2" (observation_place).
        self.observation_mode = check_observation_mode(other.get("observation", "default"))
        builder_args = (self.cluster.num_machines, sched.pending_window, sched.running_window,
                        sched.preemption, sched.clairvoyant, self.cluster.gpu_type_names, world.reference_gpu)
        speed_args = {"speeds": world.speeds, "gavel_shape": world.gavel_shape}
        if self.observation_mode == "extended":
            self.builder = ExtendedObservationBuilder(*builder_args, scheduling_tick=sched.scheduling_tick,
                                                      **speed_args)
        elif self.observation_mode == "extended-v2":
            self.builder = PlacementObservationBuilder(*builder_args, scheduling_tick=sched.scheduling_tick,
                                                       **speed_args)
        elif self.observation_mode == "objectives-v1":
            self.builder = ObjectiveObservationBuilder(*builder_args, **speed_args)
        else:
            self.builder = ObservationBuilder(*builder_args, **speed_args)
        self.observation_spaces = self.builder.observation_spaces
        self.action_spaces = self.builder.action_spaces
        self._order_noop = self.builder.n_orderer_actions - 1
        self._place_noop = self.builder.n_placer_actions - 1
        self._agent_set = set(AGENTS)     # the agents of a running episode (all of them)
        self._n_actions = {agent: space.n for agent, space in self.action_spaces.items()}
        self._np_random: Optional[np.random.Generator] = None
        self.sim: Optional[ClusterSimulator] = None
        self.backend = self._check_backend(other.get("backend", "auto"))
        self._engine: Optional[OneEpisode] = None     # made at the first compiled reset
        #: Offered load of the current episode's workload (cluster_env.scenarios.load), set by reset.
        self.offered_load: float = float("nan")

    @property
    def sim(self) -> Optional[ClusterSimulator]:
        """The episode's Python simulator (None before the first reset and after ``close``).

        Where the compiled engine runs the episode (``backend="auto"``, the default, wherever it
        runs it exactly), reading this hands the episode to the Python simulator: it is played
        again there with the same decisions (checked to end in the engine's state to the last bit)
        and goes on in Python until the next reset. Read-only uses that should not pay that, such
        as scoring at the end of an episode, read :meth:`episode_view` and :meth:`metrics`."""
        if self._live:
            self._hand_off()
        return self._sim

    @sim.setter
    def sim(self, value: Optional[ClusterSimulator]) -> None:
        self._live = False
        self._sim = value

    @property
    def in_episode(self) -> bool:
        """Whether an episode is under way (reset, not ended, not closed)."""
        return self._sim is not None and bool(self.agents)

    @property
    def engine(self) -> str:
        """What runs the current episode: ``"compiled"`` or ``"python"``."""
        return "compiled" if self._live else "python"

    def episode_jobs(self) -> int:
        """The number of jobs in one episode (``jobs_per_episode``, or the whole split)."""
        size = self.jobs_per_episode if self.jobs_per_episode is not None else self.scenario.jobs_per_episode
        lo, hi = self.scenario.split_range(self.split, self.scenario.workload().num_jobs)
        return max(1, min(size, hi - lo) if size is not None else hi - lo)

    def default_max_steps(self) -> int:
        """The step bound of an episode when none is set: ``DEFAULT_STEPS_PER_JOB`` steps per job
        (what the single-agent views truncate at by default, and the harness when it scores)."""
        return DEFAULT_STEPS_PER_JOB * self.episode_jobs()

    def episode_view(self) -> EpisodeView:
        """What the episode shows now (:class:`cluster_env.core.simulator.EpisodeView`, copies:
        the jobs' facts and states, the clock, the events), from whichever engine runs it, with
        no hand-off: what scoring reads at the end of an episode."""
        if self._sim is None:
            raise RuntimeError("call reset() first")
        if self._live:
            return self._engine.view(self._sim)
        return EpisodeView.of_simulator(self._sim)

    def world_summary(self) -> WorldSummary:
        """The world this environment plays in (:mod:`cluster_env.world.summary`): spread model,
        straggler preset, interconnect source, effects on, GPU types priced by the spec-sheet
        fallback, and whether the world is the scenario's or follows a user's hardware;
        ``.line()`` is what ``cluster-bench run`` prints."""
        return world_summary(self.world, self.cluster.gpu_type_names, self._world_origin)

    # ------------------------------------------------------------------ spaces (cached objects)
    def observation_space(self, agent: str):
        return self.observation_spaces[agent]

    def action_space(self, agent: str):
        return self.action_spaces[agent]

    # ------------------------------------------------------------------ episode
    def reset(self, seed: Optional[int] = None, options: Optional[dict] = None):
        engine = self._engine_for_reset()
        sim = self.start_episode(seed, options)
        self.agents = list(AGENTS)
        self.phase = ORDER
        self.num_steps = 0
        self.fallbacks = 0          # decisions the fallback rule played instead of a forbidden action
        if engine is not None:
            self._sim, self._live = sim, True
            engine.start(self, sim)
            obs = self._engine_observe()
            done = int(engine.state(0)[11][_FINISHED]) == sim.num_jobs
        else:
            self.sim = sim
            self._begin_python()
            obs = self._observe()
            done = sim.done
        infos = {a: self._info() for a in self.agents}
        if done:
            infos = self._final_infos(infos)
        if self.render_mode == "human":
            self.render()
        return obs, infos

    def start_episode(self, seed: Optional[int], options: Optional[dict], observed: bool = True) -> ClusterSimulator:
        """The start of an episode, written once for every path (this env's ``reset``, the vector
        env's backends, the compiled harness): the generator (reseeded when ``seed`` is given), the
        workload drawn from it, the offered load, and the fresh simulator, with the observation
        builder bound to it (``observed``; a harness that never observes skips it). The
        generator's state before the simulator is kept, and the decisions played from then on:
        what a replay of the episode (a hand-off, a copy) starts from."""
        split = reset_split(options, self.split)     # before anything changes
        if seed is not None or self._np_random is None:
            self._np_random, _ = seeding.np_random(seed)
        rng = self._np_random
        workload = self.scenario.sample(split, rng, self.jobs_per_episode)
        self.offered_load = offered_load(workload, self.cluster.total_gpus, self.scenario.load_measure)
        self._rng_at_start = rng.bit_generator.state    # what a replay of the episode starts from
        self._trace = array.array("q")                  # the decisions played (-1: none)
        self._reset_reward()
        return self._new_simulator(workload, observed)

    def _new_simulator(self, workload: Any, observed: bool = True) -> ClusterSimulator:
        sim = ClusterSimulator(self.cluster, workload, self.world, self._np_random,
                               preemption=self.sched.preemption,
                               scheduling_tick=self.sched.scheduling_tick, time_limit=self.sched.max_time)
        if workload.tenant_quota is not None:
            # Quota violations need each tenant's GPUs over time: the allocation log keeps them
            # (the per-event path; the same episode as without it).
            sim.allocation_log = []
        if observed:
            self.builder.bind(sim, max(workload.num_tenants, 1))
        return sim

    def _reset_reward(self) -> None:
        """What the reward reads at the episode's first step: nothing happened before it."""
        self._last = (0.0, 0.0, 0.0, 0.0, 0)
        self._objectives_last = None

    def _begin_python(self) -> None:
        """The Python simulator's side of a reset (after ``start_episode``)."""
        self.phase = ORDER
        self.num_steps = 0
        self._preempted_now: tuple[float, dict] = (-1.0, {})   # (instant, {job: preemptions in it})
        # Per event: the compiled skip-idle loop (a cold start's largest compile) waits for step.
        self._skip_idle_epochs(fused=False)

    def step(self, actions: dict):
        if self._sim is None:
            raise RuntimeError("step() called before reset(); call reset() first")
        if not self.agents:
            raise RuntimeError("step() called after the episode ended; call reset() first")
        if not isinstance(actions, dict):
            raise TypeError(f"actions must be a dict of agent -> action, got {type(actions).__name__}")
        if actions.keys() != self._agent_set:
            missing = sorted(set(self.agents) - set(actions))
            extra = sorted(set(actions) - set(self.agents))
            raise KeyError(f"actions must have exactly the keys {self.agents}; missing {missing}, extra {extra}")
        a_order, a_place = actions["orderer"], actions["placer"]
        if type(a_order) is not int or not 0 <= a_order <= self._order_noop:
            a_order = self._as_action("orderer", a_order)
        if type(a_place) is not int or not 0 <= a_place <= self._place_noop:
            a_place = self._as_action("placer", a_place)
        invalid = None          # agents whose forbidden action was ignored or replaced ("noop", "fallback")
        if self.phase == ORDER:
            acting, act, mask, idle, other, other_act, other_noop = (
                "orderer", a_order, self._order_mask, "ORDER", "placer", a_place, self._place_noop)
        else:
            acting, act, mask, idle, other, other_act, other_noop = (
                "placer", a_place, self._place_mask, "PLACE", "orderer", a_order, self._order_noop)
        if other_act != other_noop:
            invalid = self._forbidden(invalid, other, other_act, f"only the no-op is allowed in the {idle} phase")
        if not mask[act]:
            invalid = self._forbidden(invalid, acting, act, "the action mask forbids it")
            act = self._fallback_action(mask)
            self.fallbacks += act is not None
        self._trace.append(-1 if act is None else act)
        if self._live:
            return self._engine_step(act, invalid)
        self._apply(act)
        return self._finish_step(invalid)

    def _apply(self, act: Optional[int]) -> None:
        """The acting agent's decision ``act`` (None: nothing is played) in the Python simulator,
        then the idle epochs skipped."""
        sim = self._sim
        if self.phase == ORDER:
            if act is None:
                pass
            elif act < self.builder.K:
                sim.start(int(self._cand_pending[act]))
                self.phase = PLACE
            elif act < self._order_noop:
                job = int(self._cand_running[act - self.builder.K])
                sim.preempt(job)
                if self._preempted_now[0] != sim.now:
                    self._preempted_now = (sim.now, {})
                counts = self._preempted_now[1]
                counts[job] = counts.get(job, 0) + 1
            else:
                sim.advance()
        elif act is not None and sim.place(act):
            self.phase = ORDER
        if self.phase == ORDER:
            self._skip_idle_epochs()

    def ignore_step(self, agent: str):
        """A step in which ``agent``'s action is ignored (``invalid_action="noop"``; under
        ``"fallback"`` the agent's lowest allowed action is played instead).

        The single-agent views call it for an index their padded action space has and the acting
        agent does not: like any forbidden action it changes nothing but counts towards ``max_steps``.
        """
        if self._sim is None or not self.agents:
            raise RuntimeError("step() called before reset() or after the episode ended; call reset() first")
        if self.sched.invalid_action == "raise":
            raise InvalidActionError(f"{agent}'s action is forbidden{_INVALID_HINT}")
        if self.sched.invalid_action == "fallback":     # played as the lowest allowed action, flagged
            act = {a: self._n_actions[a] - 1 for a in AGENTS}
            act[agent] = int(np.argmax(self._mask_of(agent)))
            self.fallbacks += 1         # counted before the step, whose final infos report it
            obs, rewards, terms, truncs, infos = self.step(act)
            infos[agent]["invalid_action"] = True
            return obs, rewards, terms, truncs, infos
        # Nothing is played (the idle epochs a replay skips after it: none, this is a decision epoch).
        self._trace.append(-1)
        if self._live:
            return self._engine_step(None, [agent])
        return self._finish_step([agent])

    def _end_step(self) -> tuple[float, bool, bool]:
        """The end of a decision in the Python simulator (the compiled paths': the engine's
        ``finish_step``): count it, its reward, and whether the episode ended (reward, terminated,
        truncated), truncated at ``max_steps`` decisions or ``max_time`` seconds."""
        sim = self._sim
        self.num_steps += 1
        reward = self._reward()
        done = sim.finished_count == sim.num_jobs
        sched = self.sched
        truncated = not done and (
            (sched.max_steps is not None and self.num_steps >= sched.max_steps)
            or (sched.max_time is not None and sim.now >= sched.max_time))
        return reward, done, truncated

    def _finish_step(self, invalid: "list[str] | None"):
        reward, done, truncated = self._end_step()
        obs = self._observe()
        return self._step_result(obs, reward, done, truncated, self._info(), invalid)

    def _step_result(self, obs: dict, reward: float, done: bool, truncated: bool, info: dict,
                     invalid: "list[str] | None"):
        """The five dicts a step returns (either engine's); the episode's end and a human frame."""
        infos = {"orderer": info, "placer": info.copy()}
        if invalid:
            for agent in invalid:
                infos[agent]["invalid_action"] = True
        if done or truncated:
            infos = self._final_infos(infos)
            self.agents = []
        if self.render_mode == "human":       # PettingZoo and Gymnasium draw human frames by themselves
            self.render()
        return (obs, {"orderer": reward, "placer": reward}, {"orderer": done, "placer": done},
                {"orderer": truncated, "placer": truncated}, infos)

    # ------------------------------------------------------------------ the compiled step
    def _check_backend(self, backend: Any) -> str:
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {list(BACKENDS)}, got {backend!r}")
        if backend == "compiled":
            why = self._engine_unsupported()
            if why is not None:
                raise ValueError(f"backend='compiled' cannot run this environment exactly: {why} "
                                 "(backend='auto' runs it in the Python simulator)")
        return backend

    def _engine_unsupported(self) -> Optional[str]:
        if type(self) is not ClusterParallelEnv:
            return f"{type(self).__name__} is not the library's ClusterParallelEnv"
        return unsupported_reason(self)

    def _engine_for_reset(self) -> Optional[OneEpisode]:
        """The compiled episode runner this reset uses (None: the Python simulator), made once."""
        if self.backend == "python" or self._engine_unsupported() is not None:
            return None
        if self._engine is None:
            self._engine = OneEpisode(self)
        return self._engine

    def _engine_step(self, act: Optional[int], invalid: "list[str] | None"):
        """One step in the compiled engine (``act``: the acting agent's decision, None: nothing
        played), with the dicts ``step`` returns."""
        reward, now, placing, phase, done, truncated, tick = self._engine.play(act)
        if self._jct_unit is None:
            reward = self._reward()
        self.num_steps += 1
        self.phase = phase
        obs = self._engine_observe()
        info = {"phase": "place" if phase else "order", "time": now, "job_ids": self._job_ids,
                "placing_job": placing, "tick": tick}
        if phase and self.sched.spread_floor:
            self._spread_floor_info(info, placing)
        return self._step_result(obs, reward, done, truncated, info, invalid)

    def _engine_observe(self) -> dict:
        """The observation dicts from the compiled step's buffers (fresh arrays, as ``_observe``)."""
        jobs, machines, g, p, order, place, ids = self._engine.observe(self.phase == ORDER)
        self._order_mask, self._place_mask = order, place
        if ids is not None:
            self._job_ids = ids
        return {"orderer": {"jobs": jobs, "machines": machines, "global": g, "placing": p, "action_mask": order},
                "placer": {"jobs": jobs, "machines": machines, "global": g, "placing": p, "action_mask": place}}

    def _hand_off(self) -> None:
        """Continue the episode in the Python simulator (what reading :attr:`sim` asks while the
        compiled engine holds it): the episode is played again in Python from its start, with the
        decisions the engine played, and checked to be the engine's to the last bit."""
        state = self._engine.state(0)
        engine_phase = self._engine.scalars()[3]
        self._replay_in_python()
        sim, sc, ic = self._sim, state[10], state[11]
        same = (sim.now == sc[_NOW] and sim.job_seconds == sc[_JOB_SECONDS] and sim.events == ic[_EVENTS]
                and sim.finished_count == ic[_FINISHED] and self.phase == engine_phase)
        if not same:
            raise RuntimeError(f"the Python simulator's replay of this episode left the compiled engine's "
                               f"after {self.num_steps} steps (t={sim.now} vs {sc[_NOW]}); please report it, "
                               "with the scenario and seed (backend='python' runs the episode in Python throughout)")
        if self._jct_unit is not None and self.num_steps:
            # The compiled step kept the default reward's own record: the totals at the last step's end.
            self._last = (sim.now, sim.job_seconds, sim.fee, sim.energy_joules, sim.finished_count)

    def _replay_in_python(self) -> None:
        """Play the episode again in a fresh Python simulator, from the generator's state at its
        start, with the decisions played so far (:attr:`_trace`): a hand-off, or a copy's rebuild.
        The reward function is not called again (it may keep its own record): what it reads next is
        kept. The generator must end where the episode left it, else the replay is an error."""
        rng = self._np_random
        rng_now = rng.bit_generator.state
        steps, fallbacks, agents = self.num_steps, self.fallbacks, self.agents
        last, objectives_last = self._last, self._objectives_last
        rng.bit_generator.state = self._rng_at_start
        self.sim = self._new_simulator(self._sim.workload)
        self._begin_python()
        self._observe()
        for act in self._trace.tolist():
            self._apply(None if act < 0 else act)
            self.num_steps += 1
            self._observe()
        if rng.bit_generator.state != rng_now or self.num_steps != steps:
            raise RuntimeError(f"the Python simulator's replay of this episode did not end where the episode "
                               f"stood after {steps} steps (the generator or the step count differ); please "
                               "report it, with the scenario and seed")
        self.fallbacks, self.agents = fallbacks, agents
        self._last, self._objectives_last = last, objectives_last

    def __getstate__(self) -> dict:
        """A copy or a pickle carries the episode as its start and its decisions: the engine's
        arrays and the simulator's views do not survive a copy, so the copy plays the episode
        again (:meth:`__setstate__`) and goes on in the Python simulator, bit for bit."""
        if self._live:
            self._hand_off()
        state = self.__dict__.copy()
        state["_engine"] = None
        state["_copy_workload"] = None if self._sim is None else self._sim.workload
        state["_sim"] = None
        state.pop("_renderer", None)
        return state

    def __setstate__(self, state: dict) -> None:
        workload = state.pop("_copy_workload", None)
        self.__dict__.update(state)
        if workload is not None:
            self._sim = _WorkloadOnly(workload)     # what the replay reads of the old simulator
            self._replay_in_python()

    # ------------------------------------------------------------------ helpers
    def _as_action(self, agent: str, action: Any) -> int:
        if type(action) is int and 0 <= action < self._n_actions[agent]:
            return action     # the common case, checked first
        if isinstance(action, (bool, np.bool_)) or not isinstance(action, (int, np.integer)):
            if isinstance(action, np.ndarray) and action.shape == () and np.issubdtype(action.dtype, np.integer):
                action = int(action)
            else:
                raise TypeError(f"{agent}'s action must be an integer, got {action!r} ({type(action).__name__})")
        action = int(action)
        n = self.action_spaces[agent].n
        if not 0 <= action < n:
            raise InvalidActionError(f"{agent}'s action {action} is outside Discrete({n})")
        return action

    def _forbidden(self, invalid: "list[str] | None", agent: str, action: int, why: str) -> list[str]:
        """Raise, or (``"noop"``, ``"fallback"``) add ``agent`` to the agents whose action is ignored or replaced."""
        if self.sched.invalid_action == "raise":
            phase = "ORDER" if self.phase == ORDER else "PLACE"
            raise InvalidActionError(f"{agent}'s action {action} is forbidden in the {phase} phase: {why} "
                                     f"(allowed: {np.flatnonzero(self._mask_of(agent)).tolist()[:20]})"
                                     f"{_INVALID_HINT}")
        return (invalid or []) + [agent]

    def _fallback_action(self, mask: np.ndarray) -> Optional[int]:
        """The action played instead of a forbidden one: the lowest allowed (``"fallback"``, FIFO's
        choice in ORDER, first-fit's in PLACE), or None (``"noop"``: nothing is played)."""
        return int(np.argmax(mask)) if self.sched.invalid_action == "fallback" else None

    def _guard_zero_time_restart(self, running: np.ndarray) -> None:
        """Forbid preempting a job that was already preempted ``MAX_PREEMPTIONS_PER_INSTANT`` times
        in this very instant (and restarted since).

        Without it a policy that always takes its lowest allowed action preempts a job, restarts
        it and preempts it again forever while the clock stands still. The bound guarantees that
        every instant ends (at most that many preemptions per job per instant) without changing
        any scheduling rule: no baseline preempts a job twice in one instant, and random masked
        exploration rarely more than a few times (11 in the 110,000-step digest episode), so the
        v0 results are unchanged (benchmarks/episode_digests.py).
        """
        counts = self._preempted_now[1]
        mask, k = self._order_mask, self.builder.K
        for i, job in enumerate(running.tolist()):
            if counts.get(job, 0) >= MAX_PREEMPTIONS_PER_INSTANT:
                mask[k + i] = 0
        if not mask.any():      # never leave the orderer without a move (cannot happen: a running
            mask[-1] = 1        # job always has a future completion, so advance is allowed)

    def _mask_of(self, agent: str) -> np.ndarray:
        return self._order_mask if agent == "orderer" else self._place_mask

    def _skip_idle_epochs(self, fused: bool = True) -> None:
        """Advance through decision epochs where ``advance`` is the only legal action
        (``fused``: see ``ClusterSimulator.advance_while_idle``)."""
        self._sim.advance_while_idle(self.builder.K, self.builder.R > 0, fused)

    def _observe(self) -> dict:
        placing = self.phase == PLACE
        if placing:
            pending, running = self._cand_pending, self._cand_running
        else:
            pending, running = self.builder.candidates()
            self._cand_pending, self._cand_running = pending, running
        builder = self.builder
        # The compiled path of the default layout: its arrays, no intermediate dict (a builder
        # that overrides build, as the extended layout's, goes through build).
        if builder._kernel is not None and type(builder) is ObservationBuilder:
            jobs, machines, g, p, self._order_mask, self._place_mask, _ = builder._build_arrays(placing, pending, running)
        else:
            feats, self._order_mask, self._place_mask = builder.build(placing, pending, running)
            jobs, machines, g, p = feats["jobs"], feats["machines"], feats["global"], feats["placing"]
        if not placing and self._preempted_now[1] and self._preempted_now[0] == self._sim.now:
            self._guard_zero_time_restart(running)
        if not placing:
            self._job_ids = builder.candidate_ids(pending, running)
        return {
            "orderer": {"jobs": jobs, "machines": machines, "global": g, "placing": p, "action_mask": self._order_mask},
            "placer": {"jobs": jobs, "machines": machines, "global": g, "placing": p, "action_mask": self._place_mask},
        }

    def _reward(self) -> float:
        """The step's reward (the compiled step computes the default one itself): the reward
        function on what changed since the last step, read from whichever engine runs the episode."""
        sim = self._sim
        if self._live:
            return self._reward_from(self._engine.totals(0), sim)
        return self._reward_from((sim.now, sim.job_seconds, sim.fee, sim.energy_joules, sim.finished_count,
                                 sim.jobs.finish), sim)

    def _reward_from(self, totals: tuple, sim: ClusterSimulator) -> float:
        """The reward function on the change of the episode's ``totals`` (now, job-seconds, fee,
        energy in joules, jobs finished, finish times) since the last step; ``sim``: the episode's
        simulator, for the workload. The compiled paths call it with the engine's totals."""
        now, job_seconds, fee, energy, finished, finish = totals
        t0, js0, fee0, en0, fin0 = self._last
        # dt, job_seconds, fee, energy_kwh, jobs_finished, num_jobs
        objectives = None
        if getattr(self.reward_fn, "needs_objectives", False):
            from cluster_env.core.objectives import objective_totals

            totals = objective_totals(sim.workload, finish, now)
            before = self._objectives_last or totals._replace(hp_seconds=0.0, be_seconds=0.0, deadline_misses=0)
            objectives = totals._replace(hp_seconds=totals.hp_seconds - before.hp_seconds,
                                         be_seconds=totals.be_seconds - before.be_seconds,
                                         deadline_misses=totals.deadline_misses - before.deadline_misses)
            self._objectives_last = totals
        stats = StepStats(now - t0, job_seconds - js0, fee - fee0, (energy - en0) / 3.6e6,
                          finished - fin0, sim.num_jobs, objectives)
        self._last = (now, job_seconds, fee, energy, finished)
        return float(self.reward_fn(stats))

    def _info(self) -> dict:
        sim = self._sim
        if self._live:
            _, now, placing, _, _, _, tick = self._engine.scalars()
            info = {"phase": "place" if self.phase == PLACE else "order", "time": now,
                    "job_ids": self._job_ids, "placing_job": placing, "tick": tick}
        else:
            placing = sim.placing
            info = {"phase": "place" if self.phase == PLACE else "order", "time": sim.now,
                    "job_ids": self._job_ids, "placing_job": placing, "tick": sim.last_tick == sim.now}
        if self.phase == PLACE and self.sched.spread_floor:
            self._spread_floor_info(info, placing)
        return info

    def _spread_floor_info(self, info: dict, job: int) -> None:
        floor = float(self._sim.spread_floor[job])
        if floor == floor:   # the all-reduce model's floor for the spread guard (NaN: Gavel's)
            info["spread_floor"] = floor

    def _final_infos(self, infos: dict) -> dict:
        metrics = self.metrics()
        for a in infos:
            infos[a]["metrics"] = metrics
            infos[a]["offered_load"] = self.offered_load
            infos[a]["fallbacks"] = self.fallbacks
        return infos

    # ------------------------------------------------------------------ public extras
    def count_fallback(self) -> None:
        """Count one decision that a view's fallback rule replaced before this env saw it (the
        single-agent views replace a forbidden action themselves: :attr:`fallbacks` counts both)."""
        self.fallbacks += 1

    def metrics(self) -> dict[str, float]:
        """Metrics of the current episode so far (all of them once it has ended)."""
        if self._sim is None:
            raise RuntimeError("call reset() first")
        if self._live:
            return self._engine.metrics(0)
        sim = self._sim
        return episode_metrics(
            sim.workload, sim.submit, sim.jobs.first_start, sim.jobs.finish, sim.ideal_runtime,
            total_gpus=sim.total_gpus, busy_gpu_seconds=sim.busy_gpu_seconds, total_fee=sim.fee,
            energy_joules=sim.energy_joules, preemptions=sim.preemptions, end_time=sim.now,
            held=sim.jobs.held, allocations=sim.allocation_log)

    def render(self):
        if self._sim is None:
            raise RuntimeError("call reset() first")
        from cluster_env.envs import render as renderer

        phase = "place" if self.phase == PLACE else "order"
        if self.render_mode in ("rgb_array", "human"):
            if getattr(self, "_renderer", None) is None:
                self._renderer = renderer.Renderer(self.metadata["render_fps"])
            if self.render_mode == "human":
                return self._renderer.human(self.sim, phase)
            return self._renderer.rgb(self.sim, phase)
        if self.render_mode == "ansi":
            return renderer.render_ansi(self.sim, "place" if self.phase == PLACE else "order")
        return None

    def close(self) -> None:
        if getattr(self, "_renderer", None) is not None:
            self._renderer.close()
            self._renderer = None
        self.sim = None

    def state(self) -> np.ndarray:
        """Global state for centralised critics: the flattened shared features."""
        if self._sim is None:
            raise RuntimeError("call reset() first")
        if self._live:
            return self._engine.features()
        feats, _, _ = self.builder.build(self.phase == PLACE, self._cand_pending, self._cand_running)
        return np.concatenate([feats[k].ravel() for k in ("jobs", "machines", "global", "placing")])

    @functools.cached_property
    def state_space(self):
        from gymnasium import spaces

        size = sum(int(np.prod(self.observation_spaces["orderer"][k].shape))
                   for k in ("jobs", "machines", "global", "placing"))
        return spaces.Box(-1.0, np.inf, (size,), np.float32)
