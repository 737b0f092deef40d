"""The dual agent's entry points for ``cluster-bench`` and the harness (see ``pyproject.toml``).

* ``cluster_bench.policies``: ``dual`` -> :data:`DUAL` (the pretrained agent of the scenario,
  part of ``cluster-bench run``'s default policies where a checkpoint ships);
* ``cluster_bench.resolvers``: :func:`resolve_checkpoint` (names ending in ``.pt``);
* ``cluster_bench.commands``: ``train`` -> :func:`dual_agent.cli.register_command`.

Nothing here imports torch; the policy is built when asked for.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from dual_agent import has_pretrained


class _DualEntry:
    """``make(scenario)``: the pretrained dual agent; ``default_for(scenario)``: whether it ships."""

    description = "the dual agent's pretrained checkpoint for the scenario (needs the rl extra)"

    def make(self, scenario: Optional[str] = None) -> Any:
        from dual_agent.policy import DualAgentPolicy

        if scenario is None:
            raise ValueError("policy 'dual' needs the scenario to pick its pretrained checkpoint")
        return DualAgentPolicy.pretrained(scenario)

    def default_for(self, scenario: str) -> bool:
        return has_pretrained(scenario)


DUAL = _DualEntry()


def resolve_checkpoint(name: str, scenario: Optional[str] = None) -> Any:
    """A dual agent from a checkpoint path (``path/to/agent.pt``); None for any other name."""
    if not name.endswith(".pt"):
        return None
    from dual_agent.policy import DualAgentPolicy

    return DualAgentPolicy.load(name, name=f"dual({Path(name).stem})")
