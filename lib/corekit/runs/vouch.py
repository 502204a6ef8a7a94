"""Vouching for a run before the book shows it: its metrics file against the run's own record of its claims.

A chapter's verdict box, its claims table, the results page and the front page's tally are all drawn from a run's
metrics file. That file is plain JSON that anyone can edit, so ``corekit book --published`` does not take it on
trust; it refuses, one line naming the file, a run whose metrics

- hold a field of the wrong type (:func:`field_problems`: ``runtime_s`` a number of seconds, ``environment`` an
  object, each claim's ``target`` and ``reason`` text, ...);
- carry claims whose verdict and ``pass`` disagree;
- do not match their digests (:data:`CLAIMS_DIGEST`, :data:`TABLE_DIGEST`), which ``--publish`` writes: the sha256
  of the claims as published and of the claims table the executed notebook displayed;
- differ from that table (:func:`table_problem`): the same claim ids in the same order with the same verdicts, and
  for a run published before the digests (which has none), the same measured values (to the precision the table
  shows them) and the same targets and reasons.

The executed notebook's table is the output of its cell ending ``claims.table()``
(:class:`corekit.runs.claims.ClaimsTable`, a Markdown table), written by the kernel that computed the claims.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

from corekit.runs.claims import VERDICT_STYLE, verdict_of

#: The metrics-file key of the sha256 of the run's claims as published (:func:`claims_digest`).
CLAIMS_DIGEST = "claims_sha256"
#: ... and of the claims table its executed notebook displayed (None when it displayed none).
TABLE_DIGEST = "claims_table_sha256"
#: Each verdict by the label a claims table shows for it ("FAIL" for fail).
VERDICT_OF_LABEL = {label: verdict for verdict, (label, _) in VERDICT_STYLE.items()}
#: How many differences a refusal names before "and N more".
SHOWN = 3


# --------------------------------------------------------------------------------------------
# Field types


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _text(value: object) -> bool:
    return isinstance(value, str)


def _flag(value: object) -> bool:
    return isinstance(value, bool)


def _seconds(value: object) -> bool:
    return _number(value) and math.isfinite(value) and value >= 0


def _object(value: object) -> bool:
    return isinstance(value, dict)


def _list(value: object) -> bool:
    return isinstance(value, list)


#: What each checked field must be: (test, words for the reader). None is accepted wherever a field is optional.
KINDS = {"number": (_number, "a number"), "seconds": (_seconds, "a number of seconds (finite, not negative)"),
         "count": (_count, "a whole number, not negative"), "text": (_text, "text (a JSON string)"),
         "flag": (_flag, "true or false"), "object": (_object, "an object ({...})"), "list": (_list, "a list ([...])")}
#: The top-level fields of a metrics file, by kind (each claim's fields: :data:`CLAIM`).
TOP = {"notebook": "text", "profile": "text", "source_hash": "text", "runtime_s": "seconds", "threads": "count",
       "parameters": "object", "environment": "object", "figures": "list", "exports": "object", "claims": "list",
       CLAIMS_DIGEST: "text", TABLE_DIGEST: "text"}
#: The fields of ``environment`` (:func:`corekit.runinfo.environment`) the book reads or shows.
ENVIRONMENT = {"commit": "text", "dirty": "flag", "date": "text", "device": "text", "threads": "count",
               "torch": "text", "python": "text", "numpy": "text", "transformers": "text", "platform": "text",
               "models": "list"}
#: The fields of a claim (:meth:`corekit.verdicts.Claim.as_dict`) whose type the pages rely on.
CLAIM = {"id": "text", "target": "text", "verdict": "text", "reason": "text", "why": "text", "no_null": "text",
         "null": "list", "models": "object", "interval": "list"}
#: The fields of a claim's ``models`` record.
MODELS = {"k": "count", "n": "count", "failing": "list", "wilson95": "list", "covers": "text"}


def _shown(value: object) -> str:
    """Return ``value`` shortened for a message: its JSON type and a few characters of it."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return f"{type(value).__name__} {text[:40] + '…' if len(text) > 40 else text}"


def _typed(record: dict, kinds: dict[str, str], where: str) -> list[str]:
    """Return "'where.field' must be KIND, got TYPE VALUE" for each field of ``record`` not of its kind."""
    problems = []
    for key, kind in kinds.items():
        value = record.get(key)
        test, words = KINDS[kind]
        if value is not None and not test(value):
            problems.append(f"'{where}{key}' must be {words}, got the {_shown(value)}")
    return problems


