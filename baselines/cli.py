"""cluster-bench: score policies on scenarios, list scenarios and policies, check regression scores.

Subcommands:

    cluster-bench run       [--scenario philly-v1] [--split test] [--policies P1,P2,...]
                            [--seeds 0-19] [--metric avg_jct] [--reference P] [--out DIR]
                            [--backend auto|serial|process|ray] [--workers N]
    cluster-bench compare   A [B] [--scenario S] [--split test] [--seeds 0-19] [--env K=V ...] [--metric avg_jct]
                            [--out FILE.json]
    cluster-bench sweep     --scenario S --loads 0.5,0.7,0.9,1.1 [--policies ...] [--seeds ...] [--out DIR]
    cluster-bench scenarios
    cluster-bench policies
    cluster-bench replay    [--scenario toy-v0] [--policy fifo] [--seed 0] [--gif episode.gif]
    cluster-bench train     [--scenario philly-v0] [--timesteps N] ...   (the dual agent; rl extra)
    cluster-bench train-priority [--scenario philly-hetero-v1] [--resume RUN/last.priority.json] ...
    cluster-bench scores    --check | --update [--scenarios ...] [--file PATH] [--policies ...] [--seeds ...]
    cluster-bench lower-bound --scenario S [--seeds 0-4]       (certified bound on every schedule's avg JCT)
    cluster-bench verify    CERT.json                          (replay a best-known schedule, both paths)
    cluster-bench best-known --submit CERT.json | --scenario S --seeds 0-99 [--episodes 100]

A bare "cluster-bench run" scores the named baselines (and the agents that ship for the scenario:
the dual agent's checkpoint, the priority agent; listed below) on philly-v1's
test split over 20 windows (seeds 0-19), prints the table with each policy's paired ratio of average
JCT (--metric: another) to the scenario's yardstick on that metric (its strongest duration-blind
rule: baselines/yardstick.py), its gap to the
best-known schedule where the optimality table has the windows, and the share of its decisions the
fallback rule replaced, and writes results.csv, results.json and PNG plots to cluster-bench-results/.
Every mistake in the arguments is one line and a hint (exit code 2); --debug shows the traceback.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from baselines.cli_checks import (arrivals_note, check_metric, check_reference_gpu, check_run, reference_label,
                                  settle_reference, unique_labels)
from baselines.cli_outputs import (RUN_FILES, RUN_PARTIAL_FILES, SWEEP_FILES, SWEEP_PARTIAL_FILES,
                                   interrupted_while_writing, paired_file, partial_file, previous_run_files,
                                   timeline_files, write_partial)
from baselines.cli_support import (  # noqa: F401 (MAX_SEEDS, parse_seeds: importable from here as before)
    DEFAULT_SEEDS, MAX_SEEDS, MAX_WORKERS, USER_ERRORS, OneLineParser, UsageError, check_training_split_policies,
    column_overrides, csv_overrides, custom_trace_notes, parse_seeds, policy_listing, pop_flag, report,
)
from baselines.model_trust import add_trust_flag, trust_from_args
from baselines.registry import BASELINE_NAMES, OBJECTIVE_BASELINES, default_baselines
from baselines.yardstick import JCT_METRIC, yardstick, yardstick_words
from cluster_env.scenarios.registry import DEFAULT_SCENARIO


def table_column_names() -> list[str]:
    """The names ``--columns`` takes (baselines.harness.report.table_column_names)."""
    from baselines.harness.report import table_column_names as names

    return names()


def parse_columns(text: str):
    """``--columns``: ``all``, or comma-separated column names (:func:`table_column_names`)."""
    if text.strip().lower() == "all":
        return "all"
    names = [c.strip() for c in text.split(",") if c.strip()]
    known = table_column_names()
    unknown = [c for c in names if c not in known and c != "policy"]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"unknown column(s) {', '.join(map(repr, unknown)) or repr(text)}; "
                                         f"columns: all, or names from {', '.join(known)}")
    return names


def bounded(kind: type, lo: float, hi: float):
    """An argparse type: a ``kind`` (int or float) number in ``[lo, hi]`` (finite), else one line."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, "
                                             f"got {text!r}") from None
        if not lo <= value <= hi:          # NaN fails too
            raise argparse.ArgumentTypeError(f"must be between {lo:g} and {hi:,g}, got {text!r}")
        return value

    parse.__name__ = kind.__name__       # argparse names the type in its messages
    return parse


