"""The Sia figures shipped instead of the unlicensed raw profiles (their provenance, the script that
rebuilds them), and the best-throughput speed rule, ``WorldConfig(speeds="measured-best")``: its
ratios from the figures, the A100 never below the V100 but where the data says so, the old rule's
numbers unchanged, and the same episode on both engines."""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

import cluster_env
from cluster_env.core.config import WorldConfig
from cluster_env.world.gpu_catalog import gpu_spec
from cluster_env.world.measured_speeds import (
    MEASURED_SPEED_SOURCES, SIA_DATA_DIR, SIA_FIGURES_PATH, SIA_MODELS, best_throughput, family_ratio,
    family_ratio_table, job_type_factors, measured_best_ratio, measured_ratio, mlperf_h100_over_a100,
    speed_source,
)
from cluster_env.world.throughputs import JOB_TYPES, relative_speed_table
from tests.helpers import load_script

ROOT = Path(__file__).resolve().parent.parent
derive = load_script("benchmarks/derive_sia_figures.py")


def _figures() -> dict:
    """The shipped JSON, read with the json module alone."""
    return json.loads(SIA_FIGURES_PATH.read_text(encoding="utf-8"))


# ----------------------------------------------------------------------------- provenance
def test_figures_file_matches_its_digest_in_sources_md():
    text = (SIA_DATA_DIR / "SOURCES.md").read_text(encoding="utf-8")
    (sha,) = re.findall(r"^\| `sia_figures\.json` \| `benchmarks/derive_sia_figures\.py` \| `([0-9a-f]{64})` \|$",
                        text, re.M)
    assert hashlib.sha256(SIA_FIGURES_PATH.read_bytes()).hexdigest() == sha


def test_figures_name_every_source_file_with_its_sha256():
    prov = _figures()["provenance"]
    assert prov["repository"] == "https://github.com/siasosp23/artifacts"
    assert prov["commit"] == derive.COMMIT and prov["generator"] == "benchmarks/derive_sia_figures.py"
    listed = {s["path"]: s["sha256"] for s in prov["sources"]}
    expected = {f"sia-simulator/traces/{m}/placements-{s}.csv" for m in SIA_MODELS for s in ("azure", "dgx-ext")}
    assert set(listed) == expected
    # ... the same digests the script pins and SOURCES.md lists for the files not shipped.
    assert listed == {f"sia-simulator/traces/{k}": v for k, v in derive.PINNED_SHA256.items()}
    text = (SIA_DATA_DIR / "SOURCES.md").read_text(encoding="utf-8")
    in_md = dict(re.findall(r"^\| `(\w+/placements-(?:azure|dgx-ext)\.csv)` \| `([0-9a-f]{64})` \|$", text, re.M))
    assert {f"sia-simulator/traces/{k}": v for k, v in in_md.items()} == listed
    # The raw files of those servers are not shipped.
    assert not list(SIA_DATA_DIR.glob("*/placements-azure*")) and not list(SIA_DATA_DIR.glob("*/placements-dgx-ext*"))


def test_the_shipped_file_is_what_the_script_writes():
    # The script's own serialisation of the parsed file gives the file byte for byte (the format
    # is the script's, so a hand edit that changes a figure's text shows).
    text = SIA_FIGURES_PATH.read_text(encoding="utf-8")
    assert derive._dump(json.loads(text)) == text


@pytest.mark.skipif(not os.environ.get("SIA_ARTIFACT"), reason="set SIA_ARTIFACT to a copy of siasosp23/artifacts")
def test_the_script_rebuilds_the_shipped_file_from_the_artifact(tmp_path):
    out = tmp_path / "sia_figures.json"
    assert derive.main(["--artifact", os.environ["SIA_ARTIFACT"], "--out", str(out)]) == 0
    assert out.read_bytes() == SIA_FIGURES_PATH.read_bytes()


