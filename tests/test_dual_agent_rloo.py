"""RLOO training of the dual agent: the leave-one-out advantages on a hand-computed group, batched
rollouts against the one-environment path, determinism, devices, the extended observation, CLI."""
from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import cluster_env
from baselines import evaluate
from dual_agent import DualAgentConfig, DualAgentPolicy, TrainConfig
from dual_agent.paper.batched import EpisodeSpec, collect_batched
from dual_agent.paper.checkpoint import load_checkpoint, save_checkpoint
from dual_agent.paper.policy import build_model, spaces_signature
from dual_agent.paper.rloo import RLOOTrainer, make_trainer, rloo_advantages
from dual_agent.paper.rollout import collect

torch.set_num_threads(1)

# Episodes A, B, C on window 0 and D, E on window 1 (rewards, decision times, end time).
TOY = [([-1.0, -2.0], [0.0, 10.0], 20.0, 0), ([-2.0, -2.0], [0.0, 5.0], 10.0, 0), ([-6.0], [0.0], 30.0, 0),
       ([-1.0], [0.0], 1.0, 1), ([-3.0], [0.0], 1.0, 1)]
TINY = dict(scenario="philly-v1", algorithm="rloo", timesteps=10_000, jobs_per_episode=15, group_windows=2,
            group_size=2, minibatch=64, epochs=2, eval_every=0, seed=5, env_kwargs={"load": 1.5})


def _toy(**kw) -> np.ndarray:
    rewards = [r for e in TOY for r in e[0]]
    times = [t for e in TOY for t in e[1]]
    episodes = [{"steps": len(e[0]), "end_time": e[2], "group": e[3]} for e in TOY]
    return rloo_advantages(np.array(rewards), np.array(times), episodes, **kw)


def test_time_aligned_leave_one_out_advantages_on_a_toy_group():
    # A at t=0: others' returns -4 and -6 -> baseline -5, own -3 -> +2. A at t=10: B has nothing
    # left (0), C has -6 + 2 = -4 left (linear in time) -> baseline -2, own -2 -> 0.
    # B at t=5: A has -3 + 0.5 = -2.5 left, C -5 -> baseline -3.75, own -2 -> 1.75.
    np.testing.assert_allclose(_toy(baseline="time"), [2.0, 0.0, 0.5, 1.75, -2.5, 2.0, -2.0], atol=1e-12)


def test_episode_baseline_and_per_window_scales():
    np.testing.assert_allclose(_toy(baseline="episode"), [2.0, 2.0, 0.5, 0.5, -2.5, 2.0, -2.0], atol=1e-12)
    scaled = _toy(baseline="episode", scale="scale")
    np.testing.assert_allclose(scaled[:5], np.array([2.0, 2.0, 0.5, 0.5, -2.5]) / (13 / 3), atol=1e-12)
    np.testing.assert_allclose(scaled[5:], np.array([2.0, -2.0]) / 2.0, atol=1e-12)
    logs = _toy(baseline="time", scale="log")
    eps = 0.01 * 13 / 3
    want_a0 = -(math.log(3 + eps) - (math.log(4 + eps) + math.log(6 + eps)) / 2)
    assert logs[0] == pytest.approx(want_a0, abs=1e-12)
    assert logs[0] > 0 > logs[4]          # the cheapest rollout is pushed up, the dearest down


def test_a_group_of_one_is_refused():
    with pytest.raises(ValueError, match="needs >= 2"):
        rloo_advantages(np.array([-1.0]), np.array([0.0]), [{"steps": 1, "end_time": 1.0, "group": 0}])


def _policy(scenario="philly-v1", **env):
    cfg = DualAgentConfig(env_overrides=env)
    spaces = spaces_signature(cluster_env.parallel_env(scenario, **env))
    torch.manual_seed(0)
    return DualAgentPolicy(build_model(cfg, spaces), cfg, spaces, scenario=scenario, deterministic=False)


def test_batched_rollout_of_one_env_matches_the_one_env_path():
    # Preemption on: running rows and advance are renumbered when empty pending rows are dropped.
    kw = dict(preemption=True, jobs_per_episode=25)
    policy = _policy(preemption=True)
    env = cluster_env.parallel_env("philly-v1", split="train", **kw)
    single = collect(policy, env, [11], 1)
    batched = collect_batched([policy], [cluster_env.parallel_env("philly-v1", split="train", **kw)],
                              [EpisodeSpec(11, 11)], policy.model)
    assert len(single) == len(batched) > 50
    for key in ("reward", "time", "agent", "learned", "done", "global", "machines", "placing", "place_mask"):
        np.testing.assert_array_equal(single.steps[key], batched.steps[key], err_msg=key)
    K, used = single.steps["jobs"].shape[1] - 16, batched.steps["jobs"].shape[1] - 16
    assert used < K
    np.testing.assert_array_equal(single.steps["jobs"][:, :used], batched.steps["jobs"][:, :used])
    np.testing.assert_array_equal(single.steps["jobs"][:, K:], batched.steps["jobs"][:, used:])
    orderer = single.steps["agent"] == 0
    want = single.steps["action"].copy()
    want[orderer & (want >= K)] -= K - used
    np.testing.assert_array_equal(want, batched.steps["action"])
    assert (batched.steps["action"][orderer] >= used).any()     # advance / preemptions were taken
    assert single.episodes[0]["return"] == pytest.approx(batched.episodes[0]["return"])


PREEMPTING = DualAgentConfig(env_overrides={"preemption": True})   # the orderer has choices at every tick


