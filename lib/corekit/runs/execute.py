"""Running one notebook: papermill into a private folder, then its outputs swapped into place whole."""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, NoReturn

from corekit.runs import owned
from corekit.runs.claims import VERDICT_STYLE, verdict_of
from corekit.runs.errors import CorekitError, ExecutionFailed, Interrupted, Problems
from corekit.runs.notebooks import Notebook
from corekit.runs.paramspec import OUTPUT_DIR, expand_user
from corekit.runs.source_hash import source_hash

#: The Jupyter kernel every run executes in.
KERNEL = "python3"


def check_paired(nb: Notebook) -> None:
    """Raise unless the paired .ipynb, where there is one, holds the code cells of the .py (the source a run executes):
    an edit made in one file only would otherwise run, or be lost, unnoticed."""
    if not nb.ipynb.is_file():
        return
    import jupytext
    import nbformat

    py, ipynb = (path.relative_to(nb.root) for path in (nb.py, nb.ipynb))
    sync = f"bring them together with `jupytext --sync {py}`, which keeps the cells of the newer file"
    try:
        paired = [c.source for c in nbformat.read(nb.ipynb, as_version=4).cells if c.cell_type == "code"]
    except (OSError, ValueError) as err:
        raise CorekitError(f"{ipynb} is not a readable notebook ({type(err).__name__}); {sync}") from None
    source = [c.source for c in jupytext.read(nb.py).cells if c.cell_type == "code"]
    if paired != source:
        cell = next((i for i, (a, b) in enumerate(zip(paired, source)) if a != b), min(len(paired), len(source)))
        newer = ipynb if nb.ipynb.stat().st_mtime > nb.py.stat().st_mtime else py
        raise CorekitError(f"{ipynb} differs from {py} in code cell {cell + 1} (the .py is the source a run executes); "
                           f"{sync} (now {newer})")


