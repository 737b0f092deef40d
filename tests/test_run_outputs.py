"""What ``cluster-bench run`` shows and writes: a colour per policy that no other policy of the run
has, the same in every plot; plots of the service objectives and of the gap to best-known; a line
saying why there is no gap column; a default table that fits a terminal (every column in the
files, ``--columns`` to choose); what is written after the episodes; safe file names; and a
``lower-bound`` that names its scenario and best-known."""
from __future__ import annotations

import json
import re

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402

from baselines.cli import main as cluster_bench  # noqa: E402
from baselines.harness.report import format_table  # noqa: E402

#: What a terminal shows: the default table must fit it.
TABLE_WIDTH = 120

#: Fifteen of the run's policy names, as a philly-slo-v1 run has them.
FIFTEEN = ["random", "fifo", "fifo-strict", "sjf", "tiresias", "las", "gittins", "srpt-clairvoyant", "las-migrate",
           "edf", "edf-clairvoyant", "tias", "priority", "quota", "ftf"]


@pytest.fixture
def figures(monkeypatch):
    """Every figure the plot functions save (kept open to inspect)."""
    import importlib

    import baselines.harness.plots as plots

    figs = {}
    real = plots.save_figure

    def keep(fig, path):
        figs[str(path).rsplit("/", 1)[-1]] = fig
        return real(fig, path)

    for name in ("plots", "paired_plots", "summary_plots"):
        try:
            module = importlib.import_module(f"baselines.harness.{name}")
        except ImportError:           # a module the plots of this version lack: its tests fail on their own
            continue
        monkeypatch.setattr(module, "save_figure", keep)
    return figs


def rec(policy, seed, avg_jct, scenario="toy-v0", env="", **more):
    return {"policy": policy, "scenario": scenario, "split": "test", "seed": seed, "env": env,
            "window": f"w{seed}", "avg_jct": avg_jct, "truncated": False, "jobs_unfinished": 0,
            "pending_window": 8, **more}


def _table(tmp_path, monkeypatch, seeds=(0, 1)):
    """A toy-v0 optimality table with windows w0, w1 (best-known 1000, bound 500)."""
    import baselines.optimality.table as table

    (tmp_path / "tables").mkdir()
    windows = {str(s): {"window": f"w{s}", "lower_bound": 500.0, "best_known": 1000.0} for s in seeds}
    (tmp_path / "tables" / "toy-v0.json").write_text(json.dumps(
        {"scenario": "toy-v0", "split": "test", "metric": "avg_jct", "windows": windows}))
    monkeypatch.setattr(table, "TABLES_DIR", tmp_path / "tables")
    table.load_table.cache_clear()
    return table


# ----------------------------------------------------------------------------- colours
def test_any_number_of_policies_get_distinct_colours_and_the_first_ten_are_tab10():
    from baselines.harness.styles import policy_styles

    for n in (15, 20, 21, 60):
        styles = policy_styles([f"p{i}" for i in range(n)])
        colours = [tuple(round(c, 3) for c in s.color) for s in styles.values()]
        assert len(set(colours)) == n, n
    first = policy_styles(FIFTEEN)
    assert [first[p].color for p in FIFTEEN[:10]] == [to_rgb(f"C{i}") for i in range(10)]
    assert policy_styles(["b", "a"])["a"] == policy_styles(["x", "a"])["a"]       # the run's order decides


def test_a_jct_cdf_of_fifteen_policies_draws_each_in_its_own_colour(figures, tmp_path):
    import numpy as np

    from baselines.harness.episode import EpisodeResult
    from baselines.harness.plots import plot_jct_cdf

    episodes = [EpisodeResult(record=rec(p, 0, 100.0 + i), jct=np.array([10.0 + i, 20.0 + i]))
                for i, p in enumerate(FIFTEEN)]
    plot_jct_cdf(episodes, tmp_path / "jct_cdf.png")
    lines = {line.get_label(): to_rgb(line.get_color()) for line in figures["jct_cdf.png"].axes[0].get_lines()}
    assert set(lines) == set(FIFTEEN)
    assert len(set(lines.values())) == 15, "two policies share a colour"
    assert lines["random"] != lines["edf-clairvoyant"]


# ----------------------------------------------------------------------------- objective and gap plots
def test_the_objectives_plot_has_a_panel_per_objective_and_a_column_per_policy(figures, tmp_path):
    from baselines.harness.styles import policy_styles
    from baselines.harness.summary_plots import plot_objectives

    records = [rec(p, s, 100.0, deadline_attainment=0.5 + 0.1 * i, hp_avg_jct=3600.0 * (i + 1),
                   be_avg_jct=7200.0, deadline_jobs=10) for i, p in enumerate(("fifo", "edf")) for s in range(3)]
    styles = policy_styles(["las", "fifo", "edf"])
    plot_objectives(records, tmp_path / "objectives.png", styles=styles)
    axes = [ax for ax in figures["objectives.png"].axes if ax.get_visible()]
    assert [ax.get_ylabel() for ax in axes] == ["deadline attainment (fraction)",
                                                "average JCT of high-priority jobs (hours)",
                                                "average JCT of best-effort jobs (hours)"]
    points = axes[0].collections[0]                  # fifo's windows, in fifo's colour of the run
    assert tuple(points.get_facecolor()[0][:3]) == pytest.approx(styles["fifo"].color)
    assert sorted(points.get_offsets()[:, 1]) == pytest.approx([0.5] * 3)
    with pytest.raises(ValueError, match="no service-objective metric"):
        plot_objectives([rec("fifo", 0, 1.0)], tmp_path / "none.png")


