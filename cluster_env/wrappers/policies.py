"""Tiny built-in policies that act through the action masks alone, and the resolver of fixed sides.

A policy is anything with ``act(observations, infos) -> {agent: action}`` and ``reset(seed)``
(the project's policy protocol). The built-ins here exist so that the single-agent views work
without the ``baselines`` package:

===================================  ===============================================================
name                                 behaviour
===================================  ===============================================================
``"fifo"``, ``"first-fit"``,         every agent takes its lowest allowed action: in ORDER the oldest
``"fifo+first-fit"``                 pending job that fits (or ``advance``), in PLACE the
                                     lowest-numbered machine with a usable free GPU
``"random"``                         a uniformly random allowed action for every agent
===================================  ===============================================================

Any other name is resolved with ``baselines.make_policy(name)`` when ``baselines`` is installed.
"""
from __future__ import annotations

import importlib
import importlib.util
from typing import Any, Optional

import numpy as np


class FirstAllowedPolicy:
    """Lowest allowed action of every agent: FIFO ordering (oldest fitting job) + first-fit placement."""

    name = "fifo+first-fit"

    def reset(self, seed: Optional[int] = None) -> None:
        pass

    def act(self, observations: dict, infos: Optional[dict] = None) -> dict:
        return {a: int(np.argmax(o["action_mask"])) for a, o in observations.items()}


class RandomMaskedPolicy:
    """A uniformly random allowed action for every agent (seeded by ``reset(seed)``)."""

    name = "random"

    def __init__(self, seed: Optional[int] = None) -> None:
        self._rng = np.random.default_rng(seed)

    def reset(self, seed: Optional[int] = None) -> None:
        self._rng = np.random.default_rng(seed)

    def act(self, observations: dict, infos: Optional[dict] = None) -> dict:
        return {a: int(self._rng.choice(np.flatnonzero(o["action_mask"]))) for a, o in observations.items()}


BUILTIN_POLICIES = {
    "fifo": FirstAllowedPolicy,
    "first-fit": FirstAllowedPolicy,
    "fifo+first-fit": FirstAllowedPolicy,
    "random": RandomMaskedPolicy,
}


def resolve_policy(spec: Any) -> Any:
    """A policy object from ``spec``: a built-in name, a ``baselines`` name, or a policy object."""
    if isinstance(spec, str):
        if spec in BUILTIN_POLICIES:
            return BUILTIN_POLICIES[spec]()
        if importlib.util.find_spec("baselines") is None:
            raise ValueError(f"unknown policy {spec!r}: the built-ins are {sorted(BUILTIN_POLICIES)}; "
                             "other names need the 'baselines' package, which is not installed")
        baselines = importlib.import_module("baselines")
        return baselines.make_policy(spec)
    if callable(getattr(spec, "act", None)):
        return spec
    raise TypeError(f"a fixed policy must be a name or an object with act(observations, infos) and reset(seed), "
                    f"got {spec!r}")


__all__ = ["BUILTIN_POLICIES", "FirstAllowedPolicy", "RandomMaskedPolicy", "resolve_policy"]
