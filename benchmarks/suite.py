"""The benchmark suite: every speed figure of the project from one entry point.

Usage::

    python benchmarks/suite.py                      # the full suite (a few minutes on one core)
    python benchmarks/suite.py --quick              # every section, smaller (well under a minute)
    python benchmarks/suite.py --json results.json  # also write the rows as JSON
    python benchmarks/suite.py --sections replay,scaling_jobs

Sections (each row: section, case, value, unit):

* ``env_steps``: environment steps per second on every registered scenario (test split) with
  the ``random`` and ``fifo`` baselines, through the public PettingZoo API. ``env`` counts the
  time inside ``reset`` and ``step``, ``env+policy`` adds the baseline's ``act``; the best of
  three runs of 10,000 steps (consecutive seeds from 0).
* ``replay``: the whole Philly trace (82,247 jobs) on Philly's real cluster (552 machines,
  2,490 GPUs, every world-model effect on) with FIFO + first-fit, in a fresh process: wall
  time, events and steps per second, peak resident memory (``--quick``: the first 5,000 jobs).
* ``scaling_jobs``: cost per simulator event (wall time of the episode / events) for the first
  1,000, 10,000 and all 82,247 Philly jobs on the same cluster: flat when no path is quadratic.
* ``scaling_cluster``: cost per event and per step (decision) for synthetic heterogeneous
  clusters of 64, 512, 4,096 and 6,208 GPUs (10 to 970 machines: V100 / P100 / K80, 8- and 4-GPU
  machines) running the same Philly jobs, arrivals stretched so that the offered load per GPU is
  the same. The event mix differs: on the smallest cluster most events are fluctuation updates
  while jobs wait (several events per decision), on the largest about one event per decision.
* the dual agent's sections (decision latency, training steps per second) come from
  ``benchmarks/bench_dual_agent.py`` when ``dual_agent`` is installed; skipped otherwise.

Figures are printed, never asserted. Everything runs on one core: numpy's threads are pinned
to one, and each replay runs alone in a fresh process (so that its peak memory is its own).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import os
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

import baselines  # noqa: E402
import cluster_env  # noqa: E402
import replay_philly  # noqa: E402
from cluster_env.core import kernels  # noqa: E402
from cluster_env.core.instance import Cluster  # noqa: E402
from cluster_env.loaders import philly_trace  # noqa: E402
from cluster_env.scenarios.registry import WHOLE_SPLITS  # noqa: E402

SECTIONS = ("env_steps", "replay", "scaling_jobs", "scaling_cluster", "dual_agent")
QUICK_REPLAY_JOBS = 5_000
# Synthetic clusters: (GPU type, GPUs per machine, share of the cluster's GPUs).
SCALING_GPUS = (64, 512, 4096, 6208)
SYNTHETIC_MIX = (("V100", 8, 0.5), ("P100", 8, 0.25), ("K80", 4, 0.25))
# The Philly jobs' arrival times are multiplied by this x (Philly's 2,490 GPUs / the cluster's
# GPUs): the offered load per GPU is then the same on every cluster size.
SYNTHETIC_LOAD_STRETCH = 0.25
SYNTHETIC_MAX_JOB_GPUS = 32        # jobs of the trace that fit the smallest cluster


def row(section: str, case: str, value: float, unit: str) -> dict:
    return {"section": section, "case": case, "value": float(value), "unit": unit}


# ---------------------------------------------------------------------------- environment steps
def time_policy(env, policy, budget: int) -> tuple[int, float, float]:
    """Run ``policy`` for ``budget`` steps over consecutive seeds; (steps, env seconds, total seconds)."""
    steps, env_s, seed = 0, 0.0, 0
    clock = time.perf_counter
    start = clock()
    while steps < budget:
        t = clock()
        obs, infos = env.reset(seed=seed)
        env_s += clock() - t
        policy.reset(seed)
        seed += 1
        while env.agents and steps < budget:
            actions = policy.act(obs, infos)
            t = clock()
            obs, _, _, _, infos = env.step(actions)
            env_s += clock() - t
            steps += 1
    return steps, env_s, clock() - start


def env_steps(quick: bool) -> list[dict]:
    """Best of ``repeat`` runs of ``budget`` steps: on a shared machine noise only slows a run."""
    budget, repeat = (2_000, 1) if quick else (10_000, 3)
    rows = []
    for scenario in cluster_env.list_scenarios():
        for name in ("random", "fifo"):
            policy = baselines.make_policy(name)
            env = cluster_env.parallel_env(scenario, split="test", **policy.env_overrides)
            time_policy(env, policy, 200)                             # warm caches (trace, tables)
            runs = [time_policy(env, policy, budget) for _ in range(repeat)]
            rows.append(row("env_steps", f"{scenario} {name}: env", max(n / e for n, e, _ in runs), "steps/s"))
            rows.append(row("env_steps", f"{scenario} {name}: env+policy",
                            max(n / t for n, _, t in runs), "steps/s"))
    return rows


# ---------------------------------------------------------------------------- Philly replay
def in_fresh_process(fn, *args):
    """``fn(*args)`` in a new interpreter (spawned), so that its peak memory is its own."""
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
        return pool.submit(fn, *args).result()


def replay_rows(r: dict) -> list[dict]:
    case = f"{r['jobs']:,} jobs, {r['machines']} machines / {r['gpus']:,} GPUs"
    return [
        row("replay", f"{case}: wall time", r["wall_s"], "s"),
        row("replay", f"{case}: events per second", r["events"] / r["wall_s"], "events/s"),
        row("replay", f"{case}: steps per second", r["steps"] / r["wall_s"], "steps/s"),
        row("replay", f"{case}: peak memory (RSS)", r["peak_rss_mib"], "MiB"),
        row("replay", f"{r['kernels']} kernels: one-off load before the episode", r["kernel_load_s"], "s"),
    ]


def per_event_row(section: str, case: str, r: dict) -> dict:
    return row(section, f"{case} ({r['events']:,} events)", r["wall_s"] / r["events"] * 1e6, "us/event")


def per_step_row(section: str, case: str, r: dict) -> dict:
    return row(section, f"{case} ({r['steps']:,} steps)", r["wall_s"] / r["steps"] * 1e6, "us/step")


# ---------------------------------------------------------------------------- cluster scaling
def synthetic_cluster(gpus: int) -> Cluster:
    """A heterogeneous cluster of ``gpus`` GPUs in the proportions of ``SYNTHETIC_MIX``."""
    machines = []
    for gpu_type, per_machine, share in SYNTHETIC_MIX:
        count = int(gpus * share) // per_machine
        machines += [(f"{gpu_type.lower()}-{i}", gpu_type, per_machine) for i in range(count)]
    return Cluster.from_machines(f"synthetic-{gpus}", machines)


def cluster_replay(gpus: int, jobs: int) -> dict:
    """The first ``jobs`` Philly jobs of at most ``SYNTHETIC_MAX_JOB_GPUS`` GPUs on a synthetic
    cluster of ``gpus`` GPUs with FIFO + first-fit; the same figures as ``replay_philly.replay``."""
    trace = philly_trace()
    index = np.flatnonzero(trace.gpus <= SYNTHETIC_MAX_JOB_GPUS)[:jobs]
    workload = trace.subset(index, name=f"philly-first-{jobs}")
    cluster = synthetic_cluster(gpus)
    scenario = replace(cluster_env.get_scenario("philly-v0"), name=f"synthetic-{gpus}",
                       cluster=lambda: cluster, workload=lambda: workload, splits=dict(WHOLE_SPLITS),
                       jobs_per_episode=None, time_scale=SYNTHETIC_LOAD_STRETCH * 2490 / gpus)
    env = cluster_env.parallel_env(scenario, split="test")
    steps, wall, _ = replay_philly.run(env, seed=0)
    return {"jobs": env.episode_view().num_jobs, "machines": cluster.num_machines, "gpus": cluster.total_gpus,
            "wall_s": wall, "steps": steps, "events": env.episode_view().events}


def scaling_cluster(quick: bool) -> list[dict]:
    jobs = 1_500 if quick else 10_000
    kernels.warm_up()
    rows = []
    for gpus in SCALING_GPUS:
        r = cluster_replay(gpus, jobs)
        case = f"{r['gpus']:,} GPUs / {r['machines']} machines, {r['jobs']:,} jobs"
        rows.append(per_event_row("scaling_cluster", case, r))
        rows.append(per_step_row("scaling_cluster", case, r))
    return rows


# ---------------------------------------------------------------------------- dual agent
def dual_agent(quick: bool) -> list[dict]:
    """The dual agent's rows; raises ``Skipped`` when it is not installed."""
    try:
        import dual_agent as _  # noqa: F401
        import bench_dual_agent
    except ImportError as e:
        raise Skipped(f"dual_agent is not installed ({e})") from e
    return bench_dual_agent.measure(quick)


