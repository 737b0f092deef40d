"""World model v3: measured modern GPU speeds (Sia/Pollux profiles), the
spec-sheet rule only as a named fallback, and Gavel's superlinear V100 entries capped."""
from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import re
import statistics
from dataclasses import replace

import numpy as np
import pytest

import cluster_env
from cluster_env.core.config import WorldConfig
from cluster_env.world.gpu_catalog import gpu_spec
from cluster_env.world.measured_speeds import (
    MLPERF_DATA_DIR, MLPERF_SYSTEMS, SIA_DATA_DIR, SIA_FIGURES_PATH, fallback_speed_types, measured_ratio,
    mlperf_h100_over_a100, rule_error_table, speed_source,
)
from cluster_env.world.throughputs import (
    GPU_COUNT_BUCKETS, JOB_TYPES, relative_speed_table, spread_ratio_table, superlinear_entries,
)


def _one_gpu(model: str, server: str) -> dict:
    """{local_bsz: step_time} at placement "1", read straight from the shipped file: the raw
    profile (``aws``) or the figures taken from the unshipped ones (``azure``, ``dgx-ext``)."""
    if server != "aws":
        return {b: t for b, t in json.loads(SIA_FIGURES_PATH.read_text())["figures"][model][server]["one_gpu"]}
    with gzip.open(SIA_DATA_DIR / model / f"placements-{server}.csv.gz", "rt") as f:
        return {int(r["local_bsz"]): float(r["step_time"]) for r in csv.DictReader(f) if r["placement"] == "1"}


def _check_sources_md(folder, pattern: str, count: int) -> None:
    """Every shipped file is listed in the folder's SOURCES.md with the sha256 of its original."""
    text = (folder / "SOURCES.md").read_text(encoding="utf-8")
    listed = dict(re.findall(r"^\| `([^`]+\.gz)` \| `([0-9a-f]{64})` \|$", text, re.M))
    shipped = sorted(str(p.relative_to(folder)) for p in folder.glob(pattern))
    assert sorted(listed) == shipped and len(shipped) == count
    for name, sha in listed.items():
        assert hashlib.sha256(gzip.decompress((folder / name).read_bytes())).hexdigest() == sha


def test_shipped_profiles_match_sources_md():
    # Only Pollux's T4 profiles ship raw (Apache-2.0); the V100 and A100 ones are figures
    # (tests/test_measured_best.py checks those against their provenance).
    _check_sources_md(SIA_DATA_DIR, "*/*.gz", 6)
    assert sorted(p.name for p in SIA_DATA_DIR.glob("*/*.gz")) == ["placements-aws.csv.gz"] * 6


@pytest.mark.parametrize("gpu,server", [("A100", "dgx-ext"), ("T4", "aws")])
def test_shipped_ratio_is_the_sources_figure(gpu, server):
    # ResNet-18 (CIFAR-10) on A100 / T4 over V100 (Azure): the median step-time ratio at one GPU.
    v100, other = _one_gpu("cifar10", "azure"), _one_gpu("cifar10", server)
    figure = statistics.median(v100[b] / other[b] for b in sorted(set(v100) & set(other)))
    assert measured_ratio(gpu, "cifar10") == figure
    # ... and it is what the world's table uses (measured speeds: per job type over V100).
    j = JOB_TYPES.index("ResNet-18 (batch size 64)")
    table = relative_speed_table([gpu, "V100"], "V100", speeds="measured")
    assert table[j, 0, 0] == pytest.approx(figure, rel=1e-12)
    assert table[j, 1, 0] == 1.0


def test_shipped_mlperf_logs_match_sources_md():
    _check_sources_md(MLPERF_DATA_DIR, "*/*/*.gz", 60)


def _time_to_train(system: str, benchmark: str) -> list:
    """(seconds, status) of each shipped run, read with the json module line by line."""
    import json

    out = []
    for path in sorted((MLPERF_DATA_DIR / system / benchmark).glob("result_*.txt.gz")):
        events = {}
        for line in gzip.open(path, "rt").read().splitlines():
            if line.startswith(":::MLLOG "):
                e = json.loads(line[9:])
                if e["key"] in ("run_start", "run_stop"):
                    events[e["key"]] = e
        out.append(((events["run_stop"]["time_ms"] - events["run_start"]["time_ms"]) / 1000,
                    events["run_stop"]["metadata"]["status"]))
    return out


