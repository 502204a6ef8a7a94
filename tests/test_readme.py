"""The README holds on a fresh clone: its chapter table lists every notebook, the files it names exist in the
repository, and it points at nothing outside it."""
import re

from tinyrepo import REPO

from corekit.runs import notebooks

README = (REPO / "README.md").read_text()


def test_the_chapter_table_lists_every_notebook_with_its_module():
    rows = dict(re.findall(r"^\| `notebooks/(\d\d_\w+)\.py` \| `(\w+\.py)`", README, re.M))
    assert sorted(rows) == notebooks.notebook_names(REPO), "the README's chapter table and notebooks/ differ"
    for name, module in rows.items():
        assert (REPO / "lib" / "corekit" / "chapters" / module).is_file(), f"{name}: no lib/corekit/chapters/{module}"


def test_the_scripts_it_names_exist():
    named = set(re.findall(r"scripts/[\w./-]+\.(?:sh|py)", README))
    assert "scripts/gpu-wheelhouse.sh" in named
    assert [path for path in sorted(named) if not (REPO / path).is_file()] == []


def test_it_points_at_nothing_outside_the_repository():
    assert not re.search(r"\.\./shared|/work/", README)
