"""The ``corekit`` command: execute the book's notebooks through papermill and build the book::

    corekit run NOTEBOOK|all [--profile quick|cpu|paper] [-p NAME VALUE]... [--out DIR] [--publish [--force]]
                             [--cell-timeout S]
    corekit book [--profile quick|cpu|paper] [--out DIR] [--executed DIR] [--cell-timeout S]
    corekit book --published [--fallback-quick] [--out DIR] [--executed DIR]
    corekit list

A notebook is ``notebooks/NN_name.py`` (jupytext py:percent, the source of truth) paired with
``notebooks/NN_name.ipynb``. ``run`` checks every parameter against what the notebook declares
(:mod:`corekit.paramspec`) before starting a kernel, executes into a private folder beside the
output and, on success only, swaps ``NAME.ipynb``, ``figures/NAME/`` and then ``NAME.metrics.json``
(the notebook's claims plus ``runtime_s``, ``profile`` and ``source_hash``, written once) into ``DIR``,
undoing every move if one fails. A failed, interrupted (Ctrl-C) or stopped (SIGTERM) run is kept as
``NAME.failed.ipynb`` or ``NAME.interrupted.ipynb`` and leaves the last complete run in place. ``--out``
may not be the repository root nor lie in its notebooks/, lib/ or results/. ``book`` reuses executed
notebooks whose ``source_hash`` still matches (re-executing a corrupt one) and builds static HTML.
``--publish`` and ``book --published`` are the published edition (``corekit.publish``, ``results/``);
``--publish`` replaces no published run of a larger profile (quick < cpu < paper) unless ``--force``.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, NoReturn

from corekit.book import (
    PROFILES,
    CorekitError,
    ExecutionFailed,
    Interrupted,
    Notebook,
    build_html,
    effective_parameters,
    find_root,
    get_notebook,
    notebook_names,
    parse_value,
    read_parameters,
    source_hash,
    stage_book,
    toc_files,
    toc_notebooks,
)
from corekit.claims import METRICS_ENV

#: Environment variable naming the folder where the executed notebook saves its figures.
FIGURES_ENV = "COREKIT_FIGURES"
KERNEL = "python3"
VERDICTS = {True: "pass", False: "FAIL", None: "reported"}
#: Folders of the repository that ``--out`` may not be or lie in, and why.
PROTECTED = {"notebooks": "the notebooks' sources", "lib": "the library",
             "results": "the published runs, which only --publish writes"}


# --------------------------------------------------------------------------------------------
# Execution


@contextlib.contextmanager
def environ(**values: str) -> Iterator[None]:
    """Set environment variables for the duration of the block, then restore them."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def executable_ipynb(nb: Notebook) -> Iterator[Path]:
    """Yield an .ipynb for papermill: the paired file if current, else a fresh conversion of the .py."""
    if nb.ipynb.is_file() and nb.ipynb.stat().st_mtime >= nb.py.stat().st_mtime:
        yield nb.ipynb
        return
    import jupytext

    with tempfile.TemporaryDirectory(prefix="corekit-") as tmp:
        path = Path(tmp) / f"{nb.name}.ipynb"
        jupytext.write(jupytext.read(nb.py), path)
        yield path


class SigTerm(KeyboardInterrupt):
    """Raised for SIGTERM (``kill PID``) as KeyboardInterrupt is for Ctrl-C, so that a stopped run ends alike."""


class Terminated(Interrupted):
    """A run stopped by SIGTERM: exit status 143, as a shell reports it."""

    exit_code = 128 + signal.SIGTERM


def stop_error(signum: int) -> KeyboardInterrupt:
    """Return the exception signal ``signum`` raises: :class:`SigTerm` for SIGTERM, else KeyboardInterrupt."""
    return SigTerm() if signum == signal.SIGTERM else KeyboardInterrupt()


