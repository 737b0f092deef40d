"""Load a user's own job trace from a CSV file into a :class:`~cluster_env.core.instance.Workload`.

Fields (canonical name: accepted header names, matched case-insensitively; any field can instead
be mapped explicitly with ``columns={canonical: header}``; an optional field mapped to ``None`` is
ignored):

=====================  ==========================================================  ==========
field                  default header names                                        required
=====================  ==========================================================  ==========
``submit_time``        timestamp, submit, submit_time, arrival_time, creation_time  yes
``duration``           duration, runtime, run_time                                  yes
``num_gpus``           num_gpus, gpus, num_gpu, gpu_count                           yes
``job_id``             job_id, jobid, job_name, id                                  no
``job_type``           job_type, jobtype, model                                     no
``tenant``             tenant, user, vc, virtual_cluster, organization              no
``allowed_gpu_types``  allowed_gpu_types, gpu_types, gpu_spec                       no
``job_class``          job_class, class, priority_class                             no
``deadline``           deadline, deadline_s, relative_deadline                      no
=====================  ==========================================================  ==========

Rules (each one applied is counted in ``Workload.report``; nothing is dropped silently):

* ``submit_time``: seconds as plain numbers (>= 0), or ISO-8601 date-times such as
  ``2017-10-09 07:01:55`` (naive ones are read as UTC; a column may not mix formats). Unsorted
  input is accepted: jobs are sorted stably by submit time (ties keep file order) and a note says
  how many rows were out of order. Times are rebased so that the first job submits at 0. A span
  of more than 10 years between the first and the last submission is refused as absurd.
* ``duration``: seconds, > 0; a negative duration is an error; a zero duration is **filtered**
  (reason ``"zero duration"``, and a ``UserWarning`` gives the count) because such a job needs no
  work; a positive duration under :data:`~cluster_env.loaders.csvio.MIN_DURATION` (1 ms) is an
  error (the simulator could not resolve its completion time); more than 10 years is refused.
* ``num_gpus``: a whole number >= 1 (at most 100,000). A fraction in (0, 1) (a GPU-sharing
  request) is rounded up to one whole GPU and counted in a note; 0 GPUs (a CPU-only job), a
  negative count and a fractional count above 1 are errors for a user trace.
* ``job_id``: any non-empty text, unique (a duplicate is an error naming both rows); default
  ``job-<row>``.
* ``job_type``: a name of :data:`cluster_env.world.throughputs.JOB_TYPES` (case-insensitive) or
  an integer index into it; unknown values are errors. Without the column, or for an empty cell,
  the type is assigned by :func:`cluster_env.loaders.assign.assign_job_types` (Gavel's seeded
  rule) with the ``seed`` argument, and a note says how many were assigned.
* ``tenant``: any text (empty is a tenant of its own); tenant indices are given in order of first
  appearance in the *sorted* workload (tenant 0 is the tenant of the first job); the names are
  listed in a note. Without the column every job belongs to tenant 0.
* ``allowed_gpu_types``: ``|``-separated GPU type names, each resolved through
  :func:`cluster_env.world.gpu_catalog.canonical_gpu_name` (unknown names are errors); empty means
  any type.
* ``job_class``: ``high-priority`` (or ``hp``) or ``best-effort`` (or ``be``, ``spot``),
  case-insensitive; an empty cell is best-effort; other values are errors
  (:mod:`cluster_env.core.objectives`).
* ``deadline``: seconds *after the job's submit time* by which it should finish, > 0 (zero and
  negative values are errors with one message); an empty cell means no deadline. Both fields
  are service objectives (docs/objectives.md).
* ``Workload.source_row`` holds the 1-based data row of each kept job.
"""
from __future__ import annotations

import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Mapping, Optional, Sequence

import numpy as np

from ..core.instance import LoadReport, Workload
from ..errors import DataError
from ..world.gpu_catalog import canonical_gpu_name
from ..world.throughputs import JOB_TYPES
from .assign import assign_job_types
from .csvio import MAX_GPUS, MAX_SECONDS, MIN_DURATION, CsvTable, PathLike, check_column_map, read_csv

REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    "submit_time": ("timestamp", "submit", "submit_time", "arrival_time", "creation_time"),
    "duration": ("duration", "runtime", "run_time"),
    "num_gpus": ("num_gpus", "gpus", "num_gpu", "gpu_count"),
}
OPTIONAL_FIELDS: dict[str, tuple[str, ...]] = {
    "job_id": ("job_id", "jobid", "job_name", "id"),
    "job_type": ("job_type", "jobtype", "model"),
    "tenant": ("tenant", "user", "vc", "virtual_cluster", "organization"),
    "allowed_gpu_types": ("allowed_gpu_types", "gpu_types", "gpu_spec"),
    "job_class": ("job_class", "class", "priority_class"),
    "deadline": ("deadline", "deadline_s", "relative_deadline"),
}

#: How many tenant names the report's note lists at most.
_MAX_TENANTS_LISTED = 30

_JOB_TYPE_INDEX = {name.strip().lower(): i for i, name in enumerate(JOB_TYPES)}


def display_name(path: PathLike) -> str:
    """A workload name from a file name: without directories and ``.csv``/``.gz`` suffixes."""
    base = Path(path).name
    for suffix in (".gz", ".csv"):
        if base.lower().endswith(suffix):
            base = base[: -len(suffix)]
    return base or str(path)


def parse_allowed_gpu_types(table: CsvTable, canonical: str = "allowed_gpu_types"
                            ) -> list[Optional[frozenset[str]]]:
    """Each row's set of canonical GPU type names (``None`` = any type)."""
    out: list[Optional[frozenset[str]]] = []
    cache: dict[str, Optional[frozenset[str]]] = {}
    fname = table.name_of(canonical)
    for i, cell in enumerate(table.strings(canonical)):
        if cell in cache:
            out.append(cache[cell])
            continue
        parts = [p.strip() for p in cell.split("|")]
        parts = [p for p in parts if p]
        if not parts:
            value = None
        else:
            value = frozenset(canonical_gpu_name(p, file=table.file, row=table.row_numbers[i],
                                                 field=fname) for p in parts)
        cache[cell] = value
        out.append(value)
    return out


def parse_job_types(table: CsvTable, canonical: str = "job_type") -> np.ndarray:
    """Job-type indices; -1 for an empty cell (to be assigned by the seeded rule)."""
    out = np.empty(table.num_rows, dtype=np.int64)
    for i, cell in enumerate(table.strings(canonical)):
        if not cell:
            out[i] = -1
            continue
        idx = _JOB_TYPE_INDEX.get(cell.lower())
        if idx is None:
            text = cell[1:] if cell[:1] in "+-" else cell
            if text.isdigit():
                k = int(cell)
                if not 0 <= k < len(JOB_TYPES):
                    raise table.error(f"job type index {cell} out of range 0..{len(JOB_TYPES) - 1}",
                                      i, canonical)
                idx = k
        if idx is None:
            examples = ", ".join(repr(t) for t in JOB_TYPES[:3])
            raise table.error(f"unknown job type {cell!r}: give one of the {len(JOB_TYPES)} "
                              f"Gavel job types (e.g. {examples}) or an index 0..{len(JOB_TYPES) - 1}",
                              i, canonical)
        out[i] = idx
    return out


def check_unique_ids(table: CsvTable, ids: Sequence[str], canonical: str) -> None:
    """DataError naming both rows for the first duplicated id."""
    first: dict[str, int] = {}
    for i, jid in enumerate(ids):
        if not jid:
            raise table.error("empty id", i, canonical)
        j = first.setdefault(jid, i)
        if j != i:
            raise table.error(f"duplicate id {jid!r}: rows {table.row_numbers[j]} and "
                              f"{table.row_numbers[i]} have the same id", i, canonical)


