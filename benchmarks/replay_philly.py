"""Replay the whole Philly trace through the public PettingZoo API, and time philly-v0 steps.

Usage::

    python benchmarks/replay_philly.py                 # full replay + philly-v0 steps/s
    python benchmarks/replay_philly.py --jobs 10000    # the first 10,000 jobs only
    python benchmarks/replay_philly.py --skip-replay   # only the philly-v0 figure

Figure 1: the 82,247 jobs of the Philly trace on Philly's real 552-machine cluster (321 x 2 P100,
231 x 8 P40; every world-model effect on) with FIFO + first-fit (the lowest allowed action of each
agent). Prints wall time, environment steps per second and simulator events per second.
Figure 2: steps per second on ``philly-v0`` (train split) with the same policy, over a few episodes.
Both run on one core: the script pins numpy's threads to one. ``benchmarks/suite.py`` reuses
:func:`replay` and :func:`run` for its replay and scaling sections.
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from dataclasses import replace

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import cluster_env  # noqa: E402
from cluster_env.core import kernels  # noqa: E402
from cluster_env.loaders import philly_cluster, philly_trace  # noqa: E402
from cluster_env.scenarios.registry import WHOLE_SPLITS  # noqa: E402


def fifo_first_fit(obs: dict) -> dict:
    """Oldest fitting job first; lowest-numbered machine with a usable free GPU."""
    return {agent: int(o["action_mask"].argmax()) for agent, o in obs.items()}


def run(env, seed: int) -> tuple[int, float, dict]:
    steps, wall, _, metrics = run_timed(env, seed)
    return steps, wall, metrics


def run_timed(env, seed: int) -> tuple[int, float, float, dict]:
    """One episode after its reset: (steps, wall seconds, CPU seconds of this thread, metrics).
    On a shared machine the CPU time leaves out the time other processes held the core."""
    obs, infos = env.reset(seed=seed)
    steps = 0
    t0, c0 = time.perf_counter(), time.thread_time()
    while env.agents:
        obs, rewards, terms, truncs, infos = env.step(fifo_first_fit(obs))
        steps += 1
    wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
    return steps, wall, cpu, infos["orderer"]["metrics"]


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far, in MiB (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def replay(jobs: int | None) -> dict:
    """Replay the first ``jobs`` Philly jobs (all if None) on Philly's cluster; return the figures."""
    kernel_load = kernels.warm_up()     # the one-off load of the compiled kernels, timed apart
    trace = philly_trace()
    base = cluster_env.get_scenario("philly-v0")
    scenario = replace(base, name="philly-full-replay", cluster=philly_cluster, splits=dict(WHOLE_SPLITS),
                       jobs_per_episode=jobs)
    t0 = time.perf_counter()
    env = cluster_env.parallel_env(scenario, split="test")
    build = time.perf_counter() - t0
    steps, wall, metrics = run(env, seed=0)
    return {"jobs": env.episode_view().num_jobs, "trace_jobs": trace.num_jobs, "machines": env.cluster.num_machines,
            "gpus": env.cluster.total_gpus, "build_s": build, "wall_s": wall, "steps": steps,
            "events": env.episode_view().events, "metrics": metrics, "peak_rss_mib": peak_rss_mib(),
            "kernel_load_s": kernel_load, "kernels": kernels.backend()}


def full_replay(jobs: int | None) -> None:
    r = replay(jobs)
    wall, steps, events, metrics = r["wall_s"], r["steps"], r["events"], r["metrics"]
    print(f"full replay: {r['jobs']:,} jobs of {r['trace_jobs']:,} on {r['machines']} machines / "
          f"{r['gpus']:,} GPUs (every effect on), FIFO + first-fit")
    print(f"  {r['kernels']} kernels loaded in {r['kernel_load_s']:.2f} s; "
          f"env construction {r['build_s']:.2f} s; episode wall time {wall:.2f} s; "
          f"peak RSS {r['peak_rss_mib']:,.0f} MiB")
    print(f"  {steps:,} steps -> {steps / wall:,.0f} steps/s; {events:,} events -> {events / wall:,.0f} events/s")
    print(f"  avg JCT {metrics['avg_jct']:,.0f} s, utilisation {metrics['gpu_utilization']:.3f}, "
          f"makespan {metrics['makespan'] / 86400:.1f} days")


def philly_v0_steps(episodes: int, repeat: int) -> None:
    """Steps per second over ``episodes`` episodes, ``repeat`` times: best and median of the runs
    (timing noise on a shared machine only ever slows a run down)."""
    env = cluster_env.parallel_env("philly-v0", split="train")
    rates, cpu_rates = [], []
    for _ in range(repeat):
        total_steps, total_wall, total_cpu = 0, 0.0, 0.0
        for seed in range(episodes):
            steps, wall, cpu, _ = run_timed(env, seed)
            total_steps += steps
            total_wall += wall
            total_cpu += cpu
        rates.append(total_steps / total_wall)
        cpu_rates.append(total_steps / total_cpu)
    print(f"philly-v0: {episodes} episodes ({total_steps:,} steps) x {repeat} runs -> best "
          f"{max(rates):,.0f}, median {float(np.median(rates)):,.0f} steps/s (FIFO + first-fit); "
          f"per CPU second: best {max(cpu_rates):,.0f}, median {float(np.median(cpu_rates)):,.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=None, help="replay only the first N jobs")
    parser.add_argument("--episodes", type=int, default=5, help="philly-v0 episodes to time")
    parser.add_argument("--repeat", type=int, default=3, help="philly-v0 timing runs")
    parser.add_argument("--skip-replay", action="store_true")
    args = parser.parse_args()
    if not args.skip_replay:
        full_replay(args.jobs)
    philly_v0_steps(args.episodes, args.repeat)


if __name__ == "__main__":
    main()