def test_the_gap_plot_shows_each_policys_gap_per_window_in_percent(figures, tmp_path, monkeypatch):
    from baselines.harness.summary_plots import plot_gaps

    table = _table(tmp_path, monkeypatch)
    try:
        records = [rec("fifo", s, 1250.0) for s in (0, 1, 2)] + [rec("sjf", s, 1100.0) for s in (0, 1, 2)]
        plot_gaps(records, tmp_path / "gap_best_known.png")
        ax = figures["gap_best_known.png"].axes[0]
        assert sorted(ax.collections[0].get_offsets()[:, 1]) == pytest.approx([25.0, 25.0])   # seed 2: no entry
        assert "gap to best-known (%)" in ax.get_ylabel()
        assert [t.get_text() for t in ax.get_xticklabels()] == ["fifo", "sjf"]
        with pytest.raises(ValueError, match="no gap to best-known: .*changes it"):
            plot_gaps([rec("fifo", 0, 1.0, env="fluctuation=False")], tmp_path / "x.png")
    finally:
        table.load_table.cache_clear()


# ----------------------------------------------------------------------------- why no gap column
def test_a_table_without_gaps_says_why_in_one_line(tmp_path, monkeypatch):
    def why(records):
        lines = [ln for ln in format_table(records, metrics=("avg_jct",), reference="fifo").splitlines()
                 if ln.startswith("no gap to best-known: ")]
        assert len(lines) == 1, lines
        return lines[0]

    records = [rec(p, s, 1000.0 + s) for p in ("fifo", "sjf") for s in (0, 1)]
    assert "no optimality table ships for s-v0" in why([dict(r, scenario="s-v0") for r in records])
    table = _table(tmp_path, monkeypatch)
    try:
        assert "gap to best-known / to bound" in format_table(records, metrics=("avg_jct",), reference="fifo")
        assert "holds test windows, this run plays the validation split" in why(
            [dict(r, split="validation") for r in records])
        assert "holds its default world, this run changes it (jobs_per_episode=100)" in why(
            [dict(r, env="jobs_per_episode=100") for r in records])
        assert "has test seeds 0-1, none of this run's" in why([dict(r, seed=7) for r in records])
        assert "are not the ones its optimality table recorded" in why([dict(r, window="other") for r in records])
    finally:
        table.load_table.cache_clear()


# ----------------------------------------------------------------------------- the table's width
def _wide_records():
    """Fifteen policies with every metric a philly-slo-v1 run has, long numbers, on 2 windows."""
    from cluster_env.core.metrics import METRIC_KEYS
    from cluster_env.core.objectives import OBJECTIVE_KEYS

    out = []
    for i, p in enumerate(FIFTEEN):
        for s in range(2):
            values = {m: 123456.789 * (i + 1) * (s + 1) for m in (*METRIC_KEYS, *OBJECTIVE_KEYS) if m != "avg_jct"}
            out.append(rec(p, s, 10000.0 * (i + 1) * (s + 1), scenario="philly-slo-v1",
                           **{**values, "jobs_finished": 300, "preemptions": 5, "fallbacks": 0, "steps": 600}))
    return out


def test_a_table_fitted_to_a_width_keeps_the_telling_columns_and_names_the_rest():
    from baselines.harness.report import table_metrics

    records = _wide_records()
    full = format_table(records, table_metrics(records), reference="las-migrate")
    assert max(map(len, full.splitlines())) > 200          # every column: wider than a terminal
    fitted = format_table(records, table_metrics(records), reference="las-migrate", width=TABLE_WIDTH)
    lines = fitted.splitlines()
    assert max(map(len, lines)) <= TABLE_WIDTH
    header = next(ln for ln in lines if ln.startswith("policy "))
    assert "avg_jct (s)" in header and "avg_jct vs las-migrate" in header and "wins" in header
    assert "deadline_attainment (fraction)" in header                 # the scenario's first objective
    words = " ".join(fitted.split())                                  # the caption's lines unwrapped
    left = words[words.index("left out to fit 120 characters: "):]
    assert "total_fee" in left.split("(")[0] and "(the summary files have every column)" in left
    chosen = format_table(records, table_metrics(records), reference="las-migrate",
                          columns=["p99_jct", "ratio", "quota_violation"]).splitlines()
    header = next(ln for ln in chosen if ln.startswith("policy "))
    assert header.split() == ["policy", "p99_jct", "(s)", "avg_jct", "vs", "las-migrate", "quota_violation",
                              "(fraction)"]
    with pytest.raises(ValueError, match="unknown table column.*'p42_jct'"):
        format_table(records, columns=["p42_jct"])


