"""The priority-mode ordering agent (dual_agent.priority) and its ES trainer (dual_agent.priority.es)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import cluster_env
from baselines import evaluate
from baselines.harness.episode import run_episode
from dual_agent.priority import es
from dual_agent.priority.es import Adam, ESConfig, antithetic_gradient, train_priority
from dual_agent.priority import (PRIORITY_FEATURES, LearnedPriorityOrderer, PriorityAgentPolicy, PriorityAgentSpec,
                                 PriorityCheckpointError, PriorityModel, load_priority_agent, priority_features,
                                 save_priority_agent)

SHORT = {"jobs_per_episode": 200, "load": 6.0}   # preempts within 200 jobs
KEYS = ("avg_jct", "p95_jct", "preemptions", "steps", "total_fee", "jobs_finished")


def _agent(scenario="philly-hetero-v1", placer="fastest", **weights) -> PriorityAgentPolicy:
    model = PriorityModel.zeros()
    for name, value in weights.items():
        model.linear[PRIORITY_FEATURES.index(name)] = value
    return PriorityAgentPolicy(model, PriorityAgentSpec(scenario, placer))


@pytest.mark.parametrize("scenario,placer", [("philly-hetero-v1", "fastest"), ("philly-v1", "consolidate")])
def test_untrained_agent_is_las_record_for_record(scenario, placer):
    ours = run_episode(_agent(scenario, placer), scenario, "validation", 2, env_kwargs=SHORT).record
    las = evaluate(f"las+{placer}", scenario, "validation", seeds=[2], env_kwargs=SHORT)[0]
    assert ours["preemptions"] > 0                       # the window exercises preemption
    assert {k: ours[k] for k in KEYS} == {k: las[k] for k in KEYS}


def test_a_learned_weight_changes_the_schedule_and_reads_as_documented():
    env = cluster_env.parallel_env("philly-hetero-v1", "validation", preemption=True, observation="extended", **SHORT)
    obs, infos = env.reset(seed=2)
    orderer = LearnedPriorityOrderer(_agent(gpus_log2=1.0).model)
    las_like = LearnedPriorityOrderer(PriorityModel.zeros())
    driver = _agent()
    driver.reset(2)
    gpus = PRIORITY_FEATURES.index("gpus_log2")
    for _ in range(3000):       # play LAS until several candidates of different sizes wait
        rows, _, _ = orderer.keys(obs["orderer"], infos["orderer"])
        if len(np.unique(priority_features(obs["orderer"], rows)[:, gpus])) > 1:
            break
        obs, _, _, _, infos = env.step(driver.act(obs, infos))
    rows, keys, _ = orderer.keys(obs["orderer"], infos["orderer"])
    _, keys0, _ = las_like.keys(obs["orderer"], infos["orderer"])
    phi = priority_features(obs["orderer"], rows)
    assert len(np.unique(phi[:, gpus])) > 1
    np.testing.assert_allclose(keys - keys0, phi[:, gpus])
    a = run_episode(_agent(gpus_log2=1.0), "philly-hetero-v1", "validation", 2, env_kwargs=SHORT).record
    b = run_episode(_agent(), "philly-hetero-v1", "validation", 2, env_kwargs=SHORT).record
    assert a["avg_jct"] != b["avg_jct"]


def test_features_need_the_extended_observation_and_read_no_durations():
    env = cluster_env.parallel_env("philly-hetero-v1", "validation", preemption=True, **SHORT)
    obs, _ = env.reset(seed=0)
    with pytest.raises(ValueError, match="observation='extended'"):
        priority_features(obs["orderer"], np.array([0]))
    # Hidden durations: the same features with clairvoyance on (durations visible) and off.
    kw = dict(preemption=True, observation="extended", **SHORT)
    hidden = cluster_env.parallel_env("philly-hetero-v1", "validation", **kw).reset(seed=0)[0]["orderer"]
    shown = cluster_env.parallel_env("philly-hetero-v1", "validation", clairvoyant=True, **kw).reset(seed=0)[0]["orderer"]
    rows = np.arange(5)
    np.testing.assert_array_equal(priority_features(hidden, rows), priority_features(shown, rows))


def test_model_flat_round_trip_and_hidden_layer_starts_at_zero_score():
    model = PriorityModel.zeros(hidden=3, seed=4)
    theta = np.arange(model.flat().size, dtype=float) / 10
    again = model.with_flat(theta)
    np.testing.assert_array_equal(again.flat(), theta)
    phi = np.random.default_rng(0).normal(size=(6, len(PRIORITY_FEATURES)))
    assert np.all(model.score(phi) == 0.0)
    assert np.any(again.score(phi) != 0.0)
    with pytest.raises(ValueError, match="parameters"):
        model.with_flat(theta[:-1])
    with pytest.raises(ValueError, match="hidden"):
        PriorityModel.zeros(hidden=-1)


def test_save_load_round_trip_and_clear_errors(tmp_path):
    agent = _agent(gpus_log2=0.7, wait=-0.2)
    agent.spec.training = {"seed": 3}
    path = save_priority_agent(agent, tmp_path / "a.priority.json")
    back = load_priority_agent(path, scenario="philly-hetero-v1")
    np.testing.assert_array_equal(back.model.flat(), agent.model.flat())
    assert back.spec == agent.spec and back.placer.name == "fastest"
    learned = _agent(gpus_log2=0.7)
    learned.model.placer[:] = [0.1, 2.0, 0.0, -0.3, 0.5]
    back = load_priority_agent(save_priority_agent(learned, tmp_path / "p.priority.json"))
    np.testing.assert_array_equal(back.model.placer, learned.model.placer)
    assert back.placer.name == "learned-fastest"
    with pytest.raises(PriorityCheckpointError, match="trained for scenario 'philly-hetero-v1', not 'philly-v1'"):
        load_priority_agent(path, scenario="philly-v1")
    doc = json.loads(path.read_text())
    bad = tmp_path / "bad.priority.json"
    for change, message in [({"format": "x"}, "field format"), ({"version": 9}, "field version is 9"),
                            ({"features": ["gpus_log2"]}, "field features"),
                            ({"weights": {**doc["weights"], "linear": [1.0, 2.0]}}, "field weights.linear"),
                            ({"weights": {**doc["weights"], "linear": ["a"] * 9}}, "field weights.linear"),
                            ({"placer": "nowhere"}, "placer must be one of"),
                            ({"placer_features": ["whole"]}, "field placer_features"),
                            ({"weights": {**doc["weights"], "placer": [1.0]}}, "field weights.placer")]:
        bad.write_text(json.dumps({**doc, **change}))
        with pytest.raises(PriorityCheckpointError, match=message) as err:
            load_priority_agent(bad)
        assert str(bad) in str(err.value)
    bad.write_text("{not json")
    with pytest.raises(PriorityCheckpointError, match="unreadable JSON"):
        load_priority_agent(bad)
    with pytest.raises(PriorityCheckpointError, match="no such file"):
        load_priority_agent(tmp_path / "missing.priority.json")


LEARNED = {"gpus_log2": 0.8, "comm_intensity": -0.26, "best_speed": -0.19, "restarts": -0.65, "wait": 0.26,
           "running": 0.55}
TENANT = {"tenant_dev": 0.6, "tenant_recent_dev": -0.4, "tenant_known": 0.3}
RESIDUAL = [0.5, 1.5, -0.8, 0.3, -0.4]     # residual placer weights that move placements


@pytest.mark.parametrize("scenario,placer", [("philly-hetero-v1", "fastest"), ("philly-v1", "consolidate")])
def test_compiled_weighted_las_plays_the_api_agent_record_for_record(scenario, placer):
    """The ES trainer's fast path (baselines.engine.run_weighted_las_episode) is the same agent
    as the PettingZoo-API one, on preempting windows, for zero and for learned-like weights, with
    and without the tenant statistics (kept by the engine as the extended observation keeps them)."""
    from baselines.engine import run_compiled_episode, run_weighted_las_episode

    zero = run_weighted_las_episode(np.zeros(len(PRIORITY_FEATURES)), placer, scenario, "validation", 2, SHORT).record
    las = run_compiled_episode(f"las+{placer}", scenario, "validation", 2, SHORT).record
    assert {k: zero[k] for k in KEYS} == {k: las[k] for k in KEYS}
    preemptions = 0
    for weights, residual in ((LEARNED, None), ({**LEARNED, **TENANT}, RESIDUAL)):
        agent = _agent(scenario, placer, **weights)
        if residual is not None:
            agent = PriorityAgentPolicy(PriorityModel(agent.model.linear, agent.model.hidden_w, agent.model.hidden_b,
                                                      agent.model.out, np.array(residual)), agent.spec)
        for seed in (2, 3):
            fast = run_weighted_las_episode(agent.model.linear, placer, scenario, "validation", seed, SHORT,
                                            placer_weights=agent.model.placer).record
            api = run_episode(agent, scenario, "validation", seed, env_kwargs=SHORT).record
            assert {k: fast[k] for k in KEYS} == {k: api[k] for k in KEYS}, (scenario, seed, weights)
            preemptions += api["preemptions"]
    assert preemptions > 0                       # the windows exercise the preemption ticks
    assert fast["policy"] == f"weighted-las+{placer}"


@pytest.mark.parametrize("scenario,placer", [("philly-hetero-v1", "consolidate"), ("philly-v1", "spread")])
def test_residual_placer_moves_placements_and_the_compiled_engine_follows(scenario, placer):
    """The residual placer on a placer that reads no measured speeds itself: the compiled engine
    must then keep them (they feed rel_speed), or it places as if every machine ran at nominal."""
    from baselines.engine import run_weighted_las_episode

    agent = PriorityAgentPolicy(PriorityModel.zeros(), PriorityAgentSpec(scenario, placer))
    agent.model.placer[:] = RESIDUAL
    agent = PriorityAgentPolicy(agent.model, agent.spec)
    assert agent.placer.name == f"learned-{placer}"
    fast = run_weighted_las_episode(agent.model.linear, placer, scenario, "validation", 2, SHORT,
                                    placer_weights=agent.model.placer).record
    api = run_episode(agent, scenario, "validation", 2, env_kwargs=SHORT).record
    las = evaluate(f"las+{placer}", scenario, "validation", seeds=[2], env_kwargs=SHORT)[0]
    assert {k: fast[k] for k in KEYS} == {k: api[k] for k in KEYS}
    assert fast["avg_jct"] != las["avg_jct"]


def test_compiled_tenant_statistics_change_the_schedule_as_the_api_does():
    """A full philly-hetero-v1 window (thousands of finishes folded): the tenant weights move the
    schedule, and the compiled engine follows the API there."""
    from baselines.engine import run_weighted_las_episode

    with_tenant = _agent(**LEARNED, **TENANT)
    fast = run_weighted_las_episode(with_tenant.model.linear, "fastest", "philly-hetero-v1", "validation", 0).record
    api = run_episode(with_tenant, "philly-hetero-v1", "validation", 0).record
    without = run_weighted_las_episode(_agent(**LEARNED).model.linear, "fastest", "philly-hetero-v1", "validation",
                                       0).record
    assert {k: fast[k] for k in KEYS} == {k: api[k] for k in KEYS}
    # Preemptions happen (3,825 in this window before the fastest placer's spread guard, 99 since:
    # consolidated wide jobs finish sooner, so fewer jobs wait).
    assert fast["avg_jct"] != without["avg_jct"] and api["preemptions"] > 50


def test_compiled_weighted_las_refuses_what_it_cannot_play():
    from baselines.engine import Unsupported, run_weighted_las_episode

    with pytest.raises(ValueError, match="9 finite"):
        run_weighted_las_episode(np.zeros(3), "fastest", "philly-v1", "train", 0)
    with pytest.raises(ValueError, match="engine"):
        ESConfig(engine="gpu")
    with pytest.raises(ValueError, match="hidden=0"):
        ESConfig(engine="compiled", hidden=4)
    assert ESConfig(hidden=4).resolved_engine() == "api"


def test_harness_plays_a_linear_priority_agent_in_the_compiled_engine(tmp_path, monkeypatch):
    """cluster-bench run / evaluate: a saved linear agent runs compiled, with the API's record;
    CLUSTER_BENCH_ENGINE=api or a hidden layer falls back to the API."""
    from baselines.harness.sweep import Task, run_task

    path = save_priority_agent(_agent(**LEARNED, **TENANT), tmp_path / "a.priority.json")
    task = Task(str(path), "philly-hetero-v1", "validation", 3, tuple(sorted(SHORT.items())))
    fast = run_task(task)
    monkeypatch.setenv("CLUSTER_BENCH_ENGINE", "api")
    api = run_task(task)
    monkeypatch.delenv("CLUSTER_BENCH_ENGINE")
    assert (fast.engine, api.engine) == ("compiled", "api")
    same = [k for k in api.record if k != "wall_s"]
    assert {k: fast.record[k] for k in same} == {k: api.record[k] for k in same}
    assert fast.record["policy"] == "dual-priority(a)"
    hidden = PriorityAgentPolicy(PriorityModel.zeros(hidden=2), PriorityAgentSpec("philly-hetero-v1", "fastest"))
    deep = save_priority_agent(hidden, tmp_path / "h.priority.json")
    assert run_task(Task(str(deep), "philly-hetero-v1", "validation", 3, tuple(sorted(SHORT.items())))).engine == "api"


def test_the_shipped_hetero_agent_is_a_default_of_cluster_bench_run_and_plays_compiled():
    """dual_agent/pretrained/philly-hetero-v1.priority.json: found by the name dual (the shipped
    agent of either family) and by the alias dual-priority, in cluster-bench run's defaults for its
    scenario only and once (as dual), with its training record, and its compiled episodes are the
    API's on a full test window."""
    from baselines.cli import default_policies
    from baselines.harness.sweep import Task, resolve_policy, run_task
    from dual_agent.plugin import priority_pretrained_path

    defaults = default_policies("philly-hetero-v1")
    assert "dual" in defaults and "dual-priority" not in defaults
    assert "dual" not in default_policies("philly-v1") and "dual-priority" not in default_policies("philly-v1")
    alias = resolve_policy("dual-priority", "philly-hetero-v1")
    agent = resolve_policy("dual", "philly-hetero-v1")
    assert alias.name == "dual-priority" and agent.name == "dual" and agent.spec.placer == "fastest"
    assert np.array_equal(alias.model.flat(), agent.model.flat())
    training = agent.spec.training
    assert training["command"].startswith("cluster-bench train-priority --scenario philly-hetero-v1")
    assert training["engine"] == "compiled" and training["seed"] == 0 and training["wall_s"] > 0
    assert priority_pretrained_path("philly-hetero-v1").is_file()
    assert np.any(agent.model.linear != 0.0)
    task = Task("dual", "philly-hetero-v1", "test", 2, ())
    fast = run_task(task)
    os.environ["CLUSTER_BENCH_ENGINE"] = "api"
    try:
        api = run_task(task)
    finally:
        del os.environ["CLUSTER_BENCH_ENGINE"]
    assert (fast.engine, api.engine) == ("compiled", "api")
    assert {k: fast.record[k] for k in KEYS} == {k: api.record[k] for k in KEYS}
    assert api.record["preemptions"] > 0


