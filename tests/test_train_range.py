"""``train_range``: the train split's windows drawn from a fraction of it (a trace whose jobs drift is
better learned from its recent past), validation and test untouched; ``train-priority --train-range``."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

import cluster_env
from baselines.cli import main as cluster_bench
from dual_agent.priority.es import ESConfig, train_priority


def _window(env, seed: int, split: str = "train") -> tuple[int, int]:
    env.reset(seed=seed, options={"split": split})
    start, stop = re.search(r"\[(\d+):(\d+)\]", env.sim.workload.name).groups()
    return int(start), int(stop)


def test_train_windows_lie_in_the_given_fraction_of_the_train_split():
    plain = cluster_env.parallel_env("philly-hetero-v2")
    recent = cluster_env.parallel_env("philly-hetero-v2", train_range=(0.8, 1.0))
    n = plain.scenario.workload().num_jobs
    lo, hi = plain.scenario.split_range("train", n)
    cut = lo + 0.8 * (hi - lo)
    starts = [_window(recent, s)[0] for s in range(12)]
    assert all(cut - 1 <= a and b <= hi for a, b in (_window(recent, s) for s in range(12)))
    # The whole split draws most windows before the cut: the argument changed where they lie.
    assert sum(_window(plain, s)[0] < cut for s in range(12)) >= 6
    assert len(set(starts)) > 1


@pytest.mark.parametrize("split", ["validation", "test"])
def test_held_out_splits_are_unchanged(split):
    plain = cluster_env.parallel_env("philly-hetero-v2")
    recent = cluster_env.parallel_env("philly-hetero-v2", train_range=(0.8, 1.0))
    for seed in range(3):
        assert _window(plain, seed, split) == _window(recent, seed, split)


@pytest.mark.parametrize("bad", [(0.8, 0.2), (-0.1, 0.5), (0.5, 1.5), (0.3,), "0.8", (0.5, float("nan"))])
def test_a_bad_range_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="train_range"):
        cluster_env.parallel_env("philly-hetero-v2", train_range=bad)
    with pytest.raises(ValueError, match="train_range"):
        ESConfig(train_range=bad)


TINY = dict(scenario="philly-hetero-v2", iterations=2, pairs=1, windows=2, jobs_per_episode=300, eval_every=1,
            eval_seeds=1, eval_jobs_per_episode=20, workers=1, validation="split", test_windows=0, migrate=1.5)


def test_es_trains_on_the_recent_windows_and_records_the_range(tmp_path):
    train_priority(ESConfig(**TINY, train_range=(0.8, 1.0), out=str(tmp_path / "r")), log=lambda _: None)
    train_priority(ESConfig(**TINY, out=str(tmp_path / "p")), log=lambda _: None)
    last = json.loads((tmp_path / "r" / "last.priority.json").read_text())
    assert last["training"]["config"]["train_range"] == [0.8, 1.0]
    w_recent = np.array(json.loads((tmp_path / "r" / "last.priority.json").read_text())["weights"]["linear"])
    w_plain = np.array(json.loads((tmp_path / "p" / "last.priority.json").read_text())["weights"]["linear"])
    assert not np.array_equal(w_recent, w_plain)      # other windows, other gradient


def test_the_cli_flag_reaches_the_run_and_a_bad_one_names_itself(tmp_path, capsys):
    out = tmp_path / "cli"
    assert cluster_bench(["train-priority", "--smoke", "--scenario", "philly-hetero-v2", "--train-range", "0.5,1",
                          "--out", str(out), "--test-windows", "0"]) == 0
    assert json.loads((out / "last.priority.json").read_text())["training"]["config"]["train_range"] == [0.5, 1.0]
    assert cluster_bench(["train-priority", "--smoke", "--train-range", "1,0.5", "--out", str(tmp_path / "bad")]) == 2
    assert "--train-range must satisfy" in capsys.readouterr().err


def test_the_drift_table_slices_the_trace_as_the_splits_and_train_range_do():
    from tests.helpers import load_script

    drift = load_script("benchmarks/trace_drift.py")
    rows = {r["slice"]: r for r in drift.drift_rows("philly-hetero-v2")}
    scenario = cluster_env.parallel_env("philly-hetero-v2").scenario
    n = scenario.workload().num_jobs
    lo, hi = scenario.split_range("train", n)
    assert rows["train, first half"]["jobs"] + rows["train, second half"]["jobs"] == hi - lo
    recent_lo, recent_hi = scenario.with_train_range((0.8, 1.0)).split_range("train", n)
    assert rows["train, last fifth (--train-range 0.8,1)"]["jobs"] == recent_hi - recent_lo
    for split in ("validation", "test"):
        a, b = scenario.split_range(split, n)
        assert rows[split]["jobs"] == b - a
    assert all(0 <= r["multi_gpu"] <= 1 and r["median_duration_s"] > 0 for r in rows.values())


def test_the_docs_quote_the_drift_table_the_script_prints(capsys):
    from tests.helpers import ROOT, load_script

    load_script("benchmarks/trace_drift.py").main(["--scenario", "modern-v1"])
    table = capsys.readouterr().out.strip().split("\n", 1)[1]
    assert table in (ROOT / "docs" / "dual_agent.md").read_text()
