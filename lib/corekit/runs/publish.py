"""The published edition: committed runs in ``results/``, the run record on each page, the results page.

Layout of ``results/`` (one folder per notebook, written by ``corekit run NAME --profile P --publish``)::

    results/NN_name/NN_name.ipynb     the executed notebook, progress bars dropped
    results/NN_name/metrics.json      its metrics: claims, profile, parameters, runtime, environment,
                                      source_hash, the figures in the order they were saved, and the
                                      digests of its claims and of its notebook's claims table
    results/NN_name/figures/*.png     its figures

:func:`publish` replaces a notebook's folder only once its new run has succeeded. At book build time,
:func:`decorate` opens every chapter with its run record (profile, device, threads, runtime, commit,
date, and a warning when the sources changed since the run) and writes the results page
(``book/results.md``: every claim of every chapter, and a gallery of each chapter's first figure).
"""
from __future__ import annotations

import contextlib
import copy
import datetime
import hashlib
import json
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Collection, Iterable, Iterator

from corekit import oracle
from corekit.report.pages import chapter_findings, front_section, results_section, statements_json, tally_sentence
from corekit.report.reading import COLOUR, RULE, WORDS, Reading, read_all
from corekit.report.reading import tally as statement_tally
from corekit.runs import owned, vouch
from corekit.runs.claims import VERDICT_STYLE, id_html, kind_of, verdict_of
from corekit.runs.claims_view import claims_html, model_name, models_summary, per_model_values, value_summary
from corekit.runs.errors import CorekitError, Problems
from corekit.runs.notebooks import (
    NOTEBOOK_NAME,
    PROFILES,
    Notebook,
    chapter_module,
    notebook_names,
    toc_files,
    toc_notebooks,
)
from corekit.runs.parameters import accepted_values, effective_parameters, read_profile, resolved_parameters
from corekit.runs.portable import portable_parameters, portable_value
from corekit.runs.site import build_html, marking, stage_book, stage_notebook
from corekit.runs.source_hash import source_hash
from corekit.verdicts import VERDICTS, format_value

#: Folder of the published runs, under the book's root.
RESULTS = "results"
#: The generated results page, as ``_toc.yml`` names it.
RESULTS_PAGE = "book/results"
#: A published notebook larger than this (bytes) draws a warning: its figures are too many or too large.
SIZE_WARNING_BYTES = 3 * 2**20
#: Longest rendering of a value in the results table, in characters.
VALUE_WIDTH = 60
#: Characters that markdown or MyST would read as markup inside a table cell (escaped with a backslash).
MARKUP = re.compile(r"[\\`*_{}\[\]<>|$~]")
#: How each verdict is shown in a table.
VERDICT_HTML = {v: f'<span class="corekit-{v}">{label}</span>' for v, (label, _) in VERDICT_STYLE.items()}


@dataclass(frozen=True)
class Run:
    """One executed notebook the book shows: its .ipynb, its metrics and its figures folder."""

    name: str
    ipynb: Path
    metrics_path: Path
    figures: Path
    published: bool

    @property
    def metrics(self) -> dict:
        """The run's metrics file, parsed; a file that is not a JSON object is a one-line error naming it."""
        try:
            metrics = json.loads(self.metrics_path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise CorekitError(f"{self.metrics_path}: not a readable metrics file ({err})") from None
        if not isinstance(metrics, dict) or not isinstance(metrics.get("claims", []), list):
            raise CorekitError(f"{self.metrics_path}: not a metrics file (expected a JSON object with a "
                                    f"'claims' list, got {type(metrics).__name__})")
        return metrics

    def exists(self) -> bool:
        """Return whether the run's notebook and metrics are both there."""
        return self.ipynb.is_file() and self.metrics_path.is_file()

    def figure_files(self) -> list[Path]:
        """Return the run's figure files in the order the notebook saved them (recorded, else by file time)."""
        if not self.figures.is_dir():
            return []
        order = self.metrics.get("figures") or []
        outside = [name for name in order if not isinstance(name, str) or Path(name).name != name]
        if outside:
            raise CorekitError(f"{self.metrics_path}: figure entries must be file names inside "
                                    f"{self.figures.name}/, got {outside}")
        files = [self.figures / name for name in order if (self.figures / name).is_file()]
        rest = sorted((p for p in self.figures.glob("*.png") if p not in files), key=lambda p: p.stat().st_mtime_ns)
        return files + rest


def published_run(root: Path, name: str) -> Run:
    """Return the published run of ``name`` (its files may not exist)."""
    folder = root / RESULTS / name
    return Run(name, folder / f"{name}.ipynb", folder / "metrics.json", folder / "figures", published=True)


def executed_run(executed_dir: Path, name: str) -> Run:
    """Return the run of ``name`` that ``corekit run --out executed_dir`` wrote (its files may not exist)."""
    return Run(name, executed_dir / f"{name}.ipynb", executed_dir / f"{name}.metrics.json",
               executed_dir / "figures" / name, published=False)


# --------------------------------------------------------------------------------------------
# Publishing a run


def tidy_notebook(source: Path, target: Path, root: Path) -> int:
    """Write ``source`` to ``target`` without progress bars; return its bytes."""
    stage_notebook(source, target, root)
    return target.stat().st_size


@contextlib.contextmanager
def results_locked(root: Path, shared: bool = False) -> Iterator[None]:
    """While entered, hold the lock on ``results/``: exclusive for publishing (a second publish waits for the first),
    ``shared`` for a book build reading what it shows (a publish waits until the build has read it all, and a build
    until a publish has finished), saying so on stderr when it waits. A build finds no ``results/`` to lock if there
    is none (it makes none)."""
    import fcntl

    folder = root / RESULTS
    if shared and not folder.is_dir():
        yield
        return
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY)
    try:
        mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            doing = "publishing to" if shared else "publishing to or building the book from"
            print(f"corekit: waiting for {folder}: another corekit command is {doing} it", file=sys.stderr, flush=True)
            fcntl.flock(fd, mode)
        yield
    finally:
        os.close(fd)                           # closing the folder releases the lock


def run_folders(ipynb: Path) -> tuple[Path, ...]:
    """Return the private folders an executed notebook ran in (papermill's ``output_path``, ``input_path`` parents)."""
    meta = json.loads(ipynb.read_text()).get("metadata", {}).get("papermill", {})
    return tuple(Path(meta[key]).parent for key in ("output_path", "input_path") if isinstance(meta.get(key), str))


