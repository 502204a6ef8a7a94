"""Every profile of every notebook passes the notebook's own checks, as a run meets them: the parameters cell, the
profile's values injected the way papermill injects them, then the first cell after the parameters up to and including
its ``setup("NN_name", globals())`` (imports, every value against its declaration, the chapter's rules of
:mod:`corekit.runs.checks`, the device) runs and raises nothing. A check that refuses a profile's own value would stop
that published run in its first cell. The rest of that cell (a model loaded, a task built) is not run: no case needs a
GPU, the network or a language model."""
import ast

import jupytext
import matplotlib
import pytest
import torch
from papermill.translators import translate_parameters
from threadpoolctl import threadpool_limits
from tinyrepo import REPO

from corekit.runs import notebooks, parameters
from corekit.runs.paramspec import OUTPUT_DIR
from corekit.verdicts import to_jsonable

NAMES = notebooks.notebook_names(REPO)
CASES = [(name, profile) for name in NAMES for profile in notebooks.PROFILES
         if profile == "quick" or notebooks.Notebook(REPO, name).profile_file(profile).is_file()]


def _cells(name: str) -> tuple[str, str]:
    """Return the notebook's parameters cell and its next code cell cut after the ``setup(...)`` statement; fail when
    the next cell does not call setup (its checks would then run nowhere this test can see)."""
    code = [c for c in jupytext.read(REPO / "notebooks" / f"{name}.py").cells if c.cell_type == "code"]
    assert "parameters" in code[0].metadata.get("tags", []), f"{name}: the first code cell is not tagged 'parameters'"
    source = code[1].source
    calls = [node for node in ast.parse(source).body
             if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
             and getattr(node.value.func, "id", None) == "setup"]
    assert calls, f'{name}: the cell after the parameters cell has no `... = setup("{name}", globals())` statement'
    lines = source.splitlines()
    return code[0].source, "\n".join(lines[:calls[0].end_lineno])


def test_every_notebook_has_cases():
    """Each notebook is tested at least on its quick profile, and there is a notebook to test."""
    assert NAMES and {name for name, _ in CASES} == set(NAMES)


@pytest.mark.parametrize("name, profile", CASES, ids=[f"{n}-{p}" for n, p in CASES])
def test_profile_passes_the_notebooks_checks(name, profile, tmp_path, monkeypatch):
    """The profile's values, injected after the parameters cell, pass the checks of the notebook's first cell (the
    Hugging Face hub taken as reachable: 04's paper profile names hub models, refused offline before any work)."""
    from corekit import inputs
    monkeypatch.setattr(inputs, "hub_reachable", lambda timeout=3.0: True)
    defaults, checks_cell = _cells(name)
    values = {**parameters.effective_parameters(notebooks.Notebook(REPO, name), profile, {}),
              OUTPUT_DIR: str(tmp_path / "out")}                     # what `corekit run` passes to papermill
    injected = translate_parameters("python3", "python", values, "Parameters")
    assert injected.startswith(parameters.INJECTED_HEADER)
    namespace: dict = {"__name__": "__main__", "In": ["", defaults, injected, checks_cell]}
    monkeypatch.chdir(tmp_path)
    threads = torch.get_num_threads()
    try:
        with matplotlib.rc_context(), threadpool_limits(limits=None):  # setup(): the figure style, the BLAS threads
            exec(compile(defaults, f"{name}.py (parameters cell)", "exec"), namespace)
            exec(compile(injected, f"{name}.py (injected parameters)", "exec"), namespace)
            exec(compile(checks_cell, f"{name}.py (checks cell)", "exec"), namespace)  # ParameterError on a refusal
    finally:
        torch.set_num_threads(threads)                               # setup() sets the thread count
    recorded = namespace["claims"].parameters
    for key, value in values.items():
        if key not in (OUTPUT_DIR, "device"):                        # the folder is not recorded; the device resolved
            assert recorded[key] == to_jsonable(value), f"{name} ({profile}): {key} recorded as {recorded[key]!r}"
