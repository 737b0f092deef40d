"""SuperSuit's vector wrappers on the flat parallel env, and MaskablePPO trained through them."""
from __future__ import annotations

import numpy as np
import pytest

import cluster_env
from cluster_env.errors import InvalidActionError
from cluster_env.wrappers import flat_parallel_env

SMALL = {"jobs_per_episode": 20}


def test_flat_parallel_env_has_equal_spaces_and_passes_the_parallel_api_test():
    from pettingzoo.test import parallel_api_test

    env = flat_parallel_env("toy-v0")
    assert env.observation_space("orderer") is env.observation_space("placer")
    assert env.action_space("orderer") is env.action_space("placer")
    parallel_api_test(flat_parallel_env("toy-v0", invalid_action="noop"), num_cycles=200)


def test_flat_parallel_env_reproduces_the_parallel_env_episode():
    par, flat = cluster_env.parallel_env("philly-v0", **SMALL), flat_parallel_env("philly-v0", **SMALL)
    obs_p, _ = par.reset(seed=3)
    obs_f, _ = flat.reset(seed=3)
    while par.agents:
        masks = flat.action_masks()
        for agent in par.agents:
            np.testing.assert_array_equal(masks[agent][: len(obs_p[agent]["action_mask"])],
                                          obs_p[agent]["action_mask"].astype(bool))
            assert obs_f[agent] in flat.observation_space(agent)
        act = {a: int(np.flatnonzero(o["action_mask"])[0]) for a, o in obs_p.items()}
        obs_p, r_p, *_ = par.step(act)
        obs_f, r_f, *_ = flat.step(act)
        assert r_p == r_f
    assert not flat.agents and par.metrics() == flat.metrics()


def test_flat_parallel_env_padded_actions():
    strict = flat_parallel_env("philly-v0", invalid_action="raise", **SMALL)
    strict.reset(seed=0)                              # ORDER: the orderer has fewer actions than A
    with pytest.raises(InvalidActionError, match="padding index"):
        strict.step({"orderer": strict.n_actions - 1, "placer": strict._n["placer"] - 1})
    loose = flat_parallel_env("philly-v0", invalid_action="noop", max_steps=5, **SMALL)
    loose.reset(seed=0)
    for i in range(5):                                # ignored, but counted towards max_steps
        _, _, _, truncs, infos = loose.step({"orderer": loose.n_actions - 1, "placer": loose._n["placer"] - 1})
        assert infos["orderer"]["invalid_action"]
    assert truncs["orderer"] and not loose.agents


def test_supersuit_vector_wrappers_and_maskable_ppo():
    ss = pytest.importorskip("supersuit")
    torch = pytest.importorskip("torch")
    pytest.importorskip("sb3_contrib")
    from sb3_contrib import MaskablePPO

    from cluster_env.wrappers import supersuit_vec_env

    torch.set_num_threads(1)
    # SuperSuit's own functions accept the env (they refused the Dict spaces before).
    raw = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(flat_parallel_env("toy-v0")), 2,
                                base_class="stable_baselines3")
    assert raw.num_envs == 4
    vec = supersuit_vec_env("philly-v0", "train", n_envs=2, **SMALL)
    assert vec.num_envs == 4                           # two copies x two agents
    model = MaskablePPO("MlpPolicy", vec, n_steps=32, batch_size=64, n_epochs=1, seed=0, device="cpu")
    model.learn(256)                                   # masks respected: strict env, no error
    assert model.num_timesteps >= 256
    masks = vec.action_masks()
    assert masks.shape == (4, vec.action_space.n) and masks.any(axis=1).all()
    # seeding through the wrapper gives the same first observations
    vec.seed(5)
    first = vec.reset()
    vec.seed(5)
    np.testing.assert_array_equal(vec.reset(), first)


def test_defaults_are_the_views_rule_and_pass_the_pettingzoo_seed_test():
    """One default for forbidden actions in every wrapper an agent trains on: the flat parallel
    env (under supersuit_vec_env) falls back, charges the penalty and bounds the episode, as
    the views do; PettingZoo's seed test, which samples actions without masks, passes on it as
    built by default. The parallel env itself stays strict (docs/design.md section 3: an error by default)."""
    from pettingzoo.test import parallel_seed_test

    from cluster_env.core.config import DEFAULT_STEPS_PER_JOB
    from cluster_env.wrappers._base import DEFAULT_INVALID_PENALTY

    parallel_seed_test(lambda: flat_parallel_env("toy-v0"))
    parallel_seed_test(lambda: flat_parallel_env(**SMALL), num_cycles=200)   # the default scenario
    env, twin = flat_parallel_env("philly-v0", **SMALL), flat_parallel_env("philly-v0", **SMALL)
    assert env.env.sched.invalid_action == "fallback"
    assert env.env.sched.max_steps == DEFAULT_STEPS_PER_JOB * SMALL["jobs_per_episode"]
    env.reset(seed=2)
    twin.reset(seed=2)
    masks = env.action_masks()
    forbidden = int(np.flatnonzero(~masks["orderer"])[0])
    noop = env._n["placer"] - 1
    _, rewards, _, _, infos = env.step({"orderer": forbidden, "placer": noop})
    _, ref, _, _, _ = twin.step({"orderer": int(np.flatnonzero(masks["orderer"])[0]), "placer": noop})
    assert infos["orderer"]["invalid_action"] and env.env.sim.placing == twin.env.sim.placing
    assert rewards["orderer"] == ref["orderer"] - DEFAULT_INVALID_PENALTY and rewards["placer"] == ref["placer"]
    assert type(rewards["orderer"]) is float
    with pytest.raises(InvalidActionError):
        strict = cluster_env.parallel_env("philly-v0", **SMALL)
        strict.reset(seed=2)
        strict.step({"orderer": forbidden, "placer": noop})


def test_plain_ppo_trains_on_the_default_supersuit_env():
    """PPO reads no mask: on supersuit_vec_env's defaults it takes forbidden actions and trains on."""
    pytest.importorskip("supersuit")
    torch = pytest.importorskip("torch")
    from stable_baselines3 import PPO

    from cluster_env.wrappers import supersuit_vec_env

    torch.set_num_threads(1)
    vec = supersuit_vec_env("philly-v0", "train", n_envs=1, **SMALL)
    model = PPO("MlpPolicy", vec, n_steps=128, batch_size=64, n_epochs=1, seed=0, device="cpu")
    model.learn(256)
    assert model.num_timesteps >= 256
