"""The priority agent under ``las-migrate``'s rule (``migrate``): zero weights
with ``migrate=1.5`` are ``las-migrate`` record for record (API and compiled), learned weights keep
API/compiled parity, the file field, and the trainer's and CLI's ``--migrate``."""
from __future__ import annotations

import json

import numpy as np
import pytest

import baselines
from baselines import engine
from baselines.harness.episode import run_episode
from dual_agent.priority import (PRIORITY_FEATURES, MigratingLearnedOrderer, PriorityAgentPolicy, PriorityAgentSpec,
                                 PriorityCheckpointError, PriorityModel, load_priority_agent, save_priority_agent)
from dual_agent.priority import es
from dual_agent.priority.es import ESConfig, train_priority
from tests.helpers import load_script
from tests.test_las_migrate import moved_jct, two_machine_scenario

SCENARIO = "philly-hetero-v2"
SMALL = {"jobs_per_episode": 200}
BUSY = {"jobs_per_episode": 200, "load": 6.0}     # preempts and moves within 200 jobs
KEYS = ("avg_jct", "p95_jct", "preemptions", "steps", "total_fee", "jobs_finished", "return")
needs_engine = pytest.mark.skipif(not engine.available(), reason="the compiled engine needs numba kernels")


def _agent(migrate=1.5, scenario=SCENARIO, **weights) -> PriorityAgentPolicy:
    model = PriorityModel.zeros()
    for name, value in weights.items():
        model.linear[PRIORITY_FEATURES.index(name)] = value
    return PriorityAgentPolicy(model, PriorityAgentSpec(scenario, "fastest", migrate=migrate))


def _same(a: dict, b: dict) -> bool:
    return {k: a[k] for k in KEYS} == {k: b[k] for k in KEYS}


def test_the_untrained_migrating_agent_moves_the_hand_worked_job():
    """The two-machine case of tests/test_las_migrate.py: the long job moves to the freed V100 at
    the 300 s tick under the agent as under las-migrate; without ``migrate`` it stays."""
    agent = _agent(scenario="two-machines")
    assert isinstance(agent.orderer, MigratingLearnedOrderer)
    moved = run_episode(agent, two_machine_scenario(), "test", seed=0, record=True)
    np.testing.assert_allclose(moved.jct, [100.0, moved_jct(300.0)], rtol=1e-9)
    assert moved.record["preemptions"] == 1 and agent.orderer.migrations == 1
    stay = run_episode(_agent(None, scenario="two-machines"), two_machine_scenario(), "test", seed=0)
    assert stay.record["preemptions"] == 0 and stay.record["avg_jct"] > moved.record["avg_jct"]
    if engine.available():
        compiled = engine.run_weighted_las_episode(np.zeros(len(PRIORITY_FEATURES)), "fastest", two_machine_scenario(),
                                                   "test", 0, migrate=1.5).record
        assert _same(compiled, moved.record)


@needs_engine
@pytest.mark.parametrize("seed", [0, 1])
def test_zero_weights_with_migrate_are_las_migrate_record_for_record(seed):
    las_migrate = engine.run_compiled_episode("las-migrate", SCENARIO, "test", seed, SMALL).record
    compiled = engine.run_weighted_las_episode(np.zeros(len(PRIORITY_FEATURES)), "fastest", SCENARIO, "test", seed,
                                               SMALL, migrate=1.5).record
    agent = _agent()
    api = run_episode(agent, SCENARIO, "test", seed, SMALL).record
    assert agent.orderer.migrations > 0                    # the windows exercise the moves
    assert _same(compiled, las_migrate) and _same(api, las_migrate)
    plain = engine.run_compiled_episode("las+fastest", SCENARIO, "test", seed, SMALL).record
    assert not _same(plain, las_migrate)                    # the rule changes these windows


