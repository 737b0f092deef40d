"""Ablations of the dual agent: which half learns, the GP features, fluctuation on/off.

Trains one agent per variant with the same recipe and budget (``cluster-bench train``, several at a
time), then scores each, deterministic, on the test split next to the reference baselines, and
prints a Markdown table (also written to ``<out>/ablations.md`` and ``.json``). Long: not in CI.

    python benchmarks/dual_agent_ablations.py --scenario openb-v0 --timesteps 200000 --out runs/ablations

Variants (``--variants`` selects a subset):

* ``both``: learned orderer and placer, RWGP features (the full agent);
* ``orderer-only``: learned orderer, the placer is the best heuristic (``--heuristic-placer``);
* ``placer-only``: learned placer, the orderer is the heuristic (``--heuristic-orderer``);
* ``no-gp``: both learned, zeros instead of the GP posterior;
* ``no-fluctuation``: both learned, trained and scored with ``fluctuation=False``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

VARIANTS = ("both", "orderer-only", "placer-only", "no-gp", "no-fluctuation")


def variant_args(name: str, args: argparse.Namespace) -> list[str]:
    extra = {"both": [], "orderer-only": ["--placer", args.heuristic_placer],
             "placer-only": ["--orderer", args.heuristic_orderer], "no-gp": ["--no-gp"],
             "no-fluctuation": ["--env", "fluctuation=False"]}[name]
    return extra


def train_all(args: argparse.Namespace, names: list[str]) -> dict[str, float]:
    """Run the trainings, ``args.parallel`` at a time; returns wall seconds per variant."""
    out = Path(args.out)
    pending, running, walls = list(names), {}, {}
    while pending or running:
        while pending and len(running) < args.parallel:
            name = pending.pop(0)
            cmd = [sys.executable, "-m", "baselines", "train", "--scenario", args.scenario, "--quiet",
                   "--timesteps", str(args.timesteps), "--seed", str(args.seed), "--n-envs", "1",
                   "--steps-per-worker", "4096", "--lr", "5e-4", "--entropy-coef", "0.001",
                   "--eval-every", "5", "--out", str(out / name), *variant_args(name, args)]
            if args.imitate:
                teacher = args.imitate
                if name == "orderer-only":
                    teacher = f"{args.imitate.split('+')[0]}+{args.heuristic_placer}"
                cmd += ["--imitate", teacher, "--imitate-iterations", str(args.imitate_iterations)]
            log = open(out / f"{name}.out", "w")
            running[name] = (subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), time.perf_counter(), log)
            print(f"started {name}: {' '.join(cmd[3:])}", flush=True)
        time.sleep(2)
        for name, (proc, t0, log) in list(running.items()):
            if proc.poll() is not None:
                log.close()
                if proc.returncode != 0:
                    raise SystemExit(f"training {name} failed; see {out / (name + '.out')}")
                walls[name] = time.perf_counter() - t0
                print(f"finished {name} in {walls[name]:.0f} s", flush=True)
                del running[name]
    return walls


def score(args: argparse.Namespace, names: list[str], walls: dict[str, float]) -> list[dict]:
    import numpy as np

    from baselines import evaluate
    from dual_agent import DualAgentPolicy

    seeds = list(range(args.seeds))
    rows = []

    def add(label: str, policy, env_kwargs: dict, wall: float | None = None) -> None:
        recs = evaluate(policy, args.scenario, split="test", seeds=seeds, env_kwargs=env_kwargs)
        rows.append({"variant": label, "avg_jct": float(np.mean([r["avg_jct"] for r in recs])),
                     "avg_jct_std": float(np.std([r["avg_jct"] for r in recs])),
                     "total_fee": float(np.mean([r["total_fee"] for r in recs])),
                     "train_wall_s": wall, "env": env_kwargs})

    for name in names:
        env = {"fluctuation": False} if name == "no-fluctuation" else {}
        add(name, DualAgentPolicy.load(Path(args.out) / name / "best.pt", name=name), env, walls.get(name))
    for base in args.reference.split(","):
        add(base, base, {})
        if "no-fluctuation" in names:
            add(f"{base} (fluctuation off)", base, {"fluctuation": False})
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", default="openb-v0")
    p.add_argument("--timesteps", type=int, default=200_000)
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--heuristic-placer", default="fastest")
    p.add_argument("--heuristic-orderer", default="fifo")
    p.add_argument("--imitate", default="fifo+fastest", help="warm start of every variant ('' for none)")
    p.add_argument("--imitate-iterations", type=int, default=10)
    p.add_argument("--reference", default="fifo+fastest,fifo", help="baselines scored next to the variants")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--parallel", type=int, default=2, help="trainings at a time")
    p.add_argument("--out", default="runs/ablations")
    p.add_argument("--score-only", action="store_true", help="skip training (reuse the run folders)")
    args = p.parse_args()
    names = [n for n in args.variants.split(",") if n]
    unknown = set(names) - set(VARIANTS)
    if unknown:
        raise SystemExit(f"unknown variants {sorted(unknown)}; known: {VARIANTS}")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    walls = {} if args.score_only else train_all(args, names)
    rows = score(args, names, walls)
    lines = [f"| variant ({args.scenario}, test seeds 0-{args.seeds - 1}) | avg JCT (s) | fee ($) | training wall (s) |",
             "|---|---:|---:|---:|"]
    for r in rows:
        wall = "" if r["train_wall_s"] is None else f"{r['train_wall_s']:.0f}"
        lines.append(f"| {r['variant']} | {r['avg_jct']:,.0f} ± {r['avg_jct_std']:,.0f} | {r['total_fee']:,.0f} | {wall} |")
    table = "\n".join(lines)
    print(table)
    (Path(args.out) / "ablations.md").write_text(table + "\n")
    (Path(args.out) / "ablations.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
