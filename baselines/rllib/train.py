"""RLlib pieces for training the orderer and the placer as two PPO policies (imports ray).

Imported only through :mod:`baselines.rllib`, which checks that RLlib is installed first.

- :class:`MaskedPPOTorchRLModule`: RLlib's default PPO module (MLP encoder, policy and value heads)
  whose logits of forbidden actions are set to RLlib's ``FLOAT_MIN`` before any distribution is
  built: the "masked logits" trick, in exploration, inference and training alike. The mask is the
  last ``n`` entries of the observation (:mod:`baselines.rllib.view`); the encoder sees it too.
- :class:`ClusterRLlibEnv`: RLlib's ``ParallelPettingZooEnv`` around
  :class:`~baselines.rllib.view.MaskedFlatParallelEnv`, built from an ``env_config`` dict.
- :func:`dual_ppo_config`: a ``PPOConfig`` with one policy per agent (``policy_mapping_fn`` maps
  ``"orderer"`` to the orderer's module and ``"placer"`` to the placer's).
"""
from __future__ import annotations

from typing import Any, Optional

import torch
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module import DefaultPPOTorchRLModule
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv
from ray.rllib.utils.torch_utils import FLOAT_MIN

from baselines.rllib.view import MaskedFlatParallelEnv
from cluster_env.scenarios.registry import DEFAULT_SCENARIO

AGENTS = ("orderer", "placer")


class MaskedPPOTorchRLModule(DefaultPPOTorchRLModule):
    """PPO's default torch module with the action mask (the observation's tail) on its logits."""

    def _masked(self, batch: dict, out: dict) -> dict:
        n = self.action_space.n
        mask = batch[Columns.OBS][..., -n:]
        out[Columns.ACTION_DIST_INPUTS] = out[Columns.ACTION_DIST_INPUTS].masked_fill(mask < 0.5, FLOAT_MIN)
        return out

    def _forward(self, batch: dict, **kwargs: Any) -> dict:
        return self._masked(batch, super()._forward(batch, **kwargs))

    def _forward_train(self, batch: dict, **kwargs: Any) -> dict:
        return self._masked(batch, super()._forward_train(batch, **kwargs))


class ClusterRLlibEnv(ParallelPettingZooEnv):
    """``env_config``: ``scenario``, ``split`` and any ``cluster_env.parallel_env`` override."""

    def __init__(self, config: Optional[dict] = None) -> None:
        config = dict(config or {})
        scenario = config.pop("scenario", DEFAULT_SCENARIO)
        split = config.pop("split", "train")
        super().__init__(MaskedFlatParallelEnv(scenario, split, **config))


def _policy_of(agent_id: str, episode: Any = None, **kwargs: Any) -> str:
    """Each agent is its own policy (module id = agent id)."""
    return agent_id


def dual_ppo_config(scenario: str, env_overrides: Optional[dict] = None, *, hidden: int = 64,
                    train_batch: int = 2000, minibatch: int = 250, epochs: int = 4, lr: float = 3e-4,
                    gamma: float = 0.999, entropy: float = 0.01, seed: int = 0) -> PPOConfig:
    """A single-process PPO config (no env-runner or learner actors: it fits a laptop and CI).

    ``train_batch`` env steps are sampled per iteration (both agents act at every step; the one
    whose phase it is not may only send its no-op, so those samples carry no policy gradient).
    """
    torch.set_num_threads(1)
    env_config = {"scenario": scenario, "split": "train", **dict(env_overrides or {})}
    module = RLModuleSpec(module_class=MaskedPPOTorchRLModule,
                          model_config={"fcnet_hiddens": [hidden, hidden], "fcnet_activation": "tanh",
                                        "vf_share_layers": False})
    return (PPOConfig()
            .environment(ClusterRLlibEnv, env_config=env_config,
                         # RLlib's pre-check steps random, unmasked actions, which the strict env refuses.
                         disable_env_checking=True)
            .framework("torch")
            .env_runners(num_env_runners=0, num_envs_per_env_runner=1, rollout_fragment_length="auto")
            .learners(num_learners=0)
            .multi_agent(policies=set(AGENTS), policy_mapping_fn=_policy_of)
            .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs={a: module for a in AGENTS}))
            .training(train_batch_size_per_learner=train_batch, minibatch_size=minibatch, num_epochs=epochs,
                      lr=lr, gamma=gamma, entropy_coeff=entropy, vf_clip_param=100.0)
            .debugging(seed=seed))
