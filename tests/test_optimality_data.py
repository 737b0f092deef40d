"""Certificates, optimality tables and teacher caches are data: a schedule names a registered
baseline or the priority index's numbers and nothing else (no module, no file, no plug-in), seeds
and numbers are bounded, files are read only when regular and small, a teacher cache's claims are
replayed before they teach, and a table and its certificate change together, under a lock, so that
of two submits at once the better one stays. Every refusal is one line naming the file and field."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from baselines.optimality.certificate import (MAX_CERTIFICATE_BYTES, Certificate, CertificateError, Replay,
                                              certificate_path, load_certificate, parse_certificate)
from baselines.optimality.update import submit_certificate, table_document

ROOT = Path(__file__).resolve().parents[1]


def _shipped(scenario: str = "modern-v1", seed: int = 0) -> dict:
    return load_certificate(certificate_path(scenario, seed)).to_json()


def _payload(folder: Path, module: str) -> Path:
    """A module that, when imported, leaves a marker file: proof that something ran it."""
    marker = folder / f"{module}.ran"
    (folder / f"{module}.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\nx = None\n")
    return marker


# ----------------------------------------------------------------- a certificate runs nothing
@pytest.mark.parametrize("policy", ["cb_payload_verify:x+fastest", "this:x+fastest", "venv.__main__:x+fastest",
                                    "las+agent.pt", "agent.pt+fastest", "dual", "las-q" + "9" * 400])
def test_a_schedule_names_a_registered_baseline_only(policy):
    doc = dict(_shipped(), schedule={"kind": "rule", "policy": policy})
    with pytest.raises(CertificateError, match="field schedule.policy must name a registered baseline"):
        parse_certificate(doc)


def test_verify_and_submit_of_a_module_or_model_file_name_run_and_load_nothing(tmp_path, monkeypatch, capsys):
    from baselines.cli import main

    monkeypatch.chdir(tmp_path)                 # the folder a module:attr name was imported from
    marker = _payload(tmp_path, "cb_payload_cli")
    (tmp_path / "las+agent.pt").write_bytes(b"not a model")
    for policy in ("cb_payload_cli:x+fastest", "las+agent.pt"):
        # The shipped certificate's window and seed: a replay would play it.
        cert = tmp_path / "c.json"
        cert.write_text(json.dumps(dict(_shipped(), schedule={"kind": "rule", "policy": policy})))
        for argv in (["verify", str(cert)], ["best-known", "--submit", str(cert)]):
            assert main(argv) == 2
            out = capsys.readouterr()
            assert f"error: {cert}: field schedule.policy" in out.err
            assert "--trust-model" not in out.out + out.err and "Traceback" not in out.err
    assert not marker.exists() and "cb_payload_cli" not in sys.modules


def test_a_teacher_schedule_naming_a_module_runs_nothing(tmp_path, monkeypatch):
    from dual_agent.paper.teacher import HindsightTeacher

    monkeypatch.chdir(tmp_path)
    marker = _payload(tmp_path, "cb_payload_teacher")
    with pytest.raises(ValueError, match="field schedule.policy"):
        HindsightTeacher({"kind": "rule", "policy": "cb_payload_teacher:x+fastest"}, "philly-hetero-v2")
    assert not marker.exists()


# ----------------------------------------------------------------- bounded numbers and files
def test_seeds_and_values_beyond_what_the_code_takes_are_refused_naming_the_field():
    for seed in (2 ** 63, 2 ** 64, 10 ** 30, 1e30):
        with pytest.raises(CertificateError, match="field seed"):
            parse_certificate(dict(_shipped(), seed=seed))
    assert parse_certificate(dict(_shipped(), seed=2 ** 63 - 1)).seed == 2 ** 63 - 1
    for value in (10 ** 400, float("inf")):
        with pytest.raises(CertificateError, match="field avg_jct"):
            parse_certificate(dict(_shipped(), avg_jct=value))
    with pytest.raises(CertificateError, match="field scenario"):
        parse_certificate(dict(_shipped(), scenario="../../x"))


def test_a_large_or_non_regular_certificate_file_is_refused_before_it_is_read(tmp_path, capsys):
    from baselines.cli import main

    big = tmp_path / "big.json"
    text = json.dumps(_shipped())
    big.write_text(text + " " * (MAX_CERTIFICATE_BYTES + 1 - len(text)))    # valid JSON, over the cap
    with pytest.raises(CertificateError, match=f"{big}: .*bytes; a certificate has at most"):
        load_certificate(big)
    digits = tmp_path / "digits.json"
    digits.write_text(text.replace('"avg_jct": ', '"avg_jct": ' + "9" * 401 + ", \"x\": "))
    assert main(["verify", str(digits)]) == 2
    assert f"{digits}: field avg_jct" in capsys.readouterr().err
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    with pytest.raises(CertificateError, match="not a regular file"):
        load_certificate(fifo)
    if os.path.exists("/dev/zero"):
        assert main(["verify", "/dev/zero"]) == 2
        assert "/dev/zero: not a regular file" in capsys.readouterr().err


# ----------------------------------------------------------------- tables
def _table(tmp_path: Path, **windows) -> Path:
    tables = tmp_path / "tables"
    tables.mkdir(parents=True, exist_ok=True)
    doc = {"scenario": "modern-v1", "split": "test", "metric": "avg_jct", **windows}
    (tables / "modern-v1.json").write_text(json.dumps(doc))
    return tables


@pytest.mark.parametrize("windows, field", [
    ([], "field windows must be an object"),
    ({"0": {"window": "1b99826e1374a741", "lower_bound": 982.9}}, "windows.0: field best_known"),
    ({"18446744073709551616": {"window": "w", "lower_bound": 1.0, "best_known": 2.0}}, "must be a seed"),
    ({"0": {"window": "w", "lower_bound": 1.0, "best_known": float("nan")}}, "windows.0: field best_known"),
])
def test_a_malformed_table_is_refused_on_submit_naming_the_file_and_field(tmp_path, windows, field):
    tables = _table(tmp_path, windows=windows)
    with pytest.raises(CertificateError, match=f"{tables / 'modern-v1.json'}: .*{field}"):
        submit_certificate(load_certificate(certificate_path("modern-v1", 0)), tables, tmp_path / "certs")


def _fake_replay(monkeypatch):
    """The table's writing, not the replay, is under test: the replay gives the claim."""
    import baselines.optimality.update as update

    monkeypatch.setattr(update, "replay", lambda cert: Replay(cert.avg_jct, cert.avg_jct, cert.window))