def publish(root: Path, executed: Run, environment: dict | None = None) -> Path:
    """Return ``results/NAME`` after replacing it with the (successful) run ``executed`` (its run record's environment
    updated by ``environment``, e.g. the commit :func:`adopted_environment` vouches for).

    The new folder is assembled beside the old one and swapped in by two renames, so an interrupted
    publish leaves the previous published run in place.
    """
    results = root / RESULTS
    final = results / executed.name
    new, old = results / f".{executed.name}.new", results / f".{executed.name}.old"
    links = [link for path in (final, new, old) if (link := owned.link_on_path(root, path)) is not None]
    if links:
        raise CorekitError(owned.link_problem(links[0]))
    unvouched = vouched_problems(executed)
    if unvouched:
        raise Problems([f"{line}; not published" for line in unvouched])
    for leftover in (new, old):
        if leftover.exists():
            owned.remove_tree(leftover)
    new.mkdir(parents=True)
    size = tidy_notebook(executed.ipynb, new / f"{executed.name}.ipynb", root)
    metrics = executed.metrics
    if environment:
        metrics["environment"] = {**(metrics.get("environment") or {}), **environment}
    metrics = portable_value({**metrics, "parameters": portable_parameters(metrics.get("parameters") or {}, root)},
                             root, (executed.metrics_path.parent, *run_folders(executed.ipynb)))
    figures = executed.figure_files()
    metrics["figures"] = [p.name for p in figures]
    metrics[vouch.CLAIMS_DIGEST] = vouch.claims_digest(metrics.get("claims") or [])
    metrics[vouch.TABLE_DIGEST] = vouch.table_digest(vouch.notebook_claims_table(new / f"{executed.name}.ipynb"))
    (new / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    if figures:
        (new / "figures").mkdir()
        for path in figures:
            shutil.copy2(path, new / "figures" / path.name)
    if final.exists():
        final.rename(old)
    new.rename(final)
    if old.exists():
        owned.remove_tree(old)
    if size > SIZE_WARNING_BYTES:
        print(f"corekit: warning: the published {executed.name}.ipynb is {size / 2**20:.1f} MB (over "
              f"{SIZE_WARNING_BYTES / 2**20:.0f} MB): show fewer or smaller figures", file=sys.stderr)
    print(f"published {executed.name} ({metrics.get('profile')} profile, {size / 2**20:.2f} MB) -> {final}")
    return final


def adoption_problems(nb: Notebook, run: Run) -> list[str]:
    """Return one line per reason not to publish here the run of ``nb`` that another machine executed (``corekit run
    --out``): a missing file, an unknown profile, a parameter other than its profile's (a ``-p`` override), or sources
    other than this checkout's (its source hash); empty when it may be published as ``--publish`` would."""
    missing = [path.name for path in (run.ipynb, run.metrics_path) if not path.is_file()]
    if missing:
        return [f"{' and '.join(missing)} missing in {run.metrics_path.parent} (what `corekit run --out DIR` writes)"]
    try:
        metrics = run.metrics
    except CorekitError as err:
        return [str(err)]
    profile = metrics.get("profile")
    if profile not in PROFILES:
        return [f"{run.metrics_path.name}: profile {profile!r} is not one of {', '.join(PROFILES)}"]
    if profile != "quick" and not nb.profile_file(profile).is_file():
        return [f"a {profile}-profile run, but this checkout has no notebooks/params/{profile}/{nb.name}.yaml"]
    try:
        wanted = resolved_parameters(nb, effective_parameters(nb, profile, {}))
    except CorekitError as err:
        return [f"its profile cannot be read here ({err})"]
    paths = {name for name, rule in accepted_values(nb).items() if rule.path}
    ran = metrics.get("parameters") or {}
    differ = sorted(name for name in wanted
                    if name not in paths and name not in MACHINE_SETTINGS and ran.get(name) != wanted[name])
    if differ:
        shown = ", ".join(f"{name} {json.dumps(ran.get(name))} (profile: {json.dumps(wanted[name])})"
                          for name in differ[:4]) + (f" and {len(differ) - 4} more" if len(differ) > 4 else "")
        return [f"not a {profile}-profile run: it set {shown}; only a run of the profile as written is published"]
    if stale_reason(nb, metrics):
        return [f"made from other sources than this checkout's (its source hash {str(metrics.get('source_hash'))[:12]} "
                f"is not that of notebooks/{nb.name}.py, the library and the {profile} profile here); run it from "
                "this commit"]
    return file_problems(run) or vouched_problems(run)


def _is_png(path: Path) -> bool:
    """Return whether ``path`` decodes as a PNG image."""
    from PIL import Image

    try:
        with Image.open(path) as image:
            image.verify()
            return image.format == "PNG"
    except Exception:                                     # noqa: BLE001 (whatever Pillow raises, it is no image)
        return False


def file_problems(run: Run) -> list[str]:
    """Return one line per file of an executed run that ``adopt`` may not publish: a symbolic link on the way (the
    notebook, the metrics, the figures folder or a figure), a figure that does not decode as a PNG, and, against the
    sha256 of each figure the run saved (``figure_sha256`` in its metrics), a figure missing, changed or added."""
    rel = lambda path: path.relative_to(run.metrics_path.parent).as_posix()  # noqa: E731
    links = [rel(p) for p in (run.ipynb, run.metrics_path, run.figures) if p.is_symlink()]
    if links:
        return [f"{name} is a symbolic link (adopt publishes plain files only)" for name in links]
    files = sorted(run.figures.iterdir()) if run.figures.is_dir() else []
    problems = [f"{rel(p)} is a symbolic link (adopt publishes plain files only)" for p in files if p.is_symlink()]
    problems += [f"{rel(p)} is not a PNG image" for p in files
                 if p.suffix == ".png" and not p.is_symlink() and p.is_file() and not _is_png(p)]
    saved = run.metrics.get("figure_sha256")
    if isinstance(saved, dict):
        for name, sha in saved.items():
            path = run.figures / str(name)
            if not path.is_file():
                problems.append(f"{rel(path)}, a figure the run saved, is missing")
            elif not any(rel(path) in line for line in problems) and \
                    hashlib.sha256(path.read_bytes()).hexdigest() != sha:
                problems.append(f"{rel(path)} is not the figure the run saved (its sha256 differs)")
        problems += [f"{rel(p)} is not a figure the run saved" for p in files if p.suffix == ".png" and p.name not in saved]
    return problems


def adopted_environment(root: Path, nb: Notebook, metrics: dict) -> dict:
    """Return what a run executed on another machine adds to its run record here: the commit it ran, when the machine
    recorded none (a copy of the tree without git) and this checkout's HEAD holds the same sources."""
    import subprocess

    env = metrics.get("environment") or {}
    if env.get("commit"):
        return {}
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
    commit = head.stdout.strip() if head.returncode == 0 else ""
    if commit and sources_match_commit(root, nb.name, {**metrics, "environment": {**env, "commit": commit}}):
        return {"commit": commit, "dirty": False}
    return {}


# --------------------------------------------------------------------------------------------
# The run record at the top of each page


def duration(seconds: float | None) -> str:
    """Return ``seconds`` as '42 s', '3 min 05 s' or '2 h 07 min'."""
    if seconds is None:
        return "not recorded"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def run_parameters(nb: Notebook, metrics: dict) -> dict:
    """Return the run's profile parameters as the sources give them now, path parameters as the run recorded them
    (a path names where outputs went on the machine that ran it, and changes no result)."""
    params = effective_parameters(nb, metrics.get("profile", "quick"), {})
    recorded = metrics.get("parameters") or {}
    paths = [name for name, rule in accepted_values(nb).items() if rule.path and name in recorded and name in params]
    return {**params, **{name: recorded[name] for name in paths}}


def stale_reason(nb: Notebook, metrics: dict) -> str | None:
    """Return why the run no longer matches the current sources, or None when its source_hash still does."""
    try:
        params = run_parameters(nb, metrics)
    except CorekitError as err:
        return f"its profile cannot be read any more ({err})"
    if metrics.get("source_hash") != source_hash(nb, params):
        return "the notebook, the library or the profile's parameters changed since this run"
    return None


def sources_match_commit(root: Path, name: str, metrics: dict) -> bool:
    """Return whether the run's source_hash is that of its notebook, library and profile at its recorded commit (so a
    tree recorded as dirty differed from that commit only outside the run's sources, e.g. in results/)."""
    import subprocess
    import tarfile
    import tempfile

    commit = (metrics.get("environment") or {}).get("commit")
    if not commit or not isinstance(commit, str):
        return False
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "sources.tar"
        listed = subprocess.run(["git", "-C", str(root), "ls-tree", "--name-only", commit], capture_output=True,
                                text=True)
        folders = [f for f in ("notebooks", "lib") if f in listed.stdout.split()]   # a book may use the installed lib
        done = subprocess.run(["git", "-C", str(root), "archive", "-o", str(archive), commit, *folders],
                              capture_output=True)
        if listed.returncode != 0 or "notebooks" not in folders or done.returncode != 0:
            return False
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        then = Notebook(Path(tmp), name)
        try:
            return then.py.is_file() and metrics.get("source_hash") == source_hash(then, run_parameters(then, metrics))
        except CorekitError:
            return False


def record_markdown(nb: Notebook, run: Run) -> str:
    """Return the MyST markdown of the run record that opens a chapter (with a warning when stale)."""
    metrics = run.metrics
    env = metrics.get("environment") or {}
    commit = env.get("commit")
    touched = env.get("dirty") and not (run.published and sources_match_commit(nb.root, nb.name, metrics))
    commit_text = f"`{commit[:10]}`" + (" (with uncommitted changes)" if touched else "") if commit else "not recorded"
    date = (env.get("date") or "not recorded").replace("T", " ").replace("+00:00", " UTC")
    profile = metrics.get("profile", "?")
    kind = "Published run" if run.published else "Run"
    threads = env.get("threads")
    source = metrics.get("source_hash")
    lines = [":::{admonition} " + kind, ":class: corekit-run note",
             f"**profile** {profile} · **device** {env.get('device') or 'not recorded'} · "
             f"**threads** {threads if threads is not None else 'not recorded'} · "
             f"**torch** {env.get('torch') or 'not recorded'} · "
             f"**runtime** {duration(metrics.get('runtime_s'))} · **commit** {commit_text} · "
             f"**source hash** {f'`{source[:12]}`' if source else 'not recorded'} · **date** {date}",
             ":::"]
    if not run.published:
        lines += ["", ":::{note}", f"This page shows a {profile}-profile run made for this build, not a published "
                  "run (`results/`).", ":::"]
    reason = stale_reason(nb, metrics)
    if reason:
        lines += ["", ":::{warning}", f"This page may be out of date: {reason}. Re-run it with "
                  f"`corekit run {nb.name} --profile {profile} --publish`.", ":::"]
    box = verdict_box(metrics, own=bool(nb.declared.get("own_hypotheses")))
    return "\n".join(lines + ["", reproduce_markdown(nb, metrics), "", box])


#: Where a chapter's page offers its notebook's source (``notebooks/NAME.py``) for download, inside the staged book.
SOURCES = "book/sources"


def reproduce_markdown(nb: Notebook, metrics: dict) -> str:
    """Return the lines that say how to reproduce the page: the command, what it took, the source to download, where
    its values repeat to the last digit, and folded, the values the run used (a table)."""
    env = metrics.get("environment") or {}
    command = run_command(nb.name, metrics)
    n = env.get("threads")
    threads = f" with {n} thread{'s' * (n != 1)}" if n else ""
    took = f"this run took {duration(metrics.get('runtime_s'))} on {env.get('device') or 'a device not recorded'}{threads}"
    values = metrics.get("parameters") or {}
    rows = ["| parameter | value |", "|---|---|"] + [f"| `{k}` | {cell(v)} |" for k, v in values.items()]
    same = f" with `-p cpu_threads {n}`" if n else ""
    repeat = (f"This run's values repeat to the last digit on the same machine and software{same}; on other hardware "
              "float32 sums run in another order, which training amplifies: compare verdicts there, not digits.")
    return "\n".join([f"**Reproduce this page**: `{command}` ({took}); the notebook's source: "
                      f"{{download}}`{nb.name}.py <../{SOURCES}/{nb.name}.py>`. {repeat}", "",
                      ":::{dropdown} The values this run used", ":class-body: corekit-scroll-box", "", *rows, ":::"])


def run_command(name: str, metrics: dict) -> str:
    """Return the ``corekit run`` line that repeats the run of ``name`` with ``metrics`` (its profile)."""
    profile = metrics.get("profile", "quick")
    return f"corekit run {name}" + (f" --profile {profile}" if profile != "quick" else "")


#: Parameters that say where a run computes, not what: left out of the comparison with the paper profile (as are
#: path parameters, which say where files go).
MACHINE_SETTINGS = ("device", "cpu_threads")


def setting_differences(nb: Notebook, metrics: dict) -> list[tuple[str, str, str]]:
    """Return the run's settings that differ from the chapter's paper profile (``notebooks/params/paper/NAME.yaml``)
    as (parameter, the run's value, the profile's value) in plain text; machine settings and paths left out."""
    if not nb.paper_profile.is_file():
        return []
    paper, rules = read_profile(nb, "paper"), accepted_values(nb)
    ran = metrics.get("parameters") or {}
    return [(k, format_value(ran[k]), format_value(v)) for k, v in paper.items()
            if k in ran and ran[k] != v and k not in MACHINE_SETTINGS and not (k in rules and rules[k].path)]


def against_paper(nb: Notebook, metrics: dict) -> str:
    """Return a sentence saying how the run's settings differ from the chapter's paper profile
    (:func:`setting_differences`), or that they are its settings ("" without a paper profile)."""
    if not nb.paper_profile.is_file():
        return ""
    differ = [f"`{k}` {cell(ran, None)} (paper profile: {cell(paper, None)})"
              for k, ran, paper in setting_differences(nb, metrics)]
    if not differ:
        return "This run used the settings of the paper profile."
    return f"Against the paper profile, this run used {'; '.join(differ)}."


def verdict_box(metrics: dict, settings: str = "", own: bool = False) -> str:
    """Return the paragraph of a chapter's run verdict: the tested claims by kind (:func:`verdict_line`; ``own``: a
    chapter of the book's own hypotheses), the counts by verdict (the run's metrics) and how its settings differ
    from the paper profile (``settings``); every claim's reason is in the claims table the box points to."""
    counts, line = tally(metrics), verdict_line(metrics, own=own)
    return (f"**Verdict of this run.** {line[:1].upper()}{line[1:]}. Counts: {counts_text(counts)} (each claim with "
            "its reason in the claims table at the end of the page" + (", folded" if folded(metrics) else "") + ")."
            + (f" {settings}" if settings else ""))


#: The word a reason opens with that repeats its verdict ("Fails: ", "Uninformative: ", "Undecided: ").
LEAD = re.compile(r"^(Fails|Uninformative|Undecided): ")


#: Where a reason's first sentence ends: a full stop (not of a number or an abbreviation) before a capital letter.
SENTENCE_END = re.compile(r"(?<=[a-z)\]'\"%0-9]\.)\s+(?=[A-Z(])")


def first_sentence(claim: dict) -> str:
    """Return a claim's reason (else its ``why``) cut to its first whole sentence, without its verdict word, for one
    line of Markdown."""
    reason = LEAD.sub("", claim.get("reason") or claim.get("why") or "no reason recorded")
    return cell(SENTENCE_END.split(reason, maxsplit=1)[0], None)


def inject_record(staged: Path, markdown: str, tag: str = "corekit-run-record") -> None:
    """Insert ``markdown`` as a cell (tagged ``tag``) right after the page title of the staged notebook ``staged``."""
    import nbformat

    notebook = nbformat.read(staged, as_version=4)
    record = nbformat.v4.new_markdown_cell(markdown, metadata={"tags": [tag]})
    at = 0
    if notebook.cells and notebook.cells[0].cell_type == "markdown":
        lines = notebook.cells[0].source.splitlines()
        title = next((i for i, line in enumerate(lines) if line.startswith("# ")), None)
        if title is not None:
            head, rest = "\n".join(lines[: title + 1]), "\n".join(lines[title + 1:]).strip("\n")
            notebook.cells[0].source = head
            at = 1
            if rest:
                tail = nbformat.v4.new_markdown_cell(rest, metadata=copy.deepcopy(notebook.cells[0].metadata))
                notebook.cells.insert(1, tail)
    notebook.cells.insert(at, record)
    nbformat.write(notebook, staged)


# --------------------------------------------------------------------------------------------
# The results page


def cell(value: object, width: int | None = VALUE_WIDTH) -> str:
    """Return ``value`` rendered as literal text for a markdown table cell (shortened to ``width``, markup escaped)."""
    text = value if isinstance(value, str) else format_value(value)
    text = " ".join(str(text).split())
    if width is not None and len(text) > width:
        text = text[: width - 1] + "…"
    return MARKUP.sub(r"\\\g<0>", text)


def id_cell(claim_id: str) -> str:
    """Return a claim id as inline code that a narrow column may break only after an underscore or before a bracket."""
    return f'<code class="docutils literal notranslate">{id_html(claim_id)}</code>'


def chapter_claims_html(run: Run, quick: dict | None = None, oracle_dir: Path | None = None,
                        per_model: bool = True) -> str:
    """Return the HTML claims table of ``run`` (:func:`corekit.runs.claims_view.claims_html`): its values labelled
    with its profile, the authors' code's from ``results/oracle/`` where a claim carries none, and a ``quick`` run's;
    with ``per_model``, followed by the fold of its per-model values."""
    metrics = run.metrics
    profile = metrics.get("profile", "?")
    ours = f"ours ({profile})" if run.published else f"{profile} run (not published)"
    claims = metrics.get("claims", [])
    record = oracle_claims(run, oracle_dir)
    others = {"authors' code": {c["id"]: record[c["id"]] for c in claims
                                if c.get("authors") is None and c["id"] in record}}
    if quick:
        others["quick run"] = {c["id"]: c.get("measured") for c in quick.get("claims", [])}
    return claims_html(claims, ours, others, per_model=per_model)


#: A chapter's claims table with more rows than this is folded on its page (one click opens it): the verdict box at
#: the top already names every claim that does not pass, with its reason.
FOLD_CLAIMS_OVER = 20
#: ... and so is a table whose HTML is longer than this (claims over hundreds of models or pairs).
FOLD_CLAIMS_HTML = 40_000


def folded(metrics: dict) -> bool:
    """Return whether a chapter page folds the claims table of a run with ``metrics``."""
    claims = metrics.get("claims", [])
    return len(claims) > FOLD_CLAIMS_OVER or len(claims_html(claims, per_model=False)) > FOLD_CLAIMS_HTML


def restage_claims_table(staged: Path, table_html: str, n_claims: int = 0) -> None:
    """Show ``table_html`` as the output of the staged notebook's claims cell (the one ending ``claims.table()``), in
    place of the Markdown table its run displayed: one renderer for every page. A table of more than
    :data:`FOLD_CLAIMS_OVER` claims is folded (``hide-output``)."""
    import nbformat

    notebook = nbformat.read(staged, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code" and cell.source.rstrip().endswith("claims.table()"):
            for output in cell.get("outputs", []):
                if output.get("output_type") in ("execute_result", "display_data"):
                    output["data"]["text/html"] = table_html
            tags = cell.metadata.setdefault("tags", [])
            table = table_html.split("<details", 1)[0]         # the per-model fold after it is folded already
            if (n_claims > FOLD_CLAIMS_OVER or len(table) > FOLD_CLAIMS_HTML) and "hide-output" not in tags:
                tags.append("hide-output")
    nbformat.write(notebook, staged)


def oracle_record(run: Run, folder: Path | None) -> dict | None:
    """Return the chapter's authors'-code record in ``folder`` (results/oracle/), if made for this run's modulus."""
    if folder is None:
        return None
    try:
        record = oracle.load(run.name[:2], folder)
    except ValueError:
        return None
    if not record or record.get("p") not in (None, run.metrics.get("parameters", {}).get("p")):
        return None
    return record


def oracle_staleness(run: Run, record: dict) -> str | None:
    """Return why an authors'-code record made on a run's exported checkpoints is not of this run's weights (its
    ``weights_sha256`` against the run's ``exports``), or None when it is, or was not made on exported weights."""
    if "checkpoints" not in record:
        return None
    exported = ((run.metrics.get("exports") or {}).get("checkpoints") or {}).get("sha256")
    made_on = record.get("weights_sha256")
    if not made_on:
        return "the record does not name the sha256 of the weights it read"
    if not exported:
        return "this run records no exported checkpoints to compare with"
    if made_on != exported:
        return f"it read weights with sha256 {made_on[:12]}…, this run exported {exported[:12]}…"
    return None


def oracle_claims(run: Run, folder: Path | None) -> dict:
    """Return {claim id: the authors' value} from the chapter's record in ``folder`` (results/oracle/), each marked
    "(stale)" when the record was made on other weights than this run's (:func:`oracle_staleness`)."""
    record = oracle_record(run, folder)
    if record is None:
        return {}
    values = dict(record.get("claims") or {})
    if oracle_staleness(run, record):
        return {k: f"{format_value(v)} (stale)" for k, v in values.items()}
    return values


def title(run: Run) -> str:
    """Return the chapter's title: the first level-1 heading of its notebook (else its name)."""
    import nbformat

    for cell in nbformat.read(run.ipynb, as_version=4).cells:
        if cell.cell_type == "markdown":
            heading = next((line[2:].strip() for line in cell.source.splitlines() if line.startswith("# ")), None)
            if heading:
                return heading
    return run.name


def tally(metrics: dict, kinds: Collection[str] | None = None, own: bool = False) -> dict[str, int]:
    """Return {verdict: number of the run's claims with it} over every verdict of :data:`corekit.verdicts.VERDICTS`,
    counting only the claims of ``kinds`` when given (a chapter of the book's own hypotheses when ``own``,
    :func:`corekit.runs.claims.kind_of`)."""
    verdicts = [verdict_of(c) for c in metrics.get("claims", []) if kinds is None or kind_of(c, own) in kinds]
    return {v: verdicts.count(v) for v in VERDICTS}


def counts_text(counts: dict[str, int]) -> str:
    """Return "3 pass, 1 fail, 2 uninformative, ..." for the non-zero verdict counts (tested ones first)."""
    return ", ".join(f"{counts[v]} {v}" for v in VERDICTS if counts.get(v)) or "no claims"


#: The groups a chapter's verdict line counts apart: (label, kinds) in a chapter reproducing a paper, and in a
#: chapter of the book's own hypotheses (where the paper's and the extension kinds are both its hypotheses).
VERDICT_GROUPS = (("the paper's claims", frozenset({"paper"})), ("the book's own claims", frozenset({"extension"})),
                  ("checks and preconditions", frozenset({"check", "precondition"})))
OWN_VERDICT_GROUPS = (("the book's hypotheses", frozenset({"paper", "extension"})), VERDICT_GROUPS[2])


def verdict_line(metrics: dict, shown: int = 3, ident=lambda claim_id: f"`{claim_id}`", own: bool = False) -> str:
    """Return the chapter's one-line verdict: per group of kinds (the paper's claims, the book's own, checks and
    preconditions; the book's hypotheses and checks in a chapter of its own hypotheses, ``own``), how many tested
    claims pass and which do not and how (each id written by ``ident``, ``shown`` of them per verdict)."""
    claims = [c for c in metrics.get("claims", []) if verdict_of(c) != "reported"]
    parts = []
    for label, kinds in OWN_VERDICT_GROUPS if own else VERDICT_GROUPS:
        group = [c for c in claims if kind_of(c, own) in kinds]
        passed = sum(verdict_of(c) == "pass" for c in group)
        if not group:
            continue
        text = f"{label}: " + (f"all {len(group)} pass" if passed == len(group) else f"{passed} of {len(group)} pass")
        others = []
        for v in ("fail", "uninformative", "undecided"):
            ids = [c["id"] for c in group if verdict_of(c) == v]
            if ids:
                more = f" and {len(ids) - shown} more" if len(ids) > shown else ""
                others.append(f"{len(ids)} {v}: {', '.join(ident(i) for i in ids[:shown])}{more}")
        parts.append(text + (f" ({'; '.join(others)})" if others else ""))
    return " · ".join(parts) if parts else "reported only (no tested claim)"


def papers_of(root: Path, names: Iterable[str]) -> dict[str, str]:
    """Return {chapter: the paper it reproduces} for the chapters among ``names`` that declare one (``paper`` in their
    header, :attr:`corekit.runs.notebooks.Notebook.declared`)."""
    return {n: str(p) for n in names if (p := Notebook(root, n).declared.get("paper"))}


def own_hypotheses(root: Path, names: Iterable[str]) -> frozenset[str]:
    """Return the chapters among ``names`` that declare they test this book's hypotheses, not a paper's
    (``own_hypotheses`` in their header, :attr:`corekit.runs.notebooks.Notebook.declared`): counted apart from the
    reproduction."""
    return frozenset(n for n in names if Notebook(root, n).declared.get("own_hypotheses"))


def front_tally(runs: dict[str, Run], own: Collection[str], papers_of: dict[str, str] | None = None) -> str:
    """Return the front page's sentence: how many of the papers' own claims (kind ``paper``) the shown runs reproduce,
    then, with ``papers_of`` (chapter -> the paper it reproduces), the same per paper; apart from them, the book's
    own claims (the chapters of its hypotheses, ``own``, and ``extension`` claims elsewhere), and the checks and
    preconditions, which are never counted as reproduced claims."""
    def total(names, kinds):
        return {k: sum(tally(runs[n].metrics, kinds, n in own)[k] for n in names) for k in VERDICTS}

    def tested(counts):
        return sum(counts[v] for v in VERDICTS if v != "reported")

    papers = total([n for n in runs if n not in own], {"paper"})
    shown = "published runs" if all(run.published for run in runs.values()) else "runs this book shows"
    others = ", ".join(f"{papers[v]} {v}" for v in ("fail", "uninformative", "undecided"))
    sentence = (f"{papers['pass']} of {tested(papers)} tested claims of the papers reproduce on the {shown} "
                f"({others}; {papers['reported']} more figures are reported, not tested).")
    by_paper: dict[str, list[str]] = {}
    for name in runs:
        if name not in own and (papers_of or {}).get(name):
            by_paper.setdefault(papers_of[name], []).append(name)
    if by_paper:
        parts = []
        for paper, names in by_paper.items():
            counts = total(names, {"paper"})
            parts.append(f"{paper} (chapters {', '.join(n[:2] for n in names)}): {counts['pass']} of {tested(counts)}")
        sentence += " By paper: " + "; ".join(parts) + "."
    book = {n: {"extension"} | ({"paper"} if n in own else set()) for n in runs}    # an own chapter's claims are its
    mine = {k: sum(tally(runs[n].metrics, book[n], n in own)[k] for n in runs) for k in VERDICTS}   # hypotheses
    if tested(mine):
        chapters = [n[:2] for n in runs if tested(tally(runs[n].metrics, book[n], n in own))]
        sentence += (f" Apart from them, the book's own hypotheses (chapters {', '.join(chapters)}): "
                     f"{mine['pass']} of {tested(mine)} hold.")
    checks = total(list(runs), {"check", "precondition"})
    if tested(checks):
        sentence += (f" Checks of the computation and preconditions of the claims (not counted above): "
                     f"{checks['pass']} of {tested(checks)} hold.")
    return sentence


def tally_figure(readings: list[Reading], path: Path) -> Path:
    """Return ``path`` after saving the stacked bars of each chapter's statements by verdict in words (what the
    headline counts: :func:`corekit.report.pages.tally_sentence`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chapters = list(dict.fromkeys(r.statement.chapter for r in readings))
    counts = {c: statement_tally([r for r in readings if r.statement.chapter == c]) for c in chapters}
    fig, ax = plt.subplots(figsize=(7.5, 0.42 * len(chapters) + 1.4), layout="constrained")
    left = [0] * len(chapters)
    for word in WORDS:
        widths = [counts[c].get(word, 0) for c in chapters]
        if any(widths):
            ax.barh([c[:2] for c in chapters], widths, left=left, color=VERDICT_STYLE[COLOUR[word]][1], label=word)
            left = [a + b for a, b in zip(left, widths)]
    ax.invert_yaxis()
    ax.set_xlabel("statements")
    ax.set_ylabel("chapter")
    ax.legend(ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.18), fontsize=8, frameon=False)
    fig.savefig(path, dpi=150, facecolor="white", bbox_inches="tight")
    plt.close(fig)
    return path


def overview_table(runs: dict[str, Run], own: Collection[str] = ()) -> list[str]:
    """Return the markdown rows of the per-chapter overview: the chapter (number and title), its run (profile,
    runtime, commit), its claims counted by verdict and its verdict with the first claim that does not pass per
    verdict (the chapter's section below lists them all; ``own``: the chapters of the book's own hypotheses)."""
    rows = ["| chapter | run | claims by verdict | verdict |", "|---|---|---|---|"]
    for name, run in runs.items():
        metrics = run.metrics
        env = metrics.get("environment") or {}
        commit = (env.get("commit") or "")[:7] or "not recorded"
        commit += " (dirty)" if env.get("dirty") and not (run.published and sources_match_commit(
            run.ipynb.parents[2], name, metrics)) else ""
        runtime = duration(metrics.get("runtime_s")).replace(" ", "\u00a0")
        rows.append(f"| {{doc}}`{name[:2]} · {cell(title(run), None)} <../notebooks/{name}>` | "
                    f"{metrics.get('profile', '?')} profile, {runtime}, commit `{commit}` | "
                    f"{counts_text(tally(metrics))} | {verdict_line(metrics, shown=1, ident=id_cell, own=name in own)} |")
    return rows


def headline_figure(run: Run, declared: dict) -> tuple[Path, str] | None:
    """Return (file, caption) of the chapter's headline figure on the results page (the one its notebook ``declared``,
    else its first), or None without figures."""
    figures = run.figure_files()
    if not figures:
        return None
    stem, caption = declared.get("headline_figure"), declared.get("headline_caption")
    chosen = next((p for p in figures if p.stem == stem), None)
    return (chosen, caption) if chosen is not None else (figures[0], "The chapter's first figure.")


def table_box(rows: list[str]) -> list[str]:
    """Return ``rows`` (a markdown table) inside a box that scrolls sideways on a narrow screen."""
    return ["::::{div} corekit-table-box", "", *rows, "", "::::"]


def results_page(runs: dict[str, Run], quick: dict[str, dict], figures: dict[str, tuple[str, str]],
                 tally_image: str | None = None, oracle_dir: Path | None = None, own: Collection[str] = (),
                 papers: dict[str, str] | None = None, readings: list[Reading] | None = None) -> str:
    """Return the MyST markdown of the results page, a reproduction report: the statements' tally and its rule
    (``readings``), the claims' tally (``own``: the chapters that test the book's own hypotheses; ``papers``: chapter
    -> its paper), one row per chapter, then each chapter's statements, headline figure (``figures``: name ->
    (staged image, caption)) and claims; ``oracle_dir`` holds the authors' records."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    readings = readings or []
    lines = ["# What reproduces", "", f"**{tally_sentence(readings)}**" if readings else "",
             "", f"How a statement is decided: {RULE}", "",
             f"Counted by claim instead (a statement is tested by one or more claims): {front_tally(runs, own, papers)} "
             "Each row of the table below is one chapter's run (its page shows how the run was made); the sections "
             "after it give each chapter's statements in full and every claim with the paper's value, ours, the "
             f"authors' code on the same weights where it was run, the target and the verdict. Generated from the "
             f"metrics files ({stamp}).", ""]
    if tally_image:
        lines += [f":::{{figure}} {tally_image}", ":alt: statements per chapter by verdict", ":width: 100%", "",
                  "The papers' statements and the book's own hypotheses per chapter, by verdict in words (the "
                  "headline's counts).", ":::", ""]
    lines += ["::::{div} corekit-overview", "", *overview_table(runs, own), "", "::::", ""]
    for name, run in runs.items():
        metrics = run.metrics
        profile = metrics.get("profile", "?")
        env, line = metrics.get("environment") or {}, verdict_line(metrics, own=name in own)
        lines += [f"## {title(run)}", "", f"{{doc}}`Chapter {name[:2]} <../notebooks/{name}>`. "
                  f"{line[:1].upper()}{line[1:]}. Its run: {profile} profile on {env.get('device') or 'a device not recorded'}"
                  f" ({env.get('threads') or '?'} threads), {duration(metrics.get('runtime_s'))}.", ""]
        if name in figures:
            image, caption = figures[name]
            lines += [f":::{{figure}} {image}", f":alt: {name} headline figure", ":width: 75%", "", caption, ":::",
                      ""]
        lines += results_section(name, readings)
        record = oracle_claims(run, oracle_dir)
        n = len(metrics.get("claims", []))
        open_claims = [c for c in metrics.get("claims", []) if verdict_of(c) in ("fail", "uninformative", "undecided")]
        if open_claims:
            items = [f"- {id_cell(c['id'])} {VERDICT_HTML[verdict_of(c)]}: {first_sentence(c)}" for c in open_claims]
            lines += ["Its claims that do not pass, and why, one line each (the whole reason is in its claims table "
                      "below and on the chapter's page):", "", "::::{div} corekit-reasons", "", *items, "", "::::", ""]
        table = chapter_claims_html(run, quick.get(name) if run.published else None, oracle_dir, per_model=False)
        lines += [f":::::{{dropdown}} Its {n} claims: values, nulls, targets, verdicts and reasons",
                  ":class-body: corekit-scroll-box corekit-fold-box", "", *table_box([table]), "",
                  f"Every per-model value is on the {{doc}}`chapter's page <../notebooks/{name}>`, below its claims "
                  "table."
                  if any(per_model_values(c) is not None for c in metrics.get("claims", [])) else "",
                  "", ":::::"]
        stale = record and oracle_staleness(run, oracle_record(run, oracle_dir))
        if stale:
            lines += ["", f"The authors' column of claims the run does not carry itself comes from "
                      f"`results/oracle/{name[:2]}.json`, which is **stale** ({stale}): its values, marked (stale), "
                      f"are of other weights than this run's; rerun its script on this run's exported checkpoints."]
        elif record:
            lines += ["", f"The authors' column of claims the run does not carry itself comes from "
                      f"`results/oracle/{name[:2]}.json`: the authors' own code on this run's weights."]
        lines.append("")
    return "\n".join(lines)


