"""Service objectives: workload fields and their checks, the objectives-v1 observation, the metrics,
the derived scenarios, and a hand-worked schedule for each objective baseline."""
from __future__ import annotations

import numpy as np
import pytest

import cluster_env
from baselines.harness.episode import run_episode
from baselines.registry import OBJECTIVE_BASELINES, make_policy
from cluster_env.core.config import SchedulingConfig, WorldConfig
from cluster_env.core.instance import Cluster, Workload
from cluster_env.core.objectives import attainment_bound, objective_metrics
from cluster_env.envs.observation import JOB_FEATURES
from cluster_env.envs.observation_obj import OBJECTIVE_JOB_FEATURES
from cluster_env.scenarios.base import Scenario

NAN = np.nan
ONE_SLOT = Cluster.from_machines("one-v100x4", [("m1", "V100", 4)])


def workload(rows, quota=None, borrow=None) -> Workload:
    """rows: (submit, duration, gpus, tenant, class, deadline)."""
    a = np.array(rows, dtype=np.float64)
    return Workload(name="hand", job_ids=tuple("ABCDEFGH"[: len(rows)]), submit=a[:, 0], duration=a[:, 1],
                    gpus=a[:, 2].astype(np.int64), job_type=np.zeros(len(rows), dtype=np.int64),
                    tenant=a[:, 3].astype(np.int64), job_class=a[:, 4].astype(np.int64), deadline=a[:, 5],
                    tenant_quota=None if quota is None else np.array(quota, dtype=np.float64),
                    tenant_borrow=None if borrow is None else np.array(borrow, dtype=bool))


def scenario(w: Workload, tick: float = 1e6) -> Scenario:
    """Every effect off: a job runs exactly its duration on the V100 reference."""
    return Scenario(name="hand-objectives", description="hand-worked", cluster=lambda: ONE_SLOT, workload=lambda: w,
                    splits={"test": (0.0, 1.0)}, jobs_per_episode=None,
                    world=WorldConfig(reference_gpu="V100").all_effects_off(),
                    scheduling=SchedulingConfig(pending_window=8, running_window=4, scheduling_tick=tick))


def finishes(policy: str, w: Workload, tick: float = 1e6) -> dict[str, float]:
    result = run_episode(make_policy(policy), scenario(w, tick), "test", 0)
    assert result.record["jobs_unfinished"] == 0
    return dict(zip(w.job_ids, np.round(w.submit + result.jct, 6).tolist())), result


# ------------------------------------------------------------------ model
def test_objective_fields_are_checked_and_enter_the_digest_only_when_present():
    w = workload([(0, 10, 1, 0, 1, 20), (1, 10, 1, 0, 0, NAN)])
    plain = Workload(name="p", job_ids=w.job_ids, submit=w.submit, duration=w.duration, gpus=w.gpus,
                     job_type=w.job_type, tenant=w.tenant)
    assert not plain.has_objectives and w.has_objectives
    assert plain.digest() != w.digest()
    with pytest.raises(ValueError, match="deadline of job 1"):
        workload([(0, 10, 1, 0, 1, 20), (1, 10, 1, 0, 0, -5)])
    with pytest.raises(ValueError, match="job_class of job 0"):
        workload([(0, 10, 1, 0, 2, NAN)])
    with pytest.raises(ValueError, match="quotas sum"):
        workload([(0, 10, 1, 1, 0, NAN)], quota=[0.7, 0.6])
    sub = w.subset(np.array([1]))
    assert sub.job_class.tolist() == [0] and np.isnan(sub.deadline[0])


def test_workload_csv_reads_class_and_deadline_and_names_row_and_field(tmp_path):
    from cluster_env.errors import DataError
    from cluster_env.loaders.workload_csv import load_workload_csv

    good = tmp_path / "jobs.csv"
    good.write_text("submit,duration,gpus,class,deadline\n0,100,1,hp,300\n5,50,2,,\n3,10,1,Spot,20\n")
    w = load_workload_csv(good)
    assert w.job_ids == ("job-1", "job-3", "job-2")
    assert w.job_class.tolist() == [1, 0, 0]
    assert w.deadline[:2].tolist() == [300.0, 20.0] and np.isnan(w.deadline[2])
    bad = tmp_path / "bad.csv"
    bad.write_text("submit,duration,gpus,deadline\n0,100,1,10\n1,100,1,0\n")
    with pytest.raises(DataError, match=r"row 2.*'deadline'"):
        load_workload_csv(bad)
    bad.write_text("submit,duration,gpus,class\n0,100,1,gold\n")
    with pytest.raises(DataError, match=r"row 1.*'class'.*gold"):
        load_workload_csv(bad)