@pytest.mark.parametrize("benchmark", sorted(MLPERF_SYSTEMS))
def test_shipped_h100_ratio_is_mlperfs_figure(benchmark):
    h100, a100 = MLPERF_SYSTEMS[benchmark]
    med = [statistics.median(t for t, status in _time_to_train(s, benchmark) if status == "success")
           for s in (h100, a100)]
    assert mlperf_h100_over_a100(benchmark) == pytest.approx(med[1] / med[0], rel=1e-12)
    assert 1.2 < med[1] / med[0] < 3.5                            # H100 is faster, as published


def test_a_known_step_time_of_each_server():
    # One row of each source, against the upstream file's text (rows 2 of the CIFAR-10 profiles).
    assert _one_gpu("cifar10", "aws")[32] > 0 and _one_gpu("cifar10", "azure")[32] > 0
    assert _one_gpu("imagenet", "aws")[20] == pytest.approx(0.14740917682647706, rel=0, abs=0)
    # deepspeech2's row 2 on the V100 server: 10,0.2707400321960449,0.0006002559997141361,1
    assert _one_gpu("deepspeech2", "azure")[10] == 0.2707400321960449


def test_derived_types_and_fallbacks_are_named():
    assert speed_source("A100", "measured").startswith("measured")
    assert speed_source("A800", "measured").startswith("measured")
    assert speed_source("A100", "spec-sheet").startswith("fallback")
    assert fallback_speed_types(("A100", "A800", "H800", "A10", "V100", "K80"), "measured") == ("A10",)
    assert fallback_speed_types(("A100", "H800", "T4"), "spec-sheet") == ("A100", "H800", "T4")
    # Undisclosed codes follow the class the node-shape rule gives them, and say so.
    assert fallback_speed_types(("G3", "GPU-series-2", "G2", "GPU-series-1"), "measured") == ("GPU-series-1",)
    assert "node-shape rule" in speed_source("G3", "measured")
    lm = JOB_TYPES.index("LM (batch size 5)")
    t = relative_speed_table(["A100", "A800", "H800"], "V100", speeds="measured")[lm, :, 0]
    assert t[0] == t[1] == measured_ratio("A100", "deepspeech2")
    assert t[2] == pytest.approx(t[0] * mlperf_h100_over_a100("rnnt"), rel=1e-12)


def test_rule_error_table_covers_every_measured_pair():
    rows = rule_error_table()
    assert len(rows) == 16
    for r in rows:
        assert r["rule"] / r["measured"] - 1.0 == pytest.approx(r["error"])
    a100 = {r["model"]: r for r in rows if r["gpu"] == "A100"}
    # The rule overstates A100 for every retained model but ResNet-18 by more than 15%.
    assert sum(r["error"] > 0.15 for r in a100.values() if r["retained"]) == 4


def test_default_tables_are_unchanged():
    # speeds="spec-sheet", shape="raw" give the v0-v2 table: one factor per type.
    names = ["K80", "P100", "V100", "A100", "H800", "A10", "T4"]
    t = relative_speed_table(names, "V100")
    for i, n in enumerate(names):
        if gpu_spec(n).anchor == "V100":
            assert np.all(t[:, i, :] == gpu_spec(n).factor)


def test_superlinear_v100_entries_are_counted_and_capped():
    assert superlinear_entries("V100")["8_over_2x4"] == 15
    assert superlinear_entries("V100")["8_over_8x1"] == 5
    assert superlinear_entries("P100")["8_over_2x4"] == 0
    from cluster_env.world.throughputs import _consolidated, measured_throughput

    n = np.asarray(GPU_COUNT_BUCKETS, dtype=float)
    capped = _consolidated("capped")                              # (A, J, B)
    per_gpu = capped / n
    finite = np.isfinite(per_gpu[:, :, 1:]) & np.isfinite(per_gpu[:, :, :-1])
    assert np.all(np.diff(per_gpu, axis=2)[finite] <= 1e-12)      # never rises with the GPU count
    for j, name in enumerate(JOB_TYPES):                          # and only ever lowered
        for b, g in enumerate(GPU_COUNT_BUCKETS):
            raw_v = measured_throughput("V100", name, g)
            if np.isfinite(raw_v):
                assert capped[2, j, b] <= raw_v
    raw = relative_speed_table(["V100"], "P100")
    lm = JOB_TYPES.index("LM (batch size 5)")
    assert raw[lm, 0, 3] / raw[lm, 0, 0] > 4                       # the anomaly (issue: H800 28.4x vs 6.5x)
    assert spread_ratio_table(["V100"], "capped")[lm, 0, 3] > spread_ratio_table(["V100"])[lm, 0, 3]


