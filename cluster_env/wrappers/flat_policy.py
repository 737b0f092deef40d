"""A flat-view predictor (e.g. a trained SB3 model) as a policy of the PettingZoo environment.

The harness (``baselines.evaluate``, ``cluster-bench``) scores objects with
``act(observations, infos)`` and ``reset(seed)`` on the parallel env. :class:`FlatViewPolicy`
turns a function of the flat observation and its mask, the interface of an agent trained on
``cluster_env/HeteroClusterFlat-v1`` (or on the SuperSuit / vector-env paths, whose observations
add a one-hot ``agent`` segment), into such a policy: it flattens the acting agent's observation
exactly as the view it was trained on does, asks for an action and sends the other agent's no-op.

**Scored under the rule it trained with.** ``env_overrides`` asks the harness for the view's
``invalid_action`` rule (``"fallback"``, the views' default: a forbidden action plays the acting
agent's lowest allowed one) and for the scheduling settings that shape its spaces
(``preemption``, ``clairvoyant``, windows, ``observation``); and :meth:`FlatViewPolicy.check_env`
refuses, before the first step, an environment whose spaces differ from the ones it was built for,
naming both shapes and the fix.
"""
from __future__ import annotations

import sys
from typing import Any, Callable, Optional

import numpy as np

from cluster_env.envs.flat_layout import FlatLayout

Predict = Callable[[np.ndarray, np.ndarray], int]

#: Settings of a view that shape its spaces or its rule for forbidden actions: what a flat-view
#: agent requires of the environment it is scored on (all are harness interface keys).
VIEW_INTERFACE_KEYS = ("invalid_action", "preemption", "clairvoyant", "pending_window", "running_window",
                       "observation")


