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

Any other name is looked up among the policies that installed packages register by entry points
(``cluster_env`` itself imports no policy package): group ``cluster_bench.policies`` maps a name
to a factory ``make(scenario) -> policy`` (e.g. the dual agent's ``dual``), group
``cluster_bench.resolvers`` holds functions ``resolve(name, scenario) -> policy or None`` for
families of names (e.g. ``baselines``' ``ORDERER+PLACER`` compositions, ``*.pt`` checkpoints).
A third-party package adds its own names the same way, in its ``pyproject.toml``::

    [project.entry-points."cluster_bench.policies"]
    my-policy = "my_package.policies:make_my_policy"     # make_my_policy(scenario) -> policy
"""
from __future__ import annotations

from importlib import metadata
from typing import Any, Optional

import numpy as np

#: Entry point groups of the policy plugins (see the module docstring).
POLICY_GROUP = "cluster_bench.policies"
RESOLVER_GROUP = "cluster_bench.resolvers"


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


def _entry_points(group: str) -> list:
    return sorted(metadata.entry_points(group=group), key=lambda ep: ep.name)


def plugin_policies() -> dict[str, Any]:
    """The named policies registered by installed packages: name -> entry point (not loaded)."""
    return {ep.name: ep for ep in _entry_points(POLICY_GROUP)}


def plugin_policy(name: str, scenario: Optional[str] = None) -> Any:
    """A policy registered by an installed package under ``name`` (or by one of its resolvers of
    families of names), built for ``scenario``; ``None`` when no package knows the name."""
    for ep in _entry_points(POLICY_GROUP):
        if ep.name == name:
            factory = ep.load()
            return factory.make(scenario) if hasattr(factory, "make") else factory(scenario)
    for ep in _entry_points(RESOLVER_GROUP):
        policy = ep.load()(name, scenario)
        if policy is not None:
            return policy
    return None


def plugin_policy_source(name: str, scenario: Optional[str] = None) -> Optional[str]:
    """The file that the policy a package registers under ``name`` loads for ``scenario`` (its
    factory's ``source(scenario)``, e.g. ``dual``'s shipped agent), None when it says none: two
    names that load one file are one policy (a run refuses it twice)."""
    for ep in _entry_points(POLICY_GROUP):
        if ep.name == name:
            source = getattr(ep.load(), "source", None)
            found = source(scenario) if callable(source) and scenario is not None else None
            return None if found is None else str(found)
    return None


def resolve_policy(spec: Any, scenario: Optional[str] = None) -> Any:
    """A policy object from ``spec``: a built-in name, a name an installed package registers
    (entry points, e.g. ``baselines``' ``"sjf"``), or a policy object."""
    if isinstance(spec, str):
        if spec in BUILTIN_POLICIES:
            return BUILTIN_POLICIES[spec]()
        policy = plugin_policy(spec, scenario)
        if policy is None:
            raise ValueError(f"unknown policy {spec!r}: the built-ins are {sorted(BUILTIN_POLICIES)}; other names "
                             "come from installed policy packages (e.g. baselines: cluster-bench policies lists "
                             "them), or pass a policy object")
        return policy
    if callable(getattr(spec, "act", None)):
        return spec
    raise TypeError(f"a fixed policy must be a name or an object with act(observations, infos) and reset(seed), "
                    f"got {spec!r}")


__all__ = ["BUILTIN_POLICIES", "FirstAllowedPolicy", "POLICY_GROUP", "RESOLVER_GROUP", "RandomMaskedPolicy",
           "plugin_policies", "plugin_policy", "plugin_policy_source", "resolve_policy"]