@needs_engine
def test_learned_weights_with_migrate_keep_api_compiled_parity():
    weights = {"gpus_log2": 0.7, "restarts": -0.5, "running": 0.9, "comm_intensity": 0.3}
    agent = _agent(**weights)
    api = run_episode(agent, SCENARIO, "test", 1, BUSY).record
    compiled = agent.compiled_episode(SCENARIO, "test", 1, BUSY).record
    assert agent.orderer.migrations > 0 and api["preemptions"] > agent.orderer.migrations
    assert _same(compiled, api)
    untrained = engine.run_compiled_episode("las-migrate", SCENARIO, "test", 1, BUSY).record
    no_move = _agent(None, **weights).compiled_episode(SCENARIO, "test", 1, BUSY).record
    assert api["avg_jct"] != untrained["avg_jct"] and api["avg_jct"] != no_move["avg_jct"]


def test_the_migrate_field_round_trips_and_old_files_load_without_it(tmp_path):
    path = save_priority_agent(_agent(1.5), tmp_path / "m.priority.json")
    doc = json.loads(path.read_text())
    assert doc["migrate"] == 1.5
    loaded = load_priority_agent(path)
    assert loaded.spec.migrate == 1.5 and isinstance(loaded.orderer, MigratingLearnedOrderer)
    assert loaded.env_overrides["observation"] == "extended-v2"
    plain = save_priority_agent(_agent(None), tmp_path / "p.priority.json")
    assert "migrate" not in json.loads(plain.read_text())            # files without migration unchanged
    old = load_priority_agent("dual_agent/pretrained/philly-hetero-v1.priority.json")
    assert old.spec.migrate is None and type(old.orderer).__name__ == "LearnedPriorityOrderer"
    assert old.env_overrides["observation"] == "extended"
    for bad in (1.0, True, "1.5", -2):
        doc["migrate"] = bad
        path.write_text(json.dumps(doc))
        with pytest.raises(PriorityCheckpointError, match="field migrate"):
            load_priority_agent(path)


def test_es_plays_the_migrating_agent_and_names_its_reference(monkeypatch, tmp_path):
    seen = set()

    def toy_cost(task):
        seen.add(task[8])
        return float(np.exp(np.sum(task[0] ** 2) + (task[5] % 97) / 10.0))

    monkeypatch.setattr(es, "_episode_cost", toy_cost)
    config = ESConfig(scenario=SCENARIO, iterations=2, pairs=1, windows=1, eval_every=1, eval_seeds=2, workers=1,
                      validation="split", test_windows=2, migrate=1.5, out=str(tmp_path / "run"))
    result = train_priority(config, log=lambda msg: None)
    assert seen == {1.5}
    assert result.test["reference"] == "las-migrate"          # the registered name of las-migrate + fastest
    assert load_priority_agent(tmp_path / "run" / "best.priority.json").spec.migrate == 1.5
    assert ESConfig(placer="consolidate", migrate=2.0).untrained_name() == "las-migrate2+consolidate"
    assert ESConfig().untrained_name() == "las+fastest"
    for bad in (1.0, 0.5, float("nan"), True):
        with pytest.raises(ValueError, match="migrate"):
            ESConfig(migrate=bad)


def test_cli_refuses_a_threshold_not_above_one(capsys):
    from baselines.cli import main

    assert main(["train-priority", "--migrate", "1", "--smoke"]) == 2
    assert "threshold > 1" in capsys.readouterr().err


def test_the_name_of_a_migrating_learned_orderer():
    orderer = MigratingLearnedOrderer(PriorityModel.zeros(), 1.5)
    assert orderer.name == "learned-priority-migrate1.5"
    assert baselines.make_policy("las-migrate").orderer.threshold == orderer.threshold
    with pytest.raises(ValueError, match="threshold"):
        MigratingLearnedOrderer(PriorityModel.zeros(), 1.0)


def test_paired_evaluation_adds_las_migrate_to_the_agnostic_references():
    mod = load_script("benchmarks/eval_dual_paired.py")
    refs = mod.expand_references("agnostic,las-migrate,las+fastest")
    assert refs == [*mod.AGNOSTIC, "las-migrate"]                 # las+fastest once, in the agnostic block
    assert mod.expand_references("las+fastest,las-migrate") == ["las+fastest", "las-migrate"]
