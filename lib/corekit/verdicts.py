"""The verdict vocabulary: bounds, nulls, verdicts and declared claims, for the chapters to decide their claims.

A chapter module declares its claims before any run as :class:`Spec` data (id, kind, statistic, bound, the paper's
value, the models a claim covers, or why it needs no null) and decides them in one function,
``claims(findings) -> list[Claim]``, with :func:`decide` (a tested claim) and :func:`reported` (a figure only). The
notebook records what that function returns (:meth:`corekit.runs.claims.Claims.add`).

A tested claim is a :class:`Bound` on one statistic, written once: the target text is rendered from it. Beside the
measured value it carries a **null** (:class:`Null`): the same statistic on a case where the claimed effect is absent
(the untrained model, shuffled labels, a random subspace of the same size, the model at initialisation, a plain power
law), which the bound must reject; or one of the :data:`NO_NULL` reasons why it needs none. For a claim that asserts
closeness to chance, the null is a case that is *not* at chance. Verdicts (:data:`VERDICTS`):

- ``pass``: the value satisfies the bound and every null fails it;
- ``uninformative``: the value satisfies the bound but a null does too: the test has no power;
- ``fail``: the value does not satisfy the bound;
- ``undecided``: the run cannot decide the claim (the chapter computes why, and names what would decide it);
- ``reported``: a figure, not a test.

Every claim has a **kind** (:data:`KINDS`): ``paper`` (the paper states it), ``extension`` (the book's own),
``check`` (a numerical or provenance check) or ``precondition`` (the models are fit to be tested, e.g. they trained).
Only ``paper`` claims count as reproduced claims of a paper.

A claim about trained models covers models named before the run (``covers``): its value is a dict {model: value}
(:func:`per_model`), it holds only when every model satisfies the bound, and the record carries k of n with a Wilson
interval. Every verdict but pass and reported carries a sentence of reason computed from the values and the bound;
the chapter's ``why`` adds context to it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from corekit.stats import wilson_interval

#: The verdicts a claim can have, in the order tables count them.
VERDICTS = ("pass", "uninformative", "fail", "undecided", "reported")
#: The reasons a tested claim may have no null (the only accepted ones), with what each means.
NO_NULL = {
    "numerical check": "it checks the computation itself (a residual, an error against a reference), not an effect",
    "provenance": "it checks that a run repeats a recorded run or setting, not an effect",
}
#: A claim over fewer models than this says so on the page.
FEW_MODELS = 5
#: The kinds of claim, with what each is; only ``paper`` claims count as a paper's reproduced claims.
KINDS = {
    "paper": "the paper states it (at the paper's setting or not)",
    "extension": "the book's own claim (a chapter the paper has not, or more models than the paper shows)",
    "check": "a numerical or provenance check of the computation, not a claim about models",
    "precondition": "the models are fit for the claims (they trained, they generalise)",
}


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


def format_value(value: Any) -> str:
    """Return a short human-readable rendering of a measured or paper value."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value + 0.0:.4g}"                   # + 0.0: a rounded −0.0 prints as 0
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {format_value(v)}" for k, v in value.items())
    return str(value)


