"""corekit.stats against scikit-learn and SciPy."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr
from sklearn.metrics import r2_score, roc_auc_score

from corekit import stats

RNG = np.random.default_rng(0)
Y = RNG.integers(0, 2, 80)
SCORES = RNG.normal(size=(4, 80)).round(1)          # rounding makes ties


def test_auroc_matches_sklearn_with_ties_and_batches():
    got = stats.auroc(SCORES, Y)
    assert got.shape == (4,)
    np.testing.assert_allclose(got, [roc_auc_score(Y, s) for s in SCORES], rtol=1e-12)
    assert stats.auroc(torch.tensor(SCORES[0]), torch.tensor(Y)) == pytest.approx(roc_auc_score(Y, SCORES[0]))
    assert stats.auroc(Y.astype(float), Y) == 1.0 and stats.auroc(-Y.astype(float), Y) == 0.0


def test_orient_makes_the_auroc_at_least_one_half():
    sign = stats.orient(SCORES, Y)
    assert np.all(stats.auroc(SCORES * sign[:, None], Y) >= 0.5)


def test_auroc_needs_both_classes():
    with pytest.raises(ValueError, match="both classes"):
        stats.auroc([0.1, 0.2], [1, 1])


def test_spearman_matches_scipy_with_ties():
    a, b = SCORES[0], SCORES[1] + 0.5 * SCORES[0]
    assert stats.spearman(a, b) == pytest.approx(spearmanr(a, b).statistic, rel=1e-12)
    names, m = stats.spearman_matrix({"a": a, "b": b, "c": SCORES[2]})
    assert names == ["a", "b", "c"] and m[0, 1] == m[1, 0] == pytest.approx(spearmanr(a, b).statistic)
    assert np.all(np.diag(m) == 1)


def test_affine_fit_and_r2_match_numpy_and_sklearn():
    x = RNG.normal(size=50)
    y = 2.5 * x - 1.0 + 0.3 * RNG.normal(size=50)
    a, b = stats.affine_fit(x, y)
    np.testing.assert_allclose([a, b], np.polyfit(x, y, 1), rtol=1e-10)
    assert stats.r2(y, a * x + b) == pytest.approx(r2_score(y, a * x + b), rel=1e-12)
    x2 = RNG.normal(size=50)
    y2 = 2.5 * x2 - 1.0
    a_, b_, r2 = stats.held_out_affine_r2(x, y, x2, y2)
    assert (a_, b_) == (a, b) and r2 == pytest.approx(r2_score(y2, a * x2 + b))


def test_flip_rate_counts_only_correct_items():
    before = np.array([1.0, -2.0, 3.0, -1.0, 2.0])   # labels 1, 0, 0, 0, 1: items 0, 1, 3, 4 are right
    after = np.array([-1.0, 2.0, -3.0, -1.0, 1.0])
    rate, n = stats.flip_rate(before, after, [1, 0, 0, 0, 1])
    assert n == 4 and rate == pytest.approx(2 / 4)
