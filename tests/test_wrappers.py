"""Single-agent Gymnasium views (cluster_env.wrappers) and the Stable-Baselines3 vectorised path."""
from __future__ import annotations

import importlib.util
import multiprocessing
import os
import subprocess
import sys
import warnings

import gymnasium
import numpy as np
import pytest

import cluster_env
from cluster_env.errors import InvalidActionError
from cluster_env.wrappers import (
    FLAT_ID, ORDERER_ID, PLACER_ID, HeteroClusterFlatEnv, HeteroClusterOrdererEnv, HeteroClusterPlacerEnv,
    make_vec_env,
)
from helpers import first_allowed_actions, run_episode

IDS = [FLAT_ID, ORDERER_ID, PLACER_ID]
SMALL = {"scenario": "philly-v0", "split": "train", "jobs_per_episode": 40}


def _episode(env, seed, choose):
    """Run one episode of a view; returns (observations, rewards, infos) of every step."""
    obs, info = env.reset(seed=seed)
    out_obs, out_rew, out_info = [obs], [], [info]
    done = False
    while not done:
        assert obs in env.observation_space
        obs, r, term, trunc, info = env.step(choose(obs, env.unwrapped.action_masks()))
        assert type(r) is float and type(term) is bool and type(trunc) is bool
        out_obs.append(obs), out_rew.append(r), out_info.append(info)
        done = term or trunc
        assert len(out_rew) < 100_000
    assert obs in env.observation_space
    return out_obs, out_rew, out_info


def _first(obs, mask):
    return int(np.flatnonzero(mask)[0])


def _random(seed):
    rng = np.random.default_rng(seed)
    return lambda obs, mask: int(rng.choice(np.flatnonzero(mask)))


# ---------------------------------------------------------------------- registration and checkers
def test_views_are_registered_and_built_by_gymnasium_make():
    for env_id in IDS:
        assert env_id in gymnasium.registry
        env = gymnasium.make(env_id, scenario="toy-v0", split="validation", pending_window=4)
        assert env.unwrapped.env.split == "validation" and env.unwrapped.env.builder.K == 4
        obs, info = env.reset(seed=0)
        assert obs in env.observation_space and isinstance(info, dict)
        # spaces are cached objects
        assert env.unwrapped.observation_space is env.unwrapped.observation_space
        assert env.unwrapped.action_space is env.unwrapped.action_space
        assert env_id in cluster_env.registered_ids()
        assert isinstance(cluster_env.make(env_id, scenario="toy-v0"), gymnasium.Env)


@pytest.mark.parametrize("env_id", IDS)
def test_views_pass_gymnasium_and_sb3_checkers(env_id):
    from gymnasium.utils.env_checker import check_env as gym_check

    # The checkers sample unmasked actions: forbidden ones must be no-ops rather than errors.
    env = gymnasium.make(env_id, scenario="toy-v0", split="train", invalid_action="noop").unwrapped
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*maximum value is infinity.*")
        gym_check(env)
    sb3 = pytest.importorskip("stable_baselines3.common.env_checker")
    sb3.check_env(gymnasium.make(env_id, scenario="philly-v0", split="test", invalid_action="noop").unwrapped)


def test_flat_layout_dimensions_and_segments():
    env = HeteroClusterFlatEnv("philly-v0", "test")
    b = env.env.builder
    n_act = max(b.K + b.R + 1, b.M + 1)
    assert env.action_space == gymnasium.spaces.Discrete(n_act)
    assert env.observation_space.shape == ((b.K + b.R) * 14 + b.M * 11 + 10 + 9 + n_act,)
    obs, _ = env.reset(seed=3)
    raw = cluster_env.parallel_env("philly-v0", "test").reset(seed=3)[0]["orderer"]
    parts = env.layout.unflatten(obs)
    for key in ("jobs", "machines", "global", "placing"):
        np.testing.assert_array_equal(parts[key], raw[key])
    np.testing.assert_array_equal(parts["action_mask"][: b.K + b.R + 1], raw["action_mask"])
    pre = HeteroClusterFlatEnv("philly-v0", "test", preemption=True, running_window=40)
    assert pre.action_space.n == pre.env.builder.K + 40 + 1 > b.M + 1
    assert pre.reset(seed=0)[0] in pre.observation_space


