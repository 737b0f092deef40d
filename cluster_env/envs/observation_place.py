"""Opt-in placement columns (``parallel_env(..., observation="extended-v2")``).

``"extended-v2"`` is the ``"extended"`` layout (:mod:`cluster_env.envs.observation_ext`) with the
``jobs`` columns below appended after its own; every earlier column keeps its position and its
values (``"default"`` and ``"extended"`` are unchanged). They show where each *running* candidate
sits, what a migration rule (preempt a job and re-place it on faster GPUs) needs and a real
scheduler knows: its allocation, the public speed table and the measured machine speeds the
placers read, never the hidden machine factors or a duration.

``jobs`` (per candidate row, after :data:`~cluster_env.envs.observation_ext.EXTRA_JOB_FEATURES`);
a pending or empty row shows 0 in the counts and flags and -1 ("not applicable") elsewhere:

* ``machines_used``: machines the job holds GPUs on (>= 1; 0 when not running).
* ``slowest_type_speed``: its nominal speed (public table, relative to the reference GPU) on the
  slowest GPU type it holds: a synchronous job runs at its slowest part's pace.
* ``mixed_types``: 1 when it holds GPUs of more than one type.
* ``current_speed``: ``min`` over its machines of nominal speed x measured speed (each as the
  observation rounds it, float32; the product in float64): the speed a placer would score its
  placement at. It leaves out the spread penalty (``spread_beyond`` shows when that applies).
* ``best_free_speed``: the best speed (same formula) on one machine that could hold it whole now,
  counting the free GPUs of a GPU type it may use plus the GPUs it holds there itself; -1 when no
  machine can. For a job on one machine its own machine always counts, so this is at least
  ``current_speed``.
* ``speedup_free``: ``best_free_speed / current_speed`` (the quotient in float64), -1 when
  ``best_free_speed`` is -1. A value of 1.5 on a one-machine job means a machine whose free GPUs
  alone hold it runs it at least 1.5x faster (its own machine gives exactly 1).
* ``spread_beyond``: 1 when it spans more machines than the fewest machines (of the types it may
  use, largest first) that could hold its GPUs.
* ``since_start_log``: ``log1p`` of the seconds since its current stint was placed (its last
  start or restart, restart overhead included); what a guard against moving a job back and forth
  reads.

Bounds: every column lies in the ``jobs`` space's ``[-1, inf)``; counts and flags are integers,
speeds are positive (tens at most with the shipped tables), ``speedup_free >= 1`` on one-machine
jobs and unbounded above (a machine measured slow gives a large quotient; 33 was seen on a
philly-hetero-v1 window). Computed for the running rows only (at most ``running_window``), from the simulator's
allocation, free GPUs and measured speeds at the time of the observation.
"""
from __future__ import annotations

import math
from itertools import chain

import numpy as np

from gymnasium import spaces

from cluster_env.core.simulator import ClusterSimulator
from cluster_env.envs.observation_ext import ExtendedObservationBuilder
from cluster_env.envs.observation_fused import NO_ALLOWED, compiled_loop
from cluster_env.envs.observation_layouts import PLACEMENT_JOB_FEATURES, job_features, replace_spaces


#: A non-running row's values (counts and flags 0, the rest -1).
_NOT_RUNNING = np.array([0.0, -1.0, 0.0, -1.0, -1.0, -1.0, 0.0, -1.0], dtype=np.float32)


def placed_speeds(sim: ClusterSimulator, job: int, measured32: np.ndarray) -> np.ndarray:
    """(M,) ``job``'s speed on every machine as ``fastest`` scores it: its nominal speed on the
    machine's GPU type and the machine's measured speed, each rounded to the observation's
    float32, the product in float64 (``measured32``: the measured speeds in float32, widened)."""
    return sim.job_speed[job].astype(np.float32).astype(np.float64)[sim.machine_type] * measured32


def placement_row(sim: ClusterSimulator, job: int, fewest: int, measured32: "np.ndarray | None" = None) -> list[float]:
    """The :data:`PLACEMENT_JOB_FEATURES` values of one running ``job`` (float64, before the
    observation's float32); ``fewest``: the fewest machines that could hold its GPUs."""
    if measured32 is None:
        measured32 = sim.machines.measured.astype(np.float32).astype(np.float64)
    alloc = sim.alloc[job]
    machines = [m for m, _ in alloc]
    types = [int(sim.machine_type[m]) for m in machines]
    speed = placed_speeds(sim, job, measured32)
    current = float(speed[machines].min())
    capacity = sim.machines.free.astype(np.int64)          # free GPUs, plus the job's own below
    for m, g in alloc:
        capacity[m] += g
    holds = capacity >= int(sim.gpus[job])
    if sim.allowed is not None:
        holds &= sim.allowed[job][sim.machine_type]
    best = float(speed[holds].max()) if holds.any() else -1.0
    speed_row = sim.job_speed[job]
    t0 = float(sim._s_t0[sim._slot[job]])
    return [float(len(machines)), float(min(speed_row[t] for t in types)), float(len(set(types)) > 1), current,
            best, best / current if best >= 0 else -1.0, float(len(machines) > fewest),
            math.log1p(max(sim.now - t0, 0.0))]


