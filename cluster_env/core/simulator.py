"""Event-driven simulator of a heterogeneous GPU cluster (no RL, no PettingZoo).

The clock jumps from event to event: job arrival, job completion, end of a restart overhead,
fluctuation update (only while jobs run) and, when preemption is on, a periodic scheduling tick.
Between two events every running job progresses at a constant speed, so the cost of an episode
grows with its number of events, not with simulated seconds. All per-event work is vectorised
over the running jobs.

Decisions happen at a fixed clock: ``start(job)`` then ``place(machine)`` until the job holds all
its GPUs, ``preempt(job)``, or ``advance()`` to run to the next event.

Speed of a running job ``j`` (work seconds per wall second)::

    nominal_j = min_{GPU types used} speed[type_j, gpu, bucket_j] * (spread ratio if > 1 machine)
    rate_j    = nominal_j * min_{machines used}(static_m * fluct_m)
                / (1 + alpha * comm[type_j] * max_{machines used}(jobs_on_m - 1))

``nominal_j`` is what a scheduler can compute from public tables; the machine factors and the
contention are hidden and only seen through measured progress.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np

from cluster_env.core.config import WorldConfig
from cluster_env.core.instance import Cluster, Workload
from cluster_env.world.fluctuation import FluctuationProcess, draw_static_factors
from cluster_env.world.gpu_catalog import gpu_spec
from cluster_env.world.throughputs import (
    bucket_index,
    comm_intensity,
    relative_speed_table,
    spread_ratio_table,
)

# Job status codes.
NOT_ARRIVED, PENDING, RUNNING, FINISHED = 0, 1, 2, 3

_EPS = 1e-9


@dataclass
class JobState:
    """Per-job state of one episode; every array has shape (N,)."""

    status: np.ndarray          # (N,) int8   NOT_ARRIVED / PENDING / RUNNING / FINISHED
    progress: np.ndarray        # (N,) float64 work done (reference seconds)
    attained: np.ndarray        # (N,) float64 attained service, GPU-seconds of execution
    executed: np.ndarray        # (N,) float64 seconds of execution (restart overhead excluded)
    held: np.ndarray            # (N,) float64 seconds holding GPUs (restart overhead included)
    first_start: np.ndarray     # (N,) float64 first start time, nan before
    finish: np.ndarray          # (N,) float64 finish time, nan before
    restarts: np.ndarray        # (N,) int64  number of preemptions suffered
    restart_until: np.ndarray   # (N,) float64 end of the current restart overhead
    nominal: np.ndarray         # (N,) float64 nominal speed under the current placement
    rate: np.ndarray            # (N,) float64 true speed under the current placement
    first_machine: np.ndarray   # (N,) int64  first machine of the current placement, -1 if none
    n_machines: np.ndarray      # (N,) int64  machines of the current placement


@dataclass
class MachineState:
    """Per-machine state; every array has shape (M,)."""

    free: np.ndarray            # (M,) int64  free GPUs
    jobs: np.ndarray            # (M,) int64  running jobs holding GPUs on the machine
    static: np.ndarray          # (M,) float64 static speed factor (hidden)
    measured: np.ndarray        # (M,) float64 measured speed relative to nominal (observable)
    measured_at: np.ndarray     # (M,) float64 time of the last measurement, -inf if never


class ClusterSimulator:
    """One episode of a cluster running a workload under a world model."""

    def __init__(self, cluster: Cluster, workload: Workload, world: WorldConfig,
                 rng: np.random.Generator, preemption: bool = False,
                 scheduling_tick: float = 300.0) -> None:
        world.validate()
        self.cluster, self.workload, self.world, self.rng = cluster, workload, world, rng
        self.preemption = preemption
        self.scheduling_tick = scheduling_tick
        n, m = workload.num_jobs, cluster.num_machines
        t = len(cluster.gpu_type_names)
        self.num_jobs, self.num_machines, self.num_types = n, m, t

        self.submit = workload.submit
        self.duration = workload.duration
        self.gpus = workload.gpus
        self.job_type = workload.job_type
        self.machine_type = cluster.machine_type
        self.machine_gpus = cluster.machine_gpus
        self.total_gpus = cluster.total_gpus

        # Public speed tables, per job: speed and spread ratio on each GPU type of the cluster.
        bucket = bucket_index(self.gpus)
        speed = relative_speed_table(cluster.gpu_type_names, world.reference_gpu)   # (J, T, B)
        self.job_speed = speed[self.job_type, :, bucket]                              # (N, T)
        if world.spread_penalty:
            spread = spread_ratio_table(cluster.gpu_type_names)
            self.job_spread = spread[self.job_type, :, bucket]                        # (N, T)
        else:
            self.job_spread = np.ones((n, t))
        self.comm = comm_intensity()[self.job_type]                                  # (N,)
        self.alpha = world.contention_alpha if world.contention else 0.0

        # Which GPU types each job may use (None: all).
        self.allowed = self._allowed_matrix(workload, cluster)                       # (N, T) bool or None
        usable_speed = self.job_speed if self.allowed is None else np.where(self.allowed, self.job_speed, 0.0)
        self.ideal_runtime = self.duration / usable_speed.max(axis=1)                # (N,)

        specs = [gpu_spec(name) for name in cluster.gpu_type_names]
        self.price = np.array([s.price_per_gpu_hour for s in specs])                 # (T,) $/GPU-hour
        self.busy_watts = np.array([s.busy_watts for s in specs])                    # (T,)
        self.idle_watts = np.array([s.idle_watts for s in specs])                    # (T,)
        self.gpus_per_type = np.bincount(self.machine_type, weights=self.machine_gpus, minlength=t)

        # Hidden machine factors.
        params = world.fluctuation_params
        sigma = params.static_sigma if world.static_factors else 0.0
        static = draw_static_factors(m, sigma, rng)
        self.fluct = FluctuationProcess(m, params, rng) if world.fluctuation else None
        self.fluct_interval = params.interval

        self.jobs = JobState(
            status=np.zeros(n, dtype=np.int8),
            progress=np.zeros(n), attained=np.zeros(n), executed=np.zeros(n), held=np.zeros(n),
            first_start=np.full(n, np.nan), finish=np.full(n, np.nan),
            restarts=np.zeros(n, dtype=np.int64), restart_until=np.zeros(n),
            nominal=np.zeros(n), rate=np.zeros(n),
            first_machine=np.full(n, -1, dtype=np.int64), n_machines=np.zeros(n, dtype=np.int64),
        )
        self.machines = MachineState(
            free=self.machine_gpus.copy(), jobs=np.zeros(m, dtype=np.int64), static=static,
            measured=np.ones(m), measured_at=np.full(m, -np.inf),
        )
        self.machine_factor = static * (self.fluct.factors if self.fluct is not None else 1.0)

        self.now = 0.0
        self.pending: list[int] = []                  # pending job ids, ascending (= arrival order)
        self.running: list[int] = []                  # running job ids, unordered
        self._run_pos: dict[int, int] = {}            # job id -> index in self.running
        self.alloc: dict[int, list[tuple[int, int]]] = {}   # job -> [(machine, gpus)]
        self.machine_jobs: list[dict[int, int]] = [dict() for _ in range(m)]  # machine -> {job: gpus}
        self.free_per_type = self.gpus_per_type.astype(np.int64).copy()        # (T,)
        self.held_per_type = np.zeros(t, dtype=np.int64)                       # (T,)
        self.placing: int = -1                        # job being placed, -1 if none
        self.placing_need: int = 0                    # GPUs it still needs

        self.next_arrival = 0
        self.finished_count = 0
        self.arrived_count = 0
        self.events = 0
        self.preemptions = 0
        self._dirty = True
        self._run_idx = np.zeros(0, dtype=np.int64)
        self._fluct_time = 0.0
        self._next_fluct = self.fluct_interval if self.fluct is not None else math.inf
        self._next_tick = scheduling_tick if preemption else math.inf

        # Accounting since the start of the episode.
        self.busy_gpu_seconds = 0.0
        self.fee = 0.0
        self.energy_joules = 0.0
        self.job_seconds = 0.0          # integral of the number of jobs in the system

        self._arrive_until(0.0)

    # ------------------------------------------------------------------ setup helpers
    @staticmethod
    def _allowed_matrix(workload: Workload, cluster: Cluster) -> np.ndarray | None:
        if workload.allowed_gpu_types is None or all(a is None for a in workload.allowed_gpu_types):
            return None
        names = cluster.gpu_type_names
        allowed = np.ones((workload.num_jobs, len(names)), dtype=bool)
        for j, types in enumerate(workload.allowed_gpu_types):
            if types is not None:
                allowed[j] = [name in types for name in names]
        return allowed

    # ------------------------------------------------------------------ queries
    @property
    def done(self) -> bool:
        return self.finished_count == self.num_jobs

    def has_future_event(self) -> bool:
        """Whether ``advance`` can move the clock (an arrival, or a running job)."""
        return self.next_arrival < self.num_jobs or bool(self.running)

    def usable_free(self, jobs: np.ndarray) -> np.ndarray:
        """Free GPUs each job may use now; shape of ``jobs``."""
        if self.allowed is None:
            return np.full(len(jobs), self.free_per_type.sum(), dtype=np.int64)
        return self.allowed[jobs].astype(np.int64) @ self.free_per_type

    def fits(self, jobs: np.ndarray) -> np.ndarray:
        """Whether each job fits in the free GPUs it may use."""
        return self.gpus[jobs] <= self.usable_free(jobs)

    def placeable_machines(self, job: int) -> np.ndarray:
        """(M,) bool: machines with a free GPU of a type the job may use."""
        ok = self.machines.free > 0
        if self.allowed is not None:
            ok &= self.allowed[job][self.machine_type]
        return ok

    def in_system(self) -> int:
        return self.arrived_count - self.finished_count

    # ------------------------------------------------------------------ decisions
    def start(self, job: int) -> None:
        """Begin placing a pending job that fits; ``place`` then gives it GPUs."""
        if self.placing >= 0:
            raise RuntimeError("a job is already being placed")
        if self.jobs.status[job] != PENDING:
            raise ValueError(f"job {job} is not pending")
        if not self.fits(np.array([job]))[0]:
            raise ValueError(f"job {job} does not fit the free GPUs")
        self.placing, self.placing_need = job, int(self.gpus[job])
        self.alloc[job] = []

    def place(self, machine: int) -> bool:
        """Give the job being placed as many free GPUs of ``machine`` as it still needs.

        Returns True when the job holds all its GPUs and has started.
        """
        job = self.placing
        if job < 0:
            raise RuntimeError("no job is being placed")
        if not self.placeable_machines(job)[machine]:
            raise ValueError(f"machine {machine} has no free GPU that job {job} may use")
        take = int(min(self.machines.free[machine], self.placing_need))
        self.machines.free[machine] -= take
        t = self.machine_type[machine]
        self.free_per_type[t] -= take
        self.held_per_type[t] += take
        self.alloc[job].append((machine, take))
        self.placing_need -= take
        if self.placing_need == 0:
            self._launch(job)
            self.placing = -1
            return True
        return False

    def _launch(self, job: int) -> None:
        js = self.jobs
        alloc = self.alloc[job]
        machines = [m for m, _ in alloc]
        for m, g in alloc:
            self.machine_jobs[m][job] = g
            self.machines.jobs[m] += 1
        types = self.machine_type[machines]
        nominal = self.job_speed[job, types].min()
        if len(machines) > 1:
            nominal *= self.job_spread[job, types].min()
        js.nominal[job] = nominal
        js.first_machine[job] = machines[0]
        js.n_machines[job] = len(machines)
        if js.restarts[job] > 0 and self.world.restart_overhead > 0:
            js.restart_until[job] = self.now + self.world.restart_overhead
        else:
            js.restart_until[job] = self.now
        if math.isnan(js.first_start[job]):
            js.first_start[job] = self.now
        self._remove_pending(job)
        js.status[job] = RUNNING
        self._run_pos[job] = len(self.running)
        self.running.append(job)
        self._dirty = True

    def preempt(self, job: int) -> None:
        """Stop a running job; it keeps its progress and returns to the pending queue."""
        if not self.preemption:
            raise ValueError("preemption is disabled in this scenario")
        if self.jobs.status[job] != RUNNING:
            raise ValueError(f"job {job} is not running")
        self._release(job)
        self.jobs.status[job] = PENDING
        self.jobs.restarts[job] += 1
        self.preemptions += 1
        bisect.insort(self.pending, job)

    def _release(self, job: int) -> None:
        for m, g in self.alloc.pop(job):
            self.machines.free[m] += g
            self.machines.jobs[m] -= 1
            del self.machine_jobs[m][job]
            t = self.machine_type[m]
            self.free_per_type[t] += g
            self.held_per_type[t] -= g
        pos = self._run_pos.pop(job)
        last = self.running.pop()
        if last != job:
            self.running[pos] = last
            self._run_pos[last] = pos
        self.jobs.first_machine[job] = -1
        self.jobs.n_machines[job] = 0
        self.jobs.rate[job] = 0.0
        self._dirty = True

    def _remove_pending(self, job: int) -> None:
        i = bisect.bisect_left(self.pending, job)
        if i >= len(self.pending) or self.pending[i] != job:
            raise ValueError(f"job {job} is not in the pending queue")
        del self.pending[i]

    # ------------------------------------------------------------------ dynamics
    def _refresh_rates(self) -> None:
        """Recompute the true speed of every running job (vectorised, multi-machine jobs looped)."""
        idx = np.fromiter(self.running, dtype=np.int64, count=len(self.running))
        self._run_idx = idx
        if not len(idx):
            self._dirty = False
            return
        js = self.jobs
        fm = js.first_machine[idx]
        factor = self.machine_factor[fm]
        crowd = self.machines.jobs[fm] - 1
        multi = np.flatnonzero(js.n_machines[idx] > 1)
        for k in multi:
            machines = [m for m, _ in self.alloc[int(idx[k])]]
            factor[k] = self.machine_factor[machines].min()
            crowd[k] = self.machines.jobs[machines].max() - 1
        rate = js.nominal[idx] * factor
        if self.alpha:
            rate /= 1.0 + self.alpha * self.comm[idx] * crowd
        js.rate[idx] = rate
        self._dirty = False

    def next_event_time(self) -> float:
        t = self.submit[self.next_arrival] if self.next_arrival < self.num_jobs else math.inf
        if self.running:
            if self._dirty:
                self._refresh_rates()
            idx = self._run_idx
            js = self.jobs
            until = js.restart_until[idx]
            remaining = self.duration[idx] - js.progress[idx]
            eta = np.where(until > self.now, until, self.now + remaining / js.rate[idx])
            t = min(t, float(eta.min()), self._next_fluct, self._next_tick)
        return t

    def advance(self) -> float:
        """Run the clock to the next event and process every event at that time.

        Returns the elapsed simulated seconds. Raises if no future event exists.
        """
        if self.placing >= 0:
            raise RuntimeError("cannot advance while a job is being placed")
        # Periodic events that fell due while nothing ran are brought up to the present first.
        if self.fluct is not None and self._next_fluct <= self.now:
            self._update_fluctuation()
        if self._next_tick <= self.now:
            self._next_tick = self.now + self.scheduling_tick
        t_next = self.next_event_time()
        if not math.isfinite(t_next):
            raise RuntimeError("no future event: nothing running and no arrival left")
        dt = t_next - self.now
        self._accrue(dt)
        self.now = t_next
        self.events += 1
        if self.running:
            self._complete_due()
        self._arrive_until(self.now)
        if self.fluct is not None and self.now >= self._next_fluct - _EPS:
            self._update_fluctuation()
        if self.now >= self._next_tick - _EPS:
            self._next_tick = self.now + self.scheduling_tick
        return dt

    def _accrue(self, dt: float) -> None:
        """Progress and accounting over ``dt`` seconds at constant speeds."""
        self.job_seconds += self.in_system() * dt
        held = self.held_per_type
        self.fee += float(held @ self.price) * dt / 3600.0
        idle = self.gpus_per_type - held
        self.energy_joules += float(held @ self.busy_watts + idle @ self.idle_watts) * dt
        if not self.running or dt <= 0:
            return
        idx = self._run_idx
        js = self.jobs
        busy = int(held.sum())
        self.busy_gpu_seconds += busy * dt
        js.held[idx] += dt
        # Time spent in the restart overhead is not execution.
        exec_dt = np.clip(self.now + dt - np.maximum(js.restart_until[idx], self.now), 0.0, dt)
        js.progress[idx] += js.rate[idx] * exec_dt
        js.executed[idx] += exec_dt
        js.attained[idx] += self.gpus[idx] * exec_dt
        self._measure(idx, exec_dt)

    def _measure(self, idx: np.ndarray, exec_dt: np.ndarray) -> None:
        """Observed progress gives a noisy speed measurement of each single-machine job's machine."""
        js = self.jobs
        ok = (exec_dt > 0) & (js.n_machines[idx] == 1)
        if not ok.any():
            return
        sel = idx[ok]
        ratio = js.rate[sel] / js.nominal[sel]
        noise = self.world.measurement_noise
        if noise > 0:
            ratio = ratio * (1.0 + noise * self.rng.standard_normal(len(sel)))
        machines = js.first_machine[sel]
        w = 1.0 - np.exp(-exec_dt[ok] / self.world.measurement_tau)
        never = ~np.isfinite(self.machines.measured_at[machines])
        w = np.where(never, 1.0, w)
        ms = self.machines
        ms.measured[machines] = (1.0 - w) * ms.measured[machines] + w * ratio
        ms.measured_at[machines] = self.now + exec_dt[ok]

    def _complete_due(self) -> None:
        """Finish running jobs whose remaining work takes under a microsecond at their speed."""
        idx = self._run_idx
        js = self.jobs
        remaining = self.duration[idx] - js.progress[idx]
        due = idx[remaining <= js.rate[idx] * 1e-6 + 1e-12]
        for job in due.tolist():
            js.progress[job] = self.duration[job]
            js.finish[job] = self.now
            js.status[job] = FINISHED
            self._release(job)
            self.finished_count += 1

    def _arrive_until(self, t: float) -> None:
        n = self.num_jobs
        while self.next_arrival < n and self.submit[self.next_arrival] <= t:
            job = self.next_arrival
            self.jobs.status[job] = PENDING
            self.pending.append(job)
            self.next_arrival += 1
            self.arrived_count += 1

    def _update_fluctuation(self) -> None:
        self.fluct.advance(self.now - self._fluct_time)
        self._fluct_time = self.now
        self.machine_factor = self.machines.static * self.fluct.factors
        self._next_fluct = self.now + self.fluct_interval
        self._dirty = True
