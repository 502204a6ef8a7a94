"""Finished shards of a long run, kept as small JSON records that a later run re-reads instead of retraining.

A long training run (a sweep of many models, a chapter at its paper profile) is cut into shards that each finish
well inside one sitting. A shard's record holds what the analysis needs of it (never its weights), the key of
everything that shaped it, and where and how long it ran. :func:`read` returns a record only for the same key, so a
shard of another setting is never taken for this one; :func:`write` never replaces a record of another key.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from corekit import runinfo

#: The version of the record format; a record of another version is not read.
FORMAT = 1
_NAME = re.compile(r"^[A-Za-z0-9_.=-]+$")


def path_of(folder: str | os.PathLike, name: str) -> Path:
    """Return the file of the record ``name`` in ``folder`` (a name of letters, digits and ``_.=-`` only)."""
    if not _NAME.match(name):
        raise ValueError(f"a shard record's name is letters, digits and _.=- only, got {name!r}")
    return Path(folder).expanduser().resolve() / f"{name}.json"


def read(folder: str | os.PathLike | None, name: str, key: str) -> dict | None:
    """Return the record ``name`` in ``folder`` if it was written for ``key`` (None: absent, another key or format)."""
    if folder is None:
        return None
    path = path_of(folder, name)
    if not path.is_file() or path.is_symlink():
        return None
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("format") != FORMAT or record.get("key") != key:
        return None
    return record


def write(folder: str | os.PathLike, name: str, key: str, data: dict[str, Any], runtime_s: float,
          segments: int = 1) -> Path:
    """Return the path of the record written for shard ``name``: ``data`` with its key, runtime and run record.

    ``runtime_s`` is the shard's training time summed over its ``segments`` (more than one when it resumed from
    a checkpoint). Refuses, naming the file, to replace a record of another key or a link.
    """
    path = path_of(folder, name)
    if path.is_symlink():
        raise FileExistsError(f"{path} is a link; a shard record is written only as a plain file")
    if path.exists():
        try:
            old = json.loads(path.read_text())
        except ValueError:
            old = None
        if not isinstance(old, dict) or old.get("key") != key:
            raise FileExistsError(f"{path} exists and is not this shard's record (key {key}); remove it first")
    env = runinfo.environment()
    record = {"format": FORMAT, "name": name, "key": key, "runtime_s": round(float(runtime_s), 1),
              "segments": int(segments), "run": {k: env.get(k) for k in ("date", "torch", "platform", "device",
                                                                          "threads", "commit", "dirty")},
              "cpu": runinfo.cpu_name(), **data}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return path


def add_segment(folder: Path | None, seconds: float, last_step: int) -> list[dict]:
    """Return a shard's training segments so far (one per call that trained it), this one appended and kept in
    ``folder``'s ``segments.json`` (a call that only re-read a finished checkpoint adds none)."""
    if folder is None:
        return [{"seconds": seconds, "to_step": last_step}]
    path = folder / "segments.json"
    try:
        segments = json.loads(path.read_text()) if path.is_file() else []
    except ValueError:
        segments = []
    if not segments or segments[-1]["to_step"] != last_step or seconds > 5.0:
        segments.append({"seconds": round(seconds, 1), "to_step": last_step})
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(segments))
    return segments
