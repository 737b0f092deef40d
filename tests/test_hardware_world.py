"""A user's cluster brings the world of its GPU generation, and every run
says which world it played in."""
from __future__ import annotations

import json

import numpy as np
import pytest

import cluster_env
from cluster_env.core.instance import Cluster
from cluster_env.scenarios import custom_scenario, get_scenario, list_scenarios
from cluster_env.scenarios.hardware import (
    GPU_GENERATIONS,
    apply_hardware_world,
    cluster_generation,
    hardware_world,
)
from cluster_env.world import DEDICATED_FLUCTUATION, DEFAULT_FLUCTUATION, KNOWN_GPU_TYPES
from cluster_env.world.summary import speed_fallback_types
from tests.helpers import first_allowed_actions, run_episode

LM_JOBS = "job_id,submit_time,duration,num_gpus,job_type\nblocker,0,100000,1,LM (batch size 5)\n"
SPREAD_ONLY = {"all_effects_off": True, "spread_penalty": True, "reference_gpu": "A100"}


def _files(tmp_path, machines: int, lm_gpus: int):
    cluster = tmp_path / "a100.csv"
    cluster.write_text(f"machine,gpu_type,num_gpus,count\ndgx,A100,8,{machines}\n")
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(LM_JOBS + f"lm,10,3600,{lm_gpus},LM (batch size 5)\n")
    return str(cluster), str(jobs)


def _lm_jct(env) -> float:
    """First-fit: the 1-GPU blocker takes machine 0, the LM job then fills machines in order."""
    run_episode(env, first_allowed_actions)
    j = env.sim.workload.job_ids.index("lm")
    return float(env.sim.jobs.finish[j] - env.sim.submit[j])


def test_every_catalog_type_has_a_generation():
    assert set(KNOWN_GPU_TYPES) <= set(GPU_GENERATIONS)


def test_generation_rule():
    assert cluster_generation({"A100": 8, "H800": 8, "A10": 1}) == "modern"
    assert cluster_generation({"K80": 4, "P100": 8, "P40": 8, "V100": 8}) == "legacy"
    assert cluster_generation({"K80": 8, "A100": 8}) == "mixed"
    modern, legacy = hardware_world({"A100-SXM4-80GB": 16}), hardware_world({"P100": 40, "P40": 112})
    assert (modern.spread_model, modern.fluctuation_params) == ("allreduce", DEDICATED_FLUCTUATION)
    assert (legacy.spread_model, legacy.fluctuation_params) == ("gavel", DEFAULT_FLUCTUATION)
    assert modern.spread_reference == legacy.spread_reference == "fewest_machines"
    # Mixed: the all-reduce model; the stragglers of the generation with most GPUs, a tie PAI's.
    assert hardware_world({"K80": 8, "A100": 16}).fluctuation_params == DEDICATED_FLUCTUATION
    assert hardware_world({"K80": 16, "A100": 8}).fluctuation_params == DEFAULT_FLUCTUATION
    tie = hardware_world({"K80": 8, "A100": 8})
    assert (tie.spread_model, tie.fluctuation_params) == ("allreduce", DEFAULT_FLUCTUATION)
    assert tie.describe() == "mixed (legacy K80; modern A100)"


def test_a100_cluster_csv_on_default_base_prices_7_plus_1_as_the_modern_scenario(tmp_path):
    # The case: 16 x 8 A100 on philly-v1 (the default base), first-fit splits the LM job 7 + 1.
    cluster, jobs = _files(tmp_path, 16, 8)
    assert cluster_env.DEFAULT_SCENARIO == "philly-v1"
    env = cluster_env.parallel_env("philly-v1", cluster_csv=cluster, workload_csv=jobs, **SPREAD_ONLY)
    assert env.world.spread_model == "allreduce" and env.world.fluctuation_params == DEDICATED_FLUCTUATION
    modern = get_scenario("modern-v2")                      # the newest modern world: measured (world model v3)
    assert (env.world.speeds, env.world.gavel_shape, env.world.comm_source) == (
        modern.world.speeds, modern.world.gavel_shape, modern.world.comm_source)
    assert env.sched.spread_floor and modern.scheduling.spread_floor
    on_default = _lm_jct(env)
    on_modern = _lm_jct(cluster_env.parallel_env("modern-v2", cluster_csv=cluster, workload_csv=jobs, **SPREAD_ONLY))
    # 1.12x, measured communication on DGX A100 (tests/test_comm_measured.py); not 34,403 s (Gavel, 9.6x)
    # nor 7,262.5 s (modern-v1's all-reduce model on the assumed 10 Gb/s testbed)
    assert on_default == on_modern == pytest.approx(4_035.6, abs=1.0)


