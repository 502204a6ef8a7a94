"""Headline figures of a notebook: paper value, measured value, target and verdict.

A notebook creates one :class:`Claims` in its first cell after the parameters, which checks every parameter
against what the parameters cell declares and stops the run with one line when a value cannot be right. It
adds every headline figure it measures, shows the table at the end of the page and, when the notebook's
``output_dir`` parameter names a folder, writes ``OUTPUT_DIR/NAME.metrics.json``::

    {"notebook", "parameters", "runtime_s", "threads",
     "claims": [{"id", "paper", "measured", "target", "pass"} (+ "authors", "why")], "environment": {...}}

With ``output_dir`` empty (a plain papermill or nbmake run) nothing is written: the executed notebook
holds the table and the figures. ``corekit run`` sets ``output_dir`` to its private run folder.

A claim's ``authors`` is the value the authors' own code gives on the same weights or settings
(``results/oracle/``, :mod:`corekit.oracle`), shown as a column beside ours where a chapter has one.

``threads`` is torch's intra-op thread count when the file is written (None if torch was never
imported): results on a CPU can change in the last bits with it.

``environment`` is the run record of :func:`corekit.book.runinfo.environment` (versions, device, threads,
git commit, model files with their sha256). A failing claim never raises: it is shown as failing,
with the measured value.
"""
from __future__ import annotations

import html
import inspect
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corekit.book import paramspec, runinfo
from corekit.book.parameters import declared


def to_jsonable(value: Any) -> Any:
    """Return ``value`` with numpy / torch scalars and arrays turned into plain Python objects."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, complex):
        return [value.real, value.imag]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _torch_threads() -> int | None:
    """Return torch's intra-op thread count, or None when torch has not been imported."""
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else None


def format_value(value: Any) -> str:
    """Return a short human-readable rendering of a measured or paper value."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {format_value(v)}" for k, v in value.items())
    return str(value)


@dataclass
class Claim:
    """One headline figure; ``passed`` is None for a figure that is reported, not tested."""

    id: str
    measured: Any
    target: str
    passed: bool | None
    paper: Any = None
    authors: Any = None
    why: str | None = None

    def as_dict(self) -> dict:
        """Return the claim as the metrics-file record."""
        record = {"id": self.id, "paper": to_jsonable(self.paper), "measured": to_jsonable(self.measured),
                  "target": self.target, "pass": self.passed}
        if self.authors is not None:
            record["authors"] = to_jsonable(self.authors)
        return record if self.why is None else {**record, "why": self.why}


#: Column headings of the claims table.
HEADINGS = {"paper": "paper", "measured": "measured", "authors": "authors' code"}


class ClaimsTable:
    """Rich display of a list of claims (HTML in a notebook, Markdown as text)."""

    def __init__(self, claims: list[Claim]):
        self.claims = claims

    @staticmethod
    def _verdict(passed: bool | None) -> str:
        return {True: "pass", False: "FAIL", None: "reported"}[passed]

    def _columns(self) -> list[str]:
        """Return the value columns: paper, measured, and the authors' code where any claim has it."""
        return ["paper", "measured"] + (["authors"] if any(c.authors is not None for c in self.claims) else [])

    def _repr_html_(self) -> str:
        colours = {True: "#1a7f37", False: "#cf222e", None: "#57606a"}
        cols = self._columns()
        rows = "".join(
            f"<tr><td><code>{html.escape(c.id)}</code></td>"
            + "".join(f"<td>{html.escape(format_value(to_jsonable(getattr(c, k))))}</td>" for k in cols)
            + f"<td>{html.escape(c.target)}"
            + (f"<br><em>why it fails: {html.escape(c.why)}</em>" if c.why else "") + "</td>"
            f"<td style='color:{colours[c.passed]};font-weight:bold'>{self._verdict(c.passed)}</td></tr>"
            for c in self.claims)
        heads = "".join(f"<th>{HEADINGS[k]}</th>" for k in cols)
        return (f"<table class='corekit-claims'><thead><tr><th>claim</th>{heads}"
                f"<th>target</th><th>verdict</th></tr></thead><tbody>{rows}</tbody></table>")

    def _repr_markdown_(self) -> str:
        cols = self._columns()
        lines = ["| claim | " + " | ".join(HEADINGS[k] for k in cols) + " | target | verdict |",
                 "|---|" + "---|" * len(cols) + "---|---|"]
        lines += [f"| `{c.id}` | " + " | ".join(format_value(to_jsonable(getattr(c, k))) for k in cols)
                  + f" | {c.target}" + (f" (why it fails: {c.why})" if c.why else "")
                  + f" | {self._verdict(c.passed)} |" for c in self.claims]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self._repr_markdown_()


