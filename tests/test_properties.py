"""Property-based tests: invariants under random clusters, workloads, switches and policies.

Hypothesis draws a cluster (GPU types, machine sizes), a workload (arrivals with ties, GPU counts
up to the whole cluster, very short and very long jobs, allowed GPU types, tenants), every world
switch and scheduling option, and a seeded random masked policy; after every step the checks of
:func:`check_step` run and at the end of the episode those of :func:`check_final`.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cluster_env
from cluster_env.core.config import SchedulingConfig, WorldConfig
from cluster_env.core.instance import Cluster, LoadReport, Workload
from cluster_env.core.simulator import FINISHED, NOT_ARRIVED, PENDING, RUNNING
from cluster_env.scenarios.base import Scenario
from cluster_env.scenarios.registry import WHOLE_SPLITS
from cluster_env.world.fluctuation import STATIC_FACTOR_BOUNDS
from cluster_env.world.throughputs import JOB_TYPES
from tests.helpers import random_actions

GPU_TYPES = ("K80", "P100", "V100", "P40", "T4", "A100", "H800", "A10", "V100M32", "MISC", "G2")
MACHINE_SIZES = (1, 2, 3, 4, 8, 16)
SWITCHES = ("static_factors", "fluctuation", "contention", "spread_penalty", "restart_overhead")
MAX_STEPS = 4000          # safety net: a random preempting policy ends well before


# ----------------------------------------------------------------------------- instances
def make_cluster(machines: list[tuple[str, int]]) -> Cluster:
    return Cluster.from_machines("gen", [(f"m{i}", t, g) for i, (t, g) in enumerate(machines)])


def make_workload(jobs: list[tuple], cluster: Cluster) -> Workload:
    """jobs: (submit, duration, gpus, job_type, tenant, allowed or None), sorted by submit."""
    n = len(jobs)
    allowed = tuple(j[5] for j in jobs)
    return Workload(
        name="gen", job_ids=tuple(f"j{i}" for i in range(n)),
        submit=np.array([j[0] for j in jobs], dtype=np.float64),
        duration=np.array([j[1] for j in jobs], dtype=np.float64),
        gpus=np.array([j[2] for j in jobs], dtype=np.int64),
        job_type=np.array([j[3] for j in jobs], dtype=np.int64),
        tenant=np.array([j[4] for j in jobs], dtype=np.int64),
        allowed_gpu_types=allowed if any(a is not None for a in allowed) else None,
        source_row=np.arange(1, n + 1, dtype=np.int64),
        report=LoadReport(source="generated", rows_read=n, rows_kept=n))


def make_scenario(cluster: Cluster, workload: Workload, reference: str = "V100") -> Scenario:
    return Scenario(name="generated-v0", description="hypothesis instance", cluster=lambda: cluster,
                    workload=lambda: workload, splits=dict(WHOLE_SPLITS),
                    world=WorldConfig(reference_gpu=reference), scheduling=SchedulingConfig(),
                    workload_file="generated")


@st.composite
def clusters(draw, max_machines: int = 5) -> Cluster:
    n = draw(st.integers(1, max_machines))
    kinds = draw(st.lists(st.sampled_from(GPU_TYPES), min_size=1, max_size=3, unique=True))
    return make_cluster([(draw(st.sampled_from(kinds)), draw(st.sampled_from(MACHINE_SIZES)))
                         for _ in range(n)])


@st.composite
def workloads(draw, cluster: Cluster, max_jobs: int = 10, long_jobs: bool = False) -> Workload:
    """Arrivals with ties (gap 0), jobs as large as the cluster, very short and long durations."""
    n = draw(st.integers(1, max_jobs))
    per_type = cluster.gpus_of_type()
    total = cluster.total_gpus
    gap = st.one_of(st.just(0.0), st.floats(1e-3, 5.0), st.floats(5.0, 2000.0))
    if long_jobs:
        duration = st.one_of(st.floats(1e-3, 1.0), st.floats(1.0, 1e4), st.floats(1e6, 3e8))
    else:
        duration = st.one_of(st.floats(1e-3, 1.0), st.floats(1.0, 600.0), st.floats(600.0, 3000.0))
    restrict = draw(st.booleans()) and len(per_type) > 1
    t = 0.0
    jobs = []
    for i in range(n):
        t += draw(gap) if i else draw(st.sampled_from([0.0, 17.0]))
        allowed = None
        cap = total
        if restrict and draw(st.booleans()):
            kinds = draw(st.lists(st.sampled_from(sorted(per_type)), min_size=1, max_size=2, unique=True))
            allowed = frozenset(kinds)
            cap = sum(per_type[k] for k in kinds)
        gpus = draw(st.one_of(st.just(cap), st.integers(1, cap), st.integers(1, min(cap, 2))))
        jobs.append((t, draw(duration), gpus, draw(st.integers(0, len(JOB_TYPES) - 1)),
                     draw(st.integers(0, 3)), allowed))
    return make_workload(jobs, cluster)


@st.composite
def overrides(draw) -> dict:
    """Every world switch and scheduling option the environment takes as an override."""
    preemption = draw(st.booleans())
    return {
        "static_factors": draw(st.booleans()),
        "fluctuation": draw(st.booleans()),
        "contention": draw(st.booleans()),
        "spread_penalty": draw(st.booleans()),
        "restart_overhead": draw(st.sampled_from([0.0, 0.5, 30.0, 400.0])),
        "preemption": preemption,
        "clairvoyant": draw(st.booleans()),
        "pending_window": draw(st.integers(1, 6)),
        "running_window": draw(st.integers(0, 4)),
        "scheduling_tick": draw(st.sampled_from([60.0, 300.0])),
        "max_steps": MAX_STEPS,
        "max_time": draw(st.sampled_from([None, None, None, 50.0, 2000.0])),
    }


# ----------------------------------------------------------------------------- checks
@dataclass
class Tracker:
    """What the checks remember between steps."""

    now: float = 0.0
    finish: dict = field(default_factory=dict)
    progress: np.ndarray | None = None
    status: np.ndarray | None = None
    reward: float = 0.0
    steps: int = 0


def check_obs(env, obs) -> None:
    """Every observation lies in its space; masks allow at least one action, phases hold."""
    assert set(obs) == set(env.possible_agents)
    for agent, o in obs.items():
        space = env.observation_space(agent)
        bad = [k for k in space.spaces if not space[k].contains(o[k])]
        assert not bad, (agent, bad, {k: o[k] for k in bad})
        assert o["action_mask"].dtype == np.int8 and o["action_mask"].sum() >= 1
    if env.agents:
        placing = env.phase == 1
        idle = "orderer" if placing else "placer"
        mask = obs[idle]["action_mask"]
        assert mask[-1] == 1 and mask[:-1].sum() == 0, (idle, mask)


def check_step(env, obs, rewards, infos, tr: Tracker) -> None:
    sim = env.sim
    sim.sync_running()
    js = sim.jobs
    check_obs(env, obs)
    # Both agents get the same finite, non-positive (JCT) reward.
    r = rewards["orderer"]
    assert rewards["placer"] == r and math.isfinite(r) and r <= 0.0
    tr.reward += r
    # The clock never goes back.
    assert infos["orderer"]["time"] == sim.now >= tr.now
    tr.now = sim.now
    # No GPU given twice, none beyond capacity.
    held = np.zeros(sim.num_machines, dtype=np.int64)
    for job, alloc in sim.alloc.items():
        for m, g in alloc:
            assert g >= 1
            held[m] += g
            if sim.allowed is not None:
                assert sim.allowed[job, sim.machine_type[m]], (job, m)
    assert np.all(sim.machines.free >= 0)
    np.testing.assert_array_equal(held + sim.machines.free, sim.machine_gpus)
    assert sim.free_total == int(sim.machines.free.sum())
    np.testing.assert_array_equal(
        sim.free_per_type, np.bincount(sim.machine_type, weights=sim.machines.free,
                                       minlength=sim.num_types).astype(np.int64))
    # Statuses agree with the queues; every running job holds exactly its GPUs.
    running = set(sim.running)
    assert running == set(np.flatnonzero(js.status == RUNNING).tolist())
    for job in running:
        assert sum(g for _, g in sim.alloc[job]) == sim.gpus[job]
    assert sim.pending == sorted(np.flatnonzero(js.status == PENDING).tolist())
    assert np.all(js.status[sim.next_arrival:] == NOT_ARRIVED)
    assert np.all(sim.submit[: sim.next_arrival] <= sim.now)
    if sim.placing >= 0:
        assert js.status[sim.placing] == PENDING
    # Each job finishes exactly once: a finished job stays finished with the same finish time.
    finished = np.flatnonzero(js.status == FINISHED)
    assert sim.finished_count == len(finished)
    assert np.array_equal(np.isnan(js.finish), js.status != FINISHED)
    for job in finished.tolist():
        assert tr.finish.setdefault(job, js.finish[job]) == js.finish[job]
    if tr.status is not None:
        assert not np.any((tr.status == FINISHED) & (js.status != FINISHED))
    # Work is conserved: progress never decreases (a preempted job keeps it), never exceeds the
    # job's work, and equals it once the job finished.
    if tr.progress is not None:
        assert np.all(js.progress >= tr.progress - 1e-9 * sim.duration)
    assert np.all(js.progress >= 0) and np.all(js.progress <= sim.duration * (1 + 1e-9))
    np.testing.assert_array_equal(js.progress[finished], sim.duration[finished])
    tr.progress, tr.status = js.progress.copy(), js.status.copy()
    # Service never runs ahead of the GPUs held.
    np.testing.assert_allclose(js.attained, sim.gpus * js.executed, rtol=1e-9, atol=1e-6)
    assert np.all(js.executed <= js.held + 1e-6)
    # Infos name the candidate rows of the observation.
    ids = infos["orderer"]["job_ids"]
    valid = obs["orderer"]["jobs"][:, 0] > 0
    np.testing.assert_array_equal(ids >= 0, valid)
    tr.steps += 1


def fewest_machines(sim, job: int) -> int:
    """The fewest machines of the job's allowed types that can hold it (the spread penalty's
    reference), counted here independently of the simulator."""
    if sim.world.spread_reference == "one_machine":
        return 1
    usable = [int(g) for m, g in enumerate(sim.machine_gpus)
              if sim.allowed is None or sim.allowed[job, sim.machine_type[m]]]
    need, count = int(sim.gpus[job]), 0
    for g in sorted(usable, reverse=True):
        need -= g
        count += 1
        if need <= 0:
            break
    return count


def replay_allocations(sim):
    """Per run (launch to release or end) from the allocation log: (job, start, end, alloc)."""
    open_runs: dict[int, tuple[float, list]] = {}
    runs = []
    for t, job, alloc in sim.allocation_log:
        if alloc is None:
            t0, a = open_runs.pop(job)
            runs.append((job, t0, t, a))
        else:
            assert job not in open_runs
            open_runs[job] = (t, alloc)
    for job, (t0, a) in open_runs.items():
        runs.append((job, t0, sim.now, a))
    return runs


def check_final(env, infos, tr: Tracker, ov: dict) -> None:
    sim = env.sim
    sim.sync_running()
    js = sim.jobs
    m = infos["orderer"]["metrics"]
    assert_same(m, infos["placer"]["metrics"])
    assert_same(m, env.metrics())
    assert set(m) == set(cluster_env.METRIC_KEYS)
    assert all(math.isfinite(v) or k.endswith(("jct", "delay", "pending_time", "slowdown")) for k, v in m.items())
    done = sim.done
    finished = ~np.isnan(js.finish)
    assert m["jobs_finished"] == int(finished.sum()) == sim.finished_count
    if done:
        # Every job finished exactly once, after it was submitted and started.
        assert np.all(js.status == FINISHED)
        assert np.all(js.finish >= js.first_start) and np.all(js.first_start >= sim.submit)
        jct = js.finish - sim.submit
        assert m["avg_jct"] == pytest.approx(jct.mean(), rel=1e-12)
        assert m["p50_jct"] <= m["p95_jct"] <= m["p99_jct"] <= jct.max() * (1 + 1e-12)
        assert 0 <= m["avg_queue_delay"] <= m["avg_jct"]
        assert m["makespan"] == pytest.approx(js.finish.max() - sim.submit.min(), rel=1e-12)
        assert sim.now == js.finish.max()
        # JCT is at least the ideal runtime, up to what hidden machine factors can speed up.
        if not ov["fluctuation"]:
            speedup = STATIC_FACTOR_BOUNDS[1] if ov["static_factors"] else 1.0
            assert np.all(jct * speedup >= sim.ideal_runtime * (1 - 1e-9)), (jct, sim.ideal_runtime)
            assert m["avg_slowdown"] * speedup >= 1 - 1e-9
        # The return is minus the average JCT in hours (reward = -job-seconds / (N * 3600)).
        assert tr.reward == pytest.approx(-jct.sum() / (sim.num_jobs * 3600.0), rel=1e-9, abs=1e-12)
    assert 0.0 <= m["gpu_utilization"] <= 1.0 + 1e-12
    assert 0.0 < m["fairness"] <= 1.0 + 1e-12
    assert m["preemptions"] == int(js.restarts.sum()) == sim.preemptions
    if not ov["preemption"]:
        assert m["preemptions"] == 0
    # GPU-seconds, fee and energy agree with an independent replay of the allocation log.
    runs = replay_allocations(sim)
    gpu_s = sum(g * (t1 - t0) for _, t0, t1, a in runs for _, g in a)
    fee = sum(g * sim.price[sim.machine_type[mm]] / 3600.0 * (t1 - t0)
              for _, t0, t1, a in runs for mm, g in a)
    extra = sum(g * (sim.busy_watts - sim.idle_watts)[sim.machine_type[mm]] * (t1 - t0)
                for _, t0, t1, a in runs for mm, g in a)
    energy = (float(sim.gpus_per_type @ sim.idle_watts) * sim.now + extra) / 3.6e6
    assert m["total_fee"] >= 0 and m["energy_kwh"] >= 0
    assert sim.busy_gpu_seconds == pytest.approx(gpu_s, rel=1e-9, abs=1e-9)
    assert sim.busy_gpu_seconds == pytest.approx(float((sim.gpus * js.held).sum()), rel=1e-9, abs=1e-9)
    assert m["total_fee"] == pytest.approx(fee, rel=1e-9, abs=1e-12)
    assert m["energy_kwh"] == pytest.approx(energy, rel=1e-9, abs=1e-12)
    if m["makespan"] > 0:
        assert m["gpu_utilization"] == pytest.approx(gpu_s / (sim.total_gpus * m["makespan"]), rel=1e-9)
    # Work conservation, run by run, where speeds are constant over a run (no fluctuation, no
    # contention): sum over runs of speed x execution time = the job's work.
    if not ov["fluctuation"] and not ov["contention"]:
        work = np.zeros(sim.num_jobs)
        seen_run = set()
        for job, t0, t1, a in sorted(runs, key=lambda r: (r[1], r[0])):
            machines = [mm for mm, _ in a]
            types = sim.machine_type[machines]
            speed = float(sim.job_speed[job, types].min())
            if len(machines) > fewest_machines(sim, job):
                speed *= float(sim.job_spread[job, types].min())
            speed *= float(sim.machines.static[machines].min())
            overhead = sim.world.restart_overhead if job in seen_run else 0.0
            seen_run.add(job)
            work[job] += speed * max(t1 - (t0 + overhead), 0.0)
        np.testing.assert_allclose(work, js.progress, rtol=1e-6, atol=1e-6)


def run_checked(env, seed: int, policy_seed: int, lazy: float, ov: dict, unmasked: float = 0.0):
    """One episode under a seeded random masked policy with every check; returns a log. With
    ``unmasked`` > 0 (``invalid_action="noop"``), that fraction of actions ignores the masks."""
    rng = np.random.default_rng(policy_seed)
    obs, infos = env.reset(seed=seed)
    env.sim.allocation_log = []          # reset never launches a job: the log is complete
    tr = Tracker(now=env.sim.now)
    check_obs(env, obs)
    log = [({a: {k: v.copy() for k, v in o.items()} for a, o in obs.items()}, infos)]
    terms = truncs = {a: False for a in env.possible_agents}
    while env.agents:
        actions = random_actions(obs, rng, lazy=lazy)
        if unmasked and rng.random() < unmasked:
            actions = {a: int(rng.integers(env.action_space(a).n)) for a in actions}
        masks = {a: o["action_mask"] for a, o in obs.items()}
        before = (env.sim.now, env.sim.placing, env.sim.free_total, env.phase)
        obs, rewards, terms, truncs, infos = env.step(actions)
        # An action the mask forbids is flagged, and a step whose acting agent was refused
        # changes nothing but the step count.
        for a in actions:
            assert infos[a].get("invalid_action", False) == (not masks[a][actions[a]])
        acting = "placer" if before[3] == 1 else "orderer"
        if not masks[acting][actions[acting]] and env.agents:
            assert (env.sim.now, env.sim.placing, env.sim.free_total, env.phase) == before
            assert rewards["orderer"] == 0.0
        check_step(env, obs, rewards, infos, tr)
        log.append((actions, rewards, obs, infos))
        if env.agents:          # the episode goes on only within its limits
            assert tr.steps < MAX_STEPS and env.sim.now < (ov.get("max_time") or math.inf)
    assert all(terms.values()) != all(truncs.values())
    assert all(terms.values()) == env.sim.done
    if all(truncs.values()):
        assert tr.steps == MAX_STEPS or env.sim.now >= ov["max_time"]
    check_final(env, infos, tr, ov)
    return log, infos["orderer"]["metrics"]


@st.composite
def cases(draw, long_jobs: bool = False):
    cluster = draw(clusters())
    workload = draw(workloads(cluster, long_jobs=long_jobs))
    ov = draw(overrides())
    if long_jobs:           # long jobs: few events only when periodic events are off
        ov.update(fluctuation=False, preemption=False)
    reference = draw(st.sampled_from(["V100", "P100", "K80", "A100", "T4", "H800"]))
    return cluster, workload, ov, reference


def _env(cluster, workload, ov, reference):
    return cluster_env.parallel_env(make_scenario(cluster, workload, reference), split="train", **ov)


PROPS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow],
                 derandomize=True)


@PROPS
@given(case=cases(), seed=st.integers(0, 2**31 - 1), lazy=st.sampled_from([0.0, 0.3, 0.7]))
def test_invariants_random_instances_switches_and_policies(case, seed, lazy):
    cluster, workload, ov, reference = case
    if ov["preemption"] and lazy == 0.0:
        lazy = 0.3            # a preempting random policy must advance now and then
    run_checked(_env(*case), seed, seed + 1, lazy, ov)


@PROPS
@given(case=cases(long_jobs=True), seed=st.integers(0, 2**31 - 1))
def test_invariants_with_very_long_and_very_short_jobs(case, seed):
    cluster, workload, ov, reference = case
    run_checked(_env(*case), seed, seed + 1, 0.3, ov)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(case=cases(), seed=st.integers(0, 2**31 - 1))
def test_invariants_with_unmasked_random_actions_in_noop_mode(case, seed):
    """Agents that cannot mask: 30% of the actions ignore the masks; refused ones change nothing."""
    cluster, workload, ov, reference = case
    ov = {**ov, "invalid_action": "noop"}
    run_checked(_env(cluster, workload, ov, reference), seed, seed + 1, 0.3, ov, unmasked=0.3)


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases(), long_case=cases(long_jobs=True), seed=st.integers(0, 2**31 - 1),
       lazy=st.sampled_from([0.0, 0.3, 0.7]))
def test_invariants_bigger_budget(case, long_case, seed, lazy):
    """The two properties above with ten times the examples, not derandomized (``-m slow``)."""
    ov = case[2]
    run_checked(_env(*case), seed, seed + 1, max(lazy, 0.3) if ov["preemption"] else lazy, ov)
    run_checked(_env(*long_case), seed, seed + 2, 0.3, long_case[2])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(case=cases(), seed=st.integers(0, 2**31 - 1))
def test_same_seed_same_whole_trajectory(case, seed):
    """Two runs with the same seed and actions agree on every observation, reward and info; a
    reused environment (another episode in between) agrees with a fresh one."""
    cluster, workload, ov, reference = case
    lazy = 0.5 if ov["preemption"] else 0.0
    a, ma = run_checked(_env(*case), seed, 3, lazy, ov)
    env = _env(*case)
    run_checked(env, seed + 1, 4, lazy, ov)
    b, mb = run_checked(env, seed, 3, lazy, ov)
    assert_same_logs(a, b)
    assert_same(ma, mb)


def assert_same_logs(a, b) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert_same(x, y)


def assert_same(x, y) -> None:
    if isinstance(x, dict):
        assert isinstance(y, dict) and set(x) == set(y)
        for k in x:
            assert_same(x[k], y[k])
    elif isinstance(x, (tuple, list)):
        assert type(x) is type(y) and len(x) == len(y)
        for u, v in zip(x, y):
            assert_same(u, v)
    elif isinstance(x, np.ndarray):
        np.testing.assert_array_equal(x, y)
        assert x.dtype == y.dtype
    elif isinstance(x, float) and math.isnan(x):
        assert isinstance(y, float) and math.isnan(y)
    else:
        assert x == y and type(x) is type(y), (x, y)


# ----------------------------------------------------------------------------- every switch
_INSTANCE = None


def _fixed_instance():
    """A small seeded instance with multi-machine jobs, ties and a job as large as the cluster."""
    global _INSTANCE
    if _INSTANCE is None:
        cluster = make_cluster([("V100", 4), ("K80", 2), ("P100", 8), ("T4", 1)])
        rng = np.random.default_rng(11)
        jobs, t = [], 0.0
        for i in range(14):
            t += float(rng.choice([0.0, 3.0, 250.0]))
            gpus = cluster.total_gpus if i == 5 else int(rng.integers(1, 9))
            allowed = frozenset({"V100", "P100"}) if i % 4 == 3 else None
            jobs.append((t, float(rng.uniform(20, 1500)), gpus, int(rng.integers(0, len(JOB_TYPES))),
                         i % 3, allowed))
        _INSTANCE = (cluster, make_workload(jobs, cluster))
    return _INSTANCE


@pytest.mark.parametrize("switches", list(itertools.product([False, True], repeat=len(SWITCHES))),
                         ids=lambda s: "".join("1" if b else "0" for b in s))
def test_every_combination_of_world_switches(switches):
    cluster, workload = _fixed_instance()
    ov = dict(zip(SWITCHES, switches))
    ov["restart_overhead"] = 30.0 if ov["restart_overhead"] else 0.0
    k = sum(b << i for i, b in enumerate(switches))
    # The scheduling options cycle with the world switches so that each pair of values meets.
    ov.update(preemption=bool(k & 1) != switches[0], clairvoyant=bool(k & 2) != switches[1],
              pending_window=1 + k % 3, running_window=k % 4, max_steps=MAX_STEPS)
    env = cluster_env.parallel_env(make_scenario(cluster, workload), split="train", **ov)
    log, metrics = run_checked(env, seed=k, policy_seed=k, lazy=0.5, ov=ov)
    assert metrics["jobs_finished"] == workload.num_jobs


def test_very_long_slow_jobs_finish_beyond_the_clocks_microsecond_resolution():
    """Regression: past ~1.7e10 s half an ulp of the clock exceeds the microsecond completion
    tolerance; a job whose finish time rounded to ``now`` never finished (zero-length advances
    forever). Seven slow K80 jobs of 1e9 to 3e9 s of H800 work end near 1e11 s."""
    from cluster_env.core.simulator import ClusterSimulator

    cluster = make_cluster([("K80", 8)])
    rng = np.random.default_rng(15)
    n = 8
    dur = np.sort(rng.uniform(1e9, 3e9, n))
    workload = make_workload([(0.0, float(d), 1, 0, 0, None) for d in dur], cluster)
    world = WorldConfig(reference_gpu="H800", fluctuation=False)
    sim = ClusterSimulator(cluster, workload, world, np.random.default_rng(15))
    for j in range(n):
        sim.start(j)
        sim.place(0)
    events = 0
    while not sim.done and events < 100:
        sim.advance()
        events += 1
    assert sim.done, (sim.now, sim._s_left[: sim._n], sim._s_rate[: sim._n])
    assert sim.now > 1.7e10 and events <= 2 * n
    np.testing.assert_array_equal(sim.jobs.progress, workload.duration)
