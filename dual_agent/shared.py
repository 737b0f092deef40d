"""What both agent families and the package's entry points share: where shipped agents live and
whether torch is there. Imports nothing of ``dual_agent``, so every module may import it (the
package's ``__init__`` re-exports these names: ``dual_agent.PRETRAINED_DIR`` and so on)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from cluster_env.extras import RL_HINT

#: The shipped agents: ``<scenario>.pt`` (the paper's torch agent), ``<scenario>.priority.json``
#: (the priority family).
PRETRAINED_DIR = Path(__file__).resolve().parent / "pretrained"
#: What to install for the torch agent (training, ``.pt`` checkpoints, the ``dual`` policy).
TORCH_HINT = RL_HINT


def has_pretrained(scenario: str) -> bool:
    """Whether a pretrained torch checkpoint (``<scenario>.pt``) ships for ``scenario``; see
    :func:`shipped_agent_path` for the shipped agent of either family."""
    return (PRETRAINED_DIR / f"{scenario}.pt").is_file()


def pretrained_scenarios() -> list[str]:
    """The scenarios with a shipped torch checkpoint."""
    return sorted(p.stem for p in PRETRAINED_DIR.glob("*.pt"))


#: The suffixes of the shipped agents' files, one per family: the paper's torch agent, the priority family.
SHIPPED_SUFFIXES = (".pt", ".priority.json")


def shipped_agent_path(scenario: str) -> "Path | None":
    """The file of the agent shipped for ``scenario`` (``<scenario>.pt`` or
    ``<scenario>.priority.json``), whichever family it is; None when none ships. ``dual`` names
    this agent, so at most one may ship per scenario: two is a ValueError naming both files."""
    found = [PRETRAINED_DIR / f"{scenario}{suffix}" for suffix in SHIPPED_SUFFIXES]
    found = [p for p in found if p.is_file()]
    if len(found) > 1:
        raise ValueError(f"two agents ship for scenario {scenario!r} ({found[0]}, {found[1]}); the name 'dual' "
                         "needs exactly one: remove one file")
    return found[0] if found else None


def shipped_scenarios() -> list[str]:
    """The scenarios with a shipped agent of either family (what ``dual`` can load)."""
    names = {p.name[:-len(suffix)] for suffix in SHIPPED_SUFFIXES for p in PRETRAINED_DIR.glob(f"*{suffix}")}
    return sorted(names)


def torch_available() -> bool:
    """Whether torch can be imported (looked up, not imported: importing torch takes seconds)."""
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


def check_run_folder(folder: "str | Path", names: "tuple[str, ...]", last: str, overwrite: bool,
                     resumed: "str | Path | None" = None) -> None:
    """Refuse to start a training run in ``folder`` when it holds a run's files (``names``: best,
    last, log), unless ``overwrite``; a run resumed from ``resumed`` may go on in its own folder.
    The error (exit 2) names the folder and says ``--resume`` or ``--overwrite``: a new run would
    else replace a finished one's log and agents without a word."""
    folder = Path(folder)
    if overwrite or (resumed is not None and folder.resolve() == Path(resumed).resolve().parent):
        return
    held = [n for n in names if (folder / n).exists() or (folder / n).is_symlink()]
    if held:
        from baselines.cli_support import UsageError

        raise UsageError(f"--out {folder} holds a run already ({', '.join(held)}), which a new run would replace: "
                         f"continue it with --resume {folder / last}, or replace it with --overwrite",
                         "choose another --out to keep both")


__all__ = ["PRETRAINED_DIR", "SHIPPED_SUFFIXES", "TORCH_HINT", "check_run_folder", "has_pretrained",
           "pretrained_scenarios", "shipped_agent_path", "shipped_scenarios", "torch_available"]
