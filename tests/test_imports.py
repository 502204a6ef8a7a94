"""The library's import graph: no module uses another's private names, and imports run one way (no cycles)."""
from __future__ import annotations

import ast
from pathlib import Path

LIB = Path(__file__).resolve().parents[1] / "lib"
PACKAGE = LIB / "corekit"


def module_name(path: Path) -> str:
    """Return the dotted name of a library file (a package's ``__init__`` is the package)."""
    parts = list(path.relative_to(LIB).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_private(name: str) -> bool:
    """Return whether ``name`` is private (one leading underscore, not a dunder)."""
    return name.startswith("_") and not name.startswith("__")


def imports(path: Path) -> tuple[set[str], list[str]]:
    """Return the corekit modules ``path`` imports (at any depth) and every use of another module's private name."""
    tree = ast.parse(path.read_text())
    me = module_name(path)
    modules: set[str] = set()
    aliases: dict[str, str] = {}               # local name -> corekit module
    private: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("corekit"):
                    modules.add(alias.name)
                    aliases[alias.asname or alias.name.split(".")[0]] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("corekit"):
            for alias in node.names:
                target = f"{node.module}.{alias.name}"
                if (PACKAGE.parent / Path(*target.split("."))).with_suffix(".py").is_file() or \
                        (PACKAGE.parent / Path(*target.split("."))).is_dir():
                    modules.add(target)                               # a submodule: from corekit import ace
                    aliases[alias.asname or alias.name] = target
                else:
                    modules.add(node.module)
                    if is_private(alias.name):
                        private.append(f"{me}: from {node.module} import {alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases \
                and is_private(node.attr) and aliases[node.value.id] != me:
            private.append(f"{me}: {aliases[node.value.id]}.{node.attr}")
    return modules - {me}, private


def graph() -> tuple[dict[str, set[str]], list[str]]:
    """Return {module: the corekit modules it imports} over the library and every private-name use found."""
    edges, private = {}, []
    for path in sorted(PACKAGE.rglob("*.py")):
        found, bad = imports(path)
        edges[module_name(path)] = found
        private += bad
    return edges, private


def test_no_module_uses_a_private_name_of_another():
    _, private = graph()
    assert private == []


def test_imports_run_one_way():
    edges, _ = graph()
    state: dict[str, str] = {}

    def cycle_from(module: str, path: list[str]) -> list[str] | None:
        state[module] = "open"
        for nxt in sorted(edges.get(module, ())):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [nxt]
            if nxt in edges and nxt not in state and (found := cycle_from(nxt, path + [nxt])):
                return found
        state[module] = "done"
        return None

    for module in sorted(edges):
        if module not in state:
            found = cycle_from(module, [module])
            assert found is None, f"import cycle: {' -> '.join(found)}"


def test_the_language_model_layer_imports_no_task_and_no_kernel():
    edges, _ = graph()
    for module, found in edges.items():
        if module.startswith("corekit.lm"):
            assert not {m for m in found if m.startswith(("corekit.tasks", "corekit.entk"))}, module
        if module.startswith("corekit.entk"):
            assert not {m for m in found if m.startswith("corekit.tasks")}, module
