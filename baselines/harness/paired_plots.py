"""PNG plots of paired results: per-window ratios to a reference, and metrics against offered load."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from baselines.harness.metric_labels import metric_name, plot_scale
from baselines.harness.plots import save_figure
from baselines.harness.stats import DEFAULT_METRIC, DEFAULT_REFERENCE, paired_table
from baselines.harness.styles import PolicyStyle, policy_styles


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")             # files only: works without a display
    import matplotlib.pyplot as plt

    return plt


#: Policy names on a tick: the font sizes tried, largest first, and the most lines a name may wrap to.
_TICK_FONTS, _MAX_LINES = (9, 7), 3
_BREAK_AFTER = re.compile(r"[^+/(:.\-]*[+/(:.\-]?")      # a name's pieces, each ending at a separator


def wrap_name(name: str, width: int) -> str:
    """``name`` in lines of at most ``width`` characters, broken after ``+ / ( : . -`` where it
    can be (``tiresias+`` / ``fastest``), else inside a piece that is longer than a line."""
    lines, line = [], ""
    for piece in (p for p in _BREAK_AFTER.findall(name) if p):
        while len(piece) > width:
            if line:
                lines.append(line)
                line = ""
            lines.append(piece[:width])
            piece = piece[width:]
        if line and len(line) + len(piece) > width:
            lines.append(line)
            line = ""
        line += piece
    return "\n".join(lines + [line] if line else lines)


def set_policy_ticks(ax, labels: Sequence[str], column_inches: float) -> None:
    """One tick per column with its policy's name, laid out so that no two names overlap:
    horizontal and wrapped to the column's width (at most :data:`_MAX_LINES` lines, in a smaller
    font if needed), else written vertically."""
    ax.set_xticks(range(len(labels)))
    for size in _TICK_FONTS:
        width = max(int(0.9 * column_inches / (0.62 * size / 72)), 1)   # characters across a column
        wrapped = [wrap_name(label, width) for label in labels]
        if all(w.count("\n") < _MAX_LINES for w in wrapped):
            ax.set_xticklabels(wrapped, fontsize=size)
            return
    ax.set_xticklabels(labels, fontsize=_TICK_FONTS[-1], rotation=90)


def paired_title(metric: str, reference: str, where: str = "", role: Optional[str] = None) -> str:
    """The title of a paired plot: which metric (as ``--metric`` names it; ``avg JCT`` for the
    default), against which policy, and ``where`` (scenario / split); under it, which yardstick
    that policy is (``role``: :func:`baselines.yardstick.yardstick_words`) and, for a metric where
    higher is better, that a ratio above 1 is better: ``"deadline_attainment / las-migrate's per
    window, philly-slo-v1 / test"`` then ``"(the scenario's yardstick of deadline_attainment;
    higher is better)"``."""
    from baselines.harness.stats import lower_is_better

    head = f"{'avg JCT' if metric == DEFAULT_METRIC else metric} / {reference}'s per window"
    head = f"{head}, {where}" if where else head
    notes = [*([role] if role else []), *([] if lower_is_better(metric) else ["higher is better"])]
    return f"{head}\n({'; '.join(notes)})" if notes else head


