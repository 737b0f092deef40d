"""The row label of each policy of a run: unique within the run, decided before any episode runs.

A record's ``policy`` field is its policy's label, and results are grouped and paired by it, so
two different policies must never share one, and one policy must not be scored twice:

* the label is the policy's own name (``fifo``, ``dual-priority(last)``);
* policies loaded from different files whose names coincide (every training run writes
  ``last.priority.json``) get the shortest trailing part of their folder that tells them apart:
  ``trA/last.priority.json`` and ``tp8/last.priority.json`` are ``dual-priority(trA/last)`` and
  ``dual-priority(tp8/last)``;
* the same policy given twice (``fifo,fifo``, ``fifo,FIFO``, one file by two spellings, two
  spellings of one baseline such as ``fifo,fifo+first-fit``, a named agent and its file such as
  ``dual-priority`` and the shipped ``.priority.json``: :func:`policy_identity`) or two different
  policies with one name that no file tells apart are a :class:`DuplicatePolicyError`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence


class DuplicatePolicyError(ValueError):
    """The same policy twice in one run, or two policies that cannot be told apart by name."""


def _spec_text(spec: Any, name: str) -> str:
    return spec if isinstance(spec, str) else f"{type(spec).__name__} object {name!r}"


def spec_file(spec: Any) -> Optional[Path]:
    """The resolved file a string spec names, or None (a name, ``module:attribute``, an object)."""
    if not isinstance(spec, str):
        return None
    try:
        path = Path(spec).expanduser()
        return path.resolve() if path.is_file() else None
    except (OSError, RuntimeError, ValueError):
        return None


def policy_identity(spec: Any, scenario: Optional[str] = None, baseline: Any = None) -> Optional[str]:
    """What ``spec`` scores, whatever its spelling: ``file:<resolved path>`` for a file given by
    path or loaded by a package's named policy (``dual`` and ``dual-priority`` load the shipped
    agent's), ``baseline:<canonical name>`` for a baseline (``fifo+first-fit`` is ``fifo``,
    ``las-q15.0`` is ``las-q15``: :func:`baselines.registry.canonical_name`); None for anything
    else (an object, ``module:attribute``, an unknown name). ``baseline``: ``spec`` already
    parsed (a :class:`baselines.registry.PolicyName`), read instead of parsing it again."""
    from baselines.registry import canonical_name
    from cluster_env.wrappers.policies import plugin_policy_source

    if not isinstance(spec, str):
        return None
    path = spec_file(spec)
    if path is not None:
        return f"file:{path}"
    canonical = canonical_name(baseline if baseline is not None else spec)
    if canonical is not None:
        return f"baseline:{canonical}"
    source = plugin_policy_source(spec.strip(), scenario)
    if source is not None:
        return f"file:{spec_file(source) or source}"
    return None


def _refuse_same_identity(specs: Sequence[Any], scenario: Optional[str], parsed: Sequence[Any]) -> None:
    """:class:`DuplicatePolicyError` naming both spellings when two specs score one policy."""
    seen: dict[str, int] = {}
    for i, (spec, baseline) in enumerate(zip(specs, parsed)):
        identity = policy_identity(spec, scenario, baseline)
        if identity is None:
            continue
        if identity in seen:
            what = identity.partition(":")[2]
            kind = f"the baseline {what!r}" if identity.startswith("baseline:") else f"the policy in {what}"
            raise DuplicatePolicyError(f"{specs[seen[identity]]!r} and {spec!r} are two spellings of {kind}: "
                                       "each policy may appear once in a run")
        seen[identity] = i


def _origins(files: Sequence[Path]) -> list[str]:
    """For different files, the shortest trailing part of each one's folder (same depth for all)
    that differs between every pair: ``["trA", "tp8"]`` for ``trA/last...`` and ``tp8/last...``."""
    parents = [f.parent.parts for f in files]
    for depth in range(1, max(len(p) for p in parents) + 1):
        tails = ["/".join(p[-depth:]).lstrip("/") or "/" for p in parents]
        if len(set(tails)) == len(tails):
            return tails
    return [str(f.parent) for f in files]


def _with_origin(name: str, origin: str) -> str:
    """``dual-priority(last)`` + ``trA`` -> ``dual-priority(trA/last)``; ``mine`` -> ``mine(trA)``."""
    if name.endswith(")") and "(" in name:
        i = name.rindex("(")
        return f"{name[:i + 1]}{origin}/{name[i + 1:]}"
    return f"{name}({origin})"


def policy_labels(specs: Sequence[Any], scenario: Optional[str] = None,
                  names: Optional[Sequence[str]] = None, parsed: Optional[Sequence[Any]] = None) -> list[str]:
    """The label of each of ``specs`` (policy names, paths or objects), in order.

    Args:
        specs: what a run was asked to score.
        scenario: passed to the resolvers (``dual`` picks the scenario's checkpoint).
        names: the policies' names when the caller has resolved them already (else resolved here).
        parsed: each spec's parsed baseline name (:attr:`~baselines.harness.resolve.ResolvedPolicy.baseline`,
            None for other policies) when the caller has it: the names are not parsed again.

    Raises:
        DuplicatePolicyError: a policy given twice, or two policies with one name that no file
            tells apart; the message names both.
    """
    from baselines.harness.episode import policy_name
    from baselines.harness.resolve import resolve_policy

    specs = list(specs)
    if names is None:
        names = [policy_name(resolve_policy(s, scenario)) for s in specs]
    if parsed is not None and len(parsed) != len(specs):
        raise ValueError(f"parsed must hold one entry per spec ({len(specs)}), got {len(parsed)}")
    files = [spec_file(s) for s in specs]
    labels = list(names)
    by_name: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        by_name.setdefault(name, []).append(i)
    for name, idx in by_name.items():
        if len(idx) < 2:
            continue
        first, second = idx[0], idx[1]
        group_files = [files[i] for i in idx]
        if any(f is None for f in group_files) or len(set(group_files)) < len(group_files):
            raise DuplicatePolicyError(
                f"{_spec_text(specs[first], name)!r} and {_spec_text(specs[second], name)!r} are the same policy "
                f"({name!r}) given twice: each policy may appear once in a run")
        for i, origin in zip(idx, _origins(group_files)):  # type: ignore[arg-type]
            labels[i] = _with_origin(name, origin)
    seen: dict[str, int] = {}
    for i, label in enumerate(labels):
        if label in seen:
            raise DuplicatePolicyError(f"{_spec_text(specs[seen[label]], label)!r} and {_spec_text(specs[i], label)!r} "
                                       f"would both be labelled {label!r}; rename one of them")
        seen[label] = i
    _refuse_same_identity(specs, scenario, list(parsed) if parsed is not None else [None] * len(specs))
    return labels
