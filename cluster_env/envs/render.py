"""Rendering of the cluster and the queue, kept apart from the dynamics.

``render_ansi`` returns text: one line per machine (GPU type, a cell per GPU showing the job that
holds it, measured speed) and the head of the queue. ``render_rgb`` returns an (H, W, 3) uint8
image that reads alone: a header (time, phase, queue and cluster counts), one labelled row per
machine (name and GPU type, a cell per GPU coloured and numbered by the job holding it) and the
head of the queue. :class:`Renderer` draws the same frame in a matplotlib window (``"human"``).
"""
from __future__ import annotations

import numpy as np

from cluster_env.core.simulator import ClusterSimulator

_MAX_MACHINES_TEXT = 40
_CELL = 6          # pixels per GPU cell
_PAD = 1


def _job_colour(job: int) -> np.ndarray:
    # A fixed pseudo-random colour per job id (golden-ratio hue walk), never black.
    h = (job * 0.6180339887) % 1.0
    i = int(h * 6)
    f = h * 6 - i
    v, s = 0.95, 0.65
    p, q, t = v * (1 - s), v * (1 - f * s), v * (1 - (1 - f) * s)
    rgb = [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)][i % 6]
    return (np.array(rgb) * 255).astype(np.uint8)


def machine_cells(sim: ClusterSimulator, machine: int) -> list[int]:
    """Job id holding each GPU of ``machine`` (-1 = free), in a stable order."""
    cells: list[int] = []
    for job, g in sorted(sim.machine_jobs[machine].items()):
        cells.extend([job] * g)
    cells.extend([-1] * (int(sim.machine_gpus[machine]) - len(cells)))
    return cells


def render_ansi(sim: ClusterSimulator, phase: str) -> str:
    lines = [f"t={sim.now:,.0f}s  phase={phase}  pending={len(sim.pending)}  running={sim.num_running}  "
             f"finished={sim.finished_count}/{sim.num_jobs}  free GPUs={int(sim.machines.free.sum())}/{sim.total_gpus}"]
    names = sim.cluster.gpu_type_names
    for m in range(min(sim.num_machines, _MAX_MACHINES_TEXT)):
        cells = " ".join("." if j < 0 else str(j % 1000) for j in machine_cells(sim, m))
        lines.append(f"{sim.cluster.machine_names[m]:>14} {names[sim.machine_type[m]]:>8} "
                     f"speed~{sim.machines.measured[m]:.2f} [{cells}]")
    if sim.num_machines > _MAX_MACHINES_TEXT:
        lines.append(f"... {sim.num_machines - _MAX_MACHINES_TEXT} more machines")
    head = ", ".join(f"{j}({int(sim.gpus[j])}g)" for j in sim.pending[:10])
    lines.append(f"queue: {head}{' ...' if len(sim.pending) > 10 else ''}")
    if sim.placing >= 0:
        lines.append(f"placing job {sim.placing}: {sim.placing_need} GPU(s) still to place")
    return "\n".join(lines)


_MAX_MACHINES_IMAGE = 40
_FREE = (0.80, 0.80, 0.80)


def draw_frame(fig, sim: ClusterSimulator, phase: str) -> None:
    """Draw the labelled frame of the cluster into the matplotlib figure ``fig`` (cleared first)."""
    fig.clear()
    ax = fig.add_axes((0.2, 0.02, 0.78, 0.86))
    n = min(sim.num_machines, _MAX_MACHINES_IMAGE)
    width = max(int(sim.machine_gpus[:n].max()) if n else 1, 8)
    names, types = sim.cluster.machine_names, sim.cluster.gpu_type_names
    for m in range(n):
        for k, job in enumerate(machine_cells(sim, m)):
            colour = _FREE if job < 0 else tuple(_job_colour(job) / 255.0)
            ax.add_patch(_rect(k, m, colour))
            if job >= 0 and width <= 16:
                ax.text(k + 0.5, m + 0.5, str(job), ha="center", va="center", fontsize=6)
        ax.text(-0.3, m + 0.5, f"{names[m]} ({types[sim.machine_type[m]]})", ha="right", va="center", fontsize=7)
    queue_row = n + 1
    ax.text(-0.3, queue_row + 0.5, "queue", ha="right", va="center", fontsize=7, fontweight="bold")
    for k, job in enumerate(sim.pending[:width]):
        ax.add_patch(_rect(k, queue_row, tuple(_job_colour(job) / 255.0)))
        ax.text(k + 0.5, queue_row + 0.5, f"{job}\n{int(sim.gpus[job])}g", ha="center", va="center", fontsize=5)
    if len(sim.pending) > width:
        ax.text(width + 0.1, queue_row + 0.5, f"+{len(sim.pending) - width}", va="center", fontsize=7)
    ax.set_xlim(0, width + 1)
    ax.set_ylim(queue_row + 1.2, -0.2)
    ax.axis("off")
    more = f", {sim.num_machines - n} more machines not shown" if sim.num_machines > n else ""
    placing = f", placing job {sim.placing}" if sim.placing >= 0 else ""
    fig.suptitle(f"t = {sim.now / 3600:,.2f} h, {phase} phase{placing}: {len(sim.pending)} pending, "
                 f"{sim.num_running} running, {sim.finished_count}/{sim.num_jobs} finished, "
                 f"{int(sim.machines.free.sum())}/{sim.total_gpus} GPUs free{more}\n"
                 "cells: GPUs, coloured and numbered by the job holding them (grey: free)", fontsize=8)


def _rect(x: float, y: float, colour):
    from matplotlib.patches import Rectangle

    return Rectangle((x + 0.05, y + 0.08), 0.9, 0.84, facecolor=colour, edgecolor="none")


def _figsize(sim: ClusterSimulator) -> tuple[float, float]:
    return 8.0, 1.0 + 0.22 * (min(sim.num_machines, _MAX_MACHINES_IMAGE) + 2)


class Renderer:
    """Frames of one environment: ``rgb`` arrays (an off-screen figure, reused) and the ``human``
    window (a pyplot figure, opened on first use, closed by :meth:`close`)."""

    def __init__(self, fps: float = 4.0) -> None:
        self.fps = fps
        self._fig = None
        self._window = None

    def rgb(self, sim: ClusterSimulator, phase: str) -> np.ndarray:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        size = _figsize(sim)
        if self._fig is None or tuple(self._fig.get_size_inches()) != size:
            self._fig = Figure(figsize=size, dpi=100)
            FigureCanvasAgg(self._fig)
        draw_frame(self._fig, sim, phase)
        self._fig.canvas.draw()
        return np.asarray(self._fig.canvas.buffer_rgba())[..., :3].copy()

    def human(self, sim: ClusterSimulator, phase: str) -> None:
        import matplotlib
        import matplotlib.pyplot as plt

        interactive = matplotlib.get_backend().lower() not in {"agg", "pdf", "ps", "svg", "cairo", "template", "pgf"}
        if self._window is None or not plt.fignum_exists(self._window.number):
            self._window = plt.figure("cluster_env", figsize=_figsize(sim))
            if interactive:
                plt.show(block=False)
        draw_frame(self._window, sim, phase)
        self._window.canvas.draw_idle()
        if interactive:
            plt.pause(1.0 / self.fps)

    def close(self) -> None:
        if self._window is not None:
            import matplotlib.pyplot as plt

            plt.close(self._window)
            self._window = None
        self._fig = None


def render_rgb(sim: ClusterSimulator, phase: str = "order") -> np.ndarray:
    """One labelled frame as an (H, W, 3) uint8 array (see the module docstring)."""
    return Renderer().rgb(sim, phase)
