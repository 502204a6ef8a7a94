"""Throwaway book repositories for the command-line and book tests: tiny notebooks that run in seconds."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import jupytext
import yaml

from corekit.runs import cli, notebooks

REPO = Path(__file__).resolve().parents[1]

TINY_NOTEBOOK = '''\
# %% [markdown]
# # {title}
#
# A stand-in notebook for the tests: it draws `figures` plots and records three claims.

# %% tags=["parameters"]
scale = 2.0  # multiplies the measured value
matrix = [[0.5, 0.5], [0.25, 0.75]]  # any nested list
fail = False  # raise in a cell
write_metrics = True  # write the metrics file
figures = {figures}  # number of plots
output_dir = ""  # path; where the metrics file and figures go (corekit run sets it)

# %%
import matplotlib.pyplot as plt

from corekit import plots
from corekit.runs.claims import Claims
from corekit.verdicts import Null, at_least, at_most

claims = Claims("{name}")
figs = plots.Figures(output_dir, "{name}")
if fail:
    raise RuntimeError("asked to fail")

# %%
for k in range(figures):
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1, 2], [0, k + 1, 2 * k + 1], marker="o")
    ax.set_title(f"figure {{k}}")
    figs.save(fig, f"figure_{{k}}")
    plt.show()

# %% [markdown]
# ## Claims

# %%
claims.check("doubled", 2 * scale, at_least(scale), kind="paper", statistic="2 × scale", paper=4.0,
             null=Null("scale / 2", scale / 2))
claims.check("negative", scale, at_most(0), kind="paper", statistic="scale", null=Null("minus one", -1.0))
claims.report("figures_dir", str(figs.folder), kind="paper", statistic="where the figures went")
if write_metrics:
    claims.write()
claims.table()
'''


def tiny_notebook(name: str, figures: int = 1, title: str = "Tiny notebook") -> str:
    """Return the py:percent source of a tiny notebook called ``name``."""
    return TINY_NOTEBOOK.format(name=name, figures=figures, title=title)


def write_notebook(root: Path, name: str, source: str, paired: bool = True) -> Path:
    """Return ``root/notebooks/NAME.py`` written from ``source``, with its paired .ipynb if ``paired``."""
    py = root / "notebooks" / f"{name}.py"
    py.parent.mkdir(parents=True, exist_ok=True)
    py.write_text(source)
    if paired:
        jupytext.write(jupytext.read(py), py.with_suffix(".ipynb"))
    return py


def write_paper_profile(root: Path, name: str, values: dict) -> Path:
    """Return the written ``notebooks/params/paper/NAME.yaml``."""
    path = root / "notebooks" / "params" / "paper" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(values))
    return path


def record_name(name: str) -> str:
    """Return the file name of the record of what the runs of ``name`` wrote into their output folder."""
    return f".{name}.written-by-corekit.json"


def unrecorded(files: dict[str, bytes], name: str) -> dict[str, bytes]:
    """Return an output folder's ``files`` (path -> content) without the record of what the runs of ``name`` wrote."""
    return {path: data for path, data in files.items() if path != record_name(name)}


def make_repo(root: Path, notebooks: dict[str, str]) -> Path:
    """Return ``root`` made a minimal book (``_toc.yml``, ``notebooks/``) holding ``notebooks``."""
    root.mkdir(parents=True, exist_ok=True)
    toc = {"format": "jb-book", "root": "intro", "chapters": [{"file": f"notebooks/{n}"} for n in notebooks]}
    (root / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False))
    (root / "intro.md").write_text("# Tiny book\n")
    for name, source in notebooks.items():
        write_notebook(root, name, source)
    return root


def corekit(*args: str, root: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Return the finished ``python -m corekit ARGS`` run on the book at ``root`` (text output captured)."""
    env = dict(os.environ)
    if root is not None:
        env["COREKIT_ROOT"] = str(root)
    return subprocess.run([sys.executable, "-m", "corekit", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def run_in_process(capsys, monkeypatch, root: Path, *args: str) -> tuple[int, str, str]:
    """Return (exit status, stdout, stderr) of ``corekit ARGS`` run in this process on the book at ``root``."""

    monkeypatch.setenv(notebooks.ROOT_ENV, str(root))
    try:
        code = cli.main(list(args))
    except SystemExit as err:                  # argparse
        code = err.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def start_run(repo: Path, name: str, out: Path, *args: str, ready) -> subprocess.Popen:
    """Return a running `corekit run NAME --out OUT ARGS` once ``ready(staged .ipynb path)`` holds (within 120 s)."""
    import time

    env = {k: v for k, v in os.environ.items() if not k.startswith("COREKIT_")} | {"COREKIT_ROOT": str(repo)}
    proc = subprocess.Popen([sys.executable, "-m", "corekit", "run", name, "--out", str(out), *args],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:                       # papermill saves the notebook after each output
        staged = list(out.glob(f".{name}.running-*/{name}.ipynb"))
        if staged and ready(staged[0]):
            return proc
        time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"the run never reached its sleeping cell: {proc.communicate()}")


#: An absolute path in published text: a ``/`` not preceded by a word character, ``.``, ``:``, ``/`` or ``<`` (so no
#: URL, closing tag or ratio), then at least two components; or a ``~`` home folder.
ABSOLUTE = re.compile(r"(?<![\w.:/<~])/(?:[\w.+@-]+/)+[\w.+@-]*|(?<![\w.:/<])~[\w.-]*/")


#: A MyST role in prose, e.g. {doc}`/book/two_lenses` (a link to a page of the book, which may start with /).
MYST_ROLE = re.compile(r"\{\w+\}`[^`]*`")


def _strings(value):
    """Yield every string inside a JSON value, skipping image data (base64 is full of slashes)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not (isinstance(key, str) and key.startswith("image/")):
                yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


def absolute_paths(folder: Path, html_text=None, skip: tuple[str, ...] = ("_static",)) -> list[str]:
    """Return "file: path" for every absolute path in the JSON, notebook and text files under ``folder`` (for HTML,
    in its visible text, as ``html_text(path)`` gives it), outside its subfolders ``skip`` (the theme's assets)."""
    import json

    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if path.relative_to(folder).parts[0] in skip:
            continue
        if path.suffix in (".json", ".ipynb"):
            texts = list(_strings(json.loads(path.read_text(encoding="utf-8"))))
        elif path.suffix == ".html" and html_text is not None:
            texts = [html_text(path)]
        elif path.suffix in (".md", ".txt", ".py", ".yml", ".yaml"):
            texts = [path.read_text(encoding="utf-8")]
        else:
            continue
        texts = [MYST_ROLE.sub("", text) for text in texts]              # {doc}`/book/page`: a link, not a path
        found += [f"{path.relative_to(folder)}: {m.group(0)}" for text in texts for m in ABSOLUTE.finditer(text)]
    return found


def one_line(err: str, *parts: str) -> str:
    """Return ``err`` after asserting that it is one line ``corekit: error: ...`` holding every one of ``parts``."""
    assert err.count("\n") == 1 and err.startswith("corekit: error: ") and "Traceback" not in err, err
    for part in parts:
        assert part in err, err
    return err


def refused(capsys, monkeypatch, root: Path, *args: str) -> str:
    """Return the one error line of ``corekit ARGS`` on ``root``, after asserting exit status 2."""
    code, _, err = run_in_process(capsys, monkeypatch, root, *args)
    assert code == 2, err
    return one_line(err)
