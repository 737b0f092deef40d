"""The certified lower bound (baselines.optimality.bound): tight on hand-worked windows, and never
above what any policy scores, on either path, over windows of every scenario."""
from __future__ import annotations

import math

import numpy as np
import pytest

import cluster_env
from baselines import engine
from baselines.harness.episode import run_episode
from baselines.harness.sweep import resolve_policy
from baselines.optimality.bound import (NORMAL_DRAW_LIMIT, BoundInputs, fluctuation_ceiling, lower_bound,
                                        window_lower_bound)
from baselines.registry import BASELINE_NAMES

RESNET = "ResNet-50 (batch size 64)"


def _window(tmp_path, jobs, machines):
    """env_kwargs of a hand-made window on philly-v0's world with every effect off (P100: speed 1)."""
    w, c = tmp_path / "jobs.csv", tmp_path / "cluster.csv"
    w.write_text("job_id,submit_time,duration,num_gpus,job_type,tenant\n"
                 + "".join(f"j{i},{s},{d},{g},{RESNET},t\n" for i, (s, d, g) in enumerate(jobs)))
    c.write_text("machine,gpu_type,num_gpus,count\n" + "".join(f"m{i},P100,{g},1\n" for i, g in enumerate(machines)))
    return {"workload_csv": str(w), "cluster_csv": str(c), "all_effects_off": True}


def _score(policy, kw, api=False):
    if api:
        return run_episode(resolve_policy(policy), "philly-v0", "test", 0, kw).record["avg_jct"]
    return engine.run_compiled_episode(policy, "philly-v0", "test", 0, kw).record["avg_jct"]


def test_one_job_the_bound_is_its_duration(tmp_path):
    kw = _window(tmp_path, [(0, 700, 1)], [1])
    bound = window_lower_bound("philly-v0", "test", 0, kw)
    assert bound.avg_jct == pytest.approx(700.0, abs=1e-4) and bound.avg_jct <= 700.0
    assert _score("fifo", kw) == 700.0 and _score("fifo", kw, api=True) == 700.0


def test_two_jobs_on_one_gpu_the_bound_is_shortest_first(tmp_path):
    # Both at 0, 300 s and 100 s of work: the best schedule runs the short one first,
    # completions 100 and 400, average 250 (FIFO: 300 and 400, 350).
    kw = _window(tmp_path, [(0, 300, 1), (0, 100, 1)], [1])
    bound = window_lower_bound("philly-v0", "test", 0, kw)
    assert bound.avg_jct == pytest.approx(250.0, abs=1e-4) and bound.avg_jct <= 250.0
    assert bound.binding in ("pooled_srpt", "pooled_busy") and bound.per_job == pytest.approx(200.0, abs=1e-4)
    assert _score("srpt-clairvoyant", kw) == 250.0 and _score("fifo", kw) == 350.0


def test_a_job_wider_than_one_machine_needs_two_machines(tmp_path):
    # 8 GPUs on two 4-GPU machines: it runs on both at its speed, 1000 s.
    kw = _window(tmp_path, [(0, 1000, 8)], [4, 4])
    bound = window_lower_bound("philly-v0", "test", 0, kw)
    assert bound.avg_jct == pytest.approx(1000.0, abs=1e-4) and bound.avg_jct <= 1000.0
    assert _score("fifo", kw, api=True) == 1000.0
    with pytest.raises(ValueError, match="needs 8 GPUs"):      # it cannot fit on one machine of 4
        window_lower_bound("philly-v0", "test", 0, _window(tmp_path, [(0, 1000, 8)], [4]))


def test_the_best_rate_of_a_wide_job_is_its_slowest_machine_in_the_best_set():
    # Two machines of 2 GPUs with factors 2 and 1, one of 4 with factor 1.5: a 1-GPU job gets 2, a
    # 4-GPU job 1.5 (the 4-GPU machine alone beats 2 and 1 together), a 6-GPU job 1.5 (with the 2).
    inputs = BoundInputs(submit=np.zeros(3), duration=np.array([6.0, 6.0, 6.0]), gpus=np.array([1, 4, 6]),
                         speed=np.ones((3, 1)), machine_type=np.zeros(3, np.int64),
                         machine_gpus=np.array([2, 2, 4]), machine_ceiling=np.array([2.0, 1.0, 1.5]))
    b = lower_bound(inputs)
    assert b.per_job == pytest.approx((3.0 + 4.0 + 4.0) / 3, abs=1e-4)


