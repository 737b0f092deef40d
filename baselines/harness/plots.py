"""PNG plots of a sweep: JCT CDFs, utilisation and queue over time, and a cluster timeline."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from baselines.harness.episode import EpisodeResult


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")             # files only: works without a display
    import matplotlib.pyplot as plt

    return plt


def plot_jct_cdf(episodes: Sequence[EpisodeResult], path: "str | Path", title: str = "") -> Path:
    """Empirical CDF of job completion times per policy (all recorded seeds pooled)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    by_policy: dict[str, list[np.ndarray]] = {}
    for ep in episodes:
        if ep.jct is not None:
            by_policy.setdefault(ep.record["policy"], []).append(ep.jct)
    for policy, parts in by_policy.items():
        jct = np.sort(np.concatenate(parts))
        if len(jct):
            ax.step(jct / 3600.0, np.arange(1, len(jct) + 1) / len(jct), where="post", label=policy)
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (hours, log scale)")
    ax.set_ylabel("fraction of jobs")
    ax.set_title(title or "JCT CDF")
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, path)


def plot_utilization(episodes: Sequence[EpisodeResult], path: "str | Path", title: str = "") -> Path:
    """GPU utilisation and pending-queue length over time, one line per policy (one seed each)."""
    plt = _pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    seen = set()
    for ep in episodes:
        policy = ep.record["policy"]
        if ep.series is None or policy in seen:
            continue
        seen.add(policy)
        s = ep.series
        hours = (s[:, 0] - s[0, 0]) / 3600.0
        top.step(hours, s[:, 1] / max(ep.total_gpus, 1), where="post", label=policy, lw=1)
        bottom.step(hours, s[:, 2], where="post", label=policy, lw=1)
    top.set_ylabel("GPU utilisation")
    top.set_ylim(0, 1.05)
    bottom.set_ylabel("pending jobs")
    bottom.set_xlabel("hours since the first arrival")
    top.set_title(title or "utilisation and queue")
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    top.legend(fontsize=8)
    return _save(fig, path)


def plot_timeline(episode: EpisodeResult, path: "str | Path", title: str = "", max_machines: int = 64) -> Path:
    """Which job held which machine when: one row per machine, one coloured bar per job stint."""
    if episode.allocations is None:
        raise ValueError("the episode was not recorded (run it with record=True)")
    plt = _pyplot()
    starts: dict[int, tuple[float, list]] = {}
    bars: dict[int, list[tuple[float, float, int]]] = {}
    end_time = episode.series[-1, 0] if episode.series is not None and len(episode.series) else 0.0
    for t, job, alloc in episode.allocations:
        if alloc is not None:
            starts[job] = (t, alloc)
        elif job in starts:
            t0, placed = starts.pop(job)
            for machine, _ in placed:
                bars.setdefault(machine, []).append((t0, t - t0, job))
    for job, (t0, placed) in starts.items():          # still running at the end
        for machine, _ in placed:
            bars.setdefault(machine, []).append((t0, max(end_time - t0, 0.0), job))
    n = min(len(episode.machine_names) or (max(bars) + 1 if bars else 1), max_machines)
    fig, ax = plt.subplots(figsize=(10, max(3, 0.22 * n + 1.5)))
    cmap = plt.get_cmap("tab20")
    origin = min((b[0] for rows in bars.values() for b in rows), default=0.0)
    for machine in range(n):
        rows = bars.get(machine, [])
        if rows:
            ax.broken_barh([((s - origin) / 3600.0, d / 3600.0) for s, d, _ in rows], (machine - 0.4, 0.8),
                           facecolors=[cmap(j % 20) for _, _, j in rows], edgecolor="none")
    labels = list(episode.machine_names[:n]) if episode.machine_names else [str(i) for i in range(n)]
    ax.set_yticks(range(n))
    ax.set_yticklabels(labels, fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("hours since the first start")
    ax.set_title(title or f"cluster timeline ({episode.record['policy']}, seed {episode.record['seed']})")
    return _save(fig, path)


def _save(fig, path: "str | Path") -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path
