"""Baseline policies: hand-computed schedules, orderings and placements, 2D-LAS on a built case."""
from __future__ import annotations

import numpy as np
import pytest

import baselines
import cluster_env
from baselines.harness.episode import run_episode
from baselines.obs import G, J, M, P
from baselines.orderers import TIRESIAS_QUEUE_LIMITS, Tiresias
from cluster_env.core.config import SchedulingConfig, WorldConfig
from cluster_env.core.instance import Cluster, LoadReport, Workload
from cluster_env.scenarios.base import Scenario


def toy_jcts(policy: str) -> list[float]:
    result = run_episode(baselines.make_policy(policy), "toy-v0", "test", seed=0, record=True)
    return result.jct.tolist()


def test_fifo_toy_jcts_match_hand_computation():
    # Test jobs (submit, duration, GPUs): (2000,100,4) (2000,40,4) (2000,60,2) (2010,20,2)
    # (2030,50,8) (2040,10,1) on 2 x 4 V100, no effects. Oldest-that-fits + first-fit:
    # J0 m0 2000-2100, J1 m1 2000-2040; at 2040 J2 and J3 take m1 (2040-2100, 2040-2060);
    # J5 backfills at 2060-2070; J4 needs all 8 GPUs: 2100-2150.
    assert toy_jcts("fifo") == [100, 40, 100, 50, 120, 30]


def test_strict_fifo_toy_jcts_match_hand_computation():
    # Head-of-line blocking: J5 waits behind J4 and runs 2150-2160.
    assert toy_jcts("fifo-strict+first-fit") == [100, 40, 100, 50, 120, 120]


def test_sjf_toy_jcts_match_hand_computation():
    # Shortest fitting first + consolidating best fit: J1 m0 2000-2040, J2 m1 2000-2060,
    # J3 m1 2010-2030; at 2040 J5 (10 s) on m1 (tightest) 2040-2050 and J0 on m0 2040-2140;
    # J4 2140-2190.
    assert toy_jcts("sjf") == [140, 40, 60, 20, 160, 10]


def test_sjf_needs_durations():
    env = cluster_env.parallel_env("philly-v0", split="test", jobs_per_episode=50)
    policy = baselines.make_policy("sjf")
    with pytest.raises(baselines.ClairvoyanceRequired, match="clairvoyant=True"):
        run_episode(policy, "philly-v0", "test", seed=0, env=env)


def test_sjf_average_jct_at_most_fifo_when_clairvoyant():
    kw = {"clairvoyant": True}
    sjf = baselines.evaluate("sjf+first-fit", "philly-v0", seeds=range(3), env_kwargs=kw, backend="serial")
    fifo = baselines.evaluate("fifo+first-fit", "philly-v0", seeds=range(3), env_kwargs=kw, backend="serial")
    assert np.mean([r["avg_jct"] for r in sjf]) <= np.mean([r["avg_jct"] for r in fifo])
    # On the toy (clairvoyant by design) too.
    assert np.mean(toy_jcts("sjf")) <= np.mean(toy_jcts("fifo"))


def test_noisy_sjf_is_seeded_and_differs_from_exact():
    kw = {}
    a = baselines.evaluate("sjf-noisy+first-fit", "philly-v0", seeds=[1], env_kwargs=kw, backend="serial")
    b = baselines.evaluate("sjf-noisy+first-fit", "philly-v0", seeds=[1], env_kwargs=kw, backend="serial")
    exact = baselines.evaluate("sjf+first-fit", "philly-v0", seeds=[1], env_kwargs=kw, backend="serial")
    assert a[0]["avg_jct"] == b[0]["avg_jct"]
    assert a[0]["avg_jct"] != exact[0]["avg_jct"]


def hetero_scenario() -> Scenario:
    """Four slow K80 machines listed before two fast V100 machines; jobs never queue."""
    cluster = Cluster.from_machines("k80-then-v100", [(f"k{i}", "K80", 4) for i in range(4)]
                                    + [(f"v{i}", "V100", 4) for i in range(2)])
    n = 12
    workload = Workload(
        name="light", job_ids=tuple(str(i) for i in range(n)),
        submit=np.arange(n) * 2000.0, duration=np.full(n, 1000.0), gpus=np.full(n, 2, dtype=np.int64),
        job_type=np.arange(n, dtype=np.int64) % 5, tenant=np.zeros(n, dtype=np.int64),
        report=LoadReport(source="test", rows_read=n, rows_kept=n))
    whole = {s: (0.0, 1.0) for s in ("train", "validation", "test")}
    return Scenario(name="hetero-test", description="K80 first, V100 last", cluster=lambda: cluster,
                    workload=lambda: workload, splits=whole, world=WorldConfig(reference_gpu="V100").all_effects_off(),
                    scheduling=SchedulingConfig())


