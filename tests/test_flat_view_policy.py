"""FlatViewPolicy: a flat-view decision function scored on the parallel env gives the flat view's episode."""
from __future__ import annotations

import numpy as np

import baselines
from cluster_env.wrappers import FlatViewPolicy, HeteroClusterFlatEnv


def last_allowed(obs: np.ndarray, mask: np.ndarray) -> int:
    # Deliberately not FIFO: the highest allowed index (advance when allowed, else the last machine).
    return int(np.flatnonzero(mask)[-1])


def test_adapter_reproduces_the_flat_view_episode():
    kw = {"jobs_per_episode": 60}
    view = HeteroClusterFlatEnv("philly-v0", "test", **kw)
    obs, info = view.reset(seed=4)
    seen = []
    done = False
    while not done:
        a = last_allowed(obs, view.action_masks())
        seen.append(obs.copy())
        obs, _, term, trunc, info = view.step(a)
        done = term or trunc
    flat_metrics = info["metrics"]

    calls = []

    def recording(obs, mask):
        calls.append(obs.copy())
        return last_allowed(obs, mask)

    policy = FlatViewPolicy(recording, view.layout, view.action_space.n, name="last")
    record = baselines.evaluate(policy, "philly-v0", seeds=[4], env_kwargs=kw, backend="serial")[0]
    assert record["policy"] == "last"
    assert record["avg_jct"] == flat_metrics["avg_jct"] and record["steps"] == len(seen)
    np.testing.assert_array_equal(np.array(calls), np.array(seen))   # the very same flat observations


def test_from_sb3_scores_a_maskable_ppo_model():
    import torch
    from sb3_contrib import MaskablePPO

    torch.set_num_threads(1)
    view = HeteroClusterFlatEnv("toy-v0", "train")
    model = MaskablePPO("MlpPolicy", view, n_steps=64, batch_size=32, seed=0, verbose=0)
    model.learn(64)
    agent = FlatViewPolicy.from_sb3(model, view)
    a = baselines.evaluate(agent, "toy-v0", seeds=[0], backend="serial")[0]
    b = baselines.evaluate(agent, "toy-v0", seeds=[0], backend="serial")[0]
    assert a["jobs_finished"] == 6 and a["avg_jct"] == b["avg_jct"]      # deterministic