def test_objectives_observation_appends_columns_and_stays_inside_its_cached_space():
    env = cluster_env.parallel_env("philly-slo-v1", split="test", observation="objectives-v1", preemption=True)
    default = cluster_env.parallel_env("philly-slo-v1", split="test", preemption=True)
    space = env.observation_space("orderer")
    assert space is env.observation_space("orderer")
    assert space["jobs"].shape[1] == len(JOB_FEATURES) + len(OBJECTIVE_JOB_FEATURES)
    obs, infos = env.reset(seed=1)
    ref, _ = default.reset(seed=1)
    policy = make_policy("las")
    policy.reset(0)
    seen_deadline = False
    for _ in range(300):
        assert space.contains(obs["orderer"]) and obs["orderer"]["action_mask"].dtype == np.int8
        # The default columns are the default layout's, bit for bit.
        assert np.array_equal(obs["orderer"]["jobs"][:, :len(JOB_FEATURES)], ref["orderer"]["jobs"])
        seen_deadline |= bool((obs["orderer"]["jobs"][:, len(JOB_FEATURES) + 1] > 0.5).any())
        action = policy.act(ref, infos)
        obs, _, _, _, infos = env.step(action)
        ref, _, _, _, _ = default.step(action)
        if not env.agents:
            break
    assert seen_deadline


def test_objective_metrics_by_hand():
    # A: 4 GPUs, due 100 after submit, finished at 90 (met); B: due 50, finished at 80 (missed); C: no deadline.
    w = workload([(0, 40, 4, 0, 1, 100), (10, 40, 1, 1, 1, 50), (20, 10, 2, 1, 0, NAN)])
    finish = np.array([90.0, 80.0, 60.0])
    ideal = np.array([40.0, 40.0, 10.0])
    m = objective_metrics(w, finish, ideal, total_gpus=4)
    assert m["deadline_jobs"] == 2 and m["deadline_attainment"] == 0.5
    assert m["hp_avg_jct"] == (90 + 70) / 2 and m["be_avg_jct"] == 40
    # Slowdowns: tenant 0 90/40 = 2.25; tenant 1 (70/40 + 40/10) / 2 = 2.875.
    assert m["tenant_max_slowdown"] == pytest.approx(2.875)
    # rho: a 1/2 share is 2 GPUs; A asks 4 so T_ideal = 80: 90/80; tenant 1 as its slowdowns.
    assert m["ftf_max_rho"] == pytest.approx(2.875)
    assert attainment_bound(w, np.array([40.0, 60.0, 10.0])) == 0.5     # B's 50 s < its 60 s alone


def test_derived_scenarios_carry_their_rules():
    from cluster_env.scenarios.objectives import DEADLINE_FACTOR_RANGE

    slo = cluster_env.get_scenario("philly-slo-v1").sample("test", np.random.default_rng(0))
    has = ~np.isnan(slo.deadline)
    assert 0.2 < has.mean() < 0.4 and (slo.job_class[has] == 1).all() and (slo.job_class[~has] == 0).all()
    # Load scaling moves submit times, never the relative deadline: k = deadline / duration.
    k = slo.deadline[has] / slo.duration[has]
    assert k.min() >= DEADLINE_FACTOR_RANGE[0] and k.max() <= DEADLINE_FACTOR_RANGE[1]
    ten = cluster_env.get_scenario("philly-tenants-v1").sample("test", np.random.default_rng(0))
    assert ten.tenant_quota.sum() == pytest.approx(1.0) and ten.tenant_borrow.all()


# ------------------------------------------------------------------ hand-worked schedules
# One machine of 4 V100s, every effect off, every job 4 GPUs unless said: one job at a time.
# Rows: (submit, duration, gpus, tenant, class, deadline).
def test_edf_runs_the_earliest_deadline_and_admission_rejects_a_hopeless_job():
    w = workload([(0, 1000, 4, 0, 0, NAN),      # A best-effort
                  (0, 1000, 4, 0, 1, 1500),     # B due at 1500
                  (0, 500, 4, 0, 1, 600),       # C due at 600
                  (0, 100, 4, 0, 0, NAN),       # D best-effort
                  (0, 100, 4, 0, 1, 50)])       # E due at 50 but needs 100 s: hopeless
    # edf: E (due 50; not yet overdue at 0) 0-100, C 100-600 (met), B 600-1600 (missed), then
    # the best-effort level by LAS (ties: the older) A 1600-2600, D 2600-2700.
    done, res = finishes("edf", w)
    assert done == {"A": 2600, "B": 1600, "C": 600, "D": 2700, "E": 100}
    assert res.record["deadline_attainment"] == pytest.approx(1 / 3)
    # edf-clairvoyant admits only what can still finish: C 0-500, B 500-1500 (both met), then
    # A, D, E by LAS in arrival order.
    done, res = finishes("edf-clairvoyant", w)
    assert done == {"C": 500, "B": 1500, "A": 2500, "D": 2600, "E": 2700}
    assert res.record["deadline_attainment"] == pytest.approx(2 / 3)


