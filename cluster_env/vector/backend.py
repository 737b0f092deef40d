"""What steps the N episodes of a vector env: the backend interface and the Python backend.

The vector env (:class:`cluster_env.vector.ClusterVectorEnv`) checks its arguments, resets ended
episodes and builds infos; a *backend* owns the N episodes and writes their state into the shared
:class:`~cluster_env.envs.buffers.Buffers`. The actions' checks against the masks and the
invalid-action mode run in the backend's ``step_checked`` (in numpy by default here, inside the
compiled step for the compiled backend), before any env steps.
It is the seam where a compiled episode engine can later replace the per-env Python stepping
without changing the vector env's API.

:class:`PythonBackend` steps N :class:`~cluster_env.envs.cluster_parallel.ClusterParallelEnv`
through their internals (the simulator's decisions, the observation builder, the reward), with
no PettingZoo dicts, and copies each env's freshly built arrays into its row of the buffers. It
makes exactly the calls ``ClusterParallelEnv.step`` makes, in the same order, so each episode is
bit-for-bit the one a separate parallel env gives (tests/test_vector.py compares them).
"""
from __future__ import annotations

import abc
from typing import Any, Optional

import numpy as np

from cluster_env.envs.cluster_parallel import PLACE, ClusterParallelEnv
from cluster_env.envs.buffers import Buffers


class VectorBackend(abc.ABC):
    """N episodes of one scenario, written into ``buffers`` in place.

    Contract (what :class:`~cluster_env.vector.ClusterVectorEnv` relies on):

    * ``reset(i, seed, options)`` starts a new episode in env ``i`` (``seed=None`` continues the
      env's generator, as ``ClusterParallelEnv.reset()`` does) and writes its row: features,
      ``order_pad``/``place_pad``, ``phase``, ``time``, ``placing_job``, ``tick``, ``job_ids``,
      ``num_steps`` (0).
    * ``step(actions, valid)`` makes one decision in every env: ``actions[i]`` is the acting
      agent's action (the vector env has checked it is in range); ``valid[i]`` False means the
      mask forbids it and it is ignored (the state is unchanged, the step still counts). Writes
      every row plus ``rewards``, ``terminated``, ``truncated``; returns the indices of the envs
      whose episode ended in this step (a list, usually empty).
    * ``episode_info(i)`` the end-of-episode extras of env ``i``: ``{"metrics": {...},
      "offered_load": float}``; ``close()``.
    * ``step_checked(actions, other_bad, mode, penalty)`` (what the vector env calls): the vector
      env's action checks, then ``step``; see :meth:`step_checked`. The default implementation
      here checks in numpy and calls ``step``; a backend may do both in one compiled call.

    ``action_mask`` is the vector env's to write unless the backend's ``writes_action_mask`` is
    True (its ``step_checked`` and ``reset`` then write the stepped and reset rows).
    """

    buffers: Buffers
    num_envs: int
    #: Whether ``step_checked`` and ``reset`` write ``buffers.action_mask`` (else the vector env does).
    writes_action_mask: bool = False

    @abc.abstractmethod
    def reset(self, index: int, seed: Optional[int], options: Optional[dict]) -> None:
        """Start a new episode in env ``index`` and write its row."""

    @abc.abstractmethod
    def step(self, actions: np.ndarray, valid: np.ndarray) -> list[int]:
        """One decision in every env (see the class docstring); returns the envs whose episode ended."""

    @abc.abstractmethod
    def episode_info(self, index: int) -> dict[str, Any]:
        """Metrics and offered load of env ``index``'s episode (all metrics once it has ended)."""

    def close(self) -> None:
        """Release what the backend holds."""

    def step_checked(self, actions: np.ndarray, other_bad: Optional[np.ndarray], mode: str,
                     penalty: float) -> Optional[list[int]]:
        """The vector env's step after its argument checks: ``actions`` (N,) int64 the acting agents'
        actions (not yet checked against ``Discrete(A)``), ``other_bad`` (N,) bool or None where the
        dict form's other agent did not send its no-op, ``mode`` the invalid-action mode
        (``"raise"``, ``"noop"``, ``"fallback"``), ``penalty`` the invalid-action penalty.

        Returns None, with nothing stepped and no buffer written, when an action is outside
        ``Discrete(A)`` or (mode ``"raise"``) forbidden by ``action_mask`` or flagged in
        ``other_bad`` (the vector env then raises its error). Otherwise: ``"noop"`` ignores a
        forbidden action, ``"fallback"`` plays the row's lowest allowed action; writes ``invalid``
        (forbidden or flagged), ``played`` (the actions played) and subtracts ``penalty`` from the
        invalid envs' rewards; returns what :meth:`step` returns."""
        b = self.buffers
        if (actions.view(np.uint64) >= b.action_mask.shape[1]).any():
            return None
        valid = b.action_mask.view(np.bool_)[np.arange(self.num_envs), actions]
        invalid = None
        if not valid.all() or (other_bad is not None and other_bad.any()):
            invalid = ~valid if other_bad is None else ~valid | other_bad
            if mode == "raise":
                return None
            if mode == "fallback":
                actions = np.where(valid, actions, np.argmax(b.action_mask, axis=1))
                valid = np.ones(self.num_envs, dtype=bool)
        b.played[:] = actions
        ended = self.step(actions, valid)
        if invalid is None:
            b.invalid.fill(False)
        else:
            b.invalid[:] = invalid
            if penalty:
                b.rewards[invalid] -= penalty
        return ended


