"""Orderers: which job next (the ORDER phase), read from the observation and its mask only.

Action layout (see the environment's card): the index of a row of ``jobs`` acts on that row's job
(a pending row starts it, a running row preempts it, with ``preemption=True``) and the last index
is ``advance``. A row is pending when ``valid == 1`` and ``running == 0``; the mask allows it only
when the job fits the free GPUs. Pending rows are oldest first, so the lowest row is the oldest.

Public names (``__all__``): the orderers (:class:`FIFO`, :class:`SJF`, :class:`LAS`,
:class:`Tiresias`, :class:`OracleSRPT`, :class:`RandomOrderer`), the scheduling rule they share
(:class:`PreemptivePriority`, whose ``keys`` a subclass such as ``dual_agent.priority``'s learned
orderer overrides), the row helpers :func:`pending_rows`, :func:`running_rows` and
:func:`visible_candidates`, Tiresias' defaults, the minimum quantum's
:data:`QUANTUM_TOLERANCE_S` and :class:`ClairvoyanceRequired`.
"""
from __future__ import annotations

import bisect
import math
from typing import Sequence

import numpy as np

from baselines.obs import J, clairvoyant, from_log, job_gpus, machine_free_gpus
from baselines.policy import Orderer


class ClairvoyanceRequired(RuntimeError):
    """Raised when a policy that needs job durations meets an environment that hides them."""


def pending_rows(obs: dict) -> np.ndarray:
    """Row indices of the pending candidates (oldest first)."""
    jobs = obs["jobs"]
    # ``.nonzero()[0]``: np.flatnonzero of a 1-D array, without its Python-level overhead.
    return ((jobs[:, J["valid"]] > 0.5) & (jobs[:, J["running"]] < 0.5)).nonzero()[0]


_RUNNING = J["running"]
_EXECUTED = J["executed_log"]


def running_rows(obs: dict) -> np.ndarray:
    """Row indices of the running (preemption) candidates."""
    return (obs["jobs"][:, J["running"]] > 0.5).nonzero()[0]


def _advance(obs: dict) -> int:
    mask = obs["action_mask"]
    last = len(mask) - 1
    if mask[last]:
        return last
    # Only reachable when nothing else is allowed either (the terminal observation allows advance).
    return int(np.flatnonzero(mask)[0])


class FIFO(Orderer):
    """First in, first out.

    Args:
        strict: if True only the oldest pending job may start, and while it does not fit the
            clock advances (head-of-line blocking, the Tiresias simulator's ``fifo``). By default
            the oldest job that fits starts (backfilling; the simulator's ``fjf``).
    """

    name = "fifo"

    def __init__(self, strict: bool = False) -> None:
        self.strict = strict
        if strict:
            self.name = "fifo-strict"

    def order(self, obs: dict, info: dict) -> int:
        mask = obs["action_mask"]
        if self.strict:
            rows = pending_rows(obs)
            return int(rows[0]) if len(rows) and mask[rows[0]] else _advance(obs)
        # Pending rows come first and the mask allows exactly the fitting ones, so the first
        # allowed action is the oldest fitting job unless it is a running row or advance.
        first = int(mask.argmax())
        if mask[first] and first < len(mask) - 1 and obs["jobs"][first, _RUNNING] < 0.5:
            return first
        return _advance(obs)


