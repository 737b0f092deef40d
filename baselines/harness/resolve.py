"""A policy from what a user names: a baseline, ``ORDERER+PLACER``, ``package.module:attribute``,
a registered resolver's name or an installed plugin's (the one place names become policies).

Only what a user types on the command line or passes in code comes here: it may import their
module. Files that are data (certificates, teacher caches) name registered baselines only and
build them through :func:`baselines.optimality.certificate.rule_policy`, never through this.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Optional, Union

PolicySpec = Union[str, Any]

# Extra name resolvers registered by other packages (e.g. the dual agent's "dual" policy).
_RESOLVERS: list[Callable[[str, Optional[str]], Optional[Any]]] = []


def register_policy_resolver(resolver: Callable[[str, Optional[str]], Optional[Any]]) -> None:
    """Let ``resolve_policy`` build more names: ``resolver(name, scenario)`` returns a policy or None.

    ``scenario`` is the scenario the policy will run on (None when unknown), so that a name like
    ``"dual"`` can load the checkpoint trained for it.
    """
    if resolver not in _RESOLVERS:
        _RESOLVERS.append(resolver)


def resolve_policy(spec: PolicySpec, scenario: Optional[str] = None) -> Any:
    """A policy object from a name or an object.

    Names: a baseline or ``ORDERER+PLACER``, ``package.module:attribute`` (imported from the
    current folder too), a resolver's (:func:`register_policy_resolver`), or a policy that an
    installed package registers by entry point (``cluster_bench.policies`` /
    ``cluster_bench.resolvers``, e.g. the dual agent's ``dual`` and ``*.pt``). ``scenario`` is
    passed to resolvers and plugins (``"dual"`` loads the scenario's checkpoint).
    """
    if not isinstance(spec, str):
        return spec
    from baselines.registry import make_policy
    from cluster_env.wrappers.policies import plugin_policy

    if ":" in spec and not spec.endswith(".pt"):
        return _import_policy(spec)
    try:
        return make_policy(spec)
    except ValueError as unknown:
        for resolver in _RESOLVERS:
            policy = resolver(spec, scenario)
            if policy is not None:
                return policy
        policy = plugin_policy(spec, scenario)
        if policy is not None:
            return policy
        raise unknown


def plugin_policy_names() -> dict[str, str]:
    """Named policies registered by installed packages: name -> where it comes from."""
    from cluster_env.wrappers.policies import plugin_policies

    return {name: ep.value for name, ep in plugin_policies().items()}


def _import_policy(spec: str) -> Any:
    """``package.module:attribute``: a policy object, or a class/factory called without arguments.

    The current folder is searched too (``cluster-bench`` runs as a script, whose folder, not the
    user's, is first on ``sys.path``), so ``my_policy:MyPolicy`` finds ``./my_policy.py``.
    """
    import importlib
    import sys

    module_name, _, attr = spec.partition(":")
    cwd = os.getcwd()
    added = cwd not in sys.path and "" not in sys.path
    if added:
        sys.path.append(cwd)
    try:
        target = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot import policy {spec!r}: {exc}") from exc
    finally:
        if added:
            sys.path.remove(cwd)
    policy = target if callable(getattr(target, "act", None)) and not isinstance(target, type) else target()
    if not callable(getattr(policy, "act", None)) or not callable(getattr(policy, "reset", None)):
        raise TypeError(f"{spec!r} did not give a policy (an object with act(observations, infos) and reset(seed))")
    return policy
