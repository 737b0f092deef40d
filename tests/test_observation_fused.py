"""The compiled fill of the ``extended`` and ``extended-v2`` columns (``observation_fused``) and the
compiled running window (``kernels.rank_running``) give the numpy path's bits: every observation
array, mask, reward and candidate list of busy windows, step by step, against the builder's numpy
path on the same kernels and against the numpy kernel backend."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import baselines
import cluster_env
from cluster_env.core import kernels
from cluster_env.core.simulator import ClusterSimulator

pytestmark = pytest.mark.skipif("numba" not in kernels.available(), reason="the fused columns need numba kernels")

ARRAYS = ("jobs", "machines", "global", "placing", "action_mask")


def restricted_hetero_scenario():
    """philly-hetero-v2 where every third job may not use the fastest GPU type (V100)."""
    from cluster_env.scenarios import get_scenario

    base = get_scenario("philly-hetero-v2")
    names = base.cluster().gpu_type_names
    workload = base.workload()
    allowed = tuple(frozenset(names[:2]) if j % 3 == 0 else None for j in range(workload.num_jobs))
    return replace(base, name="philly-hetero-v2-restricted", workload=lambda: replace(workload, allowed_gpu_types=allowed))


def _env(backend: str, scenario, observation: str, seed: int, **env_kwargs):
    """An environment reset on ``backend``'s kernels (its simulator keeps them)."""
    with kernels.use(backend):
        env = cluster_env.parallel_env(scenario, split="test", observation=observation, **env_kwargs)
        obs, infos = env.reset(seed=seed)
    return env, obs, infos


def _assert_same(step: int, a: tuple, b: tuple) -> None:
    """Two steps' (obs, rewards, terminations, truncations, infos): the same bits."""
    for agent in ("orderer", "placer"):
        for key in ARRAYS:
            x, y = a[0][agent][key], b[0][agent][key]
            assert x.dtype == y.dtype and x.shape == y.shape, (step, agent, key)
            assert x.tobytes() == y.tobytes(), f"step {step}: {agent}'s {key} differs"
    assert a[1:4] == b[1:4], step
    np.testing.assert_array_equal(a[4]["orderer"]["job_ids"], b[4]["orderer"]["job_ids"])


def _lockstep(scenario, observation: str, policy: str, seed: int, **env_kwargs) -> dict:
    """Play one episode with the compiled fill (numba kernels), acting on its observations, and
    replay each action in the same state with the builder's numpy path (numba kernels) and with
    the numpy backend; every step must show the same bits. Returns what the episode covered."""
    fused = _env("numba", scenario, observation, seed, **env_kwargs)
    numpy_path = _env("numba", scenario, observation, seed, **env_kwargs)
    numpy_path[0].unwrapped.builder.fused_columns = False
    reference = _env("numpy", scenario, observation, seed, **env_kwargs)
    builder = fused[0].unwrapped.builder
    assert builder._columns is not None and reference[0].unwrapped.builder._columns is None
    states = [(o, {}, {}, {}, i) for _, o, i in (fused, numpy_path, reference)]
    _assert_same(0, states[0], states[1])
    _assert_same(0, states[0], states[2])
    pol = baselines.make_policy(policy)
    pol.reset(seed)
    seen = {"steps": 0, "running_rows": 0, "spread_rows": 0, "finished": 0}
    obs, infos = fused[1], fused[2]
    env = fused[0]
    while env.agents:
        action = pol.act(obs, infos)
        results = [e.step(dict(action)) for e, _, _ in (fused, numpy_path, reference)]
        seen["steps"] += 1
        _assert_same(seen["steps"], results[0], results[1])
        _assert_same(seen["steps"], results[0], results[2])
        obs, infos = results[0][0], results[0][4]
        jobs = obs["orderer"]["jobs"]
        running = jobs[:, 1] > 0.5
        seen["running_rows"] += int(running.sum())
        if jobs.shape[1] > len(builder.job_features) - 8 and observation == "extended-v2":
            seen["spread_rows"] += int((jobs[running, -8] > 1).sum())
    seen["finished"] = env.unwrapped.sim.finished_count
    seen["sim"] = env.unwrapped.sim
    return seen


@pytest.mark.parametrize("observation, policy, restricted", [
    ("extended-v2", "las-migrate", False),      # moves, jobs spread over machines
    ("extended-v2", "fifo+random", True),       # spread over GPU types; a third may not use V100s
    ("extended", "las+fastest", False),
])
def test_fused_columns_equal_the_numpy_path_bit_for_bit(observation, policy, restricted):
    scenario = restricted_hetero_scenario() if restricted else "philly-hetero-v2"
    seen = _lockstep(scenario, observation, policy, 3, jobs_per_episode=150, preemption=True)
    assert seen["steps"] > 500 and seen["running_rows"] > 2000 and seen["finished"] > 100
    if observation == "extended-v2":
        assert seen["spread_rows"] > 0


