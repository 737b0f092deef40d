"""Gavel throughput tables: job types, relative speeds, spread ratios, buckets, contention."""
import ast
import gzip
import hashlib
import json

import numpy as np
import pytest

from cluster_env.errors import UnknownGPUTypeError
from cluster_env.world import throughputs as tp
from cluster_env.world.gpu_catalog import KNOWN_GPU_TYPES, gpu_spec
from cluster_env.world.throughputs import (
    DEFAULT_CONTENTION_ALPHA, GPU_COUNT_BUCKETS, JOB_TYPES, bucket_index, colocation_contention_fit,
    comm_intensity, measured_throughput, relative_speed_table, spread_ratio_table,
)

ALL = list(KNOWN_GPU_TYPES)
J = JOB_TYPES.index


def test_packaged_json_is_gavels_file():
    data = gzip.open(tp.GAVEL_DATA_PATH).read()
    assert hashlib.sha256(data).hexdigest() == \
        "17111f7295f03265fd9e5118d7eba31e3dd9d6e50a2e215c13ad3d3f91f74381"


def test_26_job_types_match_the_data():
    assert len(JOB_TYPES) == 26 and len(set(JOB_TYPES)) == 26
    raw = json.loads(gzip.open(tp.GAVEL_DATA_PATH).read())
    keys = [ast.literal_eval(k) for k in raw["v100"]]                 # keys are tuple literals
    one_gpu = [name for name, n in keys if n == 1]
    assert tuple(one_gpu) == JOB_TYPES                                 # same names, same order


def test_bucket_index():
    g = np.array([1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 128])
    assert bucket_index(g).tolist() == [0, 1, 2, 2, 3, 3, 3, 3, 3, 3, 3]
    assert GPU_COUNT_BUCKETS == (1, 2, 4, 8)
    assert [GPU_COUNT_BUCKETS[b] for b in bucket_index(np.array(GPU_COUNT_BUCKETS))] == [1, 2, 4, 8]
    assert bucket_index(np.array([], dtype=int)).shape == (0,)
    with pytest.raises(ValueError):
        bucket_index(np.array([0, 1]))


def test_relative_table_shape_finite_positive():
    t = relative_speed_table(ALL, "V100")
    assert t.shape == (26, len(ALL), 4) and t.dtype == np.float64
    assert np.isfinite(t).all() and (t > 0).all()


@pytest.mark.parametrize("ref", ["V100", "K80", "P100", "A100", "T4"])
def test_reference_column_is_exactly_one(ref):
    names = ["K80", ref, "H800"]
    t = relative_speed_table(names, ref)
    assert np.array_equal(t[:, 1, :], np.ones((26, 4)))


def test_relative_table_reproduces_gavel_ratios_and_factors():
    t = relative_speed_table(["K80", "P100", "V100", "T4", "A100"], "V100")
    j = J("Transformer (batch size 64)")
    for b, n in enumerate(GPU_COUNT_BUCKETS):
        k80 = measured_throughput("K80", JOB_TYPES[j], n)
        v100 = measured_throughput("V100", JOB_TYPES[j], n)
        assert t[j, 0, b] == pytest.approx(k80 / v100)
    assert np.allclose(t[:, 3, :], gpu_spec("T4").factor)       # T4 borrows V100's shape
    assert np.allclose(t[:, 4, :], gpu_spec("A100").factor)
    # P40 borrows P100's shape.
    p = relative_speed_table(["P40", "P100"], "P100")
    assert np.allclose(p[:, 0, :], gpu_spec("P40").factor)


