"""The compiled backend of the vector env: all N episodes stepped in one numba call per step.

:class:`CompiledBackend` keeps each episode's simulator state in the compiled engine's arrays
(:mod:`cluster_env.core.engine`) and steps every env with one call of
:func:`cluster_env.vector._compiled_step.step_all`: the vector env's action checks and
invalid-action mode, the action, the event loop to the next decision epoch, the default reward,
the end flags and the observation and ``action_mask`` written straight into the stacked buffers
(passed as one byte image) by the simulator's compiled observation kernel. Episode resets run in Python (once
per episode): the same generator draws as ``ClusterParallelEnv.reset`` (workload, simulator), then
the engine's arrays are built from the fresh simulator.

The episodes are bit for bit those of :class:`~cluster_env.vector.backend.PythonBackend` and of
separate parallel envs (tests/test_vector.py). It supports what :func:`unsupported_reason`
accepts: the numba kernel backend, the default reward, no render mode, and envs of the library's
own classes; :func:`make_backend` (the vector env's default) picks it when it can and the Python
backend otherwise.
"""
from __future__ import annotations

import functools
from typing import Any, Optional

import numpy as np

from cluster_env.envs.cluster_parallel import MAX_PREEMPTIONS_PER_INSTANT, ClusterParallelEnv
from cluster_env.envs.observation import ObservationBuilder
from cluster_env.vector.backend import PythonBackend, VectorBackend
from cluster_env.vector.buffers import Buffers

#: Backend names ``ClusterVectorEnv(backend=...)`` accepts besides a factory.
BACKEND_NAMES = ("auto", "compiled", "python")


def unsupported_reason(envs: list[ClusterParallelEnv]) -> Optional[str]:
    """Why the compiled backend cannot run these envs exactly (None when it can)."""
    from cluster_env.core import kernels

    if kernels.active().name != "numba":
        return "the compiled backend needs numba and the numba kernel backend (CLUSTER_ENV_KERNELS)"
    for env in envs:
        mode = getattr(env, "observation_mode", "default")
        if mode != "default":
            # The compiled step writes the default layout only (extended, extended-v2: Python backend).
            return (f"observation={mode!r} runs in the Python backend (backend='python' or 'auto'): the "
                    "compiled backend builds the default observation layout only")
        if type(env) is not ClusterParallelEnv or type(env.builder) is not ObservationBuilder:
            return (f"env {type(env).__name__} with {type(env.builder).__name__} is not the library's "
                    "ClusterParallelEnv with the default observation layout")
        if env._jct_unit is None:
            return "a non-default reward runs in the Python backend"
        if env.render_mode is not None:
            return "render modes read the Python simulator: Python backend"
    return None


@functools.lru_cache(maxsize=1)
def _step_module():
    """The compiled step (imports numba; compiles or loads the cached machine code)."""
    from cluster_env.vector import _compiled_step

    return _compiled_step


