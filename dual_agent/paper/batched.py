"""Batched rollouts: several environments stepped in one process, one forward pass per agent per step.

One rollout process used to spend most of its time in one small forward pass per decision. Here
``B`` environments advance in lock step: at every step each environment's policy state (its
Random Walk GP, its livelock guard, its sampling stream) prepares the features, the decisions the
network must take are stacked, and the orderer (resp. the placer) scores all its rows in one call.
Forced moves, heuristic halves and a teacher's decisions need no network and are taken at once.

Episodes are whole and deterministic given the weights and the seeds (each environment slot keeps
its own seeded policy state, and the batch composition is fixed by the seeds), so a run is
reproducible. :func:`step_envs` is the one place environments are stepped: a vector environment
(``cluster_env.vector``) can replace the loop there.

Rows of the candidate window that no step of the rollout uses (a 256-row window where at most 60
jobs ever wait) are dropped when the rollout is assembled: the networks handle any number of rows,
the actions are renumbered, and training does not pay for empty rows.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import dual_agent._torch  # noqa: F401  (without torch: an ImportError that names the extra)
import torch

from baselines.obs import is_place_phase
from dual_agent.paper.networks import ORDERER, PLACER, network_logits
from dual_agent.paper.policy import DualAgentPolicy, joint_action
from dual_agent.paper.rollout import STEP_FIELDS, Rollout

_NET_KEYS = ("jobs", "machines", "global", "placing")


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode of a batched rollout: the environment's seed (its window and world), the
    policy's sampling seed, and its group (episodes of one window share a group)."""

    env_seed: int
    policy_seed: int
    group: int = 0


def step_envs(envs: Sequence[Any], actions: Sequence[dict]) -> list[tuple]:
    """Step every environment with its joint action; the results in order (the vector-env seam)."""
    return [env.step(action) for env, action in zip(envs, actions)]


def network_choices(agent: int, items: Sequence[tuple[int, dict]], policies: Sequence[DualAgentPolicy],
                    model: torch.nn.Module, device: "str | torch.device" = "cpu", pending_rows: "int | None" = None
                    ) -> list[int]:
    """One forward pass of ``agent``'s network over ``items`` ((index into ``policies``, features)),
    and each item's policy's choice from its logits.

    The candidate rows no item uses are dropped before the pass (the networks are per row and pool
    valid rows only: a 256-row window with a few waiting jobs costs a few rows); ``pending_rows``
    is the environment's pending window K (default: every row).
    """
    stacked = {key: np.stack([f[key] for _, f in items]) for key in _NET_KEYS}
    jobs = stacked["jobs"]
    K = jobs.shape[1] if pending_rows is None else pending_rows
    used = max(1, int((jobs[:, :K, 0] > 0.5).sum(axis=1).max()))
    rows = np.r_[0:used, K:jobs.shape[1]]
    stacked["jobs"] = np.ascontiguousarray(jobs[:, rows])
    with torch.inference_mode():
        batch = {key: torch.from_numpy(v).to(device) for key, v in stacked.items()}
        logits = network_logits(model, agent, batch).double().cpu().numpy()
    if agent == ORDERER:                          # back to the full layout; dropped rows are masked anyway
        full = np.full((len(items), jobs.shape[1] + 1), -1e9)
        full[:, rows] = logits[:, :-1]
        full[:, -1] = logits[:, -1]
        logits = full
    mask_key = "order_mask" if agent == ORDERER else "place_mask"
    return [policies[k].choose_from_logits(agent, row, feats[mask_key]) for (k, feats), row in zip(items, logits)]


def batched_decisions(policies: Sequence[DualAgentPolicy], observations: Sequence[dict], infos: Sequence[dict],
                      model: torch.nn.Module, device: "str | torch.device" = "cpu", pending_rows: "int | None" = None
                      ) -> list[tuple[int, int, bool, dict]]:
    """Every policy's (agent, action, learned, features), with one network call per acting agent.

    ``pending_rows`` (the environment's pending window K) lets the forward pass skip the pending
    rows no environment of the batch uses.
    """
    out: list = [None] * len(policies)
    queued: dict[int, list[tuple[int, dict]]] = {ORDERER: [], PLACER: []}
    for k, (policy, obs, info) in enumerate(zip(policies, observations, infos)):
        feats = policy.features(obs, info)
        agent = PLACER if is_place_phase(obs["orderer"]) else ORDERER
        if policy.network_decides(agent, feats):
            queued[agent].append((k, feats))
        else:
            action, learned = policy._decide(agent, feats, obs, info)
            out[k] = (agent, action, learned, feats)
    for agent, items in queued.items():
        if items:
            choices = network_choices(agent, items, policies, model, device, pending_rows)
            for (k, feats), action in zip(items, choices):
                out[k] = (agent, action, True, feats)
    for policy, (agent, action, _, feats), info in zip(policies, out, infos):
        policy.remember(agent, action, feats, info)
    return out


