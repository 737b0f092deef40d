"""Observation layout, spaces and the builder that fills them from the simulator.

Every observation is a ``gymnasium.spaces.Dict`` of fixed-shape float32 arrays plus the acting
agent's int8 ``action_mask``. Only what a real scheduler can know is exposed: no true machine
factor, no contention level, no duration unless the scenario is clairvoyant.
"""
from __future__ import annotations

import math

import numpy as np
from gymnasium import spaces

from cluster_env.core.simulator import ClusterSimulator
from cluster_env.world.gpu_catalog import gpu_spec
from cluster_env.world.throughputs import JOB_TYPES, comm_intensity, relative_speed_table

# Rows of "jobs": K pending candidates (oldest first) then R running candidates (most attained
# service first, the natural preemption targets). Times are log1p(seconds); -1 means "hidden".
JOB_FEATURES = (
    "valid",            # 1 if the row holds a job
    "running",          # 1 for a running (preemption) candidate
    "gpus_log2",        # log2(GPUs requested)
    "wait_log",         # log1p(now - submit)
    "attained_log",     # log1p(attained service, GPU-seconds)
    "executed_log",     # log1p(seconds executed so far)
    "job_type",         # job type index / (number of job types - 1)
    "tenant",           # tenant index / max(1, number of tenants - 1)
    "restarts_log",     # log1p(times preempted)
    "duration_log",     # log1p(duration) if clairvoyant else -1
    "remaining_log",    # log1p(remaining work at nominal speed) if clairvoyant else -1
    "fits",             # 1 if the job fits the free GPUs it may use
    "comm_intensity",   # how communication-heavy its job type is (Gavel), in [0, 1]
    "best_speed",       # its nominal speed on the fastest GPU type it may use (public table)
)
MACHINE_FEATURES = (
    "gpu_type",         # GPU type index / max(1, number of types - 1)
    "type_speed",       # mean nominal speed of the GPU type over job types (public table)
    "gpus",             # GPUs on the machine / 8
    "free_gpus",        # free GPUs / 8
    "free_frac",        # free GPUs / GPUs
    "jobs",             # running jobs on the machine
    "measured_speed",   # measured speed relative to nominal (observed progress); 1 if never measured
    "measured_age_log", # log1p(seconds since the last measurement); -1 if never measured
    "price",            # price per GPU-hour in dollars / 10
    "usable",           # 1 if the job being placed may take a GPU here (PLACE phase)
    "job_speed",        # nominal speed of the job being placed on this GPU type (public table; PLACE)
)
GLOBAL_FEATURES = (
    "phase",            # 0 ORDER, 1 PLACE
    "time_log",         # log1p(simulated seconds since the episode started)
    "pending_log",      # log1p(pending jobs)
    "running_log",      # log1p(running jobs)
    "free_gpu_frac",    # free GPUs / cluster GPUs
    "arrivals_left",    # jobs not yet arrived / jobs of the episode
    "finished_frac",    # finished jobs / jobs of the episode
    "pending_gpus_log", # log1p(GPUs requested by pending jobs)
    "preemption",       # 1 if the orderer may preempt
    "clairvoyant",      # 1 if durations are visible
)
PLACING_FEATURES = (
    "active",           # 1 in the PLACE phase
    "gpus_log2",        # log2(GPUs requested)
    "need_log2",        # log2(1 + GPUs still to place)
    "job_type",         # as in JOB_FEATURES
    "wait_log",
    "attained_log",
    "duration_log",     # -1 unless clairvoyant
    "comm_intensity",
    "machines_used",    # machines it already holds GPUs on
)

_LOG2 = np.log2
# Changed machine rows are updated one by one up to one per this many machines; beyond that,
# whole columns (a scalar row update costs about as much as a column op over 64 machines).
_MACHINES_PER_ROW_UPDATE = 64


