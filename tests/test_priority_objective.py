"""ES on a service objective (``ESConfig.objective``, ``cluster-bench train-priority --objective``):
the cost of a record for each objective and its orientation, which engine plays which scenario,
and a tiny training run on ``philly-slo-v1`` that is the same for the same seed on either engine."""
from __future__ import annotations

import argparse

import numpy as np
import pytest

from baselines.harness.episode import run_episode
from baselines.harness.stats import lower_is_better
from dual_agent.priority import PriorityAgentPolicy, PriorityAgentSpec, PriorityModel, load_priority_agent
from dual_agent.priority import es
from dual_agent.priority.es import (OBJECTIVES, SHORTFALL_JCT_WEIGHT_PER_HOUR, ESConfig, episode_objective_cost,
                                    train_priority)

RECORD = {"avg_jct": 7200.0, "deadline_attainment": 0.9, "hp_avg_jct": 5000.0, "be_avg_jct": 9000.0,
          "tenant_max_slowdown": 2.5, "ftf_max_rho": 2.2, "fairness": 0.8, "total_fee": 700.0}
TINY = {"jobs_per_episode": 30}


def test_cost_of_a_record_for_each_objective():
    for objective in OBJECTIVES:
        cost = episode_objective_cost(RECORD, objective)
        if lower_is_better(objective):
            assert cost == RECORD[objective]
        else:        # a shortfall plus the JCT tie-breaker: 1 - 0.9 + 0.01 x 2 h
            assert cost == pytest.approx(1.0 - RECORD[objective] + SHORTFALL_JCT_WEIGHT_PER_HOUR * 2.0)
    assert episode_objective_cost(RECORD, "deadline_attainment") == pytest.approx(0.12)


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_a_better_metric_costs_less(objective):
    """Orientation: a record better on the objective (the other fields equal) has the lower cost."""
    better = dict(RECORD)
    better[objective] = RECORD[objective] * (0.9 if lower_is_better(objective) else 1.1)
    assert episode_objective_cost(better, objective) < episode_objective_cost(RECORD, objective)


def test_full_attainment_keeps_a_positive_cost_ordered_by_jct():
    full = dict(RECORD, deadline_attainment=1.0)
    slower = dict(full, avg_jct=10800.0)
    assert 0 < episode_objective_cost(full, "deadline_attainment") < episode_objective_cost(slower,
                                                                                            "deadline_attainment")


def test_clear_errors_for_a_missing_metric_or_an_unknown_objective():
    with pytest.raises(RuntimeError, match="no finite deadline_attainment"):
        episode_objective_cost({"avg_jct": 10.0, "scenario": "philly-hetero-v1"}, "deadline_attainment")
    with pytest.raises(ValueError, match="objective must be one of"):
        episode_objective_cost(RECORD, "p95_jct")
    with pytest.raises(ValueError, match="objective must be one of"):
        ESConfig(objective="p95_jct")


@pytest.mark.parametrize("scenario, objective", [("philly-slo-v1", "deadline_attainment"),
                                                 ("philly-tenants-v1", "tenant_max_slowdown")])
def test_a_service_objective_trains_in_the_compiled_engine(scenario, objective):
    """The compiled engine measures every objective (deadlines from the finish times, quotas from its
    allocation log): ES plays the objective scenarios compiled by default."""
    assert ESConfig(scenario=scenario, objective=objective).resolved_engine() == "compiled"
    ESConfig(scenario=scenario, objective=objective, engine="compiled")     # accepted


def test_an_episode_costs_what_its_record_says():
    """The worker's cost of one philly-slo-v1 window is the record's objective cost, the untrained
    migrating agent being las-migrate."""
    theta = PriorityModel.zeros().flat()
    cost = es._episode_cost((theta, 0, "philly-slo-v1", "fastest", "train", 3, TINY, "api", 1.5,
                             "deadline_attainment"))
    policy = PriorityAgentPolicy(PriorityModel.zeros(), PriorityAgentSpec("philly-slo-v1", "fastest", migrate=1.5))
    record = run_episode(policy, "philly-slo-v1", "train", 3, env_kwargs=TINY).record
    assert record["deadline_jobs"] > 0
    assert cost == episode_objective_cost(record, "deadline_attainment")
    assert es._episode_cost((theta, 0, "philly-slo-v1", "fastest", "train", 3, TINY, "api", 1.5)) == record["avg_jct"]


def test_cli_passes_the_objective():
    from dual_agent.priority.cli import register_command

    parser = argparse.ArgumentParser()
    register_command(parser.add_subparsers())
    args = parser.parse_args(["train-priority", "--scenario", "philly-slo-v1", "--objective", "deadline_attainment"])
    assert args.objective == "deadline_attainment"
    with pytest.raises(SystemExit):
        parser.parse_args(["train-priority", "--objective", "p95_jct"])


