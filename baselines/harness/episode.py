"""One evaluation episode: build the environment a policy needs, run it, collect its record.

The harness reads the simulator only to *record* (utilisation and queue over time, which job held
which machine, per-job completion times) after the policy has acted; policies never see it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

import cluster_env
from cluster_env.core.metrics import METRIC_KEYS
from cluster_env.scenarios.base import Scenario

#: Columns of :attr:`EpisodeResult.series`.
SERIES_COLUMNS = ("time", "busy_gpus", "pending_jobs", "running_jobs")


@dataclass
class EpisodeResult:
    """What one episode produced.

    ``record`` is the flat result row (policy, scenario, split, seed, every metric, steps, return,
    wall time). The arrays are present when the episode was recorded.
    """

    record: dict[str, Any]
    jct: Optional[np.ndarray] = None                 # (finished jobs,) completion times, seconds
    series: Optional[np.ndarray] = None              # (samples, 4) SERIES_COLUMNS, one row per instant
    allocations: Optional[list] = None               # [(time, job, [(machine, gpus)] or None)]
    machine_names: tuple[str, ...] = field(default_factory=tuple)
    machine_gpus: Optional[np.ndarray] = None        # (M,)
    total_gpus: int = 0


def env_settings(policy: Any, env_kwargs: Optional[dict] = None) -> dict:
    """The environment arguments for ``policy``: the user's, plus what the policy requires.

    A user setting that contradicts a requirement (e.g. ``clairvoyant=False`` for SJF) is an error
    rather than a silent override.
    """
    settings = dict(env_kwargs or {})
    for key, value in dict(getattr(policy, "env_overrides", {}) or {}).items():
        if key in settings and settings[key] != value:
            name = getattr(policy, "name", type(policy).__name__)
            raise ValueError(f"policy {name!r} needs {key}={value!r} but env_kwargs sets {key}={settings[key]!r}")
        settings[key] = value
    return settings


def policy_name(policy: Any) -> str:
    return str(getattr(policy, "name", type(policy).__name__))


def run_episode(policy: Any, scenario: "str | Scenario", split: str, seed: int, env_kwargs: Optional[dict] = None,
                record: bool = False, env: Any = None) -> EpisodeResult:
    """Run ``policy`` for one episode of ``scenario``/``split`` with ``seed``.

    Args:
        policy: any object with ``act(observations, infos)`` and ``reset(seed)``.
        scenario, split, seed: the episode (a scenario name or object; the seed drives both the
            environment and the policy).
        env_kwargs: environment overrides (merged with the policy's ``env_overrides``).
        record: also keep completion times, the utilisation/queue series and the allocations.
        env: an environment to reuse (must have been built with the same settings).
    """
    if not callable(getattr(policy, "act", None)) or not callable(getattr(policy, "reset", None)):
        raise TypeError(f"a policy needs act(observations, infos) and reset(seed); got {policy!r}")
    if env is None:
        env = cluster_env.parallel_env(scenario, split=split, **env_settings(policy, env_kwargs))
    t0 = time.perf_counter()
    policy.reset(seed)
    obs, infos = env.reset(seed=seed)
    base = getattr(env, "unwrapped", env)
    sim = base.sim
    series: list[tuple[float, int, int, int]] = []
    if record:
        sim.allocation_log = []
        series.append((sim.now, sim.total_gpus - sim.free_total, len(sim.pending), sim.num_running))
    total, steps = 0.0, 0
    while env.agents:
        obs, rewards, _, _, infos = env.step(policy.act(obs, infos))
        total += rewards["orderer"]
        steps += 1
        if record:
            sample = (sim.now, sim.total_gpus - sim.free_total, len(sim.pending), sim.num_running)
            if sample[0] == series[-1][0]:
                series[-1] = sample          # keep the state after the last decision of an instant
            else:
                series.append(sample)
    wall = time.perf_counter() - t0
    metrics = infos["orderer"]["metrics"]
    row: dict[str, Any] = {"policy": policy_name(policy), "scenario": getattr(scenario, "name", scenario),
                           "split": split, "seed": int(seed)}
    row.update({k: metrics[k] for k in METRIC_KEYS})
    row.update({"return": total, "steps": steps, "wall_s": wall})
    result = EpisodeResult(record=row)
    if record:
        done = ~np.isnan(sim.jobs.finish)
        result.jct = (sim.jobs.finish - sim.submit)[done]
        result.series = np.array(series, dtype=np.float64)
        result.allocations = sim.allocation_log
        result.machine_names = tuple(base.cluster.machine_names)
        result.machine_gpus = np.asarray(sim.machine_gpus).copy()
        result.total_gpus = int(sim.total_gpus)
    return result
