"""Event-driven simulator of a heterogeneous GPU cluster (no RL, no PettingZoo).

The clock jumps from event to event: job arrival, job completion, end of a restart overhead,
fluctuation update (only while jobs run) and, when preemption is on, a periodic scheduling tick.
Between two events every running job progresses at a constant speed, so the cost of an episode
grows with its number of events, not with simulated seconds. Per-event work is vectorised over
the running jobs, except after a launch or a release: only the speeds of the jobs sharing its
machines change, and they are recomputed one by one (the same arithmetic, the same bits).

Running jobs live in compact slot arrays (swap-remove), so each event costs a handful of numpy
operations over the running jobs; the per-job arrays of :class:`JobState` are authoritative for
jobs that are not running and are brought up to date for running ones by :meth:`sync_running`.
A restart overhead is not an event: a restarting job simply starts progressing at its end.

Decisions happen at a fixed clock: ``start(job)`` then ``place(machine)`` until the job holds all
its GPUs, ``preempt(job)``, or ``advance()`` to run to the next event.

Speed of a running job ``j`` (work seconds per wall second)::

    nominal_j = min_{GPU types used} speed[type_j, gpu, bucket_j] * (spread factor if > 1 machine)
    rate_j    = nominal_j * min_{machines used}(static_m * fluct_m)
                / (1 + alpha * comm[type_j] * max_{machines used}(jobs_on_m - 1))

``nominal_j`` is what a scheduler can compute from public tables; the machine factors and the
contention are hidden and only seen through measured progress.
"""
from __future__ import annotations

import bisect
import itertools
import math
import struct
from dataclasses import dataclass, fields

import numpy as np

from cluster_env.core import kernels
from cluster_env.core.config import WorldConfig
from cluster_env.core.instance import Cluster, Workload
from cluster_env.world.fluctuation import FluctuationProcess, draw_static_factors
from cluster_env.world.gpu_catalog import gpu_spec
from cluster_env.world.interconnect import (
    allreduce_speed_factor,
    communication_demand,
    network_table,
    reference_ratio,
    spread_floor,
)
from cluster_env.world.throughputs import (
    bucket_index,
    comm_intensity,
    relative_speed_table,
    spread_ratio_table,
)

# Job status codes.
NOT_ARRIVED, PENDING, RUNNING, FINISHED = 0, 1, 2, 3

_EPS = kernels.TIME_EPS
# The compiled skip-idle loop's scalars (kernels.IF_* then kernels.II_*, adjacent in one buffer):
# packed from IF_NOW to II_RELEASED, read back from IF_NOW to II_AT.
_IDLE_OFFSET = 8 * kernels.IF_NOW
_IDLE_PACK = struct.Struct(f"{kernels.IF_SIZE - kernels.IF_NOW}d{kernels.II_RELEASED + 1}q")
_IDLE_UNPACK = struct.Struct(f"{kernels.IF_SIZE - kernels.IF_NOW}d{kernels.II_AT + 1}q")


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
    nominal: np.ndarray         # (N,) float64 nominal speed under the current placement


