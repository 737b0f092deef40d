"""``cluster-bench verify``, ``cluster-bench best-known`` and ``cluster-bench lower-bound``: the
optimality table's commands (registered by :func:`register_command`, as the plug-in commands are).

* ``verify CERT``: replay a schedule certificate on the API and compiled paths; exit 0 when both
  give one value to the last bit and it is the claim (bit for bit, or within the scores' relative
  tolerance 1e-6: the portable check), 2 otherwise (as ``best-known --submit`` for the same claim);
* ``best-known --submit CERT``: verify a user's schedule and, when it beats the table's best-known
  value of its window, put it in the table;
* ``best-known --scenario S --seeds 0-99 --episodes N``: compute the windows' rows (bound, search,
  certificates) and write them;
* ``lower-bound --scenario S --seeds 0-4 [--write]``: print the certified bound of each window and
  its parts (``--write``: and put them in the table's rows).
"""
from __future__ import annotations

import argparse
import shlex
import sys


def register_command(subparsers: "argparse._SubParsersAction") -> None:
    """Add the three commands to ``cluster-bench``'s subparsers."""
    from baselines.cli_support import parse_seeds

    v = subparsers.add_parser("verify", help="replay a schedule certificate on the API and compiled paths and "
                                             "check its average JCT",
                              description="Replay a best-known schedule's certificate (JSON, e.g. "
                                          "baselines/optimality/certificates/philly-v1/0.json) through the "
                                          "environment and the compiled engine. Exit 0 when both paths give "
                                          "the same value to the last bit and it is the claimed avg_jct, bit "
                                          "for bit or within the scores' relative tolerance 1e-6 (the portable "
                                          "check: another CPU's math library may round exp and log differently "
                                          "in the last bit); it says which held. Exit 2 otherwise, naming the "
                                          "field, as best-known --submit does.")
    v.add_argument("certificate", help="certificate file (JSON data: a registered baseline or the priority "
                                       "index's numbers; nothing in it is run or loaded)")
    v.set_defaults(func=cmd_verify)

    b = subparsers.add_parser("best-known", help="compute the optimality table's rows, or submit a better schedule",
                              description="With --submit: verify a schedule certificate and, when it beats the "
                                          "table's best-known value of its window, update the table. Otherwise: "
                                          "compute each window's certified lower bound and hindsight search "
                                          "(--episodes compiled episodes) and write the rows and certificates.")
    b.add_argument("--submit", default=None, metavar="CERT", help="a certificate to verify and enter")
    b.add_argument("--scenario", default=None, help="scenario(s), comma-separated (windows interleaved)")
    b.add_argument("--seeds", type=parse_seeds, default=None, help="test seeds, e.g. 0-99")
    b.add_argument("--episodes", type=int, default=100, help="search budget per window (compiled episodes)")
    b.set_defaults(func=cmd_best_known)

    lb = subparsers.add_parser("lower-bound", help="print the certified lower bound of test windows beside the "
                                                   "best-known schedule's value",
                               description="The certified lower bound on the average JCT of every schedule of "
                                           "each window (docs/optimality.md), and its parts, beside the "
                                           "best-known schedule's average JCT where the scenario's optimality "
                                           "table has the window: no schedule is below the bound, the best "
                                           "one found so far is at best-known.")
    lb.add_argument("--scenario", required=True, help="scenario name (cluster-bench scenarios lists them)")
    lb.add_argument("--split", default="test", choices=["train", "validation", "test"],
                    help="the windows' split (default test, the split the optimality tables hold)")
    lb.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0-4"),
                    help="windows, e.g. 0-4 or 0,3,7 (default 0-4)")
    lb.add_argument("--write", action="store_true",
                    help="also write the bounds into the shipped table's rows of these seeds (rows that exist)")
    lb.set_defaults(func=cmd_lower_bound)


