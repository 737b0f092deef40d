"""The optional extras of the package (``pyproject.toml``) and the one line that names each.

The base install (no extra) runs everything that needs no torch; a path that needs an extra says
which in one line, always spelled by :func:`install_hint` (``pip install '.[rl]'``), instead of a
``ModuleNotFoundError`` traceback. Every package of the project takes its hints from here.

=========  ==============================================  =========================================
extra      what it adds                                    what needs it
=========  ==============================================  =========================================
``rl``     torch, stable-baselines3, sb3-contrib,          training, the paper's torch agent, SB3
           supersuit                                       models, ``make_vec_env``,
                                                           ``supersuit_vec_env``, examples 03/04/08
``ray``    Ray                                             ``--backend ray``, Ray training backends
``rllib``  ray[rllib], torch                               ``baselines.rllib``, example 09
=========  ==============================================  =========================================
"""
from __future__ import annotations

import importlib
from typing import Optional, Sequence

#: The modules each extra provides (what :func:`require_extra` imports by default).
EXTRA_MODULES = {
    "rl": ("torch", "stable_baselines3", "sb3_contrib", "supersuit"),
    "ray": ("ray",),
    "rllib": ("ray.rllib", "torch"),
}


def install_hint(extra: str) -> str:
    """The one spelling of the command that installs ``extra``: ``pip install '.[rl]'``."""
    if extra not in EXTRA_MODULES:
        raise ValueError(f"unknown extra {extra!r}; extras: {sorted(EXTRA_MODULES)}")
    return f"pip install '.[{extra}]'"


RL_HINT = install_hint("rl")
RAY_HINT = install_hint("ray")
RLLIB_HINT = install_hint("rllib")


class MissingExtraError(ImportError):
    """A path that needs an optional extra ran without it; the message is one line naming the
    missing module and :func:`install_hint`."""


def missing_extra(extra: str, what: str, exc: BaseException) -> MissingExtraError:
    """The one-line error for ``what`` (e.g. ``"make_vec_env"``) needing ``extra``, caused by ``exc``."""
    return MissingExtraError(f"{what} needs the '{extra}' extra ({exc}): {install_hint(extra)}")


def require_extra(extra: str, what: str, modules: Optional[Sequence[str]] = None) -> None:
    """Import ``modules`` (default: every module of ``extra``); :class:`MissingExtraError` naming
    ``what`` and the extra when one cannot be imported."""
    for name in modules or EXTRA_MODULES[extra]:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise missing_extra(extra, what, exc) from None


def exit_without_extra(extra: str, what: str, modules: Optional[Sequence[str]] = None) -> None:
    """For scripts (the examples): :func:`require_extra`'s message as the only line of a
    ``SystemExit`` (exit status 1) instead of a traceback."""
    try:
        require_extra(extra, what, modules)
    except MissingExtraError as exc:
        raise SystemExit(str(exc)) from None


__all__ = ["EXTRA_MODULES", "MissingExtraError", "RAY_HINT", "RLLIB_HINT", "RL_HINT", "exit_without_extra",
           "install_hint", "missing_extra", "require_extra"]
