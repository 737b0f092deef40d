"""Stable-Baselines3 ``VecEnv`` over :class:`~cluster_env.vector.ClusterVectorEnv` (single-agent view).

This module imports ``stable_baselines3`` (the optional ``rl`` extra); ``import cluster_env`` and
``import cluster_env.vector`` never do.

:class:`ClusterSB3VecEnv` is the batched counterpart of ``DummyVecEnv`` over N
:class:`~cluster_env.wrappers.HeteroClusterFlatEnv` views, with the same spaces, observations,
rewards and defaults, but stepping the N envs through the vector env's stacked buffers:

======================  =====================================================================
Observation space       the flat view's ``Box(-1, inf, (F,), float32)`` (layout:
                        :mod:`cluster_env.envs.flat_layout`), one row per env
Action space            ``Discrete(A)``, ``A = max(K + R + 1, M + 1)``: the acting agent's action
Action masks            ``action_masks()`` -> bool ``(N, A)``; ``env_method("action_masks")`` and
                        ``has_attr("action_masks")`` as sb3-contrib's ``MaskablePPO`` asks
Rewards                 float32 ``(N,)``, the shared reward (minus the invalid-action penalty)
Infos                   SB3's: ``terminal_observation`` and ``TimeLimit.truncated`` at episode ends,
                        ``episode`` (``r``, ``l``, ``t``: what SB3's ``Monitor`` writes, rounded alike, so SB3 logs
                        returns), ``metrics`` and ``offered_load`` of the episode that ended
Defaults                the views': ``invalid_action="fallback"`` (a forbidden action plays the
                        lowest allowed one at ``invalid_penalty`` 0.1), ``max_steps`` 1000 per job
Seeding                 ``seed(s)``: env ``i`` gets ``s + i`` at the next ``reset()`` (SB3's convention);
                        later episodes continue each env's generator
======================  =====================================================================

Same seeds and actions give the observations and rewards of ``DummyVecEnv`` over flat views
(tests/test_vector.py). ``cluster_env.wrappers.make_vec_env("vector", n_envs, ...)`` builds it.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Optional

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvStepReturn

from cluster_env.scenarios.registry import DEFAULT_SCENARIO
from cluster_env.vector.env import ClusterVectorEnv
from cluster_env.wrappers._base import DEFAULT_INVALID_PENALTY


class ClusterSB3VecEnv(VecEnv):
    """SB3 vector env of a :class:`ClusterVectorEnv`; see the module docstring."""

    def __init__(self, vector: ClusterVectorEnv) -> None:
        if not isinstance(vector, ClusterVectorEnv):
            raise TypeError(f"vector must be a ClusterVectorEnv, got {type(vector).__name__}")
        if vector.autoreset_mode.name != "SAME_STEP":
            raise ValueError("the SB3 adapter needs a vector env with autoreset_mode='same_step' "
                             "(SB3 resets in the step)")
        self.vector = vector
        self.layout = vector.layout
        super().__init__(vector.num_envs, self.layout.space, spaces.Discrete(vector.n_actions))
        self._actions: Optional[np.ndarray] = None
        self._returns = np.zeros(self.num_envs)
        self._lengths = np.zeros(self.num_envs, dtype=np.int64)
        self._t0 = time.time()

    # ------------------------------------------------------------------ VecEnv API
    def reset(self) -> np.ndarray:
        seeds = None if all(s is None for s in self._seeds) else list(self._seeds)
        options = self._options[0] or None
        if any(o != self._options[0] for o in self._options):
            raise ValueError("set_options must give every env the same options (one scenario, one split)")
        _, infos = self.vector.reset(seed=seeds, options=options)
        self._reset_seeds()
        self._reset_options()
        self._returns[:] = 0.0
        self._lengths[:] = 0
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return self.vector.flat_observations()

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions).reshape(self.num_envs)

    def step_wait(self) -> VecEnvStepReturn:
        if self._actions is None:
            raise RuntimeError("step_wait() without step_async()")
        _, rewards, terms, truncs, infos = self.vector.step(self._actions)
        self._actions = None
        obs = self.vector.flat_observations()
        dones = terms | truncs
        self._returns += rewards
        self._lengths += 1
        out = [{} for _ in range(self.num_envs)]
        if dones.any():
            final_obs, final = infos["final_obs"], infos["final_info"]
            metrics = final["metrics"]
            now = round(time.time() - self._t0, 6)
            for i in np.flatnonzero(dones).tolist():
                info = out[i]
                info["terminal_observation"] = self.layout.flatten(final_obs[i])
                info["TimeLimit.truncated"] = bool(truncs[i] and not terms[i])
                info["episode"] = {"r": round(float(self._returns[i]), 6), "l": int(self._lengths[i]), "t": now}
                info["metrics"] = {k: float(metrics[k][i]) for k in metrics if not k.startswith("_")}
                info["offered_load"] = float(final["offered_load"][i])
                self._returns[i], self._lengths[i] = 0.0, 0
        if self.vector.invalid_action == "fallback":
            invalid, played = infos["invalid_action"], infos["played_action"]
            for i in np.flatnonzero(invalid).tolist():
                out[i]["invalid_action"], out[i]["played_action"] = True, int(played[i])
        else:
            for i in np.flatnonzero(infos["invalid_action"]).tolist():
                out[i]["invalid_action"] = True
        return obs, rewards.astype(np.float32), dones.copy(), out

    def close(self) -> None:
        self.vector.close()

    def action_masks(self) -> np.ndarray:
        """(N, A) bool: the acting agent's allowed actions in each env."""
        return self.vector.action_masks()

    def has_attr(self, attr_name: str) -> bool:
        if attr_name == "action_masks":
            return True
        return all(hasattr(env, attr_name) for env in self.vector.envs)

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        envs = self.vector.envs
        return [getattr(envs[i], attr_name) for i in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        envs = self.vector.envs
        for i in self._get_indices(indices):
            setattr(envs[i], attr_name, value)

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None,
                   **method_kwargs: Any) -> list[Any]:
        idx = list(self._get_indices(indices))
        if method_name == "action_masks":
            masks = self.vector.action_masks()
            return [masks[i] for i in idx]
        envs = self.vector.envs
        return [getattr(envs[i], method_name)(*method_args, **method_kwargs) for i in idx]

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]

    def get_images(self) -> Sequence[Optional[np.ndarray]]:
        return [env.render() for env in self.vector.envs]


def sb3_vec_env(n_envs: int = 8, scenario: Any = DEFAULT_SCENARIO, split: str = "train", seed: Optional[int] = None, *,
                invalid_action: str = "fallback", invalid_penalty: float = DEFAULT_INVALID_PENALTY,
                **overrides: Any) -> ClusterSB3VecEnv:
    """An SB3 ``VecEnv`` of ``n_envs`` envs with the flat views' defaults (see the module docstring);
    ``overrides`` go to :func:`cluster_env.parallel_env`. ``seed`` seeds env ``i`` with ``seed + i``
    at the first reset."""
    vector = ClusterVectorEnv(n_envs, scenario, split, invalid_action=invalid_action,
                              invalid_penalty=invalid_penalty, **overrides)
    if "max_steps" not in overrides:            # the views' default: every episode ends
        for env in vector.envs:
            if env.sched.max_steps is None:
                env.sched = replace(env.sched, max_steps=env.default_max_steps())
    vec = ClusterSB3VecEnv(vector)
    if seed is not None:
        vec.seed(seed)
    return vec


__all__ = ["ClusterSB3VecEnv", "sb3_vec_env"]
