"""Loaders: real traces and clusters shipped with the package, and a user's own CSV files.

Every loader checks its input and raises :class:`cluster_env.errors.DataError` naming the file,
the 1-based data row and the field; rows it filters are counted in a
:class:`~cluster_env.core.instance.LoadReport` (``Workload.report``, :func:`cluster_report`).
"""
from .assign import DISTRIBUTED_JOB_TYPES, assign_job_types
from .cluster_csv import check_workload_fits, load_cluster_csv, read_cluster_csv
from .clusters import (cluster_report, openb_cluster, packaged_cluster, packaged_cluster_names,
                       pai_cluster, philly_cluster, scale_cluster, spot_cluster)
from .csvio import MAX_COUNT, MAX_GPUS, MAX_SECONDS, MAX_TIMESTAMP, read_csv
from .traces import openb_pods, philly_trace
from .workload_csv import cached_workload_csv, load_workload_csv

__all__ = [
    "DISTRIBUTED_JOB_TYPES", "MAX_COUNT", "MAX_GPUS", "MAX_SECONDS", "MAX_TIMESTAMP",
    "assign_job_types", "cached_workload_csv", "check_workload_fits", "cluster_report", "load_cluster_csv",
    "load_workload_csv", "openb_cluster", "openb_pods", "packaged_cluster",
    "packaged_cluster_names", "pai_cluster", "philly_cluster", "philly_trace", "read_cluster_csv",
    "read_csv", "scale_cluster", "spot_cluster",
]