def test_run_refuses_an_unknown_column_before_any_episode(tmp_path, capsys):
    assert cluster_bench(["run", "--scenario", "toy-v0", "--policies", "fifo", "--columns", "avg_jct,bogus",
                          "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "unknown column(s) 'bogus'" in err and "gap_bound" in err
    assert not (tmp_path / "o").exists()


def test_the_report_fits_a_terminal_and_run_help_names_the_columns(capsys):
    import baselines.harness.report as report

    assert report.TABLE_WIDTH == TABLE_WIDTH
    with pytest.raises(SystemExit):
        cluster_bench(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--columns NAME,...|all" in text and f"those that fit {TABLE_WIDTH} characters" in text
    assert "gap_bound" in text and "fallback" in text


def _table_block(out: str) -> list[str]:
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("pending window K="))
    end = next(i for i, ln in enumerate(lines) if ln.startswith("arrivals: "))
    return lines[start:end]


def test_a_real_runs_default_table_fits_a_terminal_and_the_files_keep_every_column(tmp_path, capsys):
    out = tmp_path / "res"
    assert cluster_bench(["run", "--seeds", "0-1", "--out", str(out), "--backend", "serial", "--quiet",
                          "--no-plots"]) == 0
    block = _table_block(capsys.readouterr().out)
    assert max(map(len, block)) <= TABLE_WIDTH, max(block, key=len)
    assert any(ln.startswith("policy ") and "gap to best-known" in ln for ln in block)
    assert any(ln.startswith("left out to fit 120 characters: ") for ln in block)
    header = (out / "summary.csv").read_text().splitlines()[0].split(",")
    assert {"p95_jct", "avg_queue_delay", "total_fee", "gap_lower_bound", "fallback_share"} <= set(header)
    assert cluster_bench(["run", "--seeds", "0-1", "--out", str(out), "--backend", "serial", "--quiet",
                          "--no-plots", "--columns", "all"]) == 0
    assert max(map(len, _table_block(capsys.readouterr().out))) > 200


# ----------------------------------------------------------------------------- a run's plots, end to end
def test_a_run_says_what_it_writes_and_every_plot_draws_a_policy_in_one_colour(figures, tmp_path, capsys):
    policies = ["fifo", "sjf", "las", "tiresias", "random", "srpt-clairvoyant", "fifo-strict", "las-migrate",
                "gittins", "fifo+fastest", "sjf+fastest", "tiresias+fastest"]
    out = tmp_path / "res"
    assert cluster_bench(["run", "--scenario", "toy-v0", "--policies", ",".join(policies), "--seeds", "0-1",
                          "--out", str(out), "--backend", "serial", "--quiet"]) == 0
    text = capsys.readouterr().out
    assert f"writing {3 + len(policies)} plots to {out}" in text            # before the seconds they take
    assert text.index("writing ") < text.index("episodes in")
    cdf = {ln.get_label(): to_rgb(ln.get_color()) for ln in figures["jct_cdf.png"].axes[0].get_lines()}
    util = {ln.get_label(): to_rgb(ln.get_color()) for ln in figures["utilization.png"].axes[0].get_lines()}
    assert len(set(cdf.values())) == len(policies) and cdf == util
    assert (out / "timeline_tiresias_fastest.png").is_file()
    assert "no gap to best-known: no optimality table ships for toy-v0" in text


# ----------------------------------------------------------------------------- file names
def test_file_names_made_from_labels_are_safe_slugs_and_never_collide():
    from baselines.cli_outputs import timeline_file, timeline_files

    assert timeline_file("MaskablePPO(ppo_model)") == "timeline_MaskablePPO_ppo_model.png"
    assert timeline_file("dual-priority(trA/last)") == "timeline_dual-priority_trA_last.png"
    assert timeline_file("tiresias+fastest") == "timeline_tiresias_fastest.png"
    labels = ["a+b", "a/b", "a b", "..", "x:y$(rm -rf)"]
    names = timeline_files(labels)
    assert len(set(names.values())) == len(labels)
    assert all(re.fullmatch(r"timeline_[A-Za-z0-9_][A-Za-z0-9._-]*\.png", n) for n in names.values()), names


# ----------------------------------------------------------------------------- lower-bound
def test_lower_bound_names_the_scenario_and_best_known_and_every_option_has_help(capsys):
    from baselines.cli import build_parser
    from baselines.optimality import load_table

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices["lower-bound"]
    for action in sub._actions:
        assert action.help, action.dest
    assert cluster_bench(["lower-bound", "--scenario", "modern-v1", "--seeds", "0"]) == 0
    out = capsys.readouterr().out
    row = load_table("modern-v1")[0]
    assert out.startswith("modern-v1 / test: certified lower bound")
    assert "best-known (s)" in out and f"{row.best_known:14,.1f}" in out
    assert f"{row.best_known / row.lower_bound:16.3f}" in out
