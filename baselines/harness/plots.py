"""PNG plots of a sweep: JCT CDFs, utilisation and queue over time, and a cluster timeline.

Every plot says what it shows in its title: the scenario and split, the policies and the seeds
(one seed for the per-episode plots). Times over an episode share one origin, the episode's
first decision (its first arrival): "hours since the first arrival" on every time axis.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

import numpy as np

from baselines.harness.episode import EpisodeResult


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
    """The caller's title (if any) over a line saying which scenario, split and seeds."""
    ax.set_title(f"{title}\n{context}" if title and context and context not in title else (title or context),
                 fontsize=10)


def plot_jct_cdf(episodes: Sequence[EpisodeResult], path: "str | Path", title: str = "") -> Path:
    """Empirical CDF of job completion times per policy (all recorded seeds pooled)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    by_policy: dict[str, list[np.ndarray]] = {}
    used = []
    for ep in episodes:
        if ep.jct is not None:
            by_policy.setdefault(ep.record["policy"], []).append(ep.jct)
            used.append(ep)
    for policy, parts in by_policy.items():
        jct = np.sort(np.concatenate(parts))
        if len(jct):
            ax.step(jct / 3600.0, np.arange(1, len(jct) + 1) / len(jct), where="post", label=policy)
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (hours, log scale)")
    ax.set_ylabel("fraction of jobs finished within")
    _title(ax, title or "JCT CDF", describe(used))
    ax.grid(alpha=0.3)
    ax.legend(title="policy", fontsize=8)
    return save_figure(fig, path)


def plot_utilization(episodes: Sequence[EpisodeResult], path: "str | Path", title: str = "") -> Path:
    """GPU utilisation and pending-queue length over time, one line per policy (one seed each)."""
    plt = _pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    seen, used = set(), []
    for ep in episodes:
        policy = ep.record["policy"]
        if ep.series is None or policy in seen:
            continue
        seen.add(policy)
        used.append(ep)
        s = ep.series
        hours = (s[:, 0] - s[0, 0]) / 3600.0
        top.step(hours, s[:, 1] / max(ep.total_gpus, 1), where="post", label=policy, lw=1)
        bottom.step(hours, s[:, 2], where="post", label=policy, lw=1)
    top.set_ylabel("GPU utilisation")
    top.set_ylim(0, 1.05)
    bottom.set_ylabel("pending jobs")
    bottom.set_xlabel("hours since the first arrival")
    _title(top, title or "utilisation and queue", describe(used))
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    top.legend(title="policy", fontsize=8)
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


def plot_timeline(episode: EpisodeResult, path: "str | Path", title: str = "", max_machines: int = 64) -> Path:
    """Which job held which machine when: one row per machine (grouped by GPU type, in natural
    order), one bar per stint of a job, labelled with the job id where it is long enough."""
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
    fig, ax = plt.subplots(figsize=(11, max(3.5, 0.26 * n + 2.0)))
    cmap = plt.get_cmap("tab20")
    # Every bar in one collection, in the order (and with the corners) that a broken_barh call per
    # stint drew them: the same pixels, but thousands of artists cost seconds per plot.
    corners, faces, edges, widths = [], [], [], []
    for row, machine in enumerate(order):
        stints = sorted(bars.get(machine, []))
        lanes = _lanes(stints)                    # jobs sharing the machine at once: one lane each
        height = 0.8 / max(max(lanes, default=0) + 1, 1)
        for (s, d, job, preempted), lane in zip(stints, lanes):
            x, w = (s - origin) / 3600.0, d / 3600.0
            y = row - 0.4 + lane * height
            top = y + ((y + height) - y)          # broken_barh's y0 + (converted height)
            corners.append([(x, y), (x, top), (x + w, top), (x + w, y)])
            faces.append(cmap(job % 20))
            edges.append("red" if preempted else "white")
            widths.append(1.2 if preempted else 0.3)
            if w > 0.04 * span and n <= 40 and height >= 0.26:       # room for the job id
                ax.text(x + w / 2, y + height / 2, str(job), ha="center", va="center", fontsize=6, clip_on=True)
    if corners:
        ax.add_collection(PolyCollection(np.array(corners), facecolors=faces, edgecolors=edges, linewidths=widths))
    ax.set_yticks(range(n))
    ax.set_yticklabels([names[m] for m in order], fontsize=7 if n <= 40 else 5)
    ax.set_ylim(n - 0.5, -0.5)
    # GPU type groups: a separator and the type's name at the group's first row.
    prev = None
    for row, machine in enumerate(order):
        if types[machine] != prev:
            if row:
                ax.axhline(row - 0.5, color="0.3", lw=0.8)
            ax.text(1.005, row - 0.4, types[machine], transform=ax.get_yaxis_transform(), va="top",
                    ha="left", fontsize=8, fontweight="bold")
            prev = types[machine]
    ax.set_xlim(0, span * 1.01)
    ax.set_xlabel("hours since the first arrival")
    ax.grid(axis="x", alpha=0.3)
    shown = "" if n == n_all else f" (first {n} of {n_all} machines)"
    context = (f"{episode.record['scenario']} / {episode.record['split']}, policy {episode.record['policy']}, "
               f"seed {episode.record['seed']}{shown}")
    _title(ax, title or "cluster timeline: which job held which machine", context)
    ax.legend(handles=[Patch(facecolor=cmap(3), edgecolor="white", label="a job's stint (label: job id)"),
                       Patch(facecolor=cmap(3), edgecolor="red", linewidth=1.2, label="stint ended by preemption")],
              loc="upper right", fontsize=7, framealpha=0.9)
    return save_figure(fig, path)


def save_figure(fig, path: "str | Path") -> Path:
    """Lay out, write (creating the folder) and close a figure; returns the path."""
    from baselines.harness.files import atomic_write

    path = Path(path)
    fig.tight_layout()
    try:           # atomically, so that a plot joins the other files of a written_together block
        atomic_write(path, lambda fh: fig.savefig(fh, dpi=110, format=path.suffix.lstrip(".") or "png"),
                     binary=True)
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    return path
