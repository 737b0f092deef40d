"""Tables, comparisons and plots paired on a metric other than average JCT: ``run --metric`` and
``compare --metric`` pair with that metric's yardstick on the scenario (one function,
:func:`baselines.yardstick.yardstick`), say which metric and yardstick, show no column for a metric
the scenario does not measure, say when the means and the geometric mean point different ways,
and refuse a metric the scenario lacks; and where ``edf`` and ``edf-clairvoyant`` differ."""
from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from baselines.cli import main as cluster_bench

NAN = math.nan
#: A table cell of NaN ("tenants" holds the letters too).
NAN_CELL = re.compile(r"\bnan\b")
#: Small windows: every episode of these tests is a few dozen jobs.
SMALL = ["--seeds", "0-1", "--env", "jobs_per_episode=30", "--backend", "serial", "--quiet"]


def rec(policy, seed, scenario="philly-tenants-v1", **metrics):
    return {"policy": policy, "scenario": scenario, "split": "test", "seed": seed, "env": "", "window": f"w{seed}",
            "truncated": False, "jobs_unfinished": 0, "pending_window": 8, **metrics}


# ------------------------------------------------------------------ the yardstick of a metric
def test_one_function_answers_the_yardstick_of_a_scenario_on_a_metric():
    from baselines.yardstick import OBJECTIVE_YARDSTICKS, YARDSTICKS, yardstick, yardstick_of_records

    for scenario, table in OBJECTIVE_YARDSTICKS.items():
        for metric, rule in table.items():
            assert yardstick(scenario, metric) == rule
            assert yardstick(f"{scenario}+my_jobs.csv", metric) == rule        # a user's trace on the base
        assert yardstick(scenario) == yardstick(scenario, "avg_jct") == YARDSTICKS[scenario]
        assert yardstick(scenario, "p95_jct") == YARDSTICKS[scenario]          # no rule of its own: avg JCT's
    assert yardstick("philly-tenants-v1", "tenant_max_slowdown") == "quota"
    assert yardstick("philly-tenants-v1", "fairness") == "las"                 # higher is better: chosen by its sign
    records = [rec("x", 0)]
    assert yardstick_of_records(records, "tenant_max_slowdown") == "quota"
    assert yardstick_of_records(records) == "las-migrate"


def test_a_default_paired_summary_on_a_higher_is_better_metric_takes_its_yardstick_and_counts_higher_as_wins():
    from baselines.harness.stats import paired_summary

    records = [rec("las", s, fairness=f) for s, f in enumerate((0.8, 0.9, 0.7))]
    records += [rec("quota", s, fairness=f) for s, f in enumerate((0.9, 0.8, 0.8))]
    s = paired_summary(records, "quota", metric="fairness")
    assert s.reference == "las"                                  # fairness' yardstick on philly-tenants-v1
    assert s.wins == 2 and s.units == 3                          # 0.9 > 0.8 and 0.8 > 0.7 are wins


def test_compare_with_a_metric_pairs_with_that_metrics_yardstick(capsys):
    assert cluster_bench(["compare", "ftf", "--scenario", "philly-tenants-v1", "--metric", "tenant_max_slowdown",
                          *SMALL]) == 0
    out = capsys.readouterr().out
    assert "note: comparing with quota, philly-tenants-v1's yardstick of tenant_max_slowdown" in out
    assert "ftf vs quota on philly-tenants-v1/test" in out and "ratio ftf/quota" in out
    # The yardstick itself has no default B: one line says so and names one.
    assert cluster_bench(["compare", "quota", "--scenario", "philly-tenants-v1", "--metric", "tenant_max_slowdown",
                          *SMALL]) == 2
    err = capsys.readouterr().err
    assert "quota is philly-tenants-v1's yardstick of tenant_max_slowdown" in err and "give B" in err


