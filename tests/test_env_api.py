"""The PettingZoo contract on every scenario: API tests, spaces, masks, determinism, misuse."""
from __future__ import annotations

import numpy as np
import pytest
from pettingzoo.test import api_test, parallel_api_test

import cluster_env
from cluster_env.errors import InvalidActionError
from tests.helpers import first_allowed_actions, random_actions, run_episode

SCENARIOS = ["toy-v0", "philly-v0", "openb-v0", "openb-full-v0"]
SMALL = {"jobs_per_episode": 60}


def _make(scenario: str, **kw):
    if scenario != "toy-v0":
        kw = {**SMALL, **kw}
    return cluster_env.parallel_env(scenario, **kw)


def test_list_scenarios_has_the_named_ones():
    assert set(SCENARIOS) <= set(cluster_env.list_scenarios())


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("preemption", [False, True])
def test_parallel_api(scenario, preemption):
    parallel_api_test(_make(scenario, preemption=preemption), num_cycles=400)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_aec_api(scenario):
    kw = {} if scenario == "toy-v0" else SMALL
    api_test(cluster_env.env(scenario, **kw), num_cycles=200)


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_observations_stay_in_their_spaces(scenario, split):
    env = _make(scenario, split=split, preemption=True)
    spaces = {a: env.observation_space(a) for a in env.possible_agents}
    rng = np.random.default_rng(0)
    steps = 0
    for seed in range(200):
        if steps >= 3000:
            break
        obs, infos = env.reset(seed=seed)
        assert set(infos) == set(env.possible_agents)
        while env.agents and steps < 3000:
            for agent, o in obs.items():
                assert spaces[agent].contains(o), (agent, {k: v for k, v in o.items()})
                assert o["action_mask"].dtype == np.int8
                assert o["action_mask"].sum() >= 1
            obs, *_ = env.step(random_actions(obs, rng))
            steps += 1
    assert steps >= 3000


def test_spaces_are_cached_objects():
    env = _make("philly-v0")
    for agent in env.possible_agents:
        assert env.observation_space(agent) is env.observation_space(agent)
        assert env.action_space(agent) is env.action_space(agent)


@pytest.mark.parametrize("scenario", ["philly-v0", "openb-v0"])
def test_same_seed_same_trajectory_other_seed_other_fluctuation(scenario):
    def trajectory(seed):
        env = _make(scenario, preemption=True)
        rng = np.random.default_rng(123)
        log = []

        def record(env, obs, rewards, terms, truncs, infos):
            log.append((rewards["orderer"], {k: v.copy() for k, v in obs.get("orderer", {}).items()}))

        total, steps, infos = run_episode(env, lambda o: random_actions(o, rng, lazy=0.5), seed=seed, on_step=record)
        return log, infos["orderer"]["metrics"], env.sim.fluct.factors.copy()

    a, ma, fa = trajectory(7)
    b, mb, fb = trajectory(7)
    assert len(a) == len(b) and len(a) > 50
    for (ra, oa), (rb, ob) in zip(a, b):
        assert ra == rb
        for k in oa:
            np.testing.assert_array_equal(oa[k], ob[k])
    assert ma == mb
    _, mc, fc = trajectory(8)
    assert not np.array_equal(fa, fc)
    assert mc != ma


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_random_policy_finishes_every_scenario_and_reports_metrics(scenario):
    env = _make(scenario, split="test")
    rng = np.random.default_rng(1)
    total, steps, infos = run_episode(env, lambda o: random_actions(o, rng), seed=0)
    metrics = infos["orderer"]["metrics"]
    assert set(metrics) == set(cluster_env.METRIC_KEYS)
    assert metrics["jobs_finished"] == env.sim.num_jobs
    assert metrics == env.unwrapped.metrics()
    assert 0 < metrics["gpu_utilization"] <= 1
    assert total < 0


