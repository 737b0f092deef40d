"""GPU catalog: names, aliases, errors and the numbers every entry carries."""
import math

import pytest

from cluster_env.errors import DataError, UnknownGPUTypeError
from cluster_env.world import gpu_catalog as gc
from cluster_env.world.gpu_catalog import (
    GPU_ALIASES, KNOWN_GPU_TYPES, MEASURED_GPU_TYPES, all_gpu_specs, canonical_gpu_name, gpu_spec,
)

REQUIRED = ["K80", "P100", "V100", "P40", "V100M16", "V100M32", "T4", "A10", "A100", "A800",
            "H800", "G2", "G3", "MISC", "GPU-series-1", "GPU-series-2"]


def test_required_types_present_and_canonical_names_resolve_to_themselves():
    assert set(REQUIRED) <= set(KNOWN_GPU_TYPES)
    assert len(set(KNOWN_GPU_TYPES)) == len(KNOWN_GPU_TYPES)
    for name in KNOWN_GPU_TYPES:
        assert canonical_gpu_name(name) == name
        assert canonical_gpu_name(name.lower()) == name
        assert canonical_gpu_name(f"  {name.upper()} ") == name
        assert gpu_spec(name).name == name


@pytest.mark.parametrize("raw,expected", [
    ("A100-SXM4-80GB", "A100"), ("a100-sxm4-80gb", "A100"), ("A800-SXM4-80GB", "A800"),
    ("Tesla V100", "V100"), ("NVIDIA Tesla P100", "P100"), ("tesla_k80", "K80"),
    ("Tesla P40", "P40"), ("NVIDIA A10", "A10"), ("Tesla T4", "T4"), ("gpu_series_1", "GPU-series-1"),
    ("GPU-series-2", "GPU-series-2"), ("v100m32", "V100M32"), ("V100-SXM2-32GB", "V100M32"),
    ("H800", "H800"), ("misc", "MISC"),
])
def test_aliases(raw, expected):
    assert canonical_gpu_name(raw) == expected
    assert gpu_spec(raw) is gpu_spec(expected)


def test_every_alias_resolves_to_a_known_type():
    for alias, name in GPU_ALIASES.items():
        assert name in KNOWN_GPU_TYPES
        assert canonical_gpu_name(alias) == name


def test_names_seen_in_the_data_resolve():
    # Every GPU model string of the four public cluster files (cluster_env/data/SOURCES.md).
    for raw in ["G2", "T4", "G3", "P100", "V100M32", "V100M16", "A10",        # openb 2023
                "MISC", "V100",                                                # PAI 2020
                "A100-SXM4-80GB", "H800", "A800-SXM4-80GB", "GPU-series-1", "GPU-series-2"]:
        canonical_gpu_name(raw)


def test_unknown_name_raises_with_name_and_location():
    with pytest.raises(UnknownGPUTypeError) as info:
        canonical_gpu_name("RTX-9090", file="cluster.csv", row=7, field="gpu_type")
    err = info.value
    assert isinstance(err, DataError) and isinstance(err, ValueError)
    msg = str(err)
    assert "RTX-9090" in msg and "cluster.csv" in msg and "row 7" in msg and "gpu_type" in msg
    for name in ("K80", "V100", "H800"):
        assert name in msg                       # the known types are listed
    assert (err.file, err.row, err.field) == ("cluster.csv", 7, "gpu_type")


def test_unknown_name_without_location_and_non_strings():
    with pytest.raises(UnknownGPUTypeError, match="'A2000'"):
        canonical_gpu_name("A2000")
    with pytest.raises(UnknownGPUTypeError):
        canonical_gpu_name("")
    with pytest.raises(UnknownGPUTypeError):
        canonical_gpu_name(None)  # type: ignore[arg-type]
    with pytest.raises(UnknownGPUTypeError):
        gpu_spec("tesla")


def test_numbers_positive_and_consistent():
    assert [s.name for s in all_gpu_specs()] == list(KNOWN_GPU_TYPES)
    for s in all_gpu_specs():
        for v in (s.factor, s.memory_gb, s.price_per_gpu_hour, s.busy_watts, s.idle_watts):
            assert math.isfinite(v) and v > 0, s
        assert s.idle_watts < s.busy_watts
        assert s.anchor in MEASURED_GPU_TYPES
        assert s.source.strip()
        assert s.measured == (s.name in MEASURED_GPU_TYPES)


def test_measured_types_have_factor_one_and_anchor_themselves():
    assert MEASURED_GPU_TYPES == ("K80", "P100", "V100")
    for name in MEASURED_GPU_TYPES:
        s = gpu_spec(name)
        assert s.measured and s.factor == 1.0 and s.anchor == name


def test_factor_rule_from_spec_constants():
    v = (gc.V100_SXM2_FP16_TENSOR_TFLOPS, gc.V100_SXM2_BW_GBS)
    assert gpu_spec("P40").factor == pytest.approx(gc.spec_sheet_factor(
        gc.P40_FP32_TFLOPS, gc.P40_BW_GBS, gc.P100_PCIE_FP32_TFLOPS, gc.P100_PCIE_BW_GBS))
    assert gpu_spec("T4").factor == pytest.approx(gc.spec_sheet_factor(
        gc.T4_FP16_TENSOR_TFLOPS, gc.T4_BW_GBS, *v))
    assert gpu_spec("H800").factor == pytest.approx(gc.spec_sheet_factor(
        gc.H800_SXM5_FP16_TENSOR_TFLOPS, gc.H800_SXM5_BW_GBS, *v))
    # Sanity of the resulting figures (rounded).
    expected = {"P40": 0.77, "T4": 0.43, "A10": 0.82, "A100": 2.38, "A800": 2.38, "H800": 5.43}
    for name, f in expected.items():
        assert gpu_spec(name).factor == pytest.approx(f, abs=0.01), name
    assert gpu_spec("P40").anchor == "P100"
    assert gpu_spec("V100M16").factor == gpu_spec("V100M32").factor == 1.0


def test_speed_order_of_generations():
    f = {n: gpu_spec(n).factor for n in KNOWN_GPU_TYPES}
    assert f["T4"] < f["A10"] < f["V100"] < f["A100"] < f["H800"]


def test_undisclosed_codes_are_labelled_assumptions():
    for name in ("G2", "G3", "MISC", "GPU-series-1", "GPU-series-2"):
        s = gpu_spec(name)
        assert not s.measured
        assert "ASSUMPTION" in s.source


def test_specs_are_frozen():
    with pytest.raises(Exception):
        gpu_spec("V100").factor = 2.0  # type: ignore[misc]
