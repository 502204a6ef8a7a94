"""What a notebook parameter accepts: the check ``corekit run`` applies before starting a kernel and the notebook
repeats in its first cell (:class:`corekit.runs.claims.Claims`), failing with one :class:`ParameterError` line.

The type comes from the parameter's default in the notebook's ``parameters`` cell: an integer
accepts integers, a float any finite number, a string strings, a bool true / false, a list a list
whose items have the type of the default's items (``[0, 1]`` accepts only integers), a dict a
mapping; ``None`` or a default that is not a literal accepts anything. The trailing comment can
narrow it with clauses separated by ``;`` (any other clause is help text)::

    epochs = 8                # range: [1, inf)
    dropout = 0.1             # range: [0, 1)
    lr = 1e-3                 # range: (0, inf)
    betas = [0.9, 0.98]       # length: 2; range: [0, 1)
    seeds = [0, 1]            # length: 2 or more; range: [0, inf); distinct models to compare
    layers = 2                # range: [1, inf) or null
    norm = "pre"              # one of: pre, post, none
    checkpoint_dir = ""       # path; empty: no checkpoints
    p = 29                    # range: [3, inf); a prime
    moduli = [31, 37]         # length: 1 or more; primes

``range`` is an interval (``[a, b]``, ``(a, b)``, ``[a, b)``, ``(a, b]``; ``inf`` for no bound) that
bounds a number or every number in a (nested) list; ``or null`` also accepts ``null``. ``length``
fixes (``N``) or bounds (``N or more``) a list's length. ``one of`` lists the accepted strings.
``path`` marks a file-system path, which :func:`check` makes absolute against the caller's folder.
``a prime`` / ``primes`` ask for primes; every integer must fit 64 bits, and the parameter ``device``
must name a device of this machine (:func:`check_parameter`).
The clauses hold no ``=``: papermill reads a line with a second ``=`` as no parameter.
"""
from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from corekit.inputs import INT64_MAX, ParameterError, show  # noqa: F401  (ParameterError: the machinery names it here)
from corekit.primes import is_prime, nearest_primes

NUMBER = r"[-+]?(?:inf|\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)"
INTERVAL = re.compile(rf"([\[(])\s*({NUMBER})\s*,\s*({NUMBER})\s*([\])])")
LENGTH = re.compile(r"(\d+)( or more)?")
#: The parameter naming the folder a notebook writes its metrics file and figures into ("" : nowhere, the executed
#: notebook holds them); ``corekit run`` sets it to its private run folder, so a run may not.
OUTPUT_DIR = "output_dir"
#: The parameter a notebook reads its torch device from ("auto", "cpu", "cuda", "cuda:N").
DEVICE_PARAMETER = "device"
#: Comment clauses of a parameter that must be a prime (an integer) or primes (a list of integers).
PRIME_CLAUSES = {"a prime", "primes"}
KIND_NAMES = {bool: ("true or false", "bools"), int: ("an integer", "integers"), float: ("a number", "numbers"),
              str: ("a string", "strings"), dict: ("a mapping", "mappings")}


class DeclarationError(ValueError):
    """A parameters-cell comment whose clauses cannot be read."""


@dataclass(frozen=True)
class Range:
    """Bounds on a number: ``low`` / ``high`` (None: unbounded) and whether each is included."""

    low: float | None = None
    high: float | None = None
    low_closed: bool = True
    high_closed: bool = True

    def holds(self, x: float) -> bool:
        """Return whether ``x`` lies in the range."""
        above = self.low is None or (x >= self.low if self.low_closed else x > self.low)
        below = self.high is None or (x <= self.high if self.high_closed else x < self.high)
        return above and below

    def __str__(self) -> str:
        if self.low is not None and self.high is not None:
            return f"in {'[' if self.low_closed else '('}{_num(self.low)}, {_num(self.high)}{']' if self.high_closed else ')'}"
        if self.low is not None:
            return f"{'>=' if self.low_closed else '>'} {_num(self.low)}"
        return f"{'<=' if self.high_closed else '<'} {_num(self.high)}"


