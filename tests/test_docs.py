"""The documentation stays true: its Python examples run, and its reference lists every feature and metric."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import cluster_env
from cluster_env.envs.observation import GLOBAL_FEATURES, JOB_FEATURES, MACHINE_FEATURES, PLACING_FEATURES

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def python_blocks(path: Path) -> list[str]:
    return BLOCK.findall(path.read_text())


@pytest.mark.parametrize("path", [p for p in DOCS if python_blocks(p)], ids=lambda p: p.name)
def test_python_examples_in_docs_run(path, tmp_path, monkeypatch):
    # Blocks of one page share a namespace, in order, as a reader would paste them.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    namespace: dict = {"__name__": "__docs__"}
    for i, block in enumerate(python_blocks(path)):
        try:
            exec(compile(block, f"{path.name}[block {i}]", "exec"), namespace)
        except Exception as exc:  # pragma: no cover - the message is the point
            raise AssertionError(f"{path.name}, python block {i} failed: {exc!r}\n{block}") from exc


def test_reference_lists_every_feature_and_metric():
    text = (ROOT / "docs" / "reference.md").read_text()
    from cluster_env.core.objectives import OBJECTIVE_KEYS
    from cluster_env.envs.observation_ext import EXTRA_GLOBAL_FEATURES, EXTRA_JOB_FEATURES
    from cluster_env.envs.observation_obj import OBJECTIVE_JOB_FEATURES

    for name in (*JOB_FEATURES, *MACHINE_FEATURES, *GLOBAL_FEATURES, *PLACING_FEATURES, *cluster_env.METRIC_KEYS,
                 *EXTRA_JOB_FEATURES, *EXTRA_GLOBAL_FEATURES, *OBJECTIVE_JOB_FEATURES, *OBJECTIVE_KEYS):
        assert f"`{name}`" in text, name
    for scenario in cluster_env.list_scenarios():
        assert f"`{scenario}`" in text, scenario


def test_docs_links_resolve():
    for path in DOCS:
        for target in re.findall(r"\]\(([^)#:]+)\)", path.read_text()):
            assert (path.parent / target).exists(), f"{path.name} links to missing {target}"


# A renamed policy's old name in a command or code the docs give (``oracle`` is now
# ``srpt-clairvoyant`` / ``srpt`` / ``clairvoyant``, a deprecated alias that warns; ``dual-priority``
# is an alias of ``dual``): a whole word, so ``OracleSRPT``, ``oracle_order`` and file names pass.
STALE_NAME = re.compile(r"(?<![\w.])(oracle|dual-priority)(?![\w.-])")
FENCED = re.compile(r"```[^\n]*\n(.*?)```", re.S)
INLINE_COMMAND = re.compile(r"`((?:cluster-bench|python3?|pip) [^`]*)`")


def stale_names(text: str) -> list[str]:
    """The code blocks and inline commands of a Markdown text that use an old policy name."""
    snippets = FENCED.findall(text) + INLINE_COMMAND.findall(FENCED.sub("", text))
    return [line.strip() for snippet in snippets for line in snippet.splitlines() if STALE_NAME.search(line)]


def test_stale_name_check_catches_old_names_only():
    assert stale_names("```\ncluster-bench run --policies fifo,oracle\n```") == ["cluster-bench run --policies fifo,oracle"]
    assert stale_names("run `cluster-bench compare dual-priority las` now") == ["cluster-bench compare dual-priority las"]
    assert stale_names("```\npython benchmarks/eval_dual_paired.py a.pt --oracle\n```")
    assert stale_names("```python\nmake_policy('las+oracle')\n```")
    assert not stale_names("```\nOracleSRPT; oracle_order; tests/test_baselines_las_oracle.py\n```")
    assert not stale_names("the `oracle` of earlier rounds (now `srpt-clairvoyant`)")


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_docs_commands_use_current_policy_names(path):
    """No command or code block of the docs uses ``oracle`` or ``dual-priority`` as a policy name
    (or ``--oracle`` as a flag): each would warn or name an alias. Prose may name the old names
    where it reports figures measured under them."""
    assert stale_names(path.read_text()) == [], f"{path.name}: use srpt-clairvoyant/srpt/clairvoyant, dual, --clairvoyant"
