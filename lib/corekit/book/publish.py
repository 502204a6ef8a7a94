"""The published edition: committed runs in ``results/``, the run record on each page, the results page.

Layout of ``results/`` (one folder per notebook, written by ``corekit run NAME --profile P --publish``)::

    results/NN_name/NN_name.ipynb     the executed notebook, progress bars collapsed to their last line
    results/NN_name/metrics.json      its metrics: claims, profile, parameters, runtime, environment,
                                      source_hash, and the figures in the order they were saved
    results/NN_name/figures/*.png     its figures

:func:`publish` replaces a notebook's folder only once its new run has succeeded. At book build time,
:func:`decorate` opens every chapter with its run record (profile, device, threads, runtime, commit,
date, and a warning when the sources changed since the run) and writes the results page
(``book/results.md``: every claim of every chapter, and a gallery of each chapter's first figure).
"""
from __future__ import annotations

import copy
import datetime
import html
import json
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from corekit import oracle
from corekit.book.errors import CorekitError
from corekit.book.notebooks import Notebook, toc_files, toc_notebooks
from corekit.book.parameters import accepted_values, effective_parameters
from corekit.book.site import build_html, stage_book, stage_notebook
from corekit.book.source_hash import source_hash
from corekit.claims import format_value

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
VERDICTS = {True: '<span class="corekit-pass">pass</span>', False: '<span class="corekit-fail">FAIL</span>',
            None: '<span class="corekit-reported">reported</span>'}


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


def tidy_notebook(source: Path, target: Path) -> int:
    """Write ``source`` to ``target`` with every progress bar collapsed to its final line; return its bytes."""
    stage_notebook(source, target)
    return target.stat().st_size


