"""Opt-in extra observation features (``parallel_env(..., observation="extended")``).

The default observation (``observation="default"``) is the one every v0 and v1 scenario ships with
and stays bit-for-bit unchanged. ``"extended"`` appends columns to ``jobs`` and ``global`` (the
default columns keep their positions, so every policy written for the default layout still reads
its columns) with what predicts a job's duration and what the scheduling clock looks like:

``jobs`` (per candidate row, appended after :data:`~cluster_env.envs.observation.JOB_FEATURES`):

* ``tenant_slot``: a stable tenant encoding, ``(tenant index mod 64) / 63``. The tenant index is
  the trace-level index (Philly: the virtual cluster, in order of first appearance in the whole
  trace; openb: the QoS class in a documented order), so one tenant reads the same value in every
  window of a scenario (the default ``tenant`` column divides by the window's largest index).
* ``tenant_seen_log``: ``log1p`` of how many of this tenant's jobs finished so far in the episode.
* ``tenant_mean_log``: mean of ``log1p(run time in seconds)`` of this tenant's finished jobs
  (``-1`` when none finished yet). The run time is the execution time the scheduler watched,
  restart overhead excluded: what a real scheduler measures, never the hidden duration.
* ``tenant_recent_log``: the same, as an exponential moving average (weight
  :data:`RECENT_WEIGHT` on the newest finish): the tenant's *recent* durations.
* ``attained_all_log``: ``log1p(attained GPU-seconds)`` for every candidate, pending ones that
  were preempted included, whatever ``preemption`` is (the default column is filled only with
  preemption on).

``global`` (appended after :data:`~cluster_env.envs.observation.GLOBAL_FEATURES`):

* ``tick_phase``: time since the last scheduling tick over ``scheduling_tick`` (in [0, 1); the
  first period counts from the episode's start); ``-1`` without preemption (no ticks exist).
* ``finished_mean_log`` / ``finished_recent_log``: mean and moving average of ``log1p(run time)``
  of every job finished so far in the episode (``-1`` before the first).

``"extended-v2"`` appends the running candidates' placement to these ``jobs`` columns
(:mod:`cluster_env.envs.observation_place`).

Only the past is read: the statistics at time ``t`` are those of the jobs that finished at or
before ``t`` (finishes at one instant are folded in by job id), updated incrementally from the
simulator's finish times (tested against a recomputation from scratch).
"""
from __future__ import annotations

import math

import numpy as np
from gymnasium import spaces

from cluster_env.envs import observation_fused
from cluster_env.envs.observation import JOB_FEATURES, ObservationBuilder
from cluster_env.envs.observation_layouts import (  # noqa: F401 (names kept importable from here)
    EXTRA_GLOBAL_FEATURES, EXTRA_JOB_FEATURES, OBSERVATION_MODES, TENANT_SLOTS, check_observation_mode, global_features,
    job_features, replace_spaces,
)

#: Weight of the newest finish in the ``*_recent_log`` moving averages.
RECENT_WEIGHT = 0.25


class RunningStats:
    """Per-tenant and overall count, mean and moving average of finished jobs' ``log1p(run time)``.

    Fed only with jobs the simulator reports finished (finish time not NaN), in order of
    (finish time, job id); never sees a job before it finishes.
    """

    def __init__(self, tenants: np.ndarray) -> None:
        self.tenant = tenants
        size = int(tenants.max()) + 1 if len(tenants) else 1
        self.count = np.zeros(size)
        self.total = np.zeros(size)
        self.recent = np.full(size, -1.0)
        self.all_count, self.all_total, self.all_recent = 0, 0.0, -1.0
        self._mean: "np.ndarray | None" = None       # mean() until the next add

    def add(self, jobs: np.ndarray, run_time: np.ndarray) -> None:
        """Fold finished ``jobs`` (already in finish order) with their run times in seconds."""
        # math.log1p (the C library's) rather than numpy's, which may take a vectorised path that
        # differs in the last bit: the compiled engine (baselines.engine) keeps these statistics too.
        self._mean = None
        for job, value in zip(jobs.tolist(), map(math.log1p, run_time.tolist())):
            t = self.tenant[job]
            self.recent[t] = value if self.count[t] == 0 else (1 - RECENT_WEIGHT) * self.recent[t] + RECENT_WEIGHT * value
            self.count[t] += 1
            self.total[t] += value
            self.all_recent = value if self.all_count == 0 else (
                (1 - RECENT_WEIGHT) * self.all_recent + RECENT_WEIGHT * value)
            self.all_count += 1
            self.all_total += value

    def mean(self) -> np.ndarray:
        """(tenants,) mean log run time, -1 where none finished (computed once per change: do not
        modify the array returned)."""
        if self._mean is None:
            self._mean = np.where(self.count > 0, self.total / np.maximum(self.count, 1), -1.0)
        return self._mean


