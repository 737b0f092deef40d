"""Placers: on which machine the job being placed takes its next GPUs (the PLACE phase).

The placer's mask allows a machine when it has a free GPU of a type the job may use; the job takes
as many free GPUs there as it still needs, and the placer is asked again until it holds them all.
Every placer reads only the observation: free GPUs, measured speeds, the job's nominal speed per
machine (``job_speed``, Gavel's public table) and the GPUs it still needs.

Public names (``__all__``): the placers (:class:`FirstFit`, :class:`BestFit`, :class:`Spread`,
:class:`FastestFirst`, :class:`OraclePlacer`, :class:`RandomPlacer`) and the helpers other placers
build on (``dual_agent.priority``'s residual placer does): :func:`allowed_machines` and
:func:`speed_and_fit`.
"""
from __future__ import annotations

import numpy as np

from baselines.obs import M, P, clairvoyant, from_log, machine_free_gpus, placing_need
from baselines.orderers import ClairvoyanceRequired
from baselines.policy import Placer


def allowed_machines(obs: dict) -> np.ndarray:
    """Indices of the machines the mask allows (the last action is the no-op)."""
    return obs["action_mask"][:-1].nonzero()[0]     # np.flatnonzero, minus its overhead


def speed_and_fit(obs: dict, ok: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For the allowed machines ``ok``: the job's expected speed there (its nominal speed on the
    GPU type x the machine's measured speed), their free GPUs, whether each holds the job's whole
    remaining need, and the pool to choose from (those that do, or all when none does)."""
    machines = obs["machines"]
    speed = (machines[ok, M["job_speed"]].astype(np.float64)
             * machines[ok, M["measured_speed"]].astype(np.float64))
    free = machine_free_gpus(machines)[ok]
    whole = free >= placing_need(obs)
    pool = whole if whole.any() else np.ones(len(ok), dtype=bool)
    return speed, free, whole, pool




def _noop_or_first(obs: dict) -> int:
    # Reached only if the mask allows no machine: then only the no-op is legal.
    return int(np.flatnonzero(obs["action_mask"])[0])


class FirstFit(Placer):
    """The lowest-numbered machine with a usable free GPU."""

    name = "first-fit"

    def place(self, obs: dict, info: dict) -> int:
        mask = obs["action_mask"]
        first = int(mask.argmax())        # the lowest allowed action
        if mask[first] and first < len(mask) - 1:
            return first
        return _noop_or_first(obs)


class BestFit(Placer):
    """Consolidating best fit: the machine whose free GPUs hold the whole remaining need most
    tightly; if none can hold it, the one with the most free GPUs (fewest pieces)."""

    name = "consolidate"

    def place(self, obs: dict, info: dict) -> int:
        ok = allowed_machines(obs)
        if not len(ok):
            return _noop_or_first(obs)
        free = machine_free_gpus(obs["machines"])[ok]
        need = placing_need(obs)
        whole = free >= need
        if whole.any():
            # argmin returns the first minimum: ties go to the lowest-numbered machine.
            cand = np.where(whole, free, np.iinfo(np.int64).max)
            return int(ok[int(np.argmin(cand))])
        return int(ok[int(np.argmax(free))])


class Spread(Placer):
    """Load spreading (worst fit): the machine with the largest free fraction, then the fewest
    running jobs; spreads load to limit contention, at the price of fragmentation."""

    name = "spread"

    def place(self, obs: dict, info: dict) -> int:
        ok = allowed_machines(obs)
        if not len(ok):
            return _noop_or_first(obs)
        machines = obs["machines"]
        frac = machines[ok, M["free_frac"]].astype(np.float64)
        jobs = machines[ok, M["jobs"]].astype(np.float64)
        order = np.lexsort((ok, jobs, -frac))
        return int(ok[order[0]])


class FastestFirst(Placer):
    """Heterogeneity-aware: the machine where the job runs fastest, judged by the job type's
    nominal speed on the machine's GPU type times the machine's measured speed.

    A job split over machines runs at its slowest part's speed and pays Gavel's spread penalty,
    so a machine that can hold the job's whole remaining need is preferred whenever one exists;
    among those (or, if none, among all) the fastest wins, and near ties (within ``tolerance``)
    go to the tightest fit (whole) or the most free GPUs (fewest pieces).

    Args:
        tolerance: relative speed difference treated as a tie.
    """

    name = "fastest"

    def __init__(self, tolerance: float = 0.02) -> None:
        self.tolerance = float(tolerance)

    def place(self, obs: dict, info: dict) -> int:
        ok = allowed_machines(obs)
        if not len(ok):
            return _noop_or_first(obs)
        speed, free, whole, pool = speed_and_fit(obs, ok)
        best = speed[pool].max()
        near = pool & (speed >= best * (1.0 - self.tolerance))
        if whole.any():
            return int(ok[int(np.argmin(np.where(near, free, np.iinfo(np.int64).max)))])
        return int(ok[int(np.argmax(np.where(near, free, -1)))])


class OraclePlacer(Placer):
    """CLAIRVOYANT REFERENCE, reads durations (not an upper bound): a size- and speed-aware placer (the ``oracle`` family).

    Speed is :class:`FastestFirst`'s (the job type's nominal speed on the machine's GPU type x
    the machine's measured speed); size is the job's duration at nominal speed (the placing
    ``duration_log`` feature, visible only with ``clairvoyant=True``). Machines that can hold the
    job's whole remaining need are preferred whenever one exists. Among them (or, if none, among
    all) a machine is acceptable when the job runs there within ``tolerance`` of the fastest
    speed, or when the time it would lose there, ``duration x (1/speed - 1/fastest)``, is at most
    ``slack`` seconds: a short job takes a slower machine and leaves the fast GPUs to long jobs.
    The acceptable machine that fits tightest wins (fewest free GPUs; if none holds the whole
    need, the most free GPUs, fewest pieces), then the slowest, then the lowest index. It raises
    :class:`baselines.ClairvoyanceRequired` when durations are hidden.

    Args:
        slack: seconds a job may lose by running on a slower machine.
        tolerance: relative speed difference treated as a tie.
    """

    name = "oracle"
    env_overrides = {"clairvoyant": True}

    def __init__(self, slack: float = 300.0, tolerance: float = 0.02) -> None:
        if not slack >= 0:
            raise ValueError(f"slack must be >= 0, got {slack!r}")
        self.slack, self.tolerance = float(slack), float(tolerance)

    def place(self, obs: dict, info: dict) -> int:
        if not clairvoyant(obs):
            raise ClairvoyanceRequired(
                "the oracle placer reads job durations but this environment hides them: create it "
                "with clairvoyant=True (baselines.evaluate does so from the policy's env_overrides)")
        ok = allowed_machines(obs)
        if not len(ok):
            return _noop_or_first(obs)
        speed, free, whole, pool = speed_and_fit(obs, ok)
        best = speed[pool].max()
        duration = float(from_log(np.asarray(obs["placing"][P["duration_log"]])))
        with np.errstate(divide="ignore"):
            lost = duration * (1.0 / speed - 1.0 / best)
        accept = pool & ((speed >= best * (1.0 - self.tolerance)) | (lost <= self.slack))
        tight = free if whole.any() else -free
        cand = accept.nonzero()[0]
        # lexsort: the last key is the primary one.
        order = np.lexsort((ok[cand], speed[cand], tight[cand]))
        return int(ok[cand[order[0]]])


class RandomPlacer(Placer):
    """A uniformly random allowed machine."""

    name = "random"

    def place(self, obs: dict, info: dict) -> int:
        ok = allowed_machines(obs)
        return int(self.rng.choice(ok)) if len(ok) else _noop_or_first(obs)


__all__ = ["BestFit", "FastestFirst", "FirstFit", "OraclePlacer", "RandomPlacer", "Spread", "allowed_machines",
           "speed_and_fit"]
