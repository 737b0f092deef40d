"""``las-migrate`` and the ``extended-v2`` placement columns: a hand-worked move on a two-machine
cluster, the guard and the threshold, the names, the compiled engine's records equal to the API's,
the new layout append-only and inside its spaces, and the vector env's refusal."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

import baselines
import cluster_env
from baselines import engine
from baselines.harness.episode import run_episode
from baselines.migrate import MigratingLAS, las_migrate_threshold
from cluster_env.core.config import SchedulingConfig, WorldConfig
from cluster_env.core.instance import Cluster, LoadReport, Workload
from cluster_env.envs.observation_ext import EXTRA_JOB_FEATURES, job_features
from cluster_env.envs.observation_place import PLACEMENT_JOB_FEATURES
from cluster_env.scenarios.base import Scenario
from cluster_env.world.throughputs import JOB_TYPES, relative_speed_table
from tests.helpers import policy_steps

TRANSFORMER = JOB_TYPES.index("Transformer (batch size 16)")
#: The job type's nominal speed on a K80 relative to a V100 (Gavel's table): about 0.494.
K80_SPEED = float(relative_speed_table(("K80", "V100"), "V100")[TRANSFORMER, 0, 0])
OVERHEAD, LONG = 30.0, 10_000.0


def two_machine_scenario() -> Scenario:
    """One K80 (machine 0) and one V100 (machine 1), one GPU each; at t=0 a 100 s job and a
    10,000 s job (V100 seconds) arrive; ticks every 300 s; every effect off but a 30 s restart
    overhead."""
    workload = Workload(
        name="two-machines", job_ids=("short", "long"), submit=np.zeros(2), duration=np.array([100.0, LONG]),
        gpus=np.ones(2, dtype=np.int64), job_type=np.full(2, TRANSFORMER, dtype=np.int64),
        tenant=np.zeros(2, dtype=np.int64), report=LoadReport(source="test", rows_read=2, rows_kept=2))
    cluster = Cluster.from_machines("k80-v100", [("slow", "K80", 1), ("fast", "V100", 1)])
    whole = {s: (0.0, 1.0) for s in ("train", "validation", "test")}
    world = replace(WorldConfig(reference_gpu="V100").all_effects_off(), restart_overhead=OVERHEAD)
    return Scenario(name="two-machines", description="a long job stuck on a K80 while the V100 frees",
                    cluster=lambda: cluster, workload=lambda: workload, splits=whole, world=world,
                    scheduling=SchedulingConfig(scheduling_tick=300.0))


# Hand-worked (speed s = K80_SPEED ~ 0.494 on the K80, 1 on the V100):
# t=0    both jobs have 0 attained; LAS starts the short one first (lower id), fastest puts it on the
#        V100; the long one gets the K80.
# t=100  the short job ends (JCT 100); the V100 is free.
# t=300  tick: the long job has run 300 s (min_run) and the free V100 is 1/s ~ 2.02x faster:
#        las-migrate preempts it (300 s of K80 = 300 s V100-seconds of work) and restarts it at
#        once; fastest puts it on the V100; it computes from 330 (restart overhead) and ends at
#        330 + 10,000 - 300 s. las+fastest leaves it on the K80: it ends at 10,000 / s.
def moved_jct(at: float) -> float:
    return at + OVERHEAD + LONG - at * K80_SPEED


def test_las_migrate_moves_the_long_job_to_the_freed_fast_machine():
    result = run_episode(baselines.make_policy("las-migrate"), two_machine_scenario(), "test", seed=0, record=True)
    np.testing.assert_allclose(result.jct, [100.0, moved_jct(300.0)], rtol=1e-9)
    assert result.record["preemptions"] == 1            # moved once, never back
    assert [a[2] for a in result.allocations if a[1] == 1] == [[(0, 1)], None, [(1, 1)], None]   # K80, moved, V100, done
    stay = run_episode(baselines.make_policy("las+fastest"), two_machine_scenario(), "test", seed=0, record=True)
    np.testing.assert_allclose(stay.jct, [100.0, LONG / K80_SPEED], rtol=1e-6)
    assert stay.record["preemptions"] == 0
    assert moved_jct(300.0) < 0.51 * LONG / K80_SPEED     # the move pays: 10,182 s against 20,237 s


def test_the_guard_and_the_threshold():
    # min_run 600 s: the long job may move only at the t=600 tick.
    late = run_episode(baselines.make_policy("las-migrate", min_run=600.0), two_machine_scenario(), "test", seed=0,
                       record=True)
    np.testing.assert_allclose(late.jct, [100.0, moved_jct(600.0)], rtol=1e-9)
    # A 2x threshold still moves it (1/s ~ 2.02); 2.1x does not.
    assert 1 / K80_SPEED > 2.0
    two = run_episode(baselines.make_policy("las-migrate2"), two_machine_scenario(), "test", seed=0, record=True)
    np.testing.assert_allclose(two.jct, [100.0, moved_jct(300.0)], rtol=1e-9)
    high = run_episode(baselines.make_policy("las-migrate2.1"), two_machine_scenario(), "test", seed=0, record=True)
    assert high.record["preemptions"] == 0
    np.testing.assert_allclose(high.jct, [100.0, LONG / K80_SPEED], rtol=1e-6)


@pytest.mark.skipif(not engine.available(), reason="the compiled engine needs numba kernels")
def test_compiled_las_migrate_equals_the_api_on_the_worked_case():
    for name in ("las-migrate", "las-migrate2.1"):
        api = run_episode(baselines.make_policy(name), two_machine_scenario(), "test", seed=0).record
        compiled = engine.run_compiled_episode(name, two_machine_scenario(), "test", 0)
        assert compiled.engine == "compiled"
        assert {k: v for k, v in compiled.record.items() if k != "wall_s"} == {
            k: v for k, v in api.items() if k != "wall_s"}


P100_SPEED = float(relative_speed_table(("P100", "V100"), "V100")[TRANSFORMER, 0, 0])


def allowed_types_scenario() -> Scenario:
    """Machines K80, P100, V100 (one GPU each); the short job may use only the P100, the long one
    only the K80 and the P100: the free V100 must not count for it."""
    base = two_machine_scenario()
    workload = replace(base.workload(), allowed_gpu_types=(frozenset({"P100"}), frozenset({"K80", "P100"})))
    cluster = Cluster.from_machines("k80-p100-v100", [("slow", "K80", 1), ("mid", "P100", 1), ("fast", "V100", 1)])
    return replace(base, name="allowed-types", cluster=lambda: cluster, workload=lambda: workload)


# t=0 the short job takes the P100 (its only type), the long one the K80; t=116 the P100 frees
# (100 V100-seconds at 0.862);
# t=300 the long job's best machine it may use is the P100, 0.862 / 0.494 ~ 1.74x its K80 speed:
# las-migrate (1.5) moves it there (JCT 330 + (10,000 - 300 s) / 0.862); las-migrate1.9 does not,
# although the free V100 (not allowed to it) would be 2.02x.
def test_moves_count_only_the_gpu_types_a_job_may_use():
    assert 1.5 < P100_SPEED / K80_SPEED < 1.9 < 1 / K80_SPEED
    moved = run_episode(baselines.make_policy("las-migrate"), allowed_types_scenario(), "test", seed=0)
    expected = 330.0 + (LONG - 300.0 * K80_SPEED) / P100_SPEED
    assert moved.record["preemptions"] == 1
    short = 100.0 / P100_SPEED
    assert moved.record["avg_jct"] == pytest.approx((short + expected) / 2, rel=1e-9)
    stay = run_episode(baselines.make_policy("las-migrate1.9"), allowed_types_scenario(), "test", seed=0)
    assert stay.record["preemptions"] == 0
    assert stay.record["avg_jct"] == pytest.approx((short + LONG / K80_SPEED) / 2, rel=1e-6)
    if engine.available():
        for name, api in (("las-migrate", moved), ("las-migrate1.9", stay)):
            compiled = engine.run_compiled_episode(name, allowed_types_scenario(), "test", 0).record
            assert {k: v for k, v in compiled.items() if k != "wall_s"} == {
                k: v for k, v in api.record.items() if k != "wall_s"}


@pytest.mark.skipif(not engine.available(), reason="the compiled engine needs numba kernels")
@pytest.mark.parametrize("name,seed", [("las-migrate", 0), ("las-migrate", 1), ("las-migrate1.2+consolidate", 2)])
def test_compiled_las_migrate_equals_the_api_on_hetero_windows(name, seed):
    """Small philly-hetero-v1 windows where jobs move (the API counts its moves)."""
    kw = {"jobs_per_episode": 200}
    policy = baselines.make_policy(name)
    api = run_episode(policy, "philly-hetero-v1", "test", seed, kw).record
    assert policy.orderer.migrations > 0
    compiled = engine.run_compiled_episode(name, "philly-hetero-v1", "test", seed, kw)
    assert {k: v for k, v in compiled.record.items() if k != "wall_s"} == {
        k: v for k, v in api.items() if k != "wall_s"}


def test_names_and_parameters():
    assert las_migrate_threshold("las-migrate") == 1.5 and las_migrate_threshold("las-migrate2.5") == 2.5
    assert las_migrate_threshold("las-migrate1") is None and las_migrate_threshold("las") is None
    policy = baselines.make_policy("las-migrate")
    assert policy.name == "las-migrate" and policy.placer.name == "fastest"
    assert policy.env_overrides == {"preemption": True, "observation": "extended-v2"}
    assert baselines.make_policy("las-migrate3+consolidate").orderer.threshold == 3.0
    for bad in ("las-migrate1", "las-migrate0.5", "las-migratex+fastest"):
        with pytest.raises(ValueError, match="threshold x > 1"):
            baselines.make_policy(bad)
    with pytest.raises(ValueError, match="threshold"):
        MigratingLAS(threshold=1.0)
    with pytest.raises(ValueError, match="min_run"):
        MigratingLAS(min_run=-1.0)
    assert "las-migrate" not in baselines.BASELINE_NAMES       # v0 scores and defaults unchanged
    from baselines.cli import default_policies

    assert "las-migrate" in default_policies("philly-hetero-v1") and "las-migrate" not in default_policies("toy-v0")


def test_las_migrate_refuses_an_observation_without_the_placement_columns():
    env = cluster_env.parallel_env("philly-hetero-v1", split="test", jobs_per_episode=300, preemption=True,
                                   observation="extended")
    policy = baselines.make_policy("las-migrate")
    obs, infos = env.reset(seed=0)
    policy.reset(0)
    with pytest.raises(ValueError, match="extended-v2"):
        while env.agents:
            obs, _, _, _, infos = env.step(policy.act(obs, infos))


# ---------------------------------------------------------------- the extended-v2 layout
N_EXT = len(job_features("extended"))
COL = {name: N_EXT + i for i, name in enumerate(PLACEMENT_JOB_FEATURES)}


def _steps(observation: str, seed: int = 1, policy: str = "las+fastest"):
    return policy_steps("philly-hetero-v1", observation, seed, policy, jobs_per_episode=150, preemption=True)


def test_extended_v2_only_appends_columns_and_stays_in_its_spaces():
    assert job_features("extended-v2") == job_features("extended") + PLACEMENT_JOB_FEATURES
    assert job_features("extended")[-len(EXTRA_JOB_FEATURES):] == EXTRA_JOB_FEATURES
    ext = list(_steps("extended"))
    v2 = list(_steps("extended-v2"))
    assert len(ext) == len(v2) > 100
    running_rows = 0
    for (_, a, _), (env, b, infos) in zip(ext, v2):
        for agent in ("orderer", "placer"):
            np.testing.assert_array_equal(a[agent]["jobs"], b[agent]["jobs"][:, :N_EXT])
            np.testing.assert_array_equal(a[agent]["global"], b[agent]["global"])
            np.testing.assert_array_equal(a[agent]["action_mask"], b[agent]["action_mask"])
            assert env.observation_space(agent) is env.observation_space(agent)
            assert env.observation_space(agent).contains(b[agent])
        jobs = b["orderer"]["jobs"]
        running = jobs[:, 1] > 0.5
        running_rows += int(running.sum())
        # Not-running rows: 0 in counts and flags, -1 elsewhere.
        rest = jobs[~running][:, N_EXT:]
        np.testing.assert_array_equal(rest, np.tile([0, -1, 0, -1, -1, -1, 0, -1], (len(rest), 1)))
    assert running_rows > 100
    assert env.observation_space("orderer")["jobs"].shape[1] == N_EXT + len(PLACEMENT_JOB_FEATURES)


def test_placement_columns_match_the_simulator():
    checked = 0
    for env, obs, infos in _steps("extended-v2", seed=2):
        sim = env.unwrapped.sim
        jobs, ids = obs["orderer"]["jobs"], infos["orderer"]["job_ids"]
        for row in np.flatnonzero(jobs[:, 1] > 0.5):
            j = int(ids[row])
            alloc = sim.alloc[j]
            machines = [m for m, _ in alloc]
            types = {int(sim.machine_type[m]) for m in machines}
            speed = [float(np.float32(sim.job_speed[j, sim.machine_type[m]])) * float(np.float32(sim.machines.measured[m]))
                     for m in range(sim.num_machines)]
            holds = [m for m in range(sim.num_machines) if sim.machines.free[m] + dict(alloc).get(m, 0) >= sim.gpus[j]]
            current = min(speed[m] for m in machines)
            best = max((speed[m] for m in holds), default=-1.0)
            assert jobs[row, COL["machines_used"]] == len(machines)
            assert jobs[row, COL["mixed_types"]] == float(len(types) > 1)
            assert jobs[row, COL["slowest_type_speed"]] == np.float32(min(sim.job_speed[j, t] for t in types))
            assert jobs[row, COL["current_speed"]] == np.float32(current)
            assert jobs[row, COL["best_free_speed"]] == np.float32(best)
            assert jobs[row, COL["speedup_free"]] == np.float32(best / current if best >= 0 else -1.0)
            capacity = np.cumsum(np.sort(sim.machine_gpus)[::-1])
            fewest = int(np.searchsorted(capacity, sim.gpus[j]) + 1)
            assert jobs[row, COL["spread_beyond"]] == float(len(machines) > fewest)
            start = sim._s_t0[sim._slot[j]]
            assert jobs[row, COL["since_start_log"]] == np.float32(math.log1p(sim.now - start))
            if len(machines) == 1:
                assert jobs[row, COL["speedup_free"]] >= 1.0
            checked += 1
    assert checked > 100


def test_the_vector_env_shows_the_placement_columns():
    """(Both backends write them the same: tests/test_parallel_engine.py.)"""
    from cluster_env.vector import ClusterVectorEnv

    vec = ClusterVectorEnv(1, "toy-v0", "train", observation="extended-v2")
    assert vec.single_observation_space["jobs"].shape[1] == N_EXT + len(PLACEMENT_JOB_FEATURES)


def test_reference_lists_every_placement_column():
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "reference.md").read_text()
    assert 'observation="extended-v2"' in text
    for name in PLACEMENT_JOB_FEATURES:
        assert f"`{name}`" in text, name


def test_a_bad_observation_mode_names_the_layouts():
    with pytest.raises(ValueError, match="extended-v2"):
        cluster_env.parallel_env("toy-v0", observation="extended-v3")


def test_extended_v2_passes_the_parallel_api_test():
    from pettingzoo.test import parallel_api_test

    parallel_api_test(cluster_env.parallel_env("toy-v0", observation="extended-v2", preemption=True), num_cycles=200)


def restricted_hetero_scenario() -> Scenario:
    """philly-hetero-v2 where every third job may not use the fastest GPU type (V100)."""
    from cluster_env.scenarios import get_scenario

    base = get_scenario("philly-hetero-v2")
    names = base.cluster().gpu_type_names
    workload = base.workload()
    allowed = tuple(frozenset(names[:2]) if j % 3 == 0 else None for j in range(workload.num_jobs))
    return replace(base, name="philly-hetero-v2-restricted", workload=lambda: replace(workload, allowed_gpu_types=allowed))


@pytest.mark.parametrize("policy, restricted", [("las-migrate", False), ("las-migrate", True), ("fifo+random", True)])
def test_the_vectorised_placement_columns_equal_the_per_row_reference_bit_for_bit(policy, restricted):
    """``placement_rows`` (what the builder computes, all running rows at once, in numpy and in
    its numba loop) against the per-row :func:`placement_row`, in float64 bits, at every step of a busy philly-hetero-v2
    window: ``las-migrate`` (moves, jobs spread over machines), ``fifo+random`` (jobs spread over
    machines of several GPU types), and a variant where a third of the jobs may not use V100s."""
    from cluster_env.core.simulator import ClusterSimulator
    from cluster_env.envs.observation_place import placement_row, placement_rows

    scenario = restricted_hetero_scenario() if restricted else "philly-hetero-v2"
    checked, multi, mixed = 0, 0, 0
    for env, obs, infos in policy_steps(scenario, "extended-v2", 3, policy, jobs_per_episode=200,
                                        preemption=True):
        sim = env.unwrapped.sim
        assert (sim.allowed is not None) == restricted
        rows = np.flatnonzero(obs["orderer"]["jobs"][:, 1] > 0.5)
        if not len(rows):
            continue
        fewest = ClusterSimulator._fewest_machines(sim.gpus, sim.allowed, sim.cluster)
        running = np.asarray(infos["orderer"]["job_ids"])[rows]
        reference = np.array([placement_row(sim, int(j), int(fewest[j])) for j in running])
        for compiled in (False, True):       # whole-array numpy, and the numba loop
            fast = placement_rows(sim, running, fewest, compiled=compiled)
            np.testing.assert_array_equal(fast.view(np.uint64), reference.view(np.uint64))
        np.testing.assert_array_equal(obs["orderer"]["jobs"][rows, N_EXT:], reference.astype(np.float32))
        checked += len(rows)
        multi += int((reference[:, 0] > 1).sum())
        mixed += int(reference[:, 2].sum())
    assert checked > 500 and multi > 0 and (mixed > 0) == (policy == "fifo+random")
