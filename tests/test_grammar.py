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


def test_word_after(nlp):
    got = grammar.word_after(["The big", "She saw the", "He ran", "It was", "Then they"],
                             [" dog", " cats", ".", "  ", " were happy"], nlp)
    assert [g and g[0] for g in got] == ["NOUN", "NOUN", "PUNCT", None, "AUX"]
    assert got[1][1]["Number"] == "Plur" and got[0][1]["Number"] == "Sing"
    assert got[4][1]["Tense"] == "Past"                          # the first word of a longer continuation
    with pytest.raises(ValueError, match="same length"):
        grammar.word_after(["a"], [], nlp)


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


def test_morph_labels_support_purity_and_coverage():
    # Number=Sing: 40 NOUN + 40 VERB (kept); Definite=Def: all 40 DET and nothing else (restates DET);
    # Tense=Past: 20 VERB (support 20); Gender=Fem: 36 of 40 PRON and 4 NOUN (pure, covers 0.9 of PRON)
    upos = ["NOUN"] * 40 + ["VERB"] * 40 + ["DET"] * 40 + ["PRON"] * 40
    morphs = [{"Number": "Sing"} for _ in range(80)] + [{"Definite": "Def"} for _ in range(40)] + [{} for _ in range(40)]
    for i in range(40, 60):
        morphs[i]["Tense"] = "Past"
    for i in list(range(120, 156)) + list(range(4)):
        morphs[i]["Gender"] = "Fem"
    got = grammar.morph_labels(morphs, upos, min_support=30)
    assert got.names == ["Number=Sing"]
    assert got.dropped["Tense=Past"] == "support 20 < 30"
    assert got.dropped["Definite=Def"].startswith("restates DET")
    assert got.dropped["Gender=Fem"].startswith("restates PRON (purity 0.90, coverage 0.90")
    assert grammar.morph_labels(morphs, upos, min_support=30, coverage=0.95).names == ["Gender=Fem", "Number=Sing"]
    assert "Tense=Past" in grammar.morph_labels(morphs, upos, min_support=20).names
    Y = grammar.label_matrix([{u} | {f"{k}={v}" for k, v in m.items()} for u, m in zip(upos, morphs)],
                             ["NOUN", "Tense=Past"])
    assert Y.sum(1).tolist() == [40, 20]
    with pytest.raises(ValueError, match="one entry per example"):
        grammar.morph_labels(morphs, upos[:-1])


def test_average_precision_matches_sklearn():
    from sklearn.metrics import average_precision_score
    rng = np.random.default_rng(1)
    n = 80
    y = rng.random(n) < 0.3
    S = np.stack([rng.normal(size=n) + y, np.round(rng.normal(size=n) + y, 1), np.zeros(n), y * 1.0])  # ties too
    got = probes.average_precision(S, y)
    assert got == pytest.approx([average_precision_score(y, s) for s in S], abs=1e-12)
    with pytest.raises(ValueError, match="with a positive"):
        probes.average_precision(S, np.zeros(n))


def test_weighted_auroc_matches_sklearn_on_repeated_examples():
    from sklearn.metrics import roc_auc_score
    rng = np.random.default_rng(0)
    n = 60
    y = rng.random(n) < 0.4
    for s in (rng.normal(size=n) + y, np.round(rng.normal(size=n) + y, 1)):     # without and with ties
        W = rng.integers(0, 4, size=(5, n))
        got = probes.weighted_auroc(s, y, W)
        for b in range(5):
            idx = np.repeat(np.arange(n), W[b])
            assert got[b] == pytest.approx(roc_auc_score(y[idx], s[idx]), abs=1e-12)
    W = np.zeros((1, n))
    W[0, y] = 1
    assert np.isnan(probes.weighted_auroc(s, y, W)[0])


def test_weighted_average_precision_matches_sklearn_on_repeated_examples():
    from sklearn.metrics import average_precision_score
    rng = np.random.default_rng(2)
    n = 60
    y = rng.random(n) < 0.4
    for s in (rng.normal(size=n) + y, np.round(rng.normal(size=n) + y, 1)):     # without and with ties
        W = rng.integers(0, 4, size=(5, n))
        got = probes.weighted_average_precision(s, y, W)
        for b in range(5):
            idx = np.repeat(np.arange(n), W[b])
            assert got[b] == pytest.approx(average_precision_score(y[idx], s[idx]), abs=1e-12)
    W = np.zeros((1, n))
    W[0, ~y] = 1
    assert np.isnan(probes.weighted_average_precision(s, y, W)[0])


