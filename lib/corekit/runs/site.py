"""Staging executed notebooks into a Jupyter Book source folder, and building its static HTML."""
from __future__ import annotations

import contextlib
import copy
import fnmatch
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import yaml

from corekit.runs import owned
from corekit.runs.errors import CorekitError, ExecutionFailed, Problems
from corekit.runs.portable import portable_notebook

REDRAWN = re.compile(r"[^\n]*\r(?=[^\n])")  # text a later \r on the same line overwrote
DANGLING_CR = re.compile(r"\r+(?=\n|$)")
#: An environment's warning, not the run's: tqdm.auto (imported by transformers) finds no Jupyter widgets.
TQDM_WIDGETS_WARNING = re.compile(r"^.*TqdmWarning: IProgress not found\..*\n(?:[ \t]+from \.autonotebook .*\n)?", re.M)
#: A progress bar's last state (``desc: 40%|████  | 3200/8000 [1:05:58<1:38:57, 1.24s/it, …]``): a loop's residue,
#: frozen where the loop stopped; the run record gives the run's time.
PROGRESS_BAR = re.compile(r"^[^\n]*\d+%\|[^\n]*\|\s*[\d.]+[kM]?/[\d.]+[kM]?\s*\[[^\n]*\][ \t]*(?:\n|$)", re.M)


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
    """Return cell outputs with consecutive streams merged, progress bars (every redraw and the last state) and
    tqdm's missing-widgets warning dropped."""
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
            text = TQDM_WIDGETS_WARNING.sub("", DANGLING_CR.sub("", REDRAWN.sub("", output["text"])))
            output["text"] = PROGRESS_BAR.sub("", text) if output.get("name") == "stderr" else text
    return [o for o in tidy if o.get("output_type") != "stream" or o["text"]]


#: A cell of a notebook's result table (``corekit.tables``) and, inside it, a long unbroken token (a module path such as
#: ``model.layers.16.mlp.down_proj``) that would widen its column past the page.
VALUES_CELL = re.compile(r"(<td>)([^<]*)(</td>)")
LONG_TOKEN = re.compile(r"\S{16,}")


def breakable_cells(table_html: str) -> str:
    """Return a result table's HTML with a break opportunity (``<wbr>``) after each ``.``, ``_`` or ``/`` of the long
    tokens in its cells, so a narrow column wraps a module path instead of pushing the table past its box."""
    def cell(match: re.Match) -> str:
        text = LONG_TOKEN.sub(lambda t: re.sub(r"([._/])(?=\w)", r"\1<wbr>", t.group(0)), match.group(2))
        return match.group(1) + text + match.group(3)
    return VALUES_CELL.sub(cell, table_html) if "corekit-values" in table_html else table_html


#: A result table with more rows than this scrolls in a box of its own (MyST-NB's ``scroll-output``).
SCROLL_ROWS = 30


def scroll_long_tables(cell) -> None:
    """Tag ``cell`` ``scroll-output`` when one of its HTML outputs is a table of more than :data:`SCROLL_ROWS` rows (a
    chapter's 462 stitched pairs stay readable without making the page tens of thousands of pixels tall)."""
    rows = max((output["data"]["text/html"].count("<tr>") for output in cell.get("outputs", [])
                if isinstance(output.get("data", {}).get("text/html"), str)), default=0)
    tags = cell.metadata.setdefault("tags", [])
    if rows > SCROLL_ROWS and "scroll-output" not in tags:
        tags.append("scroll-output")


#: Tags of the cells whose source a reader does not need open: the defaults and papermill's injected values (the run
#: record lists what ran) and the claims cell (:func:`fold_bookkeeping`).
FOLDED_TAGS = ("parameters", "injected-parameters")


def fold_bookkeeping(cell) -> None:
    """Tag ``cell`` ``hide-input`` (its source behind a click, its output shown) when it holds the parameters, the
    injected parameters or the claims (the cell that ends with ``claims.table()``)."""
    tags = cell.metadata.setdefault("tags", [])
    if (any(t in tags for t in FOLDED_TAGS) or "claims.table()" in cell.source) and "hide-input" not in tags:
        tags.append("hide-input")


