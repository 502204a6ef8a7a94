"""Claims: the metrics-file schema, failing claims shown (not raised), rendering."""
import json

import numpy as np
import pytest
import torch

from corekit.claims import Claims


def test_metrics_file_schema_and_values(tmp_path):
    claims = Claims("nb", parameters={"seeds": [0, 1], "T": np.eye(2), "output_dir": str(tmp_path)})
    claims.add("good", np.float32(0.995), paper=0.99, target="≥ 0.99", passed=True)
    claims.add("bad", torch.tensor([1, 2]), paper=3, target="= 3", passed=np.bool_(False))
    claims.add("info", 0.5 + 0.25j, target="reported")
    path = claims.write()
    assert path == tmp_path / "nb.metrics.json"
    data = json.loads(path.read_text())
    assert set(data) == {"notebook", "parameters", "runtime_s", "threads", "claims", "environment"}
    assert data["threads"] == torch.get_num_threads()
    assert data["parameters"] == {"seeds": [0, 1], "T": [[1.0, 0.0], [0.0, 1.0]]}
    assert [c["pass"] for c in data["claims"]] == [True, False, None]
    assert data["claims"][1]["measured"] == [1, 2]
    assert data["claims"][2]["measured"] == [0.5, 0.25]
    assert all(set(c) == {"id", "paper", "measured", "target", "pass"} for c in data["claims"])


def test_why_is_kept_for_a_failing_claim_only_and_shown(tmp_path):
    claims = Claims("nb", parameters={})
    claims.add("fails", 1.0, target="= 2", passed=False, why="the fit rank reached p - 1")
    claims.add("passes", 2.0, target="= 2", passed=True, why="not a failure")
    claims.add("reported", 3.0, target="reported", why="not tested")
    records = json.loads(claims.write(tmp_path / "m.json").read_text())["claims"]
    assert [r.get("why") for r in records] == ["the fit rank reached p - 1", None, None]
    assert "why it fails: the fit rank reached p - 1" in claims.table()._repr_html_()
    assert "(why it fails: the fit rank reached p - 1) | FAIL |" in claims.table()._repr_markdown_()
    with pytest.raises(ValueError, match="why for claim 'empty'"):
        claims.add("empty", 0.0, target="= 1", passed=False, why=" ")


def test_table_shows_failures_and_rejects_duplicate_ids():
    claims = Claims("nb", parameters={})
    claims.add("x", 1.0, target="= 2", passed=False, paper=2)
    html = claims.table()._repr_html_()
    assert "FAIL" in html and "corekit-claims" in html
    assert "| `x` | 2 | 1 | = 2 | FAIL |" in claims.table()._repr_markdown_()
    with pytest.raises(ValueError, match="twice"):
        claims.add("x", 2.0, target="= 2")


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


def test_authors_values_get_their_own_column(tmp_path):
    from corekit.book.publish import claims_table
    claims = Claims("nb", parameters={})
    claims.add("plain", 1.0, target="reported")
    assert "authors" not in claims.table()._repr_markdown_()
    claims.add("shared", 0.97, target="≥ 0.9", passed=True, paper=0.99, authors=0.981)
    md = claims.table()._repr_markdown_()
    assert md.splitlines()[0] == "| claim | paper | measured | authors' code | target | verdict |"
    assert "| `shared` | 0.99 | 0.97 | 0.981 | ≥ 0.9 | pass |" in md
    assert "<th>authors' code</th>" in claims.table()._repr_html_()
    record = claims.as_dict()["claims"]
    assert "authors" not in record[0] and record[1]["authors"] == 0.981
    rows = claims_table({"claims": record}, "published (paper)", None)
    assert rows[0] == "| claim | paper | published (paper) | authors' code | target | verdict |"
    assert "0.981" in rows[3] and rows[2].count("|") == rows[3].count("|")