def _cert(value: float, seed: int = 0) -> Certificate:
    return Certificate("modern-v1", "test", seed, "w", value, {"kind": "rule", "policy": "las"}, "test")


def test_a_table_that_cannot_be_written_leaves_the_old_certificate(tmp_path, monkeypatch):
    _fake_replay(monkeypatch)
    row = {"window": "w", "lower_bound": 1.0, "best_known": 1000.0}
    real = tmp_path / "real.json"
    real.write_text(json.dumps({"scenario": "modern-v1", "split": "test", "metric": "avg_jct", "windows": {"0": row}}))
    tables, certs = tmp_path / "tables", tmp_path / "certs"
    tables.mkdir()
    (tables / "modern-v1.json").symlink_to(real)
    old = certs / "modern-v1" / "0.json"
    old.parent.mkdir(parents=True)
    old.write_text(json.dumps(_cert(1000.0).to_json()) + "\n")
    before = old.read_bytes(), real.read_bytes()
    with pytest.raises(OSError, match="modern-v1.json is a symbolic link") as refused:
        submit_certificate(_cert(100.0), tables, certs)
    assert (old.read_bytes(), real.read_bytes()) == before
    assert "--out" not in getattr(refused.value, "hint", "")      # no such option here

    # A failure while the files are renamed into place (after the certificate's) puts it back.
    (tables / "modern-v1.json").unlink()
    (tables / "modern-v1.json").write_bytes(before[1])
    table = tables / "modern-v1.json"
    replace = os.replace

    def failing(src, dst, *a, **kw):
        if Path(dst) == table:
            raise OSError(28, "No space left on device", str(dst))
        return replace(src, dst, *a, **kw)

    monkeypatch.setattr(os, "replace", failing)
    with pytest.raises(OSError, match="modern-v1.json.*disk full"):
        submit_certificate(_cert(100.0), tables, certs)
    monkeypatch.setattr(os, "replace", replace)
    assert (old.read_bytes(), table.read_bytes()) == before
    assert sorted(p.name for p in certs.rglob("*")) == ["0.json", "modern-v1"]   # no temporary left
    assert submit_certificate(_cert(100.0), tables, certs)[0]                   # and it works once it can
    assert load_certificate(old).avg_jct == table_document("modern-v1", tables)["windows"]["0"]["best_known"] == 100.0


_DRIVER = textwrap.dedent("""
    import json, sys
    import baselines.optimality.update as update
    from baselines.optimality.certificate import Replay, load_certificate

    def replay(cert):          # the claim, once the parent says go (every racer has read the table)
        print("replayed", flush=True)
        sys.stdin.readline()
        return Replay(cert.avg_jct, cert.avg_jct, cert.window)

    update.replay = replay
    tables, certs, path = sys.argv[1:4]
    print(update.submit_certificate(load_certificate(path), tables, certs)[0], flush=True)
""")


