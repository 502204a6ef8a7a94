"""The published edition's provenance: runs from clean commits only, each an ancestor of the built commit."""
import json
import subprocess
from pathlib import Path

import nbformat
import pytest

from corekit.runs import errors, publish

REPO = Path(__file__).resolve().parents[1]
PUBLISHED = sorted(p.parent.name for p in (REPO / "results").glob("*/metrics.json"))


def test_book_refuses_a_published_run_made_from_a_dirty_tree(tmp_path):
    for name, dirty in (("01_clean", False), ("02_dirty", True)):
        folder = tmp_path / "results" / name
        folder.mkdir(parents=True)
        nbformat.write(nbformat.v4.new_notebook(), folder / f"{name}.ipynb")
        (folder / "metrics.json").write_text(json.dumps({"claims": [], "environment": {"dirty": dirty}}))
    assert list(publish.published_runs(tmp_path, ["01_clean"], None)) == ["01_clean"]
    with pytest.raises(errors.CorekitError, match="published run of 02_dirty was made from a tree whose uncommitted"):
        publish.published_runs(tmp_path, ["01_clean", "02_dirty"], None)


def is_ancestor(commit: str) -> bool:
    """Return whether ``commit`` is an ancestor of (or equal to) this checkout's HEAD."""
    done = subprocess.run(["git", "-C", str(REPO), "merge-base", "--is-ancestor", commit, "HEAD"], capture_output=True)
    return done.returncode == 0


def full_history() -> bool:
    """Return whether this is a git checkout with its whole history (a shallow clone cannot tell ancestry)."""
    done = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--is-shallow-repository"], capture_output=True,
                          text=True)
    return done.returncode == 0 and done.stdout.strip() == "false"


@pytest.mark.skipif(not full_history(), reason="needs a git checkout with its full history")
@pytest.mark.parametrize("name", PUBLISHED)
def test_committed_run_comes_from_its_ancestor_commits_sources(name):
    metrics = json.loads((REPO / "results" / name / "metrics.json").read_text())
    env = metrics["environment"]
    assert env["commit"] and is_ancestor(env["commit"]), f"{name}: commit {env['commit']} is not an ancestor of HEAD"
    assert env["dirty"] is False or publish.sources_match_commit(REPO, name, metrics), \
        f"{name} was published from a tree whose changes touched its sources"


@pytest.mark.parametrize("content", ['{"claims": [', "[]", '"text"', '{"claims": 3}'])
def test_a_malformed_metrics_file_is_one_error_naming_it(tmp_path, content):
    run = publish.published_run(tmp_path, "01_demo")
    run.metrics_path.parent.mkdir(parents=True)
    run.metrics_path.write_text(content)
    with pytest.raises(errors.CorekitError, match=r"01_demo/metrics.json: not a (readable )?metrics file"):
        run.metrics  # noqa: B018


def test_figure_paths_from_a_metrics_file_stay_in_the_run_folder(tmp_path):
    run = publish.published_run(tmp_path, "01_demo")
    run.figures.mkdir(parents=True)
    (tmp_path / "secret.png").write_bytes(b"png")
    (run.figures / "fig.png").write_bytes(b"png")
    run.metrics_path.write_text(json.dumps({"claims": [], "figures": ["fig.png"]}))
    assert run.figure_files() == [run.figures / "fig.png"]
    run.metrics_path.write_text(json.dumps({"claims": [], "figures": ["../../secret.png", "fig.png"]}))
    with pytest.raises(errors.CorekitError, match=r"figure entries must be file names inside figures/"):
        run.figure_files()
