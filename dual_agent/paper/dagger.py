"""DAgger from hindsight teachers: the student plays, the window's best-known schedule labels the
student's own states, the labelled states aggregate, and both actors learn the labels by
supervised cross-entropy (the ordering actor the teacher's orderings, the placement actor its
placements).

One DAgger iteration (:func:`dagger_rollout`, then :func:`imitation_update`):

1. ``episodes`` training windows, each with its teacher (:class:`~dual_agent.paper.teacher.HindsightTeacher`),
   are played one after another in this process (:func:`dagger_rollout`) or as tasks of worker
   processes (:class:`DaggerWorkers`, ``TrainConfig.dagger_workers``). At each decision the
   teacher labels the state; with probability ``beta`` the teacher's action is played, else the
   student's greedy one (iteration 0 has ``beta = 1``: plain behaviour cloning; then ``beta``
   decays geometrically, so the student soon visits the states its own mistakes lead to). The
   teacher is then told the action really taken (its per-instant bookkeeping follows the
   student). Each episode draws its mixing from its own stream and takes the student's choice
   from the portable logits (:mod:`dual_agent.paper.portable`), so its result is the same in any
   process: the number of workers does not change the weights.
2. Every decision the network takes (not a forced move), with a label the student's mask allows,
   joins the aggregate (:class:`Aggregate`, capped: the oldest samples go first).
3. A few epochs of cross-entropy over the whole aggregate.

Seeds: the windows, the mixing draws (one stream per episode) and the minibatch order derive from
the run's seed and the iteration, so the same seed gives the same weights, on any number of workers.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import dual_agent._torch  # noqa: F401  (without torch: an ImportError that names the extra)
import torch

from baselines.obs import is_place_phase
from dual_agent.paper.batched import EpisodeSpec, _assemble, _Episode
from dual_agent.paper.networks import ORDERER, PLACER
from dual_agent.paper.policy import DualAgentPolicy, joint_action
from dual_agent.paper.rollout import NETWORK_FIELDS, Rollout
from dual_agent.paper.teacher import HindsightTeacher

__all__ = ["COUNTS", "Aggregate", "DaggerWorkers", "dagger_beta", "dagger_episode", "dagger_rollout", "gather_episodes",
           "imitation_update"]


def dagger_beta(iteration: int, decay: float) -> float:
    """The probability that the teacher plays a decision in DAgger iteration ``iteration``:
    1 at iteration 0 (behaviour cloning), then ``decay ** iteration``."""
    return float(decay) ** int(iteration)


#: The counts a DAgger rollout reports (see :func:`dagger_rollout`).
COUNTS = ("decisions", "labelled", "agree", "student", "illegal", "env_steps")


def dagger_episode(policy: DualAgentPolicy, env: Any, teacher: HindsightTeacher, spec: EpisodeSpec, beta: float,
                   mix_seed: int) -> tuple[_Episode, dict, dict]:
    """Play one window: the student ``policy`` (deterministic) in ``env``, labelled by ``teacher``.

    At each decision (not a forced move) the teacher labels the state; a label the student's mask
    allows is recorded, and with probability ``beta`` it is played, else the student's greedy
    choice is. The mixing draws come from this episode's own stream (``[mix_seed, spec.group]``)
    and the student's choice from the portable logits (the same bits in any process), so an
    episode's result does not depend on which process plays it or beside which others: the
    labelled rows, the played episode's record and its counts (:data:`COUNTS`).
    """
    K = env.unwrapped.builder.K
    episode = _Episode(spec, K)
    played = {"seed": spec.env_seed, "group": spec.group, "return": 0.0, "steps": 0}
    counts = dict.fromkeys(COUNTS, 0)
    rng = np.random.default_rng([int(mix_seed), int(spec.group)])
    obs, infos = env.reset(seed=spec.env_seed)
    policy.reset(spec.policy_seed)
    teacher.reset(spec.env_seed)
    while True:
        feats = policy.features(obs, infos)
        agent = PLACER if is_place_phase(obs["orderer"]) else ORDERER
        _, label = teacher.label(obs, infos)
        mask = feats["order_mask"] if agent == ORDERER else feats["place_mask"]
        legal = np.flatnonzero(mask)
        if len(legal) == 1:                          # a forced move: nothing to learn
            action = int(legal[0])
        else:
            counts["decisions"] += 1
            action = -1
            if mask[label]:
                counts["labelled"] += 1
                episode.add(feats, agent, label, True, 0.0, False, float(infos["orderer"]["time"]))
                if rng.random() < beta:
                    action = int(label)
            else:
                counts["illegal"] += 1
            if action < 0:
                action = policy.network_action(agent, feats)
                if mask[label]:                      # agreement where the label was the student's to take
                    counts["student"] += 1
                    counts["agree"] += int(action == label)
        policy.remember(agent, action, feats, infos)
        teacher.observe(obs, infos, action)
        obs, rewards, term, trunc, infos = env.step(joint_action(obs, agent, action))
        played["return"] += float(rewards["orderer"])
        played["steps"] += 1
        counts["env_steps"] += 1
        if term["orderer"] or trunc["orderer"]:
            episode.info = infos["orderer"]
            played.update(infos["orderer"].get("metrics", {}))
            return episode, played, counts


def gather_episodes(results: Sequence[tuple[_Episode, dict, dict]], K: int) -> tuple["Rollout | None", list[dict], dict]:
    """The episodes' results (in episode order) as one rollout of labelled decisions (None when
    there is none), the played episodes' records and the summed counts."""
    counts = dict.fromkeys(COUNTS, 0)
    for _, _, c in results:
        for key in COUNTS:
            counts[key] += c[key]
    nonempty = [e for e, _, _ in results if e.rows["reward"]]
    return (_assemble(nonempty, K) if nonempty else None), [p for _, p, _ in results], counts