def stage_notebook(executed: Path, staged: Path, root: Path) -> None:
    """Copy an executed notebook into the book, without progress bars (:func:`tidy_streams`), the bookkeeping
    cells' sources folded (:func:`fold_bookkeeping`), and no path of the machine that ran it
    (:func:`corekit.runs.portable.portable_notebook`)."""
    import nbformat

    notebook = nbformat.read(executed, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = tidy_streams(cell.outputs)
            for output in cell.outputs:
                if "text/html" in output.get("data", {}):
                    html = output["data"]["text/html"]
                    output["data"]["text/html"] = breakable_cells("".join(html) if isinstance(html, list) else html)
            scroll_long_tables(cell)
            fold_bookkeeping(cell)
    portable_notebook(notebook, root)
    nbformat.write(notebook, staged)


#: What ``corekit book`` writes into its output folder: the staged sources and what ``jupyter-book build`` writes.
BOOK_FOLDERS = ("source", "_build")
#: The command that makes (and marks) them.
MADE_BY = "corekit book"


def book_problems(out: Path) -> list[str]:
    """Return why ``corekit book`` may not replace its folders in ``out`` (one line each, naming the path): a folder
    there it did not make, or a symbolic link on the way."""
    return [problem for name in BOOK_FOLDERS if (problem := owned.folder_problem(out, out / name, MADE_BY))]


def check_book_out(out: Path) -> None:
    """Raise unless ``corekit book`` may replace its folders in ``out`` (:func:`book_problems`)."""
    problems = book_problems(out)
    if problems:
        raise Problems(problems)


def stage_book(root: Path, notebooks: dict[str, Path], stage: Path) -> Path:
    """Return ``stage`` refilled with _config.yml, _toc.yml, book/ and the executed notebooks (name -> .ipynb); an
    existing ``stage`` is deleted only when an earlier ``corekit book`` made it (its marker), with no link on the way."""
    problem = owned.folder_problem(stage.parent, stage, MADE_BY)
    if problem:
        raise CorekitError(problem)
    if stage.exists():
        owned.remove_tree(stage)
    stage.mkdir(parents=True)
    owned.mark(stage, MADE_BY)
    with marking(stage):
        fill_stage(root, notebooks, stage)
    return stage


@contextlib.contextmanager
def marking(folder: Path) -> Iterator[None]:
    """While entered, ``corekit book`` writes into ``folder`` (which it made); its marker then lists all it holds, also
    when the writing stops midway."""
    try:
        yield
    finally:
        owned.mark(folder, MADE_BY)


def fill_stage(root: Path, notebooks: dict[str, Path], stage: Path) -> None:
    """Write _config.yml, _toc.yml, book/, lib/ and the executed notebooks (name -> .ipynb) into the empty ``stage``."""
    (stage / "notebooks").mkdir()
    shutil.copy2(root / "_toc.yml", stage / "_toc.yml")
    if (root / "book").is_dir():
        shutil.copytree(root / "book", stage / "book")
    if (root / "lib").is_dir():  # method pages include library code (literalinclude ../lib/corekit/…)
        shutil.copytree(root / "lib", stage / "lib", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name, executed in notebooks.items():
        stage_notebook(executed, stage / "notebooks" / f"{name}.ipynb", root)
    config = staged_config(yaml.safe_load((root / "_config.yml").read_text()))
    (stage / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True))


def jupyter_book_command() -> str:
    """Return the ``jupyter-book`` executable beside this Python, else the one on PATH."""
    found = shutil.which("jupyter-book", path=str(Path(sys.executable).parent)) or shutil.which("jupyter-book")
    if not found:
        raise CorekitError("jupyter-book is not installed; pip install -e '.[book]'")
    return found


def build_folder(out: Path) -> Path:
    """Return ``out/_build``, where ``jupyter-book build`` writes, made and marked here unless an earlier ``corekit
    book`` made it; raise when something else is there (the build would overwrite it)."""
    build = out / "_build"
    problem = owned.folder_problem(out, build, MADE_BY)
    if problem:
        raise CorekitError(problem)
    if not build.exists():
        build.mkdir(parents=True)
        owned.mark(build, MADE_BY)
    return build


def build_html(stage: Path, out: Path) -> Path:
    """Return the HTML folder that ``jupyter-book build`` wrote for ``stage``; warnings are errors."""
    build = build_folder(out)
    command = [jupyter_book_command(), "build", str(stage), "--path-output", str(out),
               "-W", "-n", "--keep-going", "--all"]
    print("$ " + " ".join(command), flush=True)
    with marking(stage), marking(build):      # whatever the build adds is listed as made by it
        code = subprocess.run(command).returncode
    if code:
        raise ExecutionFailed(f"jupyter-book build failed with exit status {code} (warnings are errors: -W)")
    return out / "_build" / "html"
