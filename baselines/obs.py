"""Read the environment's observation arrays by feature name.

Baselines see exactly what an RL agent sees: the Dict observation of ``cluster_env`` and the
``infos`` it returns. Columns are looked up from the environment's published feature tuples, so a
change of layout there cannot silently shift what a heuristic reads.
"""
from __future__ import annotations

import numpy as np

from cluster_env.envs.observation import GLOBAL_FEATURES, JOB_FEATURES, MACHINE_FEATURES, PLACING_FEATURES

J = {name: i for i, name in enumerate(JOB_FEATURES)}
M = {name: i for i, name in enumerate(MACHINE_FEATURES)}
G = {name: i for i, name in enumerate(GLOBAL_FEATURES)}
P = {name: i for i, name in enumerate(PLACING_FEATURES)}


def is_place_phase(obs: dict) -> bool:
    """Whether the observation is of the PLACE phase (either agent's observation works)."""
    return bool(obs["global"][G["phase"]] > 0.5)


def from_log(values: np.ndarray) -> np.ndarray:
    """Invert the environment's ``log1p(seconds)`` encoding (float64 for exact comparisons)."""
    return np.expm1(values.astype(np.float64))


def job_gpus(jobs: np.ndarray) -> np.ndarray:
    """GPUs requested per candidate row (rows must be valid)."""
    return np.rint(np.exp2(jobs[:, J["gpus_log2"]].astype(np.float64))).astype(np.int64)


def placing_need(obs: dict) -> int:
    """GPUs the job being placed still needs."""
    return int(round(2.0 ** float(obs["placing"][P["need_log2"]]) - 1.0))


def machine_free_gpus(machines: np.ndarray) -> np.ndarray:
    """Free GPUs per machine (exact: the feature is free / 8)."""
    return np.rint(machines[:, M["free_gpus"]].astype(np.float64) * 8.0).astype(np.int64)


def clairvoyant(obs: dict) -> bool:
    """Whether job durations are visible in this environment."""
    return bool(obs["global"][G["clairvoyant"]] > 0.5)

