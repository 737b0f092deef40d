"""Dual-agent figures: decision latency against candidates and machines, training throughput.

``measure(quick)`` returns rows ``{section, case, value, unit}`` (the suite in ``suite.py``
prints them with the rest); run alone with ``python benchmarks/bench_dual_agent.py [--quick]``.

* ORDER latency at 64, 256 and 1,024 candidate jobs (64 machines): the squeeze-and-communicate
  orderer is linear in the candidates, so the time per candidate should stay flat;
* PLACE latency at 64 and 1,213 machines (the openb-full cluster), RWGP refresh included;
* training: environment steps per second of one rollout worker (sampling agent, philly-v0), and
  of a whole MAPPO iteration (collection + update) in this process;
* episode (``--episode``): the deterministic agent's whole episode, the way the harness
  scores it (portable inference), on a 1,000-job window and about 130 machines: philly-v1's test
  window 0 on Philly's machine mix at 1/4 (138 machines, the scenario's load 1.5), with the shipped
  philly-v0 agent and with an untrained residual agent on ``las+fastest`` (extended observation,
  preemption on: every scheduling tick is a decision); modern-v1's test window 0 (100 machines of
  four GPU types, load 6) with the residual agent; and philly-hetero-v1's test window 0 (27
  machines) with the residual agent, where LAS preempts and decisions are many; and
  philly-hetero-v2's test window 0 (extended-v2 observation) with an untrained agent without a
  prior, the window the acting agent's target is to play in at most 2 s (``WINDOW_TARGET_S``). Each case prints
  the wall time per window (the fastest of ``--repeats`` plays, with their range) and the
  process's CPU time (what the wall time would be on an idle machine, about). One torch thread.
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

import cluster_env  # noqa: E402
from dual_agent import PRETRAINED_DIR  # noqa: E402
from dual_agent.paper.config import DualAgentConfig, TrainConfig  # noqa: E402
from dual_agent.paper.policy import DualAgentPolicy, build_model, spaces_signature  # noqa: E402


def _observation(jobs: int, machine_rows: np.ndarray, place: bool, rng: np.random.Generator) -> dict:
    """A synthetic observation with ``jobs`` valid candidates on real machine rows."""
    job_arr = rng.random((jobs, 14)).astype(np.float32)
    job_arr[:, 0], job_arr[:, 1] = 1.0, 0.0
    glob = np.zeros(10, np.float32)
    glob[0] = 1.0 if place else 0.0
    feats = {"jobs": job_arr, "machines": machine_rows, "global": glob, "placing": rng.random(9).astype(np.float32)}
    return {"orderer": {**feats, "action_mask": np.ones(jobs + 1, np.int8)},
            "placer": {**feats, "action_mask": np.ones(len(machine_rows) + 1, np.int8)}}


def _latency(policy: DualAgentPolicy, obs: dict, repeats: int) -> float:
    policy.reset(0)
    policy.decide(obs, {})                  # GP reset and warm-up outside the timing
    t0 = time.perf_counter()
    for _ in range(repeats):
        policy.decide(obs, {})
    return (time.perf_counter() - t0) / repeats * 1e3


def decision_latency(quick: bool) -> list[dict]:
    torch.set_num_threads(1)
    env = cluster_env.parallel_env("openb-full-v0", split="test")
    obs, _ = env.reset(seed=0)
    machines = obs["orderer"]["machines"]                      # (1213, 11) real machine rows
    spaces = spaces_signature(env)
    cfg = DualAgentConfig()
    torch.manual_seed(0)
    policy = DualAgentPolicy(build_model(cfg, spaces), cfg, spaces, allow_transfer=True)
    rng = np.random.default_rng(0)
    repeats = 20 if quick else 200
    rows = []
    for n in (64, 256, 1024):
        ms = _latency(policy, _observation(n, machines[:64], False, rng), repeats)
        rows.append({"section": "dual agent: ORDER decision", "case": f"{n} candidates, 64 machines",
                     "value": round(ms, 3), "unit": "ms"})
        rows.append({"section": "dual agent: ORDER decision", "case": f"{n} candidates, per candidate",
                     "value": round(ms * 1e3 / n, 2), "unit": "us"})
    for m in (64, len(machines)):
        policy.reset(0)
        ms = _latency(policy, _observation(32, machines[:m], True, rng), repeats)
        rows.append({"section": "dual agent: PLACE decision", "case": f"{m} machines (RWGP included)",
                     "value": round(ms, 3), "unit": "ms"})
    return rows


def training_throughput(quick: bool) -> list[dict]:
    from dual_agent.paper.mappo import MAPPOTrainer
    from dual_agent.paper.rollout import RolloutWorkers

    steps = 1000 if quick else 8000
    cfg = TrainConfig(scenario="philly-v0", n_envs=1, steps_per_worker=steps, eval_every=0)
    trainer = MAPPOTrainer(cfg, out_dir="/tmp/bench-dual-agent", subprocess=False, tensorboard=False)
    workers = RolloutWorkers(1, False, cfg.scenario, cfg.split, {}, None, trainer.agent_cfg.to_dict(), trainer.spaces)
    t0 = time.perf_counter()
    rollout = workers.collect(trainer.model.state_dict(), 0, 0, steps)
    t1 = time.perf_counter()
    trainer.update(rollout)
    t2 = time.perf_counter()
    return [{"section": "dual agent: training", "case": "rollout worker, philly-v0 (env steps/s)",
             "value": round(len(rollout) / (t1 - t0)), "unit": "steps/s"},
            {"section": "dual agent: training", "case": "collect + MAPPO update, one process (env steps/s)",
             "value": round(len(rollout) / (t2 - t0)), "unit": "steps/s"}]


def _residual_agent(scenario, env_kwargs: dict) -> DualAgentPolicy:
    """An untrained residual agent on las+fastest (it plays LAS + fastest through the networks)."""
    env = cluster_env.parallel_env(scenario, split="test", **env_kwargs)
    spaces = spaces_signature(env)
    cfg = DualAgentConfig(prior="las+fastest", env_overrides=dict(env_kwargs))
    torch.manual_seed(0)
    return DualAgentPolicy(build_model(cfg, spaces), cfg, spaces, allow_transfer=True)


def _learned_agent(scenario: str, env_kwargs: dict) -> DualAgentPolicy:
    """An untrained agent without a prior (what DAgger from a hindsight teacher starts from)."""
    env = cluster_env.parallel_env(scenario, split="test", **env_kwargs)
    spaces = spaces_signature(env)
    cfg = DualAgentConfig(env_overrides=dict(env_kwargs))
    torch.manual_seed(0)
    return DualAgentPolicy(build_model(cfg, spaces), cfg, spaces, allow_transfer=True)


#: The target for the acting agent: a 1,000-job philly-hetero-v2 window in at most this
#: many seconds of wall time, one process, one torch thread.
WINDOW_TARGET_S = 2.0


def episode_time(quick: bool = False, repeats: int = 1) -> list[dict]:
    """Wall time of whole deterministic episodes (module docstring); ``quick``: the 138-machine
    cases only; ``repeats``: plays of each window (the rows give the fastest and the range; the
    same episode each time, its decisions and average JCT printed)."""
    from dataclasses import replace

    from baselines.harness.episode import run_episode
    from cluster_env.loaders import philly_cluster, scale_cluster
    from cluster_env.scenarios import get_scenario

    torch.set_num_threads(1)
    cluster = scale_cluster(philly_cluster(), 1 / 4, "philly-1/4")
    big = replace(get_scenario("philly-v1"), cluster=lambda: cluster)
    kw = {"preemption": True, "observation": "extended"}
    shipped = DualAgentPolicy.load(str(PRETRAINED_DIR / "philly-v0.pt"), name="dual", allow_transfer=True)
    cases = [("shipped philly-v0 agent, philly-v1 window on 138 machines", shipped, big, None),
             ("residual agent on las+fastest, philly-v1 window on 138 machines", _residual_agent(big, kw), big, kw)]
    if "modern-v1" in cluster_env.list_scenarios():
        cases.append(("residual agent on las+fastest, modern-v1 window (100 machines)",
                      _residual_agent("modern-v1", kw), "modern-v1", kw))
    if not quick:
        cases.append(("residual agent on las+fastest, philly-hetero-v1 window (27 machines)",
                      _residual_agent("philly-hetero-v1", kw), "philly-hetero-v1", kw))
        # The layout a placement agent that moves jobs reads (running jobs' placements).
        kw2 = {"preemption": True, "observation": "extended-v2"}
        cases.append((HETERO_V2_CASE, _learned_agent("philly-hetero-v2", kw2), "philly-hetero-v2", kw2))
    # Compiled kernels and caches are loaded outside the timing, on a 20-job window.
    run_episode(shipped, big, "test", 0, env_kwargs={"jobs_per_episode": 20}, allow_env_mismatch=True)
    rows = []
    section = "dual agent: episode (1,000 jobs)"
    for case, policy, scenario, env_kwargs in cases:
        walls, cpus = [], []
        for _ in range(max(1, repeats)):
            t0, c0 = time.perf_counter(), time.process_time()
            record = run_episode(policy, scenario, "test", 0, env_kwargs=env_kwargs, allow_env_mismatch=True).record
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        spread = f"s per window (range {min(walls):.2f}-{max(walls):.2f} over {len(walls)})" if len(walls) > 1 else "s"
        rows.append({"section": section, "case": f"{case}: wall", "value": round(min(walls), 2), "unit": spread})
        rows.append({"section": section, "case": f"{case}: CPU", "value": round(min(cpus), 2),
                     "unit": "s of this process (the wall time less what other jobs took from it)"})
        if case == HETERO_V2_CASE:
            rows.append({"section": section, "case": f"{case}: target", "value": WINDOW_TARGET_S,
                         "unit": f"s (the target; {'met' if min(walls) <= WINDOW_TARGET_S else 'NOT met'} here)"})
        rows.append({"section": section, "case": f"{case}: decisions",
                     "value": int(record["steps"]), "unit": f"({int(record['preemptions'])} preemptions)"})
        rows.append({"section": section, "case": f"{case}: average JCT",
                     "value": round(float(record["avg_jct"]), 6), "unit": "s (the same episode before and after)"})
    return rows


HETERO_V2_CASE = "agent without prior, extended-v2, philly-hetero-v2 window"


def measure(quick: bool = False, episode: bool = False, repeats: int = 1) -> list[dict]:
    """All dual-agent rows (``quick``: fewer repeats and a shorter rollout; ``episode``: also the
    whole-episode times, about a minute per repeat)."""
    return (decision_latency(quick) + training_throughput(quick)
            + (episode_time(quick, repeats) if episode else []))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--episode", action="store_true", help="also time whole 1,000-job episodes")
    parser.add_argument("--episode-only", action="store_true", help="only the whole-episode times")
    parser.add_argument("--repeats", type=int, default=1,
                        help="plays of each episode window (the fastest is printed, with the range)")
    args = parser.parse_args()
    rows = (episode_time(args.quick, args.repeats) if args.episode_only
            else measure(args.quick, args.episode, args.repeats))
    for row in rows:
        print(f"{row['section']:<28} {row['case']:<52} {row['value']:>12,} {row['unit']}")


if __name__ == "__main__":
    main()
