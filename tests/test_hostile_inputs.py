"""Hostile inputs (issue 40): every case of the audit that fell short, one test each, named after the case.

Refusals are checked in this process with kernels forbidden (``no_kernel``: the test fails if one starts), on tiny
books or on the book's own notebooks; the cases that need a kernel (plain papermill, the metrics file's mode) run a
tiny notebook, or chapter 05 cut after its first cell.
"""
from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import jupytext
import nbformat
import pytest
from tinyrepo import REPO, make_repo, one_line, refused, run_in_process, tiny_notebook

from corekit.runs import cli, execute, notebooks, publish
from corekit.runs.claims import ClaimsTable
from corekit.verdicts import Claim

NAME = "00_hostile"
SOURCE = '''\
# %% [markdown]
# # A tiny notebook for hostile inputs

# %% tags=["parameters"]
scale = 2.0  # range: (0, inf)
checkpoint_dir = ""  # path; not used
output_dir = ""  # path; where the metrics file goes

# %%
from corekit.runs.claims import Claims

claims = Claims("{name}", dict(scale=scale, output_dir=output_dir))
claims.write()
'''.format(name=NAME)
#: The same, its first cell checking papermill's injected names and output_dir (corekit.runs.parameters).
CHECKED_SOURCE = SOURCE.replace('''from corekit.runs.claims import Claims
''', '''from corekit.runs.parameters import check_namespace
from corekit.runs.claims import Claims

print("checked", sorted(check_namespace("{name}", globals())))
'''.format(name=NAME))
PAPERMILL = [sys.executable, "-m", "papermill", "-k", "python3", "-l", "python", "--no-progress-bar"]


@pytest.fixture
def repo(tmp_path) -> Path:
    """A book holding the one tiny notebook."""
    return make_repo(tmp_path / "book", {NAME: SOURCE})


# --------------------------------------------------------------------------------------------
# Data that can be lost or silently replaced


def record(root: Path, profile: str, commit: str) -> Path:
    """Return ``results/NAME/metrics.json`` written as a published run of ``profile`` at ``commit``."""
    path = root / "results" / NAME / "metrics.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"notebook": NAME, "profile": profile, "source_hash": "0" * 64, "claims": [],
                                "environment": {"commit": commit, "dirty": False}}))
    return path


def fake_execute(while_running=None):
    """Return a stand-in for :func:`corekit.runs.execute.execute` that writes a finished run without a kernel, calling
    ``while_running()`` first (what another shell does meanwhile)."""
    def execute(nb, profile, params, out, cell_timeout=None):
        if while_running:
            while_running()
        out.mkdir(parents=True, exist_ok=True)
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Tiny")]), out / f"{nb.name}.ipynb")
        metrics = {"notebook": nb.name, "parameters": params, "runtime_s": 0.1, "profile": profile,
                   "source_hash": "1" * 64, "claims": []}
        (out / f"{nb.name}.metrics.json").write_text(json.dumps(metrics))
        return metrics
    return execute


def test_publish_refuses_a_larger_run_published_while_this_run_executed(repo, tmp_path, capsys, monkeypatch):
    """U07: the guard is checked again as the run is swapped into results/, not only before the run."""
    record(repo, "quick", "0123456789")
    monkeypatch.setattr(cli, "execute", fake_execute(lambda: record(repo, "paper", "feedfacefe")))
    err = refused(capsys, monkeypatch, repo, "run", NAME, "--publish", "--out", str(tmp_path / "out"))
    one_line(err, "--publish: results/ holds a larger run than a quick-profile one", f"{NAME} (paper profile)",
             "published while this run executed", "--force")
    published = json.loads((repo / "results" / NAME / "metrics.json").read_text())
    assert published["profile"] == "paper" and published["environment"]["commit"] == "feedfacefe"