class Skipped(Exception):
    """A section that cannot run here (its reason is printed and recorded in the JSON)."""


# ---------------------------------------------------------------------------- driver
def run_sections(sections: list[str], quick: bool) -> tuple[list[dict], dict[str, str]]:
    """All rows, and per section "N rows" or "skipped: why"."""
    rows: list[dict] = []
    status: dict[str, str] = {}
    replays: dict[int | None, dict] = {}

    def replay(jobs: int | None) -> dict:
        if jobs not in replays:
            replays[jobs] = in_fresh_process(replay_philly.replay, jobs)
        return replays[jobs]

    full = QUICK_REPLAY_JOBS if quick else None
    for section in sections:
        t0 = time.perf_counter()
        try:
            if section == "env_steps":
                new = env_steps(quick)
            elif section == "replay":
                new = replay_rows(replay(full))
            elif section == "scaling_jobs":
                sizes = (1_000, 2_000, full) if quick else (1_000, 10_000, full)
                new = [per_event_row("scaling_jobs", f"{replay(n)['jobs']:,} Philly jobs", replay(n))
                       for n in sizes]
            elif section == "scaling_cluster":
                new = scaling_cluster(quick)
            else:
                new = dual_agent(quick)
        except Skipped as e:
            status[section] = f"skipped: {e}"
            print(f"{section} section skipped: {e}\n", flush=True)
            continue
        print_table(new)
        print(f"  ({section}: {time.perf_counter() - t0:.1f} s)\n", flush=True)
        status[section] = f"{len(new)} rows"
        rows += new
    return rows, status


