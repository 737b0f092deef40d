"""Service objectives on every path: the compiled harness and the compiled vector env give the
API's objective metrics (one ``episode_metrics``), and a workload with tenant quotas, whose
``quota_violation`` needs the simulator's allocation log, is refused in one line where it cannot
be measured (the automatic choices then take the API / Python path)."""
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


def _random_episode(backend: str, scenario: str) -> dict:
    env = ClusterVectorEnv(1, scenario, "test", backend=backend, jobs_per_episode=60)
    obs, _ = env.reset(seed=3)
    rng = np.random.default_rng(0)
    while True:
        actions = np.array([rng.choice(np.flatnonzero(mask)) for mask in obs["action_mask"]])
        obs, _, terminated, truncated, infos = env.step(actions)
        if terminated[0] or truncated[0]:
            metrics = infos["final_info"]["metrics"]
            return {k: float(v[0]) for k, v in metrics.items() if not k.startswith("_")}


def test_the_compiled_vector_env_reports_the_objective_metrics():
    compiled, python = _random_episode("compiled", "philly-slo-v1"), _random_episode("python", "philly-slo-v1")
    assert "deadline_attainment" in compiled and compiled["deadline_jobs"] > 0
    assert list(compiled) == list(python) and _same(compiled, python)


def test_tenant_quotas_are_refused_in_one_line_where_they_cannot_be_measured():
    with pytest.raises(engine.Unsupported, match="tenant quotas runs through the API .quota_violation"):
        engine.run_compiled_episode("las-migrate", "philly-tenants-v1", "test", 0, SMALL)
    assert engine.workload_reason("philly-tenants-v1") == engine.QUOTA_REASON
    assert engine.workload_reason("philly-slo-v1") is None
    with pytest.raises(ValueError, match="backend='compiled': a workload with tenant quotas"):
        ClusterVectorEnv(1, "philly-tenants-v1", "test", backend="compiled", jobs_per_episode=60)
    auto = ClusterVectorEnv(1, "philly-tenants-v1", "test", jobs_per_episode=60)
    assert type(auto.backend).__name__ == "PythonBackend"
    assert math.isfinite(_random_episode("auto", "philly-tenants-v1")["quota_violation"])


def test_quota_metrics_without_the_allocation_log_are_an_error_not_a_missing_key():
    import cluster_env

    env = cluster_env.parallel_env("philly-tenants-v1", split="test", jobs_per_episode=20)
    env.reset(seed=0)
    env.unwrapped.sim.allocation_log = None
    with pytest.raises(ValueError, match="tenant quotas: quota_violation needs the episode's allocation log"):
        env.unwrapped.metrics()
