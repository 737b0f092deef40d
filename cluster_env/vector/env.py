"""N environments of one scenario stepped together, as stacked arrays (``ClusterVectorEnv``).

======================  =====================================================================
Import                  ``cluster_env.vector.ClusterVectorEnv(num_envs, scenario, split, **overrides)``
                        (or ``cluster_env.vector.vector_env(...)``, the same); by default
                        ``DEFAULT_SCENARIO`` (``philly-v1``), split ``train``, as ``parallel_env()``
Base class              ``gymnasium.vector.VectorEnv`` (``num_envs``, ``single_observation_space``,
                        ``observation_space``, ``single_action_space``, ``action_space``)
Actions                 ``(N,)`` integers: env ``i``'s acting agent's action (the orderer's in ORDER,
                        the placer's in PLACE; ``phase`` says which), in ``Discrete(A)``,
                        ``A = max(K + R + 1, M + 1)``; or the dict-of-two form
                        ``{"orderer": (N,), "placer": (N,)}`` where the agent not acting sends its
                        no-op, as in the parallel env
Observations            a dict of stacked arrays: ``jobs`` (N, K+R, 14), ``machines`` (N, M, 11),
                        ``global`` (N, 10), ``placing`` (N, 9) float32; ``action_mask`` (N, A) int8
                        (the acting agent's, zero-padded), ``orderer_mask`` (N, K+R+1) and
                        ``placer_mask`` (N, M+1) int8; ``phase`` (N,) int8 (0 ORDER, 1 PLACE)
Rewards                 (N,) float64, the shared reward (minus ``invalid_penalty`` where an action
                        was forbidden)
Terminations            (N,) bool each, as the parallel env's
Infos                   a dict of arrays (Gymnasium's vector convention, each key with its ``_key``
                        mask): ``time``, ``placing_job``, ``tick``, ``job_ids`` (N, K+R),
                        ``num_steps``, ``invalid_action`` (and ``played_action`` with fallback)
Autoreset               ``AutoresetMode.SAME_STEP`` (default) or ``DISABLED`` (see below)
======================  =====================================================================

**Same episodes.** Env ``i`` is a :class:`~cluster_env.envs.cluster_parallel.ClusterParallelEnv`
stepped by the backend (see **Backends**) exactly as its own ``step`` would: the same seeds
and actions give bit-for-bit the rewards, observations, masks and metrics of N separate
``cluster_env.parallel_env`` environments (tests/test_vector.py checks whole episodes).

**Seeding.** ``reset(seed=s)`` seeds env ``i`` with ``s + i``; ``reset(seed=[s0, s1, ...])`` with
the listed seeds (``None`` entries: not reseeded); ``reset()`` continues each env's generator.
Auto-resets never reseed: env ``i``'s next episode continues its generator, as
``env.reset()`` without a seed would.

**Autoreset.** ``SAME_STEP`` (default): when env ``i``'s episode ends in a step, it is reset in
that same step; the returned observation row is the new episode's first, and
``infos["final_obs"]`` (an object array, Gymnasium's convention: env ``i``'s final observation
dict of copies, ``None`` for the others) and ``infos["final_info"]`` (a dict of arrays: ``metrics``
(a dict of the metric arrays), ``offered_load``, ``time``, ``num_steps``, ``invalid_action``, each
with its ``_key`` mask) describe the episode that ended; ``infos["_final_obs"]`` marks the envs
that ended. ``rewards``, ``terminations`` and ``truncations`` are those of the ending step.
``DISABLED``: ended envs stay ended (their final observation stays in the arrays and the final
info comes in the step's own infos); ``reset(options={"reset_mask": mask})`` resets only the
masked envs, and stepping an ended env is an error.

**Invalid actions.** ``invalid_action`` (default: the env's, ``"raise"``): ``"raise"`` checks every
action against the masks before any env steps and raises
:class:`~cluster_env.errors.InvalidActionError` naming the env; ``"noop"`` ignores a forbidden
action (the step counts); ``"fallback"`` plays the acting agent's lowest allowed action instead
(``infos["played_action"]``). Both flag ``infos["invalid_action"]`` and subtract
``invalid_penalty`` (default 0) from that env's reward.

**Buffers.** Observations and infos are views of preallocated arrays that the next ``step`` or
``reset`` overwrites (no copy per step): keep a copy (``copy=True`` returns fresh arrays) if you
store them across steps. The feature arrays are views into one flat ``(N, F)`` block laid out as
the single-agent views' observations; ``flat_observations()`` returns it with the masks filled in.

**Backends.** ``backend=`` chooses what steps the episodes: ``"auto"`` (default) the compiled
backend (:class:`~cluster_env.vector.compiled.CompiledBackend`: all N envs in one numba call per
step, several times faster) when it supports the envs (numba kernels, the default reward, no
render mode, the default observation layout), else the Python backend; ``"compiled"`` (an error
when it cannot run them), ``"python"`` (:class:`~cluster_env.vector.backend.PythonBackend`), or
a factory ``(envs, buffers) -> VectorBackend``. Every backend gives the same episodes, bit for bit.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Optional, Union

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from cluster_env.envs.cluster_parallel import AGENTS, ClusterParallelEnv
from cluster_env.errors import InvalidActionError
from cluster_env.scenarios.registry import DEFAULT_SCENARIO
from cluster_env.vector.backend import VectorBackend
from cluster_env.vector.compiled import make_backend
from cluster_env.envs.buffers import Buffers, allocate
from cluster_env.envs.flat_layout import FlatLayout

INVALID_ACTIONS = ("raise", "noop", "fallback")
_AUTORESET = {"same_step": AutoresetMode.SAME_STEP, "disabled": AutoresetMode.DISABLED}
_INFO_KEYS = ("time", "placing_job", "tick", "job_ids", "num_steps", "invalid_action")

BackendFactory = Callable[[list, Buffers], VectorBackend]


class ClusterVectorEnv(VectorEnv):
    """N environments of one scenario as stacked arrays; see the module docstring (its card)."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": ["ansi", "rgb_array"]}

    def __init__(self, num_envs: int = 16, scenario: Any = DEFAULT_SCENARIO, split: str = "train", *,
                 autoreset_mode: Union[str, AutoresetMode] = AutoresetMode.SAME_STEP,
                 invalid_action: Optional[str] = None, invalid_penalty: float = 0.0, copy: bool = False,
                 backend: Union[str, BackendFactory] = "auto", **overrides: Any) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
        mode = _AUTORESET.get(autoreset_mode, autoreset_mode) if isinstance(autoreset_mode, str) else autoreset_mode
        if mode not in (AutoresetMode.SAME_STEP, AutoresetMode.DISABLED):
            raise ValueError(f"autoreset_mode must be one of {sorted(_AUTORESET)} (or AutoresetMode.SAME_STEP / "
                             f"DISABLED), got {autoreset_mode!r}")
        invalid = "raise" if invalid_action is None else invalid_action
        if invalid not in INVALID_ACTIONS:
            raise ValueError(f"invalid_action must be one of {INVALID_ACTIONS}, got {invalid!r}")
        if isinstance(invalid_penalty, bool) or not isinstance(invalid_penalty, (int, float)) \
                or not np.isfinite(invalid_penalty) or invalid_penalty < 0:
            raise ValueError(f"invalid_penalty must be a finite number >= 0, got {invalid_penalty!r}")
        if overrides.get("render_mode") == "human":
            raise ValueError("render_mode='human' is not supported by the vector env: use 'ansi' or 'rgb_array' "
                             "(render() returns one frame per env)")
        n = int(num_envs)
        # Forbidden actions are handled here (the backend never calls the envs' step); the envs get
        # the matching mode for whoever steps them directly.
        inner = "raise" if invalid == "raise" else "noop"
        envs = [ClusterParallelEnv(scenario=scenario, split=split, invalid_action=inner, **overrides)
                for _ in range(n)]
        self._init(envs, mode, invalid, float(invalid_penalty), bool(copy), backend)

    @classmethod
    def from_envs(cls, envs: Sequence[ClusterParallelEnv], *,
                  autoreset_mode: Union[str, AutoresetMode] = AutoresetMode.SAME_STEP,
                  invalid_action: Optional[str] = None, invalid_penalty: float = 0.0, copy: bool = False,
                  backend: Union[str, BackendFactory] = "auto") -> "ClusterVectorEnv":
        """A vector env over existing parallel envs of one scenario (their settings are kept;
        ``invalid_action`` defaults to theirs)."""
        envs = list(envs)
        if not envs or not all(isinstance(e, ClusterParallelEnv) for e in envs):
            raise TypeError("envs must be a non-empty sequence of ClusterParallelEnv")
        shapes = {(e.builder.K, e.builder.R, e.builder.M) for e in envs}
        if len(shapes) != 1:
            raise ValueError(f"envs must share one scenario's shapes (K, R, M); got {sorted(shapes)}")
        self = cls.__new__(cls)
        # The vector env checks actions itself (the backend never calls the envs' step).
        invalid = envs[0].sched.invalid_action if invalid_action is None else invalid_action
        if invalid not in INVALID_ACTIONS:
            raise ValueError(f"invalid_action must be one of {INVALID_ACTIONS}, got {invalid!r}")
        mode = _AUTORESET.get(autoreset_mode, autoreset_mode) if isinstance(autoreset_mode, str) else autoreset_mode
        self._init(envs, mode, invalid, float(invalid_penalty), bool(copy), backend)
        return self

    def _init(self, envs: list, mode: AutoresetMode, invalid: str, penalty: float, copy: bool,
              backend: Union[str, BackendFactory, None]) -> None:
        first = envs[0]
        self.num_envs = len(envs)
        self.autoreset_mode = mode
        self.metadata = {**type(self).metadata, "autoreset_mode": mode}
        self.invalid_action, self.invalid_penalty, self.copy = invalid, penalty, copy
        self.render_mode = first.render_mode
        self.scenario, self.split = first.scenario, first.split
        self.n_order = first.action_space("orderer").n
        self.n_place = first.action_space("placer").n
        self.n_actions = max(self.n_order, self.n_place)
        self.K, self.R, self.M = first.builder.K, first.builder.R, first.builder.M
        feature_space = first.observation_space("orderer")
        #: The flat layout of the single-agent views (HeteroClusterFlatEnv) that ``flat`` follows.
        self.layout = FlatLayout(feature_space, self.n_actions)
        i8 = np.int8
        self.single_observation_space = spaces.Dict({
            **{k: feature_space[k] for k in ("jobs", "machines", "global", "placing")},
            "action_mask": spaces.Box(0, 1, (self.n_actions,), i8),
            "orderer_mask": spaces.Box(0, 1, (self.n_order,), i8),
            "placer_mask": spaces.Box(0, 1, (self.n_place,), i8),
            "phase": spaces.Box(0, 1, (), i8),
        })
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.single_action_space = spaces.Discrete(self.n_actions)
        self.action_space = spaces.MultiDiscrete(np.full(self.num_envs, self.n_actions, dtype=np.int64))
        self.buffers = allocate(self.num_envs, self.layout, self.n_order, self.n_place)
        self.backend = make_backend(envs, self.buffers, "auto" if backend is None else backend)
        self._envs = envs
        b = self.buffers
        self._all = np.ones(self.num_envs, dtype=bool)
        self._rows = np.arange(self.num_envs)
        self._obs = {"jobs": b.jobs, "machines": b.machines, "global": b.global_, "placing": b.placing,
                     "action_mask": b.action_mask, "orderer_mask": b.order_mask, "placer_mask": b.place_mask,
                     "phase": b.phase}
        self._played = self.buffers.played
        self._writes_mask = bool(getattr(self.backend, "writes_action_mask", False))
        # A factory's backend that does not derive from VectorBackend gets its checks in numpy.
        self._step_checked = getattr(self.backend, "step_checked", None) or functools.partial(
            VectorBackend.step_checked, self.backend)
        self._ended = np.zeros(self.num_envs, dtype=bool)   # DISABLED mode: ended, not reset yet
        self._any_ended = False
        self._shape = (self.num_envs,)
        self._mask_bool = self.buffers.action_mask.view(np.bool_)     # masks are 0/1: the same bytes
        self._placing_col = self.buffers.phase.view(np.bool_)[:, None]  # phase is 0/1 too
        self._info_template = {"time": b.time, "placing_job": b.placing_job, "tick": b.tick, "job_ids": b.job_ids,
                               "num_steps": b.num_steps, "invalid_action": b.invalid,
                               **{"_" + k: self._all for k in _INFO_KEYS}}
        self._started = False
        self.closed = False

    # ------------------------------------------------------------------ Gymnasium VectorEnv API
    def reset(self, *, seed: "int | Sequence[Optional[int]] | None" = None, options: Optional[dict] = None):
        """Reset every env (or those of ``options["reset_mask"]``); see the module docstring for seeds."""
        self._check_open()
        seeds = self._seeds(seed)
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        if mask is None:
            rows = range(self.num_envs)
        else:
            mask = np.asarray(mask)
            if mask.shape != (self.num_envs,) or mask.dtype != np.bool_:
                raise ValueError(f"options['reset_mask'] must be a bool array of shape ({self.num_envs},), "
                                 f"got {mask!r}")
            if not self._started and not mask.all():
                raise ValueError("the first reset must reset every env (options['reset_mask'] all True)")
            rows = np.flatnonzero(mask).tolist()
        b = self.buffers
        for i in rows:
            self.backend.reset(i, seeds[i], options or None)
            b.rewards[i], b.terminated[i], b.truncated[i], b.invalid[i] = 0.0, False, False, False
            self._ended[i] = False
        self._any_ended = bool(self._ended.any())
        self._started = True
        self._update_action_mask()
        return self._observations(), self._infos()

    def step(self, actions: Any):
        """One decision in every env; returns ``(obs, rewards, terminations, truncations, infos)``."""
        if self.closed or not self._started:
            self._check_open()
            raise RuntimeError("step() called before reset(); call reset() first")
        if self._any_ended:
            raise RuntimeError(f"env(s) {np.flatnonzero(self._ended).tolist()} ended and autoreset is disabled: "
                               "reset them first (reset(options={'reset_mask': mask}))")
        b = self.buffers
        other_bad = None
        # The common case with no conversion: a contiguous int64 array; the backend checks the
        # actions against Discrete(A) and the masks (before any env steps) and applies the mode.
        if type(actions) is np.ndarray and actions.dtype == np.int64 and actions.shape == self._shape \
                and actions.flags.c_contiguous:
            acting = actions
        else:
            acting, other_bad = self._acting_actions(actions)
        ended = self._step_checked(acting, other_bad, self.invalid_action, self.invalid_penalty)
        if ended is None:
            self._raise_refused(actions)
        if not self._writes_mask:
            self._update_action_mask()
        rewards, terms, truncs = b.rewards, b.terminated, b.truncated
        if self.copy:
            rewards, terms, truncs = rewards.copy(), terms.copy(), truncs.copy()
        if not ended:
            return self._observations(), rewards, terms, truncs, self._infos()
        final = self._final_info(ended)
        done = b.terminated | b.truncated
        if self.autoreset_mode == AutoresetMode.DISABLED:
            self._ended |= done
            self._any_ended = True
            infos = self._infos()
            infos.update(final)
            return self._observations(), rewards, terms, truncs, infos
        final_obs = np.full(self.num_envs, None, dtype=object)
        for i in ended:
            final_obs[i] = b.row_copy(i)
        # The ending step's rewards and flags are returned: keep them before the resets clear them.
        rewards, terms, truncs = rewards.copy(), terms.copy(), truncs.copy()
        for i in ended:
            self.backend.reset(i, None, None)
        self._update_action_mask()
        infos = self._infos()
        infos.update(final)
        infos["final_obs"], infos["_final_obs"] = final_obs, done
        return self._observations(), rewards, terms, truncs, infos

    def render(self) -> Optional[tuple]:
        """One frame per env (``render_mode`` ``"ansi"`` or ``"rgb_array"``), or None."""
        if self.render_mode is None:
            return None
        return tuple(env.render() for env in self._envs)

    def close_extras(self, **kwargs: Any) -> None:
        # A constructor that refused its arguments leaves no backend; gymnasium's __del__ still closes.
        backend = getattr(self, "backend", None)
        if backend is not None:
            backend.close()

    # ------------------------------------------------------------------ extras
    @property
    def envs(self) -> list[ClusterParallelEnv]:
        """The parallel envs behind the vector (read them; stepping them directly breaks the vector)."""
        return self._envs

    @property
    def phase(self) -> np.ndarray:
        """(N,) int8: 0 where the orderer acts, 1 where the placer acts."""
        return self.buffers.phase

    def action_masks(self) -> np.ndarray:
        """(N, A) bool: the acting agent's allowed actions in each env (a copy)."""
        return self.buffers.action_mask.astype(bool)

    def flat_observations(self, out: Optional[np.ndarray] = None) -> np.ndarray:
        """(N, F) float32: each env's observation in the single-agent flat layout
        (:class:`~cluster_env.wrappers.HeteroClusterFlatEnv`'s), with the acting agent's mask (a copy
        unless ``out`` is given: written there)."""
        b = self.buffers
        b.flat[:, self.layout.slice("action_mask")] = b.action_mask
        if out is None:
            return b.flat.copy()
        out[...] = b.flat
        return out

    def metrics(self, index: int) -> dict[str, float]:
        """Metrics of env ``index``'s current episode so far."""
        return self.backend.episode_info(index)["metrics"]

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple:
        """Call method ``name`` (or read attribute ``name``) of every parallel env."""
        out = []
        for env in self._envs:
            attr = getattr(env, name)
            out.append(attr(*args, **kwargs) if callable(attr) else attr)
        return tuple(out)

    def get_attr(self, name: str) -> tuple:
        """Attribute ``name`` of every parallel env."""
        return tuple(getattr(env, name) for env in self._envs)

    # ------------------------------------------------------------------ internals
    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError("the vector env is closed")

    def _seeds(self, seed: Any) -> list[Optional[int]]:
        n = self.num_envs
        if seed is None:
            return [None] * n
        if isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_)):
            return [int(seed) + i for i in range(n)]
        if isinstance(seed, (list, tuple, np.ndarray)) and len(seed) == n:
            out = []
            for s in seed:
                if s is not None and (isinstance(s, (bool, np.bool_)) or not isinstance(s, (int, np.integer))):
                    raise TypeError(f"seed list entries must be integers or None, got {s!r}")
                out.append(None if s is None else int(s))
            return out
        raise TypeError(f"seed must be None, an integer or a list of {n} integers/None, got {seed!r}")

    def _acting_actions(self, actions: Any) -> tuple[np.ndarray, Optional[np.ndarray]]:
        """The acting agents' actions (N,) int64 and, for the dict form, where the other agent did
        not send its no-op."""
        if isinstance(actions, dict):
            if set(actions) != set(AGENTS):
                raise KeyError(f"dict actions must have exactly the keys {list(AGENTS)}, got {sorted(actions)}")
            o = self._as_array(actions["orderer"], self.n_order, "orderer")
            p = self._as_array(actions["placer"], self.n_place, "placer")
            placing = self.buffers.phase == 1
            acting = np.where(placing, p, o)
            other_bad = np.where(placing, o != self.n_order - 1, p != self.n_place - 1)
            return acting, other_bad
        return self._as_array(actions, self.n_actions, "acting agent"), None

    def _as_array(self, actions: Any, n: int, who: str) -> np.ndarray:
        a = np.asarray(actions)
        if a.shape != (self.num_envs,):
            if a.ndim == 2 and a.shape == (self.num_envs, 1):      # what some libraries send
                a = a[:, 0]
            else:
                raise ValueError(f"the {who}'s actions must have shape ({self.num_envs},), got {a.shape}")
        if not np.issubdtype(a.dtype, np.integer):
            if a.dtype.kind == "f" and np.array_equal(a, np.floor(a)):
                a = a.astype(np.int64)
            else:
                raise TypeError(f"the {who}'s actions must be integers, got dtype {a.dtype}")
        bad = (a < 0) | (a >= n)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InvalidActionError(f"env {i}: the {who}'s action {int(a[i])} is outside Discrete({n})")
        return a.astype(np.int64, copy=False)

    def _raise_refused(self, actions: Any) -> None:
        """The error for actions the backend refused (nothing was stepped): out of range, or
        forbidden in mode "raise"."""
        acting, other_bad = self._acting_actions(actions)          # raises for an action out of range
        valid = self._mask_bool[self._rows, acting]
        if valid.all() and (other_bad is None or not other_bad.any()):
            raise RuntimeError("the vector env's backend refused allowed actions (a backend bug)")
        self._raise_forbidden(acting, valid, other_bad)

    def _raise_forbidden(self, acting: np.ndarray, valid: np.ndarray, other_bad: Optional[np.ndarray]) -> None:
        b = self.buffers
        if not valid.all():
            i = int(np.flatnonzero(~valid)[0])
            agent = AGENTS[int(b.phase[i])]
            raise InvalidActionError(
                f"env {i}: the {agent}'s action {int(acting[i])} is forbidden (phase "
                f"{'PLACE' if b.phase[i] else 'ORDER'}; allowed: {np.flatnonzero(b.action_mask[i]).tolist()[:20]}); "
                "no env was stepped. Choose actions the 'action_mask' array allows, or build the vector env with "
                "invalid_action='noop' or 'fallback'")
        i = int(np.flatnonzero(other_bad)[0])
        agent = AGENTS[1 - int(b.phase[i])]
        raise InvalidActionError(f"env {i}: the {agent} does not act in this phase and must send its no-op "
                                 f"({(self.n_order if agent == 'orderer' else self.n_place) - 1}); no env was stepped")

    def _update_action_mask(self) -> None:
        b = self.buffers
        np.copyto(b.action_mask, b.order_pad)
        np.copyto(b.action_mask, b.place_pad, where=self._placing_col)

    def _observations(self) -> dict[str, np.ndarray]:
        if self.copy:
            return {k: v.copy() for k, v in self._obs.items()}
        return dict(self._obs)

    def _infos(self) -> dict[str, Any]:
        infos = dict(self._info_template)
        if self.copy:
            for k in _INFO_KEYS:
                infos[k] = infos[k].copy()
        if self.invalid_action == "fallback":
            infos["played_action"] = self._played.copy() if self.copy else self._played
            infos["_played_action"] = self._all
        return infos

    def _final_info(self, rows: list[int]) -> dict[str, Any]:
        """``final_info`` (SAME_STEP) or the end-of-episode keys (DISABLED) of the envs in ``rows``."""
        b = self.buffers
        final: dict[str, Any] = {}
        for i in rows:
            extra = self.backend.episode_info(i)
            info = {"metrics": extra["metrics"], "offered_load": float(extra["offered_load"]),
                    "time": float(b.time[i]), "num_steps": int(b.num_steps[i]), "invalid_action": bool(b.invalid[i])}
            final = self._add_info(final, info, i)
        if self.autoreset_mode == AutoresetMode.DISABLED:
            return {k: final[k] for k in ("metrics", "_metrics", "offered_load", "_offered_load")}
        return {"final_info": final, "_final_info": b.terminated | b.truncated}


def vector_env(num_envs: int = 16, scenario: Any = DEFAULT_SCENARIO, split: str = "train",
               **kwargs: Any) -> ClusterVectorEnv:
    """``ClusterVectorEnv(num_envs, scenario, split, **kwargs)``: see :mod:`cluster_env.vector.env`."""
    return ClusterVectorEnv(num_envs, scenario, split, **kwargs)


__all__ = ["ClusterVectorEnv", "INVALID_ACTIONS", "vector_env"]
