"""A flat-view predictor (e.g. a trained SB3 model) as a policy of the PettingZoo environment.

The harness (``baselines.evaluate``, ``cluster-bench``) scores objects with
``act(observations, infos)`` and ``reset(seed)`` on the parallel env. :class:`FlatViewPolicy`
turns a function of the flat observation and its mask, the interface of an agent trained on
``cluster_env/HeteroClusterFlat-v0``, into such a policy: it flattens the acting agent's
observation exactly as the flat view does, asks for an action and sends the other agent's no-op.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from cluster_env.wrappers.layout import FlatLayout

Predict = Callable[[np.ndarray, np.ndarray], int]


class FlatViewPolicy:
    """Adapter from ``predict(flat_obs, mask) -> action`` to ``act(observations, infos)``.

    Args:
        predict: the flat-view decision function (``mask`` is a bool array of the view's actions).
        layout: the flat view's :class:`FlatLayout` (``view.layout``).
        n_actions: the flat view's number of actions (``view.action_space.n``).
        name: the name the harness reports.
    """

    def __init__(self, predict: Predict, layout: FlatLayout, n_actions: int, name: str = "flat-policy") -> None:
        self.predict, self.layout, self.n_actions, self.name = predict, layout, int(n_actions), name
        self._mask = np.zeros(self.n_actions, dtype=bool)
        self._obs = np.zeros(layout.size, dtype=np.float32)

    @classmethod
    def from_sb3(cls, model: Any, view: Any, deterministic: bool = True, name: str = "ppo") -> "FlatViewPolicy":
        """Wrap a (Maskable)PPO-style model trained on ``view`` (a flat view or its ``gymnasium.make``)."""
        view = getattr(view, "unwrapped", view)

        def predict(obs: np.ndarray, mask: np.ndarray) -> int:
            try:
                action, _ = model.predict(obs, action_masks=mask, deterministic=deterministic)
            except TypeError:           # a model without action masking
                action, _ = model.predict(obs, deterministic=deterministic)
            return int(action)

        return cls(predict, view.layout, view.action_space.n, name=name)

    def reset(self, seed: Optional[int] = None) -> None:
        """Nothing to reset: the decision function is fixed."""

    def act(self, observations: dict, infos: dict) -> dict[str, int]:
        placing = observations["orderer"]["global"][0] > 0.5
        acting, other = ("placer", "orderer") if placing else ("orderer", "placer")
        own = observations[acting]
        m = own["action_mask"]
        self._mask[:] = False
        self._mask[: len(m)] = m.astype(bool)
        self.layout.flatten(own, mask=self._mask, out=self._obs)
        action = int(self.predict(self._obs.copy(), self._mask.copy()))
        return {acting: action, other: len(observations[other]["action_mask"]) - 1}
