"""Common machinery of the single-agent Gymnasium views (see ``flat``, ``orderer``, ``placer``)."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

import gymnasium
import numpy as np
from gymnasium import spaces

from cluster_env.scenarios.registry import DEFAULT_SCENARIO
from cluster_env.envs.cluster_parallel import AGENTS, PLACE, ClusterParallelEnv
from cluster_env.errors import InvalidActionError
from cluster_env.envs.flat_layout import FlatLayout
from cluster_env.wrappers.policies import resolve_policy


#: Safe defaults of the single-agent views (the parallel env stays strict): a forbidden action is
#: replaced by the acting agent's lowest allowed action (``invalid_action="fallback"``: FIFO's
#: choice in ORDER, first-fit's in PLACE) at a cost of ``invalid_penalty`` reward, and an episode is
#: truncated after ``DEFAULT_STEPS_PER_JOB`` steps per job of the episode (``max_steps``,
#: ``cluster_env.core.config``; ``ClusterParallelEnv.default_max_steps``), so that
#: Gymnasium's and SB3's checkers (which sample unmasked actions) pass and plain PPO, which does
#: not read masks, learns to pick allowed actions instead of crashing or stalling. (A no-op
#: instead, ``invalid_action="noop"``, lets an agent that discounts per step defer costly
#: ``advance`` steps forever by repeating forbidden actions: plain PPO learns that stall.)
DEFAULT_INVALID_PENALTY = 0.1
VIEW_INVALID_ACTIONS = ("fallback", "noop", "raise")


def check_invalid_penalty(value: Any) -> float:
    """``invalid_penalty`` as a float; ValueError unless it is a finite number >= 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value < 0:
        raise ValueError(f"invalid_penalty must be a finite number >= 0, got {value!r}")
    return float(value)


def as_action(action: Any, n: int) -> int:
    """An integer action from an int, a numpy integer or a one-element integer array."""
    if isinstance(action, np.ndarray) and action.size == 1 and np.issubdtype(action.dtype, np.integer):
        action = action.reshape(()).item()
    if isinstance(action, (bool, np.bool_)) or not isinstance(action, (int, np.integer)):
        raise TypeError(f"the action must be an integer, got {action!r} ({type(action).__name__})")
    action = int(action)
    if not 0 <= action < n:
        raise InvalidActionError(f"action {action} is outside Discrete({n})")
    return action


class ClusterView(gymnasium.Env):
    """Base of the views: owns a :class:`ClusterParallelEnv` and shares its seeded generator."""

    metadata = {"render_modes": ["ansi", "rgb_array", "human"], "render_fps": 4}

    def __init__(self, scenario: Any = DEFAULT_SCENARIO, split: str = "train", *,
                 env: Optional[ClusterParallelEnv] = None, invalid_penalty: float = DEFAULT_INVALID_PENALTY,
                 **overrides: Any) -> None:
        if env is None:
            mode = overrides.pop("invalid_action", "fallback")
            if mode not in VIEW_INVALID_ACTIONS:
                raise ValueError(f"invalid_action must be one of {VIEW_INVALID_ACTIONS} in a view, got {mode!r}")
            overrides["invalid_action"] = "raise" if mode == "raise" else "noop"
            env = ClusterParallelEnv(scenario=scenario, split=split, **overrides)
            if env.sched.max_steps is None and "max_steps" not in overrides:
                env.sched = replace(env.sched, max_steps=env.default_max_steps())
        elif overrides:
            raise TypeError(f"pass either env= or overrides, not both (got {sorted(overrides)})")
        else:
            mode = env.sched.invalid_action
        self.invalid_action = mode
        self.invalid_penalty = check_invalid_penalty(invalid_penalty)
        self.env = env
        self.render_mode = env.render_mode
        self._noop = {a: env.action_space(a).n - 1 for a in AGENTS}

    # ------------------------------------------------------------------ helpers
    @property
    def acting_agent(self) -> str:
        """The agent whose decision the current observation asks for."""
        return "placer" if self.env.phase == PLACE else "orderer"

    def _reset_env(self, seed: Optional[int], options: Optional[dict]):
        obs, infos = self.env.reset(seed=seed, options=options)
        # One generator for everything random: the wrapped env's (gymnasium's checker reads _np_random).
        self._np_random = self.env._np_random
        if seed is not None:
            self._np_random_seed = int(seed)
        return obs, infos

    def _info(self, infos: dict, acted: Optional[str] = None) -> dict:
        info = {k: (v.copy() if isinstance(v, (np.ndarray, dict)) else v) for k, v in infos["orderer"].items()
                if k != "invalid_action"}
        info["acting_agent"] = self.acting_agent
        if acted is not None and infos[acted].get("invalid_action"):
            info["invalid_action"] = True
        return info

    def _fallback(self, action: int, mask: np.ndarray) -> tuple[int, bool]:
        """``action``, or the lowest allowed one when ``action`` is forbidden in fallback mode."""
        if self.invalid_action == "fallback" and not (action < len(mask) and mask[action]):
            self.env.count_fallback()        # the episode's count (its final infos' ``fallbacks``)
            return int(np.flatnonzero(mask)[0]), True
        return action, False

    def _check_running(self) -> None:
        if not self.env.in_episode:
            raise RuntimeError("step() called before reset() or after the episode ended; call reset() first")

    # ------------------------------------------------------------------ public extras
    def metrics(self) -> dict[str, float]:
        """The wrapped env's metrics (all of them once the episode has ended)."""
        return self.env.metrics()

    def world_summary(self):
        """The wrapped env's world (:meth:`ClusterParallelEnv.world_summary`)."""
        return self.env.world_summary()

    def render(self):
        return self.env.render()

    def close(self) -> None:
        self.env.close()


