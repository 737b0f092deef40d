"""Parameters of the world model and of the scheduling interface.

Every effect of the world model can be switched off on its own (ablation). The defaults and the
data each one comes from are documented in ``docs/world_model.md``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Optional

import numpy as np

from cluster_env.world.fluctuation import DEFAULT_FLUCTUATION, FluctuationParams
from cluster_env.world.interconnect import GAVEL_TESTBED_GBPS, SPREAD_MODELS, validate_interconnect_overrides
from cluster_env.world.comm_calibration import COMM_SOURCES
from cluster_env.world.measured_speeds import SPEED_SOURCES
from cluster_env.world.throughputs import DEFAULT_CONTENTION_ALPHA, GAVEL_SHAPES

# Restart overhead after a preemption: the job reloads its checkpoint and warms up again.
# ASSUMPTION, "tens of seconds" (docs/design.md section 2): restarting a training job costs checkpoint
# reload, process start and warm-up; specialised runtimes bring it down to ~20 s (TrainMover,
# 2024, on 1,024-GPU jobs), stock frameworks take longer. We take 30 s.
DEFAULT_RESTART_OVERHEAD_S = 30.0

# Scheduling tick when preemption is on: a decision epoch at least this often so that a
# preempting scheduler can act between arrivals and completions.
DEFAULT_SCHEDULING_TICK_S = 300.0

# Fluctuation update period while no job waits: no decision depends on it then, so the clock need
# not stop every ``fluctuation_params.interval`` seconds for days of a lone long job; the
# transitions are exact, so only the time resolution of the speed changes.
DEFAULT_QUIET_FLUCTUATION_INTERVAL_S = 3600.0

# Standard deviation of the multiplicative noise on a measured machine speed (observed progress).
DEFAULT_MEASUREMENT_NOISE = 0.02
# Time constant (s) of the exponential moving average of measured machine speeds.
DEFAULT_MEASUREMENT_TAU_S = 600.0


#: Values of ``WorldConfig.spread_reference``.
SPREAD_REFERENCES = ("fewest_machines", "one_machine")

#: Sane ranges (inclusive) of the world parameters; ``WorldConfig.validate`` rejects values
#: outside them. They span every value the calibration or the literature supports with a wide
#: margin; beyond them the model is no longer a GPU cluster (a contention slowdown of 1e300, a
#: log-speed spread of 5 = 150x) and the clock can run away (one step took 90 s with the clock at
#: 4e9 s). Documented in docs/reference.md, "Guarantees".
WORLD_RANGES: dict[str, tuple[float, float]] = {
    "restart_overhead": (0.0, 86_400.0),            # s: at most a day per restart
    "contention_alpha": (0.0, 10.0),                # default 0.1: slowdown 1 + alpha x comm x crowd
    "quiet_fluctuation_interval": (1.0, 86_400.0),  # s
    "measurement_noise": (0.0, 1.0),                # std of the multiplicative noise
    "measurement_tau": (1.0, 1e6),                  # s
    "gavel_testbed_gbps": (0.1, 10_000.0),          # Gb/s; default 10 (spread_model="allreduce")
}
#: Sane ranges of :class:`FluctuationParams` inside a world (the calibration fits its own values).
FLUCTUATION_RANGES: dict[str, tuple[float, float]] = {
    "static_sigma": (0.0, 1.0),                     # default 0.072 (log-normal sigma)
    "sigma": (0.0, 1.0),                            # default 0.048 (stationary std of the log speed)
    "theta": (1e-6, 1.0),                           # 1/s; default 1/80
    "interval": (1.0, 86_400.0),                    # s; default 300
    "straggler_rate": (0.0, 0.1),                   # onsets per machine per s; default 4e-5
    "straggler_mean_duration": (1.0, 1e6),          # s; default 780
    "straggler_slowdown": (0.01, 1.0),              # speed multiplier while straggling; default 0.2
}
#: Upper bounds of the observation windows (inclusive). The observation arrays grow with them
#: (about 60 bytes per pending slot and per running slot in every observation, plus one action
#: each), so a typo such as ``pending_window=1000000000`` asked for 104 GiB before any check; the
#: registered scenarios use 8 to 256, and 65,536 slots (a few MiB per observation) hold every
#: pending job of any trace window the package ships. Documented in docs/reference.md, "Guarantees".
MAX_PENDING_WINDOW = 65_536
MAX_RUNNING_WINDOW = 65_536

#: Sane range of a scenario's ``time_scale`` (multiplies submit times): 1000x compressed to
#: 1000x stretched; beyond, a makespan of 4e303 s is not a result.
TIME_SCALE_RANGE = (1e-3, 1e3)


@dataclass(frozen=True)
class WorldConfig:
    """The world model: which effects are on and their parameters."""

    reference_gpu: str = "V100"          # durations are runtimes on this GPU type
    static_factors: bool = True          # unbalanced machines: a static speed factor per machine
    fluctuation: bool = True             # mean-reverting fluctuation and straggler episodes
    contention: bool = True              # jobs sharing a machine slow each other
    spread_penalty: bool = True          # a job spread over machines pays Gavel's measured penalty
    # What the spread penalty is relative to. "fewest_machines": a job pays it only when placed on
    # more machines than the fewest that can hold it (a trace's 16-GPU job on 8-GPU machines was
    # measured spanning two, so spanning two is its baseline). "one_machine": any job on more than
    # one machine pays it, even one that can never fit on one (the v0 scenarios' rule, kept
    # bit-for-bit; it double-counts the penalty of jobs larger than a machine).
    spread_reference: str = "fewest_machines"
    # How the spread penalty is priced. "gavel": Gavel's measured unconsolidated/consolidated ratio
    # of the GPU type's anchor (K80/P100/V100) at the job's GPU bucket, one multiplier whatever the
    # split or the network (every v0/v1 scenario). "allreduce": the job's communication share,
    # derived from that ratio at Gavel's testbed network, priced on this cluster's interconnect by
    # what crosses machines (cluster_env.world.interconnect; docs/world_model.md "Interconnect").
    spread_model: str = "gavel"
    # spread_model="allreduce" only: overrides of the per-GPU-type interconnect defaults
    # (cluster_env.world.interconnect.INTERCONNECT_DEFAULTS), as (gpu type, field, Gb/s) triples,
    # field one of nic_per_gpu, nic_per_machine, intra; and Gavel's testbed bandwidth (ASSUMPTION).
    interconnect: tuple = ()
    gavel_testbed_gbps: float = GAVEL_TESTBED_GBPS
    # Where the speeds of GPU types Gavel did not measure come from: "spec-sheet" (the catalog's
    # sqrt(compute x bandwidth) rule, every v0-v2 scenario), "measured" (the Sia/Pollux profiles
    # where they measure the type, median over the batch sizes both servers profiled; the rule only
    # as a fallback: cluster_env.world.measured_speeds) or "measured-best" (the same profiles, each
    # server at its best one-GPU throughput).
    speeds: str = "spec-sheet"
    # Gavel's consolidated throughputs "raw" (v0-v2) or "capped" (per-GPU throughput never rises
    # with the GPU count: cluster_env.world.throughputs.GAVEL_SHAPES; docs/world_model.md).
    gavel_shape: str = "raw"
    # spread_model="allreduce" only: where each job's communication demand comes from: "gavel"
    # (Gavel's ratio at the assumed testbed network, gavel_testbed_gbps) or "measured" (Pollux's
    # multi-node runs where a profile covers the job type: cluster_env.world.comm_calibration).
    comm_source: str = "gavel"
    restart_overhead: float = DEFAULT_RESTART_OVERHEAD_S   # seconds; 0 switches it off
    fluctuation_params: FluctuationParams = DEFAULT_FLUCTUATION
    quiet_fluctuation_interval: float = DEFAULT_QUIET_FLUCTUATION_INTERVAL_S   # s, while no job waits
    contention_alpha: float = DEFAULT_CONTENTION_ALPHA
    measurement_noise: float = DEFAULT_MEASUREMENT_NOISE
    measurement_tau: float = DEFAULT_MEASUREMENT_TAU_S

    def __post_init__(self) -> None:
        # Lists (JSON, a CLI's [..]) become tuples: the config is frozen and hashable.
        if isinstance(self.interconnect, list):
            object.__setattr__(self, "interconnect", tuple(
                tuple(e) if isinstance(e, list) else e for e in self.interconnect))

    def all_effects_off(self) -> "WorldConfig":
        """Textbook dynamics: every job runs at its nominal speed, no overhead."""
        return replace(self, static_factors=False, fluctuation=False, contention=False,
                       spread_penalty=False, restart_overhead=0.0, measurement_noise=0.0)

    def validate(self) -> None:
        # Types and finiteness first: a string compared with a number failed deep inside with
        # an unrelated TypeError, and NaN passed every "< 0" check and poisoned the clock.
        if not isinstance(self.reference_gpu, str):
            raise TypeError(f"reference_gpu must be a GPU type name, got {self.reference_gpu!r}")
        for name in ("static_factors", "fluctuation", "contention", "spread_penalty"):
            check_bool(name, getattr(self, name))
        if self.spread_reference not in SPREAD_REFERENCES:
            raise ValueError(f"spread_reference must be one of {SPREAD_REFERENCES}, got {self.spread_reference!r}")
        if self.spread_model not in SPREAD_MODELS:
            raise ValueError(f"spread_model must be one of {SPREAD_MODELS}, got {self.spread_model!r}")
        validate_interconnect_overrides(self.interconnect)
        if self.speeds not in SPEED_SOURCES:
            raise ValueError(f"speeds must be one of {SPEED_SOURCES}, got {self.speeds!r}")
        if self.comm_source not in COMM_SOURCES:
            raise ValueError(f"comm_source must be one of {COMM_SOURCES}, got {self.comm_source!r}")
        if self.gavel_shape not in GAVEL_SHAPES:
            raise ValueError(f"gavel_shape must be one of {GAVEL_SHAPES}, got {self.gavel_shape!r}")
        check_number("gavel_testbed_gbps", self.gavel_testbed_gbps, positive=True)
        if not isinstance(self.fluctuation_params, FluctuationParams):
            raise TypeError(f"fluctuation_params must be a FluctuationParams, got "
                            f"{type(self.fluctuation_params).__name__}")
        check_number("restart_overhead", self.restart_overhead, minimum=0.0)
        check_number("contention_alpha", self.contention_alpha, minimum=0.0)
        check_number("quiet_fluctuation_interval", self.quiet_fluctuation_interval, positive=True)
        check_number("measurement_noise", self.measurement_noise, minimum=0.0)
        check_number("measurement_tau", self.measurement_tau, positive=True)
        for name, (lo, hi) in WORLD_RANGES.items():
            check_range(name, getattr(self, name), lo, hi)
        for name, (lo, hi) in FLUCTUATION_RANGES.items():
            check_range(f"fluctuation_params.{name}", getattr(self.fluctuation_params, name), lo, hi)


#: What a forbidden action does: raise; be ignored ("noop", the step still counts); or be replaced
#: by the acting agent's lowest allowed action ("fallback", the single-agent views' default), so
#: that an agent trained on a view is scored under the rule it trained with.
INVALID_ACTIONS = ("raise", "noop", "fallback")



#: The step bound of an episode when a caller needs one and none is set (``max_steps``): this many
#: steps per job of the episode (``ClusterParallelEnv.default_max_steps``; the single-agent views
#: and the harness truncate there). Generous: a legal policy that always advances takes up to ~250.
DEFAULT_STEPS_PER_JOB = 1000


@dataclass(frozen=True)
class SchedulingConfig:
    """What schedulers may do and see."""

    preemption: bool = False             # the orderer may preempt running jobs
    clairvoyant: bool = False            # job durations are visible in observations
    pending_window: int = 32             # K: pending jobs shown (oldest first)
    running_window: int = 16             # R: running jobs shown as preemption candidates (if preemption)
    scheduling_tick: float = DEFAULT_SCHEDULING_TICK_S   # decision epoch period when preemption is on
    invalid_action: str = "raise"        # "raise", or "noop" / "fallback" for agents that cannot mask
    max_steps: int | None = None         # truncation after this many steps
    max_time: float | None = None        # truncation when the clock passes this (s)
    # The PLACE-phase info carries ``spread_floor`` (under the all-reduce spread model): the lowest
    # multiplier that model can charge the job, which the speed-aware placers' spread guard uses
    # instead of Gavel's worst case. Off in the scenarios before world model v3, whose
    # recorded scores and shipped validation windows were made with Gavel's bound.
    spread_floor: bool = False

    def validate(self) -> None:
        check_bool("preemption", self.preemption)
        check_bool("spread_floor", self.spread_floor)
        check_bool("clairvoyant", self.clairvoyant)
        check_int("pending_window", self.pending_window, minimum=1, maximum=MAX_PENDING_WINDOW)
        check_int("running_window", self.running_window, minimum=0, maximum=MAX_RUNNING_WINDOW)
        if self.invalid_action not in INVALID_ACTIONS:
            raise ValueError(f"invalid_action must be one of {INVALID_ACTIONS}, got {self.invalid_action!r}")
        check_number("scheduling_tick", self.scheduling_tick, positive=True)
        if self.max_steps is not None:
            check_int("max_steps", self.max_steps, minimum=1)
        if self.max_time is not None:
            check_number("max_time", self.max_time, positive=True, allow_inf=True)


def check_bool(name: str, value: Any) -> None:
    """True/False (numpy booleans and the integers 0 and 1 too); a string such as "no" is truthy."""
    ok = isinstance(value, (bool, np.bool_)) or (
        isinstance(value, (int, np.integer)) and value in (0, 1))
    if not ok:
        raise TypeError(f"{name} must be True or False, got {value!r}")


def check_int(name: str, value: Any, minimum: int, maximum: Optional[int] = None) -> None:
    """An integer (not a bool) of at least ``minimum`` and, where given, at most ``maximum`` (a bound
    that protects the memory: the error names it)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name}={value:,} is above its bound {maximum:,} (arrays grow with it; "
                         f"docs/reference.md, Guarantees)")


