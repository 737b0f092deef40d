"""What `cluster-bench scores --check` costs: its wall and CPU time, and each task's serial CPU.

    python benchmarks/scores_check.py                 # the command (wall, CPU), then per-task CPU
    python benchmarks/scores_check.py --skip-tasks    # the command only
    python benchmarks/scores_check.py --skip-check --top 15

* ``check``: ``python -m baselines scores --check --quiet`` in a subprocess (every packaged scores
  file, the default process pool): wall time and the CPU time of the subprocess and its workers.
* ``tasks``: every episode of the check run serially in this process, CPU seconds summed per
  (scenario, policy) with the engine that ran it (``compiled`` or ``api``), and the total. On a
  shared machine the wall clock of the check moves with the other jobs; the serial CPU total is
  the steadier figure, and ``total / workers`` plus the per-process start-up is what the check
  takes on an idle machine with that many cores.
"""
from __future__ import annotations

import argparse
import collections
import os
import resource
import subprocess
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")


def time_check() -> None:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "baselines", "scores", "--check", "--quiet"],
                         capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        print(out.stdout[-3000:], out.stderr[-3000:])
        raise SystemExit(f"scores --check failed with exit code {out.returncode}")
    user, sys_ = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    print(f"check: `cluster-bench scores --check` ({os.cpu_count()} cores): wall {wall:.1f} s, "
          f"CPU {user + sys_:.1f} s (user {user:.1f}, sys {sys_:.1f})")


def time_tasks(top: int) -> None:
    import torch

    from baselines.harness.scores import SCORES_DIR, load_scores
    from baselines.harness.sweep import make_tasks, run_task

    torch.set_num_threads(1)
    cost: collections.Counter = collections.Counter()
    engines: dict = {}
    t0 = time.process_time()
    for path in sorted(SCORES_DIR.glob("*.json")):
        data = load_scores(path)
        for scenario, policies in data["scores"].items():
            for task in make_tasks(sorted(policies), [scenario], data["split"], data["seeds"], data.get("env_kwargs")):
                start = time.process_time()
                result = run_task(task)
                cost[(scenario, task.policy)] += time.process_time() - start
                engines[(scenario, task.policy)] = result.engine
    total = time.process_time() - t0
    api = sum(v for k, v in cost.items() if engines[k] == "api")
    print(f"tasks: serial CPU {total:.1f} s in all ({api:.1f} s through the API, "
          f"{total - api:.1f} s compiled, first-use loading included)")
    for (scenario, policy), seconds in cost.most_common(top):
        print(f"  {seconds:7.2f} s  {engines[(scenario, policy)]:8s} {scenario} {policy}")


def main(argv: "list[str] | None" = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--skip-check", action="store_true", help="do not time the command")
    parser.add_argument("--skip-tasks", action="store_true", help="do not time the tasks serially")
    parser.add_argument("--top", type=int, default=12, help="(scenario, policy) rows to print")
    args = parser.parse_args(argv)
    if not args.skip_check:
        time_check()
    if not args.skip_tasks:
        time_tasks(args.top)


if __name__ == "__main__":
    main()