def field_problems(metrics: dict) -> list[str]:
    """Return what is of the wrong type in a metrics file (a JSON object), one phrase per field: top-level fields,
    ``environment``'s, each export's ``sha256`` and each claim's fields (its nulls, its models record)."""
    problems = _typed(metrics, TOP, "")
    if _object(metrics.get("environment")):
        problems += _typed(metrics["environment"], ENVIRONMENT, "environment.")
    if _list(metrics.get("figures")):
        problems += [f"'figures' must be a list of file names, got the {_shown(name)} in it"
                     for name in metrics["figures"] if not _text(name)][:1]
    for name, export in (metrics.get("exports") or {}).items() if _object(metrics.get("exports")) else ():
        if not _object(export):
            problems.append(f"'exports.{name}' must be {KINDS['object'][1]}, got the {_shown(export)}")
        else:
            problems += _typed(export, {"file": "text", "sha256": "text"}, f"exports.{name}.")
    for i, claim in enumerate(metrics.get("claims") or [] if _list(metrics.get("claims")) else []):
        where = f"claims[{i}]."
        if not _object(claim):
            problems.append(f"'claims[{i}]' must be {KINDS['object'][1]}, got the {_shown(claim)}")
            continue
        problems += _typed(claim, CLAIM, where)
        if "pass" in claim and claim["pass"] is not None and not _flag(claim["pass"]):
            problems.append(f"'{where}pass' must be true, false or null, got the {_shown(claim['pass'])}")
        for j, null in enumerate(claim["null"] if _list(claim.get("null")) else []):
            if not _object(null) or not _text(null.get("what")):
                problems.append(f"'{where}null[{j}]' must be an object with a 'what' text, got the {_shown(null)}")
        if _object(claim.get("models")):
            problems += _typed(claim["models"], MODELS, where + "models.")
        interval = claim.get("interval")
        if _list(interval) and not (len(interval) == 2 and all(v is None or _number(v) for v in interval)):
            problems.append(f"'{where}interval' must be two numbers [low, high], got the {_shown(interval)}")
    return problems


def verdict_problems(metrics: dict) -> list[str]:
    """Return "claim 'x' has the verdict V but pass: P" for each claim whose two records of its verdict disagree (a
    hand edit that changed one of them)."""
    problems = []
    for claim in metrics.get("claims") or []:
        if "verdict" in claim and "pass" in claim:
            expected = {"pass": True, "fail": False}.get(claim["verdict"])
            if claim["pass"] is not expected:
                problems.append(f"claim {claim['id']!r} has the verdict {claim['verdict']!r} but pass: "
                                f"{json.dumps(claim['pass'])}")
    return problems


# --------------------------------------------------------------------------------------------
# Digests and the executed notebook's claims table


def claims_digest(claims: list) -> str:
    """Return the sha256 of ``claims`` (metrics-file records) as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(claims, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def table_digest(table: str | None) -> str | None:
    """Return the sha256 of a claims table's text, None without a table."""
    return None if table is None else hashlib.sha256(table.encode()).hexdigest()


def notebook_claims_table(ipynb: Path) -> str | None:
    """Return the Markdown claims table the executed notebook ``ipynb`` displayed (the last output of its last cell
    ending ``claims.table()``), None when it displayed none."""
    notebook = json.loads(ipynb.read_text(encoding="utf-8"))
    found = None
    for cell in notebook.get("cells") or []:
        source = cell.get("source")
        source = "".join(source) if isinstance(source, list) else str(source or "")
        if cell.get("cell_type") != "code" or not source.rstrip().endswith("claims.table()"):
            continue
        for output in cell.get("outputs") or []:
            text = (output.get("data") or {}).get("text/markdown") if isinstance(output, dict) else None
            if output.get("output_type") in ("execute_result", "display_data") and text:
                found = "".join(text) if isinstance(text, list) else str(text)
    return found


#: A cell boundary of a Markdown table row: a pipe no backslash escapes.
PIPE = re.compile(r"(?<!\\)\|")


def table_rows(table: str) -> list[dict[str, str]]:
    """Return the rows of a Markdown table as {column heading: cell text} (escaped pipes unescaped)."""
    lines = [line.strip() for line in table.splitlines() if line.strip().startswith("|")]
    if len(lines) < 2:
        return []

    def cells(line: str) -> list[str]:
        parts = PIPE.split(line)
        return [part.strip().replace("\\|", "|") for part in parts[1:-1 if line.endswith("|") else None]]

    head = cells(lines[0])
    return [dict(zip(head, cells(line))) for line in lines[2:]]


#: A number as a claims table writes it (``0.7492``, ``-3``, ``1.235e+04``).
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def _numbers_in(text: str) -> list[float]:
    return [float(token) for token in NUMBER.findall(text)]


def numbers(value: object) -> list[float]:
    """Return the numbers a rendering of ``value`` shows, in order: dict keys and string contents included."""
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, (int, float)):
        return [float(value)] if math.isfinite(value) else []
    if isinstance(value, str):
        return _numbers_in(value)
    if isinstance(value, dict):
        return [x for key, item in value.items() for x in _numbers_in(str(key)) + numbers(item)]
    if isinstance(value, (list, tuple)):
        return [x for item in value for x in numbers(item)]
    return _numbers_in(str(value))


#: Significant digits a claims table writes a float with (:func:`corekit.verdicts.format_value`, trailing zeros
#: dropped: ``1.0`` is written ``1``).
DIGITS = 4


