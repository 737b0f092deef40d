"""The spread guard under the all-reduce spread model: the speed-aware placers
bound a wider placement's speed with the active model's own floor
(``cluster_env.world.interconnect.spread_floor``), not with Gavel's worst case.

The case: eight 4-GPU V100 machines, each with one free GPU (a 3-GPU job holds the rest),
and two free 4-GPU K80 machines; then an 8-GPU ``LM (batch size 5)`` job of 3,600 s (on a V100).
The cluster's fewest machines for 8 GPUs are two. On Gavel's shared-NIC servers the ring's traffic
per NIC does not depend on how many servers it spans, so the all-reduce model charges the eight
1-GPU pieces exactly what it charges two 4-GPU pieces: the job's reference, factor 1, 3,600 s.
Two K80s run it at Gavel's K80/V100 ratio, 32,728 s. Gavel's bound (``1 - 3 x comm_intensity`` = 0
for LM) made the guard take the K80s.
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

import baselines
from baselines import engine
from baselines.harness.episode import run_episode
from cluster_env.core.config import SchedulingConfig, WorldConfig
from cluster_env.core.instance import Cluster, LoadReport, Workload
from cluster_env.scenarios.base import Scenario
from cluster_env.world import JOB_TYPES
from cluster_env.world.throughputs import relative_speed_table

LM5 = "LM (batch size 5)"
BLOCKER = "ResNet-50 (batch size 64)"     # comm_intensity 0


def holes_scenario(spread_model: str, floor: bool = True) -> Scenario:
    """The case (module docstring), every effect off but the spread penalty; ``floor``:
    ``SchedulingConfig.spread_floor`` (on in the world-model-v3 scenarios)."""
    jobs = [(0.0, 1e6, 3, BLOCKER)] * 8 + [(10.0, 3600.0, 8, LM5)]
    n = len(jobs)
    workload = Workload(
        name="holes", job_ids=tuple(f"j{i}" for i in range(n)),
        submit=np.array([j[0] for j in jobs]), duration=np.array([j[1] for j in jobs]),
        gpus=np.array([j[2] for j in jobs], dtype=np.int64),
        job_type=np.array([JOB_TYPES.index(j[3]) for j in jobs], dtype=np.int64),
        tenant=np.zeros(n, dtype=np.int64), report=LoadReport(source="test", rows_read=n, rows_kept=n))
    machines = [(f"v{i}", "V100", 4) for i in range(8)] + [(f"k{i}", "K80", 4) for i in range(2)]
    cluster = Cluster.from_machines("holes", machines)
    world = dataclasses.replace(WorldConfig(reference_gpu="V100").all_effects_off(), spread_penalty=True,
                                spread_model=spread_model)
    whole = {s: (0.0, 1.0) for s in ("train", "validation", "test")}
    return Scenario(name=f"holes-{spread_model}", description="spread guard case", cluster=lambda: cluster,
                    workload=lambda: workload, splits=whole, world=world,
                    scheduling=SchedulingConfig(spread_floor=floor))


def _lm_jct(policy: str, scenario: Scenario) -> float:
    return float(run_episode(baselines.make_policy(policy), scenario, "test", 0, record=True).jct[-1])


def _k80_jct() -> float:
    """3,600 s at Gavel's K80 speed for LM (batch size 5) at 8 GPUs, relative to V100."""
    speed = relative_speed_table(["K80"], "V100")[JOB_TYPES.index(LM5), 0, 3]
    return 3600.0 / speed


def test_the_k80_figure_is_the_issues():
    assert _k80_jct() == pytest.approx(32_728, abs=1)


@pytest.mark.parametrize("policy", ["fifo+fastest", "fifo+clairvoyant"])
def test_allreduce_guard_spreads_over_the_free_v100_holes(policy):
    jct = _lm_jct(policy, holes_scenario("allreduce"))
    assert jct == pytest.approx(3600.0, rel=1e-12)
    # consolidate takes the two K80s: the case is a real choice.
    assert _lm_jct("fifo+consolidate", holes_scenario("allreduce")) == pytest.approx(_k80_jct(), rel=1e-9)


def test_scenarios_without_the_floor_keep_gavels_bound():
    # The scenarios before world model v3 (spread_floor off) keep their recorded behaviour.
    assert _lm_jct("fifo+fastest", holes_scenario("allreduce", floor=False)) == pytest.approx(_k80_jct(), rel=1e-9)


def test_gavel_model_keeps_its_guard():
    # Under Gavel's single ratio spreading LM over eight V100 machines costs ~10x: the guard's bound
    # is right there, and unchanged.
    scenario = holes_scenario("gavel")
    assert _lm_jct("fifo+fastest", scenario) == pytest.approx(_k80_jct(), rel=1e-9)


