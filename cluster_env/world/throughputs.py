"""Gavel's measured training throughputs, turned into the tables the simulator needs.

Data: ``cluster_env/data/gavel/simulation_throughputs.json.gz``, Gavel's
``scheduler/simulation_throughputs.json`` (MIT; Narayanan et al., *Heterogeneity-Aware Cluster
Scheduling Policies for Deep Learning Workloads*, OSDI'20; provenance in ``SOURCES.md`` beside
it).  It holds the throughput (steps/s) of 26 job types on K80, P100 and V100 with 1, 2, 4 and 8
GPUs, consolidated on one machine (``k80``, ``p100``, ``v100``) and spread over machines
(``*_unconsolidated``), alone (the ``null`` partner) and sharing a GPU with each other job type.

What the data lacks, and the documented fallbacks used here
-----------------------------------------------------------
* Seven job types (A3C, CycleGAN and the five Recommendation batch sizes) have 1-GPU entries only.
* K80 ResNet-50 (batch size 128) has consolidated throughput 0.0 (not runnable) at 2/4/8 GPUs, and
  K80 ResNet-50 (batch sizes 64, 128) have no unconsolidated entries.
* The co-location entries exist for 1-GPU jobs only (multi-GPU partner entries are all 0.0).

Relative speed (:func:`relative_speed_table`): where either the type's anchor or the reference's
anchor lacks a positive consolidated throughput at a bucket, the ratio of the next smaller bucket
is carried forward (every job type has 1-GPU entries on all three types, so bucket 0 is always
measured).

Spread ratio (:func:`spread_ratio_table`): where an anchor lacks the pair (consolidated,
unconsolidated) at a bucket, the mean ratio of the same job type and bucket on the other anchors
is used; where no anchor has it, the median ratio over the job types measured on that anchor at
that bucket.  Ratios above 1 (unconsolidated measured faster, which happens on K80: measurement
noise) are clipped to 1.
"""
from __future__ import annotations

import ast
import functools
import gzip
import json
from pathlib import Path
from typing import Dict, Sequence, Tuple

import numpy as np

from cluster_env.errors import DataError
from cluster_env.world.gpu_catalog import MEASURED_GPU_TYPES, canonical_gpu_name, gpu_spec
from cluster_env.world.measured_speeds import SPEED_SOURCES, job_type_factors

__all__ = [
    "GAVEL_DATA_PATH",
    "JOB_TYPES",
    "GPU_COUNT_BUCKETS",
    "ANCHORS",
    "DEFAULT_CONTENTION_ALPHA",
    "bucket_index",
    "relative_speed_table",
    "spread_ratio_table",
    "gavel_comm_ratio_table",
    "comm_intensity",
    "colocation_contention_fit",
    "measured_throughput",
    "speed_factor_table",
    "GAVEL_SHAPES",
    "superlinear_entries",
]

#: Values of ``WorldConfig.gavel_shape``: how Gavel's consolidated throughputs enter the tables.
#: ``"raw"``: as measured (the v0-v2 worlds). ``"capped"``: per-GPU throughput never rises with the
#: GPU count, ``T(n_b) <= T(n_(b-1)) x n_b / n_(b-1)`` applied bucket by bucket (a data-parallel job
#: at a fixed per-GPU batch does each GPU's work plus an all-reduce: adding GPUs cannot make each
#: one faster). It removes the superlinear V100 entries (8 GPUs > 2x 4 GPUs for 15 of 19 job types,
#: > 8x 1 GPU for 5: :func:`superlinear_entries`) and touches 5 K80 and 2 P100 entries likewise.
GAVEL_SHAPES = ("raw", "capped")

GAVEL_DATA_PATH = Path(__file__).resolve().parent.parent / "data" / "gavel" / \
    "simulation_throughputs.json.gz"

