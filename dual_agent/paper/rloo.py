"""Same-window group baselines (RLOO / GRPO style) for the dual agent, on batched rollouts.

Why: on Philly the variance of an episode's return *between windows* is hundreds of times its
variance between rollouts *on the same window*, and a critic cannot see the window's future load.
So each iteration draws ``group_windows`` windows and plays ``group_size`` rollouts on each (the
same environment seed, hence the same jobs and the same world; different sampling seeds), all in
one process with one batched forward pass per step (:mod:`dual_agent.paper.batched`). A decision's
advantage compares its rollout with the *other* rollouts of its window (leave-one-out mean):

* ``baseline="time"`` (default): per decision, the rollout's return-to-go from the decision's
  simulated time ``t`` minus the mean over the other rollouts of their return-to-go from the same
  ``t`` (their cumulative reward is interpolated linearly between their own decision times; the
  reward is minus job-seconds, which accrue continuously). A baseline that depends on the state
  (the time) and on independent rollouts, never on the decision itself: the gradient stays unbiased.
* ``baseline="episode"``: every decision of a rollout gets its whole return minus the others' mean.
* ``baseline="critic"``: GAE with the centralised critic, as MAPPO (the groups and batching stay).

``advantage_scale`` normalises per window, since windows differ by orders of magnitude:
``"none"`` (hours of JCT), ``"scale"`` (divided by the window's mean |return|), ``"log"``
(compares remaining costs on a log scale: ``-(log(c_i + eps) - mean_j log(c_j + eps))`` with
``c = -return-to-go`` and ``eps`` 1% of the window's mean cost). The clipped PPO objective then
runs as in :class:`~dual_agent.paper.mappo.MAPPOTrainer`, on the learned decisions only; without a
critic no value network is evaluated or trained.

Seeds: the window ``w`` of iteration ``i`` is ``episode_seed(seed, i, w, 0)`` and its rollout
``r`` samples with ``episode_seed(seed, i, w, r + 1)``: a run is deterministic given its seed.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import dual_agent._torch  # noqa: F401  (without torch: an ImportError that names the extra)
import torch

from dual_agent.paper.batched import EpisodeSpec, collect_batched
from dual_agent.paper.config import DualAgentConfig, TrainConfig
from dual_agent.paper.mappo import MAPPOTrainer
from dual_agent.paper.policy import DualAgentPolicy, required_env
from dual_agent.paper.rollout import Rollout, episode_seed, make_env

__all__ = ["RLOOTrainer", "rloo_advantages", "make_trainer"]


def rloo_advantages(rewards: np.ndarray, times: np.ndarray, episodes: Sequence[dict], baseline: str = "time",
                    scale: str = "none") -> np.ndarray:
    """Leave-one-out advantages of concatenated whole episodes.

    Args:
        rewards, times: per step, the reward and the simulated time of the decision.
        episodes: per episode in step order, ``steps``, ``group`` (its window) and ``end_time``.
        baseline: ``"time"`` or ``"episode"`` (see the module docstring).
        scale: ``"none"``, ``"scale"`` or ``"log"``.

    Every group needs at least two episodes.
    """
    rewards = np.asarray(rewards, dtype=np.float64)
    times = np.asarray(times, dtype=np.float64)
    bounds = np.cumsum([0] + [int(e["steps"]) for e in episodes])
    if bounds[-1] != len(rewards):
        raise ValueError(f"episodes hold {bounds[-1]} steps, the rollout {len(rewards)}")
    rtg, curve = [], []
    for i, e in enumerate(episodes):
        r = rewards[bounds[i]:bounds[i + 1]]
        go = np.cumsum(r[::-1])[::-1]                       # return-to-go at each decision
        total = float(go[0]) if len(go) else 0.0
        rtg.append(go)
        # Cumulative reward before each decision, at its time, then the whole return at the end.
        xs = np.append(times[bounds[i]:bounds[i + 1]], float(e["end_time"]))
        curve.append((xs, np.append(total - go, total), total))
    groups: dict[Any, list[int]] = {}
    for i, e in enumerate(episodes):
        groups.setdefault(e["group"], []).append(i)
    adv = np.zeros(len(rewards), dtype=np.float64)
    for g, members in groups.items():
        if len(members) < 2:
            raise ValueError(f"group {g!r} has {len(members)} episode; a leave-one-out baseline needs >= 2")
        mean_cost = float(np.mean([abs(curve[j][2]) for j in members]))
        eps = 0.01 * mean_cost + 1e-12
        for i in members:
            t = times[bounds[i]:bounds[i + 1]]
            others = [j for j in members if j != i]
            if baseline == "time":
                own = rtg[i]
                theirs = np.stack([curve[j][2] - np.interp(t, curve[j][0], curve[j][1]) for j in others])
            elif baseline == "episode":
                own = np.full(len(t), curve[i][2])
                theirs = np.stack([np.full(len(t), curve[j][2]) for j in others])
            else:
                raise ValueError(f"baseline must be 'time' or 'episode', got {baseline!r}")
            if scale == "log":
                a = -(np.log(np.maximum(-own, 0.0) + eps) - np.log(np.maximum(-theirs, 0.0) + eps).mean(axis=0))
            elif scale in ("none", "scale"):
                a = own - theirs.mean(axis=0)
                if scale == "scale":
                    a = a / (mean_cost + 1e-12)
            else:
                raise ValueError(f"scale must be 'none', 'scale' or 'log', got {scale!r}")
            adv[bounds[i]:bounds[i + 1]] = a
    return adv


class RLOOTrainer(MAPPOTrainer):
    """:class:`MAPPOTrainer` with same-window groups on batched rollouts (module docstring).

    Files, logs, evaluation, checkpoints and resume are MAPPO's; only the collection and the
    advantages differ.
    """

    def __init__(self, train: TrainConfig, agent: DualAgentConfig = DualAgentConfig(), *args: Any, **kwargs: Any) -> None:
        if train.algorithm != "rloo":
            raise ValueError(f"RLOOTrainer needs TrainConfig(algorithm='rloo'), got {train.algorithm!r}")
        super().__init__(train, agent, *args, **kwargs)

    def _make_collector(self) -> "_Slots":
        cfg = self.train_cfg
        kw = {**cfg.env_kwargs, **required_env(self.agent_cfg)}
        n = cfg.group_windows * cfg.group_size
        envs = [make_env(cfg.scenario, cfg.split, kw, cfg.jobs_per_episode) for _ in range(n)]
        policies = [DualAgentPolicy(self.model, self.agent_cfg, self.spaces, scenario=cfg.scenario,
                                    deterministic=False) for _ in range(n)]
        return _Slots(envs, policies)

    def specs(self, iteration: int) -> list[EpisodeSpec]:
        """The episodes of an iteration: ``group_size`` rollouts on each of ``group_windows`` windows."""
        cfg = self.train_cfg
        return [EpisodeSpec(episode_seed(cfg.seed, iteration, w, 0), episode_seed(cfg.seed, iteration, w, r + 1), w)
                for w in range(cfg.group_windows) for r in range(cfg.group_size)]

    def _collect(self, slots: "_Slots", imitating: bool) -> Rollout:
        from baselines.registry import make_policy

        cfg = self.train_cfg
        for policy in slots.policies:
            policy.teacher = make_policy(cfg.imitate) if imitating else None
        self.model.eval()
        return collect_batched(slots.policies, slots.envs, self.specs(self.iteration), self.model, self.device)

    def _uses_critic(self) -> bool:
        return self.train_cfg.baseline == "critic"

    def _advantages(self, rollout: Rollout, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cfg = self.train_cfg
        if cfg.baseline == "critic":
            return super()._advantages(rollout, values)
        adv = rloo_advantages(rollout.steps["reward"], rollout.steps["time"], rollout.episodes,
                              baseline=cfg.baseline, scale=cfg.advantage_scale)
        adv = torch.from_numpy(adv.astype(np.float32)).to(self.device)
        return adv, adv   # no critic target is used


class _Slots:
    """The environments and per-slot policy states of the batched rollouts (one per episode)."""

    def __init__(self, envs: list, policies: list) -> None:
        self.envs, self.policies = envs, policies

    def close(self) -> None:
        for env in self.envs:
            env.close()


def make_trainer(train: TrainConfig, agent: DualAgentConfig = DualAgentConfig(), *args: Any,
                 **kwargs: Any) -> MAPPOTrainer:
    """The trainer of ``train.algorithm``."""
    cls = RLOOTrainer if train.algorithm == "rloo" else MAPPOTrainer
    return cls(train, agent, *args, **kwargs)