class FlatViewPolicy:
    """Adapter from ``predict(flat_obs, mask) -> action`` to ``act(observations, infos)``.

    Args:
        predict: the flat-view decision function (``mask`` is a bool array of the view's actions).
        layout: the view's :class:`FlatLayout` (``view.layout``); with an ``agent`` segment (the
            SuperSuit and vector-env layouts) the acting agent's one-hot id is filled in.
        n_actions: the view's number of actions (``view.action_space.n``).
        name: the name the harness reports.
        env_overrides: what the agent requires of the environment (default
            ``{"invalid_action": "fallback"}``, the views' rule; see :data:`VIEW_INTERFACE_KEYS`).
        scenario: the scenario it was trained on (named in the error of :meth:`check_env`).
    """

    def __init__(self, predict: Predict, layout: FlatLayout, n_actions: int, name: str = "flat-policy",
                 env_overrides: Optional[dict] = None, scenario: Optional[str] = None) -> None:
        self.predict, self.layout, self.n_actions, self.name = predict, layout, int(n_actions), name
        self.env_overrides = {"invalid_action": "fallback", **dict(env_overrides or {})}
        self.scenario = scenario
        self._agent_ids = "agent" in layout.shapes
        self._mask = np.zeros(self.n_actions, dtype=bool)
        self._obs = np.zeros(layout.size, dtype=np.float32)

    @classmethod
    def from_sb3(cls, model: Any, view: Any, deterministic: bool = True, name: str = "ppo") -> "FlatViewPolicy":
        """Wrap a (Maskable)PPO-style model trained on ``view``: a flat view or its ``gymnasium.make``,
        an SB3 vector env of views (``make_vec_env``), ``supersuit_vec_env`` or ``ClusterSB3VecEnv``.
        The view's rule for forbidden actions and its space-shaping settings come along."""
        return cls.for_view(sb3_predict(model, deterministic), view, name)

    @classmethod
    def from_torch(cls, module: Any, view: Any, name: str = "torch-policy") -> "FlatViewPolicy":
        """Wrap a torch module mapping a batch of flat observations ``(B, F)`` to logits ``(B, A)``
        (a CleanRL-style actor) trained on ``view`` (any object :meth:`from_sb3` takes, or
        ``cluster_env.vector.ClusterVectorEnv``): the allowed action with the highest logit."""
        return cls.for_view(torch_predict(module), view, name)

    @classmethod
    def for_view(cls, predict: Predict, view: Any, name: str = "flat-policy") -> "FlatViewPolicy":
        """``predict`` with the layout, rule for forbidden actions, settings and scenario of ``view``."""
        layout, n_actions = view_signature(view)
        return cls(predict, layout, n_actions, name=name, env_overrides=view_settings(view),
                   scenario=view_scenario(view))

    def reset(self, seed: Optional[int] = None) -> None:
        """Nothing to reset: the decision function is fixed."""

    def check_env(self, env: Any) -> None:
        """Raise ``ValueError`` (naming both shapes and the fix) unless ``env``, a parallel env, gives
        the flat observation and action sizes this policy was built for."""
        want = (self.layout.size - (self.layout.shapes["agent"][0] if self._agent_ids else 0), self.n_actions)
        view = FlatLayout(env.observation_space("orderer"), max(env.action_space(a).n for a in ("orderer", "placer")))
        got = (view.size, view.shapes["action_mask"][0])
        if got != want:
            trained = f"on {self.scenario}" if self.scenario else "for another environment"
            run = getattr(getattr(env, "scenario", None), "name", "this run's scenario")
            raise ValueError(
                f"policy {self.name!r} was built {trained}: flat observation ({want[0]},) and {want[1]} actions, but "
                f"{run} gives ({got[0]},) and {got[1]} (pending window {env.sched.pending_window}, "
                f"{env.observation_space('orderer')['machines'].shape[0]} machines); score it on the scenario "
                f"and settings it was trained with "
                f"(--scenario {self.scenario or 'NAME'}, --env KEY=VALUE), or train it on this one")

    def act(self, observations: dict, infos: dict) -> dict[str, int]:
        placing = observations["orderer"]["global"][0] > 0.5
        acting, other = ("placer", "orderer") if placing else ("orderer", "placer")
        own = observations[acting]
        m = own["action_mask"]
        self._mask[:] = False
        self._mask[: len(m)] = m.astype(bool)
        self.layout.flatten(own, mask=self._mask, agent=(int(placing) if self._agent_ids else None), out=self._obs)
        action = int(self.predict(self._obs.copy(), self._mask.copy()))
        if not 0 <= action < len(m):     # a padded index: forbidden for this agent, like any other
            action = self._padded(action, m)
        return {acting: action, other: len(observations[other]["action_mask"]) - 1}

    def _padded(self, action: int, mask: np.ndarray) -> int:
        """What a padded index (beyond the acting agent's actions) plays, by the view's rule."""
        mode = self.env_overrides["invalid_action"]
        if mode in ("fallback", "noop"):
            # An in-range forbidden action: the env plays its fallback ("fallback": the lowest allowed,
            # counted in the episode's ``fallbacks``) or ignores it ("noop"). When every action is
            # allowed there is none: the lowest allowed is played directly (not counted).
            forbidden = np.flatnonzero(mask == 0)
            return int(forbidden[0]) if len(forbidden) else int(np.argmax(mask))
        from cluster_env.errors import InvalidActionError

        raise InvalidActionError(f"{self.name} chose action {action}, a padding index (the acting agent has "
                                 f"{len(mask)} actions); score it with invalid_action='fallback'")


def sb3_predict(model: Any, deterministic: bool = True) -> Predict:
    """``predict(obs, mask)`` of an SB3 model (with the mask for a maskable one)."""
    def predict(obs: np.ndarray, mask: np.ndarray) -> int:
        try:
            action, _ = model.predict(obs, action_masks=mask, deterministic=deterministic)
        except TypeError:           # a model without action masking
            action, _ = model.predict(obs, deterministic=deterministic)
        return int(np.asarray(action).reshape(-1)[0])

    return predict


