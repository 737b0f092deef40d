"""A schedule certificate's decision rule as a harness policy, for both agent families.

A best-known schedule (:mod:`baselines.optimality.certificate`) is a named rule or the priority
index's parameters. The paper family's hindsight teachers (:mod:`dual_agent.paper.teacher`) play
it as a policy; the index is the priority family's model, so the bridge lives here, at the top of
``dual_agent``, and the two families keep importing nothing of each other.

Public names: :func:`schedule_policy`.
"""
from __future__ import annotations

from typing import Any

import numpy as np


def schedule_policy(schedule: dict, scenario: str) -> Any:
    """The harness policy that plays a schedule: a named rule, or the priority index with the
    schedule's parameters (:class:`dual_agent.priority.agent.PriorityAgentPolicy`); a schedule with
    a wrong field is the certificate reader's ValueError."""
    from baselines.optimality.certificate import parse_certificate, rule_policy

    # The certificate reader is the one check of a schedule's fields (names, counts, finiteness).
    schedule = parse_certificate({"format": "hetero-cluster-sched/schedule-certificate", "version": 1,
                                  "scenario": scenario, "split": "train", "seed": 0, "window": "-",
                                  "avg_jct": 1.0, "schedule": schedule}, "schedule").schedule
    if schedule["kind"] == "rule":       # a registered baseline only: nothing imported or loaded
        return rule_policy(schedule["policy"], scenario)
    from dual_agent.priority.agent import PriorityAgentPolicy, PriorityAgentSpec, PriorityModel

    zeros = PriorityModel.zeros()
    model = PriorityModel(np.asarray(schedule["weights"], dtype=np.float64), zeros.hidden_w, zeros.hidden_b,
                          zeros.out, np.asarray(schedule["placer_weights"], dtype=np.float64))
    return PriorityAgentPolicy(model, PriorityAgentSpec(scenario=scenario, placer=schedule["placer"],
                                                        migrate=schedule["migrate"]), name="hindsight-teacher")


__all__ = ["schedule_policy"]
