"""The real cluster machine lists shipped with ``cluster_env`` (``cluster_env/data/clusters/``).

Each is parsed once and cached; :func:`cluster_report` gives the LoadReport (rows read, kept and
filtered) of each packaged cluster by name.

* :func:`philly_cluster` (``"philly"``): Microsoft Philly's 552 machines (2,490 GPUs). The list
  gives GPUs per machine and the memory of one GPU, not the model. Documented rule (the usual
  reading of this list, e.g. in the Philly trace analysis of Jeon et al., ATC'19): GPUs of
  **12 GB -> P100** (the 12 GB PCIe P100; these machines have 2 GPUs) and **24 GB -> P40** (these
  machines have 8). Any other memory size is an error.
* :func:`openb_cluster` (``"openb"``): the 1,213 GPU nodes (6,212 GPUs) of Alibaba's openb 2023
  cluster; ``model`` through the GPU catalog (G2 and G3 are undisclosed internal codes).
* :func:`pai_cluster` (``"pai"``): Alibaba PAI 2020's machine spec (no header row; columns
  ``machine,gpu_type,cap_cpu,cap_mem,cap_gpu`` from the trace's ``pai_machine_spec.header``);
  the CPU-only machines (``gpu_type`` CPU, 0 GPUs) are filtered and counted.
* :func:`spot_cluster` (``"spot"``): the 4,278 GPU nodes of Alibaba's 2026 spot-GPU trace
  (A100-SXM4-80GB, A800-SXM4-80GB, H800, A10 and two undisclosed series).

:func:`scale_cluster` samples a smaller cluster that keeps a mix's proportions.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np

from ..core.instance import Cluster, LoadReport
from ..errors import DataError
from ..world.gpu_catalog import canonical_gpu_name
from .cluster_csv import read_cluster_csv
from .csvio import MAX_GPUS, read_csv, round_half_up

CLUSTER_DIR = Path(__file__).resolve().parent.parent / "data" / "clusters"
PHILLY_MACHINES_FILE = CLUSTER_DIR / "cluster_machine_list.csv.gz"
OPENB_NODES_FILE = CLUSTER_DIR / "openb_node_list_gpu_node.csv.gz"
PAI_MACHINES_FILE = CLUSTER_DIR / "pai_machine_spec.csv.gz"
SPOT_NODES_FILE = CLUSTER_DIR / "node_info_df.csv.gz"

#: Column names of ``pai_machine_spec.csv`` (from ``pai_machine_spec.header``).
PAI_MACHINE_SPEC_COLUMNS: tuple[str, ...] = ("machine", "gpu_type", "cap_cpu", "cap_mem",
                                             "cap_gpu")

#: Philly: memory of one GPU (as written in the list) -> GPU type (documented rule).
PHILLY_GPU_BY_MEMORY: dict[str, str] = {"12GB": "P100", "24GB": "P40"}


def _philly() -> tuple[Cluster, LoadReport]:
    table = read_csv(PHILLY_MACHINES_FILE,
                     required={"machine": ("machineid",), "num_gpus": ("number of gpus",),
                               "memory": ("single gpu mem",)})
    report = LoadReport(source=table.file, rows_read=table.num_rows)
    gpus = table.ints("num_gpus", max_value=MAX_GPUS, what="GPU count")
    names = table.strings("machine")
    machines: list[tuple[str, str, int]] = []
    seen: dict[str, int] = {}
    mem_field = table.name_of("memory")
    for i, mem in enumerate(table.strings("memory")):
        key = mem.replace(" ", "").upper()
        if key not in PHILLY_GPU_BY_MEMORY:
            raise table.error(f"GPU memory {mem!r} has no documented GPU type (known: "
                              f"{sorted(PHILLY_GPU_BY_MEMORY)})", i, "memory")
        prev = seen.setdefault(names[i], table.row_numbers[i])
        if prev != table.row_numbers[i]:
            raise table.error(f"duplicate machine name {names[i]!r}: rows {prev} and "
                              f"{table.row_numbers[i]}", i, "machine")
        if gpus[i] == 0:
            report.drop("CPU-only machine (0 GPUs)")
            continue
        gtype = canonical_gpu_name(PHILLY_GPU_BY_MEMORY[key], file=table.file,
                                   row=table.row_numbers[i], field=mem_field)
        machines.append((names[i], gtype, int(gpus[i])))
    report.rows_kept = len(machines)
    report.notes.append("GPU type from the memory of one GPU: 12GB -> P100, 24GB -> P40")
    return Cluster.from_machines("philly", machines), report


def _openb() -> tuple[Cluster, LoadReport]:
    return read_cluster_csv(OPENB_NODES_FILE, name="openb",
                            columns={"machine": "sn", "num_gpus": "gpu", "gpu_type": "model"})


def _pai() -> tuple[Cluster, LoadReport]:
    return read_cluster_csv(PAI_MACHINES_FILE, name="pai", fieldnames=PAI_MACHINE_SPEC_COLUMNS,
                            columns={"machine": "machine", "num_gpus": "cap_gpu",
                                     "gpu_type": "gpu_type"})


def _spot() -> tuple[Cluster, LoadReport]:
    return read_cluster_csv(SPOT_NODES_FILE, name="spot",
                            columns={"machine": "node_name", "num_gpus": "gpu_capacity_num",
                                     "gpu_type": "gpu_model"})


_BUILDERS = {"philly": _philly, "openb": _openb, "pai": _pai, "spot": _spot}


@functools.lru_cache(maxsize=None)
def _load(name: str) -> tuple[Cluster, LoadReport]:
    return _BUILDERS[name]()


def packaged_cluster_names() -> tuple[str, ...]:
    """Names accepted by :func:`packaged_cluster` and :func:`cluster_report`."""
    return tuple(_BUILDERS)


def packaged_cluster(name: str) -> Cluster:
    """A packaged cluster by name (``philly``, ``openb``, ``pai``, ``spot``)."""
    if name not in _BUILDERS:
        raise KeyError(f"unknown packaged cluster {name!r}; known: {list(_BUILDERS)}")
    return _load(name)[0]


def cluster_report(name: str) -> LoadReport:
    """The LoadReport (rows read, kept, filtered by reason) of a packaged cluster."""
    if name not in _BUILDERS:
        raise KeyError(f"unknown packaged cluster {name!r}; known: {list(_BUILDERS)}")
    return _load(name)[1]


def philly_cluster() -> Cluster:
    """Philly's 552 machines: 321 x 2 P100 and 231 x 8 P40 (2,490 GPUs)."""
    return _load("philly")[0]


