"""Paired statistics (baselines.harness.stats), the reports and CLI commands built on them."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from baselines.cli import main as cluster_bench
from baselines.harness.report import format_table, summarize
from baselines.harness.stats import (PairingError, geo_mean_ci, mean_ci, paired_summary, paired_table,
                                     window_key)


def rec(policy, seed, avg_jct, scenario="s-v0", env="", truncated=False, unfinished=0, **more):
    return {"policy": policy, "scenario": scenario, "split": "test", "seed": seed, "env": env,
            "avg_jct": avg_jct, "gpu_utilization": more.pop("util", 0.5), "truncated": truncated,
            "jobs_unfinished": unfinished, "pending_window": 32, **more}


def records_with_ratio(ratios, base=1000.0):
    out = []
    for seed, ratio in enumerate(ratios):
        ref = base * (seed + 1)                 # windows differ a lot; the ratio does not
        out += [rec("fifo", seed, ref), rec("new", seed, ref * ratio)]
    return out


def test_constant_ratio_gives_that_geometric_mean_inside_its_interval():
    s = paired_summary(records_with_ratio([0.5] * 8), "new", "fifo")
    assert s.n == 8 and s.geo_mean == pytest.approx(0.5)
    assert s.ci_low <= 0.5 <= s.ci_high and s.ci_high < 1
    assert s.win_rate == 1.0 and s.significant


def test_geometric_mean_interval_and_win_rate_on_known_ratios():
    ratios = [0.5, 2.0, 0.5, 2.0, 1.0, 0.25, 4.0, 1.0]       # log-symmetric around 1
    s = paired_summary(records_with_ratio(ratios), "new", "fifo")
    assert s.geo_mean == pytest.approx(1.0)
    assert s.ci_low < 1.0 < s.ci_high and not s.significant
    assert s.win_rate == pytest.approx(3 / 8)                  # ties (1.0) are not wins
    assert s.ratios == pytest.approx(ratios)


def test_higher_is_better_metrics_win_when_larger():
    records = []
    for seed in range(4):
        records += [rec("fifo", seed, 1.0, util=0.4), rec("new", seed, 1.0, util=0.6 if seed else 0.3)]
    s = paired_summary(records, "new", "fifo", metric="gpu_utilization")
    assert s.win_rate == pytest.approx(3 / 4)


def test_bootstrap_is_seeded_and_handles_small_samples():
    r = np.exp(np.random.default_rng(3).normal(-0.2, 0.3, 12))
    assert geo_mean_ci(r) == geo_mean_ci(r)
    assert geo_mean_ci(r, seed=1) != geo_mean_ci(r, seed=2)
    g, lo, hi = geo_mean_ci([0.8])
    assert g == pytest.approx(0.8) and math.isnan(lo) and math.isnan(hi)
    assert all(math.isnan(v) for v in geo_mean_ci([]))
    g, lo, hi = geo_mean_ci([0.8, 0.9])                          # BCa is degenerate at n=2
    assert 0.8 <= lo <= g <= hi <= 0.9
    with pytest.raises(ValueError, match="positive"):
        geo_mean_ci([0.5, 0.0])
    m, lo, hi = mean_ci([1.0, 2.0, 3.0, 4.0, float("nan")])
    assert m == 2.5 and 1.0 <= lo < 2.5 < hi <= 4.0


def test_zero_and_nan_values_are_left_out_and_counted():
    records = records_with_ratio([0.5] * 5)
    records[1]["avg_jct"] = float("nan")          # fifo, seed 0: no job finished
    records[3]["avg_jct"] = 0.0                    # new, seed 1
    s = paired_summary(records, "new", "fifo")
    assert (s.n, s.undefined) == (3, 2) and s.geo_mean == pytest.approx(0.5)


def test_unpaired_and_duplicate_windows_are_errors():
    records = records_with_ratio([0.5] * 3)
    with pytest.raises(PairingError, match="only 'fifo' ran.*seed 2"):
        paired_summary(records[:-1], "new", "fifo")
    with pytest.raises(PairingError, match="two records"):
        paired_summary(records + [rec("new", 0, 1.0)], "new", "fifo")
    other_env = [dict(r, env="load=0.9") if r["policy"] == "new" else r for r in records]
    with pytest.raises(PairingError, match=r"load=0\.9"):
        paired_summary(other_env, "new", "fifo")
    with pytest.raises(PairingError, match="reference"):
        paired_summary(records, "new", "sjf")
    assert window_key(records[0]) == ("s-v0", "test", 0, "")
    with pytest.raises(PairingError, match="has no seed"):
        paired_summary([{k: v for k, v in r.items() if k != "seed"} for r in records], "new", "fifo")
    rows = summarize([{k: v for k, v in r.items() if k != "seed"} for r in records], metrics=("avg_jct",),
                     reference="fifo")
    assert all("has no seed" in r["pairing_error"] and math.isnan(r["ratio_avg_jct"]) for r in rows)


def test_truncated_windows_are_excluded_from_ratios_and_flagged_in_the_table():
    records = records_with_ratio([0.5] * 4)
    records[3] = dict(records[3], truncated=True, jobs_unfinished=17, avg_jct=1.0)   # new, seed 1
    s = paired_summary(records, "new", "fifo")
    assert (s.n, s.truncated) == (3, 1) and s.geo_mean == pytest.approx(0.5)
    table = format_table(records, metrics=("avg_jct", "gpu_utilization"), reference="fifo")
    line = next(ln for ln in table.splitlines() if ln.startswith("s-v0") and " new " in ln)
    assert "TRUNCATED 1/4 (17 jobs unfinished)" in line
    assert "0.500 [0.500, 0.500]" in line and "3/3" in line
    assert "TRUNCATED 1/4" not in next(ln for ln in table.splitlines() if " fifo " in ln)


def test_table_names_the_pending_window_and_reference_and_says_when_it_is_missing():
    records = records_with_ratio([0.5, 0.6, 0.7])
    table = format_table(records, metrics=("avg_jct",), reference="fifo")
    assert "pending window K=32" in table and "vs fifo" in table
    assert "avg_jct vs fifo" in table.splitlines()[3]
    no_ref = format_table([r for r in records if r["policy"] == "new"], metrics=("avg_jct",), reference="fifo")
    assert "no ratios: the reference policy 'fifo' is not among the policies" in no_ref
    # By default the reference is the scenario's yardstick (s-v0 is no registered scenario: las).
    assert "no ratios: the reference policy 'las' (the scenario's yardstick) is not among" in format_table(records, metrics=("avg_jct",))
    rows = {r["policy"]: r for r in summarize(records, metrics=("avg_jct",), reference="fifo")}
    assert rows["new"]["ratio_avg_jct"] == pytest.approx((0.5 * 0.6 * 0.7) ** (1 / 3))
    assert rows["new"]["win_rate_avg_jct"] == 1.0 and rows["fifo"]["ratio_avg_jct"] == 1.0


def test_unpaired_records_are_reported_in_the_table_not_mixed():
    records = records_with_ratio([0.5, 0.6, 0.7])[:-1]
    table = format_table(records, metrics=("avg_jct",), reference="fifo")
    assert "UNPAIRED" in table and "only 'fifo' ran" in table


def test_paired_table_covers_every_policy():
    records = records_with_ratio([0.5, 0.6]) + [rec("x", s, 3000.0 * (s + 1)) for s in range(2)]
    table = paired_table(records, "fifo")
    assert list(table) == ["fifo", "new", "x"] and table["x"].geo_mean == pytest.approx(3.0)


# ----------------------------------------------------------------------------- the CLI, end to end on toy-v0
def test_cluster_bench_compare_prints_the_paired_ratio_and_writes_json(tmp_path, capsys):
    out = tmp_path / "cmp.json"
    assert cluster_bench(["compare", "sjf", "fifo", "--scenario", "toy-v0", "--seeds", "0-3",
                          "--backend", "serial", "--quiet", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    # toy-v0: fifo's avg JCT is 440/6 s, SJF's 430/6 s, and every seed plays the same six jobs
    # (tests/test_toy_dynamics.py): one distinct window, its seeds the world draws, paired per
    # (window, seed); the report names that unit and draws no verdict.
    assert "ratio sjf/fifo: geometric mean 0.9773, 95% CI [0.9773, 0.9773] on 1 distinct window(s)" in text
    assert "sjf better on 4 of 4 world draws (window, seed) of 1 window" in text and "ONE WINDOW" in text
    assert "excludes 1" not in text and "no verdict: the interval rests on 4 world draws of 1 window" in text
    data = json.loads(out.read_text())
    assert data["comparison"]["n"] == 4 and data["comparison"]["geo_mean"] == pytest.approx(430 / 440)
    assert data["comparison"]["distinct"] == 1 and data["comparison"]["units"] == 4
    assert data["comparison"]["unit"] == "world draw (window, seed)"
    assert len(data["episodes"]) == 8


def test_cluster_bench_compare_on_one_seed_does_not_claim_repeated_windows(capsys):
    # One seed is one window: the verdict used to say "these seeds all play the same jobs".
    assert cluster_bench(["compare", "sjf", "fifo", "--scenario", "toy-v0", "--seeds", "0",
                          "--backend", "serial", "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "REPEATED WINDOWS" not in text and "these seeds all play the same jobs" not in text
    assert "1 value to pair: no interval" in text and "--seeds 0-19" in text


def test_cluster_bench_sweep_flags_seeds_that_play_one_window(tmp_path, capsys):
    # Run and compare flagged it first; sweep printed "2 windows per point" and intervals
    # over identical toy-v0 episodes without a word.
    assert cluster_bench(["sweep", "--scenario", "toy-v0", "--loads", "0.5,1", "--seeds", "0-1", "--out",
                          str(tmp_path / "sw"), "--no-plots", "--backend", "serial", "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "REPEATED WINDOWS: the 2 seeds play only 1 distinct window at load 0.5, 1 distinct window at load 1" in text
    assert cluster_bench(["sweep", "--scenario", "philly-v0", "--loads", "1", "--seeds", "0-1", "--env",
                          "jobs_per_episode=30", "--out", str(tmp_path / "sw2"), "--no-plots", "--backend", "serial",
                          "--quiet"]) == 0
    assert "REPEATED WINDOWS" not in capsys.readouterr().out


def test_cluster_bench_compare_rejects_bad_arguments(tmp_path, capsys):
    assert cluster_bench(["compare", "fifo", "fifo", "--scenario", "toy-v0", "--quiet"]) == 2
    assert cluster_bench(["compare", "sjf", "fifo", "--scenario", "toy-v0", "--metric", "speed", "--quiet"]) == 2
    assert "unknown metric 'speed'" in capsys.readouterr().err


def test_cluster_bench_run_shows_ratios_and_writes_the_paired_plot(tmp_path, capsys):
    out = tmp_path / "res"
    assert cluster_bench(["run", "--scenario", "toy-v0", "--policies", "fifo,sjf", "--seeds", "0-2",
                          "--reference", "fifo", "--out", str(out), "--backend", "serial", "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "pending window K=8" in text and "0.977 [0.977, 0.977]" in text and "WORLD DRAWS" in text
    summary = json.loads((out / "results.json").read_text())["summary"]
    sjf = next(r for r in summary if r["policy"] == "sjf")
    assert sjf["ratio_avg_jct"] == pytest.approx(430 / 440) and sjf["win_rate_avg_jct"] == 1.0
    assert "ratio_avg_jct" in (out / "summary.csv").read_text().splitlines()[0]
    episode = json.loads((out / "results.json").read_text())["episodes"][0]
    assert episode["truncated"] is False and episode["jobs_unfinished"] == 0 and "offered_load" in episode
    png = (out / "paired_avg_jct.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_truncated_episodes_are_marked_in_the_record_and_the_table(capsys, tmp_path):
    assert cluster_bench(["run", "--scenario", "toy-v0", "--policies", "fifo,sjf", "--seeds", "0-1",
                          "--env", "max_steps=3", "--out", str(tmp_path), "--backend", "serial", "--quiet",
                          "--no-plots"]) == 0
    text = capsys.readouterr().out
    assert "TRUNCATED 2/2" in text
    episodes = json.loads((tmp_path / "results.json").read_text())["episodes"]
    assert all(e["truncated"] and e["jobs_unfinished"] > 0 for e in episodes)
    assert all(e["jobs_unfinished"] == 6 - e["jobs_finished"] for e in episodes)


# ----------------------------------------------------------------------------- load sweeps
def test_cluster_bench_sweep_writes_curves_with_intervals(tmp_path, capsys):
    out = tmp_path / "sweep"
    assert cluster_bench(["sweep", "--scenario", "toy-v0", "--loads", "0.5,2", "--policies", "fifo,sjf",
                          "--reference", "fifo", "--seeds", "0-2", "--backend", "serial", "--quiet",
                          "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "load 0.5" in text and "load 2" in text and "measured offered load: 0.500, 2.000" in text
    data = json.loads((out / "load_sweep.json").read_text())
    rows = {(r["policy"], r["load"]): r for r in data["rows"]}
    assert set(rows) == {("fifo", 0.5), ("fifo", 2.0), ("sjf", 0.5), ("sjf", 2.0)}
    for r in rows.values():
        assert r["n"] == 3 and r["offered_load"] == pytest.approx(r["load"])
        assert r["avg_jct_lo"] <= r["avg_jct"] <= r["avg_jct_hi"]
    assert rows[("fifo", 2.0)]["ratio_avg_jct"] == 1.0
    assert {e["env"] for e in data["episodes"]} == {"load=0.5", "load=2.0"}
    assert len((out / "load_sweep.csv").read_text().splitlines()) == 1 + 4
    assert (out / "load_sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_load_sweep_refuses_bad_settings():
    from baselines.harness.load_sweep import run_load_sweep

    with pytest.raises(ValueError, match="sets 'load'"):
        run_load_sweep("toy-v0", [0.5], ["fifo"], [0], env_kwargs={"load": 0.9})
    with pytest.raises(ValueError, match="positive"):
        run_load_sweep("toy-v0", [0.5, -1], ["fifo"], [0])
    with pytest.raises(ValueError, match="reference policy 'fifo'"):
        run_load_sweep("toy-v0", [0.5], ["sjf"], [0], reference="fifo")
    with pytest.raises(ValueError, match="reference policy 'las'"):     # toy-v0's yardstick, by default
        run_load_sweep("toy-v0", [0.5], ["sjf"], [0])
    assert cluster_bench(["sweep", "--scenario", "toy-v0", "--loads", "0.5,x"]) == 2    # one line, exit 2


# ----------------------------------------------------------------------------- scores --check
def test_scores_check_ends_with_a_summary_and_the_exact_update_command(tmp_path, capsys):
    path = tmp_path / "mine.json"
    assert cluster_bench(["scores", "--update", "--file", str(path), "--scenarios", "toy-v0",
                          "--policies", "fifo,sjf", "--seeds", "0-1", "--quiet"]) == 0
    data = json.loads(path.read_text())
    for entry in data["scores"]["toy-v0"]["fifo"].values():
        del entry["p99_jct"]                    # a file written before a metric existed stays valid
    path.write_text(json.dumps(data))
    capsys.readouterr()
    assert cluster_bench(["scores", "--check", "--file", str(path), "--quiet"]) == 0
    per_entry = len(data["scores"]["toy-v0"]["sjf"]["0"])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith(f"scores check: 1 file(s), {4 * per_entry - 2} values, all within 1e-06")
    data["scores"]["toy-v0"]["sjf"]["1"]["avg_jct"] *= 1.01
    path.write_text(json.dumps(data))
    assert cluster_bench(["scores", "--check", "--file", str(path), "--quiet"]) == 1
    text = capsys.readouterr().out
    assert (f"cluster-bench scores --update --file {path} --scenarios toy-v0 --policies fifo,sjf --seeds 0-1"
            in text)
    assert text.strip().splitlines()[-1].startswith(f"scores check: 1 file(s), {4 * per_entry - 2} values, "
                                                    "1 drifted in 1 file(s)")