@dataclass(frozen=True)
class EpisodeView:
    """What an episode shows now, copied (a parallel env's ``episode_view()``, from whichever
    engine runs it): the workload's per-job facts, every job's state, the clock and the events."""

    workload: Workload
    submit: np.ndarray          # (N,) float64 arrival times
    duration: np.ndarray        # (N,) float64 true work, seconds on the reference GPU
    gpus: np.ndarray            # (N,) int64 GPUs each job asks for
    best_speed: np.ndarray      # (N,) float64 nominal speed of the fastest GPU type a job may use
    jobs: JobState              # every job's state now
    now: float                  # simulated seconds
    events: int                 # simulator events processed so far

    @property
    def num_jobs(self) -> int:
        return len(self.submit)

    @classmethod
    def of_simulator(cls, sim: "ClusterSimulator", jobs: "JobState | None" = None, now: "float | None" = None,
                     events: "int | None" = None) -> "EpisodeView":
        """The view of ``sim`` (its own job state, clock and events unless given)."""
        if jobs is None:
            jobs = JobState(*(np.array(getattr(sim.jobs, f.name)) for f in fields(JobState)))
        return cls(workload=sim.workload, submit=np.array(sim.submit), duration=np.array(sim.duration),
                   gpus=np.array(sim.gpus), best_speed=np.array(sim.best_speed), jobs=jobs,
                   now=float(sim.now if now is None else now), events=int(sim.events if events is None else events))


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
                 scheduling_tick: float = 300.0, time_limit: "float | None" = None) -> None:
        world.validate()
        self.cluster, self.workload, self.world, self.rng = cluster, workload, world, rng
        self.preemption = preemption
        self.scheduling_tick = float(scheduling_tick)
        # The clock never passes time_limit (the environment's max_time): an event is placed
        # there, and advancing stops there, however far the next event would be.
        self.time_limit = math.inf if time_limit is None else float(time_limit)
        n, m = workload.num_jobs, cluster.num_machines
        t = len(cluster.gpu_type_names)
        self.num_jobs, self.num_machines, self.num_types = n, m, t

        self.submit = workload.submit
        self._submit_list = workload.submit.tolist()     # Python floats: cheap scalar reads
        self.duration = workload.duration
        self.gpus = workload.gpus
        self._gpus_list = workload.gpus.tolist()
        self.job_type = workload.job_type
        self.machine_type = cluster.machine_type
        self._machine_type_list = cluster.machine_type.tolist()
        self.machine_gpus = cluster.machine_gpus
        self.total_gpus = cluster.total_gpus

        # Public speed tables, per job: speed and spread ratio on each GPU type of the cluster.
        bucket = bucket_index(self.gpus)
        speed = relative_speed_table(cluster.gpu_type_names, world.reference_gpu, speeds=world.speeds,
                                     shape=world.gavel_shape)                         # (J, T, B)
        self.job_speed = speed[self.job_type, :, bucket]                              # (N, T)
        if world.spread_penalty:
            spread = spread_ratio_table(cluster.gpu_type_names, world.gavel_shape)
            self.job_spread = spread[self.job_type, :, bucket]                        # (N, T)
        else:
            self.job_spread = np.ones((n, t))
        self.comm = comm_intensity()[self.job_type]                                  # (N,)
        # Python floats: what the compiled kernels were specialised for, whatever the caller passed.
        self.alpha = float(world.contention_alpha) if world.contention else 0.0

        # Which GPU types each job may use (None: all).
        self.allowed = self._allowed_matrix(workload, cluster)                       # (N, T) bool or None
        # Machines a job may span without the spread penalty: 1, or with spread_reference
        # "fewest_machines" the fewest machines (of its allowed types) that can hold it.
        if world.spread_reference == "fewest_machines":
            self.free_spread_machines = self._fewest_machines(self.gpus, self.allowed, cluster)   # (N,)
        else:
            self.free_spread_machines = np.ones(n, dtype=np.int64)
        self._free_spread_list = self.free_spread_machines.tolist()
        # spread_model "allreduce": each job's communication demand per GPU type, its ratio at the
        # reference placement and the types' interconnect (cluster_env.world.interconnect); empty
        # arrays under "gavel" (the compiled engine tells the models apart by job_xref's length).
        self._allreduce = bool(world.spread_penalty) and world.spread_model == "allreduce"
        if self._allreduce:
            names = cluster.gpu_type_names
            self.net = network_table(names, world.interconnect)                        # (3, T)
            self.job_demand = communication_demand(names, self.job_type, self.gpus,
                                                   world.gavel_testbed_gbps, speeds=world.speeds,
                                                   shape=world.gavel_shape,
                                                   comm=world.comm_source)             # (N, T)
            self.job_xref = reference_ratio(self.job_type, self.gpus, self.allowed, cluster.machine_gpus,
                                            cluster.machine_type, self.job_demand, self.net,
                                            self.free_spread_machines)                 # (N,)
            # The spread guard's floor: the lowest multiplier this model can charge each job.
            self.spread_floor = spread_floor(self.gpus, self.job_demand, self.job_xref, self.net,
                                             self.allowed, cluster.machine_type, cluster.machine_gpus)
        else:
            self.net = np.zeros((3, t))
            self.job_demand = np.zeros((n, 0))
            self.job_xref = np.zeros(0)
            # NaN: the guard uses the observation's Gavel bound (baselines.placers.spread_context).
            self.spread_floor = np.full(n, np.nan)
        usable_speed = self.job_speed if self.allowed is None else np.where(self.allowed, self.job_speed, 0.0)
        self.best_speed = usable_speed.max(axis=1)                                   # (N,) fastest allowed type
        self.ideal_runtime = self.duration / self.best_speed                         # (N,)

        specs = [gpu_spec(name) for name in cluster.gpu_type_names]
        self.price = np.array([s.price_per_gpu_hour for s in specs])                 # (T,) $/GPU-hour
        self.busy_watts = np.array([s.busy_watts for s in specs])                    # (T,)
        self.idle_watts = np.array([s.idle_watts for s in specs])                    # (T,)
        self.gpus_per_type = np.bincount(self.machine_type, weights=self.machine_gpus,
                                         minlength=t).astype(np.int64)               # (T,)

        # Hidden machine factors.
        params = world.fluctuation_params
        sigma = params.static_sigma if world.static_factors else 0.0
        static = draw_static_factors(m, sigma, rng)
        self._k = kernels.active()     # per-event arithmetic: compiled (numba) or numpy, the same bits
        self.fluct = FluctuationProcess(m, params, rng, self._k) if world.fluctuation else None

        # The arrays the compiled kernels read are rows of a few blocks (one argument each instead
        # of one per array: numba converts every argument of every call, tens of ns apiece), and
        # the blocks are parts of three arenas, one per dtype (kernels.arenas: the compiled
        # skip-idle loop takes the three).
        cap = max(1, min(n, self.total_gpus))          # running slots: each running job holds a GPU
        *self._arenas, parts = kernels.arenas(n, m, t, cap)
        parts["static"][:] = static
        static = parts["static"]
        parts["submit"][:] = workload.submit
        parts["duration"][:] = workload.duration
        parts["gpus"][:] = workload.gpus
        parts["machine_type"][:] = cluster.machine_type
        self._arena_parts = parts
        if self.fluct is not None:
            self._adopt_fluctuation_arrays(parts)
        # progress, attained, executed, held, executed before this run, held before this run,
        # nominal speed, first start, finish
        self._job_block = parts["job_block"]
        self._job_block[7:] = np.nan
        self._machine_int = parts["machine_int"]          # free GPUs, running jobs
        self._machine_int[0] = self.machine_gpus
        self._machine_float = parts["machine_float"]       # measured speed, time measured
        self._machine_float[0] = 1.0
        self._machine_float[1] = -np.inf
        self.jobs = JobState(
            status=np.zeros(n, dtype=np.int8),
            progress=self._job_block[0], attained=self._job_block[1], executed=self._job_block[2],
            held=self._job_block[3], first_start=self._job_block[7], finish=self._job_block[8],
            restarts=np.zeros(n, dtype=np.int64), nominal=self._job_block[6],
        )
        self.machines = MachineState(
            free=self._machine_int[0], jobs=self._machine_int[1], static=static,
            measured=self._machine_float[0], measured_at=self._machine_float[1],
        )
        # Machine factor and machines.jobs - 1 as floats (the contention term's input without an
        # int-to-float cast), rows of one block: one argument for the compiled kernels.
        self._machine_rows = parts["machine_rows"]
        self.machine_factor = self._machine_rows[0]
        np.multiply(static, self.fluct.factors if self.fluct is not None else np.ones(m), out=self.machine_factor)
        self._crowd = self._machine_rows[1]
        self._crowd[:] = -1.0

        # Running jobs in compact slots.
        self._n = 0
        self._slot = {}                                    # job id -> slot
        # One block per dtype (a slot moves with three copies); each name is a row view:
        self._s_float = parts["s_float"]
        (self._s_left,                                     # (cap,) work left (reference seconds)
         self._s_rate,                                     # (cap,) true speed
         self._s_nominal,                                  # (cap,) nominal speed
         self._s_acomm,                                    # (cap,) alpha x comm intensity of the job type
         self._s_until,                                    # (cap,) end of the restart overhead
         self._s_t0) = self._s_float                       # (cap,) launch time
        self._s_int = parts["s_int"]
        (self._s_job,                                      # (cap,) job id in the slot
         self._s_fm,                                       # (cap,) first machine of the placement
         self._s_moff,                                     # (cap,) its machines in _mpool (compiled kernels)
         self._s_mlen) = self._s_int                       # (cap,) how many machines it spans
        self._s_flag = parts["s_flag"]
        (self._s_multi,                                    # (cap,) placed on more than one machine
         self._s_single) = self._s_flag                    # (cap,) not _s_multi (its speed is measured)
        self._slot_arrays = (self._s_float, self._s_int, self._s_flag)
        self._scratch = parts["scratch"]                   # (cap,) per-event temporaries
        self._due = parts["due"]                           # (cap,) slots found finished by an event
        self._no_layout = (np.zeros(0, dtype=np.int64),) * 3
        # Compiled kernels refresh every speed in about the time of one numpy call, so they skip
        # the bookkeeping of which jobs a launch or release touched.
        self._refresh_all = self._k.name == "numba"
        # Without machine factors, contention, measurement noise or restart overhead a single-machine
        # job runs at exactly its nominal speed, so every measured speed is exactly 1 forever
        # (1 + w (1 - 1)): the compiled path then skips the measurement's arithmetic and random
        # draws (there are none) and only stamps its time, inside the per-event call.
        self._trivial_measure = bool(
            self._refresh_all and self.fluct is None and self.alpha == 0.0
            and float(world.measurement_noise) == 0.0 and not world.restart_overhead > 0
            and np.all(self.machine_factor == 1.0)
            and np.all(np.isfinite(self.job_speed) & (self.job_speed > 0)))
        # Without fluctuation and contention a job's speed is fixed for its whole run (its nominal
        # speed times its slowest machine's static factor): the compiled path then sets it at
        # launch and keeps it, instead of refreshing every speed after each launch or release.
        self._static_rates = self._refresh_all and self.fluct is None and self.alpha == 0.0
        self._empty = np.zeros(0, dtype=np.int64)
        self._overhead = float(world.restart_overhead)
        self._n_multi = 0
        self._job_machines: dict[int, list[int]] = {}      # multi-machine job -> its machines
        self._layout = None                                # cached segments of multi-machine jobs
        # The compiled kernels read each spread job's machines from a pool instead of the
        # segments above (rebuilt whenever one starts or ends): appended at launch, compacted
        # when full; a slot's offset and length move with the slot.
        self._mpool = np.zeros(max(64, 2 * self.total_gpus), dtype=np.int64)
        self._mpool_end = 0
        # Beside each pooled machine, the GPUs the job holds there (``alloc`` for compiled
        # observers: the extended-v2 placement columns read a spread job's allocation from it).
        self._gpool = np.zeros(len(self._mpool), dtype=np.int64)
        self._exec_before = self._job_block[4]             # (N,) seconds executed in past runs
        self._held_before = self._job_block[5]             # (N,) seconds holding GPUs in past runs

        self.now = 0.0
        self.pending: list[int] = []                  # pending job ids, ascending (= arrival order)
        self.pending_gpus = 0                         # GPUs requested by pending jobs
        self.alloc: dict[int, list[tuple[int, int]]] = {}   # job -> [(machine, gpus)]
        self.machine_jobs: list[dict[int, int]] = [dict() for _ in range(m)]  # machine -> {job: gpus}
        self._type_int = parts["type_int"]
        self._type_int[0] = self.gpus_per_type
        self.free_per_type = self._type_int[0]                                 # (T,)
        self.held_per_type = self._type_int[1]                                 # (T,)
        self.placing: int = -1                        # job being placed, -1 if none
        # Opt-in record of (time, job, [(machine, gpus)]) at launch and (time, job, None) at
        # release, for timelines; None keeps the hot path free of it.
        self.allocation_log: list | None = None
        # Opt-in record of (time, busy GPUs, pending jobs, running jobs) at every event: the state
        # in force from that time until the next event, for plots whose time average must equal
        # the metrics; None (the default) keeps the hot path free of it.
        self.event_log: list | None = None
        # Change records for observers that cache what they derive from ``machines``: every
        # machine whose free GPUs or job count changed, in order (observers keep a read position),
        # and a counter bumped whenever measured speeds change.
        self.machine_log: list[int] = []
        self.measure_version = 0
        self.placing_need: int = 0                    # GPUs it still needs

        self.next_arrival = 0
        self.finished_count = 0
        self.arrived_count = 0
        self.events = 0
        self.preemptions = 0
        self._dirty = True              # every rate must be recomputed (machine factors moved)
        self._stale: set[int] = set()   # jobs whose rate must be recomputed (neighbours changed)
        self._restarting = False
        self._next_finish = math.inf
        self._fluct_time = 0.0
        self._next_fluct = self._fluct_period() if self.fluct is not None else math.inf
        self._measure_time = 0.0
        self._next_tick = self.scheduling_tick if preemption else math.inf
        self.last_tick = -math.inf                    # time of the last scheduling tick

        # Accounting since the start of the episode, and its current rates.
        self.busy_gpu_seconds = 0.0
        self.fee = 0.0
        self.energy_joules = 0.0
        self.job_seconds = 0.0          # integral of the number of jobs in the system
        self._held_total = 0
        self.free_total = self.total_gpus
        self._fee_rate = 0.0            # dollars per second
        self._power = float(self.gpus_per_type @ self.idle_watts)   # watts
        self._price_per_s = (self.price / 3600.0).tolist()
        self._extra_watts = (self.busy_watts - self.idle_watts).tolist()
        # The compiled skip-idle loop (kernels.idle_events): without allowed-type restrictions, and
        # where an event needs no random draw outside the fluctuation update (fluctuation on, or
        # the trivial measurement).
        self._idle_kernel = self._k.idle_events if (
            self._k.idle_events is not None and self.allowed is None
            and (self.fluct is not None or self._trivial_measure)) else None
        if self._idle_kernel is not None:
            self._init_idle_kernel(n)

        self._arrive_until(0.0)

    # ------------------------------------------------------------------ setup helpers
    def _adopt_fluctuation_arrays(self, parts: dict) -> None:
        """Give the fluctuation process arena views for its arrays (the same values; it updates
        them in place only), so that the compiled skip-idle loop reaches them through the arenas."""
        fl = self.fluct
        rows = parts["fluct"]
        for i, name in enumerate(("log_speed", "_log_mult", "factors", "_next_switch", "_since")):
            rows[i] = getattr(fl, name)
            setattr(fl, name, rows[i])
        parts["fluct_due"][:] = fl._due
        fl._due = parts["fluct_due"]
        parts["straggling"][:] = fl.straggling
        fl.straggling = parts["straggling"]

    def _init_idle_kernel(self, n: int) -> None:
        """The scalars of the compiled skip-idle loop (``kernels.idle_events``): both arrays in one
        buffer, so that they go in with one ``struct`` pack and out with one unpack; the episode's
        constants among them."""
        k, fl, world, parts = kernels, self.fluct, self.world, self._arena_parts
        self._idle_raw = bytearray(8 * (k.IF_SIZE + k.II_SIZE))
        fs = self._idle_f = np.frombuffer(self._idle_raw, dtype=np.float64, count=k.IF_SIZE)
        ist = self._idle_i = np.frombuffer(self._idle_raw, dtype=np.int64, count=k.II_SIZE, offset=8 * k.IF_SIZE)
        fs[k.IF_TIME_LIMIT], fs[k.IF_ALPHA], fs[k.IF_TICK] = self.time_limit, self.alpha, self.scheduling_tick
        fs[k.IF_NOISE], fs[k.IF_TAU] = float(world.measurement_noise), world.measurement_tau
        ist[k.II_NUM_JOBS], ist[k.II_FLUCT] = n, fl is not None
        ist[k.II_STAMP], ist[k.II_STATIC_RATES] = self._trivial_measure, self._static_rates
        parts["type_float"][0] = self._price_per_s
        parts["type_float"][1] = self._extra_watts
        ist[k.II_RNG: k.II_RNG + 6] = k.rng_addresses(self.rng)     # self.rng outlives every call
        self._released = parts["released"]
        self._exps = parts["draws"][2]
        if fl is not None:
            params = world.fluctuation_params
            # FluctuationProcess._switch's constants, computed as it computes them.
            lam, mu = params.straggler_rate, 1.0 / fl._on_mean
            self._fluct_tot = lam + mu
            fs[k.IF_SIGMA], fs[k.IF_THETA], fs[k.IF_LAM] = params.sigma, params.theta, lam
            fs[k.IF_TOT], fs[k.IF_PI] = self._fluct_tot, lam / self._fluct_tot
            fs[k.IF_ON_MEAN], fs[k.IF_OFF_MEAN] = fl._on_mean, fl._off_mean
            fs[k.IF_SHIFT], fs[k.IF_LOG_SLOW] = fl._shift, fl._log_slow
            fs[k.IF_INTERVAL], fs[k.IF_QUIET] = params.interval, world.quiet_fluctuation_interval
        # What idle_events takes after ``resume`` and before the machine pool (passed at each call:
        # it is replaced when it grows).
        self._idle_args = (fs, ist, *self._arenas, self.jobs.status)

    @staticmethod
    def _fewest_machines(gpus: np.ndarray, allowed: "np.ndarray | None", cluster: Cluster) -> np.ndarray:
        """(N,) int64: the fewest machines of its allowed types that can hold each job's GPUs."""
        def fewest(machine_gpus: np.ndarray, need: np.ndarray) -> np.ndarray:
            capacity = np.cumsum(np.sort(machine_gpus)[::-1])          # largest machines first
            return np.minimum(np.searchsorted(capacity, need) + 1, len(capacity)).astype(np.int64)

        if allowed is None:
            return fewest(cluster.machine_gpus, gpus)
        out = np.ones(len(gpus), dtype=np.int64)
        rows, inverse = np.unique(allowed, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)          # numpy 2.0 and 2.1 return it with an extra axis
        for r, row in enumerate(rows):
            jobs = np.flatnonzero(inverse == r)
            usable = cluster.machine_gpus[row[cluster.machine_type]]
            if len(usable):
                out[jobs] = fewest(usable, gpus[jobs])
        return out

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

    def _fluct_period(self) -> float:
        # Fine-grained updates while jobs wait (decisions can depend on measured speeds); coarser
        # ones otherwise. Transitions are exact, so only the time resolution changes.
        interval = self.world.fluctuation_params.interval
        return interval if self.pending else max(interval, self.world.quiet_fluctuation_interval)

    # ------------------------------------------------------------------ queries
    @property
    def done(self) -> bool:
        return self.finished_count == self.num_jobs

    @property
    def num_running(self) -> int:
        return self._n

    @property
    def running(self) -> list[int]:
        """Running job ids (slot order)."""
        return self._s_job[: self._n].tolist()

    def running_jobs(self) -> np.ndarray:
        """Running job ids as an array (a copy, slot order)."""
        return self._s_job[: self._n].copy()

    def has_future_event(self) -> bool:
        """Whether ``advance`` can move the clock (an arrival, or a running job)."""
        return self.next_arrival < self.num_jobs or self._n > 0

    def usable_free(self, jobs: np.ndarray) -> np.ndarray:
        """Free GPUs each job may use now; shape of ``jobs``."""
        if self.allowed is None:
            return np.full(len(jobs), self.free_total, dtype=np.int64)
        return self.allowed[jobs].astype(np.int64) @ self.free_per_type

    def fits(self, jobs: np.ndarray) -> np.ndarray:
        """Whether each job fits in the free GPUs it may use."""
        if self.allowed is None:
            return self.gpus[jobs] <= self.free_total
        return self.gpus[jobs] <= self.usable_free(jobs)

    def any_fits(self, window: int) -> bool:
        """Whether any of the ``window`` oldest pending jobs fits now (cheap, no arrays)."""
        head = self.pending[:window]
        if not head:
            return False
        if self.allowed is None:
            return min(map(self._gpus_list.__getitem__, head)) <= self.free_total
        return bool(self.fits(np.array(head, dtype=np.int64)).any())

    def _fits_one(self, job: int) -> bool:
        if self.allowed is None:
            return self._gpus_list[job] <= self.free_total
        return bool(self.fits(np.array([job]))[0])

    def _placeable(self, job: int, machine: int) -> bool:
        """``placeable_machines(job)[machine]`` without building the whole mask."""
        if self.machines.free[machine] <= 0:
            return False
        return self.allowed is None or bool(self.allowed[job, self._machine_type_list[machine]])

    def placeable_machines(self, job: int) -> np.ndarray:
        """(M,) bool: machines with a free GPU of a type the job may use."""
        ok = self.machines.free > 0
        if self.allowed is not None:
            ok &= self.allowed[job][self.machine_type]
        return ok

    def in_system(self) -> int:
        return self.arrived_count - self.finished_count

    def sync_running(self) -> None:
        """Write the running jobs' progress, execution, service and held time into ``jobs``."""
        n = self._n
        if not n:
            return
        jobs = self._s_job[:n]
        js = self.jobs
        started = np.maximum(self._s_until[:n], self._s_t0[:n])
        exec_now = np.maximum(self.now - started, 0.0)
        js.progress[jobs] = self.duration[jobs] - self._s_left[:n]
        js.executed[jobs] = self._exec_before[jobs] + exec_now
        js.attained[jobs] = self.gpus[jobs] * js.executed[jobs]
        js.held[jobs] = self._held_before[jobs] + (self.now - self._s_t0[:n])

    # ------------------------------------------------------------------ decisions
    def start(self, job: int) -> None:
        """Begin placing a pending job that fits; ``place`` then gives it GPUs."""
        if self.placing >= 0:
            raise RuntimeError("a job is already being placed")
        if self.jobs.status[job] != PENDING:
            raise ValueError(f"job {job} is not pending")
        if not self._fits_one(job):
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
        free = int(self.machines.free[machine])          # _placeable, inline
        if free <= 0 or not (self.allowed is None or self.allowed[job, self._machine_type_list[machine]]):
            raise ValueError(f"machine {machine} has no free GPU that job {job} may use")
        need = self.placing_need
        take = min(free, need)
        alloc = self.alloc[job]
        if take == need and not alloc and self._refresh_all and self.allocation_log is None:
            self._place_launch(job, machine, take)
            return True
        self.machines.free[machine] -= take
        t = self._machine_type_list[machine]
        self.free_per_type[t] -= take
        self.held_per_type[t] += take
        self._held_total += take
        self.free_total -= take
        self._fee_rate += take * self._price_per_s[t]
        self._power += take * self._extra_watts[t]
        self.alloc[job].append((machine, take))
        self.placing_need -= take
        self.machine_log.append(machine)
        if self.placing_need == 0:
            self._launch(job)
            self.placing = -1
            return True
        return False

    def _place_launch(self, job: int, machine: int, gpus: int) -> None:
        """``place`` then ``_launch`` of a job that takes all its ``gpus`` on one machine, with the
        compiled kernels: the array updates in one call (the same operations)."""
        t = self._machine_type_list[machine]
        self._held_total += gpus
        self.free_total -= gpus
        self._fee_rate += gpus * self._price_per_s[t]
        self._power += gpus * self._extra_watts[t]
        self.alloc[job].append((machine, gpus))
        self.placing_need = 0
        self.machine_jobs[machine][job] = gpus
        self.machine_log.append(machine)
        self.machine_log.append(machine)
        self._remove_pending(job)
        k = self._n
        self._slot[job] = k
        if self._k.place_launch(k, job, machine, gpus, self.now, self._overhead, self.alpha, self._s_float,
                                self._s_int, self._s_flag, self._job_block, self.jobs.restarts, self.jobs.status,
                                self.duration, self.comm, self.job_speed, self.machine_type, self._machine_int,
                                self._crowd, self._type_int, self._static_rates, self.machine_factor):
            self._restarting = True
        self._n = k + 1
        if not self._static_rates:
            self._dirty = True      # compiled kernels refresh every speed (_stale_neighbours)
        self.placing = -1

    def _launch(self, job: int) -> None:
        js = self.jobs
        alloc = self.alloc[job]
        if self.allocation_log is not None:
            self.allocation_log.append((self.now, job, list(alloc)))
        machines = [m for m, _ in alloc]
        for m, g in alloc:
            self.machine_jobs[m][job] = g
            self.machines.jobs[m] += 1
            self._crowd[m] += 1.0
        self.machine_log.extend(machines)
        if len(machines) == 1:
            nominal = float(self.job_speed[job, self._machine_type_list[machines[0]]])
        else:
            # Synchronous training: the slowest GPU type sets the pace; the spread penalty applies
            # beyond the machines the job's trace duration was measured on.
            types = self.machine_type[machines]
            nominal = float(self.job_speed[job, types].min())
            if len(machines) > self._free_spread_list[job]:
                if self._allreduce:
                    nominal *= float(allreduce_speed_factor(
                        job, np.array(machines, dtype=np.int64), np.array([g for _, g in alloc], dtype=np.int64),
                        0, len(machines), self.machine_type, self.job_demand, self.job_xref, self.net))
                else:
                    nominal *= float(self.job_spread[job, types].min())
        js.nominal[job] = nominal
        if math.isnan(js.first_start[job]):
            js.first_start[job] = self.now
        self._remove_pending(job)
        js.status[job] = RUNNING
        until = self.now
        if js.restarts[job] > 0 and self.world.restart_overhead > 0:
            until = self.now + self.world.restart_overhead
            self._restarting = True
        k = self._n
        self._slot[job] = k
        self._s_job[k] = job
        self._s_left[k] = self.duration[job] - js.progress[job]
        self._s_nominal[k] = nominal
        self._s_acomm[k] = self.alpha * self.comm[job]
        self._s_fm[k] = machines[0]
        self._s_multi[k] = len(machines) > 1
        self._s_single[k] = len(machines) == 1
        self._s_until[k] = until
        self._s_t0[k] = self.now
        if len(machines) > 1:
            self._n_multi += 1
            self._job_machines[job] = machines
            self._layout = None
            if self._refresh_all:
                self._pool_machines(k, machines)
        else:
            self._s_mlen[k] = 1
        self._n = k + 1
        self._stale_neighbours(alloc)     # the new job and those sharing its machines

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
        self.pending_gpus += int(self.gpus[job])

    def _release(self, job: int, finished: bool = False) -> None:
        """Free a running job's GPUs and fold its slot back into the per-job arrays (``finished``:
        the compiled path also records the job's end: all work done, finish time, status)."""
        k = self._slot.pop(job)
        if self.allocation_log is not None:
            self.allocation_log.append((self.now, job, None))
        last = self._n - 1
        multi = self._s_multi[k]
        if multi:
            self._n_multi -= 1
            del self._job_machines[job]
            self._layout = None
        elif self._s_multi[last]:
            self._layout = None   # a multi-machine job moves into the freed slot
        if k != last:
            self._slot[int(self._s_job[last])] = k
        alloc = self.alloc.pop(job)
        if self._refresh_all:
            # One compiled call: the slot folded into the per-job arrays, the last slot moved into
            # it, and a single-machine job's machine and type counts (the same operations).
            m, g = alloc[0] if not multi else (-1, 0)
            self._k.release_slot(k, last, job, self.now, self._s_float, self._s_int, self._s_flag,
                                 self._job_block, self.duration, self.gpus, m, g, self._machine_int,
                                 self._crowd, self._type_int, self.machine_type, finished, self.jobs.status)
            if not multi:
                t = self._machine_type_list[m]
                del self.machine_jobs[m][job]
                self._held_total -= g
                self.free_total += g
                self._fee_rate += -g * self._price_per_s[t]
                self._power += -g * self._extra_watts[t]
                self.machine_log.append(m)
                self._n = last
                if not self._static_rates:
                    self._dirty = True  # compiled kernels refresh every speed (_stale_neighbours)
                return
        else:
            js = self.jobs
            started = max(self._s_until[k], self._s_t0[k])
            js.progress[job] = self.duration[job] - self._s_left[k]
            self._exec_before[job] += max(self.now - started, 0.0)
            js.executed[job] = self._exec_before[job]
            js.attained[job] = self.gpus[job] * js.executed[job]
            self._held_before[job] += self.now - self._s_t0[k]
            js.held[job] = self._held_before[job]
            if k != last:
                for arr in self._slot_arrays:
                    arr[:, k] = arr[:, last]
        self._n = last
        ms, types = self.machines, self._machine_type_list
        for m, g in alloc:
            ms.free[m] += g
            ms.jobs[m] -= 1
            self._crowd[m] -= 1.0
            del self.machine_jobs[m][job]
            t = types[m]
            self.free_per_type[t] += g
            self.held_per_type[t] -= g
            self._held_total -= g
            self.free_total += g
            self._fee_rate += -g * self._price_per_s[t]
            self._power += -g * self._extra_watts[t]
            self.machine_log.append(m)
        self._stale_neighbours(alloc)

    def _remove_pending(self, job: int) -> None:
        i = bisect.bisect_left(self.pending, job)
        if i >= len(self.pending) or self.pending[i] != job:
            raise ValueError(f"job {job} is not in the pending queue")
        del self.pending[i]
        self.pending_gpus -= self._gpus_list[job]

    # ------------------------------------------------------------------ dynamics
    def _stale_neighbours(self, alloc: list[tuple[int, int]]) -> None:
        """Mark the jobs on the machines of ``alloc`` ((machine, gpus) pairs) stale: their
        contention changed. With compiled kernels every speed is refreshed instead."""
        if self._refresh_all:
            self._dirty = True
        elif not self._dirty:
            for m, _ in alloc:
                self._stale.update(self.machine_jobs[m])

    def _ensure_rates(self) -> None:
        """Bring the true speeds up to date: all of them after a fluctuation update, else only
        those of the jobs next to a launch or a release (scalar work, the same arithmetic)."""
        if self._dirty:
            self._refresh_rates()
        elif self._stale:
            self._refresh_stale()

    def _refresh_stale(self) -> None:
        mf, crowd, alpha = self.machine_factor, self._crowd, self.alpha
        for job in self._stale:
            k = self._slot.get(job)
            if k is None:             # released since
                continue
            machines = self._job_machines.get(job)
            if machines is None:
                m = self._s_fm[k]
                factor, most = mf[m], crowd[m]
            else:
                factor = min([mf[m] for m in machines])
                most = max([crowd[m] for m in machines])
            rate = self._s_nominal[k] * factor
            if alpha:
                rate = rate / (most * self._s_acomm[k] + 1.0)
            self._s_rate[k] = rate
        self._stale.clear()

    def _pool_machines(self, slot: int, machines: list[int]) -> None:
        """Write a spread job's machines into the pool (compacting or growing it when full)."""
        size = len(machines)
        if self._mpool_end + size > len(self._mpool):
            n = self._n
            live = [(k, int(self._s_moff[k]), int(self._s_mlen[k]))
                    for k in range(n) if self._s_multi[k] and k != slot]
            need = sum(length for _, _, length in live) + size
            pool = np.zeros(max(len(self._mpool), 2 * need), dtype=np.int64)
            gpus = np.zeros(len(pool), dtype=np.int64)
            end = 0
            for k, off, length in live:
                pool[end: end + length] = self._mpool[off: off + length]
                gpus[end: end + length] = self._gpool[off: off + length]
                self._s_moff[k] = end
                end += length
            self._mpool, self._gpool, self._mpool_end = pool, gpus, end
        end = self._mpool_end
        self._mpool[end: end + size] = machines
        self._gpool[end: end + size] = [g for _, g in self.alloc[int(self._s_job[slot])]]
        self._s_moff[slot], self._s_mlen[slot] = end, size
        self._mpool_end = end + size

    def _multi_layout(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Where the kernels find the machines of the jobs spread over machines (such a job runs
        at the pace of its slowest machine and feels the most crowded one).

        Compiled kernels: (pool, offset per slot, length per slot). Numpy kernels: (slots,
        concatenated machine lists, segment starts) for a segmented min / max, cached until a
        spread job starts or ends."""
        if not self._n_multi:
            return self._no_layout
        if self._refresh_all:
            return self._mpool, self._s_moff, self._s_mlen
        if self._layout is None:
            n = self._n
            slots = np.flatnonzero(self._s_multi[:n])
            lists = [self._job_machines[j] for j in self._s_job[slots].tolist()]
            seg = np.fromiter(itertools.accumulate([0] + [len(x) for x in lists[:-1]]),
                              dtype=np.int64, count=len(lists))
            flat = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int64)
            self._layout = (slots, flat, seg)
        return self._layout

    def _refresh_rates(self) -> None:
        """Recompute the true speed of every running job."""
        n = self._n
        self._dirty = False
        self._stale.clear()
        if not n:
            return
        self._k.refresh_rates(n, self._s_fm, self.machine_factor, self._crowd, self._s_nominal,
                              self._s_acomm, self._s_rate, self.alpha, *self._multi_layout())

    def advance_while_idle(self, window: int, running_choice: bool, fused: bool = True) -> None:
        """Advance through decision epochs where advancing is the only legal decision: no job of
        the ``window`` oldest pending ones fits, and no running job may be chosen
        (``running_choice``: a preemption window exists); stops at the end or when nothing is left
        to happen.

        ``fused=False`` runs the per-event path even where the compiled skip-idle loop
        (``kernels.idle_events``) applies: the same episode (tested), event by event. A reset
        uses it: it has few events (usually none) before its first decision, and a fresh install
        then shows its first observation without compiling the fused loop, the largest kernel
        (about 5 of a cold reset's 7 s): the first ``step`` compiles it."""
        if (fused and self._idle_kernel is not None and self.event_log is None
                and self.allocation_log is None):
            self._advance_while_idle_compiled(window, running_choice)
            return
        gpus, pending, allowed = self._gpus_list, self.pending, self.allowed
        # Inside this loop the queue only grows at its end (arrivals): the smallest request among
        # its head is recomputed only when its length changed.
        seen, smallest = -1, 0
        while self.finished_count != self.num_jobs and self.now < self.time_limit:
            if self._n and running_choice:
                return
            if pending:
                if allowed is None:
                    if len(pending) != seen:
                        seen = len(pending)
                        smallest = min(map(gpus.__getitem__, pending[:window]))
                    if smallest <= self.free_total:
                        return
                elif self.any_fits(window):
                    return
            if not (self.next_arrival < self.num_jobs or self._n):
                return
            self.advance()

    def _advance_while_idle_compiled(self, window: int, running_choice: bool) -> None:
        """``advance_while_idle`` as one compiled call (``kernels.idle_events``): the scalars go in
        and come back through two small arrays, and the completed jobs and the arrivals are then
        entered into the Python containers. The fluctuation update draws from ``self.rng`` inside
        the loop (numba's generator on the same stream); its ``exp`` stays numpy's (the
        reference's bits), called here when the loop asks for it; the completion of a spread job
        runs here too, between calls."""
        k, fl = kernels, self.fluct
        raw, pack, unpack = self._idle_raw, _IDLE_PACK.pack_into, _IDLE_UNPACK.unpack_from
        args, kernel = self._idle_args, self._idle_kernel
        pending, gpus = self.pending, self._gpus_list
        smallest = min(map(gpus.__getitem__, pending[:window])) if pending else 0
        # The loop's entry checks, here: most decisions (a running job may be chosen, or a pending
        # one fits) end at them, and the call would pack and unpack the whole state for nothing.
        if (self.finished_count == self.num_jobs or not self.now < self.time_limit
                or (self._n and running_choice) or (pending and smallest <= self.free_total)
                or not (self.next_arrival < self.num_jobs or self._n)):
            return
        while True:
            if fl is not None:
                f_time, f_min, f_cache, f_decay, f_noise = (fl.time, fl._next_min, fl._cache_dt, fl._decay,
                                                            fl._noise)
                if f_cache is None:
                    f_cache = math.nan
            else:
                f_time = f_min = f_cache = f_decay = f_noise = 0.0
            pack(raw, _IDLE_OFFSET,
                 self.now, self.job_seconds, self.fee, self.energy_joules, self.busy_gpu_seconds, self._fee_rate,
                 self._power, self._next_fluct, self._next_tick, self.last_tick, self._measure_time,
                 self._next_finish, self._fluct_time, f_time, f_min, f_cache, f_decay, f_noise,
                 self._n, self._n_multi, self._held_total, self.free_total, self.next_arrival, self.arrived_count,
                 self.finished_count, self.events, self.measure_version, self._restarting, self._dirty, len(pending),
                 smallest, self.pending_gpus, window, running_choice, 0)
            arrival = self.next_arrival
            code = kernel(k.IDLE_FRESH, *args, self._mpool)
            while code == k.IDLE_SWITCH_EXP or code == k.IDLE_EXP:
                if code == k.IDLE_SWITCH_EXP:
                    # _switch's numpy exp of several switches' decay exponents (before their draws).
                    switches = int(self._idle_i[k.II_SWITCHES])
                    np.exp(-self._fluct_tot * fl._since[:switches], out=self._exps[:switches])
                    code = kernel(k.IDLE_RESUME_SWITCH, *args, self._mpool)
                else:
                    np.exp(fl.factors, out=fl.factors)
                    code = kernel(k.IDLE_RESUME_EXP, *args, self._mpool)
            (self.now, self.job_seconds, self.fee, self.energy_joules, self.busy_gpu_seconds, self._fee_rate,
             self._power, self._next_fluct, self._next_tick, self.last_tick, self._measure_time, self._next_finish,
             self._fluct_time, f_time, f_min, f_cache, f_decay, f_noise,
             self._n, self._n_multi, self._held_total, self.free_total, self.next_arrival, self.arrived_count,
             self.finished_count, self.events, self.measure_version, restarting, dirty, _, smallest,
             self.pending_gpus, _, _, count, _, _, _, _, due, _, _, _, _) = unpack(raw, _IDLE_OFFSET)
            self._restarting, self._dirty = restarting != 0, dirty != 0
            if fl is not None:
                fl.time, fl._next_min, fl._decay, fl._noise = f_time, f_min, f_decay, f_noise
                fl._cache_dt = None if math.isnan(f_cache) else f_cache
            if self.next_arrival != arrival:
                pending.extend(range(arrival, self.next_arrival))
            if count:
                self._enter_releases(count)
            if code == k.IDLE_DONE:
                return
            if code == k.IDLE_MULTI:
                self._event_tail(due)
                smallest = min(map(gpus.__getitem__, pending[:window])) if pending else 0
            else:
                raise RuntimeError("no future event: nothing running and no arrival left")

    def _enter_releases(self, count: int) -> None:
        """The Python side of the ``count`` completions the compiled loop recorded in
        ``_released`` (job, job moved into its slot or -1, machine), in order."""
        slots, alloc, machine_jobs, log = self._slot, self.alloc, self.machine_jobs, self.machine_log
        jobs, moved, machines = self._released[:, :count].tolist()
        for job, mover, m in zip(jobs, moved, machines):
            slot = slots.pop(job)
            if mover >= 0:
                slots[mover] = slot
            del alloc[job]
            del machine_jobs[m][job]
            log.append(m)

    def advance(self) -> float:
        """Run the clock to the next event and process every event at that time.

        Returns the elapsed simulated seconds. Raises if no future event exists. At
        ``time_limit`` the clock stops: nothing happens and 0 is returned.
        """
        # Hot path (once per event): attributes read once into locals.
        if self.placing >= 0:
            raise RuntimeError("cannot advance while a job is being placed")
        fluct, now = self.fluct, self.now
        if now >= self.time_limit:
            return 0.0
        # Periodic events that fell due while nothing ran are brought up to the present first.
        if fluct is not None and self._next_fluct <= now:
            self._update_fluctuation()
        if self._next_tick <= now:
            self._next_tick = now + self.scheduling_tick
        arrival = self.next_arrival
        t_next = self._submit_list[arrival] if arrival < self.num_jobs else math.inf
        if t_next > self.time_limit:
            t_next = self.time_limit
        n = self._n
        due = 0
        if n and self._refresh_all:
            # The compiled kernels on the slot blocks (and the trivial measurement's time stamps).
            dirty = self._dirty
            t_next, self._next_finish, self._restarting, due = self._k.event(
                n, dirty, self._s_float, self._s_int, self._s_flag, self._machine_rows, self.alpha,
                self._mpool if dirty and self._n_multi else self._empty, now, self._restarting,
                min(t_next, self._next_fluct, self._next_tick), self._scratch, self._due,
                self._trivial_measure, self._measure_time, self.machines.measured_at)
            self._dirty = False
        elif n:
            dirty = self._dirty
            if dirty:
                layout = self._multi_layout()
                self._stale.clear()
            else:
                layout = self._no_layout
                if self._stale:
                    self._refresh_stale()
            t_next, self._next_finish, self._restarting, due = self._k.run_to_next(
                n, dirty, self._s_fm, self.machine_factor, self._crowd, self._s_nominal, self._s_acomm,
                self._s_rate, self.alpha, *layout, self._s_left, self._s_until, now, self._restarting,
                min(t_next, self._next_fluct, self._next_tick), self._scratch, self._due)
            self._dirty = False
        if not math.isfinite(t_next):
            raise RuntimeError("no future event: nothing running and no arrival left")
        if self.event_log is not None:
            self.event_log.append((now, self._held_total, len(self.pending), n))
        dt = t_next - now
        if dt > 0:
            self.job_seconds += (self.arrived_count - self.finished_count) * dt
            self.fee += self._fee_rate * dt
            self.energy_joules += self._power * dt
            if n:
                self.busy_gpu_seconds += self._held_total * dt
        self.now = now = t_next
        self.events += 1
        if fluct is None:       # without fluctuation updates, measure at every event
            if self._trivial_measure:
                # Stamped by the event kernel: only the version and the clock of measurements move.
                if n and now - self._measure_time > 0 and n != self._n_multi:
                    self.measure_version += 1
                self._measure_time = now
            else:
                self._measure()
        self._event_tail(due)
        return dt

    def _event_tail(self, due: int) -> None:
        """The end of an event (``advance``, and the compiled skip-idle loop when a spread job
        completes): the ``due`` completions, the arrivals, the fluctuation update, the tick."""
        now = self.now
        if due:
            self._complete_due(due)
        arrival = self.next_arrival
        if arrival < self.num_jobs and self._submit_list[arrival] <= now:
            self._arrive_until(now)
        if self.fluct is not None and now >= self._next_fluct - _EPS:
            self._update_fluctuation()
        if now >= self._next_tick - _EPS:
            self.last_tick = now
            self._next_tick = now + self.scheduling_tick

    def _measure(self, extra: int = 0) -> "np.ndarray | None":
        """Measured machine speeds: a noisy moving average of each single-machine job's observed
        progress relative to its nominal speed over the period that ends now, attributed to its
        machine (at fluctuation updates, or at every event when fluctuation is off).

        ``extra`` (compiled kernels): when the measurement draws its noise, it also draws the next
        ``extra`` standard normals of the stream in the same call and returns them (None when it
        drew nothing): the fluctuation step's, the very next draws either way."""
        dt = self.now - self._measure_time
        self._measure_time = self.now
        n = self._n
        if not n or dt <= 0:
            return None
        k = self._k
        if self._refresh_all:
            # One compiled call: the speeds refreshed if needed, then the measurement.
            restarting = self._restarting
            count = k.measurable_count(n, self._s_single, self._s_until, self.now) if restarting else n - self._n_multi
            if not count:
                return None
            noise = float(self.world.measurement_noise)
            rest = None
            if noise <= 0:
                z = self._scratch[:0]
            elif extra:
                z = self.rng.standard_normal(count + extra)
                z, rest = z[:count], z[count:]
            else:
                z = self.rng.standard_normal(count)
            dirty = self._dirty
            k.measure_rates(n, dirty, self._s_float, self._s_int, self._s_flag, self._machine_rows, self.alpha,
                            self._mpool if dirty and self._n_multi else self._empty, self.now, restarting,
                            self._n_multi, z, noise, -math.expm1(-dt / self.world.measurement_tau),
                            self._machine_float, self._scratch)
            self._dirty = False
            self.measure_version += 1
            return rest
        self._ensure_rates()
        if self._restarting:
            count = k.measurable_count(n, self._s_single, self._s_until, self.now)
        else:
            count = n - self._n_multi      # every single-machine job
        if not count:
            return
        noise = float(self.world.measurement_noise)
        z = self.rng.standard_normal(count) if noise > 0 else self._scratch[:0]
        ms = self.machines
        k.measure(n, self._s_single, self._s_until, self.now, self._restarting, self._n_multi,
                  self._s_rate, self._s_nominal, self._s_fm, z, noise,
                  -math.expm1(-dt / self.world.measurement_tau), ms.measured, ms.measured_at, self._scratch)
        self.measure_version += 1

    def _complete_due(self, count: int) -> None:
        """Finish the ``count`` running jobs whose slots the last event wrote into ``_due``: those
        whose remaining work takes under a microsecond at their speed (or under a few units of the
        clock's resolution, when that is coarser)."""
        js = self.jobs
        if self._refresh_all:
            due = self._s_job[self._due[:count]].tolist() if count > 1 else (int(self._s_job[self._due[0]]),)
            for job in due:
                self._release(job, finished=True)
                self.finished_count += 1
            return
        for job in self._s_job[self._due[:count]].tolist():
            self._s_left[self._slot[job]] = 0.0
            self._release(job)
            js.progress[job] = self.duration[job]
            js.finish[job] = self.now
            js.status[job] = FINISHED
            self.finished_count += 1

    def _arrive_until(self, t: float) -> None:
        n, submit = self.num_jobs, self._submit_list
        while self.next_arrival < n and submit[self.next_arrival] <= t:
            job = self.next_arrival
            self.jobs.status[job] = PENDING
            self.pending.append(job)
            self.pending_gpus += self._gpus_list[job]
            self.next_arrival += 1
            self.arrived_count += 1

    def _update_fluctuation(self) -> None:
        fluct, dt = self.fluct, self.now - self._fluct_time
        if self._refresh_all:
            # The measurement's noise and the fluctuation step's normals are consecutive draws of
            # one stream: drawn in one call when both happen.
            normals = self._measure(fluct.n if fluct.draws_normals(dt) else 0)
            fluct.advance(dt, normals)
        else:
            self._measure()     # speeds observed over the period that ends now
            fluct.advance(dt)
        self._fluct_time = self.now
        np.multiply(self.machines.static, self.fluct.factors, out=self.machine_factor)
        self._next_fluct = self.now + self._fluct_period()
        self._dirty = True
