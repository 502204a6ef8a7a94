"""What a reader sees of the claims (issue 52): claims over models summarised in their row with the per-model values
folded below, prose pages whose values read in a sentence with their verdicts, reasons on the results page, the
"Get the code" line, dark-mode contrast of claim ids, and the phone's stacked claims table. Presentation only: no
value or verdict changes (each test reads the published runs or builds a claim)."""
from __future__ import annotations

import re
import sys
from html import unescape
from pathlib import Path

import pytest
from tinyrepo import REPO

from corekit.runs import claims_view, notebooks, publish
from corekit.runs.claims import Claims
from corekit.verdicts import Null, at_least

sys.path.insert(0, str(REPO / "book" / "_ext"))
import corekit_getcode  # noqa: E402

PUBLISHED = {name: publish.published_run(REPO, name) for name in notebooks.toc_notebooks(REPO)
             if publish.published_run(REPO, name).exists()}
#: The longest a summarised cell (values, null) may be, in characters: about six lines of its column at 1366 px.
MAX_CELL_CHARS = 300


def over_models() -> dict:
    """Return a claim over 8 models of which 2 fail ≥ 0.95, as its metrics-file record."""
    claims = Claims("nb", parameters={})
    values = {"2": 0.9901, "3": 0.9894, "4": 0.5958, "5": 0.9746, "7": 0.9582, "13": 0.9732, "14": 0.9266, "15": 0.988}
    claims.check("unembed_sum_alignment", values, at_least(0.95), kind="paper", statistic="alignment",
                 null=Null("the same models at initialisation", {k: 0.0001 for k in values}),
                 covers="every model that generalises")
    return claims.as_dict()["claims"][0]


def cells(table_html: str) -> list[dict[str, str]]:
    """Return each row of a claims table as {column: text} (tags dropped, <br> as " | ")."""
    rows = re.findall(r'<tr(?: class="corekit-has-reason")?>(.*?)</tr>', table_html.split("<details")[0], flags=re.S)[1:]
    return [{label: unescape(re.sub(r"<[^>]+>", "", text.replace("<br>", " | ").replace("<wbr>", "")))
             for label, text in re.findall(r'<td data-label="(\w+)">(.*?)</td>', row, flags=re.S)} for row in rows]


def test_a_claim_over_models_shows_k_of_n_its_failures_and_folds_every_value():
    record = over_models()
    assert claims_view.models_summary(record) == "6 of 8 ≥ 0.95; fails: seed 4 (0.5958), seed 14 (0.9266)"
    html = claims_view.claims_html([record])
    row = cells(html)[0]
    assert row["values"] == "ours 6 of 8 ≥ 0.95; fails: seed 4 (0.5958), seed 14 (0.9266)"
    assert row["null"] == "the same models at initialisation: 0.0001 to 0.0001 over 8" and row["verdict"] == "FAIL"
    fold = html[html.index("<details"):]
    assert fold.count("<tr><th>") == 1 + 8 and fold.count('<span class="corekit-fail">no</span>') == 2


def test_a_summary_names_the_worst_model_when_the_failures_are_not_all_named():
    record = {"id": "x", "measured": {f"2–{i}": 0.5 - i / 100 for i in range(3, 10)}, "target": "score ≥ 0.99, for "
              "every one of pair of models", "verdict": "fail", "models": {"k": 0, "n": 7, "failing": [
                  f"2–{i}" for i in range(3, 10)]}}
    assert claims_view.models_summary(record) == ("0 of 7 ≥ 0.99; worst 2–9 (0.41); fails: 2–3 (0.47), 2–4 (0.46), "
                                                  "2–5 (0.45) and 4 more")


def test_long_lists_in_a_reason_keep_their_first_entries_and_the_words_after():
    reason = "Fails: 1 of 9 models satisfy ≥ 0.99; not " + ", ".join(f"2–{i} (0.{i})" for i in range(3, 11)) + \
        ". The stitch reads the wrong subspace."
    short = claims_view.shorten_lists(reason)
    assert short == ("Fails: 1 of 9 models satisfy ≥ 0.99; not 2–3 (0.3), 2–4 (0.4), 2–5 (0.5), 2–6 (0.6) … and 4 "
                     "more. The stitch reads the wrong subspace.")
    assert claims_view.shorten_lists("gives 2: 0.94, 3: 0.93, 0: 0.96") == "gives 2: 0.94, 3: 0.93, 0: 0.96"


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_no_cell_of_a_published_claims_table_prints_a_whole_per_model_value(name):
    """Chapter 09's row was 70,590 px tall (a dict of 1,482 pairs in one cell); every value and null cell is short."""
    run = PUBLISHED[name]
    html = publish.chapter_claims_html(run, None, REPO / "results" / "oracle")
    rows = cells(html)
    assert len(rows) == len(run.metrics["claims"])
    long = [(c["id"], column, len(row[column])) for c, row in zip(run.metrics["claims"], rows)
            for column in ("values", "null") if len(row[column]) > MAX_CELL_CHARS]
    assert not long, f"{name}: cells over {MAX_CELL_CHARS} characters: {long}"
    assert all(row["verdict"] for row in rows)
    per_model = [c["id"] for c in run.metrics["claims"] if claims_view.per_model_values(c) is not None]
    for claim_id in per_model:                                                 # each one click away, below the table
        assert f"<code>{claims_view.id_html(claim_id)}</code>: <span" in html[html.index("<details"):], claim_id


SUBSTITUTION = re.compile(r"\{\{\s*(claim_\w+)\s*\}\}")


