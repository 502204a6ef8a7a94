"""Claims: each headline figure of a notebook as a test with a null, its verdict and the reason for it.

A notebook creates one :class:`Claims` in its first cell after the parameters, which checks every parameter
against what the parameters cell declares and stops the run with one line when a value cannot be right. It
records the claims its chapter module decides (:meth:`Claims.add`; the vocabulary is :mod:`corekit.verdicts`),
shows the table at the end of the page and, when the notebook's ``output_dir`` parameter names a folder,
writes ``OUTPUT_DIR/NAME.metrics.json``::

    {"notebook", "parameters", "runtime_s", "threads", "environment": {...}, ("exports": {name: {"file", "sha256"}}),
     "claims": [{"id", "paper", "measured", "target", "verdict", "pass"}
                (+ "reason", "null", "no_null", "models", "interval", "authors")]}

A tested claim is a :class:`Bound` on one statistic, written once: the target text is rendered from it. Beside
the measured value it carries a **null** (:class:`Null`): the same statistic on a case where the claimed effect
is absent (the untrained model, shuffled labels, a random subspace of the same size, the model at
initialisation, a plain power law), which the bound must reject; or one of the :data:`NO_NULL` reasons why it
needs none. For a claim that asserts closeness to chance, the null is a case that is *not* at chance (a model
against a copy of itself). Verdicts (:data:`VERDICTS`):

- ``pass``: the value satisfies the bound and every null fails it;
- ``uninformative``: the value satisfies the bound but a null does too: the test has no power;
- ``fail``: the value does not satisfy the bound;
- ``undecided``: the run cannot decide the claim at this profile (the notebook computes why, and names the
  profile that would decide it);
- ``reported``: a figure, not a test.

A claim about trained models covers models named before the run (``covers``): its value is a dict
{model: value}, it holds only when every model satisfies the bound, and the record carries k of n with a Wilson
interval (``models``). Every verdict but pass and reported carries a sentence of reason (``reason``) computed from
the values and the bound; the notebook's ``why`` adds context to it. ``pass`` (True / False / None) repeats the
verdict for readers of older files.

A claim's ``authors`` is the value the authors' own code gives on the same weights or settings
(``results/oracle/``, :mod:`corekit.oracle`). ``threads`` is torch's intra-op thread count when the file is
written (None if torch was never imported). ``environment`` is the run record of
:func:`corekit.runinfo.environment`. A failing claim never raises.
"""
from __future__ import annotations

import html
import inspect
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from corekit import runinfo
from corekit.runs import owned, paramspec
from corekit.runs.parameters import declared
from corekit.verdicts import KINDS, VERDICTS, Bound, Claim, Null, Spec, decide, format_value, reported, to_jsonable


def _torch_threads() -> int | None:
    """Return torch's intra-op thread count, or None when torch has not been imported."""
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else None


def verdict_of(record: dict) -> str:
    """Return a metrics-file claim's verdict (older files carry only ``pass``: True, False or None)."""
    verdict = record.get("verdict")
    if verdict in VERDICTS:
        return verdict
    return {True: "pass", False: "fail"}.get(record.get("pass"), "reported")


def kind_of(record: dict, own: bool = False) -> str:
    """Return a metrics-file claim's kind (:data:`corekit.verdicts.KINDS`); a record written before claims had kinds
    is a ``check`` when it has a no-null reason, else ``extension`` in a chapter of the book's own hypotheses
    (``own``) and ``paper`` elsewhere."""
    kind = record.get("kind")
    if kind in KINDS:
        return kind
    return "check" if record.get("no_null") else "extension" if own else "paper"


def null_text(record: dict) -> str:
    """Return a metrics-file claim's null as short text ("untrained model: 3"), or its no-null reason."""
    nulls = record.get("null") or []
    if nulls:
        return "; ".join(f"{n['what']}: {format_value(n['value'])}" for n in nulls)
    return f"none ({record['no_null']})" if record.get("no_null") else ""


#: How a verdict is shown: its label and its colour.
VERDICT_STYLE = {"pass": ("pass", "#1a7f37"), "uninformative": ("uninformative", "#9a6700"),
                 "fail": ("FAIL", "#cf222e"), "undecided": ("undecided", "#0969da"),
                 "reported": ("reported", "#57606a")}


def id_html(claim_id: str) -> str:
    """Return a claim id as HTML inline code that a narrow column may break only after an underscore or before a
    bracket (``<wbr>`` between the parts)."""
    parts = re.split(r"(?<=_)|(?=\[)", claim_id)
    return "<wbr>".join(html.escape(p) for p in parts)


def _markdown_cell(text: str) -> str:
    """Return ``text`` safe inside a markdown table cell (pipes escaped, one line)."""
    return " ".join(str(text).split()).replace("|", "\\|")


