"""The shape of a notebook: short code cells, no definitions, its own chapter module only.

A notebook reads like a paper's methods section and imports every computation from ``corekit``: no code cell is over
:data:`MAX_CELL_LINES` lines but the parameters cell, no cell defines a function or a class (lambdas included: the
library is the single home of code), and a notebook imports its own chapter module and the shared wings, never
another chapter's module nor the run machinery's claims vocabulary (:mod:`corekit.verdicts` is the wing for that).
"""
from __future__ import annotations

import ast
from pathlib import Path

import jupytext
import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.py"))
#: The longest code cell a notebook may have, parameters cell aside (lines of code, blank lines not counted).
MAX_CELL_LINES = 25
#: The run machinery a notebook may import: its first cell's setup().
MACHINERY_ALLOWED = {"corekit.runs.session"}


def chapter_module(path: Path) -> str:
    """Return the dotted name of notebook ``NN_NAME``'s chapter module, ``corekit.chapters.NAME``."""
    return "corekit.chapters." + path.stem.split("_", 1)[1]


def code_cells(source: str) -> list[tuple[int, list[str], str]]:
    """Return (index, tags, source) of every code cell of a py:percent notebook's text."""
    nb = jupytext.reads(source, fmt="py:percent")
    return [(i, list(c.metadata.get("tags", [])), c.source) for i, c in enumerate(nb.cells) if c.cell_type == "code"]


def imported(tree: ast.AST) -> set[str]:
    """Return the corekit modules (and ``module.name`` for ``from module import name``) a cell imports."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("corekit")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("corekit"):
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return found


def problems(source: str, own_chapter: str) -> list[str]:
    """Return what breaks the shape rules in a notebook's py:percent text (empty when none)."""
    found = []
    for index, tags, cell in code_cells(source):
        lines = [line for line in cell.splitlines() if line.strip()]
        if "parameters" not in tags and len(lines) > MAX_CELL_LINES:
            found.append(f"cell {index}: {len(lines)} lines of code (at most {MAX_CELL_LINES})")
        try:
            tree = ast.parse("\n".join(line for line in cell.splitlines() if not line.lstrip().startswith(("%", "!"))))
        except SyntaxError as err:
            found.append(f"cell {index}: does not parse ({err.msg})")
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                what = "a lambda" if isinstance(node, ast.Lambda) else f"{type(node).__name__} {node.name!r}"
                found.append(f"cell {index}: defines {what} (its home is the library)")
        for module in sorted(imported(tree)):
            if module.startswith("corekit.chapters.") and module.split(".")[2] != own_chapter.split(".")[2]:
                found.append(f"cell {index}: imports {module}, another chapter's module")
            if module.startswith("corekit.runs") and not any(module.startswith(m) for m in MACHINERY_ALLOWED):
                found.append(f"cell {index}: imports {module} (the run machinery; the verdicts are corekit.verdicts)")
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_has_the_shape_of_a_methods_section(path):
    assert problems(path.read_text(), chapter_module(path)) == []


def test_there_are_nine_notebooks_to_check():
    assert len(NOTEBOOKS) >= 9


def test_the_shape_rules_catch_a_long_cell_a_definition_and_a_foreign_chapter():
    """A planted 30-line cell, a planted def and a planted import of another chapter are each found."""
    clean = ('# %% tags=["parameters"]\n' + "".join(f"p{i} = {i}\n" for i in range(40))
             + "\n# %%\nfrom corekit.chapters import markov_cores\nfrom corekit.runs.session import setup\n"
             + "from corekit.verdicts import Null\n")
    own = "corekit.chapters.markov_cores"
    assert problems(clean, own) == []
    long_cell = clean + "\n# %%\n" + "".join(f"x{i} = {i}\n" for i in range(30))
    assert any("30 lines of code" in p for p in problems(long_cell, own))
    planted_def = clean + "\n# %%\ndef helper(x):\n    return x\n"
    assert any("FunctionDef 'helper'" in p for p in problems(planted_def, own))
    planted_lambda = clean + "\n# %%\nf = lambda x: x\n"
    assert any("a lambda" in p for p in problems(planted_lambda, own))
    foreign = clean + "\n# %%\nfrom corekit.chapters import entk_transformer_modular as other\n"
    assert any("another chapter's module" in p for p in problems(foreign, "corekit.chapters.markov_cores"))
    machinery = clean + "\n# %%\nfrom corekit.runs.claims import Null\n"
    assert any("the run machinery" in p for p in problems(machinery, own))
