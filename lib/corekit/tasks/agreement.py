"""Subject-verb number agreement: templated prompts that end right before the verb.

Every prompt is a subject noun phrase whose head noun (singular or plural) is followed by an
*attractor* noun of the opposite number, either after a preposition or inside a complete relative
clause, optionally padded with adjectives, with or without a time adverbial that calls for the past
or the present tense::

    The key to the cabinets                      -> is / was      (label 0, singular)
    Yesterday, the old teachers that the student liked  -> were   (label 1, plural)
    The dog that chased the cats                 -> is / was

A relative clause is always complete (its own verb is in the prompt, in the past tense, which marks
no number), so the next word can only be the main verb, which agrees with the head noun: the label.
The pitfalls this avoids: "The keys that the cabinet ..." (continues with the cabinet's verb) and
ungrammatical prompts ("There key near the boxes").

:func:`split` draws a seeded, label-balanced train / test split of distinct prompts; :func:`check`
re-derives each label from the text alone with a small grammar (independent of the generator), and
:func:`spacy_check` confirms it with spaCy's dependency parser. The experiment's readout of a language
model is the verb-number margin (:class:`MarginHead`, :func:`margin_head`), passed to
:mod:`corekit.lm`'s readout functions.
"""
from __future__ import annotations

import random
import re
from dataclasses import asdict, dataclass
from typing import Iterable, Sequence

import torch
from torch import Tensor

from corekit.lm.model import LM, final_logit_softcap, widen
from corekit.tasks.ud import load_spacy

#: Verb forms whose logits make the margin logit(are) + logit(were) − logit(is) − logit(was).
PLURAL_VERBS = ("are", "were")
SINGULAR_VERBS = ("is", "was")

# Nouns: singular -> plural. Chosen to be unambiguous in number (no "sheep", no collective nouns
# such as "team", whose verb may be plural in British English) and mostly nouns only.
PEOPLE = {
    "teacher": "teachers", "doctor": "doctors", "farmer": "farmers", "student": "students",
    "author": "authors", "pilot": "pilots", "lawyer": "lawyers", "singer": "singers",
    "officer": "officers", "senator": "senators", "manager": "managers", "neighbor": "neighbors",
    "customer": "customers", "child": "children", "woman": "women", "man": "men", "nurse": "nurses",
    "driver": "drivers", "painter": "painters", "soldier": "soldiers",
}
ANIMALS = {"dog": "dogs", "cat": "cats", "horse": "horses", "bird": "birds", "rabbit": "rabbits",
           "goat": "goats"}
OBJECTS = {
    "key": "keys", "cabinet": "cabinets", "drawer": "drawers", "door": "doors", "box": "boxes",
    "label": "labels", "bottle": "bottles", "jar": "jars", "picture": "pictures", "book": "books",
    "novel": "novels", "road": "roads", "village": "villages", "city": "cities", "house": "houses",
    "car": "cars", "window": "windows", "room": "rooms", "price": "prices", "ticket": "tickets",
    "lamp": "lamps", "bed": "beds", "painting": "paintings", "wall": "walls", "cover": "covers",
    "album": "albums", "bridge": "bridges", "river": "rivers", "shop": "shops", "farm": "farms",
    "table": "tables", "chair": "chairs", "garden": "gardens", "building": "buildings",
    "mountain": "mountains", "engine": "engines", "truck": "trucks", "photo": "photos",
}
NOUNS = {**PEOPLE, **ANIMALS, **OBJECTS}

ADJECTIVES = {
    "people": ("young", "old", "famous", "new", "tall", "friendly"),
    "animals": ("small", "old", "young", "black", "brown"),
    "objects": ("old", "small", "new", "large", "red", "wooden"),
}

# Prepositional frames: (subject nouns, preposition, attractor nouns).
PP_FRAMES = (
    (("key",), "to", ("cabinet", "drawer", "door", "box", "room", "house", "car")),
    (("label",), "on", ("bottle", "jar", "box", "book")),
    (("picture", "photo", "painting"), "of", ("dog", "child", "building", "mountain", "horse", "bridge")),
    (("author",), "of", ("book", "novel", "album")),
    (("cover",), "of", ("book", "novel", "album")),
    (("road", "bridge"), "to", ("village", "city", "farm")),
    (("price",), "of", ("ticket", "book", "car", "house", "painting")),
    (("lamp",), "near", ("bed", "window", "door", "table", "chair")),
    (("painting", "picture"), "above", ("bed", "table", "door", "chair")),
    (("window", "door"), "of", ("house", "car", "building", "shop", "truck")),
    (("teacher", "doctor", "nurse", "driver"), "of", ("child", "student", "farmer", "soldier")),
    (("dog", "cat", "horse"), "behind", ("house", "wall", "truck", "car")),
    (("manager",), "of", ("shop", "farm", "building")),
    (("engine",), "of", ("car", "truck")),
    (("garden",), "behind", ("house", "shop", "building")),
    (("neighbor",), "of", ("farmer", "senator", "pilot", "singer")),
)

