"""Communication priced from measured multi-node runs (issue 33, section 2).

The all-reduce spread model (:mod:`cluster_env.world.interconnect`) needs each job's communication
demand ``D`` (Gb/s: the bandwidth at which it would communicate as long as it computes). Without
other data it derives ``D`` from Gavel's consolidated/unconsolidated ratio at an *assumed* testbed
network (10 Gb/s, ``GAVEL_TESTBED_GBPS``). This module measures it instead where a profile exists.

Data: Pollux's placement profiles on AWS g4dn.12xlarge servers (4 x T4 each, one shared NIC;
shipped as ``cluster_env/data/sia/<model>/placements-aws.csv.gz``, byte-identical to Pollux's), the
same model at every placement from one GPU to 4 servers x 4 GPUs, at several local batch sizes.
The servers' network is AWS's listed "50 Gigabit" for g4dn.12xlarge (:data:`POLLUX_NETWORK_GBPS`).

Fit (:func:`fit_sync_cost`): for a model, every multi-server row (``k >= 2`` servers, ``n`` GPUs in
all) gives ``X = step_time(placement, b) - step_time("1", b)``, the time the all-reduce adds to a
step at local batch size ``b``; the model says ``X = a(n) s`` with ``a(n) = 2 (n - 1) / n`` (the
ring factor) and ``s = S / B`` one number per model. ``s`` is the least-squares fit over all rows;
the fit's error per model is the relative error of the predicted step time
``step_time("1", b) + a(n) s`` (median, 90th percentile over rows).

Demand (:func:`measured_demand`): ``D = s B_aws / C_t(b_j)`` Gb/s per unit ring factor, where
``C_t(b_j)`` is the model's one-GPU step time at the job type's batch size ``b_j`` (Gavel's batch
size taken as the per-GPU batch, log-log interpolated between the profiled local batch sizes and
clamped to their range) on the job's GPU type: ``C_T4 x speed(T4) / speed(t)`` with the world's
relative speeds. The model's ``s B_aws`` is the *effective* gradient traffic at the NIC's nominal
bandwidth (it absorbs the stack's efficiency: the fitted ``s`` implies 13-25 % of the nominal 50
Gb/s for the fp32 gradients of ResNet-18, ResNet-50 and BERT-base:
docs/world_model.md; conservative on RDMA fabrics). Job families without a profiled
model (A3C, CycleGAN, Recommendation: :data:`~cluster_env.world.measured_speeds.MODEL_OF_FAMILY`)
keep Gavel's derivation. ``WorldConfig(comm_source="measured")`` selects it.
"""
from __future__ import annotations

import functools
import math
from typing import Dict, List, Optional, Sequence

import numpy as np

from cluster_env.world.measured_speeds import EXCLUDED_MODELS, MODEL_OF_FAMILY, SIA_MODELS, load_placements

__all__ = [
    "COMM_SOURCES",
    "POLLUX_NETWORK_GBPS",
    "fit_sync_cost",
    "fit_table",
    "one_gpu_step_time",
    "measured_demand",
]

#: Values of ``WorldConfig.comm_source``: ``"gavel"`` (Gavel's ratio at the assumed testbed
#: network, the v2 worlds) and ``"measured"`` (this module, where a profile exists).
COMM_SOURCES = ("gavel", "measured")

#: Network of AWS g4dn.12xlarge (Pollux's servers), Gb/s: AWS EC2 instance-type table, "50 Gigabit".
POLLUX_NETWORK_GBPS = 50.0


@functools.lru_cache(maxsize=None)
def fit_sync_cost(model: str, server: str = "aws") -> Dict[str, float]:
    """The fit of ``X = a(n) s`` on ``model``'s multi-server rows (module docstring): ``s`` (s),
    ``rows``, ``median_error`` and ``p90_error`` (relative error of the predicted step time),
    ``max_servers`` and ``max_gpus``."""
    p = load_placements(model, server)
    place, bsz, step = p["placement"], p["local_bsz"], p["step_time"]
    one = {int(b): float(t) for b, t, q in zip(bsz, step, place) if q == "1"}
    a, extra, base, servers, gpus = [], [], [], [], []
    for q, b, t in zip(place, bsz, step):
        if len(q) < 2 or int(b) not in one:
            continue
        n = sum(int(c) for c in q)
        a.append(2.0 * (n - 1) / n)
        extra.append(float(t) - one[int(b)])
        base.append(one[int(b)])
        servers.append(len(q))
        gpus.append(n)
    a, extra, base = np.asarray(a), np.asarray(extra), np.asarray(base)
    s = float(np.sum(a * extra) / np.sum(a * a))
    err = np.abs((base + a * s) - (base + extra)) / (base + extra)
    return {"s": s, "rows": int(len(a)), "median_error": float(np.median(err)),
            "p90_error": float(np.quantile(err, 0.9)), "max_servers": int(max(servers)),
            "max_gpus": int(max(gpus))}


def fit_table() -> List[Dict[str, object]]:
    """One row per profiled model: :func:`fit_sync_cost` on the T4 servers, with the model name."""
    return [{"model": m, **fit_sync_cost(m)} for m in SIA_MODELS]


def one_gpu_step_time(model: str, local_bsz: float, server: str = "aws") -> float:
    """``model``'s one-GPU step time (s) at ``local_bsz``, log-log interpolated between the
    profiled batch sizes and clamped to their range."""
    p = load_placements(model, server)
    one = p["placement"] == "1"
    b = p["local_bsz"][one].astype(np.float64)
    t = p["step_time"][one]
    order = np.argsort(b, kind="stable")
    return float(math.exp(np.interp(math.log(local_bsz), np.log(b[order]), np.log(t[order]))))


def _batch_size(job_type: str) -> Optional[float]:
    if "(batch size " not in job_type:
        return None
    return float(job_type.split("(batch size ", 1)[1].rstrip(")"))


def measured_demand(job_types: Sequence[str], speed_over_t4: np.ndarray) -> np.ndarray:
    """(J, T) measured communication demand per unit ring factor, Gb/s; NaN for a job type without
    a profiled model (or without a batch size). ``speed_over_t4``: (J, T) each GPU type's
    one-GPU speed over T4's for each job type (the world's speed table)."""
    out = np.full(speed_over_t4.shape, np.nan)
    for j, name in enumerate(job_types):
        model = MODEL_OF_FAMILY.get(name.split(" (", 1)[0])
        b = _batch_size(name)
        if model is None or model in EXCLUDED_MODELS or b is None:
            continue
        s = fit_sync_cost(model)["s"]
        c_t4 = one_gpu_step_time(model, b)
        out[j] = s * POLLUX_NETWORK_GBPS / c_t4 * speed_over_t4[j]
    return out
