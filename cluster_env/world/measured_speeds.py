"""Measured speeds of post-2019 GPUs relative to V100, from the Sia (SOSP'23) / Pollux (OSDI'21)
placement profiles, and the speed source of every GPU type (measured or the spec-sheet fallback).

Source
------
Sia's artifact (``siasosp23/artifacts``, ``sia-simulator/traces/<model>/placements-<server>.csv``)
profiles six training jobs on five kinds of servers. Each row is one measured configuration:
``placement`` (GPUs per node, one digit per node: ``"1"`` one GPU, ``"8"`` eight on one node,
``"44"`` four on each of two nodes), ``local_bsz`` (samples per GPU per step), ``step_time`` (s per
step, the all-reduce included) and ``sync_time`` (its synchronisation part). The servers
(``sia-simulator`` source comments, ``cluster_ngpus_per_node``):

* ``azure``: Azure ND40rs_v2, 8 x V100-SXM2-32GB with NVLink -> **V100** (Gavel's V100 is the same
  chip, SXM2 16 GB);
* ``dgx-ext``: on-premise DGX A100, 8 x A100-SXM4-40GB with NVLink, "extended profiled batch
  sizes (should be default)" -> **A100** (40 GB; our catalog's A100 is the 80 GB SXM4: its higher
  memory bandwidth, 2,039 vs 1,555 GB/s, is not credited: conservative);
* ``aws``: AWS g4dn.12xlarge, 4 x T4 (Pollux's testbed, ``petuum/adaptdl`` osdi21-artifact
  ``benchmark/main.tf``; these files are byte-identical to Pollux's ``simulator/traces/<model>/
  placements.csv``) -> **T4**.

Sia's repository has no licence, so its ``azure`` and ``dgx-ext`` files do not ship: the package
ships the figures its rules read, taken from them (:data:`SIA_FIGURES_PATH`, :func:`sia_figures`:
every one-GPU step time, and the DGX A100 multi-node rows the communication fit reads), with the
sha256 of each source file; ``benchmarks/derive_sia_figures.py --artifact PATH`` rebuilds it byte
for byte from a local copy. The ``aws`` files ship raw (Apache-2.0 through Pollux;
:func:`load_placements`). :func:`one_gpu_profile` reads either.

Rules (``WorldConfig.speeds``)
------------------------------
``"measured"`` (:func:`measured_ratio`; world model v3, kept bit for bit): the speed of a GPU type
over V100 for a model is the median, over the local batch sizes profiled on both servers at one GPU
(placement ``"1"``), of ``step_time(V100) / step_time(type)`` (equal samples per step, so the ratio
of throughputs). The common batch sizes are mostly small ones, which weights the steps a fixed cost
dominates (BERT A100/V100: 1.29 at batch 4, 2.90 at 33; median 2.02).

``"measured-best"`` (:func:`measured_best_ratio`): the type's best one-GPU throughput over the
V100's, each server at its own best profiled configuration: samples per second per GPU,
``local_bsz / step_time``, maximised over the local batch sizes that server profiled at one GPU
(:func:`best_throughput`; BERT A100/V100 3.33: 140.4 samples/s at batch 48 over 42.2 at 33).
Why not "at the job's batch size": a Gavel job type's batch size means the same work as a Sia
local batch size only where the two run the same network on the same data (ResNet-18 on CIFAR-10,
ResNet-50 on ImageNet); Gavel's Transformer (translation) and LM (a word-level LSTM on WikiText-2,
35-token sequences) count other samples than BERT's 384-token SQuAD sequences or DeepSpeech2's
utterances. And where the network is the same, the profiled small batches measure the servers'
hosts rather than the GPUs: ResNet-18 on CIFAR-10 at local batch 32 takes 92.7 ms a step on the
Azure V100 (101 ms at 64), where Gavel's own V100 runs ResNet-18 at batch 32 in 33 ms (29.95
steps/s) and the DGX A100 in 35 ms; ResNet-50's V100 step grows 15% from batch 20 to 57 (0.157
to 0.181 s) for 2.85x the samples. At its best configuration each GPU is busy with the model's work, which is what a speed
ratio should compare. The A100's best is at its largest profiled batch size for every model (its
peak may be higher: conservative). Every ratio comes from the shipped figures and tables
(:func:`best_throughput_table`, :func:`family_ratio_table`).

Job types -> models (:data:`MODEL_OF_FAMILY`, both rules): Gavel's job type names a model family;
the family takes the Sia model of the same network where there is one (ResNet-18 = ``cifar10``,
ResNet-50 = ``imagenet``), else of the same kind: Transformer -> ``bert`` (a Transformer encoder),
LM (an LSTM) -> ``deepspeech2`` (the only recurrent model). A3C, CycleGAN and Recommendation have
no counterpart and take the median of the retained models' ratios (:data:`EXCLUDED_MODELS`:
``ncf`` is not retained; its Azure V100 profile is 8.7-16x slower than every other server's, T4
included, which no GPU explains: the run was bound by something else).

LM under ``"measured-best"``: the A100 stays slower than the V100 (0.960), because the data says
so at every configuration: DeepSpeech2's best one-GPU throughput is 77.5 samples/s on the A100
(batch 320) and 80.7 on the V100 (batch 81), and at each batch size both profiled the A100 step is
the slower (0.59-0.97x). No profiled model is closer to Gavel's LM (2 layers of 200 LSTM units,
the data held on the GPU): BERT's 3.33x comes from a Transformer's large matrix products, which
such an LSTM does not have. docs/world_model.md shows the row.

Derived types: A800 is the A100 chip with NVLink cut to 400 GB/s (NVIDIA A800 data sheet): one
GPU computes as an A100, so it takes A100's measured ratios (its NVLink is priced by the
interconnect model). G3 (A100-class by the node-shape rule of :mod:`~cluster_env.world.gpu_catalog`)
takes A100's too.

H800 is the H100 SXM5 chip with NVLink cut to 400 GB/s (NVIDIA H800 data sheet): one GPU computes
as an H100. Its speed over V100 is the A100's measured ratio (by the world's rule) times the
H100/A100 ratio measured by MLPerf Training v2.1 (``mlcommons/training_results_v2.1``, shipped in
``cluster_env/data/mlperf``): NVIDIA's one-node DGX H100 (8 x H100-SXM5-80GB, "preview") against
its one-node DGX A100 (8 x A100-SXM4-80GB) on the same benchmark, the ratio of the median time to
train over the successful runs (:func:`mlperf_h100_over_a100`). Families map to benchmarks by kind
(:data:`MLPERF_OF_FAMILY`: ResNet -> ``resnet`` (ResNet-50), Transformer -> ``bert``, LM -> ``rnnt``
(recurrent), Recommendation -> ``dlrm``; A3C and CycleGAN the median of the four).
``GPU-series-2`` (H800-class) follows H800. Caveats: time to train includes convergence (the
systems ran different batch sizes), and the A100's ResNet-50, RNN-T and DLRM runs used NGC 22.04
software, five months older than the H100's.

No source here measures A10 or P40: they keep the spec-sheet rule
(:func:`~cluster_env.world.gpu_catalog.spec_sheet_factor`); :func:`fallback_speed_types` names
them, so a run can say so. :func:`job_type_factors` is the one place a rule becomes the world's
speed table (``cluster_env.world.throughputs``), which the simulator, both engines, the
observations and the communication demand read.
"""
from __future__ import annotations

