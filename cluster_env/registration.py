"""Constructors and the registry of versioned environment ids."""
from __future__ import annotations

from typing import Any, Callable

from pettingzoo.utils import conversions, wrappers

from cluster_env.envs.cluster_parallel import ClusterParallelEnv

ENV_ID = "cluster_env/HeteroCluster-v0"


def parallel_env(scenario: str = "philly-v0", split: str = "train", **overrides: Any) -> ClusterParallelEnv:
    """The PettingZoo ParallelEnv of ``scenario`` (see ``cluster_env.envs.cluster_parallel``)."""
    return ClusterParallelEnv(scenario=scenario, split=split, **overrides)


def env(scenario: str = "philly-v0", split: str = "train", **overrides: Any):
    """The AEC version: PettingZoo's conversion of the parallel env, order enforcing included,
    with the out-of-bounds check of discrete actions."""
    aec = conversions.parallel_to_aec(parallel_env(scenario, split, **overrides))
    return wrappers.AssertOutOfBoundsWrapper(aec)


_REGISTRY: dict[str, Callable[..., Any]] = {ENV_ID: parallel_env, "cluster_env/HeteroClusterAEC-v0": env}


def make(env_id: str = ENV_ID, **kwargs: Any):
    """Build a registered environment by its namespaced, versioned id."""
    if env_id not in _REGISTRY:
        raise ValueError(f"unknown environment id {env_id!r}; registered: {sorted(_REGISTRY)}")
    return _REGISTRY[env_id](**kwargs)


def registered_ids() -> list[str]:
    return sorted(_REGISTRY)
