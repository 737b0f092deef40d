"""The toy instance: small enough that FIFO and SJF job completion times can be worked out by hand.

Cluster: two machines with four V100 GPUs each (homogeneous; V100 is the reference type, so a
job's duration is exactly its runtime). Workload: 18 jobs in three disjoint windows of six, one
per split. With every world-model effect off (the toy scenario's default) a job runs for exactly
its duration once it holds its GPUs.
"""
from __future__ import annotations

import numpy as np

from cluster_env.core.instance import Cluster, LoadReport, Workload

# (submit s, duration s, GPUs) per job; six jobs a split: train, validation, test.
TOY_JOBS = (
    # train
    (0, 100, 4), (0, 50, 4), (10, 30, 2), (20, 60, 8), (30, 20, 1), (40, 40, 2),
    # validation
    (1000, 80, 2), (1000, 20, 6), (1005, 50, 4), (1010, 10, 4), (1020, 70, 8), (1030, 30, 1),
    # test
    (2000, 100, 4), (2000, 40, 4), (2000, 60, 2), (2010, 20, 2), (2030, 50, 8), (2040, 10, 1),
)
TOY_SPLITS = {"train": (0, 6), "validation": (6, 12), "test": (12, 18)}


def toy_cluster() -> Cluster:
    return Cluster.from_machines("toy", [("toy-m0", "V100", 4), ("toy-m1", "V100", 4)])


def toy_workload() -> Workload:
    jobs = np.array(TOY_JOBS, dtype=np.float64)
    n = len(jobs)
    report = LoadReport(source="toy instance (cluster_env.scenarios.toy)", rows_read=n, rows_kept=n)
    return Workload(
        name="toy",
        job_ids=tuple(f"toy-{i}" for i in range(n)),
        submit=jobs[:, 0].copy(),
        duration=jobs[:, 1].copy(),
        gpus=jobs[:, 2].astype(np.int64),
        job_type=np.zeros(n, dtype=np.int64),
        tenant=(np.arange(n) % 2).astype(np.int64),
        source_row=np.arange(1, n + 1, dtype=np.int64),
        report=report,
    )
