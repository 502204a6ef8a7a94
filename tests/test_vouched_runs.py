"""The book vouches for what it publishes (issue 51, items 6 and 7; audit cases BK1, BK3, BK4, BK10).

``corekit book --published`` checks each run's metrics file against the run's own record of its claims (the claims
table its executed notebook displayed, and the digests ``--publish`` writes) and the types of its fields, refusing
one line naming the file; it reads ``results/`` under the lock ``--publish`` takes, so a publish during a build
waits for it (and a build waits for a publish), and a page never mixes two runs.
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import nbformat
import pytest
from tinyrepo import REPO, make_repo, run_in_process, tiny_notebook

from corekit.runs import notebooks, publish, vouch
from corekit.runs.claims import ClaimsTable
from corekit.verdicts import Claim

NAME = "00_tiny"
#: The claims of the tiny run: one pass, one fail with its reason.
CLAIMS = [Claim("doubled", 4.0, "2 × scale ≥ 2", "pass", paper=4.0),
          Claim("negative", {"seed 0": 2.0, "seed 1": 1.5}, "scale ≤ 0", "fail",
                reason="measured 2 does not satisfy ≤ 0")]


def write_run(ipynb: Path, metrics_path: Path, figures: Path, runtime_s: float = 1.0,
              claims: list[Claim] = CLAIMS) -> dict:
    """Write a run as its kernel would (its notebook displaying the claims table, its metrics, one figure); return
    the metrics."""
    from PIL import Image

    table = ClaimsTable(claims)._repr_markdown_()
    shown = nbformat.v4.new_output("execute_result", {"text/markdown": table, "text/plain": table}, execution_count=1)
    cells = [nbformat.v4.new_markdown_cell("# Tiny chapter"), nbformat.v4.new_code_cell("claims.table()",
                                                                                         outputs=[shown])]
    ipynb.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(cells=cells), ipynb)
    figures.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), "white").save(figures / "figure_0.png")
    metrics = {"notebook": NAME, "parameters": {"scale": 2.0}, "runtime_s": runtime_s, "threads": 1, "profile": "quick",
               "source_hash": "0" * 64, "environment": {"commit": "0123456789", "dirty": False, "threads": 1},
               "claims": [c.as_dict() for c in claims], "figures": ["figure_0.png"]}
    metrics_path.write_text(json.dumps(metrics, indent=2))
    return metrics


@pytest.fixture
def root(tmp_path) -> Path:
    """A book of one tiny chapter, no run published yet."""
    root = make_repo(tmp_path / "book", {NAME: tiny_notebook(NAME)})
    (root / "_config.yml").write_text("title: Tiny book\n")
    return root


def executed(tmp_path: Path, runtime_s: float = 1.0, claims: list[Claim] = CLAIMS) -> publish.Run:
    """Return a run executed into a fresh ``--out`` folder (as ``corekit run --out`` writes it)."""
    out = tmp_path / f"out-{runtime_s}"
    run = publish.executed_run(out, NAME)
    write_run(run.ipynb, run.metrics_path, run.figures, runtime_s, claims)
    return run


@pytest.fixture
def published(root, tmp_path) -> Path:
    """``root`` with a run published the way ``--publish`` does it (with its digests)."""
    publish.publish(root, executed(tmp_path))
    return root


@pytest.fixture
def legacy(root) -> Path:
    """``root`` with a run published before the digests: its metrics carry none."""
    run = publish.published_run(root, NAME)
    write_run(run.ipynb, run.metrics_path, run.figures)
    return root


def refusal(capsys, monkeypatch, root: Path, tmp_path: Path) -> str:
    """Return the one error line of ``corekit book --published`` on ``root``, refused before anything is staged."""
    def no_stage(*args, **kwargs):
        raise AssertionError("the book was staged from a run it could not vouch for")
    monkeypatch.setattr(publish, "stage_book", no_stage)
    code, _, err = run_in_process(capsys, monkeypatch, root, "book", "--published", "--out", str(tmp_path / "html"))
    assert code == 2 and err.count("\n") == 1 and err.startswith("corekit: error: ") and "Traceback" not in err, err
    return err


def edit_metrics(root: Path, edit) -> Path:
    """Apply ``edit`` to the published metrics of NAME (a dict, changed in place); return the file."""
    path = publish.published_run(root, NAME).metrics_path
    metrics = json.loads(path.read_text())
    edit(metrics)
    path.write_text(json.dumps(metrics, indent=2))
    return path


def flip_fail_to_pass(metrics: dict) -> None:
    """BK1: every fail set to pass, its reason removed (and ``pass`` set to agree)."""
    for claim in metrics["claims"]:
        if claim["verdict"] == "fail":
            claim.update(verdict="pass", **{"pass": True})
            claim.pop("reason", None)


def delete_failing(metrics: dict) -> None:
    """BK1: the claims that do not pass deleted."""
    metrics["claims"] = [c for c in metrics["claims"] if c["verdict"] == "pass"]


def test_publishing_writes_the_digests_of_the_claims_and_of_the_notebooks_table(published):
    run = publish.published_run(published, NAME)
    metrics = run.metrics
    assert metrics[vouch.CLAIMS_DIGEST] == vouch.claims_digest(metrics["claims"])
    assert metrics[vouch.TABLE_DIGEST] == vouch.table_digest(vouch.notebook_claims_table(run.ipynb))
    publish.check_runs(published, {NAME: run})                            # vouched for as published


@pytest.mark.parametrize("kind", ["published", "legacy"])
@pytest.mark.parametrize("edit, words", [
    (flip_fail_to_pass, "negative (pass here, FAIL in the table)"),
    (delete_failing, "the file lacks negative (1 claims here, 2 in the table)"),
])
def test_an_edited_verdict_or_a_deleted_claim_is_refused(request, kind, edit, words, tmp_path, capsys, monkeypatch):
    """BK1: the metrics no longer match the notebook's own claims table; with digests, they no longer match those."""
    root = request.getfixturevalue(kind)
    path = edit_metrics(root, edit)
    err = refusal(capsys, monkeypatch, root, tmp_path)
    if kind == "published":
        assert err == (f"corekit: error: {path}: its claims do not match their digest (claims_sha256); edited after "
                       f"the run? publish the run again (corekit run {NAME} --publish)\n")
    else:
        assert err.startswith(f"corekit: error: {path}: its claims do not match the claims table of {NAME}.ipynb (")
        assert words in err, err


