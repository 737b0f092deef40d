"""Checks and notes of ``cluster-bench run`` and ``compare`` that keep a score from being silently
wrong: everything a run needs before its first episode (:func:`check_run`), unique policy labels, a reference that names a policy (the scenario's yardstick by
default), ``--reference-gpu`` only with a trace of one's own, and what the arrivals of the run's
windows are (the trace's own times, or rescaled to an offered load)."""
from __future__ import annotations

import argparse
from typing import Optional, Sequence

from baselines.cli_support import UsageError, check_output_folder


def unique_labels(specs: Sequence[str], scenario: Optional[str], names: Optional[Sequence[str]] = None) -> list[str]:
    """:func:`baselines.harness.labels.policy_labels`, a duplicate as a one-line usage error."""
    from baselines.harness.labels import DuplicatePolicyError, policy_labels

    try:
        return policy_labels(specs, scenario, names)
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
                     flag: str = "--reference") -> tuple[str, Optional[str]]:
    """The reference of a run, checked before any episode: ``given`` (a policy of the run, or a
    policy name that resolves), or by default the scenario's yardstick (:mod:`baselines.yardstick`).

    Returns ``(label, added)``: the row label the paired ratios are taken against, and the spec to
    add to the run when the reference is not among its policies (None when it is). A name that
    resolves to no policy is a :class:`UsageError` (exit 2).
    """
    from baselines.harness.sweep import resolve_policy
    from baselines.yardstick import yardstick

    spec = given if given is not None else yardstick(scenario)
    label = reference_label(spec, specs, labels)
    if label in labels:
        return label, None
    try:
        resolve_policy(spec, scenario)
    except (ValueError, ImportError, LookupError, OSError, TypeError, AttributeError):
        raise UsageError(f"unknown {flag} {spec!r}: none of the run's policies ({', '.join(labels)}) and no policy name",
                         f"give one of the run's policies (cluster-bench policies lists the names), or leave {flag} "
                         f"out for {scenario}'s yardstick, {yardstick(scenario)}") from None
    return spec, spec


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


def arrivals_note(scenario: str, env_kwargs: dict) -> str:
    """What the arrivals of the run's windows are, read from the environment the run builds:
    ``"the trace's own arrival times"`` or ``"rescaled to offered load 1.5 (...)"``."""
    import cluster_env

    env = cluster_env.parallel_env(scenario, **env_kwargs)
    built = getattr(env, "unwrapped", env).scenario
    load, scale, measure = built.load, built.time_scale, built.load_measure
    env.close()
    if load is None:
        own = "the trace's own arrival times" if scale == 1 else f"the trace's arrival times x time_scale {scale:g}"
        return f"{own} (no rescaling to a load; --env load=X rescales each window to offered load X)"
    why = "--env load" if env_kwargs.get("load") is not None else f"{scenario}'s default"
    return f"each window rescaled to offered load {load:g} ({why}), load_measure {measure!r}"


def check_run(args: argparse.Namespace, policies: Sequence[str], env_kwargs: dict) -> None:
    """Everything a ``run`` needs, checked before its first episode: scenario, seeds, the env
    arguments (custom CSV files included), every policy (checkpoints loaded), the reference and the
    output folder."""
    import cluster_env
    from baselines.harness.episode import check_fits, env_settings
    from baselines.harness.resolve import resolve_policy

    if args.scenario not in cluster_env.list_scenarios():
        raise UsageError(f"unknown scenario {args.scenario!r}", f"scenarios: {', '.join(cluster_env.list_scenarios())} "
                         "(cluster-bench scenarios describes them)")
    bad = [s for s in args.seeds if s < 0]
    if bad:
        raise UsageError(f"seeds must be >= 0, got {bad[0]}", "e.g. --seeds 0-4 or --seeds 0,3,7")
    try:
        cluster_env.parallel_env(args.scenario, split=args.split, **env_kwargs)
    except TypeError as exc:
        raise UsageError(str(exc), "--env takes KEY=VALUE with the arguments of cluster_env.parallel_env "
                         "(docs/reference.md, Arguments)") from exc
    names = []
    for name in policies:
        try:
            policy = resolve_policy(name, args.scenario)
        except (ValueError, TypeError) as exc:
            raise UsageError(str(exc), getattr(exc, "hint", "") or "cluster-bench policies lists every name; or give "
                             "package.module:attribute (resolved from the current folder)") from exc
        settings = env_settings(policy, env_kwargs, bool(getattr(args, "allow_env_mismatch", False)), args.scenario)
        check_fits(policy, cluster_env.parallel_env(args.scenario, split=args.split, **settings))
        names.append(str(getattr(policy, "name", type(policy).__name__)))
    if getattr(args, "reference", None) is not None:     # an unknown --reference: exit 2, nothing written
        settle_reference(args.reference, list(policies), unique_labels(list(policies), args.scenario, names),
                         args.scenario)
    check_output_folder(args.out)
