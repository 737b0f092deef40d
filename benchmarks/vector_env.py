"""Steps per second of the batched vector env (cluster_env.vector) against single environments.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/vector_env.py                    # philly-v0, N = 1, 16
    OMP_NUM_THREADS=1 python benchmarks/vector_env.py --scenario openb-v0 --n 1 4 16 64
    OMP_NUM_THREADS=1 python benchmarks/vector_env.py --quick            # a few seconds

Rows (steps per second, aggregate over the N envs; the best of ``--repeats`` runs of ``--steps``
steps per env after a warm-up):

* ``pettingzoo``: one ``cluster_env.parallel_env`` through the PettingZoo API (dict actions and
  observations), the policy the lowest allowed action of each agent (FIFO + first-fit through the
  masks), auto-reset by hand;
* ``vector N=n``: ``ClusterVectorEnv(n)``, the same policy as one ``argmax`` over the stacked
  masks; the same decisions, hence the same episodes, as n PettingZoo envs;
* ``sb3 flat DummyVecEnv N=n`` and ``sb3 vector N=n``: the SB3 paths (``make_vec_env("flat")``,
  the Python views under SB3's DummyVecEnv, against ``make_vec_env("vector")``), same policy.

``env`` counts the time inside ``reset``/``step`` only, ``env+policy`` the whole loop. Figures
are printed, never asserted; one core (numpy's threads pinned to one).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import cluster_env  # noqa: E402
from cluster_env.vector import ClusterVectorEnv  # noqa: E402


def bench_pettingzoo(scenario: str, steps: int, **kw) -> tuple[float, float]:
    """(env seconds, total seconds) of ``steps`` steps of one parallel env."""
    env = cluster_env.parallel_env(scenario, "train", **kw)
    obs, _ = env.reset(seed=0)
    in_env = 0.0
    t_all = time.perf_counter()
    for _ in range(steps):
        actions = {a: int(o["action_mask"].argmax()) for a, o in obs.items()}
        t = time.perf_counter()
        obs, _, terms, truncs, _ = env.step(actions)
        if terms["orderer"] or truncs["orderer"]:
            obs, _ = env.reset()
        in_env += time.perf_counter() - t
    return in_env, time.perf_counter() - t_all


def bench_vector(scenario: str, n: int, steps: int, **kw) -> tuple[float, float]:
    """(env seconds, total seconds) of ``steps`` steps of a vector env of ``n`` envs."""
    vec = ClusterVectorEnv(n, scenario, "train", **kw)
    obs, _ = vec.reset(seed=0)
    mask = obs["action_mask"]        # a view of the buffer: always the current masks
    in_env = 0.0
    t_all = time.perf_counter()
    for _ in range(steps):
        actions = mask.argmax(axis=1)
        t = time.perf_counter()
        vec.step(actions)
        in_env += time.perf_counter() - t
    return in_env, time.perf_counter() - t_all


def bench_sb3(view: str, scenario: str, n: int, steps: int, **kw) -> tuple[float, float]:
    """(env seconds, total seconds) of ``steps`` steps of an SB3 vector env (view "flat" or "vector")."""
    from cluster_env.wrappers import make_vec_env

    vec = make_vec_env(view, n, seed=0, scenario=scenario, split="train", **kw)
    vec.reset()
    in_env = 0.0
    t_all = time.perf_counter()
    for _ in range(steps):
        masks = np.stack(vec.env_method("action_masks"))        # what MaskablePPO asks every step
        actions = masks.argmax(axis=1)
        t = time.perf_counter()
        vec.step(actions)
        in_env += time.perf_counter() - t
    vec.close()
    return in_env, time.perf_counter() - t_all


def best(fn, repeats: int, total_steps: int) -> tuple[float, float]:
    """Best steps/s (env, env+policy) over ``repeats`` runs."""
    env_s, all_s = [], []
    for _ in range(repeats):
        e, a = fn()
        env_s.append(e)
        all_s.append(a)
    return total_steps / min(env_s), total_steps / min(all_s)


def main(argv: "list[str] | None" = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scenario", default="philly-v0")
    p.add_argument("--n", type=int, nargs="+", default=[1, 16])
    p.add_argument("--steps", type=int, default=20_000, help="steps per env per run (vector: steps of the vector)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--sb3", action="store_true", help="also the SB3 paths (flat DummyVecEnv vs vector adapter)")
    p.add_argument("--quick", action="store_true", help="2,000 steps, one run")
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.repeats = 2_000, 1
    sc = args.scenario
    print(f"scenario {sc}, {args.steps} steps per env, best of {args.repeats}; python {sys.version.split()[0]}, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}")
    bench_pettingzoo(sc, 500)         # warm-up: compiled kernels, trace loading
    rows = []
    single = best(lambda: bench_pettingzoo(sc, args.steps), args.repeats, args.steps)
    rows.append(("pettingzoo (1 env)", *single))
    for n in args.n:
        steps = max(args.steps // n, 200)
        rows.append((f"vector N={n}", *best(lambda: bench_vector(sc, n, steps), args.repeats, steps * n)))
    if args.sb3:
        for n in args.n:
            steps = max(args.steps // n, 200)
            for view in ("flat", "vector"):
                label = "sb3 flat DummyVecEnv" if view == "flat" else "sb3 vector adapter"
                rows.append((f"{label} N={n}", *best(lambda: bench_sb3(view, sc, n, steps), args.repeats, steps * n)))
    print(f"{'case':<32}{'env steps/s':>14}{'x single':>10}{'env+policy/s':>15}{'x single':>10}")
    for name, env_rate, all_rate in rows:
        print(f"{name:<32}{env_rate:>14,.0f}{env_rate / single[0]:>10.2f}{all_rate:>15,.0f}{all_rate / single[1]:>10.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