def test_a_digest_recomputed_after_an_edit_still_meets_the_notebooks_table(published, tmp_path, capsys, monkeypatch):
    def flip_and_sign(metrics):
        flip_fail_to_pass(metrics)
        metrics[vouch.CLAIMS_DIGEST] = vouch.claims_digest(metrics["claims"])
    path = edit_metrics(published, flip_and_sign)
    err = refusal(capsys, monkeypatch, published, tmp_path)
    assert f"{path}: its claims do not match the claims table of {NAME}.ipynb (other verdicts: negative" in err


def test_a_run_without_digests_must_match_the_tables_values(legacy, tmp_path, capsys, monkeypatch):
    path = edit_metrics(legacy, lambda m: m["claims"][1]["measured"].update({"seed 1": 0.5}))
    err = refusal(capsys, monkeypatch, legacy, tmp_path)
    assert f"{path}: its claims do not match the claims table of {NAME}.ipynb (other measured values: negative)" in err


def test_an_edited_claims_table_is_refused(published, tmp_path, capsys, monkeypatch):
    ipynb = publish.published_run(published, NAME).ipynb
    ipynb.write_text(ipynb.read_text().replace("| FAIL |", "| pass |"))
    err = refusal(capsys, monkeypatch, published, tmp_path)
    assert f"{ipynb}: its claims table is not the one published with it (claims_table_sha256 in metrics.json)" in err


def test_a_run_with_neither_digest_nor_claims_table_is_refused(legacy, tmp_path, capsys, monkeypatch):
    run = publish.published_run(legacy, NAME)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Tiny")]), run.ipynb)
    err = refusal(capsys, monkeypatch, legacy, tmp_path)
    assert f"{run.metrics_path}: no digest of its claims (claims_sha256) and {NAME}.ipynb displays no claims table" in err