#: Gavel's 26 job types, in the order of Gavel's file (model families in Gavel's order, batch
#: sizes ascending).  Index ``j`` of every (J, ...) array below refers to ``JOB_TYPES[j]``.
JOB_TYPES: Tuple[str, ...] = (
    "ResNet-18 (batch size 16)",
    "ResNet-18 (batch size 32)",
    "ResNet-18 (batch size 64)",
    "ResNet-18 (batch size 128)",
    "ResNet-18 (batch size 256)",
    "ResNet-50 (batch size 16)",
    "ResNet-50 (batch size 32)",
    "ResNet-50 (batch size 64)",
    "ResNet-50 (batch size 128)",
    "Transformer (batch size 16)",
    "Transformer (batch size 32)",
    "Transformer (batch size 64)",
    "Transformer (batch size 128)",
    "Transformer (batch size 256)",
    "A3C",
    "LM (batch size 5)",
    "LM (batch size 10)",
    "LM (batch size 20)",
    "LM (batch size 40)",
    "LM (batch size 80)",
    "Recommendation (batch size 512)",
    "Recommendation (batch size 1024)",
    "Recommendation (batch size 2048)",
    "Recommendation (batch size 4096)",
    "Recommendation (batch size 8192)",
    "CycleGAN",
)

#: GPU counts Gavel measured; a job's GPU count maps to a bucket with :func:`bucket_index`.
GPU_COUNT_BUCKETS: Tuple[int, ...] = (1, 2, 4, 8)

#: The measured (anchor) types, in the order of the anchor axis used internally.
ANCHORS: Tuple[str, ...] = MEASURED_GPU_TYPES  # ("K80", "P100", "V100")

#: Contention strength: a job of type j sharing a machine with k other jobs runs at
#: ``1 / (1 + DEFAULT_CONTENTION_ALPHA * comm_intensity()[j] * k)`` of its speed.
#:
#: Justification (:func:`colocation_contention_fit` recomputes it).  Gavel measured jobs sharing
#: one GPU with a partner, not jobs on different GPUs of one machine, so its co-location entries
#: mix two effects: time-sharing the GPU (the same for every job type on a given GPU model) and
#: contention for host, PCIe and memory bandwidth (larger for communication-heavy types).  A
#: least-squares fit of each 1-GPU job type's mean co-location slowdown ``alone/co-located - 1``
#: (over all partners it can run with) on its ``comm_intensity`` with one intercept per GPU model
#: separates them: the intercepts (0.50 on V100 .. 0.75 on K80) are the time-sharing part; the
#: slope, 0.57 per unit of communication intensity (19 job types x 3 GPU models, the 7 job types
#: without multi-GPU data excluded), is the part that grows with communication intensity, i.e. the
#: part a job also suffers from a neighbour on another GPU of its machine.  We round it down to 0.5
#: (the fit is noisy: the per-model slopes are +1.16 on K80, +1.07 on P100 and -0.39 on V100).
#: That slope is an upper bound for our effect: it is measured on jobs time-sharing one GPU, where
#: every memory and PCIe transfer of the partner competes, while a neighbour on another GPU of the
#: machine shares only the host, the PCIe switch and the NIC. Taken at face value (0.57), eight
#: single-GPU jobs on an 8-GPU machine would run at about half speed, which production traces do
#: not show (Philly and PAI pack such jobs routinely). ASSUMPTION: we take a fifth of the fitted
#: slope, 0.1: the most communication-heavy type (LM, intensity ~0.47) loses ~4.5 % with one
#: neighbour and ~25 % with seven; a compute-bound one (ResNet-50 batch size 128, intensity 0)
#: loses nothing. ``WorldConfig(contention_alpha=...)`` sets another value.
DEFAULT_CONTENTION_ALPHA = 0.1

_GAVEL_KEYS = {"K80": "k80", "P100": "p100", "V100": "v100"}


def bucket_index(gpus: np.ndarray) -> np.ndarray:
    """Bucket of each GPU count: 1 -> 0, 2 -> 1, 3..4 -> 2, >= 5 -> 3.

    Gavel measured 1, 2, 4 and 8 GPUs; 3 uses the 4-GPU figures, 5..8 the 8-GPU figures, and
    jobs with more than 8 GPUs also use the 8-GPU figures (Gavel has nothing larger).

    Raises:
        ValueError: a count is below 1.
    """
    g = np.asarray(gpus)
    if g.size and np.min(g) < 1:
        raise ValueError(f"GPU counts must be >= 1, got minimum {np.min(g)}")
    return (g >= 2).astype(np.intp) + (g >= 3) + (g >= 5)


@functools.lru_cache(maxsize=1)
def _raw() -> Dict[str, Dict[str, Dict[str, object]]]:
    """Gavel's JSON, parsed once."""
    with gzip.open(GAVEL_DATA_PATH, "rt", encoding="utf-8") as f:
        return json.load(f)