def test_tias_and_priority_split_by_deadline_and_by_class():
    w = workload([(0, 1000, 4, 0, 0, NAN),      # A best-effort
                  (0, 1000, 4, 0, 1, 1500),     # B high-priority, due at 1500
                  (0, 500, 4, 0, 1, 600),       # C high-priority, due at 600
                  (0, 100, 4, 0, 1, NAN)])      # D high-priority, no deadline
    # tias: deadline jobs first (B, C: LAS ties go to the older), then A, D.
    assert finishes("tias", w)[0] == {"A": 2500, "B": 1000, "C": 1500, "D": 2600}
    # priority: high-priority jobs in arrival order (B, C, D), then best-effort A.
    assert finishes("priority", w)[0] == {"A": 2600, "B": 1000, "C": 1500, "D": 1600}


def test_priority_preempts_best_effort_work_at_a_tick():
    # A best-effort runs from 0; B high-priority arrives at 50 and takes the GPUs at the tick (100).
    w = workload([(0, 300, 4, 0, 0, NAN), (50, 100, 4, 0, 1, NAN)])
    done, res = finishes("priority", w, tick=100)
    assert done == {"A": 400, "B": 200}
    assert res.record["preemptions"] == 1


def test_quota_runs_primaries_first_lets_a_tenant_borrow_and_reclaims():
    # 2-GPU jobs, two at a time. Tenants 0 and 1 each own half of the 4 GPUs.
    rows = [(0, 1000, 2, 0, 0, NAN),            # A tenant 0, within its quota: primary
            (0, 1000, 2, 0, 0, NAN),            # B tenant 0, beyond it: secondary (borrows)
            (0, 500, 2, 1, 0, NAN)]             # C tenant 1: primary
    w = workload(rows, quota=[0.5, 0.5], borrow=[True, True])
    # A and C start at 0; B borrows tenant 1's GPUs when C ends at 500.
    assert finishes("quota", w)[0] == {"A": 1000, "B": 1500, "C": 500}
    # No borrowing for tenant 0: B waits until A's end makes it primary (1000-2000).
    w = workload(rows, quota=[0.5, 0.5], borrow=[False, True])
    assert finishes("quota", w)[0] == {"A": 1000, "B": 2000, "C": 500}
    # Reclaim: D (tenant 1) arrives at 550 while B borrows; at the tick (600) B is preempted, D
    # runs 600-800, B resumes with 100 s done and ends at 1700.
    w = workload(rows + [(550, 200, 2, 1, 0, NAN)], quota=[0.5, 0.5], borrow=[True, True])
    done, res = finishes("quota", w, tick=100)
    assert done == {"A": 1000, "B": 1700, "C": 500, "D": 800}
    assert res.record["preemptions"] == 1
    # Quota violation: tenant 1 asked for its 2 guaranteed GPUs (D) from 550 and got them at 600:
    # 2 x 50 GPU-s short, of 2 x 1700 (tenant 0) + 2 x 500 (C) + 2 x 250 (D) owed.
    assert res.record["quota_violation"] == pytest.approx(100 / 4900)


def test_ftf_serves_the_tenant_furthest_behind_first():
    w = workload([(0, 1000, 4, 0, 0, NAN),      # A tenant 0 runs 0-1000
                  (500, 100, 4, 1, 0, NAN),     # B tenant 1, the oldest waiting job at 1000
                  (600, 100, 4, 0, 0, NAN),     # C tenant 0
                  (990, 100, 4, 1, 0, NAN)])    # D tenant 1
    # At 1000 the ratios (wait + 1) / (executed + 1) are C 401; B 501 and D 11 (tenant 1's mean
    # 256): tenant 0 is furthest behind, so C runs before the older B (FIFO and LAS would run B).
    done = finishes("ftf", w)[0]
    assert done == {"A": 1000, "B": 1200, "C": 1100, "D": 1300}
    assert finishes("las", w)[0]["B"] == 1100


def test_objective_baselines_are_registered_and_api_only():
    from baselines import engine
    from baselines.registry import policy_names

    assert set(OBJECTIVE_BASELINES) <= set(policy_names())
    for name in OBJECTIVE_BASELINES:
        with pytest.raises(engine.Unsupported):
            engine.check_request(name, {})


