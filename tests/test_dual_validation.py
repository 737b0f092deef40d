"""Validation windows at test-like contention (dual_agent.validation): the
matching, the shipped windows, and both training commands validating on them (ES through its
episode function, the paper agent's trainer through its evaluation), old runs resuming as they
were made."""
from __future__ import annotations

import json

import numpy as np
import pytest

from dual_agent import validation as V
from dual_agent.priority import es
from dual_agent.priority.agent import load_priority_agent, save_priority_agent
from dual_agent.priority.es import ESConfig, load_es_state, train_priority


def test_match_quantiles_follows_the_target_distribution():
    candidates = [0, 10, 100, 1000, 5000, 1000]
    assert V.match_quantiles(candidates, [900, 1100, 4000, 6000], 2) == [3, 4]
    # Each candidate is used once; ties go to the earlier one.
    assert V.match_quantiles(candidates, [1000] * 5, 3) == [3, 5, 4]
    assert V.match_quantiles(candidates, [0, 0, 12], 1) == [0]
    with pytest.raises(ValueError, match="candidates"):
        V.match_quantiles(candidates, [1.0], 7)


@pytest.mark.parametrize("scenario,placer", [("philly-hetero-v1", "fastest"), ("philly-v1", "consolidate"),
                                             ("philly-v1", "fastest"), ("philly-hetero-v2", "fastest"),
                                             ("modern-v1", "fastest")])
def test_shipped_windows_look_like_test_and_say_what_las_measures(scenario, placer):
    """The shipped matched windows: LAS's mean preemptions within 5% of the test windows' (the
    validation split is 3-9x below them), FIFO's pending share at least 3x closer to test's than
    the split's, and the stored preemptions are what LAS gives now on the two quietest windows
    (a scenario whose dynamics moved fails here: rerun the file's command)."""
    vs = V.load_shipped(scenario, placer, 100)
    assert vs is not None and len(set(vs.windows)) == 100 and {s for s, _ in vs.windows} <= {"train", "validation"}
    assert abs(np.mean(vs.las_preemptions) / np.mean(vs.test_las_preemptions) - 1) < 0.05
    report = json.loads(V.shipped_path(scenario).read_text())["placers"][placer]["report"]
    test, split, matched = (report[k] for k in ("test 0-99", "validation split 0-99", "matched"))
    assert split["las_preemptions"] < test["las_preemptions"] / 3
    assert abs(matched["fifo_pending_share"] - test["fifo_pending_share"]) < \
        abs(split["fifo_pending_share"] - test["fifo_pending_share"]) / 3
    quiet = np.argsort(vs.las_preemptions, kind="stable")[:2]
    got = V.las_preemptions(scenario, placer, [vs.windows[i] for i in quiet])
    np.testing.assert_array_equal(got, [vs.las_preemptions[i] for i in quiet])
    # Fewer windows: re-matched among the shipped ones, still spread like test.
    few = V.load_shipped(scenario, placer, 10)
    assert len(few.windows) == 10 and set(few.windows) <= set(vs.windows)
    assert min(few.las_preemptions) < np.median(vs.test_las_preemptions) < max(few.las_preemptions)


def test_a_malformed_shipped_file_names_the_field(tmp_path):
    path = tmp_path / "philly-v1.validation.json"
    entry = {"windows": [["train", 1], ["test", 2]], "las_preemptions": [1, 2], "test_las_preemptions": [3]}
    path.write_text(json.dumps({"format": V.FORMAT, "scenario": "philly-v1", "placers": {"fastest": entry}}))
    with pytest.raises(ValueError, match=r"placers.fastest.windows\[1\]"):
        V.load_shipped("philly-v1", "fastest", 1, path=path)
    assert V.load_shipped("philly-v1", "consolidate", 1, path=path) is None


def test_matched_windows_are_computed_where_none_ship():
    """Short windows (no shipped entry): the pool is the validation split's seeds then train
    seeds from CANDIDATE_SEED_BASE, and the choice is the quantile match of LAS's preemptions."""
    kw = {"jobs_per_episode": 150}
    vs = V.validation_set("matched", "philly-hetero-v1", "fastest", 2, env_kwargs={**kw, "observation": "extended"},
                          log=lambda _: None)
    pool = V.candidate_windows(2)
    assert pool[:2] == [("validation", 0), ("validation", 1)] and pool[2] == ("train", V.CANDIDATE_SEED_BASE)
    values = V.las_preemptions("philly-hetero-v1", "fastest", pool, kw)
    target = V.las_preemptions("philly-hetero-v1", "fastest", [("test", s) for s in range(V.TEST_WINDOWS)], kw)
    assert vs.windows == [pool[i] for i in V.match_quantiles(values, target, 2)]
    assert V.validation_set("split", "philly-v1", "fastest", 3).windows == [("validation", s) for s in range(3)]


def _toy(calls: list):
    target = np.zeros(14)
    target[0] = 0.5

    def cost(task):
        theta, _, _, _, split, seed, _, _, _ = task[:9]   # then the objective
        calls.append((split, int(seed), bool(np.any(theta))))
        return float(np.exp(np.sum((theta - target) ** 2) + (seed % 97) / 10.0))
    return cost


