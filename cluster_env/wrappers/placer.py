"""Placer-only view: a fixed orderer picks jobs, the agent places them (``HeteroClusterPlacer-v1``).

======================  =====================================================================
Import                  ``cluster_env.wrappers.HeteroClusterPlacerEnv(scenario, split,
                        fixed_policy="fifo", **overrides)``
Registered id           ``cluster_env/HeteroClusterPlacer-v1``
Observation space       ``Box(-1, inf, (F,), float32)``, ``F = (K+R)*14 + M*11 + 10 + 9 + (M+1)``
                        (layout: :mod:`cluster_env.envs.flat_layout`, mask segment = the placer's mask;
                        ``placing`` and the machines' ``usable`` / ``job_speed`` describe the job)
Action space            ``Discrete(M + 1)``, the placer's: machine ``m < M``; ``M`` is the placer's
                        no-op, never allowed while placing (kept so indices match the env's)
Action mask             ``env.action_masks()`` -> bool ``(M + 1,)``
Reward                  the env's shared reward summed over the agent's step and the fixed orderer's
                        steps that follow it, until the next placement (a Python float); rewards
                        earned before the first placement are added to the first step
Episode end             ``terminated`` / ``truncated`` as the wrapped parallel env
======================  =====================================================================

**The fixed orderer.** ``fixed_policy`` is a policy object (``act(observations, infos) -> {agent:
action}`` and ``reset(seed)``; only its ``"orderer"`` action is used) or a name: ``"fifo"``
(default: the oldest pending job that fits, else advance), ``"random"``, or, when the
``baselines`` package is installed, any name of ``baselines.make_policy``. A fixed policy that
chooses a forbidden action raises :class:`cluster_env.errors.InvalidActionError`.

If the episode ends before the first placement (e.g. a tiny ``max_steps``), ``reset`` returns the
final observation and the next ``step`` ends the episode (its action is ignored).

**Seeding.** As :mod:`cluster_env.wrappers.orderer`.

**Info**: as :mod:`cluster_env.wrappers.flat` (``acting_agent`` is ``"placer"`` until the end,
where the env is back in ORDER).

**Arguments.** ``scenario``, ``split``, ``fixed_policy`` and every override of
:func:`cluster_env.parallel_env`; or ``env=`` an existing parallel env.

**Version history.** v1: the registered id's default scenario is ``DEFAULT_SCENARIO``
(``philly-v1``), split ``train``; nothing else changed. v0: first release; the ``-v0`` id stays
registered with its default scenario ``philly-v0`` (Gymnasium warns that v1 exists).
"""
from __future__ import annotations

from cluster_env.wrappers._base import SingleAgentView


class HeteroClusterPlacerEnv(SingleAgentView):
    """The placer learns; the orderer is fixed. See the module docstring (the view's card)."""

    agent = "placer"
    default_fixed = "fifo"


__all__ = ["HeteroClusterPlacerEnv"]
