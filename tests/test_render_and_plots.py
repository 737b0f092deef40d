"""Plots and renders that explain themselves: labelled frames, a human window, readable timelines
whose titles name the scenario, policy and seed."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import cluster_env  # noqa: E402
from helpers import first_allowed_actions  # noqa: E402


def _texts(fig) -> str:
    parts = [t.get_text() for t in fig.texts]
    for ax in fig.axes:
        parts += [t.get_text() for t in ax.texts] + [ax.get_title()]
        parts += [t.get_text() for t in ax.get_yticklabels()]
        legend = ax.get_legend()
        if legend is not None:
            parts += [t.get_text() for t in legend.get_texts()]
    return "\n".join(parts)


def test_rgb_array_frames_are_labelled_and_readable():
    from matplotlib.figure import Figure

    from cluster_env.envs.render import draw_frame

    env = cluster_env.parallel_env("toy-v0", split="test", render_mode="rgb_array")
    obs, _ = env.reset(seed=0)
    for _ in range(3):
        obs, *_ = env.step(first_allowed_actions(obs))
    frame = env.render()
    assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3
    assert frame.shape[0] >= 150 and frame.shape[1] >= 600          # readable alone, not 6-pixel cells
    fig = Figure()
    draw_frame(fig, env.sim, "order")
    text = _texts(fig)
    assert "toy-m0 (V100)" in text and "queue" in text and "t = " in text and "pending" in text
    assert any(line.strip().isdigit() for line in text.splitlines())   # job ids in their cells


def test_human_render_mode_draws_a_window():
    import matplotlib.pyplot as plt

    env = cluster_env.parallel_env("toy-v0", split="test", render_mode="human")
    obs, _ = env.reset(seed=0)                   # drawn at reset and at every step
    window = env._renderer._window
    assert window is not None and plt.fignum_exists(window.number)
    obs, *_ = env.step(first_allowed_actions(obs))
    assert "finished" in _texts(window) and env.render() is None
    env.close()
    assert not plt.fignum_exists(window.number)
    view = cluster_env.make("cluster_env/HeteroClusterFlat-v1", scenario="toy-v0", render_mode="human")
    assert "human" in view.metadata["render_modes"]
    view.reset(seed=0)
    view.close()


@pytest.fixture
def recorded():
    import baselines
    from baselines.harness.episode import run_episode

    return run_episode(baselines.make_policy("tiresias"), "philly-v0", "test", 3, {"jobs_per_episode": 40},
                       record=True)


def _capture(monkeypatch):
    import baselines.harness.plots as plots

    figs = []
    real = plots.save_figure

    def keep(fig, path):
        figs.append(fig)
        fig.canvas.draw()
        return real(fig, path)

    monkeypatch.setattr(plots, "save_figure", keep)
    return plots, figs


def test_timeline_groups_machines_by_type_in_natural_order_with_ids_and_legend(recorded, monkeypatch, tmp_path):
    plots, figs = _capture(monkeypatch)
    plots.plot_timeline(recorded, tmp_path / "t.png")
    ax = figs[0].axes[0]
    rows = [t.get_text() for t in ax.get_yticklabels()]
    types = recorded.machine_types
    names = list(recorded.machine_names)
    keyed = [(types[names.index(r)], plots.natural_key(r)) for r in rows]
    assert keyed == sorted(keyed) and len(set(types)) > 1
    assert plots.natural_key("m2") < plots.natural_key("m10")
    text = _texts(figs[0])
    assert "philly-v0 / test" in text and "policy tiresias" in text and "seed 3" in text
    assert "stint ended by preemption" in text
    for t in types:
        assert t in text                                           # GPU type group labels
    assert any(t.get_text().isdigit() for t in ax.texts)         # job ids on the long bars
    assert ax.get_xlabel() == "hours since the first arrival"


def test_every_plot_titles_its_scenario_and_seeds(recorded, monkeypatch, tmp_path):
    plots, figs = _capture(monkeypatch)
    plots.plot_jct_cdf([recorded], tmp_path / "c.png", title="JCT CDF")
    plots.plot_utilization([recorded], tmp_path / "u.png")
    for fig in figs:
        title = fig.axes[0].get_title()
        assert "philly-v0 / test" in title and "seed 3" in title, title
    assert figs[1].axes[1].get_xlabel() == "hours since the first arrival"


def test_lanes_separate_jobs_sharing_a_machine():
    from baselines.harness.plots import _lanes

    assert _lanes([(0, 5, 1, False), (1, 2, 2, False), (3, 4, 3, False), (6, 1, 4, False)]) == [0, 1, 1, 0]


def test_cluster_bench_replay_writes_an_animated_gif(tmp_path, capsys):
    from PIL import Image

    from baselines.cli import main as cluster_bench

    gif = tmp_path / "episode.gif"
    assert cluster_bench(["replay", "--scenario", "toy-v0", "--policy", "tiresias", "--seed", "1",
                          "--gif", str(gif)]) == 0
    with Image.open(gif) as im:
        assert im.n_frames >= 3 and im.size[0] >= 600
    assert "frames" in capsys.readouterr().out
    assert cluster_bench(["replay", "--scenario", "toy-v0", "--max-frames", "3"]) == 0
    assert capsys.readouterr().out.count("queue:") >= 3
    assert cluster_bench(["replay", "--gif", str(tmp_path / "x.png")]) == 2


def test_cluster_bench_replay_keeps_max_frames_a_maximum(tmp_path, capsys):
    # --max-frames is "frames at most": the final frame used to come on top (3 -> 4, 1 -> 2).
    from baselines.cli import main as cluster_bench

    for n in (1, 2, 3, 5):
        assert cluster_bench(["replay", "--scenario", "toy-v0", "--policy", "las", "--max-frames", str(n)]) == 0
        text = capsys.readouterr().out
        assert text.count("queue:") == n
        assert "finished=6/6" in text.split("queue:")[-2]      # the last frame is the episode's end
    gif = tmp_path / "e.gif"
    assert cluster_bench(["replay", "--scenario", "toy-v0", "--max-frames", "3", "--gif", str(gif)]) == 0
    assert ": 3 frames of" in capsys.readouterr().out


def test_gitignore_covers_results_and_runs():
    from pathlib import Path

    lines = (Path(__file__).resolve().parents[1] / ".gitignore").read_text().split()
    for entry in ("cluster-bench-results/", "runs/", "*.gif"):
        assert entry in lines


def test_timeline_draws_every_stint_in_one_collection(recorded, monkeypatch, tmp_path):
    """The main job's time: one artist per stint cost ~2.8 s per philly-v1 timeline; the
    bars are one collection (same rectangles, colours and edges, in the same order)."""
    from matplotlib.colors import to_rgba

    plots, figs = _capture(monkeypatch)
    plots.plot_timeline(recorded, tmp_path / "t.png")
    ax = figs[0].axes[0]
    bars, origin = plots._stints(recorded)
    stints = [st for rows in bars.values() for st in rows]
    assert len(ax.collections) == 1
    col = ax.collections[0]
    assert len(col.get_paths()) == len(stints) > 10
    red = [tuple(e) == to_rgba("red") for e in col.get_edgecolors()]
    assert sum(red) == sum(p for *_, p in stints)
    assert sorted(col.get_linewidths()) == sorted(1.2 if p else 0.3 for *_, p in stints)
    lefts = sorted(round(float(p.vertices[0, 0]), 9) for p in col.get_paths())
    assert lefts == sorted(round((s - origin) / 3600.0, 9) for s, *_ in stints)
