"""Single-agent Gymnasium views of the environment and the Stable-Baselines3 vectorised path.

Numpy and gymnasium only: ``torch`` and ``stable_baselines3`` are never imported by
``import cluster_env.wrappers``; :func:`make_vec_env` and :class:`ParallelVecEnv` load
``stable_baselines3`` when called (the optional ``rl`` extra).

=======================================  ============================================================
``HeteroClusterFlatEnv``                 one policy makes both decisions, turn by turn
(``cluster_env/HeteroClusterFlat-v1``)   (card: :mod:`cluster_env.wrappers.flat`)
``HeteroClusterOrdererEnv``              the orderer learns, a fixed placer (default ``"first-fit"``)
(``cluster_env/HeteroClusterOrderer-v1``) (card: :mod:`cluster_env.wrappers.orderer`)
``HeteroClusterPlacerEnv``               the placer learns, a fixed orderer (default ``"fifo"``)
(``cluster_env/HeteroClusterPlacer-v1``) (card: :mod:`cluster_env.wrappers.placer`)
``make_vec_env(view, n_envs, ...)``      SB3 ``DummyVecEnv`` / ``SubprocVecEnv`` of a view, or
                                         ``ParallelVecEnv`` of the parallel env (``view="parallel"``)
``ParallelVecEnv``                       SB3 vector env of the PettingZoo parallel env, one slot per
                                         agent (parameter sharing; :mod:`cluster_env.wrappers.sb3_vec`)
``AgentSlots``                           the numpy core of it (:mod:`cluster_env.wrappers.parallel`)
``flat_parallel_env``, ``FlatParallelEnv``  the parallel env with one flat Box / Discrete space for
                                         both agents, for SuperSuit and CleanRL-style code
                                         (:mod:`cluster_env.wrappers.flat_parallel`)
``supersuit_vec_env``, ``MaskedVecEnv``  SuperSuit's SB3 vector env of it, with ``seed()`` and
                                         ``action_masks`` for MaskablePPO (:mod:`cluster_env.wrappers.ss_vec`)
``FlatLayout``                           the flat observation layout (:mod:`cluster_env.envs.flat_layout`)
``FlatViewPolicy``                       a flat-view predictor (a trained SB3 model, a torch module) as
                                         a policy of the parallel env, for ``baselines.evaluate``;
                                         ``baselines.save_agent`` / ``score_agent`` save and score one
``FirstAllowedPolicy``,                  built-in mask-only policies (``"fifo"``, ``"first-fit"``,
``RandomMaskedPolicy``,                  ``"random"``) and the resolver of fixed sides
``resolve_policy``
=======================================  ============================================================

Every view defaults to the benchmark's scenario (``cluster_env.DEFAULT_SCENARIO``, ``philly-v1``).
Every view passes ``gymnasium.utils.env_checker.check_env`` and SB3's ``check_env`` with its
default arguments (a forbidden action plays the lowest allowed one at a small penalty, and a
finite default ``max_steps`` ends every episode; see :mod:`cluster_env.wrappers.flat`), exposes
``action_masks()`` (bool) for sb3-contrib's ``MaskablePPO``, returns Python-float rewards and
takes all its randomness from the wrapped env's seeded generator.

Example::

    import gymnasium, cluster_env
    env = gymnasium.make("cluster_env/HeteroClusterFlat-v1", split="train",   # philly-v1 by default
                         jobs_per_episode=200)
    obs, info = env.reset(seed=0)
    mask = env.unwrapped.action_masks()
"""
from __future__ import annotations

from typing import Any

from cluster_env.wrappers.flat import HeteroClusterFlatEnv
from cluster_env.wrappers.flat_parallel import FlatParallelEnv, flat_parallel_env
from cluster_env.wrappers.flat_policy import FlatViewPolicy
from cluster_env.envs.flat_layout import FEATURE_KEYS, FlatLayout
from cluster_env.wrappers.orderer import HeteroClusterOrdererEnv
from cluster_env.wrappers.parallel import AgentSlots
from cluster_env.wrappers.placer import HeteroClusterPlacerEnv
from cluster_env.wrappers.policies import BUILTIN_POLICIES, FirstAllowedPolicy, RandomMaskedPolicy, resolve_policy
from cluster_env.wrappers.vec import VIEW_IDS, make_vec_env

FLAT_ID = VIEW_IDS["flat"]
ORDERER_ID = VIEW_IDS["orderer"]
PLACER_ID = VIEW_IDS["placer"]


def __getattr__(name: str) -> Any:
    # ParallelVecEnv imports stable_baselines3, hence only on demand (and not in __all__, so that
    # ``from cluster_env.wrappers import *`` does not load it either).
    from cluster_env.extras import require_extra

    if name == "ParallelVecEnv":
        require_extra("rl", f"cluster_env.wrappers.{name}", ("stable_baselines3",))
        from cluster_env.wrappers.sb3_vec import ParallelVecEnv

        return ParallelVecEnv
    if name in ("MaskedVecEnv", "supersuit_vec_env"):
        require_extra("rl", f"cluster_env.wrappers.{name}", ("stable_baselines3", "supersuit"))
        from cluster_env.wrappers import ss_vec

        return getattr(ss_vec, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AgentSlots", "BUILTIN_POLICIES", "FEATURE_KEYS", "FLAT_ID", "FirstAllowedPolicy", "FlatLayout", "FlatParallelEnv",
    "FlatViewPolicy", "flat_parallel_env",
    "HeteroClusterFlatEnv", "HeteroClusterOrdererEnv", "HeteroClusterPlacerEnv", "ORDERER_ID", "PLACER_ID",
    "RandomMaskedPolicy", "VIEW_IDS", "make_vec_env", "resolve_policy",
]
