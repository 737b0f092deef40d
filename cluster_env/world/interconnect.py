"""Interconnect of a cluster's machines, and the all-reduce price of spreading a job over them.

The ``"allreduce"`` spread model (``WorldConfig(spread_model="allreduce")``) replaces the single
measured multiplier of Gavel (``"gavel"``, :func:`cluster_env.world.throughputs.spread_ratio_table`)
by a cost model that knows what crosses machines. Every step and every number is documented in
``docs/world_model.md`` ("Interconnect", "Spread penalty"); in short:

1. **An iteration is compute plus non-overlapped communication.** Data-parallel training
   all-reduces the gradients every iteration; on one machine that traffic stays on the machine
   (NVLink or PCIe) and is part of the measured consolidated time. Spread over machines, the
   part that crosses machines adds ``X = a(n) S / B`` seconds, with ``S`` the gradient bytes,
   ``a(n) = 2 (n - 1) / n`` the ring all-reduce's traffic per byte (NCCL's "bus bandwidth"
   factor) and ``B`` the bottleneck bandwidth of the ring's machine crossings.
2. **Gavel's ratio gives the communication share at Gavel's testbed.** Gavel measured the
   throughput of each job type consolidated (one server) and unconsolidated (workers on several
   servers), ratio ``r``. Then ``kappa = 1 / r - 1 = X / C`` at the testbed's inter-node bandwidth
   ``B_testbed`` (:data:`GAVEL_TESTBED_GBPS`, one shared NIC per server: the split's shape does
   not change ``B`` there).
3. **Another cluster is priced by what crosses machines.** The job's *communication demand* on a
   GPU type ``t`` is ``D = kappa x B_testbed x f_t x a(n) / a(n_bucket)`` (Gb/s): the inter-node
   bandwidth at which it would communicate as long as it computes. ``f_t`` is the GPU's speed over
   its Gavel anchor (a faster GPU computes the same iteration sooner, so the same bytes are a
   larger share) and ``a(n) / a(n_bucket)`` rescales Gavel's 2/4/8-GPU measurement to the job's
   own width. A placement's bottleneck bandwidth is, over its machines, the smallest of
   ``min(g_i x nic_per_gpu, nic_per_machine)`` (one NIC per GPU, as on DGX A100/H100 nodes: a 7+1
   split's single-GPU side has one NIC, a 4+4 split's sides four each; one shared NIC: the shape
   does not matter) and, where the job holds two or more GPUs of a machine, the intra-node link
   (NVLink or PCIe) the ring also crosses. Then ``x = D / B`` and the job's speed is
   ``(1 + x_ref) / (1 + x)`` of its measured one, at most 1, where ``x_ref`` is ``x`` at the
   fewest-machines placement the trace duration was measured on (0 on one machine).

``WorldConfig(comm_source="measured")`` (world model v3) replaces step 3's derivation, where a
multi-node profile exists, by the demand fitted on measured runs
(:mod:`cluster_env.world.comm_calibration`). :func:`spread_floor` gives the speed-aware placers'
spread guard the lowest multiplier this model can charge a job.

:func:`allreduce_speed_factor` is the one function both the Python simulator and the compiled
engine call at launch (plain arithmetic: the same bits in both). Defaults per GPU type:
:data:`INTERCONNECT_DEFAULTS`, each number with its source; ``WorldConfig(interconnect=...)``
overrides them.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Sequence, Tuple

import numpy as np

from cluster_env.world.gpu_catalog import canonical_gpu_name, gpu_spec
from cluster_env.world.comm_calibration import _CLASS_GPU, SERVER_CLASS, measured_demand
from cluster_env.world.interconnect_specs import (
    GAVEL_TESTBED_GBPS, INTERCONNECT_DEFAULTS, INTERCONNECT_FIELDS, Interconnect,
)
from cluster_env.world.throughputs import (
    GPU_COUNT_BUCKETS, JOB_TYPES, bucket_index, gavel_comm_ratio_table, relative_speed_table, speed_factor_table,
)

__all__ = [
    "SPREAD_MODELS",
    "GAVEL_TESTBED_GBPS",
    "Interconnect",
    "INTERCONNECT_DEFAULTS",
    "INTERCONNECT_FIELDS",
    "interconnect_for",
    "validate_interconnect_overrides",
    "network_table",
    "ring_factor",
    "allreduce_speed_factor",
    "reference_ratio",
    "communication_demand",
    "spread_floor",
]

#: Values of ``WorldConfig.spread_model``: ``"gavel"`` (Gavel's measured multiplier, the v0/v1
#: rule) and ``"allreduce"`` (this module's cost model).
SPREAD_MODELS = ("gavel", "allreduce")

def interconnect_for(gpu_type: str, overrides: Sequence[Tuple[str, str, float]] = ()) -> Interconnect:
    """The interconnect of ``gpu_type``'s machines: its default (or its Gavel anchor's testbed
    server when it has none), with ``overrides`` ``(gpu type, field, Gb/s)`` applied."""
    name = canonical_gpu_name(gpu_type)
    base = INTERCONNECT_DEFAULTS.get(name)
    if base is None:
        anchor = INTERCONNECT_DEFAULTS[gpu_spec(name).anchor]
        base = replace(anchor, source=f"no default for {name}: its Gavel anchor's server ({anchor.source})")
    for typ, field, value in overrides:
        if canonical_gpu_name(typ) == name:
            base = replace(base, **{field: float(value)}, source=base.source + f"; {field} overridden")
    return base


def validate_interconnect_overrides(overrides) -> None:
    """Check ``WorldConfig.interconnect``: a tuple of ``(gpu type, field, Gb/s)``.

    Raises:
        TypeError / ValueError: naming the entry and the field (``interconnect[0].nic_per_gpu``).
    """
    if not isinstance(overrides, (tuple, list)):
        raise TypeError(f"interconnect must be a tuple of (gpu type, field, Gb/s), got {overrides!r}")
    for i, entry in enumerate(overrides):
        where = f"interconnect[{i}]"
        if not isinstance(entry, (tuple, list)) or len(entry) != 3:
            raise TypeError(f"{where} must be (gpu type, field, Gb/s), got {entry!r}")
        typ, field, value = entry
        if not isinstance(typ, str):
            raise TypeError(f"{where}: the GPU type must be a name, got {typ!r}")
        canonical_gpu_name(typ)   # raises UnknownGPUTypeError naming it
        if field not in INTERCONNECT_FIELDS:
            raise ValueError(f"{where}: unknown field {field!r}; one of {INTERCONNECT_FIELDS}")
        name = f"{where}.{field}"
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"{name} must be a number of Gb/s, got {value!r}")
        if math.isnan(value) or not value > 0:
            raise ValueError(f"{name} must be a positive number of Gb/s, got {value}")
        if math.isinf(value) and field != "nic_per_gpu":
            raise ValueError(f"{name} must be finite (only nic_per_gpu may be inf: a shared NIC), got {value}")


def network_table(gpu_type_names: Sequence[str], overrides: Sequence[Tuple[str, str, float]] = ()) -> np.ndarray:
    """(3, T) float64: rows nic_per_gpu, nic_per_machine, intra of each GPU type, Gb/s."""
    rows = [interconnect_for(n, overrides) for n in gpu_type_names]
    return np.array([[getattr(r, f) for r in rows] for f in INTERCONNECT_FIELDS], dtype=np.float64)


def ring_factor(n: np.ndarray) -> np.ndarray:
    """``a(n) = 2 (n - 1) / n``: bytes a ring all-reduce moves over each link per gradient byte."""
    n = np.asarray(n, dtype=np.float64)
    return 2.0 * (n - 1.0) / n


def allreduce_speed_factor(job, pool_m, pool_g, off, ln, mtype, demand, xref, net) -> float:
    """Speed multiplier of ``job`` placed on machines ``pool_m[off:off+ln]`` holding
    ``pool_g[off:off+ln]`` of its GPUs: ``min(1, (1 + xref[job]) / (1 + D / B))``.

    ``mtype``: (M,) GPU type of each machine; ``demand``: (N, T) communication demand, Gb/s;
    ``xref``: (N,) the comm/compute ratio at the job's reference placement; ``net``: (3, T) from
    :func:`network_table`. Plain scalar arithmetic in a fixed order: the Python simulator and the
    compiled engine (which compiles this very function) get the same bits.
    """
    bw = math.inf
    d = math.inf
    for p in range(off, off + ln):
        t = mtype[pool_m[p]]
        g = pool_g[p]
        b = min(g * net[0, t], net[1, t])
        if g > 1:
            b = min(b, net[2, t])
        bw = min(bw, b)
        d = min(d, demand[job, t])
    factor = (1.0 + xref[job]) / (1.0 + d / bw)
    return min(factor, 1.0)


def reference_ratio(job_type: np.ndarray, gpus: np.ndarray, allowed, machine_gpus: np.ndarray,
                    machine_type: np.ndarray, demand: np.ndarray, net: np.ndarray,
                    fewest: np.ndarray) -> np.ndarray:
    """(N,) ``x`` at each job's reference placement: its GPUs on the ``fewest[j]`` largest machines
    of its allowed types (largest first, stable in machine order), each filled in turn; 0 where
    that is one machine. The same greedy as the simulator's fewest-machines count."""
    n = len(gpus)
    out = np.zeros(n, dtype=np.float64)
    order = np.argsort(-machine_gpus, kind="stable")
    for j in range(n):
        if fewest[j] <= 1:
            continue
        usable = order if allowed is None else order[allowed[j][machine_type[order]]]
        need = int(gpus[j])
        ms, gs = [], []
        for m in usable[: int(fewest[j])]:
            take = min(int(machine_gpus[m]), need)
            if take <= 0:
                break
            ms.append(int(m))
            gs.append(take)
            need -= take
        if len(ms) <= 1:
            continue
        bw = math.inf
        d = math.inf
        for m, g in zip(ms, gs):
            t = machine_type[m]
            b = min(g * net[0, t], net[1, t])
            if g > 1:
                b = min(b, net[2, t])
            bw = min(bw, b)
            d = min(d, demand[j, t])
        out[j] = d / bw
    return out


