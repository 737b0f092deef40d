"""Load a cluster (machines and their GPUs) from a CSV file; check that a workload fits it.

Fields (canonical name: accepted header names, matched case-insensitively; override with
``columns={canonical: header}``):

==============  ====================================================================  ========
field           default header names                                                  required
==============  ====================================================================  ========
``gpu_type``    gpu_type, model, gpu_model                                            yes
``num_gpus``    num_gpus, gpus, gpu, gpu_count, gpu_capacity_num, cap_gpu             yes
``machine``     machine, machineid, sn, node_name, name                               no
``count``       count                                                                 no
==============  ====================================================================  ========

Rules:

* ``num_gpus`` is the number of GPUs of one machine: a whole number, 0 to 100,000. A machine with
  0 GPUs is a CPU-only machine: it is **filtered** (reason ``"CPU-only machine (0 GPUs)"``) and its
  GPU type is not looked up (CPU machines are often labelled ``CPU`` or left empty). Negative or
  fractional counts are errors.
* ``gpu_type`` goes through :func:`cluster_env.world.gpu_catalog.canonical_gpu_name`; an unknown
  name is an :class:`~cluster_env.errors.UnknownGPUTypeError` naming the file, row and field.
* ``machine`` is the machine's name (default ``m<row>``); names must be unique (a duplicate is an
  error naming both rows); an empty name is an error.
* ``count`` (default 1) describes that many identical machines, named ``<name>-0``, ``<name>-1``,
  ...; a count of 0 **filters** the row (reason ``"count 0 (no machine)"``); at most 1,000,000,
  and at most 1,000,000 machines in the whole file.
"""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

import numpy as np

from ..core.instance import Cluster, LoadReport, Workload
from ..errors import DataError
from ..world.gpu_catalog import canonical_gpu_name
from .csvio import MAX_COUNT, MAX_GPUS, PathLike, read_csv
from .workload_csv import display_name

REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    "gpu_type": ("gpu_type", "model", "gpu_model"),
    "num_gpus": ("num_gpus", "gpus", "gpu", "gpu_count", "gpu_capacity_num", "cap_gpu"),
}
OPTIONAL_FIELDS: dict[str, tuple[str, ...]] = {
    "machine": ("machine", "machineid", "sn", "node_name", "name"),
    "count": ("count",),
}

CPU_ONLY_REASON = "CPU-only machine (0 GPUs)"
COUNT_ZERO_REASON = "count 0 (no machine)"


def read_cluster_csv(path: PathLike, *, columns: Optional[Mapping[str, Optional[str]]] = None,
                     name: Optional[str] = None, fieldnames: Optional[Sequence[str]] = None,
                     display: Optional[str] = None) -> tuple[Cluster, LoadReport]:
    """Like :func:`load_cluster_csv`, and also return the LoadReport of filtered rows.

    ``fieldnames`` gives the column names of a file without a header row; ``display`` is how the
    file is named in error messages (default: the path).
    """
    table = read_csv(path, required=REQUIRED_FIELDS, optional=OPTIONAL_FIELDS, columns=columns, columns_arg='cluster_columns',
                     fieldnames=fieldnames, display=display)
    report = LoadReport(source=table.file, rows_read=table.num_rows)
    gpus = table.ints("num_gpus", max_value=MAX_GPUS, what="GPU count")
    if table.has("count"):
        counts = table.ints("count", max_value=MAX_COUNT, what="machine count")
        # The limit per row alone let a few rows ask for tens of millions of machines (minutes
        # and gigabytes before any error): the whole file gets the same limit.
        total = np.cumsum(np.where(gpus > 0, counts, 0))
        over = np.flatnonzero(total > MAX_COUNT)
        if over.size:
            raise table.error(f"the file describes {int(total[-1]):,} machines, more than the limit "
                              f"of {MAX_COUNT:,} (absurdly large)", int(over[0]), "count")
    else:
        counts = np.ones(table.num_rows, dtype=np.int64)
    types_raw = table.strings("gpu_type")
    names_raw = table.strings("machine") if table.has("machine") else None
    type_field = table.name_of("gpu_type")

    cache: dict[str, str] = {}
    machines: list[tuple[str, str, int]] = []
    first_row: dict[str, int] = {}
    n_cpu = n_count0 = 0
    for i in range(table.num_rows):
        row = table.row_numbers[i]
        if gpus[i] == 0:
            n_cpu += 1
            continue
        if counts[i] == 0:
            n_count0 += 1
            continue
        raw = types_raw[i]
        gtype = cache.get(raw)
        if gtype is None:
            gtype = canonical_gpu_name(raw, file=table.file, row=row, field=type_field)
            cache[raw] = gtype
        if names_raw is not None:
            base = names_raw[i]
            if not base:
                raise table.error("empty machine name", i, "machine")
        else:
            base = f"m{row}"
        k = int(counts[i])
        names = [base] if k == 1 else [f"{base}-{j}" for j in range(k)]
        for mname in names:
            prev = first_row.setdefault(mname, row)
            if prev != row:
                raise table.error(f"duplicate machine name {mname!r}: rows {prev} and {row}", i,
                                  "machine" if names_raw is not None else "count")
            machines.append((mname, gtype, int(gpus[i])))
    report.drop(CPU_ONLY_REASON, n_cpu)
    report.drop(COUNT_ZERO_REASON, n_count0)
    report.rows_kept = table.num_rows - n_cpu - n_count0
    if not machines:
        raise DataError("no machine with a GPU in the file: " + "; ".join(
            f"{k}: {v}" for k, v in sorted(report.filtered.items())), file=table.file)
    if int(counts.max()) > 1:
        report.notes.append(f"'count' expanded {report.rows_kept} rows into {len(machines)} "
                            f"machines")
    cluster = Cluster.from_machines(name or display_name(path), machines)
    return cluster, report