def parse_env_overrides(items: Sequence[str]) -> dict:
    """``["preemption=True", "jobs_per_episode=200"]`` -> a dict of Python literals."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"--env takes KEY=VALUE, got {item!r}")
        try:
            out[key.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            out[key.strip()] = value.strip()
    return out


def default_policies(scenario: str) -> list[str]:
    """The named baselines (``las-migrate`` too where the GPU types differ in speed by its threshold:
    ``baselines.registry.default_baselines``; the scenario's yardstick always), plus the
    policies installed packages offer for ``scenario`` (entry points ``cluster_bench.policies``
    whose ``default_for(scenario)`` is true: the dual agent where a checkpoint ships)."""
    import cluster_env
    from cluster_env.wrappers.policies import plugin_policies

    names = list(BASELINE_NAMES)
    try:
        chosen = cluster_env.get_scenario(scenario)
        names = list(default_baselines(chosen.cluster().gpu_type_names, chosen.world.reference_gpu))
        if chosen.workload().has_objectives:      # classes, deadlines, quotas: their baselines too
            names += [n for n in OBJECTIVE_BASELINES if n not in names]
    except (KeyError, ValueError):      # not a registered scenario name: the plain baselines
        pass
    if yardstick(scenario) not in names:      # the default reference is always scored
        names.append(yardstick(scenario))
    for name, ep in plugin_policies().items():
        try:
            entry = ep.load()
        except ImportError:     # a plugin whose package is broken or lacks an extra
            continue
        default_for = getattr(entry, "default_for", None)
        if callable(default_for) and default_for(scenario):
            names.append(name)
    return names


def own_workload_defaults(names: Sequence[str]) -> tuple[list[str], list[str]]:
    """The default ``names`` a run on a user's ``--workload-csv`` keeps, and those it leaves out:
    the baselines whose rule needs the scenario's training split (``gittins``), which a user's
    workload, played whole in every split, does not have."""
    from baselines.registry import needs_training_split

    left_out = [n for n in names if needs_training_split(n)]
    return [n for n in names if n not in left_out], left_out


def _world(args: argparse.Namespace, env_kwargs: dict):
    """The world every policy of a command plays in (``cluster_env.world.summary``; policies may set
    only interface keys, never the world): printed by run, compare and sweep, and recorded."""
    import cluster_env

    return cluster_env.parallel_env(args.scenario, split=args.split, **env_kwargs).world_summary()


def _split_names(text: str, flag: str = "--policies") -> list[str]:
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names:
        raise UsageError(f"{flag} {text!r} names nothing", f"give comma-separated names, e.g. {flag} "
                         + ("fifo,sjf" if flag == "--policies" else "toy-v0,philly-v1"))
    return names


# ---------------------------------------------------------------------------- run
def cmd_run(args: argparse.Namespace) -> int:
    import cluster_env
    from baselines.harness.files import estimate_bytes, reserve_folder, written_together
    from baselines.harness.report import (PAIRED_METRICS, TABLE_WIDTH, format_table, table_metrics, write_csv,
                                          write_json, write_summary_csv)
    from baselines.harness.sweep import RunInterrupted, make_tasks, run_tasks, stopped_results

    if args.scenario not in cluster_env.list_scenarios():
        print(f"unknown scenario {args.scenario!r}; scenarios: {cluster_env.list_scenarios()}", file=sys.stderr)
        return 2
    env_kwargs = parse_env_overrides(args.env)
    allow = bool(getattr(args, "allow_env_mismatch", False))
    # Every policy was resolved once by check_run (in _prepare), the reference added: used as it is.
    plan = args.plan
    policies, labels, args.reference = plan.specs, plan.labels, plan.reference
    metric = args.metric or JCT_METRIC
    if plan.added is not None:
        why = "--reference" if args.reference_given else yardstick_words(args.scenario, metric)
        print(f"note: added {args.reference}, the reference of the paired ratios ({why}), to the policies")
    out = Path(args.out)
    # Before any episode: a real, writable folder with room for the results, locked for this run;
    # every file it may write (the timelines' too) is checked there.
    plots = 0 if args.no_plots else 5 + len(policies)
    names = RUN_FILES + RUN_PARTIAL_FILES + (() if args.no_plots else (paired_file(metric),
                                                                        *timeline_files(labels).values()))
    args.resources.enter_context(reserve_folder(out, names=names, need_bytes=estimate_bytes(
        len(policies) * len(args.seeds), plots)))
    tasks = make_tasks(policies, [args.scenario], args.split, args.seeds, env_kwargs,
                       record_seeds=args.seeds[:1] if not args.no_plots else (), allow_env_mismatch=allow,
                       labels=labels, resolved=plan.resolved)
    print(f"cluster-bench run: {len(policies)} policies x {len(args.seeds)} seeds on {args.scenario}/{args.split}"
          f" ({args.backend} backend)", flush=True)
    arrivals = arrivals_note(args.scenario, env_kwargs, plan.env)
    world = plan.env.world_summary()          # the run's environment, built once by check_run
    print(world.line(), flush=True)
    meta = dict(scenario=args.scenario, split=args.split, seeds=args.seeds, policies=policies, world=world.as_dict(),
                labels=dict(zip(policies, labels)), env_kwargs=env_kwargs, arrivals=arrivals,
                policy_env_kwargs=plan.settings, env_mismatch=plan.mismatches, allow_env_mismatch=allow,
                version=cluster_env.__version__, reference=args.reference)
    paired = PAIRED_METRICS
    if args.metric is not None:          # a run told its metric records it (a default run's files are as before)
        meta["metric"] = metric
        paired = tuple(dict.fromkeys((*PAIRED_METRICS, metric)))
    t0 = time.perf_counter()
    stopped: Optional[BaseException] = None
    try:
        results = run_tasks(tasks, backend=args.backend, workers=args.workers, progress=not args.quiet,
                            ray_address=args.ray_address)
    except (Exception, KeyboardInterrupt) as stop:
        if stopped_results(stop) is None:       # an error before any episode: reported as usual
            raise
        stopped = stop
    # A stopped run keeps what finished beside the previous complete set (left as it was); no traceback.
    csv_path, json_path = (out / n for n in RUN_PARTIAL_FILES)

    def write_finished(finished) -> None:
        records = [r.record for r in finished]
        write_csv(records, csv_path)
        write_json(records, json_path, paired_metrics=paired, **meta, complete=False)

    if stopped is not None:
        return write_partial(json_path, write_finished, stopped, len(tasks), "cluster-bench run")
    wall = time.perf_counter() - t0
    try:
        records = [r.record for r in results]
        columns = None if args.columns in (None, "all") else args.columns
        print(format_table(records, table_metrics(records, args.metric), markdown=args.markdown,
                           reference=args.reference, paired_metric=metric,
                           columns=columns, width=TABLE_WIDTH if args.columns is None else None,
                           left_out_hint="--columns all shows every column, --columns NAME,... chooses; "
                                         "summary.csv and results.json have them all"))
        print(f"arrivals: {arrivals}")
        plot_error: Optional[Exception] = None
        # All new files, or on a failure all old ones; the previous run's other files go.
        with written_together(replaces=lambda: previous_run_files(out)) as deferred:
            files = [write_csv(records, out / "results.csv"),
                     write_summary_csv(records, out / "summary.csv", reference=args.reference,
                                       paired_metrics=paired),
                     write_json(records, out / "results.json", paired_metrics=paired, **meta, complete=True)]
            try:
                if not args.no_plots:
                    files += _run_plots(args, results, records, labels, out, progress=not args.quiet)
            except Exception as exc:        # the results stay: a plot is drawn from them, never the reverse
                plot_error = exc
    except KeyboardInterrupt:
        # Ctrl-C after the last episode, before the files (the table's intervals take seconds):
        # every episode finished, and they are kept as those of a run stopped earlier are.
        return write_partial(json_path, write_finished, RunInterrupted(list(results)), len(tasks),
                             "cluster-bench run")
    print(f"\n{len(records)} episodes in {wall:.1f} s; wrote:")
    for f in files:
        print(f"  {f}")
    code = _plot_failed(plot_error, args, "cluster-bench run", "results.json")
    return interrupted_while_writing(deferred, "cluster-bench run", out) or code


def _plot_failed(error: Optional[Exception], args: argparse.Namespace, prog: str, results: str) -> int:
    """The exit code after the results were written: 0, or 2 with one line when a plot failed."""
    if error is None:
        return 0
    if getattr(args, "debug", False):
        raise error
    print(f"{prog}: error: a plot could not be written: {' '.join(str(error).split())}; "
          "the results above are complete", file=sys.stderr)
    print(f"hint: plot them again from {results}, or rerun with --no-plots", file=sys.stderr)
    return 2


def _run_plots(args: argparse.Namespace, results, records, labels, out: Path, progress: bool = True) -> list:
    """``run``'s plots (inside its ``written_together`` block), each policy in one colour in all of
    them; says what it writes, one plot at a time (seconds each); the paths."""
    from baselines.harness.gaps import optimality_gap
    from baselines.harness.paired_plots import paired_title, plot_paired
    from baselines.harness.plots import plot_jct_cdf, plot_timeline, plot_utilization
    from baselines.harness.styles import policy_styles
    from baselines.harness.summary_plots import objective_metrics, plot_gaps, plot_objectives

    title = f"{args.scenario} / {args.split}"
    styles = policy_styles(labels)
    timelines = timeline_files(labels)
    first = args.seeds[0]
    jobs = [("jct_cdf.png", lambda p: plot_jct_cdf(results, p, title=f"JCT CDF, {title}", styles=styles))]
    metric = args.metric or JCT_METRIC
    if args.reference in labels and len(labels) > 1:
        # The default run's title is as it was; a run on another metric names the yardstick it pairs on.
        role = None if args.reference_given or args.metric is None else \
            yardstick_words(args.scenario, metric, owner="the scenario's")
        jobs.append((paired_file(metric), lambda p: plot_paired(
            records, p, reference=args.reference, metric=metric,
            title=paired_title(metric, args.reference, title, role), styles=styles)))
    jobs.append(("utilization.png", lambda p: plot_utilization(results, p, title=f"utilisation and queue, {title}",
                                                               styles=styles)))
    if objective_metrics(records):
        jobs.append(("objectives.png", lambda p: plot_objectives(records, p, title=f"service objectives, {title}",
                                                                 styles=styles)))
    if any(optimality_gap(records, label).windows for label in labels):
        jobs.append(("gap_best_known.png", lambda p: plot_gaps(records, p, title=f"gap to best-known, {title}",
                                                               styles=styles)))
    for r in results:
        if r.record["seed"] == first and r.allocations is not None:
            jobs.append((timelines[r.record["policy"]], lambda p, r=r: plot_timeline(r, p)))
    print(f"writing {len(jobs)} plots to {out} (a second or more each; --no-plots skips them)", flush=True)
    files = []
    for i, (name, draw) in enumerate(jobs, 1):
        if progress and sys.stderr.isatty():
            print(f"\r  plot {i}/{len(jobs)}: {name}\033[K", end="", file=sys.stderr, flush=True)
        files.append(draw(out / name))
    if progress and sys.stderr.isatty():
        print("\r\033[K", end="", file=sys.stderr, flush=True)
    return files


# ---------------------------------------------------------------------------- compare
def cmd_compare(args: argparse.Namespace) -> int:
    import cluster_env
    from baselines.harness.episode import env_settings
    from baselines.harness.gaps import fmt_gap, no_gap_reason, optimality_gap
    from baselines.harness.report import fallback_summary, format_value
    from baselines.harness.stats import (UNIT_WORLD_DRAW, claim_note, direction_note, lower_is_better, paired_summary,
                                         truncation, verdict)
    from baselines.harness.sweep import RunInterrupted, make_tasks, resolve_once, run_tasks, stopped_results

    if args.scenario not in cluster_env.list_scenarios():
        raise UsageError(f"unknown scenario {args.scenario!r}", f"scenarios: {', '.join(cluster_env.list_scenarios())}")
    check_metric(args.scenario, args.metric, cluster_env.get_scenario(args.scenario).workload())
    partial = partial_file(args.out) if args.out else None
    if args.out:                       # checked and locked before any episode runs
        from baselines.harness.files import estimate_bytes, reserve_file

        args.resources.enter_context(reserve_file(args.out, need_bytes=estimate_bytes(2 * len(args.seeds)),
                                                  beside=[partial.name]))
    env_kwargs = parse_env_overrides(args.env)
    defaulted = args.b is None
    if defaulted:                      # the scenario's yardstick on the metric, its strongest duration-blind rule
        args.b = yardstick(args.scenario, args.metric)
        print(f"note: comparing with {args.b}, {yardstick_words(args.scenario, args.metric)} (give B to compare "
              "with another policy)")
    resolved = [resolve_once(name, args.scenario) for name in (args.a, args.b)]     # once each, for the whole run
    check_training_split_policies([args.a, args.b], args.scenario, args.split, env_kwargs,
                                  [p.baseline for p in resolved])
    for policy in resolved:                  # a policy made for another environment: refused before any episode
        env_settings(policy.policy(), env_kwargs, False, args.scenario)
    try:
        a, b = unique_labels([args.a, args.b], args.scenario, [p.name for p in resolved],
                             [p.baseline for p in resolved])
    except UsageError:
        if not defaulted:
            raise
        other = next((n for n in (yardstick(args.scenario), "fifo") if n != args.b), "fifo")
        raise UsageError(f"{args.a} is {yardstick_words(args.scenario, args.metric)}, the default B: there is "
                         "nothing to compare it with", f"give B, e.g. cluster-bench compare {args.a} {other} "
                         f"--scenario {args.scenario} --metric {args.metric}") from None
    tasks = make_tasks([args.a, args.b], [args.scenario], args.split, args.seeds, env_kwargs, labels=[a, b],
                       resolved=resolved)
    meta = {"a": a, "b": b, "scenario": args.scenario, "split": args.split, "seeds": args.seeds,
            "env_kwargs": env_kwargs, "metric": args.metric, "version": cluster_env.__version__}
    try:
        results = run_tasks(tasks, backend=args.backend, workers=args.workers, progress=not args.quiet,
                            ray_address=args.ray_address)
    except (Exception, KeyboardInterrupt) as stop:
        if stopped_results(stop) is None:
            raise
        return _compare_stopped(stop, partial, meta, len(tasks))
    try:
        records = [r.record for r in results]
        s = paired_summary(records, a, b, args.metric)
        better = "lower" if lower_is_better(args.metric) else "higher"
        env_text = f" [{', '.join(args.env)}]" if args.env else ""
        print(f"{a} vs {b} on {args.scenario}/{args.split}{env_text}, {len(args.seeds)} windows, {args.metric} "
              f"({better} is better)")
        print(f"  mean {args.metric}: {a} {format_value(s.mean)}, {b} {format_value(s.reference_mean)} "
              f"(over the {s.n} paired episodes)")
        print(f"  ratio {a}/{b}: geometric mean {s.geo_mean:.4f}, 95% CI [{s.ci_low:.4f}, {s.ci_high:.4f}] "
              f"on {s.distinct} distinct window(s)")
        opposite = direction_note(s.mean, s.reference_mean, s.geo_mean)
        if opposite:
            print(f"  {opposite}")
        unit = "world draws (window, seed) of 1 window" if s.unit == UNIT_WORLD_DRAW else "distinct windows"
        print(f"  {a} better on {s.wins} of {s.units} {unit} (win rate {s.win_rate:.2f})")
        if s.unit == UNIT_WORLD_DRAW:
            print(f"  ONE WINDOW: every seed plays the same jobs, so the interval rests on the {s.units} world draws "
                  "of that window (paired per (window, seed)), not on windows; windows differ where jobs_per_episode "
                  "is below the split's size")
        elif s.distinct < s.n:
            print(f"  REPEATED WINDOWS: the {s.n} episodes play only {s.distinct} distinct window(s) (seeds that play "
                  "the same jobs count once)")
        print(f"  {verdict(s)}")
        note = claim_note(s.distinct)
        if note:
            print(f"  {note}")
        gaps = {name: optimality_gap(records, name) for name in (a, b)}
        for name, gap in gaps.items():
            if gap.windows:
                print(f"  {name}: gap to best-known {fmt_gap(gap.best_known, gap.best_known_lo, gap.best_known_hi)}, "
                      f"to the lower bound {fmt_gap(gap.lower_bound, gap.lower_bound_lo, gap.lower_bound_hi)} "
                      f"(on the {gap.windows} window(s) of the shipped optimality table)")
        if not any(gap.windows for gap in gaps.values()):
            print(f"  no gap to best-known: {no_gap_reason(records)}")
        fallback = {name: fallback_summary([r for r in records if r["policy"] == name]) for name in (a, b)}
        print("  fallback (decisions the fallback rule replaced): "
              + ", ".join(f"{name} {row['fallback_share']:.1%}" for name, row in fallback.items()))
        world = _world(args, env_kwargs)
        print(f"  {world.line()}")
        for name in (a, b):
            bad, total, unfinished = truncation(records, name)
            if bad:
                print(f"  TRUNCATED: {bad} of {total} {name} episodes ({unfinished} jobs unfinished), "
                      "left out of the ratio")
        if s.undefined:
            print(f"  {s.undefined} window(s) left out: {args.metric} NaN or not positive")
        if args.out:
            from baselines.harness.files import atomic_write, json_text, written_together

            text = json_text({"meta": {**meta, "world": world.as_dict(), "complete": True},
                              "comparison": {**s.to_dict(), "verdict": verdict(s)},
                              "optimality": {name: gap.columns() for name, gap in gaps.items()},
                              "fallback_share": {name: row["fallback_share"] for name, row in fallback.items()},
                              "episodes": records})
            with written_together("the comparison", replaces=[partial]) as deferred:
                out = atomic_write(args.out, lambda f: f.write(text))
    except KeyboardInterrupt:
        # Ctrl-C after the last episode, before the file (the intervals take seconds): the episodes
        # are kept as those of a comparison stopped earlier are.
        return _compare_stopped(RunInterrupted(list(results)), partial, meta, len(tasks))
    if args.out:
        print(f"wrote {out}")
        return interrupted_while_writing(deferred, "cluster-bench compare", out)
    return 0


def _compare_stopped(stop: BaseException, partial: Optional[Path], meta: dict, total: int) -> int:
    """``compare`` stopped by Ctrl-C, lost workers or an episode's error: the episodes that finished
    go to ``partial`` (``--out``'s file stays as it was); without ``--out`` one line says so."""
    from baselines.harness.files import atomic_write, json_text

    prog = "cluster-bench compare"
    if partial is None:
        return write_partial(None, lambda finished: None, stop, total, prog)

    def write(finished) -> None:
        text = json_text({"meta": {**meta, "complete": False}, "episodes": [r.record for r in finished]})
        atomic_write(partial, lambda f: f.write(text))

    return write_partial(partial, write, stop, total, prog)


# ---------------------------------------------------------------------------- sweep
def parse_loads(text: str) -> list[float]:
    """``"0.5,0.7,0.9"`` -> [0.5, 0.7, 0.9] (positive numbers)."""
    try:
        loads = [float(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"loads must look like 0.5,0.7,0.9; got {text!r}") from None
    if not loads or any(not x > 0 for x in loads):
        raise argparse.ArgumentTypeError(f"loads must be positive numbers, got {text!r}")
    return loads


#: ``sweep``'s policies when ``--policies`` is not given (the reference, the yardstick by default, is added).
DEFAULT_SWEEP_POLICIES = "fifo,sjf,tiresias"


def cmd_sweep(args: argparse.Namespace) -> int:
    import cluster_env
    from baselines.harness.load_sweep import format_sweep, partial_sweep, run_load_sweep, write_sweep, write_sweep_plot
    from baselines.harness.sweep import RunInterrupted

    if args.scenario not in cluster_env.list_scenarios():
        print(f"unknown scenario {args.scenario!r}; scenarios: {cluster_env.list_scenarios()}", file=sys.stderr)
        return 2
    from baselines.harness.resolve import resolve_once

    policies = _split_names(DEFAULT_SWEEP_POLICIES if args.policies is None else args.policies)
    resolved = [resolve_once(name, args.scenario) for name in policies]       # once each, for the whole sweep
    labels = unique_labels(policies, args.scenario, [r.name for r in resolved], [r.baseline for r in resolved])
    given = args.reference is not None
    args.reference, added = settle_reference(args.reference, policies, labels, args.scenario)
    if added is not None:              # the reference is swept too: the ratios need it on every window
        policies, resolved = [*policies, added.spec], [*resolved, added]
        labels = unique_labels(policies, args.scenario, [r.name for r in resolved], [r.baseline for r in resolved])
        args.reference = reference_label(added.spec, policies, labels)
        why = "--reference" if given else f"{args.scenario}'s yardstick"
        print(f"note: added {args.reference}, the reference of the paired ratios ({why}), to the policies")
    reference = args.reference
    from baselines.harness.files import estimate_bytes, reserve_folder, written_together

    env_kwargs = parse_env_overrides(args.env)
    check_training_split_policies(policies, args.scenario, args.split, env_kwargs, [r.baseline for r in resolved])
    need = estimate_bytes(len(policies) * len(args.seeds) * len(args.loads), 0 if args.no_plots else 1)
    args.resources.enter_context(reserve_folder(args.out, names=SWEEP_FILES + SWEEP_PARTIAL_FILES, need_bytes=need))
    total = len(policies) * len(args.seeds) * len(args.loads)
    print(f"cluster-bench sweep: {len(policies)} policies x {len(args.seeds)} seeds x {len(args.loads)} loads "
          f"on {args.scenario}/{args.split} ({args.backend} backend)", flush=True)
    print(_world(args, env_kwargs).line(), flush=True)
    t0 = time.perf_counter()

    def keep(partial, stop: BaseException) -> int:
        """The episodes that finished, beside the previous complete sweep (left as it was)."""
        return write_partial(Path(args.out) / SWEEP_PARTIAL_FILES[1],
                             lambda _: write_sweep(partial, args.out, plot=False, stem="load_sweep.partial",
                                                   complete=False),
                             stop, total, "cluster-bench sweep")

    try:
        sweep = run_load_sweep(args.scenario, args.loads, policies, args.seeds, args.split, env_kwargs, reference,
                               backend=args.backend, workers=args.workers, progress=not args.quiet,
                               ray_address=args.ray_address, resolved=resolved)
    except (Exception, KeyboardInterrupt) as stop:
        partial = partial_sweep(stop)
        if partial is None:             # an error before any episode: reported as usual
            raise
        return keep(partial, stop)
    wall = time.perf_counter() - t0
    out = Path(args.out)
    try:
        print(format_sweep(sweep))
        plot_error: Optional[Exception] = None
        with written_together(replaces=[out / n for n in SWEEP_FILES + SWEEP_PARTIAL_FILES]) as deferred:
            files = write_sweep(sweep, args.out, plot=False)
            try:
                if not args.no_plots:
                    files += write_sweep_plot(sweep, out)
            except Exception as exc:        # the results stay: the plot is drawn from them
                plot_error = exc
    except KeyboardInterrupt:           # after the last episode, before the files: kept as a stopped sweep's
        return keep(sweep, RunInterrupted(list(sweep.records)))
    print(f"\n{len(sweep.records)} episodes in {wall:.1f} s; wrote:")
    for f in files:
        print(f"  {f}")
    code = _plot_failed(plot_error, args, "cluster-bench sweep", "load_sweep.json")
    return interrupted_while_writing(deferred, "cluster-bench sweep", out) or code


# ---------------------------------------------------------------------------- scenarios
def cmd_scenarios(args: argparse.Namespace) -> int:
    import cluster_env
    from cluster_env.scenarios.base import scenario_summary

    for name in cluster_env.list_scenarios():
        print(scenario_summary(cluster_env.get_scenario(name)))
    return 0


# ---------------------------------------------------------------------------- scores
def cmd_scores(args: argparse.Namespace) -> int:
    from baselines.harness.scores import (check_score_files, file_update_command, format_drifts,
                                          missing_extra_reason, packaged_scenarios, packaged_scores_file,
                                          update_scores)

    t0 = time.perf_counter()
    if args.check == args.update:
        print("cluster-bench scores: give exactly one of --check or --update", file=sys.stderr)
        return 2
    scenarios = _split_names(args.scenarios, "--scenarios") if args.scenarios else None
    if args.file:
        targets = [(Path(args.file), scenarios)]
    else:
        names = scenarios or (packaged_scenarios() if args.check else _ci_scenarios())
        targets = [(packaged_scores_file(s), [s]) for s in names]
    if args.update:
        for path, names in targets:
            if not names:
                print("--update with --file needs --scenarios", file=sys.stderr)
                return 2
            policies = _split_names(args.policies) if args.policies else None
            for scenario in names:
                chosen = policies or default_policies(scenario)
                update_scores(path, [scenario] if not args.file else names, chosen, args.seeds,
                              backend=args.backend, workers=args.workers, progress=not args.quiet)
                print(f"wrote {path} ({', '.join(chosen)}; seeds {args.seeds})")
                if args.file:
                    break
        return 0
    skipped = []
    for path, names in list(targets):        # the base install checks every file that needs no extra
        reason = missing_extra_reason(path, names)
        if reason is not None:
            skipped.append(path)
            targets.remove((path, names))
            print(f"skip {path}: {reason}")
    checks = check_score_files(targets, backend=args.backend if args.backend != "auto" else "process",
                               workers=args.workers, progress=not args.quiet) if targets else []
    failed = values = 0
    for check in checks:
        if check.drifts:
            failed += 1
            print(f"FAIL {check.path}: {len(check.drifts)} metric(s) moved beyond the tolerance")
            print(format_drifts(check.drifts))
            print("If the change is intended, rewrite the file and commit it with the change that moved it:\n  "
                  + file_update_command(check.path, packaged=not args.file))
        else:
            print(f"ok   {check.path}")
        values += check.values
    drifted = sum(len(c.drifts) for c in checks)
    took = time.perf_counter() - t0
    tol = _tolerances(checks) if checks else "the tolerance"
    skip_note = f"; {len(skipped)} skipped (they need an extra that is not installed, see 'skip' above)" if skipped \
        else ""
    if drifted:
        print(f"scores check: {len(checks)} file(s), {values} values, {drifted} drifted in {failed} file(s) "
              f"({took:.1f} s){skip_note}")
    else:
        print(f"scores check: {len(checks)} file(s), {values} values, all within {tol} ({took:.1f} s){skip_note}")
    return 1 if failed else 0


def _tolerances(checks) -> str:
    from baselines.harness.scores import load_scores

    tols = set()
    for c in checks:
        data = load_scores(c.path)
        tols.add((float(data.get("rel_tol", 1e-6)), float(data.get("abs_tol", 1e-6))))
    if len(tols) == 1:
        rel, abs_ = tols.pop()
        return f"{rel:g}" if rel == abs_ else f"rel {rel:g} / abs {abs_:g}"
    return "each file's tolerance"


def _ci_scenarios() -> list[str]:
    import cluster_env

    return cluster_env.list_scenarios()


# ---------------------------------------------------------------------------- policies
def cmd_policies(args: argparse.Namespace) -> int:
    print(policy_listing())
    return 0


# ---------------------------------------------------------------------------- replay
def cmd_replay(args: argparse.Namespace) -> int:
    from baselines.cli_support import replay

    import cluster_env

    if args.scenario not in cluster_env.list_scenarios():
        raise UsageError(f"unknown scenario {args.scenario!r}", "cluster-bench scenarios lists them")
    return replay(args.scenario, args.split, args.policy, args.seed, parse_env_overrides(args.env), args.gif,
                  max_frames=args.max_frames, fps=args.fps)


# ---------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    bare = ",".join(default_policies(DEFAULT_SCENARIO))      # what a bare run scores: one source
    parser = OneLineParser(prog="cluster-bench", description=f"{__doc__}\nA bare run's policies: {bare}",
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error (anywhere on the line)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                title="commands (cluster-bench COMMAND --help for each)")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--backend", default="auto", choices=["auto", "serial", "process", "ray"],
                       help="where episodes run (default: local processes when it pays)")
        p.add_argument("--workers", type=bounded(int, 1, MAX_WORKERS), default=None,
                       help=f"parallel workers, 1 .. {MAX_WORKERS} (default: CPU cores)")
        p.add_argument("--quiet", action="store_true", help="no progress bar")
        add_trust_flag(p)

    run = sub.add_parser("run", help="score policies on a scenario (the main job)")
    run.add_argument("--scenario", default=DEFAULT_SCENARIO,
                     help=f"scenario name (default {DEFAULT_SCENARIO}; cluster-bench scenarios lists them)")
    run.add_argument("--split", default="test", choices=["train", "validation", "test"])
    run.add_argument("--policies", default=None,
                     help="comma-separated names (cluster-bench policies lists them: named baselines, "
                          "ORDERER+PLACER, dual, path/to/agent.pt, path/to/agent.priority.json, "
                          "path/to/model.zip (an SB3 model or torch module saved with baselines.save_agent), "
                          "package.module:attribute); "
                          "default: the named baselines plus the agents that ship for the scenario "
                          f"(for {DEFAULT_SCENARIO}: {bare})")
    run.add_argument("--seeds", type=parse_seeds, default=parse_seeds(DEFAULT_SEEDS),
                     help=f"e.g. 0-4 or 0,3,7 (default {DEFAULT_SEEDS})")
    run.add_argument("--metric", default=None, metavar="NAME",
                     help="the metric the paired ratios are on (default avg_jct); the default reference is its "
                          "yardstick on the scenario (e.g. quota for tenant_max_slowdown on philly-tenants-v1); "
                          "any metric the scenario measures (an unknown one is an error that lists them)")
    run.add_argument("--reference", default=None,
                     help="the policy the paired ratios are taken against (default: the scenario's yardstick on "
                          f"--metric, its strongest duration-blind rule: {yardstick(DEFAULT_SCENARIO)} for "
                          f"{DEFAULT_SCENARIO}; added to the policies when missing)")
    run.add_argument("--out", default="cluster-bench-results", help="output folder")
    run.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                     help="environment override, repeatable (e.g. --env fluctuation=False)")
    run.add_argument("--workload-csv", default=None, metavar="FILE",
                     help="your own jobs (CSV): one episode of exactly these jobs, every split (README: Your own data)")
    run.add_argument("--cluster-csv", default=None, metavar="FILE", help="your own machines (CSV)")
    run.add_argument("--workload-columns", default=None, metavar="FIELD=COLUMN,...",
                     help="column names of --workload-csv for fields it spells otherwise, e.g. "
                          "submit_time=submission_time,num_gpus=num_gpu (FIELD= ignores an optional field)")
    run.add_argument("--cluster-columns", default=None, metavar="FIELD=COLUMN,...",
                     help="the same for --cluster-csv")
    run.add_argument("--reference-gpu", default=None, metavar="GPU_TYPE",
                     help="GPU type the durations of --workload-csv were measured on (default: the base "
                          "scenario's, P100 for philly-v0, V100 for openb-v0)")
    run.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    run.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    from baselines.harness.report import TABLE_WIDTH

    run.add_argument("--columns", default=None, type=parse_columns, metavar="NAME,...|all",
                     help=f"the table's columns (default: those that fit {TABLE_WIDTH} characters, the others "
                          "named under it; 'all': every one; the files have them all): "
                          f"{', '.join(table_column_names())}")
    run.add_argument("--ray-address", default=None, help="join this Ray cluster (with --backend ray)")
    run.add_argument("--allow-env-mismatch", action="store_true",
                     help="score a checkpoint made for another environment on this run's anyway (recorded)")
    common(run)
    run.set_defaults(func=cmd_run)

    comp = sub.add_parser("compare", help="paired comparison of two policies on the same windows")
    comp.add_argument("a", help="the policy to judge")
    comp.add_argument("b", nargs="?", default=None,
                      help="the policy it is compared with (the ratio is A/B; default: the scenario's yardstick on "
                           f"--metric, {yardstick(DEFAULT_SCENARIO)} for {DEFAULT_SCENARIO} on avg_jct)")
    comp.add_argument("--scenario", default=DEFAULT_SCENARIO,
                      help=f"scenario name (default {DEFAULT_SCENARIO}; cluster-bench scenarios lists them)")
    comp.add_argument("--split", default="test", choices=["train", "validation", "test"])
    comp.add_argument("--seeds", type=parse_seeds, default=parse_seeds(DEFAULT_SEEDS),
                      help=f"windows, e.g. 0-19 (default {DEFAULT_SEEDS})")
    comp.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="environment override")
    comp.add_argument("--metric", default=JCT_METRIC, metavar="NAME",
                      help="the metric compared (default avg_jct); B defaults to its yardstick on the scenario "
                           "(e.g. quota for tenant_max_slowdown on philly-tenants-v1)")
    comp.add_argument("--out", default=None, help="also write the comparison and episodes to this JSON file")
    comp.add_argument("--ray-address", default=None, help="join this Ray cluster (with --backend ray)")
    common(comp)
    comp.set_defaults(func=cmd_compare)

    swp = sub.add_parser("sweep", help="metrics against offered load, one curve per policy")
    swp.add_argument("--scenario", required=True, help="scenario name (cluster-bench scenarios lists them)")
    swp.add_argument("--loads", type=parse_loads, required=True, help="target offered loads, e.g. 0.5,0.7,0.9,1.1")
    swp.add_argument("--policies", default=None,
                     help=f"comma-separated names (default {DEFAULT_SWEEP_POLICIES}, and the reference)")
    swp.add_argument("--split", default="test", choices=["train", "validation", "test"])
    swp.add_argument("--seeds", type=parse_seeds, default=parse_seeds(DEFAULT_SEEDS),
                     help=f"windows per point (default {DEFAULT_SEEDS})")
    swp.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="environment override")
    swp.add_argument("--reference", default=None,
                     help="the policy of the paired ratios (default: the scenario's yardstick; added to the "
                          "policies when missing)")
    swp.add_argument("--out", default="cluster-bench-sweep", help="output folder")
    swp.add_argument("--no-plots", action="store_true", help="skip the PNG")
    swp.add_argument("--ray-address", default=None, help="join this Ray cluster (with --backend ray)")
    common(swp)
    swp.set_defaults(func=cmd_sweep)

    scen = sub.add_parser("scenarios", help="list the scenarios with their cluster and workload")
    scen.set_defaults(func=cmd_scenarios)

    pol = sub.add_parser("policies", help="list every policy name: baselines, orderers, placers, compositions, plugins")
    pol.set_defaults(func=cmd_policies)

    rep = sub.add_parser("replay", help="watch one episode of a policy: an animated GIF (--gif) or text frames")
    rep.add_argument("--scenario", default="toy-v0", help="scenario name (default toy-v0; cluster-bench scenarios)")
    rep.add_argument("--split", default="test", choices=["train", "validation", "test"])
    rep.add_argument("--policy", default="fifo", help="one policy name (cluster-bench policies lists them)")
    rep.add_argument("--seed", type=parse_seeds, default=[0], help="the episode seed (>= 0)")
    rep.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                     help="environment override, repeatable (e.g. --env jobs_per_episode=40)")
    rep.add_argument("--gif", default=None, metavar="FILE.gif", help="write an animated GIF (else: text frames)")
    rep.add_argument("--max-frames", type=bounded(int, 1, 100_000), default=200,
                     help="frames at most, spread over the episode (1 .. 100,000)")
    rep.add_argument("--fps", type=bounded(float, 0.01, 100.0), default=4.0, help="GIF frames per second (0.01 .. 100)")
    add_trust_flag(rep)
    rep.set_defaults(func=cmd_replay)

    scores = sub.add_parser("scores", help="check or update the regression scores")
    scores.add_argument("--check", action="store_true", help="recompute and compare (exit 1 on drift)")
    scores.add_argument("--update", action="store_true", help="recompute and rewrite on purpose")
    scores.add_argument("--scenarios", default=None, help="comma-separated (default: all with scores)")
    scores.add_argument("--file", default=None, help="your own scores file instead of the packaged ones")
    scores.add_argument("--policies", default=None, help="with --update: comma-separated policy names")
    scores.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0-4"), help="with --update")
    common(scores)
    scores.set_defaults(func=cmd_scores)

    from baselines.optimality.cli import register_command as optimality_commands

    optimality_commands(sub)       # verify, best-known, lower-bound
    _add_plugin_commands(sub)
    return parser


