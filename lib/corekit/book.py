"""The book as files: its root, notebooks, table of contents, parameters and profiles, source hash, and build.

A notebook is ``notebooks/NN_name.py`` (jupytext py:percent, the source of truth) paired with
``notebooks/NN_name.ipynb``; its parameters are the papermill ``parameters`` cell, checked by
:mod:`corekit.paramspec`; a profile (quick, cpu, paper) sets them from ``notebooks/params/PROFILE/``.
:func:`stage_book` copies executed notebooks and the prose into a Jupyter Book source folder and
:func:`build_html` builds it. :mod:`corekit.cli` (the ``corekit`` command) and :mod:`corekit.publish`
(the published edition) both work through this module.
"""
from __future__ import annotations

import ast
import copy
import datetime
import fnmatch
import hashlib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import yaml

from corekit import paramspec
from corekit.parameters import ROOT_ENV, Parameter, parameters_cell, parse_parameters

PROFILES = ("quick", "cpu", "paper")
#: Modules of the command line itself: they cannot change a notebook's results, so no source_hash covers them.
COMMAND_LINE = ("cli.py", "__main__.py", "book.py", "paramspec.py", "publish.py")
NOTEBOOK_NAME = re.compile(r"\d\d_\w+")
SCIENTIFIC = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")
REDRAWN = re.compile(r"[^\n]*\r(?=[^\n])")  # text a later \r on the same line overwrote
DANGLING_CR = re.compile(r"\r+(?=\n|$)")
#: An environment's warning, not the run's: tqdm.auto (imported by transformers) finds no Jupyter widgets.
TQDM_WIDGETS_WARNING = re.compile(r"^.*TqdmWarning: IProgress not found\..*\n(?:[ \t]+from \.autonotebook .*\n)?", re.M)
#: The parameter a notebook reads its torch device from ("auto", "cpu", "cuda", "cuda:N").
DEVICE_PARAMETER = "device"
#: Comment clauses of a parameter that must be a prime (an integer) or primes (a list of integers).
PRIME_CLAUSES = {"a prime", "primes"}
INT64_MAX = 2**63 - 1
MILLER_RABIN_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)


class CorekitError(Exception):
    """A bad request (unknown name, missing file): printed as one message, exit status 2."""

    exit_code = 2


class ExecutionFailed(CorekitError):
    """A notebook that raised or wrote no metrics: exit status 1."""

    exit_code = 1


class Interrupted(CorekitError):
    """A run stopped by Ctrl-C (SIGINT): exit status 130, as a shell reports it."""

    exit_code = 130


# --------------------------------------------------------------------------------------------
# The book's root and its notebooks


def _is_root(folder: Path) -> bool:
    """Return whether ``folder`` looks like the book's root."""
    return (folder / "_toc.yml").is_file() and (folder / "notebooks").is_dir()


