"""LAS (least attained service, no durations) and the oracle (reads durations): hand-computed
schedules on a single-server instance with a known optimum, decisions on built observations,
livelock freedom with preemption, refusal without clairvoyance, and composition with every placer."""
from __future__ import annotations

import re

import numpy as np
import pytest

import baselines
import cluster_env
from baselines.harness.episode import run_episode
from baselines.obs import J
from baselines.orderers import LAS, OracleSRPT
from baselines.registry import NAMED, ORDERERS, PLACERS
from cluster_env.core.config import SchedulingConfig, WorldConfig
from cluster_env.core.instance import Cluster, LoadReport, Workload
from cluster_env.scenarios.base import Scenario
from tests.test_baselines_policies import K, build_obs
from tests.helpers import place_phase_obs

# (submit s, duration s) of 1-GPU jobs on one machine with one V100, every effect off, a
# scheduling tick of 100 s, so every arrival falls on a tick (preempting at ticks loses nothing).
SINGLE_SERVER_JOBS = ((0, 1000), (100, 10), (200, 50), (300, 20))
TICK = 100.0


def single_server_scenario() -> Scenario:
    n = len(SINGLE_SERVER_JOBS)
    jobs = np.array(SINGLE_SERVER_JOBS, dtype=np.float64)
    workload = Workload(
        name="single-server", job_ids=tuple(f"s{i}" for i in range(n)), submit=jobs[:, 0].copy(),
        duration=jobs[:, 1].copy(), gpus=np.ones(n, dtype=np.int64), job_type=np.zeros(n, dtype=np.int64),
        tenant=np.zeros(n, dtype=np.int64), report=LoadReport(source="test", rows_read=n, rows_kept=n))
    cluster = Cluster.from_machines("one-gpu", [("m0", "V100", 1)])
    whole = {s: (0.0, 1.0) for s in ("train", "validation", "test")}
    return Scenario(name="single-server", description="one GPU, one long job, short ones arriving",
                    cluster=lambda: cluster, workload=lambda: workload, splits=whole,
                    world=WorldConfig(reference_gpu="V100").all_effects_off(),
                    scheduling=SchedulingConfig(scheduling_tick=TICK))


def single_server_run(policy: str, **env_kwargs):
    return run_episode(baselines.make_policy(policy), single_server_scenario(), "test", seed=0,
                       record=True, env_kwargs=env_kwargs or None)


# Hand-worked (one GPU, ticks every 100 s, no restart overhead):
# t=0    J0 (1000 s) starts.
# t=100  tick, J1 (10 s) arrives with 0 attained < J0's 100: J0 is preempted, J1 runs 100-110;
#        J0 (preempted at 100) resumes at 110, not at 100.
# t=200  tick, J2 (50 s) arrives; J0 has 190 attained: preempted, J2 runs 200-250, J0 resumes.
# t=300  tick, J3 (20 s) arrives; J0 has 240: preempted, J3 runs 300-320; J0 resumes with 760 s
#        left and ends at 1080.
# JCTs 1080, 10, 50, 20 (mean 290) with 3 preemptions. Every arrival has less remaining work than
# J0, so this is also the shortest-remaining-processing-time schedule, which minimises the mean
# flow time on one server with preemption (Schrage 1968): the optimum. FIFO (no preemption):
# J0 0-1000, J1 1000-1010, J2 1010-1060, J3 1060-1080: JCTs 1000, 910, 860, 780 (mean 887.5).
OPTIMAL_JCTS = [1080.0, 10.0, 50.0, 20.0]


def test_las_gives_the_hand_computed_optimal_schedule():
    result = single_server_run("las")
    np.testing.assert_allclose(result.jct, OPTIMAL_JCTS, atol=1e-6)
    assert result.record["preemptions"] == 3
    assert result.record["avg_jct"] == pytest.approx(290.0)
    fifo = single_server_run("fifo")
    np.testing.assert_allclose(fifo.jct, [1000, 910, 860, 780], atol=1e-6)