@contextlib.contextmanager
def executable_ipynb(nb: Notebook) -> Iterator[Path]:
    """Yield an .ipynb for papermill converted from the .py, the source of truth (:func:`check_paired` has made sure
    that the paired .ipynb says the same)."""
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
                if os.name == "posix":          # local sockets: no port, and no warning about plain-text TCP
                    self.transport = "ipc"
                    self.ip = os.path.join(ctrl_c.sockets(), f"kernel-{len(ctrl_c.managers)}")
                ctrl_c.managers.append(self)

            async def start_kernel(self, **kwargs) -> None:
                """Start the kernel; stop it again if Ctrl-C came meanwhile."""
                await super().start_kernel(**kwargs)
                if ctrl_c.received:
                    ctrl_c.kill_kernels()
                    raise RuntimeError("interrupted while the kernel started")

        self.manager_class = RecordedKernelManager
        self.previous = {}
        self._sockets: str | None = None

    def sockets(self) -> str:
        """Return the private folder of the kernels' IPC sockets (made on first use, removed on exit)."""
        if self._sockets is None:
            self._sockets = tempfile.mkdtemp(prefix="corekit-kernel-")
        return self._sockets

    def __enter__(self) -> CtrlC:
        if threading.current_thread() is threading.main_thread() and os.name == "posix":
            self.previous = {signum: signal.signal(signum, self._handle) for signum in self.SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        if self._sockets is not None:
            shutil.rmtree(self._sockets, ignore_errors=True)

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

    @property
    def record(self) -> Path:
        """The record of what the runs of this notebook wrote into ``folder``: all that a later run may replace."""
        return self.folder / f".{self.name}.written-by-corekit.json"

    @property
    def replaceable(self) -> tuple[tuple[Path, bool], ...]:
        """What a run replaces or deletes in ``folder``, each with whether it is a folder: the previous run's notebook,
        metrics and figures, and the kept unfinished notebooks."""
        return ((self.ipynb, False), (self.metrics, False), (self.figures, True), (self.unfinished("failed"), False),
                (self.unfinished("interrupted"), False))


def prepare_out(out: Path, option: str = "--out") -> Path:
    """Return ``out`` made absolute and created; raise naming ``option`` unless files can be written there."""
    try:
        out = expand_user(str(out)).absolute()
    except ValueError as err:
        raise CorekitError(f"{option} {out}: {err}") from None
    try:
        if out.exists() and not out.is_dir():
            raise CorekitError(f"{option} {out}: exists and is not a folder")
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as err:
        raise CorekitError(f"{option} {out}: cannot write there ({err.strerror or err})") from err
    return out.resolve()


STAGING = re.compile(r"\.(?P<name>\w+)\.running-(?P<pid>\d+)-\w+")


def remove_abandoned_staging(out: Path, name: str) -> None:
    """Delete private run folders of ``name`` in ``out`` (marked as made by corekit run) left by a corekit process that
    no longer exists."""
    for folder in out.glob(f".{name}.running-*"):
        m = STAGING.fullmatch(folder.name)
        if m and m["name"] == name and owned.is_marked(folder) and not process_exists(int(m["pid"])):
            with contextlib.suppress(OSError):
                owned.remove_tree(folder)


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
        owned.mark(folder, "corekit run")
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def write_json_atomic(path: Path, data: dict) -> None:
    """Write ``data`` as JSON to ``path`` in one step: a temporary file beside it, then ``os.replace``; the file gets
    the mode of any file created here (0666 less the umask), as the executed notebook and figures do."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{time.monotonic_ns()}.tmp")
    try:
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "w") as file:
            file.write(json.dumps(data, indent=2) + "\n")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def finish_metrics(nb: Notebook, path: Path, profile: str, params: dict, runtime_s: float) -> dict:
    """Return the metrics the notebook wrote to ``path`` with runtime_s, profile and source_hash added."""
    if not path.is_file():
        raise ExecutionFailed(f"{nb.name} ran but wrote no metrics file; end the notebook with "
                              "corekit.runs.claims.Claims(...).write()")
    try:
        metrics = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ExecutionFailed(f"{nb.name} wrote an unreadable metrics file ({err})") from err
    metrics.update(runtime_s=round(runtime_s, 3), profile=profile, source_hash=source_hash(nb, params))
    return metrics


def keep_unfinished(run: Outputs, final: Outputs, how: str) -> Path | None:
    """Return where the partially executed notebook of ``run`` was kept (``final.unfinished(how)``, put on record
    first), None if none."""
    if not run.ipynb.is_file():
        return None
    kept = final.unfinished(how)
    with contextlib.suppress(OSError):         # unrecorded, a later run refuses to replace it: nothing is lost
        write_record(final, recorded(final) | {relative(final, kept)})
    os.replace(run.ipynb, kept)
    return kept


def relative(outputs: Outputs, path: Path) -> str:
    """Return ``path`` relative to the folder of ``outputs``, as the record lists it."""
    return path.relative_to(outputs.folder).as_posix()


def written(run: Outputs) -> set[str]:
    """Return what the finished run in ``run`` puts into its output folder: its files and folders, relative paths."""
    return {relative(run, item) for path in (run.ipynb, run.metrics, run.figures) if path.exists()
            for item in owned.below(path)}


def write_record(final: Outputs, paths: set[str]) -> None:
    """Write the record of what the runs of ``final.name`` wrote into ``final.folder``: ``paths``, relative."""
    write_json_atomic(final.record, {"written_by": "corekit run", "notebook": final.name, "paths": sorted(paths)})


def recorded(final: Outputs) -> set[str]:
    """Return what the runs of ``final.name`` wrote into ``final.folder``, from its record; without a record, the
    complete run an earlier corekit left there (:func:`earlier_run`); nothing when the record is unreadable."""
    if final.record.is_symlink():
        return set()
    try:
        paths = json.loads(final.record.read_text())["paths"]
    except FileNotFoundError:
        return earlier_run(final)
    except (OSError, ValueError, TypeError, KeyError):
        return set()
    return {path for path in paths if isinstance(path, str)} if isinstance(paths, list) else set()


def earlier_run(final: Outputs) -> set[str]:
    """Return the files of a run a corekit without records left in ``final.folder``: a metrics file of the notebook (with
    its source hash) and the notebook and figures no newer than it, the folders in it and the unfinished notebooks
    corekit executed (:func:`ran_here`); links excepted."""
    try:
        metrics = json.loads(final.metrics.read_text()) if not final.metrics.is_symlink() else None
    except (OSError, ValueError):
        metrics = None
    unfinished = {relative(final, final.unfinished(how)) for how in ("failed", "interrupted")
                  if ran_here(final.unfinished(how), final.name)}
    if not isinstance(metrics, dict) or metrics.get("notebook") != final.name or "source_hash" not in metrics:
        return unfinished
    made = final.metrics.stat().st_mtime_ns
    items = [final.metrics, final.ipynb, *(owned.below(final.figures) if final.figures.is_dir() else [])]
    return unfinished | {relative(final, item) for item in items if item.exists() and not item.is_symlink()
                         and (item.is_dir() or item.stat().st_mtime_ns <= made)}


def ran_here(path: Path, name: str) -> bool:
    """Return whether ``path`` is a plain file holding a notebook that corekit run executed for ``name`` (papermill
    recorded its private run folder)."""
    if path.is_symlink() or not path.is_file():
        return False
    try:
        output = json.loads(path.read_text())["metadata"]["papermill"]["output_path"]
        m = STAGING.fullmatch(Path(output).parent.name)
    except (OSError, ValueError, TypeError, KeyError):
        return False
    return bool(m) and m["name"] == name


def replace_problem(final: Outputs) -> str | None:
    """Return why a run of ``final.name`` may not replace or delete what lies in ``final.folder`` (a symbolic link on
    the way, something its runs did not write, a file where a folder belongs), or None."""
    made: set[str] | None = None
    for path, is_folder in final.replaceable:
        link = owned.link_on_path(final.folder, path)
        if link is not None:
            return owned.link_problem(link)
        if not path.exists():
            continue
        if path.is_dir() != is_folder:
            return f"{path} is not a plain {'folder' if is_folder else 'file'}; corekit replaces only what it wrote"
        made = recorded(final) if made is None else made
        for item in owned.below(path):
            if item.is_symlink():
                return owned.link_problem(item)
            if relative(final, item) not in made:
                return (f"{item} was not written by corekit run (the record {final.record.name} does not list it); "
                        "corekit replaces only what it wrote: move it away or choose another --out")
    return None


def check_replaceable(final: Outputs) -> None:
    """Raise OSError unless a run may replace what lies in ``final.folder`` (:func:`replace_problem`)."""
    problem = replace_problem(final)
    if problem:
        raise OSError(problem)


def check_outputs(out: Path, names: list[str]) -> None:
    """Raise, one line per notebook, unless runs of ``names`` may replace what lies in ``out`` (before any kernel)."""
    problems = [problem for name in names if (problem := replace_problem(Outputs(out, name)))]
    if problems:
        raise Problems(problems)


def commit_outputs(run: Outputs, final: Outputs) -> None:
    """Swap a finished run in ``run`` into ``final`` (old metrics out first, new metrics in last), or undo every move;
    every file is on record (:attr:`Outputs.record`) before it lands, and only what is on record is replaced."""
    check_replaceable(final)
    new = written(run)
    write_record(final, recorded(final) | new)
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
    with contextlib.suppress(OSError):         # the record above lists these and the replaced run's files too
        write_record(final, new)


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
    check_paired(nb)
    out = prepare_out(out)
    final = Outputs(out, nb.name)
    check_outputs(out, [nb.name])
    shown = " ".join(f"{k}={json.dumps(v)}" for k, v in params.items()) or "notebook defaults"
    print(f"executing {nb.name} on the {profile} profile ({shown}) -> {final.ipynb}", flush=True)
    start = time.perf_counter()
    with staging_folder(out, nb.name) as folder:
        run = Outputs(folder, nb.name)
        try:
            run_papermill(nb, {**params, OUTPUT_DIR: str(folder)}, run.ipynb, cell_timeout)
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


#: The widest value and reason the terminal's claims table prints.
SUMMARY_WIDTH = 60
REASON_WIDTH = 110


def _cut(text: str, width: int) -> str:
    """Return ``text`` on one line, cut to ``width`` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def summary(metrics: dict) -> str:
    """Return the terminal's claims table: a line with the notebook and runtime, then one line per claim (id, value
    rounded, a claim over models as k of n with its worst or failing models, verdict) and, under every claim that is
    not a pass nor a figure, its reason."""
    from corekit.runs.claims_view import models_summary, value_summary

    claims = metrics.get("claims", [])
    lines = [f"{metrics.get('notebook')}: {len(claims)} claims, runtime {metrics['runtime_s']:.1f} s "
             f"({metrics.get('profile')} profile)"]
    ids = [c["id"] for c in claims]
    measured = [_cut(models_summary(c) or value_summary(c.get("measured")), SUMMARY_WIDTH) for c in claims]
    id_width, value_width = (max(map(len, column), default=0) for column in (ids, measured))
    for i, m, c in zip(ids, measured, claims, strict=True):
        verdict = verdict_of(c)
        lines.append(f"  {i:<{id_width}}  {m:<{value_width}}  {VERDICT_STYLE[verdict][0]}")
        if verdict not in ("pass", "reported") and c.get("reason"):
            lines.append(f"  {'':<{id_width}}    {_cut(c['reason'], REASON_WIDTH)}")
    return "\n".join(lines)

