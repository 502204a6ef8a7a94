"""The book as files: its root, its notebooks (``notebooks/NN_name.py`` paired with ``.ipynb``) and ``_toc.yml``."""
from __future__ import annotations

import importlib
import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from corekit.runs.errors import CorekitError
from corekit.runs.paramspec import expand_user

#: Environment variable naming the book's root folder (holding ``_toc.yml`` and ``notebooks/``).
ROOT_ENV = "COREKIT_ROOT"
PROFILES = ("quick", "cpu", "paper")
NOTEBOOK_NAME = re.compile(r"\d\d_\w+")


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
    installed = Path(__file__).resolve().parents[3]  # lib/corekit/runs/notebooks.py in an editable install
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

    @property
    def declared(self) -> dict:
        """What the chapter declares about itself in the ``corekit`` entry of its header's notebook metadata:
        ``headline_figure`` (a figure's name) with ``headline_caption``, and ``own_hypotheses`` (true for a chapter that
        tests this book's hypotheses, not a paper's); empty when the header declares nothing."""
        lines = self.py.read_text().splitlines() if self.py.is_file() else []
        if not lines or lines[0].strip() != "# ---" or "# ---" not in (line.strip() for line in lines[1:]):
            return {}
        end = next(i for i, line in enumerate(lines[1:], 1) if line.strip() == "# ---")
        header = "\n".join(line[2:] if line.startswith("# ") else line.lstrip("#") for line in lines[1:end])
        try:
            metadata = yaml.safe_load(header) or {}
        except yaml.YAMLError as err:
            raise CorekitError(f"{self.py.name}: its header is not YAML ({err})") from None
        corekit = (metadata.get("jupyter") or {}).get("corekit") if isinstance(metadata, dict) else None
        return dict(corekit) if isinstance(corekit, dict) else {}

    def profile_file(self, profile: str) -> Path:
        """Return the parameters file of ``profile`` (cpu or paper): ``notebooks/params/PROFILE/NAME.yaml``."""
        return self.folder / "params" / profile / f"{self.name}.yaml"


def notebook_names(root: Path) -> list[str]:
    """Return the names of the book's notebooks (``notebooks/NN_name.py``) in order."""
    return sorted(p.stem for p in (root / "notebooks").glob("*.py") if NOTEBOOK_NAME.fullmatch(p.stem))


def get_notebook(root: Path, name: str) -> Notebook:
    """Return the notebook called ``name``: its name, its .py or .ipynb file name, or a path to one of its files in the
    book's notebooks/ (a path elsewhere names another copy, which ``corekit`` does not run)."""
    path = Path(name)
    stem = path.stem if name.endswith((".py", ".ipynb")) else path.name
    names = notebook_names(root)
    if stem not in names:
        valid = ", ".join(names) or "(none: notebooks/ holds no NN_name.py)"
        raise CorekitError(f"unknown notebook {name!r}; valid notebooks: {valid}, or 'all'")
    nb = Notebook(root, stem)
    if len(path.parts) > 1:
        try:
            target = expand_user(name).resolve()
        except ValueError as err:
            raise CorekitError(f"notebook {name!r}: {err}") from None
        if target not in {p.resolve() for p in (nb.py, nb.ipynb, nb.folder / stem)}:
            raise CorekitError(f"notebook {name!r}: not a file of this book (its notebooks are {nb.folder}/NN_name.py); "
                               f"to run the book's own, name it: corekit run {stem}")
    return nb


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


def chapter_module(notebook: str) -> ModuleType | None:
    """Return notebook ``NN_NAME``'s chapter module ``corekit.chapters.NAME`` (imported), None when it has none."""
    name = notebook.split("_", 1)[1] if notebook[:2].isdigit() and "_" in notebook else notebook
    if importlib.util.find_spec("corekit.chapters") is None or \
            importlib.util.find_spec(f"corekit.chapters.{name}") is None:
        return None
    return importlib.import_module(f"corekit.chapters.{name}")