def test_bootstrap_macro_and_the_ap_difference_against_explicit_resamples():
    from sklearn.metrics import average_precision_score, roc_auc_score
    rng = np.random.default_rng(3)
    N = 120
    Y = np.stack([(rng.random(N) < 0.5), (rng.random(N) < 0.3)]).astype(int)
    S = np.stack([rng.normal(size=N) + Y[0], rng.normal(size=N) + Y[1], rng.normal(size=N)])
    splits = [probes.stratified_split(Y[0], seed=s) for s in (0, 1)]
    a = probes.evaluate_splits(S, Y, ["y0", "y1"], splits)
    b = probes.evaluate_splits(S[::-1].copy(), Y, ["y0", "y1"], splits)
    W = probes.bootstrap_weights(np.zeros(N), 200, seed=0)
    point, (lo, hi) = probes.bootstrap_macro(a, Y, W, level=0.9)
    reps = []
    for w in W:
        vals = []
        for (_, test), sa in zip(splits, a.test_scores):
            idx = np.repeat(np.arange(len(test)), w[test])
            vals += [roc_auc_score(Y[i, test][idx], sa[i][idx]) for i in range(2)]
        reps.append(np.mean(vals))
    assert point == pytest.approx(a.auroc().mean())
    assert (lo, hi) == pytest.approx(tuple(np.percentile(reps, [5, 95])), abs=1e-12)
    diff = probes.paired_bootstrap(a, b, Y, W, metric="ap")
    reps = []
    for w in W:
        vals = []
        for (_, test), sa, sb in zip(splits, a.test_scores, b.test_scores):
            idx = np.repeat(np.arange(len(test)), w[test])
            vals += [average_precision_score(Y[i, test][idx], sa[i][idx])
                     - average_precision_score(Y[i, test][idx], sb[i][idx]) for i in range(2)]
        reps.append(np.mean(vals))
    assert diff.macro == pytest.approx((a.ap() - b.ap()).mean())
    assert diff.macro_interval == pytest.approx(tuple(np.percentile(reps, [2.5, 97.5])), abs=1e-12)


def test_random_scores_project_on_unit_directions():
    rng = np.random.default_rng(4)
    h = torch.as_tensor(rng.normal(size=(50, 6)) + 3.0)
    scores = probes.random_scores(h, 4, seed=1)
    hc = (h - h.mean(0)).numpy()
    R, *_ = np.linalg.lstsq(hc, scores.numpy().T, rcond=None)              # recover the directions (6, 4)
    assert np.linalg.norm(R, axis=0) == pytest.approx(np.ones(4), abs=1e-9)
    assert torch.equal(probes.random_scores(h, 4, seed=1), scores)


def test_bootstrap_weights_resample_within_classes():
    classes = np.array(["A"] * 7 + ["B"] * 3 + ["C"] * 5)
    W = probes.bootstrap_weights(classes, 200, seed=1)
    assert W.shape == (200, 15) and (W >= 0).all()
    for c, n in (("A", 7), ("B", 3), ("C", 5)):
        assert (W[:, classes == c].sum(1) == n).all()
    assert abs(W.mean() - 1) < 0.05 and (probes.bootstrap_weights(classes, 200, seed=1) == W).all()


def test_paired_bootstrap_matches_scipy():
    from scipy import stats as sps
    rng = np.random.default_rng(0)
    N = 300
    y = (rng.random(N) < 0.5).astype(int)
    S = np.stack([rng.normal(size=N) + 1.0 * y, rng.normal(size=N) + 0.6 * y])      # family A: strong, B: weaker
    split = [(np.arange(0, N, 2), np.arange(1, N, 2))]
    a = probes.evaluate_splits(S[:1], y[None], ["y"], split)
    b = probes.evaluate_splits(S[1:], y[None], ["y"], split)
    W = probes.bootstrap_weights(np.zeros(N), 4000, seed=0)
    got = probes.paired_bootstrap(a, b, y[None], W)
    test = split[0][1]
    ref = sps.bootstrap((S[0, test], S[1, test], y[test]), lambda s1, s2, t: sps.mannwhitneyu(s1[t == 1], s1[t == 0]).statistic
                        / ((t == 1).sum() * (t == 0).sum()) - sps.mannwhitneyu(s2[t == 1], s2[t == 0]).statistic
                        / ((t == 1).sum() * (t == 0).sum()), paired=True, vectorized=False, n_resamples=4000,
                        method="percentile", random_state=1)
    assert got.macro == pytest.approx(a.auroc()[0, 0] - b.auroc()[0, 0])
    assert got.macro_interval[0] == pytest.approx(ref.confidence_interval.low, abs=0.015)
    assert got.macro_interval[1] == pytest.approx(ref.confidence_interval.high, abs=0.015)
    same = probes.paired_bootstrap(a, a, y[None], W)
    assert same.macro == 0 and same.macro_interval == (0.0, 0.0)


def test_shipped_corpus_and_sources():
    with open(grammar.CORPUS) as fh:
        recipe = json.loads(fh.readline())["recipe"]
    corpus = grammar.load_corpus("shipped")
    assert corpus.recipe == recipe and recipe["seed"] == 0 and recipe["model"] == "gemma-3-270m"
    assert len(corpus.stories) == recipe["openings"] * recipe["samples_per_opening"]
    assert all(s.startswith(o) for s, o in zip(corpus.stories[::recipe["samples_per_opening"]], grammar.OPENINGS))
    with pytest.raises(ValueError, match="source must be one of"):
        grammar.load_corpus("wikipedia")
