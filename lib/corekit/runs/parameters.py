"""A notebook's parameters: its papermill cell (the code cell tagged ``parameters``), its profiles, a run's values."""
from __future__ import annotations

import ast
import datetime
import functools
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from corekit.runs import paramspec
from corekit.runs.errors import CorekitError, syntax_error
from corekit.runs.notebooks import PROFILES, ROOT_ENV, Notebook, notebook_names

SCIENTIFIC = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")
#: The first line of the cell papermill injects after the parameters cell (its ``comment="Parameters"``).
INJECTED_HEADER = "# Parameters"


class StrictLoader(yaml.SafeLoader):
    """yaml's safe loader, refusing a mapping that holds a key twice or a merge key (``<<:``, whose values a key written
    beside it would override silently), and reading ``1e-3`` as a number (YAML 1.1 wants ``1.0e-3``)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        """Return the mapping of ``node``; raise ConstructorError at a key written twice or a merge key."""
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise yaml.constructor.ConstructorError(None, None, "a merge key (<<) is not accepted: it can give a "
                                                        "key a second value unseen; write each NAME: VALUE once",
                                                        key_node.start_mark)
            key = self.construct_object(key_node, deep=deep)
            try:
                twice = key in seen
            except TypeError:                  # an unhashable key: the safe loader says so below
                continue
            if twice:
                raise yaml.constructor.ConstructorError(None, None, f"the key {key!r} is written twice (first on line "
                                                        f"{seen[key] + 1}); keep one", key_node.start_mark)
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(f"^{SCIENTIFIC.pattern}$"),
                                   list("-+0123456789."))


def yaml_problem(err: yaml.YAMLError) -> tuple[int | None, str]:
    """Return (line, what is wrong) of a YAML error: the line where the faulty construct starts (1-based), if known."""
    mark = getattr(err, "context_mark", None) or getattr(err, "problem_mark", None)
    context, problem = getattr(err, "context", None), getattr(err, "problem", None) or str(err)
    return (mark.line + 1 if mark is not None else None), (f"{context}: {problem}" if context else problem)


@dataclass(frozen=True)
class Parameter:
    """A notebook parameter: its name, its default (source text) and the comment beside it."""

    name: str
    default: str
    help: str = ""


def parameters_cell(py: Path) -> str | None:
    """Return the source of the first code cell tagged ``parameters`` in a py:percent notebook (parsed once per
    process while the file is unchanged: a run asks for it several times before its kernel starts)."""
    stat = Path(py).stat()
    return _parameters_cell(str(Path(py).resolve()), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=64)
def _parameters_cell(path: str, mtime_ns: int, size: int) -> str | None:
    """Return the parameters cell of the notebook at ``path`` as it was at (``mtime_ns``, ``size``)."""
    import jupytext

    for cell in jupytext.read(path).cells:
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
    installed = [Path(__file__).resolve().parents[3]]     # lib/corekit/runs/parameters.py in an editable install
    for folder in (*roots, start, *start.parents, *installed):
        for candidate in (folder / f"{notebook}.py", folder / "notebooks" / f"{notebook}.py"):
            if candidate.is_file():
                return candidate
    raise FileNotFoundError(f"no {notebook}.py in or above {start} (nor in ${ROOT_ENV}/notebooks): pass the "
                            "notebook's parameters explicitly, Claims(notebook, parameters={...})")


def declared(notebook: str, start: Path | None = None) -> dict[str, Parameter]:
    """Return the parameters ``notebooks/NOTEBOOK.py`` declares in its parameters cell (empty when it has none)."""
    return cell_parameters(notebook_source(notebook, start))


def read_parameters(nb: Notebook) -> dict[str, Parameter]:
    """Return the parameters the notebook declares (empty when it has no parameters cell)."""
    return cell_parameters(nb.py)


def cell_parameters(py: Path) -> dict[str, Parameter]:
    """Return the parameters the parameters cell of the py:percent notebook ``py`` declares (empty without one); raise
    CorekitError naming the file and line where the cell is not valid Python."""
    source = parameters_cell(py)
    if source is None:
        return {}
    try:
        return parse_parameters(source)
    except SyntaxError as err:
        raise syntax_error(shown_path(py), err, file_line(py, source, err.lineno),
                           "the parameters cell is not valid Python") from None


def shown_path(py: Path) -> Path:
    """Return a notebook's ``py`` as corekit names it: relative to the book's root (the folder above notebooks/)."""
    py = Path(py)
    return py.relative_to(py.parents[1]) if py.parent.name == "notebooks" and len(py.parents) > 1 else py


def file_line(py: Path, cell: str, line: int | None) -> int | None:
    """Return the line of the file ``py`` that is line ``line`` of its cell whose source is ``cell`` (None if unknown)."""
    if line is None:
        return None
    text = Path(py).read_text()
    at = text.find(cell)
    if at < 0:
        return None
    return text.count("\n", 0, at) + line


def check_compiles(nb: Notebook) -> None:
    """Raise CorekitError naming the file and line unless the notebook's .py compiles (IPython magics are comments in a
    py:percent file, so the file is plain Python): a syntax error refused before a kernel starts, not in its cell."""
    try:
        compile(nb.py.read_text(), str(nb.py), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    except SyntaxError as err:
        raise syntax_error(shown_path(nb.py), err) from None


def parse_value(name: str, text: str) -> Any:
    """Return the ``-p NAME VALUE`` value parsed as YAML (lists, numbers, bools; '1e-3' is a float, in a list too)."""
    try:
        value = yaml.load(text, Loader=StrictLoader)
    except yaml.YAMLError as err:
        raise CorekitError(f"-p {name}: cannot parse {text!r} as YAML ({getattr(err, 'problem', err)})") from err
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


def read_profile(nb: Notebook, profile: str) -> dict:
    """Return the values the profile file of ``nb`` sets, unchecked; raise naming the file and line when it is not
    plain YAML (a syntax error, a tag such as ``!!python/...``, a key written twice, a merge key), not a mapping, or
    empty or cut short (:func:`incomplete_profile`)."""
    path = nb.profile_file(profile)
    where = path.relative_to(nb.root) if path.is_relative_to(nb.root) else path
    try:
        text = path.read_text()
        values = yaml.load(text, Loader=StrictLoader)
    except (OSError, UnicodeDecodeError) as err:
        raise CorekitError(f"{where}: cannot read it ({err})") from None
    except yaml.YAMLError as err:
        line, problem = yaml_problem(err)
        raise CorekitError(f"{where}{f', line {line}' if line else ''}: not a plain YAML mapping of NAME: VALUE "
                           f"({problem})") from None
    if values is not None and not isinstance(values, dict):
        raise CorekitError(f"{where} must hold a mapping of NAME: VALUE, got a {type(values).__name__}")
    problem = incomplete_profile(text, values)
    if problem:
        raise CorekitError(f"{where}: {problem}; a profile file sets the values of its profile, one NAME: VALUE a line: "
                           "restore it (git checkout, or the profile's values) or delete it")
    return values


def incomplete_profile(text: str, values: dict | None) -> str | None:
    """Return how a profile file's ``text`` (read as ``values``) is incomplete: empty (no NAME: VALUE, as an emptied
    file or a failed write leaves it) or cut short (its last line has no line break, as a write cut off leaves it)."""
    if not values:
        return "sets nothing (the file is empty or holds only comments)"
    if not text.endswith("\n"):
        last = text.rsplit("\n", 1)[-1]
        return f"ends without a line break, as a file cut short does (last line: {last[:60]!r})"
    return None


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
    return check_values(nb, read_profile(nb, profile), str(path.relative_to(nb.root)))


def effective_parameters(nb: Notebook, profile: str, overrides: dict) -> dict:
    """Return the profile's parameters updated by the ``-p`` overrides, all names and values checked."""
    overrides = check_values(nb, overrides, "-p")
    return {**profile_parameters(nb, profile), **overrides}


