"""Hostile inputs, second round (issue 51): the late refusals, tracebacks and wording of the review
(``shared/audits/hostile-inputs-review.md``), one test per case, named after it.

Each bad request ends in one line ``corekit: error: ...`` naming the parameter or file, exit status 2, before a kernel
starts (``no_kernel``: the test fails if one starts), with nothing written. The chapters' rules are checked twice: by a
direct call of the chapter's check (:mod:`corekit.runs.checks`, what the notebook's first cell calls too) and through
``corekit run`` on the book's own notebooks, in this process; one case runs the real command in a subprocess.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from tinyrepo import REPO, corekit, make_repo, one_line, refused, run_in_process, tiny_notebook, write_notebook

from corekit import inputs
from corekit.runs import checks, cli, notebooks, parameters
from corekit.runs.paramspec import ParameterError


def values(name: str, **overrides) -> dict:
    """Return every parameter of the book's notebook ``name`` as a run gets them: its defaults, then ``overrides``."""
    return parameters.resolved_parameters(notebooks.Notebook(REPO, name), overrides)


def check_refuses(name: str, *parts: str, **overrides) -> str:
    """Return the ParameterError of chapter ``name``'s check on its defaults with ``overrides``, holding ``parts``."""
    with pytest.raises(ParameterError) as caught:
        checks.chapter_check(name)(values(name, **overrides))
    message = str(caught.value)
    assert "\n" not in message, message
    for part in parts:
        assert part in message, message
    return message


@pytest.fixture
def offline_hub(monkeypatch, tmp_path):
    """No Hugging Face hub and an empty local cache of it (what this machine has, whatever it has)."""
    monkeypatch.setattr(inputs, "hub_reachable", lambda timeout=3.0: False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)


# --------------------------------------------------------------------------------------------
# Late refusals: the chapters' checks, called directly


@pytest.mark.parametrize("extra, bad", [
    ([[1]], "[1] is not an integer >= 0"),                                   # X01: a traceback before
    (["a", -1, 2.5], "'a' is not an integer >= 0"),                          # X02: a kernel before
    ([-1], "-1 is not an integer >= 0"),
    ([2.5], "2.5 is not an integer >= 0"),
    ([True], "true is not an integer >= 0"),
    ([{"a": 1}], "is not an integer >= 0"),
])
def test_x01_x02_extra_seeds_items_are_seeds(extra, bad):
    check_refuses("06_entk_transformer_modular", "parameter 'extra_seeds': expected a list of seeds, integers >= 0",
                  bad, extra_seeds=extra)


def test_x01_x02_extra_seeds_of_integers_pass():
    checks.chapter_check("06_entk_transformer_modular")(values("06_entk_transformer_modular", extra_seeds=[0, 1, 4]))
    check_refuses("06_entk_transformer_modular", "expected seeds not already in seeds = [2, 3]", extra_seeds=[0, 2])


def test_a_repeat_inside_seeds_is_named_as_seeds_not_extra_seeds():
    message = check_refuses("06_entk_transformer_modular", "parameter 'seeds'", seeds=[2, 2], extra_seeds=[5])
    assert "extra_seeds" not in message, message


def test_x04_heads_must_divide_d_model():
    check_refuses("01_markov_cores", "01_markov_cores: parameter 'n_heads': expected a divisor of d_model = 32",
                  "got 5", n_heads=5)
    check_refuses("01_markov_cores", "parameter 'n_heads': expected a divisor of d_model = 30", d_model=30)
    checks.chapter_check("01_markov_cores")(values("01_markov_cores", n_heads=8))


def test_x12_d01_d02_grokking_chapters_refuse_seeds_and_moduli_they_cannot_use():
    check_refuses("02_grokking_cores", "parameter 'data_seed': expected a seed below 2**32 with split numpy",
                  "got 4294967296", split="numpy", data_seed=2**32)
    checks.chapter_check("02_grokking_cores")(values("02_grokking_cores", split="torch", data_seed=2**32))
    check_refuses("02_grokking_cores", "parameter 'seeds': expected distinct seeds", seeds=[0, 0])
    check_refuses("03_grokking_scaling_law", "parameter 'p_values': expected distinct moduli", p_values=[31, 31])
    check_refuses("03_grokking_scaling_law", "parameter 'probe_p_values': expected moduli of the p sweep",
                  probe_p_values=[31, 53])
    check_refuses("03_grokking_scaling_law", "parameter 'probe_seeds': expected seeds of the sweep", probe_seeds=[0, 9])


