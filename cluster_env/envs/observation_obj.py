"""Opt-in service-objective columns (``parallel_env(..., observation="objectives-v1")``).

``"objectives-v1"`` is the ``"default"`` layout (:mod:`cluster_env.envs.observation`) with the
``jobs`` columns below appended (every default column keeps its position and its values; the
other layouts are unchanged). They show what a scheduler with service objectives knows about a
candidate (docs/objectives.md): its class, its deadline and its tenant's quota and current use,
never a duration.

* ``high_priority``: 1 for a high-priority job, 0 for a best-effort one (or a workload without classes).
* ``has_deadline``: 1 when the job has a deadline.
* ``deadline_left_log``: ``log1p`` of the seconds left to its deadline (0 once passed); -1 without one.
* ``overdue``: 1 when its deadline has passed (it can no longer be met).
* ``tenant_slot``: the tenant, as ``extended``'s ``tenant_slot`` (``(index mod 64) / 63``): one
  value per tenant in every window.
* ``tenant_quota``: the tenant's guaranteed share of the cluster's GPUs; -1 without a quota.
* ``tenant_used``: GPUs the tenant's running jobs hold / the cluster's GPUs.
* ``tenant_borrow``: 1 when the tenant may run beyond its quota (also without quotas), else 0.

Empty rows are zeros with -1 in ``deadline_left_log`` and ``tenant_quota``. Every value lies in the
``jobs`` space's ``[-1, inf)``.
"""
from __future__ import annotations

import numpy as np
from gymnasium import spaces

from cluster_env.core.simulator import RUNNING
from cluster_env.core.objectives import HIGH_PRIORITY, deadlines, job_classes
from cluster_env.envs.observation import ObservationBuilder
from cluster_env.envs.observation_layouts import OBJECTIVE_JOB_FEATURES, TENANT_SLOTS, job_features, replace_spaces

_EMPTY = np.array([0, 0, -1, 0, 0, -1, 0, 0], dtype=np.float32)


class ObjectiveObservationBuilder(ObservationBuilder):
    """The default builder plus :data:`OBJECTIVE_JOB_FEATURES` (appended, never reordered)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.job_features = job_features("objectives-v1")
        jobs = self.observation_spaces["orderer"]["jobs"]
        replace_spaces(self.observation_spaces,
                       jobs=spaces.Box(-1.0, np.inf, (jobs.shape[0], len(self.job_features)), np.float32))

    def bind(self, sim, num_tenants: int) -> None:
        super().bind(sim, num_tenants)
        w = sim.workload
        tenants = max(w.num_tenants, 1)
        self._tenant = np.asarray(w.tenant, dtype=np.int64)
        self._n_tenants = tenants
        static = np.zeros((w.num_jobs, len(OBJECTIVE_JOB_FEATURES)), dtype=np.float32)
        static[:, 0] = job_classes(w) == HIGH_PRIORITY
        due = deadlines(w)
        self._has = ~np.isnan(due)
        self._due_at = np.asarray(sim.submit, dtype=np.float64) + np.where(self._has, due, 0.0)
        static[:, 1] = self._has
        static[:, 4] = (self._tenant % TENANT_SLOTS) / (TENANT_SLOTS - 1)
        quota = np.full(tenants, -1.0) if w.tenant_quota is None else np.where(
            np.isnan(w.tenant_quota[:tenants]), -1.0, w.tenant_quota[:tenants])
        static[:, 5] = quota[self._tenant]
        borrow = np.ones(tenants) if w.tenant_borrow is None else w.tenant_borrow[:tenants].astype(np.float64)
        static[:, 7] = borrow[self._tenant]
        self._obj_static = static
        self.attach(sim)

    def attach(self, source) -> None:
        """Read the episode's progress from ``source``: the bound simulator (``bind``), or the
        compiled engine's live view of the same episode (``now``, ``jobs.status``, ``gpus``,
        ``total_gpus``)."""
        self._source = source

    def build(self, placing_phase: bool, pending: np.ndarray, running: np.ndarray):
        feats, order_mask, place_mask = super().build(placing_phase, pending, running)
        jobs = np.empty((feats["jobs"].shape[0], len(self.job_features)), dtype=np.float32)
        jobs[:, :feats["jobs"].shape[1]] = feats["jobs"]
        self.extra_columns(jobs, feats["global"], self.candidate_ids(pending, running), running)
        feats["jobs"] = jobs
        return feats, order_mask, place_mask

    def extra_columns(self, jobs: np.ndarray, glob: np.ndarray, ids: np.ndarray, running: np.ndarray) -> None:
        """Write this layout's columns into ``jobs``, whose default columns are written (``ids``:
        each row's job, -1 for none): the Python build, and the compiled step's observation."""
        sim = self._source
        valid = ids >= 0
        extra = np.tile(_EMPTY, (len(ids), 1))
        if valid.any():
            j = ids[valid]
            rows = self._obj_static[j].copy()
            left = self._due_at[j] - sim.now
            has = self._has[j]
            rows[:, 2] = np.where(has, np.log1p(np.maximum(left, 0.0)), -1.0)
            rows[:, 3] = has & (left < 0)
            run = np.flatnonzero(sim.jobs.status == RUNNING)
            used = np.bincount(self._tenant[run], weights=sim.gpus[run], minlength=self._n_tenants)
            rows[:, 6] = used[self._tenant[j]] / sim.total_gpus
            extra[valid] = rows
        jobs[:, jobs.shape[1] - extra.shape[1]:] = extra
