"""The priority family: a learned priority index on least-attained-service, trained with ES.

A room of its own, numpy only (no torch at run time or in training):

* :mod:`dual_agent.priority.agent`: the learned key (:class:`PriorityModel`,
  :class:`LearnedPriorityOrderer`, and under ``las-migrate``'s rule
  :class:`MigratingLearnedOrderer`), the residual placer (:class:`ResidualPlacer`), the policy
  (:class:`PriorityAgentPolicy`) and its JSON file (:func:`save_priority_agent`,
  :func:`load_priority_agent`);
* :mod:`dual_agent.priority.es`: the evolution-strategies trainer (:func:`train_priority`);
* :mod:`dual_agent.priority.cli`: the ``cluster-bench train-priority`` command.

The features of the key and the placer bonus are the lower layer's
(:mod:`baselines.learned_key`), which the compiled engine reads too. The agent's names are
importable from here (``from dual_agent.priority import load_priority_agent``), as they were when
this package was one module.
"""
from __future__ import annotations

from dual_agent.priority.agent import (FORMAT, MAX_WEIGHT, PLACER_BONUS, PLACER_FEATURES, PRIORITY_FEATURES, SUFFIX,
                                       VERSION, LearnedPriorityOrderer, MigratingLearnedOrderer, PriorityAgentPolicy,
                                       PriorityAgentSpec, PriorityCheckpointError, PriorityModel, ResidualPlacer,
                                       check_migrate, learned_keys, load_priority_agent, placer_features,
                                       priority_features, save_priority_agent, sum_by_feature)

__all__ = ["FORMAT", "MAX_WEIGHT", "PLACER_BONUS", "PLACER_FEATURES", "PRIORITY_FEATURES", "SUFFIX", "VERSION",
           "LearnedPriorityOrderer", "MigratingLearnedOrderer", "PriorityAgentPolicy", "PriorityAgentSpec",
           "PriorityCheckpointError", "PriorityModel", "ResidualPlacer", "check_migrate", "learned_keys",
           "load_priority_agent", "placer_features", "priority_features", "save_priority_agent", "sum_by_feature"]
