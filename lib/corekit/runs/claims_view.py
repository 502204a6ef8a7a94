"""How claims are shown: one HTML table for a notebook's own display, its chapter page and the results page.

Five columns, each wide enough to read on a laptop (a phone scrolls the table in its own box): the claim's id, its
values (ours, the paper's, the authors' code's, another run's, each labelled on a line of its own), the null's
value, the target with the run's reason for any verdict but pass, and the verdict. Values are never shortened.
A chapter page shows this table in place of the one its run displayed (:func:`corekit.runs.publish.decorate`), so a
change here reaches every page without re-running a notebook; this module is not part of any source hash.
"""
from __future__ import annotations

import html
from typing import Mapping

from corekit.runs.claims import VERDICT_STYLE, format_value, id_html, null_text, verdict_of

#: The class of every claims table (book/_static/corekit.css sets its columns).
TABLE_CLASS = "corekit-claims"


def _values_cell(claim: dict, ours: str, others: Mapping[str, Mapping[str, object]]) -> str:
    """Return the values of one claim as labelled lines: ours, the paper's, the authors' code's, then ``others``."""
    lines = [(ours, claim.get("measured"))]
    if claim.get("paper") is not None:
        lines.append(("paper", claim["paper"]))
    if claim.get("authors") is not None:
        lines.append(("authors' code", claim["authors"]))
    lines += [(label, values[claim["id"]]) for label, values in others.items() if claim["id"] in values]
    return "<br>".join(f'<span class="corekit-value-label">{html.escape(label)}</span> '
                       f"{html.escape(value if isinstance(value, str) else format_value(value))}"
                       for label, value in lines)


def claims_html(claims: list[dict], ours: str = "ours", others: Mapping[str, Mapping[str, object]] | None = None) -> str:
    """Return the HTML table of ``claims`` (metrics-file records); ``ours`` labels the run's value and ``others``
    ({label: {claim id: value}}) adds values from elsewhere (the authors' code's record, a quick run)."""
    others = others or {}
    rows = []
    for claim in claims:
        verdict = verdict_of(claim)
        label = VERDICT_STYLE[verdict][0]
        reason = claim.get("reason") or (claim.get("why") if verdict != "pass" else None)
        because = f'<br><em class="corekit-reason">{html.escape(reason)}</em>' if reason else ""
        rows.append(f"<tr><td><code>{id_html(claim['id'])}</code></td>"
                    f"<td>{_values_cell(claim, ours, others)}</td>"
                    f"<td>{html.escape(null_text(claim) or '—')}</td>"
                    f"<td>{html.escape(claim.get('target') or '')}{because}</td>"
                    f'<td><span class="corekit-{verdict}">{label}</span></td></tr>')
    head = "".join(f"<th>{h}</th>" for h in ("claim", "values", "null", "target", "verdict"))
    return (f'<table class="{TABLE_CLASS}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>")