def test_the_fluctuation_ceiling_is_invariant_under_the_largest_draws():
    sigma, theta, interval = 0.048, 1 / 80, 300.0
    ceiling = fluctuation_ceiling(sigma, theta, interval, np.array([0.0, 0.7]))
    # Start at the bound and push with the largest possible draw at every step length allowed.
    for x0 in (math.log(ceiling[0]) + sigma * sigma / 2, 0.0):
        x = x0
        for dt in (interval, interval * 1.5, 1e4, interval):
            a = math.exp(-theta * dt)
            x = a * x + sigma * math.sqrt(1 - a * a) * NORMAL_DRAW_LIMIT
            assert math.exp(x - sigma * sigma / 2) <= ceiling[0]
    assert ceiling[1] == pytest.approx(math.exp(0.7 - sigma * sigma / 2))     # a higher start is its own bound
    draws = np.random.default_rng(0).standard_normal(1_000_000)
    assert np.abs(draws).max() < NORMAL_DRAW_LIMIT
    assert fluctuation_ceiling(0.0, theta, interval, np.zeros(2)).tolist() == [1.0, 1.0]


def test_the_bound_of_a_full_window_is_fast_and_valid():
    import time

    t0 = time.perf_counter()
    b = window_lower_bound("philly-hetero-v2", "test", 3)
    assert time.perf_counter() - t0 < 5.0          # generous: well under a second on an idle core
    assert 0 < b.avg_jct == max(b.per_job, b.pooled_srpt, b.pooled_busy)
    assert b.fluctuation_ceiling > 1.0             # the scenario's world fluctuates


# ----------------------------------------------------------------- no policy beats the bound
#: Policies of the property: every named baseline, random, the compositions of the tables.
POLICIES = tuple(dict.fromkeys(("random", *BASELINE_NAMES, "las-migrate", "las+fastest", "srpt+fastest",
                                "tiresias+fastest", "fifo+fastest")))


def _check_property(scenario, seeds, env_kwargs, api_policies, compiled=True):
    failures = []
    for seed in seeds:
        bound = window_lower_bound(scenario, "test", seed, env_kwargs)
        runs = []
        if compiled:
            for name in POLICIES:
                try:
                    runs.append((name, "compiled", engine.run_compiled_episode(name, scenario, "test", seed,
                                                                               env_kwargs).record))
                except engine.Unsupported:
                    pass
        for name in api_policies:
            policy = resolve_policy(name, scenario)
            runs.append((name, "api", run_episode(policy, scenario, "test", seed, env_kwargs,
                                                  allow_env_mismatch=True).record))
        assert runs
        for name, path, rec in runs:
            if rec["truncated"]:
                continue
            if not rec["avg_jct"] >= bound.avg_jct:
                failures.append((scenario, seed, name, path, rec["avg_jct"], bound.avg_jct))
    assert not failures, failures


#: The scenarios of the shipped tables play their full windows in CI; the others 300 jobs (the
#: openb-full windows take minutes in full): the slow test plays every one in full.
TABLE_SCENARIOS = ("philly-v1", "philly-hetero-v2", "modern-v1")


def _compiled_plays(scenario) -> bool:
    try:
        engine.run_compiled_episode("fifo", scenario, "test", 0, {"jobs_per_episode": 5})
    except engine.Unsupported:          # tenant quotas run through the API only
        return False
    return True


@pytest.mark.parametrize("scenario", cluster_env.list_scenarios())
def test_no_compiled_policy_scores_below_the_bound(scenario):
    if not _compiled_plays(scenario):   # every named rule, the objective ones too, on the API path
        from baselines.registry import OBJECTIVE_BASELINES

        _check_property(scenario, [0], {"jobs_per_episode": 60}, api_policies=POLICIES + tuple(OBJECTIVE_BASELINES),
                        compiled=False)
        return
    kw = None if scenario in TABLE_SCENARIOS else {"jobs_per_episode": 300}
    _check_property(scenario, [0, 1], kw, api_policies=())


def _shipped_dual(scenario):
    from dual_agent.shared import shipped_agent_path

    path = shipped_agent_path(scenario)
    return path is not None and (path.name.endswith(".priority.json") or pytest.importorskip("torch"))


@pytest.mark.parametrize("scenario", cluster_env.list_scenarios())
def test_no_api_policy_scores_below_the_bound_small_windows(scenario):
    kw = {"jobs_per_episode": 40}
    api = ["random", "fifo", "las-migrate", "srpt-clairvoyant"] + (["dual"] if _shipped_dual(scenario) else [])
    _check_property(scenario, [0], kw, api_policies=api, compiled=False)


def test_the_shipped_agents_do_not_score_below_the_bound_on_full_windows():
    # The priority agent on its own scenario (compiled through its hook, and the API).
    scenario = "philly-hetero-v2"
    policy = resolve_policy("dual", scenario)
    bound = window_lower_bound(scenario, "test", 0)
    assert policy.compiled_episode(scenario, "test", 0).record["avg_jct"] >= bound.avg_jct


@pytest.mark.slow
@pytest.mark.parametrize("scenario", cluster_env.list_scenarios())
def test_no_policy_scores_below_the_bound_many_windows(scenario):
    api = ["random", "fifo", "las", "las-migrate", "tiresias"] + (["dual"] if _shipped_dual(scenario) else [])
    _check_property(scenario, range(10), None, api_policies=api)
