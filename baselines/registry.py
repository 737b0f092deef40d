"""Names of the baselines: ``baselines.make_policy(name, **kwargs)``.

Named baselines (docs/design.md section 7):

=============  ==========================================================
``random``     random orderer + random placer
``fifo``       FIFO with backfilling (the oldest job that fits) + first-fit
``fifo-strict`` strict FIFO (head-of-line blocking: only the oldest job may start) + first-fit;
               the FIFO of the peers' simulators (Tiresias' ``fifo``; Gavel, Lucid and Blox
               reproduce the same 464k-496k s on the first 1,000 Philly jobs of 2017-10-01)
``sjf``        shortest job first (clairvoyant) + consolidating best-fit
``tiresias``   Tiresias-style 2D-LAS with preemption + consolidating best-fit
``las``        continuous preemptive least attained service (no durations) + consolidating best-fit
``gittins``    Tiresias' 2D-Gittins index (information-agnostic: the Gittins index of attained
               GPU-service under the scenario's TRAINING split's GPU-service distribution, in
               Tiresias' queues) + consolidating best-fit; needs the scenario
               (``make_policy("gittins", scenario="philly-v1")``; cluster-bench passes it)
``las-q<M>``   ``las`` with a minimum quantum of M minutes (e.g. ``las-q15``): a running job is not
               preempted before it has executed M minutes since its last (re)start; not a scored
               baseline (docs/baselines.md, "LAS with a minimum quantum")
``las-migrate`` ``las`` + ``fastest`` that moves a running one-machine job to a free machine at least
               1.5x faster (preempt, restart at once, re-placed by ``fastest``); reads the placement
               columns of ``observation="extended-v2"`` (:mod:`baselines.migrate`);
               ``las-migrate<x>`` sets the threshold x > 1 (e.g. ``las-migrate2``)
``srpt-clairvoyant``  CLAIRVOYANT REFERENCE, reads durations (clairvoyant + preemption); NOT an upper
               bound (``docs/baselines.md``: worse than ``las+fastest`` on philly-hetero-v1):
               shortest remaining GPU-time first, preemptive, + the size- and speed-aware
               ``clairvoyant`` placer; never an info-agnostic baseline. Formerly ``oracle``.
=============  ==========================================================

Any ``ORDERER+PLACER`` pair composes, e.g. ``sjf+fastest``, ``tiresias+spread`` or
``las+fastest``. Orderers: ``fifo``, ``fifo-strict``, ``sjf``, ``sjf-noisy`` (log-normal duration
error, ``noise=0.5`` by default), ``tiresias`` (alias ``2dlas``), ``las``, ``las-q<minutes>``, ``las-migrate`` / ``las-migrate<x>``,
``gittins`` (``scenario=``), ``srpt``
(reads durations), ``random``. Placers: ``first-fit``, ``consolidate`` (alias ``best-fit``),
``spread``, ``fastest``, ``clairvoyant`` (reads durations), ``random``. A policy with an ``srpt`` or
``clairvoyant`` half reads durations and is a clairvoyant reference (not an upper bound), not an
info-agnostic baseline.

Deprecated: ``oracle`` (the named policy, the orderer and the placer) still resolves, to
``srpt-clairvoyant``, ``srpt`` and ``clairvoyant``, with a ``FutureWarning``: docs/design.md section 9
calls a reference "oracle" only if it is no worse than every heuristic on every scenario, and no
clairvoyant policy here is (``DEPRECATED_NAMES``).
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import numpy as np

from baselines.gittins import Gittins
from baselines.migrate import DEFAULT_MIGRATE_THRESHOLD, LAS_MIGRATE_FAMILY, MigratingLAS, las_migrate_threshold
from baselines.objective_orderers import EDF, FinishTimeFair, QuotaAware, StrictPriority, TwoLevel
from baselines.orderers import FIFO, LAS, SJF, OracleSRPT, RandomOrderer, Tiresias
from baselines.placers import BestFit, FastestFirst, FirstFit, OraclePlacer, RandomPlacer, Spread
from baselines.policy import ComposedPolicy, Orderer, Placer

ORDERERS: dict[str, Callable[..., Orderer]] = {
    "fifo": FIFO,
    "fifo-strict": lambda **kw: FIFO(strict=True, **kw),
    "sjf": SJF,
    "sjf-noisy": lambda noise=0.5, **kw: SJF(noise=noise, **kw),
    "tiresias": Tiresias,
    "2dlas": Tiresias,
    "las": LAS,
    "gittins": Gittins,
    "srpt": OracleSRPT,
    "oracle": OracleSRPT,          # deprecated alias of srpt (DEPRECATED_NAMES)
    "random": RandomOrderer,
    # Service objectives (docs/objectives.md): they read the objectives-v1 observation.
    "edf": EDF,
    "edf-clairvoyant": lambda **kw: EDF(clairvoyant=True, **kw),
    "tias": TwoLevel,
    "priority": StrictPriority,
    "quota": QuotaAware,
    "ftf": FinishTimeFair,
}
PLACERS: dict[str, Callable[..., Placer]] = {
    "first-fit": FirstFit,
    "consolidate": BestFit,
    "best-fit": BestFit,
    "spread": Spread,
    "fastest": FastestFirst,
    "clairvoyant": OraclePlacer,
    "oracle": OraclePlacer,        # deprecated alias of clairvoyant (DEPRECATED_NAMES)
    "random": RandomPlacer,
}
NAMED = {
    "random": ("random", "random"),
    "fifo": ("fifo", "first-fit"),
    "fifo-strict": ("fifo-strict", "first-fit"),
    "sjf": ("sjf", "consolidate"),
    "tiresias": ("tiresias", "consolidate"),
    "las": ("las", "consolidate"),
    "las-migrate": ("las-migrate", "fastest"),
    "gittins": ("gittins", "consolidate"),
    "srpt-clairvoyant": ("srpt", "clairvoyant"),
    "edf": ("edf", "fastest"),
    "edf-clairvoyant": ("edf-clairvoyant", "fastest"),
    "tias": ("tias", "fastest"),
    "priority": ("priority", "fastest"),
    "quota": ("quota", "fastest"),
    "ftf": ("ftf", "fastest"),
}
#: The named baselines of service objectives: a default run scores them on a scenario whose jobs
#: carry classes, deadlines or quotas (docs/objectives.md), not elsewhere.
OBJECTIVE_BASELINES = ("edf", "edf-clairvoyant", "tias", "priority", "quota", "ftf")
#: Names that still resolve but warn: a named policy, an orderer or a placer -> its new name.
DEPRECATED_NAMES = {"oracle": "srpt-clairvoyant"}
DEPRECATED_ORDERERS = {"oracle": "srpt"}
DEPRECATED_PLACERS = {"oracle": "clairvoyant"}
#: The named baselines every scenario's default run holds, in table order (``las-migrate`` only
#: on heterogeneous clusters: :func:`default_baselines`).
BASELINE_NAMES = tuple(name for name in NAMED if name != "las-migrate" and name not in OBJECTIVE_BASELINES)
#: Named baselines a default run adds on a heterogeneous cluster whose GPU types differ in speed by
#: at least the migration threshold: the migration yardstick (its scores are checked in for the v1
#: scenarios).
HETEROGENEOUS_BASELINES = ("las-migrate",)


def speed_spread(gpu_types: Sequence[str], reference_gpu: str = "V100") -> float:
    """How much faster the cluster's fastest GPU type is than its slowest: the ratio of their
    median relative speeds over the job types (1-GPU figures, ``cluster_env.world``'s table);
    1.0 for one type. philly-v1 (P100, P40) 1.29; philly-hetero-v1 4.1; openb-v1 5.5; modern-v1 6.7."""
    from cluster_env.world import relative_speed_table

    if len(gpu_types) < 2:
        return 1.0
    medians = np.median(relative_speed_table(list(gpu_types), reference_gpu)[:, :, 0], axis=0)
    return float(medians.max() / medians.min())


def default_baselines(gpu_types: Sequence[str], reference_gpu: str = "V100") -> tuple[str, ...]:
    """The named baselines a default run scores on a cluster of the ``gpu_types`` GPU types:
    ``las-migrate`` too where the types' :func:`speed_spread` reaches its threshold (elsewhere
    the rule can rarely fire, and its API episodes are the slowest of a recorded run)."""
    migrate = speed_spread(gpu_types, reference_gpu) >= DEFAULT_MIGRATE_THRESHOLD
    return BASELINE_NAMES + (HETEROGENEOUS_BASELINES if migrate else ())


#: The orderer family ``las-q<minutes>``: LAS with ``min_quantum`` = minutes x 60 (minutes > 0).
LAS_QUANTUM_FAMILY = "las-q<minutes>"
_LAS_QUANTUM = re.compile(r"las-q(\d+(?:\.\d+)?)")


def las_quantum_minutes(orderer: str) -> Optional[float]:
    """The minutes of a ``las-q<minutes>`` orderer name (> 0), None for any other name."""
    match = _LAS_QUANTUM.fullmatch(orderer)
    minutes = float(match.group(1)) if match else 0.0
    return minutes if minutes > 0 else None


def orderer_factory(orderer: str) -> Optional[Callable[..., Orderer]]:
    """The constructor of the orderer called ``orderer`` (a key of :data:`ORDERERS` or a
    ``las-q<minutes>``), None when there is none."""
    if orderer in ORDERERS:
        return ORDERERS[orderer]
    threshold = las_migrate_threshold(orderer)
    if threshold is not None:
        return lambda **kw: MigratingLAS(threshold=threshold, **kw)
    minutes = las_quantum_minutes(orderer)
    if minutes is None:
        return None
    return lambda **kw: LAS(min_quantum=60.0 * minutes, **kw)


def policy_parts(name: str) -> Optional[tuple[str, str]]:
    """(orderer, placer) names of a policy name, unchecked: a named baseline's, a bare
    ``las-q<minutes>``'s (with ``las``'s placer), or ``ORDERER+PLACER`` split; None otherwise."""
    key = name.strip().lower()
    key = DEPRECATED_NAMES.get(key, key)
    if key in NAMED:
        return NAMED[key]
    if "+" in key:
        orderer, _, placer = key.partition("+")
        return orderer, placer
    if las_quantum_minutes(key) is not None:
        return key, NAMED["las"][1]
    if las_migrate_threshold(key) is not None:
        return key, NAMED["las-migrate"][1]
    return None


@dataclass(frozen=True)
class PolicyName:
    """A baseline name parsed and checked once (:func:`parse_policy_name`): what
    :func:`make_policy`, :func:`canonical_name`, :func:`needs_training_split` and the compiled
    engine (``baselines.engine.policy_codes``) read instead of parsing the text again.

    ``key`` is the name as a policy records it (stripped, lower-case); ``orderer`` and ``placer``
    are the halves' names as :data:`ORDERERS` (or a ``las-q<minutes>`` / ``las-migrate<x>``
    family) and :data:`PLACERS` spell them.
    """

    key: str
    orderer: str
    placer: str
    #: The name as it was given (deprecation warnings quote it).
    text: str = field(default="", compare=False)

    @property
    def parts(self) -> tuple[str, str]:
        """(orderer, placer): what :func:`policy_parts` gives for the name."""
        return self.orderer, self.placer


def _parts_of(name: Any) -> Optional[tuple[str, str]]:
    """(orderer, placer) of a parsed name as parsed, of a string by :func:`policy_parts`; None otherwise."""
    if isinstance(name, PolicyName):
        return name.parts
    return policy_parts(name) if isinstance(name, str) else None


#: Orderer names that mean another's rule (a spelling, not another policy): -> the name used.
ORDERER_ALIASES = {"2dlas": "tiresias", **DEPRECATED_ORDERERS}
#: Placer names that mean another's rule -> the name used.
PLACER_ALIASES = {"best-fit": "consolidate", **DEPRECATED_PLACERS}
#: Orderers whose rule is built from the scenario's training split (its GPU-service distribution):
#: a user's workload, which has no training split apart from the played jobs, cannot give one.
TRAINING_SPLIT_ORDERERS = ("gittins",)


def canonical_name(name: "str | PolicyName") -> Optional[str]:
    """The one spelling of the baseline ``name`` (None when it is not a baseline name): aliases
    and deprecated halves replaced, a ``las-q<minutes>`` / ``las-migrate<x>`` number written
    once (``las-q15.0`` -> ``las-q15``, ``las-migrate1.5`` -> ``las-migrate``), and a composition
    that is a named baseline (or a bare family name with its placer) written as that name
    (``fifo+first-fit`` -> ``fifo``, ``oracle`` -> ``srpt-clairvoyant``). Two names with one
    canonical name are the same policy (same rule, same records). A :class:`PolicyName` is
    read as parsed."""

    parts = _parts_of(name)
    if parts is None or orderer_factory(parts[0]) is None or parts[1] not in PLACERS:
        return None
    orderer = ORDERER_ALIASES.get(parts[0], parts[0])
    placer = PLACER_ALIASES.get(parts[1], parts[1])
    minutes, threshold = las_quantum_minutes(orderer), las_migrate_threshold(orderer)
    if minutes is not None:
        orderer = f"las-q{minutes:g}"
        if placer == NAMED["las"][1]:
            return orderer
    if threshold is not None:
        orderer = "las-migrate" if threshold == DEFAULT_MIGRATE_THRESHOLD else f"las-migrate{threshold:g}"
        if placer == NAMED["las-migrate"][1]:
            return orderer
    for named, named_parts in NAMED.items():
        if named_parts == (orderer, placer):
            return named
    return f"{orderer}+{placer}"


def needs_training_split(name: "str | PolicyName") -> bool:
    """Whether the baseline ``name``'s orderer takes its rule from the scenario's training split
    (``gittins``): it cannot play a user's workload (``baselines.gittins.check_training_split``)."""
    parts = _parts_of(name)
    return parts is not None and parts[0] in TRAINING_SPLIT_ORDERERS


