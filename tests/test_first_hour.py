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

import cluster_env
from baselines.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
#: cluster-bench's parser, plugin commands included (built once: loading the plugins takes ~1 s).
PARSER = build_parser()


def _git(*args: str) -> subprocess.CompletedProcess:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


# ------------------------------------------------------------------ default output folders


def _default_output_folders() -> set[str]:
    """Every command's default output folder: ``--out`` defaults of cluster-bench's subcommands
    (a folder default, or the one its help names, e.g. "default runs/dual-<scenario>") and of
    the examples."""
    subparsers = next(a for a in PARSER._actions if isinstance(a, argparse._SubParsersAction))
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
    folders = sorted(_default_output_folders())
    # run, sweep and the training commands at least (a parser change that hides them fails here).
    assert {"cluster-bench-results", "cluster-bench-sweep", "runs"} <= set(folders), folders
    probes = [f"{folder}/results.csv" for folder in folders] + ["somewhere/.cluster-bench.lock"]
    ignored = set(_git("check-ignore", "--no-index", *probes).stdout.split())
    assert ignored == set(probes), f".gitignore does not cover {sorted(set(probes) - ignored)} (default outputs)"
    tracked = _git("ls-files").stdout.split()
    committed = [f for f in tracked if f.split("/")[0] in folders or f.endswith(".cluster-bench.lock")]
    assert not committed, f"a command's output is committed: {committed}"


# ------------------------------------------------------------------ one default scenario


def test_the_constructors_as_users_call_them_play_the_one_default_scenario():
    import inspect
    import warnings

    import gymnasium

    from cluster_env.vector import ClusterVectorEnv, vector_env

    run = PARSER.parse_args(["run"])
    assert cluster_env.DEFAULT_SCENARIO == run.scenario            # the CLI's default is the constant
    assert cluster_env.DEFAULT_SPLIT == "train"
    said = " ".join((ROOT / "README.md").read_text().split())
    assert f"the constructors' split is `{cluster_env.DEFAULT_SPLIT}` (`cluster_env.DEFAULT_SPLIT`" in said
    said = " ".join((ROOT / "docs" / "reference.md").read_text().split())
    assert (f"`parallel_env()` plays the default scenario, `{cluster_env.DEFAULT_SCENARIO}` "
            f"(`cluster_env.DEFAULT_SCENARIO`, what `cluster-bench run` scores), split `{cluster_env.DEFAULT_SPLIT}`") in said
    env = cluster_env.parallel_env()
    assert (env.scenario.name, env.split) == (cluster_env.DEFAULT_SCENARIO, "train")
    assert cluster_env.env().unwrapped.scenario.name == cluster_env.DEFAULT_SCENARIO
    assert cluster_env.make(cluster_env.ENV_ID).scenario.name == cluster_env.DEFAULT_SCENARIO
    assert cluster_env.ENV_ID == "cluster_env/HeteroCluster-v1"
    for fn in (ClusterVectorEnv.__init__, vector_env):
        assert inspect.signature(fn).parameters["scenario"].default == cluster_env.DEFAULT_SCENARIO
    with warnings.catch_warnings():
        warnings.simplefilter("error")                              # the current ids warn about nothing
        for view in ("Flat", "Orderer", "Placer"):
            made = gymnasium.make(f"cluster_env/HeteroCluster{view}-v1")
            assert made.unwrapped.env.scenario.name == cluster_env.DEFAULT_SCENARIO
            assert made.unwrapped.env.split == "train"


def test_the_first_ids_keep_their_behaviour_and_say_a_newer_version_exists():
    import gymnasium

    from cluster_env import hetero_cluster_v0, hetero_cluster_v1

    for view in ("Flat", "Orderer", "Placer"):
        with pytest.warns(DeprecationWarning, match="v1"):
            made = gymnasium.make(f"cluster_env/HeteroCluster{view}-v0")
        assert made.unwrapped.env.scenario.name == "philly-v0"
    for old in ("cluster_env/HeteroCluster-v0", "cluster_env/HeteroClusterAEC-v0"):
        with pytest.warns(DeprecationWarning, match="-v1"):
            made = cluster_env.make(old)
        assert made.unwrapped.scenario.name == "philly-v0"
    assert hetero_cluster_v0.parallel_env().scenario.name == "philly-v0"
    assert hetero_cluster_v1.parallel_env().scenario.name == cluster_env.DEFAULT_SCENARIO
    with pytest.warns(DeprecationWarning):
        assert cluster_env.make("cluster_env/HeteroCluster-v0", scenario="toy-v0").scenario.name == "toy-v0"
