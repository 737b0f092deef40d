"""The flat observation layout shared by every single-agent view and the SB3 vector env.

A flat observation is one float32 vector, the concatenation (in this order) of

==============  ==========================  ===============================================
segment         size                        content
==============  ==========================  ===============================================
``jobs``        ``(K + R) * 14``            the env's ``jobs`` array, row-major (row = candidate,
                                            columns ``observation.JOB_FEATURES``)
``machines``    ``M * 11``                  the env's ``machines`` array, row-major (columns
                                            ``observation.MACHINE_FEATURES``)
``global``      ``10``                      ``observation.GLOBAL_FEATURES`` (``global[0]`` = phase)
``placing``     ``9``                       ``observation.PLACING_FEATURES``
``action_mask`` ``A``                       the acting agent's mask as 0/1 floats, padded with zeros
``agent``       ``2`` (vector env only)     one-hot of the agent a slot belongs to (orderer, placer)
==============  ==========================  ===============================================

``FlatLayout.slice(name)`` gives each segment's position, ``FlatLayout.unflatten(vec)`` the env's
arrays back. Features have lower bound -1 (``-1`` means "hidden", e.g. durations when not
clairvoyant) and no upper bound; the mask and agent segments are in ``[0, 1]``.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
from gymnasium import spaces

FEATURE_KEYS = ("jobs", "machines", "global", "placing")


class FlatLayout:
    """Positions of the segments of a flat observation and the cached Box space they form."""

    def __init__(self, feature_space: spaces.Dict, mask_size: int, num_agents: int = 0) -> None:
        self.shapes: dict[str, tuple[int, ...]] = {k: tuple(feature_space[k].shape) for k in FEATURE_KEYS}
        self.shapes["action_mask"] = (int(mask_size),)
        if num_agents:
            self.shapes["agent"] = (int(num_agents),)
        self._slices: dict[str, slice] = {}
        start = 0
        for name, shape in self.shapes.items():
            n = int(np.prod(shape))
            self._slices[name] = slice(start, start + n)
            start += n
        self.size = start
        low = np.full(self.size, -1.0, dtype=np.float32)
        high = np.full(self.size, np.inf, dtype=np.float32)
        for name in ("action_mask", "agent"):
            if name in self._slices:
                low[self._slices[name]] = 0.0
                high[self._slices[name]] = 1.0
        self.space = spaces.Box(low, high, (self.size,), np.float32)
        self._features_end = self._slices["placing"].stop

    def slice(self, name: str) -> slice:
        """Where segment ``name`` lies in the flat vector."""
        if name not in self._slices:
            raise KeyError(f"no segment {name!r}; segments: {list(self._slices)}")
        return self._slices[name]

    def flatten(self, obs: dict, mask: Optional[np.ndarray] = None, agent: Optional[int] = None,
                out: Optional[np.ndarray] = None) -> np.ndarray:
        """The flat vector of one agent's observation dict (``mask`` defaults to its ``action_mask``)."""
        if out is None:
            out = np.zeros(self.size, dtype=np.float32)
        else:
            out[:] = 0.0
        for k in FEATURE_KEYS:
            out[self._slices[k]] = obs[k].ravel()
        m = obs["action_mask"] if mask is None else mask
        s = self._slices["action_mask"]
        out[s.start: s.start + len(m)] = m
        if agent is not None:
            out[self._slices["agent"].start + agent] = 1.0
        return out

    def unflatten(self, vec: np.ndarray) -> dict[str, np.ndarray]:
        """The segments of a flat vector (or of a batch of them, leading axes kept), reshaped."""
        vec = np.asarray(vec)
        lead = vec.shape[:-1]
        return {k: vec[..., s].reshape(*lead, *self.shapes[k]) for k, s in self._slices.items()}

    def describe(self) -> str:
        """One line per segment: name, shape, start and stop."""
        return "\n".join(f"{k:<12} {str(self.shapes[k]):<10} [{s.start}, {s.stop})" for k, s in self._slices.items())