import csv
import functools
import gzip
import io
import json
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from cluster_env.errors import DataError
from cluster_env.world.gpu_catalog import canonical_gpu_name, gpu_spec

__all__ = [
    "SIA_DATA_DIR",
    "SIA_FIGURES_PATH",
    "SPEED_SOURCES",
    "MEASURED_SPEED_SOURCES",
    "SIA_SERVERS",
    "RAW_SERVERS",
    "SIA_MODELS",
    "MODEL_OF_FAMILY",
    "EXCLUDED_MODELS",
    "load_placements",
    "sia_figures",
    "one_gpu_profile",
    "measured_ratio",
    "best_throughput",
    "measured_best_ratio",
    "family_ratio",
    "family_ratio_table",
    "best_throughput_table",
    "job_type_factors",
    "speed_source",
    "fallback_speed_types",
    "rule_error_table",
    "MLPERF_DATA_DIR",
    "MLPERF_SYSTEMS",
    "MLPERF_OF_FAMILY",
    "mlperf_time_to_train",
    "mlperf_h100_over_a100",
]

SIA_DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "sia"
#: The figures taken from the ``azure`` and ``dgx-ext`` profiles (module docstring, "Source").
SIA_FIGURES_PATH = SIA_DATA_DIR / "sia_figures.json"
MLPERF_DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "mlperf"

