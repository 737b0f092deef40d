"""The evaluation harness, its backends, the cluster-bench CLI and the regression scores."""
from __future__ import annotations

import json

import numpy as np
import pytest

import baselines
import cluster_env
from baselines.cli import main as cluster_bench, parse_seeds
from baselines.harness.episode import env_settings
from baselines.harness.scores import check_scores, packaged_scenarios, packaged_scores_file, update_scores

SMALL = {"jobs_per_episode": 80}


class FirstAllowed:
    """A user's policy written against the protocol only (not a baselines class)."""

    name = "first-allowed"

    def reset(self, seed=None):
        self.calls = 0

    def act(self, observations, infos):
        self.calls += 1
        return {a: int(np.flatnonzero(o["action_mask"])[0]) for a, o in observations.items()}


def test_evaluate_returns_one_record_per_seed_with_every_metric():
    records = baselines.evaluate("fifo", "philly-v0", seeds=[3, 1], env_kwargs=SMALL, backend="serial")
    assert [r["seed"] for r in records] == [3, 1]
    for r in records:
        assert r["policy"] == "fifo" and r["scenario"] == "philly-v0" and r["split"] == "test"
        assert set(cluster_env.METRIC_KEYS) <= set(r)
        assert r["jobs_finished"] == 80 and r["steps"] > 0
    assert records[0]["avg_jct"] != records[1]["avg_jct"]


def test_evaluate_accepts_any_object_with_the_policy_methods():
    # The lowest allowed action of both agents is exactly FIFO + first-fit.
    mine = baselines.evaluate(FirstAllowed(), "philly-v0", seeds=[0], env_kwargs=SMALL, backend="serial")
    fifo = baselines.evaluate("fifo", "philly-v0", seeds=[0], env_kwargs=SMALL, backend="serial")
    assert mine[0]["policy"] == "first-allowed"
    assert mine[0]["avg_jct"] == fifo[0]["avg_jct"]
    with pytest.raises(TypeError, match="act"):
        baselines.evaluate(object(), "toy-v0", seeds=[0], backend="serial")


def test_policies_by_import_path():
    from baselines.harness.sweep import resolve_policy

    policy = resolve_policy("tests.test_baselines_harness:FirstAllowed")
    assert type(policy).__name__ == "FirstAllowed" and policy.name == "first-allowed"
    records = baselines.evaluate("tests.test_baselines_harness:FirstAllowed", "toy-v0", seeds=[0, 1],
                                 backend="process", workers=2)
    assert [r["policy"] for r in records] == ["first-allowed"] * 2
    with pytest.raises(ValueError, match="cannot import policy"):
        resolve_policy("tests.nowhere:Policy")
    with pytest.raises(TypeError, match="did not give a policy"):
        resolve_policy("collections:OrderedDict")


def test_backends_give_identical_numbers():
    serial = baselines.evaluate("tiresias", "philly-v0", seeds=[0, 1], env_kwargs=SMALL, backend="serial")
    procs = baselines.evaluate("tiresias", "philly-v0", seeds=[0, 1], env_kwargs=SMALL, backend="process", workers=2)
    strip = lambda rs: [{k: v for k, v in r.items() if k != "wall_s"} for r in rs]  # noqa: E731
    assert strip(serial) == strip(procs)


