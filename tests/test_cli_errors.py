"""The CLIs answer every user mistake in one line plus a hint, exit code 2, no traceback (unless
--debug), and check everything before the first episode runs."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from baselines.cli import main as cluster_bench

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "examples" / "data"
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
BIN = Path(sys.executable).parent


@pytest.fixture
def files(tmp_path):
    bad = tmp_path / "bad_jobs.csv"
    bad.write_text("job_id,duration\na,60\n")
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    return {"bad": str(bad), "file": str(a_file), "out": str(tmp_path / "out")}


# (arguments, words the one line must contain); {bad}, {file}, {out} are filled from the fixture.
CASES = [
    (["run", "--policies", "nope"], "unknown policy 'nope'"),
    (["run", "--policies", "fifo,nope_module:Thing"], "cannot import policy 'nope_module:Thing'"),
    (["run", "--env", "no_such_key=1"], "unknown argument(s) ['no_such_key']"),
    (["run", "--env", "novalue"], "--env takes KEY=VALUE"),
    (["run", "--env", "jobs_per_episode=0"], "jobs_per_episode"),
    (["run", "--seeds", "-1"], "seeds must be >= 0"),
    (["run", "--seeds", "a-b"], "seeds must look like"),
    (["run", "--scenario", "nowhere-v0"], "unknown scenario 'nowhere-v0'"),
    (["run", "--workload-csv", "{bad}"], "missing required columns"),
    (["run", "--workload-csv", "/no/such/file.csv"], "no such file"),
    (["run", "--out", "{file}"], "is a file, not a folder"),
    (["run", "--backend", "nope"], "invalid choice: 'nope'"),
    (["run", "--split", "tset"], "invalid choice: 'tset'"),
    (["nosuchcommand"], "invalid choice: 'nosuchcommand'"),
    ([], "the following arguments are required: COMMAND"),
]


@pytest.mark.parametrize("argv,words", CASES, ids=[" ".join(c[0]) or "(none)" for c in CASES])
def test_cluster_bench_error_table(argv, words, files, capsys):
    argv = [a.format(**files) for a in argv]
    if argv and argv[0] == "run" and "--out" not in argv:
        argv += ["--out", files["out"]]
    assert cluster_bench(argv + ["--quiet"] if argv and argv[0] == "run" else argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 2, captured.err
    assert lines[0].startswith("cluster-bench") and ": error: " in lines[0] and words in lines[0], lines[0]
    assert lines[1].startswith("hint: ")
    assert "Traceback" not in captured.err and "episodes" not in captured.out   # nothing ran
    assert "cluster-bench run:" not in captured.out


def test_errors_are_found_before_the_first_episode(files, capsys):
    # The bad name comes last: no episode of the good ones runs first.
    assert cluster_bench(["run", "--scenario", "toy-v0", "--policies", "fifo,sjf,nope", "--seeds", "0",
                          "--out", files["out"], "--backend", "serial", "--quiet"]) == 2
    out = capsys.readouterr().out
    assert "policies x" not in out and not Path(files["out"], "results.csv").exists()


def test_debug_shows_the_traceback():
    with pytest.raises(Exception, match="unknown policy") as err:
        cluster_bench(["run", "--policies", "nope", "--debug"])
    assert isinstance(err.value.__cause__, ValueError)        # the original error, chained


def test_the_installed_script_prints_one_line_and_exits_2(tmp_path):
    out = subprocess.run([str(BIN / "cluster-bench"), "run", "--seeds", "-1", "--out", str(tmp_path)],
                         capture_output=True, text=True, env=ENV, cwd=tmp_path, timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines()[0] == "cluster-bench run: error: argument --seeds: seeds must be >= 0; got '-1'"


@pytest.mark.parametrize("argv,words", [
    (["--scenario", "nope"], "unknown scenario 'nope'"),
    (["--seed", "-1"], "the seed must be an integer >= 0"),
    (["--policy", "nope"], "invalid choice: 'nope'"),
    (["--workload-csv", "/no/such.csv"], "/no/such.csv"),
])
def test_python_m_cluster_env_error_table(argv, words):
    out = subprocess.run([sys.executable, "-m", "cluster_env", *argv], capture_output=True, text=True, env=ENV,
                         cwd=ROOT, timeout=120)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 2, out.stderr
    assert lines[0].startswith("python -m cluster_env: error: ") and words in lines[0]
    assert lines[1].startswith("hint: ")


def test_module_attribute_policies_resolve_from_the_current_folder(tmp_path):
    (tmp_path / "my_policy.py").write_text(
        "import numpy as np\n"
        "class Lowest:\n"
        "    name = 'lowest'\n"
        "    def reset(self, seed=None): pass\n"
        "    def act(self, obs, infos): return {a: int(np.flatnonzero(o['action_mask'])[0]) for a, o in obs.items()}\n")
    out = subprocess.run([str(BIN / "cluster-bench"), "run", "--scenario", "toy-v0", "--policies", "my_policy:Lowest",
                          "--seeds", "0", "--no-plots", "--backend", "serial", "--quiet", "--out", "res"],
                         capture_output=True, text=True, env=ENV, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "lowest" in out.stdout and (tmp_path / "res" / "results.csv").is_file()


def test_custom_csv_flags_and_the_table_names_the_custom_scenario(tmp_path, capsys):
    code = cluster_bench(["run", "--policies", "fifo", "--seeds", "0", "--workload-csv", str(DATA / "my_jobs.csv"),
                          "--cluster-csv", str(DATA / "my_cluster.csv"), "--reference-gpu", "V100",
                          "--no-plots", "--backend", "serial", "--quiet", "--out", str(tmp_path)])
    assert code == 0
    out = capsys.readouterr().out
    from cluster_env.scenarios.registry import DEFAULT_SCENARIO

    assert f"{DEFAULT_SCENARIO}+my_cluster.csv+my_jobs.csv" in out
    assert "read as measured on" not in out                 # the reference GPU was given
    cluster_bench(["run", "--policies", "fifo", "--seeds", "0", "--workload-csv", str(DATA / "my_jobs.csv"),
                   "--cluster-csv", str(DATA / "my_cluster.csv"), "--no-plots", "--backend", "serial", "--quiet",
                   "--out", str(tmp_path)])
    assert "read as measured on P100" in capsys.readouterr().out


def test_help_is_plain_and_lists_every_subcommand(capsys):
    from baselines.cli import build_parser

    parser = build_parser()
    text = parser.format_help()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert {"run", "scenarios", "policies", "scores", "train"} <= set(sub.choices)
    for name in sub.choices:
        assert f"    {name}" in text, name
    assert "``" not in text and ":class:" not in text
    run_help = sub.choices["run"].format_help()
    assert "scenario name" in run_help and "--workload-csv" in run_help and "--cluster-csv" in run_help


def test_policies_lists_orderers_placers_compositions_and_plugins(capsys):
    from baselines.registry import ORDERERS, PLACERS

    assert cluster_bench(["policies"]) == 0
    out = capsys.readouterr().out
    for name in [*ORDERERS, *PLACERS, "tiresias", "sjf+fastest", "dual", "module:attribute"]:
        assert name in out, name
