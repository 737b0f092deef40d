"""Best-known schedules: the shipped tables are consistent, every shipped certificate replays to its
value bit for bit, the search finds a known optimum, and a user's better schedule is verified before
it enters a table."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from baselines.optimality import load_table
from baselines.optimality.certificate import (AGENT_FORMAT, AGENT_SUFFIX, AGENT_VERSION, Certificate,
                                              CertificateError, certificate_path, load_certificate,
                                              parse_certificate, replay, save_certificate)
from baselines.optimality.search import search_window
from baselines.optimality.update import submit_certificate, table_document

SHIPPED = ("philly-v1", "philly-hetero-v2", "modern-v1")


def _shipped_rows():
    for scenario in SHIPPED:
        doc = table_document(scenario)
        for seed, row in doc["windows"].items():
            yield scenario, int(seed), row


def test_every_scenario_ships_at_least_20_windows_and_their_order_holds():
    for scenario in SHIPPED:
        table = load_table(scenario)
        assert table is not None and len(table) >= 20, scenario
        assert sorted(table) == list(range(len(table))), scenario        # windows 0..n-1, no holes
    for scenario, seed, row in _shipped_rows():
        assert 0 < row["lower_bound"] <= row["best_known"] <= row["best_rule_value"], (scenario, seed)
        assert row["lower_bound"] == max(row["bound_parts"][k] for k in ("per_job", "pooled_srpt", "pooled_busy"))
        assert "episodes" in row["best_known_by"] or "submitted" in row["best_known_by"]
        cert = load_certificate(certificate_path(scenario, seed))
        assert (cert.scenario, cert.seed, cert.window, cert.avg_jct) == (scenario, seed, row["window"],
                                                                          row["best_known"])


def test_the_shipped_lower_bounds_are_what_the_bound_computes():
    from baselines.optimality.bound import window_lower_bound

    for scenario in SHIPPED:
        assert load_table(scenario)[1].lower_bound == pytest.approx(window_lower_bound(scenario, "test", 1).avg_jct,
                                                                  rel=1e-9)   # exp/log may round otherwise elsewhere


def test_every_shipped_certificate_replays_to_its_value_in_the_compiled_engine():
    bad = []
    for scenario, seed, row in _shipped_rows():
        cert = load_certificate(certificate_path(scenario, seed))
        got = replay(cert, ("compiled",))
        if not got.agrees(cert):        # to the last bit on the CPU that made them; 1e-6 on any other
            bad.append((scenario, seed, cert.avg_jct, got.compiled))
    assert not bad, bad


def test_a_shipped_certificate_replays_bit_for_bit_on_both_paths_and_verify_says_so():
    # A searched schedule (the priority index's parameters), the cheapest kind to get wrong.
    scenario, seed = next((s, k) for s, k, _ in _shipped_rows()
                          if load_certificate(certificate_path(s, k)).schedule["kind"] == "priority")
    path = certificate_path(scenario, seed)
    out = subprocess.run([sys.executable, "-m", "baselines", "verify", str(path)], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    got = replay(load_certificate(path))
    # both paths to the last bit, here; the claim's own bits where this CPU rounds as the one that made it
    assert got.api == got.compiled and f"API path:      {got.api!r}" in out.stdout
    assert f"compiled path: {got.compiled!r}" in out.stdout and "verified: both paths" in out.stdout


def test_verify_fails_a_claim_one_ulp_off_or_on_another_window(tmp_path):
    cert = load_certificate(certificate_path("modern-v1", 0))
    got = replay(cert)
    exact = Certificate(**{**cert.__dict__, "avg_jct": got.api})              # what this CPU replays
    lower = Certificate(**{**cert.__dict__, "avg_jct": math.nextafter(got.api, 0.0)})
    assert got.matches(exact) and not got.matches(lower)                       # the bits
    assert not got.agrees(Certificate(**{**cert.__dict__, "avg_jct": got.api * (1 - 1e-5)}))   # the portable check
    doc = cert.to_json()
    doc["seed"] = 1                                              # seed 1 plays another window
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc))
    out = subprocess.run([sys.executable, "-m", "baselines", "verify", str(path)], capture_output=True, text=True,
                         timeout=600)
    # exit 2, as best-known --submit for the same claim, with one line naming the file and the field
    assert out.returncode == 2 and "NOT verified" in out.stdout
    assert f"error: {path}: field window" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.slow
def test_every_shipped_certificate_replays_bit_for_bit_through_the_api():
    bad = []
    for scenario, seed, row in _shipped_rows():
        cert = load_certificate(certificate_path(scenario, seed))
        got = replay(cert, ("api",))
        if not got.agrees(cert):
            bad.append((scenario, seed, cert.avg_jct, got.api))
    assert not bad, bad


# ----------------------------------------------------------------- reading certificates
def _doc(**change):
    doc = {"format": "hetero-cluster-sched/schedule-certificate", "version": 1, "scenario": "philly-v1",
           "split": "test", "seed": 0, "window": "abc", "avg_jct": 10.0,
           "schedule": {"kind": "rule", "policy": "las"}}
    doc.update(change)
    return doc


@pytest.mark.parametrize("change, field", [
    ({"format": "x"}, "format"), ({"version": 2}, "version"), ({"seed": -1}, "seed"), ({"seed": True}, "seed"),
    ({"avg_jct": "1"}, "avg_jct"), ({"avg_jct": float("nan")}, "avg_jct"),
    ({"schedule": {"kind": "rule", "policy": "os:system"}}, "schedule.policy"),
    ({"schedule": {"kind": "python", "code": "1"}}, "schedule.kind"),
    ({"schedule": {"kind": "priority", "placer": "fastest", "migrate": None, "weights": [0] * 8,
                   "placer_weights": [0] * 5}}, "schedule.weights"),
    ({"schedule": {"kind": "priority", "placer": "fastest", "migrate": 0.5, "weights": [0] * 9,
                   "placer_weights": [0] * 5}}, "schedule.migrate"),
    ({"schedule": {"kind": "priority", "placer": "nope", "migrate": None, "weights": [0] * 9,
                   "placer_weights": [0] * 5}}, "schedule.placer"),
])
def test_a_bad_certificate_is_refused_naming_the_field(change, field):
    with pytest.raises(CertificateError, match=f"field {field}"):
        parse_certificate(_doc(**change))


def test_a_certificate_round_trips_to_the_same_bits(tmp_path):
    cert = parse_certificate(_doc(avg_jct=0.1 + 0.2))
    assert load_certificate(save_certificate(cert, tmp_path / "c.json")) == cert


def test_the_priority_agent_file_format_is_the_agents_own():
    from dual_agent.priority.agent import FORMAT, SUFFIX, VERSION

    assert (AGENT_FORMAT, AGENT_VERSION, AGENT_SUFFIX) == (FORMAT, VERSION, SUFFIX)


# ----------------------------------------------------------------- search and submissions
def test_the_search_finds_the_known_optimum_of_a_hand_window(tmp_path):
    # One GPU, jobs of 300, 100 and 200 s at time 0: shortest first is optimal, (100 + 300 + 600) / 3.
    w, c = tmp_path / "jobs.csv", tmp_path / "cluster.csv"
    w.write_text("job_id,submit_time,duration,num_gpus,job_type,tenant\n"
                 "a,0,300,1,ResNet-50 (batch size 64),t\nb,0,100,1,ResNet-50 (batch size 64),t\n"
                 "c,0,200,1,ResNet-50 (batch size 64),t\n")
    c.write_text("machine,gpu_type,num_gpus,count\nm,P100,1,1\n")
    kw = {"workload_csv": str(w), "cluster_csv": str(c), "all_effects_off": True}
    found = search_window("philly-v0", "test", 0, episodes=20, env_kwargs=kw)
    assert found.value == pytest.approx(1000.0 / 3, rel=1e-12)
    assert found.rules["fifo"] == pytest.approx((300 + 400 + 600) / 3)       # the start is not the optimum
    from baselines.optimality.bound import window_lower_bound

    assert window_lower_bound("philly-v0", "test", 0, kw).avg_jct == pytest.approx(found.value, abs=1e-4)


def test_a_better_verified_schedule_updates_the_table_and_a_false_one_is_refused(tmp_path):
    scenario, seed = "modern-v1", 0
    shipped = load_certificate(certificate_path(scenario, seed))
    tables, certs = tmp_path / "tables", tmp_path / "certs"
    tables.mkdir()
    doc = table_document(scenario)
    row = dict(doc["windows"][str(seed)], best_known=shipped.avg_jct * 1.01)     # a worse table value
    (tables / f"{scenario}.json").write_text(json.dumps({**doc, "windows": {str(seed): row}}))
    updated, message = submit_certificate(shipped, tables, certs)
    assert updated and "->" in message
    assert json.loads((tables / f"{scenario}.json").read_text())["windows"][str(seed)]["best_known"] == shipped.avg_jct
    assert load_certificate(certs / scenario / f"{seed}.json") == shipped
    again, message = submit_certificate(shipped, tables, certs)        # not better than itself
    assert not again and "unchanged" in message
    false = Certificate(**{**shipped.__dict__, "avg_jct": shipped.avg_jct * 0.9})
    with pytest.raises(CertificateError, match="field avg_jct: the schedule does not reproduce"):
        submit_certificate(false, tables, certs)


def test_the_commands_refuse_bad_input_with_exit_2(tmp_path, capsys):
    from baselines.cli import main

    assert main(["verify", str(tmp_path / "none.json")]) == 2
    assert "none.json: no such file" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text('{"format": "hetero-cluster-sched/schedule-certificate", "version": 1}')
    assert main(["verify", str(tmp_path / "bad.json")]) == 2
    assert "bad.json: field scenario" in capsys.readouterr().err
    assert main(["best-known"]) == 2
    assert main(["best-known", "--submit", str(tmp_path / "bad.json"), "--scenario", "philly-v1"]) == 2
    assert main(["best-known", "--scenario", "philly-v1", "--seeds", "0", "--episodes", "3"]) == 2


def test_lower_bound_command_prints_the_tables_bound():
    import io
    from contextlib import redirect_stdout

    from baselines.cli import main

    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["lower-bound", "--scenario", "modern-v1", "--seeds", "0"]) == 0
    assert f"{load_table('modern-v1')[0].lower_bound:15,.1f}" in out.getvalue()


def test_the_docs_room_tables_match_the_shipped_tables():
    """The rows of docs/dual_agent.md's room tables that the shipped tables alone determine."""
    from pathlib import Path

    from tests.helpers import load_script

    root = Path(__file__).resolve().parent.parent
    headroom = load_script("benchmarks/headroom.py", "headroom_bench")
    text = (root / "docs" / "dual_agent.md").read_text()
    for scenario in SHIPPED:
        rows = headroom.room(scenario, 100, policies=())["rows"]
        section = text[text.index(f"| `{scenario}` ("):]
        for name in ("lower bound", "best rule per window"):
            r = rows[name]
            assert f"| {name} | {r['ratio']:.3f} | [{r['lo']:.3f}, {r['hi']:.3f}] |" in section, (scenario, name)
        assert f"| best-known | 1 | - | {rows['best-known']['to_bound']:.3f} |" in section, scenario


def test_records_of_the_default_world_find_their_reference_and_others_do_not():
    from baselines.engine import run_compiled_episode
    from baselines.optimality import reference_for

    record = run_compiled_episode("las-migrate", "modern-v1", "test", 2).record
    ref = reference_for(record)
    assert ref is not None and ref.seed == 2 and ref.lower_bound <= ref.best_known <= record["avg_jct"]
    assert ref.best_rule and ref.best_known <= ref.best_rule_value
    assert reference_for({**record, "env": "jobs_per_episode=50"}) is None
    assert reference_for({**record, "window": "another"}) is None
