"""Residual dual agent on a heuristic prior (``DualAgentConfig(prior=...)``, ``--prior``): at
initialisation the deterministic agent is exactly its heuristic; the bonus enters acting, batched
rollouts and the training loss alike; checkpoints carry it; one RLOO iteration moves the weights."""
from __future__ import annotations

import copy
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import cluster_env
from baselines import evaluate
from dual_agent import DualAgentConfig, DualAgentPolicy, TrainConfig
from dual_agent.paper.batched import EpisodeSpec, collect_batched
from dual_agent.paper.checkpoint import load_checkpoint, save_checkpoint
from dual_agent.paper.policy import build_model, required_env, spaces_signature
from dual_agent.paper.prior import NO_PRIOR, add_prior_bonus
from dual_agent.paper.rloo import RLOOTrainer
from dual_agent.paper.rollout import collect

torch.set_num_threads(1)

HETERO = "philly-hetero-v1"
# Short, loaded windows: queues form and both agents have choices (short windows see no preemption).
SHORT = {"jobs_per_episode": 25, "load": 1.5}


def _agent(config: DualAgentConfig, scenario: str = HETERO, deterministic: bool = True, seed: int = 0
           ) -> DualAgentPolicy:
    spaces = spaces_signature(cluster_env.parallel_env(scenario, **required_env(config)))
    torch.manual_seed(seed)
    return DualAgentPolicy(build_model(config, spaces), config, spaces, scenario=scenario,
                           deterministic=deterministic)


def _metrics(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in ("policy", "wall_s")}


@pytest.mark.parametrize("prior, orderer, observation", [("las+fastest", "learned", "extended"),
                                                          ("las+fastest", "las", "default")])
def test_untrained_residual_agent_is_exactly_its_heuristic(prior, orderer, observation):
    agent = _agent(DualAgentConfig(prior=prior, orderer=orderer, env_overrides={"observation": observation}))
    assert agent.env_overrides["preemption"] is True          # the prior's needs are the agent's
    mine = evaluate(agent, HETERO, split="validation", seeds=[1], backend="serial", env_kwargs=SHORT)
    theirs = evaluate(prior, HETERO, split="validation", seeds=[1], env_kwargs=SHORT)
    assert [_metrics(r) for r in mine] == [_metrics(r) for r in theirs]
    # Without the prior the same untrained networks are not the heuristic.
    plain = _agent(DualAgentConfig(orderer=orderer, env_overrides={"observation": observation}))
    other = evaluate(plain, HETERO, split="validation", seeds=[1], backend="serial", env_kwargs=SHORT)
    assert [_metrics(r) for r in other] != [_metrics(r) for r in theirs]


def test_bonus_helper_numpy_and_torch_agree_and_leave_rows_without_prior_alone():
    logits = np.array([0.5, -1.0, 2.0])
    np.testing.assert_array_equal(add_prior_bonus(logits, 1, 3.0), [0.5, 2.0, 2.0])
    np.testing.assert_array_equal(add_prior_bonus(logits, NO_PRIOR, 3.0), logits)
    assert logits[1] == -1.0                                    # a copy, not in place
    batch = torch.tensor([[0.5, -1.0, 2.0], [1.0, 1.0, 1.0]])
    out = add_prior_bonus(batch, torch.tensor([1, NO_PRIOR]), 3.0)
    np.testing.assert_array_equal(out.numpy(), [[0.5, 2.0, 2.0], [1.0, 1.0, 1.0]])


def test_sampling_explores_near_the_prior_with_the_documented_probability():
    agent = _agent(DualAgentConfig(prior="las+fastest"), deterministic=False)
    mask = np.ones(6, dtype=bool)
    agent._prior_action = 4
    draws = np.array([agent.choose_from_logits(1, np.zeros(6), mask) for _ in range(4000)])
    want = math.exp(3.0) / (math.exp(3.0) + 5)
    assert abs((draws == 4).mean() - want) < 0.03 and (draws != 4).any()


def test_config_and_cli_errors_name_the_argument(tmp_path):
    with pytest.raises(ValueError, match="prior 'nope'"):
        DualAgentConfig(prior="nope")
    with pytest.raises(ValueError, match="prior_bonus must be"):
        DualAgentConfig(prior="las", prior_bonus=-1.0)
    proc = subprocess.run([sys.executable, "-m", "baselines", "train", "--smoke", "--prior-bonus", "2",
                           "--out", str(tmp_path / "x")], capture_output=True, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=300, cwd=tmp_path)
    assert proc.returncode == 2 and "--prior-bonus needs --prior" in proc.stderr


def test_batched_rollout_records_the_prior_as_the_one_env_path():
    # Preemption on: the prior's orderer actions on running rows and advance are renumbered too.
    agent = _agent(DualAgentConfig(prior="las+fastest"), deterministic=False)
    kw = {**required_env(agent.config), **SHORT}
    single = collect(agent, cluster_env.parallel_env(HETERO, split="train", **kw), [3], 1)
    batched = collect_batched([agent], [cluster_env.parallel_env(HETERO, split="train", **kw)],
                              [EpisodeSpec(3, 3)], agent.model)
    assert len(single) == len(batched) > 50
    K = single.steps["jobs"].shape[1] - 16
    used = batched.steps["jobs"].shape[1] - 16
    want = single.steps["prior"].copy()
    want[(single.steps["agent"] == 0) & (want >= K)] -= K - used
    np.testing.assert_array_equal(want, batched.steps["prior"])
    learned = batched.steps["learned"]
    assert (batched.steps["prior"][learned] >= 0).all() and (batched.steps["prior"] >= used).any()