# Relative-clause frames: (subject nouns, past-tense verbs, object-or-subject nouns of the clause).
RC_FRAMES = (
    (tuple(PEOPLE), ("helped", "visited", "praised", "called", "met", "followed", "liked"), tuple(PEOPLE)),
    (tuple(ANIMALS), ("chased", "followed", "bit", "watched"), tuple(ANIMALS)),
)
# Object-relative frames: the clause's subject (the attractor) does something to the head noun.
ORC_FRAMES = (
    (tuple(PEOPLE), ("helped", "visited", "praised", "called", "met", "followed", "liked"), tuple(PEOPLE)),
    (("key", "book", "car", "picture", "photo", "painting", "ticket", "album", "novel"),
     ("lost", "found", "bought", "sold", "liked", "saw"), tuple(PEOPLE)),
    (tuple(ANIMALS), ("fed", "saw", "found", "liked", "followed"), tuple(PEOPLE)),
)

TENSE_PREFIXES = {
    "present": ("", "Today,", "Right now,", "These days,", "Now,"),
    "past": ("Yesterday,", "Last year,", "Back then,", "Last week,", "In 1990,"),
}
CONSTRUCTIONS = ("pp", "subject_relative", "object_relative")


@dataclass(frozen=True)
class Sentence:
    """One agreement prompt; ``label`` is 1 when the next verb must be plural (are / were).

    ``subject`` is the head noun the next verb agrees with and ``subject_char`` its character offset
    in ``prompt``; ``attractor`` is the intervening noun of the opposite number.
    """

    prompt: str
    label: int
    subject: str
    subject_char: int
    attractor: str
    construction: str
    tense: str
    padded: bool

    @property
    def number(self) -> str:
        return "plural" if self.label else "singular"

    def with_verb(self, tense: str | None = None) -> str:
        """Return the prompt completed with the agreeing form of *be* (``tense`` defaults to the prompt's)."""
        verbs = PLURAL_VERBS if self.label else SINGULAR_VERBS
        return f"{self.prompt} {verbs[(tense or self.tense) == 'past']}"

    def as_dict(self) -> dict:
        return asdict(self)


def _category(noun: str) -> str:
    return "people" if noun in PEOPLE else "animals" if noun in ANIMALS else "objects"


def _np(noun: str, plural: bool, adjective: str | None) -> str:
    """Return "the [adjective] noun" in the requested number."""
    word = NOUNS[noun] if plural else noun
    return f"the {adjective} {word}" if adjective else f"the {word}"


def _draw(rng: random.Random, label: int, construction: str, tense: str, padded: bool) -> Sentence:
    """Return one random prompt with the given label, construction, tense and padding."""
    plural_subject = bool(label)
    if construction == "pp":
        subjects, prep, attractors = rng.choice(PP_FRAMES)
        s, a = rng.choice(subjects), rng.choice([n for n in attractors if n not in subjects])
    else:
        frames = RC_FRAMES if construction == "subject_relative" else ORC_FRAMES
        subjects, verbs, attractors = rng.choice(frames)
        s = rng.choice(subjects)
        a = rng.choice([n for n in attractors if n != s])
        verb = rng.choice(verbs)
    adj_s = rng.choice(ADJECTIVES[_category(s)]) if padded and rng.random() < 0.75 else None
    adj_a = rng.choice(ADJECTIVES[_category(a)]) if padded and (adj_s is None or rng.random() < 0.5) else None
    subject_np = _np(s, plural_subject, adj_s)
    attractor_np = _np(a, not plural_subject, adj_a)
    if construction == "pp":
        body = f"{subject_np} {prep} {attractor_np}"
    elif construction == "subject_relative":
        body = f"{subject_np} that {verb} {attractor_np}"
    else:
        body = f"{subject_np} that {attractor_np} {verb}"
    prefix = rng.choice(TENSE_PREFIXES[tense])
    prompt = f"{prefix} {body}" if prefix else body[0].upper() + body[1:]
    subject_word = NOUNS[s] if plural_subject else s
    offset = len(prefix) + 1 if prefix else 0
    subject_char = offset + len(subject_np) - len(subject_word)
    return Sentence(prompt=prompt, label=label, subject=subject_word, subject_char=subject_char,
                    attractor=NOUNS[a] if not plural_subject else a, construction=construction,
                    tense=tense, padded=padded)