def test_oracle_reaches_the_same_optimum():
    result = single_server_run("srpt-clairvoyant")
    np.testing.assert_allclose(result.jct, OPTIMAL_JCTS, atol=1e-6)
    assert result.record["preemptions"] == 3


def test_las_preempts_only_at_ticks_on_the_single_server():
    # With a tick of 1000 s no arrival falls on a tick after t=0: J0 runs to the end uninterrupted
    # and the others follow in attained-then-arrival order, as FIFO would.
    result = single_server_run("las", scheduling_tick=1000.0)
    assert result.record["preemptions"] == 0
    np.testing.assert_allclose(result.jct, [1000, 910, 860, 780], atol=1e-6)


# ------------------------------------------------------------------ decisions on built observations
def test_las_ranks_by_attained_service_then_arrival():
    las = LAS()
    las.reset(np.random.default_rng(0))
    # Job 10 is the oldest but attained 50 GPU-s; jobs 11 and 12 have none: the older of them wins.
    obs, ids = build_obs([{"id": 10, "gpus": 1, "attained": 50.0, "executed": 50.0},
                          {"id": 11, "gpus": 1}, {"id": 12, "gpus": 1}], [], free=[4, 4])
    assert las.order(obs, {"job_ids": np.array(ids), "time": 10.0, "tick": False}) == 1
    # Attained service counts GPUs x seconds: 2 GPUs x 30 s (60) rank after 1 GPU x 50 s.
    obs, ids = build_obs([{"id": 10, "gpus": 1, "attained": 50.0, "executed": 50.0},
                          {"id": 11, "gpus": 2, "attained": 60.0, "executed": 30.0}], [], free=[4, 4])
    assert las.order(obs, {"job_ids": np.array(ids), "time": 20.0, "tick": False}) == 0


def test_las_preempts_the_most_attained_at_a_tick_and_never_loops_at_one_instant():
    las = LAS()
    las.reset(np.random.default_rng(0))
    running = [{"id": 7, "gpus": 4, "attained": 8000.0}, {"id": 8, "gpus": 4, "attained": 900.0}]
    obs, ids = build_obs([{"id": 5, "gpus": 4, "attained": 100.0, "executed": 25.0}], running, free=[0, 0])
    # Not at a tick: nothing fits, nothing is preempted.
    assert las.order(obs, {"job_ids": np.array(ids), "time": 50.0, "tick": False}) == len(obs["action_mask"]) - 1
    # At a tick: job 7 (most attained) is preempted for job 5 (100 GPU-s).
    assert las.order(obs, {"job_ids": np.array(ids), "time": 100.0, "tick": True}) == K + 0
    # Same instant: job 5 starts; job 7 (now pending, 8000 GPU-s) is not restarted.
    obs, ids = build_obs([{"id": 5, "gpus": 4, "attained": 100.0, "executed": 25.0},
                          {"id": 7, "gpus": 4, "attained": 8000.0, "executed": 2000.0}],
                         [{"id": 8, "gpus": 4, "attained": 900.0}], free=[4, 0])
    info = {"job_ids": np.array(ids), "time": 100.0, "tick": True}
    assert las.order(obs, info) == 0
    # Still the same instant, job 5 running: job 7 (more attained than 8) must not preempt job 8,
    # nor may job 5 (started now) be preempted by anything: advance.
    obs, ids = build_obs([{"id": 7, "gpus": 4, "attained": 8000.0, "executed": 2000.0}],
                         [{"id": 5, "gpus": 4, "attained": 100.0}, {"id": 8, "gpus": 4, "attained": 900.0}],
                         free=[0, 0])
    assert las.order(obs, {"job_ids": np.array(ids), "time": 100.0, "tick": True}) == len(obs["action_mask"]) - 1