def _half_unit(token: str) -> float:
    """Return how far from the number written as ``token`` its value may be: half a unit in the last place it
    writes (``0.7492`` → 0.00005, ``1.2e+04`` → 500) or in its :data:`DIGITS`-th significant digit, whichever is
    smaller (``1`` may be 1.0004, not 1.4)."""
    mantissa, _, exponent = token.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    written = 0.5 * 10.0 ** (int(exponent or 0) - decimals)
    value = abs(float(token))
    if value == 0:
        return 0.0
    return min(written, 0.5 * 10.0 ** (math.floor(math.log10(value)) - (DIGITS - 1)))


def same_numbers(shown: str, value: object) -> bool:
    """Return whether the table cell ``shown`` writes the numbers of ``value``, each rounded as the cell shows it."""
    tokens, exact = NUMBER.findall(shown), numbers(value)
    if len(tokens) != len(exact):
        return False
    return all(abs(float(t) - x) <= _half_unit(t) * 1.001 + 1e-12 * abs(x) for t, x in zip(tokens, exact))


def _plain(text: str) -> str:
    return " ".join(str(text).split())


def _named(items: list[str]) -> str:
    shown = ", ".join(items[:SHOWN])
    return shown + (f" and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def table_differences(claims: list[dict], table: str, values: bool) -> list[str]:
    """Return how ``claims`` (a metrics file's) differ from the claims ``table`` of the executed notebook: ids missing
    on either side, order, verdicts and, with ``values``, measured values, targets and reasons."""
    rows = table_rows(table)
    if rows and not {"claim", "verdict"} <= set(rows[0]):
        return ["the notebook's claims table has no 'claim' and 'verdict' columns"]
    shown = {row.get("claim", "").strip("`"): row for row in rows}
    ids = [claim["id"] for claim in claims]
    differences = []
    lacking = [i for i in shown if i not in ids]
    extra = [i for i in ids if i not in shown]
    if lacking:
        differences.append(f"the file lacks {_named(lacking)} ({len(ids)} claims here, {len(shown)} in the table)")
    if extra:
        differences.append(f"the table lacks {_named(extra)}")
    common = [i for i in ids if i in shown]
    if not lacking and not extra and common != list(shown):
        differences.append("the claims come in another order")
    verdicts, measured, targets = [], [], []
    for claim in claims:
        row = shown.get(claim["id"])
        if row is None:
            continue
        label = VERDICT_STYLE[verdict_of(claim)][0]
        if row.get("verdict") != label:
            verdicts.append(f"{claim['id']} ({label} here, {row.get('verdict')} in the table)")
        if values and "measured" in row and not same_numbers(row["measured"], claim.get("measured")):
            measured.append(claim["id"])
        if values and "target" in row:
            target = (claim.get("target") or "") + (f" ({claim['reason']})" if claim.get("reason") else "")
            if _plain(target) != _plain(row["target"]):
                targets.append(claim["id"])
    if verdicts:
        differences.append(f"other verdicts: {_named(verdicts)}")
    if measured:
        differences.append(f"other measured values: {_named(measured)}")
    if targets:
        differences.append(f"other targets or reasons: {_named(targets)}")
    return differences


def table_problem(name: str, metrics_path: Path, ipynb: Path, metrics: dict, published: bool = True) -> str | None:
    """Return the one line that refuses the run of ``name`` whose ``metrics`` (read from ``metrics_path``) do not
    match their digests or the claims table its executed notebook ``ipynb`` displayed, or None when they match. The
    measured values, targets and reasons are compared only for a ``published`` run without digests (its table was
    written by the code of its time, which the digests do not vouch for); ids and verdicts always. A run that is not
    ``published`` (one just executed, which ``--publish`` is about to sign with its digests) may display no table."""
    claims = metrics.get("claims") or []
    digest, table = metrics.get(CLAIMS_DIGEST), notebook_claims_table(ipynb)
    profile = metrics.get("profile") if metrics.get("profile") in ("cpu", "paper") else None
    command = f"corekit run {name}" + (f" --profile {profile}" if profile else "") + " --publish"
    again = f"edited after the run? publish the run again ({command})"
    if digest is not None and digest != claims_digest(claims):
        return f"{metrics_path}: its claims do not match their digest ({CLAIMS_DIGEST}); {again}"
    if TABLE_DIGEST in metrics and metrics[TABLE_DIGEST] != table_digest(table):
        return (f"{ipynb}: its claims table is not the one published with it ({TABLE_DIGEST} in "
                f"{metrics_path.name}); {again}")
    if table is None:
        if published and digest is None and claims:
            return (f"{metrics_path}: no digest of its claims ({CLAIMS_DIGEST}) and {ipynb.name} displays no claims "
                    f"table to check them against; publish the run again ({command})")
        return None
    differences = table_differences(claims, table, values=published and digest is None)
    if differences:
        return (f"{metrics_path}: its claims do not match the claims table of {ipynb.name} "
                f"({'; '.join(differences)}); {again}")
    return None