def generate(n: int, seed: int = 0, constructions: Sequence[str] = CONSTRUCTIONS) -> list[Sentence]:
    """Return ``n`` distinct prompts (n even), exactly half plural, balanced over constructions and tense.

    The same ``(n, seed, constructions)`` always gives the same list.
    """
    if not isinstance(n, int) or n < 2 or n % 2:
        raise ValueError(f"n must be an even integer ≥ 2 (half singular, half plural), got {n!r}")
    unknown = [c for c in constructions if c not in CONSTRUCTIONS]
    if unknown or not constructions:
        raise ValueError(f"constructions must be a non-empty subset of {CONSTRUCTIONS}, got {list(constructions)}")
    rng = random.Random(seed)
    out: list[Sentence] = []
    seen: set[str] = set()
    cells = [(label, c, t, p) for label in (0, 1) for c in constructions for t in ("present", "past")
             for p in (False, True)]
    per_label = n // 2
    for label in (0, 1):
        mine = [cell for cell in cells if cell[0] == label]
        for i in range(per_label):
            cell = mine[i % len(mine)]
            for _ in range(10_000):
                sentence = _draw(rng, *cell)
                if sentence.prompt not in seen:
                    break
            else:  # pragma: no cover - the template space holds far more than any requested n
                raise ValueError(f"could not draw {n} distinct prompts; ask for fewer")
            seen.add(sentence.prompt)
            out.append(sentence)
    rng.shuffle(out)
    return out


