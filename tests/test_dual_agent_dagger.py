"""DAgger from hindsight teachers: the teachers (train windows only, cached, replayed through the
labeller to their best-known value, following a student that deviates), the student that learns
a tiny window's teacher, the fine-tuning that starts from the imitation weights, the CLI."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from baselines.harness.episode import run_episode
from baselines.obs import J
from dual_agent import DualAgentConfig, TrainConfig
from dual_agent.paper.dagger import Aggregate, dagger_beta
from dual_agent.paper.policy import joint_action
from dual_agent.paper.rloo import RLOOTrainer, make_trainer
from dual_agent.paper.rollout import Rollout, make_env
from dual_agent.paper.teacher import TEACHER_RULES, HindsightTeacher, teacher_schedules

torch.set_num_threads(1)

SCENARIO = "philly-hetero-v2"
AGENT_ENV = {"preemption": True, "observation": "extended-v2"}
# A 10-job training window: its teacher is the priority index tuned in hindsight (20 episodes).
TINY = dict(scenario=SCENARIO, algorithm="rloo", jobs_per_episode=10, timesteps=10**6, eval_every=0,
            teacher="best-known", teacher_windows=1, teacher_episodes=20, dagger_episodes=1, dagger_epochs=4,
            minibatch=64, learning_rate=1e-3, seed=0, validation="split", group_windows=1, group_size=2)


def _play(teacher: HindsightTeacher, seed: int, jobs: int, deviate=None) -> float:
    """The teacher's own episode through label/observe (``deviate(agent, label, obs)`` may replace
    the action taken); the average JCT."""
    env = make_env(SCENARIO, "train", AGENT_ENV, jobs)
    obs, infos = env.reset(seed=seed)
    teacher.reset(seed)
    while True:
        agent, action = teacher.label(obs, infos)
        if deviate is not None:
            action = deviate(agent, action, obs)
        teacher.observe(obs, infos, action)
        obs, _, term, trunc, infos = env.step(joint_action(obs, agent, action))
        if term["orderer"] or trunc["orderer"]:
            return float(infos["orderer"]["metrics"]["avg_jct"])


def test_teachers_replay_to_their_value_and_are_cached(tmp_path):
    path = tmp_path / "teachers.json"
    windows = teacher_schedules(SCENARIO, [0, 1], episodes=20, jobs_per_episode=30, path=path)
    assert [w.seed for w in windows] == [0, 1]
    assert not {"srpt-clairvoyant", "srpt+fastest"} & set(TEACHER_RULES)
    for w in windows:
        assert w.value <= w.best_rule_value
        # The schedule labels every state of its own episode: played through the labeller it
        # gives the value the search found, to the last bit.
        assert _play(HindsightTeacher(w.schedule, SCENARIO), w.seed, 30) == w.value
    doc = json.loads(path.read_text())
    assert [item["certificate"]["split"] for item in doc["windows"]] == ["train", "train"]
    # Read back from the file, replayed (no search); a changed value there is refused, naming it.
    import baselines.optimality.search as search

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(search, "search_window", None)
        assert teacher_schedules(SCENARIO, [0, 1], episodes=20, jobs_per_episode=30, path=path) == windows
        doc["windows"][0]["certificate"]["avg_jct"] = 1.0
        path.write_text(json.dumps(doc))
        with pytest.raises(ValueError, match=r"windows\[0\]: field certificate.avg_jct 1.0"):
            teacher_schedules(SCENARIO, [0], episodes=20, jobs_per_episode=30, path=path)
    with pytest.raises(ValueError, match="settings.episodes"):
        teacher_schedules(SCENARIO, [0], episodes=21, jobs_per_episode=30, path=path)


def test_teacher_follows_a_student_that_deviates():
    """Where the teacher would advance, the student preempts a running job: the teacher's
    bookkeeping of the instant follows the student, so its next label at that instant does not
    restart the job just preempted (without the sync LAS's rule restarts it at once)."""
    w = teacher_schedules(SCENARIO, [2], episodes=12, jobs_per_episode=40)[0]
    teacher = HindsightTeacher(w.schedule, SCENARIO)
    env = make_env(SCENARIO, "train", AGENT_ENV, 40)
    obs, infos = env.reset(seed=w.seed)
    teacher.reset(w.seed)
    checked = 0
    just_preempted = None          # (instant, job) the student preempted against the teacher's label
    while checked < 5:
        agent, action = teacher.label(obs, infos)
        o, info = obs["orderer"], infos["orderer"]
        ids = np.asarray(info["job_ids"])
        if just_preempted is not None and agent == 0 and float(info["time"]) == just_preempted[0]:
            assert action >= len(o["action_mask"]) - 1 or ids[action] != just_preempted[1]
            checked += 1
        just_preempted = None
        running = np.flatnonzero((o["jobs"][:, J["running"]] > 0.5) & (o["action_mask"][:-1] > 0))
        if agent == 0 and action == len(o["action_mask"]) - 1 and len(running) and info.get("tick", True):
            action = int(running[0])                     # the student preempts instead of advancing
            just_preempted = (float(info["time"]), int(ids[action]))
        teacher.observe(obs, infos, action)
        obs, _, term, trunc, infos = env.step(joint_action(obs, agent, action))
        assert not (term["orderer"] or trunc["orderer"]), "the episode ended before five checks"


def test_teacher_rules_are_exactly_the_rules_that_need_no_durations():
    """A teacher labels states whose observation hides durations: every rule that asks for them
    (SJF too, which raised ClairvoyanceRequired mid-run when it was a window's best) is left out."""
    from baselines.optimality.search import RULES
    from baselines.registry import make_policy

    for rule in RULES:
        policy = make_policy(rule, scenario=SCENARIO) if rule == "gittins" else make_policy(rule)
        reads_durations = bool(policy.env_overrides.get("clairvoyant"))
        assert (rule in TEACHER_RULES) == (not reads_durations), rule
    assert "sjf" not in TEACHER_RULES


def test_config_refuses_teachers_off_the_train_split_and_without_the_environment(tmp_path):
    with pytest.raises(ValueError, match="train split"):
        TrainConfig(**{**TINY, "split": "test"})
    with pytest.raises(ValueError, match="needs teacher"):
        TrainConfig(scenario=SCENARIO, dagger_iterations=2)
    with pytest.raises(ValueError, match="preemption=True"):
        make_trainer(TrainConfig(**TINY, dagger_iterations=1), DualAgentConfig(hidden=16), tmp_path, tensorboard=False)


def test_beta_and_aggregate_cap():
    assert [dagger_beta(i, 0.5) for i in range(3)] == [1.0, 0.5, 0.25]
    agg = Aggregate(max_samples=5, running_rows=1)

    def part(n: int, used: int, action: int) -> Rollout:
        jobs = np.zeros((n, used + 1, 2), np.float32)
        jobs[:, :used, 0] = 1.0
        steps = {"jobs": jobs, "order_mask": np.ones((n, used + 2), bool), "agent": np.zeros(n, np.int8),
                 "action": np.full(n, action, np.int64), "prior": np.full(n, -1, np.int64)}
        return Rollout(steps)

    agg.add(part(3, 1, 2))        # action 2: advance (1 pending row + 1 running row)
    agg.add(part(3, 3, 0))        # the oldest collection goes at 6 > 5 samples
    assert len(agg) == 3
    agg = Aggregate(max_samples=10, running_rows=1)
    agg.add(part(2, 1, 2))
    agg.add(part(2, 3, 3))        # action 3: the running row of a 3-pending-row layout
    steps = agg.steps()
    assert steps["jobs"].shape == (4, 4, 2) and steps["order_mask"].shape == (4, 5)
    assert steps["action"].tolist() == [4, 4, 3, 3]   # advance stays advance, the running row stays the running row


def test_student_learns_the_teacher_of_a_tiny_window(tmp_path):
    """Six DAgger iterations on one 10-job window: the student's greedy schedule is the teacher's,
    i.e. it reaches the window's best-known average JCT."""
    trainer = make_trainer(TrainConfig(**TINY, dagger_iterations=6), DualAgentConfig(hidden=32, env_overrides=AGENT_ENV),
                           tmp_path, tensorboard=False)
    untrained = run_episode(trainer.policy(), SCENARIO, "train", 0, {"jobs_per_episode": 10}).record["avg_jct"]
    trainer.train(progress=False, max_iterations=6)
    w = trainer.teachers()[0]
    assert w.value < w.best_rule_value                       # a schedule no rule gives: learned, not ruled
    student = run_episode(trainer.policy(), SCENARIO, "train", 0, {"jobs_per_episode": 10}).record["avg_jct"]
    assert untrained > w.value * 1.05
    assert student == pytest.approx(w.value, rel=1e-9)
    losses = [row["policy_loss"] for row in trainer.log]
    assert losses[-1] < 0.5 * losses[0]


def test_residual_start_on_las_migrate_learns_the_teacher_too(tmp_path):
    """``--prior las-migrate`` with ``--teacher best-known``: the untrained student is exactly
    ``las-migrate`` (its iteration-0 validation and its schedule), and DAgger moves it from there
    to the teacher's schedule (the labels outweigh the prior's logit bonus where they differ)."""
    from baselines import evaluate

    cfg = DualAgentConfig(hidden=32, prior="las-migrate", env_overrides=AGENT_ENV)
    # Twice the plain student's iterations: the labels must first outweigh the prior's bonus.
    trainer = make_trainer(TrainConfig(**TINY, dagger_iterations=12), cfg, tmp_path, tensorboard=False)
    untrained = run_episode(trainer.policy(), SCENARIO, "train", 0, {"jobs_per_episode": 10}).record
    prior = evaluate("las-migrate", SCENARIO, split="train", seeds=[0], env_kwargs={"jobs_per_episode": 10})[0]
    assert {k: v for k, v in untrained.items() if k not in ("policy", "wall_s")} == \
        {k: v for k, v in prior.items() if k not in ("policy", "wall_s")}
    trainer.train(progress=False, max_iterations=12)
    w = trainer.teachers()[0]
    assert untrained["avg_jct"] > w.value * 1.01             # the teacher is not the prior
    student = run_episode(trainer.policy(), SCENARIO, "train", 0, {"jobs_per_episode": 10}).record["avg_jct"]
    assert student == pytest.approx(w.value, rel=1e-9)


def _weights(trainer) -> dict:
    return {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}


def test_fine_tuning_starts_from_the_imitation_weights_deterministically(tmp_path):
    """Two DAgger iterations, then one RLOO iteration on the shared reward: the RL step moves the
    imitation weights, and the same seed gives the same weights, also when the second run stops in
    its DAgger phase and resumes into RL from its ``last.pt`` (``dagger_iterations`` lowered to the
    iterations it completed; resuming inside the phase is refused, its aggregate is not saved)."""
    agent = DualAgentConfig(hidden=16, env_overrides=AGENT_ENV)
    straight = make_trainer(TrainConfig(**TINY, dagger_iterations=2), agent, tmp_path / "a", tensorboard=False)
    straight.train(progress=False, max_iterations=2)
    imitation = _weights(straight)
    straight.train(progress=False, max_iterations=1)
    assert straight.iteration == 3 and straight.log[-1].get("teacher_agree") is None   # an RL row
    tuned = _weights(straight)
    assert any(not torch.equal(imitation[k], tuned[k]) for k in imitation if k.startswith(("orderer", "placer")))

    stopped = make_trainer(TrainConfig(**TINY, dagger_iterations=3), agent, tmp_path / "b", tensorboard=False)
    stopped.train(progress=False, max_iterations=2)
    assert all(torch.equal(imitation[k], v) for k, v in _weights(stopped).items())
    with pytest.raises(ValueError, match="DAgger phase"):
        RLOOTrainer.resume(tmp_path / "b" / "last.pt", tensorboard=False).train(progress=False, max_iterations=1)
    resumed = RLOOTrainer.resume(tmp_path / "b" / "last.pt", dagger_iterations=2, tensorboard=False)
    resumed.train(progress=False, max_iterations=1)
    assert all(torch.equal(tuned[k], v) for k, v in _weights(resumed).items())


def test_cli_trains_from_hindsight_teachers(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "baselines", "train", "--smoke", "--algorithm", "rloo",
                           "--scenario", SCENARIO, "--teacher", "best-known", "--teacher-windows", "2",
                           "--teacher-episodes", "12", "--dagger-iterations", "1", "--dagger-episodes", "2",
                           "--agent-env", "preemption=True", "--observation", "extended-v2", "--out", str(out),
                           "--quiet"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "hindsight teachers: 2 training windows" in proc.stdout
    assert (out / "teachers.json").exists() and (out / "best.pt").exists()
    log = (out / "log.csv").read_text().splitlines()
    assert log[0].endswith("teacher_agree") and len(log) >= 2


def test_docs_state_the_code_defaults():
    """The numbers the docs section quotes about DAgger are TrainConfig's defaults."""
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "dual_agent.md").read_text().replace("\n", " ")
    cfg = TrainConfig()
    assert f"keeps the newest {cfg.dagger_max_samples:,} samples" in text
    for rule in ("srpt-clairvoyant", "srpt+fastest"):
        assert f"`{rule}`" in text and rule not in TEACHER_RULES


def test_cli_help_states_the_config_defaults():
    import argparse

    from dual_agent.paper.cli import add_train_arguments

    parser = argparse.ArgumentParser()
    add_train_arguments(parser)
    helps = {a.dest: a.help for a in parser._actions}
    cfg = TrainConfig()
    for name in ("teacher_windows", "teacher_episodes", "dagger_iterations", "dagger_episodes", "dagger_decay",
                 "dagger_epochs", "dagger_workers"):
        assert f"(default {getattr(cfg, name)}" in helps[name], name


def test_worker_processes_give_the_in_process_weights(tmp_path):
    """``dagger_workers=2``: each episode is a task in a spawned worker process (labels, mixing
    draws and the student's greedy choices there), and the run's weights, log and aggregate equal
    the in-process run's: two teacher windows of 12 jobs, three iterations (the student plays from
    the second on)."""
    agent = DualAgentConfig(hidden=16, env_overrides=AGENT_ENV)
    kw = {**TINY, "jobs_per_episode": 12, "teacher_windows": 2, "dagger_episodes": 3, "dagger_iterations": 3}
    runs = {}
    for workers in (1, 2):
        trainer = make_trainer(TrainConfig(**kw, dagger_workers=workers), agent, tmp_path / str(workers),
                               tensorboard=False)
        trainer.train(progress=False, max_iterations=3)
        runs[workers] = trainer
    one, two = runs[1], runs[2]
    assert two._dagger_pool is None                          # closed when training returned
    assert all(torch.equal(v, _weights(two)[k]) for k, v in _weights(one).items())
    strip = lambda rows: [{k: v for k, v in r.items() if k not in ("wall_s", "steps_per_s")} for r in rows]  # noqa: E731
    assert strip(one.log) == strip(two.log)
    assert one.log[-1]["teacher_agree"] is not None and 0 < one.log[1]["learned_frac"]
    a, b = one._aggregate.steps(), two._aggregate.steps()
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
