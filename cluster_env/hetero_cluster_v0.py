"""PettingZoo-style versioned module: ``from cluster_env import hetero_cluster_v0``.

The first release's constructors, kept so that old code runs unchanged: their default scenario is
``philly-v0`` (split ``train``). :mod:`cluster_env.hetero_cluster_v1` defaults to the benchmark's
scenario, ``DEFAULT_SCENARIO``, as ``cluster_env.parallel_env()`` does.
"""
from cluster_env.envs.cluster_parallel import ClusterParallelEnv as raw_parallel_env  # noqa: F401
from cluster_env.registration import _REGISTRY

parallel_env = _REGISTRY["cluster_env/HeteroCluster-v0"]
env = _REGISTRY["cluster_env/HeteroClusterAEC-v0"]

__all__ = ["env", "parallel_env", "raw_parallel_env"]
