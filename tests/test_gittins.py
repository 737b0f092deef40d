"""Tiresias' 2D-Gittins index orderer (``gittins``): the index against a hand computation, the
decision it changes against LAS, the training split as its only source, and the refusals."""
from __future__ import annotations

import json

import numpy as np
import pytest

import baselines
from baselines.gittins import Gittins, ServiceDistribution, service_distribution
from baselines.harness.episode import run_episode
from baselines.harness.sweep import resolve_policy
from baselines.orderers import LAS
from cluster_env.scenarios.registry import get_scenario
from tests.test_baselines_las_oracle import single_server_scenario
from tests.test_baselines_policies import build_obs


def test_index_matches_a_hand_computation():
    d = ServiceDistribution([100.0, 200.0, 1000.0])
    # a = 0, quantum 150: P(S <= 150) = 1/3; E[min(S, 150)] = (100 + 150 + 150) / 3.
    # a = 150, quantum 100: survivors 200, 1000; P = 1/2; E[min(S - 150, 100)] = (50 + 100) / 2.
    # a = 150, no quantum: 1 / E[S - 150 | S > 150] = 1 / ((50 + 850) / 2).
    # a = 1000: no sample is larger: 0.
    got = d.index(np.array([0.0, 150.0, 150.0, 1000.0]), np.array([150.0, 100.0, np.inf, 50.0]))
    np.testing.assert_allclose(got, [(1 / 3) / (400 / 3), 0.5 / 75.0, 1 / 450.0, 0.0])


def test_gittins_runs_the_job_about_to_finish_where_las_runs_the_newest():
    # 90% of jobs need 1,000 GPU-s, 10% need 100,000: a job with 900 attained will probably finish
    # within 100 more; a fresh one will probably need 1,000. Both are in the first queue (< 3,250).
    # Gittins: (0.9 / ((9 x 100 + 2,350) / 10)) > (0.9 / ((9 x 1,000 + 3,250) / 10)).
    samples = [1000.0] * 9 + [100_000.0]
    obs, ids = build_obs([{"id": 1, "gpus": 4, "attained": 900.0, "executed": 225.0},
                          {"id": 2, "gpus": 4}], [], free=[4, 0])
    info = {"job_ids": np.array(ids), "time": 10.0, "tick": False}
    gittins, las = Gittins(distribution=samples), LAS()
    for orderer in (gittins, las):
        orderer.reset(np.random.default_rng(0))
    assert gittins.order(obs, info) == 0
    assert las.order(obs, info) == 1


def test_the_distribution_is_the_training_split_only():
    scenario = get_scenario("philly-v1")
    source = scenario.workload()
    lo, hi = scenario.split_range("train", source.num_jobs)
    d = service_distribution("philly-v1")
    np.testing.assert_array_equal(d.samples, np.sort(source.gpus[lo:hi] * source.duration[lo:hi]))
    assert service_distribution("philly-v1") is d                       # cached per scenario
    t_lo, t_hi = scenario.split_range("test", source.num_jobs)
    assert t_lo >= hi and "training split" in d.source


def test_a_trace_without_a_separate_training_split_is_refused():
    # A user's workload plays the whole file in every split: its own jobs would be the distribution.
    with pytest.raises(ValueError, match="no training split apart from its other splits"):
        Gittins(scenario=single_server_scenario())
    with pytest.raises(ValueError, match="needs the scenario it runs on"):
        baselines.make_policy("gittins")
    with pytest.raises(ValueError, match="positive finite samples"):
        Gittins(distribution=[0.0, 5.0])


def test_named_gittins_resolves_with_its_scenario_and_plays_an_episode():
    policy = resolve_policy("gittins", "philly-v1")
    assert policy.name == "gittins" and policy.placer.name == "consolidate"
    assert policy.orderer.distribution is service_distribution("philly-v1")
    assert policy.env_overrides == {"preemption": True}                 # reads no durations
    a = run_episode(policy, "philly-v1", "test", 3, {"jobs_per_episode": 40}).record
    b = run_episode(resolve_policy("gittins", "philly-v1"), "philly-v1", "test", 3, {"jobs_per_episode": 40}).record
    assert a["jobs_finished"] == 40 and a["avg_jct"] == b["avg_jct"]