def test_fastest_first_beats_first_fit_on_a_heterogeneous_cluster():
    scenario = hetero_scenario()
    first = run_episode(baselines.make_policy("fifo+first-fit"), scenario, "test", seed=0)
    fastest = run_episode(baselines.make_policy("fifo+fastest"), scenario, "test", seed=0)
    assert fastest.record["avg_jct"] < 0.8 * first.record["avg_jct"]
    # Every job took the V100s: its JCT is its ideal runtime (slowdown 1).
    assert fastest.record["avg_slowdown"] == pytest.approx(1.0)


def test_tiresias_preempts_and_fifo_never_does():
    kw = {"preemption": True, "jobs_per_episode": 300}
    tiresias = baselines.evaluate("tiresias", "philly-v0", seeds=[0, 1], env_kwargs=kw, backend="serial")
    fifo = baselines.evaluate("fifo", "philly-v0", seeds=[0, 1], env_kwargs=kw, backend="serial")
    assert sum(r["preemptions"] for r in tiresias) > 0
    assert all(r["preemptions"] == 0 for r in fifo)


# ------------------------------------------------------------------ 2D-LAS on a constructed case
K, R, NM = 4, 2, 2


def build_obs(pending: list[dict], running: list[dict], free: list[int]) -> tuple[dict, list[int]]:
    """An orderer observation with the given candidates (gpus, attained, executed, fits)."""
    jobs = np.zeros((K + R, len(J)), dtype=np.float32)
    ids = [-1] * (K + R)
    mask = np.zeros(K + R + 1, dtype=np.int8)
    for row, job in enumerate(pending):
        jobs[row, J["valid"]] = 1
        jobs[row, J["gpus_log2"]] = np.log2(job["gpus"])
        jobs[row, J["attained_log"]] = np.log1p(job.get("attained", 0.0))
        jobs[row, J["executed_log"]] = np.log1p(job.get("executed", 0.0))
        fits = job["gpus"] <= sum(free)
        jobs[row, J["fits"]] = fits
        mask[row] = fits
        ids[row] = job["id"]
    for i, job in enumerate(running):
        row = K + i
        jobs[row, J["valid"]] = 1
        jobs[row, J["running"]] = 1
        jobs[row, J["gpus_log2"]] = np.log2(job["gpus"])
        jobs[row, J["attained_log"]] = np.log1p(job["attained"])
        jobs[row, J["executed_log"]] = np.log1p(job["attained"] / job["gpus"])
        mask[row] = 1
        ids[row] = job["id"]
    mask[-1] = 1
    machines = np.zeros((NM, len(M)), dtype=np.float32)
    machines[:, M["free_gpus"]] = np.array(free) / 8.0
    g = np.zeros(len(G), dtype=np.float32)
    g[G["preemption"]] = 1
    obs = {"jobs": jobs, "machines": machines, "global": g, "placing": np.zeros(len(P), np.float32),
           "action_mask": mask}
    return obs, ids


def test_tiresias_queue_thresholds_are_the_simulators():
    t = Tiresias()
    assert t.queue_limits == list(TIRESIAS_QUEUE_LIMITS) == [3250.0, 7200.0]
    assert [t.queue_of(x) for x in (0, 3249, 3250, 7199, 7200, 1e9)] == [0, 0, 1, 1, 2, 2]


def test_tiresias_prefers_least_attained_queue_then_fifo():
    t = Tiresias()
    t.reset(np.random.default_rng(0))
    # Oldest pending job 10 has attained 4000 GPU-s (queue 1); jobs 11 and 12 are new (queue 0).
    obs, ids = build_obs([{"id": 10, "gpus": 1, "attained": 4000.0, "executed": 4000.0},
                          {"id": 11, "gpus": 1}, {"id": 12, "gpus": 1}], [], free=[4, 4])
    info = {"job_ids": np.array(ids), "time": 5000.0}
    assert t.order(obs, info) == 1            # job 11: queue 0, older than 12