def dagger_rollout(policy: DualAgentPolicy, env: Any, teachers: Sequence[HindsightTeacher],
                   specs: Sequence[EpisodeSpec], beta: float, mix_seed: int) -> tuple["Rollout | None", list[dict], dict]:
    """Play ``specs[i]`` with the student ``policy`` in ``env``, labelled by ``teachers[i]``, mixing
    with probability ``beta``, one episode after another in this process (:func:`dagger_episode`;
    :class:`DaggerWorkers` plays them in worker processes, with the same result).

    Returns (the labelled decisions: ``action`` is the teacher's, ``learned`` True, None when
    there is none; per played episode its seed, return, steps and metrics; and counts: ``decisions`` taken by the network or the teacher,
    ``labelled``, ``student`` (labelled decisions the student took), ``agree`` (of those, the
    ones where its greedy choice was the label), ``illegal`` (labels the student's mask forbids, left out)).
    """
    if len(teachers) != len(specs) or not specs:
        raise ValueError("dagger_rollout needs one teacher per spec, at least one")
    results = [dagger_episode(policy, env, teacher, spec, beta, mix_seed) for teacher, spec in zip(teachers, specs)]
    return gather_episodes(results, env.unwrapped.builder.K)


class DaggerWorkers:
    """Worker processes that play a DAgger iteration's episodes (:func:`dagger_episode`), each
    episode a task; the results come back in episode order, so any number of workers gives the
    in-process :func:`dagger_rollout`'s rollout (and the same weights). ``n`` processes (spawn:
    torch is loaded), each keeping its environment and student between tasks; closed by
    :meth:`close` or on leaving a ``with`` block.
    """

    def __init__(self, n: int, scenario: str, split: str, env_kwargs: dict, jobs_per_episode: "int | None",
                 config: dict, spaces: dict) -> None:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"DAgger workers must be an integer >= 1, got {n!r}")
        self.n = n
        self._pool = ProcessPoolExecutor(n, mp_context=mp.get_context("spawn"), initializer=_dagger_worker_init,
                                         initargs=(scenario, split, env_kwargs, jobs_per_episode, config, spaces))

    def rollout(self, state_dict: dict, schedules: Sequence[dict], specs: Sequence[EpisodeSpec], beta: float,
                mix_seed: int) -> tuple["Rollout | None", list[dict], dict]:
        """:func:`dagger_rollout`'s result for the student with weights ``state_dict`` and the
        teachers of ``schedules`` (one per spec)."""
        if len(schedules) != len(specs) or not specs:
            raise ValueError("DaggerWorkers.rollout needs one schedule per spec, at least one")
        tasks = [(state_dict, schedule, spec, beta, mix_seed) for schedule, spec in zip(schedules, specs)]
        results = list(self._pool.map(_dagger_worker_play, tasks))
        return gather_episodes([r[:3] for r in results], results[0][3])

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> "DaggerWorkers":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_WORKER: dict = {}


def _dagger_worker_init(scenario: str, split: str, env_kwargs: dict, jobs_per_episode: "int | None", config: dict,
                        spaces: dict) -> None:
    """A DAgger worker's environment and student (weights set per task), one torch thread."""
    import os

    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
    from dual_agent.paper.config import DualAgentConfig
    from dual_agent.paper.policy import build_model, required_env
    from dual_agent.paper.rollout import make_env

    cfg = DualAgentConfig.from_dict(config)
    _WORKER.update(scenario=scenario, env=make_env(scenario, split, {**env_kwargs, **required_env(cfg)}, jobs_per_episode),
                   policy=DualAgentPolicy(build_model(cfg, spaces), cfg, spaces, scenario=scenario, deterministic=True))


def _dagger_worker_play(task: tuple) -> tuple:
    state_dict, schedule, spec, beta, mix_seed = task
    policy, env = _WORKER["policy"], _WORKER["env"]
    policy.model.load_state_dict(state_dict)
    episode, played, counts = dagger_episode(policy, env, HindsightTeacher(schedule, _WORKER["scenario"]), spec,
                                             beta, mix_seed)
    return episode, played, counts, env.unwrapped.builder.K


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
