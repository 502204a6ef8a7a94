"""corekit.tasks.sva_sentences: the authors' sentences as prompts, and the grammar verdicts, on hand-checked sentences."""
from __future__ import annotations

import json

import pytest

from corekit.tasks import sva_sentences

# (text, label, head, style, the problems a reader finds by hand)
HAND_CHECKED = [
    ("The key to the cabinets", 0, "key", "base", []),
    ("In the past, The keys near the box on most days", 1, "keys", "back", []),
    ("There key near the boxes", 0, "key", "there", ["there_without_verb"]),
    ("In the past, There keys near the box", 1, "keys", "there", ["there_without_verb"]),
    ("The key that the cabinets", 0, "key", "rel", ["unfinished_relative"]),
    ("The keys that guards the cabinet", 1, "keys", "rel", ["relative_verb_disagrees"]),
    ("The key that guards the cabinets", 0, "key", "rel", []),
    ("The women that hides the desk", 1, "women", "rel", ["relative_verb_disagrees"]),
    ("Deep under the old castle, the man behind the guards", 0, "man", "front", []),
]


@pytest.mark.parametrize("text,label,head,style,want", HAND_CHECKED)
def test_problems_match_a_hand_check(text, label, head, style, want):
    assert sva_sentences.problems(text, label) == want


def test_sentence_locates_the_head_as_a_whole_word():
    s = sva_sentences.sentence("Deep under the old castle, the man behind the guards", 0, "man", "front")
    assert s.prompt[s.subject_char:s.subject_char + 3] == "man" and s.attractor == "guards" and s.padded
    women = sva_sentences.sentence("In the past, The women that hides the desk", 1, "women", "rel")
    assert women.subject_char == len("In the past, The ") and women.tense == "past"
    back = sva_sentences.sentence("The keys near the box on most days", 1, "keys", "back")
    assert back.attractor == "box"
    with pytest.raises(ValueError, match="does not occur"):
        sva_sentences.sentence("The key to the cabinets", 0, "man", "base")


def test_load_counts_each_kind_repeats_and_held_out_copies(tmp_path):
    texts = [t for t, *_ in HAND_CHECKED] + ["The key to the cabinets", "There key near the boxes"]
    labels = [y for _, y, *_ in HAND_CHECKED] + [0, 0]
    heads = [h for _, _, h, *_ in HAND_CHECKED] + ["key", "key"]
    styles = [s for *_, s, _ in HAND_CHECKED] + ["base", "there"]
    path = tmp_path / "04_sentences.json"
    path.write_text(json.dumps({"texts": texts, "labels": labels, "heads": heads, "styles": styles,
                                "train": list(range(0, 11, 2)), "test": list(range(1, 11, 2))}))
    got = sva_sentences.load(path)
    assert [s.prompt for s in got.train] == texts[0:11:2]
    counts = got.counts()
    assert counts == {"there_without_verb": 3, "unfinished_relative": 1, "relative_verb_disagrees": 2,
                      "duplicate": 2, "test_in_train": 1}
    assert got.flawed() == 6
    assert got.clean(got.test) == [not want for *_, want in HAND_CHECKED[1::2]] + [True]
    # held out: index 9 repeats index 0 and index 10 repeats index 2, both training texts; index 1 is new
    path.write_text(json.dumps({**json.loads(path.read_text()), "train": [0, 2, 4], "test": [9, 10, 1]}))
    assert sva_sentences.load(path).counts()["test_in_train"] == 2
    path.write_text(json.dumps({"texts": texts}))
    with pytest.raises(ValueError, match="lacks"):
        sva_sentences.load(path)
    with pytest.raises(FileNotFoundError, match="cores_04.py"):
        sva_sentences.load(tmp_path / "missing.json")
