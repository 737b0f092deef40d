"""Reward functions: injected into the environment, called once per step.

A reward function receives a :class:`StepStats` (what happened since the previous step) and
returns a Python float. The default, :class:`JCTReward`, is the negative time jobs spent in the
system, divided by ``num_jobs * time_unit``: an episode's return is minus the average JCT in
``time_unit`` seconds (hours by default).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol


class StepStats(NamedTuple):
    """What changed between two consecutive steps (immutable; built at every step, so a tuple)."""

    dt: float                 # simulated seconds elapsed
    job_seconds: float        # integral of the number of jobs in the system over dt
    fee: float                # US dollars spent on held GPUs over dt
    energy_kwh: float         # energy drawn by the cluster over dt
    jobs_finished: int        # jobs that finished during the step
    num_jobs: int             # jobs of the episode


class RewardFunction(Protocol):
    def __call__(self, stats: StepStats) -> float: ...


@dataclass(frozen=True)
class JCTReward:
    """-(job-seconds in the system) / (num_jobs x time_unit): the return is -avg JCT in time units."""

    time_unit: float = 3600.0

    def __call__(self, stats: StepStats) -> float:
        return -float(stats.job_seconds) / (max(stats.num_jobs, 1) * self.time_unit)


@dataclass(frozen=True)
class CostAwareReward:
    """JCT term plus weighted fee (per job, in dollars) and energy (per job, in kWh) terms."""

    fee_weight: float = 0.0
    energy_weight: float = 0.0
    time_unit: float = 3600.0

    def __call__(self, stats: StepStats) -> float:
        n = max(stats.num_jobs, 1)
        jct = -float(stats.job_seconds) / (n * self.time_unit)
        return jct - self.fee_weight * float(stats.fee) / n - self.energy_weight * float(stats.energy_kwh) / n


REWARDS = {"jct": JCTReward, "cost": CostAwareReward}


def make_reward(spec: "str | RewardFunction | None") -> RewardFunction:
    """A reward function from a name (``"jct"``, ``"cost"``), a callable, or None (default)."""
    if spec is None:
        return JCTReward()
    if isinstance(spec, str):
        if spec not in REWARDS:
            raise ValueError(f"unknown reward {spec!r}; choose one of {sorted(REWARDS)} or pass a callable")
        return REWARDS[spec]()
    if not callable(spec):
        raise TypeError(f"reward must be a name or a callable taking StepStats, got {type(spec).__name__}")
    return spec
