"""Watch a schedule: the text rendering of the cluster during an episode, then a timeline plot.

The environment renders itself as text (``render_mode="ansi"``: one line per machine, one cell
per GPU with the job holding it) or as an image (``"rgb_array"``). The harness records which job
held which machine and when, and draws it as a timeline (one row per machine)::

    python examples/06_render_timeline.py --scenario toy-v0 --policy sjf --out runs/timeline
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import baselines
import cluster_env
from baselines.harness import run_episode
from baselines.harness.episode import env_settings
from baselines.harness.plots import plot_timeline


def main(argv=None) -> Path:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", default="toy-v0", help=f"one of {cluster_env.list_scenarios()}")
    p.add_argument("--policy", default="sjf", help="a name for baselines.make_policy")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--frames", type=int, default=3, help="text frames to print")
    p.add_argument("--jobs-per-episode", type=int, default=None)
    p.add_argument("--out", default="runs/timeline")
    args = p.parse_args(argv)

    overrides = {} if args.jobs_per_episode is None else {"jobs_per_episode": args.jobs_per_episode}
    policy = baselines.make_policy(args.policy)
    env = cluster_env.parallel_env(args.scenario, split="test", render_mode="ansi",
                                   **env_settings(policy, overrides))
    # Text frames: the first few decision epochs where the clock moved.
    policy.reset(args.seed)
    obs, infos = env.reset(seed=args.seed)
    shown, last_time = 0, None
    while env.agents and shown < args.frames:
        obs, _, _, _, infos = env.step(policy.act(obs, infos))
        if env.agents and infos["orderer"]["time"] != last_time:
            last_time = infos["orderer"]["time"]
            print(env.render(), "\n")
            shown += 1

    # The whole episode again, recorded, and its timeline.
    result = run_episode(policy, args.scenario, "test", args.seed, overrides, record=True)
    path = plot_timeline(result, Path(args.out) / f"timeline_{args.scenario}_{args.policy.replace('+', '_')}.png")
    print(f"{args.policy} on {args.scenario}/test seed {args.seed}: average JCT {result.record['avg_jct']:,.1f} s; "
          f"{len([a for a in result.allocations if a[2] is not None])} job starts; timeline: {path}")
    return path


if __name__ == "__main__":
    main(sys.argv[1:])