class CompiledBackend(VectorBackend):
    """N episodes in the compiled engine's arrays, one numba call per vector step (the vector
    env's action checks and its ``action_mask`` included)."""

    writes_action_mask = True
    #: The allocation log's first size per job of an episode without max_steps (it grows as needed).
    log_entries_per_job = 8

    def __init__(self, envs: list[ClusterParallelEnv], buffers: Buffers) -> None:
        why = unsupported_reason(envs)
        if why is not None:
            raise ValueError(f"backend='compiled': {why}")
        self._c = _step_module()
        if self._c.MAX_PREEMPTIONS_PER_INSTANT != MAX_PREEMPTIONS_PER_INSTANT:
            raise RuntimeError("compiled step and ClusterParallelEnv disagree on MAX_PREEMPTIONS_PER_INSTANT")
        self.envs = envs
        self.num_envs = len(envs)
        self.buffers = buffers
        n = self.num_envs
        self._states: list = [None] * n
        self._obs: list = [None] * n
        self._sims: list = [None] * n
        self._rngs = None                      # numba typed list of the generators, made at the first step
        self._logged: set[int] = set()         # envs whose episode keeps the allocation log (tenant quotas)
        # Each env's state and observation tuples as byte images the compiled step reads (see
        # _compiled_step); the tuples' arrays stay alive in _states and _obs.
        self._state_images = np.zeros((n, self._c.STATE_BYTES), dtype=np.uint8)
        self._obs_images = np.zeros((n, self._c.OBS_BYTES), dtype=np.uint8)
        self._ended = np.zeros(n, dtype=np.int64)
        self._no_flags = np.zeros(n, dtype=np.bool_)
        b = buffers
        # The buffers (and the images above) as one byte image: step_all's one argument for all of
        # them (these arrays live as long as the backend).
        self._bufs = (b.jobs, b.machines, b.global_, b.placing, b.order_pad, b.place_pad, b.job_ids, b.rewards,
                      b.terminated, b.truncated, b.num_steps, b.phase, b.time, b.placing_job, b.tick, self._ended,
                      b.action_mask, b.invalid, b.played, self._state_images, self._obs_images)
        self._buf_image = np.zeros(self._c.BUF_BYTES, dtype=np.uint8)
        self._c.store_buffers(self._buf_image, self._bufs)
        self._modes = {"raise": self._c.RAISE, "noop": self._c.NOOP, "fallback": self._c.FALLBACK}

    # ------------------------------------------------------------------ contract
    def reset(self, index: int, seed: Optional[int], options: Optional[dict]) -> None:
        from gymnasium.utils import seeding

        from cluster_env.core.engine.state import build_state, log_capacity
        from cluster_env.core.simulator import ClusterSimulator
        from cluster_env.scenarios.load import offered_load

        from cluster_env.envs.cluster_parallel import reset_split

        env = self.envs[index]
        split = reset_split(options, env.split)
        # ClusterParallelEnv.reset: the same generator, drawn from in the same order.
        if seed is not None or env._np_random is None:
            env._np_random, _ = seeding.np_random(seed)
        rng = env._np_random
        workload = env.scenario.sample(split, rng, env.jobs_per_episode)
        env.offered_load = offered_load(workload, env.cluster.total_gpus, env.scenario.load_measure)
        sim = ClusterSimulator(env.cluster, workload, env.world, rng, preemption=env.sched.preemption,
                               scheduling_tick=env.sched.scheduling_tick, time_limit=env.sched.max_time)
        builder = env.builder
        builder.bind(sim, max(workload.num_tenants, 1))
        env.sim = None         # the episode lives in the engine's arrays, not in a Python simulator
        # Tenant quotas: the allocation log for quota_violation (without max_steps, _grow_logs
        # makes room before every step).
        log = log_capacity(workload, env.sched.max_steps, self.log_entries_per_job)
        state = build_state(env, sim, log)
        obs = self._episode_arrays(env, sim, state)
        self._states[index], self._obs[index], self._sims[index] = state, obs, sim
        (self._logged.add if log else self._logged.discard)(index)
        if self._rngs is not None:
            self._c.rng_set(self._rngs, index, rng)
        b = self.buffers
        err = self._c.reset_row(state, obs, self._state_images, self._obs_images, rng, index, b.jobs, b.machines,
                                b.global_, b.placing, b.order_pad, b.place_pad, b.job_ids)
        if err:
            raise RuntimeError(f"compiled backend: simulator error {int(err)} in env {index}'s reset")
        c = self._c
        sc, ic = state[10], state[11]
        b.phase[index] = 0
        b.time[index] = sc[c.NOW]
        b.placing_job[index] = ic[c.PLACING]
        b.tick[index] = sc[c.LAST_TICK] == sc[c.NOW]
        b.num_steps[index] = 0
        b.action_mask[index] = b.order_pad[index]      # a new episode starts in ORDER

    def step(self, actions: np.ndarray, valid: np.ndarray) -> list[int]:
        return self._step(np.ascontiguousarray(actions, dtype=np.int64), np.ascontiguousarray(valid, dtype=np.bool_),
                          self._c.UNCHECKED, 0.0)

    def step_checked(self, actions: np.ndarray, other_bad: Optional[np.ndarray], mode: str,
                     penalty: float) -> Optional[list[int]]:
        """:meth:`VectorBackend.step_checked` in the compiled step (the checks, the invalid flags,
        the played actions, the penalty and ``action_mask`` in the same numba call)."""
        if not actions.flags.c_contiguous:
            actions = np.ascontiguousarray(actions)
        flags = self._no_flags if other_bad is None else np.ascontiguousarray(other_bad, dtype=np.bool_)
        return self._step(actions, flags, self._modes[mode], float(penalty))

    def _step(self, actions: np.ndarray, flags: np.ndarray, mode: int, penalty: float) -> Optional[list[int]]:
        if self._rngs is None:
            self._rngs = self._make_typed()
        self._grow_logs()
        count = self._c.step_all(self._buf_image, self._rngs, actions, flags, mode, penalty)
        if count < 0:
            if count == self._c.REFUSED:
                return None
            raise RuntimeError(f"compiled backend: simulator error {int(self._states[-1 - count][11][self._c.ERROR])} "
                               f"in env {-1 - count}")
        return self._ended[:count].tolist() if count else []

    def _grow_logs(self) -> None:
        """Room in every kept allocation log for the coming step (at most the running jobs plus
        two entries, see reset): a full log is doubled and its env's state image stored again."""
        from cluster_env.core.engine.state import LOG_ITEMS, grow_log

        c = self._c
        for i in self._logged:
            state = self._states[i]
            size = len(state[LOG_ITEMS[0]])
            if size - state[11][c.LOG_N] < state[11][c.N_RUN] + 2:
                state = grow_log(state, 2 * size + state[11][c.N_RUN] + 2)
                self._states[i] = state
                c.store_state_row(self._state_images, i, state)

    def episode_info(self, index: int) -> dict[str, Any]:
        from cluster_env.core.engine.state import state_metrics

        return {"metrics": state_metrics(self._states[index], self._sims[index]),
                "offered_load": self.envs[index].offered_load}

    def close(self) -> None:
        self._rngs = None
        self._logged = set()
        self._states = [None] * self.num_envs
        self._obs = [None] * self.num_envs
        self._sims = [None] * self.num_envs

    # ------------------------------------------------------------------ internals
    def _episode_arrays(self, env: ClusterParallelEnv, sim, state: tuple) -> tuple:
        """The observation tuple ``O`` of :mod:`cluster_env.vector._compiled_step` for a new episode
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
        E[c.E_MAX_STEPS] = -1 if env.sched.max_steps is None else env.sched.max_steps
        E[c.E_AGE_VER] = -1
        EF = np.zeros(c.EF_SIZE)
        EF[c.EF_AGE_NOW] = np.nan
        EF[c.EF_PREEMPT_AT] = np.nan
        EF[c.EF_DENOM] = max(sim.num_jobs, 1) * env._jct_unit
        EF[c.EF_MAX_TIME] = np.inf if env.sched.max_time is None else float(env.sched.max_time)
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
        return rngs


def make_backend(envs: list[ClusterParallelEnv], buffers: Buffers, backend: Any = "auto") -> VectorBackend:
    """The vector env's backend: ``"auto"`` (default) the compiled one when
    :func:`unsupported_reason` allows it, else the Python one; ``"compiled"`` (an error when it cannot
    run these envs), ``"python"``, or a factory ``(envs, buffers) -> VectorBackend``."""
    if callable(backend):
        return backend(envs, buffers)
    if backend not in BACKEND_NAMES:
        raise ValueError(f"backend must be one of {BACKEND_NAMES} or a factory (envs, buffers) -> VectorBackend, "
                         f"got {backend!r}")
    if backend == "python" or (backend == "auto" and unsupported_reason(envs) is not None):
        return PythonBackend(envs, buffers)
    return CompiledBackend(envs, buffers)


__all__ = ["BACKEND_NAMES", "CompiledBackend", "make_backend", "unsupported_reason"]
