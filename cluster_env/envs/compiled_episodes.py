"""Episodes of the parallel env held in the compiled engine's arrays: what the parallel env (one
episode) and the vector env's compiled backend (N of them) step.

:class:`CompiledEpisodes` keeps each episode's simulator state in the engine's arrays
(:mod:`cluster_env.core.engine`) and steps all of them with one call of
:func:`cluster_env.core.engine.step.step_all`: the action, the event loop to the next decision
epoch, the default reward, the end flags and the observation and ``action_mask`` written straight
into stacked buffers (:class:`cluster_env.envs.buffers.Buffers`, passed as one byte image). An
episode starts from the fresh simulator its env built
(:meth:`~cluster_env.envs.cluster_parallel.ClusterParallelEnv.start_episode`, the one reset every
path runs); the engine's arrays are built from it.

:func:`unsupported_reason` says what the compiled step cannot run exactly: anything but the numba
kernel backend, a render mode, a builder of another class than its layout's (every layout's
columns are written: the step writes the default ones, the builder appends its own; a reward
other than the default one is computed from the engine's totals after each step).
"""
from __future__ import annotations

import functools
import struct
import sys
from dataclasses import fields, replace
from typing import Any, Optional

import numpy as np

from cluster_env.core.engine.layout import UNCHECKED
from cluster_env.core.simulator import EpisodeView, JobState, MachineState
from cluster_env.core.engine.state import LOG_ITEMS, build_state, grow_log, log_capacity, state_metrics
from cluster_env.envs.buffers import allocate
from cluster_env.envs.flat_layout import FlatLayout
from cluster_env.core.engine import layout as L
from cluster_env.envs.observation import ObservationBuilder
from cluster_env.envs.observation_ext import ExtendedObservationBuilder
from cluster_env.envs.observation_obj import ObjectiveObservationBuilder
from cluster_env.envs.observation_place import PlacementObservationBuilder

#: The observation builders whose layout the compiled step writes: every layout's (the step writes
#: the default columns; a builder's ``extra_columns`` appends its own after each step, reading the
#: engine's live view).
COMPILED_LAYOUTS = {"default": ObservationBuilder, "extended": ExtendedObservationBuilder,
                    "extended-v2": PlacementObservationBuilder, "objectives-v1": ObjectiveObservationBuilder}


def unsupported_reason(env: Any) -> Optional[str]:
    """Why the compiled step cannot run ``env``'s episodes exactly (None when it can)."""
    from cluster_env.core import kernels

    if kernels.active().name != "numba":
        return "the compiled step needs numba and the numba kernel backend (CLUSTER_ENV_KERNELS)"
    mode = getattr(env, "observation_mode", "default")
    if mode not in COMPILED_LAYOUTS:
        return f"observation={mode!r}: the compiled step builds the layouts {sorted(COMPILED_LAYOUTS)} only"
    if type(env.builder) is not COMPILED_LAYOUTS[mode]:
        return f"{type(env.builder).__name__} is not the {mode!r} layout's {COMPILED_LAYOUTS[mode].__name__}"
    if not getattr(env.builder, "fused_columns", True):
        return "the extended layout's numpy reference (fused_columns=False)"
    if env.render_mode is not None:
        return "render modes draw the Python simulator"
    return None


@functools.lru_cache(maxsize=1)
def step_module():
    """The compiled step (imports numba; compiles or loads the cached machine code)."""
    from cluster_env.core.engine import step

    return step


