"""Train the orderer and the placer as two RLlib PPO policies on the PettingZoo env and score them.

RLlib sees the parallel env through its own PettingZoo wrapper, ``ParallelPettingZooEnv``, around
``baselines.rllib.MaskedFlatParallelEnv`` (each agent's observation as one flat vector whose tail
is its action mask). Each agent is its own policy (``policy_mapping_fn``: agent id -> module id),
an RLlib PPO module whose logits of forbidden actions are masked out, so no forbidden action is
ever sampled. Training runs in this process on the scenario's ``train`` split, in windows of
``--jobs-per-episode`` jobs.

The trained modules are then wrapped as a harness policy (``baselines.rllib.from_rllib``) and
scored, greedy, on full ``test`` episodes next to baselines on the same seeds, through the same
harness as ``cluster-bench run``: a paired table (ratio of average JCT to FIFO with a 95%
bootstrap interval, wins).

Needs the ``rllib`` extra (``pip install '.[rllib]'``). The default run trains for a few minutes
on the benchmark's default scenario; ``--tiny`` is a seconds-long check of the whole path::

    python examples/09_rllib_dual_agent.py
    python examples/09_rllib_dual_agent.py --tiny
    python examples/09_rllib_dual_agent.py --scenario philly-hetero-v1 --iterations 100
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from cluster_env.scenarios.registry import DEFAULT_SCENARIO  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", default=DEFAULT_SCENARIO)
    p.add_argument("--iterations", type=int, default=30, help="PPO iterations (about 6 s each on one core)")
    p.add_argument("--train-batch", type=int, default=2000, help="env steps sampled per iteration")
    p.add_argument("--minibatch", type=int, default=250)
    p.add_argument("--epochs", type=int, default=4, help="passes over each batch")
    p.add_argument("--jobs-per-episode", type=int, default=100, help="jobs per training window")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--baselines", default="fifo,fifo+fastest,tiresias", help="comma-separated baselines")
    p.add_argument("--eval-seeds", type=int, default=3, help="test seeds 0 .. N-1")
    p.add_argument("--eval-jobs", type=int, default=None, help="jobs per test episode (default: the scenario's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tiny", action="store_true",
                   help="one small iteration and one short test episode: checks the path in seconds")
    args = p.parse_args(argv)
    if args.tiny:
        args.iterations, args.train_batch, args.minibatch, args.epochs = 1, 200, 100, 1
        args.jobs_per_episode, args.eval_seeds, args.eval_jobs = 20, 1, args.eval_jobs or 20
    return args


def main(argv=None) -> list[dict]:
    args = parse_args(argv)
    from baselines.rllib import dual_ppo_config, from_rllib, require_rllib

    try:
        require_rllib()
    except ImportError as e:
        raise SystemExit(f"examples/09: {e}") from None
    import ray

    from baselines import evaluate
    from baselines.harness.report import format_table, paired_verdict
    from baselines.yardstick import yardstick

    config = dual_ppo_config(args.scenario, {"jobs_per_episode": args.jobs_per_episode}, hidden=args.hidden,
                             train_batch=args.train_batch, minibatch=args.minibatch, epochs=args.epochs,
                             lr=args.lr, seed=args.seed)
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    algo = config.build_algo()
    t0 = time.perf_counter()
    for it in range(args.iterations):
        result = algo.train()
        runners = result.get("env_runners", {})
        ret = runners.get("episode_return_mean", float("nan"))
        print(f"iteration {it + 1}/{args.iterations}: mean training return {ret:.2f} "
              f"(about minus the window's average JCT in hours), {time.perf_counter() - t0:.0f} s", flush=True)
    train_s = time.perf_counter() - t0

    agent = from_rllib(algo, name="rllib (this run)")
    algo.stop()
    seeds = list(range(args.eval_seeds))
    env_kwargs = {"jobs_per_episode": args.eval_jobs} if args.eval_jobs else {}
    records = evaluate(agent, args.scenario, split="test", seeds=seeds, env_kwargs=env_kwargs, backend="serial")
    # The table's reference, the scenario's yardstick (its strongest duration-blind rule), is always scored.
    names = [n.strip() for n in args.baselines.split(",") if n.strip()]
    for name in dict.fromkeys(names + [yardstick(args.scenario)]):
        records += evaluate(name, args.scenario, split="test", seeds=seeds, env_kwargs=env_kwargs)
    print(format_table(records))
    # Paired with the yardstick; no verdict below 10 distinct windows (the default is 3: a smoke figure).
    print(f"\nRLlib (this run, {args.iterations * args.train_batch:,} env steps, {train_s:.0f} s of training), "
          f"paired with the yardstick:\n{paired_verdict(records, agent.name)}")
    ray.shutdown()
    return records


if __name__ == "__main__":
    main()
