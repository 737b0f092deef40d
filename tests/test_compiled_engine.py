"""The compiled baselines (baselines.engine) give the same episodes as the PettingZoo API path.

Each check runs one episode both ways and compares the whole record (every metric, the return,
the step count, the offered load) bit for bit. Windows are small (``jobs_per_episode``) to keep
CI fast; ``-m slow`` runs full scenario windows.
"""
from __future__ import annotations

import math

import pytest

from baselines import engine
from baselines.harness.episode import run_episode
from baselines.harness.scores import check_score_files, packaged_scores_file
from baselines.harness.sweep import Task, make_tasks, resolve_policy, run_tasks
from baselines.registry import make_policy

pytestmark = pytest.mark.skipif(not engine.available(), reason="the compiled engine needs numba kernels")

NAMED = ("fifo", "fifo-strict", "sjf", "las", "tiresias", "gittins", "srpt-clairvoyant", "random")
OTHER_PLACERS = ("fifo+fastest", "fifo+spread", "sjf+first-fit", "las+fastest", "las+spread",
                 "tiresias+fastest", "tiresias+first-fit", "fifo-strict+best-fit", "sjf+spread", "fifo+random",
                 "tiresias+random", "random+fastest", "random+best-fit", "las+clairvoyant", "fifo+clairvoyant",
                 "tiresias+clairvoyant", "srpt+fastest", "srpt+best-fit", "srpt+random", "oracle", "gittins+fastest",
                 "gittins+first-fit")
SCENARIOS = ("toy-v0", "philly-v0", "openb-v0", "openb-full-v0", "philly-v1", "openb-v1", "openb-full-v1",
             "philly-hetero-v1", "philly-hetero-v2", "modern-v1", "modern-v2", "philly-hetero-v3",
             "philly-slo-v1", "philly-tenants-v1")


def _same(a: dict, b: dict) -> dict:
    """Fields that differ between two records (wall time aside)."""
    out = {}
    for key in a:
        if key == "wall_s":
            continue
        x, y = a[key], b[key]
        if isinstance(x, float) and math.isnan(x) and isinstance(y, float) and math.isnan(y):
            continue
        if x != y or type(x) is not type(y):
            out[key] = (x, y)
    return out


def _compare(policy: str, scenario: str, seed: int, env_kwargs: dict) -> dict:
    # resolve_policy: as the harness builds it (gittins takes the scenario's training split).
    api = run_episode(resolve_policy(policy, scenario), scenario, "test", seed, env_kwargs).record
    compiled = engine.run_compiled_episode(policy, scenario, "test", seed, env_kwargs)
    assert compiled.engine == "compiled"
    diff = _same(api, compiled.record)
    assert not diff, f"{policy} on {scenario} seed {seed} {env_kwargs}: {diff}"
    return api


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("policy", NAMED)
def test_named_baselines_identical_to_api(scenario, policy):
    jobs = None if scenario == "toy-v0" else 60
    record = _compare(policy, scenario, 1, {} if jobs is None else {"jobs_per_episode": jobs})
    assert record["jobs_finished"] > 0


@pytest.mark.parametrize("policy", OTHER_PLACERS)
def test_compositions_identical_to_api(policy):
    for scenario in ("philly-hetero-v1", "openb-v0"):
        _compare(policy, scenario, 0, {"jobs_per_episode": 60})


def test_preemption_effects_exercised_and_identical():
    """LAS and Tiresias on philly-v0 (every effect on: fluctuation, stragglers, contention, spread
    penalty, restart overhead, measurement noise): preemptions, restarts and promotions happen."""
    for policy in ("las", "tiresias", "tiresias+fastest", "srpt-clairvoyant"):
        record = _compare(policy, "philly-v0", 0, {"jobs_per_episode": 200})
        assert record["preemptions"] > 0


@pytest.mark.parametrize("scenario", ("philly-v1", "openb-v1", "philly-hetero-v1"))
def test_gittins_identical_on_a_few_windows(scenario):
    """2D-Gittins (its GPU-service table from the scenario's training split): the compiled
    records are the API's on seeds 0-2 of 150-job windows."""
    for seed in (0, 1, 2):
        _compare("gittins", scenario, seed, {"jobs_per_episode": 150})


def test_gittins_identical_through_preemptions_and_promotions():
    """A full philly-v1 window (seed 0): 2D-Gittins preempts over a thousand times and promotes
    starving jobs (counted by the API orderer; shorter windows promote none), and the compiled
    record is the API's."""
    policy = resolve_policy("gittins", "philly-v1")
    api = run_episode(policy, "philly-v1", "test", 0).record
    compiled = engine.run_compiled_episode("gittins", "philly-v1", "test", 0)
    assert compiled.engine == "compiled" and not _same(api, compiled.record)
    assert api["preemptions"] > 1000 and policy.orderer.promotions > 0


def test_las_minimum_quantum_identical_and_binding():
    """LAS with a minimum quantum (las-q<minutes>, any placer) gives the API's records, and the
    quantum binds: fewer preemptions than plain LAS on the same window."""
    kw = {"jobs_per_episode": 200}
    for policy, plain in (("las-q5", "las"), ("las-q15+fastest", "las+fastest")):
        record = _compare(policy, "philly-v1", 0, kw)
        assert 0 < record["preemptions"] < _compare(plain, "philly-v1", 0, kw)["preemptions"]


def test_world_effects_one_by_one():
    """Each effect alone, and all off, on a heterogeneous cluster."""
    cases = [{"all_effects_off": True}, {"all_effects_off": True, "fluctuation": True},
             {"all_effects_off": True, "static_factors": True}, {"all_effects_off": True, "contention": True},
             {"all_effects_off": True, "spread_penalty": True},
             {"all_effects_off": True, "restart_overhead": 45.0, "measurement_noise": 0.05},
             {"scheduling_tick": 120.0, "running_window": 4, "pending_window": 5}]
    for kw in cases:
        _compare("tiresias+fastest", "philly-hetero-v1", 2, {"jobs_per_episode": 80, **kw})


