"""The real job traces shipped with ``cluster_env`` (``cluster_env/data/traces/``, see SOURCES.md).

Each is parsed once per seed and cached (:func:`functools.lru_cache`); the returned
:class:`~cluster_env.core.instance.Workload` is immutable, so callers share it safely (use
``Workload.subset`` to cut windows).

Philly (:func:`philly_trace`)
    All 82,247 jobs of Microsoft's Philly cluster (2017-09-04 .. 2017-12-22) from adaptdl's
    ``philly.csv``, read with the same rules as a user trace
    (:mod:`cluster_env.loaders.workload_csv`): submit time = seconds since the earliest
    ``timestamp``; ``duration`` in seconds; ``num_gpus`` as given (1..128); tenant = the
    virtual-cluster id of the ``cluster`` column (15 real tenants, indexed by first appearance in
    submit order); job type by Gavel's seeded rule (:func:`cluster_env.loaders.assign
    .assign_job_types`); job ids ``philly-<row>``. Zero-duration rows would be filtered and
    counted (the file has none).

Alibaba openb 2023 (:func:`openb_pods`)
    The 8,152 pods of ``openb_pod_list_default.csv`` (FGD, Weng et al., ATC'23). Rules, applied in
    this order, each counted in the report:

    1. ``num_gpu == 0`` -> filtered, reason :data:`CPU_ONLY` (the environment simulates GPUs only);
    2. empty ``scheduled_time`` -> filtered, reason :data:`NEVER_SCHEDULED` (Pending pods never
       ran, so their duration is unknown);
    3. duration = ``deletion_time - scheduled_time`` (the time the pod held its GPUs; the real
       queueing delay ``scheduled - creation`` is the scheduler's business, not the job's work);
       ``<= 0`` -> filtered, reason :data:`ZERO_DURATION` (none today);
    4. a fractional GPU (``num_gpu == 1`` and ``gpu_milli < 1000``) is rounded up to one whole GPU
       (the environment does not share GPUs); a note gives the count;
    5. pods whose phase is ``Running`` and whose ``deletion_time`` equals the trace's last
       ``deletion_time`` were still running when the trace ends: their duration is censored (a
       lower bound); they are kept and a note gives the count. ``Failed`` pods are kept (they held
       their GPUs until deletion); a note gives the count.

    Submit = ``creation_time`` (rebased to start at 0). Tenant = the Kubernetes QoS class, with
    fixed indices :data:`OPENB_QOS_CLASSES` (``LS`` = 0, ``BE`` = 1, ``Burstable`` = 2,
    ``Guaranteed`` = 3; any other value is an error). ``gpu_spec`` (empty in every row of this
    file) would become ``allowed_gpu_types`` (``|``-separated, through ``canonical_gpu_name``).
    Job ids are the pod names; job types by Gavel's seeded rule.
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from ..core.instance import LoadReport, Workload
from .csvio import MAX_GPUS, MAX_TIMESTAMP, read_csv
from .workload_csv import (build_workload, check_unique_ids, parse_allowed_gpu_types,
                           workload_from_table)

TRACE_DIR = Path(__file__).resolve().parent.parent / "data" / "traces"
PHILLY_FILE = TRACE_DIR / "philly.csv.gz"
OPENB_PODS_FILE = TRACE_DIR / "openb_pod_list_default.csv.gz"

#: openb filter reasons (keys of ``Workload.report.filtered``).
CPU_ONLY = "CPU-only pod"
NEVER_SCHEDULED = "never scheduled"
ZERO_DURATION = "zero duration"

#: Tenant index of each openb QoS class.
OPENB_QOS_CLASSES: tuple[str, ...] = ("LS", "BE", "Burstable", "Guaranteed")


@functools.lru_cache(maxsize=8)
def philly_trace(seed: int = 0) -> Workload:
    """All 82,247 Philly jobs (see the module docstring); ``seed`` drives the job-type rule."""
    table = read_csv(PHILLY_FILE,
                     required={"submit_time": ("timestamp",), "duration": ("duration",),
                               "num_gpus": ("num_gpus",)},
                     optional={"tenant": ("cluster",)})
    return workload_from_table(table, name="philly", seed=seed, id_prefix="philly-")


@functools.lru_cache(maxsize=8)
def openb_pods(seed: int = 0) -> Workload:
    """The GPU pods of Alibaba's openb 2023 trace (see the module docstring)."""
    table = read_csv(OPENB_PODS_FILE,
                     required={"name": ("name",), "num_gpu": ("num_gpu",),
                               "gpu_milli": ("gpu_milli",), "qos": ("qos",),
                               "pod_phase": ("pod_phase",), "creation_time": ("creation_time",),
                               "deletion_time": ("deletion_time",),
                               "scheduled_time": ("scheduled_time",)},
                     optional={"gpu_spec": ("gpu_spec",)})
    n = table.num_rows
    report = LoadReport(source=table.file, rows_read=n)
    names = table.strings("name")
    check_unique_ids(table, names, "name")
    num_gpu = table.ints("num_gpu", max_value=MAX_GPUS, what="GPU count")
    gpu_milli = table.ints("gpu_milli", max_value=1000 * MAX_GPUS, what="gpu_milli")
    creation = table.floats("creation_time", max_value=MAX_TIMESTAMP, what="creation time")
    deletion = table.floats("deletion_time", max_value=MAX_TIMESTAMP, what="deletion time")
    scheduled = table.floats("scheduled_time", max_value=MAX_TIMESTAMP, what="scheduled time",
                             allow_empty=True)
    qos = table.strings("qos")
    phase = table.strings("pod_phase")
    qos_index = {q: i for i, q in enumerate(OPENB_QOS_CLASSES)}
    for i, q in enumerate(qos):
        if q not in qos_index:
            raise table.error(f"unknown QoS class {q!r}; expected one of {OPENB_QOS_CLASSES}",
                              i, "qos")

    cpu_only = num_gpu == 0
    never = ~cpu_only & np.isnan(scheduled)
    duration = deletion - np.where(np.isnan(scheduled), 0.0, scheduled)
    zero = ~cpu_only & ~never & (duration <= 0)
    keep = ~(cpu_only | never | zero)
    report.drop(CPU_ONLY, int(cpu_only.sum()))
    report.drop(NEVER_SCHEDULED, int(never.sum()))
    report.drop(ZERO_DURATION, int(zero.sum()))

    idx = np.flatnonzero(keep)
    frac = keep & (num_gpu == 1) & (gpu_milli < 1000)
    if frac.any():
        report.notes.append(f"{int(frac.sum())} pods asked for a fraction of one GPU "
                            f"(gpu_milli < 1000): rounded up to 1 whole GPU")
    end = float(deletion.max())
    running = np.array([p == "Running" for p in phase], dtype=bool)
    censored = keep & running & (deletion == end)
    if censored.any():
        report.notes.append(f"{int(censored.sum())} pods were still Running at the end of the "
                            f"trace (deletion_time = {end:.0f}): their duration is censored "
                            f"(a lower bound)")
    failed = keep & np.array([p == "Failed" for p in phase], dtype=bool)
    if failed.any():
        report.notes.append(f"{int(failed.sum())} kept pods ended Failed (they held their GPUs "
                            f"until deletion)")
    report.notes.append("duration = deletion_time - scheduled_time; tenant = QoS class")

    allowed = None
    if table.has("gpu_spec") and any(table.strings("gpu_spec")):
        full = parse_allowed_gpu_types(table, "gpu_spec")
        allowed = [full[i] for i in idx]
    return build_workload(
        name="openb", report=report, file=table.file, ids=[names[i] for i in idx],
        submit=creation[idx], duration=duration[idx], gpus=num_gpu[idx],
        rows=np.arange(1, table.num_rows + 1, dtype=np.int64)[idx], seed=seed,
        tenant_keys=[qos[i] for i in idx], tenant_order=OPENB_QOS_CLASSES, allowed=allowed,
        submit_field=table.name_of("creation_time"))
