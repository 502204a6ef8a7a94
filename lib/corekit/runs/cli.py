"""The ``corekit`` command: execute the book's notebooks through papermill and build the book::

    corekit run NOTEBOOK|all [--profile quick|cpu|paper] [-p NAME VALUE]... [--out DIR] [--publish [--force]]
                             [--cell-timeout S] [--jobs N]
    corekit book [--profile quick|cpu|paper] [--out DIR] [--executed DIR] [--cell-timeout S]
    corekit book --published [--fallback-quick] [--out DIR] [--executed DIR]
    corekit adopt DIR [NOTEBOOK]... [--check] [--force]
    corekit list
    corekit statements [--check]

A notebook is ``notebooks/NN_name.py`` (jupytext py:percent, the source of truth) paired with
``notebooks/NN_name.ipynb``. ``run`` checks every parameter against what the notebook declares
(:mod:`corekit.runs.paramspec`) before starting a kernel, executes into a private folder beside the
output and, on success only, swaps ``NAME.ipynb``, ``figures/NAME/`` and then ``NAME.metrics.json``
(the notebook's claims plus ``runtime_s``, ``profile`` and ``source_hash``, written once) into ``DIR``,
undoing every move if one fails. A failed, interrupted (Ctrl-C) or stopped (SIGTERM) run is kept as
``NAME.failed.ipynb`` or ``NAME.interrupted.ipynb`` and leaves the last complete run in place. ``--out``
may not be the repository root nor lie in its notebooks/, lib/, results/, book/, .git/ or any other folder
git tracks (nor may ``book --out`` and ``--executed``); a run replaces only what runs of the notebook wrote there
(their record) and a build only the source/ and _build/ an earlier build made (their markers), never through a
symbolic link (:mod:`corekit.runs.owned`). ``book`` reuses executed notebooks whose ``source_hash`` still matches
(re-executing a corrupt one) and builds static HTML. ``--publish`` and ``book --published`` are the published edition
(:mod:`corekit.runs.publish`, ``results/``); ``--publish`` replaces no published run of a larger profile
(quick < cpu < paper) unless ``--force``, checked again under a lock on results/ as the run is swapped in.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

from corekit.runs.errors import CorekitError, Interrupted, Problems
from corekit.runs.execute import Outputs, SigTerm, Terminated, check_outputs, execute, prepare_out, sigterm_raises, summary
from corekit.runs.notebooks import (
    NOTEBOOK_NAME,
    PROFILES,
    ROOT_ENV,
    Notebook,
    find_root,
    get_notebook,
    notebook_names,
    toc_files,
    toc_notebooks,
)
from corekit.runs.owned import tracked_folder
from corekit.runs.parameters import check_chapter, check_compiles, effective_parameters, parse_value, read_parameters
from corekit.runs.paramspec import expand_user
from corekit.runs.site import build_html, check_book_out, marking, stage_book
from corekit.runs.source_hash import source_hash

#: Folders of the repository that ``--out`` may not be or lie in, and why.
PROTECTED = {"notebooks": "the notebooks' sources", "lib": "the library",
             "results": "the published runs, which only --publish writes", "book": "the book's pages",
             ".git": "git's own files"}
#: The longest --cell-timeout, in seconds (about 31 years); larger values overflow the kernel client's timers.
MAX_CELL_TIMEOUT_S = 10**9
#: Bytes an output folder's path leaves for the names of what is written inside it (the private run folder, a
#: notebook's figures folder and figure files; a book's source/ and _build/html pages).
PATH_ROOM = 256



def parse_overrides(pairs: list[list[str]]) -> dict:
    """Return the ``-p NAME VALUE`` pairs as a dict of parsed values (a later pair wins)."""
    return {name: parse_value(name, text) for name, text in pairs}


def default_dir(root: Path, kind: str, profile: str) -> Path:
    """Return ``_build/KIND/PROFILE`` under the root."""
    return root / "_build" / kind / profile


def run_all(root: Path, profile: str, overrides: dict, out: Path, cell_timeout: float | None = None,
            publish: bool = False, force: bool = False, jobs: int = 1) -> int:
    """Run every notebook in order (at the cpu or paper profile: every notebook that has one, saying which it skips),
    each ``-p`` going to the notebooks that declare it; 1 if any failed.

    Every notebook's parameters (and, with ``publish``, published runs) are checked before the first one
    starts. With ``publish``, each notebook that succeeds replaces its published run in ``results/``; one published at a
    larger profile is skipped and named (``force`` replaces it), unless every notebook is, which is refused. With ``jobs``
    above 1, that many notebooks run at once, each on its share of the cores (:func:`run_side_by_side`); never with
    ``publish``, whose runs are timed alone on the machine.
    """
    if jobs > 1 and publish:
        raise CorekitError(f"--jobs {jobs} goes without --publish: a published run records its runtime, measured "
                           "alone on the machine; publish with --jobs 1")
    names = notebook_names(root)
    if not names:
        raise CorekitError(f"no notebooks to run: {root / 'notebooks'} holds no NN_name.py")
    names, skipped = with_profile(root, names, profile)
    declared = {name: read_parameters(Notebook(root, name)) for name in names + skipped}
    unknown = [k for k in overrides if not any(k in declared[name] for name in names)]
    if unknown:
        only_skipped = [k for k in unknown if any(k in declared[name] for name in skipped)]
        if only_skipped:
            raise CorekitError(f"-p {only_skipped[0]}: only notebooks without a {profile} profile declare it "
                               f"({', '.join(n for n in skipped if only_skipped[0] in declared[n])}), and run all "
                               f"--profile {profile} skips them; run that notebook on its own")
        valid = sorted({p for params in declared.values() for p in params})
        raise CorekitError(f"unknown parameter {', '.join(map(repr, unknown))} (from -p): no notebook declares "
                           f"it; valid parameters: {', '.join(valid) or '(none)'}")
    params = {name: effective_parameters(Notebook(root, name), profile,
                                         {k: v for k, v in overrides.items() if k in declared[name]})
              for name in names}
    for name in names:
        check_chapter(Notebook(root, name), params[name])
    if publish and not force:        # a chapter published at a larger profile keeps it: skipped, named
        larger = {name: record[0] for name in names
                  if (record := published_record(root, name)) and profile_rank(record[0]) > profile_rank(profile)}
        if larger and len(larger) < len(names):          # with nothing left to publish, refused below as one run is
            names = [name for name in names if name not in larger]
            print(f"run all --profile {profile} --publish: skipping "
                  f"{', '.join(f'{name} (published at its {published} profile)' for name, published in larger.items())}"
                  f"; --force replaces {'it' if len(larger) == 1 else 'them'}", flush=True)
    if publish:
        check_publishable(root, names, profile, force)
    out = prepare_out(out)
    check_outputs(out, names)
    if skipped:
        print(f"run all --profile {profile}: running the {len(names)} notebooks with a {profile} profile "
              f"({', '.join(names)}); skipping {', '.join(skipped)} (no notebooks/params/{profile}/NAME.yaml)",
              flush=True)
    if jobs > 1:
        return run_side_by_side(root, names, profile, overrides, declared, out, cell_timeout, jobs)
    failed = []
    for name in names:
        try:
            print(summary(execute(Notebook(root, name), profile, params[name], out, cell_timeout)), flush=True)
            if publish:
                publish_executed(root, name, out, profile, force)
        except Interrupted:
            raise
        except CorekitError as err:
            print(f"corekit: error: {err}", file=sys.stderr, flush=True)
            failed.append(name)
    if failed:
        print(f"corekit: {len(failed)} of {len(names)} notebooks failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


#: The cores a ``corekit run`` started by ``run all --jobs`` is pinned to ("0,2"): it and its kernel run there only, so
#: the thread count the notebook chooses (the free cores it may use, :func:`corekit.device.cpu_threads`) is its share.
CPUS_ENV = "COREKIT_CPUS"


def pin_to_cores() -> None:
    """Pin this process, and the kernels it starts, to the cores ``$COREKIT_CPUS`` lists (where the OS can pin)."""
    text = os.environ.get(CPUS_ENV)
    if not text:
        return
    try:
        cores = {int(core) for core in text.split(",")}
    except ValueError:
        raise CorekitError(f"{CPUS_ENV}={text!r}: expected core numbers separated by commas, e.g. 0,1") from None
    if hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, cores)
        except OSError as err:
            raise CorekitError(f"{CPUS_ENV}={text!r}: cannot run on those cores ({err.strerror})") from None


def run_side_by_side(root: Path, names: list[str], profile: str, overrides: dict, declared: dict[str, dict],
                     out: Path, cell_timeout: float | None, jobs: int) -> int:
    """Run ``names`` ``jobs`` at a time, each its own ``corekit run NAME`` process pinned to its own share of the usable
    cores (:data:`CPUS_ENV`; all of them where there are fewer cores than jobs), printing each one's output as it
    ends; 1 if any failed. A notebook's parameters are those of a run on its own, so ``corekit book`` reuses it."""
    import queue
    import threading
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from corekit.device import usable_cores

    cores = usable_cores()
    lanes: queue.Queue[list[int]] = queue.Queue()
    for i in range(jobs):
        lanes.put(cores[i::jobs] if len(cores) >= jobs else cores)
    share = len(cores) // jobs if len(cores) >= jobs else len(cores)
    print(f"run all --jobs {jobs}: {len(names)} notebooks, {min(jobs, len(names))} at a time, each on "
          f"{share} of the {len(cores)} cores", flush=True)

    live: list[subprocess.Popen] = []
    stopping = False
    starting = threading.Lock()           # a notebook starts, or the run stops, never both at once

    def one(name: str) -> tuple[int, str, str]:
        command = [sys.executable, "-m", "corekit", "run", name, "--profile", profile, "--out", str(out)]
        command += ["--cell-timeout", str(cell_timeout)] if cell_timeout else []
        for key, value in overrides.items():
            if key in declared[name]:
                command += ["-p", key, json.dumps(value)]
        lane = lanes.get()
        try:
            env = {**os.environ, ROOT_ENV: str(root), CPUS_ENV: ",".join(map(str, lane))}
            with starting:
                if stopping:
                    return 1, "", "not started: the run was stopped"
                child = subprocess.Popen(command, cwd=root, env=env, text=True, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE)
                live.append(child)
            stdout, stderr = child.communicate()
        finally:
            lanes.put(lane)
        return child.returncode, stdout, stderr

    failed = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        running = {pool.submit(one, name): name for name in names}
        try:
            for done in as_completed(running):
                name, (code, stdout, stderr) = running[done], done.result()
                print(stdout, end="", flush=True)
                if code:
                    tail = stderr.strip().splitlines()[-1:] or [f"exit status {code}"]
                    print(f"corekit: error: {name}: {tail[0]}", file=sys.stderr, flush=True)
                    failed.append(name)
        except BaseException:          # Ctrl-C or SIGTERM: each running notebook keeps its partial run and stops
            with starting:
                stopping = True
                for child in live:
                    if child.poll() is None:
                        child.terminate()
            raise
    if failed:
        print(f"corekit: {len(failed)} of {len(names)} notebooks failed: {', '.join(sorted(failed))}", file=sys.stderr)
        return 1
    return 0


