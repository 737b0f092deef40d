"""The dual-agent scheduler (KDD 2023, "A Dual-Agent Scheduler for Distributed Deep Learning Jobs
on Public Cloud via Reinforcement Learning"), trained jointly with MAPPO on ``cluster_env``.

* :class:`DualAgentPolicy`: the trained agent as a policy (``load(path)``, ``pretrained(scenario)``);
* :class:`MAPPOTrainer`, :class:`TrainConfig`, :class:`DualAgentConfig`: training;
* :func:`has_pretrained`: whether a checkpoint ships for a scenario.

Importing the package registers the ``"dual"`` policy name with the harness
(``baselines.evaluate("dual", ...)``, ``cluster-bench run --policies dual``), and names ending in
``.pt`` load that checkpoint. Torch is imported only when a policy or trainer is built; without
it (the base install) those fail with an ImportError naming ``pip install '.[rl]'``, and the
numpy priority-mode agent (``dual-priority``) works as with it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

PRETRAINED_DIR = Path(__file__).resolve().parent / "pretrained"
#: What to install for the torch agent (training, ``.pt`` checkpoints, the ``dual`` policy).
TORCH_HINT = "pip install '.[rl]'"

_LAZY = {
    "DualAgentPolicy": "dual_agent.policy", "DualAgentConfig": "dual_agent.config",
    "TrainConfig": "dual_agent.config", "MAPPOTrainer": "dual_agent.mappo", "TrainResult": "dual_agent.mappo",
    "CheckpointError": "dual_agent.checkpoint", "load_checkpoint": "dual_agent.checkpoint",
    "save_checkpoint": "dual_agent.checkpoint", "pretrained_path": "dual_agent.checkpoint",
    "RandomWalkGP": "dual_agent.rwgp", "RWGPConfig": "dual_agent.rwgp",
}
__all__ = sorted([*_LAZY, "PRETRAINED_DIR", "TORCH_HINT", "has_pretrained", "pretrained_scenarios",
                  "torch_available"])


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'dual_agent' has no attribute {name!r}")


def has_pretrained(scenario: str) -> bool:
    """Whether a pretrained checkpoint ships for ``scenario``."""
    return (PRETRAINED_DIR / f"{scenario}.pt").is_file()


def pretrained_scenarios() -> list[str]:
    """The scenarios with a shipped checkpoint."""
    return sorted(p.stem for p in PRETRAINED_DIR.glob("*.pt"))


def torch_available() -> bool:
    """Whether torch can be imported (looked up, not imported: importing torch takes seconds)."""
    import importlib.util

    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


def _resolve(name: str, scenario: Optional[str] = None) -> Any:
    """Harness names: ``dual`` (the pretrained agent of the scenario) and ``path/to/agent.pt``."""
    if name != "dual" and not name.endswith(".pt"):
        return None                       # not ours: no torch import (the base install has none)
    from dual_agent.policy import DualAgentPolicy

    if name == "dual":
        if scenario is None:
            raise ValueError("policy 'dual' needs the scenario to pick its pretrained checkpoint")
        return DualAgentPolicy.pretrained(scenario)
    if name.endswith(".pt"):
        return DualAgentPolicy.load(name, name=f"dual({Path(name).stem})")
    return None


def _register() -> None:
    try:
        from baselines.harness.sweep import register_policy_resolver
    except ImportError:  # pragma: no cover - baselines ships in the same distribution
        return
    register_policy_resolver(_resolve)


_register()
