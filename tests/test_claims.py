"""Claims: the metrics-file schema, failing claims shown (not raised), rendering."""
import json

import numpy as np
import pytest
import torch

from corekit.runs.claims import Claims, verdict_of
from corekit.runs.claims_view import claims_html
from corekit.verdicts import (
    NO_NULL,
    Null,
    at_least,
    at_most,
    between,
    equal_to,
    format_value,
    holds,
    interval_above,
    interval_below,
    interval_contains,
    verdict,
)


def test_metrics_file_schema_and_values(tmp_path):
    claims = Claims("nb", parameters={"seeds": [0, 1], "T": np.eye(2), "output_dir": str(tmp_path)})
    claims.check("good", np.float32(0.995), at_least(0.99), kind="paper", statistic="accuracy", paper=0.99,
                 null=Null("untrained model", 0.25))
    claims.check("bad", torch.tensor(2), equal_to(3), kind="check", statistic="rank", paper=3, no_null="numerical check")
    claims.report("info", 0.5 + 0.25j, kind="paper", statistic="a complex number")
    path = claims.write()
    assert path == tmp_path / "nb.metrics.json"
    data = json.loads(path.read_text())
    assert set(data) == {"notebook", "parameters", "runtime_s", "threads", "claims", "environment"}
    assert data["threads"] == torch.get_num_threads()
    assert data["parameters"] == {"seeds": [0, 1], "T": [[1.0, 0.0], [0.0, 1.0]]}
    assert [c["verdict"] for c in data["claims"]] == ["pass", "fail", "reported"]
    assert [c["pass"] for c in data["claims"]] == [True, False, None]
    assert data["claims"][0]["null"] == [{"what": "untrained model", "value": 0.25, "passes": False}]
    assert data["claims"][0]["target"] == "accuracy ≥ 0.99"
    assert data["claims"][1]["no_null"] == "numerical check"
    assert data["claims"][1]["reason"] == "Fails: measured 2 does not satisfy = 3."
    assert data["claims"][2]["measured"] == [0.5, 0.25]
    assert set(data["claims"][2]) == {"id", "kind", "paper", "measured", "target", "verdict", "pass"}


@pytest.mark.parametrize("value, bound, nulls, undecided, expected", [
    (0.95, at_least(0.9), [Null("random subspace", 0.1)], None, "pass"),
    (0.95, at_least(0.9), [Null("random subspace", 0.1), Null("model at initialisation", 0.93)], None,
     "uninformative"),
    (0.85, at_least(0.9), [Null("random subspace", 0.1)], None, "fail"),
    (0.85, at_least(0.9), [Null("random subspace", 0.95)], None, "fail"),            # a fail stays a fail
    (0.95, at_least(0.9), [Null("random subspace", 0.1)], "the fit rank is within 2 of p − 1", "undecided"),
    (0.03, at_most(0.05), [Null("a model against itself", 1.0)], None, "pass"),     # closeness to chance
    (0.03, at_most(0.05), [Null("an untrained pair", 0.04)], None, "uninformative"),
    (3, equal_to(3), [Null("untrained models", {"0": 3, "1": 2})], None, "uninformative"),  # one null case passes
    (3, equal_to(3), [Null("untrained models", {"0": 2, "1": 2})], None, "pass"),
    (1.2, between(0.8, 1.25), [Null("ω = 0 branch", 2.0)], None, "pass"),
    (float("nan"), at_least(0.0), [Null("x", -1.0)], None, "fail"),                 # a number that is not one fails
    (True, holds(), [Null("shuffled labels", False)], None, "pass"),
])
def test_verdict_logic_on_hand_made_cases(value, bound, nulls, undecided, expected):
    result, reason, _ = verdict(value, bound, nulls=tuple(nulls), undecided=undecided)
    assert result == expected
    assert (reason is None) == (expected == "pass")