def test_new_scenario_versions_and_old_ones_unchanged():
    for old in ("modern-v1", "philly-hetero-v2"):
        w = cluster_env.get_scenario(old).world
        assert (w.speeds, w.gavel_shape, w.comm_source) == ("spec-sheet", "raw", "gavel")
    for new, base in (("modern-v2", "modern-v1"), ("philly-hetero-v3", "philly-hetero-v2")):
        s, b = cluster_env.get_scenario(new), cluster_env.get_scenario(base)
        assert (s.world.speeds, s.world.gavel_shape, s.world.comm_source) == ("measured", "capped", "measured")
        assert replace(s.world, speeds="spec-sheet", gavel_shape="raw", comm_source="gavel") == b.world
        assert s.scheduling.spread_floor and not b.scheduling.spread_floor
        assert s.load == b.load


def test_world_config_rejects_unknown_values():
    with pytest.raises(ValueError, match="speeds"):
        WorldConfig(speeds="guess").validate()
    with pytest.raises(ValueError, match="comm_source"):
        WorldConfig(comm_source="assumed").validate()
    with pytest.raises(ValueError, match="gavel_shape"):
        WorldConfig(gavel_shape="smooth").validate()


def _doc_rows(first_cell: str) -> list:
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "world_model.md").read_text(encoding="utf-8")
    return [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in text.splitlines() if line.startswith(f"| {first_cell} |")]


def test_docs_tables_are_the_codes():
    from cluster_env.world.comm_calibration import dgx_split_ratios, fit_table

    rule = {(r["gpu"], r["model"]): r for r in rule_error_table()}
    rows = _doc_rows("A100") + _doc_rows("T4") + _doc_rows("H100/A100")
    rows = [r for r in rows if len(r) == 6]
    assert len(rows) == 16
    for gpu, model, measured, rule_v, error, _ in rows:
        r = rule[(gpu, model)]
        assert measured == f"{r['measured']:.3f}" and rule_v == f"{r['rule']:.3f}"
        assert error == f"{r['error'] * 100:+.0f}%"
    fits = {(r["server"], r["model"]): r for r in fit_table()}
    rows = [r for r in _doc_rows("aws") + _doc_rows("dgx-ext") if len(r) == 6]
    assert len(rows) == 12
    for server, model, big_s, n, med, p90 in rows:
        f = fits[(server, model)]
        assert (big_s, n) == (f"{f['S']:.2f}", str(f["rows"]))
        assert (med, p90) == (f"{f['median_error'] * 100:.1f}%", f"{f['p90_error'] * 100:.1f}%")
    for model in ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"):
        (row,) = [r for r in _doc_rows(model) if len(r) == 3]
        d = dgx_split_ratios(model)
        assert row[1:] == [f"{d['17']:.3f}", f"{d['44']:.3f}"]


def test_before_after_benchmark_runs(capsys):
    from tests.helpers import load_script

    module = load_script("benchmarks/world_v3_effect.py")
    assert module.main(["--pairs", "philly-hetero-v2:philly-hetero-v3", "--policies", "fifo", "--seeds", "0-1"]) == 0
    out = capsys.readouterr().out
    assert "philly-hetero-v2 -> philly-hetero-v3, test windows 0-1 (2)" in out
    row = next(line for line in out.splitlines() if line.strip().startswith("fifo "))
    assert "[" in row and row.strip().endswith("%")


def test_numbers_quoted_for_the_anomaly():
    # docs/world_model.md, "World model v3": kappa 8.56 -> 2.47; the H800 LM batch-5 job 28.4x / 6.5x
    # a P100 (v2) and 2.11x / 1.33x (v3) at 8 / 1 GPUs.
    from cluster_env.world.throughputs import gavel_comm_ratio_table

    lm = JOB_TYPES.index("LM (batch size 5)")
    assert round(float(gavel_comm_ratio_table(["V100"])[lm, 0, 3]), 2) == 8.56
    assert round(float(gavel_comm_ratio_table(["V100"], "capped")[lm, 0, 3]), 2) == 2.47
    v2 = relative_speed_table(["H800"], "P100")[lm, 0]
    v3 = relative_speed_table(["H800"], "P100", speeds="measured", shape="capped")[lm, 0]
    assert (round(float(v2[3]), 1), round(float(v2[0]), 1)) == (28.4, 6.5)
    assert (round(float(v3[3]), 2), round(float(v3[0]), 2)) == (2.11, 1.33)
    counts = {g: superlinear_entries(g)["capped"] for g in ("V100", "K80", "P100")}
    assert counts == {"V100": 22, "K80": 5, "P100": 2}
