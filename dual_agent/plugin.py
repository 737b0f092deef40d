"""The dual agent's entry points for ``cluster-bench`` and the harness (see ``pyproject.toml``).

* ``cluster_bench.policies``: ``dual`` -> :data:`DUAL`: **the** shipped agent of the scenario,
  whichever family it is (``<scenario>.pt``, the paper's torch agent, or
  ``<scenario>.priority.json``, the priority family), part of ``cluster-bench run``'s default
  policies where one ships;
* ``cluster_bench.policies``: ``dual-priority`` -> :data:`DUAL_PRIORITY`: an alias kept for
  scripts written before ``dual`` covered both families (the shipped priority-mode agent, under
  the name ``dual-priority``; not a default, so the tables show it once, as ``dual``);
* ``cluster_bench.resolvers``: :func:`resolve_checkpoint` (names ending in ``.pt`` or
  ``.priority.json``);
* ``cluster_bench.commands``: ``train`` -> :func:`dual_agent.paper.cli.register_command`, ``train-priority`` ->
  :func:`dual_agent.priority.cli.register_command`.

Nothing here imports torch; the policy is built when asked for, and without torch (the base
install) a torch agent fails with an ImportError naming ``pip install '.[rl]'``.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

from dual_agent.shared import PRETRAINED_DIR, TORCH_HINT, shipped_agent_path, shipped_scenarios, torch_available

#: The one name of a scenario's shipped agent.
DUAL_NAME = "dual"


class _DualEntry:
    """``make(scenario)``: the scenario's shipped agent, either family, named ``dual``;
    ``default_for(scenario)``: whether one ships (and, for a torch agent, torch is there)."""

    description = "the dual agent shipped for the scenario (the paper's torch agent or the priority family)"

    def make(self, scenario: Optional[str] = None) -> Any:
        if scenario is None:
            raise ValueError("policy 'dual' needs the scenario to pick its shipped agent")
        path = shipped_agent_path(scenario)
        if path is None:
            raise FileNotFoundError(f"no dual agent ships for scenario {scenario!r}; shipped: {shipped_scenarios()}. "
                                    f"Train one with: cluster-bench train --scenario {scenario} (the paper's "
                                    f"agent) or cluster-bench train-priority --scenario {scenario}, then pass its "
                                    f"file to --policies")
        if path.name.endswith(".priority.json"):
            from dual_agent.priority import load_priority_agent

            return load_priority_agent(path, scenario=scenario, name=DUAL_NAME)
        from dual_agent.paper.policy import DualAgentPolicy

        return DualAgentPolicy.pretrained(scenario)

    def source(self, scenario: str) -> Optional[Path]:
        """The file :meth:`make` loads for ``scenario`` (None when none ships)."""
        return shipped_agent_path(scenario)

    def default_for(self, scenario: str) -> bool:
        """Whether an agent ships for ``scenario`` and can run here; without torch (the base
        install) a torch agent is left out of the default policies, with a note printed once."""
        path = shipped_agent_path(scenario)
        if path is None:
            return False
        if not path.name.endswith(".pt") or torch_available():
            return True
        if not _NOTED:
            _NOTED.append(scenario)
            print(f"note: the default policies leave out 'dual' (the pretrained torch agent of {scenario}): "
                  f"torch is not installed; {TORCH_HINT}", file=sys.stderr)
        return False


_NOTED: list[str] = []      # the note above is printed once per process
DUAL = _DualEntry()


class _PriorityEntry:
    """``dual-priority``, the alias: the shipped priority-mode agent (:mod:`dual_agent.priority`)
    of the scenario under the name ``dual-priority``. Not a default policy: ``dual`` is."""

    description = "alias of 'dual' where the shipped agent is a priority-mode agent (LAS + a learned score)"

    def make(self, scenario: Optional[str] = None) -> Any:
        from dual_agent.priority import load_priority_agent

        if scenario is None:
            raise ValueError("policy 'dual-priority' needs the scenario to pick its shipped agent")
        path = priority_pretrained_path(scenario)
        if not path.is_file():
            raise FileNotFoundError(f"no priority agent ships for scenario {scenario!r} ({path}); "
                                    f"train one with: cluster-bench train-priority --scenario {scenario}")
        return load_priority_agent(path, scenario=scenario, name="dual-priority")

    def source(self, scenario: str) -> Optional[Path]:
        """The file :meth:`make` loads for ``scenario`` (None when none ships)."""
        path = priority_pretrained_path(scenario)
        return path if path.is_file() else None

    def default_for(self, scenario: str) -> bool:
        """Never: the shipped agent is in the defaults once, as ``dual``."""
        return False


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