def test_interval_bounds_test_the_interval_not_the_point():
    assert verdict(-0.935, interval_contains(-1.02), interval=(-0.989, -0.864))[0] == "fail"
    assert verdict(-0.98, interval_contains(-1.02), interval=(-1.05, -0.91))[0] == "pass"
    assert verdict(0.05, interval_above(0.0), interval=(0.037, 0.067),
                   nulls=(Null("PCA against itself", 0.0, interval=(-0.01, 0.01)),))[0] == "pass"
    assert verdict(0.05, interval_above(0.0), interval=(-0.01, 0.067))[0] == "fail"
    with pytest.raises(ValueError, match="interval"):
        interval_below(0.0).test(0.1)


def test_a_claim_over_models_holds_for_every_model_and_reports_k_of_n_with_a_wilson_interval():
    from scipy.stats import binomtest

    claims = Claims("nb", parameters={})
    rec = claims.check("per_seed", {"0": 0.99, "1": 0.95, "2": 0.7}, at_least(0.9), kind="paper", statistic="alignment",
                       covers="every seed the profile trains", null=Null("models at initialisation",
                                                                         {"0": 0.2, "1": 0.3, "2": 0.1}))
    assert rec.verdict == "fail"
    assert rec.models["k"] == 2 and rec.models["n"] == 3 and rec.models["failing"] == ["2"]
    ci = binomtest(2, 3).proportion_ci(confidence_level=0.95, method="wilson")
    np.testing.assert_allclose(rec.models["wilson95"], [ci.low, ci.high], atol=1e-4)
    assert "2 of 3 models satisfy ≥ 0.9; not 2 (0.7)" in rec.reason
    assert rec.target == "alignment ≥ 0.9, for every one of every seed the profile trains (only 3 models)"
    ok = claims.check("all_seeds", {s: 0.95 for s in range(6)}, at_least(0.9), kind="paper", statistic="alignment",
                      covers="every seed", null=Null("random", 0.1))
    assert ok.verdict == "pass" and "only" not in ok.target and ok.models["k"] == 6
    with pytest.raises(ValueError, match="covers"):
        claims.check("no_cover", {"0": 1.0}, at_least(0.9), kind="paper", statistic="x", null=Null("random", 0.1))


def test_every_tested_claim_needs_a_null_or_a_reason_from_the_fixed_list():
    claims = Claims("nb", parameters={})
    with pytest.raises(ValueError, match="has no null"):
        claims.check("bare", 1.0, at_least(0.5), kind="paper", statistic="x")
    with pytest.raises(ValueError, match="no_null must be one of"):
        claims.check("free_text", 1.0, at_least(0.5), kind="check", statistic="x", no_null="I did not have time")
    with pytest.raises(ValueError, match="only a check may go without a null"):
        claims.check("unchecked", 1.0, at_least(0.5), kind="paper", statistic="x", no_null="provenance")
    with pytest.raises(ValueError, match="kind must be one of"):
        claims.check("kindless", 1.0, at_least(0.5), kind="headline", statistic="x", null=Null("r", 0.0))
    with pytest.raises(ValueError, match="given one"):
        claims.check("both", 1.0, at_least(0.5), kind="check", statistic="x", null=Null("r", 0.0), no_null="provenance")
    with pytest.raises(ValueError, match="statistic"):
        claims.check("what", 1.0, at_least(0.5), kind="check", statistic=" ", no_null="provenance")
    assert claims.check("residual", 1e-6, at_most(1e-3), kind="check", statistic="residual",
                        no_null="numerical check").verdict == "pass"
    assert set(NO_NULL) == {"numerical check", "provenance"}