class SJF(Orderer):
    """Shortest job first: the fitting pending job with the least remaining time.

    Needs the durations (``clairvoyant=True``, which the harness sets from ``env_overrides``).
    With ``noise > 0`` it ranks by a noisy estimate, remaining time x exp(N(0, noise^2)), drawn
    once per job from the policy's seeded generator (an imperfect runtime predictor).

    Args:
        noise: standard deviation of the log-normal estimation error (0: exact durations).
    """

    env_overrides = {"clairvoyant": True}

    def __init__(self, noise: float = 0.0) -> None:
        if not noise >= 0:
            raise ValueError(f"noise must be >= 0, got {noise!r}")
        self.noise = float(noise)
        self.name = "sjf" if noise == 0 else f"sjf-noisy{noise:g}"

    def reset(self, rng: np.random.Generator) -> None:
        super().reset(rng)
        self._error: dict[int, float] = {}

    def order(self, obs: dict, info: dict) -> int:
        if not clairvoyant(obs):
            raise ClairvoyanceRequired(
                "SJF needs job durations but this environment hides them: create it with "
                "clairvoyant=True (baselines.evaluate does so from the policy's env_overrides)")
        mask = obs["action_mask"]
        rows = pending_rows(obs)
        fitting = rows[mask[rows] > 0]
        if not len(fitting):
            return _advance(obs)
        remaining = from_log(obs["jobs"][fitting, J["remaining_log"]])
        if self.noise:
            ids = info["job_ids"][fitting]
            remaining = remaining * np.array([self._estimate_error(int(j)) for j in ids])
        # Stable: ties go to the oldest job.
        return int(fitting[np.argsort(remaining, kind="stable")[0]])

    def _estimate_error(self, job: int) -> float:
        if job not in self._error:
            self._error[job] = float(np.exp(self.rng.normal(0.0, self.noise)))
        return self._error[job]


# Tiresias defaults, from the Tiresias simulator (SymbioticLab/Tiresias, simulator/jobs.py and
# run_sim.py): three queues with limits [3250, 7200, 18000] on attained GPU-seconds in the
# "dlas-gpu" scheme (only the first num_queue - 1 limits are used), FIFO within a queue, and
# promotion of a waiting job to the first queue once its time pending since it last ran reaches
# `solve_starvation` x its executed time (its sim_runs.sh sweeps 0.5 to 100).
TIRESIAS_QUEUE_LIMITS = (3250.0, 7200.0)
TIRESIAS_STARVATION_KNOB = 8.0
#: Seconds a job may fall short of ``min_quantum`` and still count as having served it. The
#: executed time is read from a float32 ``log1p`` feature, exact to well under a second below
#: ~10^6 s; without this slack a quantum that is a multiple of the scheduling tick would end at
#: that tick or the next one depending on the feature's last bit.
QUANTUM_TOLERANCE_S = 1.0


