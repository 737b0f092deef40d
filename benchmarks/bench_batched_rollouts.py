"""Decisions per second of dual-agent rollouts: one environment at a time against B environments
stepped in lock step with one batched forward pass per agent per step (``dual_agent.paper.batched``).

Every configuration plays the same episodes (philly-v1 train windows of ``--jobs`` jobs, the
sampling agent with fresh weights, one torch thread): ``B`` episodes per measurement, so the
work is equal and only the batching differs. Prints one row per batch size: decisions, seconds,
decisions per second and the speed-up over the one-environment path
(``dual_agent.paper.rollout.collect``, what a MAPPO worker runs).

    python benchmarks/bench_batched_rollouts.py [--jobs 100] [--batches 1,4,8] [--preemption] [--quick]
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

import cluster_env  # noqa: E402
from dual_agent.paper.batched import EpisodeSpec, collect_batched  # noqa: E402
from dual_agent.paper.config import DualAgentConfig  # noqa: E402
from dual_agent.paper.policy import DualAgentPolicy, build_model, spaces_signature  # noqa: E402
from dual_agent.paper.rollout import collect  # noqa: E402


def measure(jobs: int, batches: list[int], scenario: str = "philly-v1", preemption: bool = False) -> list[dict]:
    """Rows {batch, decisions, seconds, per_s, speedup}; batch 0 is the one-environment path."""
    torch.set_num_threads(1)
    env_kw = {"jobs_per_episode": jobs, "preemption": preemption}
    cfg = DualAgentConfig(env_overrides={"preemption": preemption})
    spaces = spaces_signature(cluster_env.parallel_env(scenario, **env_kw))
    torch.manual_seed(0)
    model = build_model(cfg, spaces)
    n = max(batches)
    # The same episodes for every batch size; sampling seed = window seed, as the one-env path does.
    specs = [EpisodeSpec(1000 + i, 1000 + i) for i in range(n)]
    rows = []
    # One environment at a time: the path of a MAPPO rollout worker.
    policy = DualAgentPolicy(model, cfg, spaces, scenario=scenario, deterministic=False)
    env = cluster_env.parallel_env(scenario, split="train", **env_kw)
    t0, steps = time.perf_counter(), 0
    for spec in specs:
        steps += len(collect(policy, env, [spec.env_seed], 1))
    base = steps / (time.perf_counter() - t0)
    rows.append({"batch": "1 (one env)", "decisions": steps, "seconds": steps / base, "per_s": base, "speedup": 1.0})
    for b in batches:
        envs = [cluster_env.parallel_env(scenario, split="train", **env_kw) for _ in range(b)]
        policies = [DualAgentPolicy(model, cfg, spaces, scenario=scenario, deterministic=False) for _ in range(b)]
        t0, steps = time.perf_counter(), 0
        for i in range(0, n, b):
            steps += len(collect_batched(policies, envs, specs[i:i + b], model))
        sec = time.perf_counter() - t0
        rows.append({"batch": str(b), "decisions": steps, "seconds": sec, "per_s": steps / sec,
                     "speedup": steps / sec / base})
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=100, help="jobs per episode (default 100)")
    p.add_argument("--batches", default="1,4,8", help="batch sizes (default 1,4,8)")
    p.add_argument("--preemption", action="store_true",
                   help="a preempting agent (untrained, it preempts at random: many more decisions)")
    p.add_argument("--quick", action="store_true", help="tiny episodes, batches 1,2 (a smoke run)")
    args = p.parse_args()
    jobs, batches = (20, [1, 2]) if args.quick else (args.jobs, [int(b) for b in args.batches.split(",")])
    print(f"philly-v1, {jobs} jobs per episode, preemption {'on' if args.preemption else 'off'}, "
          f"{max(batches)} episodes per row, 1 torch thread")
    print(f"{'batch':>12} {'decisions':>10} {'seconds':>8} {'decisions/s':>12} {'speed-up':>9}")
    for r in measure(jobs, batches, preemption=args.preemption):
        print(f"{r['batch']:>12} {r['decisions']:>10,} {r['seconds']:>8.1f} {r['per_s']:>12,.0f} {r['speedup']:>8.2f}x")


if __name__ == "__main__":
    main()
