"""RLlib: the masked flat view it trains on, the harness policy of its modules, and a smoke run.

The view and the policy's checks need neither ray nor torch. The smoke test trains one tiny PPO
iteration of the two policies and scores one episode in the harness; it needs the ``rllib`` extra
and is skipped, with that reason, only where ``ray.rllib`` cannot be imported.
"""
from __future__ import annotations

import sys
from types import SimpleNamespace

import numpy as np
import pytest
from gymnasium import spaces

import baselines
import cluster_env
from baselines.rllib import INSTALL_HINT, MaskedFlatParallelEnv, RLlibPolicy, require_rllib, squash


def _lowest(obs: dict) -> dict:
    return {a: int(np.flatnonzero(o["action_mask"])[0]) for a, o in obs.items()}


def test_the_view_is_the_parallel_env_flat_with_the_mask_at_the_end():
    view = MaskedFlatParallelEnv("toy-v0", "test")
    env = cluster_env.parallel_env("toy-v0", split="test")
    flat, infos = view.reset(seed=3)
    obs, _ = env.reset(seed=3)
    steps = 0
    while env.agents:
        for agent in env.possible_agents:
            vec, o = flat[agent], obs[agent]
            assert view.observation_space(agent).contains(vec)
            n = view.action_space(agent).n
            assert n == len(o["action_mask"])
            np.testing.assert_array_equal(vec[-n:], o["action_mask"].astype(np.float32))
            np.testing.assert_allclose(vec[: o["jobs"].size], squash(o["jobs"].ravel()), rtol=1e-6)
        acts = _lowest(obs)
        flat, r_view, *_ = view.step({a: np.int64(x) for a, x in acts.items()})   # RLlib sends numpy ints
        obs, r_env, *_ = env.step(acts)
        assert r_view == r_env
        steps += 1
    assert steps > 0 and not view.agents
    assert view.metrics() == env.unwrapped.metrics()


def test_squash_keeps_hidden_values_apart_and_orders_values():
    x = np.array([-1.0, 0.0, 1.0, 10.0, 3600.0, 1e6], dtype=np.float32)
    y = squash(x)
    assert np.all(np.diff(y) > 0) and y[0] > -1.0 and y[1] == 0.0 and y[-1] < 15.0


def test_missing_rllib_is_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray.rllib", None)          # what an absent package looks like
    with pytest.raises(ImportError) as info:
        require_rllib()
    message = str(info.value)
    assert INSTALL_HINT in message and "\n" not in message
    with pytest.raises(ImportError, match=r"\.\[rllib\]"):
        baselines.rllib.from_rllib(object())


def test_a_policy_for_other_shapes_is_refused_before_it_acts():
    small = {a: SimpleNamespace(observation_space=spaces.Box(-1, 1, (7,), np.float32)) for a in ("orderer", "placer")}
    policy = RLlibPolicy(small, name="tiny", env_overrides={"preemption": True, "jobs_per_episode": 5},
                         scenario="elsewhere-v0")
    assert policy.env_overrides == {"preemption": True}      # a requirement; the window size is the run's
    env = cluster_env.parallel_env("toy-v0", split="test")
    obs, infos = env.reset(seed=0)
    policy.reset(0)
    with pytest.raises(ValueError, match=r"size 7 \(scenario 'elsewhere-v0'\) but this env gives size \d+"):
        policy.act(obs, infos)


@pytest.fixture
def rllib():
    try:
        import ray.rllib  # noqa: F401
    except ImportError as e:
        pytest.skip(f"ray.rllib is not importable ({e}); install it with {INSTALL_HINT}")
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    yield ray
    if started:
        ray.shutdown()


def test_two_rllib_policies_train_and_score_in_the_harness(rllib):
    import torch

    from baselines.rllib import dual_ppo_config, from_rllib

    config = dual_ppo_config("toy-v0", {"preemption": True}, hidden=16, train_batch=128, minibatch=64, epochs=1,
                             seed=0)
    algo = config.build_algo()
    try:
        before = {a: [p.detach().clone() for p in algo.get_module(a).parameters()] for a in ("orderer", "placer")}
        result = algo.train()
        assert result["env_runners"]["num_env_steps_sampled_lifetime"] >= 128
        policy = from_rllib(algo, name="rllib-smoke")
        for agent in ("orderer", "placer"):            # one PPO update moved each policy's weights
            after = list(policy.modules[agent].parameters())
            assert any(not torch.equal(b, p) for b, p in zip(before[agent], after)), agent
            assert type(policy.modules[agent]).__name__ == "MaskedPPOTorchRLModule"
        assert policy.env_overrides == {"preemption": True}
        records = baselines.evaluate(policy, "toy-v0", split="test", seeds=[0], backend="serial")
    finally:
        algo.stop()
    (record,) = records
    assert record["policy"] == "rllib-smoke" and not record["truncated"]
    assert record["jobs_unfinished"] == 0 and np.isfinite(record["avg_jct"]) and record["avg_jct"] > 0


def test_example_09_tiny_run_prints_a_paired_table():
    try:
        import ray.rllib  # noqa: F401
    except ImportError as e:
        pytest.skip(f"ray.rllib is not importable ({e}); install it with {INSTALL_HINT}")
    from tests.helpers import run_example

    text = run_example("09_rllib_dual_agent.py", "--tiny", "--baselines", "fifo", timeout=300)
    assert "iteration 1/1" in text and "rllib (this run)" in text
    assert "avg_jct vs las" in text and "paired with the yardstick" in text and "no verdict" in text


def test_example_09_without_rllib_stops_with_one_line_naming_the_extra():
    import subprocess

    from tests.helpers import ONE_THREAD_ENV, ROOT

    code = ("import runpy, sys; sys.modules['ray.rllib'] = None; sys.argv = ['09', '--tiny']; "
            "runpy.run_path('examples/09_rllib_dual_agent.py', run_name='__main__')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ONE_THREAD_ENV, cwd=ROOT,
                         timeout=120)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [out.stderr.strip()] and INSTALL_HINT in out.stderr
