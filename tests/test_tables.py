"""corekit.tables: the notebooks' small result tables, read back with the standard library's HTML parser."""
from html.parser import HTMLParser

import numpy as np
import pytest

from corekit.tables import format_value, table


class Cells(HTMLParser):
    """Collect the text of every th/td and the caption."""

    def __init__(self):
        super().__init__()
        self.rows, self.caption, self._in = [], "", None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        if tag in ("td", "th", "caption"):
            self._in = tag
            if tag != "caption":
                self.rows[-1].append("")

    def handle_endtag(self, tag):
        self._in = None if tag in ("td", "th", "caption") else self._in

    def handle_data(self, data):
        if self._in == "caption":
            self.caption += data
        elif self._in:
            self.rows[-1][-1] += data


def test_rows_become_an_html_table_with_columns_in_first_seen_order():
    t = table([{"seed": 0, "acc": 0.98765}, {"seed": 1, "keys": [1, 12], "acc": None}], caption="a < b")
    parsed = Cells()
    parsed.feed(t._repr_html_())
    assert parsed.caption == "a < b"
    assert parsed.rows == [["seed", "acc", "keys"], ["0", "0.988", "—"], ["1", "—", "1, 12"]]


def test_values_format_like_a_paper_table():
    assert format_value(np.float32(0.5)) == "0.500"
    assert format_value(np.array([1, 2])) == "1, 2"
    assert format_value(3.3e-8) == "3.30e-08"
    assert format_value(True) == "yes"
    assert format_value(0.0) == "0.000"
    assert format_value(float("nan")) == "nan"
    assert format_value(0.12345, digits=2) == "0.12"


def test_the_text_fallback_aligns_columns():
    lines = repr(table([{"seed": 0, "accuracy": 1.0}, {"seed": 12, "accuracy": 0.5}])).splitlines()
    assert lines == ["seed  accuracy", "   0     1.000", "  12     0.500"]


def test_a_dict_instead_of_rows_is_refused_by_name():
    with pytest.raises(TypeError, match="rows: expected a sequence of dicts"):
        table({"a": 1})
