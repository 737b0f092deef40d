"""Invariants after every step under a random policy, with every effect on."""
from __future__ import annotations

import numpy as np
import pytest

import cluster_env
from cluster_env.core.simulator import FINISHED, PENDING, RUNNING
from tests.helpers import random_actions


def check_invariants(env, state: dict) -> None:
    sim = env.sim
    sim.sync_running()
    js = sim.jobs
    # The clock never goes back.
    assert sim.now >= state.get("now", 0.0)
    state["now"] = sim.now
    # No GPU given twice, none beyond capacity: held + free = capacity on every machine.
    held = np.zeros(sim.num_machines, dtype=np.int64)
    for job, alloc in sim.alloc.items():
        for m, g in alloc:
            held[m] += g
    assert np.all(sim.machines.free >= 0)
    np.testing.assert_array_equal(held + sim.machines.free, sim.machine_gpus)
    for m in range(sim.num_machines):
        assert sum(sim.machine_jobs[m].values()) == held[m] - (
            sum(g for mm, g in sim.alloc.get(sim.placing, []) if mm == m) if sim.placing >= 0 else 0)
    # Every running job holds exactly its GPUs; pending and running sets agree with statuses.
    for job in sim.running:
        assert js.status[job] == RUNNING
        assert sum(g for _, g in sim.alloc[job]) == sim.gpus[job]
    assert sorted(sim.pending) == sorted(np.flatnonzero(js.status == PENDING).tolist())
    # Each job finishes exactly once: finish times never change once set.
    finished = np.flatnonzero(js.status == FINISHED)
    prev = state.setdefault("finish", {})
    for job in finished.tolist():
        if job in prev:
            assert js.finish[job] == prev[job]
        prev[job] = js.finish[job]
    assert sim.finished_count == len(finished)
    # Work is conserved: progress within [0, duration], exactly the duration once finished.
    assert np.all(js.progress >= 0)
    assert np.all(js.progress <= sim.duration * (1 + 1e-9))
    np.testing.assert_allclose(js.progress[finished], sim.duration[finished])
    # Service is never ahead of the GPUs held: attained = GPUs x executed <= GPUs x held time.
    np.testing.assert_allclose(js.attained, sim.gpus * js.executed, rtol=1e-9, atol=1e-6)
    assert np.all(js.executed <= js.held + 1e-6)


@pytest.mark.parametrize("scenario,preemption", [("toy-v0", True), ("philly-v0", False),
                                                 ("philly-v0", True), ("openb-v0", True)])
def test_invariants_hold_after_every_step(scenario, preemption):
    kw = {} if scenario == "toy-v0" else {"jobs_per_episode": 120}
    env = cluster_env.parallel_env(scenario, split="train", preemption=preemption, **kw)
    rng = np.random.default_rng(5)
    for seed in (0, 1):
        obs, _ = env.reset(seed=seed)
        state: dict = {}
        while env.agents:
            obs, rewards, terms, truncs, infos = env.step(random_actions(obs, rng, lazy=0.5 if preemption else 0.0))
            check_invariants(env, state)
        sim = env.sim
        sim.sync_running()
        assert sim.finished_count == sim.num_jobs
        # Every job finished exactly once, after it was submitted and started.
        assert np.all(sim.jobs.finish >= sim.jobs.first_start)
        assert np.all(sim.jobs.first_start >= sim.submit)
        # GPU-seconds accounted by the cluster equal the sum over jobs of GPUs x held time.
        assert sim.busy_gpu_seconds == pytest.approx(float((sim.gpus * sim.jobs.held).sum()), rel=1e-9)
        if preemption and scenario != "toy-v0":
            assert sim.preemptions > 0
