"""Long-run stability: many episodes in one process; resident memory and open file descriptors.

Usage::

    python benchmarks/long_run_stability.py                         # 40 episodes each of toy-v0, philly-v0
    python benchmarks/long_run_stability.py --episodes 200          # the figure quoted in reports
    python benchmarks/long_run_stability.py --scenarios openb-v0 --episodes 60 --every 10
    python benchmarks/long_run_stability.py --fresh-env             # a new environment every episode

For each scenario it runs ``--episodes`` episodes with a seeded random masked policy (a new seed
each episode, preemption on so that every code path runs), and every ``--every`` episodes prints
the resident set size (RSS, from ``/proc/self/statm``), the Python heap traced by ``tracemalloc``
(with ``--trace``) and the number of open file descriptors (``/proc/self/fd``). The last line per
scenario compares the end with the state after the first report (the first episodes warm caches:
packaged traces, speed tables). On systems without ``/proc`` the RSS and fd columns read "n/a".
Runs on one core: the script pins numpy's threads to one.
"""
from __future__ import annotations

import argparse
import gc
import os
import time
import tracemalloc

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import cluster_env  # noqa: E402


def rss_mb() -> float | None:
    """Resident set size of this process in MiB (None without /proc)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def open_fds() -> int | None:
    """Number of open file descriptors of this process (None without /proc)."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return None


def _fmt(x, spec: str) -> str:
    """``x`` formatted with ``spec``; "n/a" (as wide as ``spec`` asks) when it is None."""
    width = int("".join(c for c in spec.split(".")[0] if c.isdigit()) or 0)
    return "n/a".rjust(width) if x is None else format(x, spec)


def run_episode(env, seed: int, rng: np.random.Generator, lazy: float = 0.5) -> tuple[int, dict]:
    """One episode under a random masked policy that advances with probability ``lazy``."""
    obs, infos = env.reset(seed=seed)
    steps = 0
    while env.agents:
        actions = {}
        for agent, o in obs.items():
            mask = o["action_mask"]
            if mask[-1] and rng.random() < lazy:
                actions[agent] = len(mask) - 1
            else:
                actions[agent] = int(rng.choice(np.flatnonzero(mask)))
        obs, rewards, terms, truncs, infos = env.step(actions)
        steps += 1
    return steps, infos["orderer"]["metrics"]


def stability(scenario: str, episodes: int, every: int, jobs: int | None, fresh_env: bool,
              trace: bool, seed: int) -> dict:
    """Run the episodes; print a line every ``every`` episodes; return the figures."""
    kwargs = {"preemption": True}
    if jobs is not None and scenario != "toy-v0":
        kwargs["jobs_per_episode"] = jobs
    make = lambda: cluster_env.parallel_env(scenario, split="train", **kwargs)  # noqa: E731
    env = make()
    rng = np.random.default_rng(seed)
    rows = []
    total_steps = 0
    t0 = time.perf_counter()
    print(f"{scenario}: {episodes} episodes, {'a new env' if fresh_env else 'one env'} per "
          f"{'episode' if fresh_env else 'run'}, random masked policy, preemption on")
    print(f"  {'episode':>8} {'steps':>9} {'RSS MiB':>9} {'heap MiB':>9} {'open fds':>9}")
    for ep in range(1, episodes + 1):
        if fresh_env:
            env.close()
            env = make()
        steps, metrics = run_episode(env, seed + ep, rng)
        assert metrics["jobs_finished"] == env.episode_view().num_jobs
        total_steps += steps
        if ep % every == 0 or ep == episodes:
            gc.collect()
            heap = tracemalloc.get_traced_memory()[0] / 2**20 if trace else None
            row = (ep, total_steps, rss_mb(), heap, open_fds())
            rows.append(row)
            print(f"  {ep:>8} {total_steps:>9,} {_fmt(row[2], '9.1f')} {_fmt(row[3], '9.2f')} "
                  f"{_fmt(row[4], '9d')}")
    env.close()
    wall = time.perf_counter() - t0
    first, last = rows[0], rows[-1]
    out = {"scenario": scenario, "episodes": episodes, "steps": total_steps, "wall_s": wall,
           "rss_start": first[2], "rss_end": last[2], "heap_start": first[3], "heap_end": last[3],
           "fd_start": first[4], "fd_end": last[4]}
    growth = None if first[2] is None else last[2] - first[2]
    print(f"  {scenario}: RSS {_fmt(first[2], '.1f')} -> {_fmt(last[2], '.1f')} MiB "
          f"(growth {_fmt(growth, '+.1f')} MiB after episode {first[0]}), open fds "
          f"{_fmt(first[4], 'd')} -> {_fmt(last[4], 'd')}"
          + (f", traced heap {first[3]:.2f} -> {last[3]:.2f} MiB" if trace else "")
          + f"; {total_steps:,} steps in {wall:.1f} s")
    return out


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", nargs="+", default=["toy-v0", "philly-v0"])
    parser.add_argument("--episodes", type=int, default=40, help="episodes per scenario (default 40)")
    parser.add_argument("--every", type=int, default=20, help="report every N episodes (default 20)")
    parser.add_argument("--jobs", type=int, default=None,
                        help="jobs per episode for trace scenarios (default: the scenario's, 1,000)")
    parser.add_argument("--fresh-env", action="store_true", help="build a new environment every episode")
    parser.add_argument("--trace", action="store_true", help="also report the tracemalloc heap (slower)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.episodes < 1 or args.every < 1:
        parser.error("--episodes and --every must be >= 1")
    if args.trace:
        tracemalloc.start()
    return [stability(s, args.episodes, args.every, args.jobs, args.fresh_env, args.trace, args.seed)
            for s in args.scenarios]


if __name__ == "__main__":
    main()
