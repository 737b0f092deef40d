"""A policy from what a user names: a baseline, ``ORDERER+PLACER``, ``package.module:attribute``,
a registered resolver's name or an installed plugin's (the one place names become policies).

Only what a user types on the command line or passes in code comes here: it may import their
module. Files that are data (certificates, teacher caches) name registered baselines only and
build them through :func:`baselines.optimality.certificate.rule_policy`, never through this.
"""
from __future__ import annotations

import os
import uuid
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

if TYPE_CHECKING:
    from baselines.registry import PolicyName

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

    Each call builds a new object; a run resolves each of its policies once with
    :func:`resolve_once` instead.
    """
    if not isinstance(spec, str):
        return spec
    return _resolve(spec, scenario)[0]


def _resolve(spec: str, scenario: Optional[str]) -> tuple[Any, "Optional[PolicyName]"]:
    """The policy ``spec`` names and, for a baseline name, the name parsed (its only parse)."""
    from baselines.registry import make_policy_for, parse_policy_name

    if ":" in spec and not spec.endswith(".pt"):
        return _import_policy(spec), None
    try:
        parsed = parse_policy_name(spec)
        return make_policy_for(parsed, scenario), parsed
    except ValueError as unknown:
        policy = _from_plugins(spec, scenario)
        if policy is None:
            raise unknown
        return policy, None


def _from_plugins(spec: str, scenario: Optional[str]) -> Any:
    """The policy a registered resolver or an installed plugin makes of ``spec``, None when none knows it."""
    from cluster_env.wrappers.policies import plugin_policy

    for resolver in _RESOLVERS:
        policy = resolver(spec, scenario)
        if policy is not None:
            return policy
    return plugin_policy(spec, scenario)


#: How many policy objects a worker process keeps (a pool's workers end with their run; a Ray
#: cluster's may serve many runs).
WORKER_POLICIES = 64
_WORKER_BUILT: "OrderedDict[str, Any]" = OrderedDict()


class ResolvedPolicy:
    """A policy of a run, resolved once: what the run's checks, labels, workers and the compiled
    engine read instead of resolving its name again.

    Attributes:
        spec: what was asked for (a name, a path, ``package.module:attribute`` or an object).
        scenario: the scenario it was resolved for (resolvers and ``gittins`` read it).
        name: the policy's own name (its records' ``policy`` field before labelling).
        baseline: the parsed baseline name (:class:`baselines.registry.PolicyName`), None for any
            other policy.
        token: this resolution's key (a worker keeps the object it builds under it).

    It pickles without the object: a worker process builds it from ``spec`` at its first
    :meth:`policy` call and keeps it for the run's later episodes (:data:`WORKER_POLICIES`).
    """

    def __init__(self, spec: PolicySpec, scenario: Optional[str], policy: Any,
                 baseline: "Optional[PolicyName]" = None) -> None:
        self.spec, self.scenario, self.baseline = spec, scenario, baseline
        self.name = str(getattr(policy, "name", type(policy).__name__))
        # One resolution, one key: a worker's objects never outlive the run that resolved them.
        self.token = uuid.uuid4().hex
        self._policy = policy

    def policy(self) -> Any:
        """The policy object: the one built when resolving, or in a worker process the one it
        built from :attr:`spec` (once per worker: ``reset(seed)`` starts each episode afresh)."""
        if self._policy is None:
            self._policy = _WORKER_BUILT.get(self.token)
            if self._policy is None:
                self._policy = _rebuild(self)
                _WORKER_BUILT[self.token] = self._policy
                while len(_WORKER_BUILT) > WORKER_POLICIES:
                    _WORKER_BUILT.popitem(last=False)
        return self._policy

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        if isinstance(self.spec, str):        # rebuilt by name where it lands (it may not pickle)
            state["_policy"] = None
        return state

    def __repr__(self) -> str:
        return f"ResolvedPolicy({self.spec!r}, scenario={self.scenario!r}, name={self.name!r})"


def _rebuild(resolved: ResolvedPolicy) -> Any:
    """``resolved``'s policy made again from its spec, without parsing a baseline name again."""
    from baselines.registry import make_policy_for

    if not isinstance(resolved.spec, str):
        return resolved.spec
    if resolved.baseline is not None:
        return make_policy_for(resolved.baseline, resolved.scenario)
    return _resolve(resolved.spec, resolved.scenario)[0]


def resolve_once(spec: PolicySpec, scenario: Optional[str] = None) -> ResolvedPolicy:
    """``spec`` resolved (:func:`resolve_policy`'s names and errors) into a :class:`ResolvedPolicy`
    that a run passes along: its name is parsed once and its policy built once here."""
    if not isinstance(spec, str):
        return ResolvedPolicy(spec, scenario, spec)
    policy, parsed = _resolve(spec, scenario)
    return ResolvedPolicy(spec, scenario, policy, parsed)


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