def test_every_verdict_but_pass_has_a_reason_that_states_the_value_and_the_bound():
    claims = Claims("nb", parameters={})
    claims.check("fails", 1.0, equal_to(2), kind="check", statistic="rank", no_null="numerical check",
                 why="the fit rank reached p − 1")
    claims.check("passes", 2.0, equal_to(2), kind="paper", statistic="rank", null=Null("untrained", 5), why="not shown")
    claims.check("weak", 2.0, equal_to(2), kind="paper", statistic="rank", null=Null("untrained", 2))
    claims.check("open", 2.0, equal_to(2), kind="paper", statistic="rank", null=Null("untrained", 5),
                 undecided="p = 31 leaves no room below p − 1; the paper profile decides it (≈ 8 h here)")
    records = {r["id"]: r for r in claims.as_dict()["claims"]}
    assert records["fails"]["reason"] == "Fails: measured 1 does not satisfy = 2. The fit rank reached p − 1."
    assert "reason" not in records["passes"]
    assert records["weak"]["reason"].startswith("Uninformative: measured 2 satisfies = 2, but so does the null "
                                                "(untrained gives 2)")
    assert records["open"]["reason"].startswith("Undecided: p = 31 leaves no room below p − 1")
    assert "measured 2 satisfies = 2" in records["open"]["reason"]
    html = claims_html(claims.as_dict()["claims"])
    assert "Fails: measured 1" in html and "corekit-uninformative" in html and "undecided" in html
    with pytest.raises(ValueError, match="why for claim 'empty'"):
        claims.check("empty", 0.0, equal_to(1), kind="check", statistic="x", no_null="provenance", why=" ")


def test_table_shows_nulls_escapes_pipes_and_rejects_duplicate_ids():
    claims = Claims("nb", parameters={})
    claims.check("x", 1.0, equal_to(2), kind="paper", statistic="a | b", paper=2, null=Null("random", 0.0))
    md = claims.table()._repr_markdown_()
    assert md.splitlines()[0] == "| claim | paper | measured | null | target | verdict |"
    assert "| `x` | 2 | 1 | random: 0 | a \\| b = 2 (Fails: measured 1 does not satisfy = 2.) | FAIL |" in md
    html = claims_html(claims.as_dict()["claims"])
    assert "FAIL" in html and "corekit-claims" in html and "random: 0" in html
    with pytest.raises(ValueError, match="twice"):
        claims.report("x", 2.0, kind="paper", statistic="again")


def test_old_metrics_files_read_with_their_pass_field():
    assert [verdict_of({"pass": v}) for v in (True, False, None)] == ["pass", "fail", "reported"]
    assert verdict_of({"pass": None, "verdict": "uninformative"}) == "uninformative"


NOTEBOOK_WITH_PARAMETERS = """\
# %% [markdown]
# # A notebook

# %% tags=["parameters"]
scale = 2.0  # a float
names = ["a", "b"]  # a list

# %%
unrelated = 1
"""


def test_claims_capture_the_parameters_cell_from_the_callers_globals(tmp_path, monkeypatch):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "99_demo.py").write_text(NOTEBOOK_WITH_PARAMETERS)
    monkeypatch.delenv("COREKIT_ROOT", raising=False)
    monkeypatch.chdir(tmp_path / "notebooks")
    namespace = {"Claims": Claims, "scale": 3.5, "names": ["c"], "unrelated": 7}       # 3.5: an injected value
    exec("claims = Claims('99_demo'); claims.resolve(device='cpu')", namespace)
    assert namespace["claims"].parameters == {"scale": 3.5, "names": ["c"], "device": "cpu"}
    monkeypatch.chdir(tmp_path)                                                          # found below the root too
    assert Claims("99_demo", namespace={"scale": 1, "names": []}).parameters == {"scale": 1, "names": []}
    with pytest.raises(ValueError, match=r"declares the parameters \['names'\]"):
        Claims("99_demo", namespace={"scale": 1})
    with pytest.raises(FileNotFoundError, match="no 98_missing.py"):
        Claims("98_missing", namespace={})
    assert Claims("98_missing", {"x": 1}).parameters == {"x": 1}                        # explicit: as given


def table_cells(html_text: str) -> list[list[str]]:
    """Return the text of every row's cells of the first table in ``html_text`` (tags dropped, <br> as " | ")."""
    import re
    from html import unescape
    table = html_text[html_text.index("<table"):html_text.index("</table>")]
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table, flags=re.S)
    return [[unescape(re.sub(r"<[^>]+>", "", c.replace("<br>", " | ").replace("<wbr>", "")))
             for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, flags=re.S)] for row in rows]