def policy_names() -> list[str]:
    """Every name :func:`make_policy` accepts, compositions spelled out (deprecated names aside)."""
    return list(NAMED) + [f"{o}+{p}" for o in ORDERERS if o not in DEPRECATED_ORDERERS
                          for p in PLACERS if p not in DEPRECATED_PLACERS]


def deprecation_of(name: str) -> Optional[str]:
    """The name to use instead of ``name`` when it (or a half of it) is deprecated, else None."""
    key = name.strip().lower() if isinstance(name, str) else ""
    if key in DEPRECATED_NAMES:
        return DEPRECATED_NAMES[key]
    if "+" in key:
        orderer, _, placer = key.partition("+")
        if orderer in DEPRECATED_ORDERERS or placer in DEPRECATED_PLACERS:
            return f"{DEPRECATED_ORDERERS.get(orderer, orderer)}+{DEPRECATED_PLACERS.get(placer, placer)}"
    return None


def parse_policy_name(name: "str | PolicyName") -> PolicyName:
    """The baseline ``name`` parsed and checked (the one place a name is parsed for a policy).

    Raises:
        TypeError: ``name`` is not a string.
        ValueError: not a baseline name (the message lists the names, orderers and placers).
    """
    if isinstance(name, PolicyName):
        return name
    if not isinstance(name, str):
        raise TypeError(f"policy name must be a string, got {name!r}")
    key = name.strip().lower()
    parts = policy_parts(key)
    orderer = key.partition("+")[0]
    if orderer.startswith("las-q") and las_quantum_minutes(orderer) is None:
        raise ValueError(f"{LAS_QUANTUM_FAMILY} needs a positive number of minutes (e.g. las-q15), got {name!r}")
    if orderer.startswith("las-migrate") and las_migrate_threshold(orderer) is None:
        raise ValueError(f"{LAS_MIGRATE_FAMILY} needs a speed-up threshold x > 1 (e.g. las-migrate2), got {name!r}")
    if parts is None:
        raise ValueError(f"unknown policy {name!r}; named baselines: {sorted(NAMED)}; or compose "
                         f"ORDERER+PLACER with orderers {sorted(ORDERERS)} (or {LAS_QUANTUM_FAMILY}, {LAS_MIGRATE_FAMILY}) "
                         f"and placers {sorted(PLACERS)}")
    orderer_name, placer_name = parts
    if orderer_factory(orderer_name) is None:
        raise ValueError(f"unknown orderer {orderer_name!r} in {name!r}; orderers: {sorted(ORDERERS)} "
                         f"or {LAS_QUANTUM_FAMILY} (minutes > 0) or {LAS_MIGRATE_FAMILY} (x > 1)")
    if placer_name not in PLACERS:
        raise ValueError(f"unknown placer {placer_name!r} in {name!r}; placers: {sorted(PLACERS)}")
    return PolicyName(key, orderer_name, placer_name, name)


