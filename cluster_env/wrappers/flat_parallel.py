"""The parallel env with flat observations and equal spaces for both agents (SuperSuit, CleanRL).

PettingZoo tools that stack agents into one vector, such as SuperSuit's
``pettingzoo_env_to_vec_env_v1`` / ``concat_vec_envs_v1``, need every agent to have the same
observation and action space. :class:`FlatParallelEnv` is the
:class:`~cluster_env.envs.cluster_parallel.ClusterParallelEnv` seen that way:

======================  =====================================================================
Import                  ``cluster_env.wrappers.flat_parallel_env(scenario, split, **overrides)``
Agents                  ``["orderer", "placer"]``, as the parallel env
Observation spaces      one ``Box(-1, inf, (F,), float32)`` object for both agents: the flat layout
                        of :mod:`cluster_env.envs.flat_layout` with the agent's own mask padded to
                        ``A`` and a one-hot ``agent`` segment (so one shared policy knows who acts)
Action spaces           one ``Discrete(A)``, ``A = max(K + R + 1, M + 1)``, for both agents
Action masks            the ``action_mask`` segment of each observation; ``action_masks()`` gives
                        ``{agent: bool (A,)}``. The agent whose phase it is not may only send its
                        no-op (its mask allows nothing else), as in the parallel env
Reward, episode end     the parallel env's (shared reward)
======================  =====================================================================

Forbidden actions: the single-agent views' defaults, one rule for every wrapper an agent trains
on (an agent that reads no mask, such as plain PPO through :func:`supersuit_vec_env`, and
PettingZoo's ``parallel_seed_test``, which samples actions without masks, must not crash it):
``invalid_action="fallback"`` (the acting agent's lowest allowed action is played and flagged in
``infos[agent]["invalid_action"]``), ``invalid_penalty`` (0.1) off the reward of each agent whose
action was forbidden, and ``max_steps`` at 1000 steps per job of the episode. A padded index is a
forbidden action like any other. ``invalid_action="noop"`` ignores it instead (it counts towards
``max_steps``), ``"raise"`` raises, as the parallel env itself does by default (docs/design.md section 3: an error
for agents that mask). With ``env=`` an existing parallel env's own rule is kept.

For Stable-Baselines3 through SuperSuit, use :func:`cluster_env.wrappers.supersuit_vec_env`
(which adds what SuperSuit's SB3 wrapper lacks: ``seed()`` and ``action_masks`` for
sb3-contrib's ``MaskablePPO``).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from cluster_env.scenarios.registry import DEFAULT_SCENARIO
from cluster_env.envs.cluster_parallel import PLACE, ClusterParallelEnv
from cluster_env.errors import InvalidActionError
from cluster_env.wrappers._base import DEFAULT_INVALID_PENALTY, VIEW_INVALID_ACTIONS, as_action, check_invalid_penalty
from cluster_env.envs.flat_layout import FlatLayout


class FlatParallelEnv(ParallelEnv):
    """See the module docstring: the parallel env with one flat Box space for both agents."""

    def __init__(self, scenario: Any = DEFAULT_SCENARIO, split: str = "train", *,
                 env: Optional[ClusterParallelEnv] = None, invalid_penalty: float = DEFAULT_INVALID_PENALTY,
                 **overrides: Any) -> None:
        if env is None:
            overrides.setdefault("invalid_action", VIEW_INVALID_ACTIONS[0])      # the views' default
            env = ClusterParallelEnv(scenario=scenario, split=split, **overrides)
            if env.sched.max_steps is None and "max_steps" not in overrides:
                env.sched = replace(env.sched, max_steps=env.default_max_steps())
        elif overrides:
            raise TypeError(f"pass either env= or overrides, not both (got {sorted(overrides)})")
        self.invalid_penalty = check_invalid_penalty(invalid_penalty)
        self.env = env
        self.metadata = {**env.metadata, "name": "hetero_cluster_flat_v0"}
        self.render_mode = env.render_mode
        self.possible_agents = list(env.possible_agents)
        self._n = {a: env.action_space(a).n for a in self.possible_agents}
        self.n_actions = max(self._n.values())
        self.layout = FlatLayout(env.observation_space(self.possible_agents[0]), self.n_actions,
                                 num_agents=len(self.possible_agents))
        space, act = self.layout.space, spaces.Discrete(self.n_actions)
        self.observation_spaces = {a: space for a in self.possible_agents}
        self.action_spaces = {a: act for a in self.possible_agents}
        self._masks = {a: np.zeros(self.n_actions, dtype=bool) for a in self.possible_agents}

    @property
    def agents(self) -> list[str]:  # type: ignore[override]
        return self.env.agents

    def observation_space(self, agent: str):
        return self.observation_spaces[agent]

    def action_space(self, agent: str):
        return self.action_spaces[agent]

    def reset(self, seed: Optional[int] = None, options: Optional[dict] = None):
        obs, infos = self.env.reset(seed=seed, options=options)
        return self._view(obs), infos

    def step(self, actions: dict):
        env = self.env
        if not env.in_episode:
            return env.step(actions)            # the parallel env's own error
        if not isinstance(actions, dict):
            raise TypeError(f"actions must be a dict of agent -> action, got {type(actions).__name__}")
        acting = "placer" if env.phase == PLACE else "orderer"
        sent = {}
        for agent in self.possible_agents:
            if agent not in actions:
                raise KeyError(f"actions must have exactly the keys {self.possible_agents}; missing {agent!r}")
            a = as_action(actions[agent], self.n_actions)
            if a >= self._n[agent]:             # a padded index: forbidden for this agent
                if env.sched.invalid_action == "raise":
                    raise InvalidActionError(
                        f"{agent}'s action {a} is a padding index (it has {self._n[agent]} actions); choose only "
                        "actions its mask allows (sb3-contrib's MaskablePPO reads them) or pass invalid_action='noop'")
                if agent == acting:             # ignored ("noop") or the lowest allowed ("fallback")
                    obs, rewards, terms, truncs, infos = env.ignore_step(agent)
                    return self._view(obs), self._penalised(rewards, infos), terms, truncs, infos
                a = 0                           # any action but the no-op: forbidden, flagged
            sent[agent] = a
        obs, rewards, terms, truncs, infos = env.step(sent)
        return self._view(obs), self._penalised(rewards, infos), terms, truncs, infos

    def _penalised(self, rewards: dict, infos: dict) -> dict:
        """``rewards`` less ``invalid_penalty`` for each agent whose action was forbidden."""
        if self.invalid_penalty:
            for agent, info in infos.items():
                if info.get("invalid_action"):
                    rewards[agent] = float(rewards[agent] - self.invalid_penalty)
        return rewards

    def action_masks(self) -> dict[str, np.ndarray]:
        """Each agent's allowed actions now (bool, shape ``(A,)``)."""
        return {a: m.copy() for a, m in self._masks.items()}

    def state(self) -> np.ndarray:
        return self.env.state()

    @property
    def state_space(self):
        return self.env.state_space

    def metrics(self) -> dict[str, float]:
        """The wrapped env's metrics."""
        return self.env.metrics()

    def render(self):
        return self.env.render()

    def close(self) -> None:
        self.env.close()

    def _view(self, obs: dict) -> dict[str, np.ndarray]:
        out = {}
        for i, agent in enumerate(self.possible_agents):
            m = obs[agent]["action_mask"]
            mask = self._masks[agent]
            mask[:] = False
            mask[: len(m)] = m.astype(bool)
            out[agent] = self.layout.flatten(obs[agent], mask=mask, agent=i)
        return out


def flat_parallel_env(scenario: Any = DEFAULT_SCENARIO, split: str = "train", **overrides: Any) -> FlatParallelEnv:
    """The parallel env with flat, equal observation and action spaces (see :class:`FlatParallelEnv`)."""
    return FlatParallelEnv(scenario, split, **overrides)


__all__ = ["FlatParallelEnv", "flat_parallel_env"]
