"""The published edition: `corekit run --publish`, `corekit book --published`, run records, the GPU script.

The mechanism is tested on a throwaway book of tiny notebooks; the committed runs in ``results/``
(if any) are checked for what every published run must hold.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
import yaml
from tinyrepo import REPO, absolute_paths, corekit, make_repo, tiny_notebook, write_notebook

from corekit import runinfo
from corekit.runs import notebooks, publish
from corekit.runs.claims import Claims
from corekit.runs.source_hash import source_hash
from corekit.verdicts import NO_NULL, VERDICTS, format_value

FRESH, STALE = "00_tiny", "01_tiny"
ENVIRONMENT_KEYS = {"date", "python", "torch", "transformers", "numpy", "device", "threads", "commit", "dirty",
                    "models"}
BUILD_TIMEOUT_S = 600
DRY_RUN_TIMEOUT_S = 1500


def tiny_source(name: str) -> str:
    """Return a tiny notebook that saves two figures and draws a progress bar with carriage returns."""
    source = tiny_notebook(name, figures=2, title=f"Tiny chapter {name}")
    return source.replace("# %% [markdown]\n# ## Claims",
                          '# %%\nprint("\\r".join(f"step {i}/3" for i in range(4)))\n\n# %% [markdown]\n# ## Claims')


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """A book (the repository's config, a tiny intro, the results page) with two tiny chapters."""
    root = make_repo(tmp_path_factory.mktemp("book"), {FRESH: tiny_source(FRESH), STALE: tiny_source(STALE)})
    shutil.copy2(REPO / "_config.yml", root / "_config.yml")
    (root / "book" / "_static").mkdir(parents=True)
    shutil.copy2(REPO / "book" / "references.bib", root / "book" / "references.bib")
    shutil.copy2(REPO / "book" / "_static" / "corekit.css", root / "book" / "_static" / "corekit.css")
    shutil.copytree(REPO / "book" / "_ext", root / "book" / "_ext")      # the config's local extension
    (root / "book" / "intro.md").write_text("# Tiny book\n")
    (root / "book" / "results.md").write_text("# Results at a glance\n\nGenerated at build time.\n")
    (root / "book" / "prose.md").write_text("# Prose\n\nDoubled: {{ claim_00_doubled }}. Negative: "
                                            "{{ claim_01_negative }}. Folder: {{ claim_00_figures_dir }}.\n")
    toc = {"format": "jb-book", "root": "book/intro",
           "chapters": [{"file": "book/results"}, {"file": f"notebooks/{FRESH}"}, {"file": f"notebooks/{STALE}"},
                        {"file": "book/prose"}]}
    (root / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False))
    cpu = root / "notebooks" / "params" / "cpu"
    cpu.mkdir(parents=True)
    (cpu / f"{FRESH}.yaml").write_text(yaml.safe_dump({"scale": 5.0}))
    return root


@pytest.fixture(scope="module")
def published(repo, tmp_path_factory) -> Path:
    """``repo`` with both chapters published (FRESH on its cpu profile), then STALE's source edited."""
    for name, profile in ((FRESH, "cpu"), (STALE, "quick")):
        done = corekit("run", name, "--profile", profile, "--publish",
                       "--out", str(tmp_path_factory.mktemp("out")), root=repo)
        assert done.returncode == 0, done.stderr
    py = repo / "notebooks" / f"{STALE}.py"
    write_notebook(repo, STALE, py.read_text().replace("stand-in notebook", "stand-in notebook, edited"))
    return repo


@pytest.fixture(scope="module")
def book(published, tmp_path_factory) -> tuple[subprocess.CompletedProcess, float, Path]:
    """The finished `corekit book --published`, its wall time and its HTML folder."""
    out = tmp_path_factory.mktemp("html")
    start = time.perf_counter()
    done = corekit("book", "--published", "--out", str(out), root=published, timeout=BUILD_TIMEOUT_S)
    assert done.returncode == 0, f"corekit book --published failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done, time.perf_counter() - start, out / "_build" / "html"


def test_publish_writes_the_layout_with_figures_in_order(published):
    folder = published / "results" / FRESH
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["profile"] == "cpu" and metrics["parameters"]["scale"] == 5.0
    assert metrics["figures"] == ["figure_0.png", "figure_1.png"]
    assert all((folder / "figures" / name).is_file() for name in metrics["figures"])
    assert ENVIRONMENT_KEYS <= set(metrics["environment"])
    assert not list((published / "results").glob(".*")), "publishing left its temporary folders behind"