class ExtendedObservationBuilder(ObservationBuilder):
    """:class:`ObservationBuilder` plus the columns of this module (appended, never reordered).

    Under the compiled kernels the appended columns are written by one compiled call
    (:mod:`cluster_env.envs.observation_fused`), with the numpy path's bits; ``fused_columns =
    False`` (on the class or an instance) takes the numpy path, the reference the tests compare
    it with."""

    #: Whether the compiled kernels' build writes the appended columns in one call.
    fused_columns = True

    def __init__(self, *args, scheduling_tick: float = 300.0, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.scheduling_tick = float(scheduling_tick)
        self.job_features = job_features("extended")
        self.global_features = global_features("extended")
        f32 = np.float32
        n_rows = self.K + self.R
        blocks = {"jobs": spaces.Box(-1.0, np.inf, (n_rows, len(self.job_features)), f32),
                  "global": spaces.Box(-1.0, np.inf, (len(self.global_features),), f32)}
        replace_spaces(self.observation_spaces, **blocks)

    def bind(self, sim, num_tenants: int) -> None:
        super().bind(sim, num_tenants)
        tenant = np.asarray(sim.workload.tenant, dtype=np.int64)
        self._tenant = tenant
        self._slot = ((tenant % TENANT_SLOTS) / (TENANT_SLOTS - 1)).astype(np.float32)
        self._stats = RunningStats(tenant)
        self._seen_finished = 0
        self._unfinished = np.zeros(0, dtype=np.int64)   # arrived jobs not yet seen finished
        self._arrived_seen = 0
        self._stats_key = -1
        # The compiled path: its kernel, numpy's log1p of the tenants' finished counts (kept until
        # the next finish), the attained service it reads.
        self._columns = observation_fused.compiled() if self._kernel is not None else None
        self._tenant_log, self._tenant_log_at = None, -1
        self.attach(sim)

    def attach(self, source) -> None:
        """Read the episode's progress from ``source``: the bound simulator (``bind``), or the
        compiled engine's live view of the same episode (``next_arrival``, ``finished_count``,
        ``now``, ``last_tick``, and ``jobs.finish`` / ``executed`` / ``attained``)."""
        self._source = source
        self._attained = source.jobs.attained

    def _update_stats(self) -> None:
        """Fold the jobs that finished since the last observation into the running statistics."""
        sim = self._source
        if sim.next_arrival > self._arrived_seen:
            self._unfinished = np.concatenate([self._unfinished, np.arange(self._arrived_seen, sim.next_arrival)])
            self._arrived_seen = sim.next_arrival
        if sim.finished_count == self._seen_finished:
            return
        ids = self._unfinished
        finish = sim.jobs.finish[ids]
        done = ~np.isnan(finish)
        new = ids[done]
        order = np.lexsort((new, finish[done]))       # by finish time, then job id
        new = new[order]
        self._stats.add(new, sim.jobs.executed[new])
        self._unfinished = ids[~done]
        self._seen_finished = sim.finished_count

    def build(self, placing_phase: bool, pending: np.ndarray, running: np.ndarray):
        if self._columns is not None and self.fused_columns:
            return self._build_fused(placing_phase, pending, running)
        return self._build_reference(placing_phase, pending, running)

    def _build_fused(self, placing_phase: bool, pending: np.ndarray, running: np.ndarray):
        """``build`` under the compiled kernels: the default kernel writes its columns into the
        wide arrays, then one call writes the appended ones (the reference's values and bits)."""
        f32 = np.float32
        jobs = np.zeros((self.K + self.R, len(self.job_features)), f32)
        machines, glob = np.empty(self._machines_shape, f32), np.empty(len(self.global_features), f32)
        placing = np.zeros(self._n_placing, f32)
        order_mask = np.zeros(self.n_orderer_actions, np.int8)
        place_mask = np.zeros(self.n_placer_actions, np.int8)
        ids = np.empty(self.K + self.R, np.int64)
        self.build_into(jobs, machines, glob, placing, order_mask, place_mask, ids, placing_phase, pending, running)
        self.extra_columns(jobs, glob, ids, running)
        return {"jobs": jobs, "machines": machines, "global": glob, "placing": placing}, order_mask, place_mask

    def extra_columns(self, jobs: np.ndarray, glob: np.ndarray, ids: np.ndarray, running: np.ndarray) -> None:
        """Write this layout's columns (one compiled call) into ``jobs`` and ``glob``, whose default
        columns are written (``ids``: each row's job, -1 for none; ``running``: the running
        candidates): the compiled kernels' build, and the compiled step's observation."""
        self._update_stats()
        stats = self._stats
        if self._tenant_log_at != self._seen_finished:
            self._tenant_log = np.log1p(stats.count)        # numpy's, as the reference's per row
            self._tenant_log_at = self._seen_finished
        # numpy's log1p over every row (an empty row's value is never read).
        attained_log = np.log1p(self._attained.take(ids))
        phase, mean_all, recent = self._global_columns()
        self._columns(jobs, glob, ids, self._tenant_log, attained_log, running, self.K, len(JOB_FEATURES),
                      phase, mean_all, recent, self._slot, self._tenant, stats.mean(), stats.recent,
                      *self._placement_arguments(running))

    def _placement_arguments(self, running: np.ndarray) -> tuple:
        """The fused kernel's placement arguments (this layout: none, typed as a subclass's)."""
        sim = self.sim
        not_running, nominal32, measured32, fewest = observation_fused.NO_PLACEMENT
        return (False, not_running, 0, sim._s_float, sim._s_int, sim._s_flag, sim._mpool, sim._gpool,
                sim.job_speed, nominal32, sim.machine_type, measured32, sim.machines.free, sim.gpus,
                self._no_allowed, False, fewest, 0.0)

    def _build_reference(self, placing_phase: bool, pending: np.ndarray, running: np.ndarray):
        """``build`` with numpy calls (the numpy kernel backend's path, and the reference)."""
        feats, order_mask, place_mask = super().build(placing_phase, pending, running)
        self._update_stats()
        sim, stats = self.sim, self._stats
        ids = self.candidate_ids(pending, running)
        base = feats["jobs"]
        width = base.shape[1]
        # The whole jobs block at once: the default columns, these, and a subclass's after them.
        jobs = np.empty((base.shape[0], len(self.job_features)), dtype=np.float32)
        jobs[:, :width] = base
        jobs[:, width:width + len(EXTRA_JOB_FEATURES)] = 0.0
        rows = (ids >= 0).nonzero()[0]
        if len(rows):
            j = ids[rows]
            t = self._tenant[j]
            extra = np.empty((len(rows), len(EXTRA_JOB_FEATURES)))      # float64, rounded once below
            extra[:, 0] = self._slot[j]
            extra[:, 1] = np.log1p(stats.count[t])
            extra[:, 2] = stats.mean()[t]
            extra[:, 3] = stats.recent[t]
            extra[:, 4] = np.log1p(sim.jobs.attained[j])
            jobs[rows, width:width + len(EXTRA_JOB_FEATURES)] = extra
        self._more_job_columns(jobs[:, width + len(EXTRA_JOB_FEATURES):], running)
        feats["jobs"] = jobs
        glob = np.empty(len(self.global_features), dtype=np.float32)
        glob[:len(feats["global"])] = feats["global"]
        glob[len(feats["global"]):] = self._global_columns()
        feats["global"] = glob
        return feats, order_mask, place_mask

    def _global_columns(self) -> tuple[float, float, float]:
        """The :data:`EXTRA_GLOBAL_FEATURES` values (float64, before the observation's float32)."""
        sim, stats = self._source, self._stats
        if self.preemption:
            last = sim.last_tick if math.isfinite(sim.last_tick) else 0.0
            phase = min(max((sim.now - last) / self.scheduling_tick, 0.0), 1.0)
        else:
            phase = -1.0
        mean_all = stats.all_total / stats.all_count if stats.all_count else -1.0
        return float(phase), float(mean_all), float(stats.all_recent)

    def _more_job_columns(self, out: np.ndarray, running: np.ndarray) -> None:
        """Fill a subclass's ``jobs`` columns after this layout's (``out``: those columns of every
        row); this layout has none."""