def test_two_iteration_objective_training_is_the_same_for_the_same_seed_on_both_engines(tmp_path):
    def run(out, engine="auto"):
        config = ESConfig(scenario="philly-slo-v1", objective="deadline_attainment", migrate=1.5, iterations=2,
                          pairs=2, windows=2, jobs_per_episode=100, train_load=4.0, eval_every=1, eval_seeds=1,
                          eval_jobs_per_episode=30, validation="split", workers=1, test_windows=0, seed=3,
                          engine=engine, out=str(tmp_path / out))
        return train_priority(config, log=lambda _: None)

    a, b, api = run("a"), run("b"), run("api", engine="api")
    theta_a = a.last.model.flat()
    np.testing.assert_array_equal(theta_a, b.last.model.flat())
    np.testing.assert_array_equal(theta_a, api.last.model.flat())      # the same episodes on either path
    assert np.abs(theta_a).sum() > 0           # ES moved the weights
    saved = load_priority_agent(a.run_dir / "last.priority.json")
    assert saved.spec.training["config"]["objective"] == "deadline_attainment"
    assert saved.spec.training["engine"] == "compiled"


def _objective_pairs():
    from tests.helpers import load_script

    return load_script("benchmarks/objective_pairs.py")


def test_objective_pairs_pairs_every_metric_by_hand(tmp_path):
    """benchmarks/objective_pairs.py (the side-by-side tables of docs/objectives.md): A against B on
    three windows, one metric lower-is-better, one higher, one tied on a window."""
    import json

    pairs = _objective_pairs()

    def record(policy, seed, slowdown, fairness):
        return {"policy": policy, "scenario": "philly-tenants-v1", "split": "test", "seed": seed,
                "tenant_max_slowdown": slowdown, "fairness": fairness}

    a = [record("A", 0, 2.0, 0.9), record("A", 1, 3.0, 0.8), record("A", 2, 4.0, 0.5)]
    b = [record("B", 0, 4.0, 0.9), record("B", 1, 3.0, 0.4), record("B", 2, 2.0, 0.6)]
    (tmp_path / "a.json").write_text(json.dumps({"episodes": a + [record("B", 0, 99.0, 0.1)]}))
    (tmp_path / "b.json").write_text(json.dumps({"episodes": b}))
    # the first file's B on window 0 wins over the second's; a file without episodes is refused
    records = pairs.load_episodes([tmp_path / "a.json", tmp_path / "b.json"])
    assert len(records) == 6
    rows = pairs.summaries(records, "B", ["tenant_max_slowdown", "fairness"])
    slow, fair = rows
    assert (slow["policy"], slow["n"], slow["wins"], slow["ties"]) == ("A", 3, 1, 1)   # 2/99 better, 3/3 tie, 4/2 worse
    assert slow["geo_mean"] == pytest.approx((2.0 / 99.0 * 1.0 * 2.0) ** (1 / 3))
    assert slow["reference_mean"] == pytest.approx((99.0 + 3.0 + 2.0) / 3)
    assert (fair["wins"], fair["ties"]) == (2, 0)          # higher is better: 0.9 > 0.1, 0.8 > 0.4
    table = pairs.markdown(rows)
    assert "| `A` | `tenant_max_slowdown` | 3 | `B` 34.67 |" in table
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(SystemExit, match="bad.json: no 'episodes' list"):
        pairs.load_episodes([tmp_path / "bad.json"])


def test_objective_pairs_means_leave_out_undefined_values():
    pairs = _objective_pairs()
    records = [{"policy": "A", "avg_jct": 100.0, "avg_pending_time": 10.0},
               {"policy": "A", "avg_jct": 300.0, "avg_pending_time": None}]
    assert pairs.policy_means(records, ["avg_jct", "avg_pending_time"]) == {"A": {"avg_jct": 200.0,
                                                                                 "avg_pending_time": 10.0}}


def test_objectives_doc_quotes_the_measured_agent_tables():
    """docs/objectives.md quotes every table of docs/objective_agents/figures.json (one run per
    scenario: the slo and the tenant agent) as benchmarks/objective_pairs.py renders them, and the
    weights they were measured with load and were trained on that objective."""
    import json

    pairs = _objective_pairs()
    figures = json.loads(pairs.DOC_FIGURES.read_text())
    assert set(figures) == set(pairs.DOC_RUNS)
    text = (pairs.ROOT / "docs" / "objectives.md").read_text()
    for scenario, run in pairs.DOC_RUNS.items():
        assert figures[scenario]["setup"] == run.setup
        assert set(figures[scenario]["tables"]) == set(run.tables)
        for name, rows in figures[scenario]["tables"].items():
            assert [r["metric"] for r in rows] == run.tables[name]["metrics"]
            assert all(r["n"] + r["undefined"] == 100 for r in rows)      # a zero (no violation) has no ratio
            assert pairs.markdown(rows) in text, f"docs/objectives.md does not quote {scenario} table {name!r}"
        agent = load_priority_agent(run.agent_file, scenario)
        objective = run.tables[next(iter(run.tables))]["metrics"][0]
        assert agent.spec.training["config"]["objective"] == objective
        assert agent.spec.migrate == 1.5
    means = figures["philly-tenants-v1"]["means"]
    lasm, quota = means["las-migrate"], means["quota"]
    share = lasm["avg_pending_time"] / lasm["avg_jct"]
    assert (f"{lasm['avg_pending_time']:,.0f} s pending of its {lasm['avg_jct']:,.0f} s JCT under `las-migrate` "
            f"({100 * share:.1f}%), {quota['avg_pending_time']:,.0f} s of {quota['avg_jct']:,.0f}") in " ".join(text.split())



