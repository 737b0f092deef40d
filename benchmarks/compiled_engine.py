"""The compiled baselines (``baselines.engine``) against a floor loop, the API path, and the
harness jobs they speed up.

Usage::

    python benchmarks/compiled_engine.py                    # every section
    python benchmarks/compiled_engine.py --sections floor   # floor, compiled engine and API per event
    python benchmarks/compiled_engine.py --sections scores,sweep --api   # also time the API path
    python benchmarks/compiled_engine.py --sections floor --quick        # 2,000 jobs: a smoke run

Sections (figures are printed, never asserted):

* ``compile``: the engine's one-off cost in a fresh process: compiling into an empty numba cache
  folder, then loading from that cache.
* ``floor``: Philly jobs submitted from 2017-10-01, GPUs capped at 8, on 64 x 8 P100 (512 GPUs;
  P100 is philly's reference GPU, so every job runs at its trace speed), every effect off, FIFO
  with backfill + first-fit (philly-v0's window of 32): the first 10,000 jobs and all of them. A
  ~90-line numba FIFO + first-fit event loop (:func:`floor_fifo`, written for this comparison: a
  heap of completions, no world model, no agents) gives the floor; the compiled engine and the
  PettingZoo API path run the same workload. Prints each one's average JCT (they must agree) and
  CPU microseconds per simulator event (best of 5 runs; the floor loop counts one event more: the last completion's
  instant, where the simulator's episode has already ended): ``loop`` the compiled event loop
  alone (what the floor loop does), ``compiled`` the whole compiled episode (with its Python
  set-up: workload sampling, simulator construction, state arrays and metrics).
* ``scores``: ``cluster-bench scores --check`` (every packaged scores file), in this process's
  pool of workers, as the CLI runs it; with ``--api`` also through the API only
  (``CLUSTER_BENCH_ENGINE=api``).
* ``sweep``: ``cluster-bench sweep --scenario philly-v1 --loads 0.5,1,1.5,2,3 --seeds 0-19
  --policies fifo,sjf,las,tiresias`` (400 episodes); with ``--api`` also through the API (long).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numba  # noqa: E402
import numpy as np  # noqa: E402

SECTIONS = ("compile", "floor", "scores", "sweep")
FLOOR_START = "2017-10-01T00:00:00"


# ------------------------------------------------------------------------------ the floor loop
@numba.njit(cache=True)
def floor_fifo(submit, duration, gpus, machine_gpus, window):
    """FIFO with backfill in the ``window`` oldest pending jobs + first-fit, every job at speed 1.

    Returns (finish times, events)."""
    n, m = len(submit), len(machine_gpus)
    free = machine_gpus.copy()
    free_total = free.sum()
    nxt = np.full(n + 1, -1)          # pending jobs: a linked list in arrival order; n = head
    prv = np.full(n, -1)
    tail = n
    pieces_m = np.zeros((n, 8), np.int64)
    pieces_g = np.zeros((n, 8), np.int64)
    npieces = np.zeros(n, np.int64)
    heap_t = np.empty(n)              # binary heap of (finish time, job)
    heap_j = np.empty(n, np.int64)
    size = 0
    finish = np.full(n, np.nan)
    arrived = done = events = 0
    now = 0.0
    while done < n:
        t_arr = submit[arrived] if arrived < n else np.inf
        now = min(t_arr, heap_t[0] if size else np.inf)
        events += 1
        while size and heap_t[0] <= now * (1 + 1e-9) + 1e-9:     # completions (the simulator's tolerance)
            j = heap_j[0]
            finish[j] = now
            done += 1
            for p in range(npieces[j]):
                free[pieces_m[j, p]] += pieces_g[j, p]
                free_total += pieces_g[j, p]
            size -= 1                                           # pop: sift the last entry down
            t, jj, i = heap_t[size], heap_j[size], 0
            while 2 * i + 1 < size:
                c = 2 * i + 1
                if c + 1 < size and heap_t[c + 1] < heap_t[c]:
                    c += 1
                if heap_t[c] >= t:
                    break
                heap_t[i], heap_j[i] = heap_t[c], heap_j[c]
                i = c
            heap_t[i], heap_j[i] = t, jj
        while arrived < n and submit[arrived] <= now:           # arrivals
            nxt[tail] = arrived
            prv[arrived] = tail
            tail = arrived
            arrived += 1
        while True:                                             # FIFO + backfill in the window
            j, c = nxt[n], 0
            while j >= 0 and c < window and gpus[j] > free_total:
                j, c = nxt[j], c + 1
            if j < 0 or c == window:
                break
            nxt[prv[j]] = nxt[j]                                # leave the queue
            if nxt[j] >= 0:
                prv[nxt[j]] = prv[j]
            else:
                tail = prv[j]
            need = gpus[j]
            for mm in range(m):                                 # first fit, machine by machine
                if free[mm] > 0:
                    take = min(free[mm], need)
                    free[mm] -= take
                    free_total -= take
                    pieces_m[j, npieces[j]] = mm
                    pieces_g[j, npieces[j]] = take
                    npieces[j] += 1
                    need -= take
                    if need == 0:
                        break
            t, i = now + duration[j], size                      # push: sift up
            size += 1
            while i > 0 and heap_t[(i - 1) // 2] > t:
                heap_t[i], heap_j[i] = heap_t[(i - 1) // 2], heap_j[(i - 1) // 2]
                i = (i - 1) // 2
            heap_t[i], heap_j[i] = t, j
    return finish, events


def floor_scenario(jobs: "int | None"):
    """The floor workload as a scenario: philly-v0 with the 512-GPU cluster and the jobs from
    2017-10-01 (GPUs capped at 8), one episode."""
    import cluster_env
    from cluster_env.core.instance import Cluster
    from cluster_env.loaders import philly_trace
    from cluster_env.loaders.csvio import read_csv
    from cluster_env.loaders.traces import PHILLY_FILE
    from cluster_env.scenarios.registry import WHOLE_SPLITS

    trace = philly_trace()
    stamps = np.array(read_csv(PHILLY_FILE, required={"t": ("timestamp",)}).strings("t"), dtype="datetime64[s]")
    cutoff = float((np.datetime64(FLOOR_START) - stamps.min()).astype(np.int64))
    index = np.flatnonzero(trace.submit >= cutoff)
    if jobs is not None:
        index = index[:jobs]
    workload = trace.subset(index, name=f"philly-from-2017-10-01[{len(index)}]")
    workload = replace(workload, gpus=np.minimum(workload.gpus, 8))
    cluster = Cluster.from_machines("64x8-P100", [(f"m{i}", "P100", 8) for i in range(64)])
    base = cluster_env.get_scenario("philly-v0")
    return replace(base, name=f"floor-{len(index)}", cluster=lambda: cluster, workload=lambda: workload,
                   splits=dict(WHOLE_SPLITS), jobs_per_episode=None, time_scale=1.0, load=None)


def section_floor(skip_api: bool, quick: bool = False) -> None:
    import cluster_env
    from baselines.engine import run_compiled_episode
    from baselines.harness.episode import run_episode
    from baselines.registry import make_policy
    from cluster_env.core import kernels

    kernels.warm_up()
    run_compiled_episode("fifo", "toy-v0", "test", 0)          # load the engine (timed in "compile")
    print("floor: Philly from 2017-10-01, GPUs capped at 8, 64 x 8 P100, effects off, FIFO + first-fit")
    print(f"  {'jobs':>7} {'events':>8} | {'avg JCT floor':>15} {'compiled':>15} {'API':>15} | "
          f"{'floor us/ev':>11} {'loop':>7} {'compiled':>9} {'API':>9} | {'loop/floor':>10} {'compiled/floor':>14} "
          f"{'API/floor':>9}")
    for jobs in ((2_000,) if quick else (10_000, None)):
        scenario = floor_scenario(jobs)
        env = cluster_env.parallel_env(scenario, split="test", all_effects_off=True)
        w, cl = scenario.workload(), scenario.cluster()
        args = (w.submit, w.duration, w.gpus, cl.machine_gpus.astype(np.int64), env.sched.pending_window)
        floor_fifo(*args)                                       # compile / load
        best = np.inf
        for _ in range(5):
            t0 = time.process_time()
            finish, floor_events = floor_fifo(*args)
            best = min(best, time.process_time() - t0)
        floor_jct = float(np.mean(finish - w.submit))
        loop_s: list[float] = []
        runs = [_timed_episode(scenario, loop_s) for _ in range(5)]
        comp = runs[0][0].record
        loop_best, comp_cpu = min(loop_s), min(cpu for _, cpu in runs)
        if skip_api:
            api, events = None, None
        else:
            t0 = time.process_time()
            api = run_episode(make_policy("fifo"), scenario, "test", 0, {"all_effects_off": True}, env=env).record
            api_cpu = time.process_time() - t0
            events = env.episode_view().events
        ev = events or floor_events
        api_jct = f"{api['avg_jct']:>15,.3f}" if api else f"{'-':>15}"
        api_us = f"{api_cpu / ev * 1e6:>9.2f}" if api else f"{'-':>9}"
        ratio_api = f"{api_cpu / best:>9.0f}" if api else f"{'-':>9}"
        print(f"  {w.num_jobs:>7,} {ev:>8,} | {floor_jct:>15,.3f} {comp['avg_jct']:>15,.3f} {api_jct} | "
              f"{best / ev * 1e6:>11.3f} {loop_best / ev * 1e6:>7.2f} {comp_cpu / ev * 1e6:>9.2f} {api_us} | "
              f"{loop_best / best:>10.1f} {comp_cpu / best:>14.1f} {ratio_api}")
        print(f"          (floor loop's own events: {floor_events:,}; floor {best:.3f} s; compiled loop "
              f"{loop_best:.3f} s, whole compiled episode {comp_cpu:.3f} s: its Python set-up included, "
              f"workload sampling, simulator, state arrays, metrics)")


def _timed_episode(scenario, loop_s: list):
    """``run_compiled_episode`` of FIFO on ``scenario`` (effects off) and its CPU seconds; appends
    the CPU seconds spent in the compiled loop itself (``_loop.run_episode``, the part the floor
    loop compares with) to ``loop_s``."""
    from baselines.engine import _loop_module, run_compiled_episode

    loop = _loop_module()
    compiled = loop.run_episode

    def timed(*args):
        t0 = time.process_time()
        try:
            return compiled(*args)
        finally:
            loop_s.append(time.process_time() - t0)

    loop.run_episode = timed
    try:
        t0 = time.process_time()
        result = run_compiled_episode("fifo", scenario, "test", 0, {"all_effects_off": True})
        return result, time.process_time() - t0
    finally:
        loop.run_episode = compiled


def section_compile() -> None:
    code = ("import time; t0 = time.perf_counter(); from baselines.engine import run_compiled_episode; "
            "run_compiled_episode('las', 'toy-v0', 'test', 0); run_compiled_episode('tiresias+fastest', 'philly-v0', "
            "'test', 0, {'jobs_per_episode': 50}); print(round(time.perf_counter() - t0, 2))")
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        again = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    print(f"compile: first process with an empty numba cache {first.stdout.strip()} s; "
          f"a later process (loads the cache) {again.stdout.strip()} s (imports and two tiny episodes included)")


def _timed(cmd: list[str], engine: str) -> float:
    env = dict(os.environ, CLUSTER_BENCH_ENGINE=engine)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if out.returncode not in (0,):
        print(out.stdout[-2000:], out.stderr[-2000:])
        raise SystemExit(f"{' '.join(cmd)} failed with exit code {out.returncode}")
    return wall


def section_scores(api: bool) -> None:
    cmd = [sys.executable, "-m", "baselines", "scores", "--check"]
    print(f"scores: `cluster-bench scores --check` (all packaged files, {os.cpu_count()} cores)")
    print(f"  auto engine (compiled where supported): {_timed(cmd, 'auto'):.1f} s")
    if api:
        print(f"  API only (CLUSTER_BENCH_ENGINE=api):    {_timed(cmd, 'api'):.1f} s")


def section_sweep(api: bool) -> None:
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "baselines", "sweep", "--scenario", "philly-v1", "--loads", "0.5,1,1.5,2,3",
               "--seeds", "0-19", "--policies", "fifo,sjf,las,tiresias", "--out", out, "--quiet"]
        print("sweep: philly-v1, 4 policies x 5 loads x 20 windows (400 episodes)")
        print(f"  auto engine: {_timed(cmd, 'auto'):.1f} s")
        if api:
            print(f"  API only:    {_timed(cmd, 'api'):.1f} s")


def main(argv: "list[str] | None" = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated: {','.join(SECTIONS)}")
    parser.add_argument("--api", action="store_true", help="also time scores and sweep through the API only (slow)")
    parser.add_argument("--skip-api-floor", action="store_true", help="floor section without the API episodes")
    parser.add_argument("--quick", action="store_true", help="floor section on the first 2,000 jobs only (a smoke run)")
    args = parser.parse_args(argv)
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown sections {unknown}; choose from {SECTIONS}")
    if "compile" in sections:
        section_compile()
    if "floor" in sections:
        section_floor(args.skip_api_floor, args.quick)
    if "scores" in sections:
        section_scores(args.api)
    if "sweep" in sections:
        section_sweep(args.api)


if __name__ == "__main__":
    main()