def _racers(tmp_path: Path, values: list[float], release_together: bool) -> dict:
    """Submit a certificate per value, each in its own process, into one table whose row is worse
    than all of them; every process reads the table and replays before any writes. Together: all
    are released at once. Otherwise one by one, the best first and the worse ones after it (each
    had read the table before the best was written). Returns the table's row and the certificate."""
    tables = _table(tmp_path, windows={"0": {"window": "w", "lower_bound": 1.0, "best_known": 1000.0}})
    driver = tmp_path / "driver.py"
    driver.write_text(_DRIVER)
    certs = tmp_path / "certs"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    procs = []
    for i, value in enumerate(values):
        path = tmp_path / f"c{i}.json"
        path.write_text(json.dumps(_cert(value).to_json()))
        procs.append(subprocess.Popen([sys.executable, str(driver), str(tables), str(certs), str(path)], env=env,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    for p in procs:
        assert p.stdout.readline().strip() == "replayed"
    order = procs if release_together else sorted(procs, key=lambda p: values[procs.index(p)])
    for p in order:
        p.stdin.write("go\n")
        p.stdin.flush()
        if not release_together:
            p.wait()
    for p in procs:
        p.communicate()
        assert p.returncode == 0
    row = table_document("modern-v1", tables)["windows"]["0"]
    return {"table": row["best_known"], "certificate": load_certificate(certs / "modern-v1" / "0.json").avg_jct}


def test_of_concurrent_submits_the_best_stays_and_table_and_certificate_agree(tmp_path):
    values = [300.0, 100.0, 200.0]
    for trial in range(3):
        got = _racers(tmp_path / f"together{trial}", values, release_together=True)
        assert got == {"table": 100.0, "certificate": 100.0}
    # The interleaving that lost the better entry: the worse ones write after it, from the table
    # they had read before it was written.
    assert _racers(tmp_path / "ordered", values, release_together=False) == {"table": 100.0, "certificate": 100.0}


# ----------------------------------------------------------------- teacher caches
SCENARIO = "philly-hetero-v2"
TEACHER_EPISODES = 23          # the rules and two rounds of the index search


@pytest.fixture(scope="module")
def teacher_file(tmp_path_factory):
    from dual_agent.paper.teacher import teacher_schedules

    path = tmp_path_factory.mktemp("teachers") / "teachers.json"
    teacher_schedules(SCENARIO, [0], episodes=TEACHER_EPISODES, jobs_per_episode=10, path=path)
    return json.loads(path.read_text())


def _read_teachers(tmp_path: Path, doc: dict):
    from dual_agent.paper.teacher import teacher_schedules

    path = tmp_path / "teachers.json"
    path.write_text(json.dumps(doc))
    return teacher_schedules(SCENARIO, [0], episodes=TEACHER_EPISODES, jobs_per_episode=10, path=path)


def _changed(doc: dict, change) -> dict:
    doc = json.loads(json.dumps(doc))
    change(doc, doc["windows"][0])
    return doc


@pytest.mark.parametrize("change, field", [
    (lambda d, w: w["certificate"].update(window="0000000000000000"), r"windows\[0\]: field certificate.window"),
    (lambda d, w: w["certificate"].update(avg_jct=1.0), r"windows\[0\]: field certificate.avg_jct"),
    (lambda d, w: w.update(best_rule_value=float("nan")), r"windows\[0\]: field best_rule_value"),
    (lambda d, w: w.update(best_rule_value=w["best_rule_value"] * 2), r"windows\[0\]: field best_rule_value"),
    (lambda d, w: w["certificate"].update(schedule={"kind": "rule", "policy": "random"}),
     r"windows\[0\]: field certificate.schedule.policy"),
    (lambda d, w: w["certificate"].update(schedule={"kind": "rule", "policy": "sjf"}),
     r"windows\[0\]: field certificate.schedule.policy"),
    (lambda d, w: w.update(best_rule="srpt-clairvoyant"), r"windows\[0\]: field best_rule"),
    (lambda d, w: w["certificate"].update(seed=2 ** 64), r"windows\[0\].certificate: field seed"),
    (lambda d, w: d.update(settings=[1, 2]), "field settings must be an object"),
    (lambda d, w: d.update(windows={"0": w}), "field windows must be a list"),
    (lambda d, w: d["windows"].append(5), r"windows\[1\] must be an object"),
])
def test_a_teacher_cache_is_checked_and_replayed_before_it_teaches(tmp_path, teacher_file, change, field):
    assert _read_teachers(tmp_path, teacher_file)[0].value == teacher_file["windows"][0]["certificate"]["avg_jct"]
    with pytest.raises(ValueError, match=f"teachers.json: .*{field}"):
        _read_teachers(tmp_path, _changed(teacher_file, change))
