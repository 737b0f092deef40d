"""cluster_env: a PettingZoo environment of a heterogeneous GPU cluster driven by real traces.

Quick start::

    import cluster_env
    env = cluster_env.parallel_env()          # DEFAULT_SCENARIO (philly-v1), split "train"
    obs, infos = env.reset(seed=0)

The environment's card is the docstring of ``cluster_env.envs.cluster_parallel``; single-agent
Gymnasium views (for Stable-Baselines3 and other single-agent libraries) are in
``cluster_env.wrappers``.
"""
from cluster_env.core.metrics import METRIC_KEYS
from cluster_env.errors import ClusterEnvError, DataError, InvalidActionError, UnknownGPUTypeError
from cluster_env.registration import DEFAULT_SPLIT, ENV_ID, env, make, parallel_env, register_gymnasium, registered_ids
from cluster_env.scenarios import get_scenario, list_scenarios, register_scenario
from cluster_env.scenarios.registry import DEFAULT_SCENARIO   # the benchmark's: cluster-bench, views, examples

__version__ = "0.1.0"

register_gymnasium()  # the single-agent views' ids (cluster_env.wrappers), e.g. "cluster_env/HeteroClusterFlat-v1"

__all__ = [
    "DEFAULT_SCENARIO", "DEFAULT_SPLIT", "ENV_ID", "METRIC_KEYS", "ClusterEnvError", "DataError", "InvalidActionError", "UnknownGPUTypeError",
    "env", "get_scenario", "list_scenarios", "make", "parallel_env", "register_scenario", "registered_ids",
    "__version__",
]