def test_tiresias_preempts_the_lowest_priority_and_promotes_the_starving():
    t = Tiresias(starvation=2.0)
    t.reset(np.random.default_rng(0))
    # Job 5 (queue 0, 4 GPUs) waits; the cluster is full with job 7 (8000 GPU-s, queue 2) and
    # job 8 (4000 GPU-s, queue 1). Job 7 must go first.
    running = [{"id": 7, "gpus": 4, "attained": 8000.0}, {"id": 8, "gpus": 4, "attained": 4000.0}]
    obs, ids = build_obs([{"id": 5, "gpus": 4}], running, free=[0, 0])
    info = {"job_ids": np.array(ids), "time": 100.0}
    assert t.order(obs, info) == K + 0        # preempt job 7
    # Same instant, job 7 now pending and job 5 fits: job 5 starts, job 7 is not restarted.
    obs, ids = build_obs([{"id": 5, "gpus": 4}, {"id": 7, "gpus": 4, "attained": 8000.0, "executed": 2000.0}],
                         [{"id": 8, "gpus": 4, "attained": 4000.0}], free=[4, 0])
    info = {"job_ids": np.array(ids), "time": 100.0}
    assert t.order(obs, info) == 0
    # Later, job 7 has waited 2 x its 2000 s executed: promoted to queue 0 (attained counted afresh).
    obs, ids = build_obs([{"id": 7, "gpus": 4, "attained": 8000.0, "executed": 2000.0}],
                         [{"id": 5, "gpus": 4, "attained": 400.0}, {"id": 8, "gpus": 4, "attained": 4000.0}],
                         free=[0, 0])
    info = {"job_ids": np.array(ids), "time": 100.0 + 3999.0}
    rows, queues, _ = t.priorities(obs, info)
    assert t.promotions == 0 and queues[0] == 2
    info = {"job_ids": np.array(ids), "time": 100.0 + 4000.0}
    rows, queues, _ = t.priorities(obs, info)
    assert t.promotions == 1 and queues[0] == 0
    # Promoted job 7 (queue 0, older than 5? no: id 7 > 5) outranks job 8 (queue 1): job 8 is preempted.
    assert t.order(obs, info) == K + 1


# ------------------------------------------------------------------ every policy, every scenario
ALL_POLICIES = [f"{o}+{p}" for o in ("fifo", "fifo-strict", "sjf", "sjf-noisy", "tiresias", "random")
                for p in ("first-fit", "consolidate", "spread", "fastest", "random")]


@pytest.mark.parametrize("scenario", ["toy-v0", "philly-v0", "openb-v0", "openb-full-v0"])
def test_every_policy_completes_every_scenario_with_invariants(scenario):
    from tests.test_invariants import check_invariants

    kw = {} if scenario == "toy-v0" else {"jobs_per_episode": 60}
    for name in ALL_POLICIES:
        policy = baselines.make_policy(name)
        env = cluster_env.parallel_env(scenario, split="test", **{**kw, **policy.env_overrides})
        policy.reset(3)
        obs, infos = env.reset(seed=3)
        state: dict = {}
        steps = 0
        check_every = 1 if scenario != "openb-full-v0" else 7
        while env.agents:
            obs, _, _, _, infos = env.step(policy.act(obs, infos))
            steps += 1
            if steps % check_every == 0:
                check_invariants(env, state)
            assert steps < 200_000, name
        check_invariants(env, state)
        m = infos["orderer"]["metrics"]
        assert m["jobs_finished"] == env.sim.num_jobs, name
        if not policy.env_overrides.get("preemption"):
            assert m["preemptions"] == 0, name


def test_make_policy_names_and_errors():
    for name in baselines.BASELINE_NAMES:      # gittins takes its distribution from a scenario
        assert baselines.make_policy(name, **({"scenario": "toy-v0"} if name == "gittins" else {})).name == name
    p = baselines.make_policy("sjf+fastest")
    assert p.env_overrides == {"clairvoyant": True}
    assert baselines.make_policy("tiresias").env_overrides == {"preemption": True}
    assert "tiresias+spread" in baselines.policy_names()
    with pytest.raises(ValueError, match="unknown policy"):
        baselines.make_policy("lottery")
    with pytest.raises(ValueError, match="unknown placer"):
        baselines.make_policy("fifo+nowhere")
    with pytest.raises(ValueError, match="unknown orderer"):
        baselines.make_policy("lottery+first-fit")
    with pytest.raises(ValueError, match="starvation"):
        baselines.make_policy("tiresias", starvation=-1)


def test_tiresias_preempts_only_at_scheduling_ticks_by_default():
    policy = baselines.make_policy("tiresias")
    env = cluster_env.parallel_env("philly-v0", split="test", preemption=True)
    policy.reset(0)
    obs, infos = env.reset(seed=0)
    preempt_ticks = []
    while env.agents:
        actions = policy.act(obs, infos)
        a = actions["orderer"]
        if obs["orderer"]["jobs"][min(a, len(obs["orderer"]["jobs"]) - 1), J["running"]] > 0.5 \
                and a < len(obs["orderer"]["action_mask"]) - 1:
            preempt_ticks.append(bool(infos["orderer"]["tick"]))
        obs, _, _, _, infos = env.step(actions)
    assert len(preempt_ticks) == infos["orderer"]["metrics"]["preemptions"] > 0
    assert all(preempt_ticks)
