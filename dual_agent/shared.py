"""What both agent families and the package's entry points share: where shipped agents live and
whether torch is there. Imports nothing of ``dual_agent``, so every module may import it (the
package's ``__init__`` re-exports these names: ``dual_agent.PRETRAINED_DIR`` and so on)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

#: The shipped agents: ``<scenario>.pt`` (the paper's torch agent), ``<scenario>.priority.json``
#: (the priority family).
PRETRAINED_DIR = Path(__file__).resolve().parent / "pretrained"
#: What to install for the torch agent (training, ``.pt`` checkpoints, the ``dual`` policy).
TORCH_HINT = "pip install '.[rl]'"


def has_pretrained(scenario: str) -> bool:
    """Whether a pretrained checkpoint ships for ``scenario``."""
    return (PRETRAINED_DIR / f"{scenario}.pt").is_file()


def pretrained_scenarios() -> list[str]:
    """The scenarios with a shipped checkpoint."""
    return sorted(p.stem for p in PRETRAINED_DIR.glob("*.pt"))


def torch_available() -> bool:
    """Whether torch can be imported (looked up, not imported: importing torch takes seconds)."""
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


__all__ = ["PRETRAINED_DIR", "TORCH_HINT", "has_pretrained", "pretrained_scenarios", "torch_available"]
