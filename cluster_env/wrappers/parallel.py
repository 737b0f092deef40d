"""The parallel env as one *slot per agent*, the unit the SB3 vector env stacks (numpy only).

Multi-agent training with a single-agent library is usually done with *parameter sharing*: every
agent of every env copy is one entry ("slot") of a vector env and one policy acts for all of them.
:class:`AgentSlots` turns one :class:`~cluster_env.envs.cluster_parallel.ClusterParallelEnv` into
``len(possible_agents)`` such slots:

* observation of slot ``k``: the flat layout of :mod:`cluster_env.wrappers.layout` with agent
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
from cluster_env.wrappers.layout import FlatLayout


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
        return self._view(obs), [dict(infos[a]) for a in self.agents]

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
            infos = [{"invalid_action": True} if i == k else {} for i in range(self.num_slots)]
            return self._obs.copy(), np.zeros(self.num_slots, np.float32), np.zeros(self.num_slots, bool), infos
        act = {b: n - 1 for b, n in zip(self.agents, self._n)}
        act[agent] = a
        obs, rewards, terms, truncs, infos = self.env.step(act)
        reward = float(rewards[agent])
        term, trunc = bool(terms[agent]), bool(truncs[agent])
        self._ep_return += reward
        self._ep_len += 1
        out_infos = [dict(infos[b]) for b in self.agents]
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


__all__ = ["AgentSlots"]