def communication_demand(gpu_type_names: Sequence[str], job_type: np.ndarray, gpus: np.ndarray,
                         testbed_gbps: float = GAVEL_TESTBED_GBPS, *, speeds: str = "spec-sheet",
                         shape: str = "raw", comm: str = "gavel") -> np.ndarray:
    """(N, T) float64: each job's communication demand on each GPU type, Gb/s (module docstring,
    step 3): ``kappa x testbed_gbps x f_t x a(n) / a(n_bucket)``; 0 for 1-GPU jobs. ``speeds`` and
    ``shape`` as ``WorldConfig``'s (``f_t`` per job type under ``speeds="measured"``; ``kappa``
    from the treated table under ``shape="capped"``). ``comm="measured"``: the demand measured on
    multi-node runs (:func:`cluster_env.world.comm_calibration.measured_demand`) x ``a(n)`` for the
    job types it covers, the derivation above for the others."""
    gavel = _gavel_demand(gpu_type_names, job_type, gpus, testbed_gbps, speeds, shape)
    if comm == "gavel":
        return gavel
    gpus = np.asarray(gpus)
    names = list(gpu_type_names)
    speed = relative_speed_table(names + list(CLASS_GPUS), "V100", speeds=speeds, shape=shape)[:, :, 0]
    t_count = len(names)
    cls = [CLASS_GPUS.index(_CLASS_GPU[SERVER_CLASS[n]]) if n in SERVER_CLASS else 0 for n in names]
    over_class = speed[:, :t_count] / speed[:, [t_count + c for c in cls]]                      # (J, T)
    per_ring = measured_demand(JOB_TYPES, names, over_class)[job_type]                          # (N, T)
    ring = np.where(gpus > 1, ring_factor(np.maximum(gpus, 1)), 0.0)[:, None]
    return np.ascontiguousarray(np.where(np.isnan(per_ring), gavel, per_ring * ring))


