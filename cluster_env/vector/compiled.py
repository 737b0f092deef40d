"""The compiled backend of the vector env: all N episodes stepped in one numba call per step.

:class:`CompiledBackend` is :class:`cluster_env.envs.compiled_episodes.CompiledEpisodes` (each
episode's simulator state in the compiled engine's arrays, every env stepped by one call of
:func:`cluster_env.core.engine.step.step_all`, the observation and ``action_mask`` written straight
into the stacked buffers) behind the vector backend's contract, with the vector env's action
checks and invalid-action mode in the same numba call. Episode resets run in Python (once per
episode): ``ClusterParallelEnv.start_episode``, the reset every path runs, then the engine's
arrays are built from the fresh simulator.

The episodes are bit for bit those of :class:`~cluster_env.vector.backend.PythonBackend` and of
separate parallel envs (tests/test_vector.py). It supports what :func:`unsupported_reason`
accepts: the numba kernel backend, no render mode, and envs of the library's
own classes; :func:`make_backend` (the vector env's default) picks it when it can and the Python
backend otherwise.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from cluster_env.envs import compiled_episodes
from cluster_env.envs.buffers import Buffers
from cluster_env.envs.cluster_parallel import ClusterParallelEnv
from cluster_env.envs.compiled_episodes import CompiledEpisodes
from cluster_env.vector.backend import PythonBackend, VectorBackend

#: Backend names ``ClusterVectorEnv(backend=...)`` accepts besides a factory.
BACKEND_NAMES = ("auto", "compiled", "python")


def unsupported_reason(envs: list[ClusterParallelEnv]) -> Optional[str]:
    """Why the compiled backend cannot run these envs exactly (None when it can)."""
    for env in envs:
        why = compiled_episodes.unsupported_reason(env)
        if why is not None:
            return f"{why}: Python backend (backend='python' or 'auto')"
        if type(env) is not ClusterParallelEnv:
            return f"env {type(env).__name__} is not the library's ClusterParallelEnv"
    return None


class CompiledBackend(CompiledEpisodes, VectorBackend):
    """N episodes in the compiled engine's arrays, one numba call per vector step (the vector
    env's action checks and its ``action_mask`` included)."""

    writes_action_mask = True

    def __init__(self, envs: list[ClusterParallelEnv], buffers: Buffers) -> None:
        why = unsupported_reason(envs)
        if why is not None:
            raise ValueError(f"backend='compiled': {why}")
        super().__init__(envs, buffers)
        self._no_flags = np.zeros(self.num_envs, dtype=np.bool_)
        self._modes = {"raise": self._c.RAISE, "noop": self._c.NOOP, "fallback": self._c.FALLBACK}
        #: Envs whose reward is not the default one: computed from the engine's totals after each step.
        self._own_rewards = [i for i, env in enumerate(envs) if env._jct_unit is None]

    # ------------------------------------------------------------------ contract
    def reset(self, index: int, seed: Optional[int], options: Optional[dict]) -> None:
        env = self.envs[index]
        self.load(index, env, env.start_episode(seed, options))

    def step(self, actions: np.ndarray, valid: np.ndarray) -> list[int]:
        return self._step(np.ascontiguousarray(actions, dtype=np.int64), np.ascontiguousarray(valid, dtype=np.bool_),
                          self._c.UNCHECKED, 0.0)

    def step_checked(self, actions: np.ndarray, other_bad: Optional[np.ndarray], mode: str,
                     penalty: float) -> Optional[list[int]]:
        """:meth:`VectorBackend.step_checked` in the compiled step (the checks, the invalid flags,
        the played actions, the penalty and ``action_mask`` in the same numba call)."""
        if not actions.flags.c_contiguous:
            actions = np.ascontiguousarray(actions)
        flags = self._no_flags if other_bad is None else np.ascontiguousarray(other_bad, dtype=np.bool_)
        return self._step(actions, flags, self._modes[mode], float(penalty))

    def _step(self, actions: np.ndarray, flags: np.ndarray, mode: int, penalty: float) -> Optional[list[int]]:
        count = CompiledEpisodes.step(self, actions, flags, mode, penalty)
        if count == self._c.REFUSED:
            return None
        b = self.buffers
        for i in self._own_rewards:
            reward = self.envs[i]._reward_from(self.totals(i), self._sims[i])
            if mode != self._c.UNCHECKED and penalty and b.invalid[i]:
                reward -= penalty
            b.rewards[i] = reward
        return self._ended[:count].tolist() if count else []

    def episode_info(self, index: int) -> dict[str, Any]:
        return {"metrics": self.metrics(index), "offered_load": self.envs[index].offered_load}


def make_backend(envs: list[ClusterParallelEnv], buffers: Buffers, backend: Any = "auto") -> VectorBackend:
    """The vector env's backend: ``"auto"`` (default) the compiled one when
    :func:`unsupported_reason` allows it, else the Python one; ``"compiled"`` (an error when it cannot
    run these envs), ``"python"``, or a factory ``(envs, buffers) -> VectorBackend``."""
    if callable(backend):
        return backend(envs, buffers)
    if backend not in BACKEND_NAMES:
        raise ValueError(f"backend must be one of {BACKEND_NAMES} or a factory (envs, buffers) -> VectorBackend, "
                         f"got {backend!r}")
    if backend == "python" or (backend == "auto" and unsupported_reason(envs) is not None):
        return PythonBackend(envs, buffers)
    return CompiledBackend(envs, buffers)


__all__ = ["BACKEND_NAMES", "CompiledBackend", "make_backend", "unsupported_reason"]