@pytest.mark.parametrize("page", ["two_lenses.md", "merging_cores.md"])
def test_prose_pages_quote_one_line_values_with_verdicts_and_tables_on_lines_of_their_own(page):
    texts = publish.claim_substitutions(PUBLISHED, REPO)
    source = (REPO / "book" / page).read_text()
    used = SUBSTITUTION.findall(source)
    assert used and not [key for key in used if key not in texts], "keys no published run provides"
    for line in source.splitlines():
        for key in SUBSTITUTION.findall(line):
            alone = line.strip() == f"{{{{ {key} }}}}"
            if key.endswith(publish.TABLE_SUFFIX):
                assert alone, f"{page}: the table {key} inside a sentence: {line!r}"
            else:
                assert "\n" not in texts[key] and "|---" not in texts[key], f"{page}: {key} is not one line"
    for key in used:                                  # every tested claim quoted with its verdict
        name, claim_id = next((n, c) for n, run in PUBLISHED.items() for c in run.metrics["claims"]
                              if publish.substitution_key(n, c["id"]) == key.removesuffix(publish.TABLE_SUFFIX))
        verdict = publish.verdict_of(claim_id)
        if verdict != "reported" and not key.endswith(publish.TABLE_SUFFIX):
            assert texts[key].endswith(f"({publish.VERDICT_STYLE[verdict][0]})"), key


def test_a_prose_table_longer_than_a_screen_is_folded():
    claim = {"id": "x", "measured": {f"2–{i}": i / 100 for i in range(3, 40)}, "verdict": "reported"}
    table = publish.measured_table(claim)
    assert table.startswith(":::{dropdown} All 37 pairs (reported)\n:class-body: corekit-scroll-box")
    assert publish.measured_markdown(claim) == "37 values, 0.03 (2–3) to 0.39 (2–39), median 0.21"


def test_the_results_page_lists_each_chapters_non_passing_claims_with_their_reasons_unfolded():
    page = publish.results_page(PUBLISHED, {}, {}, None, REPO / "results" / "oracle",
                                publish.own_hypotheses(REPO, PUBLISHED), publish.papers_of(REPO, PUBLISHED))
    unfolded = re.sub(r":::::\{dropdown\}.*?\n:::::", "", page, flags=re.S)
    for name, run in PUBLISHED.items():
        for claim in run.metrics["claims"]:
            verdict = publish.verdict_of(claim)
            if verdict in ("fail", "uninformative", "undecided"):
                line = next((line for line in unfolded.splitlines()
                             if line.startswith(f"- {publish.id_cell(claim['id'])} {publish.VERDICT_HTML[verdict]}: ")),
                            None)
                assert line, f"{name}: {claim['id']} is not listed with its reason outside the fold"
                assert len(line) < 1500, f"{name}: {claim['id']}: a reason of {len(line)} characters"


def test_every_page_gets_the_code_line():
    with_url = corekit_getcode.get_code_html("https://example.org/me/corekit.git", "corekit run 02_x --profile cpu")
    assert "git clone https://example.org/me/corekit.git &amp;&amp; cd corekit</code>" in with_url
    assert '<a class="reference external" href="https://example.org/me/corekit.git">' in with_url
    assert "<code>make book</code>" in with_url and "<code>.venv/bin/corekit run 02_x --profile cpu</code>" in with_url
    without = corekit_getcode.get_code_html("", None)
    assert "clone this book's repository" in without and "<code>make book</code>" in without and "corekit run" not in without


def contrast(foreground: str, background: str) -> float:
    """Return the WCAG contrast ratio of two #rrggbb colours."""
    def luminance(colour: str) -> float:
        channels = [int(colour.lstrip("#")[i:i + 2], 16) / 255 for i in (0, 2, 4)]
        linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    high, low = sorted((luminance(foreground), luminance(background)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def theme_colour(css: str, theme: str, name: str) -> str:
    """Return the theme's ``--pst-color-NAME`` in ``theme`` (light or dark), as #rrggbb."""
    for block in re.findall(rf"html\[data-theme={theme}\]\{{([^}}]*)\}}", css):
        found = re.search(rf"--pst-color-{name}:(#[0-9a-fA-F]{{3,6}})", block)
        if found:
            colour = found.group(1)
            return colour if len(colour) == 7 else "#" + "".join(c * 2 for c in colour[1:])
    raise AssertionError(f"no --pst-color-{name} for the {theme} theme")


def test_claim_ids_keep_a_contrast_of_4_5_in_both_themes():
    """The theme boxes HTML outputs in light grey in dark mode, where the ids (light pink) vanished; the book's CSS
    gives the claims tables the page's background, so the ids are the theme's inline code on its background."""
    import pydata_sphinx_theme

    css = next(Path(pydata_sphinx_theme.__file__).parent.rglob("pydata-sphinx-theme.css")).read_text()
    ours = (REPO / "book" / "_static" / "corekit.css").read_text()
    assert re.search(r'html\[data-theme="dark"\] \.bd-content div\.cell_output \.text_html:has\(table\.corekit-claims\)'
                     r'[^{]*\{[^}]*background-color: transparent', ours)
    for theme in ("light", "dark"):
        ratio = contrast(theme_colour(css, theme, "inline-code"), theme_colour(css, theme, "background"))
        assert ratio >= 4.5, f"{theme}: claim ids at {ratio:.1f}:1"


def test_on_a_phone_each_claim_is_a_card_with_its_verdict_beside_its_id():
    ours = (REPO / "book" / "_static" / "corekit.css").read_text()
    phone = ours[ours.index("@media (max-width: 640px)"):]
    assert "table.corekit-claims thead { display: none; }" in phone
    assert 'td[data-label="verdict"] { order: -1;' in phone and 'td[data-label="claim"] { order: -2;' in phone
    html = claims_view.claims_html([over_models()], per_model=False)
    assert html.count("<td ") == html.count('<td data-label="') == len(claims_view.COLUMNS) + 1   # + its reason
