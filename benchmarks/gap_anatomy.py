"""Where a policy's gap to the best-known schedule lies: which jobs and which decisions.

For each test window the policy and the window's best-known schedule (its certificate,
``baselines/optimality/certificates/<scenario>/<seed>.json``, replayed in the compiled engine:
``baselines.optimality.certificate.replay_episode``; nothing is searched) play the SAME window:
the same jobs and the same world draw, so their per-job outcomes
(``baselines.harness.episode.JobOutcomes``) pair by job id. The gap in average JCT is the mean
over jobs of the per-job excess ``JCT_policy - JCT_best``; this script splits the summed excess:

* by job group: GPU demand (1, 2-8, >8 GPUs) and true duration (the workload's work in seconds on
  the reference GPU, known only in hindsight; fixed bins <10 min, 10 min-1 h, 1-10 h, >10 h), each
  with its share of the jobs, its share of the excess, and its JCT ratio (the group's summed JCT
  under the policy over the best-known's: the ratio of its mean JCTs);
* by direction: jobs that finished later than in the best-known schedule, earlier, or at the same
  instant (the later jobs' share exceeds 100% when the policy also finishes some jobs earlier);
* by component (exact per job: ``JCT = pending + executed + overhead``): waiting for GPUs (before
  the first start and after each preemption), running (the placement's speed: GPU type, spread
  over machines, contention, fluctuation) and restart overheads;
* by last placement: jobs whose last placement ran at a lower nominal speed (GPU type and spread)
  than the same job's last placement in the best-known schedule;
* decisions per window, for both schedules: preemptions (moves left out), moves (the migration
  rule's preemptions), jobs preempted at least once, restart overhead.

Shares pool the windows (the sum over windows of a group's excess over the sum of the total
excess): the share of the mean per-window gap in average JCT, since every window has the same
number of jobs. The headline ratio is the geometric mean over windows of avg JCT / best-known, as
``benchmarks/headroom.py --optimality`` reports it. Windows where either schedule leaves a job
unfinished, or where the certificate does not replay to its claim (within the scores files'
relative tolerance), are left out and counted.

    python benchmarks/gap_anatomy.py --scenario philly-hetero-v2 [--policy dual] [--seeds 0-99]
        [--workers 1] [--out gap.json]

``--policy``: any name ``cluster-bench`` resolves (``las-migrate``, ``dual``, ``ORDERER+PLACER``,
a ``*.priority.json`` agent file); default ``dual`` where one ships for the scenario, else
``las-migrate``. Cost: two compiled episodes per window (about 1 s together for 1,000 jobs).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Optional, Sequence

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

#: Job groups by GPU demand: (label, lowest, highest GPUs).
GPU_GROUPS = (("1 GPU", 1, 1), ("2-8 GPUs", 2, 8), (">8 GPUs", 9, math.inf))
#: Job groups by true duration (seconds of work on the reference GPU): (label, from, below).
DURATION_GROUPS = (("<10 min", 0.0, 600.0), ("10 min-1 h", 600.0, 3600.0), ("1-10 h", 3600.0, 36000.0),
                   (">10 h", 36000.0, math.inf))
#: The parts a job's JCT splits into, exactly: waiting before its first start, waiting after
#: preemptions (``JobOutcomes.pending`` is their sum), running at its last placement's nominal
#: speed (``duration / nominal``: GPU type and spread over machines), the rest of its running time
#: (``executed`` less that: the machine's static factor, fluctuation, contention, and earlier
#: placements of a preempted job), restart overheads.
COMPONENTS = ("first_wait", "later_wait", "nominal_run", "other_run", "overhead")
#: Their column heads in the tables.
COMPONENT_HEADS = ("waiting for first start", "waiting after preemption", "running: GPU type & spread",
                   "running: rest", "restart overhead")


def components(jobs: Any) -> dict:
    """A :class:`JobOutcomes`' per-job :data:`COMPONENTS`, which sum to its JCT."""
    first = jobs.first_start - jobs.submit
    nominal_run = jobs.duration / jobs.nominal
    return {"first_wait": first, "later_wait": jobs.pending - first, "nominal_run": nominal_run,
            "other_run": jobs.executed - nominal_run, "overhead": jobs.overhead}


#: The concentration reported: the share of the excess held by this fraction of each window's jobs,
#: those with the largest excess.
TOP_SHARE = 0.01
#: The sums kept per group of jobs (pooled over windows).
_SUMS = ("jobs", "excess", "jct_policy", "jct_best", "restarts_policy", "restarts_best",
         *(f"d_{c}" for c in COMPONENTS))


