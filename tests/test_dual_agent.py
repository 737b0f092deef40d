"""The dual agent: networks, policy, MAPPO update, checkpoints, resume, CLI."""
from __future__ import annotations

import copy
from collections import Counter
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import cluster_env
from baselines import evaluate
from dual_agent import CheckpointError, DualAgentConfig, DualAgentPolicy, MAPPOTrainer, TrainConfig
from dual_agent.paper.checkpoint import load_checkpoint, save_checkpoint
from dual_agent.paper.mappo import gae
from dual_agent.paper.networks import OrderingAgent
from dual_agent.paper.policy import build_model, joint_action, required_env, spaces_signature, work_conserving_mask
from dual_agent.paper.rollout import RolloutWorkers

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parent.parent

# A tiny MAPPO run: short philly episodes, two logical workers.
TINY = dict(scenario="philly-v0", timesteps=400, steps_per_worker=100, jobs_per_episode=20, minibatch=64,
            epochs=2, eval_every=0, n_envs=2, seed=3)


def fresh_policy(scenario: str = "philly-v0", **config) -> DualAgentPolicy:
    cfg = DualAgentConfig(**config)
    spaces = spaces_signature(cluster_env.parallel_env(scenario, split="test", **required_env(cfg)))
    torch.manual_seed(0)
    return DualAgentPolicy(build_model(cfg, spaces), cfg, spaces, scenario=scenario)


def state_equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# ---------------------------------------------------------------------------- networks
def test_summary_is_permutation_invariant_and_logits_follow_the_rows():
    torch.manual_seed(0)
    net = OrderingAgent(job_dim=14, machine_dim=11, global_dim=10, hidden=16)
    jobs = torch.rand(1, 8, 14)
    jobs[0, :5, 0] = 1.0          # 5 valid rows, 3 empty
    jobs[0, 5:] = 0.0
    machines, glob = torch.rand(1, 6, 13), torch.rand(1, 10)
    perm = torch.tensor([3, 0, 4, 1, 2, 5, 6, 7])
    logits, summary = net(jobs, machines, glob)
    logits_p, summary_p = net(jobs[:, perm], machines[:, torch.randperm(6)], glob)
    assert torch.allclose(summary, summary_p, atol=1e-6)
    assert torch.allclose(logits[0, :-1][perm], logits_p[0, :-1], atol=1e-6)
    assert torch.allclose(logits[0, -1], logits_p[0, -1], atol=1e-6)


def test_work_conserving_mask_forbids_advance_only_when_a_pending_job_can_start():
    jobs = np.zeros((4, 14), np.float32)
    jobs[3, 1] = 1.0                                   # row 3 is a running job (preemption candidate)
    mask = np.array([0, 1, 0, 1, 1], bool)             # pending row 1 fits, preempting row 3 allowed
    assert work_conserving_mask(mask, jobs).tolist() == [0, 1, 0, 1, 0]
    only_preempt = np.array([0, 0, 0, 1, 1], bool)
    assert work_conserving_mask(only_preempt, jobs).tolist() == only_preempt.tolist()


def test_gae_matches_a_hand_computation():
    rewards = np.array([1.0, 2.0, 3.0, 10.0], np.float32)
    dones = np.array([0, 0, 1, 1], bool)               # two episodes: 3 steps, then 1
    values = np.array([0.5, 0.25, 0.125, 4.0], np.float32)
    gamma, lam = 0.9, 0.8
    d2 = 3 - 0.125
    d1 = 2 + gamma * 0.125 - 0.25
    d0 = 1 + gamma * 0.25 - 0.5
    want = [d0 + gamma * lam * (d1 + gamma * lam * d2), d1 + gamma * lam * d2, d2, 10 - 4.0]
    assert np.allclose(gae(rewards, dones, values, gamma, lam), want)


# ---------------------------------------------------------------------------- policy
def test_untrained_agent_finishes_philly_through_the_harness_and_is_deterministic():
    policy = fresh_policy()
    a = evaluate(policy, "philly-v0", split="test", seeds=[0], backend="serial", env_kwargs={"jobs_per_episode": 60})
    b = evaluate(policy, "philly-v0", split="test", seeds=[0], backend="serial", env_kwargs={"jobs_per_episode": 60})
    assert a[0]["jobs_finished"] == 60
    assert a == [dict(r, wall_s=a[0]["wall_s"]) for r in b]


def test_heuristic_halves_and_no_gp_ablation_run():
    for config in ({"orderer": "fifo"}, {"placer": "fastest"}, {"use_gp": False}, {"orderer": "tiresias"}):
        policy = fresh_policy(**config)
        rec = evaluate(policy, "philly-v0", seeds=[1], backend="serial", env_kwargs={"jobs_per_episode": 30})[0]
        assert rec["jobs_finished"] == 30, config
    assert fresh_policy(orderer="tiresias").env_overrides == {"preemption": True}


