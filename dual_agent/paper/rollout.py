"""Rollout collection: whole episodes played by the dual agent, in worker processes or in-process.

A rollout is deterministic given the weights and the episode seeds: every worker plays whole
episodes (no environment state carries over between iterations), with seeds derived from the
run's seed, the iteration, the worker and the episode's index. That is what makes a resumed
training identical to an uninterrupted one, and the in-process and subprocess paths identical.
"""
from __future__ import annotations

import multiprocessing as mp
import os
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

#: Per-step arrays of a rollout and their dtypes.
STEP_FIELDS = {"jobs": np.float32, "machines": np.float32, "global": np.float32, "placing": np.float32,
               "order_mask": bool, "place_mask": bool, "agent": np.int8, "action": np.int64,
               "learned": bool, "reward": np.float32, "done": bool, "time": np.float64,
               "prior": np.int64}   # the prior heuristic's action (dual_agent.paper.prior), -1 without one
#: The per-step arrays the actors' loss reads (the networks' inputs, masks and the prior's action).
NETWORK_FIELDS = ("jobs", "machines", "global", "placing", "order_mask", "place_mask", "prior")


@dataclass
class Rollout:
    """Steps of complete episodes (T steps; shapes per field in :data:`STEP_FIELDS` order; ``time`` is
    the simulated time at which each decision was taken)."""

    steps: dict[str, np.ndarray]                       # jobs (T,N,Fj) machines (T,M,Fm+2) global (T,Fg)
                                                       # placing (T,Fp) masks (T,N+1)/(T,M+1) others (T,)
    episodes: list[dict] = field(default_factory=list)  # per finished episode: seed, return, steps, metrics

    def __len__(self) -> int:
        return len(self.steps["reward"])

    @staticmethod
    def concat(parts: list["Rollout"]) -> "Rollout":
        steps = {k: np.concatenate([p.steps[k] for p in parts]) for k in STEP_FIELDS}
        return Rollout(steps, [e for p in parts for e in p.episodes])


def episode_seed(seed: int, iteration: int, worker: int, episode: int) -> int:
    """The environment (and sampling) seed of one training episode."""
    return int(np.random.SeedSequence([seed, iteration, worker, episode]).generate_state(1)[0])


def make_env(scenario: str, split: str, env_kwargs: dict, jobs_per_episode: Optional[int]) -> Any:
    import cluster_env

    kw = dict(env_kwargs)
    if jobs_per_episode is not None:
        kw["jobs_per_episode"] = jobs_per_episode
    return cluster_env.parallel_env(scenario, split=split, **kw)


def collect(policy: Any, env: Any, seeds: list[int], min_steps: int) -> Rollout:
    """Play whole episodes with ``policy`` (sampling) until at least ``min_steps`` steps.

    ``seeds`` must be long enough; episode ``e`` uses ``seeds[e]``.
    """
    from dual_agent.paper.policy import joint_action

    rows: dict[str, list] = {k: [] for k in STEP_FIELDS}
    episodes = []
    e = 0
    while len(rows["reward"]) < min_steps:
        seed = seeds[e]
        obs, infos = env.reset(seed=seed)
        policy.reset(seed)
        total, n = 0.0, 0
        while True:
            agent, action, learned, feats = policy.decide(obs, infos)
            decided_at = float(infos["orderer"]["time"])   # the decision's simulated time
            obs, rewards, term, trunc, infos = env.step(joint_action(obs, agent, action))
            done = bool(term["orderer"] or trunc["orderer"])
            for k in ("jobs", "machines", "global", "placing", "order_mask", "place_mask"):
                rows[k].append(np.array(feats[k], copy=True))  # env buffers may be reused
            rows["agent"].append(agent)
            rows["action"].append(action)
            rows["learned"].append(learned)
            rows["reward"].append(rewards["orderer"])
            rows["done"].append(done)
            rows["time"].append(decided_at)
            rows["prior"].append(int(feats.get("prior", -1)))
            total += rewards["orderer"]
            n += 1
            if done:
                break
        episodes.append({"seed": seed, "return": total, "steps": n, "end_time": float(infos["orderer"]["time"]),
                         **infos["orderer"].get("metrics", {})})
        e += 1
    steps = {k: np.asarray(v, dtype=STEP_FIELDS[k]) for k, v in rows.items()}
    return Rollout(steps, episodes)


