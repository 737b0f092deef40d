"""Deadlines drawn from the Chronus artifact's published distribution: the shipped figures and their
provenance, the loader's checks, and ``with_chronus_deadlines``'s share, quantiles and determinism."""
from __future__ import annotations

import hashlib
import re
import shutil

import numpy as np
import pytest

from cluster_env.core.instance import Workload
from cluster_env.core.objectives import BEST_EFFORT, HIGH_PRIORITY
from cluster_env.errors import DataError
from cluster_env.scenarios.objectives import (
    CHRONUS_BANDS_FILE, CHRONUS_DATA_DIR, CHRONUS_DEADLINE_SHARE, CHRONUS_DEADLINE_TRACE, CHRONUS_FACTORS_FILE,
    CHRONUS_TRACES_FILE, DERIVATION_SEED, DeadlineFactors, load_deadline_factors, read_chronus_table,
    with_chronus_deadlines, with_deadlines,
)
from tests.helpers import load_script

derive = load_script("benchmarks/derive_chronus_deadlines.py")
TRACES = ("SLO", "MIX1", "MIX2")


def synthetic(n: int = 100_000, seed: int = 5) -> Workload:
    """n one-GPU jobs with durations from a minute to ten hours."""
    rng = np.random.default_rng(seed)
    return Workload(name="synthetic", job_ids=tuple(f"j{i}" for i in range(n)), submit=np.arange(n, dtype=np.float64),
                    duration=rng.uniform(60.0, 36_000.0, n), gpus=np.ones(n, dtype=np.int64),
                    job_type=np.zeros(n, dtype=np.int64), tenant=np.zeros(n, dtype=np.int64))


# --------------------------------------------------------------------------- shipped files and provenance
def test_shipped_files_match_the_sha256_in_sources_md_and_the_raw_digests_are_the_scripts():
    text = (CHRONUS_DATA_DIR / "SOURCES.md").read_text(encoding="utf-8")
    listed = dict(re.findall(r"^\| `([^`/]+\.csv)` \|.*\| `([0-9a-f]{64})` \|$", text, re.M))
    shipped = sorted(p.name for p in CHRONUS_DATA_DIR.iterdir() if p.name != "SOURCES.md")
    assert sorted(listed) == shipped == sorted(["deadline_factors.csv", "traces.csv", "k_by_duration.csv"])
    for name, sha in listed.items():
        assert hashlib.sha256((CHRONUS_DATA_DIR / name).read_bytes()).hexdigest() == sha, name
    # The raw traces the figures come from: the script checks these digests before deriving.
    raw = dict(re.findall(r"^\| `(code/data/exp/[^`]+\.csv)` \|.*\| `([0-9a-f]{64})` \|$", text, re.M))
    assert raw == {path: sha for path, sha in derive.RAW.values()}
    commit = "bc7e15fefd53b80d1897170ab3c1aa7d353c3b79"
    assert commit in text and "S-Lab-System-Group/ChronusArtifact" in text and "MIT" in text
    assert "Chronus: A Novel" in text and "SoCC" in text


def test_shipped_tables_are_consistent_and_the_share_is_mix1s():
    traces = {r["trace"]: r for r in read_chronus_table(CHRONUS_TRACES_FILE)}
    assert tuple(traces) == TRACES
    for r in traces.values():
        assert r["jobs"] == 30_940 and r["slo_jobs"] + r["best_effort_jobs"] == r["jobs"]
        assert r["strict_jobs"] + r["soft_jobs"] == r["slo_jobs"]
        assert r["slo_share"] == pytest.approx(r["slo_jobs"] / r["jobs"], abs=1e-6)
        assert -0.7 < r["spearman_k_duration"] < -0.6          # k falls with duration (docs/objectives.md)
    mix1 = traces[CHRONUS_DEADLINE_TRACE]
    assert CHRONUS_DEADLINE_TRACE == "MIX1" and mix1["soft_jobs"] == 0 and mix1["best_effort_jobs"] > 0
    # The constant is MIX1's nominal share: within three binomial standard deviations of the measured one.
    sd = (CHRONUS_DEADLINE_SHARE * (1 - CHRONUS_DEADLINE_SHARE) / mix1["jobs"]) ** 0.5
    assert abs(mix1["slo_share"] - CHRONUS_DEADLINE_SHARE) < 3 * sd
    assert [r["slo_share"] for r in traces.values()] == pytest.approx([1.0, 0.7, 0.9], abs=0.005)
    bands = read_chronus_table(CHRONUS_BANDS_FILE)
    for t in TRACES:
        rows = [b for b in bands if b["trace"] == t]
        assert sum(b["slo_jobs"] for b in rows) == traces[t]["slo_jobs"]
        medians = [b["k_p50"] for b in rows]
        assert medians == sorted(medians, reverse=True)        # shorter jobs, looser deadlines


