"""Scenarios: disjoint splits, seeded windows, a user's own CSV files, the main job."""
from __future__ import annotations

import numpy as np
import pytest

import cluster_env
from cluster_env.__main__ import main as run_main
from cluster_env.errors import DataError
from tests.helpers import first_allowed_actions, run_episode

TRACE_SCENARIOS = ["philly-v0", "openb-v0", "openb-full-v0"]


@pytest.mark.parametrize("name", TRACE_SCENARIOS + ["toy-v0"])
def test_splits_are_disjoint_windows_of_the_workload(name):
    scenario = cluster_env.get_scenario(name)
    n = scenario.workload().num_jobs
    ranges = [scenario.split_range(s, n) for s in ("train", "validation", "test")]
    assert ranges[0][0] == 0 and ranges[-1][1] == n
    for (a0, b0), (a1, b1) in zip(ranges, ranges[1:]):
        assert a0 < b0 == a1 < b1
    ids = {}
    for split in ("train", "validation", "test"):
        env = cluster_env.parallel_env(name, split=split, jobs_per_episode=50)
        seen = set()
        for seed in range(3):
            env.reset(seed=seed)
            seen |= set(env.sim.workload.job_ids)
        ids[split] = seen
    assert not ids["train"] & ids["validation"]
    assert not ids["train"] & ids["test"]
    assert not ids["validation"] & ids["test"]


@pytest.mark.parametrize("name", ["philly-v0", "openb-v0"])
def test_seed_picks_the_window_and_windows_start_at_zero(name):
    env = cluster_env.parallel_env(name, split="train")
    env.reset(seed=0)
    a = env.sim.workload.job_ids
    assert env.sim.num_jobs == 1000 and env.sim.submit[0] == 0
    env.reset(seed=0)
    assert env.sim.workload.job_ids == a
    env.reset(seed=1)
    assert env.sim.workload.job_ids != a


def _write(path, text):
    path.write_text(text)
    return str(path)


def test_user_workload_and_cluster_csv(tmp_path):
    wl = _write(tmp_path / "jobs.csv",
                "id,submitted,runtime,gpus,model,team\n"
                "a,2024-01-01 00:00:00,600,1,ResNet-18 (batch size 32),x\n"
                "b,2024-01-01 00:01:00,1200,4,LM (batch size 20),y\n"
                "c,2024-01-01 00:02:00,300,2,,x\n")
    cl = _write(tmp_path / "cluster.csv", "node,gpu_model,gpus\nn1,V100,4\nn2,T4,2\n")
    env = cluster_env.parallel_env(
        "toy-v0", workload_csv=wl, cluster_csv=cl,
        workload_columns={"job_id": "id", "submit_time": "submitted", "duration": "runtime",
                          "num_gpus": "gpus", "job_type": "model", "tenant": "team"})
    assert env.cluster.num_machines == 2 and env.cluster.total_gpus == 6
    for split in ("train", "test"):
        env.reset(seed=0)
        assert env.sim.workload.job_ids == ("a", "b", "c")
        np.testing.assert_array_equal(env.sim.submit, [0, 60, 120])
    total, steps, infos = run_episode(env, first_allowed_actions)
    assert infos["orderer"]["metrics"]["jobs_finished"] == 3


def test_user_job_larger_than_the_cluster_names_file_row_and_field(tmp_path):
    wl = _write(tmp_path / "big.csv", "submit_time,duration,num_gpus\n0,10,1\n5,10,16\n")
    cl = _write(tmp_path / "small.csv", "gpu_type,num_gpus\nV100,8\n")
    with pytest.raises(DataError) as err:
        cluster_env.parallel_env("toy-v0", workload_csv=wl, cluster_csv=cl)
    msg = str(err.value)
    assert "big.csv" in msg and "row 2" in msg and "num_gpus" in msg


def test_unknown_gpu_type_in_cluster_csv_is_named(tmp_path):
    cl = _write(tmp_path / "c.csv", "gpu_type,num_gpus\nV100,8\nB300,8\n")
    with pytest.raises(cluster_env.UnknownGPUTypeError) as err:
        cluster_env.parallel_env("toy-v0", cluster_csv=cl)
    assert "B300" in str(err.value) and "c.csv" in str(err.value) and "row 2" in str(err.value)


def test_each_effect_can_be_switched_off_through_the_env():
    env = cluster_env.parallel_env("philly-v0", split="test", jobs_per_episode=40, static_factors=False,
                                   fluctuation=False, contention=False, spread_penalty=False,
                                   restart_overhead=0.0)
    env.reset(seed=0)
    assert env.sim.fluct is None and np.all(env.sim.machines.static == 1) and env.sim.alpha == 0
    assert np.all(env.sim.job_spread == 1) and env.world.restart_overhead == 0
    off = cluster_env.parallel_env("philly-v0", split="test", jobs_per_episode=40, all_effects_off=True)
    a = run_episode(env, first_allowed_actions)[2]["orderer"]["metrics"]
    b = run_episode(off, first_allowed_actions)[2]["orderer"]["metrics"]
    assert a == b


def test_main_job_runs_and_prints_metrics(capsys):
    metrics = run_main(["--scenario", "toy-v0", "--split", "test"])
    out = capsys.readouterr().out
    assert metrics["jobs_finished"] == 6 and "avg_jct" in out
    run_main(["--list"])
    assert "philly-v0" in capsys.readouterr().out


def test_python_m_cluster_env_defaults_to_the_benchmark_scenario():
    # One default scenario everywhere: the module's CLI plays what cluster-bench run scores.
    from cluster_env.__main__ import build_parser

    assert build_parser().parse_args([]).scenario == cluster_env.DEFAULT_SCENARIO
