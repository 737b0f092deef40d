"""Each effect of the world model, switched on and off, on small constructed instances."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from cluster_env.core.config import WorldConfig
from cluster_env.core.instance import Cluster, Workload
from cluster_env.core.simulator import ClusterSimulator
from cluster_env.world.gpu_catalog import gpu_spec
from cluster_env.world.throughputs import (
    JOB_TYPES, bucket_index, comm_intensity, relative_speed_table, spread_ratio_table)

OFF = WorldConfig(reference_gpu="V100").all_effects_off()
LM = JOB_TYPES.index("LM (batch size 20)")
RESNET = JOB_TYPES.index("ResNet-50 (batch size 64)")


def workload(jobs, job_type=LM):
    """jobs: (submit, duration, gpus) triples, all of one job type."""
    a = np.array(jobs, dtype=float)
    n = len(a)
    return Workload(name="t", job_ids=tuple(f"j{i}" for i in range(n)), submit=a[:, 0].copy(),
                    duration=a[:, 1].copy(), gpus=a[:, 2].astype(np.int64),
                    job_type=np.full(n, job_type, dtype=np.int64), tenant=np.zeros(n, dtype=np.int64))


def sim_of(machines, jobs, world=OFF, seed=0, job_type=LM, **kw):
    cluster = Cluster.from_machines("t", [(f"m{i}", t, g) for i, (t, g) in enumerate(machines)])
    return ClusterSimulator(cluster, workload(jobs, job_type), world, np.random.default_rng(seed), **kw)


def run_to_end(sim):
    while not sim.done:
        sim.advance()


def launch(sim, job, machines):
    sim.start(job)
    for m in machines:
        sim.place(m)


def test_gpu_type_speed_from_gavel_table():
    sim = sim_of([("K80", 1), ("V100", 1)], [(0, 1000, 1), (0, 1000, 1)])
    launch(sim, 0, [0])
    launch(sim, 1, [1])
    run_to_end(sim)
    k80 = relative_speed_table(("K80", "V100"), "V100")[LM, 0, 0]
    assert 0 < k80 < 1
    assert sim.jobs.finish[0] == pytest.approx(1000 / k80)
    assert sim.jobs.finish[1] == pytest.approx(1000)


def test_job_over_two_gpu_types_runs_at_the_slowest_worker_and_pays_the_spread():
    # The 2-GPU V100 machine could hold the job: spanning two machines pays the spread penalty.
    machines = [("K80", 1), ("V100", 1), ("V100", 2)]
    world = WorldConfig(reference_gpu="V100").all_effects_off()
    on = replace(world, spread_penalty=True)
    for w, spread in ((world, False), (on, True)):
        sim = sim_of(machines, [(0, 500, 2)], world=w)
        launch(sim, 0, [0, 1])
        run_to_end(sim)
        b = bucket_index(np.array([2]))[0]
        speed = relative_speed_table(("K80", "V100"), "V100")[LM, :, b].min()
        if spread:
            speed *= spread_ratio_table(("K80", "V100"))[LM, :, b].min()
        assert sim.jobs.finish[0] == pytest.approx(500 / speed)


def test_spread_penalty_on_and_off():
    ratio = spread_ratio_table(("V100",))[LM, 0, 2]
    assert ratio < 1
    for on in (False, True):
        w = WorldConfig(reference_gpu="V100").all_effects_off()
        w = replace(w, spread_penalty=on)
        # The 4-GPU machine could hold the job, so spanning the two 2-GPU machines is spreading.
        sim = sim_of([("V100", 2), ("V100", 2), ("V100", 4)], [(0, 100, 4)], world=w)
        launch(sim, 0, [0, 1])
        run_to_end(sim)
        assert sim.jobs.finish[0] == pytest.approx(100 / ratio if on else 100)
        # Consolidated on one machine there is no penalty either way.
        sim = sim_of([("V100", 4)], [(0, 100, 4)], world=w)
        launch(sim, 0, [0])
        run_to_end(sim)
        assert sim.jobs.finish[0] == pytest.approx(100)


def test_spread_penalty_is_relative_to_the_fewest_machines_that_hold_the_job():
    # A trace's 16-GPU job was measured spanning machines; on 2 x 8 V100 it must take its
    # trace duration, not 1,000 s / spread ratio (slowdown 9.4 under the old rule).
    ratio = spread_ratio_table(("V100",))[LM, 0, bucket_index(np.array([16]))[0]]
    assert ratio < 0.2                       # the LM's measured penalty is large: the bug was visible
    spread_only = replace(OFF, spread_penalty=True)
    sim = sim_of([("V100", 8), ("V100", 8)], [(0, 1000, 16)], world=spread_only)
    assert sim.free_spread_machines.tolist() == [2]
    launch(sim, 0, [0, 1])
    run_to_end(sim)
    assert sim.jobs.finish[0] == pytest.approx(1000.0)
    # On three machines (one more than the fewest) it pays the penalty.
    sim = sim_of([("V100", 8), ("V100", 4), ("V100", 4), ("V100", 8)], [(0, 1000, 16)], world=spread_only)
    launch(sim, 0, [0, 1, 2])
    run_to_end(sim)
    assert sim.jobs.finish[0] == pytest.approx(1000.0 / ratio)
    # The v0 rule (spread_reference="one_machine") charges it whenever the job spans machines.
    legacy = replace(spread_only, spread_reference="one_machine")
    sim = sim_of([("V100", 8), ("V100", 8)], [(0, 1000, 16)], world=legacy)
    launch(sim, 0, [0, 1])
    run_to_end(sim)
    assert sim.jobs.finish[0] == pytest.approx(1000.0 / ratio)


def test_fewest_machines_count_only_the_allowed_gpu_types():
    machines = [("K80", 8), ("V100", 4), ("V100", 4), ("V100", 2)]
    cluster = Cluster.from_machines("c", [(f"m{i}", t, g) for i, (t, g) in enumerate(machines)])
    wl = Workload(name="w", job_ids=("a", "b", "c"), submit=np.zeros(3), duration=np.ones(3),
                  gpus=np.array([8, 8, 10]), job_type=np.full(3, LM), tenant=np.zeros(3, dtype=np.int64),
                  allowed_gpu_types=(None, frozenset({"V100"}), frozenset({"V100"})))
    sim = ClusterSimulator(cluster, wl, OFF, np.random.default_rng(0))
    assert sim.free_spread_machines.tolist() == [1, 2, 3]


def test_explicit_effect_flags_win_over_all_effects_off():
    import cluster_env

    env = cluster_env.parallel_env("toy-v0", all_effects_off=True, spread_penalty=True, restart_overhead=45.0)
    assert env.world.spread_penalty is True and env.world.restart_overhead == 45.0
    assert env.world.fluctuation is False and env.world.contention is False


def test_contention_slows_co_located_jobs_by_the_documented_formula():
    alpha = 0.1
    for on in (False, True):
        w = WorldConfig(reference_gpu="V100", contention_alpha=alpha).all_effects_off()
        w = replace(w, contention=on)
        sim = sim_of([("V100", 2)], [(0, 100, 1), (0, 100, 1)], world=w)
        launch(sim, 0, [0])
        launch(sim, 1, [0])
        run_to_end(sim)
        c = comm_intensity()[LM]
        expected = 100 * (1 + alpha * c) if on else 100
        np.testing.assert_allclose(sim.jobs.finish, [expected, expected])
    # A compute-bound job type with zero communication intensity is not slowed.
    assert comm_intensity()[JOB_TYPES.index("ResNet-50 (batch size 128)")] == 0


def test_contention_ends_when_the_neighbour_leaves():
    alpha = 0.1
    w = WorldConfig(reference_gpu="V100", contention_alpha=alpha).all_effects_off()
    w = replace(w, contention=True)
    sim = sim_of([("V100", 2)], [(0, 50, 1), (0, 100, 1)], world=w)
    launch(sim, 0, [0])
    launch(sim, 1, [0])
    run_to_end(sim)
    f = 1 + alpha * comm_intensity()[LM]
    t0 = 50 * f                      # job 0 ends; job 1 has done 50 units, 50 left alone
    assert sim.jobs.finish[0] == pytest.approx(t0)
    assert sim.jobs.finish[1] == pytest.approx(t0 + 50)


def test_restart_overhead_after_preemption():
    for overhead in (0.0, 40.0):
        w = WorldConfig(reference_gpu="V100").all_effects_off()
        w = replace(w, restart_overhead=overhead)
        sim = sim_of([("V100", 1)], [(0, 100, 1), (30, 10, 1)], world=w, preemption=True)
        launch(sim, 0, [0])
        sim.advance()                          # t=30: job 1 arrives
        assert sim.now == pytest.approx(30)
        sim.preempt(0)
        launch(sim, 1, [0])
        sim.advance()                          # t=40: job 1 done
        launch(sim, 0, [0])                    # restart: overhead, then 70 s of work left
        run_to_end(sim)
        assert sim.jobs.finish[1] == pytest.approx(40)
        assert sim.jobs.finish[0] == pytest.approx(40 + overhead + 70)
        assert sim.jobs.restarts[0] == 1 and sim.preemptions == 1
        # The overhead holds GPUs (fee, utilisation) but is not execution (attained service).
        assert sim.jobs.executed[0] == pytest.approx(100)
        assert sim.jobs.held[0] == pytest.approx(100 + overhead)


def test_static_factors_make_machines_of_one_type_unequal_and_switch_off():
    on = WorldConfig(reference_gpu="V100").all_effects_off()
    on = replace(on, static_factors=True)
    sim = sim_of([("V100", 1)] * 8, [(0, 100, 1)] * 8, world=on, seed=3)
    static = sim.machines.static
    assert static.std() > 0.01 and np.all((static >= 0.5) & (static <= 1.5))
    for j in range(8):
        launch(sim, j, [j])
    run_to_end(sim)
    np.testing.assert_allclose(sim.jobs.finish, 100 / static)
    sim = sim_of([("V100", 1)] * 8, [(0, 100, 1)] * 8, world=OFF, seed=3)
    np.testing.assert_array_equal(sim.machines.static, np.ones(8))


def test_fluctuation_changes_speeds_over_time_and_switches_off():
    on = WorldConfig(reference_gpu="V100").all_effects_off()
    on = replace(on, fluctuation=True)
    sim = sim_of([("V100", 1)] * 16, [(0, 100000, 1)] * 16, world=on, seed=1)
    for j in range(16):
        launch(sim, j, [j])
    seen = []
    while sim.now < 40000:      # nothing waits: one update per quiet period (3,600 s)
        sim.advance()
        seen.append(sim.machine_factor.copy())
    seen = np.array(seen)
    assert len(seen) >= 10 and seen.std(axis=0).mean() > 0.01
    run_to_end(sim)
    # Different machines finish at different times only because of the fluctuation.
    assert np.ptp(sim.jobs.finish) > 1.0
    sim = sim_of([("V100", 1)] * 16, [(0, 100000, 1)] * 16, world=OFF, seed=1)
    for j in range(16):
        launch(sim, j, [j])
    run_to_end(sim)
    np.testing.assert_allclose(sim.jobs.finish, 100000)
    assert sim.events <= 2      # no fluctuation ticks: only the completion (and nothing else)


def test_measured_speed_tracks_the_hidden_factor_without_revealing_it_exactly():
    on = WorldConfig(reference_gpu="V100").all_effects_off()
    on = replace(on, static_factors=True, fluctuation=True, measurement_noise=0.02)
    sim = sim_of([("V100", 1)] * 12, [(0, 50000, 1)] * 12, world=on, seed=2)
    assert np.all(np.isinf(sim.machines.measured_at))
    for j in range(12):
        launch(sim, j, [j])
    while sim.now < 20000:
        sim.advance()
    measured, static = sim.machines.measured, sim.machines.static
    assert np.all(np.isfinite(sim.machines.measured_at))
    assert np.corrcoef(measured, static)[0, 1] > 0.8       # informative
    assert not np.allclose(measured, sim.machine_factor)   # but not the true factor


def test_fee_and_energy_accounting():
    sim = sim_of([("V100", 2), ("T4", 2)], [(0, 3600, 2)])
    launch(sim, 0, [0])
    run_to_end(sim)
    v100, t4 = gpu_spec("V100"), gpu_spec("T4")
    assert sim.fee == pytest.approx(2 * v100.price_per_gpu_hour)
    joules = 3600 * (2 * v100.busy_watts + 2 * t4.idle_watts)
    assert sim.energy_joules == pytest.approx(joules)
    assert sim.busy_gpu_seconds == pytest.approx(2 * 3600)


def test_world_config_rejects_bad_values():
    with pytest.raises(ValueError, match="restart_overhead"):
        WorldConfig(restart_overhead=-1).validate()
    with pytest.raises(ValueError, match="contention_alpha"):
        WorldConfig(contention_alpha=-0.1).validate()
    assert math.isfinite(WorldConfig().quiet_fluctuation_interval)


def test_speeds_are_measured_when_fluctuation_is_off():
    on = replace(OFF, static_factors=True, measurement_noise=0.0)
    sim = sim_of([("V100", 1)] * 4, [(0, 100, 1)] * 4 + [(50, 10, 1)], world=on, seed=4)
    for j in range(4):
        launch(sim, j, [j])
    sim.advance()                                  # t=50: an arrival; 50 s observed
    np.testing.assert_allclose(sim.machines.measured, sim.machines.static)
    assert np.all(sim.machines.measured_at == 50)
