"""The plots a run writes are readable: labelled axes in words and units, one legend that names the
policies, tick labels that do not overlap, rows that do not shrink to a pixel, and time axes that
cover the whole episode (checked on the matplotlib objects, not on pixels)."""
from __future__ import annotations

import itertools

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from baselines.harness import metric_labels  # noqa: E402
from baselines.harness.episode import EpisodeResult  # noqa: E402
from cluster_env.core.metrics import METRIC_KEYS  # noqa: E402


@pytest.fixture
def figures(monkeypatch):
    """Every figure the plot functions save, drawn (so that text extents are real)."""
    import baselines.harness.paired_plots as paired_plots
    import baselines.harness.plots as plots

    figs = []
    real = plots.save_figure

    def keep(fig, path):
        fig.canvas.draw()
        figs.append(fig)
        return real(fig, path)

    monkeypatch.setattr(plots, "save_figure", keep)
    monkeypatch.setattr(paired_plots, "save_figure", keep)
    return figs


def test_every_metric_and_table_column_has_a_human_label_and_unit():
    from baselines.harness.report import SUMMARY_METRICS, TABLE_METRICS

    for key in (*METRIC_KEYS, *SUMMARY_METRICS, *TABLE_METRICS):
        label = metric_labels.METRIC_LABELS[key]
        assert label.name and "_" not in label.name, key
    assert metric_labels.plot_scale("avg_jct") == (3600.0, "average JCT (hours)")
    assert metric_labels.table_header("total_fee") == "total_fee (US$)"


def test_results_table_heads_name_their_units():
    from baselines.harness.report import TABLE_METRICS, format_table

    records = [{"policy": p, "scenario": "s-v0", "split": "test", "seed": s, "env": "", "truncated": False,
                "jobs_unfinished": 0, "pending_window": 8, "jobs_finished": 10, "preemptions": 1,
                **{m: 100.0 + s for m in METRIC_KEYS if m not in ("jobs_finished", "preemptions")}}
               for p in ("fifo", "las") for s in range(2)]
    header = next(line for line in format_table(records).splitlines() if line.startswith("scenario"))
    for metric in TABLE_METRICS:
        assert metric_labels.table_header(metric) in header, metric
    assert "avg_jct (s)" in header and "gpu_utilization (fraction)" in header


def _episode(policy: str, end_hours: float, busy_hours: float, machines: int = 6, gpus: int = 8) -> EpisodeResult:
    """A synthetic recorded episode: jobs start during the first ``busy_hours``, one long job runs
    until ``end_hours``; every machine is shared by up to ``gpus`` one-GPU jobs at once."""
    h = 3600.0
    allocations, series = [], [(0.0, 0, 0, 0)]
    job = 0
    for m in range(machines):
        for lane in range(gpus):
            start = busy_hours * h * (lane + m) / (gpus + machines)
            allocations.append((start, job, [(m, 1)]))
            allocations.append((start + 0.5 * h, job, None))
            series.append((start, gpus, 3, lane + 1))
            job += 1
    allocations.append((busy_hours * h, job, [(0, 1)]))
    allocations.append((end_hours * h, job, None))
    series += [(busy_hours * h, 1, 0, 1), (end_hours * h, 0, 0, 0)]
    series.sort()
    return EpisodeResult(record={"policy": policy, "scenario": "s-v0", "split": "test", "seed": 0},
                         series=np.array(series, dtype=np.float64), allocations=sorted(allocations, key=lambda a: a[0]),
                         machine_names=tuple(f"m{i}" for i in range(machines)), total_gpus=machines * gpus,
                         machine_types=tuple("P40" if i % 2 else "P100" for i in range(machines)))


def test_utilisation_axis_covers_the_episode_and_spreads_a_short_busy_part(figures, tmp_path):
    from baselines.harness.plots import plot_utilization

    plot_utilization([_episode("fifo", 150, 20), _episode("las", 120, 18)], tmp_path / "u.png")
    top, bottom = figures[0].axes[:2]
    assert bottom.get_xlim()[0] == 0 and bottom.get_xlim()[1] >= 150      # the whole range, not cut
    assert bottom.get_xscale() == "symlog"                                # the first 20 h are not a sliver
    to_axes = bottom.transAxes.inverted().transform
    x20 = to_axes(bottom.transData.transform((20.0, 0.0)))[0]
    assert x20 > 0.5, f"the busy part takes {x20:.0%} of the width"
    assert "hours since the first arrival" in bottom.get_xlabel()
    assert top.get_ylabel() and bottom.get_ylabel()
    legend_texts = [t.get_text() for legend in figures[0].legends for t in legend.get_texts()]
    assert legend_texts == ["fifo", "las"]


