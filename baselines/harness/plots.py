"""PNG plots of a sweep: JCT CDFs, utilisation and queue over time, and a cluster timeline.

Every plot says what it shows in its title: the scenario and split, the policies and the seeds
(one seed for the per-episode plots). Times over an episode share one origin, the episode's
first decision (its first arrival): "hours since the first arrival" on every time axis.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping, Optional, Sequence

import numpy as np

from baselines.harness.episode import EpisodeResult
from baselines.harness.styles import PolicyStyle, policy_styles


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")             # files only: works without a display
    import matplotlib.pyplot as plt

    return plt


def _seeds_text(seeds: Sequence[int]) -> str:
    seeds = sorted(set(int(s) for s in seeds))
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    if seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"seeds {seeds[0]}-{seeds[-1]}"
    return "seeds " + ",".join(map(str, seeds))


def describe(episodes: Sequence[EpisodeResult]) -> str:
    """``"philly-v0 / test, seeds 0-4"``: the scenarios, splits and seeds of ``episodes``."""
    where = sorted({f"{e.record['scenario']} / {e.record['split']}" for e in episodes})
    return f"{', '.join(where)}, {_seeds_text([e.record['seed'] for e in episodes])}" if episodes else ""


def _title(ax, title: str, context: str) -> None:
    """The caller's title (if any) over a line saying which scenario, split and seeds (the parts
    the title does not say already)."""
    if title and context:
        context = ", ".join(part for part in context.split(", ") if part not in title)
    ax.set_title(f"{title}\n{context}" if title and context and context not in title else (title or context),
                 fontsize=10)


def run_styles(episodes: Sequence[EpisodeResult],
               styles: Optional[Mapping[str, PolicyStyle]] = None) -> Mapping[str, PolicyStyle]:
    """``styles`` (the run's, one look per policy across its plots), else one in the episodes' order."""
    return styles if styles is not None else policy_styles([e.record["policy"] for e in episodes])


def plot_jct_cdf(episodes: Sequence[EpisodeResult], path: "str | Path", title: str = "",
                 styles: Optional[Mapping[str, PolicyStyle]] = None) -> Path:
    """Empirical CDF of job completion times per policy (all recorded seeds pooled), each policy
    in its own colour (``styles``: :func:`baselines.harness.styles.policy_styles` of the run)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    by_policy: dict[str, list[np.ndarray]] = {}
    used = []
    for ep in episodes:
        if ep.jct is not None:
            by_policy.setdefault(ep.record["policy"], []).append(ep.jct)
            used.append(ep)
    styles = run_styles(episodes, styles)
    for policy, parts in by_policy.items():
        jct = np.sort(np.concatenate(parts))
        if len(jct):
            look = styles[policy]
            ax.step(jct / 3600.0, np.arange(1, len(jct) + 1) / len(jct), where="post", label=policy,
                    color=look.color, linestyle=look.linestyle)
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (hours, log scale)")
    ax.set_ylabel("fraction of jobs finished within")
    _title(ax, title or "JCT CDF", describe(used))
    ax.grid(alpha=0.3)
    outside = dict(loc="center left", bbox_to_anchor=(1.0, 0.5)) if len(by_policy) > 8 else {}
    ax.legend(title="policy", fontsize=8, **outside)          # many policies: beside the plot, hiding no line
    return save_figure(fig, path)


#: When the busy part of an episode (until the last job starts) is shorter than this share of the
#: whole (a few long jobs finishing alone), the time axis is linear to one hour and logarithmic
#: after, so that both the busy part and the tail are readable.
LONG_TAIL_SHARE = 0.4
TIME_LABEL = "hours since the first arrival"


#: The share of job starts that the busy part of an episode holds (the rest: restarts and late
#: arrivals into an idle cluster, which do not need a linear axis to be seen).
BUSY_STARTS = 0.9


def busy_until(episode: EpisodeResult) -> float:
    """Seconds from the episode's first arrival until its queue last held a job or until
    :data:`BUSY_STARTS` of its job starts were made, whichever is later: after that, a few long
    jobs finish."""
    s = episode.series
    if s is None or not len(s):
        return 0.0
    origin = float(s[0, 0])
    last = origin
    waiting = np.flatnonzero(s[:, 2] > 0)
    if len(waiting):
        last = float(s[min(waiting[-1] + 1, len(s) - 1), 0])       # the sample where the queue emptied
    starts = sorted(t for t, _, alloc in episode.allocations or () if alloc is not None)
    if starts:
        last = max(last, starts[int(BUSY_STARTS * (len(starts) - 1))])
    return last - origin


def set_time_axis(ax, end_hours: float, busy_hours: float) -> None:
    """The x axis of a plot over an episode: 0 to ``end_hours`` (the data's whole range), in
    hours since the first arrival; linear to 1 h and logarithmic after when the busy part
    (``busy_hours``) is under :data:`LONG_TAIL_SHARE` of the whole."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    end = max(float(end_hours), 1e-6)
    if end > 2.0 and busy_hours < LONG_TAIL_SHARE * end:
        ax.set_xscale("symlog", linthresh=1.0, linscale=0.5)
        ticks = [t for t in (0, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000) if t <= end]
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
        ax.set_xlabel(f"{TIME_LABEL} (linear to 1, then log scale)")
    else:
        ax.set_xlabel(TIME_LABEL)
    ax.set_xlim(0, end * 1.01)


def plot_utilization(episodes: Sequence[EpisodeResult], path: "str | Path", title: str = "",
                     styles: Optional[Mapping[str, PolicyStyle]] = None) -> Path:
    """GPU utilisation and pending-queue length over time, one line per policy (one seed each, in
    the policy's colour of ``styles``)."""
    plt = _pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    seen, used = set(), []
    end, busy = 0.0, 0.0
    styles = run_styles(episodes, styles)
    for ep in episodes:
        policy = ep.record["policy"]
        if ep.series is None or policy in seen:
            continue
        seen.add(policy)
        used.append(ep)
        s = ep.series
        hours = (s[:, 0] - s[0, 0]) / 3600.0
        end, busy = max(end, float(hours[-1]) if len(hours) else 0.0), max(busy, busy_until(ep) / 3600.0)
        look = dict(color=styles[policy].color, linestyle=styles[policy].linestyle)
        top.step(hours, s[:, 1] / max(ep.total_gpus, 1), where="post", label=policy, lw=1, **look)
        bottom.step(hours, s[:, 2], where="post", label=policy, lw=1, **look)
    top.set_ylabel("GPU utilisation (fraction of GPUs)")
    top.set_ylim(0, 1.05)
    bottom.set_ylabel("pending jobs")
    set_time_axis(bottom, end, busy)                  # shared with the top panel
    _title(top, title or "utilisation and queue", describe(used))
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    if used:                                          # beside the panels: it hides no line
        fig.legend(*top.get_legend_handles_labels(), title="policy", fontsize=8, loc="center left",
                   bbox_to_anchor=(1.0, 0.5))
    return save_figure(fig, path)


def natural_key(name: str) -> list:
    """Sort key that orders ``node-2`` before ``node-10``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(name))]


def _stints(episode: EpisodeResult) -> tuple[dict[int, list[tuple[float, float, int, bool]]], float]:
    """Per machine, ``(start, duration, job, preempted)`` bars; and the episode's time origin."""
    origin = float(episode.series[0, 0]) if episode.series is not None and len(episode.series) else 0.0
    end_time = float(episode.series[-1, 0]) if episode.series is not None and len(episode.series) else 0.0
    starts: dict[int, tuple[float, list]] = {}
    bars: dict[int, list[tuple[float, float, int, bool]]] = {}
    later_start: dict[int, int] = {}
    for t, job, alloc in episode.allocations:
        if alloc is not None:
            later_start[job] = later_start.get(job, 0) + 1
    seen_start: dict[int, int] = {}
    for t, job, alloc in episode.allocations:
        if alloc is not None:
            starts[job] = (t, alloc)
            seen_start[job] = seen_start.get(job, 0) + 1
        elif job in starts:
            t0, placed = starts.pop(job)
            preempted = seen_start[job] < later_start[job]          # it starts again later
            for machine, _ in placed:
                bars.setdefault(machine, []).append((t0, t - t0, job, preempted))
    for job, (t0, placed) in starts.items():          # still running at the end
        for machine, _ in placed:
            bars.setdefault(machine, []).append((t0, max(end_time - t0, 0.0), job, False))
    return bars, origin


def _lanes(stints: Sequence[tuple[float, float, int, bool]]) -> list[int]:
    """A lane per stint (sorted by start) so that stints overlapping in time get different lanes."""
    ends: list[float] = []
    lanes = []
    for s, d, _, _ in stints:
        lane = next((i for i, end in enumerate(ends) if end <= s), len(ends))
        if lane == len(ends):
            ends.append(s + d)
        else:
            ends[lane] = s + d
        lanes.append(lane)
    return lanes


#: Height of one lane of the timeline (one job on a machine at a time), in inches: readable
#: between these bounds; the figure grows with the lanes up to :data:`TIMELINE_MAX_INCHES`.
TIMELINE_LANE_INCHES = (0.06, 0.2)
TIMELINE_MAX_INCHES = 16.0
_ROW_GAP = 0.4                      # lanes of space between two machines' rows


def plot_timeline(episode: EpisodeResult, path: "str | Path", title: str = "", max_machines: int = 64) -> Path:
    """Which job held which machine when: one row per machine (grouped by GPU type, in natural
    order), as tall as the most jobs it ran at once (one lane each, so an 8-GPU machine shared by
    8 jobs stays readable), one bar per stint of a job, labelled with the job id where it is long
    enough. The time axis covers the whole episode (:func:`set_time_axis`)."""
    if episode.allocations is None:
        raise ValueError("the episode was not recorded (run it with record=True)")
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch

    plt = _pyplot()
    bars, origin = _stints(episode)
    n_all = len(episode.machine_names) or (max(bars) + 1 if bars else 1)
    names = list(episode.machine_names) or [str(i) for i in range(n_all)]
    types = list(episode.machine_types) or [""] * n_all
    order = sorted(range(n_all), key=lambda m: (types[m], natural_key(names[m])))[:max_machines]
    n = len(order)
    span = max((s + d - origin for rows in bars.values() for s, d, _, _ in rows), default=1.0) / 3600.0 or 1.0
    rows = []                                     # per machine: its stints, their lanes, its first lane
    y = 0.0
    for machine in order:
        stints = sorted(bars.get(machine, []))
        lanes = _lanes(stints)                    # jobs sharing the machine at once: one lane each
        rows.append((machine, stints, lanes, y))
        y += max(max(lanes, default=0) + 1, 1) + _ROW_GAP
    total = max(y - _ROW_GAP, 1.0)
    low, high = TIMELINE_LANE_INCHES
    lane_inches = min(high, max(low, (TIMELINE_MAX_INCHES - 2.0) / total))
    fig, ax = plt.subplots(figsize=(11, max(3.5, lane_inches * total + 2.0)))
    cmap = plt.get_cmap("tab20")
    # Every bar in one collection: thousands of artists would cost seconds per plot.
    corners, faces, edges, widths = [], [], [], []
    centres = []
    for machine, stints, lanes, y0 in rows:
        centres.append(y0 + (max(max(lanes, default=0) + 1, 1)) / 2)
        for (s, d, job, preempted), lane in zip(stints, lanes):
            x, w = (s - origin) / 3600.0, d / 3600.0
            bottom, top = y0 + lane + 0.05, y0 + lane + 0.95
            corners.append([(x, bottom), (x, top), (x + w, top), (x + w, bottom)])
            faces.append(cmap(job % 20))
            edges.append("red" if preempted else "white")
            widths.append(1.2 if preempted else 0.3)
            if w > 0.04 * span and lane_inches >= 0.11:        # room for the job id
                ax.text(x + w / 2, (bottom + top) / 2, str(job), ha="center", va="center", fontsize=6, clip_on=True)
    if corners:
        ax.add_collection(PolyCollection(np.array(corners), facecolors=faces, edgecolors=edges, linewidths=widths))
    ax.set_yticks(centres)
    ax.set_yticklabels([names[m] for m in order], fontsize=7 if n <= 40 else 5)
    ax.set_ylim(total + _ROW_GAP / 2, -_ROW_GAP / 2)
    ax.set_ylabel("machine (grouped by GPU type; a lane per job it runs at once)")
    # GPU type groups: a separator and the type's name at the group's first row.
    prev = None
    for i, (machine, _, _, y0) in enumerate(rows):
        if types[machine] != prev:
            if i:
                ax.axhline(y0 - _ROW_GAP / 2, color="0.3", lw=0.8)
            ax.text(1.005, y0, types[machine], transform=ax.get_yaxis_transform(), va="top",
                    ha="left", fontsize=8, fontweight="bold")
            prev = types[machine]
    set_time_axis(ax, span, busy_until(episode) / 3600.0)
    ax.grid(axis="x", alpha=0.3)
    shown = "" if n == n_all else f" (first {n} of {n_all} machines)"
    context = (f"{episode.record['scenario']} / {episode.record['split']}, policy {episode.record['policy']}, "
               f"seed {episode.record['seed']}{shown}")
    _title(ax, title or "cluster timeline: which job held which machine", context)
    ax.legend(handles=[Patch(facecolor=cmap(3), edgecolor="white", label="a job's stint (label: job id)"),
                       Patch(facecolor=cmap(3), edgecolor="red", linewidth=1.2, label="stint ended by preemption")],
              loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=1, fontsize=7, frameon=False)
    return save_figure(fig, path)


def save_figure(fig, path: "str | Path") -> Path:
    """Lay out, write (creating the folder) and close a figure; returns the path."""
    from baselines.harness.files import atomic_write

    path = Path(path)
    fig.tight_layout()
    try:           # atomically, so that a plot joins the other files of a written_together block
        atomic_write(path, lambda fh: fig.savefig(fh, dpi=110, bbox_inches="tight", format=path.suffix.lstrip(".") or "png"),
                     binary=True)
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    return path