#: MLPerf Training v2.1 benchmark -> (one-node DGX H100 system, one-node DGX A100 system), NVIDIA's
#: result folders (``cluster_env/data/mlperf/SOURCES.md``).
MLPERF_SYSTEMS: Dict[str, Tuple[str, str]] = {
    "bert": ("dgxh100_preview", "dgxa100_ngc22.09_pytorch"),
    "resnet": ("dgxh100_preview", "dgxa100_ngc22.04_mxnet"),
    "rnnt": ("dgxh100_preview", "dgxa100_ngc22.04_pytorch"),
    "dlrm": ("dgxh100_preview", "dgxa100_ngc22.04_merlin_hugectr"),
}
#: Gavel job family -> MLPerf benchmark for the H100/A100 ratio; ``None``: the median of the four.
MLPERF_OF_FAMILY: Dict[str, Optional[str]] = {
    "ResNet-18": "resnet", "ResNet-50": "resnet", "Transformer": "bert", "LM": "rnnt",
    "Recommendation": "dlrm", "A3C": None, "CycleGAN": None,
}

#: Values of ``WorldConfig.speeds``: ``"spec-sheet"`` (every non-Gavel type by the spec-sheet rule,
#: the v0-v2 worlds), ``"measured"`` (this module's measured ratios where a source has them, by the
#: median rule: :func:`measured_ratio`) and ``"measured-best"`` (the same sources by the
#: best-throughput rule: :func:`measured_best_ratio`).
SPEED_SOURCES = ("spec-sheet", "measured", "measured-best")
#: The values of :data:`SPEED_SOURCES` that read the measurements (one factor per job type).
MEASURED_SPEED_SOURCES = ("measured", "measured-best")

#: Sia server name -> our GPU type (module docstring).
SIA_SERVERS: Dict[str, str] = {"azure": "V100", "dgx-ext": "A100", "aws": "T4"}
#: Servers whose raw profiles ship (Pollux's, Apache-2.0); the others' figures are in
#: :data:`SIA_FIGURES_PATH`.
RAW_SERVERS: Tuple[str, ...] = ("aws",)
#: The six profiled models (Pollux's Table 1).
SIA_MODELS: Tuple[str, ...] = ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")
#: Models whose profiles do not enter a ratio, with the reason.
EXCLUDED_MODELS: Dict[str, str] = {
    "ncf": "Azure V100 profile 8.7-16x slower than every other server, T4 included: not GPU-bound",
}
#: Gavel job family (the job type name before " (batch size ...)") -> Sia model; ``None``: the
#: median of the retained models' ratios.
MODEL_OF_FAMILY: Dict[str, Optional[str]] = {
    "ResNet-18": "cifar10",
    "ResNet-50": "imagenet",
    "Transformer": "bert",
    "LM": "deepspeech2",
    "A3C": None,
    "CycleGAN": None,
    "Recommendation": None,
}
_MEASURED = {"A100": "A100", "A800": "A100", "G3": "A100", "T4": "T4"}
#: H800 and the code the node-shape rule makes H800-class: measured A100 x MLPerf's H100/A100.
_H800_CLASS = ("H800", "GPU-series-2")
_REQUIRED = ("placement", "local_bsz", "step_time", "sync_time")


