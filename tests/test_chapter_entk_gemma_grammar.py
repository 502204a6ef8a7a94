"""Chapter 07's layer sweep, random-direction null and summaries (corekit.chapters.entk_gemma_grammar) on synthetic
scores and labels, against brute-force AUROCs (pair counting), numpy projections and hand-written expectations."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from corekit.chapters import entk_gemma_grammar as ch
from corekit.probes import bootstrap_weights, stratified_split
from corekit.tasks.grammar import UPOS_CLASSES, MorphLabels

N_PER, K = 6, 3


def _auroc(s: np.ndarray, y: np.ndarray, w: np.ndarray | None = None) -> float:
    """Weighted Mann-Whitney AUROC by counting every (positive, negative) pair; ties count one half."""
    w = np.ones(len(s)) if w is None else w
    pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    num = sum(w[i] * w[j] * ((s[i] > s[j]) + 0.5 * (s[i] == s[j])) for i in pos for j in neg)
    den = w[pos].sum() * w[neg].sum()
    return float(num / den) if den > 0 else float("nan")


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    upos = np.repeat(np.array(UPOS_CLASSES), N_PER)
    N = len(upos)
    pos = np.stack([(upos == c).astype(int) for c in UPOS_CLASSES])                 # (8, N)
    morph = np.zeros((1, N), dtype=int)
    for c in UPOS_CLASSES:
        morph[0, np.flatnonzero(upos == c)[: N_PER // 2]] = 1
    labels = ch.ProbeLabels([stratified_split(upos, seed=s) for s in (0, 1)], pos, MorphLabels(["Number=Sing"], {}),
                            morph, bootstrap_weights(upos, 20, seed=0))
    # a block output per Hugging Face block 0, 1, 2 (residual streams 1, 2, 3), and eNTK-like scores for blocks 1, 2
    residuals = torch.tensor(rng.normal(size=(3, N, 5)))
    sel = SimpleNamespace(residuals=residuals, layers=[1, 2, 3])
    pca = {l: torch.tensor(rng.normal(size=(K, N))) + torch.tensor(pos[:K] * l, dtype=torch.float64) for l in range(3)}
    entk = {l: torch.tensor(rng.normal(size=(K, N))) + torch.tensor(pos[1:K + 1], dtype=torch.float64) for l in (1, 2)}
    results = {l: ch.compare(entk[l], pca[l], labels) for l in (1, 2)}
    spec = SimpleNamespace(layers={l: SimpleNamespace(scores=entk[l]) for l in (1, 2)})
    return SimpleNamespace(labels=labels, sel=sel, pca=pca, entk=entk, results=results, spec=spec, upos=upos)


def _train_macro_ref(probe, scores: np.ndarray, labels) -> float:
    """Mean over splits and word classes of the training AUROC of each split's chosen, signed direction."""
    vals = [_auroc(r.sign[i] * scores[r.direction[i], train], labels.pos[i, train])
            for r, (train, _) in zip(probe.results, labels.splits) for i in range(len(r.names))]
    return float(np.mean(vals))


def test_train_macro_by_pair_counting(data):
    r = data.results[1]
    got = ch.train_macro(r.entk_pos, data.entk[1], data.labels)
    assert got == pytest.approx(_train_macro_ref(r.entk_pos, data.entk[1].numpy(), data.labels), abs=1e-12)


def test_layer_sweep_chooses_on_training_halves(data):
    sweep = ch.layer_sweep(data.results, data.spec, data.pca, data.labels, [1, 2])
    assert list(sweep.pca) == [0, 1, 2] and list(sweep.entk_train) == [1, 2]
    pca_ref = {l: _train_macro_ref(sweep.pca[l], data.pca[l].numpy(), data.labels) for l in range(3)}
    entk_ref = {l: _train_macro_ref(data.results[l].entk_pos, data.entk[l].numpy(), data.labels) for l in (1, 2)}
    for l in range(3):
        assert sweep.pca_train[l] == pytest.approx(pca_ref[l], abs=1e-12)
        # the PCA probes are the word classes' held-out probes of each block's scores
        for r, (_, test) in zip(sweep.pca[l].results, data.labels.splits):
            S = data.pca[l].numpy()
            ref = [_auroc(r.sign[i] * S[r.direction[i], test], data.labels.pos[i, test]) for i in range(8)]
            np.testing.assert_allclose(r.test_auroc, ref, atol=1e-12)
    assert sweep.best_pca == max(range(3), key=lambda l: pca_ref[l])
    assert sweep.best_entk == max((1, 2), key=lambda l: entk_ref[l])