def readings_of(root: Path, runs: dict[str, Run]) -> list[Reading]:
    """Return the reading of every statement (:mod:`corekit.report`) whose chapter has a run among ``runs``."""
    return read_all({name: run.metrics.get("claims", []) for name, run in runs.items()},
                    {name: setting_differences(Notebook(root, name), run.metrics) for name, run in runs.items()},
                    lambda claim: models_summary(claim) or value_summary(claim.get("measured")))


#: The machine-readable statements table of the published edition (``corekit statements`` writes it).
STATEMENTS_FILE = f"{RESULTS}/statements.json"


def published_statements(root: Path) -> str:
    """Return ``statements.json`` as the published runs in ``root/results`` give it."""
    return statements_json(readings_of(root, published_runs(root, toc_notebooks(root), None)))


#: The staged page the front page includes (``book/intro.md``): the statements table, written at build time.
FRONT_STATEMENTS = "book/statements_front.md"
#: The staged machine-readable copy of the statements table, linked from the front page.
STATEMENTS_JSON = "book/_static/statements.json"


def decorate(root: Path, stage: Path, runs: dict[str, Run], quick: dict[str, dict]) -> None:
    """Open each staged chapter with what it finds and its run record, write the front page's statements table and
    its JSON, the results page (if ``_toc.yml`` lists it) and the claims' substitutions."""
    sources = stage / SOURCES
    sources.mkdir(parents=True, exist_ok=True)
    readings = readings_of(root, runs)
    for name, run in runs.items():
        shutil.copy2(Notebook(root, name).py, sources / f"{name}.py")
        staged = stage / "notebooks" / f"{name}.ipynb"
        inject_record(staged, record_markdown(Notebook(root, name), run))
        inject_record(staged, chapter_findings(name, readings, run.metrics.get("claims", []),
                                               against_paper(Notebook(root, name), run.metrics)), "corekit-finds")
        restage_claims_table(staged, chapter_claims_html(run, None, root / "results" / "oracle"),
                             len(run.metrics.get("claims", [])))
    ran = {name: (run.metrics.get("profile", "?"), (run.metrics.get("environment") or {}).get("device") or "a device "
                  "not recorded") for name, run in runs.items()}
    (stage / FRONT_STATEMENTS).write_text(front_section(readings, ran))
    (stage / STATEMENTS_JSON).parent.mkdir(parents=True, exist_ok=True)
    (stage / STATEMENTS_JSON).write_text(statements_json(readings))
    own, papers = own_hypotheses(root, runs), papers_of(root, runs)
    set_substitutions(stage, claim_substitutions(runs, root))
    set_sphinx_config(stage, {"corekit_run_commands": {f"notebooks/{name}": run_command(name, run.metrics)
                                                       for name, run in runs.items()}})
    if RESULTS_PAGE not in toc_files(root):
        return
    gallery_dir = stage / "book" / "gallery"
    gallery_dir.mkdir(parents=True, exist_ok=True)
    figures = {}
    for name, run in runs.items():
        chosen = headline_figure(run, Notebook(root, name).declared)
        if chosen:
            shutil.copy2(chosen[0], gallery_dir / f"{name}{chosen[0].suffix}")
            figures[name] = (f"gallery/{name}{chosen[0].suffix}", chosen[1])
    tally_image = tally_figure(readings, gallery_dir / "tally.png") if runs else None
    (stage / f"{RESULTS_PAGE}.md").write_text(results_page(runs, quick, figures, tally_image and "gallery/tally.png",
                                                           root / "results" / "oracle", own, papers, readings))