def with_profile(root: Path, names: list[str], profile: str) -> tuple[list[str], list[str]]:
    """Return (the notebooks of ``names`` that have ``profile``, those that do not): every one has quick, its defaults;
    raise when none has it."""
    if profile == "quick":
        return names, []
    having = [name for name in names if Notebook(root, name).profile_file(profile).is_file()]
    if not having:
        raise CorekitError(f"no notebook has a {profile} profile (notebooks/params/{profile}/NAME.yaml); "
                           f"profiles: {', '.join(PROFILES)}")
    return having, [name for name in names if name not in having]


def published_record(root: Path, name: str) -> tuple[str, str] | None:
    """Return (profile, commit) of the published run of ``name``, None when there is none ('unreadable' if so)."""
    from corekit.runs import publish

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


def publish_executed(root: Path, name: str, out: Path, profile: str, force: bool,
                     environment: dict | None = None) -> None:
    """Replace the published run of ``name`` in ``results/`` with the ``profile`` run just executed into ``out``, saying
    which; under a lock on results/, refuse (unless ``force``) when a larger profile's run was published meanwhile."""
    from corekit.runs import publish

    with publish.results_locked(root):
        try:
            check_publishable(root, [name], profile, force)
        except CorekitError as err:
            raise CorekitError(f"{err}; it was published while this run executed: this run is not published (its "
                               f"outputs are in {out})") from None
        previous = published_record(root, name)
        publish.publish(root, publish.executed_run(out, name), environment)
    if previous:
        print(f"{name}: replaced the published {previous[0]}-profile run (commit {previous[1]})", flush=True)