def test_truncation_identical():
    """max_steps and max_time end the episode at the same step, with the same partial metrics."""
    record = _compare("las", "philly-v0", 0, {"jobs_per_episode": 100, "max_steps": 150})
    assert record["truncated"] and record["steps"] == 150
    record = _compare("fifo", "philly-v0", 0, {"jobs_per_episode": 100, "max_time": 20_000.0})
    assert record["truncated"]


@pytest.mark.parametrize("scenario,env_kwargs", [
    # A tiny tick: one decision per tick, so only the step bound ends the episode (the compiled
    # loop ran forever without it).
    ("toy-v0", {"scheduling_tick": 1e-6}),
    # A case once seen, on a small window: las is cut by the bound through the API.
    ("philly-hetero-v2", {"scheduling_tick": 0.5, "jobs_per_episode": 3}),
])
def test_default_step_bound_identical(scenario, env_kwargs):
    """Without max_steps both paths apply the harness's bound (DEFAULT_STEPS_PER_JOB steps per
    job): the same truncated record, cut at the same step."""
    from cluster_env.core.config import DEFAULT_STEPS_PER_JOB

    record = _compare("las", scenario, 0, env_kwargs)
    jobs = env_kwargs.get("jobs_per_episode", record["jobs_finished"] + record["jobs_unfinished"])
    assert record["truncated"] and record["jobs_unfinished"] > 0
    assert record["steps"] == DEFAULT_STEPS_PER_JOB * jobs


def test_harness_uses_compiled_engine_with_identical_records(monkeypatch):
    tasks = make_tasks(["fifo", "tiresias+fastest", "random", "srpt-clairvoyant", "sjf-noisy+fastest"], ["philly-v1"], "test", [3],
                       {"jobs_per_episode": 60})
    monkeypatch.delenv(engine.ENGINE_ENV_VAR, raising=False)
    auto = run_tasks(tasks, backend="serial")
    assert [r.engine for r in auto] == ["compiled", "compiled", "compiled", "compiled", "api"]
    monkeypatch.setenv(engine.ENGINE_ENV_VAR, "api")
    api = run_tasks(tasks, backend="serial")
    assert [r.engine for r in api] == ["api"] * 5
    for a, b in zip(api, auto):
        assert not _same(a.record, b.record)


def test_unsupported_requests_fall_back(monkeypatch):
    monkeypatch.delenv(engine.ENGINE_ENV_VAR, raising=False)
    kw = (("jobs_per_episode", 40),)
    for policy in ("sjf-noisy+first-fit", "sjf-noisy+consolidate", "sjf-noisy+clairvoyant", make_policy("fifo")):
        assert engine.policy_codes(policy) is None
        result = run_tasks([Task(policy, "philly-v0", "test", 0, kw)], backend="serial")[0]
        assert result.engine == "api"
    # The random orderer with preemption (its mask then holds running jobs, guarded per instant).
    result = run_tasks([Task("random", "philly-v0", "test", 0, kw + (("preemption", True),))], backend="serial")[0]
    assert result.engine == "api"
    recorded = run_tasks([Task("fifo", "philly-v0", "test", 0, kw, record=True)], backend="serial")[0]
    assert recorded.engine == "api" and recorded.series is not None
    reward = run_tasks([Task("fifo", "philly-v0", "test", 0, kw + (("reward", "cost"),))], backend="serial")[0]
    assert reward.engine == "api"
    layout = run_tasks([Task("fifo", "philly-v0", "test", 0, kw + (("observation", "extended"),))], backend="serial")[0]
    assert layout.engine == "api"
    monkeypatch.setenv(engine.ENGINE_ENV_VAR, "compiled")
    with pytest.raises(engine.Unsupported, match="no compiled rule"):
        run_tasks([Task("sjf-noisy+clairvoyant", "philly-v0", "test", 0, kw)], backend="serial")
    monkeypatch.setenv(engine.ENGINE_ENV_VAR, "bogus")
    with pytest.raises(ValueError, match=engine.ENGINE_ENV_VAR):
        run_tasks([Task("fifo", "philly-v0", "test", 0, kw)], backend="serial")


def test_scores_check_passes_with_compiled_engine():
    """The packaged toy-v0 scores (compiled where supported) still hold."""
    checks = check_score_files([(packaged_scores_file("toy-v0"), None)], backend="serial")
    assert checks[0].values > 0 and not checks[0].drifts


def test_env_reuse_does_not_leak_between_episodes():
    """The engine caches environments per settings; episodes stay independent of their order."""
    a = engine.run_compiled_episode("las", "openb-v0", "test", 4, {"jobs_per_episode": 50}).record
    engine.run_compiled_episode("las", "openb-v0", "test", 5, {"jobs_per_episode": 50})
    b = engine.run_compiled_episode("las", "openb-v0", "test", 4, {"jobs_per_episode": 50}).record
    assert not _same(a, b)


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_full_windows_identical_to_api(scenario):
    """Full scenario windows (what the scores files hold), every supported named baseline and the
    fastest-placer compositions, two seeds."""
    policies = NAMED + ("fifo+fastest", "las+fastest", "tiresias+fastest")
    if scenario == "openb-full-v1":     # LAS, Tiresias and srpt-clairvoyant take minutes there through the API
        policies = ("fifo", "fifo-strict", "sjf", "fifo+fastest")
    for policy in policies:
        for seed in (0, 1):
            _compare(policy, scenario, seed, {})