@functools.lru_cache(maxsize=None)
def load_placements(model: str, server: str) -> Dict[str, np.ndarray]:
    """One shipped raw profile (a server of :data:`RAW_SERVERS`) as columns: ``placement`` (str
    array), ``local_bsz`` (int), ``step_time`` and ``sync_time`` (float, s). The other servers'
    profiles are not shipped: their figures are :func:`sia_figures`'.

    Raises:
        DataError: a missing column or a bad value, naming the file, row and field.
    """
    if model not in SIA_MODELS or server not in SIA_SERVERS:
        raise ValueError(f"no profile for model {model!r} on server {server!r}")
    if server not in RAW_SERVERS:
        raise ValueError(f"the raw {server!r} profiles are not shipped (no licence): read sia_figures()")
    path = SIA_DATA_DIR / model / f"placements-{server}.csv.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = list(csv.DictReader(io.StringIO(f.read())))
    if not rows or any(c not in rows[0] for c in _REQUIRED):
        raise DataError(f"profile lacks one of the columns {_REQUIRED}", file=str(path))
    cols: Dict[str, list] = {c: [] for c in _REQUIRED}
    for i, row in enumerate(rows, start=2):
        for c in _REQUIRED:
            text = row[c]
            try:
                value = text if c == "placement" else (int(text) if c == "local_bsz" else float(text))
            except (TypeError, ValueError):
                raise DataError(f"bad value {text!r}", file=str(path), row=i, field=c) from None
            if c != "placement" and not value > 0 and not (c == "sync_time" and value == 0):
                raise DataError(f"value {text!r} must be positive", file=str(path), row=i, field=c)
            cols[c].append(value)
    out = {"placement": np.array(cols["placement"], dtype=str),
           "local_bsz": np.array(cols["local_bsz"], dtype=np.int64),
           "step_time": np.array(cols["step_time"], dtype=np.float64),
           "sync_time": np.array(cols["sync_time"], dtype=np.float64)}
    for v in out.values():
        v.setflags(write=False)
    return out


@functools.lru_cache(maxsize=None)
def sia_figures() -> Dict[str, Dict[str, Dict[str, list]]]:
    """The shipped figures of the servers whose raw profiles are not shipped (``azure``,
    ``dgx-ext``; :data:`SIA_FIGURES_PATH`, written by ``benchmarks/derive_sia_figures.py``):
    ``{model: {server: {"one_gpu": [[local_bsz, step_time], ...], "cross_node": [[placement,
    local_bsz, step_time, one_node_step_time], ...] (dgx-ext)}}}``.

    Raises:
        DataError: a missing model, server or list, or a non-positive figure, naming the file.
    """
    path = SIA_FIGURES_PATH
    try:
        figures = json.loads(path.read_text(encoding="utf-8"))["figures"]
    except (OSError, ValueError, KeyError) as e:
        raise DataError(f"cannot read the Sia figures: {e}", file=str(path)) from None
    for model in SIA_MODELS:
        for server in SIA_SERVERS:
            if server in RAW_SERVERS:
                continue
            fig = figures.get(model, {}).get(server, {})
            rows = fig.get("one_gpu")
            if not rows or any(len(r) != 2 or not (r[0] > 0 and r[1] > 0) for r in rows):
                raise DataError(f"{model}/{server}: bad or missing one_gpu figures", file=str(path))
            cross = fig.get("cross_node", [])
            if any(len(r) != 4 or not (r[1] > 0 and r[2] > 0 and r[3] > 0) for r in cross):
                raise DataError(f"{model}/{server}: bad cross_node figures", file=str(path))
    return figures


