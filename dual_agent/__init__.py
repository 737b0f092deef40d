"""The dual-agent scheduler (KDD 2023, "A Dual-Agent Scheduler for Distributed Deep Learning Jobs
on Public Cloud via Reinforcement Learning"), trained jointly with MAPPO on ``cluster_env``.

* :class:`DualAgentPolicy`: the trained agent as a policy (``load(path)``, ``pretrained(scenario)``);
* :class:`MAPPOTrainer`, :class:`TrainConfig`, :class:`DualAgentConfig`: training;
* :func:`has_pretrained`: whether a torch checkpoint ships for a scenario;
  :func:`shipped_agent_path`: the shipped agent's file of either family (what ``dual`` loads).

Importing the package registers the ``"dual"`` policy name with the harness
(``baselines.evaluate("dual", ...)``, ``cluster-bench run --policies dual``): the agent shipped
for the scenario, whichever family it is (the paper's torch agent, ``<scenario>.pt``, or the
priority family, ``<scenario>.priority.json``; ``dual-priority`` is an alias of the latter).
Names ending in ``.pt`` load that checkpoint. Torch is imported only when a torch policy or
trainer is built; without it (the base install) those fail with an ImportError naming
``pip install '.[rl]'``, and the numpy priority-mode agent works as with it.
"""
from __future__ import annotations

from typing import Any, Optional

from dual_agent.shared import (PRETRAINED_DIR, TORCH_HINT, has_pretrained, pretrained_scenarios, shipped_agent_path,
                               shipped_scenarios, torch_available)

# The documented names of the paper's agent, imported when first used (torch takes seconds to import).
_LAZY = {
    "DualAgentPolicy": "dual_agent.paper.policy", "DualAgentConfig": "dual_agent.paper.config",
    "TrainConfig": "dual_agent.paper.config", "MAPPOTrainer": "dual_agent.paper.mappo",
    "TrainResult": "dual_agent.paper.mappo", "CheckpointError": "dual_agent.paper.checkpoint",
    "load_checkpoint": "dual_agent.paper.checkpoint", "save_checkpoint": "dual_agent.paper.checkpoint",
    "pretrained_path": "dual_agent.paper.checkpoint", "RandomWalkGP": "dual_agent.paper.rwgp",
    "RWGPConfig": "dual_agent.paper.rwgp",
}
__all__ = sorted([*_LAZY, "PRETRAINED_DIR", "TORCH_HINT", "has_pretrained", "pretrained_scenarios",
                  "shipped_agent_path", "shipped_scenarios", "torch_available"])


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'dual_agent' has no attribute {name!r}")


def _resolve(name: str, scenario: Optional[str] = None) -> Any:
    """Harness names: ``dual`` (the pretrained agent of the scenario) and ``path/to/agent.pt``."""
    if name != "dual" and not name.endswith(".pt"):
        return None                       # not ours: no torch import (the base install has none)
    from dual_agent.plugin import DUAL, resolve_checkpoint

    return DUAL.make(scenario) if name == "dual" else resolve_checkpoint(name)


def _register() -> None:
    try:
        from baselines.harness.sweep import register_policy_resolver
    except ImportError:  # pragma: no cover - baselines ships in the same distribution
        return
    register_policy_resolver(_resolve)


_register()
