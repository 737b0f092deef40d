"""Service objectives on every path: the compiled harness and the compiled vector env give the
API's objective metrics (one ``episode_metrics``), tenant quotas' ``quota_violation`` included:
the compiled engine keeps the simulator's allocation log for it (``build_state(log_capacity=...)``),
bounded by the step bound or grown before each vector step, and a missing log is an error."""
from __future__ import annotations

import math

import numpy as np
import pytest

from baselines import engine
from baselines.harness.episode import run_episode
from baselines.registry import make_policy
from cluster_env.core.objectives import OBJECTIVE_KEYS
from cluster_env.vector import ClusterVectorEnv

SMALL = {"jobs_per_episode": 60}


def _same(a: dict, b: dict) -> bool:
    return all(a[k] == b[k] or (isinstance(a[k], float) and math.isnan(a[k]) and math.isnan(b[k])) for k in a)


@pytest.mark.parametrize("policy", ["las-migrate", "fifo+first-fit"])
def test_the_compiled_harness_gives_the_api_objective_metrics(policy):
    compiled = engine.run_compiled_episode(policy, "philly-slo-v1", "test", 2, SMALL).record
    api = run_episode(make_policy(policy), "philly-slo-v1", "test", 2, env_kwargs=SMALL).record
    assert compiled["deadline_jobs"] > 0 and 0.0 <= compiled["deadline_attainment"] <= 1.0
    compiled.pop("wall_s"), api.pop("wall_s")
    assert list(compiled) == list(api)
    assert _same(compiled, api)
    assert [k for k in OBJECTIVE_KEYS if k in compiled] == [k for k in OBJECTIVE_KEYS if k != "quota_violation"]


def _random_episode(backend: str, scenario: str, log_entries_per_job: "int | None" = None) -> tuple[dict, object]:
    env = ClusterVectorEnv(1, scenario, "test", backend=backend, jobs_per_episode=60)
    if log_entries_per_job is not None:
        env.backend.log_entries_per_job = log_entries_per_job
        env.backend.log_sizes = []
    obs, _ = env.reset(seed=3)
    rng = np.random.default_rng(0)
    while True:
        if log_entries_per_job is not None:
            from cluster_env.core.engine.state import LOG_ITEMS

            env.backend.log_sizes.append(len(env.backend._states[0][LOG_ITEMS[0]]))
        actions = np.array([rng.choice(np.flatnonzero(mask)) for mask in obs["action_mask"]])
        obs, _, terminated, truncated, infos = env.step(actions)
        if terminated[0] or truncated[0]:
            metrics = infos["final_info"]["metrics"]
            return {k: float(v[0]) for k, v in metrics.items() if not k.startswith("_")}, env


def test_the_compiled_vector_env_reports_the_objective_metrics():
    (compiled, _), (python, _) = _random_episode("compiled", "philly-slo-v1"), _random_episode("python", "philly-slo-v1")
    assert "deadline_attainment" in compiled and compiled["deadline_jobs"] > 0
    assert list(compiled) == list(python) and _same(compiled, python)


def test_the_compiled_harness_measures_quota_violation_as_the_api_does():
    """fifo on philly-tenants-v1's test window 1 (a full window) falls short of a quota: the compiled
    episode's allocation log gives the API's quota_violation, bit for bit."""
    compiled = engine.run_compiled_episode("fifo", "philly-tenants-v1", "test", 1).record
    api = run_episode(make_policy("fifo"), "philly-tenants-v1", "test", 1).record
    assert compiled["quota_violation"] > 0.01
    compiled.pop("wall_s"), api.pop("wall_s")
    assert list(compiled) == list(api) and _same(compiled, api)


def test_the_compiled_vector_env_measures_quota_violation_growing_its_log_as_it_goes():
    python, _ = _random_episode("python", "philly-tenants-v1")
    assert python["quota_violation"] > 0
    compiled, env = _random_episode("compiled", "philly-tenants-v1", log_entries_per_job=0)
    assert type(env.backend).__name__ == "CompiledBackend"
    assert list(compiled) == list(python) and _same(compiled, python)
    # The log started at 64 entries and grew (the random orders preempt and restart jobs).
    assert max(env.backend.log_sizes) > 64


def test_a_full_allocation_log_is_an_error_not_a_short_metric(monkeypatch):
    from cluster_env.core.engine import state as engine_state

    real = engine_state.build_state
    monkeypatch.setattr(engine_state, "build_state",
                        lambda env, sim, log_capacity=0: real(env, sim, min(log_capacity, 3)))
    with pytest.raises(RuntimeError, match="the allocation log is full"):
        engine.run_compiled_episode("fifo", "philly-tenants-v1", "test", 1, SMALL)


def test_quota_metrics_without_the_allocation_log_are_an_error_not_a_missing_key():
    import cluster_env

    env = cluster_env.parallel_env("philly-tenants-v1", split="test", jobs_per_episode=20)
    env.reset(seed=0)
    env.unwrapped.sim.allocation_log = None
    with pytest.raises(ValueError, match="tenant quotas: quota_violation needs the episode's allocation log"):
        env.unwrapped.metrics()
