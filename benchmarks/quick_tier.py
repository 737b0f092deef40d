"""How long the contributors' quick tier takes: runs ``python -m pytest -m quick`` and prints its
CPU seconds (user + system, the test processes and every subprocess they waited for), the part no
test accounts for (start-up: imports, collection, loading numba's cache), and the slowest tests.
Exits 1 when the tier takes more than :data:`QUICK_TIER_CPU_S`, the figure README.md quotes (a
test checks they agree), or, with ``--strict``, when a test is over its 1-second budget.

CPU seconds, not wall seconds: they do not grow when other work shares the cores, so one number
holds on any idle or busy 2-core machine; on 2 idle cores the tier's wall time is about half its
CPU seconds (two test processes).

    python benchmarks/quick_tier.py                  # the tier as README runs it (2 processes)
    python benchmarks/quick_tier.py --slowest 30 -- -n 0     # one process; after -- : pytest options
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The quick tier's budget in CPU seconds (README.md: "in under ... CPU seconds"): measured at about 90
#: with its two test processes, about 20 of them outside the tests (each process's imports and collection).
QUICK_TIER_CPU_S = 120
#: One quick test's budget in CPU seconds (tests/conftest.py's QUICK_TEST_BUDGET_S).
QUICK_TEST_BUDGET_S = 1.0
#: Where tests/conftest.py writes each test's CPU seconds (its TIMES_ENV).
TIMES_ENV = "CLUSTER_BENCH_TEST_TIMES"


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def measure(pytest_args: list[str]) -> dict:
    """Run the quick tier once; its CPU and wall seconds, exit code and the CPU seconds per test."""
    with tempfile.TemporaryDirectory() as tmp:
        times_file = Path(tmp) / "times.json"
        env = {**os.environ, TIMES_ENV: str(times_file), "PYTHONPATH": os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
        before, t0 = _children_cpu(), time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pytest", "-m", "quick", "-q", "-p", "no:cacheprovider",
                               *pytest_args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
        wall, cpu = time.perf_counter() - t0, _children_cpu() - before
        times = json.loads(times_file.read_text()) if times_file.is_file() else {}
    summary = next((ln for ln in reversed(done.stdout.splitlines()) if " in " in ln and "passed" in ln), "")
    return {"cpu_s": cpu, "wall_s": wall, "returncode": done.returncode, "times": times, "summary": summary,
            "output": done.stdout}


def main(argv: "list[str] | None" = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slowest", type=int, default=15, help="how many of the slowest tests to list (default 15)")
    parser.add_argument("--budget", type=float, default=QUICK_TIER_CPU_S,
                        help=f"CPU seconds the tier may take (default {QUICK_TIER_CPU_S}, README's figure)")
    parser.add_argument("--strict", action="store_true",
                        help=f"also fail when a test is over {QUICK_TEST_BUDGET_S:g} CPU second")
    parser.add_argument("--json", default=None, metavar="FILE", help="also write the measurement here")
    args = parser.parse_args(argv)

    result = measure(extra)
    if result["returncode"] not in (0, 1):            # 1: some test failed; the time still counts
        print(result["output"][-4000:])
        print(f"quick tier: pytest exited {result['returncode']}; no measurement")
        return 2
    times = result["times"]
    in_tests = sum(times.values())
    over = sorted(((s, n) for n, s in times.items() if s > QUICK_TEST_BUDGET_S), reverse=True)
    print(f"quick tier: {len(times)} tests, {result['cpu_s']:.1f} CPU s (budget {args.budget:g}), "
          f"{result['wall_s']:.1f} s wall; {in_tests:.1f} CPU s inside the tests, "
          f"{max(result['cpu_s'] - in_tests, 0.0):.1f} outside them (start-up, collection, workers)")
    if result["summary"]:
        print(f"pytest: {result['summary'].strip('= ')}")
    for line in [ln for ln in result["output"].splitlines() if ln.startswith(("FAILED ", "ERROR "))][:20]:
        print(f"  {line}")
    print(f"slowest {min(args.slowest, len(times))} tests (CPU s):")
    for seconds, nodeid in sorted(((s, n) for n, s in times.items()), reverse=True)[:args.slowest]:
        print(f"  {seconds:6.2f}  {nodeid}")
    if over:
        print(f"{len(over)} test(s) over the {QUICK_TEST_BUDGET_S:g} s budget of one quick test: list them in HEAVY "
              "(tests/conftest.py)")
    if args.json:
        Path(args.json).write_text(json.dumps({k: v for k, v in result.items() if k != "output"}, indent=1))
    failed = result["cpu_s"] > args.budget or (args.strict and bool(over))
    if result["cpu_s"] > args.budget:
        print(f"OVER BUDGET: {result['cpu_s']:.1f} CPU s > {args.budget:g}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