def test_las_never_restarts_a_job_preempted_at_the_same_instant():
    las = LAS()
    las.reset(np.random.default_rng(0))
    # Job 7 preempted at t=100 for job 5, which (say, restricted to other GPU types) still does not
    # fit: job 7 fits again, but restarting it would undo the preemption at the same instant.
    obs, ids = build_obs([{"id": 5, "gpus": 4}], [{"id": 7, "gpus": 4, "attained": 800.0}], free=[0, 0])
    assert las.order(obs, {"job_ids": np.array(ids), "time": 100.0, "tick": True}) == K + 0
    obs, ids = build_obs([{"id": 7, "gpus": 4, "attained": 800.0, "executed": 200.0}], [], free=[4, 0])
    obs["action_mask"][0] = 1
    assert las.order(obs, {"job_ids": np.array(ids), "time": 100.0, "tick": True}) == len(obs["action_mask"]) - 1
    # A later instant: it restarts.
    assert las.order(obs, {"job_ids": np.array(ids), "time": 101.0, "tick": False}) == 0


def test_oracle_ranks_by_remaining_gpu_time():
    oracle = OracleSRPT()
    oracle.reset(np.random.default_rng(0))
    obs, ids = build_obs([{"id": 10, "gpus": 1}, {"id": 11, "gpus": 4}, {"id": 12, "gpus": 1}], [], free=[4, 4])
    obs["global"][baselines.obs.G["clairvoyant"]] = 1
    # Remaining seconds 500, 200, 300: GPU-time 500, 800, 300: job 12 first, then 10, then 11.
    obs["jobs"][:3, J["remaining_log"]] = np.log1p([500.0, 200.0, 300.0])
    assert oracle.order(obs, {"job_ids": np.array(ids), "time": 0.0, "tick": True}) == 2


# ------------------------------------------------------------------ on the benchmark scenarios
def test_las_finishes_philly_v1_with_bounded_preemptions():
    """No livelock: an episode ends, every preemption falls on a tick, no job is preempted twice
    at one instant, and preemptions stay below the number of (tick x visible running job)."""
    policy = baselines.make_policy("las")
    env = cluster_env.parallel_env("philly-v1", split="test", jobs_per_episode=200, **policy.env_overrides)
    policy.reset(0)
    obs, infos = env.reset(seed=0)
    n_actions = len(obs["orderer"]["action_mask"])
    preempted: list[tuple[float, int]] = []
    ticks = set()
    steps = 0
    while env.agents:
        actions = policy.act(obs, infos)
        a, info = actions["orderer"], infos["orderer"]
        if info["tick"]:
            ticks.add(info["time"])
        if a < n_actions - 1 and obs["orderer"]["jobs"][a, J["running"]] > 0.5:
            assert info["tick"], "LAS preempted outside a scheduling tick"
            preempted.append((info["time"], int(info["job_ids"][a])))
        obs, _, _, _, infos = env.step(actions)
        steps += 1
        assert steps < 100_000
    m = infos["orderer"]["metrics"]
    assert m["jobs_finished"] == 200
    assert m["preemptions"] == len(preempted) > 0
    assert len(set(preempted)) == len(preempted)
    assert len(preempted) <= len(ticks) * env.unwrapped.builder.R


def test_oracle_refuses_hidden_durations():
    for name in ("srpt-clairvoyant", "las+clairvoyant", "srpt+first-fit"):
        policy = baselines.make_policy(name)
        assert policy.env_overrides["clairvoyant"] is True
        env = cluster_env.parallel_env("philly-v1", split="test", jobs_per_episode=50, preemption=True)
        with pytest.raises(baselines.ClairvoyanceRequired, match="clairvoyant=True"):
            run_episode(policy, "philly-v1", "test", seed=0, env=env)


def test_registry_marks_las_and_the_oracle():
    assert NAMED["las"] == ("las", "consolidate") and NAMED["srpt-clairvoyant"] == ("srpt", "clairvoyant")
    assert "oracle" not in NAMED and "oracle" not in baselines.BASELINE_NAMES    # not an upper bound
    assert baselines.make_policy("las").env_overrides == {"preemption": True}
    assert baselines.make_policy("srpt-clairvoyant").env_overrides == {"preemption": True, "clairvoyant": True}
    assert baselines.make_policy("srpt+fastest").env_overrides == {"preemption": True, "clairvoyant": True}
    for doc in (OracleSRPT.__doc__ or "", PLACERS["clairvoyant"].__doc__ or ""):   # it is worse than LAS on
        assert "CLAIRVOYANT REFERENCE" in doc and "not an upper bound" in doc  # some scenarios, so no "upper" label
    assert "reads no durations" in (LAS.__doc__ or "")


