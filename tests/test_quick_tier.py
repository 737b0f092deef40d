"""The quick tier stays what README.md says: its figure is the budget benchmarks/quick_tier.py
enforces, a quick test over its 1-second budget is listed under ``-m quick``, and HEAVY names only
tests that exist (a renamed test would otherwise slip back into the quick tier unnoticed)."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import conftest
from tests.helpers import load_script

ROOT = Path(__file__).resolve().parents[1]


def test_heavy_names_only_test_files_and_functions_that_exist():
    defined: dict[str, set[str]] = {}
    for entry in sorted(conftest.HEAVY):
        file, _, name = entry.partition("::")
        path = ROOT / "tests" / file
        assert path.is_file(), f"HEAVY names {file}, which is not in tests/"
        if file not in defined:
            tree = ast.parse(path.read_text(encoding="utf-8"))
            defined[file] = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        function = name.split("[", 1)[0]
        assert not name or function in defined[file], f"HEAVY names {entry}, but {file} defines no {function}"


def test_heavy_parametrisations_are_cases_that_pytest_collects(request):
    """An entry naming one case (``test[id]``) names one that exists: ids change with the parameters."""
    cases = sorted(e for e in conftest.HEAVY if "[" in e)
    files = sorted({str(ROOT / "tests" / e.split("::")[0]) for e in cases})
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-m", "",
                          "-p", "no:cacheprovider", *files], cwd=ROOT, capture_output=True, text=True)
    collected = {line.strip().split("/", 1)[-1] for line in out.stdout.splitlines() if "::" in line}
    missing = [e for e in cases if e not in collected]
    assert not missing, f"HEAVY names cases pytest does not collect: {missing}"


def test_readme_and_pyproject_quote_the_budget_the_benchmark_enforces():
    script = load_script("benchmarks/quick_tier.py")
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    quoted = re.findall(r"`python -m pytest -m quick` runs .*? in under (\d+) CPU seconds", readme)
    assert quoted == [str(script.QUICK_TIER_CPU_S)], quoted
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert f"pytest -m quick (under {script.QUICK_TIER_CPU_S} CPU seconds" in pyproject
    assert script.QUICK_TEST_BUDGET_S == conftest.QUICK_TEST_BUDGET_S and script.TIMES_ENV == conftest.TIMES_ENV


class _Reporter:
    def __init__(self):
        self.lines: list[str] = []

    def write_sep(self, sep, title, **markup):
        self.lines.append(f"{sep * 3} {title} {sep * 3}")

    def write_line(self, line, **markup):
        self.lines.append(line)


@pytest.mark.parametrize("markexpr, listed", [("quick", True), ("quick and not slow", True), ("", False),
                                              ("not quick", False)])
def test_under_m_quick_a_section_lists_the_quick_tests_over_their_budget(monkeypatch, markexpr, listed):
    monkeypatch.setattr(conftest, "_TIMES", {"tests/test_a.py::test_slow": 2.5, "tests/test_a.py::test_fast": 0.2,
                                             "tests/test_b.py::test_slower": 7.25})
    monkeypatch.delenv(conftest.TIMES_ENV, raising=False)
    reporter = _Reporter()
    config = SimpleNamespace(getoption=lambda name, default=None: markexpr if name == "markexpr" else default)
    conftest.pytest_terminal_summary(reporter, 0, config)
    if not listed:
        assert reporter.lines == []
        return
    assert "2 quick test(s) over the 1 s budget (CPU seconds)" in reporter.lines[0]
    assert reporter.lines[1:3] == ["   7.25 s  tests/test_b.py::test_slower", "   2.50 s  tests/test_a.py::test_slow"]
    assert "HEAVY" in reporter.lines[3] and not any("test_fast" in line for line in reporter.lines)


def test_each_test_report_carries_the_cpu_seconds_from_setup_to_teardown(monkeypatch):
    monkeypatch.setattr(conftest, "_TIMES", {})
    item = SimpleNamespace(stash={})
    conftest.pytest_runtest_setup(item)
    item.stash[conftest._START] -= 1.5                     # as if setup and call had taken 1.5 CPU seconds
    report = SimpleNamespace(user_properties=[], when="teardown", nodeid="tests/test_x.py::test_y")
    hook = conftest.pytest_runtest_makereport(item, SimpleNamespace(when="teardown"))
    next(hook)
    with pytest.raises(StopIteration):
        hook.send(SimpleNamespace(get_result=lambda: report))
    cpu = dict(report.user_properties)["cpu_s"]
    assert 1.5 <= cpu < 5.0
    conftest.pytest_runtest_logreport(report)             # where the reports arrive (xdist's controller too)
    assert conftest._TIMES == {"tests/test_x.py::test_y": cpu}


def test_the_benchmark_measures_a_tier_and_fails_above_its_budget(tmp_path, capsys):
    """benchmarks/quick_tier.py on one small file (a pytest subprocess: heavy)."""
    script = load_script("benchmarks/quick_tier.py")
    report = tmp_path / "m.json"
    code = script.main(["--budget", "0.001", "--slowest", "3", "--json", str(report), "--",
                        "tests/test_quick_tier.py", "-n", "0", "-k", "heavy_names or cpu_seconds"])
    out = capsys.readouterr().out
    assert code == 1 and "OVER BUDGET" in out
    assert re.search(r"quick tier: 2 tests, [0-9.]+ CPU s \(budget 0.001\)", out), out
    assert "tests/test_quick_tier.py::test_heavy_names_only_test_files_and_functions_that_exist" in out
    measured = json.loads(report.read_text())
    assert measured["cpu_s"] > 0 and set(measured["times"]) == {
        "tests/test_quick_tier.py::test_heavy_names_only_test_files_and_functions_that_exist",
        "tests/test_quick_tier.py::test_each_test_report_carries_the_cpu_seconds_from_setup_to_teardown"}
    assert script.main(["--budget", "1e6", "--", "tests/test_quick_tier.py", "-n", "0", "-k", "heavy_names"]) == 0
