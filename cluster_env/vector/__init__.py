"""Batched environments: N episodes of one scenario stepped together as stacked arrays.

=====================================  ==========================================================
``ClusterVectorEnv``, ``vector_env``   the Gymnasium-style vector env (card: :mod:`cluster_env.vector.env`)
``VectorBackend``, ``PythonBackend``   what steps the episodes (:mod:`cluster_env.vector.backend`)
``Buffers``                            the stacked arrays they share (:mod:`cluster_env.envs.buffers`)
``ClusterSB3VecEnv``, ``sb3_vec_env``  Stable-Baselines3 ``VecEnv`` adapter, ``action_masks()`` for
                                       sb3-contrib's MaskablePPO (:mod:`cluster_env.vector.sb3`;
                                       imports ``stable_baselines3`` on first use)
=====================================  ==========================================================

Example (a batched rollout with a vectorised policy, no per-agent dicts)::

    import numpy as np
    from cluster_env.vector import ClusterVectorEnv

    vec = ClusterVectorEnv(16, "philly-v0", "train", jobs_per_episode=200)
    obs, infos = vec.reset(seed=0)               # env i gets seed 0 + i
    for _ in range(1000):
        actions = np.argmax(obs["action_mask"], axis=1)     # lowest allowed: FIFO + first-fit
        obs, rewards, terms, truncs, infos = vec.step(actions)
        if "final_info" in infos:                # envs whose episode ended (and were reset)
            done = infos["_final_info"]
            print(infos["final_info"]["metrics"]["avg_jct"][done])
"""
from __future__ import annotations

from typing import Any

from cluster_env.vector.backend import PythonBackend, VectorBackend
from cluster_env.envs.buffers import Buffers
from cluster_env.vector.env import INVALID_ACTIONS, ClusterVectorEnv, vector_env


def __getattr__(name: str) -> Any:
    # The SB3 adapter imports stable_baselines3 (and torch): only on demand.
    if name in ("ClusterSB3VecEnv", "sb3_vec_env"):
        from cluster_env.extras import require_extra

        require_extra("rl", f"cluster_env.vector.{name}", ("stable_baselines3",))
        from cluster_env.vector import sb3

        return getattr(sb3, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Buffers", "ClusterVectorEnv", "INVALID_ACTIONS", "PythonBackend", "VectorBackend", "vector_env"]
