"""Digests of whole episodes, to check that a speed-up changes no result.

Usage::

    python benchmarks/episode_digests.py --save before.json    # on the code before the change
    python benchmarks/episode_digests.py --check before.json   # after it: exit 1 on any difference
    CLUSTER_ENV_KERNELS=numpy python benchmarks/episode_digests.py --check before.json
    python benchmarks/episode_digests.py --quick ...           # the toy configurations only

Each configuration (scenario, policy, seed, options) runs one episode through the public API and
hashes every observation, mask, reward, termination, truncation, info, every 97th state vector and
the final metrics (sha256). Twelve configurations cover spread jobs, restarts after preemption,
allowed GPU types, clairvoyance, measurement at every event (fluctuation off), all effects off,
random preempting actions and a 3,000-job replay of the Philly trace on Philly's cluster. Used for
both performance passes (docs/performance.md); the CI test of the kernels
(tests/test_kernels.py) compares the two backends the same way.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from dataclasses import replace

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import baselines  # noqa: E402
import cluster_env  # noqa: E402
from cluster_env.loaders import philly_cluster  # noqa: E402
from cluster_env.scenarios.registry import WHOLE_SPLITS  # noqa: E402


def feed(h, x) -> None:
    """Add ``x`` (nested dicts, lists, arrays with their dtype, scalars) to the hash ``h``."""
    if isinstance(x, dict):
        for k in sorted(x):
            h.update(k.encode())
            feed(h, x[k])
    elif isinstance(x, np.ndarray):
        h.update(str(x.dtype).encode())
        h.update(np.ascontiguousarray(x).tobytes())
    elif isinstance(x, (list, tuple)):
        for v in x:
            feed(h, v)
    else:
        h.update(repr(x).encode())


def digest(scenario, policy: str, seed: int, **overrides) -> tuple[str, int]:
    """(sha256 prefix of everything the episode shows, its number of steps)."""
    env = cluster_env.parallel_env(scenario, split="test", **overrides)
    pol = None if policy == "random-masked" else baselines.make_policy(policy)
    rng = np.random.default_rng(seed)
    h = hashlib.sha256()
    obs, infos = env.reset(seed=seed)
    if pol is not None:
        pol.reset(seed)
    feed(h, obs)
    feed(h, infos)
    steps = 0
    while env.agents:
        if pol is not None:
            actions = pol.act(obs, infos)
        else:
            actions = {a: int(rng.choice(np.flatnonzero(o["action_mask"]))) for a, o in obs.items()}
        obs, rewards, terms, truncs, infos = env.step(actions)
        for part in (obs, rewards, terms, truncs, infos):
            feed(h, part)
        if steps % 97 == 0:
            feed(h, env.state())
        steps += 1
    feed(h, env.metrics())
    return h.hexdigest()[:16], steps


def configurations(quick: bool) -> list[tuple]:
    toy = [("toy-v0", "random-masked", 0, {}), ("toy-v0", "random-masked", 1, {"preemption": True}),
           ("toy-v0", "fifo", 2, {"fluctuation": True, "contention": True})]
    if quick:
        return toy
    replay = replace(cluster_env.get_scenario("philly-v0"), name="philly-replay", cluster=philly_cluster,
                     splits=dict(WHOLE_SPLITS), jobs_per_episode=3000)
    return toy[:2] + [
        ("philly-v0", "fifo", 0, {}), ("philly-v0", "fifo", 1, {}),
        ("openb-v0", "sjf+fastest", 0, {"clairvoyant": True}),
        ("openb-full-v0", "tiresias", 0, {"preemption": True}),
        ("philly-v0", "tiresias", 2, {"preemption": True}),
        ("philly-v0", "tiresias+spread", 3, {"preemption": True, "restart_overhead": 60.0}),
        ("philly-v0", "fifo+spread", 0, {"fluctuation": False}),
        ("openb-v0", "random-masked", 4, {"preemption": True}),
        ("philly-v0", "sjf+consolidate", 5, {"all_effects_off": True, "clairvoyant": True}),
        (replay, "fifo", 0, {}),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--save", help="write the digests to this JSON file")
    group.add_argument("--check", help="compare with the digests in this JSON file; exit 1 on a difference")
    parser.add_argument("--quick", action="store_true", help="the toy configurations only (seconds)")
    args = parser.parse_args(argv)
    found = {}
    for scenario, policy, seed, overrides in configurations(args.quick):
        key = f"{getattr(scenario, 'name', scenario)}|{policy}|{seed}|{sorted(overrides.items())}"
        found[key], steps = digest(scenario, policy, seed, **overrides)
        print(f"{found[key]}  {steps:>7,} steps  {key}", flush=True)
    if args.save:
        with open(args.save, "w") as f:
            json.dump(found, f, indent=1)
        print(f"saved {len(found)} digests to {args.save}")
    if args.check:
        with open(args.check) as f:
            expected = json.load(f)
        differ = sorted(k for k in found if expected.get(k) != found[k])
        missing = sorted(set(expected) - set(found))
        if differ or missing:
            print(f"DIFFERENT: {differ}; not run here: {missing}")
            return 1
        print(f"all {len(found)} digests identical to {args.check}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
