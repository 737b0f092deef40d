"""PettingZoo-style versioned module: ``from cluster_env import hetero_cluster_v0``."""
from cluster_env.envs.cluster_parallel import ClusterParallelEnv as raw_parallel_env  # noqa: F401
from cluster_env.registration import env, parallel_env  # noqa: F401

__all__ = ["env", "parallel_env", "raw_parallel_env"]