def test_antithetic_gradient_matches_the_true_gradient_on_a_quadratic():
    rng = np.random.default_rng(0)
    target = np.array([1.0, -2.0, 0.5])
    theta, sigma = np.zeros(3), 0.1
    eps = rng.standard_normal((40000, 3))
    cost = lambda th: np.sum((th - target) ** 2, axis=-1)[:, None]          # log cost, one window
    g = antithetic_gradient(cost(theta + sigma * eps), cost(theta - sigma * eps), eps, sigma)
    np.testing.assert_allclose(g, 2 * target, atol=0.08)     # gradient of -cost at 0 is 2 * target


def test_es_training_loop_finds_a_known_optimum(monkeypatch, tmp_path):
    """A toy objective with a known optimum in place of episodes: log cost = |theta - target|^2
    plus a per-window offset (which the same-window pairs must cancel)."""
    target = np.zeros(len(PriorityModel.zeros().flat()))
    target[0], target[2], target[7] = 0.8, 0.4, -0.5

    def toy_cost(task):
        theta, _, _, _, split, seed, env_kwargs, engine, _ = task[:9]   # then the objective
        assert engine == "compiled"        # the default for a linear score where numba runs
        # --train-load reaches the training windows only; validation keeps the scenario's load
        assert env_kwargs == ({"load": 2.0} if split == "train" else None)
        return float(np.exp(np.sum((theta - target) ** 2) + (seed % 97) / 10.0))

    monkeypatch.setattr(es, "_episode_cost", toy_cost)
    config = ESConfig(scenario="philly-hetero-v1", iterations=60, pairs=4, windows=2, eval_every=20, eval_seeds=2,
                      workers=1, lr=0.05, train_load=2.0, validation="split", out=str(tmp_path / "run"))
    result = train_priority(config, log=lambda msg: None)
    np.testing.assert_allclose(result.last.model.flat(), target, atol=0.1)
    assert result.best_ratio < 0.8
    rows = (tmp_path / "run" / "log.csv").read_text().splitlines()
    assert len(rows) == 62 and rows[0].startswith("iteration,episodes")
    best = load_priority_agent(tmp_path / "run" / "best.priority.json", scenario="philly-hetero-v1")
    assert best.spec.training["algorithm"] == "es" and best.spec.training["iterations"] == 60