def test_objectives_doc_quotes_the_slo_agent_run_it_checks_in():
    """The slo run's command, best iteration, validation ratio and test report that
    docs/objectives.md quotes are the ones recorded in the checked-in weights."""
    pairs = _objective_pairs()
    training = load_priority_agent(pairs.DOC_RUNS["philly-slo-v1"].agent_file).spec.training
    text = " ".join((pairs.ROOT / "docs" / "objectives.md").read_text().replace("\\\n", " ").split())
    assert " ".join(training["command"].split()) in text
    assert training["config"]["max_minutes"] is None              # a fixed iteration count: re-runnable
    assert training["best_iteration"] == 5
    assert (f"iteration {training['best_iteration']} ({training['validation_ratio_to_untrained']:.3f} of "
            "`las-migrate`'s") in text
    test = training["test"]
    assert (test["windows"], test["reference"]) == (100, "las-migrate")
    assert (f"{test['ratio']:.3f} [{test['ci_low']:.3f}, {test['ci_high']:.3f}] of `las-migrate`, win rate "
            f"{test['win_rate']:.2f}") in text

def test_objective_pairs_from_episodes_picks_the_run_of_the_scenario(tmp_path, monkeypatch):
    """``--from-episodes`` writes the run of the episodes' scenario and keeps the other runs'
    entries; episodes of a scenario with no run are refused by name."""
    import json

    pairs = _objective_pairs()
    run = pairs.DOC_RUNS["philly-slo-v1"]
    figures = tmp_path / "figures.json"
    figures.write_text(json.dumps({"philly-tenants-v1": {"kept": True}}))
    monkeypatch.setattr(pairs, "DOC_FIGURES", figures)
    metrics = {m for t in run.tables.values() for m in t["metrics"]}
    records = [{"policy": policy, "scenario": "philly-slo-v1", "split": "test", "seed": seed,
                **{m: 1.0 + seed + (0.5 if policy == "AGENT" else 0.0) for m in metrics}}
               for policy in ("AGENT", "las-migrate") for seed in range(3)]
    (tmp_path / "eps.json").write_text(json.dumps({"episodes": records}))
    assert pairs.main([str(tmp_path / "eps.json"), "--from-episodes", "AGENT"]) == 0
    written = json.loads(figures.read_text())
    assert written["philly-tenants-v1"] == {"kept": True}
    rows = written["philly-slo-v1"]["tables"]["agent-vs-las-migrate"]
    assert [(r["policy"], r["n"]) for r in rows] == [(run.label, 3)] * len(rows)
    assert rows[0]["metric"] == "deadline_attainment" and rows[0]["wins"] == 3        # higher is better
    assert rows[1]["metric"] == "avg_jct" and rows[1]["wins"] == 0
    (tmp_path / "other.json").write_text(json.dumps({"episodes": [dict(r, scenario="philly-hetero-v1")
                                                                  for r in records]}))
    with pytest.raises(SystemExit, match="expected exactly one of"):
        pairs.main([str(tmp_path / "other.json"), "--from-episodes", "AGENT"])


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["philly-slo-v1", "philly-tenants-v1"])
def test_agent_figures_equal_a_fresh_measurement(scenario):
    """The figures docs/objectives.md quotes, rerun from the checked-in weights (200 episodes on
    philly-slo-v1, 300 on philly-tenants-v1)."""
    import json

    pairs = _objective_pairs()
    run = pairs.DOC_RUNS[scenario]
    fresh = pairs.doc_figures(run, pairs.measure_doc_records(run))
    saved = json.loads(pairs.DOC_FIGURES.read_text())[scenario]
    assert fresh["setup"] == saved["setup"]
    for name, rows in saved["tables"].items():
        assert len(rows) == len(fresh["tables"][name])
        for old, new in zip(rows, fresh["tables"][name]):
            for key in ("mean", "reference_mean", "geo_mean", "ci_low", "ci_high"):
                assert new[key] == pytest.approx(old[key], rel=1e-6), (name, old["metric"], key)
            assert (new["wins"], new["ties"], new["units"]) == (old["wins"], old["ties"], old["units"])