class SingleAgentView(ClusterView):
    """One agent learns; the other agent is a fixed policy stepped inside ``step``."""

    agent: str = ""
    default_fixed: str = ""

    def __init__(self, scenario: Any = DEFAULT_SCENARIO, split: str = "train", *, fixed_policy: Any = None,
                 env: Optional[ClusterParallelEnv] = None, invalid_penalty: float = DEFAULT_INVALID_PENALTY,
                 **overrides: Any) -> None:
        super().__init__(scenario, split, env=env, invalid_penalty=invalid_penalty, **overrides)
        self.other = "placer" if self.agent == "orderer" else "orderer"
        self.fixed_policy = resolve_policy(self.default_fixed if fixed_policy is None else fixed_policy)
        self._phase = PLACE if self.agent == "placer" else 0
        self.n_actions = self.env.action_space(self.agent).n
        self.layout = FlatLayout(self.env.observation_space(self.agent), self.n_actions)
        self.observation_space = self.layout.space
        self.action_space = spaces.Discrete(self.n_actions)
        self._mask = np.zeros(self.n_actions, dtype=bool)
        self._seedseq: Optional[np.random.SeedSequence] = None
        self._carry = 0.0
        self._ended: Optional[tuple[bool, bool, dict]] = None

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        obs, infos = self._reset_env(seed, options)
        if seed is not None or self._seedseq is None:
            self._seedseq = np.random.SeedSequence(seed)
        self.fixed_policy.reset(int(self._seedseq.spawn(1)[0].generate_state(1)[0]))
        self._carry, self._ended = 0.0, None
        obs, reward, term, trunc, infos = self._run_fixed(obs, infos)
        self._carry = reward
        if term or trunc:
            self._ended = (term, trunc, infos)
        return self._view(obs), self._info(infos)

    def step(self, action: Any):
        if self._ended is not None:  # the episode ended in reset, before this agent's first decision
            term, trunc, infos = self._ended
            reward, self._carry, self._ended = self._carry, 0.0, None
            return self._last_obs.copy(), float(reward), term, trunc, self._info(infos)
        self._check_running()
        a, replaced = self._fallback(as_action(action, self.n_actions), self._mask)
        obs, rewards, terms, truncs, infos = self.env.step({self.agent: a, self.other: self._noop[self.other]})
        reward = rewards[self.agent] + self._carry
        self._carry = 0.0
        term, trunc = terms[self.agent], truncs[self.agent]
        acted_info = self._info(infos, self.agent)
        if not (term or trunc):
            obs, r, term, trunc, infos = self._run_fixed(obs, infos)
            reward += r
            invalid = acted_info.get("invalid_action", False)
            acted_info = self._info(infos)
            if invalid:
                acted_info["invalid_action"] = True
        if replaced:
            acted_info["invalid_action"], acted_info["played_action"] = True, a
        if acted_info.get("invalid_action"):
            reward -= self.invalid_penalty
        return self._view(obs), float(reward), bool(term), bool(trunc), acted_info

    def action_masks(self) -> np.ndarray:
        """Allowed actions of the learning agent now (bool; what MaskablePPO reads)."""
        return self._mask.copy()

    # ------------------------------------------------------------------ internals
    def _run_fixed(self, obs: dict, infos: dict):
        """Step the fixed side until it is this agent's turn or the episode ends."""
        env = self.env
        total, term, trunc = 0.0, False, False
        while env.agents and env.phase != self._phase:
            chosen = self.fixed_policy.act(obs, infos)
            if self.other not in chosen:
                raise KeyError(f"the fixed policy returned no action for {self.other!r}: {chosen!r}")
            obs, rewards, terms, truncs, infos = env.step({self.other: chosen[self.other],
                                                           self.agent: self._noop[self.agent]})
            if infos[self.other].get("invalid_action"):
                raise InvalidActionError(f"the fixed {self.other} policy chose a forbidden action "
                                         f"({chosen[self.other]}); fixed policies must follow the mask")
            total += rewards[self.other]
            term, trunc = terms[self.other], truncs[self.other]
        return obs, total, term, trunc, infos

    def _view(self, obs: dict) -> np.ndarray:
        own = obs[self.agent]
        # At the end of an episode the env is in ORDER: the placer's mask then allows only its no-op.
        self._mask[:] = own["action_mask"].astype(bool)
        self._last_obs = self.layout.flatten(own)
        return self._last_obs.copy()


__all__ = ["ClusterView", "SingleAgentView", "as_action", "check_invalid_penalty"]