def checked_out(root: Path, text: str | None, profile: str, option: str = "--out", kind: str = "executed") -> Path:
    """Return the folder ``option`` names (default _build/KIND/PROFILE); raise unless it is a folder outside the sources:
    not the repository root, nor in .git/ or a folder git tracks."""
    example = f"_build/{kind}/{profile}"
    if text is None:
        return default_dir(root, kind, profile)
    if not text.strip():
        raise CorekitError(f"{option} {text!r}: an empty path; name a folder, e.g. {option} {example}")
    try:
        out = expand_user(text).absolute().resolve()
    except (ValueError, OSError) as err:
        raise CorekitError(f"{option} {text!r}: {err}") from None
    check_path_length(option, out)
    if out == root:
        raise CorekitError(f"{option} {out}: the repository root; name a folder of its own, e.g. {example}")
    for folder, what in PROTECTED.items():
        if out.is_relative_to(root / folder):
            raise CorekitError(f"{option} {out}: inside {folder}/ ({what}); name a folder outside "
                               f"{', '.join(f + '/' for f in PROTECTED)} and every folder git tracks")
    tracked = tracked_folder(root, out)
    if tracked:
        raise CorekitError(f"{option} {out}: inside {tracked}/, a folder of the repository that git tracks; name a "
                           f"folder git ignores or one outside the repository, e.g. {example}")
    return out


