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


# ------------------------------------------------------------------ the project stands on its own

#: What a text file of the repository must not cite: an internal design file, a folder outside the
#: repository, a tracker's items. (Spelled with character classes so that this file does not match.)
FOREIGN = {
    "a design file outside the repository": re.compile(r"\bDESIG[N]\b"),
    "a folder outside the repository": re.compile(r"\.\./shar[e]d"),
    "a tracker's item": re.compile(r"\b[Ii]ssues? #?\d+|\b[Tt]he [i]ssue's|/[i]ssues/\d+"),
}
#: History is history: the changelog may name what it likes.
NOT_SCANNED = {"CHANGELOG.md"}


def _tracked_text_files() -> list[Path]:
    files = []
    for name in _git("ls-files", "-z").stdout.split("\0"):
        path = ROOT / name
        if not name or name in NOT_SCANNED or not path.is_file():
            continue
        head = path.read_bytes()[:8192]
        if b"\0" in head or name.endswith((".gz", ".png", ".pt", ".zip", ".npz")):
            continue
        files.append(path)
    return files


def test_the_repository_cites_nothing_outside_itself():
    found = []
    for path in _tracked_text_files():
        text = path.read_text(errors="replace")
        for what, pattern in FOREIGN.items():
            for m in pattern.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                found.append(f"{path.relative_to(ROOT)}:{line}: {what}: {m.group(0)!r}")
    assert not found, "cite docs/design.md or say it in plain words:\n" + "\n".join(found)


def test_the_scan_catches_each_kind_of_foreign_citation():
    assert FOREIGN["a design file outside the repository"].search("(DESIG" + "N section 9)")
    assert FOREIGN["a folder outside the repository"].search("files in ../" + "shared/data")
    for text in ("(iss" + "ue 26)", "Iss" + "ue 17's target", "the iss" + "ue's note", "github.com/a/b/iss" + "ues/3"):
        assert FOREIGN["a tracker's item"].search(text), text
    assert not any(p.search("docs/design.md section 9; a design issue; the issue of load") for p in FOREIGN.values())


def test_the_design_notes_have_every_section_their_citations_name():
    from baselines.harness.stats import CLAIM_WINDOWS, MIN_VERDICT_WINDOWS

    design = (ROOT / "docs" / "design.md").read_text()
    sections = {int(n) for n in re.findall(r"^## (\d+)\. ", design, re.M)}
    assert sections == set(range(1, max(sections) + 1)), sorted(sections)
    cited = set()
    for path in _tracked_text_files():
        text = path.read_text(errors="replace")
        cited |= {int(n) for n in re.findall(r"design\.md(?:\]\(design\.md\))?,? section (\d+)", text)}
    assert cited and cited <= sections, sorted(cited - sections)
    # The figures it quotes are the code's.
    said = " ".join(design.split())
    assert f"fewer than {MIN_VERDICT_WINDOWS} distinct windows" in said
    assert f"rests on {CLAIM_WINDOWS} test windows" in said
    readme = (ROOT / "README.md").read_text()
    assert "docs/design.md" in readme
