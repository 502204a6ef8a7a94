"""Every entry point gets the same checks and writes only where asked: plain papermill, the notebook's own
check (one line, before any work), ``output_dir``, and the sizes only a notebook can check."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from test_tables import Cells
from tinyrepo import REPO, make_repo, run_in_process, tiny_notebook

from corekit.runs import paramspec
from corekit.runs.claims import Claims

TINY = "00_tiny"
PAPERMILL = [sys.executable, "-m", "papermill", "-k", "python3", "-l", "python", "--no-progress-bar"]


def papermill(notebook: Path, executed: Path, *args: str, cwd: Path, root: Path | None = None) -> subprocess.CompletedProcess:
    """Return the finished plain ``papermill NOTEBOOK EXECUTED ARGS`` run from ``cwd`` (no corekit involved); ``root``
    names a book outside this checkout (``$COREKIT_ROOT``), where the notebook finds its parameters cell."""
    env = {k: v for k, v in os.environ.items() if k != "COREKIT_ROOT"} | ({"COREKIT_ROOT": str(root)} if root else {})
    return subprocess.run([*PAPERMILL, str(notebook), str(executed), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600, env=env)


def files_under(folder: Path) -> set[str]:
    """Return every file below ``folder``, as paths relative to it."""
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def tiny_repo(tmp_path) -> Path:
    return make_repo(tmp_path / "book", {TINY: tiny_notebook(TINY, figures=2)})


@pytest.mark.notebook
@pytest.mark.parametrize("cwd", ["root", "notebooks"])
def test_plain_papermill_writes_nothing_into_the_sources(tiny_repo, cwd):
    before = files_under(tiny_repo)
    where = tiny_repo if cwd == "root" else tiny_repo / "notebooks"
    (tiny_repo / "out").mkdir()                                  # papermill writes into an existing folder only
    done = papermill(tiny_repo / "notebooks" / f"{TINY}.ipynb", tiny_repo / "out" / "x.ipynb", "-p", "scale", "3",
                     cwd=where)
    assert done.returncode == 0, done.stderr[-2000:]
    assert files_under(tiny_repo) - before == {"out/x.ipynb"}
    executed = nbformat.read(tiny_repo / "out" / "x.ipynb", as_version=4)
    shown = "".join(str(o.get("data", "")) for c in executed.cells if c.cell_type == "code" for o in c.outputs)
    assert "doubled" in shown and "image/png" in shown         # the claims table and the figures are in the notebook


@pytest.mark.notebook
def test_output_dir_receives_the_metrics_and_figures(tiny_repo, tmp_path):
    before = files_under(tiny_repo)
    done = papermill(tiny_repo / "notebooks" / f"{TINY}.ipynb", tmp_path / "x.ipynb", "-p", "output_dir", "run",
                     cwd=tmp_path, root=tiny_repo)
    assert done.returncode == 0, done.stderr[-2000:]
    assert files_under(tmp_path / "run") == {f"{TINY}.metrics.json", f"figures/{TINY}/figure_0.png",
                                             f"figures/{TINY}/figure_1.png"}
    assert files_under(tiny_repo) == before
    assert '"output_dir"' not in (tmp_path / "run" / f"{TINY}.metrics.json").read_text()   # a place, not a parameter


def test_output_dir_is_set_by_corekit_run_only(tiny_repo, tmp_path, capsys, monkeypatch, no_kernel):
    code, _, err = run_in_process(capsys, monkeypatch, tiny_repo, "run", TINY, "-p", "output_dir", str(tmp_path))
    assert code == 2
    assert err.strip().count("\n") == 0 and "output_dir is set by corekit run" in err and "--out" in err


def demo_notebook(folder: Path, parameters: str) -> None:
    """Write ``folder/notebooks/99_demo.py`` with the given parameters cell."""
    (folder / "notebooks").mkdir()
    (folder / "notebooks" / "99_demo.py").write_text(f'# %% tags=["parameters"]\n{parameters}\n')


@pytest.mark.parametrize("value, nearest", [(9, "7, 11"), (4, "3, 5"), (2**61, None)])
def test_the_notebook_refuses_a_non_prime_itself(tmp_path, monkeypatch, value, nearest):
    demo_notebook(tmp_path, 'p = 7  # range: [2, inf); a prime\ndevice = "auto"')
    monkeypatch.delenv("COREKIT_ROOT", raising=False)
    monkeypatch.chdir(tmp_path / "notebooks")
    with pytest.raises(paramspec.ParameterError) as caught:
        Claims("99_demo", namespace={"p": value, "device": "auto"})
    message = str(caught.value)
    assert message.startswith("99_demo: parameter 'p': expected a prime, got ")
    if nearest:
        assert f"nearest primes: {nearest}" in message
    assert caught.value._render_traceback_() == [f"ParameterError: {message}"]      # IPython shows this one line


@pytest.mark.parametrize("namespace, name", [({"p": 7, "device": "mps"}, "device"), ({"p": 2**64 + 1, "device": "cpu"}, "p")])
def test_the_notebook_refuses_devices_and_integers_it_cannot_use(tmp_path, monkeypatch, namespace, name):
    demo_notebook(tmp_path, 'p = 7  # range: [2, inf)\ndevice = "auto"')
    monkeypatch.delenv("COREKIT_ROOT", raising=False)
    monkeypatch.chdir(tmp_path / "notebooks")
    if name == "device":
        pytest.importorskip("torch")
        import torch
        if torch.backends.mps.is_available():
            pytest.skip("this machine has mps")
    with pytest.raises(paramspec.ParameterError, match=f"parameter '{name}'"):
        Claims("99_demo", namespace=namespace)


def test_require_names_the_parameter_its_value_and_what_is_accepted():
    claims = Claims("nb", parameters={})
    claims.require(True, "batch_size", "at most 10", 5)
    with pytest.raises(paramspec.ParameterError) as caught:
        claims.require(False, "batch_size", "at most n_train = 10 (a larger batch trains 0 steps)", 64)
    assert str(caught.value) == ("nb: parameter 'batch_size': expected at most n_train = 10 (a larger batch trains "
                                 "0 steps), got 64")


def executed_cells(path: Path) -> int:
    """Return how many code cells of an executed notebook ran."""
    notebook = nbformat.read(path, as_version=4)
    return sum(1 for c in notebook.cells if c.cell_type == "code" and c.execution_count)


@pytest.mark.notebook
@pytest.mark.parametrize("notebook, args, line", [
    ("05_entk_mlp_modular", ["-p", "lr", "-0.05"],
     "ParameterError: 05_entk_mlp_modular: parameter 'lr': expected a number > 0, got -0.05 (out of range)"),
    ("05_entk_mlp_modular", ["-p", "p", "33"],
     "ParameterError: 05_entk_mlp_modular: parameter 'p': expected a prime, got 33 (33 is not a prime; "
     "nearest primes: 31, 37)"),
    ("01_markov_cores", ["-p", "batch_size", "100000"],
     "ParameterError: 01_markov_cores: parameter 'batch_size': expected at most n_train = 2000 (a larger batch "
     "trains 0 steps), got 100000"),
])
def test_papermill_stops_a_bad_value_in_the_notebooks_first_cells(tmp_path, notebook, args, line):
    done = papermill(REPO / "notebooks" / f"{notebook}.ipynb", tmp_path / "x.ipynb", *args, cwd=tmp_path)
    assert done.returncode != 0
    assert line in done.stdout + done.stderr
    assert executed_cells(tmp_path / "x.ipynb") <= 3                # parameters, injected parameters, the check


@pytest.mark.notebook
def test_chapter_01_takes_a_chain_of_any_size_alone(tmp_path):
    """A five-state chain, the second chain left at its four-state default: each is analysed at its own size."""
    five = "[[0.6,0.4,0,0,0],[0,0.6,0.4,0,0],[0,0,0.6,0.4,0],[0,0,0,0.6,0.4],[0.4,0,0,0,0.6]]"
    done = papermill(REPO / "notebooks" / "01_markov_cores.ipynb", tmp_path / "x.ipynb", "-y",
                     f"{{transition: {five}, seeds: [0, 1], seq_len: 8, n_train: 64, n_test: 64, epochs: 1, "
                     f"batch_size: 32, d_model: 16, d_mlp: 32}}", cwd=tmp_path)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    chain_table = Cells()
    chain_table.feed(next(o["data"]["text/html"] for c in nbformat.read(tmp_path / "x.ipynb", as_version=4).cells
                          if c.cell_type == "code" for o in c.outputs
                          if "Each chain and what" in o.get("data", {}).get("text/html", "")))
    header, *rows = chain_table.rows
    cap = {row[0]: row[header.index("cap K − 1")] for row in rows}
    assert cap == {"paper": "4", "deficient": "3"}                   # five states and the default four
