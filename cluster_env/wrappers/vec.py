"""Vectorised envs for Stable-Baselines3: :func:`make_vec_env`.

``stable_baselines3`` is imported inside the function only (optional ``rl`` extra): importing this
module, ``cluster_env`` or ``cluster_env.wrappers`` never loads it (nor torch).

==========================  ===================================================================
``view``                    vector env returned
==========================  ===================================================================
``"flat"``                  ``DummyVecEnv`` / ``SubprocVecEnv`` of ``HeteroClusterFlatEnv``
``"orderer"``, ``"placer"`` the same over the single-agent views (``fixed_policy=`` sets the
                            other side)
``"parallel"``              :class:`cluster_env.wrappers.sb3_vec.ParallelVecEnv`: the PettingZoo
                            parallel env itself, one slot per agent (``num_envs = 2 * n_envs``)
``"vector"``                :class:`cluster_env.vector.ClusterSB3VecEnv`: the flat view's spaces and
                            defaults, the ``n_envs`` envs stepped together through the batched
                            vector env (one process, no per-env Python views; faster than
                            ``"flat"``). No ``Monitor`` needed: it writes ``info["episode"]`` itself
a Gymnasium id              any registered id, e.g. ``"cluster_env/HeteroClusterFlat-v1"``
==========================  ===================================================================

Every gym view is wrapped in SB3's ``Monitor`` (``monitor=True``) so that SB3 logs episode
returns; ``ParallelVecEnv`` writes the same ``info["episode"]`` itself. ``seed`` seeds copy ``i``
with ``seed + i`` at the first reset (SB3's ``VecEnv.seed`` convention); later episodes continue
each copy's generator. ``MaskablePPO`` reads the masks through ``env_method("action_masks")``.
"""
from __future__ import annotations

import functools
from typing import Any, Optional

from cluster_env.scenarios.registry import DEFAULT_SCENARIO

VIEW_IDS = {
    "flat": "cluster_env/HeteroClusterFlat-v1",
    "orderer": "cluster_env/HeteroClusterOrderer-v1",
    "placer": "cluster_env/HeteroClusterPlacer-v1",
}


def _make_view(env_id: str, monitor: bool, kwargs: dict):
    import gymnasium

    import cluster_env  # noqa: F401  (registers the ids in a fresh subprocess)

    env = gymnasium.make(env_id, disable_env_checker=True, **kwargs)
    if monitor:
        from stable_baselines3.common.monitor import Monitor

        env = Monitor(env)
    return env


def _make_parallel(kwargs: dict):
    from cluster_env.envs.cluster_parallel import ClusterParallelEnv

    return ClusterParallelEnv(**kwargs)


def make_vec_env(view: str = "flat", n_envs: int = 1, scenario: Any = DEFAULT_SCENARIO, split: str = "train",
                 seed: Optional[int] = None, subprocess: bool = False, *, monitor: bool = True,
                 start_method: Optional[str] = None, **overrides: Any):
    """A Stable-Baselines3 vector env of ``n_envs`` copies of ``view`` (see the module docstring).

    ``overrides`` go to the view (``fixed_policy=`` for the single-agent views) and to
    :func:`cluster_env.parallel_env` (``jobs_per_episode``, ``preemption``, ...).
    """
    from cluster_env.extras import require_extra

    if n_envs < 1:
        raise ValueError(f"n_envs must be >= 1, got {n_envs}")
    require_extra("rl", "make_vec_env", ("stable_baselines3",))     # every view's vector env is SB3's
    kwargs = {"scenario": scenario, "split": split, **overrides}
    if view == "vector":
        if subprocess:
            raise ValueError("view='vector' steps its envs in this process: subprocess=True is not supported")
        from cluster_env.vector.sb3 import sb3_vec_env

        return sb3_vec_env(n_envs, seed=seed, **kwargs)
    if view == "parallel":
        from cluster_env.wrappers.sb3_vec import ParallelVecEnv

        vec = ParallelVecEnv([functools.partial(_make_parallel, kwargs) for _ in range(n_envs)],
                             subprocess=subprocess, start_method=start_method)
    else:
        env_id = VIEW_IDS.get(view, view)
        import gymnasium

        if env_id not in gymnasium.registry:
            raise ValueError(f"unknown view {view!r}: use one of {sorted(VIEW_IDS) + ['parallel', 'vector']} "
                             "or a registered Gymnasium id")
        from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

        fns = [functools.partial(_make_view, env_id, monitor, kwargs) for _ in range(n_envs)]
        vec = SubprocVecEnv(fns, start_method=start_method) if subprocess else DummyVecEnv(fns)
    if seed is not None:
        vec.seed(seed)
    return vec


__all__ = ["VIEW_IDS", "make_vec_env"]