def test_a_run_published_from_a_temporary_folder_names_no_absolute_path(published, book):
    """Published from a repository and an --out folder both under the temporary folder: neither results/ nor the
    built pages (their visible text) nor the _sources copies the download button serves name a path of this machine."""
    _, _, html = book
    assert absolute_paths(published / "results") == []
    text = lambda page: page_text(html, page.relative_to(html).with_suffix("").as_posix())  # noqa: E731
    assert absolute_paths(html / "notebooks", text) == [] and absolute_paths(html / "book", text) == []
    assert absolute_paths(html / "_sources") == []
    record = json.loads((published / "results" / FRESH / "metrics.json").read_text())
    assert {c["id"]: c["measured"] for c in record["claims"]}["figures_dir"] == f"figures/{FRESH}"


def test_a_prose_page_may_name_a_claim_that_only_a_stale_run_lacks(tmp_path, monkeypatch):
    """The claims a chapter module declares and a stale run lacks stand in as "not measured by the run shown"."""
    import types

    from corekit.verdicts import Spec

    declared = types.SimpleNamespace(CLAIMS=(Spec("doubled", "paper", "2 × scale"), Spec("negative", "paper", "scale")))
    monkeypatch.setattr(publish, "chapter_module", lambda name: declared if name == FRESH else None)
    root = make_repo(tmp_path, {FRESH: tiny_notebook(FRESH)})
    folder = root / "results" / FRESH
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps({"claims": [{"id": "doubled", "measured": 6, "pass": True}],
                                                     "profile": "quick", "source_hash": "an older source"}))
    run = publish.Run(FRESH, folder / f"{FRESH}.ipynb", folder / "metrics.json", folder / "figures", True)
    texts = publish.claim_substitutions({FRESH: run}, root)
    assert texts["claim_00_doubled"] == "6 (pass)"
    assert texts["claim_00_negative"] == publish.NOT_IN_STALE_RUN               # recorded by the source, not by the run
    assert "claim_00_negative" not in publish.claim_substitutions({FRESH: run})  # without the root: no stand-in
    params = publish.run_parameters(notebooks.Notebook(root, FRESH), {"profile": "quick"})
    fresh = {"claims": [{"id": "doubled", "measured": 6, "pass": True}], "profile": "quick",
             "source_hash": source_hash(notebooks.Notebook(root, FRESH), params)}
    (folder / "metrics.json").write_text(json.dumps(fresh))
    assert "claim_00_negative" not in publish.claim_substitutions({FRESH: run}, root)  # a current run must have it


def test_the_committed_published_runs_name_no_absolute_path():
    assert absolute_paths(REPO / "results") == []


def test_a_path_parameter_is_hashed_relative_to_the_repository(tmp_path):
    from corekit.runs.source_hash import source_hash
    one = make_repo(tmp_path / "one", {FRESH: tiny_notebook(FRESH)})
    two = make_repo(tmp_path / "elsewhere" / "two", {FRESH: tiny_notebook(FRESH)})
    hashes = [source_hash(notebooks.Notebook(root, FRESH), {"scale": 1.0, "where": str(root / "_build" / "x.pt")})
              for root in (one, two)]
    assert hashes[0] == hashes[1]
    assert source_hash(notebooks.Notebook(one, FRESH), {"scale": 1.0, "where": str(one / "_build" / "y.pt")}) \
        != hashes[0]


def test_published_notebook_keeps_only_the_final_progress_line(published):
    notebook = nbformat.read(published / "results" / FRESH / f"{FRESH}.ipynb", as_version=4)
    streams = [o["text"] for c in notebook.cells if c.cell_type == "code" for o in c.outputs
               if o.get("output_type") == "stream" and "step" in o["text"]]
    assert streams == ["step 3/3\n"]


def test_failed_run_leaves_the_published_run_in_place(published, tmp_path):
    before = (published / "results" / FRESH / "metrics.json").read_bytes()
    profile = published / "notebooks" / "params" / "cpu" / f"{FRESH}.yaml"
    saved = profile.read_text()
    profile.write_text(yaml.safe_dump({"scale": 5.0, "fail": True}))
    try:
        done = corekit("run", FRESH, "--profile", "cpu", "--publish", "--out", str(tmp_path), root=published)
    finally:
        profile.write_text(saved)
    assert done.returncode == 1 and "asked to fail" in done.stderr
    assert (published / "results" / FRESH / "metrics.json").read_bytes() == before