def check_number(name: str, value: Any, *, minimum: float | None = None, positive: bool = False,
                  allow_inf: bool = False) -> None:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    if math.isnan(value) or (math.isinf(value) and not allow_inf):
        raise ValueError(f"{name} must be a finite number, got {value}")
    if positive and not value > 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum:g}, got {value}")


def check_range(name: str, value: Any, low: float, high: float) -> None:
    """A number in the sane range [low, high]; the error names the argument and the range."""
    check_number(name, value, positive=low > 0, minimum=0.0 if low == 0 else None)
    if not low <= value <= high:
        raise ValueError(f"{name}={value!r} is outside its sane range [{low:g}, {high:g}] "
                         f"(docs/reference.md, Guarantees)")


def split_overrides(overrides: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Sort keyword overrides into world-model, scheduling and other keys."""
    world_keys = set(WorldConfig.__dataclass_fields__)
    sched_keys = set(SchedulingConfig.__dataclass_fields__)
    world = {k: v for k, v in overrides.items() if k in world_keys}
    sched = {k: v for k, v in overrides.items() if k in sched_keys}
    other = {k: v for k, v in overrides.items() if k not in world_keys and k not in sched_keys}
    return world, sched, other


__all__ = ["FLUCTUATION_RANGES", "MAX_PENDING_WINDOW", "MAX_RUNNING_WINDOW", "TIME_SCALE_RANGE", "WORLD_RANGES",
           "WorldConfig", "SchedulingConfig", "check_range", "split_overrides"]
