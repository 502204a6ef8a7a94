"""corekit.tasks.grammar: contexts and UD labels on hand-written sentences, the greedy-word tagger, the
stratified split, PCA and the probe protocol against scikit-learn, and the shipped corpus."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from corekit import probes
from corekit.tasks import grammar

spacy = pytest.importorskip("spacy")


@pytest.fixture(scope="module")
def nlp():
    try:
        return grammar.load_spacy()
    except ImportError as err:
        pytest.skip(str(err))


def word_tokenizer(words):
    """Return a fast word-level tokenizer (offsets included) over ``words``."""
    pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    vocab = {w: i for i, w in enumerate(["<pad>", "<unk>", "<bos>"] + sorted(set(words)))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", bos_token="<bos>")


STORY = "The old dog ran to the park, and Lily saw him. She was happy."


def test_candidates_label_the_next_word(nlp):
    tok = word_tokenizer(STORY.replace(".", " .").replace(",", " ,").split())
    ctx = grammar.candidates(tok, [STORY], nlp, context_tokens=3)
    by_word = {c.word: c for c in ctx}
    # every context holds exactly 3 tokens and its text ends right before its word
    for c in ctx:
        assert len(c.token_ids) == 3
        assert STORY[STORY.index(c.text) + len(c.text):].lstrip().startswith(c.word)
    assert by_word["ran"].upos == "VERB" and by_word["ran"].morph == {"Tense": "Past", "VerbForm": "Fin"}
    assert by_word["park"].upos == "NOUN" and by_word["park"].morph["Number"] == "Sing"
    assert by_word["the"].upos == "DET" and by_word["the"].morph["Definite"] == "Def"
    assert by_word["and"].upos == "CCONJ"
    assert by_word["Lily"].upos == "PROPN"
    assert by_word["him"].upos == "PRON" and by_word["him"].morph["Case"] == "Acc"
    assert by_word[","].upos == "PUNCT"
    assert "The" not in by_word and "old" not in by_word and "dog" not in by_word   # fewer than 3 tokens before
    assert "to" not in by_word                                                       # ADP: not one of the 8 classes
    assert by_word["Lily"].labels() == {"PROPN", "Number=Sing"}


def test_word_class_after(nlp):
    got = grammar.word_class_after(["The big", "She saw the", "He ran", "It was"], [" dog", " cat", ".", "  "], nlp)
    assert got == ["NOUN", "NOUN", "PUNCT", None]
    with pytest.raises(ValueError, match="same length"):
        grammar.word_class_after(["a"], [], nlp)


def test_stratified_split():
    classes = np.array(["A"] * 10 + ["B"] * 6 + ["C"] * 4)
    train, test = probes.stratified_split(classes, seed=3)
    assert len(set(train) & set(test)) == 0 and len(train) + len(test) == 20
    for c, n in (("A", 5), ("B", 3), ("C", 2)):
        assert (classes[train] == c).sum() == n and (classes[test] == c).sum() == n
    again = probes.stratified_split(classes, seed=3)
    assert (again[0] == train).all()
    with pytest.raises(ValueError, match="train_fraction"):
        probes.stratified_split(classes, train_fraction=1.0)


def test_pca_scores_match_sklearn():
    from sklearn.decomposition import PCA
    h = torch.randn(40, 6, generator=torch.Generator().manual_seed(0)) * torch.arange(1, 7)
    ours = probes.pca_scores(h, 3).numpy()
    ref = PCA(3).fit_transform(h.double().numpy()).T
    np.testing.assert_allclose(np.abs(ours), np.abs(ref), rtol=1e-8, atol=1e-8)


def test_evaluate_against_sklearn():
    from sklearn.metrics import average_precision_score, roc_auc_score
    rng = np.random.default_rng(0)
    N = 200
    y = (rng.random(N) < 0.3).astype(int)
    S = rng.normal(size=(4, N))
    S[2] -= 2.0 * y                        # direction 2, with a negative sign, carries the label
    labels = np.stack([y, 1 - y])
    train, test = np.arange(0, N, 2), np.arange(1, N, 2)
    res = probes.evaluate(S, labels, ["y", "not y"], train, test)
    assert res.direction.tolist() == [2, 2] and res.sign.tolist() == [-1.0, 1.0]
    for i, lab in enumerate(labels):
        s = res.sign[i] * S[2]
        assert res.test_auroc[i] == pytest.approx(roc_auc_score(lab[test], s[test]))
        assert res.test_ap[i] == pytest.approx(average_precision_score(lab[test], s[test]))
        best = max(average_precision_score(lab[train], sg * S[k, train]) for k in range(4) for sg in (1, -1))
        assert res.train_ap[i] == pytest.approx(best)
    assert res.macro() == pytest.approx(res.test_auroc.mean())
    with pytest.raises(ValueError, match="positives and negatives"):
        probes.evaluate(S, np.zeros((1, N), dtype=int), ["none"], train, test)
    with pytest.raises(ValueError, match="must agree"):
        probes.evaluate(S, labels, ["y"], train, test)


def test_morph_labels_support():
    ctx = [grammar.Context(0, [1], "x", "w", "NOUN", {"Number": "Sing" if i % 4 < 2 else "Plur"}) for i in range(12)]
    ctx += [grammar.Context(0, [1], "x", "w", "VERB", {"Tense": "Past"}) for _ in range(2)]
    split = (np.arange(0, 14, 2), np.arange(1, 14, 2))
    assert grammar.morph_labels(ctx, split, min_support=3) == ["Number=Plur", "Number=Sing"]
    assert grammar.morph_labels(ctx, split, min_support=1) == ["Number=Plur", "Number=Sing", "Tense=Past"]
    Y = grammar.label_matrix(ctx, ["NOUN", "Tense=Past"])
    assert Y.sum(1).tolist() == [12, 2]


def test_shipped_corpus_and_sources():
    with open(grammar.CORPUS) as fh:
        recipe = json.loads(fh.readline())["recipe"]
    corpus = grammar.load_corpus("shipped")
    assert corpus.recipe == recipe and recipe["seed"] == 0 and recipe["model"] == "gemma-3-270m"
    assert len(corpus.stories) == recipe["openings"] * recipe["samples_per_opening"]
    assert all(s.startswith(o) for s, o in zip(corpus.stories[::recipe["samples_per_opening"]], grammar.OPENINGS))
    with pytest.raises(ValueError, match="source must be one of"):
        grammar.load_corpus("wikipedia")