class _Episode:
    """Per-step records of one episode; the pending rows are stored trimmed to the jobs present."""

    def __init__(self, spec: EpisodeSpec, K: int) -> None:
        self.spec, self.K = spec, K
        self.rows: dict[str, list] = {k: [] for k in STEP_FIELDS}
        self.total, self.info = 0.0, None

    def add(self, feats: dict, agent: int, action: int, learned: bool, reward: float, done: bool, time: float) -> None:
        jobs = feats["jobs"]
        n = int(np.count_nonzero(jobs[: self.K, 0] > 0.5))      # valid pending rows come first
        r = self.rows
        r["jobs"].append((jobs[:n].copy(), jobs[self.K:].copy()))
        for key in ("machines", "global", "placing", "place_mask"):
            r[key].append(np.array(feats[key], copy=True))
        mask = feats["order_mask"]
        r["order_mask"].append((mask[:n].copy(), mask[self.K:].copy()))
        for key, value in (("agent", agent), ("action", action), ("learned", learned), ("reward", reward),
                           ("done", done), ("time", time), ("prior", int(feats.get("prior", -1)))):
            r[key].append(value)
        self.total += reward


def _assemble(episodes: list[_Episode], K: int) -> Rollout:
    """Concatenate the episodes, keeping only pending rows some step used (actions renumbered)."""
    used = max([1] + [len(p) for e in episodes for p, _ in e.rows["jobs"]])
    steps: dict[str, np.ndarray] = {}
    t = sum(len(e.rows["reward"]) for e in episodes)
    first = episodes[0].rows
    tail_rows, feat = first["jobs"][0][1].shape[0], first["jobs"][0][1].shape[1]
    jobs = np.zeros((t, used + tail_rows, feat), dtype=np.float32)
    order_mask = np.zeros((t, used + tail_rows + 1), dtype=bool)
    i = 0
    for e in episodes:
        for (p, tail), (mp, mtail) in zip(e.rows["jobs"], e.rows["order_mask"]):
            jobs[i, : len(p)] = p
            jobs[i, used:] = tail
            order_mask[i, : len(mp)] = mp
            order_mask[i, used:] = mtail
            i += 1
    steps["jobs"], steps["order_mask"] = jobs, order_mask
    for key in ("machines", "global", "placing", "place_mask", "agent", "action", "learned", "reward", "done", "time",
                "prior"):
        steps[key] = np.asarray([v for e in episodes for v in e.rows[key]], dtype=STEP_FIELDS[key])
    # Orderer actions at or beyond K (running rows, advance) move down to the trimmed layout.
    shift = (steps["agent"] == ORDERER) & (steps["action"] >= K)
    steps["action"][shift] -= K - used
    shift = (steps["agent"] == ORDERER) & (steps["prior"] >= K)      # the prior's action likewise
    steps["prior"][shift] -= K - used
    meta = []
    for e in episodes:
        metrics = e.info.get("metrics", {}) if e.info else {}
        meta.append({"seed": e.spec.env_seed, "policy_seed": e.spec.policy_seed, "group": e.spec.group,
                     "return": e.total, "steps": len(e.rows["reward"]),
                     "end_time": float(e.info["time"]) if e.info else 0.0, **metrics})
    return Rollout(steps, meta)


def collect_batched(policies: Sequence[DualAgentPolicy], envs: Sequence[Any], specs: Sequence[EpisodeSpec],
                    model: torch.nn.Module, device: "str | torch.device" = "cpu") -> Rollout:
    """Play ``specs[i]`` in ``envs[i]`` with ``policies[i]`` (all sharing ``model``), in lock step.

    Returns the steps of every episode, in the order of ``specs``; each episode record carries its
    seeds, its group and its return.
    """
    if not (len(policies) == len(envs) == len(specs)) or not specs:
        raise ValueError(f"collect_batched needs as many policies, envs and specs (got {len(policies)}, "
                         f"{len(envs)}, {len(specs)}), at least one")
    K = envs[0].unwrapped.builder.K
    episodes = [_Episode(spec, K) for spec in specs]
    obs, infos = [None] * len(envs), [None] * len(envs)
    for i, (env, policy, spec) in enumerate(zip(envs, policies, specs)):
        obs[i], infos[i] = env.reset(seed=spec.env_seed)
        policy.reset(spec.policy_seed)
    active = list(range(len(envs)))
    while active:
        decisions = batched_decisions([policies[i] for i in active], [obs[i] for i in active],
                                      [infos[i] for i in active], model, device, pending_rows=K)
        actions = [joint_action(obs[i], agent, action) for i, (agent, action, _, _) in zip(active, decisions)]
        results = step_envs([envs[i] for i in active], actions)
        still = []
        for i, (agent, action, learned, feats), (o, rewards, term, trunc, info) in zip(active, decisions, results):
            done = bool(term["orderer"] or trunc["orderer"])
            episodes[i].add(feats, agent, action, learned, float(rewards["orderer"]), done,
                            float(infos[i]["orderer"]["time"]))
            obs[i], infos[i] = o, info
            if done:
                episodes[i].info = info["orderer"]
            else:
                still.append(i)
        active = still
    return _assemble(episodes, K)