def _add_plugin_commands(sub) -> None:
    """Subcommands that installed packages add (entry points ``cluster_bench.commands``, e.g. the
    dual agent's ``train``): this CLI imports no policy package by name."""
    from importlib import metadata

    for ep in sorted(metadata.entry_points(group="cluster_bench.commands"), key=lambda e: e.name):
        if ep.name in sub.choices:
            continue
        try:
            ep.load()(sub)
        except ImportError as exc:  # pragma: no cover - the plugin's package is broken
            broken = sub.add_parser(ep.name, help=f"(unavailable: {exc})")
            broken.set_defaults(func=lambda _args, exc=exc: _missing(exc))


def _missing(exc: Exception) -> int:
    from cluster_env.extras import RL_HINT

    raise UsageError(f"this command is unavailable: {exc}", RL_HINT)


def _prepare(args: argparse.Namespace) -> None:
    """Checks and argument folding done before any command starts work (no episode runs first)."""
    if args.command == "replay":
        if len(args.seed) != 1:
            raise UsageError(f"--seed takes one seed, got {len(args.seed)}", "e.g. --seed 3")
        args.seed = args.seed[0]
        if args.gif and not args.gif.lower().endswith(".gif"):
            raise UsageError(f"--gif {args.gif}: the file name must end in .gif", "e.g. --gif episode.gif")
    if args.command == "run":
        check_reference_gpu(args)
        args.env = list(args.env) + csv_overrides(args) + column_overrides(args)
        env_kwargs = parse_env_overrides(args.env)
        left_out: list[str] = []
        if args.policies:
            policies = _split_names(args.policies)
        else:
            policies = default_policies(args.scenario)
            if env_kwargs.get("workload_csv"):
                policies, left_out = own_workload_defaults(policies)
        args.reference_given = args.reference is not None
        args.plan = check_run(args, policies, env_kwargs)      # every policy resolved once, for cmd_run
        if left_out:
            print(f"note: the default policies leave out {', '.join(left_out)}: its rule needs the scenario's "
                  "training split, which a --workload-csv run does not have (its file is played whole)")
        if args.workload_csv and "reference_gpu" not in env_kwargs:
            import cluster_env

            gpu = cluster_env.get_scenario(args.scenario).world.reference_gpu
            print(f"note: the durations in {args.workload_csv} are read as measured on {gpu} ({args.scenario}'s "
                  "reference GPU); say which GPU they were measured on with --reference-gpu")
        for note in custom_trace_notes(args.scenario, args.split, env_kwargs):
            print(f"note: {note}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run ``cluster-bench``; a user's mistake prints one line and a hint and returns 2; Ctrl-C
    (outside the commands that keep the episodes that finished) one line and 130."""
    from baselines.startup import INTERRUPTED, is_interrupt, started

    started()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    argv, debug = pop_flag(sys.argv[1:] if argv is None else argv, "--debug")
    prog = "cluster-bench"
    try:
        args = build_parser().parse_args(argv)
        prog = f"cluster-bench {args.command}"
        args.debug = debug
        with contextlib.ExitStack() as resources:    # output locks and --trust-model, released at the end
            resources.enter_context(trust_from_args(args))
            _prepare(args)
            args.resources = resources
            return int(args.func(args) or 0)
    except USER_ERRORS as exc:
        if debug:
            raise
        return report(exc, prog)
    except (KeyboardInterrupt, SystemError) as exc:     # SystemError: Ctrl-C inside a compiled function
        if debug or not is_interrupt(exc):
            raise
        print(f"\n{prog}: interrupted", file=sys.stderr)
        return INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
