"""A certified lower bound on the average JCT of every schedule of one window and world draw.

A job's true speed in the simulator (:mod:`cluster_env.core.simulator`) is::

    rate_j = nominal_j * min_{machines used}(static_m * fluct_m) / (1 + alpha * comm_j * crowd)

with ``nominal_j`` the slowest of its GPU types' speeds times the spread penalty (<= 1), the
contention divisor >= 1, no progress during a restart overhead (>= 0), and JCT = completion -
submit. Everything that can only slow a job down is dropped; what can speed it up is taken at the
fastest it can be:

* the static factors as the seed draws them (drawn before any decision: every schedule meets them);
* the fluctuation factor at an upper bound valid for every schedule (a schedule changes which
  random draws the process meets: updates run only while jobs run, and measurement noise shares
  the generator): see :func:`fluctuation_ceiling`;
* per job, the best speed any placement of its width could give it (:func:`best_rates`).

Three bounds on the sum of completion times, each valid for every schedule (proofs in
``docs/optimality.md``), of which the largest is kept:

* ``per_job``: each job's arrival plus its work at its best rate;
* ``pooled_srpt``: the cluster as one machine of the speed-weighted capacity, every job's work in
  GPU-seconds at its best rate, preemptive shortest-remaining-work-first (optimal there);
* ``pooled_busy``: on the same machine, the least sum of mean busy times (preemptive
  shortest-work-first: Goemans' mean-busy-time relaxation) plus half of each job's shortest
  possible run (its rate is capped by its width).

Public names: :class:`BoundInputs`, :class:`LowerBound`, :func:`bound_inputs`,
:func:`lower_bound`, :func:`window_simulator`, :func:`window_lower_bound`,
:func:`fluctuation_ceiling`, :func:`best_rates`, :data:`NORMAL_DRAW_LIMIT`.
"""
from __future__ import annotations

import functools
import heapq
import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

#: No standard normal that numpy's ``Generator`` draws exceeds this in magnitude. Its ziggurat
#: (``random_standard_normal``) returns either a point of a layer (|x| < r = 3.6541528853610088)
#: or, in the tail, ``r + xx`` with ``xx = -log1p(-u1) / r`` accepted only when
#: ``-2 log1p(-u2) > xx^2``; ``u2 <= 1 - 2^-53`` gives ``-log1p(-u2) <= 53 ln 2``, so
#: ``xx < sqrt(106 ln 2) = 8.5717...``. Rounded up.
NORMAL_DRAW_LIMIT = 3.6541528853610088 + math.sqrt(106.0 * math.log(2.0)) + 1e-9

#: Slack per job for the simulator's completion tolerance (a job finishes once its remaining work
#: takes under max(1e-6 s, a few ulps of the clock) at its speed), and a relative one for rounding.
COMPLETION_SLACK_S = 1e-5
RELATIVE_SLACK = 1e-9


@dataclass(frozen=True)
class BoundInputs:
    """What the bound reads of one episode: the window, the cluster and the world draw."""
    submit: np.ndarray          # (N,) seconds
    duration: np.ndarray        # (N,) work, reference seconds
    gpus: np.ndarray            # (N,) GPUs requested
    speed: np.ndarray           # (N, T) nominal speed per GPU type, 0 where the type is not allowed
    machine_type: np.ndarray    # (M,) GPU type index
    machine_gpus: np.ndarray    # (M,)
    machine_ceiling: np.ndarray  # (M,) upper bound of static x fluctuation factor, whole episode
    spread_ceiling: float = 1.0  # upper bound of the spread multiplier (1: it only slows)


@dataclass(frozen=True)
class LowerBound:
    """The bound on the average JCT (seconds) and its parts (each a valid bound)."""
    avg_jct: float
    per_job: float
    pooled_srpt: float
    pooled_busy: float
    fluctuation_ceiling: float   # largest dynamic factor a schedule could meet (1: no fluctuation)
    capacity: float              # the pooled machine's speed, best-rate GPU-seconds per second

    @property
    def binding(self) -> str:
        """Which bound is the largest."""
        parts = {"per_job": self.per_job, "pooled_srpt": self.pooled_srpt, "pooled_busy": self.pooled_busy}
        return max(parts, key=parts.get)


