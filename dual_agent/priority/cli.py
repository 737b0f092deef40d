"""``cluster-bench train-priority``: train the priority-mode ordering agent with ES.

No torch: the priority agent is a numpy policy (:mod:`dual_agent.priority`, :mod:`dual_agent.priority.es`).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys

#: ``--smoke``: a tiny run that CI executes (seconds, not a useful agent).
SMOKE = {"iterations": 2, "pairs": 1, "windows": 1, "jobs_per_episode": 20, "eval_every": 1, "eval_seeds": 1,
         "eval_jobs_per_episode": 20, "workers": 1, "test_windows": 2}


def register_command(subparsers: "argparse._SubParsersAction") -> None:
    """Entry point ``cluster_bench.commands``: add ``cluster-bench train-priority`` to the CLI."""
    from dual_agent.priority.es import OBJECTIVES

    p = subparsers.add_parser(
        "train-priority", help="train the priority-mode agents (LAS + a learned score, a residual placer) with ES",
        description="Train the dual agent in priority mode: the ordering agent runs LAS's rule with the key "
                    "log1p(attained) + a learned score of each candidate's features, the placing agent a "
                    "learned residual score on top of a heuristic placer (--learn), by antithetic "
                    "evolution strategies on same-window pairs. Writes best.priority.json, "
                    "last.priority.json and log.csv to the run folder.")
    p.add_argument("--scenario", default=None, help="scenario to train on (default philly-hetero-v1)")
    p.add_argument("--placer", default=None, help="heuristic placer the orderer is composed with (default fastest)")
    p.add_argument("--hidden", type=int, default=None, help="0: linear score (default); H: plus a tanh layer of H units")
    p.add_argument("--sigma", type=float, default=None, help="perturbation scale (default 0.3)")
    p.add_argument("--lr", type=float, default=None, help="Adam step (default 0.1)")
    p.add_argument("--pairs", type=int, default=None, help="antithetic directions per iteration (default 6)")
    p.add_argument("--windows", type=int, default=None, help="training windows per iteration (default 16)")
    p.add_argument("--jobs-per-episode", type=int, default=None,
                   help="jobs of a training window (default: the scenario's full windows)")
    p.add_argument("--train-load", type=float, default=None,
                   help="offered load of the training windows (default: the scenario's; validation keeps it)")
    p.add_argument("--train-range", type=_train_range, default=None, metavar="A,B",
                   help="draw the training windows from this fraction of the train split (e.g. 0.8,1: its most "
                        "recent fifth, nearest the validation and test periods; default all of it)")
    p.add_argument("--iterations", type=int, default=None, help="iterations (default 40)")
    p.add_argument("--max-minutes", type=_positive_minutes, default=None,
                   help="stop after this much wall time (a positive number of minutes)")
    p.add_argument("--eval-every", type=int, default=None, help="iterations between validation runs (default 5)")
    p.add_argument("--eval-seeds", type=int, default=None, help="full validation windows (default 100)")
    p.add_argument("--workers", type=int, default=None, help="episode processes (default 2)")
    p.add_argument("--backend", choices=("process", "ray"), default=None,
                   help="where episodes run: process (a fork pool of --workers, default) or ray (a local Ray "
                        "instance of --workers CPUs, or --ray-address); the same seed gives the same weights")
    p.add_argument("--ray-address", default=None, help="an existing Ray cluster (backend ray)")
    p.add_argument("--engine", choices=("auto", "compiled", "api"), default=None,
                   help="where episodes run: compiled (linear score, ~100x faster), api (--hidden too), auto "
                        "(default: compiled when possible)")
    p.add_argument("--no-tenant-features", dest="tenant_features", action="store_false", default=None,
                   help="keep the tenant statistics' weights at zero (ablation)")
    p.add_argument("--pairing", choices=("same-window", "independent", "reference"), default=None,
                   help="same-window: both signs of a direction play the same windows (default); independent: "
                        "every episode its own window; reference: independent, minus LAS's log cost on each "
                        "window (the exact input-dependent baseline; one more episode per episode)")
    p.add_argument("--learn", choices=("orderer", "placer", "both"), default=None,
                   help="which agents learn: orderer (default; the placer is --placer), placer (LAS orders; a "
                        "residual scorer learns on top of --placer) or both")
    p.add_argument("--validation", choices=("matched", "split"), default=None,
                   help="validation windows: matched to the test period's contention by LAS's preemptions per "
                        "window (default; see dual_agent.validation) or the validation split's seeds")
    p.add_argument("--test-windows", type=int, default=None,
                   help="test windows the best weights are scored on at the end, paired with LAS + the placer "
                        "(default 100; 0: none)")
    p.add_argument("--migrate", type=_threshold, default=None, metavar="THRESHOLD",
                   help="add las-migrate's rule (move a running one-machine job to a free machine at least "
                        "THRESHOLD times faster when the agent would advance at a tick; 1.5 is las-migrate's): "
                        "the untrained agent is then las-migrate (default: no migration, the untrained agent "
                        "is LAS)")
    p.add_argument("--objective", choices=OBJECTIVES, default=None,
                   help="episode metric ES minimises (default avg_jct); a service objective of "
                        "docs/objectives.md (higher-is-better ones as 1 - metric + 0.01 x avg JCT in hours)")
    p.add_argument("--init", default=None, metavar="PRIORITY_JSON",
                   help="start from this agent's weights (e.g. a shipped one, to fine-tune it; same placer, "
                        "--migrate and --hidden); the untrained agent stays the validation reference and the "
                        "start is the best until weights validate better")
    p.add_argument("--seed", type=int, default=None, help="random seed of the run (default 0)")
    p.add_argument("--out", default=None, help="run folder (default runs/priority-<scenario>)")
    p.add_argument("--smoke", action="store_true", help="a tiny run for CI (seconds)")
    p.add_argument("--resume", default=None, metavar="LAST_PRIORITY_JSON",
                   help="continue the run of this last.priority.json with its own settings (the same weights as "
                        "a run never stopped); only --iterations, --max-minutes, --workers, --backend, "
                        "--ray-address and --out may change")
    p.add_argument("--overwrite", action="store_true",
                   help="start a new run in an --out that holds one (its best.priority.json, last.priority.json "
                        "and log.csv are replaced); without it such a folder is refused")
    p.set_defaults(func=cmd_train_priority)


#: Scenario trained on when --scenario is not given.
DEFAULT_SCENARIO = "philly-hetero-v1"
#: What ``--resume`` may change: the budget and where episodes run, never what the run learns from.
RESUMABLE = ("iterations", "max_minutes", "workers", "backend", "ray_address")
#: Settings whose flag is not ``--`` + the name with dashes.
FLAGS = {"tenant_features": "--no-tenant-features"}
#: Exit code of a run ended by Ctrl-C (the shell's 128 + SIGINT), as for ``cluster-bench run``.
INTERRUPTED = 130


def _number_above(text: str, low: float, what: str) -> float:
    """A finite number > ``low``, or an argparse error saying it must be ``what``."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > low):
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
    return value