def test_gp_features_reach_the_network_and_are_zero_without_gp():
    env = cluster_env.parallel_env("philly-v0", split="test")
    obs, infos = env.reset(seed=0)
    with_gp, without = fresh_policy(), fresh_policy(use_gp=False)
    f_gp, f_no = with_gp.features(obs), without.features(obs)
    assert f_gp["machines"].shape == (34, 13)
    assert np.allclose(f_gp["machines"][:, 11], 1.0) and (f_gp["machines"][:, 12] > 0).all()   # prior mean, std
    assert (f_no["machines"][:, 11:] == 0).all()


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match="placer"):
        DualAgentConfig(placer="nowhere")
    with pytest.raises(ValueError, match="at least one"):
        DualAgentConfig(orderer="fifo", placer="first-fit")
    with pytest.raises(ValueError, match="gamma"):
        TrainConfig(gamma=1.5)
    with pytest.raises(ValueError, match="unknown TrainConfig"):
        TrainConfig.from_dict({"steps": 3})


# ---------------------------------------------------------------------------- checkpoints
def test_checkpoint_round_trip_is_bit_for_bit(tmp_path):
    policy = fresh_policy()
    path = save_checkpoint(tmp_path / "a.pt", policy.model, policy.config, policy.spaces, "philly-v0")
    loaded = DualAgentPolicy.load(path, scenario="philly-v0")
    assert state_equal(policy.model.state_dict(), loaded.model.state_dict())
    assert loaded.config == policy.config and loaded.spaces == policy.spaces
    kw = {"jobs_per_episode": 40}
    assert (evaluate(policy, "philly-v0", seeds=[2], backend="serial", env_kwargs=kw)[0]["avg_jct"]
            == evaluate(loaded, "philly-v0", seeds=[2], backend="serial", env_kwargs=kw)[0]["avg_jct"])