def fluctuation_ceiling(sigma: float, theta: float, interval: float, x0: np.ndarray) -> np.ndarray:
    """(M,) an upper bound of each machine's fluctuation factor over any episode.

    The factor is ``exp(x + m)`` with ``m = -sigma^2/2`` (or less, straggling) and ``x`` the OU
    state, updated only at steps ``dt >= interval`` (the simulator's update period, never shorter):
    ``x' = a x + sigma sqrt(1 - a^2) z`` with ``a = exp(-theta dt) <= A = exp(-theta interval)`` and
    ``|z| <= NORMAL_DRAW_LIMIT``. Then ``B = max(x0, X)`` with ``X = sigma Z sqrt((1 + A)/(1 - A))``
    is invariant (``a B + sigma sqrt(1 - a^2) Z <= B`` for every ``a <= A``), so ``x <= B`` forever,
    whichever draws the schedule meets. ``x0``: the initial states as the seed drew them.
    """
    x0 = np.asarray(x0, dtype=np.float64)
    if sigma <= 0:
        return np.ones_like(x0)                            # no OU term: the factor is at most 1
    a = math.exp(-theta * interval * (1.0 - 1e-6))
    fixed = sigma * NORMAL_DRAW_LIMIT * math.sqrt((1.0 + a) / (1.0 - a))
    return np.exp(np.maximum(x0, fixed) - 0.5 * sigma * sigma) * (1.0 + 1e-12)