def load_cluster_csv(path: PathLike, *, columns: Optional[Mapping[str, Optional[str]]] = None,
                     name: Optional[str] = None, fieldnames: Optional[Sequence[str]] = None
                     ) -> Cluster:
    """Load a cluster from a CSV file (``.csv`` or ``.csv.gz``); see the module docstring.

    Args:
        path: the CSV file.
        columns: optional mapping canonical field -> header name in the file.
        name: the cluster's name (default: the file name without suffixes).
        fieldnames: column names, for a file without a header row.

    Use :func:`read_cluster_csv` to also get the report of filtered rows.
    """
    return read_cluster_csv(path, columns=columns, name=name, fieldnames=fieldnames)[0]


def check_workload_fits(workload: Workload, cluster: Cluster, file: Optional[str] = None) -> None:
    """Raise DataError for the first job the cluster can never run.

    A job fails when it needs more GPUs than the whole cluster has (field ``num_gpus``), or, for
    a job restricted to some GPU types, more GPUs than the cluster has of those types, or when
    the cluster has none of them (field ``allowed_gpu_types``). The error names ``file`` (default:
    the workload's report source), the job's 1-based source row (when known) and the field.
    """
    if file is None and workload.report is not None:
        file = workload.report.source

    def row_of(i: int) -> Optional[int]:
        return None if workload.source_row is None else int(workload.source_row[i])

    total = cluster.total_gpus
    too_big = np.flatnonzero(workload.gpus > total)
    first_bad = int(too_big[0]) if too_big.size else None
    if workload.allowed_gpu_types is not None:
        per_type = cluster.gpus_of_type()
        fits: dict[frozenset[str], int] = {}
        limit = workload.num_jobs if first_bad is None else first_bad
        for i in range(limit):
            allowed = workload.allowed_gpu_types[i]
            if allowed is None:
                continue
            have = fits.get(allowed)
            if have is None:
                have = sum(per_type.get(t, 0) for t in allowed)
                fits[allowed] = have
            if workload.gpus[i] > have:
                types = "|".join(sorted(allowed))
                if have == 0:
                    msg = (f"job {workload.job_ids[i]!r} may only run on GPU types {types}, and "
                           f"cluster {cluster.name!r} has none of them (it has "
                           f"{', '.join(cluster.gpu_type_names)})")
                else:
                    msg = (f"job {workload.job_ids[i]!r} needs {int(workload.gpus[i])} GPUs of "
                           f"types {types}, but cluster {cluster.name!r} has only {have} of them")
                raise DataError(msg, file=file, row=row_of(i), field="allowed_gpu_types")
    if first_bad is not None:
        i = first_bad
        raise DataError(f"job {workload.job_ids[i]!r} needs {int(workload.gpus[i])} GPUs, but "
                        f"cluster {cluster.name!r} has only {total} GPUs in all",
                        file=file, row=row_of(i), field="num_gpus")
