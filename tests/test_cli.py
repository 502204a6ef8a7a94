"""`corekit run` / `corekit list` on a throwaway book with a tiny notebook (seconds per execution)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest
import yaml
from tinyrepo import corekit, make_repo, run_in_process, tiny_notebook, write_notebook, write_paper_profile

from corekit.runs import errors, notebooks, parameters, site, source_hash

# Every test here runs the command line on a throwaway book, most of them executing a notebook.
pytestmark = pytest.mark.notebook

TINY = "00_tiny"
MATRIX = [[0.1, 0.9], [1, 0]]


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """A book with the single notebook 00_tiny (paired .ipynb, no paper profile)."""
    return make_repo(tmp_path_factory.mktemp("book"), {TINY: tiny_notebook(TINY)})


@pytest.fixture(scope="module")
def override_run(repo, tmp_path_factory):
    """`corekit run 00_tiny` with two -p overrides, one a nested list: (process, output folder)."""
    out = tmp_path_factory.mktemp("out")
    done = corekit("run", TINY, "-p", "scale", "3", "-p", "matrix", json.dumps(MATRIX), "--out", str(out),
                   root=repo)
    assert done.returncode == 0, done.stderr
    return done, out


def load_metrics(out, name=TINY):
    """Return the metrics file of ``name`` in ``out``."""
    return json.loads((out / f"{name}.metrics.json").read_text())


def test_run_writes_executed_notebook_and_metrics_with_overrides(override_run):
    _, out = override_run
    executed = nbformat.read(out / f"{TINY}.ipynb", as_version=4)
    injected = [c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and "scale = 3" in injected[0].source
    metrics = load_metrics(out)
    assert metrics["notebook"] == TINY
    assert metrics["parameters"]["scale"] == 3
    assert metrics["parameters"]["matrix"] == MATRIX
    assert metrics["runtime_s"] > 0
    assert metrics["profile"] == "quick"
    assert re.fullmatch(r"[0-9a-f]{64}", metrics["source_hash"])


def test_run_points_the_notebook_at_its_figures_folder(override_run):
    _, out = override_run
    claims = {c["id"]: c for c in load_metrics(out)["claims"]}
    figures = Path(claims["figures_dir"]["measured"])           # in the run's private folder, moved on success
    assert figures.parts[-2:] == ("figures", TINY) and figures.parent.parent.parent == out
    assert figures.parent.parent.name.startswith(f".{TINY}.running-") and not figures.exists()


def test_failing_claim_does_not_fail_the_run(override_run):
    done, out = override_run
    claims = {c["id"]: c for c in load_metrics(out)["claims"]}
    assert claims["doubled"]["pass"] is True and claims["doubled"]["measured"] == 6
    assert claims["negative"]["pass"] is False
    assert claims["figures_dir"]["pass"] is None
    assert re.search(r"doubled\s+6\s+pass", done.stdout)
    assert re.search(r"negative\s+3\s+FAIL", done.stdout)
    assert "runtime" in done.stdout


def test_source_hash_depends_on_the_parameters(repo, override_run):
    _, out = override_run
    nb = notebooks.Notebook(repo, TINY)
    assert load_metrics(out)["source_hash"] == source_hash.source_hash(nb, {"scale": 3, "matrix": MATRIX})
    assert source_hash.source_hash(nb, {"scale": 3}) != source_hash.source_hash(nb, {"scale": 4})


def test_failing_cell_fails_the_run_and_keeps_the_partial_notebook(repo, tmp_path):
    done = corekit("run", TINY, "-p", "fail", "true", "--out", str(tmp_path), root=repo)
    assert done.returncode == 1
    assert "RuntimeError" in done.stderr and "asked to fail" in done.stderr
    assert f"partially executed notebook: {tmp_path / (TINY + '.failed.ipynb')}" in done.stderr
    assert (tmp_path / f"{TINY}.failed.ipynb").is_file() and not (tmp_path / f"{TINY}.ipynb").exists()


def test_notebook_without_metrics_fails_the_run(repo, tmp_path):
    done = corekit("run", TINY, "-p", "write_metrics", "false", "-p", "figures", "0", "--out", str(tmp_path),
                   root=repo)
    assert done.returncode == 1
    assert "wrote no metrics file" in done.stderr


def test_unknown_notebook_lists_the_valid_ones(repo):
    done = corekit("run", "99_nope", root=repo)
    assert done.returncode == 2
    assert "unknown notebook '99_nope'; valid notebooks: 00_tiny, or 'all'" in done.stderr
    assert "Traceback" not in done.stderr


def test_unknown_parameter_lists_the_valid_ones(repo):
    done = corekit("run", TINY, "-p", "sacle", "3", root=repo)
    assert done.returncode == 2
    assert "unknown parameter 'sacle' for 00_tiny (from -p)" in done.stderr
    assert "valid parameters: scale, matrix, fail, write_metrics, figures, output_dir" in done.stderr


def test_missing_paper_profile_names_the_file(repo):
    done = corekit("run", TINY, "--profile", "paper", root=repo)
    assert done.returncode == 2
    assert "no paper profile for 00_tiny: notebooks/params/paper/00_tiny.yaml does not exist" in done.stderr
    assert "notebooks with a paper profile: (none)" in done.stderr


def test_unknown_profile_lists_the_profiles(repo):
    done = corekit("run", TINY, "--profile", "huge", root=repo)
    assert done.returncode == 2
    assert "invalid choice: 'huge' (choose from" in done.stderr and "'quick', 'cpu', 'paper'" in done.stderr


def test_paper_profile_with_override_and_unpaired_notebook(tmp_path):
    root = make_repo(tmp_path / "book", {TINY: tiny_notebook(TINY)})
    (root / "notebooks" / f"{TINY}.ipynb").unlink()  # corekit converts the .py itself
    write_paper_profile(root, TINY, {"scale": 5, "figures": 0, "matrix": [[1, 0], [0, 1]]})
    out = tmp_path / "out"
    done = corekit("run", TINY, "--profile", "paper", "-p", "scale", "7", "--out", str(out), root=root)
    assert done.returncode == 0, done.stderr
    metrics = load_metrics(out)
    assert metrics["profile"] == "paper"
    assert metrics["parameters"]["scale"] == 7  # -p beats the profile
    assert metrics["parameters"]["matrix"] == [[1, 0], [0, 1]]


def test_unknown_name_in_paper_profile_names_the_file(tmp_path):
    root = make_repo(tmp_path, {TINY: tiny_notebook(TINY)})
    write_paper_profile(root, TINY, {"scael": 5})
    done = corekit("run", TINY, "--profile", "paper", root=root)
    assert done.returncode == 2
    assert "unknown parameter 'scael' for 00_tiny (from notebooks/params/paper/00_tiny.yaml)" in done.stderr


def test_run_all_continues_after_a_failure(tmp_path):
    root = make_repo(tmp_path / "book", {"00_bad": tiny_notebook("00_bad", figures=0),
                                         "01_good": tiny_notebook("01_good", figures=0)})
    source = (root / "notebooks" / "00_bad.py").read_text().replace("fail = False", "fail = True")
    write_notebook(root, "00_bad", source)
    out = tmp_path / "out"
    done = corekit("run", "all", "--out", str(out), root=root)
    assert done.returncode == 1
    assert "1 of 2 notebooks failed: 00_bad" in done.stderr
    assert load_metrics(out, "01_good")["claims"]


def test_run_all_with_jobs_runs_side_by_side_each_pinned_to_its_share_of_the_cores_and_reports_each_failure(tmp_path):
    import os
    pinned = tiny_notebook("02_cores", figures=0).replace(
        "if write_metrics:", 'import os\nclaims.report("cores", len(os.sched_getaffinity(0)), kind="check", '
                             'statistic="cores the kernel may run on")\nif write_metrics:')
    root = make_repo(tmp_path / "book", {"00_bad": tiny_notebook("00_bad", figures=0),
                                         "01_good": tiny_notebook("01_good", figures=0), "02_cores": pinned})
    write_notebook(root, "00_bad", (root / "notebooks" / "00_bad.py").read_text().replace("fail = False", "fail = True"))
    out = tmp_path / "out"
    done = corekit("run", "all", "--jobs", "2", "-p", "scale", "3", "--out", str(out), root=root)
    assert done.returncode == 1
    cores = len(os.sched_getaffinity(0))
    share = cores // 2 if cores >= 2 else cores
    assert f"3 notebooks, 2 at a time, each on {share} of the {cores} cores" in done.stdout
    assert "corekit: error: 00_bad: " in done.stderr and "1 of 3 notebooks failed: 00_bad" in done.stderr
    good = load_metrics(out, "01_good")
    assert good["parameters"]["scale"] == 3
    assert {c["id"]: c["measured"] for c in load_metrics(out, "02_cores")["claims"]}["cores"] == share
    assert (out / "00_bad.failed.ipynb").is_file() and not (out / "00_bad.metrics.json").exists()
    alone = corekit("run", "01_good", "-p", "scale", "3", "--out", str(tmp_path / "alone"), root=root)
    assert alone.returncode == 0, alone.stderr                 # the same parameters, so the same source hash
    assert load_metrics(tmp_path / "alone", "01_good")["source_hash"] == good["source_hash"]


@pytest.mark.parametrize("cores, message", [("0,x", "expected core numbers separated by commas"),
                                             ("100000", "cannot run on those cores")])
def test_a_core_list_that_cannot_be_pinned_is_one_line(repo, capsys, monkeypatch, cores, message):
    monkeypatch.setenv("COREKIT_CPUS", cores)
    code, _, err = run_in_process(capsys, monkeypatch, repo, "list")
    assert code == 2 and err.startswith(f"corekit: error: COREKIT_CPUS={cores!r}: {message}"), err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("args, message", [
    (["all", "--jobs", "2", "--publish"], "--jobs 2 goes without --publish"),
    (["00_tiny", "--jobs", "2"], "--jobs 2 goes with run all"),
    (["all", "--jobs", "0"], "argument --jobs: expected a whole number of at least 1, got '0'"),
    (["all", "--jobs", "two"], "argument --jobs: expected a whole number of at least 1, got 'two'"),
])
def test_jobs_is_refused_where_it_cannot_apply(repo, args, message):
    done = corekit("run", *args, root=repo)
    assert done.returncode == 2 and message in done.stderr, done.stderr


def test_list_shows_parameters_and_defaults(repo):
    done = corekit("list", root=repo)
    assert done.returncode == 0, done.stderr
    assert "00_tiny  (no cpu profile, no paper profile, in _toc.yml)" in done.stdout
    assert re.search(r"matrix\s+= \[\[0\.5, 0\.5\], \[0\.25, 0\.75\]\]  # any nested list", done.stdout)


@pytest.mark.parametrize("text, value", [
    ("[[0.5,0.5,0],[0,0.5,0.5],[0.5,0,0.5]]", [[0.5, 0.5, 0], [0, 0.5, 0.5], [0.5, 0, 0.5]]),
    ("[0, 1]", [0, 1]),
    ("3", 3),
    ("0.25", 0.25),
    ("1e-3", 1e-3),
    ("-2.5E+2", -250.0),
    ("true", True),
    ("null", None),
    ("cpu", "cpu"),
    ("{a: 1}", {"a": 1}),
])
def test_parameter_values_are_yaml(text, value):
    assert parameters.parse_value("x", text) == value


def test_unparsable_value_names_the_parameter():
    with pytest.raises(errors.CorekitError, match=r"-p transition: cannot parse '\[\[0.5' as YAML"):
        parameters.parse_value("transition", "[[0.5")


def test_parameters_cell_parsing():
    source = "a = 1  # one\nb: list = [[1, 2],\n  [3, 4]]\nc = d = 'x'\n"
    params = parameters.parse_parameters(source)
    assert list(params) == ["a", "b", "c", "d"]
    assert params["a"] == parameters.Parameter("a", "1", "one")
    assert params["b"].default == "[[1, 2], [3, 4]]"


def test_toc_order_and_notebooks(tmp_path):
    toc = {"format": "jb-book", "root": "book/intro", "parts": [
        {"caption": "A", "chapters": [{"file": "book/ace.md"}, {"file": "notebooks/00_tiny",
                                                                "sections": [{"file": "book/x"}]}]},
        {"caption": "B", "chapters": [{"file": "book/bibliography"}]}]}
    (tmp_path / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False))
    assert notebooks.toc_files(tmp_path) == ["book/intro", "book/ace", "notebooks/00_tiny", "book/x",
                                       "book/bibliography"]
    with pytest.raises(errors.CorekitError, match="_toc.yml lists notebooks/00_tiny but no such .py exists"):
        notebooks.toc_notebooks(tmp_path)


def test_staged_config_turns_execution_off_and_keeps_the_ipynb():
    root_config = yaml.safe_load((notebooks.find_root() / "_config.yml").read_text())
    staged = site.staged_config(root_config)
    assert staged["execute"]["execute_notebooks"] == "off"
    assert "notebooks/*.ipynb" not in staged["exclude_patterns"] and "_build" in staged["exclude_patterns"]
    assert "nb_custom_formats" not in staged["sphinx"]["config"]
    assert root_config["sphinx"]["config"]["nb_custom_formats"]  # the root config is not modified


def test_staged_notebooks_show_each_progress_bar_once():
    outputs = [{"output_type": "stream", "name": "stderr", "text": "\rtrain:   0%|"},
               {"output_type": "stream", "name": "stderr", "text": "\rtrain:  50%|"},
               {"output_type": "stream", "name": "stderr", "text": "\rtrain: 100%|\r"},
               {"output_type": "stream", "name": "stderr", "text": "\n"},
               {"output_type": "stream", "name": "stdout", "text": "a\rb\nc\n"},
               {"output_type": "display_data", "data": {"text/plain": "x"}, "metadata": {}}]
    tidy = site.tidy_streams(outputs)
    assert [o.get("text") for o in tidy] == ["train: 100%|\n", "b\nc\n", None]
    assert outputs[0]["text"] == "\rtrain:   0%|"  # the executed notebook is left as it is


def test_staged_notebooks_drop_tqdms_missing_widgets_warning_only():
    warning = ("/home/u/.venv/lib/python3.11/site-packages/tqdm/auto.py:21: TqdmWarning: IProgress not found. "
               "Please update jupyter and ipywidgets.\n  from .autonotebook import tqdm as notebook_tqdm\n")
    outputs = [{"output_type": "stream", "name": "stderr", "text": warning},
               {"output_type": "stream", "name": "stdout", "text": "loaded\n"},
               {"output_type": "stream", "name": "stderr", "text": "UserWarning: a real one\n" + warning}]
    assert [(o["name"], o["text"]) for o in site.tidy_streams(outputs)] == [("stdout", "loaded\n"),
                                                                          ("stderr", "UserWarning: a real one\n")]


def test_staged_notebooks_show_no_run_folder(tmp_path):
    import nbformat
    nb = nbformat.v4.new_notebook()
    injected = nbformat.v4.new_code_cell('# Parameters\nseed = 3\noutput_dir = "/srv/run/_build/.nb.running-1-x"\n')
    injected.metadata["tags"] = ["injected-parameters"]
    plain = nbformat.v4.new_code_cell('output_dir = "kept: not papermill\'s"')
    nb.cells = [injected, plain]
    nbformat.write(nb, tmp_path / "run.ipynb")
    site.stage_notebook(tmp_path / "run.ipynb", tmp_path / "staged.ipynb", tmp_path)
    staged = nbformat.read(tmp_path / "staged.ipynb", as_version=4)
    assert staged.cells[0].source == "# Parameters\nseed = 3"
    assert staged.cells[1].source == plain.source
    assert "output_dir" in nbformat.read(tmp_path / "run.ipynb", as_version=4).cells[0].source   # the run is kept


def test_source_hash_covers_what_the_notebook_imports_and_nothing_else(tmp_path):
    source = tiny_notebook(TINY).replace("# %%\n", "# %%\nfrom corekit import ace\n", 1)
    root = make_repo(tmp_path, {TINY: source})
    library = root / "lib" / "corekit"
    (library / "tasks").mkdir(parents=True)
    (library / "data").mkdir()
    files = {"__init__.py": "", "cli.py": "x = 1\n", "lm.py": "x = 1\n", "tasks/__init__.py": "",
             "ace.py": "from .tasks.markov import x\n", "tasks/markov.py": "x = 1\nCORPUS = 'corpus.jsonl'\n",
             "data/corpus.jsonl": "{}\n", "data/other.jsonl": "{}\n"}
    for name, text in files.items():
        (library / name).write_text(text)
    nb = notebooks.Notebook(root, TINY)
    assert {p.relative_to(library).as_posix() for p in source_hash.library_closure(nb)} == \
        {"__init__.py", "ace.py", "tasks/__init__.py", "tasks/markov.py"}
    before = source_hash.source_hash(nb, {})
    for unrelated in ("cli.py", "lm.py", "data/other.jsonl"):  # the command line, and files the notebook never reads
        (library / unrelated).write_text("x = 2\n")
        assert source_hash.source_hash(nb, {}) == before, unrelated
    for name, text in (("tasks/markov.py", "x = 2\nCORPUS = 'corpus.jsonl'\n"), ("data/corpus.jsonl", "[]\n")):
        (library / name).write_text(text)
        assert source_hash.source_hash(nb, {}) != before, name
        before = source_hash.source_hash(nb, {})


def test_staged_book_resolves_every_literalinclude(tmp_path):
    import ast
    import re

    root = notebooks.find_root()
    stage = site.stage_book(root, {}, tmp_path / "stage")
    includes = [(page, path, obj) for page in (stage / "book").glob("*.md")
                for path, obj in re.findall(r"```\{literalinclude\} (\S+)\n(?:.*\n)*?:pyobject: (\S+)", page.read_text())]
    assert includes, "expected the method pages to include library code"
    for page, path, obj in includes:
        source = (page.parent / path).resolve()
        assert source.is_file(), f"{page.name} includes {path}, missing from the staged book"
        names = {node.name for node in ast.parse(source.read_text()).body if hasattr(node, "name")}
        assert obj in names, f"{page.name} includes {obj} from {path}, which does not define it"


def test_the_parameters_cell_is_parsed_once_while_the_notebook_is_unchanged(tmp_path, monkeypatch):
    """Checking a run's values reads the parameters cell several times; jupytext parses the file once, and again only
    after the file changes (then the new default shows)."""
    import jupytext

    root = make_repo(tmp_path, {"00_tiny": tiny_notebook("00_tiny")})
    nb = notebooks.Notebook(root, "00_tiny")
    parsed = []
    read = jupytext.read
    monkeypatch.setattr(jupytext, "read", lambda path, *a, **k: parsed.append(path) or read(path, *a, **k))
    parameters.check_values(nb, {"scale": 3.0}, "-p")
    parameters.check_values(nb, {"fail": True}, "-p")
    assert parameters.read_parameters(nb)["scale"].default == "2.0"
    assert len(parsed) == 1
    nb.py.write_text(nb.py.read_text().replace("scale = 2.0", "scale = 5.0  "))
    assert parameters.read_parameters(nb)["scale"].default == "5.0" and len(parsed) == 2


def test_the_verdicts_and_the_session_stay_in_the_source_hash_behind_the_wall(tmp_path):
    """The run machinery is left out of the hash except the two modules a notebook runs: the claims' verdict logic and
    setup() (its thread count). Changing either marks a published run stale; changing the publisher does not."""
    from corekit.runs import publish

    source = tiny_notebook(TINY).replace("# %%\n", "# %%\nfrom corekit.runs import claims, session\n", 1)
    root = make_repo(tmp_path, {TINY: source})
    runs = root / "lib" / "corekit" / "runs"
    runs.mkdir(parents=True)
    (runs.parent / "__init__.py").write_text("")
    for name in ("__init__.py", "claims.py", "session.py", "publish.py"):
        (runs / name).write_text("from corekit.runs import publish\n" if name == "claims.py" else "x = 1\n")
    nb = notebooks.Notebook(root, TINY)
    metrics = {"profile": "quick", "source_hash": source_hash.source_hash(nb, {})}
    assert publish.stale_reason(nb, metrics) is None
    (runs / "publish.py").write_text("x = 2\n")
    assert publish.stale_reason(nb, metrics) is None, "the publisher cannot change a result"
    for name in ("claims.py", "session.py"):
        (runs / name).write_text((runs / name).read_text() + "y = 1\n")
        assert publish.stale_reason(nb, metrics) is not None, f"a change to runs/{name} left the run current"
        metrics["source_hash"] = source_hash.source_hash(nb, {})