def test_es_pairing_ablations_and_frozen_tenant_weights(monkeypatch, tmp_path):
    """The ablations of the same-window baseline draw one window per episode; "reference" plays
    the untrained agent on each of those windows too and subtracts its log cost, which cancels a
    per-window offset exactly, while "independent" carries it as noise (same budget: further from
    the optimum). tenant_features=False keeps the tenant weights at zero."""
    target = np.zeros(len(PriorityModel.zeros().flat()))
    target[0], target[1], target[7] = 0.8, 0.5, -0.5
    expect = target.copy()
    expect[[1, 2, 3]] = 0.0
    errors = {}
    for pairing in ("independent", "reference"):
        calls = []

        def toy_cost(task):
            theta, _, _, _, split, seed, _, _, _ = task[:9]   # then the objective
            calls.append((split, seed, not np.any(theta)))
            return float(np.exp(np.sum((theta - target) ** 2) + (seed % 97) / 10.0))

        monkeypatch.setattr(es, "_episode_cost", toy_cost)
        config = ESConfig(iterations=60, pairs=4, windows=2, eval_every=30, eval_seeds=2, workers=1, lr=0.05,
                          pairing=pairing, tenant_features=False, validation="split", test_windows=0,
                          out=str(tmp_path / pairing))
        weights = train_priority(config, log=lambda msg: None).last.model.flat()
        assert np.all(weights[[1, 2, 3]] == 0.0)
        errors[pairing] = float(np.abs(weights - expect).max())
        train = [c for c in calls if c[0] == "train"]
        agent, reference = [c for c in train if not c[2]], [c for c in train if c[2]]
        assert len(agent) == 60 * 4 * 2 * 2
        assert len({seed for _, seed, _ in agent}) > 0.99 * len(agent)       # a window per episode
        if pairing == "reference":      # one untrained-agent episode on each of the agent's windows
            assert sorted(s for _, s, _ in reference) == sorted(s for _, s, _ in agent)
        else:
            assert reference == []
    assert errors["reference"] < 0.1 < errors["independent"]