def test_parallel_workers_get_the_longest_tasks_first(monkeypatch):
    """Learned and other unnamed policies first, then baselines through the API, then compiled
    episodes (ties keep their order); the process pool submits in that order and still returns
    the results in the order of the tasks."""
    from baselines import engine
    from baselines.harness import sweep
    from baselines.harness.sweep import Task, longest_first, make_tasks

    monkeypatch.delenv(engine.ENGINE_ENV_VAR, raising=False)
    tasks = make_tasks(["fifo", "sjf-noisy+first-fit", "dual", "las"], ["openb-v0"], "test", [0, 1])
    tasks.append(Task(FirstAllowed(), "toy-v0", "test", 0))
    compiled = engine.available()
    order = [(tasks[i].policy if isinstance(tasks[i].policy, str) else "object", tasks[i].seed)
             for i in longest_first(tasks, range(len(tasks)))]
    assert order[:3] == [("dual", 0), ("dual", 1), ("object", 0)]
    if compiled:
        assert order[3:] == [("sjf-noisy+first-fit", 0), ("sjf-noisy+first-fit", 1), ("fifo", 0), ("fifo", 1),
                             ("las", 0), ("las", 1)]
    monkeypatch.setenv(engine.ENGINE_ENV_VAR, "api")     # every baseline through the API: one class
    assert [tasks[i].policy for i in longest_first(tasks, range(8))][2:] == [
        "fifo", "fifo", "sjf-noisy+first-fit", "sjf-noisy+first-fit", "las", "las"]
    monkeypatch.delenv(engine.ENGINE_ENV_VAR)

    submitted = []
    real_run_task = sweep.run_task
    small = make_tasks(["fifo", "sjf-noisy+first-fit"], ["toy-v0"], "test", [0, 1])

    class Pool:                    # a stand-in pool that runs tasks here, in submission order
        def __init__(self, *a, **k):
            pass

        def submit(self, fn, task):
            import concurrent.futures

            submitted.append(task.policy)
            future = concurrent.futures.Future()
            future.set_result(real_run_task(task))
            return future

        def shutdown(self, wait=True, cancel_futures=False):
            pass

    monkeypatch.setattr(sweep, "ProcessPoolExecutor", Pool)
    results = sweep.run_tasks(small, backend="process", workers=2)
    if compiled:
        assert submitted == ["sjf-noisy+first-fit", "sjf-noisy+first-fit", "fifo", "fifo"]
    assert [(r.record["policy"], r.record["seed"]) for r in results] == [
        ("fifo", 0), ("fifo", 1), ("sjf-noisy+first-fit", 0), ("sjf-noisy+first-fit", 1)]


def test_ray_backend_on_a_local_instance():
    pytest.importorskip("ray")
    serial = baselines.evaluate("sjf", "toy-v0", seeds=[0, 1], backend="serial")
    on_ray = baselines.evaluate("sjf", "toy-v0", seeds=[0, 1], backend="ray", workers=2)
    assert [r["avg_jct"] for r in on_ray] == [r["avg_jct"] for r in serial]


def test_unpicklable_policy_is_refused_by_process_backends_with_a_clear_error():
    policy = FirstAllowed()
    policy.hook = lambda: None          # lambdas do not pickle
    with pytest.raises(ValueError, match="does not pickle"):
        baselines.evaluate(policy, "toy-v0", seeds=[0, 1], backend="process")
    # auto falls back to running it in this process.
    assert len(baselines.evaluate(policy, "toy-v0", seeds=[0, 1], backend="auto")) == 2


def test_policy_requirements_are_applied_and_conflicts_refused():
    assert env_settings(baselines.make_policy("sjf"), {"fluctuation": False}) == {
        "fluctuation": False, "clairvoyant": True}
    with pytest.raises(ValueError, match="clairvoyant"):
        env_settings(baselines.make_policy("sjf"), {"clairvoyant": False})


def test_parse_seeds():
    assert parse_seeds("0-4") == [0, 1, 2, 3, 4]
    assert parse_seeds("0,3,7") == [0, 3, 7]
    assert parse_seeds("5") == [5]
    with pytest.raises(Exception, match="seeds"):
        parse_seeds("a-b")


def test_an_empty_policy_list_is_one_line(capsys):
    # "--policies ," used to end in "'int' object is not iterable" (run), "max() arg is an empty
    # sequence" (sweep).
    for argv in (["run", "--scenario", "toy-v0", "--policies", ",", "--seeds", "0"],
                 ["sweep", "--scenario", "toy-v0", "--loads", "1", "--policies", " , ", "--seeds", "0"],
                 ["sweep", "--scenario", "toy-v0", "--loads", "1", "--policies", "", "--seeds", "0"],
                 ["scores", "--check", "--scenarios", ","]):
        assert cluster_bench(argv) == 2
        err = capsys.readouterr().err
        assert "names nothing" in err and "Traceback" not in err, err


