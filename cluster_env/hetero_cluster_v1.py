"""PettingZoo-style versioned module: ``from cluster_env import hetero_cluster_v1``
(``parallel_env`` and ``env`` default to ``DEFAULT_SCENARIO``, split ``train``)."""
from cluster_env.envs.cluster_parallel import ClusterParallelEnv as raw_parallel_env  # noqa: F401
from cluster_env.registration import env, parallel_env  # noqa: F401

__all__ = ["env", "parallel_env", "raw_parallel_env"]
