"""Small result tables for the notebooks: rows of values shown as an HTML table, with aligned text as fallback.

A notebook shows per-seed or per-model figures with :func:`table` instead of printing them line by line::

    table([{"seed": s, "test accuracy": acc[s], "key frequencies": keys[s]} for s in seeds],
          caption="Each model at the end of training")

Floats print with ``digits`` decimals (scientific notation below ``10**-digits``), sequences as comma-separated
values, None as an em dash. The last expression of a cell displays it; ``display(table(...))`` shows several.
"""
from __future__ import annotations

import html
import math
from typing import Any, Mapping, Sequence


def format_value(value: Any, digits: int = 3) -> str:
    """Return ``value`` as a table cell's text: floats with ``digits`` decimals, sequences comma-separated."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        if value != 0 and abs(value) < 10 ** -digits or abs(value) >= 10 ** 7:
            return f"{value:.{max(digits - 1, 1)}e}"
        return f"{value:.{digits}f}"
    if isinstance(value, (list, tuple)):
        return ", ".join(format_value(v, digits) for v in value)
    return str(value)


class Table:
    """Rows of named values (one dict per row, columns in first-seen order) with an optional caption."""

    def __init__(self, rows: Sequence[Mapping[str, Any]], caption: str = "", digits: int = 3):
        if isinstance(rows, Mapping) or not all(isinstance(r, Mapping) for r in rows):
            raise TypeError("rows: expected a sequence of dicts (one per row), "
                            f"got {type(rows).__name__}")
        self.columns: list[str] = []
        for row in rows:
            self.columns += [k for k in row if k not in self.columns]
        self.cells = [[format_value(row.get(k), digits) for k in self.columns] for row in rows]
        self.caption = caption

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in self.columns)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>" for row in self.cells)
        caption = f"<caption>{html.escape(self.caption)}</caption>" if self.caption else ""
        return (f'<table class="corekit-values">{caption}<thead><tr>{head}</tr></thead>'
                f"<tbody>{body}</tbody></table>")

    def __repr__(self) -> str:
        widths = [max([len(str(c))] + [len(row[i]) for row in self.cells]) for i, c in enumerate(self.columns)]
        lines = ["  ".join(str(c).rjust(w) for c, w in zip(self.columns, widths))]
        lines += ["  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in self.cells]
        return "\n".join(([self.caption] if self.caption else []) + lines)


def table(rows: Sequence[Mapping[str, Any]], caption: str = "", digits: int = 3) -> Table:
    """Return a :class:`Table` of ``rows`` (dicts of column → value) that a notebook cell displays."""
    return Table(rows, caption, digits)
