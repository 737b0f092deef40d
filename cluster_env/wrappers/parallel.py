"""The parallel env as one *slot per agent*, the unit the SB3 vector env stacks (numpy only).

Multi-agent training with a single-agent library is usually done with *parameter sharing*: every
agent of every env copy is one entry ("slot") of a vector env and one policy acts for all of them.
:class:`AgentSlots` turns one :class:`~cluster_env.envs.cluster_parallel.ClusterParallelEnv` into
``len(possible_agents)`` such slots:

* observation of slot ``k``: the flat layout of :mod:`cluster_env.envs.flat_layout` with agent
  ``k``'s own mask (padded to ``A = max(K + R + 1, M + 1)``) and the one-hot ``agent`` segment;
* action: ``Discrete(A)``; each step the acting agent's action is sent, and the other agent's
  no-op is sent whatever its slot asked (its mask allows only the no-op anyway);
* reward: the shared reward, to every slot; ``done`` for every slot when the episode ends, then
  the env is reset (seed ``None``: its generator continues) and the final observation is in
  ``infos[k]["terminal_observation"]``, with ``"TimeLimit.truncated"`` and an ``"episode"`` record
  (``r`` return, ``l`` steps, ``t`` seconds) as SB3's ``Monitor`` writes it.

:class:`cluster_env.wrappers.sb3_vec.ParallelVecEnv` stacks these slots for Stable-Baselines3.
"""
from __future__ import annotations

import time
from typing import Any, Optional

import numpy as np
from gymnasium import spaces

from cluster_env.envs.cluster_parallel import PLACE, ClusterParallelEnv
from cluster_env.errors import InvalidActionError
from cluster_env.envs.flat_layout import FlatLayout


def _copy_info(info: dict) -> dict:
    return {k: (v.copy() if isinstance(v, (np.ndarray, dict)) else v) for k, v in info.items()}


class AgentSlots:
    """One parallel env seen as one slot per agent, with automatic reset (see the module docstring)."""

    def __init__(self, env: ClusterParallelEnv) -> None:
        self.env = env
        self.agents = list(env.possible_agents)
        self.num_slots = len(self.agents)
        self._n = [env.action_space(a).n for a in self.agents]
        self.n_actions = max(self._n)
        self.layout = FlatLayout(env.observation_space(self.agents[0]), self.n_actions, num_agents=self.num_slots)
        self.observation_space = self.layout.space
        self.action_space = spaces.Discrete(self.n_actions)
        self.masks = np.zeros((self.num_slots, self.n_actions), dtype=bool)
        self._obs = np.zeros((self.num_slots, self.layout.size), dtype=np.float32)
        self._ep_return, self._ep_len, self._t0 = 0.0, 0, time.perf_counter()

    def acting(self) -> int:
        """Index of the agent whose phase it is."""
        return self.agents.index("placer" if self.env.phase == PLACE else "orderer")

    def reset(self, seed: Optional[int] = None, options: Optional[dict] = None):
        obs, infos = self.env.reset(seed=seed, options=options)
        self._ep_return, self._ep_len, self._t0 = 0.0, 0, time.perf_counter()
        return self._view(obs), [_copy_info(infos[a]) for a in self.agents]

    def step(self, actions: Any):
        actions = np.asarray(actions).reshape(-1)
        if len(actions) != self.num_slots:
            raise ValueError(f"expected {self.num_slots} actions (one per agent), got {len(actions)}")
        k = self.acting()
        a = int(actions[k])
        if not 0 <= a < self.n_actions:
            raise InvalidActionError(f"action {a} is outside Discrete({self.n_actions})")
        agent = self.agents[k]
        if a >= self._n[k]:
            if self.env.sched.invalid_action == "raise":
                raise InvalidActionError(f"action {a} is a padding index: the {agent} (acting in this phase) has "
                                         f"only {self._n[k]} actions")
            # Ignored like any forbidden action, and counted towards max_steps (no stall).
            obs, rewards, terms, truncs, infos = self.env.ignore_step(agent)
        else:
            act = {b: n - 1 for b, n in zip(self.agents, self._n)}
            act[agent] = a
            obs, rewards, terms, truncs, infos = self.env.step(act)
        reward = float(rewards[agent])
        term, trunc = bool(terms[agent]), bool(truncs[agent])
        self._ep_return += reward
        self._ep_len += 1
        out_infos = [_copy_info(infos[b]) for b in self.agents]
        flat = self._view(obs)
        done = term or trunc
        if done:
            episode = {"r": self._ep_return, "l": self._ep_len, "t": round(time.perf_counter() - self._t0, 6)}
            for i, info in enumerate(out_infos):
                info["terminal_observation"] = flat[i]
                info["TimeLimit.truncated"] = trunc and not term
                info["episode"] = dict(episode)
            flat, _ = self.reset()
        return (flat, np.full(self.num_slots, reward, np.float32), np.full(self.num_slots, done, bool), out_infos)

    def _view(self, obs: dict) -> np.ndarray:
        self.masks[:] = False
        for i, agent in enumerate(self.agents):
            m = obs[agent]["action_mask"]
            self.masks[i, : len(m)] = m.astype(bool)
            self.layout.flatten(obs[agent], mask=self.masks[i], agent=i, out=self._obs[i])
        return self._obs.copy()


# ---------------------------------------------------------------------- subprocess plumbing
# Used by cluster_env.wrappers.sb3_vec.ParallelVecEnv(subprocess=True); kept here, free of
# stable_baselines3 and torch, so that worker processes start fast.
class PickledFactory:
    """An env factory sent to a worker process with cloudpickle (lambdas and closures work)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def __getstate__(self):
        import cloudpickle

        return cloudpickle.dumps(self.fn)

    def __setstate__(self, state) -> None:
        import cloudpickle

        self.fn = cloudpickle.loads(state)


def handle_command(slots: AgentSlots, cmd: str, data: Any) -> Any:
    env = slots.env
    if cmd == "step":
        obs, rews, dones, infos = slots.step(data)
        return obs, rews, dones, infos, slots.masks.copy()
    if cmd == "reset":
        obs, infos = slots.reset(*data)
        return obs, infos, slots.masks.copy()
    if cmd == "getattr":
        return getattr(env, data)
    if cmd == "setattr":
        return setattr(env, data[0], data[1])
    if cmd == "call":
        name, args, kwargs = data
        return getattr(env, name)(*args, **kwargs)
    if cmd == "spaces":
        return slots.observation_space, slots.action_space, slots.num_slots
    if cmd == "close":
        return env.close()
    raise ValueError(f"unknown command {cmd!r}")


def slots_worker(remote, parent_remote, env_fn_wrapper) -> None:  # pragma: no cover - runs in a subprocess
    parent_remote.close()
    slots = AgentSlots(env_fn_wrapper.fn())
    try:
        while True:
            try:
                cmd, data = remote.recv()
            except EOFError:
                break
            try:
                result = (True, handle_command(slots, cmd, data))
            except Exception as exc:  # sent back and re-raised in the parent
                result = (False, exc)
            remote.send(result)
            if cmd == "close":
                break
    except KeyboardInterrupt:
        pass
    finally:
        remote.close()


__all__ = ["AgentSlots", "PickledFactory", "handle_command", "slots_worker"]
