"""The yardstick of a scenario: its strongest duration-blind named rule, the default reference of
every table (``cluster-bench run``, ``compare``, ``sweep``, :func:`baselines.score_agent` and
:func:`baselines.harness.report.format_table`).

A paired ratio is only as informative as its reference: against ``fifo``, which ``random`` beats
on philly-v1 (0.89 of it on 20 windows), an untrained model looks better than FIFO. Against the
yardstick a ratio below 1 means better than the best rule a scheduler without durations has.

:data:`YARDSTICKS` names it per registered scenario. The choice follows one rule, checked against
the checked-in scores (``baselines/scores/<scenario>.json``; tests/test_verdicts.py): the
yardstick is ``las-migrate`` where the GPU types differ in speed by at least its threshold
(:func:`baselines.registry.speed_spread`) and it is scored, ``las`` otherwise, unless a
duration-blind named rule beats it there by a paired 95% interval that excludes 1 (openb-full-v0:
``fifo`` is 0.66 of ``las``, so ``fifo`` is its yardstick; philly-v1: ``las-migrate`` is 0.992
[0.984, 0.9995] of ``las`` over test windows 0-99, better on 64, although its P100/P40 speeds
differ by only 1.29x: ``cluster-bench compare las-migrate las --scenario philly-v1 --seeds 0-99``). No other duration-blind named rule
beats a scenario's yardstick by such an interval on the checked-in windows. Compositions
(``fifo+fastest``...) and clairvoyant references (``sjf``, ``srpt-clairvoyant``) are not
candidates: the first are not named rules, the second read durations.

A scenario outside the table (a user's own registration) gets the same rule from its cluster:
:func:`yardstick_for_cluster`. A user's trace or cluster on a base scenario (records named
``philly-v1+my_jobs.csv``) gets the base scenario's yardstick.

A table paired on another metric than average JCT (``cluster-bench run --metric``, ``compare
--metric``) takes that metric's yardstick: :func:`yardstick` with the metric, which answers
:data:`OBJECTIVE_YARDSTICKS` where it names one and the scenario's yardstick otherwise. Every
table and plot that pairs (``run``, ``compare``, :func:`baselines.score_agent`,
:func:`baselines.harness.report.format_table`, :func:`baselines.harness.paired_plots.plot_paired`)
asks it.
"""
from __future__ import annotations

from typing import Optional, Sequence

#: The yardstick of each registered scenario (see the module docstring for the rule).
YARDSTICKS: dict[str, str] = {
    "toy-v0": "las",
    "philly-v0": "las",
    "philly-v1": "las-migrate",         # 0.992 [0.984, 0.9995] of las over 100 test windows (docstring)
    "philly-hetero-v1": "las-migrate",
    "philly-hetero-v2": "las-migrate",
    "openb-v0": "las",                  # las-migrate is not scored on the v0 scenarios
    "openb-v1": "las-migrate",
    "openb-full-v0": "fifo",            # las and tiresias are 1.52x fifo here (consolidation waits)
    "openb-full-v1": "las-migrate",
    "modern-v1": "las-migrate",
    "philly-hetero-v3": "las-migrate",
    "modern-v2": "las-migrate",
    # Service-objective scenarios: the yardstick of average JCT, by the same rule; the yardstick of
    # each objective metric is OBJECTIVE_YARDSTICKS'.
    "philly-slo-v1": "las-migrate",
    "philly-tenants-v1": "las-migrate",
    "philly-hetero-v4": "las-migrate",
    "philly-tenants-v2": "las-migrate",
    "philly-slo-v2": "las-migrate",
    "modern-v3": "las-migrate",
}
#: Named rules that read no durations and pursue a service objective (docs/objectives.md).
OBJECTIVE_RULES = ("edf", "tias", "priority", "quota", "ftf")
#: Per service-objective scenario and objective metric (docs/objectives.md): the duration-blind
#: named rule (:data:`DURATION_BLIND_RULES` then the :data:`OBJECTIVE_RULES` the file scores; a tie goes to the first)
#: with the best mean over the checked-in scores (``baselines/scores/<scenario>.json``, test
#: windows 0-4; tests/test_objectives.py recomputes it): the reference to beat on that metric.
#: Average JCT keeps :data:`YARDSTICKS`'.
OBJECTIVE_YARDSTICKS: dict[str, dict[str, str]] = {
    "philly-slo-v1": {"deadline_attainment": "las-migrate", "hp_avg_jct": "las-migrate", "be_avg_jct": "tias"},
    "philly-tenants-v1": {"tenant_max_slowdown": "quota", "ftf_max_rho": "quota", "fairness": "las",
                          "quota_violation": "ftf"},
    "philly-slo-v2": {"deadline_attainment": "edf", "hp_avg_jct": "las-migrate", "be_avg_jct": "las-migrate"},
    "philly-tenants-v2": {"tenant_max_slowdown": "ftf", "ftf_max_rho": "ftf", "fairness": "ftf",
                          "quota_violation": "ftf"},
}
#: The metric of :data:`YARDSTICKS` (and of every table that is not told another): average JCT.
JCT_METRIC = "avg_jct"
#: Named rules that read no durations: the candidates for a yardstick.
DURATION_BLIND_RULES = ("random", "fifo", "fifo-strict", "tiresias", "las", "las-migrate", "gittins")