def placement_rows(sim: ClusterSimulator, jobs: np.ndarray, fewest: np.ndarray,
                   compiled: "bool | None" = None, nominal32: "np.ndarray | None" = None,
                   measured32: "np.ndarray | None" = None) -> np.ndarray:
    """(R, 8) float64: :func:`placement_row` of each running job in ``jobs`` (``fewest``: (N,) the
    fewest machines that could hold each job's GPUs), computed for all rows at once with the same
    operations on the same values (elementwise products and quotients, exact minima and maxima,
    ``math.log1p``), so every value has the same bits as :func:`placement_row`'s. ``compiled``:
    one numba loop (True; the default, None, under the simulator's numba kernel backend) or
    whole-array numpy (False; the default under the numpy backend). ``nominal32`` ((N, T): every
    job's nominal speeds through float32) and ``measured32`` ((M,): the measured speeds through
    float32) may be passed when the caller keeps them (the values computed here otherwise)."""
    jobs = np.asarray(jobs, dtype=np.int64)
    rows = len(jobs)
    job_list = jobs.tolist()
    allocs = list(map(sim.alloc.__getitem__, job_list))
    counts = np.fromiter(map(len, allocs), dtype=np.int64, count=rows)
    # Each (machine, GPUs) pair, row by row.
    flat = np.fromiter(chain.from_iterable(chain.from_iterable(allocs)), dtype=np.int64).reshape(-1, 2)
    held, given = flat[:, 0], flat[:, 1]
    if measured32 is None:
        measured32 = sim.machines.measured.astype(np.float32).astype(np.float64)
    nominal = sim.job_speed[jobs]                                                        # (R, T)
    nominal32 = nominal.astype(np.float32).astype(np.float64) if nominal32 is None else nominal32[jobs]
    out = np.empty((rows, len(PLACEMENT_JOB_FEATURES)))
    t0 = sim._s_t0[list(map(sim._slot.__getitem__, job_list))]     # each stint's placement time
    loop = compiled_loop(compiled)
    if loop is not None:
        restricted = sim.allowed is not None
        allowed = sim.allowed[jobs] if restricted else NO_ALLOWED
        loop(counts, held, given, nominal, nominal32, sim.machine_type, measured32, sim.machines.free,
             sim.gpus[jobs], allowed, restricted, fewest[jobs], t0, float(sim.now), out)
    else:
        row_of = np.repeat(np.arange(rows), counts)
        starts = np.cumsum(counts) - counts                # every running job holds >= 1 machine
        speed = nominal32[:, sim.machine_type] * measured32                              # (R, M)
        current = np.minimum.reduceat(speed[row_of, held], starts)
        capacity = np.repeat(sim.machines.free.astype(np.int64)[None, :], rows, axis=0)
        np.add.at(capacity, (row_of, held), given)        # free GPUs plus the job's own
        holds = capacity >= sim.gpus[jobs][:, None]
        if sim.allowed is not None:
            holds &= sim.allowed[jobs][:, sim.machine_type]
        fits = holds.any(axis=1)
        best = np.where(fits, np.where(holds, speed, -np.inf).max(axis=1), -1.0)
        types = sim.machine_type[held]
        out[:, 0] = counts
        out[:, 1] = np.minimum.reduceat(nominal[row_of, types], starts)
        out[:, 2] = np.minimum.reduceat(types, starts) != np.maximum.reduceat(types, starts)
        out[:, 3] = current
        out[:, 4] = best
        out[:, 5] = np.where(fits, best / current, -1.0)
        out[:, 6] = counts > fewest[jobs]
        now = sim.now
        out[:, 7] = [math.log1p(max(now - t, 0.0)) for t in t0.tolist()]    # math's log1p, as placement_row
    return out


class PlacementObservationBuilder(ExtendedObservationBuilder):
    """The ``extended`` builder plus :data:`PLACEMENT_JOB_FEATURES` (appended, never reordered)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.job_features = job_features("extended-v2")
        jobs = self.observation_spaces["orderer"]["jobs"]
        replace_spaces(self.observation_spaces,
                       jobs=spaces.Box(-1.0, np.inf, (jobs.shape[0], len(self.job_features)), np.float32))

    def bind(self, sim, num_tenants: int) -> None:
        super().bind(sim, num_tenants)
        # Fewest machines (of its allowed types, largest first) that could hold each job's GPUs.
        self._fewest = ClusterSimulator._fewest_machines(sim.gpus, sim.allowed, sim.cluster)
        # What placement_rows would compute at every step: the episode's nominal speeds through
        # float32 (fixed), the measured speeds through float32 (kept while they stand).
        self._nominal32 = sim.job_speed.astype(np.float32).astype(np.float64)
        self._measured32, self._measured_at = None, -1

    def _measured(self) -> np.ndarray:
        """The measured speeds through float32, widened (recomputed when they change)."""
        sim = self._source
        if self._measured_at != sim.measure_version:
            self._measured32 = sim.machines.measured.astype(np.float32).astype(np.float64)
            self._measured_at = sim.measure_version
        return self._measured32

    def _more_job_columns(self, out: np.ndarray, running: np.ndarray) -> None:
        out[:] = _NOT_RUNNING
        if len(running):
            out[self.K:self.K + len(running)] = placement_rows(self.sim, running, self._fewest,
                                                               nominal32=self._nominal32, measured32=self._measured())

    def _placement_arguments(self, running: np.ndarray) -> tuple:
        """The fused kernel's placement arguments: the simulator's slot arrays and pools (where
        ``placement_rows`` reads ``alloc``), speeds, free GPUs, restrictions and the clock (from
        the bound simulator, or the compiled engine's live view: ``attach``)."""
        sim = self._source
        restricted = sim.allowed is not None
        return (True, _NOT_RUNNING, sim.num_running, sim._s_float, sim._s_int, sim._s_flag, sim._mpool, sim._gpool,
                sim.job_speed, self._nominal32, sim.machine_type, self._measured(), sim.machines.free, sim.gpus,
                sim.allowed if restricted else self._no_allowed, restricted, self._fewest, float(sim.now))


__all__ = ["PLACEMENT_JOB_FEATURES", "PlacementObservationBuilder", "placed_speeds", "placement_row", "placement_rows"]