# ---------------------------------------------------------------------- masks, phases, rewards
def test_flat_view_masks_phases_and_the_env_return():
    env = HeteroClusterFlatEnv(**SMALL)
    obs, info = env.reset(seed=1)
    lay = env.layout
    phases, total = set(), 0.0
    done = False
    while not done:
        mask = env.action_masks()
        assert mask.dtype == bool and mask.shape == (env.action_space.n,) and mask.any()
        agent = info["acting_agent"]
        n_agent = env.env.action_space(agent).n
        assert not mask[n_agent:].any()                                    # padding is never allowed
        np.testing.assert_array_equal(obs[lay.slice("action_mask")], mask.astype(np.float32))
        assert obs[lay.slice("global")][0] == (1.0 if agent == "placer" else 0.0)
        assert info["phase"] == ("place" if agent == "placer" else "order")
        phases.add(agent)
        obs, r, term, trunc, info = env.step(int(np.flatnonzero(mask)[0]))
        total += r
        done = term or trunc
    assert phases == {"orderer", "placer"}
    # The same actions through the parallel env give the same return and metrics (FIFO + first-fit).
    ret, _, infos = run_episode(cluster_env.parallel_env(**SMALL), first_allowed_actions, seed=1)
    assert total == pytest.approx(ret, rel=1e-12)
    assert info["metrics"] == infos["orderer"]["metrics"]


def test_single_agent_views_reproduce_the_same_fifo_first_fit_episode():
    ret, _, infos = run_episode(cluster_env.parallel_env(**SMALL), first_allowed_actions, seed=2)
    for cls in (HeteroClusterOrdererEnv, HeteroClusterPlacerEnv):
        env = cls(**SMALL)                                     # defaults: first-fit placer / fifo orderer
        _, rewards, infos_v = _episode(env, 2, _first)
        assert sum(rewards) == pytest.approx(ret, rel=1e-12)
        assert infos_v[-1]["metrics"] == infos["orderer"]["metrics"]
        assert all(i["acting_agent"] == cls.agent for i in infos_v[:-1])


def test_flat_view_invalid_actions():
    env = HeteroClusterFlatEnv(invalid_action="raise", **SMALL)     # the views' default is "noop"
    env.reset(seed=0)
    mask = env.action_masks()
    with pytest.raises(InvalidActionError):
        env.step(int(np.flatnonzero(~mask)[0]))                 # forbidden (a padded or masked index)
    with pytest.raises(TypeError):
        env.step(1.5)
    noop = HeteroClusterFlatEnv(invalid_action="noop", **SMALL)
    obs, _ = noop.reset(seed=0)
    forbidden = np.flatnonzero(~noop.action_masks())
    for a in (forbidden[0], forbidden[-1]):
        obs2, r, term, trunc, info = noop.step(int(a))
        assert info.get("invalid_action") and r == -noop.invalid_penalty and not (term or trunc)
        np.testing.assert_array_equal(obs2, obs)


# ---------------------------------------------------------------------- determinism
@pytest.mark.parametrize("cls,fixed", [(HeteroClusterFlatEnv, None), (HeteroClusterOrdererEnv, "random"),
                                       (HeteroClusterPlacerEnv, "random")])
def test_same_seed_same_episode(cls, fixed):
    kwargs = dict(SMALL)
    if fixed is not None:
        kwargs["fixed_policy"] = fixed
    runs = []
    for _ in range(2):
        env = cls(**kwargs)
        runs.append(_episode(env, 7, _random(11)))
    (o1, r1, i1), (o2, r2, i2) = runs
    assert len(o1) == len(o2) and r1 == r2
    for a, b in zip(o1, o2):
        np.testing.assert_array_equal(a, b)
    assert i1[-1]["metrics"] == i2[-1]["metrics"]
    # reset(seed) then reset() repeat as well; another seed gives another episode
    env = cls(**kwargs)
    first, _ = env.reset(seed=7)
    second, _ = env.reset()
    env.reset(seed=7)
    again, _ = env.reset()
    np.testing.assert_array_equal(second, again)
    assert env.np_random is env.env._np_random                 # one generator: the wrapped env's
    other = cls(**kwargs)
    assert not np.array_equal(other.reset(seed=8)[0], first)


# ---------------------------------------------------------------------- fixed policies
class _CountingPlacer:
    def __init__(self):
        self.calls, self.seeds = 0, []

    def reset(self, seed=None):
        self.seeds.append(seed)

    def act(self, observations, infos):
        self.calls += 1
        return {"placer": int(np.argmax(observations["placer"]["action_mask"])), "orderer": 0}


def test_fixed_policy_objects_and_names():
    policy = _CountingPlacer()
    env = HeteroClusterOrdererEnv(fixed_policy=policy, **SMALL)
    _episode(env, 0, _first)
    assert policy.calls >= SMALL["jobs_per_episode"] and len(policy.seeds) == 1
    with pytest.raises(TypeError):
        HeteroClusterOrdererEnv(fixed_policy=42, **SMALL)
    if importlib.util.find_spec("baselines") is None:
        with pytest.raises(ValueError, match="baselines"):
            HeteroClusterOrdererEnv(fixed_policy="no-such-policy", **SMALL)


