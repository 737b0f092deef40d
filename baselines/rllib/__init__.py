"""Train the orderer and the placer as two RLlib policies and score them in the harness.

Needs the ``rllib`` extra (``pip install '.[rllib]'``: ray[rllib] and torch); this package imports
neither until it is used, and says which extra to install when they are missing::

    from baselines.rllib import dual_ppo_config, from_rllib
    algo = dual_ppo_config("philly-v1", {"jobs_per_episode": 100}).build_algo()
    for _ in range(20):
        algo.train()
    policy = from_rllib(algo)                       # act(observations, infos), reset(seed)
    baselines.evaluate(policy, "philly-v1", seeds=range(3), backend="serial")

The env RLlib trains on is ``ParallelPettingZooEnv(MaskedFlatParallelEnv(...))``: the parallel env
with one flat ``Box`` per agent whose tail is its action mask (:mod:`baselines.rllib.view`); the
module (:class:`~baselines.rllib.train.MaskedPPOTorchRLModule`) sets forbidden actions' logits to
RLlib's ``FLOAT_MIN``. Tested with ray 2.60 (the range is the ``rllib`` extra's in pyproject.toml).
"""
from __future__ import annotations

from typing import Any, Optional

from baselines.rllib.policy import RLlibPolicy
from cluster_env.extras import RLLIB_HINT, missing_extra
from baselines.rllib.view import AgentViews, MaskedFlatParallelEnv, squash

#: What to install when RLlib (or torch) is missing.
INSTALL_HINT = RLLIB_HINT
AGENTS = ("orderer", "placer")


def require_rllib() -> None:
    """Raise a one-line ImportError naming the extra when ray.rllib or torch cannot be imported."""
    try:
        import ray.rllib  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        raise missing_extra("rllib", "RLlib training and scoring", e) from None


def dual_ppo_config(scenario: str, env_overrides: Optional[dict] = None, **kwargs: Any) -> Any:
    """A ray ``PPOConfig`` training the orderer and the placer as two policies on ``scenario``'s
    train split (see :func:`baselines.rllib.train.dual_ppo_config` for ``kwargs``)."""
    require_rllib()
    from baselines.rllib.train import dual_ppo_config as make

    return make(scenario, env_overrides, **kwargs)


def from_rllib(algorithm: Any, name: str = "rllib") -> RLlibPolicy:
    """The harness policy of a trained RLlib ``Algorithm`` (one module per agent, greedy play).

    The training env's scheduling settings (``env_config``'s ``preemption``, window sizes, ...) are
    the policy's ``env_overrides``, so the harness scores it under the rules it was trained with.
    """
    require_rllib()
    config = dict(getattr(algorithm.config, "env_config", {}) or {})
    modules = {}
    for agent in AGENTS:
        module = algorithm.get_module(agent)
        if module is None:
            raise ValueError(f"the algorithm has no module {agent!r}; train it with dual_ppo_config "
                             f"(one policy per agent, module ids {list(AGENTS)})")
        modules[agent] = module
    return RLlibPolicy(modules, name=name, env_overrides=config, scenario=config.get("scenario"))


__all__ = ["AGENTS", "AgentViews", "INSTALL_HINT", "MaskedFlatParallelEnv", "RLlibPolicy", "dual_ppo_config",
           "from_rllib", "require_rllib", "squash"]
