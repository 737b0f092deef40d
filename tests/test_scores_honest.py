"""No silently wrong score. Each test is an attack that used to pass
without a word: two agents merged into one row, an agent scored on another scenario, identical
episodes counted as independent windows, a user's trace rescaled, --reference-gpu changing a
registered scenario, a policy run twice, weights that overflow, and loose inputs accepted."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from baselines.cli import main as cluster_bench

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "examples" / "data"
SHIPPED = ROOT / "dual_agent" / "pretrained" / "philly-hetero-v1.priority.json"
SHORT = ["--seeds", "0-1", "--env", "jobs_per_episode=40", "--backend", "serial", "--quiet", "--no-plots"]


def _one_line_error(err: str, words: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 2 and ": error: " in lines[0] and words in lines[0], err
    assert lines[1].startswith("hint: ") and "Traceback" not in err


@pytest.fixture
def two_last_agents(tmp_path, monkeypatch):
    """Two different agents, both saved as last.priority.json (what every training run writes)."""
    doc = json.loads(SHIPPED.read_text())
    for folder, shift in (("trA", 0.0), ("tp8", 0.5)):
        (tmp_path / folder).mkdir()
        changed = {**doc, "weights": {**doc["weights"], "linear": [w + shift for w in doc["weights"]["linear"]]}}
        (tmp_path / folder / "last.priority.json").write_text(json.dumps(changed))
    monkeypatch.chdir(tmp_path)
    return "trA/last.priority.json", "tp8/last.priority.json"


# ----------------------------------------------------------------------------- 1, 6: labels and duplicates
def test_two_agents_with_one_file_name_are_two_rows(two_last_agents, tmp_path, capsys):
    a, b = two_last_agents
    out = tmp_path / "res"
    assert cluster_bench(["run", "--scenario", "philly-hetero-v1", "--policies", f"fifo,{a},{b}", "--reference", "fifo",
                          "--out", str(out), *SHORT]) == 0
    text = capsys.readouterr().out
    assert "dual-priority(trA/last)" in text and "dual-priority(tp8/last)" in text
    data = json.loads((out / "results.json").read_text())
    labels = data["meta"]["labels"]
    assert labels == {"fifo": "fifo", a: "dual-priority(trA/last)", b: "dual-priority(tp8/last)"}
    assert sorted({e["policy"] for e in data["episodes"]}) == sorted(labels.values())
    assert len(data["episodes"]) == 6
    assert cluster_bench(["compare", a, b, "--scenario", "philly-hetero-v1", "--seeds", "0-1",
                          "--env", "jobs_per_episode=40", "--backend", "serial", "--quiet"]) == 0
    assert "dual-priority(trA/last) vs dual-priority(tp8/last)" in capsys.readouterr().out


def test_labels_tell_files_apart_and_refuse_real_duplicates(tmp_path):
    from baselines.harness.labels import DuplicatePolicyError, policy_labels

    for rel in ("runs/a/ckpt/x.pt", "runs/b/ckpt/x.pt"):
        (tmp_path / rel).parent.mkdir(parents=True)
        (tmp_path / rel).write_bytes(b"")
    a, b = str(tmp_path / "runs/a/ckpt/x.pt"), str(tmp_path / "runs/b/ckpt/x.pt")
    assert policy_labels([a, b], names=["dual(x)", "dual(x)"]) == ["dual(a/ckpt/x)", "dual(b/ckpt/x)"]
    same = str(tmp_path / "runs/a/../a/ckpt/x.pt")
    with pytest.raises(DuplicatePolicyError, match="given twice"):
        policy_labels([a, same], names=["dual(x)", "dual(x)"])
    with pytest.raises(DuplicatePolicyError, match="'fifo' and 'FIFO' are the same policy"):
        policy_labels(["fifo", "FIFO"])


@pytest.mark.parametrize("policies,spelling", [
    ("fifo,fifo+first-fit", "the baseline 'fifo'"), ("las-q15,las-q15.0", "the baseline 'las-q15'"),
    ("oracle,srpt-clairvoyant", "the baseline 'srpt-clairvoyant'"), ("tiresias,2dlas+best-fit", "'tiresias'"),
    ("las-migrate,las-migrate1.5", "the baseline 'las-migrate'"),
    ("dual-priority,dual_agent/pretrained/philly-hetero-v1.priority.json", "philly-hetero-v1.priority.json"),
    ("dual,dual-priority", "philly-hetero-v1.priority.json")])
def test_two_spellings_of_one_policy_are_refused_naming_both(policies, spelling, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "res"
    with pytest.warns(FutureWarning) if "oracle" in policies else _no_warning():
        code = cluster_bench(["run", "--scenario", "philly-hetero-v1", "--policies", policies, "--seeds", "0",
                              "--out", str(out), "--backend", "serial", "--quiet"])
    assert code == 2
    captured = capsys.readouterr()
    first, second = policies.split(",")
    _one_line_error(captured.err, f"{first!r} and {second!r} are two spellings of")
    assert spelling in captured.err
    assert "policies x" not in captured.out and not (out / "results.json").exists()


def test_canonical_names_tell_different_policies_apart():
    from baselines.registry import canonical_name

    assert canonical_name("las-q15.0") == canonical_name("las-q15+consolidate") == "las-q15"
    assert canonical_name("las-q15") != canonical_name("las-q15+fastest")
    assert canonical_name("las-migrate2") != canonical_name("las-migrate")
    assert canonical_name("fifo") != canonical_name("fifo-strict") != canonical_name("fifo+consolidate")
    assert canonical_name("dual") is None and canonical_name("nonsense") is None


def _no_warning():
    import contextlib

    return contextlib.nullcontext()


@pytest.mark.parametrize("policies", ["fifo,fifo", "fifo,FIFO"])
def test_a_policy_given_twice_is_refused_before_any_episode(policies, tmp_path, capsys):
    out = tmp_path / "res"
    assert cluster_bench(["run", "--scenario", "toy-v0", "--policies", policies, "--seeds", "0-1", "--out", str(out),
                          "--backend", "serial", "--quiet"]) == 2
    captured = capsys.readouterr()
    _one_line_error(captured.err, "given twice")
    assert "policies x" not in captured.out and not (out / "results.json").exists()


def test_the_harness_refuses_two_tasks_for_one_window():
    from baselines.harness.labels import DuplicatePolicyError
    from baselines.harness.sweep import Task, make_tasks, run_tasks

    with pytest.raises(DuplicatePolicyError):
        make_tasks(["sjf", "SJF"], ["toy-v0"], "test", [0])
    with pytest.raises(ValueError, match="asked twice"):
        run_tasks([Task("fifo", "toy-v0", "test", 0), Task("FIFO", "toy-v0", "test", 0)], backend="serial")


# ----------------------------------------------------------------------------- 2: an agent on another scenario
def test_a_priority_agent_on_another_scenario_is_refused_then_recorded_when_allowed(tmp_path, capsys):
    out = tmp_path / "res"
    argv = ["run", "--scenario", "philly-v1", "--policies", f"fifo,{SHIPPED}", "--out", str(out), *SHORT]
    assert cluster_bench(argv) == 2
    captured = capsys.readouterr()
    _one_line_error(captured.err, "scenario='philly-hetero-v1' (this run: 'philly-v1')")
    assert "policies x" not in captured.out
    assert cluster_bench(argv + ["--allow-env-mismatch"]) == 0
    meta = json.loads((out / "results.json").read_text())["meta"]
    assert meta["allow_env_mismatch"] is True
    assert meta["env_mismatch"][str(SHIPPED)]["scenario"] == {"policy": "philly-hetero-v1", "run": "philly-v1"}


def test_reference_may_name_a_policy_as_given_on_the_command_line(tmp_path, capsys):
    # --reference PATH (or LAS for las) used to print "no ratios: the reference policy ... is not
    # among the policies" although it was: the rows are labelled dual-priority(...), las.
    out = tmp_path / "res"
    assert cluster_bench(["run", "--scenario", "philly-hetero-v1", "--policies", f"fifo,{SHIPPED}",
                          "--reference", str(SHIPPED), "--out", str(out), *SHORT]) == 0
    text = capsys.readouterr().out
    assert "no ratios" not in text and "avg_jct vs dual-priority(philly-hetero-v1)" in text
    assert json.loads((out / "results.json").read_text())["meta"]["reference"] == "dual-priority(philly-hetero-v1)"
    assert cluster_bench(["sweep", "--scenario", "toy-v0", "--policies", "fifo,las", "--reference", "LAS",
                          "--loads", "1", "--seeds", "0", "--out", str(tmp_path / "sw"), "--no-plots",
                          "--backend", "serial", "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "not swept" not in text and "ratio to las" in text


def test_replay_refuses_an_agent_made_for_another_scenario(capsys):
    # replay played the philly-hetero-v1 agent on toy-v0 without a word (and an SB3 model of
    # philly-v1 died with "could not broadcast input array from shape (22,) into shape (374,)").
    assert cluster_bench(["replay", "--scenario", "toy-v0", "--policy", str(SHIPPED), "--max-frames", "1"]) == 2
    _one_line_error(capsys.readouterr().err, "scenario='philly-hetero-v1' (this run: 'toy-v0')")


def test_the_mismatch_error_of_compare_names_the_command_that_has_the_flag(capsys):
    # compare, sweep and scores have no --allow-env-mismatch: the hint used to offer it to them.
    assert cluster_bench(["compare", str(SHIPPED), "fifo", "--scenario", "philly-v1", "--seeds", "0",
                          "--quiet"]) == 2
    _one_line_error(capsys.readouterr().err, "cluster-bench run --allow-env-mismatch")


def test_the_harness_checks_the_scenario_on_the_compiled_path_too():
    from baselines.harness import evaluate
    from baselines.harness.episode import EnvMismatchError

    with pytest.raises(EnvMismatchError, match="scenario"):
        evaluate(str(SHIPPED), "philly-v1", seeds=[0], env_kwargs={"jobs_per_episode": 20}, backend="serial")


# ----------------------------------------------------------------------------- 3: the distinct window
def _rec(policy: str, seed: int, value: float, window: str) -> dict:
    return {"policy": policy, "scenario": "s", "split": "test", "seed": seed, "env": "", "window": window,
            "avg_jct": value}


def test_seeds_that_play_the_same_jobs_are_one_window_in_the_interval():
    from baselines.harness.stats import UNIT_WORLD_DRAW, PairingError, geo_mean_ci, paired_summary, verdict

    same = [_rec(p, s, v, "w0") for s in range(20) for p, v in (("a", 97.7), ("b", 100.0))]
    s = paired_summary(same, "a", "b")
    assert s.n == 20 and s.distinct == 1 and s.geo_mean == pytest.approx(0.977)
    # One window: its seeds are world draws, paired per (window, seed), and said so;
    # however narrow their interval, they carry no verdict.
    assert (s.units, s.unit) == (20, UNIT_WORLD_DRAW) and s.wins == 20
    assert "20 world draws of 1 window" in s.describe()
    assert verdict(s).startswith("no verdict: the interval rests on 20 world draws of 1 window")
    # Three windows, each played by two seeds: the interval is the one of the three windows' means.
    ratios = {"w0": (0.8, 0.9), "w1": (1.1, 1.0), "w2": (0.7, 0.75)}
    recs = [r for i, (w, rs) in enumerate(ratios.items()) for j, q in enumerate(rs)
            for r in (_rec("a", 2 * i + j, 100.0 * q, w), _rec("b", 2 * i + j, 100.0, w))]
    s = paired_summary(recs, "a", "b")
    units = [math.sqrt(x * y) for x, y in ratios.values()]
    assert s.n == 6 and s.distinct == 3
    assert (s.geo_mean, s.ci_low, s.ci_high) == pytest.approx(geo_mean_ci(units))
    assert s.wins == 2
    with pytest.raises(PairingError, match="played different jobs"):
        paired_summary([_rec("a", 0, 1.0, "w0"), _rec("b", 0, 1.0, "w1")], "a", "b")


def test_a_load_sweep_counts_distinct_windows_too():
    from baselines.harness.load_sweep import run_load_sweep

    sweep = run_load_sweep("toy-v0", [1.0], ["fifo", "sjf"], [0, 1, 2], reference="fifo", backend="serial")
    sjf = next(r for r in sweep.rows if r["policy"] == "sjf")
    # toy-v0's seeds play one window: its world draws, paired per (window, seed), and named so.
    assert sjf["ratio_avg_jct_windows"] == 1 and sjf["ratio_avg_jct_unit"] == "world draw (window, seed)"
    assert sjf["windows"] == 1 and sjf["unit"] == "world draw (window, seed)"


def test_records_name_the_jobs_they_played():
    from baselines.harness import evaluate

    toy = evaluate("fifo", "toy-v0", seeds=[0, 1], backend="serial")
    assert toy[0]["window"] == toy[1]["window"]                          # every toy-v0 seed: the same six jobs
    philly = evaluate("fifo", "philly-v1", seeds=[0, 1], env_kwargs={"jobs_per_episode": 20}, backend="serial")
    assert philly[0]["window"] != philly[1]["window"]


# ----------------------------------------------------------------------------- 4: a user's trace
def test_a_users_trace_plays_at_its_own_arrival_times_unless_a_load_is_asked(tmp_path, capsys):
    import cluster_env
    from cluster_env.loaders import load_workload_csv
    from cluster_env.scenarios.load import offered_load

    jobs = str(DATA / "my_jobs.csv")
    env = cluster_env.parallel_env("philly-v1", workload_csv=jobs)
    own = offered_load(load_workload_csv(jobs).subset(np.arange(load_workload_csv(jobs).num_jobs)),
                       env.unwrapped.cluster.total_gpus)
    for kwargs in ({}, {"load": None}):
        env = cluster_env.parallel_env("philly-v1", workload_csv=jobs, **kwargs)
        env.reset(seed=0)
        assert env.unwrapped.offered_load == pytest.approx(own) and own != pytest.approx(1.5)
    env = cluster_env.parallel_env("philly-v1", workload_csv=jobs, load=0.9)
    env.reset(seed=0)
    assert env.unwrapped.offered_load == pytest.approx(0.9)
    out = tmp_path / "res"
    assert cluster_bench(["run", "--policies", "fifo", "--seeds", "0", "--workload-csv", jobs, "--out", str(out),
                          "--backend", "serial", "--quiet", "--no-plots"]) == 0
    assert "arrivals: the trace's own arrival times" in capsys.readouterr().out
    assert json.loads((out / "results.json").read_text())["meta"]["arrivals"].startswith("the trace's own")
    assert cluster_bench(["run", "--policies", "fifo", "--seeds", "0", "--workload-csv", jobs, "--env", "load=0.9",
                          "--out", str(out), "--backend", "serial", "--quiet", "--no-plots"]) == 0
    assert "arrivals: each window rescaled to offered load 0.9 (--env load)" in capsys.readouterr().out


# ----------------------------------------------------------------------------- 5: --reference-gpu alone
def test_reference_gpu_without_a_trace_is_refused(tmp_path, capsys):
    assert cluster_bench(["run", "--scenario", "philly-v0", "--reference-gpu", "K80", "--out", str(tmp_path),
                          "--quiet"]) == 2
    _one_line_error(capsys.readouterr().err, "--reference-gpu K80 needs --workload-csv")
    from cluster_env.__main__ import main as python_m_cluster_env

    with pytest.raises(SystemExit) as exit_code:
        python_m_cluster_env(["--scenario", "philly-v0", "--reference-gpu", "K80"])
    assert exit_code.value.code == 2
    _one_line_error(capsys.readouterr().err, "--reference-gpu K80 needs --workload-csv")


# ----------------------------------------------------------------------------- 7, 14: priority-agent files
def _write(tmp_path, **change) -> Path:
    doc = json.loads(SHIPPED.read_text())
    for key, value in change.items():
        if key.startswith("w_"):
            doc["weights"][key[2:]] = value
        else:
            doc[key] = value
    path = tmp_path / "bad.priority.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("change,words", [
    ({"w_linear": [1e308] + [0.0] * 8}, "field weights.linear[0] is 1e+308"),
    ({"w_placer": [0.0, -1e7, 0.0, 0.0, 0.0]}, "field weights.placer[1] is -1e+07"),
    ({"version": True}, "field version is True"),
    ({"w_linear": ["0.5"] * 9}, "field weights.linear holds '0.5', not a number"),
    ({"w_linear": [True] + [0.0] * 8}, "field weights.linear holds True"),
    ({"scenario": None}, "field scenario must be a non-empty string, got None"),
    ({"scenario": 7}, "field scenario must be a non-empty string, got 7"),
    ({"placer": None}, "field placer must be a non-empty string"),
    ({"training": "yes"}, "field training must be an object"),
])
def test_priority_agent_files_are_strictly_typed_and_bounded(change, words, tmp_path):
    from dual_agent.priority import PriorityCheckpointError, load_priority_agent

    path = _write(tmp_path, **change)
    with pytest.raises(PriorityCheckpointError) as err:
        load_priority_agent(path)
    assert words in str(err.value) and str(path) in str(err.value)


def test_huge_weights_built_in_python_stop_the_episode_instead_of_overflowing():
    from baselines.harness.episode import run_episode
    from dual_agent.priority import PriorityAgentPolicy, PriorityAgentSpec, PriorityModel

    model = PriorityModel.zeros()
    model.linear[0] = 1e308
    agent = PriorityAgentPolicy(model, PriorityAgentSpec("philly-hetero-v1"))
    kw = {"jobs_per_episode": 20}
    with pytest.raises(ValueError, match="exceeds"):
        agent.compiled_episode("philly-hetero-v1", "test", 0, kw)
    with pytest.raises(ValueError, match="not finite"):
        run_episode(agent, "philly-hetero-v1", "test", 0, kw)


# ----------------------------------------------------------------------------- 14: reset options, --max-minutes
@pytest.mark.parametrize("options,key", [({"load": 3}, "'load'"), ({"bogus": 1}, "'bogus'")])
def test_unknown_reset_options_are_refused(options, key):
    import cluster_env

    env = cluster_env.parallel_env("toy-v0")
    with pytest.raises(TypeError, match=f"unknown reset option.*{key}.*accepts \\['split'\\]"):
        env.reset(seed=0, options=options)
    obs, infos = env.reset(seed=0, options={"split": "validation"})
    assert env.agents
    env.reset(seed=0, options={"options": 1})       # PettingZoo's API test probe: accepted, ignored


@pytest.mark.parametrize("minutes", ["-1", "0", "nan"])
def test_train_priority_max_minutes_must_be_positive(minutes, tmp_path, capsys):
    from dual_agent.priority.es import ESConfig

    assert cluster_bench(["train-priority", "--smoke", "--max-minutes", minutes, "--out", str(tmp_path / "r")]) == 2
    _one_line_error(capsys.readouterr().err, "--max-minutes: must be a positive number of minutes")
    assert not (tmp_path / "r").exists()
    with pytest.raises(ValueError, match="max_minutes must be a positive number"):
        ESConfig(scenario="philly-hetero-v1", max_minutes=float(minutes))


# ----------------------------------------------------------------------------- 16: compare's metric, --help
def test_compare_unknown_metric_is_one_line_with_a_hint(capsys):
    assert cluster_bench(["compare", "fifo", "sjf", "--metric", "avg_jtc", "--quiet"]) == 2
    err = capsys.readouterr().err
    _one_line_error(err, "unknown metric 'avg_jtc'")
    assert "avg_jct" in err.splitlines()[1]


def test_help_lists_the_policies_a_bare_run_scores():
    from baselines.cli import build_parser, default_policies
    from cluster_env.scenarios.registry import DEFAULT_SCENARIO

    bare = ",".join(default_policies(DEFAULT_SCENARIO))
    parser = build_parser()
    run = next(a for a in parser._actions if a.dest == "command").choices["run"]
    assert bare in parser.format_help() and bare in "".join(run.format_help().split())   # wrapped at hyphens
    assert "random,fifo,sjf,tiresias]" not in parser.format_help()
