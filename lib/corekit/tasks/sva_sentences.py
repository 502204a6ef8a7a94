"""The ACE authors' agreement sentences as corekit prompts, and what a grammar check finds in them.

``scripts/oracle/cores_04.py`` exports the sentences that the authors' generator (``SVA_uni.py``'s
``build_sva_dataset``) draws, with their labels, head nouns and train / test split
(``results/oracle/04_sentences.json``). :func:`load` turns them into
:class:`corekit.tasks.agreement.Sentence` objects and checks each against five rules: the next word
must be a verb agreeing with the labelled head noun, in a well-formed sentence, once.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from corekit.tasks.agreement import Sentence

#: The problems :func:`problems` reports, each with what it means for the next verb.
KINDS = {
    "there_without_verb": "'There key near the boxes': a noun right after 'There' (no verb), not a sentence",
    "unfinished_relative": "'The key that the cabinets': the next word is the relative clause's verb, which "
                           "agrees with the attractor, not with the labelled head",
    "relative_verb_disagrees": "'The keys that guards the cabinet': the relative clause's verb disagrees with its "
                               "plural head (ungrammatical)",
    "duplicate": "the same text drawn again",
    "test_in_train": "a held-out text that is also a training text",
}
#: The kinds that make a sentence wrong as an agreement prompt (the others are repeats).
GRAMMAR = frozenset(KINDS) - {"duplicate", "test_in_train"}
_BACK_PADS = ("in the old kingdom", "in this strange world", "in the present tense", "on most days")
_SINGULAR_RELATIVE = re.compile(r" that (guards|surrounds|hides) the ")


@dataclass
class AuthorsSentences:
    """The authors' sentences as (train, test) Sentences, the problems of each drawn sentence (in drawing order,
    one list per sentence) and where they came from."""

    train: list[Sentence]
    test: list[Sentence]
    kinds: list[list[str]]
    source: str

    def counts(self) -> dict[str, int]:
        """Return {kind: how many drawn sentences have it}, every kind of :data:`KINDS` listed."""
        found = Counter(kind for kinds in self.kinds for kind in kinds)
        return {kind: found.get(kind, 0) for kind in KINDS}

    def flawed(self) -> int:
        """Return how many drawn sentences have a grammatical problem (duplicates aside)."""
        return sum(bool(GRAMMAR & set(kinds)) for kinds in self.kinds)

    def clean(self, sentences: list[Sentence]) -> list[bool]:
        """Return, for each of ``sentences``, whether it has no grammatical problem (duplicates aside)."""
        return [not problems(s.prompt, s.label) for s in sentences]


def problems(text: str, label: int) -> list[str]:
    """Return the grammatical problems (keys of :data:`KINDS`) of one of the authors' sentences with ``label``."""
    body = text.removeprefix("In the past, ")
    found = []
    if body.startswith("There "):
        found.append("there_without_verb")
    if " that the " in body:
        found.append("unfinished_relative")
    if label == 1 and _SINGULAR_RELATIVE.search(body):
        found.append("relative_verb_disagrees")
    return found


def sentence(text: str, label: int, head: str, style: str) -> Sentence:
    """Return one of the authors' sentences as a Sentence (subject: the first whole-word match of ``head``)."""
    match = re.search(rf"\b{re.escape(head)}\b", text)
    if match is None:
        raise ValueError(f"head noun {head!r} does not occur in {text!r}")
    body = text
    for pad in _BACK_PADS:
        body = body.removesuffix(" " + pad)
    return Sentence(prompt=text, label=int(label), subject=head, subject_char=match.start(),
                    attractor=body.rsplit(" ", 1)[-1], construction=style,
                    tense="past" if text.startswith("In the past,") else "present", padded=style in ("front", "back"))


def load(path: str | Path) -> AuthorsSentences:
    """Return the sentences exported to ``path`` (``results/oracle/04_sentences.json``), split and checked."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: run scripts/oracle/cores_04.py --authors-repo <clone of "
                                "joshseth/cores> to export the authors' sentences")
    data = json.loads(path.read_text())
    missing = {"texts", "labels", "heads", "styles", "train", "test"} - set(data)
    if missing:
        raise ValueError(f"{path} lacks {sorted(missing)}: rerun scripts/oracle/cores_04.py")
    rows = [sentence(t, y, h, s) for t, y, h, s in zip(data["texts"], data["labels"], data["heads"], data["styles"])]
    kinds, seen = [], set()
    for row in rows:
        kinds.append(problems(row.prompt, row.label) + (["duplicate"] if row.prompt in seen else []))
        seen.add(row.prompt)
    train_texts = {rows[i].prompt for i in data["train"]}
    for i in data["test"]:
        if rows[i].prompt in train_texts:
            kinds[i].append("test_in_train")
    return AuthorsSentences([rows[i] for i in data["train"]], [rows[i] for i in data["test"]], kinds,
                            data.get("source", str(path)))
