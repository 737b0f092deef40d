"""``benchmarks/gap_anatomy.py``: where a policy's gap to the best-known schedule lies, from per-job
outcomes (``JobOutcomes``) that pair by job id; and the public per-job outcomes and certificate
replay it stands on."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from baselines import engine
from baselines.harness.episode import JobOutcomes, run_episode
from baselines.harness.sweep import resolve_policy
from baselines.optimality import load_table
from baselines.optimality.certificate import (CertificateError, certificate_path, load_certificate,
                                              replay_episode)
from tests.helpers import load_script

SCENARIO = "philly-hetero-v2"
FIELDS = ("submit", "duration", "gpus", "best_speed", "first_start", "finish", "held", "executed", "restarts",
          "nominal")


def _module():
    return load_script("benchmarks/gap_anatomy.py")


def _jobs(first_start, finish, held, executed, nominal, restarts=(0, 0, 0), moves=0) -> JobOutcomes:
    """Three jobs by hand: 1 GPU of 100 s work, 4 GPUs of 5,000 s, 16 GPUs of 40,000 s, all
    submitted at 0 and 10 s, best speed 1."""
    f = lambda x: np.array(x, dtype=np.float64)  # noqa: E731
    return JobOutcomes(submit=f([0, 0, 10]), duration=f([100, 5000, 40000]), gpus=np.array([1, 4, 16]),
                       best_speed=f([1, 1, 1]), first_start=f(first_start), finish=f(finish), held=f(held),
                       executed=f(executed), restarts=np.array(restarts), nominal=f(nominal), moves=moves)


def test_a_hand_worked_window_splits_as_computed_by_hand():
    mod = _module()
    # best-known: every job starts at once on its best GPUs and runs its work at speed 1.
    best = _jobs(first_start=[0, 0, 10], finish=[100, 5000, 40010], held=[100, 5000, 40000],
                 executed=[100, 5000, 40000], nominal=[1, 1, 1])
    # the policy: job 0 the same; job 1 waits 1,000 s then runs at nominal 0.5 (10,000 s);
    # job 2 starts at 10, is preempted once (waits 500 s, pays 60 s overhead), speed 1, and
    # finishes 560 s late; a move is reported.
    policy = _jobs(first_start=[0, 1000, 10], finish=[100, 11000, 40570], held=[100, 10000, 40060],
                   executed=[100, 10000, 40000], nominal=[1, 0.5, 1], restarts=(0, 0, 1), moves=1)
    w = mod.window_anatomy(policy, best)
    assert w["total"]["excess"] == 6000 + 560
    assert w["top_excess"] == 6000           # 1% of three jobs: the one with the largest excess
    by_gpus = w["groups"]["gpus"]
    assert [by_gpus[k]["excess"] for k in ("1 GPU", "2-8 GPUs", ">8 GPUs")] == [0, 6000, 560]
    assert by_gpus["2-8 GPUs"]["d_first_wait"] == 1000 and by_gpus["2-8 GPUs"]["d_nominal_run"] == 5000
    assert by_gpus[">8 GPUs"]["d_later_wait"] == 500 and by_gpus[">8 GPUs"]["d_overhead"] == 60
    by_duration = w["groups"]["duration"]
    assert by_gpus[">8 GPUs"]["restarts_policy"] == 1 and by_gpus[">8 GPUs"]["restarts_best"] == 0
    assert by_duration["<10 min"]["jobs"] == 1 and by_duration["1-10 h"]["excess"] == 6000
    assert by_duration[">10 h"]["excess"] == 560
    assert w["groups"]["direction"]["later"]["jobs"] == 2 and w["groups"]["direction"]["same"]["jobs"] == 1
    assert w["groups"]["last placement"]["slower than best-known's"]["excess"] == 6000
    assert w["decisions"]["policy"] == {"preemptions": 0, "moves": 1, "jobs_restarted": 1, "overhead_s": 60.0}
    agg = mod.aggregate([{"seed": 0, "best_rule": "las", **w}])
    assert agg["gap_per_job_s"] == pytest.approx(6560 / 3)
    assert agg["groups"]["gpus"]["2-8 GPUs"]["excess_share"] == pytest.approx(6000 / 6560)
    assert agg["groups"]["gpus"]["2-8 GPUs"]["jct_ratio"] == pytest.approx(11000 / 5000)
    assert agg["ratio_geomean"] == pytest.approx((100 + 11000 + 40560) / (100 + 5000 + 40000))
    assert agg["top_jobs_excess_share"] == pytest.approx(6000 / 6560)


def test_unpaired_or_unfinished_windows_are_refused():
    mod = _module()
    best = _jobs([0, 0, 10], [100, 5000, 40010], [100, 5000, 40000], [100, 5000, 40000], [1, 1, 1])
    unfinished = _jobs([0, 0, 10], [100, 5000, math.nan], [100, 5000, 40000], [100, 5000, 40000], [1, 1, 1])
    with pytest.raises(ValueError, match="did not finish"):
        mod.window_anatomy(unfinished, best)
    with pytest.raises(ValueError, match="no window could be analysed"):
        mod.aggregate([{"seed": 3, "skipped": "a job did not finish"}])


@pytest.mark.parametrize("name", ["las-migrate", "dual"])
def test_per_job_outcomes_are_the_same_on_the_compiled_and_api_paths(name):
    """The public per-job outcomes (moves included) agree bit for bit between the two paths (a
    named rule, and the shipped priority agent through its own compiled hook), and the record's
    average JCT and pending time are their means."""
    kw = {"jobs_per_episode": 60}
    policy = resolve_policy(name, SCENARIO)
    compiled = (engine.run_compiled_episode(name, SCENARIO, "test", 3, kw) if name == "las-migrate"
                else policy.compiled_episode(SCENARIO, "test", 3, kw))
    api = run_episode(policy, SCENARIO, "test", 3, kw)
    assert compiled.engine == "compiled" and api.engine == "api"
    for name in FIELDS:
        assert np.array_equal(getattr(compiled.jobs, name), getattr(api.jobs, name), equal_nan=True), name
    assert compiled.jobs.moves == api.jobs.moves and compiled.jobs.moves > 0
    assert compiled.jobs.restarts.sum() == compiled.record["preemptions"]
    assert np.mean(compiled.jobs.jct) == compiled.record["avg_jct"]
    assert np.mean(compiled.jobs.pending) == compiled.record["avg_pending_time"]
    parts = _module().components(compiled.jobs)
    assert np.allclose(sum(parts.values()), compiled.jobs.jct, rtol=1e-12, atol=1e-6)


def test_two_policies_on_a_short_window_split_the_average_jct_difference():
    """The per-job excess sums to the difference of average JCTs times the jobs, and every split
    (GPU demand, duration, direction, last placement, components) sums to it."""
    mod = _module()
    kw = {"jobs_per_episode": 80}
    a = engine.run_compiled_episode("las", SCENARIO, "test", 1, kw)
    b = engine.run_compiled_episode("las-migrate", SCENARIO, "test", 1, kw)
    w = mod.window_anatomy(a.jobs, b.jobs)
    total = w["total"]["excess"]
    assert total == pytest.approx(80 * (a.record["avg_jct"] - b.record["avg_jct"]), rel=1e-9)
    assert abs(total) > 0
    for kind, groups in w["groups"].items():
        assert sum(g["jobs"] for g in groups.values()) == 80, kind
        assert sum(g["excess"] for g in groups.values()) == pytest.approx(total, rel=1e-9), kind
    assert sum(w["total"][f"d_{c}"] for c in mod.COMPONENTS) == pytest.approx(total, rel=1e-9)


def test_a_shipped_certificate_replays_to_its_claim_with_its_per_job_outcomes():
    table = load_table(SCENARIO)
    for seed in (0, 10):       # a named rule and a searched priority index
        cert = load_certificate(certificate_path(SCENARIO, seed))
        result = replay_episode(cert)
        assert result.record["avg_jct"] == pytest.approx(cert.avg_jct, rel=1e-9)
        assert result.record["window"] == cert.window == table[seed].window
        assert np.mean(result.jobs.jct) == result.record["avg_jct"]
    assert {load_certificate(certificate_path(SCENARIO, s)).schedule["kind"] for s in (0, 10)} == {"rule", "priority"}
    moved = type(cert)(**{**cert.__dict__, "seed": cert.seed + 1})
    with pytest.raises(CertificateError, match="plays window"):
        replay_episode(moved)


def test_the_script_pairs_the_policy_with_the_shipped_best_known_values(tmp_path, capsys):
    mod = _module()
    out = tmp_path / "gap.json"
    mod.main(["--scenario", SCENARIO, "--policy", "las-migrate", "--seeds", "0-1", "--out", str(out)])
    text = capsys.readouterr().out
    assert "### las-migrate on philly-hetero-v2, test windows 0-1 (2 windows)" in text
    assert "| >10 h |" in text and "| best-known |" in text
    doc = json.loads(out.read_text())
    table = load_table(SCENARIO)
    for row in doc["windows"]:
        assert row["avg_jct_best"] == pytest.approx(table[row["seed"]].best_known, rel=1e-9)
    agg = doc["aggregate"]
    assert agg["windows"] == 2 and not agg["skipped"]
    for kind, groups in agg["groups"].items():
        assert sum(g["excess_share"] for g in groups.values()) == pytest.approx(1.0), kind
        assert sum(g["jobs_share"] for g in groups.values()) == pytest.approx(1.0), kind
    ratios = [r["avg_jct_policy"] / r["avg_jct_best"] for r in doc["windows"]]
    assert agg["ratio_geomean"] == pytest.approx(math.sqrt(ratios[0] * ratios[1]))
    assert f"{agg['ratio_geomean']:.3f}" in text


def _gap_section() -> str:
    """The docs' "Where the gap lies" section of docs/dual_agent.md."""
    from tests.helpers import ROOT

    heading = "## Where the gap lies"
    text = (ROOT / "docs" / "dual_agent.md").read_text()
    assert heading in text, "no 'Where the gap lies' section in docs/dual_agent.md"
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:] if end < 0 else text[start:end]