def set_substitutions(stage: Path, texts: dict[str, str]) -> None:
    """Set the MyST substitutions {key: text} in the staged ``_config.yml``."""
    import yaml

    config_path = stage / "_config.yml"
    config = yaml.safe_load(config_path.read_text())
    sphinx = config.setdefault("sphinx", {}).setdefault("config", {})
    sphinx.setdefault("myst_substitutions", {}).update(texts)
    config_path.write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True))


def set_sphinx_config(stage: Path, values: dict) -> None:
    """Set Sphinx configuration values (``sphinx: config:``) in the staged ``_config.yml``: e.g. the chapters' run
    commands that the "Get the code" line shows (``book/_ext/corekit_getcode.py``)."""
    import yaml

    config_path = stage / "_config.yml"
    config = yaml.safe_load(config_path.read_text())
    config.setdefault("sphinx", {}).setdefault("config", {}).update(values)
    config_path.write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True))


def substitution_key(name: str, claim_id: str) -> str:
    """Return the MyST substitution key of a chapter's claim: ``claim_NN_id`` (NN the chapter's number, the id with
    every character that is not a letter, digit or underscore as an underscore)."""
    return f"claim_{name[:2]}_" + re.sub(r"\W", "_", claim_id)


#: A claim over at most this many models lists every model's value in its sentence on a prose page.
PROSE_MODELS = 8
#: A per-model table on a prose page with more rows than this is folded (one screen of detail at most).
PROSE_TABLE_ROWS = 12


