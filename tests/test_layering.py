"""The layering the house promises: cluster_env imports no policy package, policies register by
entry points (which third-party packages use too), and the CLIs do not import each other."""
from __future__ import annotations

import ast
import importlib
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
        "e = gymnasium.make('cluster_env/HeteroClusterOrderer-v1', scenario='toy-v0')\n"   # default fixed placer
        "e.reset(seed=0); e.step(int(np.argmax(e.unwrapped.action_masks())))\n"
        "p = w.flat_parallel_env('toy-v0'); p.reset(seed=0)")
    assert not {"baselines", "dual_agent", "torch"} & loaded


def test_the_baselines_cli_does_not_import_the_dual_agent_cli():
    loaded = _modules_after("import baselines.cli; baselines.cli.build_parser()")
    assert "dual_agent.paper.cli" in loaded          # loaded through its entry point (the train command) ...
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
    from dual_agent.paper.policy import DualAgentPolicy

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


# ---------------------------------------------------------------- dual_agent's rooms
def _package_modules(package: str) -> dict[str, Path]:
    """Dotted name -> source file of every module of ``package`` (packages by their ``__init__``)."""
    root = Path(importlib.util.find_spec(package).origin).parent
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _imports(name: str, path: Path) -> list[tuple[str, list[str], int]]:
    """(module, names imported from it, line) of every import statement of a module, at its top
    and inside functions alike (a deferred import still makes a circle)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, [], node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:                          # relative: resolve against the package
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([module] if module else []))
            found.append((module, [alias.name for alias in node.names], node.lineno))
    return found


def _import_graph(package: str) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports (``from pkg import sub`` names ``pkg.sub``)."""
    modules = _package_modules(package)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for module, names, _ in _imports(name, path):
            for target in [f"{module}.{n}" if f"{module}.{n}" in modules else module for n in names] or [module]:
                while target not in modules and "." in target:
                    target = target.rpartition(".")[0]
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def _circle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of ``graph`` (its modules in order, the first repeated at the end), or []."""
    state: dict[str, int] = {}                     # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        path.pop()
        return []

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return []


def test_the_circle_finder_finds_a_circle():
    assert _circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _circle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_dual_agent_has_no_import_circle():
    """Every module of dual_agent imports only modules that do not import it back, directly or
    through others, counting imports inside functions: the rooms can be read bottom-up."""
    graph = _import_graph("dual_agent")
    assert _circle(graph) == [], " -> ".join(_circle(graph))
    assert {"dual_agent.paper.policy", "dual_agent.priority.agent", "dual_agent.shared"} <= set(graph)


def test_dual_agent_keeps_its_two_families_apart():
    """The paper's agent and the priority family import each other's modules nowhere; what both
    need lives at the top (dual_agent.shared, the plugin)."""
    graph = _import_graph("dual_agent")
    for name, targets in graph.items():
        for mine, other in (("dual_agent.paper", "dual_agent.priority"), ("dual_agent.priority", "dual_agent.paper")):
            if name.startswith(mine):
                assert not [t for t in targets if t.startswith(other)], f"{name} imports {other}"


def _baselines_names_used(name: str, path: Path) -> list[tuple[str, str, int]]:
    """(baselines module, name, line) of every name a module takes from baselines: imported
    (``from baselines.x import name``, ``import baselines.x``) or read as an attribute of a
    baselines module imported by name (``from baselines import engine as e``, then ``e.name``)."""
    used, aliases = [], {}
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            used += [(a.name.rpartition(".")[0], a.name.rpartition(".")[2], node.lineno)
                     for a in node.names if a.name.startswith("baselines.")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "baselines":
            for alias in node.names:
                used.append((node.module, alias.name, node.lineno))
                if _is_module(f"{node.module}.{alias.name}"):
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            used.append((aliases[node.value.id], node.attr, node.lineno))
    return used


def _is_module(dotted: str) -> bool:
    try:
        return importlib.util.find_spec(dotted) is not None
    except (ImportError, ValueError):
        return False


def _private(module: str, name: str) -> bool:
    """Whether ``module.name`` is private: an underscore name, or one under a private module."""
    return any(part.startswith("_") and not part.startswith("__") for part in [*module.split("."), name])


def test_private_names_of_baselines_are_spotted():
    assert _private("baselines.orderers", "_visible") and _private("baselines.engine._loop", "PLACER_BONUS")
    assert not _private("baselines.orderers", "visible_candidates") and not _private("baselines", "__version__")


def test_dual_agent_uses_only_public_names_of_baselines():
    """dual_agent takes from baselines only public names: no underscore name or module, and the
    name listed in the module's ``__all__`` where it has one (its documented face)."""
    bad = []
    for name, path in _package_modules("dual_agent").items():
        for module, attr, line in _baselines_names_used(name, path):
            where = f"{name} line {line}"
            if _private(module, attr):
                bad.append(f"{where}: {module}.{attr} is private")
                continue
            public = getattr(importlib.import_module(module), "__all__", None)
            if public is not None and attr not in public and not _is_module(f"{module}.{attr}"):
                bad.append(f"{where}: {module}.{attr} is not in {module}.__all__")
    assert not bad, "\n".join(bad)


def test_the_learned_key_is_defined_once_in_the_lower_layer():
    """The features of the priority agent's key and its placer bonus are assigned in
    baselines.learned_key only; the compiled engine and dual_agent.priority import them."""
    shared = {"PRIORITY_FEATURES", "PLACER_FEATURES", "PLACER_BONUS", "TENANT_FEATURES", "TENANT_INDICES"}
    defined = []
    for package in ("baselines", "dual_agent"):
        for name, path in _package_modules(package).items():
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                targets = (list(node.targets) if isinstance(node, ast.Assign)
                           else [node.target] if isinstance(node, ast.AnnAssign) else [])
                while targets:                      # names bound, through tuples (not subscripts)
                    t = targets.pop()
                    if isinstance(t, (ast.Tuple, ast.List)):
                        targets += t.elts
                    elif isinstance(t, ast.Name) and t.id in shared:
                        defined.append(f"{name}.{t.id}")
    assert sorted(defined) == sorted(f"baselines.learned_key.{n}" for n in shared - {"TENANT_INDICES"})
    import baselines.engine as engine
    from baselines import learned_key
    from dual_agent import priority

    for n in ("PRIORITY_FEATURES", "PLACER_FEATURES", "PLACER_BONUS"):
        assert getattr(priority, n) is getattr(learned_key, n)
    assert engine.N_PRIORITY_FEATURES == len(learned_key.PRIORITY_FEATURES)
    assert engine.N_PLACER_FEATURES == len(learned_key.PLACER_FEATURES)
