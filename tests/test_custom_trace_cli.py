"""Custom traces from the CLI: a column mapping flag with the Python path's
checks, the drawn job types printed, and overlapping windows said to overlap."""
from __future__ import annotations

from pathlib import Path

import pytest

from baselines.cli import main as cluster_bench

DATA = Path(__file__).resolve().parents[1] / "examples" / "data"
COLUMNS = "submit_time=submission_time,duration=run_seconds,num_gpus=size"


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text("submission_time,run_seconds,size\n0,100,1\n5,200,2\n9,50,1\n20,300,4\n30,10,1\n")
    return path


def _run(trace, tmp_path, *extra) -> list[str]:
    return ["run", "--scenario", "toy-v0", "--workload-csv", str(trace), "--reference-gpu", "V100",
            "--policies", "fifo,sjf", "--seeds", "0-1", "--backend", "serial", "--no-plots", "--quiet",
            "--out", str(tmp_path / "out"), *extra]


def test_workload_columns_map_a_trace_and_the_run_says_what_it_assumed(trace, tmp_path, capsys):
    assert cluster_bench(_run(trace, tmp_path, "--workload-columns", COLUMNS, "--env", "jobs_per_episode=3")) == 0
    out = capsys.readouterr().out
    assert "note: 5 jobs had no job type: assigned by Gavel's seeded rule" in out
    assert "the trace's job types now: " in out
    assert "windows can overlap" in out and "treat them as independent" in out


def test_a_whole_trace_run_has_no_overlap_note(trace, tmp_path, capsys):
    assert cluster_bench(_run(trace, tmp_path, "--workload-columns", COLUMNS)) == 0
    assert "windows can overlap" not in capsys.readouterr().out


@pytest.mark.parametrize("value, words", [
    ("submit_time", "--workload-columns takes FIELD=COLUMN pairs"),
    ("bogus=submission_time", "column mapping names unknown field(s) ['bogus']"),
    (COLUMNS.replace("size", "nope"), "column 'nope' (mapped to field 'num_gpus') is not in the header"),
    ("num_gpus=size,num_gpus=size", "field 'num_gpus' is mapped twice"),
])
def test_bad_column_maps_are_one_line_errors_before_any_episode(trace, tmp_path, value, words, capsys):
    assert cluster_bench(_run(trace, tmp_path, "--workload-columns", value)) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 2 and words in err[0] and err[1].startswith("hint: "), err
    assert "policies x" not in captured.out


def test_a_column_map_without_its_file_is_refused(tmp_path, capsys):
    assert cluster_bench(["run", "--workload-columns", COLUMNS, "--out", str(tmp_path)]) == 2
    assert "which is not given" in capsys.readouterr().err


def test_a_users_workload_is_parsed_once_per_process(tmp_path, monkeypatch):
    """Every env built on one user file shares one parse (a 1M-row file takes seconds): several
    builds, then episodes through both engines, parse it once; another column mapping or a
    changed file is parsed again; the shared arrays are read-only."""
    import os
    import shutil
    from collections import OrderedDict

    import baselines
    import cluster_env
    import cluster_env.loaders.workload_csv as wc

    monkeypatch.setattr(wc, "_PARSED", OrderedDict())
    parsed = []
    real = wc.load_workload_csv

    def counting(path, **kw):
        parsed.append(str(path))
        return real(path, **kw)

    monkeypatch.setattr(wc, "load_workload_csv", counting)
    jobs = tmp_path / "jobs.csv"
    shutil.copy(DATA / "my_jobs.csv", jobs)
    envs = [cluster_env.parallel_env("philly-v0", split="test", workload_csv=str(jobs)) for _ in range(3)]
    for env in envs:
        env.reset(seed=0)
    assert len(parsed) == 1
    assert envs[0].scenario.workload() is envs[2].scenario.workload()
    assert not envs[0].scenario.workload().submit.flags.writeable
    for engine in ("api", "auto"):
        monkeypatch.setenv("CLUSTER_BENCH_ENGINE", engine)
        records = baselines.evaluate("fifo", "philly-v0", seeds=range(3), env_kwargs={"workload_csv": str(jobs)},
                                     backend="serial")
        assert len(records) == 3 and records[0]["jobs_finished"] == 40
    assert len(parsed) == 1
    cluster_env.parallel_env("philly-v0", workload_csv=str(jobs), workload_columns={"tenant": None})
    assert len(parsed) == 2                          # another mapping: another workload
    with jobs.open("a") as f:
        f.write("job-40,17100,600,1,ResNet-18 (batch size 128),rl\n")
    stat = jobs.stat()
    os.utime(jobs, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    env = cluster_env.parallel_env("philly-v0", workload_csv=str(jobs))
    assert len(parsed) == 3 and env.scenario.workload().num_jobs == 41
