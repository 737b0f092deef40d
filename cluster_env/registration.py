"""Constructors and the registry of versioned environment ids.

One default everywhere: a constructor called without a scenario plays
:data:`cluster_env.scenarios.registry.DEFAULT_SCENARIO` (the benchmark's, what a bare
``cluster-bench run`` scores), split :data:`DEFAULT_SPLIT` (``"train"``: a constructor is where
training starts; the harness and the CLI score on ``"test"``).

**Version history of the ids.** An id's behaviour never changes; a change bumps its version.

* ``-v1`` (``cluster_env/HeteroCluster-v1``, ``HeteroClusterAEC-v1``, ``HeteroClusterFlat-v1``,
  ``HeteroClusterOrderer-v1``, ``HeteroClusterPlacer-v1``): the default scenario is
  ``DEFAULT_SCENARIO`` (``philly-v1``), split ``train``. Same dynamics and spaces as v0.
* ``-v0``: the first release's ids, kept so that old code runs unchanged: their default scenario
  stays :data:`V0_SCENARIO` (``philly-v0``), split ``train``. Gymnasium warns that a newer version
  exists when one is made; :func:`make` does the same.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

from pettingzoo.utils import conversions, wrappers

from cluster_env.envs.cluster_parallel import ClusterParallelEnv
from cluster_env.scenarios.registry import DEFAULT_SCENARIO

#: The split a constructor plays when none is given.
DEFAULT_SPLIT = "train"
#: The default scenario of the ``-v0`` ids (the first release's).
V0_SCENARIO = "philly-v0"
#: The current version of the ids.
ENV_VERSION = 1
ENV_ID = f"cluster_env/HeteroCluster-v{ENV_VERSION}"


def parallel_env(scenario: str = DEFAULT_SCENARIO, split: str = DEFAULT_SPLIT, **overrides: Any) -> ClusterParallelEnv:
    """The PettingZoo ParallelEnv of ``scenario`` (see ``cluster_env.envs.cluster_parallel``);
    by default the benchmark's scenario (``DEFAULT_SCENARIO``), split ``train``."""
    return ClusterParallelEnv(scenario=scenario, split=split, **overrides)


def env(scenario: str = DEFAULT_SCENARIO, split: str = DEFAULT_SPLIT, **overrides: Any):
    """The AEC version: PettingZoo's conversion of the parallel env, order enforcing included,
    with the out-of-bounds check of discrete actions."""
    aec = conversions.parallel_to_aec(parallel_env(scenario, split, **overrides))
    return wrappers.AssertOutOfBoundsWrapper(aec)


def _with_default(make_fn: Callable[..., Any], default_scenario: str) -> Callable[..., Any]:
    def make_versioned(scenario: Any = None, split: str = DEFAULT_SPLIT, **overrides: Any):
        return make_fn(scenario=default_scenario if scenario is None else scenario, split=split, **overrides)

    make_versioned.__doc__ = f"{make_fn.__doc__} (default scenario {default_scenario})"
    return make_versioned


def _view(class_name: str) -> Callable[..., Any]:
    def make_view(scenario: Any, split: str = DEFAULT_SPLIT, **overrides: Any):
        from cluster_env import wrappers

        return getattr(wrappers, class_name)(scenario=scenario, split=split, **overrides)

    make_view.__doc__ = f"The single-agent Gymnasium view ``cluster_env.wrappers.{class_name}``"
    return make_view


#: Single-agent Gymnasium views (cluster_env.wrappers) by their unversioned id: also registered
#: with Gymnasium, so that ``gymnasium.make(id, scenario=..., split=..., **overrides)`` works after
#: ``import cluster_env``.
VIEWS = {
    "cluster_env/HeteroClusterFlat": "HeteroClusterFlatEnv",
    "cluster_env/HeteroClusterOrderer": "HeteroClusterOrdererEnv",
    "cluster_env/HeteroClusterPlacer": "HeteroClusterPlacerEnv",
}
#: Each version's default scenario.
VERSION_SCENARIOS = {0: V0_SCENARIO, 1: DEFAULT_SCENARIO}
#: The registered Gymnasium ids of the views, every version: id -> (class name, default scenario).
GYM_VIEWS = {f"{base}-v{version}": (class_name, scenario)
             for base, class_name in VIEWS.items() for version, scenario in VERSION_SCENARIOS.items()}

_REGISTRY: dict[str, Callable[..., Any]] = {}
for _version, _scenario in VERSION_SCENARIOS.items():
    _REGISTRY[f"cluster_env/HeteroCluster-v{_version}"] = _with_default(parallel_env, _scenario)
    _REGISTRY[f"cluster_env/HeteroClusterAEC-v{_version}"] = _with_default(env, _scenario)
    for _base, _class_name in VIEWS.items():
        _REGISTRY[f"{_base}-v{_version}"] = _with_default(_view(_class_name), _scenario)


def register_gymnasium() -> None:
    """Register the single-agent views with Gymnasium, every version (idempotent; done by
    ``import cluster_env``)."""
    import gymnasium

    for env_id, (class_name, scenario) in GYM_VIEWS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=f"cluster_env.wrappers:{class_name}",
                               kwargs={"scenario": scenario, "split": DEFAULT_SPLIT})


def make(env_id: str = ENV_ID, **kwargs: Any):
    """Build a registered environment by its namespaced, versioned id (an out-of-date version
    still builds, with its own defaults, and warns)."""
    if env_id not in _REGISTRY:
        raise ValueError(f"unknown environment id {env_id!r}; registered: {sorted(_REGISTRY)}")
    base, _, version = env_id.rpartition("-v")
    if int(version) < ENV_VERSION:
        warnings.warn(f"the environment {env_id} is out of date (its default scenario is "
                      f"{VERSION_SCENARIOS[int(version)]}); consider {base}-v{ENV_VERSION} "
                      f"(default scenario {VERSION_SCENARIOS[ENV_VERSION]})", DeprecationWarning, stacklevel=2)
    return _REGISTRY[env_id](**kwargs)


def registered_ids() -> list[str]:
    return sorted(_REGISTRY)