def test_16_gpu_job_on_two_whole_dgx_on_philly_v0_costs_nothing(tmp_path):
    # philly-v0's own world (gavel, any job on two machines pays) made this 9.6x.
    cluster, jobs = _files(tmp_path, 3, 16)
    env = cluster_env.parallel_env("philly-v0", cluster_csv=cluster, workload_csv=jobs, **SPREAD_ONLY)
    run_episode(env, first_allowed_actions)
    j = env.sim.workload.job_ids.index("lm")
    # first-fit: 7 on machine 0 (the blocker holds one), 8 on machine 1, 1 on machine 2; so run it
    # again without the blocker: two whole machines, the fewest that hold 16 GPUs.
    (tmp_path / "alone.csv").write_text("job_id,submit_time,duration,num_gpus,job_type\n"
                                        "lm,0,3600,16,LM (batch size 5)\n")
    alone = cluster_env.parallel_env("philly-v0", cluster_csv=cluster, workload_csv=str(tmp_path / "alone.csv"),
                                     **SPREAD_ONLY)
    run_episode(alone, first_allowed_actions)
    assert alone.sim.jobs.finish[0] == pytest.approx(3_600.0, abs=1e-6)
    # The three-machine split pays only its extra crossing, far below Gavel's 9.6x.
    assert 3_600.0 < env.sim.jobs.finish[j] - env.sim.submit[j] < 2 * 3_600.0
    old = cluster_env.parallel_env("philly-v0", cluster_csv=cluster, workload_csv=str(tmp_path / "alone.csv"),
                                   spread_model="gavel", spread_reference="one_machine", gavel_shape="raw",
                                   **SPREAD_ONLY)
    run_episode(old, first_allowed_actions)
    assert old.sim.jobs.finish[0] / 3_600.0 == pytest.approx(9.56, abs=0.01)


def test_explicit_user_settings_win(tmp_path):
    cluster, jobs = _files(tmp_path, 16, 8)
    env = cluster_env.parallel_env("philly-v1", cluster_csv=cluster, workload_csv=jobs, spread_model="gavel",
                                   gavel_shape="raw", fluctuation_params=DEFAULT_FLUCTUATION, **SPREAD_ONLY)
    assert env.world.spread_model == "gavel" and env.world.fluctuation_params == DEFAULT_FLUCTUATION
    assert _lm_jct(env) == pytest.approx(34_403.5, abs=1.0)          # Gavel's raw table, as the user asked
    assert env.world_summary().line().endswith(
        "set by the user: fluctuation_params, gavel_shape, reference_gpu, spread_model, spread_penalty")
    # The rule itself leaves the fields a caller keeps.
    world = apply_hardware_world(get_scenario("philly-v1").world, {"A100": 8}, keep=("spread_model",))
    assert world.spread_model == "gavel" and world.fluctuation_params == DEDICATED_FLUCTUATION


def test_python_cluster_object_gets_its_world_and_named_scenarios_keep_theirs():
    cluster = Cluster.from_machines("my-h800", [(f"n{i}", "H800", 8) for i in range(16)])
    base = get_scenario("philly-v0")
    mine = custom_scenario(base, cluster=cluster)
    assert mine.cluster() is cluster and mine.name == "philly-v0+my-h800"
    assert mine.hardware.generation == "modern"
    assert (mine.world.spread_model, mine.world.spread_reference) == ("allreduce", "fewest_machines")
    assert mine.world.reference_gpu == base.world.reference_gpu and mine.world.contention == base.world.contention
    env = cluster_env.parallel_env(mine, jobs_per_episode=20)
    assert "world of the cluster's hardware, modern (H800), on base philly-v0" in env.world_summary().line()
    for name in list_scenarios():
        scenario = get_scenario(name)
        assert scenario.hardware is None
        assert cluster_env.parallel_env(name).world == scenario.world
    with pytest.raises(TypeError, match="not both"):
        custom_scenario(base, cluster=cluster, cluster_csv="x.csv")
    with pytest.raises(TypeError, match="must be a cluster_env.core.instance.Cluster"):
        custom_scenario(base, cluster="nodes.csv")


def test_world_summary_says_what_applies():
    line = cluster_env.parallel_env("modern-v1").world_summary().line()
    assert line.startswith("world: spread allreduce (fewest_machines); stragglers DEDICATED_FLUCTUATION")
    assert "A100 data sheet" in line and "Gavel testbed 10 Gb/s (assumption)" in line
    assert "spec-sheet fallback for A10, A100, A800, H800" in line and "the scenario's world (modern-v1)" in line
    summary = cluster_env.parallel_env("philly-v1", all_effects_off=True).world_summary()
    assert (summary.spread, summary.stragglers, summary.interconnect, summary.effects) == ("off", "off", "not used", ())
    hetero = cluster_env.parallel_env("philly-hetero-v1", contention_alpha=0.2).world_summary()
    assert hetero.speed_fallback == () and "contention (alpha 0.2)" in hetero.effects
    assert hetero.stragglers.startswith("DEFAULT_FLUCTUATION") and hetero.interconnect == "not used"
    assert speed_fallback_types(("V100M32", "G2", "MISC", "P40", "G3")) == ("P40", "G3")


