"""Every notebook's .py (the source) and paired .ipynb agree; parameters and paper profiles are well formed."""
from __future__ import annotations

import ast

import jupytext
import nbformat
import pytest
import yaml
from tinyrepo import REPO

from corekit.runs import notebooks, parameters

NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.py"))


def cells(notebook) -> list[tuple[str, str]]:
    """Return the (cell type, source) of every cell."""
    return [(cell.cell_type, cell.source) for cell in notebook.cells]


@pytest.mark.parametrize("py", NOTEBOOKS, ids=lambda p: p.stem)
def test_paired_ipynb_is_in_sync(py):
    ipynb = py.with_suffix(".ipynb")
    assert ipynb.is_file(), f"{ipynb.name} is missing: run `jupytext --sync {py.relative_to(REPO)}`"
    assert cells(nbformat.read(ipynb, as_version=4)) == cells(jupytext.read(py)), (
        f"{ipynb.name} differs from {py.name}: run `jupytext --sync {py.relative_to(REPO)}`")


@pytest.mark.parametrize("py", NOTEBOOKS, ids=lambda p: p.stem)
def test_parameters_cell_holds_plain_literals(py):
    code = [cell for cell in jupytext.read(py).cells if cell.cell_type == "code"]
    assert code and "parameters" in code[0].metadata.get("tags", []), (
        f"{py.name}: the first code cell must be tagged parameters (# %% tags=[\"parameters\"])")
    for node in ast.parse(code[0].source).body:
        assert isinstance(node, (ast.Assign, ast.AnnAssign)), (
            f"{py.name}: the parameters cell may only assign literals, found {ast.unparse(node)!r}")
        ast.literal_eval(node.value)  # raises on anything but a plain literal


@pytest.mark.parametrize("py", NOTEBOOKS, ids=lambda p: p.stem)
def test_paper_profile_sets_known_parameters(py):
    profile = REPO / "notebooks" / "params" / "paper" / f"{py.stem}.yaml"
    assert profile.is_file(), f"{py.stem} has no paper profile {profile.relative_to(REPO)}"
    values = yaml.safe_load(profile.read_text())
    assert isinstance(values, dict) and values, f"{profile.name} must map parameter names to values"
    declared = parameters.read_parameters(notebooks.Notebook(REPO, py.stem))
    unknown = sorted(set(values) - set(declared))
    assert not unknown, f"{profile.name} sets unknown parameters {unknown}; valid: {sorted(declared)}"


def test_every_toc_notebook_is_in_notebooks():
    names = notebooks.notebook_names(REPO)
    listed = [f.split("/", 1)[1] for f in notebooks.toc_files(REPO) if f.startswith("notebooks/")]
    if not NOTEBOOKS:
        pytest.skip("notebooks/ holds no notebook yet")
    assert set(listed) <= set(names), f"_toc.yml lists notebooks without a .py: {sorted(set(listed) - set(names))}"


@pytest.mark.parametrize("py", NOTEBOOKS, ids=lambda p: p.stem)
def test_papermill_infers_a_type_for_every_parameter(py):
    """`papermill --help-notebook` shows int / float / list[...] / str / bool for each parameter (annotations in the
    parameters cell), never "Unknown type"."""
    import papermill

    inferred = papermill.inspect_notebook(str(py.with_suffix(".ipynb")))
    untyped = [name for name, p in inferred.items() if p["inferred_type_name"] in ("None", "", None)]
    assert inferred and not untyped, f"{py.name}: parameters without a type: {untyped}"
