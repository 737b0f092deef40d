"""Stable-Baselines3 vector env over copies of the PettingZoo parallel env (parameter sharing).

This module imports ``stable_baselines3`` (the optional ``rl`` extra); ``import cluster_env`` and
``import cluster_env.wrappers`` never import it (``cluster_env.wrappers.ParallelVecEnv`` loads it
on first use).

:class:`ParallelVecEnv` runs ``n`` copies of the parallel env, each as one slot per agent
(:class:`cluster_env.wrappers.parallel.AgentSlots`): ``num_envs = n * 2``, slot ``2 i`` is copy
``i``'s orderer and slot ``2 i + 1`` its placer. One SB3 policy acts for every slot: observations
are the flat layout with the slot's own mask and a one-hot ``agent`` segment; actions
``Discrete(max(K + R + 1, M + 1))``; the shared reward goes to both slots of a copy. It is a real
:class:`~stable_baselines3.common.vec_env.VecEnv`: ``seed(s)`` (copy ``i`` gets ``s + i`` at the
next reset), ``set_options``, ``get_attr``/``set_attr``/``env_method`` (forwarded to the copy's
parallel env), ``has_attr``, and ``env_method("action_masks")`` (one bool mask per slot, from a
cache filled by every step, no extra round trip) so sb3-contrib's ``MaskablePPO`` trains on it.
With ``subprocess=True`` each copy runs in its own process (pipes, like ``SubprocVecEnv``).
"""
from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable, Sequence
from typing import Any, Optional

import numpy as np
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvStepReturn

from cluster_env.envs.cluster_parallel import ClusterParallelEnv
from cluster_env.wrappers.parallel import AgentSlots, PickledFactory, handle_command, slots_worker


class _Local:
    def __init__(self, env_fn: Callable[[], ClusterParallelEnv]) -> None:
        self.slots = AgentSlots(env_fn())
        self._pending: Any = None

    def send(self, cmd: str, data: Any = None) -> None:
        try:
            self._pending = (True, handle_command(self.slots, cmd, data))
        except Exception as exc:
            self._pending = (False, exc)

    def recv(self) -> Any:
        ok, value = self._pending
        self._pending = None
        if not ok:
            raise value
        return value


class _Remote:
    def __init__(self, env_fn: Callable[[], ClusterParallelEnv], ctx) -> None:
        self.remote, work_remote = ctx.Pipe()
        self.process = ctx.Process(target=slots_worker, args=(work_remote, self.remote, PickledFactory(env_fn)),
                                   daemon=True)
        self.process.start()
        work_remote.close()

    def send(self, cmd: str, data: Any = None) -> None:
        self.remote.send((cmd, data))

    def recv(self) -> Any:
        ok, value = self.remote.recv()
        if not ok:
            raise value
        return value


class ParallelVecEnv(VecEnv):
    """SB3 vector env of ``len(env_fns)`` parallel envs, one slot per (copy, agent); see the module docstring."""

    def __init__(self, env_fns: Sequence[Callable[[], ClusterParallelEnv]], subprocess: bool = False,
                 start_method: Optional[str] = None) -> None:
        if not env_fns:
            raise ValueError("need at least one env factory")
        if subprocess:
            if start_method is None:
                start_method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
            ctx = mp.get_context(start_method)
            self._workers: list[Any] = [_Remote(fn, ctx) for fn in env_fns]
        else:
            self._workers = [_Local(fn) for fn in env_fns]
        self.subprocess = subprocess
        self.closed = False
        obs_space, act_space, per = self._call(0, "spaces")
        self.slots_per_env = per
        self.num_copies = len(env_fns)
        self._masks = np.zeros((self.num_copies * per, act_space.n), dtype=bool)
        self._actions: Optional[np.ndarray] = None
        super().__init__(self.num_copies * per, obs_space, act_space)

    # ------------------------------------------------------------------ VecEnv API
    def seed(self, seed: Optional[int] = None) -> Sequence[Optional[int]]:
        """Copy ``i`` is reset with ``seed + i`` at the next ``reset()`` (both its slots report it)."""
        if seed is None:
            seed = int(np.random.randint(0, np.iinfo(np.uint32).max, dtype=np.uint32))
        self._seeds = [seed + i // self.slots_per_env for i in range(self.num_envs)]
        return self._seeds

    def reset(self) -> np.ndarray:
        per = self.slots_per_env
        for i, w in enumerate(self._workers):
            w.send("reset", (self._seeds[i * per], self._options[i * per] or None))
        obs = []
        for i, w in enumerate(self._workers):
            o, infos, masks = w.recv()
            obs.append(o)
            self._masks[i * per:(i + 1) * per] = masks
            self.reset_infos[i * per:(i + 1) * per] = infos
        self._reset_seeds()
        self._reset_options()
        return np.concatenate(obs)

    def step_async(self, actions: np.ndarray) -> None:
        actions = np.asarray(actions).reshape(self.num_copies, self.slots_per_env)
        for w, a in zip(self._workers, actions):
            w.send("step", a)

    def step_wait(self) -> VecEnvStepReturn:
        per = self.slots_per_env
        obs, rews, dones, infos = [], [], [], []
        for i, w in enumerate(self._workers):
            o, r, d, inf, masks = w.recv()
            obs.append(o)
            rews.append(r)
            dones.append(d)
            infos.extend(inf)
            self._masks[i * per:(i + 1) * per] = masks
        return np.concatenate(obs), np.concatenate(rews), np.concatenate(dones), infos

    def close(self) -> None:
        if self.closed:
            return
        for w in self._workers:
            w.send("close")
        for w in self._workers:
            try:
                w.recv()
            except (EOFError, BrokenPipeError):
                pass
            if isinstance(w, _Remote):
                w.process.join(timeout=5)
        self.closed = True

    def action_masks(self) -> np.ndarray:
        """The bool masks of every slot, shape ``(num_envs, A)``."""
        return self._masks.copy()

    def has_attr(self, attr_name: str) -> bool:
        if attr_name == "action_masks":
            return True
        return super().has_attr(attr_name)

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        idx = list(self._get_indices(indices))
        values = {}
        for c in sorted({i // self.slots_per_env for i in idx}):
            values[c] = self._call(c, "getattr", attr_name)
        return [values[i // self.slots_per_env] for i in idx]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        for c in sorted({i // self.slots_per_env for i in self._get_indices(indices)}):
            self._call(c, "setattr", (attr_name, value))

    def env_method(self, method_name: str, *method_args, indices: VecEnvIndices = None, **method_kwargs) -> list[Any]:
        idx = list(self._get_indices(indices))
        if method_name == "action_masks":
            return [self._masks[i].copy() for i in idx]
        values = {}
        for c in sorted({i // self.slots_per_env for i in idx}):
            values[c] = self._call(c, "call", (method_name, method_args, method_kwargs))
        return [values[i // self.slots_per_env] for i in idx]

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]

    def get_images(self) -> Sequence[Optional[np.ndarray]]:
        return [img for img in self.env_method("render")[:: self.slots_per_env]]

    # ------------------------------------------------------------------ internals
    def _call(self, copy: int, cmd: str, data: Any = None) -> Any:
        self._workers[copy].send(cmd, data)
        return self._workers[copy].recv()

    def __del__(self) -> None:  # pragma: no cover
        try:
            if not self.closed and self.subprocess:
                self.close()
        except Exception:
            pass


__all__ = ["ParallelVecEnv"]
