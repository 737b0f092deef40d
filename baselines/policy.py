"""The policy protocol and the composition of an orderer with a placer.

A *policy* is any object with ``act(observations, infos) -> {agent: action}`` and
``reset(seed)``; heuristics and learned agents are scored by the same harness. A policy may carry
``env_overrides``: the environment settings it needs (SJF needs ``clairvoyant=True``, Tiresias
``preemption=True``), which the harness applies when it builds the environment.

Heuristics here are split in two halves that mirror the two agents:

* an :class:`Orderer` answers the ORDER phase with one index of the orderer's action space;
* a :class:`Placer` answers the PLACE phase with one machine index.

:class:`ComposedPolicy` joins any orderer with any placer and sends the idle agent's no-op.
"""
from __future__ import annotations

from typing import Any, Optional, Protocol, runtime_checkable

import numpy as np

from baselines.obs import is_place_phase


@runtime_checkable
class Policy(Protocol):
    """What the harness needs of a policy (baseline or learned)."""

    def reset(self, seed: Optional[int] = None) -> None: ...

    def act(self, observations: dict, infos: dict) -> dict[str, int]: ...


class Orderer:
    """Base class of the ORDER-phase heuristics. Subclasses implement :meth:`order`."""

    name = "orderer"
    #: Environment settings this orderer needs (applied by the harness).
    env_overrides: dict[str, Any] = {}

    def reset(self, rng: np.random.Generator) -> None:
        """Start a new episode; ``rng`` is the policy's seeded generator."""
        self.rng = rng

    def order(self, obs: dict, info: dict) -> int:
        """The orderer's action for its observation ``obs`` (mask included) and ``info``."""
        raise NotImplementedError


class Placer:
    """Base class of the PLACE-phase heuristics. Subclasses implement :meth:`place`."""

    name = "placer"
    env_overrides: dict[str, Any] = {}

    def reset(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def place(self, obs: dict, info: dict) -> int:
        """The placer's machine index for its observation ``obs`` (mask included) and ``info``."""
        raise NotImplementedError


class ComposedPolicy:
    """An orderer and a placer acting as one policy through the environment's observations.

    Args:
        orderer: the ORDER-phase heuristic.
        placer: the PLACE-phase heuristic.
        name: the policy's display name (default ``"<orderer>+<placer>"``).
    """

    def __init__(self, orderer: Orderer, placer: Placer, name: Optional[str] = None) -> None:
        self.orderer, self.placer = orderer, placer
        self.name = name or f"{orderer.name}+{placer.name}"
        self.env_overrides = {**placer.env_overrides, **orderer.env_overrides}
        self.reset(None)

    def reset(self, seed: Optional[int] = None) -> None:
        # Independent streams for the two halves so that swapping one leaves the other's draws alone.
        order_seq, place_seq = np.random.SeedSequence(seed).spawn(2)
        self.orderer.reset(np.random.default_rng(order_seq))
        self.placer.reset(np.random.default_rng(place_seq))

    def check_env(self, env: Any) -> None:
        """Refuse (ValueError) an environment either half cannot play: the halves' own
        ``check_env(env)``, where they have one (e.g. ``gittins`` on a user's workload)."""
        for half in (self.orderer, self.placer):
            check = getattr(half, "check_env", None)
            if callable(check):
                check(env)

    def act(self, observations: dict, infos: dict) -> dict[str, int]:
        o_obs, p_obs = observations["orderer"], observations["placer"]
        order_noop = len(o_obs["action_mask"]) - 1
        place_noop = len(p_obs["action_mask"]) - 1
        if is_place_phase(p_obs):
            return {"orderer": order_noop, "placer": int(self.placer.place(p_obs, infos.get("placer", {})))}
        return {"orderer": int(self.orderer.order(o_obs, infos.get("orderer", {}))), "placer": place_noop}

    def __repr__(self) -> str:
        return f"ComposedPolicy({self.name!r})"
