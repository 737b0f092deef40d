"""python -m cluster_env: run one episode of a scenario and print its metrics.

The policies here act through the action masks only: first-fit takes the lowest allowed action
of each agent (the oldest job that fits, on the lowest-numbered machine with a usable GPU) and
random a uniformly random allowed action. Real baselines live in the baselines package
(cluster-bench run). A mistake in the arguments is one line and a hint (exit code 2); --debug
shows the traceback.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import cluster_env
from cluster_env.core.metrics import format_metrics
from cluster_env.scenarios import get_scenario
from cluster_env.scenarios.base import scenario_summary

PROG = "python -m cluster_env"


def _first_fit(obs: dict, rng: np.random.Generator) -> dict:
    return {a: int(o["action_mask"].argmax()) for a, o in obs.items()}


def _random(obs: dict, rng: np.random.Generator) -> dict:
    return {a: int(rng.choice(np.flatnonzero(o["action_mask"]))) for a, o in obs.items()}


POLICIES = {"first-fit": _first_fit, "random": _random}


class _UsageError(Exception):
    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise _UsageError(message, f"{PROG} --help")


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"the seed must be an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"the seed must be an integer >= 0, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default=cluster_env.DEFAULT_SCENARIO,
                        help=f"scenario name (default {cluster_env.DEFAULT_SCENARIO}, the benchmark's; see --list)")
    parser.add_argument("--split", default="test", choices=["train", "validation", "test"])
    parser.add_argument("--seed", type=_seed, default=0, help="episode seed (>= 0)")
    parser.add_argument("--policy", default="first-fit", choices=sorted(POLICIES))
    parser.add_argument("--workload-csv", default=None, metavar="FILE", help="your own jobs (CSV)")
    parser.add_argument("--cluster-csv", default=None, metavar="FILE", help="your own machines (CSV)")
    parser.add_argument("--reference-gpu", default=None, metavar="GPU_TYPE",
                        help="GPU type the durations of --workload-csv were measured on (default: the scenario's)")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    return parser


def _run(args: argparse.Namespace) -> dict:
    if args.list:
        for name in cluster_env.list_scenarios():
            print(scenario_summary(get_scenario(name)))
        return {}
    if args.scenario not in cluster_env.list_scenarios():
        raise _UsageError(f"unknown scenario {args.scenario!r}",
                          f"scenarios: {', '.join(cluster_env.list_scenarios())} ({PROG} --list describes them)")
    if args.reference_gpu is not None and args.workload_csv is None:     # it would change the scenario's world
        raise _UsageError(f"--reference-gpu {args.reference_gpu} needs --workload-csv: it names the GPU your "
                          "trace's durations were measured on",
                          "give your trace with --workload-csv FILE, or drop --reference-gpu")
    overrides = {k: v for k, v in (("workload_csv", args.workload_csv), ("cluster_csv", args.cluster_csv),
                                   ("reference_gpu", args.reference_gpu)) if v is not None}
    env = cluster_env.parallel_env(args.scenario, split=args.split, **overrides)
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
    print(f"{env.scenario.name} / {args.split} / seed {args.seed} / policy {args.policy}: "
          f"{env.episode_view().num_jobs} jobs on {env.cluster.num_machines} machines ({env.cluster.total_gpus} GPUs), "
          f"{steps} steps in {wall:.2f} s")
    print(env.world_summary().line())
    print(format_metrics(metrics))
    return metrics


def main(argv: "list[str] | None" = None) -> dict:
    """Run the command; a user's mistake prints one line and a hint and exits with code 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        return _run(build_parser().parse_args(argv))
    except (_UsageError, ValueError, TypeError, KeyError, OSError, argparse.ArgumentTypeError) as exc:
        if debug:
            raise
        message = " ".join(str(exc.args[0] if isinstance(exc, KeyError) and exc.args else exc).split())
        hint = getattr(exc, "hint", f"add --debug to see where it failed; {PROG} --help lists the options")
        print(f"{PROG}: error: {message}", file=sys.stderr)
        print(f"hint: {hint}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