def test_parse_seeds_refuses_a_repeated_seed(capsys):
    # "--seeds 0,0" used to fail later with "policy 'fifo' is asked twice ...", blaming the policy.
    with pytest.raises(Exception, match="seed 0 more than once"):
        parse_seeds("0,0")
    with pytest.raises(Exception, match="seeds 2, 3 more than once"):
        parse_seeds("0-4,2-3")
    assert cluster_bench(["run", "--scenario", "toy-v0", "--policies", "fifo", "--seeds", "0,0"]) == 2
    err = capsys.readouterr().err
    assert "more than once" in err and "policy" not in err.splitlines()[0]


def test_cluster_bench_run_writes_table_files_and_plots(tmp_path, capsys):
    out = tmp_path / "res"
    code = cluster_bench(["run", "--scenario", "philly-v0", "--policies", "fifo,tiresias+fastest",
                          "--reference", "fifo", "--seeds", "0-1", "--out", str(out), "--env", "jobs_per_episode=60",
                          "--backend", "serial", "--quiet"])
    assert code == 0
    text = capsys.readouterr().out
    assert "tiresias+fastest" in text and "avg_jct" in text
    rows = (out / "results.csv").read_text().splitlines()
    assert len(rows) == 1 + 4 and rows[0].startswith("policy,scenario,split,seed,jobs_finished")
    data = json.loads((out / "results.json").read_text())
    assert len(data["episodes"]) == 4 and {s["policy"] for s in data["summary"]} == {"fifo", "tiresias+fastest"}
    assert data["meta"]["env_kwargs"] == {"jobs_per_episode": 60}
    for name in ("jct_cdf.png", "utilization.png", "timeline_fifo.png", "timeline_tiresias_fastest.png"):
        png = (out / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000, name


def test_cluster_bench_run_rejects_unknown_names(tmp_path, capsys):
    assert cluster_bench(["run", "--policies", "nope", "--out", str(tmp_path), "--quiet"]) == 2
    assert "unknown policy" in capsys.readouterr().err
    assert cluster_bench(["run", "--scenario", "nowhere-v0", "--out", str(tmp_path), "--quiet"]) == 2


def test_cluster_bench_scenarios_lists_every_scenario(capsys):
    assert cluster_bench(["scenarios"]) == 0
    text = capsys.readouterr().out
    for name in cluster_env.list_scenarios():
        assert name in text
    assert "152 GPUs" in text and "1213 machines" in text


# openb-full-v1's episodes hold 30,000 pods (4-7 s each compiled): its file keeps a few policies and three seeds.
_SMALL_SCORES = {"openb-full-v1": ({"fifo", "sjf", "fifo+fastest", "gittins"}, [0, 1, 2])}


@pytest.mark.parametrize("scenario", ["toy-v0", "philly-v0", "openb-v0", "openb-full-v0",
                                      "philly-v1", "openb-v1", "openb-full-v1", "philly-hetero-v1",
                                      "modern-v1", "philly-hetero-v2", "modern-v2", "philly-hetero-v3",
                                      "philly-slo-v1", "philly-tenants-v1", "philly-hetero-v4", "philly-slo-v2",
                                      "philly-tenants-v2", "modern-v3"])
def test_checked_in_baseline_scores_have_not_moved(scenario):
    assert scenario in packaged_scenarios()
    data = json.loads(packaged_scores_file(scenario).read_text())
    # gittins (added after the v0 scores were made) is scored on the v1 scenarios only.
    named = set(baselines.BASELINE_NAMES) - ({"gittins"} if scenario.endswith("-v0") else set())
    names, seeds = _SMALL_SCORES.get(scenario, (named, [0, 1, 2, 3, 4]))
    assert set(data["scores"][scenario]) >= names
    assert data["seeds"] == seeds and data["split"] == "test"
    # In this test process (pytest-xdist already keeps the cores busy); openb-full-v1's long
    # episodes on the harness's own pool.
    backend = "auto" if scenario == "openb-full-v1" else "serial"
    drifts = check_scores(packaged_scores_file(scenario), backend=backend)
    assert drifts == [], "\n" + "\n".join(map(str, drifts))


def test_scores_check_reports_drift_and_update_rewrites(tmp_path, capsys):
    path = tmp_path / "mine.json"
    assert cluster_bench(["scores", "--update", "--file", str(path), "--scenarios", "toy-v0",
                          "--policies", "fifo,sjf", "--seeds", "0-1", "--quiet"]) == 0
    assert cluster_bench(["scores", "--check", "--file", str(path), "--quiet"]) == 0
    data = json.loads(path.read_text())
    data["scores"]["toy-v0"]["sjf"]["1"]["avg_jct"] *= 1.01
    path.write_text(json.dumps(data))
    capsys.readouterr()
    assert cluster_bench(["scores", "--check", "--file", str(path), "--quiet"]) == 1
    text = capsys.readouterr().out
    assert "FAIL" in text and "sjf" in text and "avg_jct" in text and "--update" in text
    drifts = check_scores(path)
    assert [(d.policy, d.seed, d.metric) for d in drifts] == [("sjf", 1, "avg_jct")]
    assert drifts[0].relative == pytest.approx(0.01 / 1.01)


def test_scores_file_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="bad.json"):
        check_scores(bad)
    bad.write_text(json.dumps({"format": 99}))
    with pytest.raises(ValueError, match="format"):
        check_scores(bad)
    with pytest.raises(FileNotFoundError, match="--update"):
        check_scores(tmp_path / "missing.json")
    path = update_scores(tmp_path / "u.json", ["toy-v0"], ["fifo"], [0])
    assert json.loads(path.read_text())["scores"]["toy-v0"]["fifo"]["0"]["avg_jct"] == pytest.approx(440 / 6)


