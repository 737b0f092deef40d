"""Problem instances: the cluster (machines) and the workload (jobs) of one episode.

Instances are plain, immutable data. Generators and loaders (``cluster_env.loaders``,
``cluster_env.scenarios``) build them; the simulator (``cluster_env.core.simulator``) consumes
them. Keeping them apart from the dynamics lets a user build an instance from any source.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np


#: Job classes, by index: 0 best-effort (or spot: preemptible, no guarantee), 1 high-priority.
JOB_CLASSES = ("best-effort", "high-priority")
BEST_EFFORT, HIGH_PRIORITY = 0, 1


@dataclass
class LoadReport:
    """What a loader read, kept and filtered (nothing is dropped silently)."""

    source: str                                   # file name or generator description
    rows_read: int = 0                            # data rows seen (header excluded)
    rows_kept: int = 0                            # rows that became jobs / machines
    filtered: dict[str, int] = field(default_factory=dict)  # reason -> number of rows
    notes: list[str] = field(default_factory=list)          # documented transformations applied

    def drop(self, reason: str, n: int = 1) -> None:
        if n:
            self.filtered[reason] = self.filtered.get(reason, 0) + int(n)

    def summary(self) -> str:
        parts = [f"{self.source}: read {self.rows_read} rows, kept {self.rows_kept}"]
        for reason, n in sorted(self.filtered.items()):
            parts.append(f"  filtered {n}: {reason}")
        for note in self.notes:
            parts.append(f"  note: {note}")
        return "\n".join(parts)


@dataclass(frozen=True)
class Cluster:
    """A set of machines, each with one GPU type and a number of GPUs."""

    name: str
    machine_names: tuple[str, ...]                # (M,)
    gpu_type_names: tuple[str, ...]               # (T,) distinct canonical GPU type names, sorted
    machine_type: np.ndarray                      # (M,) int64 index into gpu_type_names
    machine_gpus: np.ndarray                      # (M,) int64 GPUs on the machine, >= 1

    def __post_init__(self) -> None:
        m = len(self.machine_names)
        if self.machine_type.shape != (m,) or self.machine_gpus.shape != (m,):
            raise ValueError(f"cluster {self.name!r}: machine arrays must have shape ({m},)")
        if m == 0:
            raise ValueError(f"cluster {self.name!r} has no machine")
        if np.any(self.machine_gpus < 1):
            raise ValueError(f"cluster {self.name!r}: every machine needs at least one GPU")
        if np.any((self.machine_type < 0) | (self.machine_type >= len(self.gpu_type_names))):
            raise ValueError(f"cluster {self.name!r}: machine_type must index gpu_type_names "
                             f"({len(self.gpu_type_names)} names)")

    @property
    def num_machines(self) -> int:
        return len(self.machine_names)

    @property
    def total_gpus(self) -> int:
        return int(self.machine_gpus.sum())

    def gpus_of_type(self) -> dict[str, int]:
        """GPU count per GPU type name."""
        out = {}
        for t, name in enumerate(self.gpu_type_names):
            out[name] = int(self.machine_gpus[self.machine_type == t].sum())
        return out

    @staticmethod
    def from_machines(name: str, machines: list[tuple[str, str, int]]) -> "Cluster":
        """Build from ``(machine_name, canonical_gpu_type, gpus)`` triples."""
        type_names = tuple(sorted({t for _, t, _ in machines}))
        index = {t: i for i, t in enumerate(type_names)}
        return Cluster(
            name=name,
            machine_names=tuple(m for m, _, _ in machines),
            gpu_type_names=type_names,
            machine_type=np.array([index[t] for _, t, _ in machines], dtype=np.int64),
            machine_gpus=np.array([g for _, _, g in machines], dtype=np.int64),
        )


@dataclass(frozen=True)
class Workload:
    """Jobs of one episode, sorted by submit time (ties keep input order).

    ``duration`` is the job's amount of work: its runtime in seconds on the scenario's reference
    GPU type when placed consolidated and alone, with no fluctuation.
    """

    name: str
    job_ids: tuple[str, ...]                      # (N,)
    submit: np.ndarray                            # (N,) float64 seconds, non-decreasing, >= 0
    duration: np.ndarray                          # (N,) float64 seconds of work, > 0
    gpus: np.ndarray                              # (N,) int64 GPUs requested, >= 1
    job_type: np.ndarray                          # (N,) int64 index into world.throughputs.JOB_TYPES
    tenant: np.ndarray                            # (N,) int64 tenant index, >= 0
    allowed_gpu_types: Optional[tuple[Optional[frozenset[str]], ...]] = None  # (N,) None = any type
    source_row: Optional[np.ndarray] = None       # (N,) int64 1-based data row in the source file
    report: Optional[LoadReport] = None
    # Service objectives (docs/objectives.md, cluster_env.core.objectives); None: the workload has none (every trace before).
    job_class: Optional[np.ndarray] = None        # (N,) int64 index into JOB_CLASSES
    deadline: Optional[np.ndarray] = None         # (N,) float64 seconds after submit to finish by; nan: none
    tenant_quota: Optional[np.ndarray] = None     # (T,) float64 guaranteed share of the cluster's GPUs; nan: none
    tenant_borrow: Optional[np.ndarray] = None    # (T,) bool: may the tenant run beyond its quota

    def __post_init__(self) -> None:
        n = len(self.job_ids)
        for name in ("submit", "duration", "gpus", "job_type", "tenant"):
            arr = getattr(self, name)
            if arr.shape != (n,):
                raise ValueError(f"workload {self.name!r}: {name} must have shape ({n},), got {arr.shape}")
        if n and np.any(np.diff(self.submit) < 0):
            raise ValueError(f"workload {self.name!r}: submit times must be sorted")
        # Values a hand-built workload can get wrong; NaN and 0 used to fail deep in the
        # simulator (or silently give NaN metrics).
        from cluster_env.world.throughputs import JOB_TYPES

        checks = (
            ("submit", np.isfinite(self.submit) & (self.submit >= 0), "a finite number >= 0"),
            ("duration", np.isfinite(self.duration) & (self.duration > 0), "a finite number > 0"),
            ("gpus", self.gpus >= 1, "an integer >= 1"),
            ("job_type", (self.job_type >= 0) & (self.job_type < len(JOB_TYPES)),
             f"an index into the {len(JOB_TYPES)} job types"),
            ("tenant", self.tenant >= 0, "an integer >= 0"),
        )
        for name, ok, rule in checks:
            bad = np.flatnonzero(~ok)
            if bad.size:
                i = int(bad[0])
                raise ValueError(f"workload {self.name!r}: {name} of job {i} ({self.job_ids[i]!r}) is "
                                 f"{getattr(self, name)[i]}; it must be {rule}")
        if self.allowed_gpu_types is not None and len(self.allowed_gpu_types) != n:
            raise ValueError(f"workload {self.name!r}: allowed_gpu_types must have {n} entries")
        check_objective_fields(self)

    @property
    def num_jobs(self) -> int:
        return len(self.job_ids)

    @property
    def has_objectives(self) -> bool:
        """Whether any job carries a class or deadline or any tenant a quota (docs/objectives.md)."""
        return any(a is not None for a in (self.job_class, self.deadline, self.tenant_quota))

    @property
    def num_tenants(self) -> int:
        return int(self.tenant.max()) + 1 if len(self.tenant) else 0

    def digest(self) -> str:
        """16 hex digits identifying the jobs this workload plays: their ids, submit times,
        durations, GPUs, job types, tenants and allowed GPU types (not its name, source rows or
        load report). Two episodes with the same digest play the same window of jobs; the harness
        counts them as one window in its confidence intervals."""
        import hashlib

        h = hashlib.sha256()
        h.update("\x1f".join(self.job_ids).encode("utf-8", "surrogatepass"))
        for arr, dtype in ((self.submit, np.float64), (self.duration, np.float64), (self.gpus, np.int64),
                           (self.job_type, np.int64), (self.tenant, np.int64)):
            h.update(np.ascontiguousarray(arr, dtype=dtype).tobytes())
        if self.allowed_gpu_types is not None:
            h.update(repr([None if a is None else sorted(a) for a in self.allowed_gpu_types]).encode())
        # Objective fields only when present: a workload without them keeps its digest.
        for label, arr, dtype in (("class", self.job_class, np.int64), ("deadline", self.deadline, np.float64),
                                  ("quota", self.tenant_quota, np.float64), ("borrow", self.tenant_borrow, np.bool_)):
            if arr is not None:
                h.update(label.encode())
                h.update(np.ascontiguousarray(arr, dtype=dtype).tobytes())
        return h.hexdigest()[:16]

    def subset(self, index: np.ndarray, name: Optional[str] = None, rebase: bool = True) -> "Workload":
        """Jobs at ``index`` (sorted positions), optionally rebased so the first submits at 0."""
        index = np.asarray(index, dtype=np.int64)
        submit = self.submit[index].astype(np.float64)
        if rebase and len(submit):
            submit = submit - submit[0]
        # The positions as Python ints: indexing the tuples with numpy scalars costs several times more.
        positions = index.tolist()
        allowed = None
        if self.allowed_gpu_types is not None:
            allowed = tuple(map(self.allowed_gpu_types.__getitem__, positions))
        return Workload(
            name=name or self.name,
            job_ids=tuple(map(self.job_ids.__getitem__, positions)),
            submit=submit,
            duration=self.duration[index].astype(np.float64),
            gpus=self.gpus[index].astype(np.int64),
            job_type=self.job_type[index].astype(np.int64),
            tenant=self.tenant[index].astype(np.int64),
            allowed_gpu_types=allowed,
            source_row=None if self.source_row is None else self.source_row[index],
            report=self.report,
            job_class=None if self.job_class is None else self.job_class[index],
            deadline=None if self.deadline is None else self.deadline[index],
            tenant_quota=self.tenant_quota, tenant_borrow=self.tenant_borrow,
        )


def check_objective_fields(w: "Workload") -> None:
    """Raise ``ValueError`` naming the field and job (or tenant) when an objective field is malformed."""
    n = w.num_jobs
    if w.job_class is not None:
        _shape(w, "job_class", w.job_class, n)
        bad = np.flatnonzero((w.job_class < 0) | (w.job_class >= len(JOB_CLASSES)))
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"workload {w.name!r}: job_class of job {i} ({w.job_ids[i]!r}) is {w.job_class[i]}; "
                             f"it must index {list(JOB_CLASSES)}")
    if w.deadline is not None:
        _shape(w, "deadline", w.deadline, n)
        bad = np.flatnonzero(~np.isnan(w.deadline) & ~(np.isfinite(w.deadline) & (w.deadline > 0)))
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"workload {w.name!r}: deadline of job {i} ({w.job_ids[i]!r}) is {w.deadline[i]}; "
                             f"it must be a finite number of seconds after submit > 0, or NaN for none")
    tenants = w.num_tenants
    for name in ("tenant_quota", "tenant_borrow"):
        arr = getattr(w, name)
        if arr is not None and (arr.ndim != 1 or len(arr) < tenants):
            raise ValueError(f"workload {w.name!r}: {name} must have one entry per tenant ({tenants}), "
                             f"got shape {arr.shape}")
    if w.tenant_quota is not None:
        q = w.tenant_quota
        bad = np.flatnonzero(~np.isnan(q) & ~((q >= 0) & (q <= 1)))
        if bad.size:
            raise ValueError(f"workload {w.name!r}: tenant_quota of tenant {int(bad[0])} is {q[bad[0]]}; "
                             f"it must be a share in [0, 1] or NaN for none")
        if np.nansum(q) > 1 + 1e-9:
            raise ValueError(f"workload {w.name!r}: tenant quotas sum to {np.nansum(q):.6g} > 1 "
                             f"(guaranteed shares cannot exceed the cluster)")


def _shape(w: "Workload", name: str, arr: np.ndarray, n: int) -> None:
    if arr.shape != (n,):
        raise ValueError(f"workload {w.name!r}: {name} must have shape ({n},), got {arr.shape}")
