"""``python -m corekit.report [--check]``: write ``results/statements.json`` from the published runs' metrics (with
``--check``: exit 1, writing nothing, when the file differs from what the metrics give)."""
from __future__ import annotations

import sys
from pathlib import Path

from corekit.report.pages import statements_json
from corekit.runs.notebooks import find_root, toc_notebooks
from corekit.runs.publish import RESULTS, published_runs, readings_of

#: The machine-readable statements table of the published edition, under the book's root.
STATEMENTS_FILE = f"{RESULTS}/statements.json"


def published_statements(root: Path) -> str:
    """Return ``statements.json`` as the published runs in ``root/results`` give it."""
    runs = published_runs(root, toc_notebooks(root), None)
    return statements_json(readings_of(root, runs))


def main(argv: list[str]) -> int:
    """Write (or with ``--check``, compare) ``results/statements.json``; return the exit status."""
    root = find_root(Path.cwd())
    path, text = root / STATEMENTS_FILE, published_statements(root)
    if "--check" in argv:
        if not path.is_file() or path.read_text() != text:
            print(f"{STATEMENTS_FILE} is not what the published metrics give: run python -m corekit.report",
                  file=sys.stderr)
            return 1
        return 0
    path.write_text(text)
    print(f"wrote {STATEMENTS_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