def best_rates(inputs: BoundInputs) -> tuple[np.ndarray, np.ndarray]:
    """Per job, the best rate any placement of its width could give it, and per machine the most
    a GPU there can add to any job's progress relative to that job's best rate.

    A job on machines S runs at most ``min_{m in S} v_m`` with ``v_m = speed[type_m] *
    ceiling_m`` (the slowest type times the slowest factor is below each machine's own product);
    the best set holds its GPUs on the machines of largest ``v`` (the value where their GPUs add up
    to its width). Returns ``(s, rho)``: (N,) best rates, (M,) ``max_j min(1, v_jm / s_j)``.
    """
    speed = np.asarray(inputs.speed, dtype=np.float64)
    gpus = np.asarray(inputs.gpus, dtype=np.int64)
    rows, inverse = np.unique(speed, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    v = rows[:, inputs.machine_type] * inputs.machine_ceiling[None, :] * max(1.0, inputs.spread_ceiling)   # (R, M)
    order = np.argsort(-v, axis=1, kind="stable")
    v_sorted = np.take_along_axis(v, order, axis=1)
    cum = np.cumsum(inputs.machine_gpus[order] * (v_sorted > 0), axis=1)                            # (R, M)
    s = np.empty(len(gpus))
    rho = np.zeros(len(inputs.machine_gpus))
    for r in range(len(rows)):
        jobs = np.flatnonzero(inverse == r)
        at = np.searchsorted(cum[r], gpus[jobs])              # first machine where the GPUs suffice
        if np.any(at >= v.shape[1]):
            j = int(jobs[np.argmax(at >= v.shape[1])])
            raise ValueError(f"job {j} needs {int(gpus[j])} GPUs; its usable GPU types hold {int(cum[r, -1])}")
        s[jobs] = v_sorted[r, at]
        rho = np.maximum(rho, np.minimum(1.0, v[r] / s[jobs].min()))
    return s, rho


def _preemptive_single_machine(release: np.ndarray, work: np.ndarray, speed: float,
                               by_remaining: bool) -> tuple[np.ndarray, np.ndarray]:
    """Preemptive list schedule of ``work`` on one machine of ``speed``: at every instant the
    released job of least remaining (``by_remaining``) or least total work. Returns (completion
    times, mean busy times: the work-weighted mean instant of each job's processing)."""
    n = len(work)
    order = np.argsort(release, kind="stable")
    finish = np.empty(n)
    busy = np.zeros(n)                      # integral of t dw
    left = work.astype(np.float64).copy()
    heap: list = []
    t, i = 0.0, 0
    while i < n or heap:
        if not heap:
            t = max(t, float(release[order[i]]))
        while i < n and release[order[i]] <= t:
            j = int(order[i])
            heapq.heappush(heap, (left[j] if by_remaining else float(work[j]), j))
            i += 1
        key, j = heapq.heappop(heap)
        nxt = float(release[order[i]]) if i < n else math.inf
        end = t + left[j] / speed
        if end <= nxt:
            busy[j] += speed * (end - t) * (end + t) / 2.0
            finish[j], left[j], t = end, 0.0, end
        else:
            busy[j] += speed * (nxt - t) * (nxt + t) / 2.0
            left[j] -= speed * (nxt - t)
            t = nxt
            heapq.heappush(heap, (left[j] if by_remaining else key, j))
    return finish, busy / np.where(work > 0, work, 1.0)


def lower_bound(inputs: BoundInputs, fluct_ceiling: float = 1.0) -> LowerBound:
    """The largest of the three bounds on the average JCT of every schedule (module docstring)."""
    submit = np.asarray(inputs.submit, dtype=np.float64)
    duration = np.asarray(inputs.duration, dtype=np.float64)
    gpus = np.asarray(inputs.gpus, dtype=np.float64)
    n = len(submit)
    if n == 0:
        raise ValueError("the window has no job")
    s, rho = best_rates(inputs)
    shortest = duration / s                                      # each job alone at its best rate
    work = gpus * shortest                                       # best-rate GPU-seconds
    capacity = float(np.dot(inputs.machine_gpus, rho))
    per_job = float(shortest.sum())
    srpt_finish, _ = _preemptive_single_machine(submit, work, capacity, by_remaining=True)
    _, mean_busy = _preemptive_single_machine(submit, work, capacity, by_remaining=False)
    pooled_srpt = float((srpt_finish - submit).sum())
    pooled_busy = float((mean_busy + shortest / 2.0 - submit).sum())

    def avg(total: float) -> float:
        return max(0.0, (total - COMPLETION_SLACK_S * n) * (1.0 - RELATIVE_SLACK) / n)

    return LowerBound(avg_jct=avg(max(per_job, pooled_srpt, pooled_busy)), per_job=avg(per_job),
                      pooled_srpt=avg(pooled_srpt), pooled_busy=avg(pooled_busy),
                      fluctuation_ceiling=float(fluct_ceiling), capacity=capacity)


def bound_inputs(sim: Any) -> tuple[BoundInputs, float]:
    """The bound's inputs from a freshly built :class:`cluster_env.core.simulator.ClusterSimulator`
    (before any decision: its static factors and initial fluctuation state are the seed's draw),
    and the largest fluctuation factor any schedule could meet."""
    from cluster_env.world.throughputs import spread_ratio_table

    world = sim.world
    speed = sim.job_speed if sim.allowed is None else np.where(sim.allowed, sim.job_speed, 0.0)
    static = np.asarray(sim.machines.static, dtype=np.float64)
    if sim.fluct is not None:
        p = world.fluctuation_params
        fl = fluctuation_ceiling(p.sigma, p.theta, p.interval, sim.fluct.log_speed)
    else:
        fl = np.ones(sim.num_machines)
    spread = 1.0
    if world.spread_penalty and world.spread_model != "allreduce":      # allreduce's factor is min(., 1)
        spread = max(1.0, float(np.max(spread_ratio_table(sim.cluster.gpu_type_names))))
    inputs = BoundInputs(submit=np.asarray(sim.submit, dtype=np.float64), duration=np.asarray(sim.duration),
                         gpus=np.asarray(sim.gpus), speed=np.asarray(speed, dtype=np.float64),
                         machine_type=np.asarray(sim.machine_type), machine_gpus=np.asarray(sim.machine_gpus),
                         machine_ceiling=static * fl, spread_ceiling=spread)
    return inputs, float(fl.max()) if len(fl) else 1.0


@functools.lru_cache(maxsize=8)
def _env(scenario: str, split: str, settings: tuple):
    """The environment of a window (only read: its scenario, cluster, world and settings)."""
    import cluster_env

    return cluster_env.parallel_env(scenario, split=split, **dict(settings))


def window_simulator(scenario: str, split: str, seed: int, env_kwargs: Optional[dict] = None):
    """The simulator of window ``seed`` as ``env.reset(seed)`` builds it (the same generator, drawn
    in the same order), before any decision; and its workload."""
    from gymnasium.utils import seeding

    import cluster_env
    from cluster_env.core.simulator import ClusterSimulator

    settings = dict(env_kwargs or {})
    env = None
    if not any(settings.get(k) for k in ("workload_csv", "cluster_csv")):     # files may change: no cache
        try:
            env = _env(scenario, split, tuple(sorted(settings.items())))
        except TypeError:              # an unhashable setting: no cache
            pass
    if env is None:
        env = cluster_env.parallel_env(scenario, split=split, **settings)
    base = getattr(env, "unwrapped", env)
    rng, _ = seeding.np_random(int(seed))
    workload = base.scenario.sample(base.split, rng, base.jobs_per_episode)
    sim = ClusterSimulator(base.cluster, workload, base.world, rng, preemption=base.sched.preemption,
                           scheduling_tick=base.sched.scheduling_tick, time_limit=base.sched.max_time)
    return sim, workload


def window_lower_bound(scenario: str, split: str, seed: int, env_kwargs: Optional[dict] = None) -> LowerBound:
    """The certified lower bound on the average JCT of every schedule of window ``seed`` of
    ``scenario``/``split`` under its world draw (the scenario's world, or ``env_kwargs``'s)."""
    sim, _ = window_simulator(scenario, split, seed, env_kwargs)
    inputs, fl = bound_inputs(sim)
    return lower_bound(inputs, fl)


__all__ = ["BoundInputs", "LowerBound", "NORMAL_DRAW_LIMIT", "best_rates", "bound_inputs", "fluctuation_ceiling",
           "lower_bound", "window_lower_bound", "window_simulator"]