def raise_sigterm(signum, frame) -> NoReturn:
    """Signal handler: raise :class:`SigTerm`."""
    raise SigTerm


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """While entered (in the main thread), SIGTERM raises :class:`SigTerm` instead of ending Python on the spot."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, raise_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class CtrlC:
    """While entered, Ctrl-C or SIGTERM stops the kernels this run starts, and is remembered.

    jupyter_client starts each kernel in a session of its own, out of the terminal's reach, and a
    KeyboardInterrupt raised at a random point inside papermill's event loop can be lost or escape its
    cleanup. So the signal only kills the kernels' process groups (a kernel still starting is killed as
    soon as it has started); papermill ends on the dead kernel, keeping the notebook as far as it ran, and
    :meth:`check` turns the run's end into a KeyboardInterrupt (:class:`SigTerm` for SIGTERM). A second
    signal raises one at once.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        from jupyter_client.manager import AsyncKernelManager

        self.received: int | None = None               # the signal that came
        self.managers = []
        ctrl_c = self

        class RecordedKernelManager(AsyncKernelManager):
            """An AsyncKernelManager that lists itself so that Ctrl-C can stop its kernel."""

            def __init__(self, **kwargs):
                super().__init__(**kwargs)
                ctrl_c.managers.append(self)

            async def start_kernel(self, **kwargs) -> None:
                """Start the kernel; stop it again if Ctrl-C came meanwhile."""
                await super().start_kernel(**kwargs)
                if ctrl_c.received:
                    ctrl_c.kill_kernels()
                    raise RuntimeError("interrupted while the kernel started")

        self.manager_class = RecordedKernelManager
        self.previous = {}

    def __enter__(self) -> CtrlC:
        if threading.current_thread() is threading.main_thread() and os.name == "posix":
            self.previous = {signum: signal.signal(signum, self._handle) for signum in self.SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum, frame) -> None:
        if self.received:
            raise stop_error(signum)
        self.received = signum
        self.kill_kernels()

    def kill_kernels(self) -> None:
        """Kill the process group of every kernel started so far."""
        for km in self.managers:
            process = getattr(km.provisioner, "process", None)
            if process is not None:
                with contextlib.suppress(OSError):
                    os.killpg(os.getpgid(process.pid), signal.SIGKILL)

    def check(self, cause: BaseException | None = None) -> None:
        """Raise KeyboardInterrupt or :class:`SigTerm` (from ``cause``) if a Ctrl-C or SIGTERM came while entered."""
        if self.received:
            raise stop_error(self.received) from cause


def run_papermill(nb: Notebook, params: dict, executed: Path, cell_timeout: float | None = None) -> None:
    """Execute ``nb`` with ``params`` into ``executed``, in the notebooks folder, with a progress bar."""
    import papermill
    from jupyter_client.kernelspec import NoSuchKernel
    from nbclient.exceptions import DeadKernelError
    from papermill.exceptions import PapermillExecutionError

    with executable_ipynb(nb) as source, CtrlC() as ctrl_c:
        try:
            papermill.execute_notebook(str(source), str(executed), parameters=params, kernel_name=KERNEL,
                                       language="python", cwd=str(nb.folder), progress_bar=True,
                                       execution_timeout=cell_timeout, kernel_manager_class=ctrl_c.manager_class)
        except PapermillExecutionError as err:
            ctrl_c.check(err)
            raise ExecutionFailed(f"{nb.name} failed:{err}") from err
        except DeadKernelError as err:
            ctrl_c.check(err)
            raise ExecutionFailed(f"{nb.name}: the kernel died ({err}; out of memory?)") from err
        except NoSuchKernel as err:
            raise ExecutionFailed(f"no Jupyter kernel {KERNEL!r} here: pip install ipykernel") from err
        except TimeoutError as err:               # nbclient's CellTimeoutError
            ctrl_c.check(err)
            raise ExecutionFailed(f"{nb.name}: a cell ran longer than --cell-timeout {cell_timeout:g} s") from err
        except Exception as err:                  # e.g. a kernel that Ctrl-C stopped while it started
            ctrl_c.check(err)
            raise
        ctrl_c.check()


@dataclass(frozen=True)
class Outputs:
    """What a run of one notebook writes in ``folder``: NAME.ipynb, NAME.metrics.json and figures/NAME/."""

    folder: Path
    name: str

    @property
    def ipynb(self) -> Path:
        """The executed notebook."""
        return self.folder / f"{self.name}.ipynb"

    @property
    def metrics(self) -> Path:
        """The metrics file (claims, runtime, profile, source hash)."""
        return self.folder / f"{self.name}.metrics.json"

    @property
    def figures(self) -> Path:
        """The folder of the figures the notebook saved."""
        return self.folder / "figures" / self.name

    def unfinished(self, how: str) -> Path:
        """The name a partially executed notebook is kept under: NAME.failed.ipynb or NAME.interrupted.ipynb."""
        return self.folder / f"{self.name}.{how}.ipynb"


