"""Steps per second of the batched vector env (cluster_env.vector) against single environments.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/vector_env.py                    # philly-v0, N = 1, 16
    OMP_NUM_THREADS=1 python benchmarks/vector_env.py --scenario openb-v0 --n 1 4 16 64
    OMP_NUM_THREADS=1 python benchmarks/vector_env.py --quick            # a few seconds
    OMP_NUM_THREADS=1 python benchmarks/vector_env.py --compile-time     # + one-off compile (empty cache)

Rows (steps per second, aggregate over the N envs; the best of ``--repeats`` runs of ``--steps``
steps *per env* after a warm-up, so that every case covers the same stretch of its episodes: the
cost of a step changes along an episode as the cluster fills):

* ``pettingzoo``: one ``cluster_env.parallel_env`` through the PettingZoo API (dict actions and
  observations), the policy the lowest allowed action of each agent (FIFO + first-fit through the
  masks), auto-reset by hand; ``pettingzoo n envs in turn``: n of them (seeds 0 to n - 1, the
  vector env's episodes) stepped one after the other, the baseline with the same workloads;
* ``vector compiled N=n`` / ``vector python N=n``: ``ClusterVectorEnv(n, backend=...)`` with the
  compiled backend (the default: one numba call per vector step) and the Python backend, the same
  policy as one ``argmax`` over the stacked masks; the same decisions, hence the same episodes, as
  n PettingZoo envs;
* ``sb3 flat DummyVecEnv N=n`` and ``sb3 vector N=n``: the SB3 paths (``make_vec_env("flat")``,
  the Python views under SB3's DummyVecEnv, against ``make_vec_env("vector")``), same policy;
* ``mlp policy: ...`` (``--mlp``, needs torch): the actions from a small MLP (two hidden layers of
  64) over the flat observation, one forward pass per step: per decision for one env, per N
  decisions for the vector env (what a PPO rollout costs; "x single" is against the first
  ``mlp policy`` row).

``env steps/s`` counts the wall time inside ``step`` (and the auto-resets) only; ``loop CPU
steps/s`` the process's CPU time over the whole loop, policy included (steadier than wall time on
a shared machine). Cases run interleaved, round after round, and each keeps its best round.
Figures are printed, never asserted; one core (numpy's threads pinned to one).

Before the table: the seconds a fresh process takes to import the compiled backend and make its
first step with numba's cache warm (``cache load``), and with ``--compile-time`` the same with an
empty cache (the one-off compile, in a temporary ``NUMBA_CACHE_DIR``).
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


def bench_pettingzoo(scenario: str, steps: int, n: int = 1, **kw) -> tuple[float, float]:
    """(env seconds, total seconds) of ``steps`` steps of each of ``n`` parallel envs (seeds 0 to
    n - 1, the vector env's), stepped in turn."""
    envs = [cluster_env.parallel_env(scenario, "train", **kw) for _ in range(n)]
    obs = [env.reset(seed=i)[0] for i, env in enumerate(envs)]
    in_env = 0.0
    t_all = time.process_time()
    for _ in range(steps):
        for i, env in enumerate(envs):
            actions = {a: int(o["action_mask"].argmax()) for a, o in obs[i].items()}
            t = time.perf_counter()
            o, _, terms, truncs, _ = env.step(actions)
            if terms["orderer"] or truncs["orderer"]:
                o, _ = env.reset()
            in_env += time.perf_counter() - t
            obs[i] = o
    return in_env, time.process_time() - t_all


def bench_vector(scenario: str, n: int, steps: int, backend: str = "compiled", **kw) -> tuple[float, float]:
    """(env seconds, total seconds) of ``steps`` steps of a vector env of ``n`` envs."""
    vec = ClusterVectorEnv(n, scenario, "train", backend=backend, **kw)
    obs, _ = vec.reset(seed=0)
    mask = obs["action_mask"]        # a view of the buffer: always the current masks
    in_env = 0.0
    t_all = time.process_time()
    for _ in range(steps):
        actions = mask.argmax(axis=1)
        t = time.perf_counter()
        vec.step(actions)
        in_env += time.perf_counter() - t
    return in_env, time.process_time() - t_all


def bench_sb3(view: str, scenario: str, n: int, steps: int, **kw) -> tuple[float, float]:
    """(env seconds, total seconds) of ``steps`` steps of an SB3 vector env (view "flat" or "vector")."""
    from cluster_env.wrappers import make_vec_env

    vec = make_vec_env(view, n, seed=0, scenario=scenario, split="train", **kw)
    vec.reset()
    in_env = 0.0
    t_all = time.process_time()
    for _ in range(steps):
        masks = np.stack(vec.env_method("action_masks"))        # what MaskablePPO asks every step
        actions = masks.argmax(axis=1)
        t = time.perf_counter()
        vec.step(actions)
        in_env += time.perf_counter() - t
    vec.close()
    return in_env, time.process_time() - t_all


def _mlp(size: int, n_actions: int):
    """A small actor (two hidden layers of 64), what a PPO rollout evaluates once per step."""
    import torch
    from torch import nn

    torch.set_num_threads(1)
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(size, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, n_actions))