def test_utilisation_axis_stays_linear_when_jobs_arrive_all_along(figures, tmp_path):
    from baselines.harness.plots import plot_utilization

    plot_utilization([_episode("fifo", 30, 25)], tmp_path / "u.png")
    ax = figures[0].axes[1]
    assert ax.get_xscale() == "linear" and ax.get_xlim()[1] >= 30
    assert ax.get_xlabel() == "hours since the first arrival"


def test_timeline_has_a_y_label_and_a_readable_lane_per_job_on_shared_machines(figures, tmp_path):
    from baselines.harness.plots import TIMELINE_LANE_INCHES, plot_timeline

    plot_timeline(_episode("las", 150, 20, machines=14, gpus=8), tmp_path / "t.png")
    fig = figures[0]
    ax = fig.axes[0]
    assert "machine" in ax.get_ylabel()
    assert ax.get_xlim()[1] >= 150 and ax.get_xscale() == "symlog"
    bars = ax.collections[0].get_paths()
    assert len(bars) == 14 * 8 + 1
    # every bar is at least the minimum lane height on the page, so 8 jobs on one machine stay visible
    inches_per_unit = fig.get_size_inches()[1] * ax.get_position().height / abs(np.diff(ax.get_ylim())[0])
    heights = [np.ptp(p.vertices[:, 1]) * inches_per_unit for p in bars]
    assert min(heights) >= 0.9 * TIMELINE_LANE_INCHES[0] * 0.9
    # bars of one machine do not overlap: each job running at once has its own lane
    tops = sorted({round(float(p.vertices[:, 1].min()), 6) for p in bars})
    assert len(tops) >= 8


def test_paired_plot_tick_labels_do_not_overlap(figures, tmp_path):
    from baselines.harness.paired_plots import plot_paired

    names = ["fifo", "las", "las-migrate", "srpt-clairvoyant", "tiresias+fastest", "dual-priority(runs/trA/last)",
             "gittins", "sjf+best-fit", "my_pkg.agents:MyPolicy", "fifo-strict", "las-q15+consolidate", "dual"]
    records = [{"policy": p, "scenario": "s-v0", "split": "test", "seed": s, "env": "", "truncated": False,
                "avg_jct": 1000.0 * (s + 1) * (1 + 0.1 * i)} for i, p in enumerate(names) for s in range(5)]
    plot_paired(records, tmp_path / "p.png", reference="fifo")
    ax = figures[0].axes[0]
    boxes = [t.get_window_extent() for t in ax.get_xticklabels() if t.get_text()]
    assert len(boxes) == len(names) - 1
    for a, b in itertools.combinations(boxes, 2):
        assert not a.overlaps(b), "two policy names overlap"
    assert "average JCT" in ax.get_ylabel() and "fifo" in ax.get_ylabel()


def test_load_sweep_has_one_legend_for_every_panel_with_human_axis_labels(figures, tmp_path):
    from baselines.harness.paired_plots import plot_load_sweep

    rows = []
    for policy, factor in (("fifo", 1.0), ("las", 0.8), ("tiresias", 0.9)):
        for load in (0.5, 1.0, 2.0):
            row = {"policy": policy, "load": load}
            for m in ("avg_jct", "p95_jct", "gpu_utilization"):
                row[m], row[m + "_lo"], row[m + "_hi"] = 3600 * load * factor, 3000 * load * factor, 4000 * load * factor
            row.update(ratio_avg_jct=factor, ratio_avg_jct_lo=factor - 0.05, ratio_avg_jct_hi=factor + 0.05)
            rows.append(row)
    plot_load_sweep(rows, tmp_path / "s.png", reference="fifo")
    fig = figures[0]
    assert not any(ax.get_legend() for ax in fig.axes)              # no panel holds it alone
    assert len(fig.legends) == 1
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["fifo", "las", "tiresias"]
    labels = [ax.get_ylabel() for ax in fig.axes]
    assert labels[:3] == ["average JCT (hours)", "95th-percentile JCT (hours)", "GPU utilisation (fraction)"]
    assert "fifo" in labels[3]
    for label in labels + [ax.get_xlabel() for ax in fig.axes]:
        assert "_" not in label, f"a code name on an axis: {label!r}"
