"""The authors' numbers on shared weights and settings, as ``scripts/oracle/`` writes them (``results/oracle/NN.json``)."""
from __future__ import annotations

import json
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
