"""Nothing outside a command's own files is deleted or replaced (issue 51): links, a user's folders, tracked folders,
incomplete profiles, merge keys, scientific notation in lists.

Every case runs the functions that delete or replace (:mod:`corekit.runs.execute`, :mod:`corekit.runs.site`,
:mod:`corekit.runs.owned`) or the command in this process with kernels forbidden (``no_kernel``); no notebook runs.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
from pathlib import Path

import pytest
from tinyrepo import make_repo, one_line, refused, tiny_notebook

from corekit.runs import execute, owned, parameters, publish, site
from corekit.runs.errors import CorekitError
from corekit.runs.notebooks import Notebook

NAME = "00_owned"


@pytest.fixture
def repo(tmp_path) -> Path:
    """A book holding one tiny notebook (parameters scale, matrix, fail, write_metrics, figures, output_dir)."""
    root = make_repo(tmp_path / "book", {NAME: tiny_notebook(NAME)})
    (root / "_config.yml").write_text("title: A tiny book\n")
    return root


def snapshot(*folders: Path) -> dict[str, tuple]:
    """Return everything below ``folders`` without following a link: path -> ('file', sha256), ('link', target) or
    ('dir',)."""
    listing = {}
    for top in folders:
        paths = [top] + [Path(folder) / name for folder, dirs, files in os.walk(top) for name in dirs + files]
        for path in paths:
            key = str(path)
            if path.is_symlink():
                listing[key] = ("link", os.readlink(path))
            elif path.is_dir():
                listing[key] = ("dir",)
            elif path.is_file():
                listing[key] = ("file", hashlib.sha256(path.read_bytes()).hexdigest())
    return listing


def finished_run(out: Path, name: str = NAME, figures: tuple[str, ...] = ("figure_0.png",)) -> execute.Outputs:
    """Return a private run folder in ``out`` holding a finished run of ``name`` (as papermill and the notebook leave
    it, metrics included), without a kernel."""
    folder = out / f".{name}.running-{os.getpid()}-test"
    folder.mkdir(parents=True)
    owned.mark(folder, "corekit run")
    run = execute.Outputs(folder, name)
    run.ipynb.write_text(json.dumps({"cells": [], "metadata": {"papermill": {"output_path": str(run.ipynb)}}}))
    run.figures.mkdir(parents=True)
    for figure in figures:
        (run.figures / figure).write_bytes(os.urandom(64))
    run.metrics.write_text(json.dumps({"notebook": name, "source_hash": "0" * 64, "profile": "quick", "claims": []}))
    return run


def commit(out: Path, name: str = NAME, figures: tuple[str, ...] = ("figure_0.png",)) -> None:
    """Swap a finished run of ``name`` into ``out`` as ``corekit run`` does (its private folder deleted after)."""
    run = finished_run(out, name, figures)
    try:
        execute.commit_outputs(run, execute.Outputs(out, name))
    finally:
        owned.remove_tree(run.folder)


# --------------------------------------------------------------------------------------------
# A symbolic link anywhere in a path that would be deleted or replaced


@pytest.mark.parametrize("link", ["figures", f"figures/{NAME}", f"{NAME}.ipynb", f"{NAME}.metrics.json",
                                  f"{NAME}.failed.ipynb"])
def test_a_link_on_the_way_to_a_replaced_path_is_refused_and_nothing_moves(tmp_path, link):
    """O10, O11: ``out/figures -> results`` deleted the published run; a link to a user's folder deleted their file."""
    out, outside = tmp_path / "out", tmp_path / "outside"
    commit(out)
    (outside / NAME).mkdir(parents=True)
    (outside / NAME / "notes.txt").write_text("a user's notes")
    (outside / "file.txt").write_text("a user's file")
    target = out / link
    if target.exists():
        owned.remove_tree(target) if target.is_dir() else target.unlink()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(outside / ("file.txt" if link.endswith(("ipynb", "json")) else NAME if "/" in link else ""))
    before = snapshot(out, outside)
    problem = execute.replace_problem(execute.Outputs(out, NAME))
    assert problem and problem.startswith(f"{target} is a symbolic link"), problem
    run = finished_run(tmp_path / "staging")
    with pytest.raises(OSError, match="is a symbolic link"):
        execute.commit_outputs(run, execute.Outputs(out, NAME))
    assert snapshot(out, outside) == before
    assert (run.figures / "figure_0.png").is_file()