def test_macro_level_point_interval_and_nan(data):
    probe = data.results[1].pca_morph
    Y, W = data.labels.morph_matrix, data.labels.weights
    point, (lo, hi) = ch.macro_level(probe, Y, W)
    assert point == pytest.approx(np.mean([r.test_auroc for r in probe.results]), abs=1e-12)
    reps = [np.mean([_auroc(s[0], Y[0, test], w[test]) for test, s in zip(probe.tests, probe.test_scores)]) for w in W]
    ref_lo, ref_hi = np.nanpercentile(reps, [2.5, 97.5])
    assert (lo, hi) == (pytest.approx(ref_lo, abs=1e-12), pytest.approx(ref_hi, abs=1e-12))
    empty = SimpleNamespace(names=[])
    point, interval = ch.macro_level(empty, Y[:0], W)
    assert np.isnan(point) and np.isnan(interval).all()


def test_random_null_projects_on_seeded_unit_directions(data):
    null = ch.random_null(data.sel, data.pca, data.labels, [1, 2], K, 7, data.results[2], 2)
    assert list(null.results) == [1, 2]
    R = torch.randn(K, 5, generator=torch.Generator().manual_seed(7), dtype=torch.float64).numpy()
    R /= np.linalg.norm(R, axis=1, keepdims=True)
    for l in (1, 2):
        h = data.sel.residuals[l].numpy()                     # block l's output: residual stream l + 1
        S = R @ (h - h.mean(0)).T                             # (K, N)
        for r, (_, test) in zip(null.results[l].entk_pos.results, data.labels.splits):
            ref = [_auroc(r.sign[i] * S[r.direction[i], test], data.labels.pos[i, test]) for i in range(8)]
            np.testing.assert_allclose(r.test_auroc, ref, atol=1e-12)
    assert set(null.levels) == {(f, k) for f in ("entk", "pca", "random") for k in ("pos", "morph")}
    head, rand = data.results[2], null.results[2]
    for family, probe in (("entk", head.entk_pos), ("pca", head.pca_pos), ("random", rand.entk_pos)):
        assert null.levels[family, "pos"][0] == pytest.approx(np.mean([r.test_auroc for r in probe.results]))
    assert null.levels["random", "morph"][0] == pytest.approx(np.mean([r.test_auroc for r in rand.entk_morph.results]))


def test_label_table_rows(data):
    r = data.results[1]
    lines = ch.label_table(r.entk_pos, r.pca_pos, r.pos)
    assert len(lines) == 1 + 8 and "eNTK AUROC" in lines[0]
    for i, (line, name) in enumerate(zip(lines[1:], UPOS_CLASSES)):
        e_auc = np.mean([res.test_auroc[i] for res in r.entk_pos.results])
        p_ap = np.mean([res.test_ap[i] for res in r.pca_pos.results])
        fields = line.split()
        assert fields[0] == name and fields[1] == f"{e_auc:.3f}" and fields[-1] == f"{p_ap:.3f}"
        assert fields[3] == f"{r.pos.diff[i]:+.3f}"


def test_behind_by_hand():
    assert ch.behind(["a", "b", "c", "d"], np.array([0.5, 0.7, 0.6, 0.9]), np.array([0.6, 0.7, 0.5, 1.0])) == \
        ["a", "b", "d"]
    assert ch.behind([], np.array([]), np.array([])) == []


def test_run_summary_sentences(data):
    head = data.results[1]
    spec = SimpleNamespace(relative_residuals=np.array([1e-4, 3e-4]), pairs=SimpleNamespace(n_matvecs=40))
    lines = ch.run_summary("a setting", spec, head, data.labels, 30, 48, {"NOUN": 5}, 6)
    pos_e = np.mean([r.test_auroc for r in head.entk_pos.results], axis=0)
    pos_p = np.mean([r.test_auroc for r in head.pca_pos.results], axis=0)
    behind = [c for c, e, p in zip(UPOS_CLASSES, pos_e, pos_p) if e <= p]
    assert len(lines) == 4
    assert lines[0].startswith("On a setting,") and "3.0e-04 after 40 products" in lines[0]
    assert f"macro AUROC {pos_e.mean():.3f} against PCA's {pos_p.mean():.3f}" in lines[0]
    assert lines[1].startswith(f"eNTK is ahead on {int((pos_e > pos_p).sum())} of 8 classes")
    assert (f"PCA is level or ahead on {', '.join(behind)}" in lines[1]) == bool(behind)
    assert lines[2].startswith("Morphology (1 label(s)") and lines[3] == "The corpus ran short for NOUN (5 of 6)."
    no_morph = SimpleNamespace(morph=MorphLabels([], {}))
    empty = SimpleNamespace(**{**vars(head), "entk_morph": SimpleNamespace(auroc=lambda: np.zeros((2, 0))),
                               "pca_morph": SimpleNamespace(auroc=lambda: np.zeros((2, 0)))})
    lines = ch.run_summary("s", spec, empty, no_morph, 30, 48, {}, 6)
    assert lines[-1] == "No morphology label passes support ≥ 30 and the purity/coverage filter at N = 48."