def resolved_parameters(nb: Notebook, values: dict) -> dict:
    """Return every parameter of ``nb`` with the value a run gets: ``values`` (profile and -p), else its default."""
    defaults = {}
    for name, param in read_parameters(nb).items():
        try:
            defaults[name] = ast.literal_eval(param.default)
        except (ValueError, SyntaxError):
            continue                           # an expression: the chapter's checks do not read it
    return {**defaults, **values}


def check_chapter(nb: Notebook, values: dict) -> None:
    """Raise unless the notebook's .py compiles (:func:`check_compiles`) and the chapter's own rules
    (its chapter module's ``check_inputs``: values that must agree with each other, the memory a run needs) accept the run's
    ``values`` with the defaults of the parameters they leave out."""
    from corekit.runs import checks

    check_compiles(nb)
    check = checks.chapter_check(nb.name)
    if check is None:
        return
    try:
        check(resolved_parameters(nb, values))
    except paramspec.ParameterError as err:
        raise CorekitError(str(err)) from None


def injected_names(namespace: dict) -> list[str]:
    """Return the names that the cells papermill injected (first line ``# Parameters``) assigned, among the inputs the
    kernel ran (IPython's ``In``); none outside IPython."""
    names: list[str] = []
    for source in namespace.get("In") or []:
        if not isinstance(source, str) or source.lstrip().split("\n", 1)[0].rstrip() != INJECTED_HEADER:
            continue
        try:
            body = ast.parse(source).body
        except SyntaxError:
            continue
        names += [t.id for node in body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)]
    return list(dict.fromkeys(names))


def check_output_dir(notebook: str, value: str) -> None:
    """Raise ParameterError unless the folder ``value`` (relative: to the working folder) exists or can be made, and
    takes a file."""
    from corekit.runs import owned

    try:
        folder = paramspec.expand_user(value)
        problem = owned.path_parameter_problem(folder.absolute(), "outputs", owned.book_root())
        if problem:
            raise ValueError(problem)
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except (OSError, ValueError) as err:
        why = (err.strerror or str(err)) if isinstance(err, OSError) else str(err)
        raise paramspec.ParameterError(f"{notebook}: parameter {paramspec.OUTPUT_DIR!r}: expected a folder this run can "
                                       f"write into, got {paramspec.show(value)} ({why})") from None


def check_namespace(notebook: str, namespace: dict) -> dict:
    """Return {name: value in ``namespace``} of every parameter the notebook declares; raise ParameterError for a name
    papermill injected that the notebook does not declare, or an ``output_dir`` this run cannot write into.

    A notebook calls it in its first cell after the parameters, with ``globals()``, before any work.
    """
    params = declared(notebook)
    unknown = [name for name in injected_names(namespace) if name not in params]
    if unknown:
        raise paramspec.ParameterError(f"{notebook}: unknown parameter {', '.join(map(repr, unknown))} (injected by "
                                       f"papermill); valid parameters: {', '.join(params) or '(none)'}")
    missing = [name for name in params if name not in namespace]
    if missing:
        raise ValueError(f"{notebook} declares the parameters {missing} but they are not defined in the namespace")
    values = {name: namespace[name] for name in params}
    if isinstance(values.get(paramspec.OUTPUT_DIR), str) and values[paramspec.OUTPUT_DIR]:
        check_output_dir(notebook, values[paramspec.OUTPUT_DIR])
    return values
