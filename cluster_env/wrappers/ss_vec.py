"""SuperSuit's vector envs of the parallel env, made to work with SB3 and sb3-contrib's MaskablePPO.

Imports ``stable_baselines3`` (the ``rl`` extra) and, in :func:`supersuit_vec_env`, ``supersuit``.
The chain is SuperSuit's own::

    par = cluster_env.wrappers.flat_parallel_env(scenario, split)   # equal Box/Discrete spaces
    vec = supersuit.pettingzoo_env_to_vec_env_v1(par)                # one entry per agent
    vec = supersuit.concat_vec_envs_v1(vec, n_envs, base_class="stable_baselines3")
    vec = MaskedVecEnv(vec, par.layout)                               # what SuperSuit's lacks

SuperSuit's SB3 wrapper has no working ``seed()`` (SB3 calls it when an algorithm gets a seed)
and no ``action_masks`` (what ``MaskablePPO`` asks every step); :class:`MaskedVecEnv` adds both:
the masks come from the ``action_mask`` segment of the last observations, the seed is passed to
the next reset (copy ``i`` gets ``seed + i``).
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
from stable_baselines3.common.vec_env import VecEnvWrapper

from cluster_env.scenarios.registry import DEFAULT_SCENARIO
from cluster_env.envs.flat_layout import FlatLayout


class MaskedVecEnv(VecEnvWrapper):
    """Adds ``seed()`` and ``env_method("action_masks")`` to a SuperSuit SB3 vector env."""

    def __init__(self, venv: Any, layout: FlatLayout, par: Any = None) -> None:
        super().__init__(venv)
        #: The observation layout and the flat parallel env it was built from (what
        #: ``FlatViewPolicy.from_sb3(model, vec)`` reads to score a model trained here).
        self.layout, self.par = layout, par
        self._mask_slice = layout.slice("action_mask")
        self._obs: Optional[np.ndarray] = None
        self._seed: Optional[int] = None

    def seed(self, seed: Optional[int] = None) -> list:
        self._seed = seed
        return [None if seed is None else seed + i for i in range(self.num_envs)]

    def reset(self) -> np.ndarray:
        if self._seed is not None:
            inner = self.venv.venv                 # SuperSuit's concatenated env: reset(seed) seeds copy i with seed + i
            obs, self.venv.reset_infos = inner.reset(seed=self._seed)
            self._seed = None
        else:
            obs = self.venv.reset()
        self._obs = obs
        return obs

    def step_wait(self):
        obs, rewards, dones, infos = self.venv.step_wait()
        self._obs = obs
        return obs, rewards, dones, infos

    def action_masks(self) -> np.ndarray:
        """One bool mask per vector entry (agent of a copy), from the last observations."""
        if self._obs is None:
            raise RuntimeError("call reset() first")
        return self._obs[:, self._mask_slice] > 0.5

    def has_attr(self, attr_name: str) -> bool:
        return attr_name == "action_masks" or self.venv.has_attr(attr_name)

    def env_method(self, method_name: str, *args: Any, indices=None, **kwargs: Any) -> list:
        if method_name == "action_masks":
            masks = self.action_masks()
            rows = range(self.num_envs) if indices is None else ([indices] if isinstance(indices, int) else indices)
            return [masks[i] for i in rows]
        return self.venv.env_method(method_name, *args, indices=indices, **kwargs)


def supersuit_vec_env(scenario: Any = DEFAULT_SCENARIO, split: str = "train", n_envs: int = 1, num_cpus: int = 0,
                      **overrides: Any) -> MaskedVecEnv:
    """An SB3 vector env of ``n_envs`` copies of the parallel env through SuperSuit (two entries per
    copy: orderer and placer, one shared policy), ready for ``MaskablePPO`` and, with the views'
    defaults for forbidden actions (:class:`~cluster_env.wrappers.flat_parallel.FlatParallelEnv`:
    ``invalid_action="fallback"``, ``invalid_penalty`` 0.1, ``max_steps`` 1000 per job), for plain
    PPO, which reads no mask. ``overrides`` go to :func:`flat_parallel_env`."""
    import supersuit as ss

    from cluster_env.wrappers.flat_parallel import flat_parallel_env

    par = flat_parallel_env(scenario, split, **overrides)
    vec = ss.pettingzoo_env_to_vec_env_v1(par)
    vec = ss.concat_vec_envs_v1(vec, n_envs, num_cpus=num_cpus, base_class="stable_baselines3")
    return MaskedVecEnv(vec, par.layout, par)


__all__ = ["MaskedVecEnv", "supersuit_vec_env"]
