"""Checks and notes of ``cluster-bench run`` and ``compare`` that keep a score from being silently
wrong: everything a run needs before its first episode (:func:`check_run`), unique policy labels, a reference that names a policy (the scenario's yardstick by
default), ``--reference-gpu`` only with a trace of one's own, and what the arrivals of the run's
windows are (the trace's own times, or rescaled to an offered load)."""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Sequence

from baselines.cli_support import UsageError, check_output_folder
from baselines.yardstick import JCT_METRIC

if TYPE_CHECKING:
    from baselines.harness.resolve import ResolvedPolicy


def unique_labels(specs: Sequence[str], scenario: Optional[str], names: Optional[Sequence[str]] = None,
                  parsed: Optional[Sequence[Any]] = None) -> list[str]:
    """:func:`baselines.harness.labels.policy_labels`, a duplicate as a one-line usage error."""
    from baselines.harness.labels import DuplicatePolicyError, policy_labels

    try:
        return policy_labels(specs, scenario, names, parsed)
    except DuplicatePolicyError as exc:
        raise UsageError(str(exc), "list each policy once (names are case-insensitive; an alias, a composition spelled out or a file by its name count as the same policy)") from None


def reference_label(reference: str, specs: Sequence[str], labels: Sequence[str]) -> str:
    """The row label ``--reference`` means: itself when it is a label, else the label of the policy
    it names as given on ``--policies`` (``LAS`` for ``las``, ``run/last.priority.json`` for
    ``dual-priority(last)``); unchanged when it names none of them."""
    from baselines.harness.labels import spec_file

    if reference in labels:
        return reference
    for spec, label in zip(specs, labels):
        if spec == reference or spec.lower() == reference.lower() or label.lower() == reference.lower():
            return label
    ref_file = spec_file(reference)
    if ref_file is not None:
        for spec, label in zip(specs, labels):
            if spec_file(spec) == ref_file:
                return label
    return reference


def settle_reference(given: Optional[str], specs: list, labels: list, scenario: str,
                     flag: str = "--reference", metric: str = JCT_METRIC) -> "tuple[str, Optional[ResolvedPolicy]]":
    """The reference of a run, checked before any episode: ``given`` (a policy of the run, or a
    policy name that resolves), or by default the scenario's yardstick on ``metric``
    (:func:`baselines.yardstick.yardstick`).

    Returns ``(label, added)``: the row label the paired ratios are taken against, and the policy
    to add to the run, resolved (its ``spec`` is the name), when the reference is not among its
    policies (None when it is). A name that resolves to no policy is a :class:`UsageError` (exit 2).
    """
    from baselines.harness.resolve import resolve_once
    from baselines.yardstick import yardstick

    spec = given if given is not None else yardstick(scenario, metric)
    label = reference_label(spec, specs, labels)
    if label in labels:
        return label, None
    try:
        added = resolve_once(spec, scenario)
    except (ValueError, ImportError, LookupError, OSError, TypeError, AttributeError):
        raise UsageError(f"unknown {flag} {spec!r}: none of the run's policies ({', '.join(labels)}) and no policy name",
                         f"give one of the run's policies (cluster-bench policies lists the names), or leave {flag} "
                         f"out for {scenario}'s yardstick, {yardstick(scenario, metric)}") from None
    return spec, added


def scenario_metrics(workload: Any) -> tuple[str, ...]:
    """The metrics an episode on ``workload`` measures, in the order of
    :data:`cluster_env.core.metrics.METRIC_KEYS` then
    :func:`cluster_env.core.objectives.measured_objective_keys` (those a table or comparison may pair on)."""
    from cluster_env.core.metrics import METRIC_KEYS
    from cluster_env.core.objectives import measured_objective_keys

    return (*METRIC_KEYS, *measured_objective_keys(workload))


def check_metric(scenario: str, metric: str, workload: Any) -> None:
    """``--metric``: one that episodes of ``scenario`` (its ``workload``) measure, else a
    :class:`UsageError` naming the metric and the scenario's metrics (before any episode)."""
    from cluster_env.core.metrics import METRIC_KEYS
    from cluster_env.core.objectives import OBJECTIVE_KEYS

    known = scenario_metrics(workload)
    if metric in known:
        return
    hint = f"--metric takes one of {scenario}'s metrics: {', '.join(known)}"
    if metric not in (*METRIC_KEYS, *OBJECTIVE_KEYS):
        raise UsageError(f"unknown metric {metric!r}", hint)
    raise UsageError(f"{scenario} does not measure {metric!r} (its jobs have no "
                     f"{_OBJECTIVE_FIELDS.get(metric, 'service objectives')})", hint)


#: What a workload lacks when it does not measure an objective metric (its words in an error).
_OBJECTIVE_FIELDS = {"deadline_jobs": "deadlines", "deadline_attainment": "deadlines",
                     "hp_avg_jct": "high-priority class", "quota_violation": "tenant quotas"}


def check_reference_gpu(args: argparse.Namespace) -> None:
    """``--reference-gpu`` says which GPU the durations of ``--workload-csv`` were measured on;
    alone it would silently change a registered scenario's world (and its scores) under its name."""
    if getattr(args, "reference_gpu", None) is not None and not getattr(args, "workload_csv", None):
        import cluster_env

        gpu = cluster_env.get_scenario(args.scenario).world.reference_gpu \
            if args.scenario in cluster_env.list_scenarios() else "its own"
        raise UsageError(f"--reference-gpu {args.reference_gpu} needs --workload-csv: it names the GPU your trace's "
                         f"durations were measured on ({args.scenario}'s own are measured on {gpu})",
                         "give your trace with --workload-csv FILE, or drop --reference-gpu")


