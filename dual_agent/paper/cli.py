"""``cluster-bench train``: train the dual agent with MAPPO (arguments and command).

Kept free of torch at import time so that ``cluster-bench --help`` stays fast.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Optional

#: ``--smoke``: a tiny run that CI executes (seconds, not a useful agent).
SMOKE = {"timesteps": 600, "steps_per_worker": 150, "jobs_per_episode": 30, "minibatch": 128, "epochs": 2,
         "eval_every": 1, "eval_seeds": 1, "n_envs": 2, "validation": "split"}
#: Test windows the finished run is scored on by default (a claim rests on 100; docs/design.md section 9).
TEST_WINDOWS = 100
#: ``--smoke --algorithm rloo``: two windows, two rollouts each, tiny episodes.
SMOKE_RLOO = {"timesteps": 300, "jobs_per_episode": 20, "minibatch": 128, "epochs": 2, "eval_every": 1,
              "eval_seeds": 1, "group_windows": 2, "group_size": 2, "validation": "split"}


def register_command(subparsers: "argparse._SubParsersAction") -> None:
    """Entry point ``cluster_bench.commands``: add ``cluster-bench train`` to the CLI."""
    train = subparsers.add_parser("train", help="train the dual agent with MAPPO or RLOO (needs the rl extra)",
                                  description="Train the dual agent with MAPPO or RLOO (needs the rl extra).")
    add_train_arguments(train)
    train.set_defaults(func=cmd_train)


def add_train_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", default="philly-v0", help="scenario to train on (cluster-bench scenarios lists them)")
    p.add_argument("--timesteps", type=int, default=None, help="environment steps (default 200,000)")
    p.add_argument("--out", default=None, help="run folder (default runs/dual-<scenario>)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n-envs", type=int, default=None, help="rollout worker processes (default 2; 0 = in-process)")
    p.add_argument("--steps-per-worker", type=int, default=None, help="decisions per worker per iteration")
    p.add_argument("--jobs-per-episode", type=int, default=None, help="shorter training episodes")
    p.add_argument("--lr", type=float, default=None, help="learning rate (default 3e-4)")
    p.add_argument("--entropy-coef", type=float, default=None)
    p.add_argument("--imitate", default=None, metavar="POLICY",
                   help="warm start: first imitate this baseline's decisions (e.g. fifo+fastest)")
    p.add_argument("--imitate-iterations", type=int, default=None, help="iterations of imitation (default 0)")
    p.add_argument("--teacher", choices=("best-known",), default=None,
                   help="warm start by DAgger from hindsight teachers: each training window's best-known schedule "
                        "(the hindsight search's, rules that read durations left out) labels the states the "
                        "student reaches; "
                        "needs --agent-env preemption=True --observation extended-v2")
    p.add_argument("--teacher-windows", type=int, default=None,
                   help="training windows (train split, seeds 0 ..) that get a teacher (default 24)")
    p.add_argument("--teacher-episodes", type=int, default=None,
                   help="compiled episodes of the hindsight search per teacher window (default 60)")
    p.add_argument("--teacher-file", default=None, metavar="JSON",
                   help="cache of the teachers, read and extended (default <run folder>/teachers.json)")
    p.add_argument("--dagger-iterations", type=int, default=None,
                   help="DAgger iterations before the reinforcement learning ones (default 0; with --resume: "
                        "a run stopped in its DAgger phase goes on with RL when this is the iterations it completed)")
    p.add_argument("--dagger-episodes", type=int, default=None,
                   help="teacher windows the student plays per DAgger iteration (default 4)")
    p.add_argument("--dagger-decay", type=float, default=None,
                   help="probability that the teacher plays a decision: decay ** iteration (default 0.5)")
    p.add_argument("--dagger-epochs", type=int, default=None,
                   help="passes of cross-entropy over the aggregated labels per DAgger iteration (default 2)")
    p.add_argument("--dagger-workers", type=int, default=None,
                   help="processes that play a DAgger iteration's episodes (default 1: this process; any count "
                        "gives the same weights)")
    p.add_argument("--eval-every", type=int, default=None, help="iterations between validation runs (default 10)")
    p.add_argument("--eval-seeds", type=int, default=None, help="validation episodes per evaluation (default 2)")
    p.add_argument("--validation", choices=("matched", "split"), default=None,
                   help="validation windows: matched to the test period's contention by LAS's preemptions per "
                        "window (default; see dual_agent.validation) or the validation split's seeds (--smoke)")
    p.add_argument("--max-minutes", type=float, default=None, help="stop after this much wall time")
    p.add_argument("--hidden", type=int, default=None, help="network width (default 64)")
    p.add_argument("--orderer", default="learned", help="'learned' or a heuristic orderer (ablation)")
    p.add_argument("--placer", default="learned", help="'learned' or a heuristic placer (ablation)")
    p.add_argument("--no-gp", action="store_true", help="feed zeros instead of the RWGP posterior (ablation)")
    p.add_argument("--prior", default=None, metavar="POLICY",
                   help="residual policy on this heuristic (e.g. las+fastest): logits = network + bonus on the "
                        "heuristic's action; the output layers start at zero, so the agent starts as the heuristic")
    p.add_argument("--prior-bonus", type=float, default=None, help="logit bonus of the prior's action (default 3)")
    p.add_argument("--no-work-conserving", action="store_true",
                   help="let the orderer idle while a job could start (needed to imitate Tiresias)")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                   help="environment override used in training and evaluation, repeatable")
    p.add_argument("--agent-env", action="append", default=[], metavar="KEY=VALUE",
                   help="setting the agent needs wherever it runs (stored in the checkpoint), e.g. preemption=True")
    p.add_argument("--algorithm", choices=("mappo", "rloo"), default=None,
                   help="mappo (default: worker processes, GAE critic) or rloo (same-window groups, batched rollouts)")
    p.add_argument("--group-windows", type=int, default=None, help="rloo: windows per iteration (default 2)")
    p.add_argument("--group-size", type=int, default=None, help="rloo: rollouts per window (default 4)")
    p.add_argument("--baseline", choices=("time", "episode", "critic"), default=None,
                   help="rloo: leave-one-out return-to-go at the same simulated time (default), whole return, "
                        "or the critic (GAE)")
    p.add_argument("--advantage-scale", choices=("none", "scale", "log"), default=None,
                   help="rloo: per-window normalisation of the advantages (default log)")
    p.add_argument("--device", default=None, help="torch device of the networks: cpu (default), cuda, cuda:N")
    p.add_argument("--observation", choices=("default", "extended", "extended-v2"), default=None,
                   help="observation layout the agent reads (stored in the checkpoint; extended: tenant "
                        "statistics, attained service, tick phase; extended-v2: also the running jobs' placements)")
    p.add_argument("--test-windows", type=int, default=None,
                   help=f"test windows the best checkpoint is scored on at the end, paired with --test-reference "
                        f"(default {TEST_WINDOWS}; 0 with --smoke; 0: none)")
    p.add_argument("--test-reference", default=None, metavar="POLICY",
                   help="the reference of that report (default: the prior, else las + the placer validation "
                        "measures contention with)")
    p.add_argument("--resume", default=None, metavar="LAST_PT", help="continue the run of this last.pt")
    p.add_argument("--overwrite", action="store_true",
                   help="start a new run in an --out that holds one (its best.pt, last.pt and log.csv are "
                        "replaced); without it such a folder is refused")
    p.add_argument("--smoke", action="store_true", help="a tiny run for CI (seconds)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def cmd_train(args: argparse.Namespace) -> int:
    import dual_agent._torch  # noqa: F401  (without torch: an ImportError that names the extra)
    import torch

    from baselines.cli import parse_env_overrides
    from baselines.harness.files import reserve_folder
    from baselines.startup import INTERRUPTED, is_interrupt
    from dual_agent.paper.config import DualAgentConfig, TrainConfig
    from dual_agent.paper.checkpoint import load_checkpoint, train_state
    from dual_agent.paper.mappo import MAPPOTrainer
    from dual_agent.paper.rloo import RLOOTrainer, make_trainer
    from dual_agent.shared import check_run_folder

    torch.set_num_threads(1)
    out = Path(args.out or f"runs/dual-{args.scenario}{'-smoke' if args.smoke else ''}")
    # Before the networks are built: a folder that holds a run is kept unless --overwrite.
    check_run_folder(Path(args.resume).parent if args.resume and not args.out else out,
                     ("best.pt", "last.pt", "log.csv"), "last.pt", args.overwrite, args.resume)
    if args.resume:
        algorithm = train_state(load_checkpoint(args.resume))["config"].get("algorithm", "mappo")
        cls = RLOOTrainer if algorithm == "rloo" else MAPPOTrainer
        trainer = cls.resume(args.resume, out_dir=args.out, timesteps=args.timesteps,
                             dagger_iterations=args.dagger_iterations)
    else:
        train_kw = dict(SMOKE_RLOO if args.algorithm == "rloo" else SMOKE) if args.smoke else {}
        for key, value in (("timesteps", args.timesteps), ("n_envs", args.n_envs),
                           ("steps_per_worker", args.steps_per_worker), ("jobs_per_episode", args.jobs_per_episode),
                           ("learning_rate", args.lr), ("entropy_coef", args.entropy_coef),
                           ("eval_every", args.eval_every), ("eval_seeds", args.eval_seeds), ("imitate", args.imitate),
                           ("imitate_iterations", args.imitate_iterations), ("algorithm", args.algorithm),
                           ("group_windows", args.group_windows), ("group_size", args.group_size),
                           ("baseline", args.baseline), ("advantage_scale", args.advantage_scale),
                           ("device", args.device), ("validation", args.validation), ("teacher", args.teacher),
                           ("teacher_windows", args.teacher_windows), ("teacher_episodes", args.teacher_episodes),
                           ("teacher_file", args.teacher_file), ("dagger_iterations", args.dagger_iterations),
                           ("dagger_episodes", args.dagger_episodes), ("dagger_decay", args.dagger_decay),
                           ("dagger_epochs", args.dagger_epochs), ("dagger_workers", args.dagger_workers)):
            if value is not None:
                train_kw[key] = value
        agent_env = parse_env_overrides(args.agent_env)
        if args.observation is not None:
            agent_env["observation"] = args.observation
        agent_kw = {"orderer": args.orderer, "placer": args.placer, "use_gp": not args.no_gp,
                    "work_conserving": not args.no_work_conserving, "env_overrides": agent_env}
        if args.hidden is not None:
            agent_kw["hidden"] = args.hidden
        if args.prior is not None:
            agent_kw["prior"] = args.prior
        if args.prior_bonus is not None:
            if args.prior is None:
                raise ValueError("--prior-bonus needs --prior (the heuristic whose action gets the bonus)")
            agent_kw["prior_bonus"] = args.prior_bonus
        train = TrainConfig(scenario=args.scenario, seed=args.seed, env_kwargs=parse_env_overrides(args.env),
                            **train_kw)
        trainer = make_trainer(train, DualAgentConfig(**agent_kw), out)
    t0 = time.perf_counter()
    # The run folder: checked (no link where a file goes) and locked against a second run, as `run` does.
    with reserve_folder(trainer.out_dir, flag="--out", names=("best.pt", "last.pt", "log.csv", "config.json")):
        try:
            result = trainer.train(progress=not args.quiet, max_minutes=args.max_minutes)
        except (KeyboardInterrupt, SystemError) as exc:     # SystemError: Ctrl-C inside a compiled kernel
            if not is_interrupt(exc):
                raise
            last = trainer.out_dir / "last.pt"      # saved whole after every iteration (atomic)
            kept = f"; resume with: cluster-bench train --resume {last}" if last.is_file() else "; nothing saved yet"
            print(f"\ncluster-bench train: interrupted{kept}", file=sys.stderr)
            return INTERRUPTED
    wall = time.perf_counter() - t0
    summary = {"scenario": trainer.train_cfg.scenario, "iterations": result.iterations,
               "timesteps": result.timesteps, "wall_s": round(wall, 1),
               "best_val_avg_jct": result.best_val_avg_jct, "best": str(result.best_path),
               "last": str(result.last_path), "log": str(result.out_dir / "log.csv")}
    windows = args.test_windows if args.test_windows is not None else (0 if args.smoke else TEST_WINDOWS)
    if windows < 0:
        raise ValueError(f"--test-windows must be >= 0, got {windows}")
    if windows:
        reference = args.test_reference or trainer.agent_cfg.prior or f"las+{trainer.validation_placer()}"
        summary["test"] = test_report(result.best_path, trainer.train_cfg.scenario, reference, windows,
                                      dict(trainer.train_cfg.env_kwargs))
    print(json.dumps(summary, indent=2))
    print(f"\nscore it against every heuristic (test windows 0-{TEST_WINDOWS - 1}, paired): python "
          f"benchmarks/eval_dual_paired.py {result.best_path} --scenario {trainer.train_cfg.scenario} "
          f"--references agnostic")
    return 0


def test_report(checkpoint: "str | Path", scenario: str, reference: str, windows: int,
                env_kwargs: Optional[dict] = None) -> dict:
    """The checkpoint against ``reference`` on test windows ``0 .. windows - 1``, paired: the
    geometric mean of the per-window ratio of average JCT, its 95% bootstrap interval and the win
    rate, printed (with a note under 100 windows) and returned."""
    import baselines
    from baselines.harness.stats import paired_summary
    from dual_agent.paper.policy import DualAgentPolicy

    agent = DualAgentPolicy.load(str(checkpoint), scenario=scenario, name="dual")
    seeds = list(range(windows))
    records = []
    for who in (agent, reference):
        records += baselines.evaluate(who, scenario, split="test", seeds=seeds, env_kwargs=env_kwargs or None,
                                      backend="serial")
    s = paired_summary(records, "dual", reference)
    distinct = getattr(s, "distinct", s.n)
    note = "" if distinct >= TEST_WINDOWS else f" (fewer than {TEST_WINDOWS} windows: not enough to carry a claim)"
    print(f"test windows 0-{windows - 1}: {Path(checkpoint).name} / {reference} = {s.geo_mean:.3f} "
          f"[{s.ci_low:.3f}, {s.ci_high:.3f}] (95% bootstrap interval of the geometric mean), win rate "
          f"{s.win_rate:.2f}, over {distinct} distinct windows{note}")
    return {"windows": distinct, "reference": reference, "ratio": s.geo_mean, "ci_low": s.ci_low, "ci_high": s.ci_high,
            "win_rate": s.win_rate}
