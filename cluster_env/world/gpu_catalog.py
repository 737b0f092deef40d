"""Catalog of the GPU types that the real cluster traces mention.

Every type has a *canonical* name (the key of :data:`KNOWN_GPU_TYPES`), a speed model, a memory
size, a public on-demand cloud price per GPU-hour and a busy/idle power draw.  ``source`` on each
:class:`GPUSpec` says where each number comes from; ``docs/world_model.md`` repeats it in prose.

Speed model
-----------
Gavel (Narayanan et al., OSDI'20) measured the training throughput of 26 job types on three GPU
types: K80, P100 and V100.  Those are the *measured* types (``factor == 1.0``).  Every other type
borrows the per-job-type throughput *shape* of one measured *anchor* type and scales it by a single
``factor``, computed with one rule from public vendor spec sheets:

    factor = sqrt( compute(type) / compute(anchor) * bandwidth(type) / bandwidth(anchor) )

the geometric mean of the peak-compute ratio and the memory-bandwidth ratio (training steps are a
mix of compute-bound and bandwidth-bound kernels).  "compute" is

* Pascal-era types (anchor P100): peak FP32 TFLOPS (no tensor cores on either side);
* Volta and newer (anchor V100): peak *dense* FP16 tensor-core TFLOPS (no sparsity).

The spec numbers used are the module constants below; :func:`spec_sheet_factor` recomputes the
rule so a reader (and the tests) can check each factor.

Under ``WorldConfig(speeds="measured")`` (world model v3) and ``"measured-best"`` the rule is only
the fallback for types no measurement covers: A100, A800, G3 and T4 take measured ratios per job
type, H800 (and
GPU-series-2) measured A100 x MLPerf's H100/A100
(:mod:`cluster_env.world.measured_speeds`, which also reports the rule's error against them), and
:func:`cluster_env.world.measured_speeds.fallback_speed_types` names the types still on the rule.

Undisclosed codes (G2, G3, MISC, GPU-series-1, GPU-series-2)
----------------------------------------------------------
The trace READMEs give no hint on what these are ("G1, G2, G3 are undisclosed internal GPU codes";
the PAI and spot READMEs say nothing).  ASSUMPTION, one rule for all of them (the *node-shape
rule*): an undisclosed type takes the spec of the disclosed type whose nodes have the same host
shape (vCPUs and GPUs per node) in the same or a sibling Alibaba trace; where no disclosed type has
that shape, it takes the slowest disclosed type of its own trace (conservative).  Concretely:

* ``G2`` (openb 2023; 549 nodes of 8 GPUs, 96 vCPUs): openb's V100M32 nodes are 8 GPUs, 96 vCPUs
  -> V100M32-class.
* ``G3`` (openb 2023; 39 nodes of 8 GPUs, 128 vCPUs): no openb match; the spot-2026 A100-SXM4-80GB
  and A800 nodes are 8 GPUs, 128 vCPUs -> A100-class.
* ``MISC`` (PAI 2020; 280 machines of 8 GPUs, 96 vCPUs, 512 GB): PAI's V100 machines include
  8 GPUs, 96 vCPUs, 512 GB -> V100-class.
* ``GPU-series-1`` (spot 2026; 989 nodes, mostly 1 GPU on 192 vCPUs): no disclosed type has that
  shape -> the slowest disclosed type of the trace, A10-class.
* ``GPU-series-2`` (spot 2026; 122 nodes of 8 GPUs, 192 vCPUs): the H800 nodes are 8 GPUs,
  192 vCPUs -> H800-class.

These are modelling assumptions, not facts: a user who knows better can build their own catalog
entry (``GPUSpec`` is a plain frozen dataclass).

Prices
------
On-demand list prices per GPU-hour, US regions, as published by the provider named in ``source``.
Google Cloud lists a GPU-only price for the GPUs it offers (host vCPUs/RAM billed separately); for
GPUs it does not offer, the instance price of the named AWS or Azure instance divided by its GPU
count is used (host included, so slightly higher than a GPU-only price).  Cloud list prices change;
these are the figures as listed in 2023-2024 and are meant as realistic relative costs.

Power
-----
``busy_watts`` is the vendor's TDP / maximum board power per GPU.  ``idle_watts`` follows one rule,
``IDLE_FRACTION_OF_TDP * busy_watts`` (15 %): an assumption matching typical ``nvidia-smi`` idle
readings of data-centre GPUs (about 10-20 % of TDP, e.g. ~40 W on a 300 W V100-SXM2, ~55 W on a
400 W A100-SXM4).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Tuple

from cluster_env.errors import UnknownGPUTypeError

__all__ = [
    "GPUSpec",
    "KNOWN_GPU_TYPES",
    "MEASURED_GPU_TYPES",
    "GPU_ALIASES",
    "IDLE_FRACTION_OF_TDP",
    "canonical_gpu_name",
    "gpu_spec",
    "all_gpu_specs",
    "spec_sheet_factor",
]


@dataclass(frozen=True)
class GPUSpec:
    """One GPU type.

    Attributes:
        name: canonical name (one of :data:`KNOWN_GPU_TYPES`).
        anchor: "K80", "P100" or "V100": the Gavel-measured type whose per-job-type throughput
            shape this type borrows.
        factor: speed multiplier relative to ``anchor`` (1.0 for the measured types).
        memory_gb: GPU memory per GPU.
        price_per_gpu_hour: public on-demand cloud list price, USD per GPU-hour.
        busy_watts: power draw while training (vendor TDP / max board power), W per GPU.
        idle_watts: power draw while idle, W per GPU.
        measured: True for the types Gavel measured (K80, P100, V100).
        source: where every number came from.
    """

    name: str
    anchor: str
    factor: float
    memory_gb: float
    price_per_gpu_hour: float
    busy_watts: float
    idle_watts: float
    measured: bool
    source: str


# --------------------------------------------------------------------------------------------
# Public spec-sheet numbers used by the factor rule (per GPU, vendor data sheets).
# --------------------------------------------------------------------------------------------
# Pascal-era compute: peak FP32 TFLOPS (boost clock); bandwidth in GB/s.
P100_PCIE_FP32_TFLOPS = 9.3      # NVIDIA Tesla P100 PCIe 16 GB data sheet (Gavel's GCP P100)
P100_PCIE_BW_GBS = 732.0         # ditto, HBM2
P40_FP32_TFLOPS = 11.76          # NVIDIA Tesla P40 data sheet ("12 TFLOPS"; 3840 cores x 1531 MHz x 2)
P40_BW_GBS = 346.0               # ditto, GDDR5
K80_FP32_TFLOPS_PER_GPU = 4.37   # NVIDIA Tesla K80 data sheet: 8.73 TFLOPS per board of 2 GPUs
K80_BW_GBS_PER_GPU = 240.0       # ditto: 480 GB/s per board of 2 GPUs (documentation only)

# Volta and newer compute: peak dense FP16 tensor-core TFLOPS (without sparsity).
V100_SXM2_FP16_TENSOR_TFLOPS = 125.0   # NVIDIA V100 data sheet, SXM2 (Gavel's GCP V100)
V100_SXM2_BW_GBS = 900.0               # ditto, HBM2
T4_FP16_TENSOR_TFLOPS = 65.0           # NVIDIA T4 data sheet (mixed precision)
T4_BW_GBS = 320.0                      # ditto, GDDR6
A10_FP16_TENSOR_TFLOPS = 125.0         # NVIDIA A10 data sheet: 125 dense (250 with sparsity)
A10_BW_GBS = 600.0                     # ditto, GDDR6
A100_SXM4_80GB_FP16_TENSOR_TFLOPS = 312.0  # NVIDIA A100 data sheet: 312 dense (624 sparse)
A100_SXM4_80GB_BW_GBS = 2039.0             # ditto, A100 80GB SXM HBM2e
A800_SXM4_80GB_FP16_TENSOR_TFLOPS = 312.0  # NVIDIA A800 data sheet: same SM config as A100
A800_SXM4_80GB_BW_GBS = 2039.0             # ditto (A800 differs from A100 in NVLink: 400 GB/s)
H800_SXM5_FP16_TENSOR_TFLOPS = 989.5       # NVIDIA H800 SXM5 data sheet: 1,979 with sparsity
H800_SXM5_BW_GBS = 3350.0                  # ditto, HBM3 3.35 TB/s

# Vendor TDP / maximum board power per GPU, W.
K80_TDP_W_PER_GPU = 150.0     # 300 W per K80 board of 2 GPUs
P100_PCIE_TDP_W = 250.0
P40_TDP_W = 250.0
V100_SXM2_TDP_W = 300.0       # V100 16 GB and 32 GB SXM2
T4_TDP_W = 70.0
A10_TDP_W = 150.0
A100_SXM4_TDP_W = 400.0
A800_SXM4_TDP_W = 400.0
H800_SXM5_TDP_W = 700.0

#: idle draw = this fraction of TDP (assumption; see the module docstring).
IDLE_FRACTION_OF_TDP = 0.15

# On-demand list prices, USD per GPU-hour (see the module docstring for the convention).
GCP_K80_PER_GPU_HOUR = 0.45    # Google Compute Engine GPU price, NVIDIA K80, us-central1
GCP_P100_PER_GPU_HOUR = 1.46   # Google Compute Engine GPU price, NVIDIA P100, us-central1
GCP_V100_PER_GPU_HOUR = 2.48   # Google Compute Engine GPU price, NVIDIA V100 (16 GB), us-central1
GCP_T4_PER_GPU_HOUR = 0.35     # Google Compute Engine GPU price, NVIDIA T4, us-central1
GCP_A100_80GB_PER_GPU_HOUR = 3.93  # Google Compute Engine GPU price, NVIDIA A100 80GB, us-central1
AZURE_ND6S_P40_PER_HOUR = 2.07     # Azure ND6s (1 x P40), East US, Linux, pay-as-you-go
AWS_P3DN_24XL_PER_HOUR = 31.212    # AWS p3dn.24xlarge (8 x V100-SXM2-32GB), us-east-1, Linux
AWS_G5_XL_PER_HOUR = 1.006         # AWS g5.xlarge (1 x A10G 24 GB), us-east-1, Linux
AWS_P5_48XL_PER_HOUR = 98.32       # AWS p5.48xlarge (8 x H100-SXM5-80GB), us-east-1, Linux (2023 list)


def spec_sheet_factor(compute: float, bandwidth: float, anchor_compute: float,
                      anchor_bandwidth: float) -> float:
    """The factor rule: geometric mean of the compute ratio and the memory-bandwidth ratio."""
    return math.sqrt((compute / anchor_compute) * (bandwidth / anchor_bandwidth))


_F_P40 = spec_sheet_factor(P40_FP32_TFLOPS, P40_BW_GBS, P100_PCIE_FP32_TFLOPS, P100_PCIE_BW_GBS)
_F_T4 = spec_sheet_factor(T4_FP16_TENSOR_TFLOPS, T4_BW_GBS, V100_SXM2_FP16_TENSOR_TFLOPS,
                          V100_SXM2_BW_GBS)
_F_A10 = spec_sheet_factor(A10_FP16_TENSOR_TFLOPS, A10_BW_GBS, V100_SXM2_FP16_TENSOR_TFLOPS,
                           V100_SXM2_BW_GBS)
_F_A100 = spec_sheet_factor(A100_SXM4_80GB_FP16_TENSOR_TFLOPS, A100_SXM4_80GB_BW_GBS,
                            V100_SXM2_FP16_TENSOR_TFLOPS, V100_SXM2_BW_GBS)
_F_A800 = spec_sheet_factor(A800_SXM4_80GB_FP16_TENSOR_TFLOPS, A800_SXM4_80GB_BW_GBS,
                            V100_SXM2_FP16_TENSOR_TFLOPS, V100_SXM2_BW_GBS)
_F_H800 = spec_sheet_factor(H800_SXM5_FP16_TENSOR_TFLOPS, H800_SXM5_BW_GBS,
                            V100_SXM2_FP16_TENSOR_TFLOPS, V100_SXM2_BW_GBS)

_RULE = ("factor = sqrt(compute ratio x memory-bandwidth ratio) vs the anchor, from NVIDIA data "
         "sheets")
_IDLE = f"idle = {IDLE_FRACTION_OF_TDP:.0%} of TDP (assumption)"


def _spec(name: str, anchor: str, factor: float, memory_gb: float, price: float, tdp: float,
          measured: bool, source: str) -> GPUSpec:
    return GPUSpec(name=name, anchor=anchor, factor=float(factor), memory_gb=float(memory_gb),
                   price_per_gpu_hour=round(float(price), 4), busy_watts=float(tdp),
                   idle_watts=round(IDLE_FRACTION_OF_TDP * tdp, 3), measured=measured,
                   source=source)


_SPECS: Tuple[GPUSpec, ...] = (
    _spec("K80", "K80", 1.0, 12, GCP_K80_PER_GPU_HOUR, K80_TDP_W_PER_GPU, True,
          "speed: Gavel measured (OSDI'20); memory 12 GB and TDP 150 W per GPU (half a K80 "
          "board: 24 GB, 300 W); price: Google Cloud GPU price for K80, us-central1; " + _IDLE),
    _spec("P100", "P100", 1.0, 16, GCP_P100_PER_GPU_HOUR, P100_PCIE_TDP_W, True,
          "speed: Gavel measured; memory/TDP: NVIDIA Tesla P100 PCIe 16 GB data sheet (16 GB, "
          "250 W); price: Google Cloud GPU price for P100, us-central1; " + _IDLE),
    _spec("V100", "V100", 1.0, 16, GCP_V100_PER_GPU_HOUR, V100_SXM2_TDP_W, True,
          "speed: Gavel measured; memory/TDP: NVIDIA V100 SXM2 16 GB data sheet (16 GB, 300 W); "
          "price: Google Cloud GPU price for V100, us-central1; " + _IDLE),
    _spec("P40", "P100", _F_P40, 24, AZURE_ND6S_P40_PER_HOUR, P40_TDP_W, False,
          "the 24 GB GPUs of Philly's 8-GPU machines, taken as Tesla P40; speed: " + _RULE +
          f" (FP32 {P40_FP32_TFLOPS} vs {P100_PCIE_FP32_TFLOPS} TFLOPS, {P40_BW_GBS:g} vs "
          f"{P100_PCIE_BW_GBS:g} GB/s); memory/TDP: Tesla P40 data sheet (24 GB, 250 W); "
          "price: Azure ND6s (1 x P40), East US, pay-as-you-go; " + _IDLE),
    _spec("V100M16", "V100", 1.0, 16, GCP_V100_PER_GPU_HOUR, V100_SXM2_TDP_W, False,
          "Alibaba name of V100 16 GB: same chip as Gavel's V100, speed factor 1.0; "
          "memory/TDP: V100 SXM2 data sheet; price: Google Cloud V100 (16 GB) GPU price; " + _IDLE),
    _spec("V100M32", "V100", 1.0, 32, AWS_P3DN_24XL_PER_HOUR / 8, V100_SXM2_TDP_W, False,
          "Alibaba name of V100 32 GB: same chip as Gavel's V100, speed factor 1.0; "
          "memory/TDP: V100 SXM2 32 GB data sheet (32 GB, 300 W); price: AWS p3dn.24xlarge "
          "(8 x V100 32 GB) us-east-1 on-demand / 8; " + _IDLE),
    _spec("T4", "V100", _F_T4, 16, GCP_T4_PER_GPU_HOUR, T4_TDP_W, False,
          "speed: " + _RULE + f" (dense FP16 tensor {T4_FP16_TENSOR_TFLOPS:g} vs "
          f"{V100_SXM2_FP16_TENSOR_TFLOPS:g} TFLOPS, {T4_BW_GBS:g} vs {V100_SXM2_BW_GBS:g} GB/s); "
          "memory/TDP: NVIDIA T4 data sheet (16 GB, 70 W); price: Google Cloud GPU price for T4, "
          "us-central1; " + _IDLE),
    _spec("A10", "V100", _F_A10, 24, AWS_G5_XL_PER_HOUR, A10_TDP_W, False,
          "speed: " + _RULE + f" (dense FP16 tensor {A10_FP16_TENSOR_TFLOPS:g} vs "
          f"{V100_SXM2_FP16_TENSOR_TFLOPS:g} TFLOPS, {A10_BW_GBS:g} vs {V100_SXM2_BW_GBS:g} GB/s); "
          "memory/TDP: NVIDIA A10 data sheet (24 GB, 150 W); price: AWS g5.xlarge (1 x A10G, the "
          "AWS variant of A10) us-east-1 on-demand; " + _IDLE),
    _spec("A100", "V100", _F_A100, 80, GCP_A100_80GB_PER_GPU_HOUR, A100_SXM4_TDP_W, False,
          "A100-SXM4-80GB; speed: " + _RULE + f" (dense FP16 tensor "
          f"{A100_SXM4_80GB_FP16_TENSOR_TFLOPS:g} vs {V100_SXM2_FP16_TENSOR_TFLOPS:g} TFLOPS, "
          f"{A100_SXM4_80GB_BW_GBS:g} vs {V100_SXM2_BW_GBS:g} GB/s); memory/TDP: NVIDIA A100 data "
          "sheet (80 GB SXM, 400 W); price: Google Cloud GPU price for A100 80GB, us-central1; "
          + _IDLE),
    _spec("A800", "V100", _F_A800, 80, GCP_A100_80GB_PER_GPU_HOUR, A800_SXM4_TDP_W, False,
          "A800-SXM4-80GB; speed: " + _RULE + f" (dense FP16 tensor "
          f"{A800_SXM4_80GB_FP16_TENSOR_TFLOPS:g} TFLOPS, {A800_SXM4_80GB_BW_GBS:g} GB/s, as A100); "
          "memory/TDP: NVIDIA A800 data sheet (80 GB SXM, 400 W); price: ASSUMPTION, not sold by "
          "US clouds: priced as A100 80GB (Google Cloud, us-central1); " + _IDLE),
    _spec("H800", "V100", _F_H800, 80, AWS_P5_48XL_PER_HOUR / 8, H800_SXM5_TDP_W, False,
          "H800 SXM5; speed: " + _RULE + f" (dense FP16 tensor {H800_SXM5_FP16_TENSOR_TFLOPS:g} vs "
          f"{V100_SXM2_FP16_TENSOR_TFLOPS:g} TFLOPS, {H800_SXM5_BW_GBS:g} vs {V100_SXM2_BW_GBS:g} "
          "GB/s); memory/TDP: NVIDIA H800 SXM5 data sheet (80 GB, 700 W); price: ASSUMPTION, not "
          "sold by US clouds: priced as H100 SXM5, AWS p5.48xlarge (8 x H100) us-east-1 2023 "
          "on-demand list / 8; " + _IDLE),
)


def _assumed(name: str, like: str, why: str) -> GPUSpec:
    base = next(s for s in _SPECS if s.name == like)
    return GPUSpec(name=name, anchor=base.anchor, factor=base.factor, memory_gb=base.memory_gb,
                   price_per_gpu_hour=base.price_per_gpu_hour, busy_watts=base.busy_watts,
                   idle_watts=base.idle_watts, measured=False,
                   source=f"ASSUMPTION (undisclosed code, node-shape rule): {why}; every number "
                          f"copied from {like}: [{base.source}]")


_SPECS = _SPECS + (
    _assumed("G2", "V100M32", "Alibaba openb 2023 internal code; its nodes (8 GPUs, 96 vCPUs) "
             "have the shape of openb's V100M32 nodes"),
    _assumed("G3", "A100", "Alibaba openb 2023 internal code; its nodes (8 GPUs, 128 vCPUs) "
             "have the shape of the A100-SXM4-80GB/A800 nodes of Alibaba spot 2026"),
    _assumed("MISC", "V100", "Alibaba PAI 2020 'MISC' type; its machines (8 GPUs, 96 vCPUs, "
             "512 GB) have the shape of PAI's V100 machines"),
    _assumed("GPU-series-1", "A10", "Alibaba spot 2026 undisclosed series; its nodes (mostly "
             "1 GPU, 192 vCPUs) match no disclosed type, so it takes the slowest disclosed type "
             "of that trace (A10)"),
    _assumed("GPU-series-2", "H800", "Alibaba spot 2026 undisclosed series; its nodes (8 GPUs, "
             "192 vCPUs) have the shape of that trace's H800 nodes"),
)

#: Canonical names of every GPU type in the catalog, in catalog order.
KNOWN_GPU_TYPES: Tuple[str, ...] = tuple(s.name for s in _SPECS)
#: The three types Gavel measured.
MEASURED_GPU_TYPES: Tuple[str, ...] = ("K80", "P100", "V100")

_BY_NAME: Dict[str, GPUSpec] = {s.name: s for s in _SPECS}

#: Extra spellings accepted (matched case-insensitively, ignoring spaces, '_' and '-', and a
#: leading "NVIDIA"/"Tesla"); every canonical name is accepted too.
GPU_ALIASES: Mapping[str, str] = {
    "A100-SXM4-80GB": "A100",
    "A100-80GB": "A100",
    "A100 80GB": "A100",
    "A100-SXM-80GB": "A100",
    "A800-SXM4-80GB": "A800",
    "A800-80GB": "A800",
    "H800-SXM5-80GB": "H800",
    "H800-80GB": "H800",
    "V100-SXM2-16GB": "V100M16",
    "V100-16GB": "V100M16",
    "V100-SXM2-32GB": "V100M32",
    "V100-32GB": "V100M32",
    "P100-PCIE-16GB": "P100",
    "P100-16GB": "P100",
    "P40-24GB": "P40",
    "T4-16GB": "T4",
    "A10-24GB": "A10",
    "GPU-series1": "GPU-series-1",
    "GPU-series2": "GPU-series-2",
}


def _key(raw: str) -> str:
    """Normalised lookup key: lower case, without separators and a vendor/brand prefix."""
    k = re.sub(r"[\s_\-]+", "", raw.strip().lower())
    for prefix in ("nvidia", "tesla"):
        if k.startswith(prefix) and len(k) > len(prefix):
            k = k[len(prefix):]
    return k


_LOOKUP: Dict[str, str] = {}
for _name in KNOWN_GPU_TYPES:
    _LOOKUP[_key(_name)] = _name
for _alias, _name in GPU_ALIASES.items():
    assert _name in _BY_NAME, _alias
    _LOOKUP.setdefault(_key(_alias), _name)


def canonical_gpu_name(raw: str, *, file: Optional[str] = None, row: Optional[int] = None,
                       field: Optional[str] = None) -> str:
    """The canonical name of GPU type ``raw`` (case-insensitive; aliases accepted).

    Raises:
        UnknownGPUTypeError: ``raw`` is not a known type or alias; the message names it and
            lists the known types, and carries ``file``, ``row`` and ``field`` when given.
    """
    if isinstance(raw, str):
        name = _LOOKUP.get(_key(raw))
        if name is not None:
            return name
    raise UnknownGPUTypeError(
        f"unknown GPU type {raw!r}; known types: {', '.join(KNOWN_GPU_TYPES)} "
        f"(aliases such as 'A100-SXM4-80GB' and 'Tesla V100' are accepted)",
        file=file, row=row, field=field)


def gpu_spec(name: str) -> GPUSpec:
    """The :class:`GPUSpec` of ``name`` (canonical name or alias)."""
    return _BY_NAME[canonical_gpu_name(name)]


def all_gpu_specs() -> Tuple[GPUSpec, ...]:
    """Every catalog entry, in the order of :data:`KNOWN_GPU_TYPES`."""
    return _SPECS