def test_authors_values_get_their_own_column_in_markdown_and_a_labelled_line_in_html(tmp_path):
    claims = Claims("nb", parameters={})
    claims.report("plain", 1.0, kind="paper", statistic="a figure")
    assert "authors" not in claims.table()._repr_markdown_()
    claims.check("shared", 0.97, at_least(0.9), kind="paper", statistic="alignment", paper=0.99, authors=0.981,
                 null=Null("random", 0.1))
    md = claims.table()._repr_markdown_()
    assert md.splitlines()[0] == "| claim | paper | measured | authors' code | null | target | verdict |"
    assert "| `shared` | 0.99 | 0.97 | 0.981 | random: 0.1 | alignment ≥ 0.9 | pass |" in md
    rows = table_cells(claims_html(claims.as_dict()["claims"], "measured"))
    assert rows[0] == ["claim", "values", "null", "target", "verdict"]
    assert rows[2] == ["shared", "measured 0.97 | paper 0.99 | authors' code 0.981", "random: 0.1", "alignment ≥ 0.9",
                       "pass"]
    record = claims.as_dict()["claims"]
    assert "authors" not in record[0] and record[1]["authors"] == 0.981


def test_a_reason_and_values_from_elsewhere_show_and_a_long_value_is_summarised_above_its_fold(tmp_path):
    long_value = {f"model {i}": 0.5 + i / 100 for i in range(12)}
    record = {"id": "acc[a_b]", "measured": long_value, "target": "≥ 0.9", "verdict": "fail",
              "reason": "Fails: 12 of 12 models < 0.9 <here>.", "null": [{"what": "untrained", "value": 0.1}]}
    html = claims_html([record], "ours (cpu)", {"quick run": {"acc[a_b]": 0.4}, "other": {"x": 1}})
    rows = table_cells(html)
    assert rows[1][0] == "acc[a_b]"
    assert rows[1][1] == "ours (cpu) 12 values, 0.5 (model 0) to 0.61 (model 11), median 0.555 | quick run 0.4"
    assert rows[1][3] == "≥ 0.9" and rows[1][4] == "FAIL"
    assert rows[2] == ["Fails: 12 of 12 models < 0.9 <here>."]                 # the reason, across the table below
    assert '<tr class="corekit-reason-row"><td data-label="why" colspan="5">' in html
    fold = html[html.index("<details"):]                                  # every value, one click away
    assert all(f"<th>model {i}</th>" in fold for i in range(12)) and "0.61" in fold


def test_results_page_takes_the_authors_column_from_the_oracle_record(tmp_path):
    import nbformat

    from corekit.runs.publish import Run, results_page
    folder = tmp_path / "results" / "02_demo"
    folder.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Demo")]), folder / "02_demo.ipynb")
    claims = Claims("02_demo", parameters={"p": 31})
    claims.check("r2_authors", 0.95, at_least(0.9), kind="paper", statistic="R²", null=Null("untrained", 0.2))
    claims.report("own", 1.0, kind="paper", statistic="a figure")
    (folder / "metrics.json").write_text(json.dumps({**claims.as_dict(), "profile": "cpu"}))
    run = Run("02_demo", folder / "02_demo.ipynb", folder / "metrics.json", folder / "figures", True)
    oracle_dir = tmp_path / "results" / "oracle"
    page = results_page({"02_demo": run}, {}, {}, oracle_dir=oracle_dir)
    assert not [c for row in table_cells(page[page.index("<table"):]) for c in row if "authors' code" in c]
    oracle_dir.mkdir()
    (oracle_dir / "02.json").write_text(json.dumps({"p": 31, "seeds": [0], "claims": {"r2_authors": 0.949}}))
    page = results_page({"02_demo": run}, {}, {}, oracle_dir=oracle_dir)
    rows = table_cells(page[page.index("<table"):])
    assert rows[1][:2] == ["r2_authors", "ours (cpu) 0.95 | authors' code 0.949"]
    assert "results/oracle/02.json" in page
    (oracle_dir / "02.json").write_text(json.dumps({"p": 53, "seeds": [0], "claims": {"r2_authors": 0.949}}))
    assert "0.949" not in results_page({"02_demo": run}, {}, {}, oracle_dir=oracle_dir)         # another modulus: not shown


