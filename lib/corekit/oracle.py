"""The authors' numbers on shared weights and settings, as ``scripts/oracle/`` writes them (``results/oracle/NN.json``)."""
from __future__ import annotations

import json
import os
from pathlib import Path

#: Where the oracle records live: results/oracle/ of the checkout that holds this package.
ORACLE_DIR = Path(__file__).resolve().parents[2] / "results" / "oracle"


def load(chapter: str, folder: str | Path | None = None) -> dict | None:
    """Return the oracle record of ``chapter`` (e.g. "06"), or None when no one has run the oracle script for it."""
    path = Path(folder or ORACLE_DIR) / f"{chapter}.json"
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not valid JSON ({err}); rerun its scripts/oracle script") from None
    if not isinstance(record, dict) or "seeds" not in record:
        raise ValueError(f"{path} is not an oracle record (no 'seeds'); rerun its scripts/oracle script")
    return record


#: How a record names the clone of the authors' repository (its place is the user's machine's business).
AUTHORS_CLONE = "<authors' clone>"


def command_line(script: str, argv: list[str]) -> str:
    """Return the command that made a record, with no machine's paths: ``--authors-repo`` as :data:`AUTHORS_CLONE`,
    the script and every path inside the repository relative to its root, any other absolute path by its name."""
    root = ORACLE_DIR.parents[1]
    words, hide = [], False
    for word in [script, *argv]:
        if hide:
            words.append(AUTHORS_CLONE)
        elif word.startswith("--authors-repo="):
            words.append(f"--authors-repo={AUTHORS_CLONE}")
        else:
            path = Path(word)
            if os.sep in word and (path.is_absolute() or path.exists()):
                path = path.resolve()
                words.append(path.relative_to(root).as_posix() if path.is_relative_to(root) else f"<{path.name}>")
            else:
                words.append(word)
        hide = word == "--authors-repo"
    return "python " + " ".join(words)