def measured_markdown(claim: dict) -> str:
    """Return a claim's measured value for prose, one line that may stand inside a sentence, with its verdict in
    brackets when it is tested: a claim over models as k of n, its bound, its worst and failing models (and, over at
    most :data:`PROSE_MODELS` models, every model's value); a value per key as "key: value; ..."; a long value as
    its count and range. The table of a value per key is :func:`measured_table`."""
    value = claim.get("measured")
    text = models_summary(claim)
    if text is not None and len(value) <= PROSE_MODELS:
        text += "; each: " + ", ".join(f"{model_name(k) if i == 0 else k}: {format_value(v)}"
                                       for i, (k, v) in enumerate(value.items()))
    elif text is None and isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
        text = "; ".join(f"{k}: " + ", ".join(f"{c} {format_value(x)}" for c, x in v.items()) for k, v in value.items())
    elif text is None:
        text = value_summary(value)
    verdict = verdict_of(claim)
    verdict = "" if verdict == "reported" else f" ({VERDICT_STYLE[verdict][0]})"
    return cell(text, None) + verdict


def measured_table(claim: dict) -> str:
    """Return a claim's value per model, seed, pair or key as a Markdown table for a prose page (a dict of same-keyed
    dicts as rows × columns), with whether each model meets the bound for a claim over models, and its verdict
    under it, in a box that scrolls sideways on a phone; a table of more than :data:`PROSE_TABLE_ROWS` rows is folded
    (in a box that also scrolls down). "" for a claim without such values."""
    values = per_model_values(claim)
    if values is None:
        return ""
    nested = all(isinstance(v, dict) for v in values.values())
    columns = list(dict.fromkeys(c for v in values.values() for c in v)) if nested else ["value"]
    keys = [str(k) for k in values]
    kind = "seed" if all(k.isdigit() for k in keys) else "pair" if all("–" in k for k in keys) else ""
    models = claim.get("models") if isinstance(claim.get("models"), dict) else None
    failing = set((models or {}).get("failing") or [])
    rows = [f"| {kind} | " + " | ".join(cell(c) for c in columns) + (" | meets the bound |" if models else " |"),
            "|---|" + "---:|" * len(columns) + ("---|" if models else "")]
    for key, value in values.items():
        shown = [value.get(c) for c in columns] if nested else [value]
        rows.append(f"| {cell(key)} | " + " | ".join(cell(v) for v in shown)
                    + ((" | **no** |" if key in failing else " | yes |") if models else " |"))
    verdict = verdict_of(claim)
    if len(values) <= PROSE_TABLE_ROWS:
        return "\n".join(table_box(rows))                  # a phone scrolls it in its own box
    what = {"seed": "seeds", "pair": "pairs"}.get(kind, "values")
    return "\n".join([f":::{{dropdown}} All {len(values)} {what} ({VERDICT_STYLE[verdict][0]})",
                      ":class-body: corekit-scroll-box", "", *rows, ":::"])