@functools.lru_cache(maxsize=1)
def _arrays() -> Tuple[np.ndarray, np.ndarray]:
    """(consolidated, unconsolidated) alone-throughputs, each (A=3, J=26, B=4); NaN = absent/0."""
    raw = _raw()
    j_of = {name: j for j, name in enumerate(JOB_TYPES)}
    b_of = {n: b for b, n in enumerate(GPU_COUNT_BUCKETS)}
    out = []
    for suffix in ("", "_unconsolidated"):
        arr = np.full((len(ANCHORS), len(JOB_TYPES), len(GPU_COUNT_BUCKETS)), np.nan)
        for a, anchor in enumerate(ANCHORS):
            key = _GAVEL_KEYS[anchor] + suffix
            if key not in raw:
                raise DataError(f"Gavel throughputs lack the {key!r} table", file=str(GAVEL_DATA_PATH))
            for k, entry in raw[key].items():
                name, n = ast.literal_eval(k)
                if name not in j_of or n not in b_of:
                    raise DataError(f"unexpected Gavel entry {k!r}", file=str(GAVEL_DATA_PATH),
                                    field=key)
                v = float(entry["null"])
                if v > 0 and np.isfinite(v):
                    arr[a, j_of[name], b_of[n]] = v
        out.append(arr)
    cons, unc = out
    if np.isnan(cons[:, :, 0]).any():
        raise DataError("Gavel throughputs lack a 1-GPU entry", file=str(GAVEL_DATA_PATH))
    return cons, unc


def _cap_per_gpu(cons: np.ndarray) -> np.ndarray:
    """``cons`` (A, J, B) with per-GPU throughput made non-increasing in the GPU count."""
    out = cons.copy()
    n = np.asarray(GPU_COUNT_BUCKETS, dtype=np.float64)
    for b in range(1, out.shape[2]):
        bound = out[:, :, b - 1] * (n[b] / n[b - 1])
        out[:, :, b] = np.where(np.isfinite(bound), np.fmin(out[:, :, b], bound), out[:, :, b])
    return out


@functools.lru_cache(maxsize=None)
def _consolidated(shape: str) -> np.ndarray:
    """Consolidated alone-throughputs (A, J, B) as the ``shape`` treatment gives them."""
    if shape not in GAVEL_SHAPES:
        raise ValueError(f"gavel_shape must be one of {GAVEL_SHAPES}, got {shape!r}")
    cons, _ = _arrays()
    out = cons if shape == "raw" else _cap_per_gpu(cons)
    out.setflags(write=False)
    return out


def superlinear_entries(gpu_type: str) -> Dict[str, int]:
    """How many job types of a measured type (K80, P100, V100) show, in Gavel's consolidated
    table, 8 GPUs > 2x 4 GPUs (``"8_over_2x4"``), 8 GPUs > 8x 1 GPU (``"8_over_8x1"``), and how
    many entries the ``"capped"`` treatment lowers (``"capped"``)."""
    a = ANCHORS.index(canonical_gpu_name(gpu_type))
    cons, _ = _arrays()
    capped = _consolidated("capped")
    return {"8_over_2x4": int(np.nansum(cons[a, :, 3] > 2 * cons[a, :, 2])),
            "8_over_8x1": int(np.nansum(cons[a, :, 3] > 8 * cons[a, :, 0])),
            "capped": int(np.nansum(capped[a] < cons[a]))}


def measured_throughput(gpu_type: str, job_type: str, num_gpus: int, *,
                        consolidated: bool = True) -> float:
    """Gavel's measured alone-throughput (steps/s) of ``job_type`` on ``num_gpus`` GPUs of a
    measured type (K80, P100, V100); NaN where Gavel has no positive entry."""
    anchor = canonical_gpu_name(gpu_type)
    if anchor not in ANCHORS:
        raise ValueError(f"{gpu_type!r} is not a Gavel-measured type ({', '.join(ANCHORS)})")
    if num_gpus not in GPU_COUNT_BUCKETS:
        raise ValueError(f"num_gpus must be one of {GPU_COUNT_BUCKETS}")
    cons, unc = _arrays()
    arr = cons if consolidated else unc
    return float(arr[ANCHORS.index(anchor), JOB_TYPES.index(job_type),
                     GPU_COUNT_BUCKETS.index(num_gpus)])