def test_an_authors_record_on_other_checkpoints_is_marked_stale(tmp_path):
    import hashlib

    import nbformat

    from corekit.runs.publish import Run, results_page
    folder = tmp_path / "results" / "02_demo"
    folder.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Demo")]), folder / "02_demo.ipynb")
    checkpoints = tmp_path / "ckpt.pt"
    checkpoints.write_bytes(b"weights of this run")
    claims = Claims("02_demo", parameters={"p": 31})
    sha = claims.record_export("checkpoints", checkpoints)
    assert sha == hashlib.sha256(b"weights of this run").hexdigest()
    claims.check("r2_authors", 0.95, at_least(0.9), kind="paper", statistic="R²", null=Null("untrained", 0.2))
    metrics = {**claims.as_dict(), "profile": "cpu"}
    assert metrics["exports"] == {"checkpoints": {"file": "ckpt.pt", "sha256": sha}}
    (folder / "metrics.json").write_text(json.dumps(metrics))
    run = Run("02_demo", folder / "02_demo.ipynb", folder / "metrics.json", folder / "figures", True)
    oracle_dir = tmp_path / "results" / "oracle"
    oracle_dir.mkdir()
    record = {"p": 31, "seeds": [0], "checkpoints": "ckpt.pt", "claims": {"r2_authors": 0.949}}
    for made_on, stale in ((sha, False), ("0" * 64, True), (None, True)):
        (oracle_dir / "02.json").write_text(json.dumps({**record, "weights_sha256": made_on}))
        page = results_page({"02_demo": run}, {}, {}, oracle_dir=oracle_dir)
        assert ("0.949 (stale)" in page) == stale and ("**stale**" in page) == stale
        assert "0.949" in page


def test_claims_refuse_a_value_the_parameters_cell_does_not_accept(tmp_path, monkeypatch):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "99_demo.py").write_text(NOTEBOOK_WITH_PARAMETERS.replace(
        "scale = 2.0  # a float", "scale = 2.0  # range: (0, inf); a float"))
    monkeypatch.delenv("COREKIT_ROOT", raising=False)
    monkeypatch.chdir(tmp_path / "notebooks")
    with pytest.raises(ValueError, match=r"99_demo: parameter 'scale': expected a number > 0, got -0.05"):
        Claims("99_demo", namespace={"scale": -0.05, "names": ["c"]})            # as papermill injects it
    with pytest.raises(ValueError, match=r"parameter 'names': expected a list of strings, got \[1\]"):
        Claims("99_demo", namespace={"scale": 1.0, "names": [1]})
    assert Claims("99_demo", namespace={"scale": 0.5, "names": []}).parameters == {"scale": 0.5, "names": []}