@pytest.mark.slow
def test_the_docs_gap_tables_are_what_the_script_prints():
    """Every table of the docs' section is the script's output for its policy and scenario over
    test windows 0-99, and every number of its reading is one of those tables' (about 30 s)."""
    import re

    mod = _module()
    section = _gap_section()
    blocks = re.findall(r"(### (\S+) on (\S+), test windows 0-99 \(100 windows\)\n.*?Best-known schedules[^\n]*)",
                        section, re.S)
    assert {(p, s) for _, p, s in blocks} == {("dual", SCENARIO), ("las-migrate", SCENARIO),
                                              ("las-migrate", "modern-v1"), ("dual", "modern-v1")}
    for block, policy, scenario in blocks:
        result = mod.gap_anatomy(scenario, policy, list(range(100)))
        result["seeds_text"] = "0-99"
        assert mod.markdown(result) == block, (policy, scenario)
    reading = section[section.index("**Reading.**"):]
    tables = "\n".join(b for b, _, _ in blocks)
    for number in re.findall(r"-?\d+(?:\.\d+)?%?", reading):
        assert number in tables, number


def test_share_ci_is_the_ratio_of_sums_with_a_seeded_interval_over_the_units():
    from baselines.harness.stats import share_ci

    rng = np.random.default_rng(1)
    totals = rng.normal(10, 3, 50)
    parts = 0.4 * totals + rng.normal(0, 1, 50)
    share, lo, hi = share_ci(parts, totals)
    assert share == pytest.approx(parts.sum() / totals.sum())
    assert lo < share < hi and hi - lo < 0.1
    assert share_ci(parts, totals) == (share, lo, hi)                 # seeded
    assert share_ci(0.25 * totals, totals) == pytest.approx((0.25, 0.25, 0.25))   # the same share everywhere
    assert math.isnan(share_ci([1.0], [2.0])[1])
    with pytest.raises(ValueError, match="paired"):
        share_ci([1.0, 2.0], [1.0])


def test_a_window_without_a_shipped_certificate_is_refused_by_name():
    with pytest.raises(SystemExit, match="philly-v0 test window"):
        _module().gap_anatomy("philly-v0", "las", [0])


def test_the_default_policy_is_the_shipped_agent_where_one_ships():
    from dual_agent import shipped_agent_path

    anatomy = _module()
    for scenario in ("philly-hetero-v2", "modern-v1", "philly-v1"):
        want = "dual" if shipped_agent_path(scenario) is not None else "las-migrate"
        assert anatomy.default_policy(scenario) == want
    assert anatomy.default_policy("philly-hetero-v2") == "dual" and anatomy.default_policy("philly-v1") == "las-migrate"
