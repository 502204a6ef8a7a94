"""Compare the claims of two runs' metrics files: every verdict, measured value, interval and null, claim by claim.

    .venv/bin/python scripts/compare-runs.py BEFORE.metrics.json AFTER.metrics.json [--rel 1e-12]

Prints one line per difference (a value that moved by more than ``--rel`` relative, a verdict, a claim only one run
has) and a summary line; exits 1 when a verdict differs or a claim is missing, 0 otherwise. What a refactor that
must not change results is checked with (values equal, or moved in their last bits with every verdict equal).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path


def _walk(value, path: str):
    """Yield (path, leaf) for every number, string, bool or None inside ``value``."""
    if isinstance(value, dict):
        for k in sorted(value):
            yield from _walk(value[k], f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _walk(v, f"{path}[{i}]")
    else:
        yield path, value


def _differs(a, b, rel: float) -> bool:
    """Return whether leaves a and b differ beyond ``rel`` (numbers) or at all (anything else)."""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        if math.isnan(a) and math.isnan(b):
            return False
        return abs(a - b) > rel * max(abs(a), abs(b), 1e-300)
    return a != b


def compare(before: dict, after: dict, rel: float) -> tuple[list[str], bool]:
    """Return the difference lines and whether any verdict differs or a claim is missing from one run."""
    old, new = ({c["id"]: c for c in m["claims"]} for m in (before, after))
    lines, broken = [], False
    for cid in sorted(set(old) | set(new)):
        if cid not in old or cid not in new:
            lines.append(f"{cid}: only in the {'after' if cid in new else 'before'} run")
            broken = True
            continue
        if old[cid].get("verdict") != new[cid].get("verdict"):
            lines.append(f"{cid}: verdict {old[cid].get('verdict')} -> {new[cid].get('verdict')}")
            broken = True
        leaves_old, leaves_new = dict(_walk(old[cid], "")), dict(_walk(new[cid], ""))
        for key in sorted(set(leaves_old) | set(leaves_new)):
            if key in (".verdict", ".reason", ".target"):
                continue
            a, b = leaves_old.get(key, "(absent)"), leaves_new.get(key, "(absent)")
            if _differs(a, b, rel):
                lines.append(f"{cid}{key}: {a!r} -> {b!r}")
    return lines, broken


def main(argv: list[str] | None = None) -> int:
    """Return 1 when the runs' verdicts differ or a claim is missing, after printing every difference."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--rel", type=float, default=1e-12, help="relative change below which two numbers are equal")
    args = ap.parse_args(argv)
    before, after = (json.loads(p.read_text()) for p in (args.before, args.after))
    lines, broken = compare(before, after, args.rel)
    print("\n".join(lines))
    n = len(before["claims"])
    print(f"{before.get('notebook')}: {n} claims before, {len(after['claims'])} after; "
          f"{'verdicts differ' if broken else 'every verdict equal'}; {len(lines)} difference(s)")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
