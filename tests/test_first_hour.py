"""A newcomer's first hour: what a fresh clone holds and what its defaults are.

* the default output folders of every command are ignored by git and none is committed;
* ``cluster_env.parallel_env()`` and the Gymnasium ids use the one default scenario the CLI uses;
* the repository stands on its own: it cites its own design notes (docs/design.md), never a file
  outside it or a tracker's items.
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _git(*args: str) -> subprocess.CompletedProcess:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


# ------------------------------------------------------------------ default output folders


def _default_output_folders() -> set[str]:
    """Every command's default output folder: ``--out`` defaults of cluster-bench's subcommands
    (a folder default, or the one its help names, e.g. "default runs/dual-<scenario>") and of
    the examples."""
    from baselines.cli import build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    folders: set[str] = set()
    for name, sub in subparsers.choices.items():
        for action in sub._actions:
            if "--out" not in action.option_strings:
                continue
            if isinstance(action.default, str):
                folders.add(action.default.split("/")[0])
            else:
                named = re.search(r"default ([\w.-]+)/", action.help or "")
                if named:
                    folders.add(named.group(1))
    for example in sorted((ROOT / "examples").glob("*.py")):
        for default in re.findall(r'"--out",\s*default="([^"]+)"', example.read_text()):
            folders.add(default.split("/")[0])
    return folders


def test_every_default_output_folder_is_ignored_and_none_is_committed():
    folders = _default_output_folders()
    # run, sweep and the training commands at least (a parser change that hides them fails here).
    assert {"cluster-bench-results", "cluster-bench-sweep", "runs"} <= folders, folders
    for folder in sorted(folders):
        ignored = _git("check-ignore", "-q", "--no-index", f"{folder}/results.csv")
        assert ignored.returncode == 0, f".gitignore does not cover {folder}/ (a command's default output folder)"
        tracked = _git("ls-files", "--", folder).stdout.split()
        assert not tracked, f"a command's output is committed: {tracked}"
    lock = _git("check-ignore", "-q", "--no-index", "somewhere/.cluster-bench.lock")
    assert lock.returncode == 0, ".gitignore does not cover a run's lock file"
    assert not [f for f in _git("ls-files").stdout.split() if f.endswith(".cluster-bench.lock")]
