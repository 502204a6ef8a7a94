"""What a ``corekit`` command may delete or replace: only what it made itself, never through a symbolic link.

A folder a command makes and later replaces (the book's ``source/`` and ``_build/``, a run's private folder) holds a
marker file, :data:`MARKER`, written as the folder is made and again as the command adds to it, listing what it holds;
before the folder is deleted or written into again, everything in it must be on that list. The files a run swaps into
its output folder are listed in a record beside them (:mod:`corekit.runs.execute`). A path with a
symbolic link in it, at any depth below the folder the user named, is never deleted or replaced: a link may lead
anywhere (``figures -> ../results``), and what lies behind it is not the command's to delete.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

#: The file in each folder a corekit command made, which may then be deleted or replaced whole by the command.
MARKER = ".corekit-made"


def link_on_path(base: Path, path: Path) -> Path | None:
    """Return the first symbolic link among the components of ``path`` below ``base`` (``path`` itself included), or
    None; ``base`` itself is the user's choice and is not looked at."""
    current = base
    for part in path.relative_to(base).parts:
        current = current / part
        if current.is_symlink():
            return current
    return None


def link_problem(link: Path) -> str:
    """Return the refusal for a symbolic link on the way to a path a command would delete or replace."""
    return (f"{link} is a symbolic link (to {os.readlink(link)}); corekit never deletes or replaces anything through a "
            "link: remove the link or choose another folder")


def below(path: Path) -> Iterator[Path]:
    """Yield ``path`` and, for a folder (not a link to one), everything below it, without following a link."""
    yield path
    folders = [path] if path.is_dir() and not path.is_symlink() else []
    while folders:                                     # a loop, not recursion: a tree of any depth
        try:
            entries = sorted(folders.pop().iterdir())
        except OSError:                                # unreadable: the folder itself was yielded
            continue
        yield from entries
        folders += [entry for entry in reversed(entries) if entry.is_dir() and not entry.is_symlink()]


def listing(folder: Path) -> list[str]:
    """Return everything below ``folder`` but its marker, as sorted paths relative to it (links not followed)."""
    return sorted(path.relative_to(folder).as_posix() for path in below(folder) if not own_file(folder, path))


def own_file(folder: Path, path: Path) -> bool:
    """Return whether ``path`` is ``folder`` itself, its marker or the marker's temporary file."""
    return path == folder or (path.parent == folder and path.name.startswith(MARKER))


def mark(folder: Path, made_by: str) -> None:
    """Write the marker of ``folder``, made by the command ``made_by``: it lists everything now in the folder, which the
    command made, and is written again as the command adds to it."""
    data = {"made_by": made_by, "note": "corekit deletes or replaces this folder only while this file lists all it "
            "holds", "paths": listing(folder)}
    tmp = folder / f"{MARKER}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, folder / MARKER)


def is_marked(folder: Path) -> bool:
    """Return whether ``folder`` is a plain folder holding a marker (a plain file)."""
    marker = folder / MARKER
    return folder.is_dir() and not folder.is_symlink() and marker.is_file() and not marker.is_symlink()


def marked_paths(folder: Path) -> set[str] | None:
    """Return what the marker of ``folder`` lists, None when there is no readable marker."""
    if not is_marked(folder):
        return None
    try:
        paths = json.loads((folder / MARKER).read_text())["paths"]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return {path for path in paths if isinstance(path, str)} if isinstance(paths, list) else None


def folder_problem(base: Path, folder: Path, made_by: str) -> str | None:
    """Return why ``made_by`` may not delete or replace ``folder`` (below ``base``): a link on its way or in it, no
    marker, or something in it the marker does not list; None when it is absent or all its own."""
    link = link_on_path(base, folder)
    if link is not None:
        return link_problem(link)
    if not folder.exists():
        return None
    made = marked_paths(folder)
    if made is None:
        return (f"{folder} exists and was not made by {made_by} (it holds no {MARKER}); corekit deletes or replaces "
                "only what it made: move it away or choose another folder")
    for path in below(folder):
        if path.is_symlink():
            return link_problem(path)
        if not own_file(folder, path) and path.relative_to(folder).as_posix() not in made:
            return (f"{path} was not made by {made_by} (its {folder.name}/{MARKER} does not list it); corekit deletes "
                    "or replaces only what it made: move it away or choose another folder")
    return None