def _number(x: float) -> str:
    """Return a bound's constant as text (4 significant digits, integers without a point)."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:.4g}"


@dataclass(frozen=True)
class Bound:
    """A pass/fail bound on one statistic; its text is the claim's target.

    ``kind`` is one of ``>=``, ``<=``, ``==`` (with tolerance ``b``), ``in`` ([a, b]), ``true`` (the value is a
    boolean that must hold), ``ci contains`` / ``ci above`` / ``ci below`` (tested on the claim's interval:
    it contains ``a``, its low end is above ``a``, its high end is below ``a``).
    """

    kind: str
    a: float | None = None
    b: float | None = None

    def test(self, value: Any, interval: tuple[float, float] | None = None) -> bool:
        """Return whether ``value`` (or, for the ``ci`` kinds, ``interval``) satisfies the bound."""
        if self.kind == "true":
            return bool(value)
        if self.kind.startswith("ci"):
            if interval is None:
                raise ValueError(f"a bound '{self.text}' tests an interval: pass interval=(low, high)")
            low, high = (float(v) for v in interval)
            return {"ci contains": low <= self.a <= high, "ci above": low > self.a, "ci below": high < self.a}[self.kind]
        if value is None or not math.isfinite(float(value)):
            return False
        x = float(value)
        if self.kind == "in":
            return self.a <= x <= self.b
        return {">=": x >= self.a, "<=": x <= self.a, "==": abs(x - self.a) <= (self.b or 0.0)}[self.kind]

    @property
    def text(self) -> str:
        """The bound in words and symbols, e.g. "≥ 0.9", "in [0.8, 1.25]", "95 % interval contains −1"."""
        if self.kind == "true":
            return "holds"
        if self.kind == "==":
            return f"= {_number(self.a)}" + (f" ± {_number(self.b)}" if self.b else "")
        if self.kind == "in":
            return f"in [{_number(self.a)}, {_number(self.b)}]"
        if self.kind.startswith("ci"):
            return {"ci contains": "interval contains", "ci above": "interval above",
                    "ci below": "interval below"}[self.kind] + f" {_number(self.a)}"
        return {">=": "≥", "<=": "≤"}[self.kind] + f" {_number(self.a)}"


def at_least(x: float) -> Bound:
    """Return the bound value ≥ x."""
    return Bound(">=", float(x))


def at_most(x: float) -> Bound:
    """Return the bound value ≤ x."""
    return Bound("<=", float(x))


def equal_to(x: float, tol: float = 0.0) -> Bound:
    """Return the bound ``|value − x| ≤ tol``."""
    return Bound("==", float(x), float(tol))


def between(low: float, high: float) -> Bound:
    """Return the bound low ≤ value ≤ high."""
    if not low <= high:
        raise ValueError(f"between needs low ≤ high, got {low!r}, {high!r}")
    return Bound("in", float(low), float(high))


def holds() -> Bound:
    """Return the bound "the boolean value is true"."""
    return Bound("true")


def interval_contains(x: float) -> Bound:
    """Return the bound "the claim's interval contains x"."""
    return Bound("ci contains", float(x))


def interval_above(x: float) -> Bound:
    """Return the bound "the claim's interval lies above x"."""
    return Bound("ci above", float(x))


def interval_below(x: float) -> Bound:
    """Return the bound "the claim's interval lies below x"."""
    return Bound("ci below", float(x))


@dataclass(frozen=True)
class Null:
    """The claim's statistic on a case without the claimed effect (``what``), which the bound must reject.

    ``value`` is a number (or boolean), or {model: value} for a claim over models (each must fail the bound);
    ``interval`` the null's interval for a bound on intervals.
    """

    what: str
    value: Any
    interval: tuple[float, float] | None = None

    @property
    def measured(self) -> bool:
        """Whether the null's statistic could be measured: a value, or for a claim over models at least one."""
        if isinstance(self.value, dict):
            return any(v is not None for v in self.value.values())
        return self.value is not None

    def passing(self, bound: Bound) -> list[str]:
        """Return the labels of the null's cases that satisfy ``bound`` ("" for a single value)."""
        if isinstance(self.value, dict):
            return [str(k) for k, v in self.value.items() if bound.test(v, self.interval)]
        return [""] if bound.test(self.value, self.interval) else []

    def as_dict(self, bound: Bound) -> dict:
        """Return the null's record: what it is, its value (and interval), and whether it satisfies the bound."""
        record = {"what": self.what, "value": to_jsonable(self.value), "passes": bool(self.passing(bound))}
        if not self.measured:
            record["measured"] = False
        return record if self.interval is None else {**record, "interval": to_jsonable(list(self.interval))}


def _shown(value: Any) -> str:
    """Return a value for a sentence of reason."""
    return format_value(to_jsonable(value))


@dataclass
class Claim:
    """One headline figure with its verdict; ``reason`` says in words why a claim that is not a pass is not."""

    id: str
    measured: Any
    target: str
    verdict: str
    kind: str | None = None
    paper: Any = None
    authors: Any = None
    reason: str | None = None
    nulls: tuple[dict, ...] = ()
    no_null: str | None = None
    models: dict | None = None
    interval: tuple[float, float] | None = None

    @property
    def passed(self) -> bool | None:
        """True for a pass, False for a fail, None for every other verdict."""
        return {"pass": True, "fail": False}.get(self.verdict)

    def as_dict(self) -> dict:
        """Return the claim as the metrics-file record."""
        record = {"id": self.id, **({"kind": self.kind} if self.kind else {}),
                  "paper": to_jsonable(self.paper), "measured": to_jsonable(self.measured),
                  "target": self.target, "verdict": self.verdict, "pass": self.passed}
        optional = {"reason": self.reason, "null": list(self.nulls) or None, "no_null": self.no_null,
                    "models": self.models, "interval": None if self.interval is None else list(self.interval),
                    "authors": self.authors}
        record.update({k: to_jsonable(v) for k, v in optional.items() if v is not None})
        return record


