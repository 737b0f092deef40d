"""Run your own job trace on your own cluster, from two CSV files.

The defaults are the small files in ``examples/data``: 40 jobs of seven Gavel job types on a
cluster of two 4-GPU K80 machines, one 8-GPU V100 and one 8-GPU A100. Point ``--workload-csv`` and
``--cluster-csv`` at yours (accepted column names: ``cluster_env/loaders/workload_csv.py`` and
``cluster_env/loaders/cluster_csv.py``; bad rows get an error naming the file, row and field)::

    python examples/05_custom_trace_and_cluster.py --workload-csv jobs.csv --cluster-csv nodes.csv

Durations are read as seconds on the base scenario's reference GPU (P100 for ``philly-v0``); the
whole file is one episode in every split.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import baselines
import cluster_env
from baselines.harness.report import format_table
from baselines.yardstick import yardstick
from cluster_env.loaders import load_cluster_csv, load_workload_csv

DATA = Path(__file__).resolve().parent / "data"


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workload-csv", default=str(DATA / "my_jobs.csv"))
    p.add_argument("--cluster-csv", default=str(DATA / "my_cluster.csv"))
    # philly-v0: a v0 base plays your trace at its own times (philly-v1 would rescale it to load 1.5).
    p.add_argument("--base-scenario", default="philly-v0", help="world model and settings to start from")
    p.add_argument("--policies", nargs="+", default=["fifo", "fifo+fastest", "sjf+fastest", "tiresias+fastest"])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    args = p.parse_args(argv)

    # What the loaders made of the files: kept rows, filtered rows with reasons, notes.
    workload = load_workload_csv(args.workload_csv)
    cluster = load_cluster_csv(args.cluster_csv)
    print(f"workload: {workload.num_jobs} jobs ({workload.report.rows_read} rows read, "
          f"filtered {workload.report.filtered or 'none'})")
    for note in workload.report.notes:
        print(f"  note: {note}")
    print(f"cluster: {cluster.num_machines} machines, {cluster.total_gpus} GPUs {cluster.gpus_of_type()}")

    env_kwargs = {"workload_csv": args.workload_csv, "cluster_csv": args.cluster_csv}
    env = cluster_env.parallel_env(args.base_scenario, split="test", **env_kwargs)
    print(f"scenario: {env.scenario.name}")
    print(env.world_summary().line() + "\n")          # the world of your hardware (docs/world_model.md)
    records = []
    # The table's reference: the base scenario's yardstick, its strongest duration-blind rule.
    for name in dict.fromkeys([*args.policies, yardstick(args.base_scenario)]):
        records += baselines.evaluate(name, args.base_scenario, seeds=args.seeds, env_kwargs=env_kwargs,
                                      backend="serial")
    print(format_table(records))
    return records


if __name__ == "__main__":
    main(sys.argv[1:])
