"""A notebook's parameters: its papermill cell (the code cell tagged ``parameters``), its profiles, a run's values."""
from __future__ import annotations

import ast
import datetime
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from corekit.book import paramspec
from corekit.book.errors import CorekitError
from corekit.book.notebooks import PROFILES, ROOT_ENV, Notebook, notebook_names

SCIENTIFIC = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


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
    usually right there; papermill run from elsewhere finds it in the checkout this library is installed from.
    """
    start = (start or Path.cwd()).resolve()
    roots = [Path(os.environ[ROOT_ENV]).expanduser()] if os.environ.get(ROOT_ENV) else []
    installed = [Path(__file__).resolve().parents[3]]     # lib/corekit/book/parameters.py in an editable install
    for folder in (*roots, start, *start.parents, *installed):
        for candidate in (folder / f"{notebook}.py", folder / "notebooks" / f"{notebook}.py"):
            if candidate.is_file():
                return candidate
    raise FileNotFoundError(f"no {notebook}.py in or above {start} (nor in ${ROOT_ENV}/notebooks): pass the "
                            "notebook's parameters explicitly, Claims(notebook, parameters={...})")


def declared(notebook: str, start: Path | None = None) -> dict[str, Parameter]:
    """Return the parameters ``notebooks/NOTEBOOK.py`` declares in its parameters cell (empty when it has none)."""
    source = parameters_cell(notebook_source(notebook, start))
    return parse_parameters(source) if source is not None else {}


def read_parameters(nb: Notebook) -> dict[str, Parameter]:
    """Return the parameters the notebook declares (empty when it has no parameters cell)."""
    source = parameters_cell(nb.py)
    return parse_parameters(source) if source is not None else {}


def parse_value(name: str, text: str) -> Any:
    """Return the ``-p NAME VALUE`` value parsed as YAML (lists, numbers, bools; '1e-3' is a float)."""
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise CorekitError(f"-p {name}: cannot parse {text!r} as YAML ({getattr(err, 'problem', err)})") from err
    if isinstance(value, str) and SCIENTIFIC.fullmatch(value):
        return float(value)
    if isinstance(value, (datetime.date, datetime.datetime)):
        return text                            # YAML reads 2024-01-01 as a date; a notebook gets the text
    return value


def check_names(nb: Notebook, values: dict, origin: str) -> None:
    """Raise unless every name in ``values`` is a parameter of ``nb``; ``origin`` says where they came from."""
    declared = read_parameters(nb)
    unknown = [name for name in values if name not in declared]
    if unknown:
        valid = ", ".join(declared) or "(none: the notebook has no cell tagged 'parameters')"
        raise CorekitError(f"unknown parameter {', '.join(map(repr, unknown))} for {nb.name} (from {origin}); "
                           f"valid parameters: {valid}")
    if paramspec.OUTPUT_DIR in values:
        raise CorekitError(f"{origin}: {paramspec.OUTPUT_DIR} is set by corekit run (its run folder); choose where the "
                           "outputs go with --out")


def accepted_values(nb: Notebook) -> dict[str, paramspec.Accepts]:
    """Return what each parameter of ``nb`` accepts, from its default and its comment's clauses."""
    rules = {}
    for name, param in read_parameters(nb).items():
        try:
            rules[name] = paramspec.accepts(param.default, param.help)
        except paramspec.DeclarationError as err:
            raise CorekitError(f"{nb.py.name}: parameter {name}: {err}") from err
    return rules


def check_values(nb: Notebook, values: dict, origin: str) -> dict:
    """Return ``values`` checked against what ``nb`` declares (paths made absolute); raise naming the first bad one."""
    check_names(nb, values, origin)
    declared, rules = read_parameters(nb), accepted_values(nb)
    checked = {}
    for name, value in values.items():
        try:
            checked[name] = paramspec.check_parameter(name, declared[name].help, rules[name], value, Path.cwd())
        except ValueError as err:
            where = f"-p {name}" if origin == "-p" else f"{origin}: {name}"
            raise CorekitError(f"{where}: {err}") from err
    return checked


def profile_parameters(nb: Notebook, profile: str) -> dict:
    """Return what the profile sets: nothing for quick (the defaults), its YAML file for cpu and paper."""
    if profile not in PROFILES:
        raise CorekitError(f"profile must be one of {', '.join(PROFILES)}, got {profile!r}")
    if profile == "quick":
        return {}
    path = nb.profile_file(profile)
    if not path.is_file():
        having = [n for n in notebook_names(nb.root) if Notebook(nb.root, n).profile_file(profile).is_file()]
        raise CorekitError(f"no {profile} profile for {nb.name}: {path.relative_to(nb.root)} does not exist; "
                           f"notebooks with a {profile} profile: {', '.join(having) or '(none)'}")
    values = yaml.safe_load(path.read_text()) or {}
    if not isinstance(values, dict):
        raise CorekitError(f"{path} must hold a mapping of NAME: VALUE, got a {type(values).__name__}")
    return check_values(nb, values, str(path.relative_to(nb.root)))


def effective_parameters(nb: Notebook, profile: str, overrides: dict) -> dict:
    """Return the profile's parameters updated by the ``-p`` overrides, all names and values checked."""
    overrides = check_values(nb, overrides, "-p")
    return {**profile_parameters(nb, profile), **overrides}


