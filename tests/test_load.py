"""Offered load: its definition, arrivals rescaled to a target, the ``load=`` argument."""
from __future__ import annotations

import csv
import math

import numpy as np
import pytest

import cluster_env
from cluster_env.scenarios.load import offered_load, scale_to_load
from tests.helpers import make_workload


def test_offered_load_by_hand():
    # 100 s x 2 GPUs + 300 s x 1 GPU + 0.5 s x 2 GPUs = 501 GPU-seconds over a 50 s span on 4 GPUs.
    wl = make_workload([0.0, 20.0, 50.0], [100.0, 300.0, 0.5], [2, 1, 2])
    assert offered_load(wl, 4) == pytest.approx((200 + 300 + 1) / (4 * 50))


def test_scale_to_load_keeps_order_and_relative_gaps():
    wl = make_workload([0.0, 10.0, 30.0, 100.0], [50.0, 60.0, 70.0, 80.0], [1, 2, 1, 4])
    for target in (0.3, 1.0, 2.5):
        scaled = scale_to_load(wl, 8, target)
        assert offered_load(scaled, 8) == pytest.approx(target, rel=1e-12)
        assert scaled.submit[0] == 0.0
        gaps, old = np.diff(scaled.submit), np.diff(wl.submit)
        np.testing.assert_allclose(gaps / gaps.sum(), old / old.sum(), rtol=1e-12)
        np.testing.assert_array_equal(scaled.duration, wl.duration)


def test_scale_to_load_refuses_a_workload_without_arrival_span():
    with pytest.raises(ValueError, match="same instant"):
        scale_to_load(make_workload([5.0, 5.0], [1.0, 1.0], [1, 1]), 4, 0.9)
    assert math.isinf(offered_load(make_workload([5.0, 5.0], [1.0, 1.0], [1, 1]), 4))


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "high", True, 1e-300, 5e3])
def test_bad_load_names_the_argument(bad):
    with pytest.raises((TypeError, ValueError), match="load"):
        cluster_env.parallel_env("philly-v0", split="test", load=bad)


def test_load_argument_sets_every_window_to_the_target_and_is_reported():
    env = cluster_env.parallel_env("philly-v0", split="test", load=0.8, jobs_per_episode=200)
    natural = cluster_env.parallel_env("philly-v0", split="test", jobs_per_episode=200)
    loads = []
    for seed in range(4):
        env.reset(seed=seed)
        natural.reset(seed=seed)
        assert env.offered_load == pytest.approx(0.8, rel=1e-9)
        loads.append(natural.offered_load)
        # Same window: the same jobs, in the same order.
        np.testing.assert_array_equal(env.sim.duration, natural.sim.duration)
    assert max(loads) / min(loads) > 1.5          # the trace's own windows differ widely in load


def test_offered_load_in_the_final_infos():
    env = cluster_env.parallel_env("toy-v0", split="test", load=1.5)
    obs, infos = env.reset(seed=0)
    while env.agents:
        actions = {a: int(np.flatnonzero(o["action_mask"])[0]) for a, o in obs.items()}
        obs, _, _, _, infos = env.step(actions)
    assert infos["orderer"]["offered_load"] == pytest.approx(1.5)
    assert infos["placer"]["offered_load"] == pytest.approx(1.5)


def test_load_on_a_custom_csvmake_workload(tmp_path):
    path = tmp_path / "jobs.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["submit_time", "duration", "num_gpus"])
        for i in range(20):
            w.writerow([i * 600, 1000 + 50 * i, 1 + i % 4])
    env = cluster_env.parallel_env("philly-v0", split="test", workload_csv=str(path), load=0.7)
    env.reset(seed=0)
    assert env.offered_load == pytest.approx(0.7)
    assert env.sim.num_jobs == 20


def test_higher_load_means_longer_queues_for_fifo():
    import baselines

    delays = []
    for load in (0.4, 1.6):
        (rec,) = baselines.evaluate("fifo", "philly-v0", split="test", seeds=[3],
                                    env_kwargs={"load": load, "jobs_per_episode": 300})
        delays.append(rec["avg_queue_delay"])
    assert delays[1] > 3 * delays[0]
