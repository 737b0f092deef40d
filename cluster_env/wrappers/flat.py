"""Flattened turn-taking view: one Gymnasium agent makes both decisions (``HeteroClusterFlat-v0``).

======================  =====================================================================
Import                  ``cluster_env.wrappers.HeteroClusterFlatEnv(scenario, split, **overrides)``
Registered id           ``cluster_env/HeteroClusterFlat-v0``
                        (``gymnasium.make(id, scenario="philly-v0", split="train", **overrides)``)
Observation space       ``Box(-1, inf, (F,), float32)``, ``F = (K+R)*14 + M*11 + 10 + 9 + A``
                        (layout: :mod:`cluster_env.wrappers.layout`; ``env.layout.slice(name)``)
Action space            ``Discrete(A)``, ``A = max(K + R + 1, M + 1)``
Action mask             ``env.action_masks()`` -> bool ``(A,)`` (what sb3-contrib's MaskablePPO reads);
                        also inside the observation (segment ``action_mask``)
Reward                  the env's shared reward (a Python float); the return is minus the average
                        JCT in hours with the default reward
Episode end             ``terminated`` / ``truncated`` exactly as the wrapped parallel env
======================  =====================================================================

**Turn taking.** Each step is the decision of the agent whose phase it is, ``info["acting_agent"]``
(also ``global[0]`` of the observation: 0 ORDER, 1 PLACE). In ORDER the action means what the
orderer's means (``i < K`` start the i-th pending candidate, ``K <= i < K + R`` preempt, ``K + R``
advance); in PLACE what the placer's means (machine ``m < M``). The other agent's no-op is sent
automatically. The mask is the acting agent's mask padded with zeros up to ``A``. An index the
mask forbids raises :class:`cluster_env.errors.InvalidActionError`; with ``invalid_action="noop"``
it leaves the state unchanged (reward 0, ``info["invalid_action"] = True``); a padded index (one
the acting agent does not have) is then not counted towards ``max_steps``.

**Info**: the env's ``phase``, ``time``, ``job_ids``, ``placing_job`` (and ``metrics`` on the final
step), plus ``acting_agent``.

**Seeding.** ``reset(seed=...)`` seeds the wrapped env; the view has no randomness of its own
(``env.np_random`` *is* the wrapped env's generator). Same seed and actions, same trajectory.

**Arguments.** ``scenario`` (a name or a :class:`~cluster_env.scenarios.base.Scenario`),
``split`` and every override of :func:`cluster_env.parallel_env` (e.g. ``jobs_per_episode``,
``preemption``, ``clairvoyant``, ``render_mode``); or ``env=`` an existing
:class:`~cluster_env.envs.cluster_parallel.ClusterParallelEnv`.

**Version history.** v0: first release (wraps ``cluster_env/HeteroCluster-v0``).
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
from gymnasium import spaces

from cluster_env.envs.cluster_parallel import AGENTS, ClusterParallelEnv
from cluster_env.errors import InvalidActionError
from cluster_env.wrappers._base import ClusterView, as_action
from cluster_env.wrappers.layout import FlatLayout


class HeteroClusterFlatEnv(ClusterView):
    """One policy, both decisions; see the module docstring (the view's card)."""

    def __init__(self, scenario: Any = "philly-v0", split: str = "train", *,
                 env: Optional[ClusterParallelEnv] = None, **overrides: Any) -> None:
        super().__init__(scenario, split, env=env, **overrides)
        self.n_actions = max(self.env.action_space(a).n for a in AGENTS)
        self.layout = FlatLayout(self.env.observation_space("orderer"), self.n_actions)
        self.observation_space = self.layout.space
        self.action_space = spaces.Discrete(self.n_actions)
        self._mask = np.zeros(self.n_actions, dtype=bool)
        self._obs = np.zeros(self.layout.size, dtype=np.float32)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        obs, infos = self._reset_env(seed, options)
        return self._view(obs), self._info(infos)

    def step(self, action: Any):
        self._check_running()
        a = as_action(action, self.n_actions)
        agent = self.acting_agent
        other = "placer" if agent == "orderer" else "orderer"
        if a >= self.env.action_space(agent).n:
            if self.env.sched.invalid_action == "raise":
                raise InvalidActionError(
                    f"action {a} is a padding index: the {agent} (acting in this phase) has only "
                    f"{self.env.action_space(agent).n} actions (allowed now: {np.flatnonzero(self._mask).tolist()[:20]})")
            info = {"phase": "place" if agent == "placer" else "order", "time": self.env.sim.now,
                    "job_ids": self.env._job_ids.copy(), "placing_job": self.env.sim.placing,
                    "acting_agent": agent, "invalid_action": True}
            return self._obs.copy(), 0.0, False, False, info
        obs, rewards, terms, truncs, infos = self.env.step({agent: a, other: self._noop[other]})
        return (self._view(obs), float(rewards[agent]), bool(terms[agent]), bool(truncs[agent]),
                self._info(infos, agent))

    def action_masks(self) -> np.ndarray:
        """Allowed actions now: the acting agent's mask padded with zeros (bool, shape ``(A,)``)."""
        return self._mask.copy()

    def _view(self, obs: dict) -> np.ndarray:
        own = obs[self.acting_agent]
        self._mask[:] = False
        m = own["action_mask"]
        self._mask[: len(m)] = m.astype(bool)
        self.layout.flatten(own, mask=self._mask, out=self._obs)
        return self._obs.copy()


__all__ = ["HeteroClusterFlatEnv"]
