"""Every profile of every notebook passes the notebook's own checks: the cell after the parameters cell (imports,
parameter checks, `claims.require` on sizes, `claims.resolve`) runs with the profile's parameters and raises
nothing. A size check that refuses a profile's own value would stop that published run in its first cells."""
import jupytext
import pytest
from tinyrepo import REPO

from corekit.runs import notebooks, parameters

CASES = [(nb.stem, profile) for nb in sorted((REPO / "notebooks").glob("[0-9][0-9]_*.py"))
         for profile in ("quick", "cpu", "paper")
         if profile == "quick" or notebooks.Notebook(REPO, nb.stem).profile_file(profile).is_file()]


def _cells(name: str) -> tuple[str, str | None]:
    """Return the sources of the notebook's parameters cell and of its checks cell (the next code cell), the latter
    None if it also loads a model (its checks then run only inside a run)."""
    code = [c for c in jupytext.read(REPO / "notebooks" / f"{name}.py").cells if c.cell_type == "code"]
    source = code[1].source
    return code[0].source, source if "claims.resolve" in source and "load(" not in source else None


@pytest.mark.parametrize("name, profile", CASES, ids=[f"{n}-{p}" for n, p in CASES])
def test_profile_passes_the_notebooks_checks(name, profile, tmp_path, monkeypatch):
    defaults, source = _cells(name)
    if source is None:
        pytest.skip(f"{name}'s checks cell loads a model")
    namespace: dict = {}
    exec(defaults, namespace)
    namespace.update(parameters.effective_parameters(notebooks.Notebook(REPO, name), profile, {}), device="cpu")
    monkeypatch.chdir(tmp_path)
    exec(compile(source, f"{name}.py (checks cell)", "exec"), namespace)  # raises ParameterError on a refusal
