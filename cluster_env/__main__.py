"""``python -m cluster_env``: run one episode of a scenario and print its metrics.

The policies here act through the action masks only: ``first-fit`` takes the lowest allowed action
of each agent (the oldest job that fits, on the lowest-numbered machine with a usable GPU) and
``random`` a uniformly random allowed action. Real baselines live in the ``baselines`` package.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import cluster_env
from cluster_env.core.metrics import format_metrics
from cluster_env.scenarios import get_scenario
from cluster_env.scenarios.base import scenario_summary


def _first_fit(obs: dict, rng: np.random.Generator) -> dict:
    return {a: int(o["action_mask"].argmax()) for a, o in obs.items()}


def _random(obs: dict, rng: np.random.Generator) -> dict:
    return {a: int(rng.choice(np.flatnonzero(o["action_mask"]))) for a, o in obs.items()}


POLICIES = {"first-fit": _first_fit, "random": _random}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m cluster_env", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="philly-v0", help="scenario name (see --list)")
    parser.add_argument("--split", default="test", choices=["train", "validation", "test"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--policy", default="first-fit", choices=sorted(POLICIES))
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    args = parser.parse_args(argv)
    if args.list:
        for name in cluster_env.list_scenarios():
            print(scenario_summary(get_scenario(name)))
        return {}
    env = cluster_env.parallel_env(args.scenario, split=args.split)
    rng = np.random.default_rng(args.seed)
    policy = POLICIES[args.policy]
    t0 = time.perf_counter()
    obs, infos = env.reset(seed=args.seed)
    steps = 0
    while env.agents:
        obs, rewards, terms, truncs, infos = env.step(policy(obs, rng))
        steps += 1
    wall = time.perf_counter() - t0
    metrics = infos["orderer"]["metrics"]
    print(f"{args.scenario} / {args.split} / seed {args.seed} / policy {args.policy}: "
          f"{env.sim.num_jobs} jobs on {env.cluster.num_machines} machines ({env.cluster.total_gpus} GPUs), "
          f"{steps} steps in {wall:.2f} s")
    print(format_metrics(metrics))
    return metrics


if __name__ == "__main__":
    main()
