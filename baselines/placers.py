"""Placers: on which machine the job being placed takes its next GPUs (the PLACE phase).

The placer's mask allows a machine when it has a free GPU of a type the job may use; the job takes
as many free GPUs there as it still needs, and the placer is asked again until it holds them all.
Every placer reads only the observation: free GPUs, measured speeds, the job's nominal speed per
machine (``job_speed``, Gavel's public table) and the GPUs it still needs.

Public names (``__all__``): the placers (:class:`FirstFit`, :class:`BestFit`, :class:`Spread`,
:class:`FastestFirst`, :class:`OraclePlacer`, :class:`RandomPlacer`), the helpers other placers
build on (``dual_agent.priority``'s residual placer does): :func:`allowed_machines`,
:func:`speed_and_fit`, :func:`holds_machines`, :func:`split_choice` and :func:`spread_context`, and the speed-aware placers'
guard against needless spreading, :data:`SPREAD_MARGIN`.

The spread guard (``fastest`` and ``clairvoyant``, when no single machine holds the job's remaining
need or the job is already split; :func:`split_choice`): the placer compares whole placements, the fewest machines (largest
free first) among the machines at least as fast as each speed level, each at the pace of its
slowest machine times the job's spread ratio when it goes beyond the fewest machines of the
cluster that can hold the job (the simulator charges the penalty there). A placement over more
machines than the fewest possible is taken only when it is expected faster than the
consolidating one by more than :data:`SPREAD_MARGIN`.
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


def spread_context(obs: dict, info: dict | None = None) -> tuple[int, int, float]:
    """What the spread guard reads besides speeds and free GPUs: (machines the job already holds,
    the fewest machines of the cluster that can hold its GPUs, its spread ratio).

    Under the all-reduce spread model, in scenarios with ``SchedulingConfig(spread_floor=True)``
    (world model v3: ``modern-v2``, ``philly-hetero-v3``; every user cluster, whatever spread
    model its world ends up with, ``cluster_env.scenarios.hardware``), the PLACE-phase info carries
    ``spread_floor``: the lowest multiplier that model can charge the job on this cluster
    (``cluster_env.world.interconnect.spread_floor``); the guard then uses it (with Gavel's
    worst case an 8-GPU LM job took two K80 machines, 32,728 s, over eight 1-GPU holes on
    shared-NIC V100 machines where the model charges nothing, 3,600 s). Without it (Gavel's model,
    or a caller that passes no info) the ratio is Gavel's bound below.

    The fewest machines count every machine, of any GPU type (the placer cannot see which full
    machines the job may use); the simulator charges Gavel's penalty beyond them.

    The ratio is the lowest that the observation's ``comm_intensity`` allows. That feature is one
    minus Gavel's spread ratio at 8 GPUs averaged over the three measured servers (K80, P100,
    V100; ``cluster_env.world.comm_intensity``), and each server's ratio is at most 1, so the
    lowest of the three is at least ``1 - 3 x comm_intensity`` (clipped at 0). The placer does
    not see the GPU type names that index the full ``cluster_env.world.spread_ratio_table``, and
    the average alone would mislead: for LM (batch size 5) it is 0.55 while V100's ratio is 0.10.
    The bound is at or below every type's lowest measured ratio at 8 GPUs, so it errs toward
    consolidation: under 0.1 for 19 of the 26 job types (every LM, A3C, CycleGAN and
    Recommendation type), 0.51-0.73 for ResNet-18 batch 256 and ResNet-50 batch 16/32 (lowest
    measured 0.66-0.78), 1 for ResNet-50 batch 64/128 (measured 1).
    """
    capacity = np.cumsum(np.sort(np.rint(obs["machines"][:, M["gpus"]].astype(np.float64) * 8.0))[::-1])
    gpus = float(np.rint(np.exp2(float(obs["placing"][P["gpus_log2"]]))))
    fewest = min(int(np.searchsorted(capacity, gpus, side="left")) + 1, len(capacity))
    used = int(round(float(obs["placing"][P["machines_used"]])))
    floor = None if info is None else info.get("spread_floor")
    if floor is not None:
        return used, fewest, float(floor)
    return used, fewest, max(0.0, 1.0 - 3.0 * float(obs["placing"][P["comm_intensity"]]))


def holds_machines(obs: dict) -> bool:
    """Whether the job being placed already holds GPUs on a machine (it is being split): a
    speed-aware placer then places the rest with :func:`split_choice`, since a machine that holds
    the rest whole may be slower than the machines the job already holds."""
    return float(obs["placing"][P["machines_used"]]) > 0.5


def _pieces(hist: list, need: int) -> int:
    """The fewest machines, largest free first, whose free GPUs (``hist[v]``: machines with v
    free) hold ``need``."""
    held = pieces = 0
    for v in range(len(hist) - 1, 0, -1):
        count = hist[v]
        if count == 0:
            continue
        if held + count * v >= need:
            return pieces + -(-(need - held) // v)
        held += count * v
        pieces += count
    return pieces


def split_choice(obs: dict, ok: np.ndarray, speed: np.ndarray, free: np.ndarray, tolerance: float,
                 spread_margin: float, info: dict | None = None) -> np.ndarray:
    """The machines (a mask over ``ok``) of the placement a speed-aware placer takes for a job that
    no allowed machine holds whole; the placer takes them largest free first.

    Candidate placements: for each speed level, the fewest machines, largest free first (ties:
    faster, then lower index), among the machines at least that fast (the fastest ``p`` for
    ``p`` = 1..n) that hold the job's remaining need, kept where the count drops (a slower
    level with as many machines is never faster). Each placement's expected speed is its slowest
    machine's (``speed``: nominal x measured) times the job's spread ratio when the job's
    machines (held plus placed) outnumber the cluster's fewest (:func:`spread_context`). The
    consolidating placement (the fewest machines of all) is taken unless a placement over more
    machines is expected faster by more than ``spread_margin``; then, of the placements within
    ``tolerance`` of the fastest, the one with the fewest machines. When the allowed machines
    cannot hold the need at all, every allowed machine. ``info``: the step's info, for
    :func:`spread_context`.
    """
    need = placing_need(obs)
    n = len(ok)
    by_speed = np.lexsort((ok, -speed))                 # fastest first, then lower index
    f = [int(x) for x in free]
    hist = [0] * (max(f) + 1)
    for i in range(n):
        hist[f[i]] += 1
    if sum(f) < need:
        return np.ones(n, dtype=bool)
    k_min = _pieces(hist, need)
    used, fewest, ratio = spread_context(obs, info)
    hist = [0] * len(hist)
    held = 0
    plans = []                                           # (pieces, expected speed, prefix length)
    for p in range(n):
        i = int(by_speed[p])
        hist[f[i]] += 1
        held += f[i]
        if held < need:
            continue
        k = _pieces(hist, need)
        if plans and k >= plans[-1][0]:
            continue
        prefix = by_speed[:p + 1]
        chosen = prefix[np.lexsort((ok[prefix], -speed[prefix], -free[prefix]))][:k]
        slowest = float(speed[chosen].min())
        plans.append((k, slowest * ratio if used + k > fewest else slowest, p + 1))
        if k == k_min:
            break
    best = max(e for _, e, _ in plans)
    k, expected, length = plans[-1]                      # the consolidating placement
    if best > expected * (1.0 + spread_margin):
        bar = best * (1.0 - tolerance)
        k, expected, length = [plan for plan in plans if plan[1] >= bar][-1]
    prefix = by_speed[:length]
    chosen = prefix[np.lexsort((ok[prefix], -speed[prefix], -free[prefix]))][:k]
    mask = np.zeros(n, dtype=bool)
    mask[chosen] = True
    return mask


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
    holds it, or the job already holds GPUs on a machine (it is being split), the job keeps to the fewest machines unless a wider placement is expected to be
    faster by more than ``spread_margin`` (:func:`split_choice`); the placement's machines are
    taken most free GPUs first, then the fastest, then the lowest index.

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
        if whole.any() and not holds_machines(obs):
            best = speed[pool].max()
            near = pool & (speed >= best * (1.0 - self.tolerance))
            return int(ok[int(np.argmin(np.where(near, free, np.iinfo(np.int64).max)))])
        cand = split_choice(obs, ok, speed, free, self.tolerance, self.spread_margin, info).nonzero()[0]
        # The placement's largest free machine, then the fastest, then the lowest index (lexsort:
        # the last key is the primary one).
        order = np.lexsort((ok[cand], -speed[cand], -free[cand]))
        return int(ok[cand[order[0]]])


class OraclePlacer(Placer):
    """CLAIRVOYANT REFERENCE, reads durations (not an upper bound): a size- and speed-aware placer (``clairvoyant``; formerly ``oracle``).

    Speed is :class:`FastestFirst`'s (the job type's nominal speed on the machine's GPU type x
    the machine's measured speed); size is the job's duration at nominal speed (the placing
    ``duration_log`` feature, visible only with ``clairvoyant=True``). Machines that can hold the
    job's whole remaining need are preferred whenever one exists. Among them (or, if none, among
    all) a machine is acceptable when the job runs there within ``tolerance`` of the fastest
    speed, or when the time it would lose there, ``duration x (1/speed - 1/fastest)``, is at most
    ``slack`` seconds: a short job takes a slower machine and leaves the fast GPUs to long jobs.
    When no machine holds the whole need, or the job already holds GPUs on a machine, the
    machines considered are :func:`split_choice`'s (the
    spread guard of :class:`FastestFirst`, with this placer's ``tolerance`` and
    :data:`SPREAD_MARGIN`). The acceptable machine that fits tightest wins (fewest free GPUs; if
    none holds the whole need, the most free GPUs, fewest pieces), then the slowest, then the
    lowest index. It raises
    :class:`baselines.ClairvoyanceRequired` when durations are hidden.

    Args:
        slack: seconds a job may lose by running on a slower machine.
        tolerance: relative speed difference treated as a tie.
    """

    name = "clairvoyant"
    env_overrides = {"clairvoyant": True}

    def __init__(self, slack: float = 300.0, tolerance: float = 0.02) -> None:
        if not slack >= 0:
            raise ValueError(f"slack must be >= 0, got {slack!r}")
        self.slack, self.tolerance = float(slack), float(tolerance)

    def place(self, obs: dict, info: dict) -> int:
        if not clairvoyant(obs):
            raise ClairvoyanceRequired(
                "the clairvoyant placer reads job durations but this environment hides them: create it "
                "with clairvoyant=True (baselines.evaluate does so from the policy's env_overrides)")
        ok = allowed_machines(obs)
        if not len(ok):
            return _noop_or_first(obs)
        speed, free, whole, pool = speed_and_fit(obs, ok)
        if not whole.any() or holds_machines(obs):
            pool = split_choice(obs, ok, speed, free, self.tolerance, SPREAD_MARGIN, info)
            whole = np.zeros(len(ok), dtype=bool)         # most free first within the placement
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
           "allowed_machines", "holds_machines", "speed_and_fit", "split_choice", "spread_context"]