def test_run_with_a_metric_pairs_on_it_and_names_its_yardstick(tmp_path, capsys):
    out = tmp_path / "res"
    assert cluster_bench(["run", "--scenario", "philly-slo-v1", "--policies", "edf", "--metric", "deadline_attainment",
                          "--out", str(out), "--no-plots", *SMALL]) == 0
    text = capsys.readouterr().out
    assert ("note: added las-migrate, the reference of the paired ratios (philly-slo-v1's yardstick of "
            "deadline_attainment), to the policies") in text
    assert "vs las-migrate, the scenario's yardstick of deadline_attainment" in text
    assert "deadline_attainment vs las-migrate" in text
    assert " ".join(text.split()).count("deadline_attainment is higher") == 1          # the wins' direction
    meta = json.loads((out / "results.json").read_text())["meta"]
    assert meta["metric"] == "deadline_attainment" and meta["reference"] == "las-migrate"
    assert "ratio_deadline_attainment" in (out / "summary.csv").read_text().splitlines()[0]


def test_the_paired_plot_names_the_metric_and_the_yardstick():
    from baselines.harness.paired_plots import paired_title
    from baselines.yardstick import yardstick_words

    role = yardstick_words("philly-slo-v1", "deadline_attainment", owner="the scenario's")
    title = paired_title("deadline_attainment", "las-migrate", "philly-slo-v1 / test", role)
    assert title == ("deadline_attainment / las-migrate's per window, philly-slo-v1 / test\n"
                     "(the scenario's yardstick of deadline_attainment; higher is better)")
    # The default run's title is as before.
    assert paired_title("avg_jct", "las-migrate", "philly-v1 / test") == "avg JCT / las-migrate's per window, philly-v1 / test"
    assert yardstick_words("philly-v1", "p95_jct") == "philly-v1's yardstick of average JCT (none is chosen for p95_jct)"


def test_the_table_caption_names_the_metric_and_its_yardstick():
    from baselines.harness.report import format_table

    records = [rec(p, s, avg_jct=100.0 + s, tenant_max_slowdown=v + s)
               for p, v in (("quota", 2.0), ("ftf", 2.5)) for s in range(2)]
    text = format_table(records, ("tenant_max_slowdown", "avg_jct"), paired_metric="tenant_max_slowdown")
    assert "vs quota, the scenario's yardstick of tenant_max_slowdown" in text
    assert "tenant_max_slowdown vs quota" in text


# ------------------------------------------------------------------ no column for a metric the scenario lacks
def test_no_column_for_a_metric_nan_in_every_record_but_a_real_nan_shows():
    from baselines.harness.report import format_table, table_metrics
    from baselines.harness.summary_plots import objective_metrics

    # philly-tenants-v1 has no deadline and no classes: those metrics are NaN in every episode.
    records = [rec(p, s, avg_jct=100.0 + s, deadline_jobs=0, deadline_attainment=NAN, hp_avg_jct=NAN,
                   be_avg_jct=(NAN if (p, s) == ("ftf", 1) else 50.0 + s), tenant_max_slowdown=2.0)
               for p in ("las-migrate", "ftf") for s in range(2)]
    metrics = table_metrics(records)
    assert "deadline_attainment" not in metrics and "hp_avg_jct" not in metrics
    assert "be_avg_jct" in metrics and "tenant_max_slowdown" in metrics
    assert table_metrics(records, "tenant_max_slowdown")[0] == "tenant_max_slowdown"
    assert objective_metrics(records) == ["be_avg_jct", "tenant_max_slowdown"]
    table = format_table(records, [m for m in metrics if m in records[0]])
    assert "deadline attainment" not in table and "high-priority" not in table
    rows = {line.split()[1]: line for line in table.splitlines() if line.startswith("philly-tenants-v1 ")}
    assert "nan ± nan" in rows["ftf"] and not NAN_CELL.search(rows["las-migrate"])   # ftf's real NaN window shows
    # Two scenarios, one measures the metric: the other's rows show "-", not "nan ± nan".
    slo = [rec(p, s, scenario="philly-slo-v1", avg_jct=100.0 + s, deadline_attainment=0.9)
           for p in ("las-migrate", "ftf") for s in range(2)]
    both = format_table(records + slo, ("avg_jct", "deadline_attainment"))
    tenants_rows = [line for line in both.splitlines() if line.startswith("philly-tenants-v1")]
    assert tenants_rows and all(line.rstrip().endswith("-") for line in tenants_rows)
    assert not any(NAN_CELL.search(line) for line in tenants_rows)