def remove_tree(folder: Path) -> None:
    """Delete ``folder`` and everything in it, never following a symbolic link (a link at the top is refused)."""
    if folder.is_symlink():
        raise OSError(f"{folder} is a symbolic link; corekit never deletes through a link")
    shutil.rmtree(folder)                             # unlinks the links inside, never what they point at


#: The record, in a folder, of the files the tool's runs wrote there through a path parameter (e.g. an export).
WRITTEN = ".corekit-written"
#: What a run writes into a checkpoint folder (``# path; writes: folder``): the trainer's state, a sweep's segments,
#: and the shard folders of a sweep (03) or of a run by seed (02) holding the same.
CHECKPOINT_ENTRIES = re.compile(r"^(last\.pt|last\.tmp|segments\.json|p\d+_b\d+_[0-9a-f]{12}|seed\d+_[0-9a-f]{12})$")


def book_root() -> Path | None:
    """Return the checkout of the book this ``corekit`` was installed from (None for an installed copy)."""
    root = Path(__file__).resolve().parents[3]
    return root if (root / "notebooks").is_dir() and (root / "lib" / "corekit").is_dir() else None


def tracked_folder(root: Path, out: Path) -> str | None:
    """Return the top folder (or file) of the repository ``out`` lies in when git tracks files in it (None otherwise,
    and where git or the repository is missing)."""
    if not out.is_relative_to(root) or out == root:
        return None
    rel = out.relative_to(root)
    top = rel.parts[0]
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--", f"{top}/", rel.as_posix()],
                                capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return top if listed.returncode == 0 and listed.stdout else None


def written_files(folder: Path) -> set[str]:
    """Return the names :func:`record_written` listed in ``folder`` (none without a readable record)."""
    try:
        names = json.loads((folder / WRITTEN).read_text())
    except (OSError, ValueError):
        return set()
    return set(names) if isinstance(names, list) else set()


def record_written(path: Path) -> None:
    """Add the file ``path`` a run just wrote to its folder's record, so that a later run may replace it."""
    folder = path.parent
    names = sorted(written_files(folder) | {path.name})
    tmp = folder / f"{WRITTEN}.tmp"
    tmp.write_text(json.dumps(names))
    os.replace(tmp, folder / WRITTEN)


def path_parameter_problem(path: Path, writes: str, root: Path | None) -> str | None:
    """Return why a run may not write the path parameter ``path`` (``writes``: "file", "folder" or "outputs", the
    notebook's ``output_dir``), None if it may.

    One rule for every path the tool writes: nothing in a ``.git`` folder, through a symbolic link, in a folder or at a
    file of the book's checkout ``root`` that git tracks (``results/`` is written only by ``--publish``); an existing
    file only if a run of the tool wrote it (:func:`record_written`), an existing folder only if it holds nothing but
    what runs write there (:data:`CHECKPOINT_ENTRIES`)."""
    path = Path(os.path.abspath(path))                    # '..' folded, links kept: a link is seen, not followed
    for part in (path, path.parent):
        if part.is_symlink():
            return f"{part} is a symbolic link (the tool writes through none)"
    path = path.resolve()
    if ".git" in path.parts:
        return "inside a .git folder"
    if root is not None and (path == root or tracked_folder(root, path) or path.is_relative_to(root / "results")):
        return "a file or folder of the book's checkout that git tracks (or results/, written only by --publish)"
    if not path.exists() or writes == "outputs":      # an output folder's files: execute's record (``--out``'s rule)
        return None
    if writes == "file":
        if not path.is_file():
            return "not a plain file"
        if path.name not in written_files(path.parent):
            return "an existing file that no run of this tool wrote"
        return None
    if not path.is_dir():
        return "not a folder"
    foreign = []
    for entry in below(path):
        if entry == path:
            continue
        if entry.is_symlink() or not CHECKPOINT_ENTRIES.match(entry.name):
            foreign.append(entry.relative_to(path).as_posix())
            if len(foreign) == 3:                     # enough to name; a large folder is not walked to its end
                break
    if foreign:
        return f"a folder holding what no run of this tool wrote there ({', '.join(foreign)})"
    return None
