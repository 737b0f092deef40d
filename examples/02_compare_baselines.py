"""Compare the baselines on a scenario: a table of mean ± std per metric and a JCT CDF plot.

Runs every named baseline (FIFO, SJF, Tiresias, random), two compositions and the scenario's
yardstick (its strongest duration-blind rule, the table's reference) on the test split of a
scenario, one episode per seed, in parallel local processes, through the same harness as
``cluster-bench run``. Three windows by default: a quick look, no verdict (a verdict needs 10
distinct windows, a claim 100: ``--seeds`` takes more)::

    python examples/02_compare_baselines.py --scenario philly-v0 --seeds 0 1 2 --out runs/compare
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import cluster_env
from cluster_env import DEFAULT_SCENARIO
from baselines.harness import make_tasks, run_tasks
from baselines.harness.plots import plot_jct_cdf
from baselines.harness.report import format_table, write_csv
from baselines.harness.stats import MIN_VERDICT_WINDOWS
from baselines.yardstick import yardstick

DEFAULT_POLICIES = ["random", "fifo", "sjf", "tiresias", "fifo+fastest", "tiresias+fastest"]


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", default=DEFAULT_SCENARIO, help=f"one of {cluster_env.list_scenarios()}")
    p.add_argument("--policies", nargs="+", default=None,
                   help=f"names for baselines.make_policy (default {' '.join(DEFAULT_POLICIES)} and the yardstick)")
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--jobs-per-episode", type=int, default=None, help="default: the scenario's")
    p.add_argument("--out", default="runs/compare", help="folder for results.csv and jct_cdf.png")
    args = p.parse_args(argv)

    env_kwargs = {} if args.jobs_per_episode is None else {"jobs_per_episode": args.jobs_per_episode}
    if args.policies is None:          # the table's reference, the scenario's yardstick, is always there
        args.policies = DEFAULT_POLICIES + [n for n in [yardstick(args.scenario)] if n not in DEFAULT_POLICIES]
    tasks = make_tasks(args.policies, [args.scenario], "test", args.seeds, env_kwargs, record_seeds=args.seeds)
    results = run_tasks(tasks, progress=True)
    records = [r.record for r in results]
    print(format_table(records))
    out = Path(args.out)
    print(f"\nwrote {write_csv(records, out / 'results.csv')}")
    print(f"wrote {plot_jct_cdf(results, out / 'jct_cdf.png', title=f'{args.scenario} / test')}")
    best = min(args.policies, key=lambda n: sum(r["avg_jct"] for r in records if r["policy"] == n))
    windows = len({r["window"] for r in records})
    print(f"lowest average JCT on these {windows} windows: {best}"
          + ("" if windows >= MIN_VERDICT_WINDOWS else f" (a ranking of means, not a verdict: that needs "
                                                       f"{MIN_VERDICT_WINDOWS} distinct windows)"))
    return records


if __name__ == "__main__":
    main(sys.argv[1:])
