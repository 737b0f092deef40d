"""Rendering of the cluster and the queue, kept apart from the dynamics.

``render_ansi`` returns text: one line per machine (GPU type, a cell per GPU showing the job that
holds it, measured speed) and the head of the queue. ``render_rgb`` returns an (H, W, 3) uint8
image: a row of cells per machine, coloured by job, then a bar of pending jobs.
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


def render_rgb(sim: ClusterSimulator) -> np.ndarray:
    width_cells = max(int(sim.machine_gpus.max()), 8)
    rows = sim.num_machines + 2  # one blank separator row, one queue row
    img = np.full((rows * _CELL, width_cells * _CELL, 3), 30, dtype=np.uint8)
    for m in range(sim.num_machines):
        y = m * _CELL
        for k, job in enumerate(machine_cells(sim, m)):
            colour = np.array([70, 70, 70], np.uint8) if job < 0 else _job_colour(job)
            img[y + _PAD: y + _CELL - _PAD, k * _CELL + _PAD: (k + 1) * _CELL - _PAD] = colour
    y = (sim.num_machines + 1) * _CELL
    for k, job in enumerate(sim.pending[:width_cells]):
        img[y + _PAD: y + _CELL - _PAD, k * _CELL + _PAD: (k + 1) * _CELL - _PAD] = _job_colour(job)
    return img