def test_publish_refuses_overrides(repo, tmp_path):
    done = corekit("run", FRESH, "--publish", "-p", "scale", "3", "--out", str(tmp_path), root=repo)
    assert done.returncode == 2
    assert "--publish takes no -p overrides" in done.stderr


def test_missing_cpu_profile_names_the_notebooks_that_have_one(repo, tmp_path):
    done = corekit("run", STALE, "--profile", "cpu", "--out", str(tmp_path), root=repo)
    assert done.returncode == 2
    assert f"no cpu profile for {STALE}" in done.stderr and f"with a cpu profile: {FRESH}" in done.stderr


def test_book_published_without_runs_names_the_missing_notebooks(repo, tmp_path):
    bare = make_repo(tmp_path / "bare", {FRESH: tiny_source(FRESH)})
    done = corekit("book", "--published", "--out", str(tmp_path / "html"), root=bare)
    assert done.returncode == 2
    assert f"no published run of {FRESH}" in done.stderr and "--fallback-quick" in done.stderr


def test_book_published_builds_every_page_quickly(book, published):
    done, seconds, html = book
    pages = sorted(html.rglob("*.html"))
    for page in ("book/intro", "book/results", f"notebooks/{FRESH}", f"notebooks/{STALE}"):
        assert (html / f"{page}.html").is_file(), f"{page} was not built"
    assert "executing" not in done.stdout, "book --published executed a notebook"
    print(f"book --published: {seconds:.1f} s, {len(pages)} HTML pages")
    assert seconds < 120


def page_text(html: Path, page: str) -> str:
    """Return the HTML of ``page`` with tags stripped and whitespace collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", (html / f"{page}.html").read_text().replace("<wbr>", "")).split())


def test_each_page_opens_with_its_run_record(book, published):
    _, _, html = book
    fresh, stale = page_text(html, f"notebooks/{FRESH}"), page_text(html, f"notebooks/{STALE}")
    metrics = json.loads((published / "results" / FRESH / "metrics.json").read_text())
    record = fresh[fresh.index("Published run"):]
    assert record.index("profile cpu") < record.index("A stand-in notebook"), "the record does not open the page"
    assert f"threads {metrics['environment']['threads']}" in record
    assert f"values repeat to the last digit on the same machine and software with -p cpu_threads " \
           f"{metrics['environment']['threads']}" in record, "the page does not say how to repeat its values"
    assert "may be out of date" not in fresh
    assert "may be out of date" in stale and f"corekit run {STALE} --profile quick --publish" in stale


def test_results_page_lists_every_claim_with_its_verdict_and_figure(book, published):
    _, _, html = book
    text = page_text(html, "book/results")
    for name in (FRESH, STALE):
        for claim in json.loads((published / "results" / name / "metrics.json").read_text())["claims"]:
            assert claim["id"] in text, f"{name}: claim {claim['id']} is not on the results page"
    assert "pass" in text and "FAIL" in text
    source = (html / "book" / "results.html").read_text()
    assert f'href="../notebooks/{FRESH}.html' in source
    images = re.findall(r'<img[^>]+src="([^"]+)"', source)
    assert len(images) == 3 and all((html / "book" / src).is_file() for src in images)   # the tally, 2 chapters


def test_a_prose_page_quotes_each_runs_measured_values_and_verdicts(book, published):
    _, _, html = book
    text = page_text(html, "book/prose")
    fresh, stale = ({c["id"]: c for c in json.loads((published / "results" / n / "metrics.json").read_text())["claims"]}
                    for n in (FRESH, STALE))
    assert f"Doubled: {format_value(fresh['doubled']['measured'])} (pass)." in text
    assert f"Negative: {format_value(stale['negative']['measured'])} (FAIL)." in text
    assert f"Folder: {fresh['figures_dir']['measured']}." in text               # reported: the value alone
    assert "{{" not in text


def test_dict_valued_claims_read_inline_and_render_as_tables_and_keys_are_identifiers():
    """A claim's substitution is one line that may stand in a sentence; its ``_table`` substitution is the table."""
    nested = {"id": "cost", "measured": {"model A": {"ACE": 1.5, "eNTK": 20.0}, "model B": {"ACE": 0.25, "eNTK": 3.0}},
              "pass": None}
    assert publish.measured_markdown(nested) == "model A: ACE 1.5, eNTK 20; model B: ACE 0.25, eNTK 3"
    assert publish.measured_table(nested).splitlines() == publish.table_box([
        "|  | ACE | eNTK |", "|---|---:|---:|", "| model A | 1.5 | 20 |", "| model B | 0.25 | 3 |"])
    flat = {"id": "t", "measured": {"ace": 2.0, "entk": 8.25}, "pass": None}
    assert publish.measured_markdown(flat) == "ace: 2, entk: 8.25"
    assert publish.measured_table(flat).splitlines() == publish.table_box(
        ["|  | value |", "|---|---:|", "| ace | 2 |", "| entk | 8.25 |"])
    assert publish.measured_markdown({"id": "x", "measured": 0.91234, "pass": False}) == "0.9123 (FAIL)"
    assert publish.measured_table({"id": "x", "measured": 0.91234, "pass": False}) == ""
    assert publish.substitution_key("04_llm_agreement_axis", "core_auroc[gemma-3-270m]") == \
        "claim_04_core_auroc_gemma_3_270m_"