def gpu_counts(table: CsvTable, canonical: str, report: LoadReport, *,
               zero_is_error: bool = True) -> np.ndarray:
    """Whole GPU counts; fractions in (0, 1) become 1 (counted in a note)."""
    g = table.floats(canonical, max_value=MAX_GPUS, what="GPU count", allow_negative=zero_is_error)
    if zero_is_error:     # negative and zero counts get one message, which says what is accepted
        bad = np.flatnonzero(g <= 0)
        if bad.size:
            i = int(bad[0])
            raise table.error(f"GPU count {table.strings(canonical)[i]!r}: a job of a user trace needs at least "
                              f"one GPU (0 GPUs: CPU-only jobs are not simulated; a fraction in (0, 1) is "
                              f"rounded up to 1)", i, canonical)
    frac = (g > 0) & (g < 1)
    n_frac = int(frac.sum())
    g = np.where(frac, 1.0, g)
    out = table.check_integral(g, canonical, what="GPU count")
    if n_frac:
        report.notes.append(f"{n_frac} jobs asked for a fraction of one GPU: rounded up to 1 "
                            f"whole GPU")
    return out


def build_workload(*, name: str, report: LoadReport, file: str, ids: Sequence[str],
                   submit: np.ndarray, duration: np.ndarray, gpus: np.ndarray,
                   rows: np.ndarray, seed: int, job_type: Optional[np.ndarray] = None,
                   tenant_keys: Optional[Sequence[str]] = None,
                   tenant_order: Optional[Sequence[str]] = None,
                   allowed: Optional[Sequence[Optional[frozenset[str]]]] = None,
                   submit_field: Optional[str] = None, job_class: Optional[np.ndarray] = None,
                   deadline: Optional[np.ndarray] = None) -> Workload:
    """Sort, rebase, index tenants, assign missing job types and build the Workload.

    All per-job inputs hold the *kept* jobs in file order. ``job_type`` entries of -1 (or no
    ``job_type`` at all) are assigned by the seeded rule, in the sorted order of the jobs.
    ``tenant_order`` fixes tenant indices by a documented list instead of first appearance.
    """
    n = len(ids)
    if n == 0:
        raise DataError("no job left after filtering: " + "; ".join(
            f"{k}: {v}" for k, v in sorted(report.filtered.items())), file=file)
    order = np.argsort(submit, kind="stable")
    out_of_order = int(np.sum(np.diff(submit) < 0))
    if out_of_order:
        report.notes.append(f"submit times were not sorted ({out_of_order} rows earlier than the "
                            f"row before): jobs sorted stably by submit time")
    submit = submit[order]
    t0 = float(submit[0])
    submit = submit - t0
    span = float(submit[-1])
    if span > MAX_SECONDS:
        raise DataError(f"submit times span {span:.0f} s (> 10 years): absurd; check the unit",
                        file=file, row=int(rows[order[-1]]), field=submit_field)
    if t0 != 0.0:
        report.notes.append(f"submit times rebased: the first job submits at 0 (offset {t0:g} s)")
    ids_sorted = tuple(ids[i] for i in order)
    duration = np.asarray(duration, dtype=np.float64)[order]
    gpus = np.asarray(gpus, dtype=np.int64)[order]
    rows = np.asarray(rows, dtype=np.int64)[order]

    if tenant_keys is None:
        tenant = np.zeros(n, dtype=np.int64)
    else:
        keys = [tenant_keys[i] for i in order]
        index: dict[str, int] = {}
        if tenant_order is not None:
            index = {k: j for j, k in enumerate(tenant_order)}
        else:
            for k in keys:
                index.setdefault(k, len(index))
        tenant = np.fromiter((index[k] for k in keys), dtype=np.int64, count=n)
        names = sorted(index, key=index.get)
        listed = ", ".join(f"{j}={k!r}" for j, k in enumerate(names[:_MAX_TENANTS_LISTED]))
        more = "" if len(names) <= _MAX_TENANTS_LISTED else f", ... ({len(names)} in all)"
        report.notes.append(f"tenants (index=name): {listed}{more}")

    if job_type is None:
        jt = np.full(n, -1, dtype=np.int64)
    else:
        jt = np.asarray(job_type, dtype=np.int64)[order]
    missing = jt < 0
    n_missing = int(missing.sum())
    if n_missing:
        drawn = assign_job_types(n_missing, seed, gpus=gpus[missing])
        jt = jt.copy()
        jt[missing] = drawn
        report.notes.append(f"{n_missing} jobs had no job type: assigned by Gavel's seeded rule "
                            f"(uniform over the job types; distributed types for multi-GPU jobs; "
                            f"seed {seed})")

    allowed_sorted = None
    if allowed is not None and any(a is not None for a in allowed):
        allowed_sorted = tuple(allowed[i] for i in order)

    report.rows_kept = n
    return Workload(name=name, job_ids=ids_sorted, submit=submit.astype(np.float64),
                    duration=duration, gpus=gpus, job_type=jt, tenant=tenant,
                    allowed_gpu_types=allowed_sorted, source_row=rows, report=report,
                    job_class=None if job_class is None else np.asarray(job_class, dtype=np.int64)[order],
                    deadline=None if deadline is None else np.asarray(deadline, dtype=np.float64)[order])


