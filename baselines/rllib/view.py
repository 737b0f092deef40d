"""The parallel env as RLlib's policies see it: one flat ``Box`` per agent, its own mask at the end.

:class:`MaskedFlatParallelEnv` is a PettingZoo ``ParallelEnv`` (numpy only) around
``cluster_env.parallel_env``; RLlib's ``ParallelPettingZooEnv`` wraps it in turn. Each agent keeps
its own action space (``Discrete(K + R + 1)`` for the orderer, ``Discrete(M + 1)`` for the placer),
so the two are two policies of different sizes, and its observation is

``squash(jobs, machines, global, placing) ++ action_mask``

in the order of :mod:`cluster_env.envs.flat_layout`, with ``squash(x) = sign(x) * log1p(|x|)``
(features span several orders of magnitude; a default MLP learns nothing from raw seconds) and the
int8 mask as 0/1 floats. The masking RLModule reads the last ``n`` entries as the mask and never
gives a forbidden action any probability. Rewards, ends and infos are the parallel env's.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

import cluster_env
from cluster_env.scenarios.registry import DEFAULT_SCENARIO
from cluster_env.envs.flat_layout import FlatLayout


def squash(x: np.ndarray) -> np.ndarray:
    """``sign(x) * log1p(|x|)``: keeps -1 ("hidden") distinct and compresses seconds and counts."""
    return np.sign(x) * np.log1p(np.abs(x))


class AgentViews:
    """Turns the parallel env's per-agent dicts into the flat vectors above (shared by the training
    env and the scoring policy, so both see exactly the same numbers).

    Args:
        feature_spaces: each agent's ``Dict`` observation space (only the feature shapes are read).
        n_actions: each agent's number of actions.
    """

    def __init__(self, feature_spaces: dict[str, spaces.Dict], n_actions: dict[str, int]) -> None:
        self.agents = list(feature_spaces)
        self.layouts = {a: FlatLayout(feature_spaces[a], int(n_actions[a])) for a in self.agents}
        self.spaces = {}
        for a, layout in self.layouts.items():
            n = layout.shapes["action_mask"][0]
            low = np.full(layout.size, -1.0, dtype=np.float32)      # squash(-1) > -1: bound kept
            high = np.full(layout.size, np.inf, dtype=np.float32)
            low[-n:], high[-n:] = 0.0, 1.0
            self.spaces[a] = spaces.Box(low, high, (layout.size,), np.float32)

    @classmethod
    def of_env(cls, env: Any) -> "AgentViews":
        """The views of a parallel env's agents."""
        return cls({a: env.observation_space(a) for a in env.possible_agents},
                   {a: env.action_space(a).n for a in env.possible_agents})

    @classmethod
    def of_observations(cls, observations: dict) -> "AgentViews":
        """The views that fit one step's observations (what a policy sees before any space)."""
        feature = {a: spaces.Dict({k: spaces.Box(-1.0, np.inf, np.shape(v), np.float32)
                                   for k, v in o.items() if k != "action_mask"})
                   for a, o in observations.items()}
        return cls(feature, {a: len(o["action_mask"]) for a, o in observations.items()})

    def sizes(self) -> dict[str, int]:
        """Flat observation size per agent."""
        return {a: layout.size for a, layout in self.layouts.items()}

    def view(self, agent: str, obs: dict) -> np.ndarray:
        """One agent's flat vector (float32)."""
        layout = self.layouts[agent]
        vec = layout.flatten(obs)
        end = layout.slice("placing").stop
        vec[:end] = squash(vec[:end])
        return vec

    def views(self, observations: dict) -> dict[str, np.ndarray]:
        """Every agent's flat vector."""
        return {a: self.view(a, o) for a, o in observations.items()}


class MaskedFlatParallelEnv(ParallelEnv):
    """See the module docstring. ``scenario``, ``split`` and ``overrides`` go to
    ``cluster_env.parallel_env``."""

    def __init__(self, scenario: Any = DEFAULT_SCENARIO, split: str = "train", **overrides: Any) -> None:
        self.env = cluster_env.parallel_env(scenario, split=split, **overrides)
        self.metadata = {**self.env.metadata, "name": "hetero_cluster_rllib_v0"}
        self.render_mode = self.env.render_mode
        self.possible_agents = list(self.env.possible_agents)
        self.views = AgentViews.of_env(self.env)
        self.observation_spaces = dict(self.views.spaces)
        self.action_spaces = {a: self.env.action_space(a) for a in self.possible_agents}

    @property
    def agents(self) -> list[str]:  # type: ignore[override]
        return self.env.agents

    def observation_space(self, agent: str) -> spaces.Box:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Discrete:
        return self.action_spaces[agent]

    def reset(self, seed: Optional[int] = None, options: Optional[dict] = None):
        obs, infos = self.env.reset(seed=seed, options=options)
        return self.views.views(obs), infos

    def step(self, actions: dict):
        # RLlib hands numpy integers; the parallel env takes any integer.
        obs, rewards, terms, truncs, infos = self.env.step({a: int(x) for a, x in actions.items()})
        return self.views.views(obs), rewards, terms, truncs, infos

    def metrics(self) -> dict[str, float]:
        """The wrapped env's metrics."""
        return self.env.metrics()

    def render(self):
        return self.env.render()

    def close(self) -> None:
        self.env.close()