class LiveView:
    """One episode's progress in the engine's arrays, read as a simulator's (live: views and
    properties, no copies): what the appended layouts' builders read
    (:meth:`ExtendedObservationBuilder.attach`): the jobs' state, the clock, the counts, the
    running slots and their machine pools (the simulator's layout), free GPUs and measured
    speeds; the episode's fixed facts (speeds, GPU types, demands, restrictions) are the
    simulator's it started from."""

    def __init__(self, state: tuple, sim: Any) -> None:
        jf = state[0]
        self._sc, self._ic = state[10], state[11]
        self.jobs = JobState(status=state[1][L.STATUS], progress=jf[L.PROGRESS], attained=jf[L.ATTAINED],
                             executed=jf[L.EXECUTED], held=jf[L.HELD], first_start=jf[L.FIRST_START],
                             finish=jf[L.FINISH], restarts=state[1][L.RESTARTS], nominal=jf[L.NOMINAL])
        self.machines = MachineState(free=state[3][L.FREE], jobs=state[3][L.MJOBS], static=state[2][L.STATIC],
                                     measured=state[2][L.MEASURED], measured_at=state[2][L.MEASURED_AT])
        self._s_float, self._s_int, self._s_flag = state[7], state[8], state[9]
        self._mpool, self._gpool = state[17], state[18]
        self.job_speed, self.machine_type, self.gpus, self.allowed = sim.job_speed, sim.machine_type, sim.gpus, sim.allowed
        self.total_gpus = sim.total_gpus

    @property
    def num_running(self) -> int:
        return int(self._ic[L.N_RUN])

    @property
    def measure_version(self) -> int:
        return int(self._ic[L.MEASURE_VERSION])

    @property
    def now(self) -> float:
        return float(self._sc[L.NOW])

    @property
    def last_tick(self) -> float:
        return float(self._sc[L.LAST_TICK])

    @property
    def next_arrival(self) -> int:
        return int(self._ic[L.NEXT_ARRIVAL])

    @property
    def finished_count(self) -> int:
        return int(self._ic[L.FINISHED])

    @property
    def events(self) -> int:
        return int(self._ic[L.EVENTS])


