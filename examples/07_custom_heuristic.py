"""Write your own heuristic in a few lines and score it against the baselines.

A heuristic orderer reads the observation (``obs["jobs"]`` rows, their ``action_mask``) and
returns an action; here *smallest GPU demand first*: among the pending jobs that fit, start the
one asking for the fewest GPUs (oldest first among equals). It is composed with a placer from
``baselines`` and scored by the same harness as every baseline, paired with the scenario's
yardstick (three windows by default: the table says it draws no verdict from them)::

    python examples/07_custom_heuristic.py --scenario philly-v0 --seeds 0 1 2
"""
from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

import baselines
from baselines.harness.report import format_table
from baselines.obs import J
from baselines.orderers import pending_rows
from baselines.yardstick import yardstick
from cluster_env import DEFAULT_SCENARIO


class SmallestDemandFirst(baselines.Orderer):
    """Start the fitting pending job that asks for the fewest GPUs."""

    name = "smallest-gpus"

    def order(self, obs: dict, info: dict) -> int:
        rows = pending_rows(obs)                                   # pending rows, oldest first
        fitting = rows[obs["action_mask"][rows] > 0]
        if len(fitting) == 0:
            return len(obs["action_mask"]) - 1                     # advance
        demand = obs["jobs"][fitting, J["gpus_log2"]]
        return int(fitting[np.argmin(demand)])                     # argmin: the oldest among ties


def make_my_policy() -> baselines.ComposedPolicy:
    return baselines.ComposedPolicy(SmallestDemandFirst(), baselines.BestFit())


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", default=DEFAULT_SCENARIO)
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--jobs-per-episode", type=int, default=None)
    args = p.parse_args(argv)

    env_kwargs = {} if args.jobs_per_episode is None else {"jobs_per_episode": args.jobs_per_episode}
    records = baselines.evaluate(make_my_policy(), args.scenario, seeds=args.seeds, env_kwargs=env_kwargs)
    # The table's reference is the scenario's yardstick, its strongest duration-blind rule.
    for name in dict.fromkeys(("fifo", "fifo+consolidate", "tiresias", yardstick(args.scenario))):
        records += baselines.evaluate(name, args.scenario, seeds=args.seeds, env_kwargs=env_kwargs)
    print(format_table(records))
    return records


if __name__ == "__main__":
    main(sys.argv[1:])
