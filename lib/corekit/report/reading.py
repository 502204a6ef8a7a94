"""A statement's verdict in words, decided from its claims by one declared rule (:data:`RULE`), and its sentence."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from corekit.report.statements import BOOK, OWN, STATEMENTS, Statement
from corekit.verdicts import format_value

REPRODUCES = "reproduces"
REPRODUCES_ELSEWHERE = "reproduces at another setting"
FAILS = "does not reproduce"
DISAGREES_ELSEWHERE = "disagrees at another setting"
CONTROL = "holds, but so does the control"
SHOWN = "shown, not tested"
UNDECIDABLE = "no run here can decide it"
HOLDS = "holds"                     # the book's own hypotheses: no paper setting to reproduce
DOES_NOT_HOLD = "does not hold"
#: The verdicts in words, in the order the tallies list them.
WORDS = (REPRODUCES, REPRODUCES_ELSEWHERE, FAILS, DISAGREES_ELSEWHERE, CONTROL, UNDECIDABLE, SHOWN, HOLDS,
         DOES_NOT_HOLD)
#: The claim verdict each word's colour follows (:data:`corekit.runs.claims.VERDICT_STYLE`).
COLOUR = {REPRODUCES: "pass", REPRODUCES_ELSEWHERE: "pass", FAILS: "fail", DISAGREES_ELSEWHERE: "fail",
          CONTROL: "uninformative", UNDECIDABLE: "undecided", SHOWN: "reported", HOLDS: "pass",
          DOES_NOT_HOLD: "fail"}

#: The rule, as the results page states it.
RULE = ("A statement is decided by the claims it names, on the paper's own models where it names them (checks that "
        "any random initialisation passes and reported values are shown, never counted): if any fails, it does not "
        "reproduce (or disagrees, at another setting); else if any passes only as its control does, it holds, but so "
        "does the control; else if any passes, it reproduces (at the paper's setting, or at another); else if its "
        "claims are all undecided, no run here can decide it; a statement no claim tests is shown, not tested. Its "
        "setting is the paper's when none of the parameters bearing on it differs from the chapter's paper profile "
        "and the profile itself lacks nothing of the paper's. The book's own hypotheses hold or do not hold, by the same "
        "rule.")


def verdict_of(claim: dict) -> str:
    """Return a metrics file's claim verdict (pass, fail, uninformative, undecided, reported)."""
    return claim.get("verdict") or "reported"


def plain_value(claim: dict) -> str:
    """Return a claim's measured value as text (the publishing code passes a richer one: k of n and the worst)."""
    return str(claim.get("measured"))


def matches(pattern: str, claim_id: str) -> bool:
    """Return whether ``claim_id`` is named by ``pattern``, where ``*`` stands for a model name (no comma)."""
    return re.fullmatch(re.escape(pattern).replace(r"\*", r"[^,\]]+"), claim_id) is not None


def named(claims: list[dict], patterns: tuple[str, ...]) -> list[dict]:
    """Return the claims (in run order) that one of ``patterns`` names."""
    return [c for c in claims if any(matches(p, c["id"]) for p in patterns)]


def on_models(claim: dict, models: tuple[str, ...]) -> tuple[str, str | None]:
    """Return (verdict, note) of a claim over models restricted to ``models`` (the paper's own seeds): a pass or a
    fail is re-read from the claim's failing models, any other verdict is the claim's; the note names the models."""
    verdict = verdict_of(claim)
    value, info = claim.get("measured"), claim.get("models")
    if not models or not isinstance(value, dict) or not isinstance(info, dict) or verdict not in ("pass", "fail"):
        return verdict, None
    ours = [m for m in models if m in value]
    if not ours:
        return verdict, None
    failing = [m for m in ours if m in (info.get("failing") or [])]
    shown = ", ".join(f"{m} ({format_value(value[m])})" for m in ours)
    return ("fail" if failing else "pass"), f"on the paper's models {shown}, of the {info.get('n')} the run has"