@pytest.mark.parametrize("engine_mode", ["auto", "api"])
def test_gittins_on_a_users_workload_is_refused_on_every_path(engine_mode, tmp_path, capsys, monkeypatch):
    """cluster-bench resolves gittins for the base scenario; the played jobs are the user's file,
    which has no training split apart from them: refused before any episode (compiled engine
    and API alike), with the message of Gittins(scenario=<the user's scenario>)."""
    from pathlib import Path

    from baselines import engine
    from baselines.cli import main as cluster_bench

    monkeypatch.setenv(engine.ENGINE_ENV_VAR, engine_mode)
    jobs = str(Path(__file__).resolve().parents[1] / "examples" / "data" / "my_jobs.csv")
    out = tmp_path / "res"
    for no_plots in (["--no-plots"], []):
        assert cluster_bench(["run", "--scenario", "philly-v1", "--workload-csv", jobs, "--policies", "fifo,gittins",
                              "--seeds", "0", "--out", str(out), "--quiet", *no_plots]) == 2
        err = capsys.readouterr().err
        assert "no training split apart from its other splits" in err and "philly-v1+my_jobs.csv" in err
        assert not out.exists()
    # Below the CLI: each engine refuses it by itself too.
    kw = {"workload_csv": jobs}
    with pytest.raises(ValueError, match="no training split apart from its other splits"):
        run_episode(resolve_policy("gittins", "philly-v1"), "philly-v1", "test", 0, kw)
    if engine.available():
        with pytest.raises(ValueError, match="no training split apart from its other splits"):
            engine.run_compiled_episode("gittins", "philly-v1", "test", 0, kw)
    # The default policies of a run on the user's file leave gittins out, and say so.
    from baselines.cli import default_policies, own_workload_defaults

    assert own_workload_defaults(default_policies("philly-v1"))[1] == ["gittins"]
    assert cluster_bench(["run", "--scenario", "philly-v1", "--workload-csv", jobs, "--seeds", "0", "--out", str(out),
                          "--quiet", "--no-plots", "--env", "jobs_per_episode=5"]) == 0
    assert "leave out gittins" in capsys.readouterr().out
    assert "gittins" not in {r["policy"] for r in json.loads((out / "results.json").read_text())["episodes"]}


@pytest.mark.parametrize("command", ["compare", "sweep"])
def test_compare_and_sweep_refuse_gittins_on_a_users_workload_before_any_episode(command, tmp_path, capsys, monkeypatch):
    """compare and sweep refuse ``gittins`` on a ``--workload-csv`` before their first episode, as run does:
    exit 2, the reason, and no episode run (the episode runner is never called)."""
    from pathlib import Path

    import baselines.harness.load_sweep as load_sweep_module
    import baselines.harness.sweep as sweep_module
    from baselines.cli import main as cluster_bench

    def no_episodes(*args, **kwargs):
        raise AssertionError("an episode ran before the refusal")

    monkeypatch.setattr(sweep_module, "run_tasks", no_episodes)          # compare's (imported when it runs)
    monkeypatch.setattr(load_sweep_module, "run_tasks", no_episodes)     # sweep's
    jobs = str(Path(__file__).resolve().parents[1] / "examples" / "data" / "my_jobs.csv")
    out = tmp_path / "res"
    argv = (["compare", "gittins", "fifo", "--out", str(out / "c.csv")] if command == "compare"
            else ["sweep", "--policies", "fifo,gittins", "--loads", "1.0", "--out", str(out), "--no-plots"])
    assert cluster_bench([*argv, "--scenario", "philly-v1", "--seeds", "0", "--env", f"workload_csv={jobs}"]) == 2
    err = capsys.readouterr().err
    assert "no training split apart from its other splits" in err and "leave out gittins" in err
    assert not (out / "c.csv").exists() and not (out / "load_sweep.csv").exists()