def find_root(start: Path | None = None) -> Path:
    """Return the book's root: ``$COREKIT_ROOT``, else the nearest folder above ``start`` with a book."""
    if os.environ.get(ROOT_ENV):
        root = Path(os.environ[ROOT_ENV]).expanduser().resolve()
        if not _is_root(root):
            raise CorekitError(f"{ROOT_ENV}={root} is not a book root: it needs _toc.yml and notebooks/")
        return root
    start = (start or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        if _is_root(folder):
            return folder
    installed = Path(__file__).resolve().parents[2]  # lib/corekit/cli.py in an editable install
    if _is_root(installed):
        return installed
    raise CorekitError(f"no book root (a folder with _toc.yml and notebooks/) at or above {start}; "
                       f"run inside the repository or set {ROOT_ENV}")


@dataclass(frozen=True)
class Notebook:
    """One notebook: ``notebooks/NAME.py`` (the source) paired with ``notebooks/NAME.ipynb``."""

    root: Path
    name: str

    @property
    def folder(self) -> Path:
        """The notebooks folder (the kernel's working directory)."""
        return self.root / "notebooks"

    @property
    def py(self) -> Path:
        """The py:percent source."""
        return self.folder / f"{self.name}.py"

    @property
    def ipynb(self) -> Path:
        """The paired notebook papermill reads."""
        return self.folder / f"{self.name}.ipynb"

    @property
    def paper_profile(self) -> Path:
        """The parameters of the paper profile."""
        return self.profile_file("paper")

    def profile_file(self, profile: str) -> Path:
        """Return the parameters file of ``profile`` (cpu or paper): ``notebooks/params/PROFILE/NAME.yaml``."""
        return self.folder / "params" / profile / f"{self.name}.yaml"


def notebook_names(root: Path) -> list[str]:
    """Return the names of the book's notebooks (``notebooks/NN_name.py``) in order."""
    return sorted(p.stem for p in (root / "notebooks").glob("*.py") if NOTEBOOK_NAME.fullmatch(p.stem))


def get_notebook(root: Path, name: str) -> Notebook:
    """Return the notebook called ``name`` (its .py or .ipynb file name or path also works)."""
    stem = Path(name).stem if name.endswith((".py", ".ipynb")) else Path(name).name
    names = notebook_names(root)
    if stem not in names:
        valid = ", ".join(names) or "(none: notebooks/ holds no NN_name.py)"
        raise CorekitError(f"unknown notebook {name!r}; valid notebooks: {valid}, or 'all'")
    return Notebook(root, stem)


def toc_files(root: Path) -> list[str]:
    """Return every page of ``_toc.yml`` (root first) in reading order, without file suffix."""
    files: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            files.extend(node[key] for key in ("root", "file") if isinstance(node.get(key), str))
            node = list(node.values())
        if isinstance(node, list):
            for child in node:
                if isinstance(child, (dict, list)):
                    walk(child)

    walk(yaml.safe_load((root / "_toc.yml").read_text()))
    return [re.sub(r"\.(md|ipynb|py|rst)$", "", f) for f in files]


def toc_notebooks(root: Path) -> list[str]:
    """Return the notebooks listed in ``_toc.yml``, in order; each must have its ``.py``."""
    names = [f.split("/", 1)[1] for f in toc_files(root) if f.startswith("notebooks/")]
    missing = [n for n in names if not Notebook(root, n).py.is_file()]
    if missing:
        raise CorekitError(f"_toc.yml lists {', '.join('notebooks/' + n for n in missing)} but no such .py "
                           f"exists; notebooks present: {', '.join(notebook_names(root)) or '(none)'}")
    return names


# --------------------------------------------------------------------------------------------
# Parameters


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
            checked[name] = check_value(declared[name], rules[name], value)
        except ValueError as err:
            where = f"-p {name}" if origin == "-p" else f"{origin}: {name}"
            raise CorekitError(f"{where}: {err}") from err
    return checked


def check_value(param: Parameter, rule: paramspec.Accepts, value: Any) -> Any:
    """Return ``value`` as :func:`corekit.paramspec.check` passes it, also within 64 bits, a device here, prime where declared."""
    value = paramspec.check(value, rule, Path.cwd())
    check_int64(value)
    if param.name == DEVICE_PARAMETER:
        check_device(value)
    clauses = {clause.strip() for clause in param.help.split(";")}
    if clauses & PRIME_CLAUSES:
        check_primes(value)
    return value


def integers(value: Any) -> Iterator[int]:
    """Yield every integer in ``value``, inside lists and mappings too (bools are no integers here)."""
    if isinstance(value, (list, dict)):
        for item in value.values() if isinstance(value, dict) else value:
            yield from integers(item)
    elif isinstance(value, int) and not isinstance(value, bool):
        yield value


def check_int64(value: Any) -> None:
    """Raise ValueError if an integer in ``value`` lies beyond 2**63-1 (torch's and numpy's integers)."""
    huge = next((n for n in integers(value) if abs(n) > INT64_MAX), None)
    if huge is not None:
        raise ValueError(f"{huge} is beyond 2**63-1, the largest integer torch and numpy take")


def accepted_devices() -> list[str]:
    """Return the devices a notebook can run on here: auto, cpu, then cuda, cuda:N and mps where present."""
    import torch

    devices = ["auto", "cpu"]
    if torch.cuda.is_available():
        devices += ["cuda"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if torch.backends.mps.is_available():
        devices.append("mps")
    return devices


def check_device(value: Any) -> None:
    """Raise ValueError unless ``value`` names a device of this machine (auto and cpu without importing torch)."""
    if value in ("auto", "cpu"):
        return
    devices = accepted_devices()
    if value not in devices:
        raise ValueError(f"expected a device of this machine, one of {', '.join(devices)}, got {paramspec.show(value)}")


def is_prime(n: int) -> bool:
    """Return whether ``n`` is a prime (Miller-Rabin on the bases that decide every n below 3e24, so every int64)."""
    if n < 2 or any(n % b == 0 for b in MILLER_RABIN_BASES):
        return n in MILLER_RABIN_BASES
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for base in MILLER_RABIN_BASES:
        x = pow(base, d, n)
        if x not in (1, n - 1) and all((x := pow(x, 2, n)) != n - 1 for _ in range(s - 1)):
            return False
    return True


def check_primes(value: Any) -> None:
    """Raise ValueError if an integer in ``value`` is not a prime, naming the nearest primes."""
    composite = next((n for n in integers(value) if not is_prime(n)), None)
    if composite is not None:
        below = next((k for k in range(composite - 1, 1, -1) if is_prime(k)), None)
        above = next(k for k in itertools.count(max(composite + 1, 2)) if is_prime(k))
        nearest = f"{below}, {above}" if below else str(above)
        raise ValueError(f"expected {'primes' if isinstance(value, list) else 'a prime'}, got {paramspec.show(value)} "
                         f"({composite} is not a prime; nearest primes: {nearest})")


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



# --------------------------------------------------------------------------------------------
# Source hash


def library_dir(root: Path) -> Path:
    """Return the folder of the library the notebooks import: ``lib/corekit`` or this package."""
    return root / "lib" / "corekit" if (root / "lib" / "corekit").is_dir() else Path(__file__).resolve().parent


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
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
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

    The command line's own modules (:data:`COMMAND_LINE`) are left out: they cannot change a result.
    """
    library = library_dir(nb.root)
    closure = library_closure(nb)
    code = "".join(p.read_text() for p in closure)
    modules = [(p.relative_to(library).as_posix(), p) for p in closure]
    data = [(p.relative_to(library).as_posix(), p) for p in sorted(library.glob("data/**/*"))
            if p.is_file() and p.name in code]  # package data that a module of the closure names
    files = [(nb.py.name, nb.py)] + [(name, p) for name, p in modules + data if name not in COMMAND_LINE]
    digest = hashlib.sha256()
    for name, path in files:
        digest.update(f"{name}\0".encode() + path.read_bytes() + b"\0")
    digest.update(json.dumps(params, sort_keys=True).encode())
    return digest.hexdigest()


# --------------------------------------------------------------------------------------------
# Staging and building the book


def staged_config(config: dict) -> dict:
    """Return the root ``_config.yml`` for building from executed notebooks: no execution, no .py."""
    config = copy.deepcopy(config)
    config.setdefault("execute", {})["execute_notebooks"] = "off"
    config["exclude_patterns"] = [p for p in config.get("exclude_patterns", [])
                                  if not fnmatch.fnmatch("notebooks/00_any.ipynb", p)]
    ((config.get("sphinx") or {}).get("config") or {}).pop("nb_custom_formats", None)
    has_url = bool((config.get("repository") or {}).get("url"))   # the buttons need the repository's URL
    html = config.setdefault("html", {})
    html["use_repository_button"] = html["use_issues_button"] = has_url
    return config


def tidy_streams(outputs: list) -> list:
    """Return cell outputs with consecutive streams merged, progress-bar redraws (\\r) collapsed and tqdm's
    missing-widgets warning dropped."""
    tidy: list = []
    for output in outputs:
        previous = tidy[-1] if tidy else {}
        same_stream = output.get("output_type") == "stream" == previous.get("output_type")
        if same_stream and output["name"] == previous["name"]:
            previous["text"] += output["text"]
        else:
            tidy.append(copy.deepcopy(output))
    for output in tidy:
        if output.get("output_type") == "stream":
            output["text"] = TQDM_WIDGETS_WARNING.sub("", DANGLING_CR.sub("", REDRAWN.sub("", output["text"])))
    return [o for o in tidy if o.get("output_type") != "stream" or o["text"]]


def stage_notebook(executed: Path, staged: Path) -> None:
    """Copy an executed notebook into the book, showing each progress bar once, in its final state."""
    import nbformat

    notebook = nbformat.read(executed, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = tidy_streams(cell.outputs)
    nbformat.write(notebook, staged)


def stage_book(root: Path, notebooks: dict[str, Path], stage: Path) -> Path:
    """Return ``stage`` refilled with _config.yml, _toc.yml, book/ and the executed notebooks (name -> .ipynb)."""
    if stage.exists():
        shutil.rmtree(stage)
    (stage / "notebooks").mkdir(parents=True)
    shutil.copy2(root / "_toc.yml", stage / "_toc.yml")
    if (root / "book").is_dir():
        shutil.copytree(root / "book", stage / "book")
    if (root / "lib").is_dir():  # method pages include library code (literalinclude ../lib/corekit/…)
        shutil.copytree(root / "lib", stage / "lib", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name, executed in notebooks.items():
        stage_notebook(executed, stage / "notebooks" / f"{name}.ipynb")
    config = staged_config(yaml.safe_load((root / "_config.yml").read_text()))
    (stage / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True))
    return stage


def jupyter_book_command() -> str:
    """Return the ``jupyter-book`` executable beside this Python, else the one on PATH."""
    found = shutil.which("jupyter-book", path=str(Path(sys.executable).parent)) or shutil.which("jupyter-book")
    if not found:
        raise CorekitError("jupyter-book is not installed; pip install -e '.[book]'")
    return found


def build_html(stage: Path, out: Path) -> Path:
    """Return the HTML folder that ``jupyter-book build`` wrote for ``stage``; warnings are errors."""
    command = [jupyter_book_command(), "build", str(stage), "--path-output", str(out),
               "-W", "-n", "--keep-going", "--all"]
    print("$ " + " ".join(command), flush=True)
    code = subprocess.run(command).returncode
    if code:
        raise ExecutionFailed(f"jupyter-book build failed with exit status {code} (warnings are errors: -W)")
    return out / "_build" / "html"