def workload_from_table(table: CsvTable, *, name: str, seed: int, id_prefix: str = "job-"
                        ) -> Workload:
    """The user-trace rules (module docstring) applied to an already read table."""
    report = LoadReport(source=table.file, rows_read=table.num_rows)
    submit, was_datetime = table.times("submit_time", what="submit time")
    if was_datetime:
        report.notes.append("submit_time: ISO-8601 date-times converted to seconds")
    duration = table.floats("duration", max_value=MAX_SECONDS, what="duration")
    gpus = gpu_counts(table, "num_gpus", report, zero_is_error=True)
    rows = np.arange(1, table.num_rows + 1, dtype=np.int64)

    if table.has("job_id"):
        ids = table.strings("job_id")
        check_unique_ids(table, ids, "job_id")
    else:
        ids = [f"{id_prefix}{r}" for r in table.row_numbers]
    job_type = parse_job_types(table) if table.has("job_type") else None
    tenant_keys = table.strings("tenant") if table.has("tenant") else None
    allowed = parse_allowed_gpu_types(table) if table.has("allowed_gpu_types") else None
    job_class = parse_job_classes(table) if table.has("job_class") else None
    deadline = parse_deadlines(table) if table.has("deadline") else None

    tiny = np.flatnonzero((duration > 0) & (duration < MIN_DURATION))
    if tiny.size:
        i = int(tiny[0])
        raise table.error(f"duration {float(duration[i]):g} s is below the minimum of {MIN_DURATION:g} s "
                          f"({tiny.size} rows): check the unit", i, "duration")
    keep = duration > 0
    n_zero = int((~keep).sum())
    if n_zero:
        report.drop("zero duration", n_zero)
        first = int(np.flatnonzero(~keep)[0])
        warnings.warn(f"{table.file}: {n_zero} of {table.num_rows} jobs have a zero duration and were dropped "
                      f"(first: row {table.row_numbers[first]}); see Workload.report", UserWarning, stacklevel=3)
        idx = np.flatnonzero(keep)
        ids = [ids[i] for i in idx]
        submit, duration, gpus, rows = submit[idx], duration[idx], gpus[idx], rows[idx]
        job_type = None if job_type is None else job_type[idx]
        tenant_keys = None if tenant_keys is None else [tenant_keys[i] for i in idx]
        allowed = None if allowed is None else [allowed[i] for i in idx]
        job_class = None if job_class is None else job_class[idx]
        deadline = None if deadline is None else deadline[idx]
    return build_workload(name=name, report=report, file=table.file, ids=ids, submit=submit,
                          duration=duration, gpus=gpus, rows=rows, seed=seed,
                          job_type=job_type, tenant_keys=tenant_keys, allowed=allowed,
                          submit_field=table.name_of("submit_time"), job_class=job_class, deadline=deadline)