def default_policy(scenario: str) -> str:
    """``dual`` where an agent ships for ``scenario``, else ``las-migrate`` (the strongest rule)."""
    from dual_agent import shipped_agent_path   # looks for the file: loads nothing

    return "dual" if shipped_agent_path(scenario) is not None else "las-migrate"


def group_sums(policy: Any, best: Any, mask: np.ndarray) -> dict:
    """The :data:`_SUMS` of the jobs in ``mask``, from two :class:`JobOutcomes` of one window."""
    out = {"jobs": int(mask.sum()), "excess": float((policy.jct - best.jct)[mask].sum()),
           "jct_policy": float(policy.jct[mask].sum()), "jct_best": float(best.jct[mask].sum()),
           "restarts_policy": int(policy.restarts[mask].sum()), "restarts_best": int(best.restarts[mask].sum())}
    mine, theirs = components(policy), components(best)
    for c in COMPONENTS:
        out[f"d_{c}"] = float((mine[c] - theirs[c])[mask].sum())
    return out


def decisions(jobs: Any) -> dict:
    """One schedule's decisions in its window: preemptions without the moves (with them when the
    policy does not say how many: ``moves`` None), moves, jobs preempted at least once, restart
    overhead (seconds)."""
    restarts = int(jobs.restarts.sum())
    moves = jobs.moves
    return {"preemptions": restarts - (moves or 0), "moves": moves, "jobs_restarted": int((jobs.restarts > 0).sum()),
            "overhead_s": float(jobs.overhead.sum())}


def window_anatomy(policy: Any, best: Any) -> dict:
    """The anatomy of one window's gap from the policy's and the best-known schedule's
    :class:`~baselines.harness.episode.JobOutcomes` (the same window: they pair by job id).
    Every job must have finished in both (ValueError otherwise)."""
    if len(policy.submit) != len(best.submit) or not np.array_equal(policy.submit, best.submit):
        raise ValueError("the two schedules did not play the same jobs")
    if np.isnan(policy.finish).any() or np.isnan(best.finish).any():
        raise ValueError("a job did not finish in one of the schedules")
    excess = policy.jct - best.jct
    every = np.ones(len(excess), dtype=bool)
    gpus, duration = policy.gpus, policy.duration
    groups = {
        "gpus": {label: group_sums(policy, best, (gpus >= lo) & (gpus <= hi)) for label, lo, hi in GPU_GROUPS},
        "duration": {label: group_sums(policy, best, (duration >= lo) & (duration < hi))
                     for label, lo, hi in DURATION_GROUPS},
        "direction": {"later": group_sums(policy, best, excess > 0), "earlier": group_sums(policy, best, excess < 0),
                      "same": group_sums(policy, best, excess == 0)},
        "last placement": {"slower than best-known's": group_sums(policy, best, policy.nominal < best.nominal),
                           "as fast": group_sums(policy, best, policy.nominal == best.nominal),
                           "faster": group_sums(policy, best, policy.nominal > best.nominal)},
    }
    top = max(1, math.ceil(TOP_SHARE * len(excess)))
    return {"jobs": len(excess), "top_excess": float(np.sort(excess)[::-1][:top].sum()),
            "avg_jct_policy": float(policy.jct.mean()), "avg_jct_best": float(best.jct.mean()),
            "total": group_sums(policy, best, every), "groups": groups,
            "decisions": {"policy": decisions(policy), "best": decisions(best)}}


def play_window(policy: str, scenario: str, seed: int) -> dict:
    """One window: the policy's episode and the certificate's replay, paired (the harness's own
    dispatch plays the policy: the compiled engine where it runs it)."""
    from baselines.harness.scores import DEFAULT_REL_TOL
    from baselines.harness.sweep import Task, run_task
    from baselines.optimality.certificate import certificate_path, load_certificate, replay_episode

    cert = load_certificate(certificate_path(scenario, seed))
    mine = run_task(Task(policy, scenario, "test", seed))
    best = replay_episode(cert)
    row = {"seed": seed, "window": best.record["window"], "best_kind": cert.schedule["kind"],
           "best_rule": cert.schedule.get("policy", "")}
    if mine.record["window"] != best.record["window"]:
        return {**row, "skipped": f"the policy played window {mine.record['window']}"}
    if abs(best.record["avg_jct"] - cert.avg_jct) > DEFAULT_REL_TOL * cert.avg_jct:
        return {**row, "skipped": f"the certificate replays to {best.record['avg_jct']!r}, not {cert.avg_jct!r}"}
    if mine.jobs is None:
        return {**row, "skipped": "the policy's episode gave no per-job outcomes"}
    try:
        return {**row, **window_anatomy(mine.jobs, best.jobs)}
    except ValueError as exc:
        return {**row, "skipped": str(exc)}


