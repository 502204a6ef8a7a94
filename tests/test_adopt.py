"""`corekit adopt`: runs executed on another machine (a GPU, by scripts/gpu-publish.sh) published here, only when they
are profile runs of this checkout's sources; and the GPU publishing script's dry run."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml
from tinyrepo import REPO, corekit, make_repo, one_line, tiny_notebook, write_notebook, write_paper_profile

NAME = "00_tiny"


def git(root, *args: str) -> str:
    """Return the output of ``git ARGS`` in ``root`` (raising when it fails)."""
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True,
                          env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})
    return done.stdout.strip()


@pytest.fixture
def checkout(tmp_path):
    """A committed tiny book with a paper profile, and a copy of its files without git (what a GPU machine gets)."""
    root = make_repo(tmp_path / "book", {NAME: tiny_notebook(NAME)})
    write_paper_profile(root, NAME, {"scale": 3.0})
    (root / ".gitignore").write_text("_build/\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "tiny")
    copy = tmp_path / "gpu"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".git"))
    return root, copy


def executed_elsewhere(copy, out, *args: str) -> None:
    """Run the tiny chapter in the git-less ``copy`` into ``out`` (as the GPU machine does)."""
    done = corekit("run", NAME, "--out", str(out), *args, root=copy)
    assert done.returncode == 0, done.stderr


def test_a_paper_run_from_a_copy_without_git_is_published_with_its_device_and_this_commit(checkout, tmp_path):
    root, copy = checkout
    out = tmp_path / "out"
    executed_elsewhere(copy, out, "--profile", "paper")
    metrics_path = out / f"{NAME}.metrics.json"
    metrics = json.loads(metrics_path.read_text())
    assert metrics["environment"]["commit"] is None                    # no git on the machine that ran it
    metrics["environment"]["device"] = "NVIDIA H200"                   # as torch names the GPU there
    metrics_path.write_text(json.dumps(metrics))
    check = corekit("adopt", str(out), "--check", root=root)
    assert check.returncode == 0 and "may be published" in check.stdout and not (root / "results").exists()
    done = corekit("adopt", str(out), root=root)
    assert done.returncode == 0, done.stderr
    published = json.loads((root / "results" / NAME / "metrics.json").read_text())
    assert published["profile"] == "paper" and published["environment"]["device"] == "NVIDIA H200"
    assert published["environment"]["commit"] == git(root, "rev-parse", "HEAD")
    assert published["environment"]["dirty"] is False
    assert [c["id"] for c in published["claims"]] == [c["id"] for c in metrics["claims"]]


def test_a_run_with_overrides_is_refused_naming_them(checkout, tmp_path, capsys):
    root, copy = checkout
    out = tmp_path / "out"
    executed_elsewhere(copy, out, "--profile", "paper", "-p", "scale", "4")
    done = corekit("adopt", str(out), root=root)
    assert done.returncode == 2
    one_line(done.stderr, f"adopt {NAME}: not a paper-profile run", "scale 4 (profile: 3.0)", "nothing published")
    assert not (root / "results").exists()


def test_a_run_of_other_sources_is_refused(checkout, tmp_path):
    root, copy = checkout
    out = tmp_path / "out"
    executed_elsewhere(copy, out, "--profile", "paper")
    write_notebook(root, NAME, tiny_notebook(NAME).replace("stand-in notebook", "stand-in notebook, edited"))
    done = corekit("adopt", str(out), root=root)
    assert done.returncode == 2
    one_line(done.stderr, "made from other sources than this checkout's", "nothing published")


def test_a_changed_profile_is_refused(checkout, tmp_path):
    root, copy = checkout
    out = tmp_path / "out"
    executed_elsewhere(copy, out, "--profile", "paper")
    write_paper_profile(root, NAME, {"scale": 5.0})
    done = corekit("adopt", str(out), root=root)
    one_line(done.stderr, "not a paper-profile run", "scale 3.0 (profile: 5.0)")


def test_a_paper_run_does_not_replace_nothing_but_a_larger_one_needs_force(checkout, tmp_path):
    root, copy = checkout
    out = tmp_path / "out"
    executed_elsewhere(copy, out)                                       # quick
    (root / "results" / NAME).mkdir(parents=True)
    (root / "results" / NAME / "metrics.json").write_text(json.dumps({"profile": "paper", "claims": []}))
    done = corekit("adopt", str(out), root=root)
    one_line(done.stderr, "results/ holds a larger run than a quick-profile one", "--force")


@pytest.mark.parametrize("args, message", [
    (["nowhere"], "is not a folder"),
    (["."], "holds no executed run"),
    (["out", "99_none"], "unknown notebook '99_none'"),
])
def test_bad_folders_and_names_are_one_line_errors(checkout, tmp_path, args, message):
    root, _ = checkout
    (tmp_path / "out").mkdir()
    os.chdir(tmp_path)
    done = corekit("adopt", *args, root=root)
    assert done.returncode == 2
    one_line(done.stderr, message)


def test_a_missing_notebook_beside_its_metrics_is_named(checkout, tmp_path):
    root, copy = checkout
    out = tmp_path / "out"
    executed_elsewhere(copy, out, "--profile", "paper")
    (out / f"{NAME}.ipynb").unlink()
    done = corekit("adopt", str(out), NAME, root=root)
    one_line(done.stderr, f"{NAME}.ipynb missing in")


# --------------------------------------------------------------------------------------------
# scripts/gpu-publish.sh


def gpu_publish(*args: str) -> subprocess.CompletedProcess:
    """Return the finished ``scripts/gpu-publish.sh ARGS`` run with this Python."""
    return subprocess.run(["bash", str(REPO / "scripts" / "gpu-publish.sh"), *args], capture_output=True, text=True,
                          timeout=1500, env={**os.environ, "PYTHON": sys.executable})


def test_gpu_publish_skips_what_the_budget_does_not_cover(tmp_path):
    done = gpu_publish("--dry-run", "--budget", "0", "--out", str(tmp_path))
    assert done.returncode == 1
    steps = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == ["02_grokking_cores", "03_grokking_scaling_law"]
    assert all(s["skipped"] for s in steps)


def test_gpu_publish_refuses_an_unknown_option(tmp_path):
    done = gpu_publish("--bogus", "--out", str(tmp_path))
    assert done.returncode == 2 and "unknown option --bogus" in done.stderr


@pytest.mark.notebook
def test_gpu_publish_dry_run_writes_runs_that_adopt_reads_and_refuses_as_overridden(tmp_path):
    out = tmp_path / "gpu"
    done = gpu_publish("--dry-run", "--out", str(out))
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    steps = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    assert [(s["step"], s["status"]) for s in steps] == [("02_grokking_cores", 0), ("03_grokking_scaling_law", 0)]
    for name in ("02_grokking_cores", "03_grokking_scaling_law"):
        assert (out / "runs" / f"{name}.ipynb").is_file() and (out / "runs" / "figures" / name).is_dir()
    adopt = corekit("adopt", str(out / "runs"), "--check")
    assert adopt.returncode == 2
    lines = adopt.stderr.splitlines()
    assert len(lines) == 2 and all("not a quick-profile run" in line for line in lines), adopt.stderr
    assert yaml.safe_load((REPO / "notebooks" / "params" / "paper" / "02_grokking_cores.yaml").read_text())["p"] == 53


# --------------------------------------------------------------------------------------------
# adopt checks the files it publishes, not only the metrics

def _link_figure(figures, tmp_path):
    """Replace the run's figure by a link to a file outside the run."""
    target = tmp_path / "elsewhere.png"
    shutil.copy2(figures / "figure_0.png", target)
    (figures / "figure_0.png").unlink()
    (figures / "figure_0.png").symlink_to(target)