def parse_job_classes(table: CsvTable) -> np.ndarray:
    """The ``job_class`` column as indices into :data:`cluster_env.core.objectives.JOB_CLASSES`
    (an empty cell: best-effort); an unknown value is an error naming its row."""
    from ..core.objectives import BEST_EFFORT, CLASS_SPELLINGS

    out = np.empty(table.num_rows, dtype=np.int64)
    for i, text in enumerate(table.strings("job_class")):
        key = text.lower()
        if not key:
            out[i] = BEST_EFFORT
        elif key in CLASS_SPELLINGS:
            out[i] = CLASS_SPELLINGS[key]
        else:
            raise table.error(f"unknown job class {text!r}; use one of {sorted(CLASS_SPELLINGS)} "
                              f"(empty: best-effort)", i, "job_class")
    return out


def parse_deadlines(table: CsvTable) -> np.ndarray:
    """The ``deadline`` column: seconds after submit (> 0), NaN for an empty cell (no deadline)."""
    # Negative and zero deadlines get one message, which says what is accepted.
    deadline = table.floats("deadline", max_value=MAX_SECONDS, what="deadline", allow_empty=True,
                            allow_negative=True)
    bad = np.flatnonzero(deadline <= 0)
    if bad.size:
        i = int(bad[0])
        raise table.error(f"deadline {table.strings('deadline')[i]!r}: a deadline is a number of seconds after "
                          f"submit greater than 0 (empty: no deadline)", i, "deadline")
    return deadline


def load_workload_csv(path: PathLike, *, columns: Optional[Mapping[str, Optional[str]]] = None,
                      name: Optional[str] = None, seed: int = 0) -> Workload:
    """Load a job trace from a CSV file (``.csv`` or ``.csv.gz``); see the module docstring.

    Args:
        path: the CSV file.
        columns: optional mapping canonical field -> header name in the file (overrides the
            default header names; map an optional field to ``None`` to ignore it).
        name: the workload's name (default: the file name without suffixes).
        seed: seed of the job-type rule for jobs without a job type.

    Raises:
        DataError: any problem in the file, naming the file, the 1-based data row and the field.
    """
    table = read_csv(path, required=REQUIRED_FIELDS, optional=OPTIONAL_FIELDS, columns=columns, columns_arg='workload_columns')
    return workload_from_table(table, name=name or display_name(path), seed=seed)


#: Workloads parsed by :func:`cached_workload_csv` in this process, most recently used last.
_PARSED: "OrderedDict[tuple, Workload]" = OrderedDict()
#: How many parsed files the cache keeps (a 1M-job workload holds about 100 MB).
PARSED_CACHE_SIZE = 4


def cached_workload_csv(path: PathLike, *, columns: Optional[Mapping[str, Optional[str]]] = None) -> Workload:
    """:func:`load_workload_csv` parsed once per process while the file is unchanged: every
    environment built on one user file (one per episode in the harness: a 1M-row file takes
    seconds to parse) shares one :class:`Workload`, keyed by the path as given and resolved, the
    file's size and modification time, and the column mapping. Its arrays are read-only, since
    every environment reads the same ones. Worker processes forked after the first build inherit
    it; others parse once each."""
    columns = check_column_map(columns, "workload_columns")
    p = Path(path)
    stat = p.stat()                 # FileNotFoundError names the path, as the loader's would
    key = (str(path), str(p.resolve()), stat.st_size, stat.st_mtime_ns, tuple(sorted(columns.items())))
    workload = _PARSED.get(key)
    if workload is None:
        workload = load_workload_csv(path, columns=columns or None)
        for array in (workload.submit, workload.duration, workload.gpus, workload.job_type, workload.tenant,
                      workload.source_row):
            if array is not None:
                array.setflags(write=False)
        _PARSED[key] = workload
        while len(_PARSED) > PARSED_CACHE_SIZE:
            _PARSED.popitem(last=False)
    _PARSED.move_to_end(key)
    return workload