@dataclass
class Reading:
    """A statement read off one run: its verdict in words, its setting, its claims' verdicts and its sentence."""
    statement: Statement
    verdict: str
    setting: list[str]
    claims: list[tuple[dict, str, str | None]] = field(default_factory=list)
    checks: list[dict] = field(default_factory=list)
    shown: list[dict] = field(default_factory=list)
    describe: Callable[[dict], str] = plain_value

    @property
    def at_paper_setting(self) -> bool:
        """Return whether the statement was decided at the paper's setting."""
        return not self.setting

    def counts(self) -> dict[str, int]:
        """Return {claim verdict: number of the deciding claims with it}."""
        verdicts = [v for _, v, _ in self.claims]
        return {v: verdicts.count(v) for v in ("pass", "fail", "uninformative", "undecided", "reported") if v in verdicts}

    def ours(self, first: bool = False, more: bool = True) -> str:
        """Return what the run measured, in one line: each deciding claim's value (``first``: the first claim's and
        how many more there are, unless not ``more``), its verdict and (over models) how many models meet the bound and
        the worst one."""
        parts = []
        for claim, verdict, note in self.claims[:1] if first else self.claims:
            value = note or self.describe(claim)
            parts.append(f"{claim['id']} {value} ({verdict}{_position(claim) if verdict == 'undecided' else ''})")
        extra = len(self.claims) - len(parts) if more else 0
        return "; ".join(parts) + (f" and {extra} more claim{'s' * (extra > 1)}" if extra else "") if parts else \
            "no claim tests it"

    def sentence(self, short: bool = False) -> str:
        """Return the statement's verdict in one sentence: the paper's number beside ours, the setting (``short``: the
        first deciding claim's value only, and whether the setting is the paper's, which the page gives once) and,
        when no run decides it, what would."""
        counts = self.counts()
        tested = sum(n for v, n in counts.items() if v != "reported")
        where = "at the paper's setting" if not self.setting else "at another setting" if short else \
            "at " + "; ".join(self.setting)
        if self.verdict == SHOWN:
            return f"{self.statement.note or 'No claim of the run tests it.'}"
        own = self.statement.paper == BOOK
        ours = self.ours(first=short)
        text = f"Here: {ours}." if own else f"The paper: {self.statement.paper_value}. Here, {where}: {ours}."
        decided = counts.get("pass", 0) + counts.get("fail", 0) + counts.get("uninformative", 0)
        if decided < tested:
            text += f" {decided} of {tested} claims decided."
        if self.verdict == UNDECIDABLE and self.statement.needs:
            text += f" What would decide it: {self.statement.needs}."
        if self.checks:
            text += (" Not counted: " + ", ".join(c["id"] for c in self.checks)
                     + " (any random initialisation passes it).")
        return text

    def as_dict(self) -> dict:
        """Return the reading as the machine-readable record of ``results/statements.json``."""
        s = self.statement
        return {"id": s.id, "paper": s.paper, "chapter": s.chapter, "statement": s.text, "reference": s.reference,
                "paper_value": s.paper_value, "ours": self.ours(), "setting": self.setting or "the paper's",
                "verdict": self.verdict, "sentence": self.sentence(),
                "claims": {c["id"]: v for c, v, _ in self.claims}, "checks": [c["id"] for c in self.checks],
                "shown": [c["id"] for c in self.shown], "note": s.note}


def _position(claim: dict) -> str:
    """Return where an undecided claim's value lies: ", meets its bound on k of n" over models, else ", above /
    below / within the paper's number" when both are numbers (its interval against it when it has one)."""
    info, paper, value = claim.get("models"), claim.get("paper"), claim.get("measured")
    if isinstance(info, dict) and info.get("n"):
        return f", meets its bound on {info.get('k')} of {info.get('n')}"
    if isinstance(paper, (int, float)) and isinstance(value, (int, float)) and not isinstance(value, bool):
        low, high = claim.get("interval") or (value, value)
        side = "within" if low <= paper <= high else "above" if low > paper else "below"
        return f", {side} the paper's {format_value(paper)}"
    return ""


def decide(statement: Statement, claims: list[dict], differences: list[tuple[str, str, str]],
           describe: Callable[[dict], str] = plain_value) -> Reading:
    """Return the statement's reading off one run's ``claims``, ``differences`` being the run's settings that differ
    from the chapter's paper profile as (parameter, the run's value, the paper profile's) and ``describe`` how a
    claim's value is written."""
    own = statement.paper == BOOK
    bearing = statement.bearing
    setting = [] if own else [f"{k} {ran} (paper profile: {paper})" for k, ran, paper in differences
                              if bearing is None or k in bearing] + list(statement.always_differs)
    deciding = [(c, *on_models(c, statement.models)) for c in named(claims, statement.decide)]
    reading = Reading(statement, SHOWN, setting, deciding, named(claims, statement.checks),
                      named(claims, statement.shown), describe)
    verdicts = {v for _, v, _ in deciding}
    elsewhere = bool(setting)
    if "fail" in verdicts:
        reading.verdict = DOES_NOT_HOLD if own else DISAGREES_ELSEWHERE if elsewhere else FAILS
    elif "uninformative" in verdicts:
        reading.verdict = CONTROL
    elif "pass" in verdicts:
        reading.verdict = HOLDS if own else REPRODUCES_ELSEWHERE if elsewhere else REPRODUCES
    elif "undecided" in verdicts:
        reading.verdict = UNDECIDABLE
    return reading


def read_all(claims_by_chapter: dict[str, list[dict]], differences: dict[str, list[tuple[str, str, str]]],
             describe: Callable[[dict], str] = plain_value,
             statements: tuple[Statement, ...] = STATEMENTS + OWN) -> list[Reading]:
    """Return the reading of every statement whose chapter ran (``claims_by_chapter``: chapter -> its claims)."""
    return [decide(s, claims_by_chapter[s.chapter], differences.get(s.chapter, []), describe) for s in statements
            if s.chapter in claims_by_chapter]


def tally(readings: list[Reading]) -> dict[str, int]:
    """Return {verdict in words: how many statements have it}, in :data:`WORDS` order."""
    return {w: n for w in WORDS if (n := sum(r.verdict == w for r in readings))}