def _random_bytes(figures, tmp_path):
    (figures / "figure_0.png").write_bytes(os.urandom(4096))


def _missing(figures, tmp_path):
    (figures / "figure_0.png").unlink()


def _another_png(figures, tmp_path):
    """Replace figure 0 by figure 1: a valid PNG, not the one saved under that name."""
    shutil.copy2(figures / "figure_1.png", figures / "figure_0.png")


def _added(figures, tmp_path):
    shutil.copy2(figures / "figure_1.png", figures / "figure_9.png")


@pytest.mark.parametrize("change, message", [
    (_link_figure, "figures/00_tiny/figure_0.png is a symbolic link (adopt publishes plain files only)"),
    (_random_bytes, "figures/00_tiny/figure_0.png is not a PNG image"),
    (_missing, "figures/00_tiny/figure_0.png, a figure the run saved, is missing"),
    (_another_png, "figures/00_tiny/figure_0.png is not the figure the run saved (its sha256 differs)"),
    (_added, "figures/00_tiny/figure_9.png is not a figure the run saved"),
])
def test_adopt_refuses_figures_that_are_not_the_ones_the_run_saved(tmp_path, change, message):
    root = make_repo(tmp_path / "book", {NAME: tiny_notebook(NAME, figures=2)})
    write_paper_profile(root, NAME, {"scale": 3.0})
    out = tmp_path / "out"
    executed_elsewhere(root, out, "--profile", "paper")
    metrics = json.loads((out / f"{NAME}.metrics.json").read_text())
    assert set(metrics["figure_sha256"]) == {"figure_0.png", "figure_1.png"}
    assert corekit("adopt", str(out), "--check", root=root).returncode == 0       # as the run left them
    change(out / "figures" / NAME, tmp_path)
    done = corekit("adopt", str(out), root=root)
    assert done.returncode == 2
    one_line(done.stderr, f"adopt {NAME}: {message}", "nothing published")
    assert not (root / "results").exists()
