"""PNG plots of a run's per-policy results: the scenario's service objectives, and the gap to the
best-known schedule of each window the shipped optimality table has. One column per policy, in
the policy's colour of the run (:mod:`baselines.harness.styles`): a point per window, the mean
(the geometric mean for the gap) as a bar and its 95% bootstrap interval as a band.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from baselines.harness.files import number
from baselines.harness.metric_labels import plot_scale
from baselines.harness.paired_plots import set_policy_ticks
from baselines.harness.plots import _pyplot, save_figure
from baselines.harness.styles import PolicyStyle, policy_styles

#: The objective metrics a plot shows (``deadline_jobs`` counts jobs, it measures no policy).
PLOTTED_OBJECTIVES = ("deadline_attainment", "hp_avg_jct", "be_avg_jct", "tenant_max_slowdown", "ftf_max_rho",
                      "quota_violation")


#: A panel whose values span more than this factor is drawn on a log scale.
LOG_SPAN = 30.0


def objective_metrics(records: Sequence[dict[str, Any]]) -> list[str]:
    """The service-objective metrics every one of ``records`` carries and some measure (none: a
    scenario without classes, deadlines or quotas; not one NaN in every record, such as
    ``deadline_attainment`` on a scenario without deadlines)."""
    from baselines.harness.report import has_values

    return [k for k in PLOTTED_OBJECTIVES if records and all(k in r for r in records) and has_values(records, k)]


def window_gaps(records: Sequence[dict[str, Any]], policy: str) -> list[float]:
    """``avg_jct / best_known - 1`` of each of ``policy``'s windows that the shipped optimality
    table has (the windows :func:`baselines.harness.gaps.optimality_gap` rests on)."""
    from baselines.harness.gaps import GAP_METRIC
    from baselines.optimality import reference_for

    out: dict[tuple[str, int], float] = {}
    for r in records:
        if r.get("policy") != policy:
            continue
        ref = reference_for(r)
        value = number(r.get(GAP_METRIC, math.nan))
        if ref is not None and value > 0 and math.isfinite(value) and ref.best_known > 0:
            out[(ref.window, ref.seed)] = value / ref.best_known - 1.0
    return list(out.values())


def _columns(ax, policies: Sequence[str], values: Mapping[str, Sequence[float]],
             centre: Mapping[str, tuple[float, float, float]], styles: Mapping[str, PolicyStyle]) -> None:
    """Per policy: its values as jittered points, ``centre`` (value, lo, hi) as a bar and a band."""
    rng = np.random.default_rng(0)                     # the jitter only: the same picture every run
    for i, policy in enumerate(policies):
        v = np.asarray(values[policy], dtype=np.float64)
        colour = styles[policy].color
        if len(v):
            ax.scatter(i + rng.uniform(-0.15, 0.15, len(v)), v, s=14, alpha=0.6, color=colour, zorder=3)
        mid, lo, hi = centre[policy]
        if np.isfinite(mid):
            ax.hlines(mid, i - 0.3, i + 0.3, color=colour, lw=2.5, zorder=4)
        if np.isfinite(lo) and np.isfinite(hi):
            ax.fill_between([i - 0.3, i + 0.3], lo, hi, color=colour, alpha=0.25, lw=0, zorder=2)
    ax.set_xlim(-0.6, max(len(policies) - 0.4, 0.6))
    ax.grid(alpha=0.3, axis="y")


def plot_objectives(records: Sequence[dict[str, Any]], path: "str | Path", title: str = "",
                    styles: Optional[Mapping[str, PolicyStyle]] = None) -> Path:
    """One panel per service-objective metric of the records' scenario (:func:`objective_metrics`),
    one column per policy: a point per window, the mean over windows and its 95% bootstrap interval.
    Raises ``ValueError`` for records without objective metrics."""
    from baselines.harness.stats import mean_ci

    metrics = objective_metrics(records)
    if not metrics:
        raise ValueError("the records carry no service-objective metric (a scenario without classes, deadlines "
                         "or quotas)")
    policies = list(dict.fromkeys(r["policy"] for r in records))
    styles = styles if styles is not None else policy_styles(policies)
    plt = _pyplot()
    column = 0.8                                      # inches per policy: its name fits under it
    width = max(4.0, column * len(policies) + 1.8)
    cols = min(len(metrics), 1 if len(policies) > 10 else 2 if len(policies) > 5 else 3)
    rows = math.ceil(len(metrics) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, 3.8 * rows), squeeze=False)
    for ax, metric in zip(axes.flat, metrics):
        scale, label = plot_scale(metric)
        values = {p: [number(r[metric]) / scale for r in records if r["policy"] == p] for p in policies}
        centre = {p: mean_ci(v) if v else (math.nan,) * 3 for p, v in values.items()}
        _columns(ax, policies, values, centre, styles)
        finite = [x for v in values.values() for x in v if np.isfinite(x)]
        if finite and min(finite) > 0 and max(finite) > LOG_SPAN * min(finite):     # one outlier hides the rest
            ax.set_yscale("log")
            label += ", log scale"
        ax.set_ylabel(label)
        set_policy_ticks(ax, policies, column_inches=width / max(len(policies) + 1.2, 1))
    for ax in list(axes.flat)[len(metrics):]:
        ax.set_visible(False)
    seeds = len({r["seed"] for r in records})
    axes.flat[0].set_title(f"{title or 'service objectives'}\na point per window ({seeds}), bar: mean, "
                           "band: 95% bootstrap CI", fontsize=9)
    return save_figure(fig, path)


def plot_gaps(records: Sequence[dict[str, Any]], path: "str | Path", title: str = "",
              styles: Optional[Mapping[str, PolicyStyle]] = None) -> Path:
    """One column per policy: its gap to best-known on each window the shipped optimality table
    has (a point per window, in percent), the geometric-mean gap and its 95% bootstrap interval
    (:func:`baselines.harness.gaps.optimality_gap`). Raises ``ValueError`` when no record has a
    window of the table."""
    from baselines.harness.gaps import no_gap_reason, optimality_gap

    policies = list(dict.fromkeys(r["policy"] for r in records))
    values = {p: [100.0 * g for g in window_gaps(records, p)] for p in policies}
    if not any(values.values()):
        raise ValueError(f"no gap to best-known: {no_gap_reason(records)}")
    policies = [p for p in policies if values[p]]
    styles = styles if styles is not None else policy_styles(list(dict.fromkeys(r["policy"] for r in records)))
    centre = {}
    for p in policies:
        gap = optimality_gap(records, p)
        centre[p] = (100.0 * gap.best_known, 100.0 * gap.best_known_lo, 100.0 * gap.best_known_hi)
    plt = _pyplot()
    width = max(5.0, 0.7 * len(policies) + 2.5)
    fig, ax = plt.subplots(figsize=(width, 4.5))
    _columns(ax, policies, values, centre, styles)
    ax.axhline(0.0, color="grey", ls="--", lw=1)
    ax.set_ylabel("gap to best-known (%)\n(avg JCT / best-known schedule's - 1)")
    set_policy_ticks(ax, policies, column_inches=width / max(len(policies) + 1.2, 1))
    windows = max(len(v) for v in values.values())
    ax.set_title((title + "\n" if title else "") + f"a point per window of the optimality table ({windows}), "
                 "bar: geometric mean, band: 95% bootstrap CI", fontsize=9)
    return save_figure(fig, path)


__all__ = ["PLOTTED_OBJECTIVES", "objective_metrics", "plot_gaps", "plot_objectives", "window_gaps"]
