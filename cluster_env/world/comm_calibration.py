"""Communication priced from measured multi-node runs (docs/world_model.md, "World model v3").

The all-reduce spread model (:mod:`cluster_env.world.interconnect`) needs each job's communication
demand ``D`` (Gb/s: the bandwidth at which it would communicate as long as it computes). Without
other data it derives ``D`` from Gavel's consolidated/unconsolidated ratio at an *assumed* testbed
network (10 Gb/s, ``GAVEL_TESTBED_GBPS``). This module measures it instead where a profile exists.

Data: the Sia/Pollux placement profiles (``cluster_env/data/sia``: Pollux's raw; of Sia's DGX A100
only the figures the fit reads, :func:`cross_node_rows`), the same model at every placement from
one GPU to several servers, at several local batch sizes, on two server classes: Pollux's AWS
g4dn.12xlarge (4 x T4, one shared NIC, AWS's listed "50 Gigabit": :data:`POLLUX_NETWORK_GBPS`; up
to 4 servers x 4 GPUs) and Sia's DGX A100 (8 x A100 with NVLink;
two nodes, every split of up to 16 GPUs; its network is not stated in the artifact: ASSUMPTION, the
DGX A100 layout of ``INTERCONNECT_DEFAULTS``, one 200 Gb/s NIC per GPU).

Fit (:func:`fit_sync_cost`): every multi-server row gives ``X``, the time the all-reduce across
servers adds to a step, and the model says ``X = a(n) S / b`` with ``a(n) = 2 (n - 1) / n`` (the
ring factor), ``b`` the placement's bottleneck bandwidth as the all-reduce model computes it, and
``S`` one number per (model, server class): the *effective* gradient traffic (Gb), least squares
over all rows. The fit's error per model is the relative error of the predicted step time.

Demand (:func:`measured_demand`): ``D = S / C_t(b_j)`` Gb/s per unit ring factor for a GPU type of
a measured server class (:data:`SERVER_CLASS`: A100, A800, H800 and the DGX-class codes from the
DGX A100 profile; T4 and A10 from the g4dn profile), where ``C_t(b_j)`` is the model's one-GPU
step time on the class's GPU at the job type's batch size ``b_j`` (Gavel's batch size taken as the
per-GPU batch, log-log interpolated between the profiled local batch sizes, clamped to their range)
divided by the type's speed over that GPU (the world's table). Job families without a profiled
model (A3C, CycleGAN, Recommendation: :data:`~cluster_env.world.measured_speeds.MODEL_OF_FAMILY`)
and GPU types without a measured class (Gavel's K80/P100/V100 servers, on which Gavel's own
unconsolidated runs are the measurement and the assumed testbed bandwidth cancels) keep Gavel's
derivation. ``WorldConfig(comm_source="measured")`` selects it.

What the fits say: on the DGX A100 nodes a 7+1 or 4+4 split costs the profiled models almost
nothing (step time within a few percent of 8 on one node: ``S`` near 0); on the g4dn servers the
same models lose up to 2x across servers (``S`` implies 13-25 % of the nominal 50 Gb/s for the
fp32 gradients of ResNet-18, ResNet-50 and BERT-base: TCP over Ethernet). docs/world_model.md,
"World model v3", has the table.
"""
from __future__ import annotations

import functools
import math
from typing import Dict, List, Optional, Sequence

import numpy as np

from cluster_env.world.interconnect_specs import INTERCONNECT_DEFAULTS
from cluster_env.world.measured_speeds import (
    EXCLUDED_MODELS, MODEL_OF_FAMILY, RAW_SERVERS, SIA_MODELS, load_placements, one_gpu_profile, sia_figures,
)

__all__ = [
    "COMM_SOURCES",
    "POLLUX_NETWORK_GBPS",
    "cross_node_rows",
    "fit_sync_cost",
    "fit_table",
    "one_gpu_step_time",
    "measured_demand",
    "SERVER_CLASS",
    "dgx_split_ratios",
]

