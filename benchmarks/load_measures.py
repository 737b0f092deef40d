"""Does a load of 1.0 make queues? FIFO's queueing share under both load measures, on synthetic
light- and heavy-tailed traces and two cluster sizes.

``cluster_env.scenarios.load`` has two measures of offered load: ``"total"`` (every job's GPU-seconds
over the arrival span, the default) and ``"concurrent"`` (the GPUs the jobs demand at once during
the arrivals). For each trace shape, cluster and measure the script rescales the same windows to the
load and prints FIFO's queueing share (mean over windows of average pending time / average JCT,
the figure ``benchmarks/calibrate_load.py`` prints), every world effect off so that only the load
differs. Usage::

    python benchmarks/load_measures.py --windows 10 --loads 1.0
    python benchmarks/load_measures.py --windows 20 --loads 0.7,1.0,1.3 --jobs 800

The traces (:func:`synthetic_trace`): Poisson arrivals; "light" durations exponential with mean
1 h and 1-8 GPU jobs; "heavy" durations log-normal (median 10 min, sigma 2.5: the longest of 1,000
jobs run for weeks) and widths up to 64 GPUs, the shape of production traces such as Philly's.
``docs/world_model.md`` ("Offered load on heavy-tailed traces") quotes its output.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from cluster_env.scenarios.load import LOAD_MEASURES  # noqa: E402

#: (GPUs, probability) of a job's width in each trace shape.
WIDTHS = {"light": ((1, 0.6), (2, 0.15), (4, 0.15), (8, 0.1)),
          "heavy": ((1, 0.6), (2, 0.1), (4, 0.1), (8, 0.14), (16, 0.03), (32, 0.02), (64, 0.01))}
#: Cluster shapes: name -> machines of 8 V100.
CLUSTERS = {"16x8": 16, "128x8": 128}


def synthetic_trace(shape: str, jobs: int, seed: int):
    """A :class:`~cluster_env.core.instance.Workload` of ``jobs`` jobs of one job type (ResNet-50,
    batch 64: no communication term), Poisson arrivals one a minute on average; ``shape`` is
    ``"light"`` or ``"heavy"`` (module docstring)."""
    from cluster_env.core.instance import Workload
    from cluster_env.world.throughputs import JOB_TYPES

    rng = np.random.default_rng(seed)
    submit = np.cumsum(rng.exponential(60.0, jobs))
    submit -= submit[0]
    if shape == "light":
        duration = rng.exponential(3600.0, jobs)
    elif shape == "heavy":
        duration = rng.lognormal(np.log(600.0), 2.5, jobs)
    else:
        raise ValueError(f"shape must be 'light' or 'heavy', got {shape!r}")
    duration = np.maximum(duration, 1.0)
    widths, p = zip(*WIDTHS[shape])
    gpus = rng.choice(np.array(widths, dtype=np.int64), size=jobs, p=np.array(p))
    return Workload(name=f"synthetic-{shape}-{seed}", job_ids=tuple(f"j{i}" for i in range(jobs)), submit=submit,
                    duration=duration, gpus=gpus, job_type=np.full(jobs, JOB_TYPES.index("ResNet-50 (batch size 64)")),
                    tenant=np.zeros(jobs, dtype=np.int64))


def synthetic_scenario(shape: str, machines: int, jobs: int, seed: int, load: float, measure: str):
    """One window of :func:`synthetic_trace` on ``machines`` x 8 V100, every effect off, at
    ``load`` under ``measure``."""
    from cluster_env.core.config import WorldConfig
    from cluster_env.core.instance import Cluster
    from cluster_env.scenarios.base import Scenario
    from cluster_env.scenarios.registry import WHOLE_SPLITS

    cluster = Cluster.from_machines(f"{machines}x8", [(f"m{i}", "V100", 8) for i in range(machines)])
    workload = synthetic_trace(shape, jobs, seed)
    return Scenario(name=f"synthetic-{shape}-{machines}x8-{seed}", description="synthetic load test",
                    cluster=lambda: cluster, workload=lambda: workload, splits=dict(WHOLE_SPLITS),
                    world=WorldConfig(reference_gpu="V100").all_effects_off(), load=load, load_measure=measure)


def fifo_queueing_share(scenario) -> float:
    """FIFO + first-fit (the lowest allowed action of each agent): average pending time over
    average JCT of the scenario's one window."""
    import cluster_env

    env = cluster_env.parallel_env(scenario, split="test")
    obs, infos = env.reset(seed=0)
    while env.agents:
        obs, _, _, _, infos = env.step({a: int(o["action_mask"].argmax()) for a, o in obs.items()})
    m = infos["orderer"]["metrics"]
    return float(m["avg_pending_time"] / m["avg_jct"])


def main(argv: "list[str] | None" = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--windows", type=int, default=10, help="synthetic windows (seeds 0..N-1) per row")
    p.add_argument("--jobs-per-gpu", type=float, default=3.0,
                   help="jobs of a window per GPU of the cluster (a window must be able to fill it)")
    p.add_argument("--clusters", default=",".join(CLUSTERS), help=f"some of {', '.join(CLUSTERS)}")
    p.add_argument("--loads", default="1.0")
    args = p.parse_args(argv)
    print(f"FIFO queueing share (mean [min, max] over {args.windows} windows of {args.jobs_per_gpu:g} jobs per GPU), "
          "effects off")
    for load in [float(x) for x in args.loads.split(",")]:
        for shape in ("light", "heavy"):
            for cname in args.clusters.split(","):
                machines = CLUSTERS[cname]
                jobs = int(round(args.jobs_per_gpu * 8 * machines))
                cells = []
                for measure in LOAD_MEASURES:
                    t0 = time.perf_counter()
                    shares = np.array([fifo_queueing_share(synthetic_scenario(shape, machines, jobs, s, load,
                                                                              measure))
                                       for s in range(args.windows)])
                    cells.append(f"{measure} {shares.mean():.2f} [{shares.min():.2f}, {shares.max():.2f}]"
                                 f" ({time.perf_counter() - t0:.0f} s)")
                print(f"  load {load:g}, {shape:<5} trace, {jobs} jobs on {cname:<6}: " + "; ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