@functools.lru_cache(maxsize=None)
def one_gpu_profile(model: str, server: str) -> Tuple[np.ndarray, np.ndarray]:
    """``model``'s one-GPU (placement ``"1"``) local batch sizes (int64) and step times (float64,
    s) on ``server``: from the raw profile (:data:`RAW_SERVERS`) in file order, else from
    :func:`sia_figures` by batch size."""
    if model not in SIA_MODELS or server not in SIA_SERVERS:
        raise ValueError(f"no profile for model {model!r} on server {server!r}")
    if server in RAW_SERVERS:
        p = load_placements(model, server)
        one = p["placement"] == "1"
        bsz, step = p["local_bsz"][one], p["step_time"][one]
    else:
        rows = sia_figures()[model][server]["one_gpu"]
        bsz = np.array([int(r[0]) for r in rows], dtype=np.int64)
        step = np.array([float(r[1]) for r in rows], dtype=np.float64)
    bsz, step = np.array(bsz), np.array(step)
    bsz.setflags(write=False)
    step.setflags(write=False)
    return bsz, step


def _one_gpu_step_times(model: str, server: str) -> Dict[int, float]:
    bsz, step = one_gpu_profile(model, server)
    return dict(zip(bsz.tolist(), step.tolist()))


@functools.lru_cache(maxsize=None)
def measured_ratio(gpu_type: str, model: str) -> float:
    """Speed of ``gpu_type`` (a measured server's type: A100 or T4) over V100 for ``model``: the
    median over the common one-GPU local batch sizes of ``step_time(V100) / step_time(type)``."""
    name = canonical_gpu_name(gpu_type)
    server = next((s for s, t in SIA_SERVERS.items() if t == name and t != "V100"), None)
    if server is None:
        raise ValueError(f"no Sia server measures {gpu_type!r}")
    v100, other = _one_gpu_step_times(model, "azure"), _one_gpu_step_times(model, server)
    common = sorted(set(v100) & set(other))
    if not common:
        raise DataError(f"{model}: no local batch size profiled at one GPU on both azure and {server}",
                        file=str(SIA_DATA_DIR / model))
    return float(np.median([v100[b] / other[b] for b in common]))


def _server_of(gpu_type: str) -> str:
    name = canonical_gpu_name(gpu_type)
    server = next((s for s, t in SIA_SERVERS.items() if t == name and t != "V100"), None)
    if server is None:
        raise ValueError(f"no Sia server measures {gpu_type!r}")
    return server


@functools.lru_cache(maxsize=None)
def best_throughput(model: str, server: str) -> Tuple[int, float]:
    """``model``'s best one-GPU throughput on ``server``: ``(local_bsz, samples/s)`` of the
    profiled one-GPU configuration with the most samples per second (``local_bsz / step_time``;
    the smallest batch size on a tie)."""
    bsz, step = (a.tolist() for a in one_gpu_profile(model, server))
    rates = [b / t for b, t in zip(bsz, step)]
    i = max(range(len(rates)), key=lambda k: (rates[k], -bsz[k]))
    return int(bsz[i]), float(rates[i])


@functools.lru_cache(maxsize=None)
def measured_best_ratio(gpu_type: str, model: str) -> float:
    """Speed of ``gpu_type`` (A100 or T4) over V100 for ``model`` by the best-throughput rule:
    the type's server's best one-GPU samples/s over the V100 server's (:func:`best_throughput`),
    each at its own best profiled batch size."""
    return best_throughput(model, _server_of(gpu_type))[1] / best_throughput(model, "azure")[1]


_RATIO_OF_RULE = {"measured": measured_ratio, "measured-best": measured_best_ratio}


def family_ratio(gpu_type: str, family: str, rule: str = "measured") -> float:
    """The measured ratio a Gavel job family takes on ``gpu_type`` (A100 or T4) under ``rule``
    (``"measured"``: :func:`measured_ratio`; ``"measured-best"``: :func:`measured_best_ratio`), by
    :data:`MODEL_OF_FAMILY` (``None``: median over the retained models)."""
    if family not in MODEL_OF_FAMILY:
        raise ValueError(f"unknown job family {family!r}")
    if rule not in _RATIO_OF_RULE:
        raise ValueError(f"rule must be one of {tuple(_RATIO_OF_RULE)}, got {rule!r}")
    ratio = _RATIO_OF_RULE[rule]
    model = MODEL_OF_FAMILY[family]
    if model is None:
        return float(np.median([ratio(gpu_type, m) for m in SIA_MODELS if m not in EXCLUDED_MODELS]))
    return ratio(gpu_type, model)


