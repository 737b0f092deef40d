"""Orderers for service objectives (docs/objectives.md): deadlines, priority classes, tenant quotas
and finish-time fairness, from the literature's baselines.

They read the ``objectives-v1`` observation (:mod:`cluster_env.envs.observation_obj`, set through
``env_overrides`` with ``preemption=True``) and its mask only, and schedule with
:class:`baselines.orderers.PreemptivePriority`'s rule: each gives every visible candidate a rank
(lower runs first) from a lexicographic key; the shared rule starts the best jobs that fit,
preempts lower-ranked running jobs at scheduling ticks, backfills, and advances.

* :class:`EDF` (``edf``): earliest deadline first with admission control: deadline jobs whose
  deadline has passed (the info-agnostic admission test; ``edf-clairvoyant`` also rejects those
  whose remaining work at nominal speed no longer fits before it) drop to the best-effort level;
  the best-effort level runs by least attained service (LAS).
* :class:`TwoLevel` (``tias``): TIAS' information-agnostic two levels: deadline jobs first, the
  rest after, LAS within each level.
* :class:`StrictPriority` (``priority``): high-priority jobs first in arrival order, preempting
  best-effort work; best-effort jobs by LAS (the PFN scheduler's and GFS' class split).
* :class:`QuotaAware` (``quota``): PPS-style primary / secondary jobs: a tenant's jobs within its
  GPU quota (oldest first) are primary and run first; the rest are secondary, run on borrowed GPUs
  and are preempted to reclaim them; a tenant that may not borrow never starts a secondary job.
  LAS within each level.
* :class:`FinishTimeFair` (``ftf``): Themis-style finish-time fairness without durations: the
  tenant whose jobs have the worst ratio of time in the system to time executed goes first; LAS
  within a tenant.
"""
from __future__ import annotations

import numpy as np

from baselines.obs import J, M, clairvoyant, from_log, job_gpus
from baselines.orderers import ClairvoyanceRequired, PreemptivePriority, visible_candidates
from cluster_env.envs.observation_ext import job_features

#: The layout these orderers read, and its column index by name.
OBJECTIVE_OBSERVATION = "objectives-v1"
C = {name: i for i, name in enumerate(job_features(OBJECTIVE_OBSERVATION))}


def rank(*keys: np.ndarray) -> np.ndarray:
    """Rank (0 = first) of each element under the lexicographic order of ``keys`` (first key most
    significant)."""
    order = np.lexsort(keys[::-1])
    out = np.empty(len(order), dtype=np.float64)
    out[order] = np.arange(len(order))
    return out