def check_path_length(option: str, out: Path) -> None:
    """Raise naming ``option`` when a name in the folder ``out`` is longer than its file system takes, or the path
    leaves less than :data:`PATH_ROOM` bytes of its longest path for the files a run or build writes inside."""
    existing = next((folder for folder in (out, *out.parents) if os.path.isdir(folder)), Path("/"))
    name_max, path_max = (limit(existing, key, default) for key, default in (("PC_NAME_MAX", 255), ("PC_PATH_MAX", 4096)))
    shown = "/".join(part if len(part) <= 40 else f"{part[:20]}…{part[-8:]}" for part in out.parts).replace("//", "/", 1)
    long = next((part for part in out.parts if len(os.fsencode(part)) > name_max), None)
    if long is not None:
        raise CorekitError(f"{option} {shown}: a folder name of {len(os.fsencode(long))} bytes ({long[:20]}…); this "
                           f"file system takes names of at most {name_max} bytes; name a shorter folder")
    if len(os.fsencode(str(out))) + PATH_ROOM > path_max:
        raise CorekitError(f"{option} {shown}: a path of {len(os.fsencode(str(out)))} bytes; the files written inside "
                           f"need it under {path_max - PATH_ROOM} bytes ({path_max}, this file system's longest path, "
                           f"less {PATH_ROOM} for their names); name a shorter folder")


def limit(folder: Path, key: str, default: int) -> int:
    """Return the file-system limit ``key`` of os.pathconf at ``folder`` (``default`` where it is not known)."""
    try:
        return os.pathconf(folder, key)
    except (OSError, ValueError, AttributeError):
        return default


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
        return run_all(root, args.profile, overrides, out, args.cell_timeout, args.publish, args.force, args.jobs)
    if args.jobs != 1:
        raise CorekitError(f"--jobs {args.jobs} goes with run all (one notebook runs as one process)")
    nb = get_notebook(root, args.notebook)
    params = effective_parameters(nb, args.profile, overrides)
    check_chapter(nb, params)
    if args.publish:
        check_publishable(root, [nb.name], args.profile, args.force)
    metrics = execute(nb, args.profile, params, out, args.cell_timeout)
    print(summary(metrics))
    if args.publish:
        publish_executed(root, nb.name, out, args.profile, args.force)
    return 0


