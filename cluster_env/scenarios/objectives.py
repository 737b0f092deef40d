"""Derivation rules of the service-objective scenarios (``philly-slo-v1``, ``philly-tenants-v1``).

The Philly trace carries no job class, deadline or quota. These scenarios derive them from the
trace by the documented rules below (docs/objectives.md, "Derived fields"), once for the whole
trace with a fixed seed, so one job has the same class and deadline in every window, at every
load and in every split; windows, loads, seeds and splits are then handled as in every scenario.

* Deadlines and classes (``philly-slo-v1``): a share :data:`DEADLINE_SHARE` of the jobs are
  high-priority jobs with a deadline, the rest best-effort without one (TIAS' two levels, deadline
  jobs and the rest). A deadline job must finish within ``k x duration`` of its submission, with
  ``k`` drawn uniformly from :data:`DEADLINE_FACTOR_RANGE` (the ``submit + k x duration`` form of
  deadline-aware schedulers' evaluations, e.g. TIAS and UniSched; the share and the range of ``k``
  are ASSUMPTIONS of this project: the papers' exact draws were not available to check).
  ``duration`` is the job's work at the reference GPU's speed, so a deadline is tight on the slow
  GPU types.
* Tenants and quotas (``philly-tenants-v1``): tenants are Philly's virtual clusters (the trace's
  ``vc`` column; the tenant index every Philly scenario already carries); each tenant's guaranteed
  GPU share is proportional to its GPU-time (GPUs x duration) in the *training* split, the share an
  operator would set from history without seeing the test jobs; every tenant may borrow idle GPUs
  (the quota is reclaimable by preemption). The proportional rule is ASSUMED (PPS and Astraea set
  quotas per tenant; proportional-to-usage is the simplest rule the trace supports).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from cluster_env.core.instance import Workload
from cluster_env.core.objectives import BEST_EFFORT, HIGH_PRIORITY

#: Share of jobs that are high-priority with a deadline (ASSUMPTION, see the module docstring).
DEADLINE_SHARE = 0.3
#: ``k`` of ``deadline = submit + k x duration``, drawn uniformly (ASSUMPTION).
DEADLINE_FACTOR_RANGE = (1.5, 3.0)
#: Seed of the per-job draws (fixed: a job's class and deadline do not depend on the window).
DERIVATION_SEED = 36
#: Jobs per episode of the objective scenarios (API episodes: their metrics need the API path).
OBJECTIVE_JOBS_PER_EPISODE = 300


def with_deadlines(trace: Workload, share: float = DEADLINE_SHARE,
                   factors: tuple[float, float] = DEADLINE_FACTOR_RANGE, seed: int = DERIVATION_SEED) -> Workload:
    """``trace`` with classes and deadlines by the rule of the module docstring."""
    rng = np.random.default_rng(seed)
    n = trace.num_jobs
    chosen = rng.random(n) < share
    k = rng.uniform(factors[0], factors[1], n)
    job_class = np.where(chosen, HIGH_PRIORITY, BEST_EFFORT).astype(np.int64)
    deadline = np.where(chosen, k * trace.duration, np.nan)
    return replace(trace, name=trace.name + "+deadlines", job_class=job_class, deadline=deadline)


def with_quotas(trace: Workload, train: tuple[float, float]) -> Workload:
    """``trace`` with tenant quotas proportional to the tenants' GPU-time in the ``train`` split
    (fractions of the jobs), every tenant allowed to borrow."""
    lo, hi = int(round(train[0] * trace.num_jobs)), int(round(train[1] * trace.num_jobs))
    tenants = trace.num_tenants
    work = np.bincount(trace.tenant[lo:hi], weights=(trace.gpus * trace.duration)[lo:hi], minlength=tenants)
    quota = work / work.sum()
    return replace(trace, name=trace.name + "+quotas", tenant_quota=quota.astype(np.float64),
                   tenant_borrow=np.ones(tenants, dtype=bool))
