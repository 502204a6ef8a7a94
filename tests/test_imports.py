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


def test_nothing_outside_the_run_machinery_imports_it():
    """The science (every wing and chapter) never imports ``corekit.runs``: the wall has no door."""
    edges, _ = graph()
    crossing = {m: sorted(f for f in found if f.startswith("corekit.runs"))
                for m, found in edges.items() if not m.startswith("corekit.runs") and m != "corekit.__main__"}
    assert {m: f for m, f in crossing.items() if f} == {}


def test_a_chapter_module_imports_no_other_chapter():
    """A method two chapters need lives in a wing, so no chapter imports another."""
    edges, _ = graph()
    bad = {m: sorted(f for f in found if f.startswith("corekit.chapters.") and f != m)
           for m, found in edges.items() if m.startswith("corekit.chapters.")}
    assert {m: f for m, f in bad.items() if f} == {}


def test_no_shared_module_imports_a_chapter():
    """The wings serve every chapter, so none of them imports a chapter's module."""
    edges, _ = graph()
    bad = {m: sorted(f for f in found if f.startswith("corekit.chapters"))
           for m, found in edges.items() if not m.startswith(("corekit.chapters", "corekit.runs"))}
    assert {m: f for m, f in bad.items() if f} == {}


def test_the_import_rules_catch_a_crossing(tmp_path, monkeypatch):
    """The rules above fail on a science module that imports the machinery and on a chapter importing another."""
    lib = tmp_path / "lib"
    pkg = lib / "corekit"
    for folder in (pkg, pkg / "runs", pkg / "chapters"):
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("")
    (pkg / "runs" / "claims.py").write_text("")
    (pkg / "chapters" / "markov_cores.py").write_text("")
    (pkg / "ace.py").write_text("from corekit.runs import claims\n")
    (pkg / "chapters" / "grokking_cores.py").write_text("from corekit.chapters import markov_cores\n")
    monkeypatch.setattr(__import__(__name__), "LIB", lib)
    monkeypatch.setattr(__import__(__name__), "PACKAGE", pkg)
    for rule in (test_nothing_outside_the_run_machinery_imports_it,
                 test_a_chapter_module_imports_no_other_chapter):
        try:
            rule()
        except AssertionError:
            continue
        raise AssertionError(f"{rule.__name__} passed on a tree that breaks it")