def bench_pettingzoo_mlp(scenario: str, steps: int, **kw) -> tuple[float, float]:
    """One parallel env, the acting agent's action from an MLP forward pass per step (masked argmax)."""
    import torch

    from cluster_env.envs.flat_layout import FlatLayout

    env = cluster_env.parallel_env(scenario, "train", **kw)
    n_act = max(env.action_space(a).n for a in env.possible_agents)
    layout = FlatLayout(env.observation_space("orderer"), n_act)
    net = _mlp(layout.size, n_act)
    obs, _ = env.reset(seed=0)
    flat = np.zeros(layout.size, np.float32)
    mask = np.zeros(n_act, bool)
    noop = {a: env.action_space(a).n - 1 for a in env.possible_agents}
    in_env = 0.0
    t_all = time.process_time()
    for _ in range(steps):
        agent = "placer" if env.phase == 1 else "orderer"
        other = "orderer" if agent == "placer" else "placer"
        m = obs[agent]["action_mask"]
        mask[:] = False
        mask[: len(m)] = m
        layout.flatten(obs[agent], mask=mask, out=flat)
        with torch.no_grad():
            logits = net(torch.from_numpy(flat)).masked_fill(~torch.from_numpy(mask), -1e9)
        t = time.perf_counter()
        obs, _, terms, truncs, _ = env.step({agent: int(logits.argmax()), other: noop[other]})
        if terms["orderer"] or truncs["orderer"]:
            obs, _ = env.reset()
        in_env += time.perf_counter() - t
    return in_env, time.process_time() - t_all


def bench_vector_mlp(scenario: str, n: int, steps: int, **kw) -> tuple[float, float]:
    """The vector env, the N actions from one batched MLP forward pass per step (masked argmax)."""
    import torch

    vec = ClusterVectorEnv(n, scenario, "train", **kw)
    net = _mlp(vec.layout.size, vec.n_actions)
    obs, _ = vec.reset(seed=0)
    flat = torch.zeros(n, vec.layout.size)
    in_env = 0.0
    t_all = time.process_time()
    for _ in range(steps):
        vec.flat_observations(out=flat.numpy())
        with torch.no_grad():
            logits = net(flat).masked_fill(~torch.from_numpy(obs["action_mask"].view(bool)), -1e9)
        t = time.perf_counter()
        obs, *_ = vec.step(logits.argmax(dim=1).numpy())
        in_env += time.perf_counter() - t
    return in_env, time.process_time() - t_all


def measure(cases: list, repeats: int) -> list[tuple[str, float, float]]:
    """Best steps/s (inside env calls, whole loop) of each ``(name, fn, total_steps)`` case, the
    runs interleaved (round after round) so that a busy spell of the machine hits every case."""
    env_s: dict[str, list[float]] = {name: [] for name, _, _ in cases}
    all_s: dict[str, list[float]] = {name: [] for name, _, _ in cases}
    for _ in range(repeats):
        for name, fn, _ in cases:
            e, a = fn()
            env_s[name].append(e)
            all_s[name].append(a)
    return [(name, total / min(env_s[name]), total / min(all_s[name])) for name, _, total in cases]