def test_the_oracle_names_are_deprecated_aliases_that_warn():
    from baselines.registry import DEPRECATED_PLACERS, deprecation_of, policy_names

    for old, new in (("oracle", "srpt-clairvoyant"), ("las+oracle", "las+clairvoyant"),
                     ("oracle+fastest", "srpt+fastest"), ("oracle+oracle", "srpt+clairvoyant")):
        assert deprecation_of(old) == new
        with pytest.warns(FutureWarning, match=re.escape(f"'{old}' is deprecated: use '{new}'")):
            policy = baselines.make_policy(old)
        # The same rule as the new name, under the name it was asked by.
        assert policy.name == old and type(policy.orderer) is type(baselines.make_policy(new).orderer)
        assert type(policy.placer) is type(baselines.make_policy(new).placer)
    assert deprecation_of("srpt-clairvoyant") is None and deprecation_of("las") is None
    assert not [n for n in policy_names() if "oracle" in n] and "oracle" in DEPRECATED_PLACERS


@pytest.mark.parametrize("orderer", ["las", "srpt"])
def test_composes_with_every_placer(orderer):
    from tests.test_invariants import check_invariants

    from baselines.registry import DEPRECATED_PLACERS

    assert orderer in ORDERERS
    for placer in sorted(set(PLACERS) - set(DEPRECATED_PLACERS)):
        name = f"{orderer}+{placer}"
        policy = baselines.make_policy(name)
        assert name in baselines.policy_names()
        env = cluster_env.parallel_env("philly-hetero-v1", split="test", jobs_per_episode=40,
                                       **policy.env_overrides)
        policy.reset(1)
        obs, infos = env.reset(seed=1)
        state: dict = {}
        steps = 0
        while env.agents:
            obs, _, _, _, infos = env.step(policy.act(obs, infos))
            steps += 1
            if steps % 5 == 0:
                check_invariants(env, state)
        check_invariants(env, state)
        assert infos["orderer"]["metrics"]["jobs_finished"] == 40, name


def placer_obs(free: list[int], speed: list[float], need: int, duration: float) -> dict:
    """A PLACE-phase observation: free GPUs and the job's speed per machine, its need and duration."""
    return place_phase_obs(free, speed, need, duration)


def test_oracle_placer_gives_fast_machines_to_long_jobs_and_tight_slow_ones_to_short_jobs():
    placer = PLACERS["clairvoyant"]()
    # Machine 0: a slow GPU type (0.3x) with exactly 2 free; 1: fast (1x) with 4 free; 2: fast, 3 free.
    free, speed = [2, 4, 3], [0.3, 1.0, 1.0]
    # A 2-hour job goes to the fast machines (the tighter of the two).
    assert placer.place(placer_obs(free, speed, need=2, duration=7200.0), {}) == 2
    # A 60 s job loses 140 s on the slow machine (60/0.3 - 60), within the 300 s slack: it takes
    # the tightest fit there and leaves the fast GPUs free.
    assert placer.place(placer_obs(free, speed, need=2, duration=60.0), {}) == 0
    # A machine that holds the whole need beats a faster one that would split the job.
    assert placer.place(placer_obs([2, 1], [0.3, 1.0], need=2, duration=7200.0), {}) == 0
    # fastest (the info-agnostic placer) sends the short job to a fast machine too.
    assert PLACERS["fastest"]().place(placer_obs(free, speed, need=2, duration=60.0), {}) == 2
    # Hidden durations: refused.
    obs = placer_obs(free, speed, need=2, duration=60.0)
    obs["global"][baselines.obs.G["clairvoyant"]] = 0
    with pytest.raises(baselines.ClairvoyanceRequired):
        placer.place(obs, {})