def cmd_verify(args: argparse.Namespace) -> int:
    from baselines.optimality.certificate import CertificateError, load_certificate, replay, replay_error

    cert = load_certificate(args.certificate)
    result = replay(cert)
    exact, ok = result.matches(cert), result.agrees(cert)
    print(f"{cert.scenario} {cert.split} seed {cert.seed} (window {cert.window}): claimed {cert.avg_jct!r}")
    print(f"  API path:      {result.api!r}")
    print(f"  compiled path: {result.compiled!r}   window {result.window}")
    if exact:
        print("verified: both paths reproduce the claim bit for bit")
    elif ok:
        print("verified: both paths agree bit for bit and reproduce the claim within the scores' relative "
              "tolerance 1e-6 (not its last bits: this CPU's math library rounds differently from the one that "
              "made the certificate)")
    else:
        print("NOT verified: the replay differs")
        sys.stdout.flush()
        error = CertificateError(replay_error(cert, result, args.certificate))
        error.hint = ("a certificate names the window its scenario, split and seed play" if result.window != cert.window
                      else "a certificate claims the value its schedule gives (the paths' values are above)")
        raise error
    return 0


def cmd_best_known(args: argparse.Namespace) -> int:
    from baselines.cli_support import UsageError
    from baselines.optimality.certificate import load_certificate
    from baselines.optimality.update import build_windows, submit_certificate

    if args.submit:
        if args.scenario or args.seeds:
            raise UsageError("--submit takes the certificate alone", "the certificate names its window")
        updated, message = submit_certificate(load_certificate(args.submit), where=args.submit)
        print(message)
        return 0
    if not args.scenario or not args.seeds:
        raise UsageError("give --submit CERT, or --scenario and --seeds to compute rows",
                         "e.g. cluster-bench best-known --scenario philly-v1 --seeds 0-99")
    if args.episodes < 10:
        raise UsageError(f"--episodes must be >= 10 (the rules alone take 10), got {args.episodes}")
    command = "cluster-bench best-known " + " ".join(shlex.quote(a) for a in sys.argv[2:]) \
        if sys.argv[1:2] == ["best-known"] else f"cluster-bench best-known --episodes {args.episodes}"
    scenarios = [s.strip() for s in args.scenario.split(",") if s.strip()]
    for seed in args.seeds:
        for scenario in scenarios:
            build_windows(scenario, [seed], args.episodes, command)
            sys.stdout.flush()
    return 0


def cmd_lower_bound(args: argparse.Namespace) -> int:
    import cluster_env
    from baselines.cli_support import UsageError
    from baselines.optimality.bound import bound_inputs, lower_bound, window_simulator
    from baselines.optimality.table import load_table

    if args.scenario not in cluster_env.list_scenarios():
        raise UsageError(f"unknown scenario {args.scenario!r}", "cluster-bench scenarios lists them")
    table = load_table(args.scenario, args.split) or {}
    where = (f"best-known: the best schedule found so far (baselines/optimality/tables/{args.scenario}.json)"
             if table else f"no optimality table holds {args.scenario}'s {args.split} windows: no best-known value")
    print(f"{args.scenario} / {args.split}: certified lower bound on the average JCT of every schedule of each "
          f"window, in seconds; {where}")
    print("seed  lower bound (s)  best-known (s)  best-known/bound  per_job  pooled_srpt  pooled_busy  "
          "fluct_ceiling  binding")
    for seed in args.seeds:
        sim, workload = window_simulator(args.scenario, args.split, seed)
        b = lower_bound(*bound_inputs(sim))
        ref = table.get(seed)
        known = ref.best_known if ref is not None and ref.window == workload.digest() else None
        best = f"{known:14,.1f}  {known / b.avg_jct:16.3f}" if known is not None else f"{'-':>14}  {'-':>16}"
        print(f"{seed:4d}  {b.avg_jct:15,.1f}  {best}  {b.per_job:7,.0f}  {b.pooled_srpt:11,.0f}  "
              f"{b.pooled_busy:11,.0f}  {b.fluctuation_ceiling:13.3f}  {b.binding}")
    if args.write:
        from baselines.optimality.update import refresh_bounds

        if args.split != "test":
            raise UsageError("--write: the tables hold test windows", "drop --split")
        print(f"wrote the bounds of {refresh_bounds(args.scenario, args.seeds)} row(s) of {args.scenario}'s table")
    return 0


__all__ = ["register_command"]