def test_results_page_counts_each_verdict_and_keeps_targets_and_reasons_whole(tmp_path):
    import nbformat

    from corekit.runs.publish import Run, front_tally, results_page, verdict_line
    runs, long_statistic = {}, "a statistic that is much longer than any shortened value cell would keep, " * 3
    cases = {"pass": (1.0, Null("random", 0.0), None), "fail": (0.0, Null("random", 0.0), None),
             "uninformative": (1.0, Null("random", 1.0), None), "undecided": (1.0, Null("random", 0.0), "too small")}
    for name, verdicts in (("01_all", ["pass", "pass"]), ("02_some", ["pass", "fail", None, "uninformative"]),
                           ("03_none", ["fail", "undecided"])):
        folder = tmp_path / name
        folder.mkdir()
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"# {name}")]),
                       folder / f"{name}.ipynb")
        claims = Claims(name, parameters={})
        for i, v in enumerate(verdicts):
            if v is None:
                claims.report(f"c{i}", i, kind="paper", statistic=long_statistic)
                continue
            value, null, undecided = cases[v]
            claims.check(f"c{i}", value, at_least(0.5), kind="paper", statistic=long_statistic, null=null, undecided=undecided,
                         why="the fit rank reached p − 1")
        (folder / "metrics.json").write_text(json.dumps({**claims.as_dict(), "profile": "cpu"}))
        runs[name] = Run(name, folder / f"{name}.ipynb", folder / "metrics.json", folder / "figures", True)
    page = results_page(runs, {}, {})
    assert ("3 of 7 tested claims of the papers reproduce on the published runs (2 fail, 1 uninformative, "
            "1 undecided; 1 more figures") in page
    assert "hypotheses of this book" not in page
    own = Run("08_two_lenses", runs["02_some"].ipynb, runs["02_some"].metrics_path, runs["02_some"].figures, True)
    mixed = front_tally({"01_all": runs["01_all"], "03_none": runs["03_none"], "08_two_lenses": own}, {"08_two_lenses"})
    assert mixed.startswith("2 of 4 tested claims of the papers reproduce on the published runs (1 fail, "
                            "0 uninformative, 1 undecided; 0 more figures")
    assert mixed.endswith("Apart from them, the book's own hypotheses (chapters 08): 1 of 3 hold.")
    split = front_tally({"01_all": runs["01_all"], "03_none": runs["03_none"], "08_two_lenses": own}, {"08_two_lenses"},
                        {"01_all": "ACE", "03_none": "eNTK"})
    assert "By paper: ACE (chapters 01): 2 of 2; eNTK (chapters 03): 0 of 2." in split
    rows = [line for line in page.splitlines() if line.startswith("| {doc}`0")]
    assert [r.split(" | ")[2] for r in rows] == ["2 pass", "1 pass, 1 uninformative, 1 fail, 1 reported",
                                                 "1 fail, 1 undecided"]
    assert verdict_line(runs["01_all"].metrics) == "the paper's claims: all 2 pass"
    assert verdict_line(runs["02_some"].metrics) == ("the paper's claims: 1 of 3 pass (1 fail: `c1`; "
                                                      "1 uninformative: `c3`)")
    assert verdict_line(runs["03_none"].metrics) == "the paper's claims: 0 of 2 pass (1 fail: `c0`; 1 undecided: `c1`)"
    assert "{doc}`Chapter 02 <../notebooks/02_some>`. The paper's claims: 1 of 3 pass" in page
    assert page.count(long_statistic.strip()) == 8 and "…" not in page
    assert page.count("The fit rank reached p − 1.") == 4      # in the claims tables; the lists keep first sentences
    reasons = [line for line in page.splitlines() if line.startswith("- ")]
    assert reasons and all(line.rstrip().endswith((".", ")")) and "…" not in line for line in reasons)


def test_a_chapter_opens_with_its_verdict_counts_and_points_to_the_reasons():
    from corekit.runs.publish import verdict_box
    claims = Claims("nb", parameters={})
    claims.check("ok", 1.0, at_least(0.5), kind="paper", statistic="x", null=Null("random", 0.0))
    claims.check("weak", 1.0, at_least(0.5), kind="paper", statistic="y", null=Null("untrained", 0.9))
    claims.check("bad", 0.1, at_least(0.5), kind="paper", statistic="z", null=Null("random", 0.0))
    claims.report("fig", 3, kind="paper", statistic="a figure")
    box = verdict_box(claims.as_dict())
    assert box.startswith("**Verdict of this run.**")
    assert "Counts: 1 pass, 1 uninformative, 1 fail, 1 reported" in box
    assert "1 uninformative: `weak`" in box and "1 fail: `bad`" in box
    assert "each claim with its reason in the claims table" in box
    assert "but so does the null" not in box        # the reasons are the claims table's, not repeated above it
    assert "`ok`" not in box and "`fig`" not in box