class RolloutWorkers:
    """``n`` logical rollout workers, run as subprocesses or one after another in this process.

    Either way worker ``w`` plays the same episodes with the same weights, so the results agree.
    """

    def __init__(self, n: int, subprocess: bool, scenario: str, split: str, env_kwargs: dict,
                 jobs_per_episode: Optional[int], config: dict, spaces: dict) -> None:
        self.n, self.subprocess = n, subprocess
        args = (scenario, split, env_kwargs, jobs_per_episode, config, spaces)
        if subprocess:
            ctx = mp.get_context("spawn")  # fork after torch is loaded is unsafe
            self._conns, self._procs = [], []
            for _ in range(n):
                parent, child = ctx.Pipe()
                proc = ctx.Process(target=_worker_main, args=(child, *args), daemon=True)
                proc.start()
                child.close()
                self._conns.append(parent)
                self._procs.append(proc)
        else:
            self._local = _WorkerState(*args)

    def collect(self, state_dict: dict, seed: int, iteration: int, min_steps: int,
                teacher: Optional[str] = None) -> Rollout:
        """Every worker's episodes, in worker order; ``teacher`` (a baseline name) plays instead of the agent."""
        jobs = [(state_dict, [episode_seed(seed, iteration, w, e) for e in range(_MAX_EPISODES)], min_steps, teacher)
                for w in range(self.n)]
        if not self.subprocess:
            return Rollout.concat([self._local.run(*job) for job in jobs])
        for conn, job in zip(self._conns, jobs):
            conn.send(job)
        parts = []
        for w, conn in enumerate(self._conns):
            try:
                reply = conn.recv()
            except (EOFError, OSError) as exc:
                raise RuntimeError(f"rollout worker {w} died (see its traceback above); with the spawn start "
                                   f"method the main script must be importable and guarded by "
                                   f"`if __name__ == '__main__':`") from exc
            if isinstance(reply, BaseException):
                raise RuntimeError(f"rollout worker {w} failed: {reply!r}") from reply
            parts.append(reply)
        return Rollout.concat(parts)

    def close(self) -> None:
        if self.subprocess:
            for conn in self._conns:
                try:
                    conn.send(None)
                    conn.close()
                except (BrokenPipeError, OSError):
                    pass
            for proc in self._procs:
                proc.join(timeout=10)
                if proc.is_alive():
                    proc.terminate()
            self._procs = []

    def __enter__(self) -> "RolloutWorkers":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_MAX_EPISODES = 256  # seeds prepared per worker and iteration (far more than a rollout plays)


class _WorkerState:
    """One worker's environment and sampling policy."""

    def __init__(self, scenario: str, split: str, env_kwargs: dict, jobs_per_episode: Optional[int],
                 config: dict, spaces: dict) -> None:
        from dual_agent.paper.config import DualAgentConfig
        from dual_agent.paper.policy import DualAgentPolicy, build_model, required_env

        cfg = DualAgentConfig.from_dict(config)
        kw = {**env_kwargs, **required_env(cfg)}
        self.env = make_env(scenario, split, kw, jobs_per_episode)
        self.policy = DualAgentPolicy(build_model(cfg, spaces), cfg, spaces, scenario=scenario, deterministic=False)

    def run(self, state_dict: dict, seeds: list[int], min_steps: int, teacher: Optional[str] = None) -> Rollout:
        from baselines.registry import make_policy

        self.policy.model.load_state_dict(state_dict)
        self.policy.teacher = make_policy(teacher) if teacher else None
        return collect(self.policy, self.env, seeds, min_steps)


def _worker_main(conn: Any, *args: Any) -> None:
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch

    torch.set_num_threads(1)
    try:
        state = _WorkerState(*args)
    except BaseException as exc:  # report instead of dying silently
        conn.send(exc)
        return
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        try:
            conn.send(state.run(*job))
        except BaseException as exc:
            conn.send(exc)