def test_forbidden_action_is_a_clear_error_and_noop_mode_ignores_it():
    env = cluster_env.parallel_env("toy-v0", split="test")
    obs, _ = env.reset(seed=0)
    noop = env.action_space("placer").n - 1
    with pytest.raises(InvalidActionError, match="placer's action 0 is forbidden in the ORDER phase"):
        env.step({"orderer": 0, "placer": 0})
    env2 = cluster_env.parallel_env("toy-v0", split="test", invalid_action="noop")
    obs, _ = env2.reset(seed=0)
    before = env2.sim.now
    obs, rewards, terms, truncs, infos = env2.step({"orderer": 0, "placer": 0})
    assert infos["placer"]["invalid_action"] is True
    assert env2.sim.now == before


def test_misuse_gets_clear_errors():
    env = cluster_env.parallel_env("toy-v0", split="test")
    obs, _ = env.reset(seed=0)
    noop = env.action_space("placer").n - 1
    with pytest.raises(KeyError, match="missing"):
        env.step({"orderer": 0})
    with pytest.raises(KeyError, match="extra"):
        env.step({"orderer": 0, "placer": noop, "ghost": 1})
    with pytest.raises(TypeError, match="integer"):
        env.step({"orderer": "zero", "placer": noop})
    with pytest.raises(TypeError, match="integer"):
        env.step({"orderer": 0.5, "placer": noop})
    with pytest.raises(InvalidActionError, match="outside"):
        env.step({"orderer": 999, "placer": noop})
    while env.agents:
        obs, *_ = env.step(first_allowed_actions(obs))
    with pytest.raises(RuntimeError, match="reset"):
        env.step({"orderer": 0, "placer": noop})
    with pytest.raises(TypeError, match="unknown argument"):
        cluster_env.parallel_env("toy-v0", fluctuations=False)
    with pytest.raises(ValueError, match="unknown scenario"):
        cluster_env.parallel_env("nope-v0")
    with pytest.raises(ValueError, match="no split"):
        cluster_env.parallel_env("toy-v0", split="dev")
    with pytest.raises(ValueError, match="time_scale"):
        cluster_env.parallel_env("toy-v0", time_scale=-1)
    with pytest.raises(ValueError, match="pending_window"):
        cluster_env.parallel_env("toy-v0", pending_window=0)
    with pytest.raises(ValueError, match="render_mode"):
        cluster_env.parallel_env("toy-v0", render_mode="window")


def test_make_by_versioned_id():
    env = cluster_env.make(cluster_env.ENV_ID, scenario="toy-v0")
    assert env.metadata["name"] == "hetero_cluster_v1"
    with pytest.raises(ValueError, match="unknown environment id"):
        cluster_env.make("cluster_env/Nope-v9")


@pytest.mark.parametrize("mode", ["ansi", "rgb_array"])
def test_render_modes(mode):
    env = cluster_env.parallel_env("toy-v0", split="test", render_mode=mode)
    obs, _ = env.reset(seed=0)
    obs, *_ = env.step(first_allowed_actions(obs))
    obs, *_ = env.step(first_allowed_actions(obs))
    out = env.render()
    if mode == "ansi":
        assert "toy-m0" in out and "queue:" in out
    else:
        assert out.dtype == np.uint8 and out.ndim == 3 and out.shape[2] == 3
        assert len(np.unique(out.reshape(-1, 3), axis=0)) >= 3   # background, free GPU, a job


@pytest.mark.parametrize("scenario", ["toy-v0", "philly-v0"])
def test_pettingzoo_seed_test(scenario):
    from pettingzoo.test import parallel_seed_test

    # PettingZoo's seed test samples actions without masks: agents that cannot mask use "noop".
    kw = {} if scenario == "toy-v0" else SMALL
    parallel_seed_test(lambda: cluster_env.parallel_env(scenario, invalid_action="noop", **kw))


