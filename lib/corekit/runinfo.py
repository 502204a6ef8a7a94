"""The run record of a metrics file: versions, device, threads, git commit and the model files loaded.

:func:`environment` returns the ``environment`` block that :meth:`corekit.runs.claims.Claims.write` puts
into every ``metrics.json``. Code that loads model weights from a file calls :func:`record_model`
(``corekit.lm.load`` does); the block then lists each file with its size and sha256 (and, for a
model loaded through a converted copy, that copy's folder name and hash), so a published number names
the exact weights that produced it.
"""
from __future__ import annotations

import datetime
import hashlib
import importlib.metadata
import json
import platform
import subprocess
import sys
from pathlib import Path

#: Packages whose versions the record names (None when one is not installed).
PACKAGES = ("torch", "transformers", "numpy")
_HASH_CHUNK = 1 << 22

_models: dict[str, dict] = {}
_digests: dict[tuple[str, int, int], str] = {}


def record_model(name: str, source: str, path: str | Path | None = None, *, converted: dict | None = None) -> None:
    """Note that model ``name`` was loaded from ``source``; ``path`` is its weights file, hashed at write time.

    ``converted`` ({folder, sha256}) names the converted copy the weights were loaded from or saved to:
    the folder's name (no machine path) and :func:`files_sha256` of the {file: sha256} of its files.
    """
    _models[name] = {"name": name, "source": source, "path": None if path is None else str(Path(path).resolve()),
                     "converted": None if converted is None else dict(converted)}


def files_sha256(files: dict[str, str]) -> str:
    """Return the sha256 (hex) of a {file: sha256} mapping serialised with ``json.dumps(files, sort_keys=True)``."""
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def sha256(path: Path) -> str:
    """Return the sha256 (hex) of the file at ``path``, computed once per (path, size, mtime)."""
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _digests:
        digest = hashlib.sha256()
        with path.open("rb") as fh:
            while chunk := fh.read(_HASH_CHUNK):
                digest.update(chunk)
        _digests[key] = digest.hexdigest()
    return _digests[key]


def models() -> list[dict]:
    """Return every recorded model as {name, source, file, bytes, sha256[, converted]} (file fields None without a file)."""
    records = []
    for entry in _models.values():
        path = Path(entry["path"]) if entry["path"] else None
        present = path is not None and path.is_file()
        records.append({"name": entry["name"], "source": entry["source"], "file": path.name if path else None,
                        "bytes": path.stat().st_size if present else None,
                        "sha256": sha256(path) if present else None,
                        **({"converted": dict(entry["converted"])} if entry["converted"] else {})})
    return records


def version(package: str) -> str | None:
    """Return the installed version of ``package`` (None when it is not installed)."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def cpu_name() -> str:
    """Return the processor's model name (from /proc/cpuinfo where there is one)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def device_name() -> str:
    """Return the GPU's name when this process used CUDA, else the CPU's."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return torch.cuda.get_device_name(torch.cuda.current_device())
    return cpu_name()


def threads() -> int | None:
    """Return torch's intra-op CPU thread count in this process (None when torch is not installed)."""
    try:
        import torch
    except ImportError:
        return None
    return torch.get_num_threads()


def git_state(folder: Path | None = None) -> dict:
    """Return {commit, dirty} of the git checkout holding ``folder`` (the working directory); None outside git."""
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit.strip(), "dirty": None if status is None else bool(status.strip())}


def environment(folder: Path | None = None) -> dict:
    """Return the run record: date, python and package versions, device, threads, git state, model files."""
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        **{package: version(package) for package in PACKAGES},
        "platform": platform.platform(terse=True),
        "device": device_name(),
        "threads": threads(),
        **git_state(folder),
        "models": models(),
    }