#: Values of ``WorldConfig.comm_source``: ``"gavel"`` (Gavel's ratio at the assumed testbed
#: network, the v2 worlds) and ``"measured"`` (this module, where a profile exists).
COMM_SOURCES = ("gavel", "measured")

#: Network of AWS g4dn.12xlarge (Pollux's servers), Gb/s: AWS EC2 instance-type table, "50 Gigabit".
POLLUX_NETWORK_GBPS = 50.0


#: Measured server class of each GPU type whose demand comes from a multi-node profile, and the
#: GPU type that class measured: DGX-class nodes (one NIC per GPU, NVLink) from the DGX A100
#: profile; PCIe servers with one shared NIC from Pollux's g4dn (T4) profile. Other types (Gavel's
#: K80/P100/V100 servers and their kin) keep Gavel's derivation: on those servers Gavel's own
#: unconsolidated runs are the measurement, and the assumed testbed bandwidth cancels.
SERVER_CLASS: Dict[str, str] = {"A100": "dgx-ext", "A800": "dgx-ext", "G3": "dgx-ext", "H800": "dgx-ext",
                                "GPU-series-2": "dgx-ext", "T4": "aws", "A10": "aws", "GPU-series-1": "aws"}
_CLASS_GPU = {"dgx-ext": "A100", "aws": "T4"}


def _piece_bandwidth(server: str, pieces: Sequence[int]) -> float:
    """The all-reduce model's bottleneck bandwidth (Gb/s) of a placement on ``server``'s nodes:
    the g4dn's one shared 50 Gb/s NIC, or the DGX A100 layout's (one NIC per GPU, NVLink)."""
    if server == "aws":
        return POLLUX_NETWORK_GBPS
    net = INTERCONNECT_DEFAULTS[_CLASS_GPU[server]]
    return min(min(g * net.nic_per_gpu, net.nic_per_machine, net.intra if g > 1 else math.inf) for g in pieces)


@functools.lru_cache(maxsize=None)
def cross_node_rows(model: str, server: str = "aws") -> tuple:
    """``model``'s multi-server rows on ``server`` with their one-server twins, in profile order:
    ``(placement, local_bsz, step_time, twin_step_time)``. The twin is the same local batch size
    on one server: with the same ``n`` GPUs on the 8-GPU DGX (placement ``str(n)``; rows of more
    than 8 GPUs have no twin and are left out), at one GPU on the 4-GPU g4dn (``"1"``: its 5-16-GPU
    runs have no one-server twin). g4dn: from the shipped raw profile; DGX A100: the shipped
    figures (:func:`~cluster_env.world.measured_speeds.sia_figures`, ``cross_node``, taken by that
    rule by ``benchmarks/derive_sia_figures.py``)."""
    if server not in RAW_SERVERS:
        return tuple((str(q), int(b), float(t), float(ref))
                     for q, b, t, ref in sia_figures()[model][server]["cross_node"])
    p = load_placements(model, server)
    place, bsz, step = p["placement"], p["local_bsz"], p["step_time"]
    table = {(q, int(b)): float(t) for q, b, t in zip(place, bsz, step)}
    rows = []
    for q, b, t in zip(place, bsz, step):
        if len(q) < 2 or ("1", int(b)) not in table:
            continue
        rows.append((str(q), int(b), float(t), table[("1", int(b))]))
    return tuple(rows)