@dataclass(frozen=True)
class Kind:
    """A value's type: ``base`` (bool, int, float, str, dict, list or None = anything) and, for a list, its items."""

    base: type | None
    item: Kind | None = None

    def describe(self, plural: bool = False) -> str:
        """Return the kind in words ("an integer", "a list of lists of numbers")."""
        if self.base is list:
            inner = f" of {self.item.describe(plural=True)}" if self.item and self.item.base else ""
            return ("lists" if plural else "a list") + inner
        if self.base is None:
            return "values" if plural else "any value"
        return KIND_NAMES[self.base][plural]


@dataclass(frozen=True)
class Accepts:
    """What one parameter accepts: its kind, optional range, list length, choices, null and path flags."""

    kind: Kind
    range: Range | None = None
    length: tuple[int, bool] | None = None     # (n, exact?)
    choices: tuple[str, ...] = ()
    nullable: bool = False
    path: bool = False
    writes: str = ""                            # "file" or "folder": a path the run writes (runs.owned's rule)

    def describe(self) -> str:
        """Return what the parameter accepts, in words."""
        if self.choices:
            text = "one of " + ", ".join(self.choices)
        elif self.kind.base is list:
            n, exact = self.length or (None, True)
            count = "" if n is None else (f"{n} " if exact else f"at least {n} ")
            inner = self.kind.item.describe(plural=True) if self.kind.item and self.kind.item.base else "values"
            text = f"a list of {count}{inner}"
            if self.range:
                text += f" {self.range}"
        else:
            text = self.kind.describe() + (f" {self.range}" if self.range else "")
        if self.path:
            text += " (a path)"
        return text + (" or null" if self.nullable else "")


def _num(x: float) -> str:
    """Return a bound as written (1 not 1.0)."""
    return str(int(x)) if x == int(x) else repr(x)


def kind_of(value: Any) -> Kind:
    """Return the kind a default value declares (lists: the common kind of their items)."""
    if value is None:
        return Kind(None)
    if isinstance(value, list):
        kinds = {kind_of(v) for v in value}
        if kinds == {Kind(int), Kind(float)}:
            kinds = {Kind(float)}
        return Kind(list, kinds.pop() if len(kinds) == 1 else None)
    base = type(value)
    return Kind(base if base in KIND_NAMES else None)


def parse_range(text: str) -> tuple[Range, bool]:
    """Return the range a ``range:`` clause declares and whether it ends in ``or null``."""
    nullable = text.endswith(" or null")
    text = text.removesuffix(" or null").strip()
    m = INTERVAL.fullmatch(text)
    if not m:
        raise DeclarationError(f"cannot read 'range: {text}' (write an interval: [a, b], (a, b), [a, b) or (a, b], "
                               "with inf for no bound)")
    low, high = float(m.group(2)), float(m.group(3))
    return Range(None if math.isinf(low) else low, None if math.isinf(high) else high,
                 m.group(1) == "[", m.group(4) == "]"), nullable


def accepts(default_source: str, comment: str) -> Accepts:
    """Return what a parameter accepts, from its default (source text) and its trailing comment."""
    try:
        default = ast.literal_eval(default_source)
    except (ValueError, SyntaxError):
        default = None                         # an expression: no type to check against
    found: dict[str, Any] = {"kind": kind_of(default)}
    for clause in (c.strip() for c in comment.split(";")):
        key, _, value = clause.partition(":")
        key, value = key.strip(), value.strip()
        if clause == "path":
            found["path"] = True
        elif key == "range":
            found["range"], found["nullable"] = parse_range(value)
        elif key == "length":
            m = LENGTH.fullmatch(value)
            if not m:
                raise DeclarationError(f"cannot read 'length: {value}' (write N or N or more)")
            found["length"] = (int(m.group(1)), m.group(2) is None)
        elif key == "writes":
            if value not in ("file", "folder"):
                raise DeclarationError(f"cannot read 'writes: {value}' (write writes: file or writes: folder)")
            found["writes"] = value
        elif key == "one of":
            found["choices"] = tuple(v.strip() for v in value.split(","))
    return Accepts(**found)