def split(n_train: int, n_test: int, seed: int = 0,
          constructions: Sequence[str] = CONSTRUCTIONS) -> tuple[list[Sentence], list[Sentence]]:
    """Return a (train, test) split of distinct prompts, each half singular and half plural (paper: 600/600)."""
    for name, value in (("n_train", n_train), ("n_test", n_test)):
        if not isinstance(value, int) or value < 2 or value % 2:
            raise ValueError(f"{name} must be an even integer ≥ 2, got {value!r}")
    pool = generate(n_train + n_test, seed=seed, constructions=constructions)
    by_label = [[s for s in pool if s.label == label] for label in (0, 1)]
    train = by_label[0][: n_train // 2] + by_label[1][: n_train // 2]
    test = by_label[0][n_train // 2:] + by_label[1][n_train // 2:]
    rng = random.Random(seed + 1)
    rng.shuffle(train)
    rng.shuffle(test)
    return train, test


def labels(sentences: Iterable[Sentence]) -> list[int]:
    """Return the labels (1 = plural) of ``sentences``."""
    return [s.label for s in sentences]


# ------------------------------------------------------------------------------------------------
# The readout: the verb-number margin of a language model


def verb_tokens(lm: LM, words: Sequence[str] = PLURAL_VERBS + SINGULAR_VERBS, context: str = "The dogs") -> list[int]:
    """Return the tokenizer's own token id of each word as it follows ``context`` (one token each)."""
    tok = lm.tokenizer
    base = tok(context)["input_ids"]
    out = []
    for w in words:
        ids = tok(f"{context} {w}")["input_ids"]
        if ids[: len(base)] != base or len(ids) != len(base) + 1:
            raise ValueError(f"{lm.name}: ' {w}' after {context!r} is not one token ({tok.convert_ids_to_tokens(ids)})")
        out.append(ids[-1])
    return out


class MarginHead:
    """margin = logit(are) + logit(were) − logit(is) − logit(was) from the final (normed) hidden state.

    Reads only the four unembedding rows it needs (plus their bias and the model's final-logit
    soft-capping, if any), so it never forms the full vocabulary's logits.
    """

    def __init__(self, lm: LM, plural: Sequence[str] = PLURAL_VERBS,
                 singular: Sequence[str] = SINGULAR_VERBS):
        ids = verb_tokens(lm, list(plural) + list(singular))
        out = lm.model.get_output_embeddings()
        self.ids = ids
        self.weight = out.weight[ids].detach()
        bias = getattr(out, "bias", None)
        self.bias = None if bias is None else bias[ids].detach()
        self.sign = torch.tensor([1.0] * len(plural) + [-1.0] * len(singular), device=self.weight.device)
        self.lm = lm

    def __call__(self, hidden: Tensor) -> Tensor:
        """Return the margins (...) of final hidden states (..., D)."""
        logits = hidden.to(self.weight.device, self.weight.dtype) @ self.weight.T
        if self.bias is not None:
            logits = logits + self.bias
        return (widen(final_logit_softcap(self.lm, logits)) * self.sign).sum(-1)


_HEADS: dict[int, MarginHead] = {}


def margin_head(lm: LM) -> MarginHead:
    """Return the (cached) agreement margin head of ``lm``."""
    if id(lm) not in _HEADS:
        _HEADS[id(lm)] = MarginHead(lm)
    return _HEADS[id(lm)]


# ------------------------------------------------------------------------------------------------
# Independent checks


_SINGULAR = set(NOUNS)
_PLURAL = set(NOUNS.values())
_ALL_ADJ = {a for adjs in ADJECTIVES.values() for a in adjs}
_ALL_VERBS = {v for frames in (RC_FRAMES, ORC_FRAMES) for _, verbs, _ in frames for v in verbs}
_PREPS = {prep for _, prep, _ in PP_FRAMES}
_PREFIXES = {p for ps in TENSE_PREFIXES.values() for p in ps if p}


def _alternation(words: Iterable[str]) -> str:
    return "(?:" + "|".join(sorted(map(re.escape, words), key=len, reverse=True)) + ")"


_NOUN, _ADJ = _alternation(_SINGULAR | _PLURAL), _alternation(_ALL_ADJ)
_NP = r"the (?:(?P<{0}adj>" + _ADJ + r") )?(?P<{0}>" + _NOUN + ")"
_GRAMMAR = re.compile(
    r"^(?:(?P<prefix>" + _alternation(_PREFIXES) + r") )?[Tt]he (?:(?P<sadj>" + _ADJ + r") )?(?P<s>" + _NOUN + ")"
    r"(?: (?P<prep>" + _alternation(_PREPS) + ") " + _NP.format("a1") +
    r"| that (?P<v1>" + _alternation(_ALL_VERBS) + ") " + _NP.format("a2") +
    r"| that " + _NP.format("a3") + r" (?P<v2>" + _alternation(_ALL_VERBS) + "))$")


def number_of(word: str) -> int:
    """Return 1 for a plural noun of the lexicon, 0 for a singular one; ValueError otherwise."""
    if word in _PLURAL:
        return 1
    if word in _SINGULAR:
        return 0
    raise ValueError(f"{word!r} is not a noun of the agreement lexicon")


def check(sentence: Sentence) -> list[str]:
    """Return the problems found in ``sentence`` (empty = grammatical and correctly labelled).

    Parses the prompt with a grammar of its own (prefix, subject NP, then a prepositional phrase, a
    subject relative clause or an object relative clause, all complete) and re-derives the label
    from the head noun's number, without looking at how the sentence was generated.
    """
    text = sentence.prompt
    problems: list[str] = []
    if text != text.strip() or "  " in text:
        problems.append("stray whitespace")
    if not text[:1].isupper():
        problems.append("does not start with a capital letter")
    m = _GRAMMAR.match(text)
    if m is None:
        return problems + ["does not parse as [adverbial,] NP (PP | that V NP | that NP V)"]
    g = m.groupdict()
    head = g["s"]
    attractor = g["a1"] or g["a2"] or g["a3"]
    if g["prefix"] is None and not text.startswith("The "):
        problems.append("a prompt without an adverbial must start with 'The'")
    if g["prefix"] is not None and not text[len(g["prefix"]) + 1:].startswith("the "):
        problems.append("the determiner after an adverbial must be lower-case")
    if number_of(head) != sentence.label:
        problems.append(f"label {sentence.label} but the head noun {head!r} is "
                        f"{'plural' if number_of(head) else 'singular'}")
    if number_of(attractor) == number_of(head):
        problems.append(f"attractor {attractor!r} has the head noun's number")
    if head != sentence.subject or text[sentence.subject_char:sentence.subject_char + len(head)] != head:
        problems.append(f"subject {sentence.subject!r} at {sentence.subject_char} is not the head noun {head!r}")
    if g["prefix"]:
        want = "past" if g["prefix"] in TENSE_PREFIXES["past"] else "present"
        if want != sentence.tense:
            problems.append(f"tense {sentence.tense!r} but the adverbial calls for the {want}")
    return problems


@dataclass(frozen=True)
class SpacyDisagreement:
    """A prompt whose spaCy analysis disagrees with its label: ``kind`` is "number" or "parse"."""

    sentence: Sentence
    kind: str
    reason: str


def spacy_check(sentences: Sequence[Sentence], nlp=None) -> list[SpacyDisagreement]:
    """Return the prompts whose spaCy analysis disagrees with the label.

    Each prompt is completed with its agreeing form of *be* and " very good."; spaCy must tag the
    labelled head noun with UD ``Number`` equal to the label and the attractor with the other number
    (kind "number"), and its dependency parse must make the head noun the nominal subject of the verb
    (kind "parse"). The small pipeline misparses some relative clauses (it picks the clause's noun
    as the subject of the main verb), so "parse" disagreements are counted, not fatal.
    """
    nlp = nlp or load_spacy()
    out: list[SpacyDisagreement] = []
    texts = [s.with_verb() + " very good." for s in sentences]
    for sentence, doc in zip(sentences, nlp.pipe(texts)):
        by_char = {t.idx: t for t in doc}
        want = "Plur" if sentence.label else "Sing"
        head = by_char.get(sentence.subject_char)
        attractor_char = sentence.prompt.rfind(" " + sentence.attractor) + 1
        attractor = by_char.get(attractor_char)
        if head is None or head.text != sentence.subject or attractor is None:
            out.append(SpacyDisagreement(sentence, "parse", "the head noun or attractor is not one spaCy token"))
            continue
        if head.morph.get("Number") != [want] or attractor.morph.get("Number") != [("Sing", "Plur")[want == "Sing"]]:
            out.append(SpacyDisagreement(sentence, "number", f"spaCy tags {head.text!r} {head.morph.get('Number')} "
                                                             f"and {attractor.text!r} {attractor.morph.get('Number')}"))
            continue
        verb = by_char.get(len(sentence.prompt) + 1)
        if verb is None or verb.lower_ not in PLURAL_VERBS + SINGULAR_VERBS:
            out.append(SpacyDisagreement(sentence, "parse", "the completion does not tokenize as prompt + verb"))
            continue
        subjects = [t for t in verb.children if t.dep_ in ("nsubj", "nsubjpass")]
        if not subjects or subjects[0].idx != sentence.subject_char:
            found = subjects[0].text if subjects else None
            out.append(SpacyDisagreement(sentence, "parse", f"spaCy's subject of {verb.text!r} is {found!r}, "
                                                            f"labelled {sentence.subject!r}"))
    return out


#: Finite forms whose number is unambiguous regardless of the tagger.
_BE_NUMBER = {"is": 0, "was": 0, "has": 0, "does": 0, "are": 1, "were": 1, "have": 1, "do": 1}


def first_verb_number(prompt: str, continuation: str, nlp=None) -> int | None:
    """Return the number (1 plural, 0 singular) of the first finite verb of ``continuation``, None if unmarked.

    The prompt and its continuation are parsed together; the first token of the continuation tagged
    as a verb or auxiliary, outside a relative clause that the continuation opens, decides: forms of
    *be* / *have* / *do* by their spelling, other present-tense verbs by their Penn tag (VBZ singular,
    VBP plural). A verb that marks no number (past tense other than was / were, a modal) or a
    continuation without a verb gives None.
    """
    nlp = nlp or load_spacy()
    doc = nlp(prompt + continuation)
    start = len(prompt)
    for tok in doc:
        if tok.idx < start or tok.pos_ not in ("VERB", "AUX"):
            continue
        if any(a.dep_ in ("relcl", "acl") and a.idx >= start for a in (tok, *tok.ancestors)):
            continue  # inside a relative clause the continuation opens ("... who are running"): not the main verb
        if tok.lower_ in _BE_NUMBER:
            return _BE_NUMBER[tok.lower_]
        if tok.tag_ == "VBZ":
            return 0
        if tok.tag_ == "VBP":
            return 1
        return None
    return None