def test_the_verdict_line_counts_each_kind_apart_and_names_what_does_not_pass():
    """A chapter's passing checks never make up for its failing paper claims: each group of kinds is counted alone."""
    from corekit.runs.publish import verdict_box, verdict_line
    claims = Claims("nb", parameters={})
    for i in range(5):
        claims.check(f"p{i}", 1.0 if i < 2 else 0.1, at_least(0.5), kind="paper", statistic="x",
                     null=Null("random", 0.0))
    claims.check("ext", 1.0, at_least(0.5), kind="extension", statistic="x", null=Null("random", 1.0))
    claims.check("trained", 1.0, at_least(0.5), kind="precondition", statistic="x", null=Null("untrained", 0.0))
    claims.check("residual", 1e-9, at_most(1e-6), kind="check", statistic="x", no_null="numerical check")
    claims.report("fig", 3, kind="paper", statistic="a figure")
    metrics = claims.as_dict()
    assert verdict_line(metrics, shown=2) == ("the paper's claims: 2 of 5 pass (3 fail: `p2`, `p3` and 1 more) · "
                                              "the book's own claims: 0 of 1 pass (1 uninformative: `ext`) · "
                                              "checks and preconditions: all 2 pass")
    assert verdict_line(metrics, own=True) == ("the book's hypotheses: 2 of 6 pass (3 fail: `p2`, `p3`, `p4`; "
                                               "1 uninformative: `ext`) · checks and preconditions: all 2 pass")
    assert "The paper's claims: 2 of 5 pass" in verdict_box(metrics)
    assert "The book's hypotheses: 2 of 6 pass" in verdict_box(metrics, own=True)
    only = Claims("nb", parameters={})
    only.report("fig", 3, kind="paper", statistic="a figure")
    assert verdict_line(only.as_dict()) == "reported only (no tested claim)"


def test_the_front_page_counts_only_paper_claims_as_reproduced(tmp_path):
    """A check or a precondition, however many pass, never enters the papers' count; extensions are counted apart."""
    import nbformat

    from corekit.runs.publish import Run, front_tally

    runs = {}
    for name, kinds in (("01_a", ["paper", "check", "precondition", "extension"]), ("02_b", ["paper", "check"])):
        folder = tmp_path / name
        folder.mkdir()
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"# {name}")]),
                       folder / f"{name}.ipynb")
        claims = Claims(name, parameters={})
        for i, kind in enumerate(kinds):
            if kind == "check":
                claims.check(f"c{i}", 1.0, at_least(0.5), kind=kind, statistic="x", no_null="numerical check")
            else:
                value = 0.0 if (name, kind) == ("02_b", "paper") else 1.0
                claims.check(f"c{i}", value, at_least(0.5), kind=kind, statistic="x", null=Null("r", 0.0))
        (folder / "metrics.json").write_text(json.dumps({**claims.as_dict(), "profile": "cpu"}))
        runs[name] = Run(name, folder / f"{name}.ipynb", folder / "metrics.json", folder / "figures", True)
    sentence = front_tally(runs, set(), {"01_a": "ACE", "02_b": "eNTK"})
    assert sentence.startswith("1 of 2 tested claims of the papers reproduce on the published runs (1 fail, ")
    assert "By paper: ACE (chapters 01): 1 of 1; eNTK (chapters 02): 0 of 1." in sentence
    assert "the book's own hypotheses (chapters 01): 1 of 1 hold." in sentence
    assert "Checks of the computation and preconditions of the claims (not counted above): 3 of 3 hold." in sentence


def test_a_record_without_a_kind_is_classified_by_its_no_null_and_its_chapter():
    from corekit.runs.claims import kind_of

    assert kind_of({"kind": "precondition"}) == "precondition"
    assert kind_of({"no_null": "provenance"}) == "check"
    assert kind_of({}, own=True) == "extension" and kind_of({}) == "paper"


def test_a_rounded_negative_zero_prints_as_zero():
    """Chapter 09's mean difference rounded to -0.0 printed "-0"; a sign without a digit behind it says nothing."""
    assert format_value(-0.0) == "0" and format_value(round(-1e-6, 4)) == "0"
    assert format_value(-1e-6) == "-1e-06" and format_value([-0.0, 0.25]) == "[0, 0.25]"
