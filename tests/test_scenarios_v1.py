"""The v1 scenarios: default loads, windows, the tiled full-cluster workload, the heterogeneous mix."""
from __future__ import annotations

import numpy as np
import pytest

import cluster_env
from cluster_env.scenarios import registry
from cluster_env.scenarios.base import tile_in_time
from cluster_env.scenarios.load import offered_load

V1 = ("philly-v1", "openb-v1", "openb-full-v1", "philly-hetero-v1")
V0 = ("toy-v0", "philly-v0", "openb-v0", "openb-full-v0")


def test_every_v1_scenario_is_registered_with_a_documented_default_load():
    names = cluster_env.list_scenarios()
    for name in V1:
        assert name in names
        scenario = cluster_env.get_scenario(name)
        assert scenario.load is not None and scenario.load > 0
        assert scenario.world.spread_reference == "fewest_machines"
        assert scenario.scheduling.pending_window == registry.V1_PENDING_WINDOW


def test_v0_scenarios_keep_their_rules():
    for name in V0:
        scenario = cluster_env.get_scenario(name)
        assert scenario.load is None and scenario.repeat == 1
        assert scenario.world.spread_reference == "one_machine"
        assert scenario.scheduling.pending_window in (8, 32)


@pytest.mark.parametrize("name", V1)
def test_each_episode_is_at_the_default_load(name):
    env = cluster_env.parallel_env(name, split="test")
    default = cluster_env.get_scenario(name).load
    for seed in (0, 1):
        env.reset(seed=seed)
        assert env.offered_load == pytest.approx(default, rel=1e-9)
        assert offered_load(env.sim.workload, env.cluster.total_gpus) == pytest.approx(default, rel=1e-9)


def test_splits_of_v1_are_disjoint_windows_of_the_trace():
    scenario = cluster_env.get_scenario("philly-v1")
    rng = np.random.default_rng(0)
    ids = {split: set(scenario.sample(split, rng).job_ids) for split in ("train", "validation", "test")}
    assert not ids["train"] & ids["test"] and not ids["validation"] & ids["test"]


def test_tile_in_time_repeats_the_window_with_fresh_ids():
    scenario = cluster_env.get_scenario("openb-v0")
    window = scenario.sample("test", np.random.default_rng(3))
    tiled = tile_in_time(window, 3)
    assert tiled.num_jobs == 3 * window.num_jobs
    assert len(set(tiled.job_ids)) == tiled.num_jobs
    assert np.all(np.diff(tiled.submit) >= 0)
    n = window.num_jobs
    np.testing.assert_array_equal(tiled.duration[n:2 * n], window.duration)
    gaps = np.diff(tiled.submit[n - 1:n + 1])
    assert gaps[0] > 0                               # the copy starts after the original ends


def test_openb_full_v1_has_enough_pods_to_queue_the_whole_cluster():
    env = cluster_env.parallel_env("openb-full-v1", split="test")
    env.reset(seed=0)
    wl = env.sim.workload
    assert wl.num_jobs == 1000 * registry.OPENB_FULL_V1_REPEAT
    assert env.cluster.total_gpus == 6212
    assert int(wl.gpus.sum()) > 1.5 * env.cluster.total_gpus


def test_philly_hetero_v1_is_gavels_mix_and_reports_what_it_filtered():
    scenario = cluster_env.get_scenario("philly-hetero-v1")
    cluster = scenario.cluster()
    assert cluster.gpus_of_type() == {"K80": 36, "P100": 36, "V100": 36}
    # Machines are listed round-robin by type (first-fit is not heterogeneity-aware by accident).
    assert [cluster.gpu_type_names[t] for t in cluster.machine_type[:3]] == ["K80", "P100", "V100"]
    workload = scenario.workload()
    full = cluster_env.get_scenario("philly-v0").workload()
    assert workload.gpus.max() <= registry.HETERO_MAX_GPUS
    dropped = int((full.gpus > registry.HETERO_MAX_GPUS).sum())
    assert dropped > 0
    assert workload.num_jobs == full.num_jobs - dropped
    assert sum(workload.report.filtered.values()) - sum(full.report.filtered.values()) == dropped


def test_heterogeneous_speeds_span_a_wide_range():
    from cluster_env.world.throughputs import relative_speed_table

    table = relative_speed_table(("K80", "P100", "V100"), "P100")[:, :, 0]
    ratio = table[:, 2] / table[:, 0]                # V100 over K80, per job type
    assert ratio.max() > 5 and ratio.min() < ratio.max() / 2


def test_default_scenario_of_the_benchmark_is_v1():
    assert registry.DEFAULT_SCENARIO in V1
