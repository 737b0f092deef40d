"""Imported before torch by every module of the torch agent: without torch (the base install,
no ``rl`` extra) the ImportError says which extra to install instead of "No module named 'torch'".
The numpy parts (the priority-mode agent, :mod:`dual_agent.priority`) never import this."""
from __future__ import annotations

try:
    import torch  # noqa: F401
except ImportError as exc:
    from cluster_env.extras import missing_extra

    raise missing_extra("rl", "the paper's dual agent (torch networks)", exc) from None