def _add(into: dict, sums: dict) -> None:
    for key in _SUMS:
        into[key] = into.get(key, 0) + sums[key]


def aggregate(rows: Sequence[dict]) -> dict:
    """The windows' anatomies pooled: per group its share of jobs, of the excess (with a 95%
    bootstrap interval over the windows) and of each component, its JCT ratio; the decisions'
    means per window; the headline ratio (geometric mean, 95% bootstrap interval)."""
    from baselines.harness.stats import geo_mean_ci, share_ci

    kept = [r for r in rows if "skipped" not in r]
    if not kept:
        raise ValueError("no window could be analysed: " + "; ".join(f"{r['seed']}: {r['skipped']}" for r in rows))
    total: dict = {}
    pooled: dict = {}
    for r in kept:
        _add(total, r["total"])
        for kind, groups in r["groups"].items():
            for label, sums in groups.items():
                _add(pooled.setdefault(kind, {}).setdefault(label, {}), sums)

    totals = [r["total"]["excess"] for r in kept]

    def interval(parts: list) -> list:
        return list(share_ci(parts, totals)[1:])

    def shares(s: dict, parts: list) -> dict:
        out = {"jobs_share": s["jobs"] / total["jobs"], "excess_share": s["excess"] / total["excess"],
               "excess_share_ci": interval(parts),
               "jct_ratio": s["jct_policy"] / s["jct_best"] if s["jct_best"] else math.nan,
               "excess_per_window_s": s["excess"] / len(kept),
               "restarts_per_job_policy": s["restarts_policy"] / s["jobs"] if s["jobs"] else math.nan,
               "restarts_per_job_best": s["restarts_best"] / s["jobs"] if s["jobs"] else math.nan}
        out.update({f"{c}_share": s[f"d_{c}"] / total["excess"] for c in COMPONENTS})
        return {**out, "sums": s}

    ratio, ratio_lo, ratio_hi = geo_mean_ci([r["avg_jct_policy"] / r["avg_jct_best"] for r in kept])
    decided = {}
    for who in ("policy", "best"):
        d = [r["decisions"][who] for r in kept]
        decided[who] = {k: (None if any(x[k] is None for x in d) else float(np.mean([x[k] for x in d])))
                        for k in d[0]}
    kinds: dict = {}
    for r in kept:
        key = r["best_rule"] or "priority index (searched)"
        kinds[key] = kinds.get(key, 0) + 1
    return {"windows": len(kept), "skipped": {str(r["seed"]): r["skipped"] for r in rows if "skipped" in r},
            "ratio_geomean": ratio, "ratio_ci": [ratio_lo, ratio_hi],
            "gap_per_job_s": total["excess"] / total["jobs"], "total": shares(total, totals),
            "components_ci": {c: interval([r["total"][f"d_{c}"] for r in kept]) for c in COMPONENTS},
            "top_jobs_excess_share": sum(r["top_excess"] for r in kept) / total["excess"],
            "groups": {kind: {label: shares(s, [r["groups"][kind][label]["excess"] for r in kept])
                              for label, s in groups.items()} for kind, groups in pooled.items()},
            "decisions_per_window": decided, "best_known_schedules": kinds}


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _interval(ci: Sequence[float], digits: Optional[int] = None) -> str:
    """``[lo, hi]``: percentages with one decimal (``digits`` None) or plain numbers."""
    if not all(math.isfinite(x) for x in ci):
        return "[n/a]"
    if digits is None:
        return f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"
    return f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def markdown(result: dict) -> str:
    """The tables of one run (what ``main`` prints)."""
    a = result["aggregate"]
    t = a["total"]
    parts = ", ".join(f"{h} {_pct(t[f'{c}_share'])} {_interval(a['components_ci'][c])}"
                      for c, h in zip(COMPONENTS, COMPONENT_HEADS))
    lines = [f"### {result['policy']} on {result['scenario']}, test windows {result['seeds_text']} "
             f"({a['windows']} windows)", "",
             f"avg JCT / best-known: {a['ratio_geomean']:.3f} {_interval(a['ratio_ci'], 3)} (geometric mean over "
             f"windows); mean excess "
             f"{a['gap_per_job_s']:,.0f} s per job, of which {parts}. The {TOP_SHARE:.0%} of each window's jobs "
             f"with the largest excess hold {_pct(a['top_jobs_excess_share'])} of it.", "",
             "| jobs | share of jobs | share of excess | " + " | ".join(COMPONENT_HEADS) + " | JCT ratio | "
             "preemptions per job (policy / best-known) |",
             "|---|" + "---:|" * (4 + len(COMPONENTS))]
    for kind in ("gpus", "duration", "direction", "last placement"):
        for label, g in a["groups"][kind].items():
            if not g["sums"]["jobs"]:
                continue
            cells = " | ".join(_pct(g[f"{c}_share"]) for c in COMPONENTS)
            lines.append(f"| {label} | {_pct(g['jobs_share'])} | {_pct(g['excess_share'])} "
                         f"{_interval(g['excess_share_ci'])} | {cells} | "
                         f"{g['jct_ratio']:.3f} | {g['restarts_per_job_policy']:.2f} / "
                         f"{g['restarts_per_job_best']:.2f} |")
    lines += ["", "Shares of the excess and of its parts are of the total excess (summed over windows), with 95% "
              "bootstrap intervals over the windows; a row's parts sum to its share of the excess. JCT ratio: "
              "the group's summed JCT over the best-known's. "
              "Preemptions per job count moves too.", "",
              "| per window (mean) | preemptions (moves left out) | moves | jobs preempted | "
              "restart overhead (job-hours) |",
              "|---|---:|---:|---:|---:|"]
    for who, label in (("policy", result["policy"]), ("best", "best-known")):
        d = a["decisions_per_window"][who]
        moves = "n/a" if d["moves"] is None else f"{d['moves']:.1f}"
        lines.append(f"| {label} | {d['preemptions']:.1f} | {moves} | {d['jobs_restarted']:.1f} | "
                     f"{d['overhead_s'] / 3600:.1f} |")
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(a["best_known_schedules"].items(), key=lambda kv: -kv[1]))
    lines += ["", f"Best-known schedules of these windows: {kinds}."]
    if a["skipped"]:
        lines.append(f"Left out: {len(a['skipped'])} windows ({a['skipped']}).")
    return "\n".join(lines)


