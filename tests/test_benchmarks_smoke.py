"""The benchmark scripts stay runnable: a small smoke run in CI, the full replay marked slow."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "replay_philly.py"
SUITE = SCRIPT.parent / "suite.py"


def _run(*args: str) -> str:
    out = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_replay_benchmark_smoke():
    out = _run("--jobs", "1500", "--episodes", "1", "--repeat", "1")
    assert "full replay: 1,500 jobs" in out and "steps/s" in out and "philly-v0:" in out


@pytest.mark.slow
def test_full_philly_replay():
    out = _run("--episodes", "5")
    assert "full replay: 82,247 jobs of 82,247" in out


def test_compiled_engine_benchmark_floor_agrees():
    """The floor loop, the compiled engine and the API give the same average JCT (2,000 jobs)."""
    script = SCRIPT.parent / "compiled_engine.py"
    out = subprocess.run([sys.executable, str(script), "--sections", "floor", "--quick"], capture_output=True,
                         text=True, timeout=1800)
    assert out.returncode == 0, out.stderr
    row = next(line for line in out.stdout.splitlines() if line.strip().startswith("2,000"))
    jcts = row.split("|")[1].split()
    assert len(jcts) == 3 and len(set(jcts)) == 1, row


def test_suite_quick_reports_every_section(tmp_path):
    out = tmp_path / "suite.json"
    proc = subprocess.run([sys.executable, str(SUITE), "--quick", "--json", str(out)],
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert set(data["sections"]) == {"env_steps", "replay", "scaling_jobs", "scaling_cluster", "dual_agent"}
    for section, status in data["sections"].items():
        # Only the dual agent may be missing (when it is not installed); the others always run.
        if section == "dual_agent" and status.startswith("skipped"):
            assert "dual_agent section skipped" in proc.stdout
            continue
        assert status.endswith("rows") and int(status.split()[0]) > 0, (section, status)
    assert {r["section"] for r in data["rows"]} >= {"env_steps", "replay", "scaling_jobs", "scaling_cluster"}
    for r in data["rows"]:
        assert r["case"] and r["unit"] and math.isfinite(r["value"]) and r["value"] > 0, r
    assert data["machine"]["quick"] is True


def test_episode_digests_save_then_check(tmp_path):
    """The result-equality tool: the same code gives the same digests; a changed file is caught."""
    script = SCRIPT.parent / "episode_digests.py"
    saved = tmp_path / "digests.json"

    def digests(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(script), "--quick", *args], capture_output=True,
                              text=True, timeout=600)

    assert digests("--save", str(saved)).returncode == 0
    same = digests("--check", str(saved))
    assert same.returncode == 0 and "all 3 digests identical" in same.stdout, same.stdout + same.stderr
    data = json.loads(saved.read_text())
    first = sorted(data)[0]
    data[first] = "0" * 16
    saved.write_text(json.dumps(data))
    changed = digests("--check", str(saved))
    assert changed.returncode == 1 and "DIFFERENT" in changed.stdout and first in changed.stdout


def _bench(name: str, *args: str) -> str:
    script = SCRIPT.parent / name
    proc = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_calibrate_load_smoke():
    out = _bench("calibrate_load.py", "--scenario", "philly-v1", "--loads", "0.5,2", "--seeds", "0-1",
                 "--policies", "fifo,sjf", "--workers", "1", "--env", "jobs_per_episode=150")
    assert "load 0.5: fifo queueing share" in out and "load 2: fifo queueing share" in out
    assert out.count("sjf ") == 2 and "ratio" in out


def test_effects_decomposition_smoke():
    out = _bench("effects_decomposition.py", "--scenario", "toy-v0", "--seeds", "0", "--legacy-spread")
    for label in ("all effects off", "only spread_penalty", "all effects on", "all on, v0 spread rule"):
        assert label in out
    assert "x1.000 of all-off" in out


def test_headroom_smoke(tmp_path):
    """Tiny windows: every policy of the table gets a row paired against las+fastest."""
    out_file = tmp_path / "headroom.json"
    out = _bench("headroom.py", "--scenario", "philly-hetero-v1", "--windows", "2", "--jobs-per-episode", "120",
                 "--policies", "las,las-migrate,srpt-clairvoyant", "--out", str(out_file))
    assert "paired against las+fastest" in out and "distinct windows" in out
    for name in ("las+fastest", "las", "las-migrate", "srpt-clairvoyant"):
        assert f"| `{name}` |" in out
    data = json.loads(out_file.read_text())
    assert data["rows"]["las+fastest"]["ratio"] == 1.0 and data["rows"]["las-migrate"]["distinct"] == 2
    assert {r["policy"] for r in data["records"]} == {"las+fastest", "las", "las-migrate", "srpt-clairvoyant"}


def test_workload_csv_cache_benchmark_smoke():
    """benchmarks/workload_csv_cache.py on a small trace: one parse, none in the episodes."""
    script = SCRIPT.parent / "workload_csv_cache.py"
    out = subprocess.run([sys.executable, str(script), "--rows", "3000", "--episodes", "2", "--jobs", "50"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "trace: 3,000 jobs" in out.stdout
    assert "0 parses during them (1 in all)" in out.stdout and "0 parses in any process" in out.stdout


def test_headroom_optimality_smoke(tmp_path):
    """The room table from the shipped optimality table: every row paired against best-known."""
    out_file = tmp_path / "room.json"
    out = _bench("headroom.py", "--optimality", "--scenario", "philly-hetero-v2", "--windows", "2", "--out",
                 str(out_file))
    assert "paired against the best-known schedule" in out
    for row in ("lower bound", "best-known", "best rule per window", "las-migrate", "dual"):
        assert f"| {row} |" in out
    rows = json.loads(out_file.read_text())["rows"]
    assert rows["best-known"]["ratio"] == 1.0 and rows["lower bound"]["to_bound"] == 1.0
    assert rows["lower bound"]["ratio"] < 1.0 <= rows["las-migrate"]["ratio"] and rows["dual"]["distinct"] == 2


def test_optimality_benchmarks_smoke():
    out = _bench("optimality_bound.py", "--scenarios", "modern-v1", "--windows", "1")
    assert "modern-v1: 1 windows, bound wall median" in out
    out = _bench("optimality_search.py", "--scenario", "modern-v1", "--windows", "1", "--budgets", "12,20")
    assert "budget   12 episodes" in out and "budget   20 episodes" in out
