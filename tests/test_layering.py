"""The layering the house promises: cluster_env imports no policy package, policies register by
entry points (which third-party packages use too), and the CLIs do not import each other."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from cluster_env.wrappers.policies import POLICY_GROUP, RESOLVER_GROUP


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys; print(' '.join(sorted(sys.modules)))"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return set(out.stdout.split())


def test_cluster_env_imports_no_policy_package():
    loaded = _modules_after(
        "import numpy as np, gymnasium, cluster_env, cluster_env.wrappers as w\n"
        "e = gymnasium.make('cluster_env/HeteroClusterOrderer-v0', scenario='toy-v0')\n"   # default fixed placer
        "e.reset(seed=0); e.step(int(np.argmax(e.unwrapped.action_masks())))\n"
        "p = w.flat_parallel_env('toy-v0'); p.reset(seed=0)")
    assert not {"baselines", "dual_agent", "torch"} & loaded


def test_the_baselines_cli_does_not_import_the_dual_agent_cli():
    loaded = _modules_after("import baselines.cli; baselines.cli.build_parser()")
    assert "dual_agent.cli" in loaded          # loaded through its entry point (the train command) ...
    for module in ("baselines.cli", "baselines.cli_support", "baselines.harness.sweep"):
        source = Path(importlib.util.find_spec(module).origin).read_text()
        assert "import dual_agent" not in source and "from dual_agent" not in source, module   # never by name
    harness = _modules_after("import baselines, baselines.harness.sweep as s; s.resolve_policy('fifo')")
    assert "dual_agent" not in harness


def test_entry_points_resolve_the_dual_agent_and_the_baselines():
    names = {ep.name: ep.value for ep in metadata.entry_points(group=POLICY_GROUP)}
    assert names.get("dual") == "dual_agent.plugin:DUAL"
    assert {ep.name for ep in metadata.entry_points(group=RESOLVER_GROUP)} >= {"baselines", "dual-checkpoint"}
    pytest.importorskip("torch")
    from baselines.harness.sweep import resolve_policy
    from dual_agent.policy import DualAgentPolicy

    assert isinstance(resolve_policy("dual", "openb-v0"), DualAgentPolicy)
    from baselines.cli import default_policies

    assert "dual" in default_policies("openb-v0") and "dual" not in default_policies("toy-v0")


def test_a_view_takes_a_baselines_name_through_the_entry_point():
    from cluster_env.wrappers import HeteroClusterPlacerEnv

    env = HeteroClusterPlacerEnv("toy-v0", fixed_policy="sjf")
    assert type(env.fixed_policy).__name__ == "ComposedPolicy" and env.fixed_policy.name == "sjf"
    with pytest.raises(ValueError, match="policy object"):
        HeteroClusterPlacerEnv("toy-v0", fixed_policy="no-such-policy")


def test_a_third_party_package_adds_a_named_policy(tmp_path, monkeypatch):
    # A package with its own entry point, made visible by a dist-info folder on sys.path.
    pkg = tmp_path / "third_party_sched.py"
    pkg.write_text("import numpy as np\n"
                   "class Lowest:\n"
                   "    name = 'lowest'\n"
                   "    def reset(self, seed=None): pass\n"
                   "    def act(self, obs, infos): return {a: int(np.argmax(o['action_mask'])) for a, o in obs.items()}\n"
                   "def make(scenario=None):\n"
                   "    return Lowest()\n")
    info = tmp_path / "third_party_sched-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: third-party-sched\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{POLICY_GROUP}]\nlowest-first = third_party_sched:make\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import baselines

    records = baselines.evaluate("lowest-first", "toy-v0", seeds=[0], backend="serial")
    assert records[0]["policy"] == "lowest" and records[0]["jobs_finished"] == 6
    from baselines.cli_support import policy_listing

    assert "lowest-first" in policy_listing()


def test_no_cluster_env_module_names_a_policy_package():
    import cluster_env

    root = Path(cluster_env.__file__).parent
    for path in root.rglob("*.py"):
        text = path.read_text()
        for package in ("baselines", "dual_agent"):
            for pattern in (f"import {package}", f"from {package}", f'import_module("{package}', f"find_spec(\"{package}"):
                assert pattern not in text, f"{path.relative_to(root.parent)} names {package}: {pattern}"