@pytest.mark.parametrize("field, value, words", [
    ("runtime_s", "31 s", "'runtime_s' must be a number of seconds (finite, not negative), got the str \"31 s\""),   # BK3
    ("environment", "cpu", "'environment' must be an object ({...}), got the str \"cpu\""),                          # BK4
    ("threads", "2", "'threads' must be a whole number, not negative, got the str \"2\""),
    ("environment.dirty", "no", "'environment.dirty' must be true or false, got the str \"no\""),
    ("environment.commit", 12345, "'environment.commit' must be text (a JSON string), got the int 12345"),
    ("claims.0.target", 4, "'claims[0].target' must be text (a JSON string), got the int 4"),
    ("claims.1.null", {"what": "x"}, "'claims[1].null' must be a list ([...]), got the dict {\"what\": \"x\"}"),
])
@pytest.mark.parametrize("kind", ["published", "legacy"])
def test_a_field_of_the_wrong_type_is_one_line_naming_the_file(request, kind, field, value, words, tmp_path, capsys,
                                                               monkeypatch):
    root = request.getfixturevalue(kind)

    def set_field(metrics):
        *parents, key = field.split(".")
        target = metrics
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        target[key] = value
    path = edit_metrics(root, set_field)
    err = refusal(capsys, monkeypatch, root, tmp_path)
    assert err == f"corekit: error: {path}: a field of the wrong type: {words}\n"


def test_a_verdict_that_its_pass_contradicts_is_refused(legacy, tmp_path, capsys, monkeypatch):
    path = edit_metrics(legacy, lambda m: m["claims"][1].update({"pass": True}))
    err = refusal(capsys, monkeypatch, legacy, tmp_path)
    assert err == f"corekit: error: {path}: claim 'negative' has the verdict 'fail' but pass: true\n"


def test_publish_refuses_a_run_whose_metrics_contradict_its_notebook(root, tmp_path):
    publish.publish(root, executed(tmp_path))
    before = publish.published_run(root, NAME).metrics_path.read_bytes()
    run = executed(tmp_path, runtime_s=2.0)
    metrics = json.loads(run.metrics_path.read_text())
    flip_fail_to_pass(metrics)
    run.metrics_path.write_text(json.dumps(metrics))
    with pytest.raises(publish.Problems, match="other verdicts: negative .*; not published"):
        publish.publish(root, run)
    assert publish.published_run(root, NAME).metrics_path.read_bytes() == before
    assert sorted(p.name for p in (root / "results").iterdir()) == [NAME]


def test_a_published_run_of_no_chapter_is_refused_in_one_line(published, tmp_path, capsys, monkeypatch):
    """BK1's extra folder: a copy of a run under a name no notebook has, every verdict pass, is shown nowhere and
    vouched for by nothing; the build refuses it, naming the folder, and nothing is staged."""
    stray = published / "results" / "10_extra_chapter"
    write_run(stray / "10_extra_chapter.ipynb", stray / "metrics.json", stray / "figures",
              claims=[Claim("doubled", 4.0, "2 × scale ≥ 2", "pass", paper=4.0)])
    (published / "results" / "oracle").mkdir()                             # not named as a run: not a chapter's
    err = refusal(capsys, monkeypatch, published, tmp_path)
    assert err == (f"corekit: error: {stray}: a published run of no chapter of this book (no notebooks/NAME.py of that "
                   "name, not in _toc.yml), which the book can neither show nor vouch for; move it out of results/ or "
                   "add the chapter\n")
    assert not (tmp_path / "html").exists() or not list((tmp_path / "html").iterdir())


def test_the_committed_results_hold_no_run_of_no_chapter():
    assert publish.stray_runs(REPO, notebooks.toc_notebooks(REPO)) == []


def test_the_committed_runs_match_their_notebooks_claims_tables():
    for name in notebooks.toc_notebooks(REPO):
        run = publish.published_run(REPO, name)
        if run.exists():
            assert publish.vouched_problems(run) == [], name


# --------------------------------------------------------------------------------------------
# BK10: one run per page, whatever publishes meanwhile


def staged_runtime(out: Path) -> float:
    """Return the runtime the staged chapter's record shows (from the page's first cell after its title)."""
    staged = nbformat.read(out / "source" / "notebooks" / f"{NAME}.ipynb", as_version=4)
    record = next(c.source for c in staged.cells if "corekit-run-record" in c.metadata.get("tags", []))
    return float(record.split("**runtime** ")[1].split(" s")[0])


