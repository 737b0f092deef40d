"""Textbook dynamics on the toy scenario: hand-computed job completion times."""
from __future__ import annotations

import numpy as np
import pytest

import cluster_env
from cluster_env.scenarios.toy import TOY_JOBS


def _step(env, orderer: int, placer: int):
    return env.step({"orderer": orderer, "placer": placer})


def test_strict_fifo_action_sequence_gives_hand_computed_jcts():
    """Test split (rebased submits 0,0,0,10,30,40; durations 100,40,60,20,50,10; GPUs 4,4,2,2,8,1)
    on 2 machines x 4 GPUs, strict FIFO (the head of the queue only) and first fit:

    t=0   J0 -> m0 (until 100), J1 -> m1 (until 40); J2 (the head) does not fit: wait.
    t=40  J1 ends; J2 (2 GPUs) -> m1 (until 100), J3 (2) -> m1 (until 60). Head J4 needs 8.
    t=60  J3 ends; J4 still does not fit (J5 would: strict FIFO does not backfill).
    t=100 J0, J2 end; J4 -> m0+m1 (until 150).
    t=150 J4 ends; J5 -> m0 (until 160).
    JCTs: 100, 40, 100, 50, 120, 120.
    """
    env = cluster_env.parallel_env("toy-v0", split="test")
    obs, _ = env.reset(seed=0)
    K = env.builder.K
    adv, noop = K, env.action_space("placer").n - 1
    # t=0: start J0 (window row 0) on m0, J1 (now row 0) on m1.
    _step(env, 0, noop); _step(env, adv, 0)
    _step(env, 0, noop); _step(env, adv, 1)
    # No pending job fits: the env skips the epochs at t=10 and t=30 where advancing is the only
    # legal decision, up to t=40 where J1 has ended.
    assert env.sim.now == pytest.approx(40.0)
    _step(env, 0, noop); _step(env, adv, 1)            # J2 -> m1
    _step(env, 0, noop); obs, *_ = _step(env, adv, 1)  # J3 -> m1; the cluster is full
    # Skipped to t=60 (J3 ends). Head J4 (8 GPUs) does not fit; J5 (1 GPU) would, but strict
    # FIFO advances.
    assert env.sim.now == pytest.approx(60.0)
    assert obs["orderer"]["action_mask"][:K].tolist()[:2] == [0, 1]
    _step(env, adv, noop)
    assert env.sim.now == pytest.approx(100.0)
    _step(env, 0, noop); _step(env, adv, 0); _step(env, adv, 1)     # J4 -> m0 + m1
    assert env.sim.now == pytest.approx(150.0)                      # skipped: nothing fits
    _step(env, 0, noop)
    obs, rewards, terms, truncs, infos = _step(env, adv, 0)          # J5 -> m0, runs to the end
    assert not env.agents
    sim = env.sim
    jct = sim.jobs.finish - sim.submit
    np.testing.assert_allclose(jct, [100, 40, 100, 50, 120, 120], atol=1e-6)
    m = infos["orderer"]["metrics"]
    assert m["avg_jct"] == pytest.approx(530 / 6)
    assert m["makespan"] == pytest.approx(160)
    assert m["jobs_finished"] == 6
    # busy GPU-seconds = sum(gpus * duration) with no overhead: 400+160+120+40+400+10.
    assert m["gpu_utilization"] == pytest.approx(1130 / (8 * 160))
    assert all(terms.values())


def test_return_is_minus_average_jct_in_hours():
    env = cluster_env.parallel_env("toy-v0", split="validation")
    obs, _ = env.reset(seed=3)
    total = 0.0
    while env.agents:
        actions = {a: int(np.flatnonzero(o["action_mask"])[0]) for a, o in obs.items()}
        obs, rewards, terms, truncs, infos = env.step(actions)
        assert rewards["orderer"] == rewards["placer"]
        assert isinstance(rewards["orderer"], float)
        total += rewards["orderer"]
    assert total == pytest.approx(-infos["placer"]["metrics"]["avg_jct"] / 3600.0)


def test_toy_jobs_match_the_documented_table():
    env = cluster_env.parallel_env("toy-v0", split="test")
    env.reset(seed=0)
    jobs = np.array(TOY_JOBS[12:18], dtype=float)
    np.testing.assert_array_equal(env.sim.submit, jobs[:, 0] - 2000)
    np.testing.assert_array_equal(env.sim.duration, jobs[:, 1])