@functools.lru_cache(maxsize=None)
def fit_sync_cost(model: str, server: str = "aws") -> Dict[str, float]:
    """The fit of ``X = a(n) S / b`` on ``model``'s multi-server rows on ``server`` (module
    docstring): ``X`` is the step time over its one-server twin's (:func:`cross_node_rows`: the
    same ``n`` GPUs on the 8-GPU DGX, one GPU on the 4-GPU g4dn, so there ``X`` holds the
    intra-server part too), ``b`` the placement's bottleneck bandwidth (:func:`_piece_bandwidth`),
    ``S`` (Gb per unit ring factor, the *effective* gradient traffic; clipped at 0) the
    least-squares fit. Returns ``S``, ``s`` (= S / 50 Gb/s, seconds, for comparison across
    servers), ``rows``, ``median_error`` and ``p90_error`` (relative error of the predicted step
    time), ``max_servers``, ``max_gpus``."""
    z, extra, base, servers, gpus = [], [], [], [], []
    for q, b, t, ref in cross_node_rows(model, server):
        pieces = [int(c) for c in q]
        n = sum(pieces)
        z.append(2.0 * (n - 1) / n / _piece_bandwidth(server, pieces))
        extra.append(t - ref)
        base.append(ref)
        servers.append(len(q))
        gpus.append(n)
    z, extra, base = np.asarray(z), np.asarray(extra), np.asarray(base)
    big_s = max(0.0, float(np.sum(z * extra) / np.sum(z * z)))
    err = np.abs((base + z * big_s) - (base + extra)) / (base + extra)
    return {"S": big_s, "s": big_s / POLLUX_NETWORK_GBPS, "rows": int(len(z)),
            "median_error": float(np.median(err)), "p90_error": float(np.quantile(err, 0.9)),
            "max_servers": int(max(servers)), "max_gpus": int(max(gpus))}


def fit_table() -> List[Dict[str, object]]:
    """One row per (server, profiled model): :func:`fit_sync_cost`, with the server and model."""
    return [{"server": srv, "model": m, **fit_sync_cost(m, srv)} for srv in ("aws", "dgx-ext") for m in SIA_MODELS]


def one_gpu_step_time(model: str, local_bsz: float, server: str = "aws") -> float:
    """``model``'s one-GPU step time (s) at ``local_bsz`` on ``server``, log-log interpolated
    between the profiled batch sizes and clamped to their range."""
    bsz, t = one_gpu_profile(model, server)
    b = bsz.astype(np.float64)
    order = np.argsort(b, kind="stable")
    return float(math.exp(np.interp(math.log(local_bsz), np.log(b[order]), np.log(t[order]))))


def _batch_size(job_type: str) -> Optional[float]:
    if "(batch size " not in job_type:
        return None
    return float(job_type.split("(batch size ", 1)[1].rstrip(")"))


def measured_demand(job_types: Sequence[str], gpu_type_names: Sequence[str],
                    speed_over_class: np.ndarray) -> np.ndarray:
    """(J, T) measured communication demand per unit ring factor, Gb/s: ``S / C_t(b_j)`` for a GPU
    type of a measured server class (:data:`SERVER_CLASS`) and a job type with a profiled model;
    NaN elsewhere (Gavel's derivation applies). ``speed_over_class``: (J, T) each GPU type's
    one-GPU speed over its class's measured GPU (A100 or T4) per job type (the world's table;
    any value where the type has no class)."""
    out = np.full((len(job_types), len(gpu_type_names)), np.nan)
    for t, name in enumerate(gpu_type_names):
        server = SERVER_CLASS.get(name)
        if server is None:
            continue
        for j, job in enumerate(job_types):
            model = MODEL_OF_FAMILY.get(job.split(" (", 1)[0])
            b = _batch_size(job)
            if model is None or model in EXCLUDED_MODELS or b is None:
                continue
            c = one_gpu_step_time(model, b, server) / speed_over_class[j, t]
            out[j, t] = fit_sync_cost(model, server)["S"] / c
    return out


def dgx_split_ratios(model: str) -> Dict[str, float]:
    """The direct measurement behind the DGX A100 fit: ``model``'s step time split 1+7 (``"17"``)
    and 4+4 (``"44"``) over two DGX A100 nodes, over its step time on 8 GPUs of one node, median
    over the local batch sizes profiled at both."""
    rows = cross_node_rows(model, "dgx-ext")      # a 1+7 or 4+4 row's twin is its 8 GPUs on one node
    return {split: float(np.median([t / ref for q, _, t, ref in rows if q == split])) for split in ("17", "44")}
