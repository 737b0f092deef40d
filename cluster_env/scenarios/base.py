"""Scenarios: named, versioned bundles of a cluster, a workload source, model parameters,
window sizes, information mode, and disjoint train / validation / test splits.

A scenario builds one episode's instance with :meth:`Scenario.sample`: the split's slice of the
workload (a contiguous window of ``jobs_per_episode`` jobs at a seeded offset, or the whole
split), its submit times scaled by ``time_scale`` and rebased to start at 0, then, when the scenario
has a default ``load`` or the caller gives one, scaled again so that the window's offered load
(measured as ``load_measure`` says) equals it (:mod:`cluster_env.scenarios.load`).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Optional

import numpy as np

from cluster_env.core.config import SchedulingConfig, WorldConfig
from cluster_env.core.instance import Cluster, Workload

if TYPE_CHECKING:
    from cluster_env.scenarios.hardware import HardwareWorld

SPLITS = ("train", "validation", "test")


@dataclass(frozen=True)
class Scenario:
    """A named, versioned environment configuration."""

    name: str                                      # e.g. "philly-v0"
    description: str
    cluster: Callable[[], Cluster]                 # builds the cluster (cached by the loaders)
    workload: Callable[[], Workload]               # the whole workload source, sorted by submit
    splits: dict[str, tuple[float, float]]         # split -> [start, end) fraction of the jobs
    jobs_per_episode: Optional[int] = None         # None: the whole split is one episode
    time_scale: float = 1.0                        # multiplies submit times (< 1 compresses load)
    world: WorldConfig = field(default_factory=WorldConfig)
    scheduling: SchedulingConfig = field(default_factory=SchedulingConfig)
    workload_file: Optional[str] = None            # named in errors about the workload
    cluster_file: Optional[str] = None             # named in errors about the cluster
    data_summary: str = ""                         # one line for the scenario table
    load: Optional[float] = None                   # default offered load of an episode; None: the
                                                   # trace's own arrival times (after time_scale)
    repeat: int = 1                                # the window tiled this many times in time, with
                                                   # fresh job ids (a trace too small to queue a
                                                   # large cluster); 1: as is
    load_measure: str = "total"                    # how ``load`` is measured: "total" (every
                                                   # named scenario) or "concurrent"
                                                   # (cluster_env.scenarios.load)
    hardware: Optional["HardwareWorld"] = None     # a user's cluster: the world of its GPU
                                                   # generation applied to ``world``
                                                   # (cluster_env.scenarios.hardware); None: the
                                                   # scenario's own world

    def split_range(self, split: str, num_jobs: int) -> tuple[int, int]:
        if split not in self.splits:
            raise ValueError(f"scenario {self.name!r} has no split {split!r}; choose one of {list(self.splits)}")
        a, b = self.splits[split]
        return int(round(a * num_jobs)), int(round(b * num_jobs))

    def with_train_range(self, train_range: "tuple[float, float]") -> "Scenario":
        """This scenario with its train split narrowed to ``train_range``, ``(a, b)`` fractions of
        the train split's jobs (``(0, 1)``: all of them; ``(0.8, 1)``: its most recent fifth, the
        jobs nearest the validation and test periods). The other splits are unchanged, so a
        training run can draw its windows from the recent past without touching held-out jobs."""
        a, b = check_train_range(train_range)
        lo, hi = self.splits["train"]
        return replace(self, splits={**self.splits, "train": (lo + a * (hi - lo), lo + b * (hi - lo))})

    def sample(self, split: str, rng: np.random.Generator,
               jobs_per_episode: Optional[int] = None, load: Optional[float] = None) -> Workload:
        """The workload of one episode of ``split``, drawn with ``rng``.

        ``load`` (default: the scenario's) rescales the window's arrivals to that offered load.
        """
        source = self.workload()
        lo, hi = self.split_range(split, source.num_jobs)
        size = jobs_per_episode if jobs_per_episode is not None else self.jobs_per_episode
        if size is None or size >= hi - lo:
            start, stop = lo, hi
        else:
            if size < 1:
                raise ValueError(f"jobs_per_episode must be >= 1, got {size}")
            start = int(rng.integers(lo, hi - size + 1))
            stop = start + size
        if stop <= start:
            raise ValueError(f"scenario {self.name!r}: split {split!r} holds no job")
        episode = source.subset(np.arange(start, stop), name=f"{self.name}/{split}[{start}:{stop}]")
        if self.repeat > 1:
            episode = tile_in_time(episode, self.repeat)
        if self.time_scale != 1.0:
            episode = _scale_time(episode, self.time_scale)
        target = load if load is not None else self.load
        if target is not None:
            from cluster_env.scenarios.load import scale_to_load

            episode = scale_to_load(episode, self.cluster().total_gpus, target, self.load_measure)
        return episode


def check_train_range(value: object) -> tuple[float, float]:
    """``value`` as ``(a, b)`` with ``0 <= a < b <= 1`` (fractions of the train split), or a
    ``ValueError`` that names ``train_range``."""
    try:
        a, b = (float(x) for x in value)          # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise ValueError(f"train_range must be two fractions (a, b) of the train split, got {value!r}") from None
    if not 0.0 <= a < b <= 1.0:
        raise ValueError(f"train_range must satisfy 0 <= a < b <= 1 (fractions of the train split), got {value!r}")
    return a, b


def tile_in_time(workload: Workload, copies: int) -> Workload:
    """``copies`` copies of ``workload`` one after another, with fresh job ids ``<id>~<copy>``.

    Copy ``c`` arrives ``c x (span + mean gap)`` seconds after the original, so the tiled
    arrivals keep the window's rhythm; durations, GPUs, types, tenants and source rows repeat.
    """
    n = workload.num_jobs
    span = float(workload.submit[-1] - workload.submit[0]) if n else 0.0
    period = span + (span / (n - 1) if n > 1 else 1.0)
    submit = np.concatenate([workload.submit + c * period for c in range(copies)])
    ids = tuple(f"{job}~{c}" for c in range(copies) for job in workload.job_ids)
    allowed = None if workload.allowed_gpu_types is None else tuple(workload.allowed_gpu_types) * copies
    return Workload(
        name=f"{workload.name}x{copies}", job_ids=ids, submit=submit,
        duration=np.tile(workload.duration, copies), gpus=np.tile(workload.gpus, copies),
        job_type=np.tile(workload.job_type, copies), tenant=np.tile(workload.tenant, copies),
        allowed_gpu_types=allowed,
        source_row=None if workload.source_row is None else np.tile(workload.source_row, copies),
        report=workload.report,
        job_class=None if workload.job_class is None else np.tile(workload.job_class, copies),
        deadline=None if workload.deadline is None else np.tile(workload.deadline, copies),
        tenant_quota=workload.tenant_quota, tenant_borrow=workload.tenant_borrow)


def _scale_time(workload: Workload, scale: float) -> Workload:
    return replace(workload, submit=workload.submit * scale)


def scenario_summary(scenario: Scenario) -> str:
    """Two lines for scenario tables: the cluster's machines and GPU mix, the workload and data."""
    c = scenario.cluster()
    mix = ", ".join(f"{k}:{v}" for k, v in c.gpus_of_type().items())
    episode = (f"episodes of {scenario.jobs_per_episode} jobs" if scenario.jobs_per_episode
               else "each split one episode")
    if scenario.repeat > 1:
        episode += f" tiled {scenario.repeat} times"
    if scenario.load is not None:
        episode += f" at offered load {scenario.load:g}"
        if scenario.load_measure != "total":
            episode += f" ({scenario.load_measure})"
    return (f"{scenario.name:<14} {c.num_machines:>5} machines {c.total_gpus:>6} GPUs ({mix}); {episode}\n"
            f"{'':<14} {scenario.description}; data: {scenario.data_summary}")