class CompiledEpisodes:
    """N episodes in the compiled engine's arrays, stepped by one numba call (the buffers' rows
    are the episodes' observations)."""

    #: The allocation log's first size per job of an episode without max_steps (it grows as needed).
    log_entries_per_job = 8

    def __init__(self, envs: list, buffers: Any) -> None:
        self._c = step_module()
        self._step_all = self._c.step_all
        self.envs = envs
        self.num_envs = len(envs)
        self.buffers = buffers
        n = self.num_envs
        self._states: list = [None] * n
        self._obs: list = [None] * n
        self._sims: list = [None] * n
        self._rngs = None                      # numba typed list of the generators, made at the first step
        self._logged: set[int] = set()         # envs whose episode keeps the allocation log (tenant quotas)
        #: Envs whose layout appends columns after the step's (the builder's compiled call).
        self._extended = [i for i, env in enumerate(envs) if type(env.builder) is not ObservationBuilder]
        # Each env's state and observation tuples as byte images the compiled step reads (see
        # core.engine.step); the tuples' arrays stay alive in _states and _obs.
        self._state_images = np.zeros((n, self._c.STATE_BYTES), dtype=np.uint8)
        self._obs_images = np.zeros((n, self._c.OBS_BYTES), dtype=np.uint8)
        self._ended = np.zeros(n, dtype=np.int64)
        self._rng_image = np.zeros(self._c.RNGS_BYTES, dtype=np.uint8)
        self._bufs, self._buf_image = self._image_of(buffers)

    def _image_of(self, b: Any) -> tuple[tuple, np.ndarray]:
        """The buffers ``b`` (and this object's images) as one byte image: step_all's one argument
        for all of them; the tuple keeps the arrays alive as long as the image is used."""
        bufs = (b.jobs, b.machines, b.global_, b.placing, b.order_pad, b.place_pad, b.job_ids, b.rewards,
                b.terminated, b.truncated, b.num_steps, b.phase, b.time, b.placing_job, b.tick, self._ended,
                b.action_mask, b.invalid, b.played, self._state_images, self._obs_images, self._rng_image)
        image = np.zeros(self._c.BUF_BYTES, dtype=np.uint8)
        self._c.store_buffers(image, bufs)
        return bufs, image

    def load(self, index: int, env: Any, sim: Any) -> None:
        """Start env ``index``'s episode from ``sim``, the fresh simulator ``env.start_episode``
        built: the engine's arrays, the idle epochs skipped, the first observation in row ``index``."""
        # Tenant quotas: the allocation log for quota_violation (without max_steps, grow_logs
        # makes room before every step).
        log = log_capacity(sim.workload, env.sched.max_steps, self.log_entries_per_job)
        state = build_state(env, sim, log)
        obs = self._episode_arrays(env, sim, state)
        self._states[index], self._obs[index], self._sims[index] = state, obs, sim
        (self._logged.add if log else self._logged.discard)(index)
        rng = env._np_random
        if self._rngs is not None:
            self._c.rng_set(self._rngs, index, rng)
        b = self.buffers
        err = self._c.reset_row(state, obs, self._state_images, self._obs_images, rng, index, b.jobs, b.machines,
                                b.global_, b.placing, b.order_pad, b.place_pad, b.job_ids)
        if err:
            raise RuntimeError(f"compiled step: simulator error {int(err)} in env {index}'s reset")
        if index in self._extended:
            env.builder.attach(LiveView(state, sim))
            self._extend(index)
        c = self._c
        sc, ic = state[10], state[11]
        b.phase[index] = 0
        b.time[index] = sc[c.NOW]
        b.placing_job[index] = ic[c.PLACING]
        b.tick[index] = sc[c.LAST_TICK] == sc[c.NOW]
        b.num_steps[index] = 0
        b.action_mask[index] = b.order_pad[index]      # a new episode starts in ORDER

    def step(self, actions: np.ndarray, flags: np.ndarray, mode: int, penalty: float) -> int:
        """One decision in every episode (:func:`cluster_env.core.engine.step.step_all`): the
        count of episodes that ended (their rows in :attr:`ended`), or REFUSED."""
        if self._rngs is None:
            self._rngs = self._make_typed()
        if self._logged:
            self.grow_logs()
        count = self._step_all(self._buf_image, actions, flags, mode, penalty)
        if count < 0 and count != self._c.REFUSED:
            raise RuntimeError(f"compiled step: simulator error {int(self._states[-1 - count][11][self._c.ERROR])} "
                               f"in env {-1 - count}")
        if count != self._c.REFUSED:
            for i in self._extended:
                self._extend(i)
        return count

    def _extend(self, index: int) -> None:
        """The appended columns of env ``index``'s observation, in its rows of the buffers."""
        c, b, O = self._c, self.buffers, self._obs[index]
        E = O[c.O_E]
        K = E[c.E_K]
        running = O[c.O_CAND][K:K + E[c.E_NR]]
        self.envs[index].builder.extra_columns(b.jobs[index], b.global_[index], b.job_ids[index], running)

    def grow_logs(self) -> None:
        """Room in every kept allocation log for the coming step (at most the running jobs plus
        two entries, see load): a full log is doubled and its env's state image stored again."""
        c = self._c
        for i in self._logged:
            state = self._states[i]
            size = len(state[LOG_ITEMS[0]])
            if size - state[11][c.LOG_N] < state[11][c.N_RUN] + 2:
                state = grow_log(state, 2 * size + state[11][c.N_RUN] + 2)
                self._states[i] = state
                c.store_state_row(self._state_images, i, state)

    def totals(self, index: int) -> tuple:
        """What a reward reads of env ``index``'s episode: now, job-seconds, fee, energy (joules),
        jobs finished, and every job's finish time (a view)."""
        c, state = self._c, self._states[index]
        sc = state[10]
        return (float(sc[c.NOW]), float(sc[c.JOB_SECONDS]), float(sc[c.FEE]), float(sc[c.ENERGY]),
                int(state[11][c.FINISHED]), state[0][c.FINISH])

    def state(self, index: int) -> tuple:
        """Env ``index``'s engine state (:mod:`cluster_env.core.engine.layout`)."""
        return self._states[index]

    def metrics(self, index: int) -> dict:
        """Every metric of env ``index``'s episode so far."""
        return state_metrics(self._states[index], self._sims[index])

    def close(self) -> None:
        self._rngs = None
        self._logged = set()
        self._states = [None] * self.num_envs
        self._obs = [None] * self.num_envs
        self._sims = [None] * self.num_envs

    def _episode_arrays(self, env: Any, sim: Any, state: tuple) -> tuple:
        """The observation tuple ``O`` of :mod:`cluster_env.core.engine.step` for a new episode
        (with views of the engine ``state``'s rows the observation kernel reads)."""
        c, builder = self._c, env.builder
        (ep_int, ep_float, job_static, allowed, job_speed, *_rest) = builder._episode_args
        K, R = builder.K, builder.R
        preemption, clairvoyant, total_gpus = builder.preemption, builder.clairvoyant, sim.total_gpus
        # The kernel's arenas and machine block as ObservationBuilder.bind makes them: fresh copies
        # (the rows no free/jobs values shown yet, the block the static columns).
        m = sim.num_machines
        ep_int = np.array(ep_int, dtype=np.int64)
        ep_int[len(ep_int) - 2 * m:] = -1
        ep_float = np.array(ep_float, dtype=np.float64)
        rows = np.array(builder._machine_static, dtype=np.float32)
        E = np.zeros(c.E_SIZE, dtype=np.int64)
        E[c.E_K], E[c.E_R] = K, R
        E[c.E_PREEMPTION], E[c.E_CLAIRVOYANT], E[c.E_TOTAL_GPUS] = int(preemption), int(clairvoyant), total_gpus
        E[c.E_NORDER], E[c.E_NPLACE] = self.buffers.n_order, self.buffers.n_place
        E[c.E_AGE_VER] = -1
        EF = np.zeros(c.EF_SIZE)
        EF[c.EF_AGE_NOW] = np.nan
        EF[c.EF_PREEMPT_AT] = np.nan
        n = sim.num_jobs
        i64, f64 = np.int64, np.float64
        # Contiguous views of consecutive rows, made here: numba types a slice taken inside the
        # step as a non-contiguous array, another specialisation of the observation kernel.
        jf, mf, mi = state[0], state[2], state[3]
        return (ep_int, ep_float, job_static, np.ascontiguousarray(allowed, np.bool_),
                np.ascontiguousarray(job_speed, f64), rows, jf[c.PROGRESS:c.EXECUTED + 1],
                mi[c.FREE:c.MJOBS + 1], mf[c.MEASURED:c.MEASURED_AT + 1],
                np.zeros(K + R, dtype=i64), E, EF, np.zeros(n, dtype=i64), np.full(n, np.nan))

    def _make_typed(self):
        if any(s is None for s in self._states):
            raise RuntimeError("step() before every env was reset")
        rngs = self._c.rng_list(self.envs[0]._np_random)
        for env in self.envs[1:]:
            self._c.rng_append(rngs, env._np_random)
        self._c.store_rng_image(self._rng_image, rngs)     # the step reads the list from its image
        return rngs


