"""The SB3 adapter of the vector env: the flat views' observations, rewards and infos under
DummyVecEnv, and sb3-contrib's MaskablePPO reading its masks."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from cluster_env.vector import ClusterSB3VecEnv, ClusterVectorEnv  # noqa: E402
from cluster_env.wrappers import make_vec_env  # noqa: E402

SMALL = {"scenario": "philly-v0", "split": "train", "jobs_per_episode": 10}


def test_adapter_matches_dummy_vec_env_of_flat_views():
    n = 3
    fast = make_vec_env("vector", n, seed=4, **SMALL)
    slow = make_vec_env("flat", n, seed=4, **SMALL)
    assert isinstance(fast, ClusterSB3VecEnv)
    assert fast.observation_space == slow.observation_space and fast.action_space == slow.action_space
    o_fast, o_slow = fast.reset(), slow.reset()
    np.testing.assert_array_equal(o_fast, o_slow)
    rng = np.random.default_rng(1)
    ends = invalid = 0
    for _ in range(300):
        masks = fast.action_masks()
        np.testing.assert_array_equal(masks, np.stack(slow.env_method("action_masks")))
        # Unmasked random actions half the time: the fallback path and its penalty.
        if rng.random() < 0.5:
            actions = rng.integers(0, fast.action_space.n, n)
        else:
            actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        o_fast, r_fast, d_fast, i_fast = fast.step(actions)
        o_slow, r_slow, d_slow, i_slow = slow.step(actions)
        np.testing.assert_array_equal(o_fast, o_slow)
        np.testing.assert_array_equal(r_fast, r_slow)
        np.testing.assert_array_equal(d_fast, d_slow)
        for a, b in zip(i_fast, i_slow):
            assert a.get("invalid_action", False) == b.get("invalid_action", False)
            invalid += a.get("invalid_action", False)
            assert a.get("played_action") == b.get("played_action")
            if "terminal_observation" in b:
                ends += 1
                np.testing.assert_array_equal(a["terminal_observation"], b["terminal_observation"])
                assert a["TimeLimit.truncated"] == b["TimeLimit.truncated"]
                assert a["episode"]["r"] == b["episode"]["r"]                  # Monitor rounds to 6 digits
                assert a["episode"]["l"] == b["episode"]["l"]
                assert a["metrics"] == b["metrics"]
    assert ends >= n and invalid > 0
    fast.close()
    slow.close()


def test_maskable_ppo_trains_on_the_adapter():
    pytest.importorskip("sb3_contrib")
    import torch
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.utils import is_masking_supported

    torch.set_num_threads(1)
    # Strict actions: a single unmasked action would raise, so this run proves MaskablePPO reads
    # the adapter's masks at every step.
    vec = make_vec_env("vector", 4, seed=0, invalid_action="raise", **SMALL)
    assert is_masking_supported(vec)
    model = MaskablePPO("MlpPolicy", vec, n_steps=64, batch_size=64, n_epochs=2, seed=0, device="cpu",
                        policy_kwargs={"net_arch": [32]})
    model.learn(512)
    assert model.num_timesteps >= 512
    assert len(model.ep_info_buffer) > 0            # episodes ended and were logged ("episode" infos)
    obs = vec.reset()
    masks = vec.action_masks()
    actions, _ = model.predict(obs, action_masks=masks, deterministic=True)
    assert masks[np.arange(vec.num_envs), actions].all()
    vec.close()


def test_adapter_arguments():
    vec = ClusterVectorEnv(2, "toy-v0", autoreset_mode="disabled")
    with pytest.raises(ValueError, match="same_step"):
        ClusterSB3VecEnv(vec)
    with pytest.raises(ValueError, match="subprocess"):
        make_vec_env("vector", 2, subprocess=True, **SMALL)
    sb3 = make_vec_env("vector", 2, **SMALL)
    assert sb3.vector.envs[0].sched.max_steps == 1000 * 10           # the views' default limit
    assert sb3.get_attr("split") == ["train", "train"]
    assert sb3.has_attr("action_masks")