def gap_anatomy(scenario: str, policy: Optional[str], seeds: Sequence[int], workers: int = 1) -> dict:
    """Every window's anatomy and their aggregate (the ``--out`` document)."""
    from baselines.optimality.certificate import certificate_path

    missing = [s for s in seeds if not certificate_path(scenario, s).exists()]
    if missing:
        shipped = sorted(p.name for p in certificate_path(scenario, 0).parent.parent.iterdir() if p.is_dir())
        raise SystemExit(f"no shipped best-known certificate for {scenario} test window(s) {missing[:5]} "
                         f"(certificates ship for test windows 0-99 of {', '.join(shipped)})")
    policy = policy or default_policy(scenario)
    t0 = time.perf_counter()
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            rows = list(pool.map(play_window, [policy] * len(seeds), [scenario] * len(seeds), seeds))
    else:
        rows = [play_window(policy, scenario, s) for s in seeds]
    return {"scenario": scenario, "policy": policy, "seeds": list(seeds), "wall_s": time.perf_counter() - t0,
            "aggregate": aggregate(rows), "windows": rows}


def main(argv: Optional[Sequence[str]] = None) -> None:
    from baselines.cli import parse_seeds
    from baselines.harness.files import atomic_write

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenario", default="philly-hetero-v2")
    p.add_argument("--policy", default=None, help="default: dual where it ships for the scenario, else las-migrate")
    p.add_argument("--seeds", default="0-99", help="test windows with a shipped certificate (0-99)")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--out", default=None, help="write the figures (JSON) here")
    args = p.parse_args(argv)
    seeds = parse_seeds(args.seeds)
    result = gap_anatomy(args.scenario, args.policy, seeds, args.workers)
    result["seeds_text"] = args.seeds
    result["command"] = "python benchmarks/gap_anatomy.py " + " ".join(sys.argv[1:] if argv is None else argv)
    print(markdown(result))
    print(f"\n({len(seeds)} windows in {result['wall_s']:.0f} s, {args.workers} worker(s))")
    if args.out:
        atomic_write(args.out, lambda f: f.write(json.dumps(result, indent=1) + "\n"))


if __name__ == "__main__":
    main()