def base_scenario(scenario: str) -> str:
    """The registered scenario a record's scenario name rests on: ``philly-v1+my_jobs.csv`` ->
    ``philly-v1`` (a user's trace or cluster on that base); a registered name is itself."""
    return str(scenario).split("+", 1)[0]


def yardstick_for_cluster(gpu_types: Sequence[str], reference_gpu: str = "V100") -> str:
    """The rule for a scenario outside :data:`YARDSTICKS`: ``las-migrate`` where the GPU types
    differ in speed by at least its threshold (:func:`baselines.registry.speed_spread`), else ``las``."""
    from baselines.migrate import DEFAULT_MIGRATE_THRESHOLD
    from baselines.registry import speed_spread

    return "las-migrate" if speed_spread(gpu_types, reference_gpu) >= DEFAULT_MIGRATE_THRESHOLD else "las"


def yardstick(scenario: str, metric: str = JCT_METRIC) -> str:
    """The yardstick of ``scenario`` (a registered name, or a record's ``base+file.csv`` name) on
    ``metric``: :data:`OBJECTIVE_YARDSTICKS`' rule where it names one for the metric, else the
    scenario's yardstick (:data:`YARDSTICKS`, or :func:`yardstick_for_cluster`'s rule)."""
    base = base_scenario(scenario)
    own = OBJECTIVE_YARDSTICKS.get(base, {}).get(metric)
    if own is not None:
        return own
    if base in YARDSTICKS:
        return YARDSTICKS[base]
    import cluster_env

    try:
        chosen = cluster_env.get_scenario(base)
    except (KeyError, ValueError):
        return "las"                    # not a scenario anyone registered: the rule's default
    return yardstick_for_cluster(chosen.cluster().gpu_type_names, chosen.world.reference_gpu)


def yardstick_of_records(records: Sequence[dict], metric: str = JCT_METRIC) -> Optional[str]:
    """The yardstick on ``metric`` of the scenario the records ran on (:func:`yardstick`); None
    when they span several scenarios whose yardsticks differ (a table of them then names each
    scenario's own)."""
    names = {yardstick(scenario, metric) for scenario in {str(r.get("scenario", "")) for r in records}}
    return names.pop() if len(names) == 1 else None


def yardstick_words(scenario: str, metric: str = JCT_METRIC, owner: str = "") -> str:
    """What a table or plot calls :func:`yardstick` ``(scenario, metric)``: ``"philly-v1's
    yardstick"`` on average JCT, ``"philly-tenants-v1's yardstick of tenant_max_slowdown"`` where
    :data:`OBJECTIVE_YARDSTICKS` names one, and on another metric the scenario's yardstick said to
    be the average JCT's. ``owner`` replaces ``"<scenario>'s"`` (e.g. ``"the scenario's"``)."""
    whose = owner or f"{scenario}'s"
    if metric == JCT_METRIC:
        return f"{whose} yardstick"
    if metric in OBJECTIVE_YARDSTICKS.get(base_scenario(scenario), {}):
        return f"{whose} yardstick of {metric}"
    return f"{whose} yardstick of average JCT (none is chosen for {metric})"


__all__ = ["DURATION_BLIND_RULES", "JCT_METRIC", "OBJECTIVE_RULES", "OBJECTIVE_YARDSTICKS", "YARDSTICKS",
           "base_scenario", "yardstick", "yardstick_for_cluster", "yardstick_of_records", "yardstick_words"]
