"""The README and CONTRIBUTING.md hold on a fresh clone: the README's chapter table lists every notebook, it is short
enough to read in minutes, the scripts both name exist in the repository, and neither points at anything outside it."""
import re

from tinyrepo import REPO

from corekit.runs import notebooks

README = (REPO / "README.md").read_text()
CONTRIBUTING = (REPO / "CONTRIBUTING.md").read_text()


def test_the_chapter_table_lists_every_notebook_with_its_module():
    rows = dict(re.findall(r"^\| `notebooks/(\d\d_\w+)\.py` \| `(\w+\.py)`", README, re.M))
    assert sorted(rows) == notebooks.notebook_names(REPO), "the README's chapter table and notebooks/ differ"
    for name, module in rows.items():
        assert (REPO / "lib" / "corekit" / "chapters" / module).is_file(), f"{name}: no lib/corekit/chapters/{module}"


def test_the_readme_is_a_short_tour_that_points_at_the_rest():
    assert len(README.splitlines()) <= 200
    assert "CONTRIBUTING.md" in README and "### Verdicts" in CONTRIBUTING and "## For maintainers" in CONTRIBUTING


def test_the_scripts_they_name_exist():
    named = set(re.findall(r"scripts/[\w./-]+\.(?:sh|py)", README + CONTRIBUTING))
    assert "scripts/gpu-wheelhouse.sh" in named
    assert [path for path in sorted(named) if not (REPO / path).is_file()] == []


def test_they_point_at_nothing_outside_the_repository():
    assert not re.search(r"\.\./shared|/work/", README + CONTRIBUTING)