def test_truncated_foreign_and_mismatched_checkpoints_are_refused(tmp_path):
    policy = fresh_policy()
    good = save_checkpoint(tmp_path / "good.pt", policy.model, policy.config, policy.spaces, "philly-v0")
    data = good.read_bytes()
    (tmp_path / "trunc.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="trunc.pt.*truncated or foreign"):
        DualAgentPolicy.load(tmp_path / "trunc.pt")
    (tmp_path / "empty.pt").write_bytes(b"")
    with pytest.raises(CheckpointError, match="empty.pt"):
        DualAgentPolicy.load(tmp_path / "empty.pt")
    (tmp_path / "text.pt").write_text("hello")
    with pytest.raises(CheckpointError, match="text.pt"):
        DualAgentPolicy.load(tmp_path / "text.pt")
    torch.save({"weights": torch.zeros(3)}, tmp_path / "foreign.pt")
    with pytest.raises(CheckpointError, match="format tag"):
        DualAgentPolicy.load(tmp_path / "foreign.pt")
    with pytest.raises(CheckpointError, match="no such"):
        DualAgentPolicy.load(tmp_path / "missing.pt")
    with pytest.raises(CheckpointError, match="trained on scenario 'philly-v0', not 'openb-v0'"):
        DualAgentPolicy.load(good, scenario="openb-v0")
    raw = torch.load(good, weights_only=True)
    raw["version"] = 99
    torch.save(raw, tmp_path / "future.pt")
    with pytest.raises(CheckpointError, match="version 99"):
        DualAgentPolicy.load(tmp_path / "future.pt")
    raw["version"] = 1
    raw["model"] = {k: v for k, v in list(raw["model"].items())[:-1]}
    torch.save(raw, tmp_path / "partial.pt")
    with pytest.raises(CheckpointError, match="do not match"):
        DualAgentPolicy.load(tmp_path / "partial.pt")


def test_checkpoint_for_other_spaces_is_refused_when_the_episode_starts(tmp_path):
    from baselines.harness.episode import EnvMismatchError

    policy = fresh_policy("philly-v0")
    path = save_checkpoint(tmp_path / "p.pt", policy.model, policy.config, policy.spaces, "philly-v0")
    # Another scenario: refused before any episode unless allowed (tests/test_scores_honest.py) ...
    with pytest.raises(EnvMismatchError, match="scenario='philly-v0'"):
        evaluate(DualAgentPolicy.load(path), "openb-v0", seeds=[0], backend="serial")
    # ... and then other spaces: refused when the episode starts unless allow_transfer.
    with pytest.raises(ValueError, match="34 machines; this environment has .* 42 machines"):
        evaluate(DualAgentPolicy.load(path), "openb-v0", seeds=[0], backend="serial", allow_env_mismatch=True)
    rec = evaluate(DualAgentPolicy.load(path, allow_transfer=True), "openb-v0", seeds=[0], backend="serial",
                   env_kwargs={"jobs_per_episode": 20}, allow_env_mismatch=True)[0]
    assert rec["jobs_finished"] == 20


# ---------------------------------------------------------------------------- training
def test_subprocess_and_in_process_rollouts_agree():
    policy = fresh_policy()
    args = ("philly-v0", "train", {}, 15, policy.config.to_dict(), policy.spaces)
    with RolloutWorkers(2, True, *args) as procs:
        a = procs.collect(policy.model.state_dict(), 7, 0, 50)
    b = RolloutWorkers(2, False, *args).collect(policy.model.state_dict(), 7, 0, 50)
    assert len(a) == len(b) >= 100
    for key in a.steps:
        assert np.array_equal(a.steps[key], b.steps[key]), key
    assert a.steps["learned"].any() and a.steps["done"][-1]


def test_training_changes_only_the_learned_halves(tmp_path):
    trainer = MAPPOTrainer(TrainConfig(**TINY), DualAgentConfig(orderer="fifo"), tmp_path, subprocess=False,
                           tensorboard=False)
    before = copy.deepcopy(trainer.model.state_dict())
    trainer.train(progress=False, max_iterations=1)
    after = trainer.model.state_dict()
    changed = {k.split(".")[0] for k in before if not torch.equal(before[k], after[k])}
    assert changed == {"placer", "critic"}     # the heuristic orderer's network is never trained


def test_resume_continues_exactly_as_the_uninterrupted_run(tmp_path):
    straight = MAPPOTrainer(TrainConfig(**TINY), out_dir=tmp_path / "a", subprocess=False, tensorboard=False)
    straight.train(progress=False, max_iterations=2)
    first = MAPPOTrainer(TrainConfig(**TINY), out_dir=tmp_path / "b", subprocess=False, tensorboard=False)
    first.train(progress=False, max_iterations=1)
    resumed = MAPPOTrainer.resume(tmp_path / "b" / "last.pt", subprocess=False, tensorboard=False)
    assert resumed.iteration == 1
    resumed.train(progress=False, max_iterations=1)
    assert resumed.iteration == straight.iteration == 2
    assert state_equal(straight.model.state_dict(), resumed.model.state_dict())
    log = (tmp_path / "b" / "log.csv").read_text().splitlines()
    assert len(log) == 3 and log[0].startswith("iteration,timesteps")


def test_cli_train_smoke_then_score_the_checkpoint(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "baselines", "train", "--smoke", "--quiet", "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (out / "best.pt").is_file() and (out / "last.pt").is_file()
    rows = (out / "log.csv").read_text().splitlines()
    assert len(rows) >= 2 and "val_avg_jct" in rows[0]
    data = load_checkpoint(out / "last.pt", scenario="philly-v0")
    assert data["train"]["timesteps"] >= 600
    proc = subprocess.run([sys.executable, "-m", "baselines", "run", "--quiet", "--no-plots", "--seeds", "0",
                           "--scenario", "philly-v0", "--env", "jobs_per_episode=50", "--policies",
                           f"fifo,{out / 'best.pt'}", "--out", str(tmp_path / "res")],
                          capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "dual(best)" in proc.stdout and "fifo" in proc.stdout


def test_dual_name_without_a_checkpoint_says_how_to_train_one():
    from baselines.harness.sweep import resolve_policy

    with pytest.raises(FileNotFoundError, match="cluster-bench train --scenario toy-v0"):
        resolve_policy("dual", "toy-v0")


def test_agent_never_touches_a_job_twice_in_one_instant():
    """With preemption, an agent could preempt and restart one job forever at one instant (untrained: it
    preempts a lot, which makes this a hard case)."""
    policy = fresh_policy(env_overrides={"preemption": True}, work_conserving=False)
    env = cluster_env.parallel_env("philly-v0", split="test", preemption=True, jobs_per_episode=40)
    obs, infos = env.reset(seed=4)
    policy.reset(4)
    touched = []
    while env.agents:
        agent, action, _, feats = policy.decide(obs, infos)
        if agent == 0 and action < len(feats["jobs"]):
            touched.append((infos["orderer"]["time"], int(infos["orderer"]["job_ids"][action])))
        obs, _, _, _, infos = env.step(joint_action(obs, agent, action))
    # A job is touched at most twice per instant: once, and a restart only when nothing else can move.
    assert len(touched) >= 40 and max(Counter(touched).values()) <= 2
    assert env.unwrapped.metrics()["jobs_finished"] == 40