def test_state_for_centralised_critics():
    env = _make("philly-v0")
    obs, _ = env.reset(seed=0)
    state = env.state()
    assert env.state_space.contains(state.astype(np.float32))


def test_truncation_at_max_steps_and_max_time():
    env = _make("philly-v0", max_steps=25)
    obs, _ = env.reset(seed=0)
    steps = 0
    while env.agents:
        obs, rewards, terms, truncs, infos = env.step(first_allowed_actions(obs))
        steps += 1
    assert steps == 25 and all(truncs.values()) and not any(terms.values())
    m = infos["orderer"]["metrics"]
    assert m["jobs_finished"] < env.sim.num_jobs and set(m) == set(cluster_env.METRIC_KEYS)
    env = cluster_env.parallel_env("philly-v0", max_time=3600.0)   # 1,000 jobs: hours of arrivals
    obs, _ = env.reset(seed=0)
    while env.agents:
        obs, rewards, terms, truncs, infos = env.step(first_allowed_actions(obs))
    assert all(truncs.values()) and not any(terms.values()) and env.sim.now >= 3600.0


def test_injected_reward_function_sees_consistent_step_stats():
    seen = []

    def reward(stats):
        seen.append(stats)
        return -stats.fee

    env = _make("philly-v0", reward=reward)
    total, steps, infos = run_episode(env, first_allowed_actions, seed=2)
    m = infos["orderer"]["metrics"]
    assert len(seen) == steps
    assert sum(s.dt for s in seen) == pytest.approx(env.sim.now)
    assert sum(s.fee for s in seen) == pytest.approx(m["total_fee"])
    assert sum(s.energy_kwh for s in seen) == pytest.approx(m["energy_kwh"])
    assert sum(s.jobs_finished for s in seen) == m["jobs_finished"]
    assert total == pytest.approx(-m["total_fee"])
    cost = _make("philly-v0", reward="cost")
    assert cost.reward_fn.__class__.__name__ == "CostAwareReward"
    with pytest.raises(ValueError, match="unknown reward"):
        _make("philly-v0", reward="nope")


def test_place_phase_features_describe_the_job_being_placed():
    from cluster_env.envs.observation import MACHINE_FEATURES, PLACING_FEATURES

    env = _make("philly-v0")
    obs, _ = env.reset(seed=0)
    obs, *_ = env.step(first_allowed_actions(obs))        # start the oldest fitting job
    o = obs["placer"]
    sim = env.sim
    j = sim.placing
    assert o["global"][0] == 1 and o["placing"][PLACING_FEATURES.index("active")] == 1
    assert 2 ** o["placing"][PLACING_FEATURES.index("gpus_log2")] == pytest.approx(sim.gpus[j])
    col = MACHINE_FEATURES.index("job_speed")
    np.testing.assert_allclose(o["machines"][:, col], sim.job_speed[j][sim.machine_type], rtol=1e-6)
    usable = o["machines"][:, MACHINE_FEATURES.index("usable")]
    np.testing.assert_array_equal(usable > 0, o["action_mask"][:-1] > 0)
    free = o["machines"][:, MACHINE_FEATURES.index("free_gpus")] * 8
    np.testing.assert_allclose(free, sim.machines.free)


@pytest.mark.parametrize("backend,banned", [("numpy", ("torch", "scipy", "pandas")),
                                            ("numba", ("torch", "pandas"))])
def test_cluster_env_imports_neither_torch_nor_scipy(backend, banned):
    # numba itself imports scipy when it is installed (for its linear algebra); cluster_env never does.
    import os
    import subprocess
    import sys

    code = ("import sys, cluster_env; env = cluster_env.parallel_env('toy-v0'); env.reset(seed=0); "
            f"bad = [m for m in {banned!r} if m in sys.modules]; print(bad); sys.exit(bool(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "CLUSTER_ENV_KERNELS": backend})
    assert out.returncode == 0, out.stdout + out.stderr