def test_publishing_waits_for_the_lock_on_results(repo, tmp_path, capsys, monkeypatch):
    """U07: the check and the swap happen under a lock on results/ that every publish takes."""
    record(repo, "quick", "0123456789")
    monkeypatch.setattr(cli, "execute", fake_execute())
    monkeypatch.setenv(notebooks.ROOT_ENV, str(repo))
    codes = []
    held = os.open(repo / "results", os.O_RDONLY)
    fcntl.flock(held, fcntl.LOCK_EX)                     # another publish holds results/
    try:
        worker = threading.Thread(target=lambda: codes.append(cli.main(["run", NAME, "--publish", "--out",
                                                                        str(tmp_path / "out")])))
        worker.start()
        worker.join(3)
        assert worker.is_alive(), "the publish did not wait for the lock on results/"
        assert json.loads((repo / "results" / NAME / "metrics.json").read_text())["source_hash"] == "0" * 64
    finally:
        os.close(held)
    worker.join(60)
    assert codes == [0], capsys.readouterr().err
    assert json.loads((repo / "results" / NAME / "metrics.json").read_text())["source_hash"] == "1" * 64


def edit_code_cell(ipynb: Path, extra: str) -> None:
    """Append ``extra`` to the second code cell of ``ipynb`` (an edit made in Jupyter, not in the .py)."""
    notebook = nbformat.read(ipynb, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    code[1].source += "\n" + extra
    nbformat.write(notebook, ipynb)


def test_an_ipynb_edited_apart_from_its_py_is_refused_before_a_kernel(repo, tmp_path, capsys, monkeypatch,
                                                                        no_kernel):
    """C02: a newer .ipynb whose code differs from the .py's is not run in its place."""
    edit_code_cell(repo / "notebooks" / f"{NAME}.ipynb", 'raise RuntimeError("STALE-IPYNB-CODE")')
    err = refused(capsys, monkeypatch, repo, "run", NAME, "--out", str(tmp_path / "out"))
    one_line(err, f"notebooks/{NAME}.ipynb differs from notebooks/{NAME}.py in code cell 2",
             f"jupytext --sync notebooks/{NAME}.py", f"(now notebooks/{NAME}.ipynb)")


def test_a_py_edited_apart_from_its_ipynb_is_refused_before_a_kernel(repo, tmp_path, capsys, monkeypatch, no_kernel):
    """C02: the other direction; the pair must agree before a run, whichever file was edited."""
    py = repo / "notebooks" / f"{NAME}.py"
    py.write_text(py.read_text().replace("claims.write()", "claims.write()\nprint('edited')"))
    err = refused(capsys, monkeypatch, repo, "run", NAME, "--out", str(tmp_path / "out"))
    one_line(err, f"notebooks/{NAME}.ipynb differs from notebooks/{NAME}.py in code cell 2",
             f"jupytext --sync notebooks/{NAME}.py")


# --------------------------------------------------------------------------------------------
# corekit book --published checks results/ before building

BOOK = "00_tiny"


def png(path: Path) -> None:
    """Write a small valid PNG to ``path``."""
    from PIL import Image

    Image.new("RGB", (8, 8), "white").save(path)


@pytest.fixture
def published(tmp_path, monkeypatch) -> Path:
    """A book of one tiny chapter with a valid published run in results/, whose build fails the test if it starts."""
    root = make_repo(tmp_path / "book", {BOOK: tiny_notebook(BOOK)})
    folder = root / "results" / BOOK
    (folder / "figures").mkdir(parents=True)
    table = ClaimsTable([Claim("doubled", 4.0, "= 4", "pass", paper=4.0)])._repr_markdown_()   # what its kernel showed
    shown = nbformat.v4.new_output("execute_result", {"text/markdown": table, "text/plain": table}, execution_count=1)
    cells = [nbformat.v4.new_markdown_cell("# Tiny"), nbformat.v4.new_code_cell("claims.table()", outputs=[shown])]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), folder / f"{BOOK}.ipynb")
    png(folder / "figures" / "figure_0.png")
    metrics = {"notebook": BOOK, "profile": "quick", "source_hash": "0" * 64, "runtime_s": 1.0,
               "claims": [{"id": "doubled", "paper": 4.0, "measured": 4.0, "target": "= 4", "pass": True}],
               "environment": {"commit": "0123456789", "dirty": False}, "figures": ["figure_0.png"]}
    (folder / "metrics.json").write_text(json.dumps(metrics))

    def no_build(*args, **kwargs):
        raise AssertionError("the book was staged from a published run with a bad file")
    monkeypatch.setattr(publish, "stage_book", no_build)
    return root


