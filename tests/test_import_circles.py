"""No import circles between the files of the three packages.

Every import counts: at module level, inside a function, or under ``TYPE_CHECKING``. An import
inside a function hides a circle from Python's import machinery but not from a reader: the two
files still depend on each other, so neither can be understood, tested or moved alone.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cluster_env", "baselines", "dual_agent")


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file of the packages."""
    out = {}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imported_modules(module: str, path: Path, files: dict[str, Path]) -> set[str]:
    """The project's modules ``path`` imports. ``from package import name`` imports the submodule
    ``package.name`` where there is one and ``package`` otherwise; a dotted name resolves to its
    longest known prefix. A package's ``__init__`` importing its own submodules is its public face,
    not a tie, and is left out."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            source = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                names.append(f"{source}.{alias.name}" if f"{source}.{alias.name}" in files else source)
    found = set()
    for name in names:
        while name and name not in files:
            name = name.rpartition(".")[0]
        if name and name != module and not (path.name == "__init__.py" and name.startswith(module + ".")):
            found.add(name)
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the project's modules it imports."""
    files = module_files(root)
    return {module: _imported_modules(module, path, files) for module, path in files.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected sets of two or more modules (Tarjan's algorithm), each sorted."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_the_finder_sees_a_circle_through_an_import_inside_a_function(tmp_path):
    pkg = tmp_path / "baselines"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from baselines.b import x\n")
    (pkg / "b.py").write_text("def f():\n    from . import a\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from baselines.d import y\n")
    (pkg / "d.py").write_text("import baselines.c\n")
    for other in ("cluster_env", "dual_agent"):
        (tmp_path / other).mkdir()
    assert circles(import_graph(tmp_path)) == [["baselines.a", "baselines.b"], ["baselines.c", "baselines.d"]]


def test_no_import_circles_in_the_packages():
    found = circles(import_graph())
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(group) for group in found)