def _positive_minutes(text: str) -> float:
    """``--max-minutes``: a positive, finite number (0 or less would save the untrained agent as best)."""
    return _number_above(text, 0.0, "a positive number of minutes")


def _threshold(text: str) -> float:
    """``--migrate``: a finite speed-up > 1."""
    return _number_above(text, 1.0, "a speed-up threshold > 1 (e.g. 1.5)")


def _train_range(text: str) -> tuple[float, float]:
    """``--train-range``: ``A,B`` with 0 <= A < B <= 1."""
    from cluster_env.scenarios.base import check_train_range

    try:
        return check_train_range(text.split(","))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).replace("train_range", "--train-range")) from None


def cmd_train_priority(args: argparse.Namespace) -> int:
    from baselines.harness.files import reserve_folder
    from dual_agent.priority.es import ESConfig, SettingError, train_priority
    from dual_agent.priority.agent import SUFFIX
    from dual_agent.shared import check_run_folder

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    kw = dict(SMOKE) if args.smoke else {}
    for key in ("placer", "hidden", "sigma", "lr", "pairs", "windows", "iterations", "max_minutes", "eval_every",
                "eval_seeds", "workers", "backend", "ray_address", "seed", "engine", "tenant_features", "pairing",
                "learn", "train_load", "train_range", "validation", "test_windows", "migrate",
                "objective", "init"):
        value = getattr(args, key)
        if value is not None:
            kw[key] = value
    if args.jobs_per_episode is not None:
        kw["jobs_per_episode"] = args.jobs_per_episode
    state = None
    try:
        if args.resume:
            config, state = _resumed_config(args, kw)
        else:
            scenario = args.scenario or DEFAULT_SCENARIO
            kw["out"] = args.out or f"runs/priority-{scenario}{'-smoke' if args.smoke else ''}"
            config = ESConfig(scenario=scenario, **kw)
    except SettingError as exc:      # a setting given here: named by its flag
        raise ValueError(exc.named(FLAGS.get(exc.field, "--" + exc.field.replace("_", "-")))) from None
    command = "cluster-bench " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    # The run folder: checked (no link where a file goes) and locked against a second run, as `run` does.
    names = (f"best{SUFFIX}", f"last{SUFFIX}", "log.csv")
    with reserve_folder(config.out, flag="--out", names=names):
        check_run_folder(config.out, names, f"last{SUFFIX}", args.overwrite, args.resume)
        result = train_priority(config, command=command, state=state)
    if result.interrupted:
        print(f"cluster-bench train-priority: interrupted; resume with: cluster-bench train-priority --resume "
              f"{result.run_dir / ('last' + SUFFIX)}", file=sys.stderr)
        return INTERRUPTED
    best = result.run_dir / f"best{SUFFIX}"
    print(json.dumps({"scenario": config.scenario, "iterations": result.iterations, "wall_s": round(result.wall_s, 1),
                      "best_validation_ratio_to_untrained": round(result.best_ratio, 5), "best": str(best),
                      "log": str(result.run_dir / "log.csv"), **({"test": result.test} if result.test else {})},
                     indent=2))
    refs = "agnostic" if config.migrate is None else f"las+{config.placer},{config.untrained_name()}"
    print(f"\nscore it (100 test windows, paired): python benchmarks/eval_dual_paired.py {best} "
          f"--scenario {config.scenario} --references {refs}")
    return 0


def _resumed_config(args: argparse.Namespace, kw: dict):
    """The settings stored in ``--resume``'s file, with the budget flags given now."""
    from dataclasses import replace
    from pathlib import Path

    from dual_agent.priority.es import load_es_state

    given = [k for k in kw if k not in RESUMABLE] if not args.smoke else ["smoke"]
    given += [k for k in ("scenario", "jobs_per_episode") if getattr(args, k) is not None]
    if given:
        flags = ", ".join(f"--{k.replace('_', '-')}" for k in given)
        raise ValueError(f"--resume continues the run with its own settings; {flags} cannot change "
                         "(only --iterations, --max-minutes, --workers, --backend, --ray-address and --out)")
    config, state = load_es_state(args.resume)
    done, target = int(state["iteration"]), int(kw.get("iterations", config.iterations))
    if target <= done:        # nothing would train, yet the run would end as if it had
        raise ValueError(f"{args.resume} has already run {done} iterations; --iterations {target} adds none "
                         f"(give more, e.g. --iterations {done + 10})")
    changes = {k: kw[k] for k in RESUMABLE if k in kw}
    changes["out"] = args.out or str(Path(args.resume).parent)
    return replace(config, **changes), state