def test_a_default_tenants_run_shows_no_deadline_columns(tmp_path, capsys):
    assert cluster_bench(["run", "--scenario", "philly-tenants-v1", "--policies", "las-migrate", "--columns", "all",
                          "--out", str(tmp_path / "res"), "--no-plots", *SMALL]) == 0
    text = capsys.readouterr().out
    assert not NAN_CELL.search(text) and "deadline attainment" not in text and "hp_avg_jct" not in text
    assert "be_avg_jct" in text and "tenant_max_slowdown" in text


# ------------------------------------------------------------------ means against the geometric mean
def test_the_direction_sentence_appears_only_when_the_means_and_the_geometric_mean_disagree():
    from baselines.harness.stats import direction_note

    note = direction_note(2.539, 2.669, 1.0036)            # the means say better, the ratios say worse
    assert note is not None and "a few windows with large values dominate the mean" in note
    assert "the geometric mean weighs each window equally" in note and "0.9513" in note and "1.0036" in note
    assert direction_note(2.669, 2.539, 0.9964) is not None                  # the other way round
    assert direction_note(2.539, 2.669, 0.95) is None                        # both below 1
    assert direction_note(2.669, 2.539, 1.05) is None                        # both above 1
    assert direction_note(2.5, 2.5, 1.05) is None                            # equal means: no direction
    assert direction_note(2.4, 2.5, 1.0) is None
    assert direction_note(NAN, 2.5, 1.05) is None


def test_a_table_says_when_a_rows_means_and_ratio_point_different_ways():
    from baselines.harness.report import format_table

    # Window 1 has large values: the reference's mean is larger (50.5 vs 31), while the per-window
    # ratios (2 and 0.6) have a geometric mean above 1.
    disagree = [rec("las-migrate", 0, avg_jct=1.0), rec("las-migrate", 1, avg_jct=100.0),
                rec("fifo", 0, avg_jct=2.0), rec("fifo", 1, avg_jct=60.0)]
    text = format_table(disagree, ("avg_jct",))
    assert "MEANS VS RATIO: avg_jct: the means differ in direction from the paired geometric mean for fifo" in text
    agree = [rec("las-migrate", 0, avg_jct=1.0), rec("las-migrate", 1, avg_jct=100.0),
             rec("fifo", 0, avg_jct=2.0), rec("fifo", 1, avg_jct=120.0)]
    assert "MEANS VS RATIO" not in format_table(agree, ("avg_jct",))