@functools.lru_cache(maxsize=None)
def _anchor_pair_ratios(shape: str = "raw") -> np.ndarray:
    """P[a, a2, j, b]: throughput of anchor a over anchor a2, with the carry-forward fallback."""
    cons = _consolidated(shape)
    A, J, B = cons.shape
    ratio = cons[:, None, :, :] / cons[None, :, :, :]          # NaN where either is missing
    for b in range(1, B):
        bad = ~np.isfinite(ratio[..., b])
        ratio[..., b][bad] = ratio[..., b - 1][bad]
    for a in range(A):
        ratio[a, a] = 1.0
    ratio.setflags(write=False)
    return ratio


@functools.lru_cache(maxsize=None)
def _anchor_spread(shape: str = "raw") -> np.ndarray:
    """S[a, j, b]: unconsolidated / consolidated on anchor a, clipped to (0, 1], with fallbacks."""
    _, unc = _arrays()
    cons = _consolidated(shape)
    s = np.minimum(unc / cons, 1.0)                              # NaN where missing
    s[:, :, 0] = 1.0
    filled = s.copy()
    A, J, B = s.shape
    for a in range(A):
        for b in range(1, B):
            col = s[a, :, b]
            med = np.nanmedian(col)
            for j in range(J):
                if np.isfinite(col[j]):
                    continue
                others = s[:, j, b]
                if np.isfinite(others).any():
                    filled[a, j, b] = float(np.nanmean(others))
                else:
                    filled[a, j, b] = float(med)
    if not (np.isfinite(filled).all() and (filled > 0).all() and (filled <= 1).all()):
        raise DataError("spread ratios out of (0, 1]", file=str(GAVEL_DATA_PATH))
    filled.setflags(write=False)
    return filled


def _anchors_and_factors(gpu_type_names: Sequence[str],
                         speeds: str = "spec-sheet") -> Tuple[np.ndarray, np.ndarray]:
    """Anchor index (T,) and speed over the anchor (J, T) of each type."""
    specs = [gpu_spec(n) for n in gpu_type_names]
    factors = np.stack([job_type_factors(n, JOB_TYPES, speeds) for n in gpu_type_names], axis=1) \
        if len(specs) else np.zeros((len(JOB_TYPES), 0))
    return (np.array([ANCHORS.index(s.anchor) for s in specs], dtype=np.intp),
            np.ascontiguousarray(factors, dtype=np.float64))


def speed_factor_table(gpu_type_names: Sequence[str], speeds: str = "spec-sheet") -> np.ndarray:
    """(J, T) speed of each GPU type over its Gavel anchor per job type: the spec-sheet factor
    (``speeds="spec-sheet"``) or the measured ratio where a source has one
    (:mod:`cluster_env.world.measured_speeds`)."""
    if speeds not in SPEED_SOURCES:
        raise ValueError(f"speeds must be one of {SPEED_SOURCES}, got {speeds!r}")
    return _anchors_and_factors(gpu_type_names, speeds)[1]


def relative_speed_table(gpu_type_names: Sequence[str], reference: str, *, speeds: str = "spec-sheet",
                         shape: str = "raw") -> np.ndarray:
    """Speed of each job type on each GPU type relative to ``reference``, per GPU-count bucket.

    Returns a float64 array of shape (J=26, T=len(gpu_type_names), B=4): entry [j, t, b] is
    ``throughput(anchor_t, j, b) * factor_t / (throughput(anchor_ref, j, b) * factor_ref)`` with
    Gavel's consolidated, alone throughputs; the reference column is exactly 1.  Every value is
    finite and > 0 (fallback for missing entries: see the module docstring).

    ``speeds`` (:data:`~cluster_env.world.measured_speeds.SPEED_SOURCES`) picks the factors
    (per job type under ``"measured"``); ``shape`` (:data:`GAVEL_SHAPES`) the treatment of
    Gavel's table. The defaults give the v0-v2 table bit for bit.

    Raises:
        UnknownGPUTypeError: a name is not in the catalog.
    """
    a_t, f_t = _anchors_and_factors(gpu_type_names, speeds)      # (T,), (J, T)
    (a_r,), f_r = _anchors_and_factors([reference], speeds)      # (J, 1)
    pair = _anchor_pair_ratios(shape)                            # (A, A, J, B)
    table = pair[a_t, a_r]                                       # (T, J, B)
    if speeds == "spec-sheet":   # the v0-v2 arithmetic, one scalar per type
        table = np.transpose(table, (1, 0, 2)) * (f_t[0] / f_r[0])[None, :, None]
    else:
        table = np.transpose(table, (1, 0, 2)) * (f_t / f_r)[:, :, None]
    return np.ascontiguousarray(table, dtype=np.float64)