def as_nulls(null: Null | list[Null] | tuple[Null, ...] | None) -> tuple[Null, ...]:
    """Return ``null`` as a tuple of :class:`Null` (checked)."""
    nulls = () if null is None else (null,) if isinstance(null, Null) else tuple(null)
    if not all(isinstance(n, Null) for n in nulls):
        raise TypeError(f"null must be a Null or a list of Null, got {null!r}")
    return nulls


def verdict(value: Any, bound: Bound, *, nulls: tuple[Null, ...] = (), interval: tuple[float, float] | None = None,
            undecided: str | None = None, why: str | None = None) -> tuple[str, str | None, dict | None]:
    """Return (verdict, reason, models record) of a tested claim: ``value`` a number, or {model: number} for a claim
    that must hold for every model; ``undecided`` a computed reason why this run cannot decide the claim."""
    models = None
    if isinstance(value, dict):
        if not value:
            raise ValueError("a claim over models needs at least one model")
        missing = [key for key, v in value.items() if not bound.test(v, interval)]
        k, n = len(value) - len(missing), len(value)
        models = {"k": k, "n": n, "wilson95": [round(x, 4) for x in wilson_interval(k, n)],
                  "failing": [str(m) for m in missing]}
        holds_ = not missing
        shown = f"{k} of {n} models satisfy {bound.text}" + (
            "; not " + ", ".join(f"{m} ({_shown(value[m])})" for m in missing) if missing else "")
    else:
        holds_ = bound.test(value, interval)
        measured = _shown(value) + (f" (interval {_shown(list(interval))})" if interval is not None else "")
        shown = f"measured {measured} {'satisfies' if holds_ else 'does not satisfy'} {bound.text}"
    context = f" {why[0].upper()}{why[1:].rstrip('.')}." if why else ""
    if undecided:
        return "undecided", f"Undecided: {undecided.rstrip('.')} ({shown}).{context}", models
    if not holds_:
        return "fail", f"Fails: {shown}.{context}", models
    passing = [(n, n.passing(bound)) for n in nulls]
    passing = [(n, labels) for n, labels in passing if labels]
    if passing:
        said = "; ".join(f"{n.what} gives {_shown(n.value)}" + (f" ({len(labels)} of {len(n.value)} cases pass)"
                                                                 if isinstance(n.value, dict) else "")
                         for n, labels in passing)
        return ("uninformative", f"Uninformative: {shown}, but so does the null ({said}), so the test cannot tell "
                f"the effect from its absence.{context}", models)
    return "pass", None, models


#: Marks a :func:`decide` argument left to the claim's declaration.
_DECLARED = object()


@dataclass(frozen=True)
class Spec:
    """A claim declared before the run: its id, kind (:data:`KINDS`), the statistic it measures, its bound (None for a
    reported figure), the paper's value, the models it covers (for a value per model) and, for a tested claim without
    a null, the :data:`NO_NULL` reason."""

    id: str
    kind: str
    statistic: str
    bound: Bound | None = None
    paper: Any = None
    covers: str | None = None
    no_null: str | None = None

    def __post_init__(self):
        if not self.id or not isinstance(self.id, str):
            raise ValueError(f"a claim's id must be a non-empty string, got {self.id!r}")
        if self.kind not in KINDS:
            raise ValueError(f"claim {self.id!r}: kind must be one of {sorted(KINDS)}, got {self.kind!r}")
        if not isinstance(self.statistic, str) or not self.statistic.strip():
            raise ValueError(f"claim {self.id!r}: statistic must say what the value measures")
        if self.bound is not None and not isinstance(self.bound, Bound):
            raise TypeError(f"claim {self.id!r}: bound must be a Bound (at_least, at_most, ...) or None, "
                            f"got {self.bound!r}")
        if self.no_null is not None and self.no_null not in NO_NULL:
            raise ValueError(f"claim {self.id!r}: no_null must be one of {sorted(NO_NULL)}, got {self.no_null!r}")
        if self.no_null is not None and self.kind != "check":
            raise ValueError(f"claim {self.id!r}: only a check may go without a null (kind {self.kind!r})")

    @property
    def tested(self) -> bool:
        """Whether the claim is tested (it has a bound) rather than reported."""
        return self.bound is not None


def declared(specs: Iterable[Spec]) -> dict[str, Spec]:
    """Return {id: spec} of a chapter's declared claims, refusing an id declared twice."""
    index: dict[str, Spec] = {}
    for spec in specs:
        if spec.id in index:
            raise ValueError(f"claim id {spec.id!r} is declared twice")
        index[spec.id] = spec
    return index


def per_model(names: Sequence[Any], values: Iterable[Any], label: str = "seed") -> dict[str, Any]:
    """Return {"LABEL name": value} for the models ``names`` and their ``values`` (numbers as float, ints kept)."""
    values = list(values)
    if len(values) != len(names):
        raise ValueError(f"per_model: {len(names)} models but {len(values)} values")
    return {f"{label} {n}".strip(): v if isinstance(v, (int, bool, str, dict, list)) or v is None else float(v)
            for n, v in zip(names, values)}


