"""Calibrate a scenario's default load: queueing, window blindness and the policies' paired ratios.

For each offered load, every policy runs on the same windows (seeds) of a split; the script prints,
per load:

* FIFO's queueing share: mean over windows of (average pending time / average JCT);
* blindness: the share of ORDER decisions at which more jobs were pending than the pending window
  shows (a heuristic then cannot see every job), for FIFO;
* per policy, the geometric mean over windows of its average JCT divided by FIFO's on the same
  window, a 95% bootstrap interval of it (``baselines.harness.stats.geo_mean_ci``), and its win
  rate against FIFO.

Usage::

    python benchmarks/calibrate_load.py --scenario philly-v1 --loads 0.7,1.0,1.3 --seeds 0-19 \\
        --policies fifo,sjf,tiresias,random [--workers 2] [--env pending_window=32]

This is how the v1 scenarios' default loads and windows were chosen (docs/reference.md). The loads
are in the default "total" measure; ``--env load_measure=concurrent`` reads them in the opt-in
measure (docs/world_model.md, section 6).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402


def _episode(task: tuple) -> dict:
    scenario, split, policy_name, seed, env_kwargs = task
    import cluster_env
    from baselines.harness.episode import env_settings
    from baselines.harness.sweep import resolve_policy

    policy = resolve_policy(policy_name, scenario)
    env = cluster_env.parallel_env(scenario, split=split, **env_settings(policy, env_kwargs))
    policy.reset(seed)
    obs, infos = env.reset(seed=seed)
    sim, k = env.unwrapped.sim, env.unwrapped.builder.K
    orders = blind = 0
    while env.agents:
        if infos["orderer"]["phase"] == "order":
            orders += 1
            blind += len(sim.pending) > k
        obs, _, _, _, infos = env.step(policy.act(obs, infos))
    m = infos["orderer"]["metrics"]
    return {"policy": policy_name, "seed": seed, "avg_jct": m["avg_jct"],
            "pending_share": m["avg_pending_time"] / m["avg_jct"], "blind": blind / max(orders, 1),
            "load": env.unwrapped.offered_load}


def main(argv: "list[str] | None" = None) -> int:
    from baselines.cli import parse_seeds
    from baselines.harness.stats import geo_mean_ci

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenario", default="philly-v1")
    p.add_argument("--split", default="test")
    p.add_argument("--loads", default="0.7,1.0,1.3")
    p.add_argument("--seeds", default="0-9")
    p.add_argument("--policies", default="fifo,sjf,tiresias,random")
    p.add_argument("--reference", default="fifo")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--env", action="append", default=[], help="extra environment argument KEY=VALUE")
    args = p.parse_args(argv)
    import ast

    extra = {}
    for item in args.env:
        key, _, value = item.partition("=")
        extra[key] = ast.literal_eval(value)
    policies = [x for x in args.policies.split(",") if x]
    if args.reference not in policies:
        policies.insert(0, args.reference)
    seeds = parse_seeds(args.seeds)
    print(f"{args.scenario}/{args.split}: {len(seeds)} windows, policies {policies}, env {extra}")
    for load in [float(x) for x in args.loads.split(",")]:
        t0 = time.perf_counter()
        tasks = [(args.scenario, args.split, pol, s, {**extra, "load": load}) for pol in policies for s in seeds]
        with ProcessPoolExecutor(args.workers) as pool:
            rows = list(pool.map(_episode, tasks))
        by = {(r["policy"], r["seed"]): r for r in rows}
        ref = np.array([by[(args.reference, s)]["avg_jct"] for s in seeds])
        share = np.mean([by[(args.reference, s)]["pending_share"] for s in seeds])
        blind = np.mean([by[(args.reference, s)]["blind"] for s in seeds])
        print(f"\nload {load:g}: {args.reference} queueing share {share:.2f}, blind decisions {blind:.3f}, "
              f"mean {args.reference} JCT {ref.mean():,.0f} s  ({time.perf_counter() - t0:.0f} s)")
        for pol in policies:
            jct = np.array([by[(pol, s)]["avg_jct"] for s in seeds])
            ratio = jct / ref
            g, lo, hi = geo_mean_ci(ratio)
            wins = float(np.mean(jct < ref))
            print(f"  {pol:<24} mean JCT {jct.mean():>10,.0f}  ratio {g:.3f} [{lo:.3f}, {hi:.3f}]  win {wins:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