def declared_claim_ids(notebook: str) -> list[str]:
    """Return the claim ids notebook ``notebook``'s chapter module declares (its ``CLAIMS``), none without one."""
    module = chapter_module(notebook)
    return [spec.id for spec in getattr(module, "CLAIMS", ())] if module is not None else []


#: What a prose page shows for a claim the notebook records now but the shown (stale) run predates.
NOT_IN_STALE_RUN = "*not measured by the run shown, which predates this claim (the chapter awaits republishing)*"


#: The suffix of the substitution key of a claim's table of values per model (``claim_09_naive_barrier_table``).
TABLE_SUFFIX = "_table"


def claim_substitutions(runs: dict[str, Run], root: Path | None = None) -> dict[str, str]:
    """Return {``claim_NN_id``: its measured value} for every claim of every shown run (:func:`measured_markdown`, one
    line that may stand in a sentence) and {``claim_NN_id_table``: its table} for each claim with a value per model
    or key (:func:`measured_table`), so that a prose page quotes the run's own numbers
    (``{{ claim_08_cost_seconds }}``) and a renamed claim fails the build instead of going stale.
    Given the book's ``root``, a run older than its sources also gets :data:`NOT_IN_STALE_RUN` for each claim id its
    notebook records now and the run lacks (a current run lacking one still fails the build)."""
    texts = {substitution_key(name, c["id"]): measured_markdown(c)
             for name, run in runs.items() for c in run.metrics.get("claims", [])}
    texts |= {substitution_key(name, c["id"]) + TABLE_SUFFIX: measured_table(c) or ""     # "": one value, no table
              for name, run in runs.items() for c in run.metrics.get("claims", [])}
    for name, run in runs.items() if root is not None else ():
        nb = Notebook(root, name)
        if nb.py.is_file() and stale_reason(nb, run.metrics):
            for claim_id in declared_claim_ids(name):
                texts.setdefault(substitution_key(name, claim_id), NOT_IN_STALE_RUN)
                texts.setdefault(substitution_key(name, claim_id) + TABLE_SUFFIX, "")
    return texts