def publish(root: Path, executed: Run) -> Path:
    """Return ``results/NAME`` after replacing it with the (successful) run ``executed``.

    The new folder is assembled beside the old one and swapped in by two renames, so an interrupted
    publish leaves the previous published run in place.
    """
    results = root / RESULTS
    final = results / executed.name
    new, old = results / f".{executed.name}.new", results / f".{executed.name}.old"
    for leftover in (new, old):
        if leftover.exists():
            shutil.rmtree(leftover)
    new.mkdir(parents=True)
    size = tidy_notebook(executed.ipynb, new / f"{executed.name}.ipynb")
    metrics = executed.metrics
    figures = executed.figure_files()
    metrics["figures"] = [p.name for p in figures]
    (new / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    if figures:
        (new / "figures").mkdir()
        for path in figures:
            shutil.copy2(path, new / "figures" / path.name)
    if final.exists():
        final.rename(old)
    new.rename(final)
    if old.exists():
        shutil.rmtree(old)
    if size > SIZE_WARNING_BYTES:
        print(f"corekit: warning: the published {executed.name}.ipynb is {size / 2**20:.1f} MB (over "
              f"{SIZE_WARNING_BYTES / 2**20:.0f} MB): show fewer or smaller figures", file=sys.stderr)
    print(f"published {executed.name} ({metrics.get('profile')} profile, {size / 2**20:.2f} MB) -> {final}")
    return final


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
    if not commit:
        return False
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "sources.tar"
        done = subprocess.run(["git", "-C", str(root), "archive", "-o", str(archive), commit, "notebooks", "lib"],
                              capture_output=True)
        if done.returncode != 0:
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
    commit_text = f"`{commit[:10]}`" + (" (with uncommitted changes)" if env.get("dirty") else "") \
        if commit else "not recorded"
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
    return "\n".join(lines)


def inject_record(staged: Path, markdown: str) -> None:
    """Insert ``markdown`` as a cell right after the page title of the staged notebook ``staged``."""
    import nbformat

    notebook = nbformat.read(staged, as_version=4)
    record = nbformat.v4.new_markdown_cell(markdown, metadata={"tags": ["corekit-run-record"]})
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
    parts = re.split(r"(?<=_)|(?=\[)", claim_id)
    return '<code class="docutils literal notranslate">' + "<wbr>".join(html.escape(p) for p in parts) + "</code>"


def claims_table(shown: dict, label: str, quick: dict | None, oracle: dict | None = None) -> list[str]:
    """Return the markdown rows of one chapter's claims: paper, shown run (``label``), the authors' code on the same
    weights (a claim's own ``authors`` value, else ``oracle`` {claim id: value} from ``results/oracle/``), quick
    run, target in full with the notebook's reason for a failure, verdict."""
    oracle = oracle or {}
    authors = any("authors" in c or c["id"] in oracle for c in shown.get("claims", []))
    header = (["claim", "paper", label] + (["authors' code"] if authors else []) + (["quick run"] if quick else [])
              + ["target", "verdict"])
    quick_values = {c["id"]: c.get("measured") for c in (quick or {}).get("claims", [])}
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for claim in shown.get("claims", []):
        values = [id_cell(claim["id"]), cell(claim.get("paper")), cell(claim.get("measured"))]
        if authors:
            values.append(cell(claim["authors"] if "authors" in claim else oracle.get(claim["id"])))
        if quick:
            values.append(cell(quick_values.get(claim["id"], "not measured")))
        target = cell(claim.get("target", ""), None)
        if claim.get("why"):
            target += f" *Why it fails:* {cell(claim['why'], None)}"
        values += [target, VERDICTS.get(claim.get("pass"), "?")]
        rows.append("| " + " | ".join(values) + " |")
    return rows


def oracle_claims(run: Run, folder: Path | None) -> dict:
    """Return {claim id: the authors' value} from the chapter's record in ``folder`` (results/oracle/), if made for
    this run's modulus."""
    if folder is None:
        return {}
    try:
        record = oracle.load(run.name[:2], folder)
    except ValueError:
        return {}
    if not record or record.get("p") not in (None, run.metrics.get("parameters", {}).get("p")):
        return {}
    return dict(record.get("claims") or {})


def title(run: Run) -> str:
    """Return the chapter's title: the first level-1 heading of its notebook (else its name)."""
    import nbformat

    for cell in nbformat.read(run.ipynb, as_version=4).cells:
        if cell.cell_type == "markdown":
            heading = next((line[2:].strip() for line in cell.source.splitlines() if line.startswith("# ")), None)
            if heading:
                return heading
    return run.name


#: The figure that shows each chapter's paper effect (file stem, caption), shown on the results page; a chapter
#: not listed shows its first figure.
HEADLINE_FIGURES = {
    "01_markov_cores": ("operator_eigenvalues", "Eigenvalues of the operator fitted on each model's core against "
                        "the chain's own (crosses: untrained control)."),
    "02_grokking_cores": ("operator_eigenvalues", "Eigenvalues of the shift operator fitted on the core, before, at "
                          "and after grokking, under the authors' analysis (top) and corekit's (bottom)."),
    "03_grokking_scaling_law": ("tau_fits", "Grokking time against weight decay and modulus, with the fitted laws."),
    "04_llm_agreement_axis": ("core_auroc_by_layer", "How well the 1-D agreement core separates singular from plural "
                              "at each layer, against the model's own margin."),
    "05_entk_mlp_modular": ("eigenvector_features", "Leading eNTK eigenvectors of the MLP against the Fourier "
                            "features of the inputs and of their sum."),
    "06_entk_transformer_modular": ("eigenvector_features", "Per-layer eNTK eigenvector blocks of the transformer "
                                    "against the Fourier feature families."),
    "07_entk_gemma_grammar": ("auroc_by_label", "How well each leading eNTK eigenvector separates each word class, "
                              "against the null."),
    "08_two_lenses": ("per_parameter_alignment", "How much of the ACE core of the final residual stream each "
                      "parameter's leading eNTK eigenvectors hold, against random subspaces."),
}
#: Bar colours of the tally figure: pass, fail, reported.
TALLY_COLOURS = ("#1a7f37", "#cf222e", "#8c959f")


def tally(metrics: dict) -> dict[str, int]:
    """Return {"pass", "fail", "reported": number of the run's claims with that verdict}."""
    verdicts = [c.get("pass") for c in metrics.get("claims", [])]
    return {"pass": verdicts.count(True), "fail": verdicts.count(False), "reported": verdicts.count(None)}


def verdict_line(metrics: dict, shown: int = 3) -> str:
    """Return the chapter's one-line verdict: "reproduces", "reproduces except …" or "does not reproduce: …"."""
    counts = tally(metrics)
    failing = [c["id"] for c in metrics.get("claims", []) if c.get("pass") is False]
    named = ", ".join(f"`{i}`" for i in failing[:shown]) + (f" and {len(failing) - shown} more"
                                                            if len(failing) > shown else "")
    if not counts["pass"] and not failing:
        return "reported only (no tested claim)"
    if not failing:
        return "reproduces"
    if not counts["pass"]:
        return f"does not reproduce: {named}"
    if counts["fail"] > counts["pass"]:
        return f"mostly does not reproduce ({counts['pass']} of {counts['pass'] + counts['fail']} pass): {named}"
    return f"reproduces except {named}"


#: Chapters whose claims test hypotheses of this book, not a paper's: counted apart from the reproduction.
OWN_HYPOTHESES = frozenset({"08_two_lenses"})


def front_tally(runs: dict[str, Run]) -> str:
    """Return the front page's sentence: how many of the papers' tested claims the shown runs reproduce, and apart from
    them how many of the book's own hypotheses (:data:`OWN_HYPOTHESES`) hold."""
    def total(names):
        return {k: sum(tally(runs[n].metrics)[k] for n in names) for k in ("pass", "fail", "reported")}

    papers = total([n for n in runs if n not in OWN_HYPOTHESES])
    kind = "published runs" if all(run.published for run in runs.values()) else "runs this book shows"
    sentence = (f"{papers['pass']} of {papers['pass'] + papers['fail']} tested claims reproduce on the {kind} "
                f"({papers['fail']} fail; {papers['reported']} more figures are reported, not tested).")
    own = [n for n in runs if n in OWN_HYPOTHESES]
    if own:
        mine = total(own)
        sentence += (f" Apart from them, chapter{'s' * (len(own) > 1)} {', '.join(n[:2] for n in own)} "
                     f"test{'s' * (len(own) == 1)} hypotheses of this book, not of a paper: "
                     f"{mine['pass']} of {mine['pass'] + mine['fail']} hold.")
    return sentence


def tally_figure(runs: dict[str, Run], path: Path) -> Path:
    """Return ``path`` after saving the stacked bars of pass / fail / reported claims per chapter."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(runs)
    counts = [tally(runs[n].metrics) for n in names]
    fig, ax = plt.subplots(figsize=(7.5, 0.42 * len(names) + 1.0), layout="constrained")
    left = [0] * len(names)
    for key, colour in zip(("pass", "fail", "reported"), TALLY_COLOURS):
        widths = [c[key] for c in counts]
        ax.barh(names, widths, left=left, color=colour, label=key)
        left = [a + b for a, b in zip(left, widths)]
    ax.invert_yaxis()
    ax.set_xlabel("claims")
    ax.legend(ncol=3, loc="lower right", fontsize=8)
    fig.savefig(path, dpi=150, facecolor="white")
    plt.close(fig)
    return path


def overview_table(runs: dict[str, Run]) -> list[str]:
    """Return the markdown rows of the per-chapter overview: run record, counts and verdict."""
    rows = ["| chapter | profile | runtime | commit | pass | fail | reported | verdict |",
            "|---|---|---|---|---|---|---|---|"]
    for name, run in runs.items():
        metrics = run.metrics
        env = metrics.get("environment") or {}
        commit = (env.get("commit") or "")[:7] or "not recorded"
        commit += " (dirty)" if env.get("dirty") else ""
        counts = tally(metrics)
        rows.append(f"| {{doc}}`{name[:2]} <../notebooks/{name}>` | {metrics.get('profile', '?')} | "
                    f"{duration(metrics.get('runtime_s'))} | "
                    f"{commit} | {counts['pass']} | {counts['fail']} | {counts['reported']} | "
                    f"{verdict_line(metrics)} |")
    return rows


def headline_figure(run: Run) -> tuple[Path, str] | None:
    """Return (file, caption) of the chapter's headline figure on the results page, or None without figures."""
    figures = run.figure_files()
    if not figures:
        return None
    stem, caption = HEADLINE_FIGURES.get(run.name, (None, None))
    chosen = next((p for p in figures if p.stem == stem), None)
    return (chosen, caption) if chosen is not None else (figures[0], "The chapter's first figure.")


def table_box(rows: list[str]) -> list[str]:
    """Return ``rows`` (a markdown table) inside a box that scrolls sideways on a narrow screen."""
    return ["::::{div} corekit-table-box", "", *rows, "", "::::"]


def results_page(runs: dict[str, Run], quick: dict[str, dict], figures: dict[str, tuple[str, str]],
                 tally_image: str | None = None, oracle_dir: Path | None = None) -> str:
    """Return the MyST markdown of the results page, a reproduction report: the tally, one row per chapter, then
    each chapter's headline figure (``figures``: name -> (staged image, caption)) and claims; ``oracle_dir`` holds
    the authors' records (results/oracle/)."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = ["# What reproduces", "",
             f"**{front_tally(runs)}** Each row is one chapter's run (its page shows how the run was made); "
             "the sections below give every claim with the paper's value, ours, the authors' code on the same "
             f"weights where it was run, the target and the verdict. Generated from the metrics files ({stamp}).",
             ""]
    if tally_image:
        lines += [f":::{{figure}} {tally_image}", ":alt: claims per chapter", ":width: 100%", "",
                  "Claims per chapter: pass (green), fail (red), reported without a test (grey).", ":::", ""]
    lines += table_box(overview_table(runs)) + [""]
    for name, run in runs.items():
        metrics = run.metrics
        profile = metrics.get("profile", "?")
        label = f"ours ({profile})" if run.published else f"{profile} run (not published)"
        env = metrics.get("environment") or {}
        lines += [f"## {title(run)}", "", f"{{doc}}`Chapter {name[:2]} <../notebooks/{name}>`: "
                  f"{verdict_line(metrics)}. Its run: {profile} profile on {env.get('device') or 'a device not recorded'}"
                  f" ({env.get('threads') or '?'} threads), {duration(metrics.get('runtime_s'))}.", ""]
        if name in figures:
            image, caption = figures[name]
            lines += [f":::{{figure}} {image}", f":alt: {name} headline figure", ":width: 100%", "", caption, ":::",
                      ""]
        record = oracle_claims(run, oracle_dir)
        lines += table_box(claims_table(metrics, label, quick.get(name) if run.published else None, record))
        if record:
            lines += ["", f"The authors' column of claims the run does not carry itself comes from "
                      f"`results/oracle/{name[:2]}.json`: the authors' own code on this run's weights."]
        lines.append("")
    return "\n".join(lines)


def decorate(root: Path, stage: Path, runs: dict[str, Run], quick: dict[str, dict]) -> None:
    """Open each staged chapter with its run record, write the results page (if ``_toc.yml`` lists it) and set the
    front page's tally (the ``claims_tally`` substitution)."""
    for name, run in runs.items():
        inject_record(stage / "notebooks" / f"{name}.ipynb", record_markdown(Notebook(root, name), run))
    set_substitutions(stage, {"claims_tally": front_tally(runs)} | claim_substitutions(runs))
    if RESULTS_PAGE not in toc_files(root):
        return
    gallery_dir = stage / "book" / "gallery"
    gallery_dir.mkdir(parents=True, exist_ok=True)
    figures = {}
    for name, run in runs.items():
        chosen = headline_figure(run)
        if chosen:
            shutil.copy2(chosen[0], gallery_dir / f"{name}{chosen[0].suffix}")
            figures[name] = (f"gallery/{name}{chosen[0].suffix}", chosen[1])
    tally_image = tally_figure(runs, gallery_dir / "tally.png") if runs else None
    (stage / f"{RESULTS_PAGE}.md").write_text(results_page(runs, quick, figures, tally_image and "gallery/tally.png",
                                                           root / "results" / "oracle"))


def set_substitutions(stage: Path, texts: dict[str, str]) -> None:
    """Set the MyST substitutions {key: text} in the staged ``_config.yml``."""
    import yaml

    config_path = stage / "_config.yml"
    config = yaml.safe_load(config_path.read_text())
    sphinx = config.setdefault("sphinx", {}).setdefault("config", {})
    sphinx.setdefault("myst_substitutions", {}).update(texts)
    config_path.write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True))


