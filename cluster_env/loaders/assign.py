"""Seeded, documented assignment of job types to traces that carry no model information.

No trace shipped with ``cluster_env`` says which model a job trains. Gavel's simulator
(Narayanan et al., OSDI'20; ``stanford-futuredata/gavel``, ``scheduler/utils.py``,
``generate_job``) faces the same gap when it turns a Philly-like arrival process into jobs, and
its rule is:

1. draw a job template uniformly at random from its job table (the 26 job types of
   :data:`cluster_env.world.throughputs.JOB_TYPES`);
2. if the job uses more than one GPU, redraw until the template is *distributed*: Gavel marks
   ResNet-18, ResNet-50, Transformer and LM (19 of the 26 types) as distributed; A3C, CycleGAN
   and the five Recommendation types were measured on one GPU only (Gavel's throughput table
   has no multi-GPU entry for them).

Rejection sampling in step 2 is the same as drawing uniformly among the 19 distributed types, so
:func:`assign_job_types` implements the rule as:

* a single-GPU job (or every job when ``gpus`` is not given) gets ``JOB_TYPES[u]`` with ``u``
  uniform over ``range(26)``;
* a multi-GPU job (``gpus > 1``) gets a type uniform over the distributed types.

The draws come from ``numpy.random.default_rng(seed)`` (PCG64): first ``n`` uniform integers in
``[0, 26)``, then ``n`` uniform integers in ``[0, 19)``; job ``i`` uses the ``i``-th draw of the
stream that applies to it. So the result is a pure function of ``(n, seed, gpus > 1)``, and the
types of single-GPU jobs do not depend on whether ``gpus`` was given.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..world.throughputs import JOB_TYPES

#: Name prefixes of the job types that Gavel's job table marks as not distributed.
SINGLE_GPU_ONLY_PREFIXES: tuple[str, ...] = ("a3c", "cyclegan", "recommendation")


def _is_distributed(name: str) -> bool:
    return not name.strip().lower().startswith(SINGLE_GPU_ONLY_PREFIXES)


#: Indices into ``JOB_TYPES`` of the distributed job types (those allowed for multi-GPU jobs).
DISTRIBUTED_JOB_TYPES: np.ndarray = np.array(
    [i for i, name in enumerate(JOB_TYPES) if _is_distributed(name)], dtype=np.int64)


def assign_job_types(n: int, seed: int, *, gpus: Optional[np.ndarray] = None) -> np.ndarray:
    """Job-type indices (int64, into ``JOB_TYPES``) for ``n`` jobs, by Gavel's rule.

    Args:
        n: number of jobs.
        seed: seed of the generator; the same ``(n, seed, gpus)`` always gives the same result.
        gpus: optional GPU count of each job (shape ``(n,)``); jobs with more than one GPU get a
            distributed job type (see the module docstring). Without it, every job's type is
            uniform over all 26 types.
    """
    n = int(n)
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    rng = np.random.default_rng(int(seed))
    types = rng.integers(0, len(JOB_TYPES), size=n, dtype=np.int64)
    if gpus is not None:
        g = np.asarray(gpus)
        if g.shape != (n,):
            raise ValueError(f"gpus must have shape ({n},), got {g.shape}")
        dist = rng.integers(0, len(DISTRIBUTED_JOB_TYPES), size=n, dtype=np.int64)
        multi = g > 1
        types[multi] = DISTRIBUTED_JOB_TYPES[dist[multi]]
    return types
