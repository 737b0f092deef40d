"""Parameters of the world model and of the scheduling interface.

Every effect of the world model can be switched off on its own (ablation). The defaults and the
data each one comes from are documented in ``docs/world_model.md``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from cluster_env.world.fluctuation import DEFAULT_FLUCTUATION, FluctuationParams
from cluster_env.world.throughputs import DEFAULT_CONTENTION_ALPHA

# Restart overhead after a preemption: the job reloads its checkpoint and warms up again.
# ASSUMPTION, "tens of seconds" (DESIGN section 2): restarting a training job costs checkpoint
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


@dataclass(frozen=True)
class WorldConfig:
    """The world model: which effects are on and their parameters."""

    reference_gpu: str = "V100"          # durations are runtimes on this GPU type
    static_factors: bool = True          # unbalanced machines: a static speed factor per machine
    fluctuation: bool = True             # mean-reverting fluctuation and straggler episodes
    contention: bool = True              # jobs sharing a machine slow each other
    spread_penalty: bool = True          # a job spread over machines pays Gavel's measured penalty
    restart_overhead: float = DEFAULT_RESTART_OVERHEAD_S   # seconds; 0 switches it off
    fluctuation_params: FluctuationParams = DEFAULT_FLUCTUATION
    quiet_fluctuation_interval: float = DEFAULT_QUIET_FLUCTUATION_INTERVAL_S   # s, while no job waits
    contention_alpha: float = DEFAULT_CONTENTION_ALPHA
    measurement_noise: float = DEFAULT_MEASUREMENT_NOISE
    measurement_tau: float = DEFAULT_MEASUREMENT_TAU_S

    def all_effects_off(self) -> "WorldConfig":
        """Textbook dynamics: every job runs at its nominal speed, no overhead."""
        return replace(self, static_factors=False, fluctuation=False, contention=False,
                       spread_penalty=False, restart_overhead=0.0, measurement_noise=0.0)

    def validate(self) -> None:
        if self.restart_overhead < 0:
            raise ValueError(f"restart_overhead must be >= 0, got {self.restart_overhead}")
        if self.contention_alpha < 0:
            raise ValueError(f"contention_alpha must be >= 0, got {self.contention_alpha}")
        if self.quiet_fluctuation_interval <= 0:
            raise ValueError("quiet_fluctuation_interval must be > 0")
        if self.measurement_noise < 0 or self.measurement_tau <= 0:
            raise ValueError("measurement_noise must be >= 0 and measurement_tau > 0")


@dataclass(frozen=True)
class SchedulingConfig:
    """What schedulers may do and see."""

    preemption: bool = False             # the orderer may preempt running jobs
    clairvoyant: bool = False            # job durations are visible in observations
    pending_window: int = 32             # K: pending jobs shown (oldest first)
    running_window: int = 16             # R: running jobs shown as preemption candidates (if preemption)
    scheduling_tick: float = DEFAULT_SCHEDULING_TICK_S   # decision epoch period when preemption is on
    invalid_action: str = "raise"        # "raise" or "noop" for agents that cannot mask
    max_steps: int | None = None         # truncation after this many steps
    max_time: float | None = None        # truncation when the clock passes this (s)

    def validate(self) -> None:
        if self.pending_window < 1:
            raise ValueError(f"pending_window must be >= 1, got {self.pending_window}")
        if self.running_window < 0:
            raise ValueError(f"running_window must be >= 0, got {self.running_window}")
        if self.invalid_action not in ("raise", "noop"):
            raise ValueError(f"invalid_action must be 'raise' or 'noop', got {self.invalid_action!r}")
        if self.scheduling_tick <= 0:
            raise ValueError("scheduling_tick must be > 0")


def split_overrides(overrides: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Sort keyword overrides into world-model, scheduling and other keys."""
    world_keys = set(WorldConfig.__dataclass_fields__)
    sched_keys = set(SchedulingConfig.__dataclass_fields__)
    world = {k: v for k, v in overrides.items() if k in world_keys}
    sched = {k: v for k, v in overrides.items() if k in sched_keys}
    other = {k: v for k, v in overrides.items() if k not in world_keys and k not in sched_keys}
    return world, sched, other


__all__ = ["WorldConfig", "SchedulingConfig", "split_overrides"]