_FIRST_STEP = """
import time
t = time.perf_counter()
import numpy as np
from cluster_env.vector import ClusterVectorEnv
vec = ClusterVectorEnv(2, {scenario!r}, backend="compiled")
obs, _ = vec.reset(seed=0)
vec.step(obs["action_mask"].argmax(axis=1))
print(time.perf_counter() - t)
"""


def first_step_seconds(scenario: str, cache_dir: "str | None" = None) -> float:
    """Seconds a fresh process takes to import the compiled backend and step it once
    (``cache_dir``: an empty numba cache there, i.e. the one-off compile)."""
    import subprocess

    env = dict(os.environ)
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = cache_dir
    out = subprocess.run([sys.executable, "-c", _FIRST_STEP.format(scenario=scenario)], env=env,
                         capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main(argv: "list[str] | None" = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scenario", default="philly-v0")
    p.add_argument("--n", type=int, nargs="+", default=[1, 16])
    p.add_argument("--steps", type=int, default=4_000, help="steps per env per run")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--sb3", action="store_true", help="also the SB3 paths (flat DummyVecEnv vs vector adapter)")
    p.add_argument("--mlp", action="store_true",
                   help="also with a torch MLP policy: one forward pass per step (a PPO rollout's cost)")
    p.add_argument("--backends", nargs="+", default=["compiled", "python"], choices=["compiled", "python"],
                   help="vector env backends to measure")
    p.add_argument("--compile-time", action="store_true",
                   help="also the one-off compile of the compiled backend (empty numba cache)")
    p.add_argument("--quick", action="store_true", help="500 steps per env, one run")
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.repeats = 500, 1
    sc = args.scenario
    print(f"scenario {sc}, {args.steps} steps per env, best of {args.repeats}; python {sys.version.split()[0]}, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}")
    if "compiled" in args.backends:
        first_step_seconds(sc)        # fills numba's cache if needed
        print(f"compiled backend, fresh process to its first step: cache load {first_step_seconds(sc):.2f} s")
        if args.compile_time:
            import tempfile

            with tempfile.TemporaryDirectory() as tmp:
                print(f"compiled backend, one-off compile (empty numba cache): {first_step_seconds(sc, tmp):.1f} s")
    bench_pettingzoo(sc, 500)         # warm-up: compiled kernels, trace loading
    for backend in args.backends:
        bench_vector(sc, 2, 50, backend)
    steps = args.steps
    cases = [("pettingzoo (1 env)", lambda: bench_pettingzoo(sc, steps), steps)]
    for n in args.n:
        if n > 1:
            cases.append((f"pettingzoo {n} envs in turn", lambda n=n: bench_pettingzoo(sc, steps, n), steps * n))
    for backend in args.backends:
        for n in args.n:
            cases.append((f"vector {backend} N={n}", lambda n=n, b=backend: bench_vector(sc, n, steps, b),
                          steps * n))
    if args.sb3:
        for n in args.n:
            for view, label in (("flat", "sb3 flat DummyVecEnv"), ("vector", "sb3 vector adapter")):
                cases.append((f"{label} N={n}", lambda n=n, view=view: bench_sb3(view, sc, n, steps), steps * n))
    if args.mlp:
        cases.append(("mlp policy: pettingzoo (1 env)", lambda: bench_pettingzoo_mlp(sc, steps), steps))
        for n in args.n:
            cases.append((f"mlp policy: vector N={n}", lambda n=n: bench_vector_mlp(sc, n, steps), steps * n))
    rows = measure(cases, args.repeats)
    print(f"{'case':<36}{'env steps/s':>14}{'x single':>10}{'loop CPU steps/s':>18}{'x single':>10}")
    single = rows[0][1:]
    for name, env_rate, all_rate in rows:
        if name.startswith("mlp policy: pettingzoo"):
            single = (env_rate, all_rate)
        print(f"{name:<36}{env_rate:>14,.0f}{env_rate / single[0]:>10.2f}"
              f"{all_rate:>18,.0f}{all_rate / single[1]:>10.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