def _fmt(value: float) -> str:
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:,.3g}" if abs(value) >= 1 else f"{value:.3g}"


def print_table(rows: list[dict]) -> None:
    section = None
    width = max((len(r["case"]) for r in rows), default=0)
    for r in rows:
        if r["section"] != section:
            section = r["section"]
            print(f"{section}")
        print(f"  {r['case']:<{width}}  {_fmt(r['value']):>12} {r['unit']}")
    sys.stdout.flush()


def machine_info() -> dict:
    return {"python": platform.python_version(), "numpy": np.__version__, "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS")}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller runs of every section (CI smoke)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows to this JSON file")
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help=f"comma-separated subset of {','.join(SECTIONS)}")
    args = parser.parse_args(argv)
    sections = [s for s in args.sections.split(",") if s]
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown section(s) {unknown}; choose from {list(SECTIONS)}")
    t0 = time.perf_counter()
    rows, status = run_sections(sections, args.quick)
    info = {**machine_info(), "quick": args.quick, "wall_s": time.perf_counter() - t0}
    print(f"suite: {len(rows)} figures in {info['wall_s']:.1f} s ({'quick' if args.quick else 'full'}; "
          f"python {info['python']}, numpy {info['numpy']}, {info['cpus']} CPUs, one used)")
    if args.json is not None:
        args.json.write_text(json.dumps({"machine": info, "sections": status, "rows": rows}, indent=1) + "\n")
    return rows


if __name__ == "__main__":
    main()