def _problem(value: Any, kind: Kind, rule: Accepts) -> str | None:
    """Return why ``value`` is not of ``kind`` within the rule's range (None when it is)."""
    if kind.base is None:
        return None
    if kind.base is list:
        if not isinstance(value, list):
            return "not a list"
        if kind.item is None:
            return None
        for item in value:
            problem = _problem(item, kind.item, rule)
            if problem:
                return problem if kind.item.base is list and isinstance(item, list) else f"{show(item)} is {problem}"
        return None
    if kind.base in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"not {kind.describe()}"
        if kind.base is int and not isinstance(value, int):
            return "not an integer"
        if not math.isfinite(value):
            return "not a finite number"
        if rule.range is not None and not rule.range.holds(value):
            return "out of range"
        return None
    if not isinstance(value, kind.base) or (kind.base is not bool and isinstance(value, bool)):
        return f"not {kind.describe()}"
    return None


def check(value: Any, rule: Accepts, cwd: Path) -> Any:
    """Return ``value`` as the notebook receives it (a path made absolute); raise ValueError saying why it is not accepted."""
    if value is None and (rule.nullable or rule.kind.base is None):
        return value
    problem = _problem(value, rule.kind, rule)
    if problem is None and rule.length is not None and isinstance(value, list):
        n, exact = rule.length
        if (len(value) != n) if exact else (len(value) < n):
            problem = f"{len(value)} item{'s' if len(value) != 1 else ''}"
    if problem is None and rule.choices and value not in rule.choices:
        problem = "not one of them"
    if problem:
        raise ValueError(f"expected {rule.describe()}, got {show(value)} ({problem})")
    if rule.path and isinstance(value, str) and value:
        return str((cwd / expand_user(value)).resolve())
    return value


def expand_user(text: str) -> Path:
    """Return ``text`` as a path with a leading ``~`` or ``~user`` expanded; raise ValueError when it names no user here."""
    try:
        return Path(text).expanduser()
    except RuntimeError:                       # pathlib: "Could not determine home directory."
        raise ValueError(f"cannot expand {text.split('/', 1)[0]!r}: no such user on this machine") from None


def check_parameter(name: str, comment: str, rule: Accepts, value: Any, cwd: Path) -> Any:
    """Return ``value`` as :func:`check` passes it, also checked within 64 bits, a device here and prime where declared."""
    given = value
    value = check(value, rule, cwd)
    if rule.writes and isinstance(value, str) and value:
        from corekit.runs import owned
        problem = owned.path_parameter_problem(cwd / expand_user(given), rule.writes, owned.book_root())
        if problem:
            raise ValueError(f"expected a path this run may write a {rule.writes} at, got {show(value)} ({problem})")
    check_int64(value)
    if name == DEVICE_PARAMETER:
        check_device(value)
    clauses = {clause.strip() for clause in comment.split(";")}
    if clauses & PRIME_CLAUSES:
        check_primes(value)
    return value


def integers(value: Any) -> Iterator[int]:
    """Yield every integer in ``value``, inside lists and mappings too (bools are no integers here)."""
    if isinstance(value, (list, dict)):
        for item in value.values() if isinstance(value, dict) else value:
            yield from integers(item)
    elif isinstance(value, int) and not isinstance(value, bool):
        yield value


def check_int64(value: Any) -> None:
    """Raise ValueError if an integer in ``value`` lies beyond 2**63-1 (torch's and numpy's integers)."""
    huge = next((n for n in integers(value) if abs(n) > INT64_MAX), None)
    if huge is not None:
        raise ValueError(f"{huge} is beyond 2**63-1, the largest integer torch and numpy take")


def accepted_devices() -> list[str]:
    """Return the devices a notebook can run on here: auto, cpu, then cuda, cuda:N and mps where present."""
    import torch

    devices = ["auto", "cpu"]
    if torch.cuda.is_available():
        devices += ["cuda"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if torch.backends.mps.is_available():
        devices.append("mps")
    return devices


def check_device(value: Any) -> None:
    """Raise ValueError unless ``value`` names a device of this machine (auto and cpu without importing torch)."""
    if value in ("auto", "cpu"):
        return
    devices = accepted_devices()
    if value not in devices:
        raise ValueError(f"expected a device of this machine, one of {', '.join(devices)}, got {show(value)}")


def check_primes(value: Any) -> None:
    """Raise ValueError if an integer in ``value`` is not a prime, naming the nearest primes."""
    composite = next((n for n in integers(value) if not is_prime(n)), None)
    if composite is not None:
        raise ValueError(f"expected {'primes' if isinstance(value, list) else 'a prime'}, got {show(value)} "
                         f"({composite} is not a prime; nearest primes: {nearest_primes(composite)})")
