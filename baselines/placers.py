"""Placers: on which machine the job being placed takes its next GPUs (the PLACE phase).

The placer's mask allows a machine when it has a free GPU of a type the job may use; the job takes
as many free GPUs there as it still needs, and the placer is asked again until it holds them all.
Every placer reads only the observation: free GPUs, measured speeds, the job's nominal speed per
machine (``job_speed``, Gavel's public table) and the GPUs it still needs.

Public names (``__all__``): the placers (:class:`FirstFit`, :class:`BestFit`, :class:`Spread`,
:class:`FastestFirst`, :class:`OraclePlacer`, :class:`RandomPlacer`), the helpers other placers
build on (``dual_agent.priority``'s residual placer does): :func:`allowed_machines`,
:func:`speed_and_fit`, :func:`split_plan` and :func:`split_pool`, and the speed-aware placers'
guard against needless spreading, :data:`SPREAD_MARGIN`.

The spread guard (``fastest`` and ``oracle``, when no single machine holds the job's remaining
need): each allowed machine is judged by the placement it would lead to, itself plus the fewest
other machines that hold the rest (largest free first), at the pace of that set's slowest machine
times the job's spread ratio when the set goes beyond the fewest machines of the cluster that can
hold the job (the simulator charges the penalty there). A set with more machines than the fewest
possible is taken only when its expected speed beats the best consolidating set's by more than
:data:`SPREAD_MARGIN`; otherwise the placer keeps to the consolidating machines.
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


#: The relative speed gain a placement over more machines than the fewest possible must show
#: before a speed-aware placer takes it: twice the standard deviation of the log-ratio of two
#: equal machines' measured speeds, sqrt(2 x (0.048^2 + 0.02^2)) = 0.074 (the fluctuation's
#: dynamic sigma, ``cluster_env.world.DEFAULT_FLUCTUATION.sigma``, fitted to PAI, and the
#: simulator's measurement noise, ``WorldConfig.measurement_noise``). An ASSUMPTION: that a
#: measured difference below two such deviations is noise. ``spread_margin=0.0`` (with
#: ``tolerance=0.0``) turns the guard down to "spread only for a strictly faster placement";
#: ``math.inf`` never spreads beyond the fewest machines.
SPREAD_MARGIN = 0.15


def split_plan(obs: dict, ok: np.ndarray, speed: np.ndarray, free: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For a job that no allowed machine holds whole: per allowed machine ``ok[i]``, the number of
    machines the job ends on if it takes machine i now and then the fewest others, and the
    expected speed of that placement.

    The others are taken largest free first (ties: faster, then lower index) until they hold the
    rest of the need. The expected speed is the slowest machine's of the set (nominal x measured,
    ``speed``) times the job's spread ratio when the job's machines (those it already holds plus
    the set) outnumber the fewest machines of the cluster that can hold its GPUs, where the
    simulator charges Gavel's penalty. The ratio is read from the observation's ``comm_intensity``
    (one minus Gavel's spread ratio at 8 GPUs, averaged over K80, P100 and V100; the placer does
    not see the GPU type names that index the full ``cluster_env.world.spread_ratio_table``): for
    jobs of 2-4 GPUs it overstates the penalty, which errs toward consolidation. The cluster's
    fewest machines count every machine, of any GPU type (the placer cannot see which full
    machines the job may use).
    """
    machines = obs["machines"]
    need = placing_need(obs)
    n = len(ok)
    order = np.lexsort((ok, -speed, -free))             # largest free, then faster, then lower index
    cum = np.cumsum(free[order])
    slowest = np.minimum.accumulate(speed[order])
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    # c0: how many of the ordered machines hold the rest (need - free_i); when machine i is among
    # them, the set is the ordered prefix that holds the whole need, which includes i.
    c0 = np.minimum(np.searchsorted(cum, need - free, side="left") + 1, n)
    c = min(int(np.searchsorted(cum, need, side="left")), n - 1)
    inside = pos < c0
    pieces = np.where(inside, c + 1, c0 + 1)
    set_speed = np.where(inside, slowest[c], np.minimum(speed, slowest[c0 - 1]))
    capacity = np.cumsum(np.sort(np.rint(machines[:, M["gpus"]].astype(np.float64) * 8.0))[::-1])
    gpus = float(np.rint(np.exp2(float(obs["placing"][P["gpus_log2"]]))))
    fewest = min(int(np.searchsorted(capacity, gpus, side="left")) + 1, len(capacity))
    used = int(round(float(obs["placing"][P["machines_used"]])))
    ratio = 1.0 - float(obs["placing"][P["comm_intensity"]])
    return pieces, np.where(used + pieces > fewest, set_speed * ratio, set_speed)