def _write_profile(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("local_bsz,step_time,sync_time,placement\n"
                    + "".join(f"{b},{t},0.001,{q}\n" for q, b, t in rows))


def test_the_script_takes_what_its_docstring_says(tmp_path):
    # A synthetic artifact: each profile has one-GPU rows (out of order), one- and two-node rows.
    rows = [("1", 8, 0.2), ("8", 4, 0.5), ("1", 4, 0.1), ("44", 4, 0.55), ("17", 4, 0.52),
            ("44", 8, 0.9),            # no one-node 8-GPU twin at batch 8: left out
            ("45", 4, 0.7),            # 9 GPUs: wider than a node, left out
            ("4", 4, 0.3), ("22", 4, 0.35), ("2", 8, 0.25)]
    traces = tmp_path / "sia-simulator" / "traces"
    for m in SIA_MODELS:
        for s in ("azure", "dgx-ext"):
            _write_profile(traces / m / f"placements-{s}.csv", rows)
    out = tmp_path / "figures.json"
    with pytest.raises(SystemExit, match="not the file of"):
        derive.build(tmp_path)                              # the pinned commit's digests are checked
    assert derive.main(["--artifact", str(tmp_path), "--out", str(out), "--commit", "synthetic"]) == 0
    fig = json.loads(out.read_text())
    assert fig["provenance"]["commit"] == "synthetic"
    azure, dgx = fig["figures"]["bert"]["azure"], fig["figures"]["bert"]["dgx-ext"]
    assert azure == {"one_gpu": [[4, 0.1], [8, 0.2]]}
    assert dgx["cross_node"] == [["44", 4, 0.55, 0.5], ["17", 4, 0.52, 0.5], ["22", 4, 0.35, 0.3]]
    assert derive.main(["--artifact", str(tmp_path), "--out", str(out), "--commit", "synthetic", "--check"]) == 0
    out.write_text(out.read_text().replace("0.55", "0.56"))
    assert derive.main(["--artifact", str(tmp_path), "--out", str(out), "--commit", "synthetic", "--check"]) == 1
    _write_profile(traces / "ncf" / "placements-azure.csv", rows + [("1", 4, 0.2)])
    with pytest.raises(SystemExit, match="twice"):
        derive.build(tmp_path, "synthetic")


# ----------------------------------------------------------------------------- the old rule unchanged
#: measured_ratio of every (type, model) as the raw profiles gave it before they stopped shipping.
MEDIAN_RULE = {
    ("A100", "bert"): 2.0249093473760307, ("A100", "cifar10"): 2.225294177391902,
    ("A100", "deepspeech2"): 0.6511356580314183, ("A100", "imagenet"): 1.214747857192452,
    ("A100", "ncf"): 15.216331831144704, ("A100", "yolov3"): 0.8744728931009549,
    ("T4", "bert"): 0.40016229438447315, ("T4", "cifar10"): 0.9429247608913687,
    ("T4", "deepspeech2"): 0.5014998914255531, ("T4", "imagenet"): 0.5590547967518091,
    ("T4", "ncf"): 16.465852299284506, ("T4", "yolov3"): 0.6446194673182923,
}


def test_the_median_rule_keeps_its_numbers_bit_for_bit():
    for (gpu, model), value in MEDIAN_RULE.items():
        assert measured_ratio(gpu, model) == value, (gpu, model)
    lm = JOB_TYPES.index("LM (batch size 20)")
    assert relative_speed_table(["A100"], "V100", speeds="measured")[lm, 0, 0] == MEDIAN_RULE[("A100", "deepspeech2")]


# ----------------------------------------------------------------------------- the best-throughput rule
def _best_from_json(model: str, server: str) -> float:
    """Best samples/s at one GPU, computed from the shipped JSON alone."""
    return max(b / t for b, t in _figures()["figures"][model][server]["one_gpu"])


def test_best_rule_ratios_come_from_the_figures():
    for model in SIA_MODELS:
        want = _best_from_json(model, "dgx-ext") / _best_from_json(model, "azure")
        assert measured_best_ratio("A100", model) == pytest.approx(want, rel=1e-15)
    # BERT: 140.4 samples/s at batch 48 on the A100 over 42.2 at batch 33 on the V100.
    assert best_throughput("bert", "dgx-ext") == (48, pytest.approx(140.44, abs=0.01))
    assert best_throughput("bert", "azure") == (33, pytest.approx(42.24, abs=0.01))
    assert measured_best_ratio("A100", "bert") == pytest.approx(3.33, abs=0.005)
    assert measured_ratio("A100", "bert") == pytest.approx(2.02, abs=0.005)        # the median rule
    # The T4 from Pollux's raw profile against the V100's figures.
    assert measured_best_ratio("T4", "bert") == pytest.approx(13.022 / 42.235, rel=1e-3)


def test_the_world_table_uses_the_best_rule_per_job_type():
    names = ["A100", "A800", "G3", "H800", "T4", "V100"]
    table = relative_speed_table(names, "V100", speeds="measured-best", shape="capped")
    for j, job in enumerate(JOB_TYPES):
        family = job.split(" (")[0]
        a100 = family_ratio("A100", family, "measured-best")
        assert np.all(table[j, 0] == a100) and np.all(table[j, 1] == a100) and np.all(table[j, 2] == a100)
        h100 = {"ResNet-18": "resnet", "ResNet-50": "resnet", "Transformer": "bert", "LM": "rnnt",
                "Recommendation": "dlrm"}.get(family)
        if h100:
            assert table[j, 3, 0] == pytest.approx(a100 * mlperf_h100_over_a100(h100), rel=1e-12)
        assert np.all(table[j, 4] == family_ratio("T4", family, "measured-best"))
        assert np.all(table[j, 5] == 1.0)
    t = JOB_TYPES.index("Transformer (batch size 64)")
    assert table[t, 0, 0] == measured_best_ratio("A100", "bert")
    # The rule is a different table from the median rule's.
    assert not np.array_equal(table, relative_speed_table(names, "V100", speeds="measured", shape="capped"))


def test_no_newer_gpu_is_slower_but_where_the_data_says_so():
    names = ["V100", "A100", "A800", "G3", "H800", "GPU-series-2"]
    table = relative_speed_table(names, "V100", speeds="measured-best", shape="capped")[:, :, 0]
    slower = sorted({JOB_TYPES[j].split(" (")[0] for j in range(len(JOB_TYPES)) if table[j, 1] < 1.0})
    # The one exception: LM, from DeepSpeech2, whose best one-GPU throughput the A100 does not
    # reach (77.5 samples/s at batch 320 against the V100's 80.7 at batch 81) ...
    assert slower == ["LM"]
    assert best_throughput("deepspeech2", "dgx-ext")[0] == 320 and best_throughput("deepspeech2", "azure")[0] == 81
    assert _best_from_json("deepspeech2", "dgx-ext") < _best_from_json("deepspeech2", "azure")
    one = _figures()["figures"]["deepspeech2"]
    v100, a100 = dict(one["azure"]["one_gpu"]), dict(one["dgx-ext"]["one_gpu"])
    assert all(a100[b] > v100[b] for b in set(v100) & set(a100))     # and at every batch size both profiled
    # ... which the docs show.
    doc = (ROOT / "docs" / "world_model.md").read_text(encoding="utf-8")
    (row,) = [line for line in doc.splitlines() if line.startswith("| deepspeech2 |") and "320" in line]
    assert "0.960" in row and "80.7" in row and "77.5" in row
    (lm,) = [line for line in doc.splitlines() if line.startswith("| LM |")]
    assert "0.960" in lm and "0.651" in lm
    # Else: the A100 (and its chip kin) at least the V100, the H800 class at least the A100.
    ok = [j for j in range(len(JOB_TYPES)) if not JOB_TYPES[j].startswith("LM")]
    assert np.all(table[ok, 1:4] >= 1.0)
    assert np.all(table[:, 4:] > table[:, 1:2]) and np.all(table[:, 1:2] == table[:, 2:4])


def test_family_table_is_job_type_factors():
    rows = {r["family"]: r for r in family_ratio_table()}
    assert list(rows) == ["ResNet-18", "ResNet-50", "Transformer", "LM", "A3C", "CycleGAN", "Recommendation"]
    for family, row in rows.items():
        for gpu in ("A100", "H800", "T4"):
            for rule in MEASURED_SPEED_SOURCES:
                assert row[gpu][rule] == job_type_factors(gpu, [f"{family} (batch size 1)"], rule)[0]
    assert rows["Transformer"]["A100"]["measured-best"] == measured_best_ratio("A100", "bert")
    # Families without a model: the median of the retained models' ratios.
    assert rows["A3C"]["A100"]["measured-best"] == float(np.median(
        [measured_best_ratio("A100", m) for m in ("bert", "cifar10", "deepspeech2", "imagenet", "yolov3")]))


def test_the_value_is_accepted_named_and_summarised():
    WorldConfig(speeds="measured-best").validate()
    assert speed_source("A100", "measured-best") == "measured (Sia/Pollux profiles, best throughput, as A100)"
    assert speed_source("A100", "measured") == "measured (Sia/Pollux profiles, as A100)"        # unchanged
    assert "best throughput" in speed_source("H800", "measured-best")
    assert speed_source("A10", "measured-best").startswith("fallback")
    assert gpu_spec("A100").factor == pytest.approx(2.378, abs=1e-3)     # the catalog is not touched
    with pytest.raises(ValueError, match="speeds"):
        job_type_factors("A100", JOB_TYPES, "best")


# ----------------------------------------------------------------------------- both engines
def test_an_env_with_the_best_rule_runs_the_same_episode_on_both_engines():
    from cluster_env.core import kernels
    from tests.test_parallel_engine import _play_both, _same

    if kernels.active().name != "numba":
        pytest.skip("the compiled step needs numba")
    kw = {"jobs_per_episode": 20, "speeds": "measured-best"}
    fast = cluster_env.parallel_env("modern-v2", **kw)
    slow = cluster_env.parallel_env("modern-v2", backend="python", **kw)
    _play_both(fast, slow, seed=2)
    assert fast.engine == "compiled"
    _same(fast.metrics(), slow.metrics(), "metrics")
    view_f, view_s = fast.episode_view(), slow.episode_view()
    _same(view_f.jobs.__dict__, view_s.jobs.__dict__, "jobs")
    _same(view_f.best_speed, view_s.best_speed, "best_speed")
    assert fast.world.speeds == "measured-best" and "best-throughput rule" in fast.world_summary().line()
    # Both ran the best rule's table: each job's speeds are the table's row for its type and width.
    from cluster_env.world.throughputs import bucket_index

    s = slow.sim
    names, ref, shape = s.cluster.gpu_type_names, slow.world.reference_gpu, slow.world.gavel_shape
    want = relative_speed_table(names, ref, speeds="measured-best", shape=shape)[s.job_type, :, bucket_index(s.gpus)]
    assert np.array_equal(s.job_speed, want)
    other = relative_speed_table(names, ref, speeds="measured", shape=shape)[s.job_type, :, bucket_index(s.gpus)]
    assert not np.array_equal(want, other)


@pytest.mark.parametrize("policy", ["las-migrate", "tiresias+fastest"])
def test_the_compiled_harness_scores_the_best_rule_as_the_api_path(policy):
    # The harness's compiled loop (baselines.engine) against the PettingZoo API path, with a placer
    # and a migration rule that read the speed table; and the rule moves the score.
    from baselines import engine
    from baselines.harness.episode import run_episode
    from baselines.harness.sweep import resolve_policy

    if not engine.available():
        pytest.skip("the compiled engine needs numba kernels")
    kw = {"jobs_per_episode": 20, "speeds": "measured-best"}
    api = run_episode(resolve_policy(policy, "modern-v2"), "modern-v2", "test", 0, kw).record
    compiled = engine.run_compiled_episode(policy, "modern-v2", "test", 0, kw)
    assert compiled.engine == "compiled"
    assert {k: v for k, v in api.items() if k != "wall_s"} == {k: v for k, v in compiled.record.items()
                                                                if k != "wall_s"}
    median = engine.run_compiled_episode(policy, "modern-v2", "test", 0, {"jobs_per_episode": 20}).record
    assert median["avg_jct"] != api["avg_jct"]