@functools.lru_cache(maxsize=None)
def mlperf_time_to_train(system: str, benchmark: str) -> float:
    """Median time to train (s) of ``system``'s successful runs of ``benchmark``: ``run_stop`` -
    ``run_start`` of each shipped log whose ``run_stop`` status is "success".

    Raises:
        DataError: a log without run_start / run_stop, naming the file.
    """
    folder = MLPERF_DATA_DIR / system / benchmark
    times = []
    for path in sorted(folder.glob("result_*.txt.gz")):
        start = stop = status = None
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                if not line.startswith(":::MLLOG "):
                    continue
                if '"run_start"' not in line and '"run_stop"' not in line:
                    continue
                entry = json.loads(line[len(":::MLLOG "):])
                if entry["key"] == "run_start":
                    start = entry["time_ms"]
                elif entry["key"] == "run_stop":
                    stop, status = entry["time_ms"], entry.get("metadata", {}).get("status")
        if start is None or stop is None:
            raise DataError("MLPerf log without run_start / run_stop", file=str(path))
        if status == "success":
            times.append((stop - start) / 1000.0)
    if not times:
        raise DataError(f"no successful {benchmark} run of {system}", file=str(folder))
    return float(np.median(times))


def mlperf_h100_over_a100(benchmark: str) -> float:
    """H100's speed over A100's on ``benchmark`` (MLPerf Training v2.1, one node of 8 GPUs each):
    the A100's median time to train over the H100's."""
    h100, a100 = MLPERF_SYSTEMS[benchmark]
    return mlperf_time_to_train(a100, benchmark) / mlperf_time_to_train(h100, benchmark)


def _h100_over_a100(family: str) -> float:
    bench = MLPERF_OF_FAMILY[family]
    if bench is None:
        return float(np.median([mlperf_h100_over_a100(b) for b in MLPERF_SYSTEMS]))
    return mlperf_h100_over_a100(bench)


def _family(job_type: str) -> str:
    return job_type.split(" (", 1)[0]


def job_type_factors(gpu_type: str, job_types: Sequence[str], speeds: str) -> np.ndarray:
    """(J,) speed of ``gpu_type`` over its Gavel anchor for each job type: the catalog's
    spec-sheet factor under ``speeds="spec-sheet"`` (or for a type no source measures); under
    ``"measured"`` / ``"measured-best"`` the measured ratio by that rule for A100/A800/G3/T4 and
    measured A100 x MLPerf's H100/A100 for H800 and GPU-series-2. Every speed table of the world
    (the simulator's, the observations', the communication demand's) is built from this."""
    if speeds not in SPEED_SOURCES:
        raise ValueError(f"speeds must be one of {SPEED_SOURCES}, got {speeds!r}")
    name = canonical_gpu_name(gpu_type)
    spec = gpu_spec(name)
    if speeds in MEASURED_SPEED_SOURCES:
        if name in _MEASURED:
            return np.array([family_ratio(_MEASURED[name], _family(j), speeds) for j in job_types])
        if name in _H800_CLASS:
            return np.array([family_ratio("A100", _family(j), speeds) * _h100_over_a100(_family(j))
                             for j in job_types])
    return np.full(len(job_types), spec.factor)