#: The GPUs the measured server classes profiled (comm_calibration's DGX A100 and g4dn T4).
CLASS_GPUS = ("A100", "T4")


def _gavel_demand(gpu_type_names: Sequence[str], job_type: np.ndarray, gpus: np.ndarray,
                  testbed_gbps: float, speeds: str, shape: str) -> np.ndarray:
    """The demand derived from Gavel's ratio at the testbed network (:func:`communication_demand`)."""
    gpus = np.asarray(gpus)
    bucket = bucket_index(gpus)
    kappa = gavel_comm_ratio_table(gpu_type_names, shape)[job_type, :, bucket]   # (N, T)
    measured_n = np.asarray(GPU_COUNT_BUCKETS)[bucket]
    width = np.where(gpus > 1, ring_factor(np.maximum(gpus, 1)) / ring_factor(np.maximum(measured_n, 2)), 0.0)
    if speeds == "spec-sheet":   # the v2 arithmetic: one factor per type
        factor = np.array([gpu_spec(n).factor for n in gpu_type_names], dtype=np.float64)
        return np.ascontiguousarray(kappa * float(testbed_gbps) * factor[None, :] * width[:, None])
    factor = speed_factor_table(gpu_type_names, speeds)[job_type]                  # (N, T)
    return np.ascontiguousarray(kappa * float(testbed_gbps) * factor * width[:, None])