def test_run_with_a_linked_figures_folder_is_refused_before_a_kernel(repo, tmp_path, capsys, monkeypatch, no_kernel):
    """O10 through the command: one line naming the link, exit 2, the published run and the last run untouched."""
    (repo / "results" / NAME).mkdir(parents=True)
    (repo / "results" / NAME / "metrics.json").write_text("{}")
    out = tmp_path / "out"
    out.mkdir()
    (out / "figures").symlink_to(repo / "results")
    before = snapshot(out, repo / "results")
    err = refused(capsys, monkeypatch, repo, "run", NAME, "--out", str(out))
    one_line(err, f"{out / 'figures'} is a symbolic link (to {repo / 'results'})", "never deletes or replaces")
    assert snapshot(out, repo / "results") == before


def test_remove_tree_refuses_a_link_and_never_follows_one_inside(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "into").symlink_to(outside)
    (tmp_path / "link").symlink_to(folder)
    with pytest.raises(OSError, match="symbolic link"):
        owned.remove_tree(tmp_path / "link")
    assert (folder / "into").is_symlink()
    owned.remove_tree(folder)
    assert not folder.exists() and (outside / "keep.txt").read_text() == "keep"


def test_publish_refuses_a_linked_results_folder(repo, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    (repo / "results").mkdir()
    (repo / "results" / NAME).symlink_to(outside)
    with pytest.raises(CorekitError, match=f"{repo / 'results' / NAME} is a symbolic link"):
        publish.publish(repo, publish.executed_run(tmp_path / "out", NAME))
    assert [p.name for p in outside.iterdir()] == ["keep.txt"]


# --------------------------------------------------------------------------------------------
# corekit run replaces only what its runs wrote


def test_a_run_replaces_its_own_outputs_and_keeps_a_record(tmp_path):
    out = tmp_path / "out"
    commit(out, figures=("a.png", "b.png"))
    final = execute.Outputs(out, NAME)
    assert execute.recorded(final) == {f"{NAME}.ipynb", f"{NAME}.metrics.json", f"figures/{NAME}",
                                       f"figures/{NAME}/a.png", f"figures/{NAME}/b.png"}
    commit(out, figures=("c.png",))
    assert sorted(p.name for p in final.figures.iterdir()) == ["c.png"]
    assert execute.recorded(final) == {f"{NAME}.ipynb", f"{NAME}.metrics.json", f"figures/{NAME}",
                                       f"figures/{NAME}/c.png"}
    assert sorted(p.name for p in out.iterdir()) == sorted([final.record.name, "figures", f"{NAME}.ipynb",
                                                            f"{NAME}.metrics.json"])


@pytest.mark.parametrize("user", [f"{NAME}.ipynb", f"figures/{NAME}/notes.txt", f"{NAME}.interrupted.ipynb"])
def test_a_file_the_run_did_not_write_is_not_replaced(tmp_path, user):
    out = tmp_path / "out"
    if user.startswith("figures"):
        commit(out)                                    # a user's file put into the run's figures folder
    path = out / user
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("the user's")
    before = snapshot(out)
    problem = execute.replace_problem(execute.Outputs(out, NAME))
    assert problem == (f"{path} was not written by corekit run (the record .{NAME}.written-by-corekit.json does not "
                       "list it); corekit replaces only what it wrote: move it away or choose another --out")
    with pytest.raises(OSError):
        commit(out)
    after = snapshot(out)
    assert {k: v for k, v in after.items() if k in before} == before


def test_an_earlier_corekits_run_without_a_record_is_still_replaced(tmp_path):
    """A folder written before records: its complete run (a metrics file of the notebook) is the run's to replace, a
    file added to its figures later is not."""
    out = tmp_path / "out"
    commit(out)
    final = execute.Outputs(out, NAME)
    final.record.unlink()
    assert execute.replace_problem(final) is None
    later = final.figures / "later.txt"
    later.write_text("added after the run")
    os.utime(later, ns=(final.metrics.stat().st_mtime_ns + 10**9,) * 2)
    assert execute.replace_problem(final).startswith(f"{later} was not written by corekit run")


def test_an_abandoned_private_folder_is_removed_only_when_marked(tmp_path):
    out = tmp_path / "out"
    ours, theirs = out / f".{NAME}.running-999999999-abc", out / f".{NAME}.running-999999998-def"
    for folder in (ours, theirs):
        folder.mkdir(parents=True)
        (folder / "x").write_text("x")
    owned.mark(ours, "corekit run")
    execute.remove_abandoned_staging(out, NAME)
    assert not ours.exists() and (theirs / "x").is_file()


# --------------------------------------------------------------------------------------------
# corekit book: a user's source/ or _build/, tracked folders


def test_stage_book_keeps_a_users_source_folder(repo, tmp_path):
    """NB1: ``stage_book`` began with rmtree(OUT/source)."""
    out = tmp_path / "userdir"
    (out / "source" / "thesis").mkdir(parents=True)
    (out / "source" / "thesis" / "chapter1.tex").write_text("\\chapter{One}")
    (out / "source" / "README").write_text("mine")
    before = snapshot(out)
    with pytest.raises(CorekitError, match=f"{out / 'source'} exists and was not made by corekit book"):
        site.stage_book(repo, {}, out / "source")
    assert snapshot(out) == before


@pytest.mark.parametrize("link", ["source", "source/notebooks", "_build"])
def test_a_link_in_the_books_folders_is_refused(repo, tmp_path, link):
    out, users = tmp_path / "out", tmp_path / "users"
    site.stage_book(repo, {}, out / "source")
    site.build_folder(out)
    (users / "notebooks").mkdir(parents=True)
    (users / "notebooks" / "mine.ipynb").write_text("{}")
    owned.remove_tree(out / link)
    (out / link).symlink_to(users)
    before = snapshot(out, users)
    assert site.book_problems(out) == [f"{out / link} is a symbolic link (to {users}); corekit never deletes or replaces "
                                       "anything through a link: remove the link or choose another folder"]
    with pytest.raises(CorekitError, match="is a symbolic link"):
        site.build_folder(out) if link == "_build" else site.stage_book(repo, {}, out / "source")
    assert snapshot(out, users) == before


def test_stage_book_replaces_its_own_stage_but_not_a_file_added_to_it(repo, tmp_path):
    stage = tmp_path / "out" / "source"
    site.stage_book(repo, {}, stage)
    assert owned.marked_paths(stage) == {"_config.yml", "_toc.yml", "notebooks"}
    site.stage_book(repo, {}, stage)                   # an earlier build's stage: replaced
    (stage / "notes.md").write_text("added by hand")
    with pytest.raises(CorekitError, match=f"{stage / 'notes.md'} was not made by corekit book"):
        site.stage_book(repo, {}, stage)
    assert (stage / "notes.md").read_text() == "added by hand"


@pytest.mark.parametrize("folder", ["source", "_build"])
def test_book_out_with_a_users_folder_is_refused_before_anything(repo, tmp_path, capsys, monkeypatch, no_kernel,
                                                                  folder):
    out = tmp_path / "userdir"
    (out / folder / "html").mkdir(parents=True)
    (out / folder / "html" / "index.html").write_text("my site")
    before = snapshot(out)
    for args in (["book", "--published"], ["book"]):
        err = refused(capsys, monkeypatch, repo, *args, "--out", str(out))
        one_line(err, f"{out / folder} exists and was not made by corekit book (it holds no .corekit-made)")
        assert snapshot(out) == before


def test_build_folder_is_made_marked_and_kept_when_foreign(tmp_path):
    out = tmp_path / "out"
    build = site.build_folder(out)
    assert owned.is_marked(build) and site.build_folder(out) == build
    (build / "html").mkdir()
    with site.marking(build):
        (build / "html" / "index.html").write_text("built")
    assert site.book_problems(out) == []
    (build / "html" / "mine.html").write_text("a user's page")
    assert site.book_problems(out) == [f"{build / 'html' / 'mine.html'} was not made by corekit book (its "
                                       "_build/.corekit-made does not list it); corekit deletes or replaces only what "
                                       "it made: move it away or choose another folder"]


@pytest.mark.parametrize("option, folder, published", [
    *((option, folder, published) for option, folder in [("--out", "results"), ("--out", "book"),
                                                         ("--out", "notebooks"), ("--out", "lib"), ("--out", ".git"),
                                                         ("--out", "results/x")] for published in (False, True)),
    ("--executed", "notebooks", False),                # book --published only reads --executed
])
def test_book_into_a_tracked_folder_is_refused(repo, capsys, monkeypatch, no_kernel, option, folder, published):
    """NB2, NB3, NB4: --out results or book wrote into tracked folders; --executed notebooks ran into notebooks/."""
    (repo / "book").mkdir(exist_ok=True)
    before = snapshot(repo)
    err = refused(capsys, monkeypatch, repo, "book", *(["--published"] if published else []), option, str(repo / folder))
    one_line(err, f"{option} {repo / folder}: inside {folder.split('/')[0]}/")
    assert snapshot(repo) == before


def test_book_into_any_folder_git_tracks_is_refused(repo, capsys, monkeypatch, no_kernel):
    (repo / "scripts").mkdir()
    (repo / "scripts" / "tool.sh").write_text("true\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "scripts/tool.sh"], check=True)
    err = refused(capsys, monkeypatch, repo, "book", "--published", "--out", str(repo / "scripts" / "site"))
    one_line(err, f"--out {repo / 'scripts' / 'site'}: inside scripts/, a folder of the repository that git tracks")
    assert not (repo / "scripts" / "site").exists()


def test_book_out_at_the_repository_root_is_refused(repo, capsys, monkeypatch, no_kernel):
    err = refused(capsys, monkeypatch, repo, "book", "--out", str(repo))
    one_line(err, f"--out {repo}: the repository root", "_build/book/quick")


# --------------------------------------------------------------------------------------------
# Profiles: empty, cut short, merge keys; scientific notation


def write_profile(repo: Path, text: str) -> Path:
    """Return the paper profile of NAME written as ``text``."""
    path = repo / "notebooks" / "params" / "paper" / f"{NAME}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, problem", [
    ("", "sets nothing (the file is empty or holds only comments)"),                                    # Y03
    ("# the paper's settings\n\n", "sets nothing (the file is empty or holds only comments)"),
    ("{}\n", "sets nothing"),
    ("scale: 3.0\nfigures: 1", "ends without a line break, as a file cut short does (last line: 'figures: 1')"),
])
def test_an_empty_or_cut_short_profile_is_refused_before_a_kernel(repo, tmp_path, capsys, monkeypatch, no_kernel, text,
                                                                   problem):
    write_profile(repo, text)
    for args in (["run", NAME, "--profile", "paper", "--out", str(tmp_path / "out")],
                 ["run", NAME, "--profile", "paper", "--publish", "--out", str(tmp_path / "out")],
                 ["run", "all", "--profile", "paper", "--out", str(tmp_path / "out")]):
        err = refused(capsys, monkeypatch, repo, *args)
        one_line(err, f"corekit: error: notebooks/params/paper/{NAME}.yaml: {problem}")
    assert not (repo / "results").exists()


def test_an_empty_profile_fails_the_published_checks(repo):
    write_profile(repo, "")
    metrics = {"notebook": NAME, "profile": "paper", "source_hash": "0" * 64, "claims": []}
    folder = repo / "results" / NAME
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps(metrics))
    problems = publish.metrics_problems(repo, publish.published_run(repo, NAME))
    assert any(f"notebooks/params/paper/{NAME}.yaml: sets nothing" in p for p in problems), problems


