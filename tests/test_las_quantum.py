"""LAS's minimum quantum (``min_quantum``, the ``las-q<minutes>`` names): a hand-worked schedule on
one GPU, a decision on a built observation, the names, and the compiled engine's records equal
to the API's with the quantum binding."""
from __future__ import annotations

import numpy as np
import pytest

from baselines import engine
from baselines.harness.episode import run_episode
from baselines.orderers import LAS, PreemptivePriority, Tiresias
from baselines.registry import las_quantum_minutes, make_policy, resolve_name
from tests.test_baselines_las_oracle import OPTIMAL_JCTS, single_server_scenario
from tests.test_baselines_policies import K, build_obs

# The single-server case of tests/test_baselines_las_oracle.py (1-GPU jobs (submit, duration)
# (0, 1000), (100, 10), (200, 50), (300, 20); ticks every 100 s; no restart overhead), with a
# quantum of 4.5 minutes (270 s, between ticks, so the float32 executed feature cannot tip it):
# t=100  tick, J1 arrives: J0 has executed 100 s < 270 since its start: not preempted.
# t=200  tick, J2 arrives: J0 at 200 s < 270: not preempted.
# t=300  tick, J3 arrives: J0 at 300 s >= 270: preempted; J1, J2, J3 (0 attained) run oldest
#        first: J1 300-310, J2 310-360, J3 360-380; J0 resumes at 380 with 700 s left, ends 1080.
# JCTs 1080, 210, 160, 80 (mean 382.5) with 1 preemption; without the quantum LAS preempts J0
# at every arrival (3 preemptions, JCTs 1080, 10, 50, 20).
QUANTUM_JCTS = [1080.0, 210.0, 160.0, 80.0]


def test_las_quantum_hand_worked_single_server():
    result = run_episode(make_policy("las-q4.5"), single_server_scenario(), "test", seed=0, record=True)
    np.testing.assert_allclose(result.jct, QUANTUM_JCTS, atol=1e-6)
    assert result.record["preemptions"] == 1
    assert result.record["avg_jct"] == pytest.approx(382.5)
    # The same quantum in seconds through the keyword; no quantum: LAS's 3 preemptions.
    keyword = run_episode(make_policy("las", min_quantum=270.0), single_server_scenario(), "test", seed=0)
    assert keyword.record["preemptions"] == 1 and keyword.record["avg_jct"] == pytest.approx(382.5)
    # A quantum of exactly 300 s ends at the t=300 tick (QUANTUM_TOLERANCE_S absorbs the float32
    # executed feature's rounding of 300 s): the same schedule.
    at_tick = run_episode(make_policy("las-q5"), single_server_scenario(), "test", seed=0, record=True)
    np.testing.assert_allclose(at_tick.jct, QUANTUM_JCTS, atol=1e-6)
    plain = run_episode(make_policy("las"), single_server_scenario(), "test", seed=0, record=True)
    np.testing.assert_allclose(plain.jct, OPTIMAL_JCTS, atol=1e-6)
    assert plain.record["preemptions"] == 3


# The same case with ticks every 180 s and a quantum of 3 minutes (180 s): the float32 executed
# feature shows 180 s as 179.99996 s, which QUANTUM_TOLERANCE_S must count as served:
# t=180  tick: J0 has executed 180 s: preempted; J1 (arrived at 100) runs 180-190; J0 restarts at
#        190 (J2 arrives at 200, J3 at 300, between ticks).
# t=360  tick: J0 has executed 170 s since its restart: protected.
# t=540  tick: 350 s since its restart: preempted; J2 540-590, J3 590-610; J0 restarts at 610 with
#        470 s left and ends at 1080.
# JCTs 1080, 90, 390, 310 with 2 preemptions (without the tolerance J0 would not be preempted at
# t=180, and J1 would wait).
TICK_QUANTUM_JCTS = [1080.0, 90.0, 390.0, 310.0]