def test_objective_reward_returns_minus_the_misses_and_the_class_jct():
    from cluster_env.core.rewards import ObjectiveReward

    w = workload([(0, 1000, 4, 0, 0, NAN), (0, 1000, 4, 0, 1, 1500), (0, 500, 4, 0, 1, 600),
                  (0, 100, 4, 0, 0, NAN), (0, 100, 4, 0, 1, 50)])
    # edf's schedule (test above): E 100, C 600, B 1600 (missed), A 2600, D 2700; E and B missed.
    for reward, expected in ((ObjectiveReward(jct=0.0, deadline=1.0), -2 / 3),
                             (ObjectiveReward(jct=0.0, deadline=0.0, high_priority=1.0, time_unit=1.0),
                              -(100 + 600 + 1600) / 3),
                             (ObjectiveReward(jct=0.0, deadline=0.0, best_effort=1.0, time_unit=1.0),
                              -(2600 + 2700) / 2)):
        result = run_episode(make_policy("edf"), scenario(w), "test", 0, env_kwargs={"reward": reward})
        assert result.record["return"] == pytest.approx(expected)


def test_objective_yardsticks_are_the_best_duration_blind_rule_on_the_checked_in_scores():
    import json
    from pathlib import Path

    from baselines.harness.stats import lower_is_better
    from baselines.yardstick import DURATION_BLIND_RULES, OBJECTIVE_RULES, OBJECTIVE_YARDSTICKS

    root = Path(__file__).resolve().parents[1] / "baselines" / "scores"
    for scenario, table in OBJECTIVE_YARDSTICKS.items():
        scores = json.loads((root / f"{scenario}.json").read_text())["scores"][scenario]
        # Every duration-blind rule is scored; an objective rule may be left out of a scenario
        # without the fields it reads (the deadline rules on the tenant scenarios, quota on the SLO
        # ones: they act as preemptive LAS there), but never both kinds of objective rule.
        assert set(DURATION_BLIND_RULES) <= set(scores), scenario
        scored = [p for p in OBJECTIVE_RULES if p in scores]
        assert {"edf", "tias", "priority"} <= set(scored) or {"quota", "ftf"} <= set(scored), scenario
        candidates = DURATION_BLIND_RULES + tuple(scored)
        for metric, rule in table.items():
            mean = {p: np.mean([s[metric] for s in scores[p].values()]) for p in candidates}
            sign = 1.0 if lower_is_better(metric) else -1.0
            assert rule == min(candidates, key=lambda p: sign * mean[p]), (scenario, metric)


def test_cluster_bench_run_scores_the_objective_baselines_and_shows_their_metrics(tmp_path, capsys):
    import csv

    from baselines.cli import default_policies
    from baselines.cli import main as cluster_bench

    assert set(OBJECTIVE_BASELINES) <= set(default_policies("philly-slo-v1"))
    assert not set(OBJECTIVE_BASELINES) & set(default_policies("philly-hetero-v3"))
    out = tmp_path / "res"
    assert cluster_bench(["run", "--scenario", "philly-slo-v1", "--policies", "edf,priority", "--seeds", "0",
                          "--out", str(out), "--backend", "serial", "--quiet", "--no-plots"]) == 0
    text = capsys.readouterr().out
    assert "deadline_attainment (fraction)" in text and "hp_avg_jct (s)" in text and "edf" in text
    rows = list(csv.DictReader(open(out / "results.csv")))
    assert {r["policy"] for r in rows} >= {"edf", "priority"}
    assert all(0.0 <= float(r["deadline_attainment"]) <= 1.0 for r in rows)
    capsys.readouterr()
    assert cluster_bench(["compare", "quota", "ftf", "--scenario", "philly-tenants-v1", "--metric",
                          "ftf_max_rho", "--seeds", "0", "--backend", "serial"]) == 0
    assert "ratio quota/ftf" in capsys.readouterr().out
    assert cluster_bench(["compare", "edf", "tias", "--scenario", "philly-v1", "--metric",
                          "deadline_attainment", "--seeds", "0"]) == 2


def test_named_objectives_reward_returns_minus_jct_hours_and_the_missed_share():
    result = run_episode(make_policy("edf"), "philly-slo-v1", "test", 1, env_kwargs={"reward": "objectives"})
    rec = result.record
    assert rec["jobs_unfinished"] == 0
    assert rec["return"] == pytest.approx(-rec["avg_jct"] / 3600 - (1 - rec["deadline_attainment"]), rel=1e-9)
