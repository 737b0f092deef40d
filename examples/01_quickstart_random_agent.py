"""Quickstart: a random masked agent on the PettingZoo parallel env, then the episode's metrics.

Both agents (``orderer`` and ``placer``) pick a uniformly random action among those their
``action_mask`` allows; in each phase the idle agent's mask allows only its no-op, so the same
line serves both. Needs only the base install (numpy, gymnasium, pettingzoo)::

    python examples/01_quickstart_random_agent.py --scenario philly-v0 --split test --seed 0
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import cluster_env
from cluster_env import DEFAULT_SCENARIO
from cluster_env.core.metrics import format_metrics


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", default=DEFAULT_SCENARIO, help=f"one of {cluster_env.list_scenarios()}")
    p.add_argument("--split", default="test", choices=["train", "validation", "test"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs-per-episode", type=int, default=None, help="default: the scenario's")
    args = p.parse_args(argv)

    overrides = {} if args.jobs_per_episode is None else {"jobs_per_episode": args.jobs_per_episode}
    env = cluster_env.parallel_env(args.scenario, split=args.split, **overrides)
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    obs, infos = env.reset(seed=args.seed)
    steps, ret = 0, 0.0
    while env.agents:
        actions = {agent: int(rng.choice(np.flatnonzero(o["action_mask"]))) for agent, o in obs.items()}
        obs, rewards, terminations, truncations, infos = env.step(actions)
        ret += rewards["orderer"]
        steps += 1
    metrics = infos["orderer"]["metrics"]
    print(f"{args.scenario} / {args.split} / seed {args.seed}: random masked agent, {steps} steps in "
          f"{time.perf_counter() - t0:.2f} s, return {ret:.4f} (minus the average JCT in hours)")
    print(format_metrics(metrics))
    return metrics


if __name__ == "__main__":
    main(sys.argv[1:])