def test_es_learns_only_the_agents_it_is_told_to(monkeypatch, tmp_path):
    """learn="orderer" leaves the residual placer at zero (the heuristic) and draws what a run
    drew before the placer existed; "placer" leaves the orderer at zero (LAS); "both" moves both
    toward a known optimum."""
    model = PriorityModel.zeros()
    block = PriorityModel.placer_slice(0)
    target = np.zeros(len(model.flat()))
    target[0], target[block.start + 1] = 0.8, -0.6

    def toy_cost(task):
        return float(np.exp(np.sum((task[0] - target) ** 2) + (task[5] % 97) / 10.0))

    monkeypatch.setattr(es, "_episode_cost", toy_cost)
    last = {}
    for learn in ("orderer", "placer", "both"):
        config = ESConfig(iterations=60, pairs=4, windows=2, eval_every=30, eval_seeds=2, workers=1, lr=0.05,
                          learn=learn, out=str(tmp_path / learn))
        last[learn] = train_priority(config, log=lambda msg: None).last.model
    assert not np.any(last["orderer"].placer) and last["orderer"].linear[0] == pytest.approx(0.8, abs=0.1)
    assert not np.any(last["placer"].linear) and last["placer"].placer[1] == pytest.approx(-0.6, abs=0.1)
    np.testing.assert_allclose(last["both"].flat(), target, atol=0.1)
    # An orderer-only run's first direction is the first (pairs, 9) normal draw after the windows.
    rng = np.random.default_rng(0)
    rng.integers(0, 2**31 - 1, size=2)
    first = rng.standard_normal((4, len(PRIORITY_FEATURES)))
    eps = []
    monkeypatch.setattr(es, "antithetic_gradient", lambda plus, minus, e, sigma: eps.append(e) or np.zeros(e.shape[1]))
    train_priority(ESConfig(iterations=1, pairs=4, windows=2, eval_every=1, eval_seeds=1, workers=1,
                            out=str(tmp_path / "draws")), log=lambda msg: None)
    np.testing.assert_array_equal(eps[0][:, :len(PRIORITY_FEATURES)], first)
    assert not np.any(eps[0][:, block])


