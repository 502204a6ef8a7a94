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


@pytest.mark.parametrize("k, n", [(0, 20), (3, 20), (17, 20), (20, 20), (81, 100), (450, 600)])
def test_wilson_interval_solves_the_score_test_inequality(k, n):
    """Wilson's interval is {p : |k/n − p| ≤ z √(p(1 − p)/n)}: its ends are the roots of that equality."""
    from scipy.optimize import brentq
    from scipy.stats import norm
    z, phat = norm.ppf(0.975), k / n
    gap = lambda p: abs(phat - p) - z * np.sqrt(p * (1 - p) / n)  # noqa: E731  (≤ 0 inside the interval)
    low = 0.0 if k == 0 else brentq(gap, 1e-12, min(phat, 1 - 1e-9))
    high = 1.0 if k == n else brentq(gap, max(phat, 1e-9), 1 - 1e-12)
    np.testing.assert_allclose(stats.wilson_interval(k, n), (low, high), atol=1e-9)


def test_wilson_interval_rejects_bad_counts():
    for k, n in ((5, 4), (-1, 4), (1, 0), (1.5, 4)):
        with pytest.raises(ValueError, match="k and n must be integers"):
            stats.wilson_interval(k, n)


def test_bootstrap_interval_covers_the_true_mean_about_95_percent_of_the_time():
    """Coverage on synthetic data: 300 normal samples of 200 items, the mean's interval should hold μ ≈ 95 %."""
    rng = np.random.default_rng(1)
    hits = [lo <= 1.0 <= hi for lo, hi in (stats.bootstrap_interval(np.mean, (rng.normal(1.0, 2.0, 200),),
                                                                     n_boot=400, seed=s) for s in range(300))]
    assert 0.90 <= np.mean(hits) <= 0.99        # binomial sd at 0.95 over 300 draws: 0.013


def test_bootstrap_interval_of_spearman_matches_its_sampling_spread():
    """Paired resampling: the interval's width is close to the 95 % range of ρ over fresh samples of the same law."""
    rng = np.random.default_rng(2)
    cov = [[1, 0.7], [0.7, 1]]
    fresh = [spearmanr(*rng.multivariate_normal([0, 0], cov, 300).T).statistic for _ in range(1000)]
    x, y = rng.multivariate_normal([0, 0], cov, 300).T
    lo, hi = stats.bootstrap_interval(stats.spearman, (x, y), n_boot=1000, seed=0)
    assert lo < stats.spearman(x, y) < hi
    true_width = np.quantile(fresh, 0.975) - np.quantile(fresh, 0.025)
    assert (hi - lo) == pytest.approx(true_width, rel=0.25)


def test_bootstrap_interval_is_seeded_and_checks_its_input():
    x = np.arange(10.0)
    assert stats.bootstrap_interval(np.mean, (x,), seed=3) == stats.bootstrap_interval(np.mean, (x,), seed=3)
    with pytest.raises(ValueError, match="share their first dimension"):
        stats.bootstrap_interval(stats.spearman, (x, x[:5]))


def test_paired_difference_is_the_mean_difference_with_a_percentile_bootstrap_interval():
    x, y = {"a": 0.5, "b": 0.7, "c": 0.9}, {"a": 0.4, "b": 0.4, "c": 0.4}
    mean, (low, high) = stats.paired_difference(x, y, n_boot=4000, seed=1)
    assert mean == pytest.approx(0.3) and 0.1 - 1e-12 <= low < mean < high <= 0.5 + 1e-12
    assert stats.paired_difference({"a": 1.0}, {"a": 0.5}) == (0.5, None)
    with pytest.raises(ValueError, match="the same keys"):
        stats.paired_difference(x, {"a": 0.0})