@pytest.mark.parametrize("trace", TRACES)
def test_shipped_quantile_function_is_the_published_one(trace):
    f = load_deadline_factors(trace)
    assert f.percentiles.tolist() == list(range(101)) and np.all(np.diff(f.k) >= 0)
    # The published figures: 10th percentile 1.39, median 1.97, 90th 3.13 (rounded; SLO's 1.40 and 3.12).
    assert f.k[10] == pytest.approx(1.39, abs=0.01) and f.k[50] == pytest.approx(1.97, abs=0.005)
    assert f.k[90] == pytest.approx(3.13, abs=0.01) and 1.1 < f.k[0] < 1.11 and 4.9 < f.k[100] <= 5.0


# --------------------------------------------------------------------------- the draw
def test_sampled_k_follows_the_shipped_quantiles_and_the_share():
    w = synthetic()
    out = with_chronus_deadlines(w)
    has = ~np.isnan(out.deadline)
    assert abs(has.mean() - CHRONUS_DEADLINE_SHARE) < 0.01
    assert (out.job_class[has] == HIGH_PRIORITY).all() and (out.job_class[~has] == BEST_EFFORT).all()
    f = load_deadline_factors(CHRONUS_DEADLINE_TRACE)
    k = out.deadline[has] / w.duration[has]
    assert abs(np.median(k) - f.k[50]) < 0.01 * f.k[50]
    for p in (10, 25, 75, 90):
        assert abs(np.percentile(k, p) - f.k[p]) < 0.01 * f.k[p], p
    # The draws' CDF is the file's: the share of draws at or below each shipped quantile is its percentile.
    cdf = np.searchsorted(np.sort(k), f.k[5:100:5], side="right") / k.size
    assert np.abs(cdf - np.arange(5, 100, 5) / 100).max() < 0.01
    assert f.k[0] <= k.min() and k.max() <= f.k[100]
    # Only the objective fields change.
    assert np.array_equal(out.submit, w.submit) and np.array_equal(out.duration, w.duration)
    assert out.name == "synthetic+chronus-deadlines"


def test_the_draw_is_seeded_once_for_the_trace_and_the_share_is_an_argument():
    w = synthetic(20_000)
    a, b = with_chronus_deadlines(w), with_chronus_deadlines(w, seed=DERIVATION_SEED)
    assert np.array_equal(a.deadline, b.deadline, equal_nan=True) and np.array_equal(a.job_class, b.job_class)
    c = with_chronus_deadlines(w, seed=DERIVATION_SEED + 1)
    assert not np.array_equal(a.deadline, c.deadline, equal_nan=True)
    # The draws of with_deadlines (same generator, same order): its deadline jobs are deadline jobs here,
    # each at the same quantile of the Chronus distribution as of U[1.5, 3].
    v1 = with_deadlines(w)
    old, new = ~np.isnan(v1.deadline), ~np.isnan(a.deadline)
    assert new[old].all() and new.sum() > old.sum()
    u = (v1.deadline[old] / w.duration[old] - 1.5) / 1.5
    assert np.allclose(a.deadline[old] / w.duration[old], load_deadline_factors().quantile(u))
    assert np.isnan(with_chronus_deadlines(w, share=0.0).deadline).all()
    assert not np.isnan(with_chronus_deadlines(w, share=1.0).deadline).any()
    with pytest.raises(ValueError, match="share"):
        with_chronus_deadlines(w, share=1.5)


