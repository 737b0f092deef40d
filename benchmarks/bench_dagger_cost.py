"""Training cost of the paper's dual agent per episode: DAgger from hindsight teachers against RLOO
and MAPPO, on the same philly-hetero-v2 training windows and the same agent (extended-v2
observation, preemption, RWGP, one torch thread, one process).

For each algorithm one iteration of ``--episodes`` episodes of ``--jobs`` jobs (the first, untrained
weights; DAgger's second iteration, where the student plays half its decisions, is timed too), in
CPU seconds of this process (``time.process_time``: what a shared machine's other load does not
inflate), split into collection (playing and, for DAgger, the teacher's labels) and update (the
cross-entropy over the aggregate, or the PPO epochs). The teachers' hindsight search is timed on
its own (per window; computed once per run and cached). Prints one row per phase.

    python benchmarks/bench_dagger_cost.py [--jobs 300] [--episodes 4] [--teacher-episodes 60]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")   # before numpy / scipy load OpenBLAS: a 64 x 64 solve
                                                # on two busy cores is 400x slower with two threads

import torch  # noqa: E402

import dual_agent.paper.dagger as dagger  # noqa: E402
from dual_agent.paper.config import DualAgentConfig, TrainConfig  # noqa: E402
from dual_agent.paper.rloo import make_trainer  # noqa: E402

SCENARIO = "philly-hetero-v2"
AGENT = DualAgentConfig(env_overrides={"preemption": True, "observation": "extended-v2"})


def _timed(fn, sink: list):
    def wrapper(*args, **kwargs):
        t0 = time.process_time()
        out = fn(*args, **kwargs)
        sink.append(time.process_time() - t0)
        return out
    return wrapper


def measure(jobs: int, episodes: int, teacher_episodes: int) -> list[dict]:
    torch.set_num_threads(1)
    rows = []
    common = dict(scenario=SCENARIO, jobs_per_episode=jobs, timesteps=10**9, eval_every=0, seed=0, validation="split")
    with tempfile.TemporaryDirectory() as tmp:
        # DAgger: the teachers first (the search), then two iterations (beta 1, then 0.5).
        cfg = TrainConfig(**common, algorithm="rloo", teacher="best-known", teacher_windows=episodes,
                          teacher_episodes=teacher_episodes, dagger_iterations=2, dagger_episodes=episodes)
        trainer = make_trainer(cfg, AGENT, f"{tmp}/dagger", tensorboard=False)
        t0 = time.process_time()
        trainer.teachers()
        rows.append(("dagger", "hindsight search per window", (time.process_time() - t0) / episodes, None))
        collect, update = [], []
        dagger.dagger_rollout = _timed(dagger.dagger_rollout, collect)
        dagger.imitation_update = _timed(dagger.imitation_update, update)
        trainer.train(progress=False, max_iterations=2)
        for i, row in enumerate(trainer.log):
            steps = row["timesteps"] - (trainer.log[i - 1]["timesteps"] if i else 0)
            rows.append((f"dagger iteration {i + 1}", "collect + label", collect[i] / episodes, steps / episodes))
            rows.append((f"dagger iteration {i + 1}", "update (cross-entropy)", update[i] / episodes, None))
        # RLOO (one window, `episodes` rollouts) and MAPPO (in-process worker), one iteration each.
        for algorithm in ("rloo", "mappo"):
            extra = ({"group_windows": 1, "group_size": episodes} if algorithm == "rloo"
                     else {"n_envs": 0, "steps_per_worker": 1})
            cfg = TrainConfig(**common, algorithm=algorithm, **extra)
            trainer = make_trainer(cfg, AGENT, f"{tmp}/{algorithm}", subprocess=False, tensorboard=False)
            collect, update = [], []
            trainer._collect = _timed(trainer._collect, collect)
            trainer.update = _timed(trainer.update, update)
            trainer.train(progress=False, max_iterations=1)
            n = trainer.log[-1]["episodes"]
            rows.append((algorithm, "collect", collect[0] / n, trainer.timesteps / n))
            rows.append((algorithm, "update (PPO epochs)", update[0] / n, None))
    return [{"phase": a, "part": b, "cpu_s_per_episode": round(c, 3), "steps_per_episode": d} for a, b, c, d in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=300, help="jobs per training window (default 300)")
    parser.add_argument("--episodes", type=int, default=4, help="episodes per iteration (default 4)")
    parser.add_argument("--teacher-episodes", type=int, default=60, help="search budget per window (default 60)")
    args = parser.parse_args()
    print(f"{SCENARIO}, {args.jobs}-job training windows, {args.episodes} episodes per iteration, one thread")
    steps = None
    for r in measure(args.jobs, args.episodes, args.teacher_episodes):
        steps = r["steps_per_episode"] or (steps if r["part"].startswith("update") else None)
        per = "" if not steps else f"  {1e3 * r['cpu_s_per_episode'] / steps:6.2f} CPU-ms per decision"
        n = "" if r["steps_per_episode"] is None else f"  ({r['steps_per_episode']:,.0f} decisions per episode)"
        unit = "CPU-s per window (once per run)" if r["phase"] == "dagger" else "CPU-s per episode"
        print(f"{r['phase']:<20} {r['part']:<30} {r['cpu_s_per_episode']:>8.2f} {unit}{per}{n}")


if __name__ == "__main__":
    main()