class ObservationBuilder:
    """Builds both agents' observations; spaces are created once and cached."""

    def __init__(self, num_machines: int, pending_window: int, running_window: int,
                 preemption: bool, clairvoyant: bool, gpu_type_names: tuple[str, ...],
                 reference_gpu: str, *, speeds: str = "spec-sheet", gavel_shape: str = "raw") -> None:
        self.K = pending_window
        self.R = running_window if preemption else 0
        self.M = num_machines
        self.preemption, self.clairvoyant = bool(preemption), bool(clairvoyant)   # (compiled kernels: one type)
        self.n_orderer_actions = self.K + self.R + 1
        self.n_placer_actions = self.M + 1
        f32 = np.float32
        feats = {
            "jobs": spaces.Box(-1.0, np.inf, (self.K + self.R, len(JOB_FEATURES)), f32),
            "machines": spaces.Box(-1.0, np.inf, (self.M, len(MACHINE_FEATURES)), f32),
            "global": spaces.Box(-1.0, np.inf, (len(GLOBAL_FEATURES),), f32),
            "placing": spaces.Box(-1.0, np.inf, (len(PLACING_FEATURES),), f32),
        }
        self.observation_spaces = {
            "orderer": spaces.Dict({**feats, "action_mask": spaces.Box(0, 1, (self.n_orderer_actions,), np.int8)}),
            "placer": spaces.Dict({**feats, "action_mask": spaces.Box(0, 1, (self.n_placer_actions,), np.int8)}),
        }
        self.action_spaces = {
            "orderer": spaces.Discrete(self.n_orderer_actions),
            "placer": spaces.Discrete(self.n_placer_actions),
        }
        speed = relative_speed_table(gpu_type_names, reference_gpu, speeds=speeds,
                                     shape=gavel_shape)                   # (J, T, B): the world's
        self._type_speed = speed[:, :, 0].mean(axis=0)                    # (T,)
        self._prices = np.array([gpu_spec(n).price_per_gpu_hour for n in gpu_type_names])
        self._comm = comm_intensity()
        self._n_types = len(gpu_type_names)
        self._idle_placing = np.zeros(len(PLACING_FEATURES), dtype=np.float32)   # ORDER phase
        self._idle_placing[PLACING_FEATURES.index("duration_log")] = -1.0
        self._no_ids = np.full(self.K + self.R, -1, dtype=np.int64)
        self._no_running = np.zeros(0, dtype=np.int64)
        self._n_global, self._n_placing = len(GLOBAL_FEATURES), len(PLACING_FEATURES)

    # ------------------------------------------------------------------ per episode
    def bind(self, sim: ClusterSimulator, num_tenants: int) -> None:
        """Precompute the static machine columns and per-job constant features of a new episode."""
        self.sim = sim
        m = sim.num_machines
        static = np.zeros((m, len(MACHINE_FEATURES)), dtype=np.float32)
        static[:, 0] = sim.machine_type / max(1, self._n_types - 1)
        static[:, 1] = self._type_speed[sim.machine_type]
        static[:, 2] = sim.machine_gpus / 8.0
        static[:, 8] = self._prices[sim.machine_type] / 10.0
        self._gpus_inv = 1.0 / sim.machine_gpus
        self._gpus_inv_list = self._gpus_inv.tolist()
        # Private ORDER-phase machine block, refreshed only where the machines or the clock
        # changed (observations get copies, so a caller may modify what it receives).
        self._machines = static
        self._machine_static = static.copy()
        self._log_read = 0               # read position in sim.machine_log
        self._measure_read = -1          # sim.measure_version the measured column shows
        self._age_key = None             # (measure_version, now) the age column shows
        self._refresh_machine_columns()
        self._order_jobs = None          # (pending candidates, jobs block) of the last ORDER build
        self._best_speed = sim.best_speed                                 # (N,)
        # Per-job features that never change within an episode, one row per job, and a last row
        # of zeros that job id -1 (an empty candidate row) picks.
        n = sim.num_jobs
        rows = np.zeros((n + 1, len(JOB_FEATURES)), dtype=np.float32)[:n]
        rows[:, 0] = 1.0
        rows[:, 2] = np.log2(sim.gpus)
        rows[:, 6] = sim.job_type / max(1, len(JOB_TYPES) - 1)
        rows[:, 7] = sim.workload.tenant / max(1, num_tenants - 1)
        rows[:, 9] = np.log1p(sim.duration) if self.clairvoyant else -1.0
        rows[:, 10] = -1.0
        rows[:, 12] = self._comm[sim.job_type]
        rows[:, 13] = self._best_speed
        self._job_static = rows.base
        # The compiled backend builds everything in one kernel call (see ``_build_compiled``).
        self._kernel = sim._k.observe
        self._rank = sim._k.rank_running
        self._rank_args = (sim._s_float, sim._s_int, sim._job_block, sim.duration, sim.gpus)
        self._no_allowed = np.zeros((0, 0), dtype=bool)
        self._ids_of = self._ids = None
        # The compiled path's private machine block, brought up to date incrementally by the
        # kernel, and the episode's arrays in two arenas (one argument each; see kernels.observe):
        # integers (constants, GPUs per job, GPU type per machine, the free GPUs and jobs each
        # row shows, -1: not yet written) and floats (submit, duration, best speed, 1 / GPUs per
        # machine, a scratch memo of ages per measurement time, the memo of each job's wait feature:
        # the instant it was computed at, NaN: never, and its value).
        self._rows = self._machine_static.copy()
        self._measure_shown = -1
        ep_int = np.concatenate([
            np.array([self.K, self.R, self.preemption, self.clairvoyant, sim.total_gpus, n], dtype=np.int64),
            np.asarray(sim.gpus, dtype=np.int64), np.asarray(sim.machine_type, dtype=np.int64),
            np.full(2 * m, -1, dtype=np.int64)])
        ep_float = np.concatenate([
            np.asarray(sim.submit, dtype=np.float64), np.asarray(sim.duration, dtype=np.float64),
            np.asarray(self._best_speed, dtype=np.float64), self._gpus_inv, np.zeros(16), np.full(n, np.nan),
            np.zeros(n)])
        js = sim.jobs
        # Everything the kernel reads that is fixed for the episode, or updated in place.
        self._episode_args = (
            ep_int, ep_float, self._job_static, self._no_allowed if sim.allowed is None else sim.allowed,
            sim.job_speed, sim._job_block, js.restarts, sim.free_per_type, sim._machine_int, sim._machine_float,
            self._rows)
        self._jobs_shape = (self.K + self.R, len(JOB_FEATURES))
        self._machines_shape = (self.M, len(MACHINE_FEATURES))

    # ------------------------------------------------------------------ building
    def candidates(self) -> tuple[np.ndarray, np.ndarray]:
        """Job ids in the pending window and in the running (preemption) window."""
        sim = self.sim
        pending = np.array(sim.pending[: self.K], dtype=np.int64)
        if self.R and sim.num_running and self._rank is not None:
            # sync_running and the ranking below in one compiled call (the same writes and order).
            running = np.empty(min(self.R, sim.num_running), dtype=np.int64)
            self._rank(sim.num_running, sim.now, *self._rank_args, running)
        elif self.R and sim.num_running:
            sim.sync_running()
            run = sim.running_jobs()
            order = np.lexsort((run, -sim.jobs.attained[run]))
            running = run[order[: self.R]]
        else:
            running = self._no_running       # empty: nothing can write into it
        return pending, running

    def candidate_ids(self, pending: np.ndarray, running: np.ndarray) -> np.ndarray:
        """(K + R,) the job id of each row of ``jobs``, -1 for empty rows."""
        if self._kernel is not None and self._ids_of is pending:
            return self._ids        # built by the kernel with these candidates
        ids = self._no_ids.copy()
        ids[: len(pending)] = pending
        if len(running):
            ids[self.K: self.K + len(running)] = running
        return ids

    def _job_rows(self, out: np.ndarray, ids: np.ndarray, running: bool) -> None:
        """Fill the time-dependent columns of the rows of ``ids`` (static columns already set)."""
        n = len(ids)
        if n == 0:
            return
        sim, js = self.sim, self.sim.jobs
        rows = out[:n]
        rows[:, 3] = np.log1p(sim.now - sim.submit[ids])
        if running or sim.preemption:
            rows[:, 4] = np.log1p(js.attained[ids])
            rows[:, 5] = np.log1p(js.executed[ids])
            rows[:, 8] = np.log1p(js.restarts[ids])
        if running:
            rows[:, 1] = 1.0
        else:
            rows[:, 11] = sim.fits(ids)
        if self.clairvoyant:
            rows[:, 10] = np.log1p((sim.duration[ids] - js.progress[ids]) / self._best_speed[ids])

    def _jobs_block(self, placing_phase: bool, pending: np.ndarray, running: np.ndarray) -> np.ndarray:
        """The candidates' rows. While a job is placed the clock stands still and only the free
        GPUs change, so the PLACE phase reuses the ORDER block and refreshes the ``fits`` column."""
        cached = self._order_jobs
        if placing_phase and cached is not None and cached[0] is pending:
            jobs = cached[1].copy()
            if len(pending):
                jobs[: len(pending), 11] = self.sim.fits(pending)
            return jobs
        jobs = self._job_static.take(self.candidate_ids(pending, running), axis=0)
        self._job_rows(jobs, pending, running=False)
        if self.R:
            self._job_rows(jobs[self.K:], running, running=True)
        if not placing_phase:
            self._order_jobs = (pending, jobs.copy())
        return jobs

    def _machines_block(self) -> np.ndarray:
        """The machine rows of the ORDER phase (a copy). The private buffer is brought up to date
        from the simulator's change records: rows of the machines whose free GPUs or jobs changed
        (every row when many did), the measured speed when it changed, the age when the clock or
        the measurements moved."""
        sim = self.sim
        ms, buf = sim.machines, self._machines
        log = sim.machine_log
        if self._log_read < len(log):
            changed = log[self._log_read:]
            self._log_read = len(log)
            if len(changed) > self.M // _MACHINES_PER_ROW_UPDATE:
                self._refresh_machine_columns()
            else:
                # Python scalars: the same float64 products as the column ops, without numpy's
                # per-scalar overhead.
                gpus_inv = self._gpus_inv_list
                for m in changed:
                    free = int(ms.free[m])
                    buf[m, 3] = free * 0.125
                    buf[m, 4] = free * gpus_inv[m]
                    buf[m, 5] = int(ms.jobs[m])
        if self._measure_read != sim.measure_version:
            buf[:, 6] = ms.measured
            self._measure_read = sim.measure_version
        key = (sim.measure_version, sim.now)
        if key != self._age_key:
            # Never-measured machines have measured_at = -inf: log1p(inf) is replaced by -1.
            age = np.log1p(sim.now - ms.measured_at)
            age[age == np.inf] = -1.0
            buf[:, 7] = age
            self._age_key = key
        return buf.copy()

    def _refresh_machine_columns(self) -> None:
        """Free GPUs, free fraction and jobs of every machine into the private buffer."""
        ms, buf = self.sim.machines, self._machines
        free = ms.free
        buf[:, 3] = free * 0.125
        buf[:, 4] = free * self._gpus_inv
        buf[:, 5] = ms.jobs

    def _global(self, placing_phase: bool) -> np.ndarray:
        sim = self.sim
        n = sim.num_jobs
        return np.array([
            1.0 if placing_phase else 0.0,
            math.log1p(sim.now),
            math.log1p(len(sim.pending)),
            math.log1p(sim.num_running),
            sim.free_total / sim.total_gpus,
            (n - sim.next_arrival) / n,
            sim.finished_count / n,
            math.log1p(sim.pending_gpus),
            1.0 if self.preemption else 0.0,
            1.0 if self.clairvoyant else 0.0,
        ], dtype=np.float32)

    def _placing(self) -> np.ndarray:
        """Features of the job being placed (PLACE phase)."""
        sim = self.sim
        j = sim.placing
        static = self._job_static[j]
        return np.array([
            1.0,
            float(static[2]),
            math.log2(1 + sim.placing_need),
            float(static[6]),
            math.log1p(sim.now - float(sim.submit[j])),
            math.log1p(float(sim.jobs.attained[j])),
            math.log1p(float(sim.duration[j])) if self.clairvoyant else -1.0,
            float(static[12]),
            len(sim.alloc[j]),
        ], dtype=np.float32)

    def build(self, placing_phase: bool, pending: np.ndarray, running: np.ndarray
              ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """Shared feature arrays, the orderer's mask and the placer's mask."""
        if self._kernel is not None:
            feats, order_mask, place_mask, self._ids = self._build_compiled(placing_phase, pending, running)
            return feats, order_mask, place_mask
        sim = self.sim
        jobs = self._jobs_block(placing_phase, pending, running)
        machines = self._machines_block()
        g = self._global(placing_phase)
        order_mask = np.zeros(self.n_orderer_actions, dtype=np.int8)
        place_mask = np.zeros(self.n_placer_actions, dtype=np.int8)
        if placing_phase:
            usable = sim.placeable_machines(sim.placing)
            machines[:, 9] = usable
            machines[:, 10] = sim.job_speed[sim.placing][sim.machine_type]
            p = self._placing()
            order_mask[-1] = 1
            place_mask[: self.M] = usable
        else:
            p = self._idle_placing.copy()
            k = len(pending)
            order_mask[:k] = jobs[:k, 11] > 0
            if self.R:
                order_mask[self.K: self.K + len(running)] = 1
            # advance needs a future event; in the terminal observation it is the only (no-op) action.
            order_mask[-1] = 1 if sim.has_future_event() or sim.done else 0
            place_mask[-1] = 1
        feats = {"jobs": jobs, "machines": machines, "global": g, "placing": p}
        return feats, order_mask, place_mask

    def _build_compiled(self, placing_phase: bool, pending: np.ndarray, running: np.ndarray):
        """``build`` in one compiled call: every array written afresh, the same values and bits
        as the numpy path (which keeps caches because each of its numpy calls is costly)."""
        jobs, machines, g, p, order_mask, place_mask, ids = self._build_arrays(placing_phase, pending, running)
        return {"jobs": jobs, "machines": machines, "global": g, "placing": p}, order_mask, place_mask, ids

    def _build_arrays(self, placing_phase: bool, pending: np.ndarray, running: np.ndarray) -> tuple:
        """The compiled build's fresh arrays: jobs, machines, global, placing, both masks, candidate ids."""
        empty, zeros, f32 = np.empty, np.zeros, np.float32
        # Arrays the kernel writes whole come from np.empty.
        jobs, machines = zeros(self._jobs_shape, f32), empty(self._machines_shape, f32)
        g, p = empty(self._n_global, f32), zeros(self._n_placing, f32)
        order_mask, place_mask = zeros(self.n_orderer_actions, np.int8), zeros(self.n_placer_actions, np.int8)
        ids = empty(self.K + self.R, np.int64)
        self.build_into(jobs, machines, g, p, order_mask, place_mask, ids, placing_phase, pending, running)
        return jobs, machines, g, p, order_mask, place_mask, ids

    def build_into(self, jobs: np.ndarray, machines: np.ndarray, glob: np.ndarray, placing: np.ndarray,
                   order_mask: np.ndarray, place_mask: np.ndarray, ids: np.ndarray,
                   placing_phase: bool, pending: np.ndarray, running: np.ndarray) -> None:
        """The compiled ``build`` writing into the given arrays: ``jobs``, ``placing`` and both masks
        zero-filled, ``machines``, ``glob`` and ``ids`` written whole. The batched vector env
        (``cluster_env.vector``) passes rows of its stacked buffers. Compiled kernels only."""
        sim = self.sim
        job = sim.placing
        version, now = sim.measure_version, sim.now
        age_key = (version, now)
        self._kernel(
            jobs, machines, glob, placing, order_mask, place_mask, ids,
            pending, running, placing_phase, version != self._measure_shown, age_key != self._age_key, now,
            job, sim.placing_need, len(sim.alloc[job]) if job >= 0 else 0, len(sim.pending),
            sim._n, sim.next_arrival, sim.finished_count, sim.pending_gpus, *self._episode_args)
        self._ids_of, self._age_key, self._measure_shown, self._ids = pending, age_key, version, ids
