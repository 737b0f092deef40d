"""Communication priced from measured multi-node runs (issue 33, section 2): the fit on Pollux's
T4 servers, recomputed from the shipped file, and the 7+1 / 4+4 splits of world model v3."""
from __future__ import annotations

import csv
import gzip
from dataclasses import replace

import numpy as np
import pytest

from cluster_env.core.config import WorldConfig
from cluster_env.world.comm_calibration import (
    POLLUX_NETWORK_GBPS, fit_sync_cost, fit_table, measured_demand, one_gpu_step_time,
)
from cluster_env.world.interconnect import communication_demand
from cluster_env.world.measured_speeds import SIA_DATA_DIR, measured_ratio
from cluster_env.world.throughputs import JOB_TYPES
from tests.test_comm_model import LM5, _jct_of_last

V3 = replace(WorldConfig(reference_gpu="A100").all_effects_off(), spread_penalty=True, spread_model="allreduce",
             speeds="measured", gavel_shape="capped", comm_source="measured")


def _rows(model: str):
    with gzip.open(SIA_DATA_DIR / model / "placements-aws.csv.gz", "rt") as f:
        return [(r["placement"], int(r["local_bsz"]), float(r["step_time"])) for r in csv.DictReader(f)]


def test_fit_is_least_squares_on_the_shipped_rows():
    rows = _rows("imagenet")
    one = {b: t for p, b, t in rows if p == "1"}
    a = np.array([2 * (sum(map(int, p)) - 1) / sum(map(int, p)) for p, b, t in rows if len(p) > 1])
    x = np.array([t - one[b] for p, b, t in rows if len(p) > 1])
    s = float(a @ x / (a @ a))
    fit = fit_sync_cost("imagenet")
    assert fit["s"] == pytest.approx(s, rel=1e-12)
    assert fit["rows"] == len(a) and fit["max_servers"] == 4 and fit["max_gpus"] == 16


def test_fit_error_per_model_is_reported_and_moderate():
    table = fit_table()
    assert {r["model"] for r in table} == {"bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"}
    for r in table:
        # The one-number model a(n) s explains the multi-server step times within 10% (median).
        assert 0 < r["median_error"] < 0.10 and r["median_error"] <= r["p90_error"] < 0.25


def test_demand_follows_the_formula():
    j = JOB_TYPES.index("ResNet-50 (batch size 64)")
    over_t4 = np.ones((len(JOB_TYPES), 1))
    d = measured_demand(JOB_TYPES, over_t4)[j, 0]
    assert d == pytest.approx(fit_sync_cost("imagenet")["s"] * POLLUX_NETWORK_GBPS / one_gpu_step_time("imagenet", 64))
    profiled = {b: t for p, b, t in _rows("imagenet") if p == "1"}
    assert one_gpu_step_time("imagenet", 57) == pytest.approx(profiled[57], rel=1e-12)
    assert one_gpu_step_time("imagenet", 10) == pytest.approx(profiled[20], rel=1e-12)     # clamped
    mid = np.exp(np.mean(np.log([profiled[57], profiled[81]])))                            # log-log midpoint
    assert one_gpu_step_time("imagenet", float(np.sqrt(57 * 81))) == pytest.approx(mid, rel=1e-12)
    # Families without a profiled model keep Gavel's derivation.
    assert np.isnan(measured_demand(JOB_TYPES, over_t4)[JOB_TYPES.index("A3C"), 0])
    gavel = communication_demand(["A100"], np.array([JOB_TYPES.index("A3C")]), np.array([8]), speeds="measured",
                                 shape="capped")
    mixed = communication_demand(["A100"], np.array([JOB_TYPES.index("A3C")]), np.array([8]), speeds="measured",
                                 shape="capped", comm="measured")
    assert mixed[0, 0] == gavel[0, 0]


def _x_lm5_on_a100(bandwidth: float) -> float:
    """x of an 8-GPU LM (batch size 5) job on A100 under the measured demand: LM -> deepspeech2,
    batch 5 clamped to the profiled 10, an A100 computes it measured_ratio(A100)/measured_ratio(T4)
    a T4's speed."""
    s = fit_sync_cost("deepspeech2")["s"]
    c_t4 = one_gpu_step_time("deepspeech2", 5)
    speed = measured_ratio("A100", "deepspeech2") / measured_ratio("T4", "deepspeech2")
    return s * POLLUX_NETWORK_GBPS / c_t4 * speed * 1.75 / bandwidth


def test_v3_splits_on_two_dgx_a100_keep_documented_ranges():
    machines = [("A100", 8), ("A100", 8)]
    seven_one, shape = _jct_of_last(machines, V3, [(1, 0)], [0, 1])
    assert shape == [7, 1]
    assert seven_one == pytest.approx(3600.0 * (1.0 + _x_lm5_on_a100(200.0)), rel=1e-9)
    four_four, shape = _jct_of_last(machines, V3, [(4, 0), (4, 1)], [0, 1])
    assert shape == [4, 4]
    assert four_four == pytest.approx(3600.0 * (1.0 + _x_lm5_on_a100(800.0)), rel=1e-9)
    # Documented ranges (docs/world_model.md, "World model v3"): 7+1 1.1x-1.5x, 4+4 1.0x-1.1x of the
    # consolidated 3,600 s (v2: 2.02x and 1.25x; Gavel's single ratio 9.6x).
    assert 3_960.0 <= seven_one <= 5_400.0
    assert 3_600.0 < four_four <= 3_960.0
    # The measured demand does not use the assumed testbed bandwidth.
    again, _ = _jct_of_last(machines, replace(V3, gavel_testbed_gbps=25.0), [(1, 0)], [0, 1])
    assert again == seven_one