def prepare_out(out: Path, option: str = "--out") -> Path:
    """Return ``out`` made absolute and created; raise naming ``option`` unless files can be written there."""
    out = out.expanduser().absolute()
    if out.exists() and not out.is_dir():
        raise CorekitError(f"{option} {out}: exists and is not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as err:
        raise CorekitError(f"{option} {out}: cannot write there ({err.strerror or err})") from err
    return out.resolve()


STAGING = re.compile(r"\.(?P<name>\w+)\.running-(?P<pid>\d+)-\w+")


def remove_abandoned_staging(out: Path, name: str) -> None:
    """Delete private run folders of ``name`` in ``out`` left by a corekit process that no longer exists."""
    for folder in out.glob(f".{name}.running-*"):
        m = STAGING.fullmatch(folder.name)
        if m and m["name"] == name and not process_exists(int(m["pid"])):
            shutil.rmtree(folder, ignore_errors=True)


def process_exists(pid: int) -> bool:
    """Return whether a process ``pid`` exists on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def staging_folder(out: Path, name: str) -> Iterator[Path]:
    """Yield a new private folder in ``out`` for one run of ``name`` (same file system: moves are renames); delete it after."""
    remove_abandoned_staging(out, name)
    folder = Path(tempfile.mkdtemp(prefix=f".{name}.running-{os.getpid()}-", dir=out))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def write_json_atomic(path: Path, data: dict) -> None:
    """Write ``data`` as JSON to ``path`` in one step: a temporary file beside it, then ``os.replace``."""
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", suffix=".tmp",
                                     delete=False) as tmp:
        tmp.write(json.dumps(data, indent=2) + "\n")
    os.replace(tmp.name, path)


def finish_metrics(nb: Notebook, path: Path, profile: str, params: dict, runtime_s: float) -> dict:
    """Return the metrics the notebook wrote to ``path`` with runtime_s, profile and source_hash added."""
    if not path.is_file():
        raise ExecutionFailed(f"{nb.name} ran but wrote no metrics file; end the notebook with "
                              "corekit.claims.Claims(...).write()")
    try:
        metrics = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ExecutionFailed(f"{nb.name} wrote an unreadable metrics file ({err})") from err
    metrics.update(runtime_s=round(runtime_s, 3), profile=profile, source_hash=source_hash(nb, params))
    return metrics


def keep_unfinished(run: Outputs, final: Outputs, how: str) -> Path | None:
    """Return where the partially executed notebook of ``run`` was kept (``final.unfinished(how)``), None if none."""
    if not run.ipynb.is_file():
        return None
    kept = final.unfinished(how)
    os.replace(run.ipynb, kept)
    return kept


def check_replaceable(final: Outputs) -> None:
    """Raise OSError unless the previous run in ``final`` is plain files and a plain folder (no links), or absent."""
    for path, kind in ((final.ipynb, Path.is_file), (final.metrics, Path.is_file), (final.figures, Path.is_dir)):
        if path.is_symlink() or (path.exists() and not kind(path)):
            raise OSError(f"{path} is a symbolic link or not a plain {'folder' if kind is Path.is_dir else 'file'}; "
                          "corekit replaces only what it wrote")


def commit_outputs(run: Outputs, final: Outputs) -> None:
    """Swap a finished run in ``run`` into ``final`` (old metrics out first, new metrics in last), or undo every move."""
    check_replaceable(final)
    old = Outputs(run.folder / "old", run.name)
    old.figures.parent.mkdir(parents=True)
    if run.figures.exists():
        final.figures.parent.mkdir(parents=True, exist_ok=True)
    moves = [(final.metrics, old.metrics), (final.figures, old.figures), (final.ipynb, old.ipynb),
             (run.figures, final.figures), (run.ipynb, final.ipynb), (run.metrics, final.metrics)]
    done = []
    try:
        for source, target in moves:
            if source.exists():
                os.replace(source, target)
                done.append((source, target))
    except BaseException:                        # an OSError, or Ctrl-C / SIGTERM midway
        for source, target in reversed(done):
            os.replace(target, source)
        raise
    for how in ("failed", "interrupted"):
        final.unfinished(how).unlink(missing_ok=True)


class NotReplaced(ExecutionFailed):
    """A run that finished but whose outputs could not replace the previous run (exit status 1)."""


def install(run: Outputs, final: Outputs, metrics: dict) -> None:
    """Write the finished ``metrics`` into ``run`` and swap the run into ``final``; raise NotReplaced on an OSError."""
    try:
        write_json_atomic(run.metrics, metrics)
        commit_outputs(run, final)
    except OSError as err:
        raise NotReplaced(f"{run.name} ran, but its outputs could not replace the previous run in {final.folder} "
                          f"({err})") from err


def execute(nb: Notebook, profile: str, params: dict, out: Path, cell_timeout: float | None = None) -> dict:
    """Return the metrics of ``nb`` executed into ``out`` (NAME.ipynb, NAME.metrics.json, figures/NAME), all or nothing."""
    out = prepare_out(out)
    final = Outputs(out, nb.name)
    shown = " ".join(f"{k}={json.dumps(v)}" for k, v in params.items()) or "notebook defaults"
    print(f"executing {nb.name} on the {profile} profile ({shown}) -> {final.ipynb}", flush=True)
    start = time.perf_counter()
    with staging_folder(out, nb.name) as folder:
        run = Outputs(folder, nb.name)
        try:
            with environ(**{METRICS_ENV: str(run.metrics), FIGURES_ENV: str(run.figures)}):
                run_papermill(nb, params, run.ipynb, cell_timeout)
            metrics = finish_metrics(nb, run.metrics, profile, params, time.perf_counter() - start)
            install(run, final, metrics)
        except ExecutionFailed as err:
            kept = keep_unfinished(run, final, "failed")
            what = "executed notebook" if isinstance(err, NotReplaced) else "partially executed notebook"
            separator = "\n" if "\n" in str(err) else "; "
            raise ExecutionFailed(f"{err}" + (f"{separator}{what}: {kept}" if kept else "") + unchanged_note(final)) from err
        except KeyboardInterrupt as err:
            kept = keep_unfinished(run, final, "interrupted")
            error, what = (Terminated, "stopped by SIGTERM") if isinstance(err, SigTerm) else (Interrupted, "interrupted")
            raise error(f"{nb.name} {what}" + (f"; partially executed notebook: {kept}" if kept else "")
                        + unchanged_note(final)) from err
    return metrics


def unchanged_note(final: Outputs) -> str:
    """Return a note that the last complete run in ``final`` is untouched ('' when there is none)."""
    return f"; the last complete run ({final.metrics.name}) is unchanged" if final.metrics.is_file() else ""


def _short(value: Any, width: int = 48) -> str:
    """Return ``value`` as compact JSON, cut to ``width`` characters."""
    text = json.dumps(value, separators=(",", ":"))
    return text if len(text) <= width else text[: width - 1] + "…"


def summary(metrics: dict) -> str:
    """Return one line per claim (id, measured, verdict) under a line with the notebook and runtime."""
    claims = metrics.get("claims", [])
    lines = [f"{metrics.get('notebook')}: {len(claims)} claims, runtime {metrics['runtime_s']:.1f} s "
             f"({metrics.get('profile')} profile)"]
    ids = [c["id"] for c in claims]
    measured = [_short(c.get("measured")) for c in claims]
    id_width, value_width = (max(map(len, column), default=0) for column in (ids, measured))
    lines += [f"  {i:<{id_width}}  {m:<{value_width}}  {VERDICTS.get(c.get('pass'), '?')}"
              for i, m, c in zip(ids, measured, claims, strict=True)]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Commands


def parse_overrides(pairs: list[list[str]]) -> dict:
    """Return the ``-p NAME VALUE`` pairs as a dict of parsed values (a later pair wins)."""
    return {name: parse_value(name, text) for name, text in pairs}


def default_dir(root: Path, kind: str, profile: str) -> Path:
    """Return ``_build/KIND/PROFILE`` under the root."""
    return root / "_build" / kind / profile


def run_all(root: Path, profile: str, overrides: dict, out: Path, cell_timeout: float | None = None,
            publish: bool = False, force: bool = False) -> int:
    """Run every notebook in order, each ``-p`` going to the notebooks that declare it; 1 if any failed.

    Every notebook's parameters (and, with ``publish``, published runs) are checked before the first one
    starts. With ``publish``, each notebook that succeeds replaces its published run in ``results/``.
    """
    names = notebook_names(root)
    if not names:
        raise CorekitError(f"no notebooks to run: {root / 'notebooks'} holds no NN_name.py")
    declared = {name: read_parameters(Notebook(root, name)) for name in names}
    unknown = [k for k in overrides if not any(k in params for params in declared.values())]
    if unknown:
        valid = sorted({p for params in declared.values() for p in params})
        raise CorekitError(f"unknown parameter {', '.join(map(repr, unknown))} (from -p): no notebook declares "
                           f"it; valid parameters: {', '.join(valid) or '(none)'}")
    params = {name: effective_parameters(Notebook(root, name), profile,
                                         {k: v for k, v in overrides.items() if k in declared[name]})
              for name in names}
    if publish:
        check_publishable(root, names, profile, force)
    out = prepare_out(out)
    failed = []
    for name in names:
        try:
            print(summary(execute(Notebook(root, name), profile, params[name], out, cell_timeout)), flush=True)
            if publish:
                publish_executed(root, name, out)
        except Interrupted:
            raise
        except CorekitError as err:
            print(f"corekit: error: {err}", file=sys.stderr, flush=True)
            failed.append(name)
    if failed:
        print(f"corekit: {len(failed)} of {len(names)} notebooks failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def published_record(root: Path, name: str) -> tuple[str, str] | None:
    """Return (profile, commit) of the published run of ``name``, None when there is none ('unreadable' if so)."""
    from corekit import publish

    path = publish.published_run(root, name).metrics_path
    if not path.is_file():
        return None
    try:
        metrics = json.loads(path.read_text())
        return str(metrics["profile"]), str((metrics.get("environment") or {}).get("commit") or "not recorded")[:10]
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return "unreadable", "not recorded"


def profile_rank(profile: str) -> int:
    """Return the size of ``profile`` (quick < cpu < paper); an unknown or unreadable one counts as the largest."""
    return PROFILES.index(profile) if profile in PROFILES else len(PROFILES)


def check_publishable(root: Path, names: list[str], profile: str, force: bool) -> None:
    """Raise unless publishing a ``profile`` run of ``names`` replaces no published run of a larger profile (or ``force``)."""
    larger = {name: record[0] for name in names
              if (record := published_record(root, name)) and profile_rank(record[0]) > profile_rank(profile)}
    if larger and not force:
        runs = ", ".join(f"{name} ({published} profile)" for name, published in larger.items())
        known = [published for published in larger.values() if published in PROFILES]
        remedy = f"run with --profile {max(known, key=profile_rank)}, or add --force" if known else "add --force"
        raise CorekitError(f"--publish: results/ holds a larger run than a {profile}-profile one: {runs}; "
                           f"{remedy} to replace it anyway")


def publish_executed(root: Path, name: str, out: Path) -> None:
    """Replace the published run of ``name`` in ``results/`` with the one just executed into ``out``, saying which."""
    from corekit import publish

    previous = published_record(root, name)
    publish.publish(root, publish.executed_run(out, name))
    if previous:
        print(f"{name}: replaced the published {previous[0]}-profile run (commit {previous[1]})", flush=True)


def checked_out(root: Path, text: str | None, profile: str) -> Path:
    """Return the ``--out`` folder (default _build/executed/PROFILE); raise unless it is a folder outside the sources."""
    if text is None:
        return default_dir(root, "executed", profile)
    if not text.strip():
        raise CorekitError(f"--out {text!r}: an empty path; name a folder, e.g. --out _build/executed/{profile}")
    out = Path(text).expanduser().absolute().resolve()
    if out == root:
        raise CorekitError(f"--out {out}: the repository root; name a folder of its own, e.g. _build/executed/{profile}")
    for folder, what in PROTECTED.items():
        if out.is_relative_to(root / folder):
            raise CorekitError(f"--out {out}: inside {folder}/ ({what}); name a folder outside notebooks/, lib/ "
                               "and results/")
    return out


def cmd_run(args: argparse.Namespace) -> int:
    """``corekit run``: check the parameters, execute one notebook (or all), print its claims (``--publish``: into results/)."""
    root = find_root()
    overrides = parse_overrides(args.parameter)
    if args.publish and overrides:
        raise CorekitError("--publish takes no -p overrides: a published run is a profile run; put the values in "
                           "notebooks/params/cpu/NAME.yaml or notebooks/params/paper/NAME.yaml")
    if args.force and not args.publish:
        raise CorekitError("--force goes with --publish (it lets a smaller profile's run replace a published one)")
    out = checked_out(root, args.out, args.profile)
    if args.notebook == "all":
        return run_all(root, args.profile, overrides, out, args.cell_timeout, args.publish, args.force)
    nb = get_notebook(root, args.notebook)
    params = effective_parameters(nb, args.profile, overrides)
    if args.publish:
        check_publishable(root, [nb.name], args.profile, args.force)
    metrics = execute(nb, args.profile, params, out, args.cell_timeout)
    print(summary(metrics))
    if args.publish:
        publish_executed(root, nb.name, out)
    return 0


def read_metrics(path: Path) -> dict | None:
    """Return the metrics file at ``path``, or None (saying why) when it is missing, unreadable or incomplete."""
    if not path.is_file():
        return None
    try:
        metrics = json.loads(path.read_text())
        if not isinstance(metrics, dict) or not {"claims", "source_hash", "profile"} <= metrics.keys():
            raise ValueError("it lacks claims, source_hash or profile")
    except (OSError, ValueError) as err:           # JSONDecodeError and UnicodeDecodeError are ValueErrors
        print(f"corekit: {path} is corrupt ({err}); executing again", file=sys.stderr, flush=True)
        return None
    return metrics


def readable_notebook(path: Path) -> bool:
    """Return whether ``path`` is a notebook nbformat can read and validate (saying why when it is not)."""
    import nbformat

    try:
        nbformat.validate(nbformat.read(path, as_version=4))
    except (OSError, ValueError, nbformat.ValidationError) as err:
        print(f"corekit: {path} is corrupt ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}); "
              "executing again", file=sys.stderr, flush=True)
        return False
    return True


def is_current(nb: Notebook, profile: str, params: dict, executed_dir: Path) -> bool:
    """Return whether ``executed_dir`` holds ``nb`` executed from the current sources and parameters, readable."""
    done = Outputs(executed_dir, nb.name)
    if not done.ipynb.is_file():
        return False
    metrics = read_metrics(done.metrics)
    if metrics is None or metrics.get("profile") != profile or metrics.get("source_hash") != source_hash(nb, params):
        return False
    return readable_notebook(done.ipynb)


def ensure_executed(nb: Notebook, profile: str, executed_dir: Path, cell_timeout: float | None = None) -> None:
    """Execute ``nb`` into ``executed_dir`` unless a readable copy executed from the current sources is there."""
    params = effective_parameters(nb, profile, {})
    if is_current(nb, profile, params, executed_dir):
        print(f"{nb.name}: reusing {executed_dir / nb.name}.ipynb (sources and parameters unchanged)")
        return
    print(summary(execute(nb, profile, params, executed_dir, cell_timeout)), flush=True)


def cmd_book(args: argparse.Namespace) -> int:
    """``corekit book``: execute what is stale, stage the sources and build the static HTML.

    ``--published`` builds from ``results/`` alone and executes nothing (``corekit.publish``).
    """
    from corekit import publish

    root = find_root()
    if args.published:
        executed_dir = (args.executed or default_dir(root, "executed", "quick")).resolve()
        out = prepare_out(args.out or default_dir(root, "book", "published"))
        html = publish.build_published(root, out, executed_dir, fallback=args.fallback_quick)
        print(f"book: {html} (open {html / 'index.html'})")
        return 0
    executed_dir = prepare_out(args.executed or default_dir(root, "executed", args.profile), "--executed")
    out = prepare_out(args.out or default_dir(root, "book", args.profile))
    names = toc_notebooks(root)
    for name in names:
        effective_parameters(Notebook(root, name), args.profile, {})    # every profile checked before any run
    for name in names:
        ensure_executed(Notebook(root, name), args.profile, executed_dir, args.cell_timeout)
    runs = {name: publish.executed_run(executed_dir, name) for name in names}
    stage = stage_book(root, {name: run.ipynb for name, run in runs.items()}, out / "source")
    publish.decorate(root, stage, runs, {})
    html = build_html(stage, out)
    print(f"book: {html} (open {html / 'index.html'})")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """``corekit list``: every notebook with its parameters and their defaults."""
    root = find_root()
    in_toc = set(f.split("/", 1)[1] for f in toc_files(root) if f.startswith("notebooks/"))
    for name in notebook_names(root):
        nb = Notebook(root, name)
        notes = [f"{p} profile" if nb.profile_file(p).is_file() else f"no {p} profile" for p in PROFILES[1:]]
        notes.append("in _toc.yml" if name in in_toc else "not in _toc.yml")
        print(f"{name}  ({', '.join(notes)})")
        params = read_parameters(nb)
        width = max((len(p) for p in params), default=0)
        for p in params.values():
            print(f"    {p.name:<{width}} = {p.default}" + (f"  # {p.help}" if p.help else ""))
    return 0


def _add_profile(parser: argparse.ArgumentParser) -> None:
    """Add the ``--profile`` and ``--cell-timeout`` options."""
    parser.add_argument("--profile", choices=PROFILES, default="quick",
                        help="quick: the notebook's defaults (CPU, minutes); cpu: notebooks/params/cpu/NAME.yaml "
                             "(closest to the paper that fits a 2-core CPU); paper: notebooks/params/paper/NAME.yaml")
    parser.add_argument("--cell-timeout", type=positive_seconds, metavar="S",
                        help="fail a run whose cell takes longer than S seconds (default: no limit)")


def positive_seconds(text: str) -> int:
    """Return ``text``, a positive finite number of seconds, rounded up to whole seconds as nbclient needs (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value > 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return math.ceil(value)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line, ``corekit: error: ...``, like every other refusal."""

    def error(self, message: str) -> NoReturn:
        """Print the error in one line and exit with status 2."""
        self.exit(2, f"corekit: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``corekit`` command."""
    parser = Parser(prog="corekit", description="Execute the notebooks and build the book.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="execute a notebook (or all) through papermill")
    run.add_argument("notebook", metavar="NOTEBOOK|all", help="a notebook name such as 01_markov_cores, or all")
    _add_profile(run)
    run.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                     help="override a parameter; VALUE is YAML, e.g. -p seeds '[0, 1]' (overrides the profile)")
    run.add_argument("--out", metavar="DIR", help="output folder (default _build/executed/PROFILE; not the repository "
                     "root nor in its notebooks/, lib/ or results/)")
    run.add_argument("--publish", action="store_true",
                     help="on success, replace the notebook's published run in results/NAME/ (no -p allowed; "
                          "not a run of a larger profile, quick < cpu < paper, without --force)")
    run.add_argument("--force", action="store_true",
                     help="with --publish: replace a published run even of a larger profile")

    book = commands.add_parser("book", help="build the static HTML book from executed notebooks")
    _add_profile(book)
    book.add_argument("--out", type=Path, metavar="DIR", help="book output folder (default _build/book/PROFILE)")
    book.add_argument("--executed", type=Path, metavar="DIR",
                      help="executed notebooks to reuse (default _build/executed/PROFILE; with --published, "
                           "the quick runs shown beside the published ones: _build/executed/quick)")
    book.add_argument("--published", action="store_true",
                      help="build the published edition from results/ only, executing nothing")
    book.add_argument("--fallback-quick", action="store_true",
                      help="with --published: show the executed quick run (--executed) of a chapter not yet published")

    commands.add_parser("list", help="list the notebooks with their parameters and defaults")
    return parser


COMMANDS = {"run": cmd_run, "book": cmd_book, "list": cmd_list}


def main(argv: list[str] | None = None) -> int:
    """Run the ``corekit`` command line; return its exit status (every failure ends in one message)."""
    args = build_parser().parse_args(argv)
    try:
        with sigterm_raises():
            return COMMANDS[args.command](args)
    except CorekitError as err:
        return fail(str(err), err.exit_code)
    except SigTerm:
        return fail("stopped by SIGTERM", Terminated.exit_code)
    except KeyboardInterrupt:
        return fail("interrupted", Interrupted.exit_code)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # no second error when Python flushes
        return fail("output closed before the command finished (broken pipe)", 1)
    except OSError as err:
        return fail(str(err), 1)


def fail(message: str, code: int) -> int:
    """Print ``corekit: error: MESSAGE`` to stderr (if it is still open); return ``code``."""
    with contextlib.suppress(OSError):
        print(f"corekit: error: {message}", file=sys.stderr, flush=True)
    return code