def test_a_quantum_equal_to_the_tick_ends_at_the_tick_despite_float32_rounding():
    env_kwargs = {"scheduling_tick": 180.0}
    result = run_episode(make_policy("las-q3"), single_server_scenario(), "test", seed=0, record=True,
                         env_kwargs=env_kwargs)
    np.testing.assert_allclose(result.jct, TICK_QUANTUM_JCTS, atol=1e-6)
    assert result.record["preemptions"] == 2
    if engine.available():
        compiled = engine.run_compiled_episode("las-q3", single_server_scenario(), "test", 0, env_kwargs)
        assert compiled.record["avg_jct"] == result.record["avg_jct"] and compiled.record["preemptions"] == 2


@pytest.mark.skipif(not engine.available(), reason="the compiled engine needs numba kernels")
def test_las_quantum_compiled_equals_api_on_the_single_server():
    for name in ("las-q4.5", "las-q5"):
        api = run_episode(make_policy(name), single_server_scenario(), "test", seed=0).record
        compiled = engine.run_compiled_episode(name, single_server_scenario(), "test", 0)
        assert compiled.engine == "compiled"
        assert {k: v for k, v in compiled.record.items() if k != "wall_s"} == {
            k: v for k, v in api.items() if k != "wall_s"}
        assert compiled.record["preemptions"] == 1


def test_las_quantum_protects_a_recently_started_job():
    """A built observation: job 7 runs since t=100 (started by this policy, 200 s executed then);
    at a tick job 5 waits with less attained service. Before the quantum it is not preempted."""
    las = LAS(min_quantum=600.0)
    las.reset(np.random.default_rng(0))
    obs, ids = build_obs([{"id": 7, "gpus": 4, "attained": 800.0, "executed": 200.0}], [], free=[4, 0])
    assert las.order(obs, {"job_ids": np.array(ids), "time": 100.0, "tick": True}) == 0   # job 7 starts
    advance = K + 2
    # t=500: 400 s executed since its start (600 in all, 2,400 GPU-s): protected, advance.
    obs, ids = build_obs([{"id": 5, "gpus": 4}], [{"id": 7, "gpus": 4, "attained": 2400.0}], free=[0, 0])
    assert las.order(obs, {"job_ids": np.array(ids), "time": 500.0, "tick": True}) == advance
    # Plain LAS preempts it at that tick.
    plain = LAS()
    plain.reset(np.random.default_rng(0))
    assert plain.order(obs, {"job_ids": np.array(ids), "time": 500.0, "tick": True}) == K + 0
    # t=700: 600 s since its start: the quantum is served, job 7 is preempted.
    obs, ids = build_obs([{"id": 5, "gpus": 4}], [{"id": 7, "gpus": 4, "attained": 3200.0}], free=[0, 0])
    assert las.order(obs, {"job_ids": np.array(ids), "time": 700.0, "tick": True}) == K + 0


def test_las_quantum_names_and_errors():
    assert las_quantum_minutes("las-q15") == 15.0 and las_quantum_minutes("las-q2.5") == 2.5
    for bad in ("las", "las-q0", "las-q", "las-q-5", "las-qx", "tiresias-q5"):
        assert las_quantum_minutes(bad) is None
    policy = make_policy("las-q15")
    assert policy.name == "las-q15" and policy.placer.name == make_policy("las").placer.name
    assert policy.orderer.min_quantum == 900.0 and policy.orderer.name == "las-q15"
    assert make_policy("LAS-Q5+fastest").orderer.min_quantum == 300.0
    assert resolve_name("las-q5+spread") is not None and resolve_name("las-q0+spread") is None
    # Defaults: no quantum anywhere (the named baselines and their scores are unchanged).
    for name in ("las", "tiresias", "srpt-clairvoyant"):
        assert make_policy(name).orderer.min_quantum == 0.0
    assert Tiresias(min_quantum=60.0).min_quantum == 60.0
    # A quantum out of range is said as such, not as an unknown policy.
    for bad in ("las-q0", "las-q0+consolidate", "las-q1e9", "las-qinf+fastest"):
        with pytest.raises(ValueError, match=r"las-q<minutes> needs a positive number of minutes"):
            make_policy(bad)
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="min_quantum"):
            PreemptivePriority(min_quantum=bad)
    assert engine.policy_codes("las-q5") == engine.policy_codes("las")
    assert engine.policy_codes("las-q5+fastest") == engine.policy_codes("las+fastest")
    assert engine.policy_codes("las-q0+fastest") is None
    from baselines.cli_support import policy_listing

    assert "las-q<minutes>" in policy_listing()