def test_rloo_groups_share_their_window_and_training_is_deterministic(tmp_path):
    a = RLOOTrainer(TrainConfig(**TINY), PREEMPTING, out_dir=tmp_path / "a", tensorboard=False)
    specs = a.specs(0)
    assert [s.group for s in specs] == [0, 0, 1, 1]
    assert specs[0].env_seed == specs[1].env_seed != specs[2].env_seed
    assert len({s.policy_seed for s in specs}) == 4
    before = copy.deepcopy(a.model.state_dict())
    a.train(progress=False, max_iterations=2)
    b = RLOOTrainer(TrainConfig(**TINY), PREEMPTING, out_dir=tmp_path / "b", tensorboard=False)
    b.train(progress=False, max_iterations=2)
    after_a, after_b = a.model.state_dict(), b.model.state_dict()
    assert all(torch.equal(after_a[k], after_b[k]) for k in after_a)
    changed = {k.split(".")[0] for k in before if not torch.equal(before[k], after_a[k])}
    assert changed == {"orderer", "placer"}     # no critic without baseline="critic"
    rows = (tmp_path / "a" / "log.csv").read_text().splitlines()
    assert len(rows) == 3


def test_rloo_with_the_critic_baseline_trains_the_critic(tmp_path):
    t = make_trainer(TrainConfig(**{**TINY, "baseline": "critic"}), out_dir=tmp_path, tensorboard=False)
    assert isinstance(t, RLOOTrainer)
    before = copy.deepcopy(t.model.critic.state_dict())
    t.train(progress=False, max_iterations=1)
    assert any(not torch.equal(before[k], v) for k, v in t.model.critic.state_dict().items())


def test_imitation_warm_start_from_las_in_batched_rollouts(tmp_path):
    cfg = TrainConfig(**{**TINY, "imitate": "las", "imitate_iterations": 1})
    t = RLOOTrainer(cfg, DualAgentConfig(work_conserving=False, env_overrides={"preemption": True}),
                    out_dir=tmp_path, tensorboard=False)
    slots = t._make_collector()
    rollout = t._collect(slots, imitating=True)
    stats = t.update(rollout, imitation=True)
    assert rollout.steps["learned"].any() and stats["policy_loss"] > 0     # cross-entropy of LAS's choices


def test_unavailable_device_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="device 'cuda:99' is not available"):
        RLOOTrainer(TrainConfig(**{**TINY, "device": "cuda:99"}), out_dir=tmp_path, tensorboard=False)
    with pytest.raises(ValueError, match="device must be"):
        TrainConfig(device="gpu")


def test_extended_observation_is_recorded_and_applied_by_the_harness(tmp_path):
    agent = DualAgentConfig(env_overrides={"observation": "extended"})
    t = RLOOTrainer(TrainConfig(**TINY), agent, out_dir=tmp_path, tensorboard=False)
    assert t.spaces["job_features"][-1] == "attained_all_log" and t.model.orderer.job_encoder[0].in_features == 19
    t.train(progress=False, max_iterations=1)
    data = load_checkpoint(tmp_path / "best.pt")
    assert data["config"]["env_overrides"] == {"observation": "extended"}
    policy = DualAgentPolicy.load(tmp_path / "best.pt")
    rec = evaluate(policy, "philly-v1", seeds=[0], backend="serial", env_kwargs={"jobs_per_episode": 15})[0]
    assert rec["jobs_finished"] == 15
    # The default layout is refused with a message that says what to do.
    env = cluster_env.parallel_env("philly-v1", jobs_per_episode=15)
    obs, infos = env.reset(seed=0)
    policy.reset(0)
    with pytest.raises(ValueError, match="observation layout it was trained on"):
        policy.act(obs, infos)


def test_cli_rloo_smoke_then_score_the_checkpoint(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "baselines", "train", "--smoke", "--algorithm", "rloo",
                           "--observation", "extended", "--scenario", "philly-v1", "--quiet", "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = load_checkpoint(out / "last.pt", scenario="philly-v1")
    assert data["train"]["config"]["algorithm"] == "rloo" and data["train"]["timesteps"] >= 300
    proc = subprocess.run([sys.executable, "-m", "baselines", "train", "--smoke", "--algorithm", "rloo",
                           "--device", "cuda:99", "--out", str(tmp_path / "x")],
                          capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 2 and "device 'cuda:99' is not available" in proc.stderr


BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def test_batched_rollout_benchmark_smoke():
    proc = subprocess.run([sys.executable, str(BENCH / "bench_batched_rollouts.py"), "--quick"], capture_output=True,
                          text=True, env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=600)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines() if line.strip().endswith("x")]
    assert [r[0] for r in rows] == ["1", "1", "2"] and all(float(r[-1][:-1]) > 0 for r in rows)


def test_paired_evaluation_script_smoke(tmp_path):
    policy = _policy()
    path = save_checkpoint(tmp_path / "agent.pt", policy.model, policy.config, policy.spaces, "philly-v1")
    out = tmp_path / "paired.json"
    proc = subprocess.run([sys.executable, str(BENCH / "eval_dual_paired.py"), str(path), "--seeds", "0-2",
                           "--references", "las,tiresias", "--jobs-per-episode", "12", "--out", str(out)],
                          capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "dual vs las" in proc.stdout and "dual vs tiresias" in proc.stdout
    data = json.loads(out.read_text())
    assert data["summaries"]["las"]["n"] == 3 and len(data["records"]) == 9