def test_run_records_only_the_first_seed_and_every_episode_brings_its_jcts(tmp_path, monkeypatch):
    # A recorded episode runs through the API (the compiled engine keeps no allocation log), so
    # cluster-bench run records only the seed its timelines and utilisation plot show; the JCT
    # CDF pools every seed from the completion times every episode returns, compiled ones too.
    from baselines.harness import sweep

    seen = []
    real = sweep.run_tasks

    def spy(tasks, *args, **kwargs):
        results = real(tasks, *args, **kwargs)
        seen.extend((t.seed, t.record, r.engine, r.jct) for t, r in zip(tasks, results))
        return results

    monkeypatch.setattr(sweep, "run_tasks", spy)
    assert cluster_bench(["run", "--scenario", "philly-hetero-v1", "--policies", "las", "--reference", "las",
                          "--seeds", "0-2",
                          "--out", str(tmp_path / "res"), "--env", "jobs_per_episode=60",
                          "--backend", "serial", "--quiet"]) == 0
    assert [(seed, record) for seed, record, _, _ in seen] == [(0, True), (1, False), (2, False)]
    assert all(jct is not None and len(jct) == 60 for *_, jct in seen)
    assert seen[1][2] == "compiled"


def test_compiled_episode_returns_the_api_completion_times():
    from baselines.engine import run_compiled_episode
    from baselines.harness.episode import run_episode

    kw = {"jobs_per_episode": 80}
    compiled = run_compiled_episode("las+fastest", "philly-hetero-v1", "test", 3, kw)
    api = run_episode(baselines.make_policy("las+fastest"), "philly-hetero-v1", "test", 3, kw, record=False)
    assert compiled.engine == "compiled" and len(compiled.jct) == 80
    np.testing.assert_array_equal(compiled.jct, api.jct)