def test_fused_columns_read_spread_jobs_from_a_compacted_pool(monkeypatch):
    """Machine and GPU pools far too small: they fill, compact and grow while spread jobs run,
    and the placement columns still read each job's allocation right."""
    original = ClusterSimulator.__init__

    def tiny_pools(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self._mpool = np.zeros(3, dtype=np.int64)
        self._gpool = np.zeros(3, dtype=np.int64)

    monkeypatch.setattr(ClusterSimulator, "__init__", tiny_pools)
    seen = _lockstep("philly-hetero-v2", "extended-v2", "fifo+spread", 1, jobs_per_episode=120, preemption=True)
    assert seen["spread_rows"] > 50 and len(seen["sim"]._mpool) > 3
    sim = seen["sim"]
    assert len(sim._gpool) == len(sim._mpool)


@pytest.mark.skipif(kernels.active().name != "numba", reason="the machine and GPU pools are the numba kernels' "
                    "(CLUSTER_ENV_KERNELS=numpy keeps no pools)")
def test_the_gpu_pool_holds_each_spread_jobs_allocation():
    from tests.helpers import policy_steps

    spread = 0
    for env, _, _ in policy_steps("philly-hetero-v2", "extended-v2", 2, "fifo+spread", jobs_per_episode=100):
        sim = env.unwrapped.sim
        for k in range(sim.num_running):
            if sim._s_multi[k]:
                job, off, size = int(sim._s_job[k]), int(sim._s_moff[k]), int(sim._s_mlen[k])
                assert list(zip(sim._mpool[off:off + size].tolist(), sim._gpool[off:off + size].tolist())) == sim.alloc[job]
                spread += 1
    assert spread > 100


def test_rank_running_is_sync_running_and_lexsort():
    """The compiled window: the same job-state writes as ``sync_running`` and the order of
    ``np.lexsort((jobs, -attained))``, ties (equal attained service) by job id, any window size."""
    env, obs, infos = _env("numba", "philly-hetero-v2", "default", 0, jobs_per_episode=200, preemption=True)
    sim = env.unwrapped.sim
    pol = baselines.make_policy("fifo")
    pol.reset(0)
    checked = ties = 0
    while env.agents and checked < 300:
        obs, _, _, _, infos = env.step(pol.act(obs, infos))
        n = sim.num_running
        if not n:
            continue
        rng = np.random.default_rng(checked)
        block = sim._job_block.copy()
        sim.sync_running()
        expected_block = sim._job_block.copy()
        run = sim.running_jobs()
        order = run[np.lexsort((run, -sim.jobs.attained[run]))]
        ties += len(order) - len(np.unique(sim.jobs.attained[run]))
        for size in (1, int(rng.integers(1, n + 1)), n, n + 5):
            sim._job_block[:] = block
            out = np.full(min(size, n), -7, dtype=np.int64)
            count = sim._k.rank_running(n, sim.now, sim._s_float, sim._s_int, sim._job_block, sim.duration,
                                        sim.gpus, out)
            assert count == min(size, n)
            np.testing.assert_array_equal(out, order[:size])
            assert sim._job_block.tobytes() == expected_block.tobytes()
        checked += 1
    assert checked == 300 and ties > 0


def _two_machine_scenario():
    """Two 4-GPU V100 machines, every effect off; at t=0 a 100 s 2-GPU job (0), a long 2-GPU
    job (1) and a long 4-GPU job (2) arrive."""
    from cluster_env.core.config import SchedulingConfig, WorldConfig
    from cluster_env.core.instance import Cluster
    from cluster_env.scenarios.base import Scenario
    from tests.helpers import make_workload

    workload = make_workload([0.0, 0.0, 0.0], [100.0, 10_000.0, 10_000.0], [2, 2, 4])
    cluster = Cluster.from_machines("two-v100", [("a", "V100", 4), ("b", "V100", 4)])
    whole = {s: (0.0, 1.0) for s in ("train", "validation", "test")}
    return Scenario(name="two-v100", description="a spread job whose machine frees", cluster=lambda: cluster,
                    workload=lambda: workload, splits=whole,
                    world=WorldConfig(reference_gpu="V100").all_effects_off(),
                    scheduling=SchedulingConfig(scheduling_tick=300.0))


def test_a_spread_job_counts_its_own_gpus_on_a_machine_that_frees():
    """Job 2 is spread 2 + 2 over both machines; when job 0 ends, machine 0 has 2 free GPUs and
    job 2's own 2: it could run there whole, so ``best_free_speed`` is machine 0's speed (it reads
    the GPUs the job holds per machine from the pool)."""
    from cluster_env.envs.observation_place import PLACEMENT_JOB_FEATURES

    runs = []
    for fused in (True, False):
        env, obs, _ = _env("numba", _two_machine_scenario(), "extended-v2", 0, preemption=True)
        env.unwrapped.builder.fused_columns = fused
        builder = env.unwrapped.builder
        noop_order, noop_place = builder.K + builder.R, builder.M
        plays = [(0, noop_place), (noop_order, 0), (0, noop_place), (noop_order, 1),     # job 0 on a, job 1 on b
                 (0, noop_place), (noop_order, 0), (noop_order, 1),                      # job 2 on a and b
                 (noop_order, noop_place)]                                               # advance: job 0 ends
        for order, place in plays:
            obs, *_, infos = env.step({"orderer": order, "placer": place})
        sim = env.unwrapped.sim
        assert sim.now == 100.0 and sim.alloc[2] == [(0, 2), (1, 2)] and sim.finished_count == 1
        ids = list(infos["orderer"]["job_ids"])
        row = obs["orderer"]["jobs"][ids.index(2), -len(PLACEMENT_JOB_FEATURES):]
        runs.append(row)
    col = dict(zip(PLACEMENT_JOB_FEATURES, runs[0]))
    assert col["machines_used"] == 2 and col["best_free_speed"] == col["current_speed"] > 0
    assert col["speedup_free"] == 1.0
    assert runs[0].tobytes() == runs[1].tobytes()
