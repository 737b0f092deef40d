"""DAgger from hindsight teachers: the student plays, the window's best-known schedule labels the
student's own states, the labelled states aggregate, and both actors learn the labels by
supervised cross-entropy (the ordering actor the teacher's orderings, the placement actor its
placements).

One DAgger iteration (:func:`dagger_rollout`, then :func:`imitation_update`):

1. ``episodes`` training windows, each with its teacher (:class:`~dual_agent.paper.teacher.HindsightTeacher`),
   are played in lock step with one batched forward pass per acting agent per step. At each
   decision the teacher labels the state; with probability ``beta`` the teacher's action is
   played, else the student's greedy one (iteration 0 has ``beta = 1``: plain behaviour cloning;
   then ``beta`` decays geometrically, so the student soon visits the states its own mistakes lead
   to). The teacher is then told the action really taken (its per-instant bookkeeping follows the
   student).
2. Every decision the network takes (not a forced move), with a label the student's mask allows,
   joins the aggregate (:class:`Aggregate`, capped: the oldest samples go first).
3. A few epochs of cross-entropy over the whole aggregate.

Seeds: the windows, the mixing draws and the minibatch order derive from the run's seed and the
iteration, so the same seed gives the same weights.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import dual_agent._torch  # noqa: F401  (without torch: an ImportError that names the extra)
import torch

from baselines.obs import is_place_phase
from dual_agent.paper.batched import EpisodeSpec, _assemble, _Episode, network_choices, step_envs
from dual_agent.paper.networks import ORDERER, PLACER
from dual_agent.paper.policy import DualAgentPolicy, joint_action
from dual_agent.paper.rollout import NETWORK_FIELDS, Rollout
from dual_agent.paper.teacher import HindsightTeacher

__all__ = ["Aggregate", "dagger_beta", "dagger_rollout", "imitation_update"]


def dagger_beta(iteration: int, decay: float) -> float:
    """The probability that the teacher plays a decision in DAgger iteration ``iteration``:
    1 at iteration 0 (behaviour cloning), then ``decay ** iteration``."""
    return float(decay) ** int(iteration)


def dagger_rollout(policies: Sequence[DualAgentPolicy], envs: Sequence[Any], teachers: Sequence[HindsightTeacher],
                   specs: Sequence[EpisodeSpec], model: torch.nn.Module, beta: float, mix_seed: int,
                   device: "str | torch.device" = "cpu") -> tuple["Rollout | None", list[dict], dict]:
    """Play ``specs[i]`` in ``envs[i]`` (student ``policies[i]``, labeller ``teachers[i]``), mixing
    with probability ``beta``.

    Returns (the labelled decisions: ``action`` is the teacher's, ``learned`` True, None when
    there is none; per played episode its seed, return, steps and metrics; and counts: ``decisions`` taken by the network or the teacher,
    ``labelled``, ``student`` (labelled decisions the student took), ``agree`` (of those, the
    ones where its greedy choice was the label), ``illegal`` (labels the student's mask forbids, left out)).
    """
    if not (len(policies) == len(envs) == len(teachers) == len(specs)) or not specs:
        raise ValueError("dagger_rollout needs as many policies, envs, teachers and specs, at least one")
    K = envs[0].unwrapped.builder.K
    labelled = [_Episode(spec, K) for spec in specs]
    played = [{"seed": spec.env_seed, "group": spec.group, "return": 0.0, "steps": 0} for spec in specs]
    rng = np.random.default_rng(mix_seed)
    counts = {"decisions": 0, "labelled": 0, "agree": 0, "student": 0, "illegal": 0, "env_steps": 0}
    obs, infos = [None] * len(envs), [None] * len(envs)
    for i, (env, policy, teacher, spec) in enumerate(zip(envs, policies, teachers, specs)):
        obs[i], infos[i] = env.reset(seed=spec.env_seed)
        policy.reset(spec.policy_seed)
        teacher.reset(spec.env_seed)
    active = list(range(len(envs)))
    while active:
        chosen: dict[int, tuple[int, int, dict]] = {}
        queued: dict[int, list[int]] = {ORDERER: [], PLACER: []}
        info_of: dict[int, dict] = {}
        for i in active:
            feats = policies[i].features(obs[i], infos[i])
            agent = PLACER if is_place_phase(obs[i]["orderer"]) else ORDERER
            _, label = teachers[i].label(obs[i], infos[i])
            mask = feats["order_mask"] if agent == ORDERER else feats["place_mask"]
            legal = np.flatnonzero(mask)
            info_of[i] = {"label": label, "feats": feats, "agent": agent, "legal": bool(mask[label])}
            if len(legal) == 1:                      # a forced move: nothing to learn
                chosen[i] = (agent, int(legal[0]), feats)
                continue
            counts["decisions"] += 1
            if mask[label]:
                counts["labelled"] += 1
                labelled[i].add(feats, agent, label, True, 0.0, False, float(infos[i]["orderer"]["time"]))
                if rng.random() < beta:
                    chosen[i] = (agent, label, feats)
                    continue
            else:
                counts["illegal"] += 1
            queued[agent].append(i)
        for agent, items in queued.items():
            if not items:
                continue
            pairs = [(i, info_of[i]["feats"]) for i in items]
            for (i, feats), action in zip(pairs, network_choices(agent, pairs, policies, model, device, trim=False)):
                if info_of[i]["legal"]:          # agreement where the label was the student's to take
                    counts["student"] += 1
                    counts["agree"] += int(action == info_of[i]["label"])
                chosen[i] = (agent, action, feats)
        actions = []
        for i in active:
            agent, action, feats = chosen[i]
            policies[i].remember(agent, action, feats, infos[i])
            teachers[i].observe(obs[i], infos[i], action)
            actions.append(joint_action(obs[i], agent, action))
        results = step_envs([envs[i] for i in active], actions)
        still = []
        for i, (o, rewards, term, trunc, info) in zip(active, results):
            agent, action, feats = chosen[i]
            done = bool(term["orderer"] or trunc["orderer"])
            played[i]["return"] += float(rewards["orderer"])
            played[i]["steps"] += 1
            counts["env_steps"] += 1
            obs[i], infos[i] = o, info
            if done:
                labelled[i].info = info["orderer"]
                played[i].update(info["orderer"].get("metrics", {}))
            else:
                still.append(i)
        active = still
    nonempty = [e for e in labelled if e.rows["reward"]]
    return (_assemble(nonempty, K) if nonempty else None), played, counts


class Aggregate:
    """The DAgger dataset: labelled decisions of every iteration so far, at most ``max_samples``
    (the oldest dropped first). Kept per collection and padded to a common row count on use (the
    batched rollouts trim unused candidate rows, differently per collection)."""

    def __init__(self, max_samples: int, running_rows: int) -> None:
        self.max_samples, self.running_rows = int(max_samples), int(running_rows)
        self.parts: list[Rollout] = []

    def __len__(self) -> int:
        return sum(len(p.steps["agent"]) for p in self.parts)

    def add(self, part: "Rollout | None") -> None:
        if part is not None and len(part.steps["agent"]):
            self.parts.append(part)
        while len(self) > self.max_samples and len(self.parts) > 1:
            self.parts.pop(0)
        if len(self) > self.max_samples:     # one collection alone is over the cap: its newest samples
            p = self.parts[0]
            keep = slice(len(p.steps["agent"]) - self.max_samples, None)
            self.parts[0] = Rollout({k: v[keep] for k, v in p.steps.items()}, p.episodes)

    def steps(self) -> dict[str, np.ndarray]:
        """All samples, pending rows padded to the widest collection (orderer actions renumbered)."""
        used = max(self._used(p) for p in self.parts)
        out: dict[str, list] = {}
        for p in self.parts:
            s = dict(p.steps)
            u = self._used(p)
            pad = used - u
            if pad:
                s["jobs"] = np.concatenate([s["jobs"][:, :u], np.zeros((len(s["jobs"]), pad, s["jobs"].shape[2]),
                                                                       s["jobs"].dtype), s["jobs"][:, u:]], axis=1)
                s["order_mask"] = np.concatenate([s["order_mask"][:, :u], np.zeros((len(s["order_mask"]), pad), bool),
                                                  s["order_mask"][:, u:]], axis=1)
                for key in ("action", "prior"):
                    s[key] = s[key].copy()
                    shift = (s["agent"] == ORDERER) & (s[key] >= u)
                    s[key][shift] += pad
            for k, v in s.items():
                out.setdefault(k, []).append(v)
        return {k: np.concatenate(v) for k, v in out.items()}

    def _used(self, part: Rollout) -> int:
        # The trimmed layout (batched._assemble): the used pending rows, then the R running rows.
        return part.steps["jobs"].shape[1] - self.running_rows


def imitation_update(trainer: Any, steps: dict[str, np.ndarray], epochs: int, minibatch: int, seed: Sequence[int]
                     ) -> dict[str, float]:
    """``epochs`` passes of cross-entropy of the labels over ``steps`` (shuffled minibatches from
    ``seed``), each actor on its own decisions; the loss and the accuracy of the greedy choice."""
    dev = trainer.device
    batch = {k: torch.from_numpy(steps[k]).to(dev) for k in NETWORK_FIELDS}
    agent = torch.from_numpy(steps["agent"].astype(np.int64)).to(dev)
    action = torch.from_numpy(steps["action"].astype(np.int64)).to(dev)
    rng = np.random.default_rng(list(seed))
    n, total, count = len(agent), 0.0, 0
    trainer.model.train()
    for _ in range(epochs):
        perm = rng.permutation(n)
        for start in range(0, n, minibatch):
            idx = torch.from_numpy(perm[start:start + minibatch]).to(dev)
            logp, _ = trainer._logp_entropy({k: v[idx] for k, v in batch.items()}, agent[idx], action[idx])
            loss = -logp.mean()
            trainer.optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(trainer.model.parameters(), trainer.train_cfg.max_grad_norm)
            trainer.optimizer.step()
            total += float(loss.detach()) * len(idx)
            count += len(idx)
    trainer.model.eval()
    return {"policy_loss": total / max(1, count)}
