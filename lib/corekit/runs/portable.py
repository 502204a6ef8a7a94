"""What a published file may say of the machine that made it: paths relative to the repository, nothing else.

A run records absolute paths in several places (papermill's metadata, the injected parameters, a printed line,
the path parameters in its metrics). Before a run is published or staged into the book, :func:`portable_notebook`
and :func:`portable_value` write every path inside the repository relative to its root and every other one as
``<outside the repository>/NAME``; papermill's ``input_path``, ``output_path`` and ``output_dir`` (the run's
private folders) are dropped. The source hash reads path parameters in the same relative form
(:func:`portable_parameters`), so a run published from another clone is not stale.
"""
from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any

#: How a path outside the repository is written (its last component follows).
OUTSIDE = "<outside the repository>"
#: papermill metadata that names the run's private files; dropped.
PRIVATE_METADATA = ("input_path", "output_path")
#: papermill's injected assignment of ``output_dir`` (the run's private folder); dropped.
INJECTED_OUTPUT_DIR = re.compile(r"^output_dir = .*\n?", re.M)
#: An absolute POSIX path inside a text (a ``/`` not preceded by a word character, ``.``, ``:``, ``/`` or ``<``,
#: then at least two components).
ABSOLUTE_PATH = re.compile(r"(?<![\w.:/<~])/(?:[\w.+@-]+/)+[\w.+@-]*")


def portable_path(value: str, root: Path) -> str:
    """Return ``value`` (an absolute path) relative to ``root`` when inside it, else ``<outside the repository>/NAME``."""
    path = PurePosixPath(value)
    try:
        return path.relative_to(PurePosixPath(root.resolve())).as_posix() or "."
    except ValueError:
        return f"{OUTSIDE}/{path.name}"


def portable_parameters(params: dict, root: Path) -> dict:
    """Return ``params`` with every absolute path value (a string starting with ``/``) made portable."""
    return {k: portable_path(v, root) if isinstance(v, str) and v.startswith("/") else v for k, v in params.items()}


def portable_text(text: str, root: Path, folders: tuple[Path, ...] = ()) -> str:
    """Return ``text`` with paths under ``root`` relative to it and paths under ``folders`` (the run's own private
    folders) relative to those, and any other absolute path made portable."""
    for folder in sorted({str(f.resolve()) for f in folders} - {str(root.resolve())}, key=len, reverse=True):
        text = text.replace(folder + "/", "")
    text = text.replace(str(root.resolve()) + "/", "")
    return ABSOLUTE_PATH.sub(lambda m: portable_path(m.group(0), root), text)


def portable_value(value: Any, root: Path, folders: tuple[Path, ...] = ()) -> Any:
    """Return a JSON value (e.g. a metrics file) with :func:`portable_text` applied to every string in it."""
    if isinstance(value, str):
        return portable_text(value, root, folders)
    if isinstance(value, list):
        return [portable_value(v, root, folders) for v in value]
    if isinstance(value, dict):
        return {k: portable_value(v, root, folders) for k, v in value.items()}
    return value


def portable_notebook(notebook: Any, root: Path) -> Any:
    """Return the executed ``notebook`` (nbformat) with papermill's private paths dropped and every other path in its
    metadata, code and text outputs made portable (in place; markdown cells are prose, left as written)."""
    meta = notebook.metadata.get("papermill") or {}
    folders = tuple(Path(meta[key]).parent for key in PRIVATE_METADATA if isinstance(meta.get(key), str))
    for key in PRIVATE_METADATA:
        meta.pop(key, None)
    if isinstance(meta.get("parameters"), dict):
        params = {k: v for k, v in meta["parameters"].items() if k != "output_dir"}
        meta["parameters"] = portable_parameters(params, root)
    for cell in (c for c in notebook.cells if c.cell_type == "code"):       # prose keeps its links (``/book/x``)
        if "injected-parameters" in cell.metadata.get("tags", []):
            cell.source = INJECTED_OUTPUT_DIR.sub("", cell.source).rstrip("\n")
        cell.source = portable_text(cell.source, root, folders)
        for output in cell.get("outputs", []):
            if "text" in output:
                output["text"] = portable_value(output["text"], root, folders)
            for mime in ("text/plain", "text/markdown", "text/html"):
                if mime in output.get("data", {}):
                    output["data"][mime] = portable_value(output["data"][mime], root, folders)
    return notebook