def test_es_config_rejects_bad_values():
    with pytest.raises(ValueError, match="pairs"):
        ESConfig(pairs=0)
    with pytest.raises(ValueError, match="sigma"):
        ESConfig(sigma=-1.0)
    with pytest.raises(ValueError, match="eval_jobs_per_episode"):
        ESConfig(eval_jobs_per_episode=0)
    with pytest.raises(ValueError, match="pairing"):
        ESConfig(pairing="shared")
    with pytest.raises(ValueError, match="learn"):
        ESConfig(learn="critic")
    with pytest.raises(ValueError, match="train_load"):
        ESConfig(train_load=0.0)
    with pytest.raises(ValueError, match="tenant_features"):
        ESConfig(tenant_features="no")
    assert Adam(2, 0.1).step(np.array([1.0, -1.0])) == pytest.approx([0.1, -0.1])


def test_cli_smoke_then_score_the_agent_by_path(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "baselines", "train-priority", "--smoke", "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    best = out / "best.priority.json"
    assert load_priority_agent(best).spec.training["command"].startswith("cluster-bench train-priority --smoke")
    proc = subprocess.run([sys.executable, "-m", "baselines", "run", "--scenario", "philly-hetero-v1", "--seeds", "0",
                           "--policies", f"las+fastest,{best}", "--reference", "las+fastest", "--env",
                           "jobs_per_episode=40", "--no-plots", "--quiet", "--out", str(tmp_path / "scores")],
                          capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "dual-priority(best)" in proc.stdout


def test_paired_evaluation_script_reads_a_priority_agent(tmp_path):
    path = save_priority_agent(_agent(gpus_log2=1.0), tmp_path / "a.priority.json")
    bench = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "eval_dual_paired.py")
    out = tmp_path / "paired.json"
    proc = subprocess.run([sys.executable, bench, str(path), "--scenario", "philly-hetero-v1", "--seeds", "0-1",
                           "--references", "las+fastest", "--jobs-per-episode", "15", "--out", str(out), "--oracle"],
                          capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "dual vs las+fastest" in proc.stdout
    summaries = json.loads(out.read_text())["summaries"]
    assert summaries["las+fastest"]["n"] == 2
    # --oracle: the deprecated alias of --clairvoyant says so and scores srpt-clairvoyant, under its
    # current name (the policy name would warn).
    assert "--oracle is deprecated, use --clairvoyant" in proc.stderr and "FutureWarning" not in proc.stderr
    assert summaries["srpt-clairvoyant"]["n"] == 2 and "clairvoyant_vs_las+fastest" in summaries
    assert "srpt-clairvoyant vs las+fastest" in proc.stdout
    # Claims rest on 100 test windows: the default, and fewer are flagged.
    assert "note: 2 distinct windows, fewer than the 100 a claim rests on" in proc.stdout
    usage = subprocess.run([sys.executable, bench, "--help"], capture_output=True, text=True, timeout=120).stdout
    assert "default 0-99" in usage and "--clairvoyant" in usage


def test_ablation_table_script_pairs_variants_with_the_reference_and_the_first(tmp_path):
    """benchmarks/priority_ablations.py as the docs run it: LABEL=PATH and LABEL=PATH@PLACER."""
    path = save_priority_agent(_agent(gpus_log2=1.0), tmp_path / "a.priority.json")
    bench = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks",
                         "priority_ablations.py")
    out = tmp_path / "table.json"
    proc = subprocess.run([sys.executable, bench, f"mine={path}", f"mine-spread={path}@spread", "--scenario",
                           "philly-hetero-v1", "--seeds", "0-2", "--jobs-per-episode", "60", "--out", str(out)],
                          capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "| mine-spread | spread |" in proc.stdout
    rows = json.loads(out.read_text())["rows"]
    assert [r["variant"] for r in rows] == ["mine", "mine-spread"]
    assert rows[0]["vs_reference"]["n"] == 3 and "vs_first" not in rows[0]
    assert rows[1]["vs_first"]["n"] == 3
    records = json.loads(out.read_text())["records"]
    spread = [r["avg_jct"] for r in records if r["policy"] == "mine-spread"]
    own = [r["avg_jct"] for r in records if r["policy"] == "mine"]
    assert rows[1]["vs_first"]["ratio"] == pytest.approx(np.exp(np.mean(np.log(np.array(spread) / own))))
    bad = subprocess.run([sys.executable, bench, "no-equals-sign"], capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "LABEL=PATH" in bad.stderr
