"""A notebook's parameters: the assignments of its papermill cell (the code cell tagged ``parameters``)."""
from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from pathlib import Path

#: Environment variable naming the book's root folder (holding ``_toc.yml`` and ``notebooks/``).
ROOT_ENV = "COREKIT_ROOT"


@dataclass(frozen=True)
class Parameter:
    """A notebook parameter: its name, its default (source text) and the comment beside it."""

    name: str
    default: str
    help: str = ""


def parameters_cell(py: Path) -> str | None:
    """Return the source of the first code cell tagged ``parameters`` in a py:percent notebook."""
    import jupytext

    for cell in jupytext.read(py).cells:
        if cell.cell_type == "code" and "parameters" in cell.metadata.get("tags", []):
            return cell.source
    return None


def parse_parameters(source: str) -> dict[str, Parameter]:
    """Return the parameters assigned in a parameters cell, with defaults and trailing comments."""
    lines = source.splitlines()
    params = {}
    for node in ast.parse(source).body:
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        rest = lines[node.end_lineno - 1][node.end_col_offset:].strip()
        comment = rest[1:].strip() if rest.startswith("#") else ""
        default = " ".join(ast.get_source_segment(source, node.value).split())
        params.update({t.id: Parameter(t.id, default, comment) for t in targets if isinstance(t, ast.Name)})
    return params


def notebook_source(notebook: str, start: Path | None = None) -> Path:
    """Return the path of ``notebooks/NOTEBOOK.py``: in ``$COREKIT_ROOT``, else in or above ``start`` (default: cwd).

    A notebook executes in its own folder (``corekit run`` and Jupyter both do), so ``NOTEBOOK.py`` is
    usually right there.
    """
    start = (start or Path.cwd()).resolve()
    roots = [Path(os.environ[ROOT_ENV]).expanduser()] if os.environ.get(ROOT_ENV) else []
    for folder in (*roots, start, *start.parents):
        for candidate in (folder / f"{notebook}.py", folder / "notebooks" / f"{notebook}.py"):
            if candidate.is_file():
                return candidate
    raise FileNotFoundError(f"no {notebook}.py in or above {start} (nor in ${ROOT_ENV}/notebooks): pass the "
                            "notebook's parameters explicitly, Claims(notebook, parameters={...})")


def declared(notebook: str, start: Path | None = None) -> dict[str, Parameter]:
    """Return the parameters ``notebooks/NOTEBOOK.py`` declares in its parameters cell (empty when it has none)."""
    source = parameters_cell(notebook_source(notebook, start))
    return parse_parameters(source) if source is not None else {}