def make_policy(name: "str | PolicyName", **kwargs: Any) -> ComposedPolicy:
    """Build a baseline policy by name.

    Args:
        name: a named baseline (``random``, ``fifo``, ``sjf``, ``tiresias``) or ``ORDERER+PLACER``,
            or such a name already parsed (:func:`parse_policy_name`: it is not parsed again).
        kwargs: passed to the orderer's constructor (e.g. ``noise=`` for ``sjf-noisy``,
            ``starvation=`` for ``tiresias``, ``strict=`` for ``fifo``).

    Returns:
        A policy with ``act(observations, infos)``, ``reset(seed)`` and ``env_overrides``.
    """
    parsed = parse_policy_name(name)
    instead = deprecation_of(parsed.key)
    if instead is not None:
        # stacklevel 2: the caller's line. The policy keeps the name it was asked by (records,
        # labels and files written under it stay the caller's).
        warnings.warn(f"policy name {parsed.text or parsed.key!r} is deprecated: use {instead!r} (a clairvoyant "
                      "reference, not an upper bound: docs/baselines.md)", FutureWarning, stacklevel=2)
    orderer = orderer_factory(parsed.orderer)
    assert orderer is not None      # parse_policy_name checked it
    return ComposedPolicy(orderer(**kwargs), PLACERS[parsed.placer](), name=parsed.key)


def make_policy_for(name: "str | PolicyName", scenario: Any = None) -> ComposedPolicy:
    """The baseline ``name`` as a run on ``scenario`` builds it: an orderer whose rule comes from
    the scenario's training split (``gittins``) is given ``scenario`` (without one,
    :func:`make_policy` says it needs it); any other is :func:`make_policy`'s."""
    parsed = parse_policy_name(name)
    if parsed.orderer in TRAINING_SPLIT_ORDERERS and scenario is not None:
        return make_policy(parsed, scenario=scenario)
    return make_policy(parsed)


def resolve_name(name: str, scenario: Optional[str] = None) -> Optional[ComposedPolicy]:
    """Entry point ``cluster_bench.resolvers``: the baseline called ``name``, or None when ``name``
    is not a baseline name (so that other packages' resolvers may know it)."""
    parts = policy_parts(name) if isinstance(name, str) else None
    if parts is not None and orderer_factory(parts[0]) is not None and parts[1] in PLACERS:
        if parts[0] == "gittins":       # its distribution is the scenario's training split's
            return make_policy(name, scenario=scenario) if scenario is not None else None
        return make_policy(name)
    return None