def test_results_page_takes_the_authors_column_from_the_oracle_record(tmp_path):
    import nbformat

    from corekit.book.publish import Run, results_page
    folder = tmp_path / "results" / "02_demo"
    folder.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Demo")]), folder / "02_demo.ipynb")
    claims = Claims("02_demo", parameters={"p": 31})
    claims.add("r2_authors", 0.95, target="≥ 0.9", passed=True)
    claims.add("own", 1.0, target="reported")
    (folder / "metrics.json").write_text(json.dumps({**claims.as_dict(), "profile": "cpu"}))
    run = Run("02_demo", folder / "02_demo.ipynb", folder / "metrics.json", folder / "figures", True)
    oracle_dir = tmp_path / "results" / "oracle"
    assert "| authors' code |" not in results_page({"02_demo": run}, {}, {}, oracle_dir=oracle_dir)
    oracle_dir.mkdir()
    (oracle_dir / "02.json").write_text(json.dumps({"p": 31, "seeds": [0], "claims": {"r2_authors": 0.949}}))
    page = results_page({"02_demo": run}, {}, {}, oracle_dir=oracle_dir)
    assert "| claim | paper | ours (cpu) | authors' code | target | verdict |" in page
    assert "0.949" in page and "results/oracle/02.json" in page
    (oracle_dir / "02.json").write_text(json.dumps({"p": 53, "seeds": [0], "claims": {"r2_authors": 0.949}}))
    assert "0.949" not in results_page({"02_demo": run}, {}, {}, oracle_dir=oracle_dir)         # another modulus: not shown


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


def test_results_page_counts_each_chapter_and_keeps_targets_and_reasons_whole(tmp_path):
    import nbformat

    from corekit.book.publish import Run, front_tally, results_page, verdict_line
    runs, long_target = {}, "a target that is much longer than any shortened value cell would keep, " * 3
    for name, verdicts in (("01_all", [True, True]), ("02_some", [True, False, None]), ("03_none", [False, False])):
        folder = tmp_path / name
        folder.mkdir()
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"# {name}")]),
                       folder / f"{name}.ipynb")
        claims = Claims(name, parameters={})
        for i, passed in enumerate(verdicts):
            claims.add(f"c{i}", i, target=long_target, passed=passed, why="the fit rank reached p − 1")
        (folder / "metrics.json").write_text(json.dumps({**claims.as_dict(), "profile": "cpu"}))
        runs[name] = Run(name, folder / f"{name}.ipynb", folder / "metrics.json", folder / "figures", True)
    page = results_page(runs, {}, {})
    assert "3 of 6 tested claims reproduce on the published runs (3 fail; 1 more figures" in page
    assert "hypotheses of this book" not in page
    own = Run("08_two_lenses", runs["02_some"].ipynb, runs["02_some"].metrics_path, runs["02_some"].figures, True)
    mixed = front_tally({"01_all": runs["01_all"], "03_none": runs["03_none"], "08_two_lenses": own})
    assert mixed.startswith("2 of 4 tested claims reproduce on the published runs (2 fail; 0 more figures")
    assert mixed.endswith("Apart from them, chapter 08 tests hypotheses of this book, not of a paper: 1 of 2 hold.")
    rows = [line for line in page.splitlines() if line.startswith("| {doc}`0")]
    assert [r.split(" | ")[4:7] for r in rows] == [["2", "0", "0"], ["1", "1", "1"], ["0", "2", "0"]]
    assert verdict_line(runs["01_all"].metrics) == "reproduces"
    assert verdict_line(runs["02_some"].metrics) == "reproduces except `c1`"
    assert verdict_line(runs["03_none"].metrics) == "does not reproduce: `c0`, `c1`"
    mostly = {"claims": [{"id": "a", "pass": True}, {"id": "b", "pass": False}, {"id": "c", "pass": False}]}
    assert verdict_line(mostly) == "mostly does not reproduce (1 of 3 pass): `b`, `c`"
    assert page.count(long_target.strip()) == 7 and "…" not in page
    assert page.count("*Why it fails:* the fit rank reached p − 1") == 3