def test_fixed_policy_from_baselines():
    baselines = pytest.importorskip("baselines")
    assert hasattr(baselines, "make_policy")
    env = HeteroClusterPlacerEnv(fixed_policy="sjf", clairvoyant=True, **SMALL)
    _, _, infos = _episode(env, 0, _first)
    assert infos[-1]["metrics"]["jobs_finished"] == SMALL["jobs_per_episode"]


def test_wrappers_import_neither_torch_nor_sb3():
    code = ("import sys, numpy as np, cluster_env.wrappers as w; e = w.HeteroClusterFlatEnv('toy-v0'); "
            "e.reset(seed=0); e.step(int(np.argmax(e.action_masks()))); "
            "bad = [m for m in ('torch', 'stable_baselines3', 'sb3_contrib', 'scipy') if m in sys.modules]; "
            "print(bad); sys.exit(bool(bad))")
    # The numpy kernels: numba itself imports scipy when it is installed.
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "CLUSTER_ENV_KERNELS": "numpy"})
    assert out.returncode == 0, out.stdout + out.stderr


# ---------------------------------------------------------------------- vectorised training
def _vec_rollout(vec, steps):
    obs = vec.reset()
    trace = [obs]
    for _ in range(steps):
        masks = np.stack(vec.env_method("action_masks"))
        assert masks.shape == (vec.num_envs, vec.action_space.n) and masks.any(axis=1).all()
        obs, rew, done, infos = vec.step(masks.argmax(axis=1))
        assert obs.shape == (vec.num_envs,) + vec.observation_space.shape
        trace.append(obs)
    return trace


@pytest.mark.parametrize("view", ["flat", "parallel"])
def test_vec_envs_dummy_and_subprocess_agree(view):
    pytest.importorskip("stable_baselines3")
    kwargs = {"jobs_per_episode": 15}
    dummy = make_vec_env(view, 2, "philly-v0", "train", seed=5, **kwargs)
    # SB3's SubprocVecEnv workers import torch: "fork" (where available) keeps the test fast; the
    # parallel view's workers are ours, numpy only, and use the default start method.
    fork = view != "parallel" and "fork" in multiprocessing.get_all_start_methods()
    sub = make_vec_env(view, 2, "philly-v0", "train", seed=5, subprocess=True,
                       start_method="fork" if fork else None, **kwargs)
    try:
        assert dummy.has_attr("action_masks") and sub.has_attr("action_masks")
        assert dummy.num_envs == sub.num_envs == (4 if view == "parallel" else 2)
        t1, t2 = _vec_rollout(dummy, 60), _vec_rollout(sub, 60)   # long enough to cross an auto-reset
        for a, b in zip(t1, t2):
            np.testing.assert_array_equal(a, b)
        assert not np.array_equal(t1[0][0], t1[0][-1])            # the copies got different seeds
    finally:
        dummy.close()
        sub.close()


def test_parallel_vec_env_slots_episode_records():
    pytest.importorskip("stable_baselines3")
    vec = make_vec_env("parallel", 1, seed=1, **SMALL)
    obs = vec.reset()
    lay_agent = obs[:, -2:]
    np.testing.assert_array_equal(lay_agent, np.eye(2, dtype=np.float32))   # one slot per agent
    total, done = 0.0, False
    while not done:
        masks = vec.action_masks()
        assert masks.sum(axis=1).min() >= 1
        obs, rew, dones, infos = vec.step(masks.argmax(axis=1))
        assert rew[0] == rew[1] and dones[0] == dones[1]
        total += float(rew[0])
        done = bool(dones[0])
    ret, _, env_infos = run_episode(cluster_env.parallel_env(**SMALL), first_allowed_actions, seed=1)
    assert infos[0]["episode"]["r"] == pytest.approx(ret, rel=1e-12)
    assert total == pytest.approx(ret, rel=1e-5)                              # float32 rewards
    assert infos[1]["metrics"] == env_infos["placer"]["metrics"]
    assert infos[0]["terminal_observation"].shape == vec.observation_space.shape
    vec.close()


@pytest.mark.parametrize("view", ["flat", "parallel"])
def test_maskable_ppo_learns_on_vec_envs(view):
    pytest.importorskip("sb3_contrib")
    import torch
    from sb3_contrib import MaskablePPO

    torch.set_num_threads(1)
    vec = make_vec_env(view, 2, seed=0, **SMALL)
    model = MaskablePPO("MlpPolicy", vec, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu",
                        policy_kwargs={"net_arch": [32]})
    model.learn(256)
    assert model.num_timesteps >= 256
    obs = vec.reset()
    masks = np.stack(vec.env_method("action_masks"))
    actions, _ = model.predict(obs, action_masks=masks, deterministic=True)
    assert masks[np.arange(vec.num_envs), actions].all()
    vec.close()
