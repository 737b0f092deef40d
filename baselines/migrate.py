"""``las-migrate``: LAS that moves a running job to a free machine where it runs much faster.

On a heterogeneous cluster a job started on slow GPUs (the fast ones were busy) keeps them until
it finishes or LAS preempts it. :class:`MigratingLAS` adds one duration-blind rule to
:class:`~baselines.orderers.LAS`: when LAS has nothing to do (it would ``advance``) at a
scheduling tick, it preempts the running job that the placement columns of
``observation="extended-v2"`` (:mod:`cluster_env.envs.observation_place`) show can run at least
``threshold`` times faster on one machine whose free GPUs alone hold it, and at the next
decision (the same instant) it starts that job again; the placer (``fastest``, by name
``las-migrate``) then puts it on the fastest machine that holds it whole. The restart overhead is
charged as for any preemption.

The rule, exactly (a running candidate row is *movable* when all hold):

* it runs on one machine (``machines_used == 1``): a spread job is LAS's business;
* ``speedup_free >= threshold`` (its best speed on a machine that could hold it whole now, its
  own included, over its current speed; nominal x measured speed, as ``fastest`` scores them);
* it has run at least ``min_run`` seconds since its last (re)start (``since_start_log``, less
  :data:`~baselines.orderers.QUANTUM_TOLERANCE_S` for the feature's rounding) and was not started
  at this instant;
* the environment's mask allows preempting it.

Of the movable jobs the one with the largest ``speedup_free`` moves (ties: the older job, the lower
job id); one job per decision, so several may move at one tick. It moves only when LAS starts,
preempts and backfills nothing: the free GPUs it takes are ones no waiting job can use now.

Ping-pong (a job moved back and forth) is ruled out twice: a move needs a target at least
``threshold`` (> 1) times faster than where the job is, so consecutive moves strictly raise its
speed unless the measured speeds change; and a job moved at a tick has run 0 s since its start,
so it cannot move again before ``min_run`` seconds (default: one scheduling tick, 300 s, the
default of every shipped scenario) have passed.
"""
from __future__ import annotations

import math
import re
from typing import Optional

import numpy as np

from baselines.obs import from_log
from baselines.orderers import LAS, QUANTUM_TOLERANCE_S, running_rows
from cluster_env.core.config import DEFAULT_SCHEDULING_TICK_S
from cluster_env.envs.observation_ext import job_features

#: The default ``threshold``: the speed-up a move must promise (the rule of the headroom study, ``benchmarks/headroom.py``).
DEFAULT_MIGRATE_THRESHOLD = 1.5
#: The layout whose columns the rule reads.
MIGRATE_OBSERVATION = "extended-v2"
#: The orderer family ``las-migrate<x>``: :class:`MigratingLAS` with ``threshold`` = x (> 1).
LAS_MIGRATE_FAMILY = "las-migrate<x>"
_NAME = re.compile(r"las-migrate(\d+(?:\.\d+)?)?")
_COL = {name: i for i, name in enumerate(job_features(MIGRATE_OBSERVATION))}


def las_migrate_threshold(orderer: str) -> Optional[float]:
    """The threshold of a ``las-migrate`` / ``las-migrate<x>`` orderer name (x > 1), None for any
    other name (``las-migrate1`` included: a threshold must exceed 1)."""
    match = _NAME.fullmatch(orderer)
    if not match:
        return None
    threshold = DEFAULT_MIGRATE_THRESHOLD if match.group(1) is None else float(match.group(1))
    return threshold if threshold > 1 else None


class MigratingLAS(LAS):
    """LAS plus the migration rule of this module.

    Args:
        threshold: the speed-up (``speedup_free``) a move needs; > 1 (default 1.5).
        min_run: seconds a job must have run since its last (re)start before it may move (default
            300, one scheduling tick of the shipped scenarios).
        preempt_at, min_quantum: as for :class:`~baselines.orderers.LAS`.
    """

    env_overrides = {"preemption": True, "observation": MIGRATE_OBSERVATION}

    def __init__(self, threshold: float = DEFAULT_MIGRATE_THRESHOLD, min_run: float = DEFAULT_SCHEDULING_TICK_S,
                 preempt_at: str = "tick", min_quantum: float = 0.0) -> None:
        super().__init__(preempt_at, min_quantum)
        if not (isinstance(threshold, (int, float)) and math.isfinite(threshold) and threshold > 1):
            raise ValueError(f"threshold must be a finite speed-up > 1, got {threshold!r}")
        if not (isinstance(min_run, (int, float)) and math.isfinite(min_run) and min_run >= 0):
            raise ValueError(f"min_run must be a finite number of seconds >= 0, got {min_run!r}")
        self.threshold, self.min_run = float(threshold), float(min_run)
        self.name = "las-migrate" if self.threshold == DEFAULT_MIGRATE_THRESHOLD else f"las-migrate{self.threshold:g}"

    def reset(self, rng: np.random.Generator) -> None:
        super().reset(rng)
        self._migrating: Optional[tuple[float, int]] = None     # (instant, job) preempted to move
        self.migrations = 0

    def order(self, obs: dict, info: dict) -> int:
        now = float(info["time"])
        if now != self._now:
            self._now, self._started_now, self._preempted_now = now, set(), set()
        moving, self._migrating = self._migrating, None
        if moving is not None and moving[0] == now:
            rows = np.flatnonzero(np.asarray(info["job_ids"]) == moving[1])
            mask = obs["action_mask"]
            if len(rows) and rows[0] < len(mask) - 1 and mask[rows[0]] and obs["jobs"][rows[0], _COL["running"]] < 0.5:
                return self._start(obs["jobs"], int(rows[0]), moving[1])
        action = super().order(obs, info)
        if action != len(obs["action_mask"]) - 1 or not info.get("tick", True):
            return action
        row = self.movable(obs, info)
        if row < 0:
            return action
        job = int(np.asarray(info["job_ids"])[row])
        self._stopped_at[job] = now
        self._migrating = (now, job)
        self.migrations += 1
        return row

    def movable(self, obs: dict, info: dict) -> int:
        """The row of the running job to move now, -1 when none is movable."""
        jobs = obs["jobs"]
        if jobs.shape[1] < len(_COL):
            raise ValueError(f"las-migrate reads the placement columns of observation={MIGRATE_OBSERVATION!r}, "
                             f"but the observation has {jobs.shape[1]} job columns (create the environment "
                             f"with observation={MIGRATE_OBSERVATION!r}; baselines.evaluate does so)")
        rows = running_rows(obs)
        if not len(rows):
            return -1
        ids = np.asarray(info["job_ids"])[rows]
        speedup = jobs[rows, _COL["speedup_free"]]
        since = from_log(jobs[rows, _COL["since_start_log"]])
        ok = ((jobs[rows, _COL["machines_used"]] == 1) & (speedup.astype(np.float64) >= self.threshold)
              & (since >= self.min_run - QUANTUM_TOLERANCE_S) & (obs["action_mask"][rows] > 0)
              & np.array([j not in self._started_now for j in ids.tolist()], dtype=bool))
        if not ok.any():
            return -1
        cand = ok.nonzero()[0]
        best = cand[np.lexsort((ids[cand], -speedup[cand]))[0]]       # largest speed-up, then job id
        return int(rows[best])


__all__ = ["DEFAULT_MIGRATE_THRESHOLD", "LAS_MIGRATE_FAMILY", "MIGRATE_OBSERVATION", "MigratingLAS",
           "las_migrate_threshold"]