class PreemptivePriority(Orderer):
    """Shared rule of the preemptive priority orderers (Tiresias, LAS, clairvoyant SRPT).

    Subclasses give every visible candidate a priority key (:meth:`keys`; lower runs first, ties
    go to the older job, i.e. the lower job id). Each decision epoch the orderer computes, greedily
    in priority order over the visible candidates, the set of jobs that should run within the GPUs
    they can share (free GPUs plus those of the visible running candidates). Then, in this order:

    1. start the highest-priority pending job of that set that fits now;
    2. else, at a scheduling tick (``infos["tick"]``; at every epoch with ``preempt_at="event"``),
       preempt the lowest-priority running job outside the set when a job of the set is waiting
       and preempting can make room (needs ``preemption=True``; the environment charges the
       restart overhead when the job runs again);
    3. else backfill: start the highest-priority pending job that fits;
    4. else advance.

    A job started at an instant is not preempted at that instant and a job preempted is not
    restarted at the same instant, so one epoch never loops (no zero-time livelock). With
    ``min_quantum > 0`` a running job is not a preemption victim either until it has executed
    ``min_quantum`` seconds since this policy last started it (the ``executed_log`` feature then
    minus at its start: restart overhead, which makes no progress, does not count), less
    :data:`QUANTUM_TOLERANCE_S` for the feature's rounding.

    Args:
        preempt_at: ``"tick"`` (default) preempts only at the environment's scheduling ticks;
            ``"event"`` at every decision epoch.
        min_quantum: seconds of execution since a job's last (re)start before it may be
            preempted; 0 (default) lets a job be preempted at the first tick after its start.
    """

    env_overrides = {"preemption": True}

    def __init__(self, preempt_at: str = "tick", min_quantum: float = 0.0) -> None:
        if preempt_at not in ("tick", "event"):
            raise ValueError(f"preempt_at must be 'tick' or 'event', got {preempt_at!r}")
        if not (math.isfinite(min_quantum) and min_quantum >= 0):
            raise ValueError(f"min_quantum must be a finite number of seconds >= 0, got {min_quantum!r}")
        self.preempt_at = preempt_at
        self.min_quantum = float(min_quantum)

    def reset(self, rng: np.random.Generator) -> None:
        super().reset(rng)
        self._stopped_at: dict[int, float] = {}              # job -> time this policy preempted it
        self._executed_at_start: dict[int, float] = {}       # job -> executed seconds when last started
        self._now = -1.0
        self._started_now: set[int] = set()
        self._preempted_now: set[int] = set()

    def keys(self, obs: dict, info: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows, priority key, job id) of every visible candidate; a lower key runs first."""
        raise NotImplementedError

    # ---------------------------------------------------------------- decision
    def order(self, obs: dict, info: dict) -> int:
        now = float(info["time"])
        if now != self._now:
            self._now, self._started_now, self._preempted_now = now, set(), set()
        mask = obs["action_mask"]
        jobs = obs["jobs"]
        rows, keys, ids = self.keys(obs, info)
        if not len(rows):
            return _advance(obs)
        running = jobs[rows, J["running"]] > 0.5
        gpus = job_gpus(jobs[rows])
        by_priority = np.lexsort((ids, keys))              # key, then arrival order

        # The set that should run: greedy in priority order over the shareable GPUs.
        capacity = int(machine_free_gpus(obs["machines"]).sum() + gpus[running].sum())
        should = np.zeros(len(rows), dtype=bool)
        for i in by_priority:
            if gpus[i] <= capacity:
                should[i] = True
                capacity -= gpus[i]

        def first(cond: np.ndarray, order: np.ndarray) -> int:
            for i in order:
                if cond[i]:
                    return int(i)
            return -1

        fits = mask[rows] > 0
        pend_ok = ~running & fits & np.array([j not in self._preempted_now for j in ids.tolist()], dtype=bool)
        i = first(should & pend_ok, by_priority)
        if i >= 0:
            return self._start(jobs, rows[i], ids[i])
        waiting = should & ~running & ~fits
        # An environment without the "tick" info (a user's wrapper) is treated as always at a tick.
        may_preempt = self.preempt_at == "event" or info.get("tick", True)
        if may_preempt and waiting.any():
            victims = running & ~should & np.array([j not in self._started_now for j in ids.tolist()], dtype=bool)
            if self.min_quantum > 0:
                victims &= self._quantum_served(jobs, rows, ids)
            free = int(machine_free_gpus(obs["machines"]).sum())
            need = int(gpus[waiting].min())
            if victims.any() and free + int(gpus[victims].sum()) >= need:
                v = first(victims & mask[rows].astype(bool), by_priority[::-1])
                if v >= 0:
                    self._stopped_at[int(ids[v])] = now
                    self._preempted_now.add(int(ids[v]))
                    return int(rows[v])
        i = first(pend_ok, by_priority)
        if i >= 0:
            return self._start(jobs, rows[i], ids[i])
        return _advance(obs)

    def _start(self, jobs: np.ndarray, row: int, job: int) -> int:
        self._started_now.add(int(job))
        if self.min_quantum > 0:
            self._executed_at_start[int(job)] = float(from_log(jobs[row:row + 1, _EXECUTED])[0])
        return int(row)

    def _quantum_served(self, jobs: np.ndarray, rows: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """Per candidate: whether it has executed ``min_quantum`` seconds since its last start (a
        running job this policy did not start counts from 0: its whole execution)."""
        executed = from_log(jobs[rows, _EXECUTED])
        since = executed - np.array([self._executed_at_start.get(j, 0.0) for j in ids.tolist()])
        return since >= self.min_quantum - QUANTUM_TOLERANCE_S


def visible_candidates(obs: dict, info: dict) -> tuple[np.ndarray, np.ndarray]:
    """(rows, job ids) of every visible candidate, pending and running: what a priority orderer
    (:meth:`PreemptivePriority.keys`) ranks."""
    rows = (obs["jobs"][:, J["valid"]] > 0.5).nonzero()[0]
    return rows, np.asarray(info["job_ids"])[rows]




class Tiresias(PreemptivePriority):
    """Tiresias-style discretised two-dimensional least-attained-service (2D-LAS).

    A job's priority is its queue: the number of queue limits its attained service (GPUs x
    seconds executed, counted since its last promotion) has reached; lower is better, and within a
    queue the older job goes first. Scheduling is :class:`PreemptivePriority`'s: start the best job
    of the should-run set, else preempt at a tick, else backfill, else advance. A pending job that
    ran before is promoted to the first queue when its time pending since its last run reaches
    ``starvation`` x its executed time (0 turns promotion off).

    Args:
        queue_limits: attained-service limits in GPU-seconds between consecutive queues.
        starvation: the promotion knob (Tiresias' ``solve_starvation``).
        preempt_at: ``"tick"`` (default) preempts only at the environment's scheduling ticks;
            ``"event"`` at every decision epoch (as the Tiresias simulator, which reschedules at
            every arrival, completion and queue change).
        min_quantum: as for :class:`PreemptivePriority` (0 by default).
    """

    name = "tiresias"

    def __init__(self, queue_limits: Sequence[float] = TIRESIAS_QUEUE_LIMITS,
                 starvation: float = TIRESIAS_STARVATION_KNOB, preempt_at: str = "tick",
                 min_quantum: float = 0.0) -> None:
        limits = [float(x) for x in queue_limits]
        if any(b <= a for a, b in zip(limits, limits[1:])) or any(x <= 0 for x in limits):
            raise ValueError(f"queue_limits must be positive and increasing, got {queue_limits!r}")
        if not starvation >= 0:
            raise ValueError(f"starvation must be >= 0, got {starvation!r}")
        super().__init__(preempt_at, min_quantum)
        self.queue_limits = limits
        self.starvation = float(starvation)

    def reset(self, rng: np.random.Generator) -> None:
        super().reset(rng)
        self._offset: dict[int, tuple[float, float]] = {}   # job -> (attained, executed) at promotion
        self.promotions = 0

    # ---------------------------------------------------------------- priorities
    def queue_of(self, attained: float) -> int:
        """Queue index for an attained service in GPU-seconds (0 = highest priority)."""
        return bisect.bisect_right(self.queue_limits, attained)

    def priorities(self, obs: dict, info: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows, queue, job id) of every visible candidate, promotions applied."""
        jobs = obs["jobs"]
        rows, ids = visible_candidates(obs, info)
        attained = from_log(jobs[rows, J["attained_log"]])
        executed = from_log(jobs[rows, J["executed_log"]])
        running = jobs[rows, J["running"]] > 0.5
        now = float(info["time"])
        queues = np.empty(len(rows), dtype=np.int64)
        for i, job in enumerate(ids.tolist()):
            att0, exe0 = self._offset.get(job, (0.0, 0.0))
            queue = self.queue_of(attained[i] - att0)
            ran = executed[i] - exe0
            if (self.starvation and not running[i] and queue > 0 and ran > 0
                    and now - self._stopped_at.get(job, now) >= self.starvation * ran):
                self._offset[job] = (attained[i], executed[i])
                self.promotions += 1
                queue = 0
            queues[i] = queue
        return rows, queues, ids

    keys = priorities


class LAS(PreemptivePriority):
    """Continuous preemptive least attained service (LAS, also called foreground-background).

    The priority is the attained service itself: GPU-seconds executed so far (the
    ``attained_log`` feature, GPUs x seconds run), with no queues and no promotion; ties go to the
    older job. It reads no durations. Scheduling is :class:`PreemptivePriority`'s: start the
    least-attained job of the should-run set that fits, else at a scheduling tick preempt the
    running job with the most attained service when a job with less waits and preempting makes
    room, else backfill, else advance. Needs ``preemption=True`` (pending jobs that were preempted
    show their attained service only then; the harness sets it from ``env_overrides``).

    A real deployment bounds how often a job restarts; ``min_quantum`` does so here: a running
    job is not preempted before it has executed that many seconds since its last (re)start. The
    default, 0, is the continuous rule (the named ``las``, its checked-in scores unchanged); the
    orderer family ``las-q<minutes>`` (e.g. ``las-q15+consolidate``) sets it by name. See
    docs/baselines.md ("LAS with a minimum quantum") for its measured effect.

    Args:
        preempt_at: ``"tick"`` (default) or ``"event"``, as for :class:`Tiresias`.
        min_quantum: seconds of execution since a job's last (re)start before LAS may preempt it
            (restart overhead excluded); 0 (default): none.
    """

    name = "las"

    def __init__(self, preempt_at: str = "tick", min_quantum: float = 0.0) -> None:
        super().__init__(preempt_at, min_quantum)
        if self.min_quantum:
            self.name = f"las-q{self.min_quantum / 60.0:g}"

    def keys(self, obs: dict, info: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rows, ids = visible_candidates(obs, info)
        return rows, from_log(obs["jobs"][rows, J["attained_log"]]), ids


class OracleSRPT(PreemptivePriority):
    """CLAIRVOYANT REFERENCE, reads durations: shortest remaining GPU-time first (SRPT).

    It is not an upper bound: as ``srpt-clairvoyant`` (with the clairvoyant placer) it is 1.27x
    ``las+fastest`` on philly-hetero-v1 and level with ``las`` on philly-v1 over 100 test windows
    (docs/baselines.md, "The clairvoyant reference"), and worse than LAS on the traces tried
    with the default effects on. Named ``srpt``; ``oracle`` is a deprecated alias.

    The priority is the job's remaining work at nominal speed x its GPUs (the ``remaining_log``
    feature, visible only with ``clairvoyant=True``); ties go to the older job. Scheduling is
    :class:`PreemptivePriority`'s, so at a scheduling tick it preempts the running job with the
    most remaining GPU-time when a job with less waits and preempting makes room. It stands for
    what an exact runtime predictor would allow and is never an info-agnostic baseline: it raises
    :class:`ClairvoyanceRequired` when durations are hidden.

    Args:
        preempt_at: ``"tick"`` (default) or ``"event"``, as for :class:`Tiresias`.
    """

    name = "srpt"
    env_overrides = {"preemption": True, "clairvoyant": True}

    def keys(self, obs: dict, info: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not clairvoyant(obs):
            raise ClairvoyanceRequired(
                "the srpt orderer reads job durations but this environment hides them: create it with "
                "clairvoyant=True (baselines.evaluate does so from the policy's env_overrides)")
        rows, ids = visible_candidates(obs, info)
        jobs = obs["jobs"]
        remaining = from_log(jobs[rows, J["remaining_log"]]) * job_gpus(jobs[rows])
        return rows, remaining, ids


class RandomOrderer(Orderer):
    """A uniformly random allowed action (any fitting job, a preemption, or advance)."""

    name = "random"

    def order(self, obs: dict, info: dict) -> int:
        return int(self.rng.choice(obs["action_mask"].nonzero()[0]))


__all__ = ["FIFO", "LAS", "QUANTUM_TOLERANCE_S", "SJF", "TIRESIAS_QUEUE_LIMITS", "TIRESIAS_STARVATION_KNOB",
           "ClairvoyanceRequired", "OracleSRPT", "PreemptivePriority", "RandomOrderer", "Tiresias", "pending_rows",
           "running_rows", "visible_candidates"]