class OneEpisode(CompiledEpisodes):
    """The parallel env's one episode in the compiled engine, returning fresh observation arrays
    without copying them: the step writes into one of a few sets of output arrays that nothing
    outside holds any more (counted by reference counts: a set the caller still holds, or any view
    of it, is never written again), and returns that set's arrays; when every set is held it
    writes into a private set and returns copies. The scalars are one struct (one read per step)."""

    #: reward, time, placing job, phase, terminated, truncated, tick (the buffers' scalar fields)
    _SCALARS = struct.Struct("<ddqb???")
    #: Sets of output arrays handed out in turn (a caller that keeps the last two observations
    #: still gets fresh ones without copies).
    POOL = 3

    def __init__(self, env: Any) -> None:
        space = env.observation_space("orderer")
        self._n_order, self._n_place = env.action_space("orderer").n, env.action_space("placer").n
        b = allocate(1, FlatLayout(space, max(self._n_order, self._n_place)), self._n_order, self._n_place)
        raw = self._raw = np.zeros(self._SCALARS.size, np.uint8)
        b.rewards, b.time, b.placing_job = raw[0:8].view(np.float64), raw[8:16].view(np.float64), raw[16:24].view(np.int64)
        b.phase, b.terminated, b.truncated, b.tick = (raw[24:25].view(np.int8), raw[25:26].view(np.bool_),
                                                      raw[26:27].view(np.bool_), raw[27:28].view(np.bool_))
        super().__init__([env], b)
        self._unpack = self._SCALARS.unpack_from
        self._act, self._ok = np.zeros(1, np.int64), np.zeros(1, np.bool_)
        self._act_view, self._ok_view = memoryview(self._act), memoryview(self._ok)
        self._shapes = (b.jobs.shape[1:], b.machines.shape[1:], b.global_.shape[1:], b.placing.shape[1:],
                        b.order_pad.shape[1:])
        self._private = self._new_set()       # written when every handed-out set is still held
        self._sets: list = []
        self._current = self._private

    def _new_set(self) -> list:
        """[buffers, their image, the arrays handed out, the arrays whose counts tell whether
        anything outside holds them, the sum of those counts when nothing does]."""
        sj, sm, sg, sp, sa = self._shapes
        jobs, machines = np.zeros(sj, np.float32), np.zeros(sm, np.float32)
        glob, plc = np.zeros(sg, np.float32), np.zeros(sp, np.float32)
        order, place = np.zeros(sa, np.int8), np.zeros(sa, np.int8)
        b = replace(self.buffers, jobs=jobs[None], machines=machines[None], global_=glob[None], placing=plc[None],
                    order_pad=order[None], place_pad=place[None])
        out = (jobs, machines, glob, plc, order[:self._n_order], place[:self._n_place])
        watched = (jobs, machines, glob, plc, order, place) + out[4:]
        entry = [b, self._image_of(b), out, watched, None]
        return entry

    def _target(self) -> list:
        """The set the next step writes into: one that nothing outside holds, else the private one."""
        # Nothing outside holds a set when its arrays' reference counts are those this object
        # alone accounts for; each is at least that, so their sum tells.
        getrefcount = sys.getrefcount
        for entry in self._sets:
            if entry is not self._current and entry[4] == sum(map(getrefcount, entry[3])):
                return entry
        if len(self._sets) < self.POOL:
            entry = self._new_set()
            self._sets.append(entry)
            entry[4] = sum(map(getrefcount, entry[3]))
            return entry
        return self._private

    def _use(self, entry: list) -> None:
        self._current = entry
        self.buffers = entry[0]
        self._bufs, self._buf_image = entry[1]

    def start(self, env: Any, sim: Any) -> None:
        """Begin the episode of ``sim`` (see :meth:`CompiledEpisodes.load`)."""
        self._use(self._target())
        self.load(0, env, sim)
        if self._rngs is None:
            self._rngs = self._make_typed()

    def play(self, act: Optional[int]) -> tuple:
        """One decision (``act``; None: nothing played), then the step's scalars: reward, time,
        placing job, phase, terminated, truncated, tick."""
        if act is None:
            self._ok_view[0] = False
        else:
            self._act_view[0] = act
            self._ok_view[0] = True
        if self._logged:
            self.grow_logs()
        self._use(self._target())
        count = self._step_all(self._buf_image, self._act, self._ok, UNCHECKED, 0.0)
        if count < 0:
            raise RuntimeError(f"compiled step: simulator error {int(self._states[0][11][self._c.ERROR])}")
        if self._extended:
            self._extend(0)
        return self._unpack(self._raw)

    def scalars(self) -> tuple:
        """The last step's (or the start's) scalars, as :meth:`play` returns them."""
        return self._unpack(self._raw)

    def observe(self, ids: bool) -> tuple:
        """The observation: jobs, machines, global, placing, the orderer's and the placer's masks
        (arrays nothing else holds), and (``ids``) a copy of the candidates' job ids (else None)."""
        current = self._current
        out = current[2]
        if current is self._private:
            out = tuple([a.copy() for a in out])
        return out + (current[0].job_ids[0].copy() if ids else None,)

    def view(self, sim: Any) -> EpisodeView:
        """The episode's :class:`EpisodeView` from the engine's arrays (``sim``: the simulator the
        episode started from, for the workload's facts)."""
        live = LiveView(self._states[0], sim)
        # Copies in the simulator's own dtypes (the engine keeps the status as int64).
        jobs = JobState(*(np.array(getattr(live.jobs, f.name), dtype=getattr(sim.jobs, f.name).dtype)
                          for f in fields(JobState)))
        return EpisodeView.of_simulator(sim, jobs, live.now, live.events)

    def features(self) -> np.ndarray:
        """The flat features (jobs, machines, global, placing) of the last observation, copied:
        the env's ``state()``."""
        return np.concatenate([a.ravel() for a in self._current[2][:4]])


__all__ = ["CompiledEpisodes", "OneEpisode", "step_module", "unsupported_reason"]