def openb_cluster() -> Cluster:
    """Alibaba openb 2023: 1,213 GPU nodes, 6,212 GPUs."""
    return _load("openb")[0]


def pai_cluster() -> Cluster:
    """Alibaba PAI 2020: the GPU machines of the machine spec (CPU machines filtered)."""
    return _load("pai")[0]


def spot_cluster() -> Cluster:
    """Alibaba spot-GPU 2026: 4,278 GPU nodes."""
    return _load("spot")[0]


def natural_key(name: str) -> tuple:
    """Sort key that orders embedded numbers numerically (``m2`` before ``m10``)."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p)
                 for p in re.split(r"(\d+)", name) if p)


def scale_cluster(cluster: Cluster, fraction: float, name: str) -> Cluster:
    """A smaller cluster that keeps the proportions of each (GPU type, GPUs per machine) group.

    Rule: for every group of machines with the same GPU type and the same number of GPUs, keep
    ``max(1, floor(count * fraction + 0.5))`` machines (round half up, at least one per group
    present), namely the first ones of the group in natural name order (``m2`` before ``m10``).
    The kept machines stay in the original cluster's order. Deterministic; ``fraction`` must be
    in (0, 1] (1 returns a copy of the cluster under the new name).
    """
    fraction = float(fraction)
    if not (0.0 < fraction <= 1.0):
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    groups: dict[tuple[int, int], list[int]] = {}
    for m in range(cluster.num_machines):
        key = (int(cluster.machine_type[m]), int(cluster.machine_gpus[m]))
        groups.setdefault(key, []).append(m)
    keep: list[int] = []
    for members in groups.values():
        k = max(1, round_half_up(len(members) * fraction))
        members = sorted(members, key=lambda m: natural_key(cluster.machine_names[m]))
        keep.extend(members[:k])
    keep.sort()
    machines = [(cluster.machine_names[m], cluster.gpu_type_names[int(cluster.machine_type[m])],
                 int(cluster.machine_gpus[m])) for m in keep]
    if not machines:                                         # pragma: no cover - clusters are non-empty
        raise DataError(f"cluster {cluster.name!r} has no machine to scale")
    return Cluster.from_machines(name, machines)