def arrivals_note(scenario: str, env_kwargs: dict, env: Any) -> str:
    """What the arrivals of the run's windows are, read from ``env``, the environment built from
    the run's arguments (``scenario`` and ``env_kwargs``, :attr:`RunPlan.env`): ``"the trace's own
    arrival times"`` or ``"rescaled to offered load 1.5 (...)"``."""
    built = getattr(env, "unwrapped", env).scenario
    load, scale, measure = built.load, built.time_scale, built.load_measure
    if load is None:
        own = "the trace's own arrival times" if scale == 1 else f"the trace's arrival times x time_scale {scale:g}"
        return f"{own} (no rescaling to a load; --env load=X rescales each window to offered load X)"
    why = "--env load" if env_kwargs.get("load") is not None else f"{scenario}'s default"
    return f"each window rescaled to offered load {load:g} ({why}), load_measure {measure!r}"


@dataclass
class RunPlan:
    """What :func:`check_run` settled before a run's first episode, for ``cmd_run`` to use as it is
    (nothing is resolved or built twice).

    Attributes:
        specs: the policies as given, the reference last when it was added.
        resolved: each one resolved once (:func:`baselines.harness.resolve.resolve_once`).
        labels: each one's row label.
        reference: the label the paired ratios are taken against.
        added: the reference's spec when it was added to the policies, else None.
        settings: spec -> the environment settings of its episodes (the user's plus what it needs).
        mismatches: spec -> the settings it was made for that differ from the run's.
        env: the environment built from the run's own arguments (it checked them; the world line
            and the arrivals note are read from it).
    """

    specs: list
    resolved: list
    labels: list
    reference: str
    added: Optional[str]
    settings: dict
    mismatches: dict
    env: Any


def check_run(args: argparse.Namespace, policies: Sequence[str], env_kwargs: dict) -> RunPlan:
    """Everything a ``run`` needs, checked before its first episode: scenario, seeds, the env
    arguments (custom CSV files included), every policy (checkpoints loaded), the labels, the
    reference and the output folder. Each policy is resolved here, once: the returned
    :class:`RunPlan` carries it to the run. The environment settings a policy needs are read
    from the scenario's registry entry; an environment is built for a policy only when it has a
    check of its own to make on one (``check_env``)."""
    import cluster_env
    from baselines.harness.episode import check_fits, env_mismatch, env_settings, has_env_check
    from baselines.harness.resolve import resolve_once

    if args.scenario not in cluster_env.list_scenarios():
        raise UsageError(f"unknown scenario {args.scenario!r}", f"scenarios: {', '.join(cluster_env.list_scenarios())} "
                         "(cluster-bench scenarios describes them)")
    bad = [s for s in args.seeds if s < 0]
    if bad:
        raise UsageError(f"seeds must be >= 0, got {bad[0]}", "e.g. --seeds 0-4 or --seeds 0,3,7")
    try:
        env = cluster_env.parallel_env(args.scenario, split=args.split, **env_kwargs)
    except TypeError as exc:
        raise UsageError(str(exc), "--env takes KEY=VALUE with the arguments of cluster_env.parallel_env "
                         "(docs/reference.md, Arguments)") from exc
    metric = getattr(args, "metric", None) or JCT_METRIC     # one the run's workload measures
    check_metric(args.scenario, metric, getattr(env, "unwrapped", env).scenario.workload())
    allow = bool(getattr(args, "allow_env_mismatch", False))
    specs, resolved = list(policies), []
    for name in specs:
        try:
            resolved.append(resolve_once(name, args.scenario))
        except (ValueError, TypeError) as exc:
            raise UsageError(str(exc), getattr(exc, "hint", "") or "cluster-bench policies lists every name; or give "
                             "package.module:attribute (resolved from the current folder)") from exc
    settings, mismatches = {}, {}

    def check(spec: str, policy: "ResolvedPolicy") -> None:
        built = policy.policy()
        settings[spec] = env_settings(built, env_kwargs, allow, args.scenario)
        mismatch = env_mismatch(built, env_kwargs, args.scenario)
        if mismatch:
            mismatches[spec] = mismatch
        if has_env_check(built):
            same = settings[spec] == env_kwargs       # the run's own environment is this policy's
            check_fits(built, env if same else cluster_env.parallel_env(args.scenario, split=args.split,
                                                                          **settings[spec]))

    for spec, policy in zip(specs, resolved):
        check(spec, policy)
    labels = unique_labels(specs, args.scenario, [r.name for r in resolved], [r.baseline for r in resolved])
    # The reference (the scenario's yardstick unless named): an unknown one is exit 2, nothing
    # written; one not among the policies is added to them.
    reference, added = settle_reference(getattr(args, "reference", None), specs, labels, args.scenario,
                                        metric=metric)
    if added is not None:
        specs.append(added.spec)
        resolved.append(added)
        check(added.spec, added)
        labels = unique_labels(specs, args.scenario, [r.name for r in resolved], [r.baseline for r in resolved])
        reference = reference_label(added.spec, specs, labels)
    check_output_folder(args.out)
    return RunPlan(specs, resolved, labels, reference, None if added is None else added.spec, settings, mismatches,
                   env)
