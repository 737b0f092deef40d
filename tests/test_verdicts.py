"""Verdicts that cannot mislead: the yardstick as the default reference,
no verdict below 10 distinct windows, the fallback rule's share of the decisions, an unknown
reference refused before any episode, sweeps paired by distinct window, one window's seeds paired
per world draw, and the gap to the optimality table's best-known and lower bound."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import cluster_env
from baselines.cli import main as cluster_bench
from baselines.harness.report import format_table, summarize
from baselines.harness.stats import (UNIT_WINDOW, UNIT_WORLD_DRAW, paired_summary, verdict, window_values)
from baselines.yardstick import DURATION_BLIND_RULES, YARDSTICKS, yardstick

SCORES = Path(__file__).resolve().parents[1] / "baselines" / "scores"


def rec(policy, seed, avg_jct, window=None, scenario="s-v0", **more):
    return {"policy": policy, "scenario": scenario, "split": "test", "seed": seed, "env": "",
            "window": window if window is not None else f"w{seed}", "avg_jct": avg_jct, "truncated": False,
            "jobs_unfinished": 0, "pending_window": 8, **more}


def paired(ratios, windows=None):
    out = []
    for seed, ratio in enumerate(ratios):
        ref = 1000.0 * (seed + 1)
        w = None if windows is None else windows[seed]
        out += [rec("ref", seed, ref, w), rec("new", seed, ref * ratio, w)]
    return out


# ----------------------------------------------------------------------------- the yardstick
def test_every_scenario_has_a_yardstick_that_no_duration_blind_named_rule_beats():
    assert set(YARDSTICKS) == set(cluster_env.list_scenarios())
    for scenario, rule in YARDSTICKS.items():
        scores = json.loads((SCORES / f"{scenario}.json").read_text())["scores"][scenario]
        assert rule in scores, f"{scenario}: its yardstick {rule} has no checked-in scores"
        mine = scores[rule]
        for other in DURATION_BLIND_RULES:
            if other == rule or other not in scores:
                continue
            seeds = sorted(set(mine) & set(scores[other]))
            records = [rec(rule, int(s), mine[s]["avg_jct"], scenario=scenario) for s in seeds]
            records += [rec(other, int(s), scores[other][s]["avg_jct"], scenario=scenario) for s in seeds]
            s = paired_summary(records, other, rule)
            assert not s.ci_high < 1.0, (f"{scenario}: {other} beats the yardstick {rule}: {s.describe()}")


def test_yardstick_of_a_users_trace_is_its_base_scenarios():
    assert yardstick("philly-hetero-v2") == "las-migrate" and yardstick("philly-v1") == "las-migrate"
    assert yardstick("philly-hetero-v2+my_jobs.csv") == "las-migrate"
    assert yardstick("no-such-scenario") == "las"


def test_run_pairs_with_the_yardstick_by_default_and_adds_it(tmp_path, capsys):
    out = tmp_path / "res"
    assert cluster_bench(["run", "--scenario", "toy-v0", "--policies", "fifo,sjf", "--seeds", "0-1", "--out", str(out),
                          "--backend", "serial", "--quiet", "--no-plots"]) == 0
    text = capsys.readouterr().out
    assert "note: added las, the reference of the paired ratios (toy-v0's yardstick)" in text
    assert "vs las, the scenario's yardstick" in text and "avg_jct vs las" in text
    data = json.loads((out / "results.json").read_text())
    assert data["meta"]["reference"] == "las" and {r["policy"] for r in data["episodes"]} == {"fifo", "sjf", "las"}
    assert all(r["reference"] == "las" for r in data["summary"])


def test_compare_without_b_pairs_with_the_yardstick(capsys):
    assert cluster_bench(["compare", "sjf", "--scenario", "toy-v0", "--seeds", "0", "--backend", "serial",
                          "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "comparing with las, toy-v0's yardstick" in text and "sjf vs las on toy-v0/test" in text


# ----------------------------------------------------------------------------- an unknown reference
@pytest.mark.parametrize("command", [
    ["run", "--scenario", "toy-v0", "--policies", "fifo", "--seeds", "0"],
    ["sweep", "--scenario", "toy-v0", "--loads", "0.9", "--policies", "fifo", "--seeds", "0"]])
def test_an_unknown_reference_exits_2_before_any_episode(command, tmp_path, monkeypatch, capsys):
    import baselines.harness.load_sweep as load_sweep
    import baselines.harness.sweep as sweep

    def no_episodes(*args, **kwargs):
        raise AssertionError("an episode ran")

    monkeypatch.setattr(sweep, "run_tasks", no_episodes)
    monkeypatch.setattr(load_sweep, "run_tasks", no_episodes)
    out = tmp_path / "out"
    assert cluster_bench([*command, "--reference", "fiffo", "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "unknown --reference 'fiffo'" in err and "yardstick" in err
    assert not out.exists()


# ----------------------------------------------------------------------------- no verdict on few windows
def test_no_verdict_below_ten_distinct_windows_and_a_line_below_a_hundred():
    nine, ten = paired_summary(paired([0.5] * 9), "new", "ref"), paired_summary(paired([0.5] * 10), "new", "ref")
    assert nine.significant and ten.significant                  # both intervals exclude 1 ...
    assert verdict(nine).startswith("no verdict: 9 distinct windows")
    assert verdict(ten) == "the interval excludes 1: new is better"   # ... only ten windows carry a verdict
    table = format_table(paired([0.5] * 9), metrics=("avg_jct",), reference="ref")
    assert "0.500 [0.500, 0.500]" in table                       # the interval is printed all the same
    assert "NO VERDICT: the ratios rest on 9 distinct windows" in table and "rests on 100 test windows" in table
    wide = format_table(paired([0.5] * 100), metrics=("avg_jct",), reference="ref")
    assert "NO VERDICT" not in wide and "rests on 100" not in wide


def test_compare_on_two_windows_prints_the_interval_and_no_verdict(capsys):
    assert cluster_bench(["compare", "sjf", "fifo", "--scenario", "philly-v0", "--seeds", "0-1", "--env",
                          "jobs_per_episode=20", "--backend", "serial", "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "95% CI [" in text and "on 2 distinct window(s)" in text
    assert "sjf is better" not in text and "sjf is worse" not in text
    assert "no verdict: 2 distinct windows; a verdict needs at least 10 distinct windows" in text
    assert "rests on 100 test windows" in text


# ----------------------------------------------------------------------------- the unit of an interval
def test_one_windows_seeds_are_paired_per_world_draw():
    records = paired([0.8, 0.9, 0.85, 0.95], windows=["trace"] * 4)
    s = paired_summary(records, "new", "ref")
    assert (s.n, s.distinct, s.units, s.unit) == (4, 1, 4, UNIT_WORLD_DRAW)
    assert s.ci_low < s.geo_mean < s.ci_high and s.wins == 4
    assert verdict(s).startswith("no verdict: the interval rests on 4 world draws of 1 window")
    table = format_table(records, metrics=("avg_jct",), reference="ref")
    assert "WORLD DRAWS" in table and "4/4" in table
    # Several windows, some repeated: the distinct window stays the unit.
    s = paired_summary(paired([0.8, 0.9, 0.7], windows=["a", "a", "b"]), "new", "ref")
    assert (s.units, s.unit) == (2, UNIT_WINDOW)


def test_sweep_means_rest_on_distinct_windows():
    from baselines.harness.load_sweep import sweep_rows

    records = [dict(rec("fifo", s, v, w), load=0.9) for s, v, w in ((0, 100.0, "a"), (1, 300.0, "a"), (2, 400.0, "b"))]
    row = sweep_rows(records, reference=None, metrics=("avg_jct",))[0]
    assert row["windows"] == 2 and row["avg_jct"] == pytest.approx((200.0 + 400.0) / 2)
    assert window_values(records, "avg_jct") == ([200.0, 400.0], UNIT_WINDOW)


def test_a_custom_traces_run_says_its_seeds_are_world_draws():
    from baselines.cli_support import custom_trace_notes

    trace = Path(__file__).resolve().parents[1] / "examples" / "data" / "my_jobs.csv"
    notes = custom_trace_notes("philly-v0", "test", {"workload_csv": str(trace)})
    assert any("the seeds are its world draws" in n and "per (window, seed)" in n for n in notes)


# ----------------------------------------------------------------------------- the fallback's share
class FirstRow:
    """Always the first action of the acting agent (often forbidden), scored under the fallback rule;
    counts the decisions where it was forbidden."""

    name = "first-row"
    env_overrides = {"invalid_action": "fallback"}

    def reset(self, seed):
        self.forbidden = 0

    def act(self, obs, infos):
        acting = "placer" if obs["orderer"]["global"][0] > 0.5 else "orderer"
        other = "orderer" if acting == "placer" else "placer"
        self.forbidden += int(not obs[acting]["action_mask"][0])
        return {acting: 0, other: len(obs[other]["action_mask"]) - 1}


def test_fallback_replacements_are_counted_per_episode_in_infos_records_and_tables():
    from baselines.harness.episode import run_episode

    policy = FirstRow()
    result = run_episode(policy, "philly-v0", "test", 0, {"jobs_per_episode": 30})
    r = result.record
    assert policy.forbidden > 0 and r["fallbacks"] == policy.forbidden
    assert r["fallback_share"] == pytest.approx(policy.forbidden / r["steps"])
    fifo = run_episode(__import__("baselines").make_policy("fifo"), "philly-v0", "test", 0, {"jobs_per_episode": 30})
    assert fifo.record["fallbacks"] == 0 and fifo.record["fallback_share"] == 0.0
    rows = {row["policy"]: row for row in summarize([r, fifo.record], reference="fifo")}
    assert rows["first-row"]["fallback_share"] == pytest.approx(r["fallback_share"])
    table = format_table([r, fifo.record], reference="fifo")
    line = next(ln for ln in table.splitlines() if "first-row" in ln)
    assert f"{r['fallback_share']:.1%}" in line and "fallback" in table.splitlines()[3]


def test_the_envs_final_infos_count_the_views_and_the_envs_fallbacks():
    from cluster_env.wrappers import HeteroClusterFlatEnv

    env = HeteroClusterFlatEnv("philly-v0", split="test", jobs_per_episode=15)
    env.reset(seed=1)
    flagged, done, info = 0, False, {}
    while not done:
        mask = env.action_masks()
        action = int(np.flatnonzero(~mask)[0]) if (~mask).any() else 0      # forbidden whenever one is
        _, _, term, trunc, info = env.step(action)
        flagged += bool(info.get("invalid_action"))
        done = term or trunc
    assert flagged > 0 and info["fallbacks"] == flagged == env.env.fallbacks

    par = cluster_env.parallel_env("philly-v0", split="test", jobs_per_episode=15, invalid_action="fallback")
    obs, infos = par.reset(seed=1)
    flagged = 0
    while par.agents:
        acting = "placer" if obs["orderer"]["global"][0] > 0.5 else "orderer"
        other = "orderer" if acting == "placer" else "placer"
        mask = obs[acting]["action_mask"]
        bad = np.flatnonzero(mask == 0)
        act = int(bad[0]) if len(bad) else int(np.argmax(mask))
        obs, _, _, _, infos = par.step({acting: act, other: len(obs[other]["action_mask"]) - 1})
        flagged += bool(infos[acting].get("invalid_action"))
    assert flagged > 0 and infos["orderer"]["fallbacks"] == flagged


def test_compiled_records_count_no_fallback():
    from baselines.engine import run_compiled_episode

    result = run_compiled_episode("fifo", "toy-v0", "test", 0)
    assert result.engine == "compiled" and result.record["fallbacks"] == 0 and result.record["fallback_share"] == 0.0


# ----------------------------------------------------------------------------- gaps to the optimality table
def test_run_reports_gaps_to_best_known_and_to_the_bound_where_the_table_has_windows(tmp_path, monkeypatch, capsys):
    import baselines.optimality.table as table
    from baselines.harness.episode import run_episode
    from baselines import make_policy

    fifo = [run_episode(make_policy("fifo"), "toy-v0", "test", s).record for s in (0, 1)]
    (tmp_path / "tables").mkdir()
    windows = {str(r["seed"]): {"window": r["window"], "lower_bound": r["avg_jct"] / 2,
                                "best_known": r["avg_jct"] / 1.25, "best_known_by": "test"} for r in fifo}
    (tmp_path / "tables" / "toy-v0.json").write_text(json.dumps(
        {"scenario": "toy-v0", "split": "test", "metric": "avg_jct", "windows": windows}))
    monkeypatch.setattr(table, "TABLES_DIR", tmp_path / "tables")
    table.load_table.cache_clear()
    try:
        out = tmp_path / "res"
        assert cluster_bench(["run", "--scenario", "toy-v0", "--policies", "fifo,sjf", "--seeds", "0-2",
                              "--out", str(out), "--backend", "serial", "--quiet", "--no-plots",
                              "--columns", "all"]) == 0
        text = capsys.readouterr().out
        assert "gap to best-known" in text and "over the 2 window(s) the shipped optimality table has" in text
        line = next(ln for ln in text.splitlines() if ln.startswith("toy-v0") and " fifo " in ln)
        assert "+25.0%" in line and "+100.0%" in line
        summary = {r["policy"]: r for r in json.loads((out / "results.json").read_text())["summary"]}
        assert summary["fifo"]["gap_best_known"] == pytest.approx(0.25)
        assert summary["fifo"]["gap_lower_bound"] == pytest.approx(1.0)
        assert summary["fifo"]["optimality_windows"] == 2          # seed 2 is not in the table
        assert summary["sjf"]["gap_best_known"] < summary["fifo"]["gap_best_known"]
        assert "gap_best_known" in (out / "summary.csv").read_text().splitlines()[0]
        # Another world (an env override) has no reference in the table: no gap, never a wrong one.
        assert cluster_bench(["run", "--scenario", "toy-v0", "--policies", "fifo", "--seeds", "0", "--env",
                              "fluctuation=False", "--out", str(tmp_path / "o2"), "--backend", "serial", "--quiet",
                              "--no-plots"]) == 0
        text = capsys.readouterr().out
        assert "gap to best-known /" not in text and "gap to best-known " not in text.split("no gap to best-known")[0]
        assert ("no gap to best-known: toy-v0's optimality table holds its default world, this run changes it "
                "(fluctuation=False)") in " ".join(text.split())
        rows = json.loads((tmp_path / "o2" / "results.json").read_text())["summary"]
        assert all(r["optimality_windows"] == 0 and r["gap_best_known"] is None for r in rows)   # NaN: null in JSON
    finally:
        table.load_table.cache_clear()