def quick_metrics(executed_dir: Path, names: list[str]) -> dict[str, dict]:
    """Return the quick-profile metrics present in ``executed_dir``, by notebook name."""
    found = {}
    for name in names:
        run = executed_run(executed_dir, name)
        if run.metrics_path.is_file():
            found[name] = run.metrics
    return found


# --------------------------------------------------------------------------------------------
# Building the published edition


def published_runs(root: Path, names: list[str], fallback: Path | None) -> dict[str, Run]:
    """Return the run each chapter shows: its published run, else (with ``fallback``) an executed quick run."""
    runs, missing = {}, []
    for name in names:
        run = published_run(root, name)
        if not run.exists() and fallback is not None:
            run = executed_run(fallback, name)
        if run.exists():
            runs[name] = run
        else:
            missing.append(name)
    dirty = [name for name, run in runs.items() if run.published and not vouch.field_problems(run.metrics)
             and (run.metrics.get("environment") or {}).get("dirty") and not sources_match_commit(root, name, run.metrics)]
    if dirty:
        raise CorekitError(f"the published run of {', '.join(dirty)} was made from a tree whose uncommitted changes "
                               f"touched its sources: re-run it from a clean commit (`corekit run NAME --profile P --publish`)")
    if missing:
        how = " or pass --fallback-quick to show their executed quick runs" if fallback is None else \
            f" (no executed quick run in {fallback} either: corekit run NAME --out {fallback})"
        raise CorekitError(f"no published run of {', '.join(missing)} in {root / RESULTS}: publish with "
                               f"`corekit run NAME --profile cpu|paper --publish`{how}")
    return runs


#: A call that records a claim in a notebook's source: a notebook with one must publish claims.
CLAIM_CALL = re.compile(r"\bclaims\.(?:add|check|report)\(")