def cmd_adopt(args: argparse.Namespace) -> int:
    """``corekit adopt DIR``: publish the profile runs another machine executed into DIR (``corekit run --out DIR``, e.g.
    ``scripts/gpu-publish.sh`` on a GPU), each checked to be a run of its profile and of this checkout's sources."""
    from corekit.runs import publish

    root = find_root()
    folder = read_folder(args.folder, root, "DIR")
    if not folder.is_dir():
        raise CorekitError(f"adopt: {args.folder!r} is not a folder; name the folder `corekit run --out DIR` wrote "
                           "(for scripts/gpu-publish.sh: OUT/runs)")
    names = args.notebooks or sorted(p.name.removesuffix(".metrics.json") for p in folder.glob("*.metrics.json")
                                     if NOTEBOOK_NAME.fullmatch(p.name.removesuffix(".metrics.json")))
    if not names:
        raise CorekitError(f"adopt: {folder} holds no executed run (no NN_name.metrics.json beside its NN_name.ipynb)")
    notebooks = [get_notebook(root, name) for name in names]
    runs = {nb.name: publish.executed_run(folder, nb.name) for nb in notebooks}
    problems = [f"adopt {nb.name}: {line}; nothing published" for nb in notebooks
                for line in publish.adoption_problems(nb, runs[nb.name])]
    if problems:
        raise Problems(problems)
    profiles = {name: run.metrics["profile"] for name, run in runs.items()}
    for name, profile in profiles.items():
        check_publishable(root, [name], profile, args.force)
    for nb in notebooks:
        env = runs[nb.name].metrics.get("environment") or {}
        print(f"{nb.name}: a {profiles[nb.name]}-profile run on {env.get('device') or 'a device not recorded'}, "
              f"{publish.duration(runs[nb.name].metrics.get('runtime_s'))}"
              + (": may be published (--check: nothing published)" if args.check else ""), flush=True)
        if not args.check:
            publish_executed(root, nb.name, folder, profiles[nb.name], args.force,
                             publish.adopted_environment(root, nb, runs[nb.name].metrics))
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

    ``--published`` builds from ``results/`` alone and executes nothing (:mod:`corekit.runs.publish`).
    """
    from corekit.runs import publish

    root = find_root()
    for name in toc_notebooks(root):                                   # a .py that does not compile: one line, first
        check_compiles(Notebook(root, name))
    if args.executed is not None and not read_folder(args.executed, root, "--executed").is_dir():
        raise CorekitError(f"book: --executed {args.executed!r} is not a folder; it names the executed runs to reuse "
                           "(`corekit run --out DIR` writes them); leave it out to execute into "
                           "_build/executed/PROFILE")
    if args.published:
        executed_dir = read_folder(args.executed, default_dir(root, "executed", "quick"), "--executed")
        out = book_out(checked_out(root, args.out, "published", "--out", "book"))
        html = publish.build_published(root, out, executed_dir, fallback=args.fallback_quick)
        print(f"book: {html} (open {html / 'index.html'})")
        return 0
    executed_dir = checked_out(root, args.executed, args.profile, "--executed")   # both checked before either is made
    out = book_out(checked_out(root, args.out, args.profile, "--out", "book"))
    executed_dir = prepare_out(executed_dir, "--executed")
    names = toc_notebooks(root)
    for name in names:                                                 # every profile checked before any run
        check_chapter(Notebook(root, name), effective_parameters(Notebook(root, name), args.profile, {}))
    check_outputs(executed_dir, names)                                 # and every folder, before anything is written
    for name in names:
        ensure_executed(Notebook(root, name), args.profile, executed_dir, args.cell_timeout)
    runs = {name: publish.executed_run(executed_dir, name) for name in names}
    stage = stage_book(root, {name: run.ipynb for name, run in runs.items()}, out / "source")
    with marking(stage):
        publish.decorate(root, stage, runs, {})
    html = build_html(stage, out)
    print(f"book: {html} (open {html / 'index.html'})")
    return 0


def read_folder(text: str | None, default: Path, option: str) -> Path:
    """Return the folder ``option`` names (``default`` without one), which the command only reads."""
    if text is None:
        return default
    try:
        return expand_user(text).absolute().resolve()
    except ValueError as err:
        raise CorekitError(f"{option} {text!r}: {err}") from None


def book_out(out: Path) -> Path:
    """Return the book's ``--out`` folder (:func:`checked_out`) made; raise first unless ``corekit book`` may replace its
    source/ and _build/ there (made by an earlier build, no link on the way)."""
    check_book_out(out)
    return prepare_out(out)


def cmd_statements(args: argparse.Namespace) -> int:
    """``corekit statements [--check]``: write (or check) the published edition's statements table."""
    from corekit.runs import publish

    root = find_root()
    path, text = root / publish.STATEMENTS_FILE, publish.published_statements(root)
    if args.check:
        if not path.is_file() or path.read_text() != text:
            raise CorekitError(f"{publish.STATEMENTS_FILE} is not what the published runs give: run corekit statements")
        return 0
    path.write_text(text)
    print(f"wrote {publish.STATEMENTS_FILE}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """``corekit list``: every notebook with its parameters and their defaults."""
    root = find_root()
    in_toc = set(f.split("/", 1)[1] for f in toc_files(root) if f.startswith("notebooks/"))
    declared = {name: read_parameters(Notebook(root, name)) for name in notebook_names(root)}   # all read, then shown
    for name, params in declared.items():
        nb = Notebook(root, name)
        notes = [f"{p} profile" if nb.profile_file(p).is_file() else f"no {p} profile" for p in PROFILES[1:]]
        notes.append("in _toc.yml" if name in in_toc else "not in _toc.yml")
        print(f"{name}  ({', '.join(notes)})")
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
    if value > MAX_CELL_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_CELL_TIMEOUT_S:,} seconds (about 31 years; leave "
                                         f"--cell-timeout out for no limit), got {text!r}")
    return math.ceil(value)


def positive_count(text: str) -> int:
    """Return ``text``, a whole number ≥ 1 (argparse type)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


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
    run.add_argument("notebook", metavar="NOTEBOOK|all", help="a notebook name such as 01_markov_cores, or all (with "
                     "--profile cpu or paper: every notebook that has that profile, naming those it skips)")
    _add_profile(run)
    run.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                     help="override a parameter; VALUE is YAML, e.g. -p seeds '[0, 1]' (overrides the profile)")
    run.add_argument("--out", metavar="DIR", help="output folder (default _build/executed/PROFILE; not the repository "
                     "root nor in its .git/ or a folder git tracks, such as notebooks/, lib/, results/ or book/)")
    run.add_argument("--publish", action="store_true",
                     help="on success, replace the notebook's published run in results/NAME/ (no -p allowed; "
                          "not a run of a larger profile, quick < cpu < paper, without --force)")
    run.add_argument("--force", action="store_true",
                     help="with --publish: replace a published run even of a larger profile")
    run.add_argument("--jobs", type=positive_count, default=1, metavar="N",
                     help="with all: run N notebooks at once, each pinned to 1/N of the cores (default 1; not with --publish)")

    book = commands.add_parser("book", help="build the static HTML book from executed notebooks")
    _add_profile(book)
    book.add_argument("--out", metavar="DIR", help="book output folder (default _build/book/PROFILE; checked as run "
                      "--out is; the build replaces its source/ and _build/ there only when an earlier build made them)")
    book.add_argument("--executed", metavar="DIR",
                      help="executed notebooks to reuse (default _build/executed/PROFILE; with --published, "
                           "the quick runs shown beside the published ones: _build/executed/quick)")
    book.add_argument("--published", action="store_true",
                      help="build the published edition from results/ only, executing nothing")
    book.add_argument("--fallback-quick", action="store_true",
                      help="with --published: show the executed quick run (--executed) of a chapter not yet published")

    adopt = commands.add_parser("adopt", help="publish profile runs executed on another machine (e.g. a GPU)")
    adopt.add_argument("folder", metavar="DIR", help="the folder `corekit run --out DIR` wrote there (for "
                       "scripts/gpu-publish.sh: OUT/runs)")
    adopt.add_argument("notebooks", nargs="*", metavar="NOTEBOOK", help="the runs to publish (default: every "
                       "NN_name.metrics.json in DIR)")
    adopt.add_argument("--check", action="store_true", help="check that each run may be published; publish nothing")
    adopt.add_argument("--force", action="store_true", help="replace a published run even of a larger profile")

    commands.add_parser("list", help="list the notebooks with their parameters and defaults")
    statements = commands.add_parser("statements", help="write results/statements.json from the published runs")
    statements.add_argument("--check", action="store_true", help="exit 1, writing nothing, when the file is stale")
    return parser


COMMANDS = {"run": cmd_run, "book": cmd_book, "adopt": cmd_adopt, "list": cmd_list, "statements": cmd_statements}


def main(argv: list[str] | None = None) -> int:
    """Run the ``corekit`` command line; return its exit status (every failure ends in one message)."""
    args = build_parser().parse_args(argv)
    try:
        pin_to_cores()
        with sigterm_raises():
            return COMMANDS[args.command](args)
    except Problems as err:
        for problem in err.problems:
            fail(problem, err.exit_code)
        return err.exit_code
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