class ClaimsTable:
    """Rich display of a list of claims: a Markdown table (the book shows the HTML of
    :mod:`corekit.runs.claims_view` in its place)."""

    def __init__(self, claims: list[Claim]):
        self.claims = claims

    def _columns(self) -> list[str]:
        """Return the value columns: paper, measured, the authors' code where any claim has it, and the null."""
        authors = ["authors"] if any(c.authors is not None for c in self.claims) else []
        return ["paper", "measured", *authors, "null"]

    @staticmethod
    def _value(claim: Claim, column: str) -> str:
        if column == "null":
            return null_text(claim.as_dict())
        return format_value(to_jsonable(getattr(claim, column)))

    def _repr_markdown_(self) -> str:
        cols = self._columns()
        lines = ["| claim | " + " | ".join("authors' code" if k == "authors" else k for k in cols)
                 + " | target | verdict |", "|---|" + "---|" * len(cols) + "---|---|"]
        for c in self.claims:
            target = c.target + (f" ({c.reason})" if c.reason else "")
            lines.append(f"| `{c.id}` | " + " | ".join(_markdown_cell(self._value(c, k)) for k in cols)
                         + f" | {_markdown_cell(target)} | {VERDICT_STYLE[c.verdict][0]} |")
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
    declares (:func:`corekit.runs.parameters.declared`), with their values in the caller's globals (papermill's
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
        self.exports: dict[str, dict] = {}
        self.training: dict[str, Any] = {}
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

    def record_export(self, name: str, path: str | os.PathLike) -> str:
        """Return the sha256 of the file the run exported at ``path`` (e.g. its checkpoints), recorded in the metrics'
        ``exports`` as ``name``, so that a comparison made on those weights can be checked to be of this run."""
        import hashlib

        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        self.exports[name] = {"file": Path(path).name, "sha256": digest.hexdigest()}
        owned.record_written(Path(path).resolve())                    # a later run of this tool may replace it
        return self.exports[name]["sha256"]

    def record_training(self, **info: Any) -> None:
        """Record in the metrics' ``training`` where the run's training came from (e.g. shards re-read from their
        records, the seconds they took summed over their segments, the commits that trained them)."""
        self.training.update(to_jsonable(info))

    def add(self, *claims: Claim) -> list[Claim]:
        """Return ``claims`` (a chapter's decided claims, :mod:`corekit.verdicts`), recorded in their order."""
        for claim in claims:
            if not isinstance(claim, Claim):
                raise TypeError(f"{self.notebook}: claims.add takes Claim objects (corekit.verdicts.decide), "
                                f"got {claim!r}")
            self._append(claim)
        return list(claims)

    def _append(self, claim: Claim) -> Claim:
        if any(c.id == claim.id for c in self.claims):
            raise ValueError(f"claim id {claim.id!r} is recorded twice in {self.notebook}")
        self.claims.append(claim)
        return claim

    def check(self, id: str, value: Any, bound: Bound, *, kind: str, statistic: str,
              null: Null | list[Null] | None = None, no_null: str | None = None, covers: str | None = None,
              interval: tuple[float, float] | None = None, undecided: str | None = None, paper: Any = None,
              authors: Any = None, why: str | None = None) -> Claim:
        """Return the recorded tested claim ``id`` of ``kind`` (:data:`corekit.verdicts.KINDS`): ``statistic`` (what
        ``value`` measures) against ``bound``, decided by :func:`corekit.verdicts.decide` (a notebook without a chapter
        module; the book's chapters declare their claims in their module and :meth:`add` them)."""
        spec = Spec(id, kind, statistic, bound, paper=paper, covers=covers, no_null=no_null)
        return self._append(decide(spec, value, null=null, interval=interval, undecided=undecided, why=why,
                                   authors=authors))

    def report(self, id: str, value: Any, *, kind: str, statistic: str, paper: Any = None,
               authors: Any = None) -> Claim:
        """Return the recorded figure ``id`` of ``kind`` (reported, not tested): ``statistic`` says what ``value`` is."""
        return self._append(reported(Spec(id, kind, statistic, paper=paper), value, authors=authors))

    def __getitem__(self, id: str) -> Claim:
        for claim in self.claims:
            if claim.id == id:
                return claim
        raise KeyError(f"no claim {id!r}; recorded: {[c.id for c in self.claims]}")

    def counts(self) -> dict[str, int]:
        """Return {verdict: number of claims} over :data:`VERDICTS`."""
        return {v: sum(c.verdict == v for c in self.claims) for v in VERDICTS}

    def table(self) -> ClaimsTable:
        """Return the claims as a table that renders in the notebook and the book."""
        return ClaimsTable(self.claims)

    def as_dict(self) -> dict:
        """Return the metrics-file content."""
        record = {"notebook": self.notebook, "parameters": self.parameters,
                  "runtime_s": round(time.perf_counter() - self._start, 3), "threads": _torch_threads(),
                  "claims": [c.as_dict() for c in self.claims]}
        if self.training:
            record["training"] = self.training
        return {**record, "exports": self.exports} if self.exports else record

    def write(self, path: str | os.PathLike | None = None) -> Path | None:
        """Return the path of the written metrics file (``path``, else ``OUTPUT_DIR/NAME.metrics.json``), None when
        neither is given (a run without ``output_dir`` keeps its claims in the executed notebook only)."""
        if path is None and self.output_dir is None:
            return None
        path = Path(path) if path is not None else self.output_dir / f"{self.notebook}.metrics.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        from corekit import plots  # matplotlib only for a run that writes

        metrics = {**self.as_dict(), "environment": runinfo.environment()}
        if self.output_dir is not None and (saved := plots.saved_figures(self.output_dir / "figures" / self.notebook)):
            metrics["figure_sha256"] = saved                     # what `corekit adopt` checks the figures against
        path.write_text(json.dumps(metrics, indent=2) + "\n")
        return path
