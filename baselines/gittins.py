"""Tiresias' 2D-Gittins index orderer (Gu et al., NSDI 2019), the paper's other variant beside
2D-LAS: information-agnostic (it reads no job's duration), it ranks jobs by the Gittins index of
their attained GPU-service under the distribution of job GPU-service, discretised into Tiresias'
queues.

The distribution: GPUs x duration (duration: runtime on the scenario's reference GPU) of every
job in the scenario's TRAINING split, never the split being played; computed once per scenario
and cached (:func:`service_distribution`). A scenario without a training split distinct from its
other splits (a user's workload CSV, where every split is the whole file) is refused with an
error: pass ``distribution=`` (GPU-second samples) instead.

The index (Gittins 1989; Aalto et al. 2009 for M/G/1 with attained service ``a``): for a quantum
``delta``, ``G(a, delta) = P(S - a <= delta | S > a) / E[min(S - a, delta) | S > a]``, the chance
of finishing within the quantum per unit of expected service spent; the higher runs first. As
in Tiresias, the quantum is the service left to the job's queue limit (the last queue: no limit,
so the index is one over the mean remaining service), jobs in a lower queue run first, and a
job waiting ``starvation`` x its executed time is promoted to the first queue (service counted
afresh). Attained service in the environment is GPUs x seconds executed at the machines' actual
speed, while the distribution is at the reference GPU's nominal speed: the index treats the two
as one unit (an approximation, as in Tiresias, whose traces give wall time).

The compiled engine (:mod:`baselines.engine`, orderer code ``O_GITTINS`` of ``baselines.engine.codes``) plays the named
``gittins`` (and ``gittins+PLACER``) with the same records: it receives this distribution's sorted
samples, prefix sums and mean, and computes :meth:`ServiceDistribution.index` with the same float
operations.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Optional, Sequence

import numpy as np

from baselines.obs import J, from_log
from baselines.orderers import TIRESIAS_QUEUE_LIMITS, TIRESIAS_STARVATION_KNOB, Tiresias


class ServiceDistribution:
    """Sorted GPU-service samples (GPU-seconds) and their prefix sums, for Gittins indices."""

    def __init__(self, samples: Any, source: str = "samples") -> None:
        s = np.sort(np.asarray(samples, dtype=np.float64).ravel())
        if not len(s) or not np.isfinite(s).all() or (s <= 0).any():
            raise ValueError(f"a GPU-service distribution needs positive finite samples ({source}); "
                             f"got {len(s)} samples")
        self.samples = s
        self.prefix = np.concatenate([[0.0], np.cumsum(s)])
        self.mean = float(s.mean())
        self.source = source

    def index(self, attained: np.ndarray, delta: np.ndarray) -> np.ndarray:
        """Gittins index per job: attained service ``attained`` (GPU-seconds) and quantum ``delta``
        (``inf``: none). 0 where no sample exceeds the attained service."""
        s, c, n = self.samples, self.prefix, len(self.samples)
        a = np.asarray(attained, dtype=np.float64)
        d = np.asarray(delta, dtype=np.float64)
        finite = np.isfinite(d)
        ia = np.searchsorted(s, a, side="right")
        ib = np.where(finite, np.searchsorted(s, np.where(finite, a + d, 0.0), side="right"), n)
        done = ib - ia                                           # finish within the quantum
        spent = (c[ib] - c[ia]) - a * done + np.where(finite, d, 0.0) * (n - ib)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.where((ia < n) & (spent > 0), done / spent, 0.0)
        return out


@functools.lru_cache(maxsize=16)
def _scenario_distribution(name: str) -> ServiceDistribution:
    from cluster_env.scenarios.registry import get_scenario

    return _distribution_of(get_scenario(name))


def check_training_split(scenario: Any) -> tuple[int, int]:
    """The job range ``[lo, hi)`` of ``scenario``'s training split; ValueError when it has none
    apart from its other splits (a user's workload plays the whole file in every split), since the
    distribution would then be the played jobs' own."""
    if "train" not in scenario.splits:
        raise ValueError(f"gittins: scenario {scenario.name!r} has no training split to take the GPU-service "
                         "distribution from; pass distribution= (GPU-second samples)")
    source = scenario.workload()
    lo, hi = scenario.split_range("train", source.num_jobs)
    others = [scenario.split_range(s, source.num_jobs) for s in scenario.splits if s != "train"]
    if hi <= lo or any(a < hi and lo < b for a, b in others):
        raise ValueError(f"gittins: scenario {scenario.name!r} has no training split apart from its other splits "
                         f"(train is jobs [{lo}, {hi}); a user's workload plays the whole file in every split), "
                         "so its distribution would be the played jobs' own; pass distribution= (GPU-second "
                         "samples, e.g. from a packaged scenario's service_distribution)")
    return lo, hi


def _distribution_of(scenario: Any) -> ServiceDistribution:
    lo, hi = check_training_split(scenario)
    source = scenario.workload()
    service = source.gpus[lo:hi].astype(np.float64) * source.duration[lo:hi]
    return ServiceDistribution(service, f"{scenario.name} training split, jobs [{lo}, {hi})")


def service_distribution(scenario: Any) -> ServiceDistribution:
    """The GPU-service distribution of ``scenario``'s training split (a name is cached; a
    :class:`~cluster_env.scenarios.base.Scenario` object is computed each call). Raises
    ValueError when the scenario has no training split apart from its other splits."""
    if isinstance(scenario, str):
        return _scenario_distribution(scenario)
    return _distribution_of(scenario)


class Gittins(Tiresias):
    """Tiresias' 2D-Gittins index: information-agnostic, the Gittins index of a job's attained
    GPU-service under the training split's GPU-service distribution (module docstring), in
    Tiresias' queues; scheduling, preemption and starvation promotion are :class:`Tiresias`'.

    Args:
        scenario: the scenario (name or object) whose training split gives the distribution.
        distribution: GPU-second samples to use instead (exactly one of the two).
        queue_limits, starvation, preempt_at, min_quantum: as for :class:`Tiresias`.
    """

    name = "gittins"

    def __init__(self, scenario: Any = None, distribution: Optional[Sequence[float]] = None,
                 queue_limits: Sequence[float] = TIRESIAS_QUEUE_LIMITS,
                 starvation: float = TIRESIAS_STARVATION_KNOB, preempt_at: str = "tick",
                 min_quantum: float = 0.0) -> None:
        if (scenario is None) == (distribution is None):
            raise ValueError("gittins needs the scenario it runs on (its training split's GPU-service distribution: "
                             "cluster-bench passes it; in Python make_policy('gittins', scenario='philly-v1')) "
                             "or distribution= (GPU-second samples), exactly one")
        super().__init__(queue_limits, starvation, preempt_at, min_quantum)
        self.distribution = (service_distribution(scenario) if distribution is None
                             else ServiceDistribution(distribution, "given samples"))
        self._from_scenario = distribution is None

    def check_env(self, env: Any) -> None:
        """Refuse (ValueError, before the first step) to play, with a scenario's distribution, an
        environment whose own scenario has no training split apart from its other splits (a
        user's ``workload_csv``): the index would rank a user's jobs by another trace's
        distribution, which the scenario rule above forbids. ``distribution=`` is never refused."""
        if self._from_scenario:
            check_training_split(getattr(env, "unwrapped", env).scenario)

    def keys(self, obs: dict, info: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rows, queues, ids = self.priorities(obs, info)          # promotions applied
        attained = from_log(obs["jobs"][rows, J["attained_log"]])
        since = attained - np.array([self._offset.get(j, (0.0, 0.0))[0] for j in ids.tolist()])
        limits = np.array(self.queue_limits + [math.inf])
        delta = limits[queues] - since
        index = self.distribution.index(since, delta)
        # Lower queue first; within a queue the higher index (a key in (0, 1], decreasing in it).
        return rows, queues + 1.0 / (1.0 + index * self.distribution.mean), ids


__all__ = ["Gittins", "ServiceDistribution", "check_training_split", "service_distribution"]