def substitution_key(name: str, claim_id: str) -> str:
    """Return the MyST substitution key of a chapter's claim: ``claim_NN_id`` (NN the chapter's number, the id with
    every character that is not a letter, digit or underscore as an underscore)."""
    return f"claim_{name[:2]}_" + re.sub(r"\W", "_", claim_id)


def measured_markdown(claim: dict) -> str:
    """Return a claim's measured value for prose: a table when it is a dict of same-keyed dicts (rows × columns) or
    of numbers (name, value), else the value inline with its verdict in brackets when it is tested."""
    value = claim.get("measured")
    if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
        columns = list(next(iter(value.values())))
        if all(list(v) == columns for v in value.values()):
            rows = ["| | " + " | ".join(cell(c) for c in columns) + " |", "|---|" + "---:|" * len(columns)]
            rows += ["| " + cell(k) + " | " + " | ".join(cell(v[c]) for c in columns) + " |" for k, v in value.items()]
            return "\n".join(rows)
    if isinstance(value, dict) and value and all(isinstance(v, (int, float)) for v in value.values()):
        return "\n".join(["| | value |", "|---|---:|"] + [f"| {cell(k)} | {cell(v)} |" for k, v in value.items()])
    verdict = {True: " (pass)", False: " (FAIL)"}.get(claim.get("pass"), "")
    return cell(value, None) + verdict


