"""Reward functions: injected into the environment, called once per step.

A reward function receives a :class:`StepStats` (what happened since the previous step) and
returns a Python float. The default, :class:`JCTReward`, is the negative time jobs spent in the
system, divided by ``num_jobs * time_unit``: an episode's return is minus the average JCT in
``time_unit`` seconds (hours by default).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Optional, Protocol

from cluster_env.core.objectives import ObjectiveTotals


class StepStats(NamedTuple):
    """What changed between two consecutive steps (immutable; built at every step, so a tuple)."""

    dt: float                 # simulated seconds elapsed
    job_seconds: float        # integral of the number of jobs in the system over dt
    fee: float                # US dollars spent on held GPUs over dt
    energy_kwh: float         # energy drawn by the cluster over dt
    jobs_finished: int        # jobs that finished during the step
    num_jobs: int             # jobs of the episode
    # Filled only for a reward with ``needs_objectives = True`` (None otherwise): the change over
    # the step of the service-objective totals (cluster_env.core.objectives.objective_totals).
    objectives: Optional[ObjectiveTotals] = None


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


@dataclass(frozen=True)
class ObjectiveReward:
    """A weighted combination of the service objectives (docs/objectives.md, "Rewards"); each
    term's episode return is minus the objective's episode value:

    * ``jct``: the :class:`JCTReward` term (return: -average JCT in ``time_unit``);
    * ``high_priority`` / ``best_effort``: -(time in the system of that class's jobs) / (its jobs
      x ``time_unit``) (return: -the class's average JCT, unfinished jobs counted to the end);
    * ``deadline``: -(deadline jobs newly missed) / (deadline jobs) (return: attainment - 1, a job
      unfinished past its deadline counted as missed when it passes it);
    * ``fee`` / ``energy``: dollars / kWh per job, as :class:`CostAwareReward`.

    The default weights (1 on ``jct`` and 1 on ``deadline``) trade one hour of average JCT for
    every missed deadline share of 1; set the weights to pose your own objective.
    """

    jct: float = 1.0
    high_priority: float = 0.0
    best_effort: float = 0.0
    deadline: float = 1.0
    fee: float = 0.0
    energy: float = 0.0
    time_unit: float = 3600.0
    needs_objectives = True

    def __call__(self, stats: StepStats) -> float:
        n = max(stats.num_jobs, 1)
        total = -self.jct * float(stats.job_seconds) / (n * self.time_unit)
        total -= self.fee * float(stats.fee) / n + self.energy * float(stats.energy_kwh) / n
        o = stats.objectives
        if o is not None:
            total -= self.high_priority * o.hp_seconds / (max(o.num_hp, 1) * self.time_unit)
            total -= self.best_effort * o.be_seconds / (max(o.num_be, 1) * self.time_unit)
            total -= self.deadline * o.deadline_misses / max(o.num_deadline, 1)
        return float(total)


REWARDS = {"jct": JCTReward, "cost": CostAwareReward, "objectives": ObjectiveReward}


def make_reward(spec: "str | RewardFunction | None") -> RewardFunction:
    """A reward function from a name (``"jct"``, ``"cost"``, ``"objectives"``), a callable, or None (default)."""
    if spec is None:
        return JCTReward()
    if isinstance(spec, str):
        if spec not in REWARDS:
            raise ValueError(f"unknown reward {spec!r}; choose one of {sorted(REWARDS)} or pass a callable")
        return REWARDS[spec]()
    if not callable(spec):
        raise TypeError(f"reward must be a name or a callable taking StepStats, got {type(spec).__name__}")
    return spec