# ------------------------------------------------------------------ an unknown metric, or one the scenario lacks
@pytest.mark.parametrize("argv,words,listed,unlisted", [
    (["compare", "fifo", "--scenario", "philly-tenants-v1", "--metric", "speed"], "unknown metric 'speed'",
     "tenant_max_slowdown", "deadline_attainment"),
    (["compare", "fifo", "--scenario", "philly-tenants-v1", "--metric", "deadline_attainment"],
     "philly-tenants-v1 does not measure 'deadline_attainment' (its jobs have no deadlines)", "quota_violation",
     "hp_avg_jct"),
    (["run", "--scenario", "philly-slo-v1", "--policies", "edf", "--metric", "quota_violation"],
     "philly-slo-v1 does not measure 'quota_violation' (its jobs have no tenant quotas)", "deadline_attainment",
     "quota_violation"),
    (["run", "--scenario", "philly-v1", "--policies", "fifo", "--metric", "tenant_max_slowdown"],
     "philly-v1 does not measure 'tenant_max_slowdown'", "avg_jct", "be_avg_jct"),
])
def test_an_unknown_or_unmeasured_metric_is_one_line_naming_it_and_the_metrics(argv, words, listed, unlisted, tmp_path,
                                                                                 capsys):
    if argv[0] == "run":
        argv = [*argv, "--out", str(tmp_path / "res")]
    assert cluster_bench([*argv, "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and words in err[0], err
    assert err[1].startswith("hint: --metric takes one of") and listed in err[1] and unlisted not in err[1], err[1]
    assert not (tmp_path / "res" / "results.csv").exists()


# ------------------------------------------------------------------ edf and edf-clairvoyant
def _edf_ranks(clairvoyant: bool, remaining: float) -> list[int]:
    """The order EDF gives three candidates: a deadline job with 1000 s left and 500 s of work, a
    deadline job with 200 s left and ``remaining`` s of work (at its fastest type's speed), and a
    best-effort job that attained 100 s (the second deadline job attained 50 s)."""
    from baselines.obs import G, J
    from baselines.objective_orderers import C, EDF
    from cluster_env.envs.observation import GLOBAL_FEATURES

    jobs = np.zeros((3, len(C)), dtype=np.float32)
    for row, (has, left, work, attained) in enumerate(((1, 1000.0, 500.0, 0.0), (1, 200.0, remaining, 50.0),
                                                       (0, NAN, 300.0, 100.0))):
        jobs[row, C["has_deadline"]] = has
        jobs[row, C["deadline_left_log"]] = np.log1p(left) if has else -1.0
        jobs[row, C["overdue"]] = 0.0
        jobs[row, J["remaining_log"]] = np.log1p(work)
        jobs[row, J["attained_log"]] = np.log1p(attained)
    glob = np.zeros(len(GLOBAL_FEATURES), dtype=np.float32)
    glob[G["clairvoyant"]] = 1.0
    rows, rank = EDF(clairvoyant=clairvoyant).rank_rows(jobs, np.arange(3), np.arange(3.0), {"global": glob})
    return [int(rows[i]) for i in np.argsort(rank)]


def test_edf_and_edf_clairvoyant_differ_only_on_a_deadline_job_that_can_no_longer_finish_in_time():
    # Every deadline job can still finish in time: the clairvoyant admission rejects none, the
    # same order (earliest deadline first, then best-effort work by least attained service).
    assert _edf_ranks(False, remaining=100.0) == _edf_ranks(True, remaining=100.0) == [1, 0, 2]
    # 300 s of work with 200 s left, not yet overdue: edf still runs it first; edf-clairvoyant
    # drops it to the best-effort level (before the job that attained more).
    assert _edf_ranks(False, remaining=300.0) == [1, 0, 2]
    assert _edf_ranks(True, remaining=300.0) == [0, 1, 2]


def test_edf_and_edf_clairvoyant_score_the_same_on_the_checked_in_windows():
    # docs/objectives.md: on philly-slo-v1's test windows 0-4 no deadline job becomes hopeless while
    # others wait, so the two make the same decisions (they differ on windows 6, 12, 13 and 15 of 0-19).
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "baselines" / "scores" / "philly-slo-v1.json"
    scores = json.loads(root.read_text())["scores"]["philly-slo-v1"]
    assert sorted(scores["edf"]) == ["0", "1", "2", "3", "4"]
    assert scores["edf"] == scores["edf-clairvoyant"]


# ------------------------------------------------------------------ the docs say what the code does
def test_the_docs_name_each_objectives_yardstick_and_print_the_sentence_the_code_prints():
    from pathlib import Path

    from baselines.harness.stats import direction_note
    from baselines.yardstick import OBJECTIVE_YARDSTICKS

    docs = Path(__file__).resolve().parents[1] / "docs"
    text = " ".join((docs / "objectives.md").read_text().split())
    part = text.split("pair with it by default")[1].split(" On 20 windows")[0]
    named: dict[str, dict[str, str]] = {}
    for chunk, scenario in re.findall(r"(.*?) on `([\w-]+)`[;.]", part):
        for metrics, rule in re.findall(r"((?:`\w+`(?:, )?)+): `([\w-]+)`", chunk):
            for metric in re.findall(r"`(\w+)`", metrics):
                named.setdefault(scenario, {})[metric] = rule
    assert named == OBJECTIVE_YARDSTICKS
    # The compare example of docs/baselines.md: its sentence is the one direction_note writes for its means.
    page = (docs / "baselines.md").read_text()
    assert f"  {direction_note(2.669, 2.539, 0.9964)}\n" in page
