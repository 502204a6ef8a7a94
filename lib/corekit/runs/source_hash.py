"""The source hash of a run: the notebook's .py, the library modules it imports, the data they name, its parameters.

The run machinery (``corekit/runs/``) and ``corekit/__main__.py`` are left out: they decide where a run's outputs go
and whether a value is accepted, never what a run computes. Two of its modules run inside the notebook and can change
a page: :mod:`corekit.runs.claims` (the verdicts) and :mod:`corekit.runs.session` (the thread count); they stay in.
"""
from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path

from corekit.runs.errors import syntax_error
from corekit.runs.notebooks import Notebook
from corekit.runs.portable import portable_parameters

#: Library paths (relative to ``lib/corekit``) no source hash covers: the run machinery cannot change a result.
NOT_HASHED = ("runs/", "__main__.py")
#: Modules of the run machinery that a source hash covers all the same: they decide a verdict or a thread count.
HASHED_MACHINERY = ("runs/claims.py", "runs/session.py")


def library_dir(root: Path) -> Path:
    """Return the folder of the library the notebooks import: ``lib/corekit`` or this package."""
    return root / "lib" / "corekit" if (root / "lib" / "corekit").is_dir() else Path(__file__).resolve().parents[1]


def _module_file(library: Path, parts: list[str]) -> Path | None:
    """Return the file of library module ``corekit.<parts>`` (a module or a package's __init__), or None."""
    base = library.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if parts and candidate.is_file():
            return candidate
    return library / "__init__.py" if not parts else None


def _imported_modules(library: Path, path: Path) -> set[Path]:
    """Return the library files that ``path`` imports directly (anywhere in it), with their parent packages."""
    package = path.relative_to(library).parent.parts if path.is_relative_to(library) else ()
    wanted: list[list[str]] = []
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except SyntaxError as err:                 # one line naming the file and line, not a traceback
        top = path.parents[1] if path.parent.name == "notebooks" else library.parents[1]   # the book's root
        shown = path.relative_to(top) if path.is_relative_to(top) else path
        raise syntax_error(shown, err) from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            wanted += [alias.name.split(".")[1:] for alias in node.names if alias.name.split(".")[0] == "corekit"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package[:len(package) - node.level + 1]) + (node.module or "").split(".")
            elif (node.module or "").split(".")[0] == "corekit":
                base = node.module.split(".")[1:]
            else:
                continue
            base = [part for part in base if part]
            wanted += [base] + [base + [alias.name] for alias in node.names]
    files = set()
    for parts in wanted:
        for depth in range(len(parts) + 1):  # importing corekit.a.b runs corekit/__init__ and corekit/a/__init__
            found = _module_file(library, parts[:depth])
            if found is not None:
                files.add(found)
    return files


def library_closure(nb: Notebook) -> list[Path]:
    """Return the library files the notebook's .py imports, directly or through other library modules."""
    library = library_dir(nb.root)
    seen: set[Path] = set()
    todo = [nb.py]
    while todo:
        for found in _imported_modules(library, todo.pop()):
            if found not in seen:
                seen.add(found)
                todo.append(found)
    return sorted(seen)


def source_hash(nb: Notebook, params: dict) -> str:
    """Return the sha256 (hex) over the notebook's .py, the library modules it imports, the data they name and the parameters.

    The run machinery (:data:`NOT_HASHED`) is left out, except :data:`HASHED_MACHINERY`. Path parameters count in their
    repository-relative form (:func:`corekit.runs.portable.portable_parameters`), so where a clone lies does not.
    """
    library = library_dir(nb.root)
    closure = library_closure(nb)
    code = "".join(p.read_text() for p in closure)
    modules = [(p.relative_to(library).as_posix(), p) for p in closure]
    data = [(p.relative_to(library).as_posix(), p) for p in sorted(library.glob("data/**/*"))
            if p.is_file() and p.name in code]  # package data that a module of the closure names
    files = [(nb.py.name, nb.py)] + [(name, p) for name, p in modules + data
                                                 if not name.startswith(NOT_HASHED) or name in HASHED_MACHINERY]
    digest = hashlib.sha256()
    for name, path in files:
        digest.update(f"{name}\0".encode() + path.read_bytes() + b"\0")
    digest.update(json.dumps(portable_parameters(params, nb.root), sort_keys=True).encode())
    return digest.hexdigest()

