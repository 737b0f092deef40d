"""Constructors and the registry of versioned environment ids."""
from __future__ import annotations

from typing import Any, Callable, Optional

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


def _view(class_name: str) -> Callable[..., Any]:
    def make_view(scenario: Optional[str] = None, split: str = "train", **overrides: Any):
        from cluster_env import wrappers
        from cluster_env.scenarios.registry import DEFAULT_SCENARIO

        scenario = DEFAULT_SCENARIO if scenario is None else scenario
        return getattr(wrappers, class_name)(scenario=scenario, split=split, **overrides)

    make_view.__doc__ = f"The single-agent Gymnasium view ``cluster_env.wrappers.{class_name}``."
    return make_view


# Single-agent Gymnasium views (cluster_env.wrappers): also registered with Gymnasium, so that
# ``gymnasium.make(id, scenario=..., split=..., **overrides)`` works after ``import cluster_env``.
GYM_VIEWS = {
    "cluster_env/HeteroClusterFlat-v0": "HeteroClusterFlatEnv",
    "cluster_env/HeteroClusterOrderer-v0": "HeteroClusterOrdererEnv",
    "cluster_env/HeteroClusterPlacer-v0": "HeteroClusterPlacerEnv",
}

_REGISTRY: dict[str, Callable[..., Any]] = {ENV_ID: parallel_env, "cluster_env/HeteroClusterAEC-v0": env,
                                            **{k: _view(v) for k, v in GYM_VIEWS.items()}}


def register_gymnasium() -> None:
    """Register the single-agent views with Gymnasium (idempotent; done by ``import cluster_env``)."""
    import gymnasium

    for env_id, class_name in GYM_VIEWS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=f"cluster_env.wrappers:{class_name}",
                               kwargs={"scenario": _default_scenario(), "split": "train"})


def _default_scenario() -> str:
    """The views' default scenario: the benchmark's (``cluster-bench run``'s), defined once."""
    from cluster_env.scenarios.registry import DEFAULT_SCENARIO

    return DEFAULT_SCENARIO


def make(env_id: str = ENV_ID, **kwargs: Any):
    """Build a registered environment by its namespaced, versioned id."""
    if env_id not in _REGISTRY:
        raise ValueError(f"unknown environment id {env_id!r}; registered: {sorted(_REGISTRY)}")
    return _REGISTRY[env_id](**kwargs)


def registered_ids() -> list[str]:
    return sorted(_REGISTRY)