def test_cluster_bench_run_prints_and_records_the_world(tmp_path, capsys):
    from baselines.cli import main as cluster_bench

    cluster, jobs = _files(tmp_path, 2, 8)
    out = tmp_path / "out"
    code = cluster_bench(["run", "--scenario", "philly-v1", "--workload-csv", jobs, "--cluster-csv", cluster,
                          "--reference-gpu", "A100", "--policies", "fifo", "--seeds", "0", "--backend", "serial",
                          "--no-plots", "--quiet", "--out", str(out)])
    assert code == 0
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("world: ")]
    payload = json.loads((out / "results.json").read_text())
    world = payload["meta"]["world"]
    assert printed == [world["line"]]
    assert world["spread"] == "allreduce (fewest_machines)" and world["speed_fallback"] == []   # A100: measured
    assert world["stragglers"].startswith("DEDICATED_FLUCTUATION")
    episodes = payload["episodes"]         # fifo, and the yardstick that run adds as the reference
    assert {e["policy"] for e in episodes} == {"fifo", payload["meta"]["reference"]}
    assert all(e["world"] == world["line"] for e in episodes)


def test_python_m_cluster_env_prints_the_world(capsys):
    from cluster_env.__main__ import main

    main(["--scenario", "toy-v0"])
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("world: spread off; stragglers off;") for line in lines)


def test_record_world_is_outside_the_window_identity():
    import baselines

    (rec,) = baselines.evaluate("fifo", "toy-v0", seeds=[0], backend="serial")
    assert rec["world"].startswith("world: ")
    from baselines.harness.stats import window_key

    assert window_key(rec) == window_key({**rec, "world": "another world"})
    assert np.isfinite(rec["avg_jct"])


def test_a_policy_made_for_the_hardware_world_fits_a_run_on_that_cluster(tmp_path):
    from types import SimpleNamespace

    from baselines.harness.episode import env_mismatch

    cluster, jobs = _files(tmp_path, 2, 8)
    made_for_modern = SimpleNamespace(name="p", env_overrides={"spread_model": "allreduce"})
    assert env_mismatch(made_for_modern, {"cluster_csv": cluster}, "philly-v1") == {}
    assert env_mismatch(made_for_modern, {}, "philly-v1") == {
        "spread_model": {"policy": "allreduce", "run": "gavel"}}


def test_single_agent_views_say_their_world_too():
    import gymnasium

    view = gymnasium.make("cluster_env/HeteroClusterFlat-v1", scenario="modern-v1", jobs_per_episode=20)
    assert view.unwrapped.world_summary() == cluster_env.parallel_env("modern-v1").world_summary()


def test_compare_and_sweep_print_the_world_and_compare_records_it(tmp_path, capsys):
    from baselines.cli import main as cluster_bench

    out = tmp_path / "cmp.json"
    assert cluster_bench(["compare", "sjf", "fifo", "--scenario", "toy-v0", "--seeds", "0", "--backend", "serial",
                          "--quiet", "--out", str(out)]) == 0
    line = cluster_env.parallel_env("toy-v0", split="test").world_summary().line()
    assert f"  {line}" in capsys.readouterr().out.splitlines()
    assert json.loads(out.read_text())["meta"]["world"]["line"] == line
    assert cluster_bench(["sweep", "--scenario", "toy-v0", "--loads", "1", "--policies", "fifo", "--seeds", "0",
                          "--backend", "serial", "--quiet", "--no-plots", "--out", str(tmp_path / "sw")]) == 0
    assert line in capsys.readouterr().out.splitlines()


def test_a_legacy_cluster_gets_the_philly_gavel_world_even_on_modern_v1(tmp_path):
    nodes = tmp_path / "p100.csv"
    nodes.write_text("machine,gpu_type,num_gpus,count\np,P100,8,20\n")
    env = cluster_env.parallel_env("modern-v1", cluster_csv=str(nodes))
    assert (env.world.spread_model, env.world.fluctuation_params) == ("gavel", DEFAULT_FLUCTUATION)
    assert env.world.reference_gpu == get_scenario("modern-v1").world.reference_gpu
    summary = env.world_summary()
    assert summary.origin == "world of the cluster's hardware, legacy (P100), on base modern-v1"
    assert summary.speed_fallback == () and summary.interconnect == "not used"