def claim_problems(metrics: dict) -> list[str]:
    """Return what is wrong with the claims of a metrics file: a claim without an id, or with no verdict of the known
    set (``verdict`` one of :data:`corekit.verdicts.VERDICTS`, else the older ``pass``: true, false or null)."""
    problems = []
    for i, claim in enumerate(metrics["claims"]):
        if not isinstance(claim, dict) or not isinstance(claim.get("id"), str) or not claim["id"]:
            problems.append(f"claim {i} has no id")
        elif "verdict" in claim and claim["verdict"] not in VERDICTS:
            problems.append(f"claim {claim['id']!r} has the verdict {claim['verdict']!r}, none of {', '.join(VERDICTS)}")
        elif "verdict" not in claim and not any(claim.get("pass", "") is v for v in (True, False, None)):
            problems.append(f"claim {claim['id']!r} has no verdict (pass: true, false or null)")
    return problems


def metrics_problems(root: Path, run: Run) -> list[str]:
    """Return one line per problem of the run's metrics file (and of the profile file it names), naming the file."""
    try:
        metrics = run.metrics
    except CorekitError as err:
        return [str(err)]
    missing = [key for key in ("profile", "source_hash", "claims") if key not in metrics]
    if missing:
        return [f"{run.metrics_path}: not a metrics file of a run: it lacks {', '.join(missing)}"]
    wrong = typed_problems(run, metrics)
    if wrong:
        return wrong
    problems = [f"{run.metrics_path}: {problem}" for problem in claim_problems(metrics) or vouch.verdict_problems(metrics)]
    py = Notebook(root, run.name).py
    if not metrics["claims"] and py.is_file() and CLAIM_CALL.search(py.read_text()):
        problems.append(f"{run.metrics_path}: no claims, but {py.relative_to(root)} records claims; publish the run "
                        "again")
    if metrics["profile"] not in PROFILES:
        problems.append(f"{run.metrics_path}: profile {metrics['profile']!r} is none of {', '.join(PROFILES)}")
    elif metrics["profile"] != "quick" and Notebook(root, run.name).profile_file(metrics["profile"]).is_file():
        try:
            read_profile(Notebook(root, run.name), metrics["profile"])
        except CorekitError as err:
            problems.append(str(err))
    return problems


def typed_problems(run: Run, metrics: dict) -> list[str]:
    """Return the line naming the run's metrics file when a field of ``metrics`` has the wrong type (the first few
    such fields, :func:`corekit.runs.vouch.field_problems`), else nothing."""
    wrong = vouch.field_problems(metrics)
    if not wrong:
        return []
    more = f" (and {len(wrong) - vouch.SHOWN} more)" if len(wrong) > vouch.SHOWN else ""
    return [f"{run.metrics_path}: a field of the wrong type: {'; '.join(wrong[:vouch.SHOWN])}{more}"]


def vouched_problems(run: Run) -> list[str]:
    """Return one line per reason not to vouch for ``run``: a field of its metrics of the wrong type, a claim without
    id or verdict, a verdict that its ``pass`` contradicts, or claims that differ from their digests or from the
    claims table its executed notebook displayed (:func:`corekit.runs.vouch.table_problem`)."""
    try:
        metrics = run.metrics
    except CorekitError as err:
        return [str(err)]
    problems = typed_problems(run, metrics) or [f"{run.metrics_path}: {problem}" for problem in
                                                claim_problems(metrics) or vouch.verdict_problems(metrics)]
    if problems:
        return problems
    problem = vouch.table_problem(run.name, run.metrics_path, run.ipynb, metrics, run.published)
    return [problem] if problem else []


def image_problem(path: Path) -> str | None:
    """Return why ``path`` is not a decodable image (naming it), or None when it is one."""
    from PIL import Image

    try:
        with Image.open(path) as image:
            image.verify()                     # the file's structure and checksums
        with Image.open(path) as image:
            image.load()                       # every pixel decodes
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as err:
        return f"{path}: not a decodable image ({type(err).__name__}: {err})"
    return None


def figure_problems(run: Run) -> list[str]:
    """Return one line per figure of the run that is missing or not a decodable image."""
    try:
        files = run.figure_files()
        recorded = run.metrics.get("figures") or []
    except CorekitError as err:
        return [str(err)]
    missing = [f"{run.figures / name}: recorded in {run.metrics_path.name} but missing" for name in recorded
               if not (run.figures / name).is_file()]
    return missing + [problem for path in files if (problem := image_problem(path))]


def notebook_problem(path: Path) -> str | None:
    """Return why ``path`` is not a valid notebook (naming it), or None when it is one."""
    import nbformat

    try:
        nbformat.validate(nbformat.read(path, as_version=4))
    except (OSError, ValueError, nbformat.ValidationError) as err:
        first = str(err).splitlines()[0] if str(err) else ""
        return f"{path}: not a readable notebook ({type(err).__name__}: {first})"
    return None


def check_runs(root: Path, runs: dict[str, Run]) -> None:
    """Raise :class:`~corekit.runs.errors.Problems`, one line per bad file, unless every run's metrics file is one
    (with its claims and their verdicts, each field of its type), every figure a decodable image, every notebook
    valid, and every run's claims those its notebook displayed (:func:`vouched_problems`)."""
    problems = []
    for run in runs.values():
        found, notebook = metrics_problems(root, run), notebook_problem(run.ipynb)
        if not found and notebook is None:              # a readable notebook to vouch for the metrics' claims
            found = vouched_problems(run)
        if not any(line.startswith(f"{run.metrics_path}: a field of the wrong type") for line in found):
            found += figure_problems(run)
        problems += found + ([notebook] if notebook else [])
    if problems:
        raise Problems(list(dict.fromkeys(problems)))


def stray_runs(root: Path, names: list[str]) -> list[Path]:
    """Return the folders of ``results/`` named as a run is (``NN_name``) that are no chapter of the book: neither in
    ``names`` (its table of contents) nor a notebook of ``notebooks/`` (so shown nowhere, vouched for by nothing)."""
    folder = root / RESULTS
    if not folder.is_dir():
        return []
    known = set(names) | set(notebook_names(root))
    return sorted(path for path in folder.iterdir()
                  if NOTEBOOK_NAME.fullmatch(path.name) and path.name not in known and path.is_dir())


def check_no_stray_runs(root: Path, names: list[str]) -> None:
    """Raise one line naming every folder of ``results/`` that holds a run of no chapter (:func:`stray_runs`): the book
    shows each chapter's published run, and a run it cannot place is one it cannot vouch for."""
    stray = stray_runs(root, names)
    if stray:
        them = "it" if len(stray) == 1 else "them"
        raise CorekitError(f"{', '.join(str(path) for path in stray)}: a published run of no chapter of this book (no "
                           f"notebooks/NAME.py of that name, not in _toc.yml), which the book can neither show nor "
                           f"vouch for; move {them} out of results/ or add the chapter")


def build_published(root: Path, out: Path, executed_dir: Path, fallback: bool) -> Path:
    """Return the HTML folder of the book built from ``results/`` alone (nothing is executed), once every run it shows
    has passed :func:`check_runs`. Everything read from ``results/`` is read under its lock (:func:`results_locked`,
    shared), so a publish meanwhile waits and no page mixes two runs; ``jupyter-book`` then reads the staged copies."""
    names = toc_notebooks(root)
    with results_locked(root, shared=True):     # every read of results/ sees one state: no publish meanwhile
        check_no_stray_runs(root, names)
        runs = published_runs(root, names, executed_dir if fallback else None)
        check_runs(root, runs)
        stage = stage_book(root, {name: run.ipynb for name, run in runs.items()}, out / "source")
        with marking(stage):
            decorate(root, stage, runs, quick_metrics(executed_dir, names))
    return build_html(stage, out)              # from the staged copies alone

