"""Imported before torch by every module of the torch agent: without torch (the base install,
no ``rl`` extra) the ImportError says which extra to install instead of "No module named 'torch'".
The numpy parts (the priority-mode agent, :mod:`dual_agent.priority`) never import this."""
from __future__ import annotations

try:
    import torch  # noqa: F401
except ImportError as exc:
    from dual_agent.shared import TORCH_HINT

    raise ImportError(f"the dual agent's torch networks need torch, which is not installed ({exc}); "
                      f"{TORCH_HINT}") from None