class ObjectiveOrderer(PreemptivePriority):
    """A :class:`PreemptivePriority` orderer on the ``objectives-v1`` layout."""

    env_overrides = {"preemption": True, "observation": OBJECTIVE_OBSERVATION}

    def keys(self, obs: dict, info: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        jobs = obs["jobs"]
        if jobs.shape[1] != len(C):
            raise ValueError(f"the {self.name} orderer reads the {OBJECTIVE_OBSERVATION!r} observation "
                             f"({len(C)} job columns), got {jobs.shape[1]}: create the environment with "
                             f"observation={OBJECTIVE_OBSERVATION!r}")
        rows, ids = visible_candidates(obs, info)
        kept, key = self.rank_rows(jobs, rows, ids.astype(np.float64), obs)
        return kept, key, (ids if kept is rows else ids[np.isin(rows, kept)])     # most keep every row

    def rank_rows(self, jobs: np.ndarray, rows: np.ndarray, ids: np.ndarray, obs: dict
                  ) -> tuple[np.ndarray, np.ndarray]:
        """(rows kept, their rank); a subclass ranks, and may leave out rows it never runs."""
        raise NotImplementedError


def _attained(jobs: np.ndarray, rows: np.ndarray) -> np.ndarray:
    return from_log(jobs[rows, J["attained_log"]])


class EDF(ObjectiveOrderer):
    """Earliest deadline first with admission (module docstring).

    Args:
        clairvoyant: also reject a deadline job whose remaining work at nominal speed on its
            fastest GPU type exceeds the time left (needs ``clairvoyant=True``: the reference).
    """

    name = "edf"

    def __init__(self, clairvoyant: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.clairvoyant = bool(clairvoyant)
        if clairvoyant:
            self.name = "edf-clairvoyant"
            self.env_overrides = {**ObjectiveOrderer.env_overrides, "clairvoyant": True}

    def rank_rows(self, jobs, rows, ids, obs):
        left = from_log(np.maximum(jobs[rows, C["deadline_left_log"]], 0.0))
        admitted = (jobs[rows, C["has_deadline"]] > 0.5) & (jobs[rows, C["overdue"]] < 0.5)
        if self.clairvoyant:
            if not clairvoyant(obs):
                raise ClairvoyanceRequired("edf-clairvoyant reads remaining work: create the environment with "
                                           "clairvoyant=True")
            admitted &= from_log(jobs[rows, J["remaining_log"]]) <= left
        level = np.where(admitted, 0, 1)
        within = np.where(admitted, left, _attained(jobs, rows))
        return rows, rank(level, within, ids)


class TwoLevel(ObjectiveOrderer):
    """TIAS-style: deadline jobs first, then the rest; LAS within each level."""

    name = "tias"

    def rank_rows(self, jobs, rows, ids, obs):
        level = np.where(jobs[rows, C["has_deadline"]] > 0.5, 0, 1)
        return rows, rank(level, _attained(jobs, rows), ids)


class StrictPriority(ObjectiveOrderer):
    """High-priority jobs first (oldest first), preempting best-effort ones; best-effort by LAS."""

    name = "priority"

    def rank_rows(self, jobs, rows, ids, obs):
        high = jobs[rows, C["high_priority"]] > 0.5
        return rows, rank(np.where(high, 0, 1), np.where(high, 0.0, _attained(jobs, rows)), ids)


class QuotaAware(ObjectiveOrderer):
    """PPS-style quotas with borrowing and reclaim (module docstring). A tenant without a quota
    has a quota of 0 (all its jobs are secondary)."""

    name = "quota"

    def rank_rows(self, jobs, rows, ids, obs):
        total = float(np.rint(obs["machines"][:, M["gpus"]].astype(np.float64) * 8.0).sum())   # cluster GPUs
        gpus = job_gpus(jobs[rows])
        running = jobs[rows, J["running"]] > 0.5
        tenant = jobs[rows, C["tenant_slot"]]
        quota = np.maximum(jobs[rows, C["tenant_quota"]].astype(np.float64), 0.0) * total
        used = np.rint(jobs[rows, C["tenant_used"]].astype(np.float64) * total)
        primary = np.zeros(len(rows), dtype=bool)
        for t in np.unique(tenant):
            mine = np.flatnonzero(tenant == t)
            # GPUs the tenant's running jobs outside the window hold count against its quota first.
            budget = quota[mine[0]] - (used[mine[0]] - gpus[mine][running[mine]].sum())
            for i in mine[np.argsort(ids[mine], kind="stable")]:      # oldest first
                if gpus[i] <= budget:
                    primary[i] = True
                    budget -= gpus[i]
        allowed = primary | (jobs[rows, C["tenant_borrow"]] > 0.5) | running
        keep = np.flatnonzero(allowed)
        return rows[keep], rank(np.where(primary, 0, 1)[keep], _attained(jobs, rows)[keep], ids[keep])


class FinishTimeFair(ObjectiveOrderer):
    """Themis-style: tenants by worst estimated finish-time ratio first; LAS within a tenant.

    A job's ratio is its time in the system over its time executed (``(wait + 1) / (executed + 1)``
    seconds, what it would be were it to finish now); a tenant's is the mean over its visible jobs.
    """

    name = "ftf"

    def rank_rows(self, jobs, rows, ids, obs):
        in_system = from_log(jobs[rows, J["wait_log"]])
        executed = from_log(jobs[rows, J["executed_log"]])
        ratio = (in_system + 1.0) / (executed + 1.0)
        tenant = jobs[rows, C["tenant_slot"]]
        score = np.zeros(len(rows))
        for t in np.unique(tenant):
            mine = tenant == t
            score[mine] = ratio[mine].mean()
        return rows, rank(-score, tenant, _attained(jobs, rows), ids)


__all__ = ["EDF", "C", "FinishTimeFair", "OBJECTIVE_OBSERVATION", "ObjectiveOrderer", "QuotaAware",
           "StrictPriority", "TwoLevel", "rank"]