def test_x05_the_test_set_counts_in_the_size_estimate():
    check_refuses("01_markov_cores", "parameter 'n_test': expected a size whose run fits in ", "got 1000000000000",
                  "the residual stream at every position of the test sequences", n_test=10**12)
    check_refuses("01_markov_cores", "parameter 'n_test'", "beyond 2**63-1", n_test=10**18)
    check_refuses("01_markov_cores", "parameter 'seq_len'", "the attention scores of every test sequence at once",
                  seq_len=10**6, n_test=3000)


@pytest.mark.parametrize("p, top_k, frac, n_train", [(5, 25, 0.01, 0), (5, 25, 0.99, 25), (29, 200, 0.0001, 0)])
def test_x06_the_split_leaves_training_and_held_out_pairs(p, top_k, frac, n_train):
    check_refuses("05_entk_mlp_modular", "05_entk_mlp_modular: parameter 'train_frac': expected a fraction that leaves "
                  "at least one training and one held-out pair", f"= {n_train} training pairs", f"got {frac}",
                  p=p, top_k=top_k, train_frac=frac)


@pytest.mark.parametrize("epochs, every", [(50, 100), (500, 3), (7, 2)])
def test_x07_eval_every_divides_epochs(epochs, every):
    check_refuses("05_entk_mlp_modular", "parameter 'eval_every': expected a divisor of epochs = " f"{epochs}",
                  f"got {every}", epochs=epochs, eval_every=every)


def test_x07_an_interval_that_divides_epochs_passes():
    for epochs, every in ((500, 1), (500, 5), (50, 50)):
        checks.chapter_check("05_entk_mlp_modular")(values("05_entk_mlp_modular", epochs=epochs, eval_every=every))


def test_x09_an_unknown_model_is_refused_naming_the_offline_models(offline_hub):
    check_refuses("07_entk_gemma_grammar", "07_entk_gemma_grammar: parameter 'model': expected one of the offline "
                  "models (gemma-3-270m, smollm2-135m)", "got 'gpt2'", "is not reachable from this machine",
                  model="gpt2")
    check_refuses("07_entk_gemma_grammar", "(an empty name)", model="")
    check_refuses("07_entk_gemma_grammar", "(no such .gguf file)", model="/nonexistent/model.gguf")