def test_environment_block_records_versions_git_and_model_files(tmp_path, monkeypatch):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "a.txt").write_text("a")
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "a"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    weights = tmp_path / "model.gguf"
    weights.write_bytes(bytes(range(256)) * 4097)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(runinfo, "_models", {})
    runinfo.record_model("tiny", "a test file", weights)
    claims = Claims("nb", parameters={})
    claims.report("x", 1.0, kind="paper", statistic="a figure")
    env = json.loads(claims.write(tmp_path / "m.json").read_text())["environment"]
    assert ENVIRONMENT_KEYS <= set(env)
    assert env["commit"] == head and env["dirty"] is False
    assert env["models"] == [{"name": "tiny", "source": "a test file", "file": "model.gguf",
                              "bytes": 256 * 4097, "sha256": hashlib.sha256(weights.read_bytes()).hexdigest()}]
    (tmp_path / "a.txt").write_text("b")
    assert runinfo.git_state()["dirty"] is True


def test_api_reference_has_a_page_for_every_module():
    pages = list((REPO / "book" / "api").glob("corekit*.md"))
    documented = {m for p in pages for m in re.findall(r"automodule:: (corekit[\w.]*)", p.read_text())}
    library = REPO / "lib" / "corekit"
    modules = {"corekit." + ".".join(p.relative_to(library).with_suffix("").parts)
               for p in library.rglob("*.py") if p.stem not in ("__init__", "__main__")}
    assert modules <= documented, f"modules without a page in book/api/: {sorted(modules - documented)}"
    assert {f"book/api/{p.stem}" for p in pages} <= set(notebooks.toc_files(REPO))


# --------------------------------------------------------------------------------------------
# The committed published runs (results/)


PUBLISHED = sorted(p.parent.name for p in (REPO / "results").glob("*/metrics.json"))


@pytest.mark.parametrize("name", PUBLISHED)
def test_published_run_is_complete(name):
    run = publish.published_run(REPO, name)
    metrics = run.metrics
    assert metrics["notebook"] == name and metrics["profile"] in notebooks.PROFILES
    assert ENVIRONMENT_KEYS <= set(metrics.get("environment", {})), f"{name}: no environment block"
    assert run.ipynb.is_file() and run.ipynb.stat().st_size <= publish.SIZE_WARNING_BYTES
    if publish.stale_reason(notebooks.Notebook(REPO, name), metrics) is not None:
        return                                  # a stale run is shown with a warning; its claims are the old ones
    declared = {spec.id: spec.kind for spec in notebooks.chapter_module(name).CLAIMS}

    def template(claim_id: str) -> str:
        """The declared id of a published one: 'core_auroc[gemma-3-270m]' is 'core_auroc[{model}]' where declared so."""
        return claim_id if claim_id in declared else re.sub(r"\[[^\],]+", "[{model}", claim_id, count=1)

    undeclared = [c["id"] for c in metrics["claims"] if template(c["id"]) not in declared]
    assert not undeclared, f"{name}: the published run has claims its chapter module does not declare: {undeclared}"
    wrong = [c["id"] for c in metrics["claims"] if c.get("kind") != declared[template(c["id"])]]
    assert not wrong, f"{name}: claims without their declared kind: {wrong}"