@pytest.fixture
def no_html(monkeypatch):
    """Stop ``corekit book --published`` before ``jupyter-book build`` (the staged source is what these tests read)."""
    monkeypatch.setattr(publish, "build_html", lambda stage, out: out / "_build" / "html")


def test_a_publish_during_a_build_waits_until_the_build_has_read_results(published, tmp_path, capsys, monkeypatch,
                                                                          no_html):
    """BK10: the racer publishes a 2-second run while the build decorates the 1-second one; it waits for the build."""
    racer_done = threading.Event()
    newer = executed(tmp_path, 2.0)

    def publish_newer():                                                    # as `corekit run --publish` does
        with publish.results_locked(published):
            publish.publish(published, newer)
        racer_done.set()
    racer = threading.Thread(target=publish_newer)
    decorate = publish.decorate

    def decorate_during_a_publish(root, stage, runs, quick):
        racer.start()
        time.sleep(1.0)
        assert not racer_done.is_set(), "a publish replaced results/ while the book read it"
        decorate(root, stage, runs, quick)

    monkeypatch.setattr(publish, "decorate", decorate_during_a_publish)
    out = tmp_path / "html"
    publish.build_published(published, out, tmp_path / "no-quick-runs", fallback=False)
    racer.join(30)
    assert racer_done.is_set()
    assert staged_runtime(out) == 1.0                                       # the run the build read, whole
    assert publish.published_run(published, NAME).metrics["runtime_s"] == 2.0
    assert "corekit: waiting for" in capsys.readouterr().err


def test_a_build_during_a_publish_waits_for_it_and_shows_the_new_run(published, tmp_path, capsys, no_html):
    out = tmp_path / "html"
    build = threading.Thread(target=publish.build_published,
                             args=(published, out, tmp_path / "no-quick-runs", False))
    with publish.results_locked(published):                                # a publish under way
        build.start()
        time.sleep(1.0)
        assert build.is_alive() and not (out / "source").exists(), "the build read results/ during a publish"
        publish.publish(published, executed(tmp_path, 2.0))
    build.join(60)
    assert not build.is_alive()
    assert staged_runtime(out) == 2.0
    assert "another corekit command is publishing to it" in capsys.readouterr().err


def test_a_value_the_table_rounds_to_a_whole_number_is_still_compared_to_four_digits(legacy, tmp_path, capsys,
                                                                                      monkeypatch):
    """The table writes 2.0 as "2": an edit to 1.6 is within half a unit of "2" but not within its 4 digits."""
    path = edit_metrics(legacy, lambda m: m["claims"][1]["measured"].update({"seed 0": 1.6}))
    err = refusal(capsys, monkeypatch, legacy, tmp_path)
    assert f"{path}: its claims do not match the claims table of {NAME}.ipynb (other measured values: negative)" in err


def nudged(value):
    """Return ``value`` with every number in it moved away from zero by 1 % plus 0.01 (so that 0 moves too, and −1 is
    not moved back onto itself)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return value * 1.01 + (0.01 if value >= 0 else -0.01)
    if isinstance(value, dict):
        return {k: nudged(v) for k, v in value.items()}
    return [nudged(v) for v in value] if isinstance(value, list) else value


@pytest.mark.parametrize("name", [n for n in notebooks.toc_notebooks(REPO) if publish.published_run(REPO, n).exists()])
def test_any_measured_value_of_a_committed_run_moved_by_one_percent_is_refused(name):
    run = publish.published_run(REPO, name)
    digests = (vouch.CLAIMS_DIGEST, vouch.TABLE_DIGEST)      # a run published with them fails on them first
    metrics = {k: v for k, v in run.metrics.items() if k not in digests}
    for i, claim in enumerate(metrics["claims"]):
        if nudged(claim["measured"]) == claim["measured"]:
            continue                                                      # a text, a flag: nothing to move
        edited = {**metrics, "claims": [*metrics["claims"][:i], {**claim, "measured": nudged(claim["measured"])},
                                        *metrics["claims"][i + 1:]]}
        problem = vouch.table_problem(name, run.metrics_path, run.ipynb, edited)
        assert problem and f"other measured values: {claim['id']}" in problem, claim["id"]