def test_env_reports_the_floor_only_under_allreduce():
    from cluster_env.envs.cluster_parallel import ClusterParallelEnv

    for model in ("allreduce", "gavel"):
        env = ClusterParallelEnv(holes_scenario(model), split="test")
        obs, infos = env.reset(seed=0)
        seen = []
        while env.agents:
            info = infos["placer"]
            if info["phase"] == "place":
                seen.append((info["placing_job"], info.get("spread_floor")))
            actions = {"orderer": env.action_space("orderer").n - 1 if obs["orderer"]["action_mask"][-1]
                       and not obs["orderer"]["action_mask"][:-1].any() else int(obs["orderer"]["action_mask"].argmax()),
                       "placer": int(obs["placer"]["action_mask"].argmax())}
            obs, _, _, _, infos = env.step(actions)
        lm = [floor for job, floor in seen if job == 8]
        assert lm, model
        if model == "gavel":
            assert all(f is None for f in lm)
        else:
            # Both types sit on one shared NIC per server: spreading costs nothing beyond the reference.
            assert all(f == 1.0 for f in lm)


@pytest.mark.skipif(not engine.available(), reason="the compiled engine needs numba kernels")
@pytest.mark.parametrize("policy", ["fifo+fastest", "las+clairvoyant", "srpt-clairvoyant", "fifo+consolidate"])
def test_compiled_engine_agrees_bit_for_bit(policy):
    for model, floor in (("allreduce", True), ("allreduce", False), ("gavel", True)):
        scenario = holes_scenario(model, floor)
        api = run_episode(baselines.make_policy(policy), scenario, "test", 0).record
        compiled = engine.run_compiled_episode(policy, scenario, "test", 0).record
        diff = {k: (api[k], compiled[k]) for k in api
                if k != "wall_s" and api[k] != compiled[k]
                and not (isinstance(api[k], float) and math.isnan(api[k]) and math.isnan(compiled[k]))}
        assert not diff, (policy, model, floor, diff)


# --- The same case through a user's cluster CSV ------------------------------------------------
# A user's cluster takes its generation's world (cluster_env.scenarios.hardware), but a cluster of
# the base's own generation keeps the base's spread model: K80 + V100 on philly-hetero-v3 (Gavel's
# servers, "allreduce") is priced with "allreduce", on philly-v1 (Philly's P100/P40, "gavel") with
# Gavel's model, under which the guard keeps Gavel's bound. The guard follows the spread model the
# env's world ends up with, settings given to the env included (it was decided from the
# generation's model alone: a legacy cluster moved to "allreduce" kept Gavel's bound, 3.30x).

SPREAD_ONLY = {"all_effects_off": True, "spread_penalty": True, "reference_gpu": "V100"}


@pytest.fixture
def holes_csv(tmp_path):
    """The case as a user's files: the 3-GPU jobs arrive first and fill each V100 machine to one
    free GPU (``fastest`` and ``consolidate`` put each on its own machine)."""
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("machine,gpu_type,num_gpus,count\nv,V100,4,8\nk,K80,4,2\n")
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("job_id,submit_time,duration,num_gpus,job_type\n"
                    + "".join(f"b{i},0,1000000,3,{BLOCKER}\n" for i in range(8))
                    + f"lm,10,3600,8,{LM5}\n")
    return str(nodes), str(jobs)


def _csv_lm_jct(policy: str, files, base: str = "philly-v1", **env) -> float:
    nodes, jobs = files
    kwargs = dict(SPREAD_ONLY, cluster_csv=nodes, workload_csv=jobs, **env)
    return float(run_episode(baselines.make_policy(policy), base, "test", 0, env_kwargs=kwargs,
                             record=True).jct[-1])


def _csv_k80_jct(files, base: str = "philly-v1", **env) -> float:
    """The two free K80 machines in the legacy world (Gavel's table capped): 3.30x."""
    return _csv_lm_jct("fifo+consolidate", files, base, **env)