@pytest.mark.parametrize("text, line", [("scale: 3.0\n<<: {scale: 4.0, figures: 0}\n", 2),                   # Y08
                                        ("base: &base {scale: 4.0}\n<<: *base\n", 2)])
def test_a_merge_key_is_refused_like_a_key_written_twice(repo, tmp_path, capsys, monkeypatch, no_kernel, text, line):
    write_profile(repo, text)
    err = refused(capsys, monkeypatch, repo, "run", NAME, "--profile", "paper", "--out", str(tmp_path / "out"))
    one_line(err, f"notebooks/params/paper/{NAME}.yaml, line {line}: ", "a merge key (<<) is not accepted")


def test_a_merge_key_in_a_p_value_is_refused(repo, capsys, monkeypatch, no_kernel, tmp_path):
    err = refused(capsys, monkeypatch, repo, "run", NAME, "-p", "matrix", "{<<: {a: 1}}", "--out", str(tmp_path))
    one_line(err, "-p matrix: cannot parse", "a merge key (<<) is not accepted")


@pytest.mark.parametrize("text, value", [("[0.9, 1e-3]", [0.9, 0.001]), ("[[5e-1, 5E-1], [2.5e-1, .75e0]]",
                                                                          [[0.5, 0.5], [0.25, 0.75]]),
                                         ("1e-3", 0.001), ("'1e-3'", "1e-3"), ("[1, 2]", [1, 2])])
