"""How claims are shown: one HTML table for a notebook's own display, its chapter page and the results page.

Five columns, each wide enough to read on a laptop: the claim's id, its values (ours, the paper's, the authors'
code's, another run's, each labelled on a line of its own), the null's value, the target with the run's reason for
any verdict but pass, and the verdict. On a phone each claim stacks into a card, its verdict under its id
(``book/_static/corekit.css``; each cell carries its column's name in ``data-label``).

No cell runs to more than a few lines. A claim over models (a value per model, seed or pair, with its ``models``
record) shows k of n, its bound, its worst value and its failing models (:func:`models_summary`: "6 of 8 ≥ 0.95;
fails: 4 (0.596), 14 (0.927)"); any other value with many entries shows its count and range
(:func:`value_summary`); long lists inside a reason are cut to their first entries (:func:`shorten_lists`). Every
per-model value is in the fold below the table (:func:`per_model_html`), in a box that scrolls.

A chapter page shows this table in place of the one its run displayed (:func:`corekit.runs.publish.decorate`), so a
change here reaches every page without re-running a notebook; this module is not part of any source hash, and it
changes how values are shown, never a value or a verdict.
"""
from __future__ import annotations

import html
import math
import re
import statistics
from typing import Mapping

from corekit.runs.claims import VERDICT_STYLE, id_html, verdict_of
from corekit.verdicts import format_value

#: The class of every claims table (book/_static/corekit.css sets its columns).
TABLE_CLASS = "corekit-claims"
#: The columns of the claims table.
COLUMNS = ("claim", "values", "null", "target", "verdict")
#: A value with more entries than this (a dict or a list) is summarised in a cell.
INLINE_ENTRIES = 5
#: How many failing models a summary names before "and N more".
NAMED_FAILURES = 3
#: A reason's list of more entries than this keeps only its first ones.
REASON_ENTRIES = 4
#: Cells longer than this (characters) are cut, the full value being in the fold or the metrics file.
CELL_CHARS = 240


def _number(x: object) -> str:
    """Return a number of a summary as the tables write it (4 significant digits; "—" for None)."""
    if isinstance(x, float) and not math.isfinite(x):
        return "—"
    return format_value(x)


def model_name(key: object) -> str:
    """Return how a summary names a model: a bare number is a seed ("seed 4"), any other key as it is ("2–14")."""
    return f"seed {key}" if str(key).isdigit() else str(key)


def _scalar(x: object) -> bool:
    return x is None or isinstance(x, (int, float, bool))


#: The bound at the end of a target ("≥ 0.95", "= 0.75 ± 0.01", "in [90, 210]", "interval contains -1"), before the
#: ", for every one of ..." that a claim over models adds.
BOUND = re.compile(r"(?:≥|≤|=|in \[|interval contains|interval above|interval below)(?!.*(?:≥|≤| = |in \[)).*$")


def bound_text(claim: dict) -> str | None:
    """Return the bound of a claim over models as its target writes it ("≥ 0.95"), None when it cannot be read."""
    head = str(claim.get("target") or "").split(", for every one of ")[0]
    found = BOUND.search(head)
    return found.group(0).strip() if found else None