class PythonBackend(VectorBackend):
    """Steps N parallel envs through their internals (see the module docstring)."""

    def __init__(self, envs: list[ClusterParallelEnv], buffers: Buffers, direct: bool = True) -> None:
        self.envs = envs
        self.num_envs = len(envs)
        self.buffers = buffers
        first = envs[0]
        for env in envs:
            env.backend = "python"      # stepped through its Python simulator's internals
        self._n_order, self._n_place = first._order_noop + 1, first._place_noop + 1
        self._rows = range(self.num_envs)
        b = buffers
        # Row views made once (indexing a stacked array per step costs more than the write).
        self._views = [(b.jobs[i], b.machines[i], b.global_[i], b.placing[i], b.order_pad[i, : self._n_order],
                        b.place_pad[i, : self._n_place], b.job_ids[i]) for i in self._rows]
        #: Per env: observations written by the compiled kernel straight into the buffers (set at reset).
        self.direct = [False] * self.num_envs
        self._allow_direct = bool(direct)

    # ------------------------------------------------------------------ contract
    def reset(self, index: int, seed: Optional[int], options: Optional[dict]) -> None:
        env = self.envs[index]
        obs, _ = env.reset(seed=seed, options=options)
        self._write(index, env, obs["orderer"])
        self.direct[index] = self._allow_direct and _writes_direct(env)
        self.buffers.num_steps[index] = 0

    def step(self, actions: np.ndarray, valid: np.ndarray) -> list[int]:
        b = self.buffers
        # Every row is rewritten below: zero once for all envs what the kernel expects zero-filled.
        b.jobs.fill(0.0)
        b.placing.fill(0.0)
        b.order_pad.fill(0)
        b.place_pad.fill(0)
        ended = []
        # Per-env scalars go to lists, then into the arrays in one call each.
        rewards, terminated, truncated, num_steps, phase, times, placing, tick = [], [], [], [], [], [], [], []
        direct = self.direct
        for i, env, a, ok in zip(self._rows, self.envs, actions.tolist(), valid.tolist()):
            sim = env.sim
            # ClusterParallelEnv.step without its dict plumbing: the decision, the step's end.
            env._apply(a if ok else None)
            reward, done, trunc = env._end_step()
            rewards.append(reward)
            terminated.append(done)
            truncated.append(trunc)
            num_steps.append(env.num_steps)
            if direct[i]:
                self._observe_direct(i, env)
            else:
                self._write_features(i, env, env._observe()["orderer"])
            now = sim.now
            phase.append(env.phase)
            times.append(now)
            placing.append(sim.placing)
            tick.append(sim.last_tick == now)
            if done or trunc:
                env.agents = []
                ended.append(i)
        b.rewards[:] = rewards
        b.terminated[:] = terminated
        b.truncated[:] = truncated
        b.num_steps[:] = num_steps
        b.phase[:] = phase
        b.time[:] = times
        b.placing_job[:] = placing
        b.tick[:] = tick
        return ended

    def episode_info(self, index: int) -> dict[str, Any]:
        env = self.envs[index]
        return {"metrics": env.metrics(), "offered_load": env.offered_load}

    def close(self) -> None:
        for env in self.envs:
            env.close()

    # ------------------------------------------------------------------ internals
    def _observe_direct(self, i: int, env: ClusterParallelEnv) -> None:
        """``env._observe()`` with the compiled observation kernel writing straight into row ``i``
        (``ObservationBuilder.build_into``: no fresh arrays, no copies)."""
        builder, sim = env.builder, env.sim
        jobs, machines, glob, plc, order_mask, place_mask, ids = self._views[i]
        placing = env.phase == PLACE
        if placing:
            pending, running = env._cand_pending, env._cand_running
        else:
            pending, running = builder.candidates()
            env._cand_pending, env._cand_running = pending, running
        # jobs, placing and the masks were zero-filled by ``step`` for every env.
        builder.build_into(jobs, machines, glob, plc, order_mask, place_mask, ids, placing, pending, running)
        env._order_mask, env._place_mask = order_mask, place_mask
        if not placing:
            if env._preempted_now[1] and env._preempted_now[0] == sim.now:
                env._guard_zero_time_restart(running)
            env._job_ids = ids

    def _write_features(self, i: int, env: ClusterParallelEnv, feats: dict) -> None:
        """Row ``i``'s features, masks and job ids from env ``i``'s observation arrays (copies)."""
        jobs, machines, glob, plc, order_mask, place_mask, ids = self._views[i]
        jobs[...] = feats["jobs"]
        machines[...] = feats["machines"]
        glob[...] = feats["global"]
        plc[...] = feats["placing"]
        order_mask[...] = env._order_mask
        place_mask[...] = env._place_mask
        ids[...] = env._job_ids

    def _write(self, i: int, env: ClusterParallelEnv, feats: dict) -> None:
        """Row ``i`` of the buffers from env ``i``'s observation arrays and state."""
        self._write_features(i, env, feats)
        b, sim = self.buffers, env.sim
        b.phase[i] = env.phase
        now = sim.now
        b.time[i] = now
        b.placing_job[i] = sim.placing
        b.tick[i] = sim.last_tick == now


def _writes_direct(env: ClusterParallelEnv) -> bool:
    """Whether env's observations can be written by its compiled kernel straight into the buffers."""
    from cluster_env.envs.observation import ObservationBuilder

    return type(env.builder) is ObservationBuilder and getattr(env.builder, "_kernel", None) is not None


__all__ = ["PythonBackend", "VectorBackend"]
