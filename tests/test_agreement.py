"""The agreement sentence generator: seeded, balanced, grammatical, labelled by the noun the verb agrees with."""
from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from corekit.tasks import agreement

TRAIN, TEST = agreement.split(600, 600, seed=0)


def test_split_is_seeded_balanced_and_disjoint():
    again = agreement.split(600, 600, seed=0)
    assert (TRAIN, TEST) == again
    assert agreement.split(600, 600, seed=1) != (TRAIN, TEST)
    for part in (TRAIN, TEST):
        assert Counter(agreement.labels(part)) == {0: 300, 1: 300}
        assert set(Counter(s.construction for s in part)) == set(agreement.CONSTRUCTIONS)
        assert set(Counter(s.tense for s in part)) == {"present", "past"}
    prompts = [s.prompt for s in TRAIN + TEST]
    assert len(set(prompts)) == len(prompts), "prompts repeat"


def test_every_sentence_is_grammatical_and_labelled_by_its_head_noun():
    problems = {s.prompt: agreement.check(s) for s in TRAIN + TEST}
    assert not {p: v for p, v in problems.items() if v}


def test_every_attractor_has_the_other_number_and_the_prompt_ends_before_the_verb():
    for s in TRAIN + TEST:
        assert agreement.number_of(s.subject) == s.label
        assert agreement.number_of(s.attractor) == 1 - s.label
        assert s.prompt.split()[-1] not in agreement.PLURAL_VERBS + agreement.SINGULAR_VERBS
        assert s.prompt[s.subject_char:].split()[0] == s.subject
        # a relative clause is complete: the prompt never ends with "that" or "that the NOUN"
        words = s.prompt.split()
        if s.construction == "object_relative":
            assert words[-1] not in agreement.NOUNS and words[-1] not in agreement.NOUNS.values()


@pytest.mark.parametrize("corrupt", [
    lambda s: dataclasses.replace(s, label=1 - s.label),                                   # wrong label
    lambda s: dataclasses.replace(s, prompt=s.prompt.replace("the ", "There ", 1)),       # "There key ..."
    lambda s: dataclasses.replace(s, prompt=s.prompt.rsplit(" ", 1)[0]),                  # truncated clause
    lambda s: dataclasses.replace(s, prompt=s.prompt + "  "),                             # stray spaces
    lambda s: dataclasses.replace(s, subject_char=s.subject_char + 1),                    # wrong offset
])
def test_check_catches_corrupted_sentences(corrupt):
    caught = [bool(agreement.check(corrupt(s))) for s in TRAIN[:60]]
    assert all(caught)


def test_check_catches_a_relative_clause_whose_verb_is_missing():
    bad = agreement.Sentence(prompt="The keys that the cabinet", label=1, subject="keys", subject_char=4,
                             attractor="cabinet", construction="object_relative", tense="present", padded=False)
    assert agreement.check(bad)


def test_spacy_confirms_the_labels_on_a_sample():
    pytest.importorskip("spacy")
    try:
        nlp = agreement.load_spacy()
    except ImportError as err:
        pytest.skip(str(err))
    sample = TRAIN[:150]
    found = agreement.spacy_check(sample, nlp)
    assert not [d for d in found if d.kind == "number"], "spaCy's Number disagrees with a label"
    parse = [d for d in found if d.kind == "parse"]
    assert not [d for d in parse if d.sentence.construction == "pp"], [d.reason for d in parse]
    relative = [s for s in sample if s.construction != "pp"]
    assert len(parse) <= 0.15 * len(relative), [(d.sentence.prompt, d.reason) for d in parse]


def test_first_verb_number_tags_continuations():
    pytest.importorskip("spacy")
    try:
        nlp = agreement.load_spacy()
    except ImportError as err:
        pytest.skip(str(err))
    prompt = "The key to the cabinets"
    assert agreement.first_verb_number(prompt, " is on the table.", nlp) == 0
    assert agreement.first_verb_number(prompt, " were lost.", nlp) == 1
    assert agreement.first_verb_number(prompt, " opens the door.", nlp) == 0
    assert agreement.first_verb_number(prompt, " open the door.", nlp) == 1
    assert agreement.first_verb_number(prompt, " opened the door.", nlp) is None
    assert agreement.first_verb_number(prompt, ", and the lock.", nlp) is None


@pytest.mark.parametrize("kwargs, message", [
    (dict(n=7), "even"), (dict(n=10, constructions=["cleft"]), "constructions"),
])
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        agreement.generate(**kwargs)
    with pytest.raises(ValueError, match="n_train"):
        agreement.split(5, 10)
