"""The first commands of a fresh clone work as the README writes them: ``pytest -q`` (the
``pytest`` executable, whose ``sys.path`` does not hold the current folder) collects the tests
that import ``tests.helpers`` as ``python -m pytest -q`` does."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _pytest_executable() -> str:
    """The ``pytest`` script of this interpreter's environment (else the one on PATH)."""
    here = Path(sys.executable).parent / "pytest"
    return str(here) if here.is_file() else (shutil.which("pytest") or pytest.skip("no pytest executable"))


@pytest.mark.parametrize("launcher", ["pytest", "python -m pytest"])
def test_pytest_collects_a_file_importing_tests_helpers(launcher):
    # Without PYTHONPATH: what a user's shell has after `pip install -e '.[test]'`.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    command = [_pytest_executable()] if launcher == "pytest" else [sys.executable, "-m", "pytest"]
    out = subprocess.run([*command, "--collect-only", "-q", "-n", "0", "-p", "no:cacheprovider",
                          "tests/test_gittins.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    assert "No module named 'tests'" not in text and "tests collected" in text


def _two_commands() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## Two commands")
    return text[start:text.index("\n## ", start + 1)]


def test_readme_main_job_uses_the_base_install_and_the_tests_their_extra():
    """The README's two commands: the main job from the base install (what
    tests/test_main_job.py runs with every extra blocked), the tests with the ``test`` extra; the
    hints it quotes are cluster_env.extras' spellings."""
    import re

    from cluster_env.extras import install_hint

    section = _two_commands()
    blocks = re.findall(r"```bash\n(.*?)\n```", section, flags=re.S)
    assert blocks[0] == "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/cluster-bench run"
    assert blocks[1] == ("python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && "
                         ".venv/bin/python -m pytest -q")
    quoted = re.findall(r"pip install '\.\[(\w+)\]'", section)
    assert {"rl", "ray", "rllib"} <= set(quoted)
    assert all(f"`{install_hint(extra)}`" in section for extra in quoted)