def spread_floor(job_type_gpus: np.ndarray, demand: np.ndarray, xref: np.ndarray, net: np.ndarray,
                 allowed, machine_type: np.ndarray, machine_gpus: np.ndarray) -> np.ndarray:
    """(N,) the lowest speed multiplier :func:`allreduce_speed_factor` can charge each job on this
    cluster: over the GPU types present (and allowed to the job), ``min(1, (1 + xref) / (1 + D_t /
    B_t))`` with ``B_t`` the narrowest piece a placement can have on a machine of type ``t`` (one
    GPU: ``min(nic_per_gpu, nic_per_machine)``; two or more: the intra-node link too). A placement
    mixing types has ``D`` at most its bottleneck piece's type's, so no placement is charged less.
    1 for 1-GPU jobs. The spread guard of the speed-aware placers uses it under ``"allreduce"``
    (as it uses Gavel's lowest ratio under ``"gavel"``; ``baselines.placers.spread_context``).

    ``job_type_gpus``: (N,) GPUs of each job."""
    gpus = np.asarray(job_type_gpus)
    t_count = net.shape[1]
    widest = np.zeros(t_count, dtype=np.int64)
    np.maximum.at(widest, np.asarray(machine_type, dtype=np.intp), np.asarray(machine_gpus, dtype=np.int64))
    narrow = np.full(t_count, np.inf)
    for t in range(t_count):
        if widest[t] < 1:
            continue
        narrow[t] = min(net[0, t], net[1, t])
        if widest[t] >= 2:
            narrow[t] = min(narrow[t], 2.0 * net[0, t], net[1, t], net[2, t])
    out = np.ones(len(gpus), dtype=np.float64)
    for j in range(len(gpus)):
        if gpus[j] <= 1:
            continue
        worst = 1.0
        for t in range(t_count):
            if not np.isfinite(narrow[t]) or (allowed is not None and not allowed[j][t]):
                continue
            worst = min(worst, (1.0 + xref[j]) / (1.0 + demand[j, t] / narrow[t]))
        out[j] = worst
    return out