def decide(spec: Spec, value: Any, *, null: Null | Sequence[Null] | None = None,
           interval: tuple[float, float] | None = None, undecided: str | None = None, why: str | None = None,
           statistic: str | None = None, paper: Any = _DECLARED, authors: Any = None) -> Claim:
    """Return the tested claim ``spec`` decided on ``value`` (a number or boolean, or {model: value} when the spec
    covers models) against its bound and ``null``; ``undecided`` the computed reason why this run cannot decide it,
    ``why`` context for any verdict but pass, ``statistic`` / ``paper`` what the run computed in place of the
    declared text (e.g. a statistic naming a chance level)."""
    if spec.bound is None:
        raise ValueError(f"claim {spec.id!r} is declared as reported (no bound): record it with reported()")
    nulls = as_nulls(null)
    if not nulls and spec.no_null is None:
        raise ValueError(f"claim {spec.id!r} has no null: give null=Null(...) or declare no_null= one of "
                         f"{sorted(NO_NULL)}")
    if nulls and spec.no_null is not None:
        raise ValueError(f"claim {spec.id!r}: declared without a null ({spec.no_null}), but given one")
    if isinstance(value, dict) != (spec.covers is not None):
        raise ValueError(f"claim {spec.id!r}: a value per model needs covers= in its declaration and a covers= "
                         f"declaration a value per model (got {type(value).__name__})")
    for text, name in ((why, "why"), (undecided, "undecided")):
        if text is not None and (not isinstance(text, str) or not text.strip()):
            raise ValueError(f"{name} for claim {spec.id!r} must be a non-empty string, got {text!r}")
    result, reason, models = verdict(value, spec.bound, nulls=nulls, interval=interval, undecided=undecided, why=why)
    target = f"{(statistic or spec.statistic).strip()} {spec.bound.text}"
    if models is not None:
        target += f", for every one of {spec.covers}"
        if models["n"] < FEW_MODELS:
            target += f" (only {models['n']} model{'s' * (models['n'] > 1)})"
        models = {**models, "covers": spec.covers}
    return Claim(id=spec.id, kind=spec.kind, measured=value, target=target, verdict=result,
                 paper=spec.paper if paper is _DECLARED else paper, authors=authors, reason=reason,
                 nulls=tuple(n.as_dict(spec.bound) for n in nulls), no_null=spec.no_null, models=models,
                 interval=None if interval is None else tuple(interval))


def decide_over(spec: Spec, value: dict, qualified: Sequence[str], *, unqualified: str, need: int = 1,
                null: Null | Sequence[Null] | None = None, **options) -> Claim:
    """Return the claim ``spec`` over models decided on the ``qualified`` ones alone (those that passed the claim's
    precondition: trained, generalised, grokked), each null restricted to them; undecided, with ``unqualified`` (why
    the others do not count) as its reason, when fewer than ``need`` qualify. A qualified model that fails the claim
    fails it; ``options`` go to :func:`decide`."""
    keep = [k for k in value if k in set(qualified)]
    left_out = [k for k in value if k not in set(qualified)]
    if len(keep) < need:
        undecided = options.pop("undecided", None) or f"{unqualified}; fewer than {need} of the models it covers qualify"
        return decide(spec, value, null=null, undecided=undecided, **options)
    nulls = []
    for n in as_nulls(null):
        kept = {k: v for k, v in n.value.items() if k in keep} if isinstance(n.value, dict) else n.value
        nulls.append(Null(n.what, kept if kept != {} else None, n.interval))
    if left_out:
        statistic = options.pop("statistic", None) or spec.statistic
        options["statistic"] = f"{statistic} (without {', '.join(map(str, left_out))}: {unqualified})"
    return decide(spec, {k: value[k] for k in keep}, null=nulls or None, **options)


def reported(spec: Spec, value: Any, *, statistic: str | None = None, paper: Any = _DECLARED,
             authors: Any = None) -> Claim:
    """Return the figure ``spec`` (reported, not tested) with ``value``; ``statistic`` / ``paper`` as in
    :func:`decide`."""
    if spec.bound is not None:
        raise ValueError(f"claim {spec.id!r} is declared with a bound ({spec.bound.text}): decide it with decide()")
    return Claim(id=spec.id, kind=spec.kind, measured=value, target=f"reported: {(statistic or spec.statistic).strip()}",
                 verdict="reported", paper=spec.paper if paper is _DECLARED else paper, authors=authors)