def test_scientific_notation_is_a_number_in_a_list_too(text, value):
    """Y02: ``-p betas '[0.9, 1e-3]'`` refused '1e-3' as not a number."""
    assert parameters.parse_value("x", text) == value


def test_scientific_notation_passes_the_checks_in_p_lists_and_profiles(repo):
    nb = Notebook(repo, NAME)
    matrix = parameters.parse_value("matrix", "[[5e-1, 5e-1], [2.5e-1, 7.5e-1]]")
    assert parameters.effective_parameters(nb, "quick", {"matrix": matrix})["matrix"] == [[0.5, 0.5], [0.25, 0.75]]
    write_profile(repo, "scale: 1e-4\n")                                                                   # Y01
    assert parameters.effective_parameters(nb, "paper", {}) == {"scale": 1e-4}


# --------------------------------------------------------------------------------------------
# Property: for random --out layouts, the removal and staging functions delete nothing they did not make

#: Where a layout puts the user's things: the run's and the book's own names, names beside them, nested names.
USER_PATHS = [f"{NAME}.ipynb", f"{NAME}.metrics.json", f"{NAME}.failed.ipynb", f"{NAME}.interrupted.ipynb",
              "figures", f"figures/{NAME}", f"figures/{NAME}/notes.txt", f"figures/{NAME}/sub/deep.png",
              f"figures/{NAME}_other/x.png", f"{NAME}.ipynb.bak", "source", "source/thesis/chapter1.tex",
              "source/notebooks", "_build", "_build/html/index.html", "notes/deep/nested/file.txt",
              f".{NAME}.running-999999999-abc", f".{NAME}.running-999999999-abc/x.txt", "ünï cödé/a b.txt"]