@pytest.mark.parametrize("name", PUBLISHED)
def test_published_claims_are_tests_with_nulls_and_reasons(name):
    """A current published run carries verdicts; every tested claim has a null (that the verdict respects) or a
    no-null reason from the fixed list, and every verdict but pass and reported a sentence of reason."""
    metrics = publish.published_run(REPO, name).metrics
    if all("verdict" not in c for c in metrics["claims"]):
        assert publish.stale_reason(notebooks.Notebook(REPO, name), metrics) is not None, \
            f"{name}: a current published run must carry verdicts with nulls (republish it)"
        return
    for claim in metrics["claims"]:
        verdict = claim["verdict"]
        assert verdict in VERDICTS, f"{name} {claim['id']}: unknown verdict {verdict!r}"
        if verdict == "reported":
            continue
        assert claim.get("null") or claim.get("no_null") in NO_NULL, f"{name} {claim['id']}: no null"
        if verdict == "pass":
            assert not any(n["passes"] for n in claim.get("null") or []), f"{name} {claim['id']}: its null passes"
        else:
            reason = claim.get("reason") or ""
            assert len(reason.split()) >= 5 and "{" not in reason, f"{name} {claim['id']}: no reason in words"


# --------------------------------------------------------------------------------------------
# The GPU script, dry run on the CPU


GPU_STEPS = ["B1", "B3", "B4", "B6", "01_paper", "05_paper", "06_paper", "02_slice", "B2"]


def gpu_check(*args: str, timeout: float = DRY_RUN_TIMEOUT_S) -> subprocess.CompletedProcess:
    """Return the finished ``scripts/gpu-check.sh ARGS`` run with this Python."""
    return subprocess.run(["bash", str(REPO / "scripts" / "gpu-check.sh"), *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHON": sys.executable})


def test_gpu_check_skips_what_the_budget_does_not_cover(tmp_path):
    done = gpu_check("--dry-run", "--budget", "0", "--out", str(tmp_path))
    assert done.returncode == 1
    steps = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == GPU_STEPS and all(s["skipped"] for s in steps)
    assert f"{len(GPU_STEPS)} failed" in (tmp_path / "gpu-check.log").read_text()


@pytest.mark.notebook
def test_gpu_check_dry_run(tmp_path):
    out = tmp_path / "gpu"
    done = gpu_check("--dry-run", "--out", str(out))
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    steps = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == GPU_STEPS
    assert all(s["status"] == 0 for s in steps)
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in records) == ["B1", "B2", "B3", "B4", "B6"]
    subprocess.run(["tar", "-xzf", str(out / "runs.tar.gz"), "-C", str(tmp_path)], check=True)
    for name in ("01_markov_cores", "05_entk_mlp_modular", "06_entk_transformer_modular", "02_grokking_cores"):
        metrics = json.loads((tmp_path / "runs" / f"{name}.metrics.json").read_text())
        assert metrics["claims"] and ENVIRONMENT_KEYS <= set(metrics["environment"])


def test_declared_claim_ids_are_the_chapter_modules_claims():
    """The ids a notebook records are those its chapter module declares (``CLAIMS``); a notebook without a chapter
    module declares none."""
    from corekit.chapters import markov_cores

    assert publish.declared_claim_ids("01_markov_cores") == [spec.id for spec in markov_cores.CLAIMS]
    assert "model_accuracy" in publish.declared_claim_ids("01_markov_cores")
    assert publish.declared_claim_ids("00_tiny") == []


def test_each_chapter_declares_its_headline_figure_and_whether_it_tests_a_paper():
    """Chapter knowledge lives with the chapter (its notebook header), not in the publisher: every chapter names a
    headline figure its published run has, and only 08 and 09 declare that they test the book's own hypotheses."""
    names = notebooks.toc_notebooks(REPO)
    for name in names:
        declared = notebooks.Notebook(REPO, name).declared
        assert declared.get("headline_figure") and declared.get("headline_caption"), name
        run = publish.published_run(REPO, name)
        if run.exists():
            assert declared["headline_figure"] in {p.stem for p in run.figure_files()}, name
    own = {"08_two_lenses", "09_merging_cores"}
    assert publish.own_hypotheses(REPO, names) == own
    assert publish.papers_of(REPO, names) == {n: "ACE" if n < "05" else "eNTK" for n in names if n not in own}


def test_a_header_without_corekit_metadata_declares_nothing(tmp_path):
    root = make_repo(tmp_path, {FRESH: tiny_notebook(FRESH)})
    assert notebooks.Notebook(root, FRESH).declared == {}
    nb = notebooks.Notebook(root, FRESH)
    nb.py.write_text("# ---\n# jupyter:\n#   corekit:\n#     own_hypotheses: true\n# ---\n" + nb.py.read_text())
    assert nb.declared == {"own_hypotheses": True}
