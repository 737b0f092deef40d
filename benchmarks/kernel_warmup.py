"""Warm-up of the compiled kernels in a fresh process: the first one compiles and fills numba's
disk cache, every later one loads from it.

Usage::

    python benchmarks/kernel_warmup.py               # a fresh cache folder: compile, then load
    python benchmarks/kernel_warmup.py --processes 4 --cache-dir ~/.cache/cluster-env-numba

Each process is a new interpreter that imports ``cluster_env``, then times
``cluster_env.core.kernels.warm_up()`` (the kernels' load or compile plus one 300-job
``philly-v0`` episode) and, apart, a second identical episode (the episode alone), so that the
load is the difference. It prints per process: the import, the warm-up, the episode alone, the
load (warm-up - episode), how many kernels compiled (cache misses) and loaded (hits), and the
cache's files and size. Target: a second process's warm-up under 1.5 s.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, time
t0 = time.perf_counter()
import cluster_env
from cluster_env.core import kernels
t_import = time.perf_counter() - t0
warm = kernels.warm_up()
episode = kernels.warm_up()           # everything loaded: the episode alone
k = kernels.active()
stats = [getattr(k, n).stats for n in vars(k) if hasattr(getattr(k, n), "stats")]
print(json.dumps({"backend": k.name, "import_s": t_import, "warm_up_s": warm, "episode_s": episode,
                  "misses": sum(len(s.cache_misses) for s in stats),
                  "hits": sum(len(s.cache_hits) for s in stats)}))
"""


def run_child(env: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def cache_size(folder: Path) -> tuple[int, int]:
    files = [p for p in folder.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=3, help="fresh processes in a row (default 3)")
    parser.add_argument("--cache-dir", default=None, help="NUMBA_CACHE_DIR (default: a new empty folder)")
    args = parser.parse_args(argv)
    folder = Path(args.cache_dir or tempfile.mkdtemp(prefix="cluster-env-numba-")).expanduser()
    env = dict(os.environ, NUMBA_CACHE_DIR=str(folder), OMP_NUM_THREADS="1", CLUSTER_ENV_KERNELS="numba")
    print(f"kernel warm-up in fresh processes; NUMBA_CACHE_DIR={folder}")
    print(f"{'process':>7}  {'import':>7}  {'warm-up':>8}  {'episode':>8}  {'load':>7}  {'compiled':>8}  "
          f"{'loaded':>6}  {'cache files':>11}  {'cache size':>10}")
    rows = []
    for i in range(1, args.processes + 1):
        r = run_child(env)
        if r["backend"] != "numba":
            print("numba is not installed here: nothing to warm up (the numpy reference runs)")
            return 0
        n_files, size = cache_size(folder)
        rows.append(r)
        print(f"{i:>7}  {r['import_s']:>6.2f}s  {r['warm_up_s']:>7.2f}s  {r['episode_s']:>7.2f}s  "
              f"{r['warm_up_s'] - r['episode_s']:>6.2f}s  {r['misses']:>8}  {r['hits']:>6}  {n_files:>11}  "
              f"{size / 2**20:>8.2f} MB")
    if len(rows) > 1:
        later = max(r["warm_up_s"] for r in rows[1:])
        print(f"\nslowest warm-up after the first process: {later:.2f} s (target < 1.5 s); "
              f"the first (compiling) took {rows[0]['warm_up_s']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
