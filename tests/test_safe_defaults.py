"""The RL researcher's path, safe by default: the single-agent views as registered (default
arguments) pass both checkers, plain PPO (no masks) trains on the flat view, no episode stalls,
and the parallel env stays strict."""
from __future__ import annotations

import warnings

import gymnasium
import numpy as np
import pytest

import cluster_env
from cluster_env.errors import InvalidActionError
from cluster_env.wrappers import FLAT_ID, ORDERER_ID, PLACER_ID
from cluster_env.core.config import DEFAULT_STEPS_PER_JOB
from cluster_env.wrappers._base import DEFAULT_INVALID_PENALTY

IDS = [FLAT_ID, ORDERER_ID, PLACER_ID]


@pytest.mark.parametrize("env_id", IDS)
def test_registered_views_pass_both_checkers_with_default_arguments(env_id):
    from gymnasium.utils.env_checker import check_env as gym_check

    sb3 = pytest.importorskip("stable_baselines3.common.env_checker")
    env = gymnasium.make(env_id).unwrapped            # exactly as registered: philly-v0, train
    for seed in range(3):                             # the checkers sample unmasked actions
        env.action_space.seed(seed)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*maximum value is infinity.*")
            gym_check(env)
            sb3.check_env(env)


def test_plain_ppo_trains_on_the_flat_view_with_defaults():
    torch = pytest.importorskip("torch")
    from stable_baselines3 import PPO

    torch.set_num_threads(1)
    env = gymnasium.make(FLAT_ID)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*infinity.*")
        model = PPO("MlpPolicy", env, n_steps=256, batch_size=64, n_epochs=1, seed=0, device="cpu")
        model.learn(2048)
    assert model.num_timesteps >= 2048


def test_forbidden_actions_in_views_play_the_lowest_allowed_action_at_a_cost():
    # philly-v0: the orderer has fewer actions than the placer, so ORDER has padded indices.
    env = gymnasium.make(FLAT_ID, scenario="philly-v0", jobs_per_episode=40).unwrapped
    twin = gymnasium.make(FLAT_ID, scenario="philly-v0", jobs_per_episode=40).unwrapped
    obs, _ = env.reset(seed=0)
    twin.reset(seed=0)
    assert np.flatnonzero(~env.action_masks())[-1] >= env.env.action_space("orderer").n    # padded
    for pick in ("last", "first"):                                   # a masked index, a padded one
        forbidden = np.flatnonzero(~env.action_masks())
        a = int(forbidden[0] if pick == "first" else forbidden[-1])
        lowest = int(np.flatnonzero(twin.action_masks())[0])
        obs, r, term, trunc, info = env.step(a)
        obs_t, r_t, *_ = twin.step(lowest)
        assert info["invalid_action"] and info["played_action"] == lowest and not (term or trunc)
        assert r == r_t - DEFAULT_INVALID_PENALTY
        np.testing.assert_array_equal(obs, obs_t)
    strict = gymnasium.make(FLAT_ID, jobs_per_episode=40, invalid_action="raise").unwrapped
    strict.reset(seed=0)
    with pytest.raises(InvalidActionError, match="MaskablePPO"):
        strict.step(int(np.flatnonzero(~strict.action_masks())[0]))
    with pytest.raises(ValueError, match="invalid_action must be one of"):
        gymnasium.make(FLAT_ID, invalid_action="ignore")


@pytest.mark.parametrize("env_id", IDS)
def test_an_always_forbidden_policy_still_finishes_the_episode(env_id):
    env = gymnasium.make(env_id, scenario="toy-v0").unwrapped
    env.reset(seed=0)
    done, steps = False, 0
    while not done:
        _, r, term, trunc, info = env.step(int(np.flatnonzero(~env.action_masks())[-1]))
        assert info["invalid_action"] and r <= -DEFAULT_INVALID_PENALTY
        done, steps = term or trunc, steps + 1
        assert steps < 1000
    assert term and info["metrics"]["jobs_finished"] == 6


@pytest.mark.parametrize("env_id", IDS)
def test_views_have_a_finite_default_max_steps(env_id):
    env = gymnasium.make(env_id).unwrapped
    assert env.env.sched.max_steps == DEFAULT_STEPS_PER_JOB * 1000       # philly-v0: 1000 jobs an episode
    assert gymnasium.make(env_id, max_steps=7).unwrapped.env.sched.max_steps == 7


@pytest.mark.parametrize("always", ["padded", "forbidden"])
def test_an_always_forbidden_action_truncates_at_max_steps(always):
    # With invalid_action="noop" a forbidden action changes nothing, but it counts towards max_steps.
    env = gymnasium.make(FLAT_ID, jobs_per_episode=40, max_steps=100, invalid_action="noop").unwrapped
    env.reset(seed=0)
    steps, done = 0, False
    while not done:
        mask = env.action_masks()
        n_agent = env.env.action_space(env.acting_agent).n
        a = env.action_space.n - 1 if always == "padded" and n_agent < env.action_space.n else \
            int(np.flatnonzero(~mask[:n_agent])[0])
        _, _, term, trunc, info = env.step(a)
        steps += 1
        done = term or trunc
        assert steps <= 100
    assert trunc and steps == 100


def test_parallel_env_stays_strict_by_default():
    env = cluster_env.parallel_env("toy-v0")
    assert env.sched.invalid_action == "raise" and env.sched.max_steps is None
    obs, _ = env.reset(seed=0)
    bad = int(np.flatnonzero(obs["orderer"]["action_mask"] == 0)[0])
    with pytest.raises(InvalidActionError, match="invalid_action='fallback'"):
        env.step({"orderer": bad, "placer": len(obs["placer"]["action_mask"]) - 1})


def test_plain_ppo_benchmark_smoke():
    import os
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("stable_baselines3")
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "plain_ppo_flat.py"
    out = subprocess.run([sys.executable, str(script), "--timesteps", "256", "--n-steps", "128",
                          "--jobs-per-episode", "20"], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr
    assert "random unmasked actions:" in out.stdout and "forbidden" in out.stdout and "256" in out.stdout
