"""The dual agent's entry points for ``cluster-bench`` and the harness (see ``pyproject.toml``).

* ``cluster_bench.policies``: ``dual`` -> :data:`DUAL` (the pretrained agent of the scenario,
  part of ``cluster-bench run``'s default policies where a checkpoint ships);
* ``cluster_bench.resolvers``: :func:`resolve_checkpoint` (names ending in ``.pt``);
* ``cluster_bench.policies``: ``dual-priority`` -> :data:`DUAL_PRIORITY` (the shipped priority-mode agent);
* ``cluster_bench.resolvers``: names ending in ``.priority.json`` load a priority-mode agent;
* ``cluster_bench.commands``: ``train`` -> :func:`dual_agent.paper.cli.register_command`, ``train-priority`` ->
  :func:`dual_agent.priority.cli.register_command`.

Nothing here imports torch; the policy is built when asked for, and without torch (the base
install) it fails with an ImportError naming ``pip install '.[rl]'``.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

from dual_agent.shared import PRETRAINED_DIR, TORCH_HINT, has_pretrained, torch_available


class _DualEntry:
    """``make(scenario)``: the pretrained dual agent; ``default_for(scenario)``: whether it ships."""

    description = "the dual agent's pretrained checkpoint for the scenario (needs the rl extra)"

    def make(self, scenario: Optional[str] = None) -> Any:
        from dual_agent.paper.policy import DualAgentPolicy

        if scenario is None:
            raise ValueError("policy 'dual' needs the scenario to pick its pretrained checkpoint")
        return DualAgentPolicy.pretrained(scenario)

    def default_for(self, scenario: str) -> bool:
        """Whether a checkpoint ships and torch is there to run it; without torch (the base install)
        the default policies go on without it, and say so once."""
        if not has_pretrained(scenario):
            return False
        if torch_available():
            return True
        if not _NOTED:
            _NOTED.append(scenario)
            print(f"note: the default policies leave out 'dual' (the pretrained torch agent of {scenario}): "
                  f"torch is not installed; {TORCH_HINT}", file=sys.stderr)
        return False


_NOTED: list[str] = []      # the note above is printed once per process
DUAL = _DualEntry()


class _PriorityEntry:
    """``make(scenario)``: the shipped priority-mode agent (:mod:`dual_agent.priority`) of the
    scenario; ``default_for(scenario)``: whether one ships (then ``cluster-bench run`` includes it)."""

    description = "the dual agent's ordering agent in priority mode (LAS + a learned score), trained with ES"

    def make(self, scenario: Optional[str] = None) -> Any:
        from dual_agent.priority import load_priority_agent

        if scenario is None:
            raise ValueError("policy 'dual-priority' needs the scenario to pick its shipped agent")
        path = priority_pretrained_path(scenario)
        if not path.is_file():
            raise FileNotFoundError(f"no priority agent ships for scenario {scenario!r} ({path}); "
                                    f"train one with: cluster-bench train-priority --scenario {scenario}")
        return load_priority_agent(path, scenario=scenario, name="dual-priority")

    def default_for(self, scenario: str) -> bool:
        return priority_pretrained_path(scenario).is_file()


DUAL_PRIORITY = _PriorityEntry()


def priority_pretrained_path(scenario: str) -> Path:
    """Where the shipped priority agent of ``scenario`` lives (it may not exist)."""
    return PRETRAINED_DIR / f"{scenario}.priority.json"


def resolve_checkpoint(name: str, scenario: Optional[str] = None) -> Any:
    """A dual agent from a checkpoint path (``path/to/agent.pt``) or a priority agent from
    ``path/to/agent.priority.json``; None for any other name."""
    if name.endswith(".priority.json"):
        from dual_agent.priority import load_priority_agent

        return load_priority_agent(name, name=f"dual-priority({Path(name).name[:-len('.priority.json')]})")
    if not name.endswith(".pt"):
        return None
    from dual_agent.paper.policy import DualAgentPolicy

    return DualAgentPolicy.load(name, name=f"dual({Path(name).stem})")
