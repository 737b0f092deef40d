"""Flattened turn-taking view: one Gymnasium agent makes both decisions (``HeteroClusterFlat-v1``).

======================  =====================================================================
Import                  ``cluster_env.wrappers.HeteroClusterFlatEnv(scenario, split, **overrides)``
Registered id           ``cluster_env/HeteroClusterFlat-v1``
                        (``gymnasium.make(id, scenario=DEFAULT_SCENARIO, split="train", **overrides)``;
                        the default scenario is the benchmark's, ``philly-v1``)
Observation space       ``Box(-1, inf, (F,), float32)``, ``F = (K+R)*14 + M*11 + 10 + 9 + A``
                        (layout: :mod:`cluster_env.envs.flat_layout`; ``env.layout.slice(name)``)
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
automatically. The mask is the acting agent's mask padded with zeros up to ``A``.

**Safe defaults** (all the views): an index the mask forbids, padded ones included, is replaced
by the acting agent's lowest allowed action (``invalid_action="fallback"``, the views' default:
FIFO's choice in ORDER, first-fit's in PLACE), costs ``invalid_penalty`` (default 0.1) reward and
sets ``info["invalid_action"]`` and ``info["played_action"]``; the default ``max_steps`` is 1000
steps per job of the episode. So both checkers pass as registered and a plain PPO, which reads no
mask, trains and never stalls; scored by the harness (``FlatViewPolicy``, ``baselines.save_agent``)
it plays the same rule, ``invalid_action="fallback"`` of the parallel env. ``invalid_action="noop"`` leaves the state unchanged instead (the
step still counts towards ``max_steps``), ``"raise"`` raises
:class:`cluster_env.errors.InvalidActionError`. With ``env=`` an existing parallel env
keeps its own settings.

**Info**: the env's ``phase``, ``time``, ``job_ids``, ``placing_job`` (and ``metrics`` on the final
step), plus ``acting_agent``.

**Seeding.** ``reset(seed=...)`` seeds the wrapped env; the view has no randomness of its own
(``env.np_random`` *is* the wrapped env's generator). Same seed and actions, same trajectory.

**Arguments.** ``scenario`` (a name or a :class:`~cluster_env.scenarios.base.Scenario`),
``split`` and every override of :func:`cluster_env.parallel_env` (e.g. ``jobs_per_episode``,
``preemption``, ``clairvoyant``, ``render_mode``); or ``env=`` an existing
:class:`~cluster_env.envs.cluster_parallel.ClusterParallelEnv`.

**Version history.** v1: the registered id's default scenario is ``DEFAULT_SCENARIO``
(``philly-v1``), split ``train``; nothing else changed. v0: first release; the ``-v0`` id stays
registered with its default scenario ``philly-v0`` (Gymnasium warns that v1 exists).
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
from gymnasium import spaces

from cluster_env.scenarios.registry import DEFAULT_SCENARIO
from cluster_env.envs.cluster_parallel import AGENTS, ClusterParallelEnv
from cluster_env.errors import InvalidActionError
from cluster_env.wrappers._base import DEFAULT_INVALID_PENALTY, ClusterView, as_action
from cluster_env.envs.flat_layout import FlatLayout


class HeteroClusterFlatEnv(ClusterView):
    """One policy, both decisions; see the module docstring (the view's card)."""

    def __init__(self, scenario: Any = DEFAULT_SCENARIO, split: str = "train", *,
                 env: Optional[ClusterParallelEnv] = None, invalid_penalty: float = DEFAULT_INVALID_PENALTY,
                 **overrides: Any) -> None:
        super().__init__(scenario, split, env=env, invalid_penalty=invalid_penalty, **overrides)
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
        a, replaced = self._fallback(as_action(action, self.n_actions), self._mask)
        agent = self.acting_agent
        other = "placer" if agent == "orderer" else "orderer"
        if a >= self.env.action_space(agent).n:
            if self.env.sched.invalid_action == "raise":
                raise InvalidActionError(
                    f"action {a} is a padding index: the {agent} (acting in this phase) has only "
                    f"{self.env.action_space(agent).n} actions (allowed now: {np.flatnonzero(self._mask).tolist()[:20]}); "
                    "choose only actions env.action_masks() allows (sb3-contrib's MaskablePPO does), "
                    "or build the view with invalid_action='fallback' (the default) or 'noop'")
            # Ignored like any forbidden action: no change, but the step counts towards max_steps.
            obs, rewards, terms, truncs, infos = self.env.ignore_step(agent)
        else:
            obs, rewards, terms, truncs, infos = self.env.step({agent: a, other: self._noop[other]})
        info = self._info(infos, agent)
        if replaced:
            info["invalid_action"], info["played_action"] = True, a
        reward = float(rewards[agent]) - (self.invalid_penalty if info.get("invalid_action") else 0.0)
        return self._view(obs), reward, bool(terms[agent]), bool(truncs[agent]), info

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