def test_v100_faster_than_k80_except_recommendation():
    # A fact of Gavel's data: V100 beats K80 on every job type at 1 GPU except four of the five
    # Recommendation batch sizes (512..4096), where Gavel measured K80 faster.
    t = relative_speed_table(["K80"], "V100")[:, 0, 0]
    k80_faster = {JOB_TYPES[j] for j in np.flatnonzero(t >= 1)}
    assert k80_faster == {f"Recommendation (batch size {b})" for b in (512, 1024, 2048, 4096)}
    # and at every bucket for every job type with multi-GPU data
    multi = [j for j, name in enumerate(JOB_TYPES) if not np.isnan(
        measured_throughput("V100", name, 8))]
    assert len(multi) == 19
    full = relative_speed_table(["K80"], "V100")[multi, 0, :]
    assert (full < 1).all()


def test_missing_multi_gpu_entries_use_the_one_gpu_ratio():
    t = relative_speed_table(["K80", "P100", "V100"], "V100")
    for name in ("A3C", "CycleGAN", "Recommendation (batch size 512)"):
        j = J(name)
        assert np.isnan(measured_throughput("V100", name, 2))
        for b in range(1, 4):
            assert np.array_equal(t[j, :, b], t[j, :, 0])
    # K80 ResNet-50 (bs 128) is 0 (not runnable) at 2+ GPUs in Gavel: carried from 1 GPU.
    j = J("ResNet-50 (batch size 128)")
    assert np.isnan(measured_throughput("K80", JOB_TYPES[j], 2))
    assert np.all(t[j, 0, 1:] == t[j, 0, 0])


def test_spread_ratio_table():
    s = spread_ratio_table(ALL)
    assert s.shape == (26, len(ALL), 4)
    assert np.isfinite(s).all() and (s > 0).all() and (s <= 1).all()
    assert np.array_equal(s[:, :, 0], np.ones((26, len(ALL))))
    # Matches Gavel where measured (V100, LM batch size 5, 8 GPUs: 73.1 vs 699 steps/s).
    name = "LM (batch size 5)"
    v = ALL.index("V100")
    expect = measured_throughput("V100", name, 8, consolidated=False) / \
        measured_throughput("V100", name, 8)
    assert s[J(name), v, 3] == pytest.approx(expect) and expect < 0.2
    # Types sharing an anchor share the ratio.
    assert np.array_equal(s[:, ALL.index("A100"), :], s[:, v, :])
    # Spreading hurts somewhere: not all ones.
    assert (s[:, :, 1:] < 1).any()


def test_comm_intensity():
    c = comm_intensity()
    assert c.shape == (26,) and np.isfinite(c).all()
    assert (c >= 0).all() and (c <= 1).all()
    assert c[J("LM (batch size 10)")] > c[J("ResNet-50 (batch size 128)")]
    assert c.max() > 0.3


def test_contention_alpha_is_a_fifth_of_the_gpu_sharing_fit():
    fit = colocation_contention_fit()
    assert fit["n"] >= 50
    # The GPU-sharing slope (0.57) is an upper bound; the default takes a fifth of it, rounded.
    assert 0.5 < fit["slope"] < 0.65
    assert DEFAULT_CONTENTION_ALPHA == pytest.approx(round(fit["slope"] / 5, 1))
    # Sharing one GPU costs a job roughly 40 % of its throughput in Gavel's data.
    assert 0.5 < fit["mean_colocated_fraction"] < 0.7


def test_unknown_type_raises():
    with pytest.raises(UnknownGPUTypeError):
        relative_speed_table(["V100", "B200"], "V100")
    with pytest.raises(UnknownGPUTypeError):
        relative_speed_table(["V100"], "nope")
    with pytest.raises(UnknownGPUTypeError):
        spread_ratio_table(["nope"])


def test_aliases_accepted_and_results_not_shared():
    a = relative_speed_table(["A100-SXM4-80GB", "Tesla V100"], "tesla v100")
    b = relative_speed_table(["A100", "V100"], "V100")
    assert np.array_equal(a, b)
    a[:] = 0.0                                  # callers may modify their copy
    assert (relative_speed_table(["A100", "V100"], "V100") > 0).all()
    s = spread_ratio_table(["V100"])
    s[:] = 0.0
    assert (spread_ratio_table(["V100"]) > 0).all()
