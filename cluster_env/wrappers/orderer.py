"""Orderer-only view: the agent orders jobs, a fixed placer places them (``HeteroClusterOrderer-v1``).

======================  =====================================================================
Import                  ``cluster_env.wrappers.HeteroClusterOrdererEnv(scenario, split,
                        fixed_policy="first-fit", **overrides)``
Registered id           ``cluster_env/HeteroClusterOrderer-v1``
Observation space       ``Box(-1, inf, (F,), float32)``, ``F = (K+R)*14 + M*11 + 10 + 9 + (K+R+1)``
                        (layout: :mod:`cluster_env.envs.flat_layout`, mask segment = the orderer's mask)
Action space            ``Discrete(K + R + 1)``, the orderer's: ``i < K`` start the i-th pending
                        candidate, ``K <= i < K + R`` preempt, ``K + R`` advance
Action mask             ``env.action_masks()`` -> bool ``(K + R + 1,)``
Reward                  the env's shared reward summed over the agent's step and the fixed placer's
                        steps that follow it (a Python float); rewards earned before the first
                        decision are added to the first step, so the return is the env's return
Episode end             ``terminated`` / ``truncated`` as the wrapped parallel env
======================  =====================================================================

**The fixed placer.** ``fixed_policy`` is a policy object (``act(observations, infos) -> {agent:
action}`` and ``reset(seed)``; only its ``"placer"`` action is used) or a name: ``"first-fit"``
(default: the lowest-numbered machine with a usable free GPU), ``"random"``, or, when the
``baselines`` package is installed, any name of ``baselines.make_policy``. After each job the agent
starts, the fixed placer places it (one env step per machine) before control returns. A fixed
policy that chooses a forbidden action raises :class:`cluster_env.errors.InvalidActionError`.

**Seeding.** ``reset(seed=...)`` seeds the wrapped env (``env.np_random`` is its generator) and
resets the fixed policy with a seed derived from it (``numpy.random.SeedSequence``): the same seed
and actions give the same trajectory.

**Info**: as :mod:`cluster_env.wrappers.flat` (``acting_agent`` is ``"orderer"`` until the end).

**Arguments.** ``scenario``, ``split``, ``fixed_policy`` and every override of
:func:`cluster_env.parallel_env`; or ``env=`` an existing parallel env.

**Version history.** v1: the registered id's default scenario is ``DEFAULT_SCENARIO``
(``philly-v1``), split ``train``; nothing else changed. v0: first release; the ``-v0`` id stays
registered with its default scenario ``philly-v0`` (Gymnasium warns that v1 exists).
"""
from __future__ import annotations

from cluster_env.wrappers._base import SingleAgentView


class HeteroClusterOrdererEnv(SingleAgentView):
    """The orderer learns; the placer is fixed. See the module docstring (the view's card)."""

    agent = "orderer"
    default_fixed = "first-fit"


__all__ = ["HeteroClusterOrdererEnv"]
