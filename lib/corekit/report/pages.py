"""The reproduction report on the book's pages: the front page's statements table, each chapter's opening findings,
the results page's per-chapter tables, and ``statements.json``."""
from __future__ import annotations

import json
import re

from corekit.report import findings
from corekit.report.reading import COLOUR, WORDS, Reading, tally
from corekit.report.statements import BOOK

#: Characters MyST reads as markup inside a table cell.
MARKUP = re.compile(r"[\\`*_{}\[\]<>|$~]")


def text(value: object) -> str:
    """Return ``value`` as literal text for a Markdown table cell (markup escaped)."""
    return MARKUP.sub(lambda m: "\\" + m.group(0), str(value))


def verdict_html(reading: Reading) -> str:
    """Return the verdict in words, coloured as the claim verdict it follows."""
    return f'<span class="corekit-{COLOUR[reading.verdict]}">{reading.verdict}</span>'


def short_setting(reading: Reading) -> str:
    """Return the setting in a few words: "at the paper's setting", else which parameters differ ("differs in
    d_model, d_mlp") and how many differences no profile removes (the chapter's page gives the values)."""
    if reading.at_paper_setting:
        return "at the paper's setting"
    fixed = len(reading.statement.always_differs)
    keys = [s.split(" ", 1)[0] for s in reading.setting[:len(reading.setting) - fixed]]
    named = ", ".join(keys) if len(keys) <= 2 else f"{len(keys)} settings"
    parts = ([named] if keys else []) + ([f"{fixed} things no profile has"] if fixed else [])
    return "differs in " + "; ".join(parts)


def chapter_link(chapter: str, prefix: str = "../notebooks/") -> str:
    """Return the MyST link to a chapter, labelled by its number."""
    return f"{{doc}}`{chapter[:2]} <{prefix}{chapter}>`"


def table(readings: list[Reading], prefix: str = "../notebooks/") -> list[str]:
    """Return the Markdown rows of a statements table: statement and chapter, the paper, here (the first deciding
    claim), verdict (with its setting)."""
    rows = ["| | statement | the paper | here | verdict |", "|---|---|---|---|---|"]
    for r in readings:
        s = r.statement
        paper = "—" if s.paper == BOOK else text(s.paper_value) + (f" ({text(s.reference)})" if s.reference else "")
        here = text(r.ours(first=True, more=False))
        rows.append(f"| **{s.id}** · {chapter_link(s.chapter, prefix)} | {text(s.text)} | {paper} | {here} | "
                    f"{verdict_html(r)}<br>{text(short_setting(r)) if s.paper != BOOK else ''} |")
    return rows


def tally_sentence(readings: list[Reading]) -> str:
    """Return the headline: the papers' statements counted by verdict, split by setting, then the book's own."""
    papers = [r for r in readings if r.statement.paper != BOOK]
    own = [r for r in readings if r.statement.paper == BOOK]
    at_paper = tally([r for r in papers if r.at_paper_setting])
    elsewhere = tally([r for r in papers if not r.at_paper_setting])

    def listed(counts: dict[str, int]) -> str:
        return "; ".join(f"{w}: {n}" for w, n in counts.items()) or "none"

    sentence = (f"Of the two papers' {len(papers)} headline statements, "
                f"{sum(at_paper.values())} were tested at the paper's setting ({listed(at_paper)}) and "
                f"{sum(elsewhere.values())} at another ({listed(elsewhere)}).")
    if own:
        sentence += f" The book's own {len(own)} hypotheses: {listed(tally(own))}."
    return sentence


def front_section(readings: list[Reading], runs: dict[str, tuple[str, str]]) -> str:
    """Return the front page's statements section: the tally, which chapters ran at their paper profile and on what
    device (``runs``: chapter -> (profile, device)), then the papers' statements and the book's own."""
    papers = [r for r in readings if r.statement.paper != BOOK]
    own = [r for r in readings if r.statement.paper == BOOK]
    by_profile: dict[str, list[str]] = {}
    for chapter, (profile, device) in runs.items():
        by_profile.setdefault(f"the {profile} profile on {device}", []).append(chapter[:2])
    ran = "; ".join(f"chapters {', '.join(chapters)} at {where}" for where, chapters in by_profile.items())
    lines = [f"{tally_sentence(readings)} The runs shown: {ran}.", "",
             "::::{div} corekit-table-box corekit-statements", "", *table(papers), "", "::::", ""]
    if own:
        lines += ["The book's own hypotheses, tested the same way:", "",
                  "::::{div} corekit-table-box corekit-statements", "", *table(own), "", "::::", ""]
    lines += ["A statement's verdict follows from its claims by one rule, stated on {doc}`results`; each chapter "
              "opens with its statements in full, and every value comes from a published run's metrics. "
              "Machine-readable: "
              "{download}`statements.json <_static/statements.json>`.", ""]
    return "\n".join(lines)


def chapter_findings(chapter: str, readings: list[Reading], claims: list[dict], settings: str = "") -> str:
    """Return the MyST box that opens a chapter: its strongest finding, how its settings differ from the paper
    profile (``settings``, the one place the page says so) and what no profile has, and the verdict of each
    statement it tests."""
    mine = [r for r in readings if r.statement.chapter == chapter]
    lines = [":::{admonition} What this chapter finds", ":class: corekit-finds important", ""]
    best = findings.finding(chapter, claims)
    fixed = list(dict.fromkeys(d for r in mine for d in r.statement.always_differs))
    if settings or fixed:
        lines += [" ".join([settings] + ([f"No profile here has the paper's {text('; '.join(fixed))}."]
                                         if fixed else [])).strip(), ""]
    tested = ("The statements it tests (each in full on {doc}`../book/results`): "
              + "; ".join(f"**{r.statement.id}** {verdict_html(r)}" for r in mine) + ".") if mine else \
        ("" if best else "No statement of the papers is tested here.")
    lines.insert(3, " ".join(part for part in (best, tested) if part))
    lines.insert(4, "")
    return "\n".join(lines + [":::"])


def results_section(chapter: str, readings: list[Reading]) -> list[str]:
    """Return the results page's lines for one chapter: each statement it tests with its verdict and sentence."""
    mine = [r for r in readings if r.statement.chapter == chapter]
    items = [f"- **{r.statement.id}** {text(r.statement.text)} {verdict_html(r)}. {text(r.sentence(short=True))}"
             for r in mine]
    return ["Its statements:", "", *items, ""] if items else []


def statements_json(readings: list[Reading]) -> str:
    """Return ``statements.json``: every reading's record (:meth:`corekit.report.reading.Reading.as_dict`) and the
    tally by setting."""
    papers = [r for r in readings if r.statement.paper != BOOK]
    record = {"verdicts": list(WORDS),
              "tally": {"at the paper's setting": tally([r for r in papers if r.at_paper_setting]),
                        "at another setting": tally([r for r in papers if not r.at_paper_setting]),
                        "the book's own": tally([r for r in readings if r.statement.paper == BOOK])},
              "statements": [r.as_dict() for r in readings]}
    return json.dumps(record, indent=1, ensure_ascii=False) + "\n"
