"""The reproduction report (corekit.report): every paper claim in one statement, the verdict rule, the published
statements file, the headline's counts in the results figure, and statements that no run's hash covers."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tinyrepo import corekit

from corekit.report import reading
from corekit.report.pages import statements_json, tally_sentence
from corekit.report.statements import OWN, STATEMENTS, Statement
from corekit.runs import publish
from corekit.runs.notebooks import Notebook, toc_notebooks
from corekit.runs.source_hash import library_closure, source_hash

REPO = Path(__file__).resolve().parents[1]
NAMES = toc_notebooks(REPO)
RUNS = {name: publish.published_run(REPO, name) for name in NAMES}


def owners(chapter: str, claim_id: str, statements=STATEMENTS) -> list[str]:
    return [s.id for s in statements if s.chapter == chapter
            and any(reading.matches(p, claim_id) for p in s.claim_patterns())]


@pytest.mark.parametrize("name", NAMES)
def test_every_paper_claim_belongs_to_exactly_one_statement(name):
    claims = RUNS[name].metrics["claims"]
    for claim in claims:
        if claim.get("kind") == "paper":
            assert len(owners(name, claim["id"])) == 1, (claim["id"], owners(name, claim["id"]))
    for statement in (s for s in STATEMENTS + OWN if s.chapter == name and s.decide):
        assert reading.named(claims, statement.decide), f"{statement.id} names no claim of {name}'s run"


def test_statement_ids_are_unique_and_chapters_exist():
    ids = [s.id for s in STATEMENTS + OWN]
    assert len(ids) == len(set(ids))
    assert {s.chapter for s in STATEMENTS + OWN} <= set(NAMES)


def test_a_model_pattern_does_not_reach_a_variant():
    assert reading.matches("core_auroc[*]", "core_auroc[gemma-3-270m]")
    assert not reading.matches("flip_rate[*]", "flip_rate[gemma-3-270m, from subject]")
    assert not reading.matches("flip_rate[*]", "generation_flip_rate[gemma-3-270m]")


def claim(cid, verdict, **more):
    return {"id": cid, "kind": "paper", "verdict": verdict, "measured": 1.0, **more}


STATEMENT = Statement("X1", "paper", "01_x", "x holds", None, "1", decide=("a", "b"), checks=("c",),
                      bearing=("d_model",))


@pytest.mark.parametrize("verdicts, setting, word", [
    (("pass", "pass"), [], reading.REPRODUCES),
    (("pass", "undecided"), [], reading.REPRODUCES),
    (("pass", "pass"), [("d_model", "64", "128")], reading.REPRODUCES_ELSEWHERE),
    (("pass", "fail"), [], reading.FAILS),
    (("uninformative", "fail"), [("d_model", "64", "128")], reading.DISAGREES_ELSEWHERE),
    (("pass", "uninformative"), [], reading.CONTROL),
    (("undecided", "undecided"), [], reading.UNDECIDABLE),
    (("reported", "reported"), [], reading.SHOWN),
    (("pass", "pass"), [("lr", "0.003", "0.001")], reading.REPRODUCES),     # lr does not bear on it
])
def test_the_rule(verdicts, setting, word):
    claims = [claim("a", verdicts[0]), claim("b", verdicts[1]), claim("c", "pass")]
    got = reading.decide(STATEMENT, claims, setting)
    assert got.verdict == word
    assert [c["id"] for c in got.checks] == ["c"]                  # a check is shown, never decides
    assert "c" not in {c["id"] for c, _, _ in got.claims}


def test_a_check_that_passes_cannot_make_a_statement_reproduce():
    got = reading.decide(STATEMENT, [claim("c", "pass")], [])
    assert got.verdict == reading.SHOWN


def test_on_the_papers_models_a_claim_is_reread_from_its_failing_models():
    over = {"id": "a", "verdict": "fail", "measured": {"2": 0.97, "3": 0.95, "8": 0.3},
            "models": {"k": 2, "n": 3, "failing": ["8"]}}
    statement = Statement("X2", "paper", "06_x", "x", None, "1", decide=("a",), models=("2", "3"))
    got = reading.decide(statement, [over], [])
    assert got.verdict == reading.REPRODUCES
    assert "2 (0.97), 3 (0.95), of the 3" in got.ours()
    over["models"]["failing"] = ["3", "8"]
    assert reading.decide(statement, [over], []).verdict == reading.FAILS


def test_an_undecided_claim_says_where_its_value_lies():
    below = claim("a", "undecided", paper=0.9, measured=0.8, interval=[0.75, 0.85])
    within = claim("b", "undecided", paper=0.8, measured=0.8, interval=[0.75, 0.85])
    got = reading.decide(STATEMENT, [below, within], [])
    assert "below the paper's 0.9" in got.ours() and "within the paper's 0.8" in got.ours()


def test_the_published_statements_file_is_what_the_metrics_give():
    readings = publish.readings_of(REPO, RUNS)
    assert (REPO / "results" / "statements.json").read_text() == statements_json(readings), \
        "results/statements.json is stale: run corekit statements"
    assert corekit("statements", "--check", root=REPO).returncode == 0


def test_the_headline_counts_every_papers_statement_once_split_by_setting():
    readings = publish.readings_of(REPO, RUNS)
    papers = [r for r in readings if r.statement.paper != "this book"]
    sentence = tally_sentence(readings)
    assert f"Of the two papers' {len(papers)} headline statements" in sentence
    at_paper = sum(r.at_paper_setting for r in papers)
    assert f", {at_paper} were tested at the paper's setting" in sentence
    assert f"and {len(papers) - at_paper} at another" in sentence


def test_the_results_figure_counts_what_the_headline_counts(tmp_path, monkeypatch):
    import matplotlib.axes

    readings = publish.readings_of(REPO, RUNS)
    drawn: dict[str, int] = {}
    original = matplotlib.axes.Axes.barh

    def record(self, y, width, *args, label=None, **kwargs):
        drawn[label] = drawn.get(label, 0) + sum(width)
        return original(self, y, width, *args, label=label, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "barh", record)
    publish.tally_figure(readings, tmp_path / "tally.png")
    assert drawn == reading.tally(readings)


def test_a_results_reason_is_a_whole_first_sentence():
    for run in RUNS.values():
        for c in run.metrics["claims"]:
            reason = publish.LEAD.sub("", c.get("reason") or "")
            if not reason:
                continue
            first = publish.first_sentence(c).replace("\\", "")
            assert not first.endswith("…"), first
            assert reason.startswith(first), (first, reason)
            rest = reason[len(first):]
            assert not rest or (first.endswith(".") and rest[0].isspace()), (first, rest[:40])


def test_no_notebook_imports_the_report_so_its_wording_stales_no_run(tmp_path):
    for name in NAMES:
        closure = library_closure(Notebook(REPO, name))
        assert not [p for p in closure if "report" in p.relative_to(REPO / "lib" / "corekit").parts], name
    copy = tmp_path / "book"
    for part in ("lib", "notebooks"):
        shutil.copytree(REPO / part, copy / part, ignore=shutil.ignore_patterns("__pycache__", "*.ipynb"))
    for part in ("_toc.yml", "_config.yml"):
        shutil.copy2(REPO / part, copy / part)
    name = "05_entk_mlp_modular"
    params = RUNS[name].metrics["parameters"]
    before = source_hash(Notebook(copy, name), params)
    statements = copy / "lib" / "corekit" / "report" / "statements.py"
    statements.write_text(statements.read_text().replace("A second cliff spans", "A second cliff is spanned by"))
    assert source_hash(Notebook(copy, name), params) == before


def test_the_readme_says_what_the_statements_file_says():
    import json
    import re

    top = (REPO / "README.md").read_text().split("## Quick start")[0]
    verdicts = {s["id"]: (s["verdict"], s["setting"]) for s in
                json.loads((REPO / "results" / "statements.json").read_text())["statements"]}
    words = {"reproduce;": "reproduces", "do not (": "does not reproduce", "hold, but so does": "holds, but so does the control"}
    for sentence in re.split(r"(?<=[;.])\s", " ".join(top.split())):
        ids = re.findall(r"\b([AE]\d+[ab]?)(?:–([AE]\d+))?\b", sentence)
        for phrase, verdict in words.items():
            if phrase in sentence:
                for first, last in ids:
                    span = [first] if not last else [f"{first[0]}{i}" for i in range(int(first[1:]), int(last[1:]) + 1)]
                    for sid in span:
                        assert verdicts[sid][0] == verdict, (sid, verdicts[sid], sentence)


def test_every_chapter_states_its_finding_from_its_published_claims():
    """Each chapter's one-sentence finding is computed from its published run; 02's quotes the ω → 0 branch's growth."""
    import json

    from corekit.report import findings
    sentences = {name: findings.finding(name, json.loads(run.metrics_path.read_text())["claims"])
                 for name, run in RUNS.items()}
    assert [name for name, s in sentences.items() if not s] == []
    wd0 = next(c for c in json.loads(RUNS["02_grokking_cores"].metrics_path.read_text())["claims"]
               if c["id"] == "necessary_rank_growth")["null"][0]["value"]
    assert f"the ω → 0 branch's grows too ({', '.join(f'{v:.4g}' for v in wd0.values())}-fold)" in \
        sentences["02_grokking_cores"]
    assert findings.finding("02_grokking_cores", []) is None                  # a run without the claims: no sentence