@pytest.mark.parametrize("backend", ["python", "compiled"])
@pytest.mark.parametrize("policy", ["fifo+fastest", "fifo+clairvoyant"])
def test_csv_cluster_on_philly_hetero_v3_takes_its_allreduce_world_and_spreads_over_the_holes(holes_csv, policy,
                                                                                                backend):
    # The default path a user takes: their K80/V100 CSV on the scenario of that hardware, no setting.
    from cluster_env.scenarios import custom_scenario, get_scenario

    if backend == "compiled" and not engine.available():
        pytest.skip("the compiled engine needs numba kernels")
    nodes, jobs = holes_csv
    scenario = custom_scenario(get_scenario("philly-hetero-v3"), cluster_csv=nodes, workload_csv=jobs)
    assert scenario.world.spread_model == "allreduce" and scenario.scheduling.spread_floor
    jct = _csv_lm_jct(policy, holes_csv, "philly-hetero-v3", backend=backend)
    assert jct <= 1.5 * 3600.0 and jct == pytest.approx(3600.0, rel=1e-12)
    assert _csv_k80_jct(holes_csv, "philly-hetero-v3", backend=backend) / 3600.0 == pytest.approx(3.30, abs=0.01)


@pytest.mark.parametrize("backend", ["python", "compiled"])
@pytest.mark.parametrize("policy", ["fifo+fastest", "fifo+clairvoyant"])
def test_csv_cluster_moved_to_allreduce_gets_the_allreduce_floor(holes_csv, policy, backend):
    if backend == "compiled" and not engine.available():
        pytest.skip("the compiled engine needs numba kernels")
    allreduce = {"spread_model": "allreduce", "backend": backend}
    assert _csv_lm_jct(policy, holes_csv, **allreduce) == pytest.approx(3600.0, rel=1e-12)
    # consolidate takes the two K80s there: the case is a real choice.
    k80 = _csv_k80_jct(holes_csv, **allreduce)
    assert k80 / 3600.0 == pytest.approx(3.30, abs=0.01)
    # A user's explicit spread_floor wins.
    assert _csv_lm_jct(policy, holes_csv, spread_floor=False, **allreduce) == pytest.approx(k80, rel=1e-12)


def test_csv_cluster_in_its_gavel_world_keeps_gavels_bound(holes_csv):
    # On philly-v1 (Gavel's model) the legacy world prices the eight V100 holes with Gavel's ratio
    # (capped): 3.47x, as the V100 machines alone show; the two K80s, 3.30x, are the better choice
    # there, and the guard takes them.
    from cluster_env.scenarios import custom_scenario, get_scenario

    nodes, jobs = holes_csv
    scenario = custom_scenario(get_scenario("philly-v1"), cluster_csv=nodes, workload_csv=jobs)
    assert scenario.world.spread_model == "gavel" and scenario.scheduling.spread_floor
    k80 = _csv_k80_jct(holes_csv)
    assert k80 / 3600.0 == pytest.approx(3.30, abs=0.01)
    assert _csv_lm_jct("fifo+fastest", holes_csv) == pytest.approx(k80, rel=1e-12)
    v100 = Path(nodes).with_name("v100.csv")
    v100.write_text("machine,gpu_type,num_gpus,count\nv,V100,4,8\n")
    assert _csv_lm_jct("fifo+fastest", (str(v100), jobs)) / 3600.0 == pytest.approx(3.47, abs=0.01)


def test_cluster_object_moved_to_allreduce_gets_the_allreduce_floor():
    from cluster_env.scenarios import custom_scenario, get_scenario

    case = holes_scenario("allreduce")
    mine = custom_scenario(get_scenario("philly-v1"), cluster=case.cluster())
    mine = dataclasses.replace(mine, workload=case.workload, splits=case.splits)
    assert mine.world.spread_model == "gavel" and mine.scheduling.spread_floor
    assert float(run_episode(baselines.make_policy("fifo+fastest"), mine, "test", 0, record=True,
                             env_kwargs=dict(SPREAD_ONLY, spread_model="allreduce")).jct[-1]) == pytest.approx(
        3600.0, rel=1e-12)


def test_cluster_bench_run_with_the_csv_gets_the_allreduce_floor(holes_csv, tmp_path):
    import json

    from baselines.cli import main as cluster_bench

    nodes, jobs = holes_csv
    out = tmp_path / "out"
    assert cluster_bench(["run", "--scenario", "philly-v1", "--cluster-csv", nodes, "--workload-csv", jobs,
                          "--reference-gpu", "V100", "--env", "all_effects_off=True", "--env", "spread_penalty=True",
                          "--env", "spread_model=allreduce", "--policies", "fifo+fastest", "--seeds", "0",
                          "--backend", "serial", "--no-plots", "--quiet", "--out", str(out)]) == 0
    episode, = [e for e in json.loads((out / "results.json").read_text())["episodes"] if e["policy"] == "fifo+fastest"]
    # the eight 3-GPU jobs run their 1e6 s; the LM job the rest of the average
    assert 9 * episode["avg_jct"] - 8e6 == pytest.approx(3600.0, abs=1e-3)