def speed_source(gpu_type: str, speeds: str) -> str:
    """Where ``gpu_type``'s speed comes from under ``speeds``: "measured (...)" or "fallback (...)"
    (an undisclosed code adds the class the catalog's node-shape rule assumes)."""
    name = canonical_gpu_name(gpu_type)
    spec = gpu_spec(name)
    assumed = "; undisclosed code, class assumed by the node-shape rule" if spec.source.startswith("ASSUMPTION") else ""
    if spec.anchor == name:
        return "measured (Gavel, OSDI'20)"
    measured = speeds in MEASURED_SPEED_SOURCES
    rule = ", best throughput" if speeds == "measured-best" else ""
    if spec.factor == 1.0 and spec.anchor == "V100" and not (measured and name in _MEASURED):
        return f"measured (Gavel's V100: the same chip{assumed})"
    if measured and name in _MEASURED:
        return f"measured (Sia/Pollux profiles{rule}, as {_MEASURED[name]}{assumed})"
    if measured and name in _H800_CLASS:
        return f"measured (Sia/Pollux A100{rule} x MLPerf v2.1 H100/A100{assumed})"
    return f"fallback (spec-sheet rule{assumed})"


def fallback_speed_types(gpu_type_names: Sequence[str], speeds: str) -> Tuple[str, ...]:
    """The GPU types of ``gpu_type_names`` whose speed comes (in part) from the spec-sheet rule."""
    return tuple(n for n in gpu_type_names if speed_source(n, speeds).startswith("fallback"))


def rule_error_table() -> List[Dict[str, object]]:
    """The spec-sheet rule against every measured ratio: one row per (GPU type, model) with
    ``measured``, ``rule`` (the catalog's factor) and ``error`` (rule / measured - 1): A100 and T4
    over V100 (Sia/Pollux), and H100 over A100 (MLPerf; the rule's H800/A100, the same chip)."""
    rows = []
    for gpu in ("A100", "T4"):
        rule = gpu_spec(gpu).factor
        for model in SIA_MODELS:
            m = measured_ratio(gpu, model)
            rows.append({"gpu": gpu, "model": model, "measured": m, "rule": rule,
                         "error": rule / m - 1.0, "retained": model not in EXCLUDED_MODELS})
    rule = gpu_spec("H800").factor / gpu_spec("A100").factor
    for bench in MLPERF_SYSTEMS:
        m = mlperf_h100_over_a100(bench)
        rows.append({"gpu": "H100/A100", "model": bench, "measured": m, "rule": rule,
                     "error": rule / m - 1.0, "retained": True})
    return rows


def best_throughput_table() -> List[Dict[str, object]]:
    """The best-throughput rule model by model: one row per (GPU type A100 or T4, model) with the
    V100's and the type's best one-GPU configuration (``v100_bsz``, ``v100_rate``, ``bsz``,
    ``rate``: local batch size and samples/s), the ratio by that rule (``best``) and by the median
    rule (``median``), and whether the model is retained (:data:`EXCLUDED_MODELS`)."""
    rows = []
    for gpu in ("A100", "T4"):
        for model in SIA_MODELS:
            vb, vr = best_throughput(model, "azure")
            b, r = best_throughput(model, _server_of(gpu))
            rows.append({"gpu": gpu, "model": model, "v100_bsz": vb, "v100_rate": vr, "bsz": b, "rate": r,
                         "best": measured_best_ratio(gpu, model), "median": measured_ratio(gpu, model),
                         "retained": model not in EXCLUDED_MODELS})
    return rows


def family_ratio_table() -> List[Dict[str, object]]:
    """One row per Gavel job family: its Sia model (``None``: the median of the retained models)
    and its speed over V100 on A100, H800 and T4 under each measured rule (keys ``"A100"``,
    ``"H800"``, ``"T4"``, each ``{rule: ratio}`` for ``rule`` in :data:`MEASURED_SPEED_SOURCES`):
    what :func:`job_type_factors` gives every job type of the family."""
    rows = []
    for family, model in MODEL_OF_FAMILY.items():
        row: Dict[str, object] = {"family": family, "model": model}
        for gpu in ("A100", "H800", "T4"):
            row[gpu] = {rule: float(job_type_factors(gpu, [family], rule)[0]) for rule in MEASURED_SPEED_SOURCES}
        rows.append(row)
    return rows