def user_layout(rng: random.Random, out: Path, outside: Path) -> None:
    """Put 1-6 of :data:`USER_PATHS` into ``out``: files with random bytes, or links to files or folders outside."""
    for rel in rng.sample(USER_PATHS, rng.randint(1, 6)):
        path = out / rel
        if path.exists() or path.is_symlink() or any(p.is_symlink() or p.is_file() for p in path.parents):
            continue                                   # a place already taken, or under a link or a file
        path.parent.mkdir(parents=True, exist_ok=True)
        kind = rng.choice(["file", "file", "link_file", "link_folder"])
        if kind == "file":
            path.write_bytes(os.urandom(rng.randint(0, 64)))
        else:
            target = outside / f"t{rng.randrange(10**9)}"
            if kind == "link_file":
                target.write_bytes(os.urandom(16))
            else:
                (target / NAME).mkdir(parents=True)
                (target / NAME / "notes.txt").write_text("outside")
            path.symlink_to(target)


def ours_after_previous_commands(rng: random.Random, repo: Path, out: Path) -> None:
    """Leave in ``out`` what earlier corekit commands made there, by chance: a run, a book's stage and build."""
    if rng.random() < 0.5:
        commit(out, figures=tuple(f"figure_{k}.png" for k in range(rng.randint(0, 3))))
    if rng.random() < 0.4:
        site.stage_book(repo, {}, out / "source")
    if rng.random() < 0.4:
        with site.marking(site.build_folder(out)):
            (out / "_build" / "html").mkdir()
            (out / "_build" / "html" / "index.html").write_text("built")