def _worst(values: dict, bound: str | None) -> tuple[str, object] | None:
    """Return (model, value) furthest from satisfying ``bound`` (the lowest for ≥, the highest for ≤, the furthest
    from the target value for =), None for another bound or no number."""
    if not bound:
        return None
    numbers = {k: v for k, v in values.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    missing = [k for k, v in values.items() if v is None]
    if missing:
        return missing[0], None
    if not numbers:
        return None
    target = re.match(r"= (-?[\d.e+-]+)", bound)
    if bound.startswith("≥"):
        key = min(numbers, key=numbers.get)
    elif bound.startswith("≤"):
        key = max(numbers, key=numbers.get)
    elif target:
        key = max(numbers, key=lambda k: abs(numbers[k] - float(target.group(1))))
    else:
        return None
    return key, numbers[key]


def models_summary(claim: dict) -> str | None:
    """Return the one-line summary of a claim over models: k of n and the bound, then the failing models with their
    values ("6 of 8 ≥ 0.95; fails: 4 (0.596), 14 (0.927)"), the worst value when they are not all named, or the worst
    value among all when none fails; None for a claim that is not over models."""
    value, models = claim.get("measured"), claim.get("models")
    if not isinstance(value, dict) or not isinstance(models, dict) or not value:
        return None
    bound = bound_text(claim)
    k, n = models.get("k"), models.get("n")
    failing = [m for m in models.get("failing") or [] if m in value]
    text = f"{k} of {n} " + (bound or "meet the target")
    worst = _worst(value, bound)
    if failing:
        named = ", ".join(f"{model_name(m)} ({_number(value[m])})" for m in failing[:NAMED_FAILURES])
        more = f" and {len(failing) - NAMED_FAILURES} more" if len(failing) > NAMED_FAILURES else ""
        if more and worst and worst[0] not in failing[:NAMED_FAILURES]:
            text += f"; worst {model_name(worst[0])} ({_number(worst[1])})"
        return f"{text}; fails: {named}{more}"
    if worst:
        word = {"≥": "lowest", "≤": "highest"}.get(bound[0], "furthest") if bound else "worst"
        text += f"; {word} {model_name(worst[0])} ({_number(worst[1])})"
    return text


def value_summary(value: object) -> str:
    """Return a value for a cell: whole when short, else its count and range ("20 values, 0.91 (2–14) to 0.97
    (3–5), median 0.95"), or its first entries."""
    if isinstance(value, dict) and len(value) > INLINE_ENTRIES:
        numbers = {k: v for k, v in value.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
                   and math.isfinite(v)}
        if numbers and all(_scalar(v) for v in value.values()):
            low, high = min(numbers, key=numbers.get), max(numbers, key=numbers.get)
            rest = len(value) - len(numbers)
            return (f"{len(value)} values, {_number(numbers[low])} ({low}) to {_number(numbers[high])} ({high}), "
                    f"median {_number(statistics.median(numbers.values()))}" + (f"; {rest} without a value" if rest
                                                                                    else ""))
        shown = ", ".join(f"{k}: {format_value(v)}" for k, v in list(value.items())[:INLINE_ENTRIES])
        return f"{len(value)} entries: {shown}, …"
    if isinstance(value, list) and len(value) > 2 * INLINE_ENTRIES:
        return f"{len(value)} entries: {format_value(value[:INLINE_ENTRIES])[:-1]}, …]"
    text = value if isinstance(value, str) else format_value(value)
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


#: One entry of a list inside a reason: "4 (0.5958)" or "seed 0: 0.3213".
_ENTRY = r"(?:[^\s,;:()]+(?: [^\s,;:()]+)?: [^\s,;()]+|[^\s,;:()]+ \([^()]*\))"
_RUN = re.compile(rf"{_ENTRY}(?:, {_ENTRY}){{{REASON_ENTRIES + 1},}}")


def shorten_lists(text: str, keep: int = REASON_ENTRIES) -> str:
    """Return ``text`` with each list of more than ``keep`` entries ("2–3 (0.2019), 2–4 (0.3597), ..." or "2: 0.94,
    3: 0.93, ...") cut to its first ``keep`` and "… and N more"."""
    def cut(match: re.Match) -> str:
        entries = re.findall(_ENTRY, match.group(0))
        if len(entries) <= keep + 1:
            return match.group(0)
        return ", ".join(entries[:keep]) + f" … and {len(entries) - keep} more"
    return _RUN.sub(cut, str(text))


#: A null given per model with more entries than this shows its range (beside other nulls: more than one entry).
NULL_ENTRIES = 3


def _null_value(value: object, entries: int = NULL_ENTRIES) -> str:
    """Return a null's value for a cell: whole when it has at most ``entries`` entries, else the range of its numbers
    ("0.9263 to 0.9597 over 5")."""
    if isinstance(value, dict) and len(value) > entries and all(_scalar(v) for v in value.values()):
        numbers = [v for v in value.values() if isinstance(v, (int, float)) and not isinstance(v, bool)
                   and math.isfinite(v)]
        if numbers:
            return f"{_number(min(numbers))} to {_number(max(numbers))} over {len(value)}"
    return value_summary(value)


def null_summary(record: dict) -> str:
    """Return a claim's null as short text ("untrained model: 3"; a null over many models as its range), or its
    no-null reason."""
    nulls = record.get("null") or []
    entries = NULL_ENTRIES if len(nulls) == 1 else 1
    if nulls:
        return "; ".join(f"{n['what']}: {_null_value(n.get('value'), entries)}" for n in nulls)
    return f"none ({record['no_null']})" if record.get("no_null") else ""


def claim_value(claim: dict) -> str:
    """Return the run's value of a claim for a cell or a sentence: the summary of a claim over models, else the value
    (summarised when long)."""
    return models_summary(claim) or value_summary(claim.get("measured"))


def _values_cell(claim: dict, ours: str, others: Mapping[str, Mapping[str, object]]) -> str:
    """Return the values of one claim as labelled lines: ours, the paper's, the authors' code's, then ``others``."""
    lines = [(ours, claim_value(claim))]
    if claim.get("paper") is not None:
        lines.append(("paper", claim["paper"]))
    if claim.get("authors") is not None:
        lines.append(("authors' code", claim["authors"]))
    lines += [(label, values[claim["id"]]) for label, values in others.items() if claim["id"] in values]
    return "<br>".join(f'<span class="corekit-value-label">{html.escape(label)}</span> '
                       f"{html.escape(value if isinstance(value, str) else value_summary(value))}"
                       for label, value in lines)


def reason_text(claim: dict) -> str | None:
    """Return the reason shown for a claim (its ``reason``, else its ``why`` unless it passes), lists cut short."""
    verdict = verdict_of(claim)
    reason = claim.get("reason") or (claim.get("why") if verdict != "pass" else None)
    return shorten_lists(reason) if reason else None


def _cell(column: str, content: str) -> str:
    return f'<td data-label="{column}">{content}</td>'


def claims_html(claims: list[dict], ours: str = "ours", others: Mapping[str, Mapping[str, object]] | None = None,
                per_model: bool = True) -> str:
    """Return the HTML table of ``claims`` (metrics-file records); ``ours`` labels the run's value and ``others``
    ({label: {claim id: value}}) adds values from elsewhere (the authors' code's record, a quick run). With
    ``per_model``, the fold of every per-model value follows the table (:func:`per_model_html`)."""
    others = others or {}
    rows = []
    for claim in claims:
        verdict = verdict_of(claim)
        label = VERDICT_STYLE[verdict][0]
        reason = reason_text(claim)
        cells = {"claim": f"<code>{id_html(claim['id'])}</code>", "values": _values_cell(claim, ours, others),
                 "null": html.escape(null_summary(claim) or "—"),
                 "target": html.escape(claim.get("target") or ""),
                 "verdict": f'<span class="corekit-{verdict}">{label}</span>'}
        rows.append(("<tr>" if not reason else '<tr class="corekit-has-reason">')
                    + "".join(_cell(column, cells[column]) for column in COLUMNS) + "</tr>")
        if reason:                             # the reason spans the table below its claim: a few lines, not a column
            rows.append(f'<tr class="corekit-reason-row"><td data-label="why" colspan="{len(COLUMNS)}">'
                        f'<em class="corekit-reason">{html.escape(reason)}</em></td></tr>')
    head = "".join(f"<th>{h}</th>" for h in COLUMNS)
    table = (f'<table class="{TABLE_CLASS}"><thead><tr>{head}</tr></thead>'
             f"<tbody>{''.join(rows)}</tbody></table>")
    return table + (per_model_html(claims) if per_model else "")


def per_model_values(claim: dict) -> dict | None:
    """Return a claim's value per model, seed or pair ({key: value}) when it has one with more than one entry, each
    value a number (or a dict of numbers: one column each), else None."""
    value = claim.get("measured")
    if not isinstance(value, dict) or len(value) < 2:
        return None
    if all(_scalar(v) for v in value.values()):
        return value
    if all(isinstance(v, dict) and all(_scalar(x) for x in v.values()) for v in value.values()):
        return value
    return None


def per_model_table(claim: dict) -> str:
    """Return the HTML table of one claim's per-model values: its value, each null's (when given per model) and
    whether the model meets the bound (for a claim over models)."""
    values = per_model_values(claim) or {}
    nested = any(isinstance(v, dict) for v in values.values())
    columns = list(dict.fromkeys(c for v in values.values() for c in v)) if nested else ["value"]
    nulls = [n for n in claim.get("null") or [] if isinstance(n.get("value"), dict) and set(n["value"]) & set(values)]
    failing = set((claim.get("models") or {}).get("failing") or [])
    over_models = isinstance(claim.get("models"), dict)
    keys = [str(k) for k in values]
    kind = "seed" if all(k.isdigit() for k in keys) else "pair" if all("–" in k for k in keys) else ""
    head = [kind, *columns, *(f"null: {n['what']}" for n in nulls)] + (["meets the bound"] if over_models else [])
    rows = []
    for key, value in values.items():
        cells = [value.get(c) for c in columns] if nested else [value]
        cells += [n["value"].get(key) for n in nulls]
        meets = (['<span class="corekit-fail">no</span>' if key in failing else "yes"] if over_models else [])
        rows.append("<tr><th>" + html.escape(str(key)) + "</th>"
                    + "".join(f"<td>{html.escape(format_value(c))}</td>" for c in cells)
                    + "".join(f"<td>{m}</td>" for m in meets) + "</tr>")
    verdict = verdict_of(claim)
    summary = f" · {html.escape(models_summary(claim) or '')}" if over_models else ""
    label = VERDICT_STYLE[verdict][0]
    caption = f'<code>{id_html(claim["id"])}</code>: <span class="corekit-{verdict}">{label}</span>{summary}'

    return (f'<table class="corekit-values corekit-per-model"><caption>{caption}</caption><thead><tr>'
            + "".join(f"<th>{html.escape(h)}</th>" for h in head) + f"</tr></thead><tbody>{''.join(rows)}</tbody></table>")


def per_model_html(claims: list[dict]) -> str:
    """Return the fold that holds the per-model values of every claim that has them (:func:`per_model_values`), all in
    one box that scrolls past a screen (the page stays as long opened as closed), or "" when no claim has them."""
    tables = [per_model_table(c) for c in claims if per_model_values(c) is not None]
    if not tables:
        return ""
    return ('<details class="corekit-per-model"><summary>Per-model values of the '
            f"{len(tables)} claim{'s' * (len(tables) > 1)} over several models, seeds or pairs</summary>"
            '<div class="corekit-scroll-box corekit-fold-box">' + "".join(tables) + "</div></details>")