def claim_substitutions(runs: dict[str, Run]) -> dict[str, str]:
    """Return {``claim_NN_id``: its measured value} for every claim of every shown run, so that a prose page quotes
    the run's own numbers (``{{ claim_08_cost_seconds }}``) and a renamed claim fails the build instead of going stale."""
    return {substitution_key(name, c["id"]): measured_markdown(c)
            for name, run in runs.items() for c in run.metrics.get("claims", [])}


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
    dirty = [name for name, run in runs.items() if run.published and (run.metrics.get("environment") or {}).get("dirty")
             and not sources_match_commit(root, name, run.metrics)]
    if dirty:
        raise CorekitError(f"the published run of {', '.join(dirty)} was made from a tree whose uncommitted changes "
                               f"touched its sources: re-run it from a clean commit (`corekit run NAME --profile P --publish`)")
    if missing:
        how = " or pass --fallback-quick to show their executed quick runs" if fallback is None else \
            f" (no executed quick run in {fallback} either: corekit run NAME --out {fallback})"
        raise CorekitError(f"no published run of {', '.join(missing)} in {root / RESULTS}: publish with "
                               f"`corekit run NAME --profile cpu|paper --publish`{how}")
    return runs


def build_published(root: Path, out: Path, executed_dir: Path, fallback: bool) -> Path:
    """Return the HTML folder of the book built from ``results/`` alone (nothing is executed)."""
    names = toc_notebooks(root)
    runs = published_runs(root, names, executed_dir if fallback else None)
    stage = stage_book(root, {name: run.ipynb for name, run in runs.items()}, out / "source")
    decorate(root, stage, runs, quick_metrics(executed_dir, names))
    return build_html(stage, out)