def torch_predict(module: Any, source: Optional[str] = None) -> Predict:
    """``predict(obs, mask)`` of a torch module mapping flat observations to logits: the allowed
    action with the highest logit. Non-finite logits of allowed actions raise
    ``FloatingPointError`` naming ``source`` (the model's file), never play the lowest allowed
    action silently (the arg max of NaNs). Uses the torch that the module's owner loaded
    (``cluster_env`` never imports torch itself)."""
    torch = sys.modules.get("torch")
    if torch is None:
        raise TypeError(f"expected a torch module (flat observations -> logits), got {type(module).__name__}")
    who = source or type(module).__name__

    def predict(obs: np.ndarray, mask: np.ndarray) -> int:
        with torch.no_grad():
            logits = module(torch.from_numpy(obs)[None]).reshape(-1).numpy()
        allowed = mask[: len(logits)]
        if not np.isfinite(logits[: len(allowed)][allowed]).all():
            raise FloatingPointError(f"{who}: non-finite logits (NaN or inf) for allowed actions; its weights or "
                                     "its inputs are not finite")
        return int(np.argmax(np.where(allowed, logits[: len(mask)], -np.inf)))

    return predict


def _layout_owner(view: Any) -> Any:
    """The object that carries the layout: the view itself, its ``unwrapped``, an SB3 vector env of
    views (its first env) or a wrapper of a vector env (``venv``)."""
    seen = view
    for _ in range(8):
        if getattr(seen, "layout", None) is not None:
            return seen
        envs = getattr(seen, "envs", None)
        if envs:
            seen = envs[0]
        elif getattr(seen, "unwrapped", seen) is not seen and getattr(seen, "unwrapped", None) is not None \
                and not hasattr(seen, "venv"):
            seen = seen.unwrapped
        elif getattr(seen, "venv", None) is not None:
            seen = seen.venv
        else:
            break
    raise TypeError(f"cannot find the flat layout of {type(view).__name__}: pass the view the agent was trained on "
                    "(gymnasium.make('cluster_env/HeteroClusterFlat-v1', ...), make_vec_env, supersuit_vec_env or "
                    "ClusterVectorEnv)")


def view_signature(view: Any) -> tuple[FlatLayout, int]:
    """(layout, number of actions) of the view an agent was trained on."""
    owner = _layout_owner(view)
    n = getattr(owner, "n_actions", None)
    if n is None:
        n = owner.layout.shapes["action_mask"][0]
    return owner.layout, int(n)


def _parallel_env(view: Any) -> Any:
    """The ``ClusterParallelEnv`` inside a view (None when it cannot be reached)."""
    owner = _layout_owner(view)
    vector = getattr(owner, "vector", owner)       # ClusterSB3VecEnv wraps a ClusterVectorEnv
    candidates = [getattr(owner, "env", None), getattr(owner, "par", None), *(getattr(vector, "_envs", None) or [])[:1]]
    for inner in candidates:
        inner = getattr(inner, "env", inner) if not hasattr(inner, "sched") else inner   # FlatParallelEnv
        if inner is not None and hasattr(inner, "sched"):
            return inner
    return owner if hasattr(owner, "sched") else None


def view_settings(view: Any) -> dict:
    """What an agent trained on ``view`` requires of the scoring environment: the view's rule for
    forbidden actions and the scheduling settings that shape its spaces."""
    owner = _layout_owner(view)
    env = _parallel_env(view)
    out: dict = {}
    if env is not None:
        sched = env.sched
        out.update(preemption=sched.preemption, clairvoyant=sched.clairvoyant, pending_window=sched.pending_window,
                   running_window=sched.running_window)
        if getattr(env, "observation_mode", "default") != "default":
            out["observation"] = env.observation_mode
        out["invalid_action"] = sched.invalid_action
    mode = getattr(owner, "invalid_action", getattr(getattr(owner, "vector", None), "invalid_action", None))
    if isinstance(mode, str):             # a view's own rule (its env plays "noop" under "fallback")
        out["invalid_action"] = mode
    if out.get("invalid_action") not in ("fallback", "noop", "raise"):
        out["invalid_action"] = "fallback"
    return out


def view_scenario(view: Any) -> Optional[str]:
    """The name of the scenario ``view`` runs (None when unknown)."""
    env = _parallel_env(view)
    return getattr(getattr(env, "scenario", None), "name", None)