def spread_ratio_table(gpu_type_names: Sequence[str], shape: str = "raw") -> np.ndarray:
    """Unconsolidated / consolidated throughput of each type's anchor, shape (J, T, B), in (0, 1].

    Bucket 0 (one GPU) is 1.0.  A job spread over several machines runs at this fraction of its
    consolidated speed.  Fallback for missing entries: see the module docstring.
    """
    a_t = np.array([ANCHORS.index(gpu_spec(n).anchor) for n in gpu_type_names], dtype=np.intp)
    s = _anchor_spread(shape)[a_t]                               # (T, J, B)
    return np.ascontiguousarray(np.transpose(s, (1, 0, 2)), dtype=np.float64)


def gavel_comm_ratio_table(gpu_type_names: Sequence[str], shape: str = "raw") -> np.ndarray:
    """Communication over compute time at Gavel's testbed, ``1 / r - 1`` with ``r`` the spread
    ratio of each type's anchor (:func:`spread_ratio_table`), shape (J, T, B), >= 0.

    Gavel's unconsolidated iteration is the consolidated one plus the communication that crosses
    servers, so ``r = C / (C + X)`` and ``X / C = 1 / r - 1`` (bucket 0: 0). Used by the
    ``"allreduce"`` spread model (:mod:`cluster_env.world.interconnect`).
    """
    r = spread_ratio_table(gpu_type_names, shape)
    return np.ascontiguousarray(1.0 / r - 1.0)


def comm_intensity() -> np.ndarray:
    """How communication-heavy each job type is, shape (J,), in [0, 1].

    ``1 - spread ratio at the 8-GPU bucket``, averaged over K80, P100 and V100: the fraction of
    throughput a job loses when its 8 workers communicate across machines instead of inside one.
    The seven job types without multi-GPU data get the fallback ratio (median of the measured
    types), i.e. a typical intensity.
    """
    s = _anchor_spread()[:, :, -1]
    return np.clip(1.0 - s.mean(axis=0), 0.0, 1.0)


def colocation_contention_fit() -> Dict[str, object]:
    """The fit behind :data:`DEFAULT_CONTENTION_ALPHA` (see its comment).

    For each measured GPU model and each job type with multi-GPU data, the mean over partners of
    ``alone / co-located - 1`` (1-GPU jobs sharing one GPU; pairs Gavel could not run, 0.0,
    excluded) is regressed on :func:`comm_intensity` with one intercept per GPU model.

    Returns a dict with ``slope`` (the alpha estimate), ``intercepts`` (per model),
    ``per_model_slopes``, ``n`` (points) and ``mean_colocated_fraction`` (mean co-located /
    alone throughput).
    """
    raw = _raw()
    cons, unc = _arrays()
    has_multi = np.isfinite(unc[:, :, -1]).any(axis=0)
    ci = comm_intensity()
    xs, ys, gs, fr = [], [], [], []
    for a, anchor in enumerate(ANCHORS):
        table = raw[_GAVEL_KEYS[anchor]]
        for j, name in enumerate(JOB_TYPES):
            if not has_multi[j]:
                continue
            entry = table[str((name, 1))]
            alone = float(entry["null"])
            r = [float(v[0]) / alone for p, v in entry.items() if p != "null" and float(v[0]) > 0]
            if not r:
                continue
            r = np.asarray(r)
            xs.append(ci[j])
            ys.append(float(np.mean(1.0 / r - 1.0)))
            gs.append(a)
            fr.append(float(np.mean(r)))
    x, y, g = np.asarray(xs), np.asarray(ys), np.asarray(gs)
    design = np.column_stack([x] + [(g == a).astype(float) for a in range(len(ANCHORS))])
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    per_model = {}
    for a, anchor in enumerate(ANCHORS):
        m = g == a
        per_model[anchor] = float(np.polyfit(x[m], y[m], 1)[0])
    return {
        "slope": float(coef[0]),
        "intercepts": {anchor: float(coef[1 + a]) for a, anchor in enumerate(ANCHORS)},
        "per_model_slopes": per_model,
        "n": int(len(x)),
        "mean_colocated_fraction": float(np.mean(fr)),
    }