def test_es_validates_on_the_matched_windows_and_reports_test(monkeypatch, tmp_path):
    """train-priority's default: validation on the shipped matched windows (which a resumed run
    keeps), and a paired report on test windows at the end."""
    calls: list = []
    monkeypatch.setattr(es, "_episode_cost", _toy(calls))
    config = ESConfig(iterations=2, pairs=2, windows=2, eval_every=1, eval_seeds=4, workers=1, test_windows=3,
                      out=str(tmp_path / "run"))
    result = train_priority(config, log=lambda msg: None)
    expected = V.load_shipped("philly-hetero-v1", "fastest", 4).windows
    assert [c[:2] for c in calls[:4]] == expected              # iteration 0: the untrained agent validates
    assert any(split == "train" for split, _ in expected)      # (not the validation split's seeds)
    assert [c[:2] for c in calls[-6:]] == [("test", s) for s in range(3)] * 2
    assert result.test["windows"] == 3 and result.test["reference"] == "las+fastest"
    training = load_priority_agent(tmp_path / "run" / "best.priority.json").spec.training
    assert training["validation"]["mode"] == "matched" and training["test"]["windows"] == 3
    assert [tuple(w) for w in training["validation"]["windows"]] == expected
    _, state = load_es_state(tmp_path / "run" / "last.priority.json")
    assert [tuple(w) for w in state["validation"]["windows"]] == expected
    with pytest.raises(ValueError, match="validation"):
        ESConfig(validation="test")


def test_a_run_saved_before_matched_validation_resumes_on_the_validation_split(monkeypatch, tmp_path):
    calls: list = []
    monkeypatch.setattr(es, "_episode_cost", _toy(calls))
    config = ESConfig(iterations=1, pairs=1, windows=1, eval_every=1, eval_seeds=2, workers=1, validation="split",
                      test_windows=0, out=str(tmp_path / "run"))
    train_priority(config, log=lambda msg: None)
    last = tmp_path / "run" / "last.priority.json"
    agent = load_priority_agent(last)
    for key in ("validation", "test_windows"):       # what a file of the previous version holds
        del agent.spec.training["config"][key]
    del agent.spec.training["resume"]["validation"]
    save_priority_agent(agent, last)
    old, state = load_es_state(last)
    assert (old.validation, old.test_windows) == ("split", 0)
    calls.clear()
    train_priority(ESConfig(**{**old.__dict__, "iterations": 2}), log=lambda msg: None, state=state)
    assert [c[:2] for c in calls if c[0] != "train"] == [("validation", 0), ("validation", 1)]


def test_the_paper_trainer_validates_on_the_matched_windows(monkeypatch, tmp_path):
    pytest.importorskip("torch")
    from baselines.harness import episode
    from dual_agent.paper.config import DualAgentConfig, TrainConfig
    from dual_agent.paper.mappo import MAPPOTrainer

    played = []

    class Result:
        record = {"avg_jct": 1.0}

    monkeypatch.setattr(episode, "run_episode", lambda policy, scenario, split, seed, kw: played.append((split, seed))
                        or Result())
    cfg = TrainConfig(scenario="philly-hetero-v1", eval_seeds=3, n_envs=0, eval_every=0)
    trainer = MAPPOTrainer(cfg, DualAgentConfig(prior="las+fastest"), out_dir=tmp_path, subprocess=False,
                           tensorboard=False)
    assert trainer.validation_placer() == "fastest"
    trainer.evaluate()
    assert played == V.load_shipped("philly-hetero-v1", "fastest", 3).windows
    played.clear()
    trainer.evaluate("test", [0, 1])
    assert played == [("test", 0), ("test", 1)]
    # A checkpoint of the previous version (no "validation" in its settings) keeps the split.
    old = {k: v for k, v in cfg.to_dict().items() if k != "validation"}
    assert TrainConfig.from_dict(old).validation == "split"


def test_train_ends_with_a_paired_test_report_that_flags_fewer_than_100_windows(tmp_path, capsys):
    """cluster-bench train's final report (dual_agent.paper.cli.test_report): the checkpoint
    against a reference on test windows 0 .. N-1, paired, with a note under 100 windows."""
    pytest.importorskip("torch")
    import cluster_env
    from dual_agent.paper.checkpoint import save_checkpoint
    from dual_agent.paper.cli import TEST_WINDOWS, test_report
    from dual_agent.paper.config import DualAgentConfig
    from dual_agent.paper.policy import DualAgentPolicy, build_model, spaces_signature

    cfg = DualAgentConfig()
    spaces = spaces_signature(cluster_env.parallel_env("philly-v1"))
    policy = DualAgentPolicy(build_model(cfg, spaces), cfg, spaces, scenario="philly-v1")
    path = save_checkpoint(tmp_path / "best.pt", policy.model, cfg, spaces, "philly-v1")
    out = test_report(path, "philly-v1", "las", 2, {"jobs_per_episode": 12})
    assert TEST_WINDOWS == 100
    assert out["windows"] == 2 and out["reference"] == "las" and out["ratio"] > 0
    printed = capsys.readouterr().out
    assert "test windows 0-1: best.pt / las" in printed and "fewer than 100 windows" in printed