def test_x09_hub_offline_is_named(offline_hub, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    check_refuses("07_entk_gemma_grammar", "HF_HUB_OFFLINE is set", model="gpt2")


def test_x09_what_the_loader_can_load_passes(offline_hub, monkeypatch, tmp_path):
    check = checks.chapter_check("07_entk_gemma_grammar")
    for name in inputs.LANGUAGE_MODELS:
        check(values("07_entk_gemma_grammar", model=name))
    (tmp_path / "saved").mkdir()
    (tmp_path / "model.gguf").write_bytes(b"GGUF")
    check(values("07_entk_gemma_grammar", model=str(tmp_path / "saved")))
    check(values("07_entk_gemma_grammar", model=str(tmp_path / "model.gguf")))
    (tmp_path / "hf-cache" / "models--org--tiny" / "snapshots" / "abc").mkdir(parents=True)
    check(values("07_entk_gemma_grammar", model="org/tiny"))                     # in the local cache
    monkeypatch.setattr(inputs, "hub_reachable", lambda timeout=3.0: True)
    check(values("07_entk_gemma_grammar", model="gpt2"))                         # the hub decides


def test_x09_the_offline_models_are_the_loaders():
    from corekit.lm.loading import OFFLINE

    assert sorted(inputs.LANGUAGE_MODELS) == sorted(OFFLINE)


@pytest.mark.parametrize("dtype", ["float13", "float64", "int8", "", "Float32"])
def test_x10_dtype_is_one_the_loader_takes(dtype):
    check_refuses("04_llm_agreement_axis", "04_llm_agreement_axis: parameter 'dtype': expected one of auto, float32, "
                  "bfloat16, float16", f"got {dtype!r}", dtype=dtype)


def test_x10_the_loaders_dtypes_pass():
    for dtype in inputs.MODEL_DTYPES:
        checks.chapter_check("04_llm_agreement_axis")(values("04_llm_agreement_axis", dtype=dtype))


# --------------------------------------------------------------------------------------------
# Late refusals: the review's commands, refused by corekit run before a kernel, nothing written

REVIEW_CASES = [
    ("X01", ["06_entk_transformer_modular", "-p", "extra_seeds", "[[1]]"], "parameter 'extra_seeds'"),
    ("X02", ["06_entk_transformer_modular", "-p", "extra_seeds", '["a", -1, 2.5]'], "parameter 'extra_seeds'"),
    ("X04", ["01_markov_cores", "-p", "n_heads", "5"], "parameter 'n_heads'"),
    ("X05", ["01_markov_cores", "-p", "n_test", "1000000000000"], "parameter 'n_test'"),
    ("X06", ["05_entk_mlp_modular", "-p", "p", "5", "-p", "top_k", "25", "-p", "train_frac", "0.01"],
     "parameter 'train_frac'"),
    ("X07", ["05_entk_mlp_modular", "-p", "epochs", "50", "-p", "eval_every", "100"], "parameter 'eval_every'"),
    ("X09", ["07_entk_gemma_grammar", "-p", "model", "gpt2"], "parameter 'model'"),
    ("X10", ["04_llm_agreement_axis", "-p", "dtype", "float13"], "parameter 'dtype'"),
]


@pytest.mark.parametrize("case, args, names", REVIEW_CASES, ids=[c[0] for c in REVIEW_CASES])
def test_the_reviews_late_refusals_come_before_a_kernel(tmp_path, capsys, monkeypatch, no_kernel, offline_hub, case,
                                                        args, names):
    out = tmp_path / "out"
    err = refused(capsys, monkeypatch, REPO, "run", *args, "--out", str(out))
    one_line(err, f"corekit: error: {args[0]}: {names}: expected ")
    assert not out.exists(), f"{case}: a refused run wrote {sorted(out.iterdir())}"


def test_x01_as_the_review_ran_it(tmp_path):
    """The command itself: exit status 2, one line on stderr, nothing on stdout, no folder made."""
    out = tmp_path / "base"
    done = corekit("run", "06_entk_transformer_modular", "-p", "extra_seeds", "[[1]]", "--out", str(out), timeout=120)
    assert done.returncode == 2 and done.stdout == "", done
    one_line(done.stderr, "06_entk_transformer_modular: parameter 'extra_seeds'", "([1] is not an integer >= 0)")
    assert not out.exists()


# --------------------------------------------------------------------------------------------
# Tracebacks: a notebook's source that does not parse, one line naming the file and line

NAME = "00_syntax"


def broken(source: str, find: str, replace: str) -> tuple[str, int]:
    """Return ``source`` with ``find`` (on one line) replaced by ``replace``, and the number of that line (1-based)."""
    assert source.count(find) == 1
    line = source[:source.index(find)].count("\n") + 1
    return source.replace(find, replace), line


@pytest.fixture
def bad_parameters(tmp_path) -> tuple[Path, int]:
    """A book whose one notebook has a syntax error in its parameters cell (SE1), paired: (root, its line)."""
    source, line = broken(tiny_notebook(NAME), "scale = 2.0  # multiplies", "scale = 2.0 +  # multiplies")
    return make_repo(tmp_path / "book", {NAME: source}), line


def test_se1_run_names_the_file_and_line(bad_parameters, tmp_path, capsys, monkeypatch, no_kernel):
    root, line = bad_parameters
    err = refused(capsys, monkeypatch, root, "run", NAME, "--out", str(tmp_path / "out"))
    one_line(err, f"corekit: error: notebooks/{NAME}.py, line {line}: the parameters cell is not valid Python "
             "(invalid syntax): 'scale = 2.0 +")
    assert not (tmp_path / "out").exists()


def test_se1_run_all_names_the_file_and_line(bad_parameters, tmp_path, capsys, monkeypatch, no_kernel):
    root, line = bad_parameters
    err = refused(capsys, monkeypatch, root, "run", "all", "--out", str(tmp_path / "out"))
    one_line(err, f"notebooks/{NAME}.py, line {line}: the parameters cell is not valid Python")


def test_se1_list_names_the_file_and_line_before_printing(bad_parameters, capsys, monkeypatch):
    root, line = bad_parameters
    write_notebook(root, "00_fine", tiny_notebook("00_fine"))          # listed before the broken one
    code, out, err = run_in_process(capsys, monkeypatch, root, "list")
    assert code == 2 and out == "", out
    one_line(err, f"notebooks/{NAME}.py, line {line}: the parameters cell is not valid Python")


def test_se1_book_published_names_the_file_and_line(bad_parameters, tmp_path, capsys, monkeypatch):
    root, line = bad_parameters
    err = refused(capsys, monkeypatch, root, "book", "--published", "--out", str(tmp_path / "html"))
    one_line(err, f"notebooks/{NAME}.py, line {line}: ")
    assert not (tmp_path / "html").exists()


def test_se1_the_notebooks_own_declaration_is_one_error_too(bad_parameters, monkeypatch):
    """``declared`` (what the notebook's first cell and Claims read) raises the same error, not a SyntaxError."""
    root, line = bad_parameters
    monkeypatch.setenv(notebooks.ROOT_ENV, str(root))
    with pytest.raises(parameters.CorekitError, match=f"notebooks/{NAME}.py, line {line}: the parameters cell"):
        parameters.declared(NAME)


@pytest.fixture
def not_compiling(tmp_path) -> tuple[Path, int]:
    """A book whose notebook's later cell does not compile, its .ipynb synced with it (SE3b): (root, its line)."""
    source, line = broken(tiny_notebook(NAME), "    figs.save(fig, f\"figure_{k}\")", "    figs.save(fig, f\"figure_{k}\"")
    return make_repo(tmp_path / "book", {NAME: source}), line


@pytest.mark.parametrize("command", [["run", NAME], ["run", "all"], ["book"], ["book", "--published"]])
def test_se3b_a_py_that_does_not_compile_is_refused_before_a_kernel(not_compiling, tmp_path, capsys, monkeypatch,
                                                                    no_kernel, command):
    root, line = not_compiling
    err = refused(capsys, monkeypatch, root, *command, "--out", str(tmp_path / "out"))
    one_line(err, f"corekit: error: notebooks/{NAME}.py, line {line}: does not compile (", "figs.save(fig")
    assert not (tmp_path / "out").exists()


def test_se3b_the_source_hash_names_the_file_too(not_compiling):
    from corekit.runs.source_hash import source_hash

    root, line = not_compiling
    with pytest.raises(parameters.CorekitError, match=f"notebooks/{NAME}.py, line {line}: does not compile"):
        source_hash(notebooks.Notebook(root, NAME), {})


def test_every_notebook_of_the_book_compiles():
    for name in notebooks.notebook_names(REPO):
        parameters.check_compiles(notebooks.Notebook(REPO, name))


# --------------------------------------------------------------------------------------------
# Wording: run all on a profile some notebooks lack (RA2), an over-long --out (O06)


def fake_execute(ran: list):
    """Return a stand-in for :func:`corekit.runs.execute.execute` that records the notebook and writes nothing."""
    def execute(nb, profile, params, out, cell_timeout=None):
        ran.append(nb.name)
        return {"notebook": nb.name, "runtime_s": 0.1, "profile": profile, "claims": []}
    return execute


@pytest.fixture
def two_books(tmp_path) -> Path:
    """A book of two tiny notebooks, only the second with a cpu profile."""
    root = make_repo(tmp_path / "book", {"01_first": tiny_notebook("01_first"), "02_second": tiny_notebook("02_second")})
    profile = root / "notebooks" / "params" / "cpu" / "02_second.yaml"
    profile.parent.mkdir(parents=True)
    profile.write_text("scale: 3.0\n")
    return root


def test_ra2_run_all_on_a_profile_runs_the_notebooks_that_have_it(two_books, tmp_path, capsys, monkeypatch):
    ran: list = []
    monkeypatch.setattr(cli, "execute", fake_execute(ran))
    code, out, err = run_in_process(capsys, monkeypatch, two_books, "run", "all", "--profile", "cpu",
                                    "--out", str(tmp_path / "out"))
    assert code == 0 and err == "", err
    assert ran == ["02_second"]
    assert ("run all --profile cpu: running the 1 notebooks with a cpu profile (02_second); skipping 01_first "
            "(no notebooks/params/cpu/NAME.yaml)") in out


def test_ra2_run_all_quick_runs_every_notebook(two_books, tmp_path, capsys, monkeypatch):
    ran: list = []
    monkeypatch.setattr(cli, "execute", fake_execute(ran))
    code, out, _ = run_in_process(capsys, monkeypatch, two_books, "run", "all", "--out", str(tmp_path / "out"))
    assert code == 0 and ran == ["01_first", "02_second"] and "skipping" not in out


def test_ra2_a_profile_no_notebook_has_is_refused(two_books, tmp_path, capsys, monkeypatch, no_kernel):
    err = refused(capsys, monkeypatch, two_books, "run", "all", "--profile", "paper", "--out", str(tmp_path / "out"))
    one_line(err, "corekit: error: no notebook has a paper profile (notebooks/params/paper/NAME.yaml)")


def test_ra2_a_parameter_only_skipped_notebooks_declare_is_refused(tmp_path, capsys, monkeypatch, no_kernel):
    root = make_repo(tmp_path / "book", {"01_first": tiny_notebook("01_first").replace(
        "fail = False  # raise in a cell", "fail = False  # raise in a cell\nonly_first = 1  # only here"),
        "02_second": tiny_notebook("02_second")})
    (root / "notebooks" / "params" / "cpu").mkdir(parents=True)
    (root / "notebooks" / "params" / "cpu" / "02_second.yaml").write_text("scale: 3.0\n")
    err = refused(capsys, monkeypatch, root, "run", "all", "--profile", "cpu", "-p", "only_first", "2",
                  "--out", str(tmp_path / "out"))
    one_line(err, "-p only_first: only notebooks without a cpu profile declare it (01_first)")


def test_ra2_the_readmes_maintainer_command_runs_on_the_book(tmp_path, capsys, monkeypatch):
    """``corekit run all --profile cpu --publish`` on the book itself: every cpu profile passes the checks and may
    replace its published run; the notebooks run are those with a cpu profile (executed and published by stand-ins),
    but for those published at a larger profile, which are skipped and named."""
    ran, published = [], []
    monkeypatch.setattr(cli, "execute", fake_execute(ran))
    monkeypatch.setattr(cli, "publish_executed", lambda root, name, *args: published.append(name))
    code, out, err = run_in_process(capsys, monkeypatch, REPO, "run", "all", "--profile", "cpu", "--publish",
                                    "--out", str(tmp_path / "out"))
    having = [n for n in notebooks.notebook_names(REPO) if notebooks.Notebook(REPO, n).profile_file("cpu").is_file()]
    larger = [n for n in having if cli.published_record(REPO, n)[0] == "paper"]
    assert code == 0, err
    assert ran == published == [n for n in having if n not in larger] and "skipping" in out
    assert all(f"{n} (published at its paper profile)" in out for n in larger) and larger
    assert "run all --profile cpu --publish" in (REPO / "CONTRIBUTING.md").read_text()


def readme_clause_rows() -> list[tuple[str, str]]:
    """Return the (clauses, example) cells of CONTRIBUTING.md's table of parameter comment clauses."""
    text = (REPO / "CONTRIBUTING.md").read_text()
    table = text[text.index("| comment clause |"):]
    table = table[:table.index("\n\n")]
    return [(cells[1], cells[3]) for row in table.splitlines()[2:] if len(cells := row.split("|")) >= 4]


def test_se2_every_clause_the_readme_shows_is_read_and_papermill_takes_its_example():
    """SE2: the README's clause table shows only forms the parser reads (``range: [1, inf)``, not ``range: >= 1``, which
    it refuses and papermill cannot parse), and each example line is a parameter both of them accept."""
    from papermill.translators import PythonTranslator

    from corekit.runs import paramspec

    rows = readme_clause_rows()
    assert len(rows) >= 5, rows
    for clauses, example in rows:
        line = example.strip().strip("`")
        default, _, comment = line.partition("=")[2].partition("#")
        paramspec.accepts(default.strip(), comment.strip())                  # raises DeclarationError if unread
        assert [p.name for p in PythonTranslator.inspect({"source": line})] == [line.split()[0]], line
        key = None
        for clause in re.findall(r"`([^`]+)`", clauses):                    # `range: [1, inf)`, `(0, inf)` …
            named, _, value = clause.rpartition(":") if ":" in clause else ("", "", clause)
            key, value = named.strip() or key, value.strip()
            if key == "range" and "..." not in value:
                paramspec.parse_range(value)
            elif key == "length":
                assert paramspec.LENGTH.fullmatch(value.replace("N", "2")), clause
    assert "range: >= 1" not in (REPO / "CONTRIBUTING.md").read_text()


@pytest.mark.parametrize("command", [["run", "05_entk_mlp_modular"], ["run", "all"], ["book"]])
def test_o06_an_overlong_out_name_is_one_line_naming_out(tmp_path, capsys, monkeypatch, no_kernel, command):
    out = tmp_path / ("x" * 300)
    err = refused(capsys, monkeypatch, REPO, *command, "--out", str(out))
    one_line(err, "corekit: error: --out ", ": a folder name of 300 bytes", "takes names of at most 255 bytes")
    assert "Errno" not in err and not list(tmp_path.iterdir())


def test_o06_an_overlong_out_path_is_one_line_naming_out(tmp_path, capsys, monkeypatch, no_kernel):
    out = tmp_path.joinpath(*["y" * 200] * 21)
    err = refused(capsys, monkeypatch, REPO, "run", "05_entk_mlp_modular", "--out", str(out))
    one_line(err, "corekit: error: --out ", ": a path of ", "this file system's longest path")
    assert not list(tmp_path.iterdir())


def test_o06_prepare_out_names_the_option_for_a_name_too_long(tmp_path):
    from corekit.runs.errors import CorekitError
    from corekit.runs.execute import prepare_out

    with pytest.raises(CorekitError, match="--executed .*: cannot write there"):
        prepare_out(tmp_path / ("z" * 300), "--executed")


def test_o06_a_long_but_valid_out_is_accepted(tmp_path):
    out = tmp_path / ("x" * 200)
    assert cli.checked_out(REPO, str(out), "quick") == out.resolve()
    assert os.pathconf(tmp_path, "PC_NAME_MAX") >= 200


# --------------------------------------------------------------------------------------------
# Third round (issue 68): refusals that came after the kernel had started


@pytest.mark.parametrize("name, overrides", [
    ("02_grokking_cores", {"n_heads": 3}),                                   # N12
    ("02_grokking_cores", {"d_model": 2, "n_heads": 4}),                     # M04
    ("03_grokking_scaling_law", {"n_heads": 3}),                             # N11
    ("06_entk_transformer_modular", {"n_heads": 3}),                         # N09, PM5
    ("08_two_lenses", {"n_heads": 3}),                                       # M06
    ("09_merging_cores", {"n_heads": 3}),                                    # N10
])
def test_n09_to_n12_heads_that_do_not_divide_d_model_are_refused_before_the_kernel(name, overrides):
    check_refuses(name, "parameter 'n_heads'", "a divisor of d_model", **overrides)


def test_g02s_a_split_whose_held_out_pairs_miss_a_class_is_refused():
    check_refuses("02_grokking_cores", "parameter 'train_frac'", "every class", train_frac=0.999, seeds=[0])


def test_m01_an_unknown_model_in_04_is_refused_like_07s(offline_hub):
    check_refuses("04_llm_agreement_axis", "parameter 'models'", "one of the offline models",
                  models=["gemma-3-270m", "ñ😀"])


def test_n32_an_unknown_corpus_is_refused_by_its_clause(tmp_path):
    nb = notebooks.Notebook(REPO, "07_entk_gemma_grammar")
    with pytest.raises(Exception, match="corpus.*one of"):
        parameters.check_values(nb, {"corpus": "nonsense"}, "-p")


def _path_parameters() -> list[tuple[str, str]]:
    """Return (notebook, parameter) for every path parameter a run writes, of every notebook of the book."""
    out = []
    for name in notebooks.notebook_names(REPO):
        for param, declared in parameters.read_parameters(notebooks.Notebook(REPO, name)).items():
            clauses = {c.strip() for c in declared.help.split(";")}
            if "path" in clauses and (param == "output_dir" or any(c.startswith("writes:") for c in clauses)):
                out.append((name, param))
    return out


def test_x1_every_path_parameter_a_run_writes_is_declared():
    found = set(_path_parameters())
    assert {("02_grokking_cores", "export_checkpoints"), ("02_grokking_cores", "checkpoint_dir"),
            ("03_grokking_scaling_law", "checkpoint_dir")} <= found
    assert len({nb for nb, p in found if p == "output_dir"}) == len(notebooks.notebook_names(REPO))


@pytest.mark.parametrize("name, param", _path_parameters())
@pytest.mark.parametrize("target", ["README.md", "notebooks", "results", "a link", ".git/x"])
def test_x1_n38_n39_a_path_parameter_at_a_tracked_file_folder_or_link_is_refused_by_corekit_run_and_the_first_cell(
        name, param, target, tmp_path, monkeypatch):
    from corekit.runs.claims import check_parameters
    if target == "a link":
        (tmp_path / "real").mkdir()
        (tmp_path / "link").symlink_to(tmp_path / "real")
        target = str(tmp_path / "link")
    monkeypatch.chdir(REPO)
    nb = notebooks.Notebook(REPO, name)
    values = {param: target}
    if param == "output_dir":                                  # corekit run sets it itself; papermill's first cell
        with pytest.raises(ParameterError, match=f"parameter '{param}'"):
            parameters.check_namespace(name, {**{k: v for k, v in values_of(name).items()}, **values})
        return
    with pytest.raises(Exception, match=f"-p {param}: expected a path this run may write"):
        parameters.check_values(nb, values, "-p")
    with pytest.raises(ParameterError, match=f"parameter '{param}': expected a path this run may write"):
        check_parameters(name, {**values_of(name), **values})


def values_of(name: str) -> dict:
    """Return every parameter of notebook ``name`` at its default (what the first cell's namespace holds)."""
    return values(name)


def test_x1_a_file_or_folder_no_run_wrote_is_refused_and_one_a_run_wrote_is_taken(tmp_path, monkeypatch):
    from corekit.runs import owned
    nb = notebooks.Notebook(REPO, "02_grokking_cores")
    foreign = tmp_path / "notes.pt"
    foreign.write_text("mine")
    with pytest.raises(Exception, match="an existing file that no run of this tool wrote"):
        parameters.check_values(nb, {"export_checkpoints": str(foreign)}, "-p")
    owned.record_written(foreign)                               # what claims.record_export does after an export
    assert parameters.check_values(nb, {"export_checkpoints": str(foreign)}, "-p")
    ckpt = tmp_path / "ckpt"
    (ckpt / "p31_b0_0123456789ab").mkdir(parents=True)
    (ckpt / "last.pt").write_bytes(b"")
    (ckpt / "p31_b0_0123456789ab" / "segments.json").write_text("[]")
    assert parameters.check_values(nb, {"checkpoint_dir": str(ckpt)}, "-p")
    (ckpt / "thesis.tex").write_text("")
    with pytest.raises(Exception, match="no run of this tool wrote there.*thesis.tex"):
        parameters.check_values(nb, {"checkpoint_dir": str(ckpt)}, "-p")