def split_pool(pieces: np.ndarray, expected: np.ndarray, tolerance: float, spread_margin: float) -> np.ndarray:
    """The machines a speed-aware placer may choose from when the job must be split
    (:func:`split_plan`'s ``pieces`` and ``expected`` speed): those whose placement is within
    ``tolerance`` of the best expected speed if that best beats the best consolidating placement
    (fewest pieces) by more than ``spread_margin``; else the consolidating ones within
    ``tolerance`` of their best."""
    cons = pieces == pieces.min()
    best_cons = expected[cons].max()
    best = expected.max()
    if best > best_cons * (1.0 + spread_margin):
        return expected >= best * (1.0 - tolerance)
    return cons & (expected >= best_cons * (1.0 - tolerance))


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
    among those the fastest wins, near ties (within ``tolerance``) to the tightest fit. When none
    holds it, the job keeps to the fewest machines unless a wider placement is expected to be
    faster by more than ``spread_margin`` (:func:`split_plan`, :func:`split_pool`); among the
    machines allowed, the fewest pieces win, then the most free GPUs, then the fastest, then the
    lowest index.

    Args:
        tolerance: relative speed difference treated as a tie.
        spread_margin: relative speed gain a placement over more machines must show
            (:data:`SPREAD_MARGIN`, an assumption; the compiled engine runs the defaults).
    """

    name = "fastest"

    def __init__(self, tolerance: float = 0.02, spread_margin: float = SPREAD_MARGIN) -> None:
        if not spread_margin >= 0:
            raise ValueError(f"spread_margin must be >= 0, got {spread_margin!r}")
        self.tolerance, self.spread_margin = float(tolerance), float(spread_margin)

    def place(self, obs: dict, info: dict) -> int:
        ok = allowed_machines(obs)
        if not len(ok):
            return _noop_or_first(obs)
        speed, free, whole, pool = speed_and_fit(obs, ok)
        if whole.any():
            best = speed[pool].max()
            near = pool & (speed >= best * (1.0 - self.tolerance))
            return int(ok[int(np.argmin(np.where(near, free, np.iinfo(np.int64).max)))])
        pieces, expected = split_plan(obs, ok, speed, free)
        cand = split_pool(pieces, expected, self.tolerance, self.spread_margin).nonzero()[0]
        # lexsort: the last key is the primary one.
        order = np.lexsort((ok[cand], -speed[cand], -free[cand], pieces[cand]))
        return int(ok[cand[order[0]]])


class OraclePlacer(Placer):
    """CLAIRVOYANT REFERENCE, reads durations (not an upper bound): a size- and speed-aware placer (the ``oracle`` family).

    Speed is :class:`FastestFirst`'s (the job type's nominal speed on the machine's GPU type x
    the machine's measured speed); size is the job's duration at nominal speed (the placing
    ``duration_log`` feature, visible only with ``clairvoyant=True``). Machines that can hold the
    job's whole remaining need are preferred whenever one exists. Among them (or, if none, among
    all) a machine is acceptable when the job runs there within ``tolerance`` of the fastest
    speed, or when the time it would lose there, ``duration x (1/speed - 1/fastest)``, is at most
    ``slack`` seconds: a short job takes a slower machine and leaves the fast GPUs to long jobs.
    When no machine holds the whole need, the machines considered are :func:`split_pool`'s (the
    spread guard of :class:`FastestFirst`, with this placer's ``tolerance`` and
    :data:`SPREAD_MARGIN`). The acceptable machine that fits tightest wins (fewest free GPUs; if
    none holds the whole need, the most free GPUs, fewest pieces), then the slowest, then the
    lowest index. It raises
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
        if not whole.any():
            pieces, expected = split_plan(obs, ok, speed, free)
            pool = split_pool(pieces, expected, self.tolerance, SPREAD_MARGIN)
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


__all__ = ["BestFit", "FastestFirst", "FirstFit", "OraclePlacer", "RandomPlacer", "SPREAD_MARGIN", "Spread",
           "allowed_machines", "speed_and_fit", "split_plan", "split_pool"]