def apply_commands(repo: Path, out: Path, staging: Path) -> list[str]:
    """Run the functions that delete or replace in ``out`` as a run and a book build do; return what each refused."""
    refusals = []
    final = execute.Outputs(out, NAME)
    execute.remove_abandoned_staging(out, NAME)
    run = finished_run(staging / "a")
    try:
        execute.commit_outputs(run, final)
    except OSError as err:
        refusals.append(f"commit: {err}")
    failed = finished_run(staging / "b")
    if execute.replace_problem(final) is None:
        execute.keep_unfinished(failed, final, "failed")
    for step in (lambda: site.stage_book(repo, {}, out / "source"), lambda: site.build_folder(out)):
        try:
            step()
        except CorekitError as err:
            refusals.append(f"book: {err}")
    return refusals


@pytest.mark.parametrize("seed", range(20))
def test_random_out_layouts_lose_nothing_the_commands_did_not_make(repo, tmp_path, seed):
    rng = random.Random(seed)
    out, outside, staging = tmp_path / "out", tmp_path / "outside", tmp_path / "staging"
    out.mkdir()
    outside.mkdir()
    ours_after_previous_commands(rng, repo, out)
    made = snapshot(out)
    user_layout(rng, out, outside)
    before = snapshot(out, outside)
    users = {path: entry for path, entry in before.items() if path not in made or made[path] != entry}
    refusals = apply_commands(repo, out, staging)
    after = snapshot(out, outside)
    lost = {path: entry for path, entry in users.items() if after.get(path) != entry}
    assert not lost, f"deleted or replaced: {sorted(lost)}; refusals: {refusals}"
    clear = not any(path.startswith(str(out / "figures")) or Path(path).name.startswith(NAME)
                    for path in users if path.startswith(str(out)))
    if clear:
        assert not [r for r in refusals if r.startswith("commit")], refusals
        assert execute.Outputs(out, NAME).metrics.is_file()


def test_book_with_a_mistyped_executed_folder_is_refused_before_any_run(repo, capsys, monkeypatch, no_kernel, tmp_path):
    """H4 (issue 68): ``book --executed`` with a folder that does not exist started executing every notebook into it."""
    before = snapshot(repo)
    for published in (False, True):
        err = refused(capsys, monkeypatch, repo, "book", *(["--published"] if published else []), "--executed",
                      str(tmp_path / "exectued"))
        one_line(err, f"book: --executed '{tmp_path / 'exectued'}' is not a folder", "leave it out")
    assert snapshot(repo) == before and not (tmp_path / "exectued").exists()