def captured_parameters(notebook: str, namespace: dict) -> dict:
    """Return {name: value in ``namespace``} for every parameter the notebook's parameters cell declares."""
    names = list(declared(notebook))
    missing = [n for n in names if n not in namespace]
    if missing:
        raise ValueError(f"{notebook} declares the parameters {missing} but they are not defined in the namespace")
    return {n: namespace[n] for n in names}


def check_parameters(notebook: str, values: dict) -> None:
    """Raise ParameterError naming the first parameter whose value its declaration in the parameters cell refuses.

    ``corekit run`` checks the same rules before a kernel starts; this repeats them inside the notebook, so
    that papermill, nbmake or Jupyter runs stop with the same one line before any computation.
    """
    for name, parameter in declared(notebook).items():
        rule = paramspec.accepts(parameter.default, parameter.help)
        try:
            paramspec.check_parameter(name, parameter.help, rule, values[name], Path.cwd())
        except ValueError as error:
            raise paramspec.ParameterError(f"{notebook}: parameter {name!r}: {error}") from None


class Claims:
    """Collects a notebook's claims and writes them to its metrics file.

    ``Claims(notebook)`` checks and records the notebook's parameters itself: the names its parameters cell
    declares (:func:`corekit.book.parameters.declared`), with their values in the caller's globals (papermill's
    injected values included); :meth:`resolve` adds or replaces entries (e.g. the device "auto" became).
    ``parameters`` given explicitly are recorded as they are, unchecked. ``output_dir`` is where the metrics
    file goes (``""``: nowhere), not a parameter of the experiment: it is not recorded.
    """

    def __init__(self, notebook: str, parameters: dict | None = None, *, namespace: dict | None = None):
        self.notebook = notebook
        if parameters is None:
            caller = inspect.currentframe().f_back
            parameters = captured_parameters(notebook, namespace if namespace is not None else caller.f_globals)
            check_parameters(notebook, parameters)
        output_dir = parameters.get(paramspec.OUTPUT_DIR) or ""
        self.output_dir = Path(output_dir).expanduser().resolve() if output_dir else None
        self.parameters = to_jsonable({k: v for k, v in parameters.items() if k != paramspec.OUTPUT_DIR})
        self.claims: list[Claim] = []
        self._start = time.perf_counter()

    def resolve(self, **values: Any) -> None:
        """Record what a parameter resolved to in this run (e.g. ``device="cuda:0"`` for "auto")."""
        self.parameters.update(to_jsonable(values))

    def require(self, ok: bool, name: str, accepted: str, value: Any) -> None:
        """Raise ParameterError naming ``name``, its value and what is ``accepted`` unless ``ok`` (sizes that make a
        run empty or impossible, which only the notebook can work out)."""
        if not ok:
            raise paramspec.ParameterError(f"{self.notebook}: parameter {name!r}: expected {accepted}, "
                                           f"got {paramspec.show(value)}")

    def add(self, id: str, measured: Any, *, target: str, passed: bool | None = None, paper: Any = None,
            authors: Any = None, why: str | None = None) -> Claim:
        """Return the recorded claim ``id``; ``passed=None`` marks a figure that is reported only, ``authors`` the
        authors' code's value on the same weights or settings, ``why`` one line on what a failure means (what was
        tried, what it gave), kept only when the claim fails."""
        if why is not None and (not isinstance(why, str) or not why.strip()):
            raise ValueError(f"why for claim {id!r} must be a non-empty string, got {why!r}")
        if any(c.id == id for c in self.claims):
            raise ValueError(f"claim id {id!r} is recorded twice in {self.notebook}")
        claim = Claim(id=id, measured=measured, target=target,
                      passed=None if passed is None else bool(passed), paper=paper, authors=authors,
                      why=why if passed is not None and not passed else None)
        self.claims.append(claim)
        return claim

    def __getitem__(self, id: str) -> Claim:
        for claim in self.claims:
            if claim.id == id:
                return claim
        raise KeyError(f"no claim {id!r}; recorded: {[c.id for c in self.claims]}")

    def table(self) -> ClaimsTable:
        """Return the claims as a table that renders in the notebook and the book."""
        return ClaimsTable(self.claims)

    def as_dict(self) -> dict:
        """Return the metrics-file content."""
        return {"notebook": self.notebook, "parameters": self.parameters,
                "runtime_s": round(time.perf_counter() - self._start, 3), "threads": _torch_threads(),
                "claims": [c.as_dict() for c in self.claims]}

    def write(self, path: str | os.PathLike | None = None) -> Path | None:
        """Return the path of the written metrics file (``path``, else ``OUTPUT_DIR/NAME.metrics.json``), None when
        neither is given (a run without ``output_dir`` keeps its claims in the executed notebook only)."""
        if path is None and self.output_dir is None:
            return None
        path = Path(path) if path is not None else self.output_dir / f"{self.notebook}.metrics.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        metrics = {**self.as_dict(), "environment": runinfo.environment()}
        path.write_text(json.dumps(metrics, indent=2) + "\n")
        return path