TINY = dict(scenario=HETERO, algorithm="rloo", timesteps=10_000, jobs_per_episode=15, group_windows=2,
            group_size=2, minibatch=64, epochs=2, eval_every=0, seed=5, entropy_coef=0.0, env_kwargs={"load": 1.5})


def test_training_loss_sees_the_bonus_and_one_rloo_iteration_moves_the_output_layers(tmp_path):
    cfg = DualAgentConfig(prior="las+fastest", prior_bonus=2.5)
    t = RLOOTrainer(TrainConfig(**TINY), cfg, out_dir=tmp_path, tensorboard=False)
    assert float(t.model.placer.head[-1].weight.detach().abs().sum()) == 0.0
    rollout = t._collect(t._make_collector(), imitating=False)
    learned = torch.from_numpy(rollout.steps["learned"])
    steps = {k: torch.from_numpy(rollout.steps[k])[learned] for k in
             ("jobs", "machines", "global", "placing", "order_mask", "place_mask", "prior")}
    agent = torch.from_numpy(rollout.steps["agent"].astype(np.int64))[learned]
    prior = steps["prior"]
    with torch.no_grad():
        logp, _ = t._logp_entropy(steps, agent, prior)
    legal = torch.where(agent == 0, steps["order_mask"].sum(1), steps["place_mask"].sum(1)).double()
    # Zero network logits: the prior's action has log-probability beta - log(e^beta + n - 1).
    want = 2.5 - torch.log(math.exp(2.5) + legal - 1)
    torch.testing.assert_close(logp.double(), want, atol=1e-5, rtol=0)
    before = copy.deepcopy(t.model.state_dict())
    t.train(progress=False, max_iterations=1)
    after = t.model.state_dict()
    assert not torch.equal(before["placer.head.4.weight"], after["placer.head.4.weight"])
    assert not torch.equal(before["orderer.job_head.4.weight"], after["orderer.job_head.4.weight"])


def test_checkpoint_records_the_prior_and_the_harness_applies_it(tmp_path):
    agent = _agent(DualAgentConfig(prior="las+fastest", prior_bonus=4.0, orderer="las"))
    path = save_checkpoint(tmp_path / "agent.pt", agent.model, agent.config, agent.spaces, HETERO)
    data = load_checkpoint(path, scenario=HETERO)
    assert data["config"]["prior"] == "las+fastest" and data["config"]["prior_bonus"] == 4.0
    loaded = evaluate(str(path), HETERO, split="validation", seeds=[2], backend="serial", env_kwargs=SHORT)[0]
    assert _metrics(loaded) == _metrics(evaluate("las+fastest", HETERO, split="validation", seeds=[2],
                                                 env_kwargs=SHORT)[0])
    # Checkpoints written before the option load as plain agents.
    old = dict(data["config"])
    del old["prior"], old["prior_bonus"]
    assert DualAgentConfig.from_dict(old).prior is None


def test_paired_script_against_every_info_agnostic_heuristic(tmp_path):
    import json
    from pathlib import Path

    agent = _agent(DualAgentConfig(prior="las+fastest", orderer="las"))
    path = save_checkpoint(tmp_path / "agent.pt", agent.model, agent.config, agent.spaces, HETERO)
    out = tmp_path / "paired.json"
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "eval_dual_paired.py"
    proc = subprocess.run([sys.executable, str(script), str(path), "--scenario", HETERO, "--seeds", "0-1",
                           "--references", "agnostic", "--jobs-per-episode", "12", "--out", str(out)],
                          capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=600)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert len(data["summaries"]) == 16 and "fifo-strict+spread" in data["summaries"]
    assert "best info-agnostic reference on these windows" in proc.stdout
    same = data["summaries"]["las+fastest"]     # the untrained residual agent is its prior
    assert (same["ratio"], same["lo"], same["hi"]) == (1.0, 1.0, 1.0)


@pytest.mark.slow
@pytest.mark.parametrize("scenario, prior", [(HETERO, "las+fastest"), ("philly-v1", "las")])
def test_untrained_residual_agent_is_its_heuristic_on_a_full_preempting_window(scenario, prior):
    # A full test window: LAS preempts at its ticks (short windows never do), and the orderer is
    # learned, so every tick is a network decision that the bonus must settle as LAS does.
    agent = _agent(DualAgentConfig(prior=prior, env_overrides={"observation": "extended"}), scenario=scenario)
    mine = evaluate(agent, scenario, split="test", seeds=[0], backend="serial")[0]
    theirs = evaluate(prior, scenario, split="test", seeds=[0])[0]
    assert mine["preemptions"] > 100 and _metrics(mine) == _metrics(theirs)


def test_prior_margin_script_smoke(tmp_path):
    from pathlib import Path

    agent = _agent(DualAgentConfig(prior="las+fastest", orderer="las"))
    path = save_checkpoint(tmp_path / "agent.pt", agent.model, agent.config, agent.spaces, HETERO)
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "prior_margin.py"
    proc = subprocess.run([sys.executable, str(script), str(path), "--seeds", "0", "--jobs-per-episode", "15"],
                          capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "max 0.000" in proc.stdout and "decisions overturned 0" in proc.stdout   # zero output layers