def spoil(root: Path, case: str) -> Path:
    """Spoil the published run of BOOK as ``case`` says; return the file the refusal must name."""
    folder = root / "results" / BOOK
    metrics = json.loads((folder / "metrics.json").read_text())
    if case == "garbled_figure":                                     # B02b
        (folder / "figures" / "figure_0.png").write_bytes(os.urandom(2000))
        return folder / "figures" / "figure_0.png"
    if case == "truncated_figure":
        data = (folder / "figures" / "figure_0.png").read_bytes()
        (folder / "figures" / "figure_0.png").write_bytes(data[: len(data) // 2])
        return folder / "figures" / "figure_0.png"
    if case == "missing_figure":
        (folder / "figures" / "figure_0.png").unlink()
        return folder / "figures" / "figure_0.png"
    if case == "truncated_notebook":                                 # B07
        data = (folder / f"{BOOK}.ipynb").read_bytes()
        (folder / f"{BOOK}.ipynb").write_bytes(data[: len(data) // 2])
        return folder / f"{BOOK}.ipynb"
    if case == "empty_claims":                                       # B03
        metrics["claims"] = []
    elif case == "unknown_verdict":
        metrics["claims"][0]["verdict"] = "great"
    elif case == "no_verdict":
        del metrics["claims"][0]["pass"]
    (folder / "metrics.json").write_text(json.dumps(metrics))
    return folder / "metrics.json"


@pytest.mark.parametrize("case", ["garbled_figure", "truncated_figure", "missing_figure", "truncated_notebook",
                                  "empty_claims", "unknown_verdict", "no_verdict"])
def test_book_published_refuses_a_bad_published_file_in_one_line(published, tmp_path, capsys, monkeypatch, case):
    """B02b, B03, B07: every figure decodes, every notebook is valid, the claims carry known verdicts."""
    bad = spoil(published, case)
    err = refused(capsys, monkeypatch, published, "book", "--published", "--out", str(tmp_path / "html"))
    one_line(err, f"corekit: error: {bad}: ")
    if case == "empty_claims":
        assert f"no claims, but notebooks/{BOOK}.py records claims" in err


def test_book_published_names_every_bad_file_on_a_line_of_its_own(published, tmp_path, capsys, monkeypatch):
    bad = [spoil(published, "garbled_figure"), spoil(published, "truncated_notebook"), spoil(published, "empty_claims")]
    code, _, err = run_in_process(capsys, monkeypatch, published, "book", "--published", "--out", str(tmp_path / "h"))
    assert code == 2 and "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 3 and all(line.startswith("corekit: error: ") for line in lines), err
    assert sorted(str(path) for path in bad) == sorted(line.split(": ")[2] for line in lines)


def test_book_published_names_a_broken_profile_with_its_line(published, tmp_path, capsys, monkeypatch):
    """C01d: a profile YAML syntax error no longer crashes the deploy step with a traceback."""
    metrics = json.loads((published / "results" / BOOK / "metrics.json").read_text())
    (published / "results" / BOOK / "metrics.json").write_text(json.dumps({**metrics, "profile": "paper"}))
    profile = published / "notebooks" / "params" / "paper" / f"{BOOK}.yaml"
    profile.parent.mkdir(parents=True)
    profile.write_text("# the paper's settings\nscale: [2\n")
    err = refused(capsys, monkeypatch, published, "book", "--published", "--out", str(tmp_path / "html"))
    one_line(err, f"notebooks/params/paper/{BOOK}.yaml, line 2: ", "while parsing a flow sequence")


def test_the_committed_results_pass_the_published_checks():
    names = [name for name in notebooks.toc_notebooks(REPO) if publish.published_run(REPO, name).exists()]
    publish.check_runs(REPO, {name: publish.published_run(REPO, name) for name in names})


# --------------------------------------------------------------------------------------------
# Values refused before a kernel starts, in one line


@pytest.mark.parametrize("p", ["1000003", "10007"])
def test_a_size_that_cannot_fit_is_refused_with_its_estimate_before_a_kernel(tmp_path, capsys, monkeypatch, no_kernel,
                                                                              p):
    """P05: 05 with p = 1000003 (and 10007, within 64-bit indices but not within any machine's memory)."""
    err = refused(capsys, monkeypatch, REPO, "run", "05_entk_mlp_modular", "-p", "p", p, "--out", str(tmp_path))
    one_line(err, "05_entk_mlp_modular: parameter 'p': expected a size whose run fits in ", f"got {p} ",
             "the run needs at least ", "the kernels of both layers and their sum")
    assert ("beyond 2**63-1" in err) == (p == "1000003")


def test_repeated_seeds_are_refused_before_a_kernel(tmp_path, capsys, monkeypatch, no_kernel):
    """P26: distinct seeds, checked by corekit run rather than in the kernel after 20 s."""
    err = refused(capsys, monkeypatch, REPO, "run", "01_markov_cores", "-p", "seeds", "[0, 0]", "--out", str(tmp_path))
    one_line(err, "01_markov_cores: parameter 'seeds': expected distinct seeds", "got [0, 0]")


def test_a_transition_that_is_not_row_stochastic_is_refused_before_a_kernel(tmp_path, capsys, monkeypatch, no_kernel):
    """P27: row sums checked by corekit run, one line instead of a ValueError traceback from the kernel."""
    err = refused(capsys, monkeypatch, REPO, "run", "01_markov_cores", "-p", "transition", "[[0.5, 0.1], [0.2, 0.2]]",
                  "--out", str(tmp_path))
    one_line(err, "01_markov_cores: parameter 'transition': expected a row-stochastic", "rows [0, 1] sum to [0.6, 0.4]")


CROSS_RULES = [
    ("01_markov_cores", "batch_size", "5000", "expected at most n_train = 2000"),
    ("01_markov_cores", "transition_deficient", "[[1, 0], [0, 1]]", "more than one stationary distribution"),
    ("02_grokking_cores", "fork_epoch", "1600", "expected an epoch inside the run, 0 < fork_epoch < epochs = 1600"),
    ("03_grokking_scaling_law", "seeds", "[0, 1, 2, 2]", "expected distinct seeds"),
    ("03_grokking_scaling_law", "ray_address", "auto", "expected an empty string unless executor is 'ray'"),
    ("04_llm_agreement_axis", "models", "[gemma-3-270m, gemma-3-270m]", "expected a list of models without repeats"),
    ("04_llm_agreement_axis", "n_train", "1000000000", "expected n_train + n_test ≤ 12,000 distinct prompts"),
    ("04_llm_agreement_axis", "n_test", "121", "expected an even number of prompts ≥ 2"),
    ("05_entk_mlp_modular", "top_k", "842", "expected at most p² = 841"),
    ("06_entk_transformer_modular", "extra_seeds", "[2]", "expected seeds not already in seeds = [2, 3]"),
    ("06_entk_transformer_modular", "dynamics_every_epochs", "30", "expected a multiple of log_every_epochs = 20"),
    ("07_entk_gemma_grammar", "top_k", "250", "expected fewer than lanczos_vectors = 250"),
    ("07_entk_gemma_grammar", "dense_tokens", "25", "expected at most context_tokens = 24"),
    ("07_entk_gemma_grammar", "context_tokens", "1000000000", "expected at most 512 (a context must fit inside one story"),
    ("08_two_lenses", "grok_d_model", "66", "expected a multiple of the 4 heads"),
    ("08_two_lenses", "lm_n_test", "201", "expected an even number"),
    ("08_two_lenses", "lm_lanczos_vectors", "10", "expected at least lm_top_k + 8 = 16"),
    ("09_merging_cores", "spawn_epoch", "510", "expected a multiple of log_every_epochs = 20"),
    ("09_merging_cores", "seeds", "[2, 2]", "expected distinct seeds"),
]


@pytest.mark.parametrize("notebook, name, value, message", CROSS_RULES, ids=[f"{n[:2]}-{p}" for n, p, _, _ in CROSS_RULES])
def test_a_cross_parameter_rule_is_refused_before_a_kernel(tmp_path, capsys, monkeypatch, no_kernel, notebook, name,
                                                           value, message):
    """P26/P27's kin: every rule the notebooks' first cells held as claims.require, now checked by corekit run."""
    err = refused(capsys, monkeypatch, REPO, "run", notebook, "-p", name, value, "--out", str(tmp_path))
    one_line(err, f"{notebook}: parameter '{name}': expected ", message)


def test_run_all_refuses_a_cross_parameter_rule_before_any_kernel(tmp_path, capsys, monkeypatch, no_kernel):
    err = refused(capsys, monkeypatch, REPO, "run", "all", "-p", "seeds", "[4, 4, 5, 6]", "--out", str(tmp_path))
    one_line(err, "01_markov_cores: parameter 'seeds': expected distinct seeds")


def first_cells(name: str) -> nbformat.NotebookNode:
    """Return the book's notebook ``name`` cut after its first code cell past the parameters cell."""
    notebook = jupytext.read(REPO / "notebooks" / f"{name}.py")
    code = [i for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"]
    notebook.cells = notebook.cells[: code[1] + 1]
    return notebook


def papermill_first_cells(tmp_path: Path, name: str, *args: str) -> subprocess.CompletedProcess:
    """Return plain ``papermill`` (run from the repository root) of ``name`` cut after its first cell, with ``args``."""
    source = tmp_path / f"{name}.ipynb"
    nbformat.write(first_cells(name), source)
    env = {k: v for k, v in os.environ.items() if k != notebooks.ROOT_ENV}
    return subprocess.run([*PAPERMILL, str(source), str(tmp_path / "x.ipynb"), *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.notebook
def test_papermill_with_a_misspelt_parameter_stops_in_the_first_cell(tmp_path):
    """M08: `papermill 05 ... -p epoch 1` stopped by the notebook, not run with the defaults."""
    done = papermill_first_cells(tmp_path, "05_entk_mlp_modular", "-p", "epoch", "1")
    assert done.returncode != 0
    assert ("ParameterError: 05_entk_mlp_modular: unknown parameter 'epoch' (injected by papermill); valid "
            "parameters: p, width,") in done.stdout + done.stderr


def papermill_tiny(tmp_path: Path, parameters: dict) -> None:
    """Run plain papermill (in this process) on the tiny notebook whose first cell checks its namespace."""
    import papermill

    root = make_repo(tmp_path / "book", {NAME: CHECKED_SOURCE})
    papermill.execute_notebook(str(root / "notebooks" / f"{NAME}.ipynb"), str(tmp_path / "executed.ipynb"),
                               parameters=parameters, cwd=str(root / "notebooks"), kernel_name="python3",
                               language="python", progress_bar=False)


@pytest.mark.notebook
def test_papermill_with_an_output_dir_it_cannot_write_stops_in_the_first_cell(tmp_path):
    """M09: an output_dir that cannot be written is refused in the first cell, before any work."""
    from papermill.exceptions import PapermillExecutionError

    (tmp_path / "a_file").write_text("not a folder")
    with pytest.raises(PapermillExecutionError) as caught:
        papermill_tiny(tmp_path, {"output_dir": str(tmp_path / "a_file" / "out")})
    assert caught.value.ename == "ParameterError"
    assert caught.value.evalue == (f"{NAME}: parameter 'output_dir': expected a folder this run can write into, got "
                                   f"'{tmp_path / 'a_file' / 'out'}' (Not a directory)")


@pytest.mark.notebook
def test_papermill_with_names_the_notebook_does_not_declare_stops_in_the_first_cell(tmp_path):
    """M08: the check reads papermill's injected cell from the kernel and refuses the names the notebook does not
    declare (declared ones pass: every book notebook run through papermill in the other tests injects some)."""
    from papermill.exceptions import PapermillExecutionError

    with pytest.raises(PapermillExecutionError) as caught:
        papermill_tiny(tmp_path, {"scale": 3.0, "scal": 3, "seeds": [0, 1]})
    assert caught.value.ename == "ParameterError"
    assert caught.value.evalue == (f"{NAME}: unknown parameter 'scal', 'seeds' (injected by papermill); valid "
                                   "parameters: scale, checkpoint_dir, output_dir")


@pytest.mark.parametrize("case, text, line, message", [
    ("syntax_error", "scale: [2\n", 1, "while parsing a flow sequence"),                                 # C01
    ("python_tag", 'scale: !!python/object/apply:os.system ["true"]\n', 1, "could not determine a constructor"),  # C01b
    ("duplicate_key", "scale: 3.0\ncheckpoint_dir: x\nscale: 4.0\n", 3, "the key 'scale' is written twice"),  # C01c
])
def test_a_bad_profile_file_is_one_line_with_its_file_and_line(repo, tmp_path, capsys, monkeypatch, no_kernel, case,
                                                               text, line, message):
    profile = repo / "notebooks" / "params" / "paper" / f"{NAME}.yaml"
    profile.parent.mkdir(parents=True)
    profile.write_text(text)
    err = refused(capsys, monkeypatch, repo, "run", NAME, "--profile", "paper", "--out", str(tmp_path / "out"))
    one_line(err, f"notebooks/params/paper/{NAME}.yaml, line {line}: ", message)


def test_an_absurd_cell_timeout_is_one_line(repo, capsys, monkeypatch, no_kernel, tmp_path):
    """R06: --cell-timeout 1e308 overflowed in jupyter_client."""
    err = refused(capsys, monkeypatch, repo, "run", NAME, "--cell-timeout", "1e308", "--out", str(tmp_path))
    one_line(err, "argument --cell-timeout: expected at most 1,000,000,000 seconds", "got '1e308'")


@pytest.mark.parametrize("where", ["--out", "-p"])
def test_a_path_under_an_unknown_home_is_one_line(repo, capsys, monkeypatch, no_kernel, tmp_path, where):
    """N08: `~nosuchuser/x` ended in a RuntimeError traceback."""
    args = ["--out", "~nosuchuser/x"] if where == "--out" else ["-p", "checkpoint_dir", "~nosuchuser/x",
                                                                 "--out", str(tmp_path)]
    err = refused(capsys, monkeypatch, repo, "run", NAME, *args)
    one_line(err, f"{where} {'checkpoint_dir' if where == '-p' else repr('~nosuchuser/x')}: ",
             "cannot expand '~nosuchuser': no such user on this machine")


@pytest.mark.parametrize("exists", [False, True])
def test_a_notebook_path_outside_the_book_is_refused(repo, tmp_path, capsys, monkeypatch, no_kernel, exists):
    """N01: `corekit run ../elsewhere/NAME.ipynb` ran the repository's notebook instead."""
    monkeypatch.chdir(tmp_path)
    if exists:
        (tmp_path / "elsewhere").mkdir()
        nbformat.write(nbformat.v4.new_notebook(), tmp_path / "elsewhere" / f"{NAME}.ipynb")
    err = refused(capsys, monkeypatch, repo, "run", f"elsewhere/{NAME}.ipynb", "--out", str(tmp_path / "out"))
    one_line(err, f"notebook 'elsewhere/{NAME}.ipynb': not a file of this book", f"corekit run {NAME}")
    for name in (NAME, f"{NAME}.py", str(repo / "notebooks" / f"{NAME}.ipynb"), str(repo / "notebooks" / NAME)):
        assert notebooks.get_notebook(repo, name).name == NAME


# --------------------------------------------------------------------------------------------
# Written where it must not be


@pytest.mark.parametrize("folder", ["book", ".git", "book/pages", ".git/objects"])
def test_out_in_the_books_pages_or_git_is_refused(repo, tmp_path, capsys, monkeypatch, no_kernel, folder):
    """R03e, R03f: --out book and --out .git were accepted."""
    err = refused(capsys, monkeypatch, repo, "run", NAME, "--out", str(repo / folder))
    one_line(err, f"--out {repo / folder}: inside {folder.split('/')[0]}/")
    assert not (repo / folder).exists()


def test_out_in_a_folder_git_tracks_is_refused(repo, tmp_path, capsys, monkeypatch, no_kernel):
    """R03e's kin: any folder of the repository that git tracks, not only the ones named."""
    (repo / "scripts").mkdir()
    (repo / "scripts" / "tool.sh").write_text("true\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "scripts/tool.sh"], check=True)
    err = refused(capsys, monkeypatch, repo, "run", NAME, "--out", str(repo / "scripts" / "runs"))
    one_line(err, f"--out {repo / 'scripts' / 'runs'}: inside scripts/, a folder of the repository that git tracks")
    assert cli.checked_out(repo, str(repo / "_build" / "runs"), "quick") == repo / "_build" / "runs"


def test_the_metrics_file_has_the_notebooks_mode(tmp_path):
    """Z01: NAME.metrics.json was created 0600 (a temporary file renamed into place), the notebook 0644."""
    run, final = execute.Outputs(tmp_path / "out" / ".staging", NAME), execute.Outputs(tmp_path / "out", NAME)
    run.folder.mkdir(parents=True)
    run.ipynb.write_text("{}")                            # as papermill writes it: a plain new file
    execute.install(run, final, {"notebook": NAME, "claims": []})
    mode = {path.name: path.stat().st_mode & 0o777 for path in (final.ipynb, final.metrics)}
    assert mode[final.metrics.name] == mode[final.ipynb.name], mode
    assert not list(final.folder.glob(".*.tmp")), "the temporary metrics file was left behind"


# --------------------------------------------------------------------------------------------
# The chapters' checks and the notebooks' first cells


def test_every_profile_passes_its_chapters_check(monkeypatch):
    """No chapter check refuses a profile of the book (the sizes here are lower bounds: they fit this machine) where the
    models it names can be loaded (a reachable Hugging Face hub for 04's paper profile); offline, 04's paper profile is
    refused in one line naming its hub-only models, before a kernel."""
    import functools

    from corekit import inputs
    from corekit.runs import checks, parameters

    monkeypatch.setattr(parameters, "read_parameters", functools.cache(parameters.read_parameters))  # parse each once
    monkeypatch.setattr(inputs, "hub_reachable", lambda timeout=3.0: False)
    monkeypatch.setenv("HF_HUB_CACHE", "/nonexistent-hub-cache")
    nb = notebooks.Notebook(REPO, "04_llm_agreement_axis")
    with pytest.raises(inputs.ParameterError, match="parameter 'models'.*'gpt2'"):
        checks.chapter_check(nb.name)(parameters.resolved_parameters(nb, parameters.effective_parameters(nb, "paper", {})))
    monkeypatch.setattr(inputs, "hub_reachable", lambda timeout=3.0: True)
    for name in notebooks.notebook_names(REPO):
        nb = notebooks.Notebook(REPO, name)
        for profile in notebooks.PROFILES:
            if profile == "quick" or nb.profile_file(profile).is_file():
                check = checks.chapter_check(name)
                assert check is not None, f"{name} has no check_inputs in its chapter module"
                check(parameters.resolved_parameters(nb, parameters.effective_parameters(nb, profile, {})))


def test_every_notebooks_first_cell_calls_its_chapters_check():
    """The rules live in each chapter module's check_inputs; the first cell after the parameters calls them through
    setup(), which runs the chapter's check on the namespace's declared values; no claims.require."""
    import inspect

    from corekit.runs import checks, session

    assert "checks.chapter_check(notebook)" in inspect.getsource(session.setup)
    for name in notebooks.notebook_names(REPO):
        assert checks.chapter_check(name) is not None, name
        source = [c.source for c in jupytext.read(REPO / "notebooks" / f"{name}.py").cells if c.cell_type == "code"][1]
        assert f'= setup("{name}", globals())' in source, name
        assert "claims.require(" not in source, name

