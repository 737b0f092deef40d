"""Trained RLlib modules as a policy of the harness (``act(observations, infos)``, ``reset(seed)``).

Imports torch only when it acts; the modules come from :func:`baselines.rllib.from_rllib`.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from baselines.harness.episode import INTERFACE_KEYS
from baselines.rllib.view import AgentViews


class RLlibPolicy:
    """Greedy (argmax of the masked logits) play of one trained RLModule per agent.

    Args:
        modules: ``{"orderer": module, "placer": module}``, RLlib torch RLModules trained on
            :class:`~baselines.rllib.view.MaskedFlatParallelEnv` observations.
        name: the name the harness reports.
        env_overrides: the training env's scheduling settings (``preemption``, window sizes, ...)
            that the harness must apply when scoring; other keys are left to the run.
        scenario: the scenario it was trained on (named in the error when the shapes differ).
    """

    def __init__(self, modules: dict[str, Any], name: str = "rllib", env_overrides: Optional[dict] = None,
                 scenario: Optional[str] = None) -> None:
        self.modules = dict(modules)
        self.name = name
        self.env_overrides = {k: v for k, v in dict(env_overrides or {}).items() if k in INTERFACE_KEYS}
        self.scenario = scenario
        self._views: Optional[AgentViews] = None

    def reset(self, seed: Optional[int] = None) -> None:
        """Play is greedy and stateless; the views are rebuilt (and checked) at the first step, as
        the next episode may come from another environment."""
        self._views = None

    def _check(self, views: AgentViews) -> None:
        for agent, size in views.sizes().items():
            want = int(self.modules[agent].observation_space.shape[0])
            if want != size:
                raise ValueError(
                    f"policy {self.name!r}: the {agent} was trained on flat observations of size {want} "
                    f"(scenario {self.scenario!r}) but this env gives size {size}; score it on the scenario "
                    f"and window sizes it was trained on, or train it on this one")

    def act(self, observations: dict, infos: dict) -> dict[str, int]:
        first = self._views is None
        if first:                               # checked before torch is even imported
            views = AgentViews.of_observations(observations)
            self._check(views)
            self._views = views
        import torch
        from ray.rllib.core.columns import Columns

        if first:
            torch.set_num_threads(1)            # one small MLP per decision: threads only contend
        actions = {}
        for agent, obs in observations.items():
            allowed = np.flatnonzero(obs["action_mask"])
            if len(allowed) == 1:               # the waiting agent's no-op: no network needed
                actions[agent] = int(allowed[0])
                continue
            x = torch.from_numpy(self._views.view(agent, obs))[None]
            with torch.no_grad():
                logits = self.modules[agent].forward_inference({Columns.OBS: x})[Columns.ACTION_DIST_INPUTS]
            actions[agent] = int(torch.argmax(logits[0]))
        return actions
