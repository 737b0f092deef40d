"""Residual policies: the dual agent as a learned correction on a heuristic's decisions.

With ``DualAgentConfig(prior="las+fastest", prior_bonus=beta)`` the acting agent's logits are

    logits = network(observation) + beta * onehot(heuristic's action)

where the heuristic is the baseline ``prior`` (its orderer in the ORDER phase, its placer in the
PLACE phase), asked at every step on the same observation. The networks' output layers start at
zero (:func:`zero_output_layers`), so at initialisation every legal action has the same network
logit and the deterministic agent (arg max) *is* the heuristic; sampling explores near it (the
heuristic's action has probability ``e^beta / (e^beta + n - 1)`` among ``n`` legal actions), and a
policy-gradient method keeps a deviation only where its rollouts paid for it. The heuristic's
action is always legal for the agent (its mask is widened to it if the agent's own rules, the
work-conserving rule or the livelock guard, would forbid it), so the agent can always follow it.

The bonus is applied identically wherever logits become actions: acting (:meth:`DualAgentPolicy.
choose_from_logits`) and the training loss (:func:`add_prior_bonus` on the recorded prior action
of each step); the checkpoint records ``prior`` and ``prior_bonus`` in the agent's config.

The heuristic keeps its own per-episode state (e.g. LAS remembers what it started at this
instant) as if its choice were taken; where the agent deviates, that memory is the heuristic's
belief, not the truth. For LAS this only affects which victim it proposes within one instant.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

NO_PRIOR = -1   # recorded prior action of a step without one


def check_prior(name: str) -> None:
    """A clear ``ValueError`` unless ``name`` is a baseline that :func:`make_prior` can build."""
    from baselines.registry import make_policy

    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"prior must be a baseline name such as 'las+fastest', got {name!r}")
    try:
        make_policy(name)
    except ValueError as exc:
        raise ValueError(f"prior {name!r}: {exc}") from None


def make_prior(name: Optional[str]) -> Any:
    """The heuristic policy (orderer and placer halves) of ``name``, or None."""
    if name is None:
        return None
    from baselines.registry import make_policy

    return make_policy(name)


def add_prior_bonus(logits: Any, prior: Any, bonus: float) -> Any:
    """``logits`` with ``bonus`` added at the prior's action of each row.

    Works on a numpy vector (one step, ``prior`` an int) and on a torch batch (B, A) with
    ``prior`` a (B,) integer tensor; rows whose prior is :data:`NO_PRIOR` are left alone. Returns a
    new array/tensor (the input is not modified).
    """
    if isinstance(logits, np.ndarray):
        out = logits.copy()
        if int(prior) >= 0 and bonus:
            out[int(prior)] += bonus
        return out
    import torch

    has = prior >= 0
    if not bool(has.any()) or not bonus:
        return logits
    onehot = torch.zeros_like(logits)
    rows = has.nonzero().squeeze(1)
    onehot[rows, prior[rows]] = float(bonus)
    return logits + onehot


def zero_output_layers(model: Any) -> None:
    """Set the last layer of every actor head to zero (weights and bias), so that all legal
    actions get the same network logit and the prior alone decides at initialisation.

    The placer's no-op logit is a parameter that already starts at zero. The hidden layers keep
    their random initialisation (the gradient reaches them once the output layer moves).
    """
    import torch

    heads = (model.orderer.job_head, model.orderer.advance_head, model.placer.head)
    with torch.no_grad():
        for head in heads:
            last = head[-1]
            last.weight.zero_()
            last.bias.zero_()
        model.placer.noop_logit.zero_()