def test_the_inverse_cdf_interpolates_linearly_and_other_factors_can_be_given():
    f = DeadlineFactors(trace="t", percentiles=np.array([0.0, 50.0, 100.0]), k=np.array([1.0, 2.0, 4.0]), source="-")
    assert f.quantile(np.array([0.0, 0.25, 0.5, 0.75, 1.0])).tolist() == [1.0, 1.5, 2.0, 3.0, 4.0]
    w = synthetic(1_000)
    flat = DeadlineFactors(trace="t", percentiles=np.array([0.0, 100.0]), k=np.array([2.5, 2.5]), source="-")
    out = with_chronus_deadlines(w, share=1.0, factors=flat)
    assert np.allclose(out.deadline, 2.5 * w.duration)


# --------------------------------------------------------------------------- malformed files
def _corrupt(tmp_path, row: int, field: str, value: str):
    """A copy of the shipped quantile file with one cell of 1-based data row ``row`` replaced."""
    path = tmp_path / "deadline_factors.csv"
    lines = CHRONUS_FACTORS_FILE.read_text().splitlines()
    header = lines[0].split(",")
    cells = lines[row].split(",")
    cells[header.index(field)] = value
    lines[row] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("row,field,value,message", [
    (112, "k", "x", "'x' is not a number"),                # MIX1's 10th percentile
    (112, "k", "nan", "is not finite"),
    (112, "k", "0.9", "is below 1"),
    (112, "k", "1.2", "below the previous percentile"),    # a quantile function does not decrease
    (150, "percentile", "7", "expected 48"),
    (150, "percentile", "4.5", "is not an integer"),
])
def test_a_malformed_quantile_file_names_file_row_and_field(tmp_path, row, field, value, message):
    path = _corrupt(tmp_path, row, field, value)
    with pytest.raises(DataError, match=rf"file .*deadline_factors\.csv, row {row}, field '{field}': .*{message}"):
        load_deadline_factors("MIX1", path)


def test_a_malformed_file_of_another_kind_names_the_file(tmp_path):
    path = tmp_path / "deadline_factors.csv"
    path.write_text("trace,percentile\nMIX1,0\n")
    with pytest.raises(DataError, match=r"deadline_factors\.csv: header"):
        load_deadline_factors("MIX1", path)
    shutil.copy(CHRONUS_FACTORS_FILE, path)
    with pytest.raises(DataError, match=r"no rows of trace 'MIX3'"):
        load_deadline_factors("MIX3", path)
    path.write_text("\n".join(CHRONUS_FACTORS_FILE.read_text().splitlines()[:201]) + "\n")   # MIX1 stops at 98
    with pytest.raises(DataError, match=r"row 200, field 'percentile': trace 'MIX1' has percentiles 0-98"):
        load_deadline_factors("MIX1", path)
    short = tmp_path / "traces.csv"
    short.write_text(CHRONUS_TRACES_FILE.read_text().replace(",30940,21724,", ",30940,", 1))
    with pytest.raises(DataError, match=r"traces\.csv, row 2: has 10 fields, expected 11"):
        read_chronus_table(short)


# --------------------------------------------------------------------------- the derivation script
def test_the_derivation_rule_on_a_hand_made_trace():
    # Four SLO jobs (one soft: its first deadline counts) and a best-effort one whose placeholder is ignored.
    t = {"submit": np.array([0, 5, 9, 12, 20]), "duration": np.array([10, 20, 40, 10, 30]),
         "gpus": np.array([1, 2, 4, 1, 8]), "first_deadline": np.array([30, 40, 60, 11, 20]),
         "best_effort": np.array([0, 0, 0, 0, 1]), "job_type": np.array(["strict", "soft", "strict", "strict", "best"])}
    files = derive.derive({"MIX1": t})
    rows = files["deadline_factors.csv"].decode().splitlines()
    assert rows[0] == "trace,percentile,k" and len(rows) == 102
    k = sorted([3.0, 2.0, 1.5, 1.1])
    assert rows[1] == f"MIX1,0,{k[0]:.6f}" and rows[101] == f"MIX1,100,{k[-1]:.6f}"
    assert rows[51] == f"MIX1,50,{np.median(k):.6f}"
    summary = files["traces.csv"].decode().splitlines()[1].split(",")
    assert summary[2:8] == ["5", "4", "3", "1", "1", "0.800000"]