def plot_paired(records: Sequence[dict[str, Any]], path: "str | Path", reference: str = DEFAULT_REFERENCE,
                metric: str = DEFAULT_METRIC, title: str = "",
                styles: Optional[Mapping[str, PolicyStyle]] = None) -> Path:
    """One column per policy: a point per window at ``metric(policy) / metric(reference)`` on that
    window (log scale, in the policy's colour of ``styles``), the geometric mean as a bar and its
    95% bootstrap interval as a band. Truncated windows are left out (see :mod:`baselines.harness.stats`)."""
    table = paired_table(records, reference, metric)
    summaries = [s for p, s in table.items() if p != s.reference]
    styles = styles if styles is not None else policy_styles([r["policy"] for r in records])
    plt = _pyplot()
    width = max(5.0, 1.1 * len(summaries) + 2.5)
    fig, ax = plt.subplots(figsize=(width, 4.5))
    rng = np.random.default_rng(0)                     # the jitter only: the same picture every run
    for i, s in enumerate(summaries):
        if s.n:
            ax.scatter(i + rng.uniform(-0.15, 0.15, s.n), s.ratios, s=14, alpha=0.6, color=styles[s.policy].color,
                       zorder=3)
            ax.hlines(s.geo_mean, i - 0.3, i + 0.3, color="k", lw=2, zorder=4)
        if np.isfinite(s.ci_low):
            ax.fill_between([i - 0.3, i + 0.3], s.ci_low, s.ci_high, color="0.55", alpha=0.35, lw=0, zorder=2)
    ax.axhline(1.0, color="grey", ls="--", lw=1)
    ax.set_yscale("log")
    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(lambda y, _: f"{y:g}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    ax.tick_params(axis="y", which="minor", labelsize=7)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    ax.legend(handles=[Line2D([], [], marker="o", ls="", color="0.4", alpha=0.6,
                              label="one window (the policy's colour)"),
                       Line2D([], [], color="k", lw=2, label="geometric mean"),
                       Patch(color="0.55", alpha=0.35, label="95% bootstrap CI")], fontsize=7, loc="best")
    set_policy_ticks(ax, [s.policy for s in summaries], column_inches=width / max(len(summaries) + 1.2, 1))
    ax.set_xlim(-0.6, max(len(summaries) - 0.4, 0.6))
    ax.set_ylabel(f"{metric_name(metric)} / {reference}'s\n(per window, log scale)")
    n = max((s.n for s in summaries), default=0)
    title = title or f"paired ratio to {reference}: {n} windows, geometric mean and 95% CI"
    longest = max(len(line) for line in title.split("\n"))
    # A long title (a metric's name and its yardstick) in a smaller font, so that it fits the figure.
    ax.set_title(title, **({"fontsize": max(7.0, min(12.0, 12.0 * 9.0 * width / (longest * 1.1)))}
                           if longest > 60 else {}))
    ax.grid(alpha=0.3, axis="y", which="both")
    return save_figure(fig, path)


def plot_load_sweep(rows: Sequence[dict[str, Any]], path: "str | Path",
                    metrics: Sequence[str] = ("avg_jct", "p95_jct", "gpu_utilization"), title: str = "",
                    reference: Optional[str] = None, styles: Optional[Mapping[str, PolicyStyle]] = None) -> Path:
    """One panel per metric: the mean over windows against offered load, one curve per policy with
    its 95% bootstrap band (``rows`` from :func:`baselines.harness.load_sweep.sweep_rows`), and,
    where the rows carry them, the paired ratios to ``reference``; one legend for every panel,
    axes in words and units (:mod:`baselines.harness.metric_labels`)."""
    plt = _pyplot()
    ratio = any("ratio_avg_jct" in r for r in rows)
    panels = len(metrics) + ratio
    fig, axes = plt.subplots(1, panels, figsize=(4.6 * panels, 4.2), squeeze=False)
    policies = list(dict.fromkeys(r["policy"] for r in rows))
    styles = styles if styles is not None else policy_styles(policies)
    load_label = metric_name("offered_load") + " (target, x capacity)"
    if ratio:                # the paired view: windows' spread cancels, policies' differences stay
        ax = axes[0][-1]
        for policy in policies:
            mine = sorted((r for r in rows if r["policy"] == policy and "ratio_avg_jct" in r), key=lambda r: r["load"])
            x = np.array([r["load"] for r in mine])
            look = styles[policy]
            ax.plot(x, [r["ratio_avg_jct"] for r in mine], marker=look.marker, ms=4, color=look.color,
                    linestyle=look.linestyle, label=policy)
            ax.fill_between(x, [r["ratio_avg_jct_lo"] for r in mine], [r["ratio_avg_jct_hi"] for r in mine],
                            color=look.color, alpha=0.2, lw=0)
        ax.axhline(1.0, color="grey", ls="--", lw=1)
        ax.set_xlabel(load_label)
        ax.set_ylabel(f"{metric_name('avg_jct')} / {reference or 'the reference'}'s\n"
                      "(per window, geometric mean)")
        ax.grid(alpha=0.3)
    for ax, metric in zip(axes[0], metrics):
        scale, label = plot_scale(metric)
        for policy in policies:
            mine = sorted((r for r in rows if r["policy"] == policy), key=lambda r: r["load"])
            x = np.array([r["load"] for r in mine])
            y = np.array([r[metric] for r in mine]) / scale
            lo = np.array([r[metric + "_lo"] for r in mine]) / scale
            hi = np.array([r[metric + "_hi"] for r in mine]) / scale
            look = styles[policy]
            ax.plot(x, y, marker=look.marker, ms=4, color=look.color, linestyle=look.linestyle, label=policy)
            ax.fill_between(x, lo, hi, color=look.color, alpha=0.2, lw=0)
        ax.set_xlabel(load_label)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, title="policy (band: 95% CI)", loc="upper center", bbox_to_anchor=(0.5, 0.0),
               ncol=min(len(labels), 6) or 1, fontsize=9)
    fig.suptitle(title or "metrics against offered load (mean over windows, 95% CI)")
    return save_figure(fig, path)
