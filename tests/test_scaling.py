"""Scaling-law fits against SciPy's regression, known synthetic laws and bootstrap coverage."""

import warnings

import numpy as np
import pytest
from scipy import stats

from corekit.scaling import (
    bootstrap,
    coefficient_of_variation,
    collapse_values,
    geometric_means,
    log_law,
    log_law_fit,
    power_law_band,
    power_law_fit,
)


def test_power_law_fit_matches_scipy_linregress_in_log_space():
    rng = np.random.default_rng(0)
    x = np.array([0.3, 0.5, 1.0, 1.5, 2.0, 3.0])
    y = 800 * x ** -1.1 * np.exp(rng.normal(0, 0.1, x.size))
    fit = power_law_fit(x, y)
    ref = stats.linregress(np.log(x), np.log(y))
    assert fit.params["k"] == pytest.approx(ref.slope, rel=1e-10)
    assert fit.params["A"] == pytest.approx(np.exp(ref.intercept), rel=1e-10)
    assert fit.r2 == pytest.approx(ref.rvalue ** 2, rel=1e-10)
    np.testing.assert_allclose(fit.predict(x), np.exp(ref.intercept) * x ** ref.slope)


def test_log_law_fit_recovers_its_parameters():
    p = np.array([31, 43, 53, 61, 79, 89, 101], dtype=float)
    tau = log_law(p, 5000.0, 17.0)
    fit = log_law_fit(p, tau)
    assert fit.params["Omega"] == pytest.approx(5000.0, rel=1e-4)
    assert fit.params["p_c"] == pytest.approx(17.0, rel=1e-4)
    assert fit.r2 == pytest.approx(1.0, abs=1e-9)
    assert log_law(1e6, 5000.0, 17.0) == pytest.approx(5000.0 * 17.0 / 1e6, rel=1e-4)   # Ω·p_c/p for large p


def test_log_law_is_infinite_at_and_below_p_c_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tau = log_law(np.array([10.0, 17.0, 18.0]), 5000.0, 17.0)
    assert np.isinf(tau[:2]).all() and tau[2] == pytest.approx(-5000.0 * np.log(1 - 17 / 18))


def test_bootstrap_interval_covers_the_true_exponent():
    rng = np.random.default_rng(1)
    x = np.array([0.3, 0.5, 1.0, 1.5, 2.0, 3.0])
    covered = 0
    for trial in range(40):
        points = {w: 1000 * w ** -1.0 * np.exp(rng.normal(0, 0.3, 12)) for w in x}
        ci = bootstrap(points, lambda a, b: power_law_fit(a, b).params["k"], n_boot=300, seed=trial)
        est, lo, hi = ci.estimate, ci.low, ci.high
        assert lo <= est <= hi and ci.failed == 0
        covered += lo <= -1.0 <= hi
    assert covered >= 32                                  # nominal 95%: well above 80% of 40 trials


def test_geometric_means_skip_points_without_a_grokked_run():
    x, g = geometric_means({1.0: np.array([2.0, 8.0]), 2.0: np.array([]), 3.0: np.array([5.0])})
    np.testing.assert_allclose(x, [1.0, 3.0])
    np.testing.assert_allclose(g, [4.0, 5.0])
    with pytest.raises(ValueError, match="at least two points"):
        geometric_means({1.0: np.array([2.0]), 2.0: np.array([])})


def test_collapse_and_coefficient_of_variation():
    v = collapse_values([53, 53, 31], [1.0, 2.0, 1.0], [100.0, 50.0, 171.0])
    np.testing.assert_allclose(v, [5300, 5300, 5301])
    assert coefficient_of_variation(v) == pytest.approx(np.std(v) / np.mean(v))
    with pytest.raises(ValueError, match="positive"):
        power_law_fit([1.0, -2.0], [1.0, 2.0])


def test_power_law_band_brackets_the_fit_and_vanishes_without_noise():
    x = np.array([0.5, 1.0, 2.0])
    exact = {w: np.full(4, 100 / w) for w in x}
    low, high = power_law_band(exact, x, n_boot=50).low, power_law_band(exact, x, n_boot=50).high
    np.testing.assert_allclose(low, 100 / x, rtol=1e-9)
    np.testing.assert_allclose(high, 100 / x, rtol=1e-9)
    rng = np.random.default_rng(0)
    noisy = {w: 100 / w * np.exp(rng.normal(0, 0.3, 8)) for w in x}
    band = power_law_band(noisy, x, n_boot=200)
    low, high = band.low, band.high
    assert band.failed == 0
    fit = power_law_fit(*geometric_means(noisy))
    assert (low <= fit.predict(x)).all() and (fit.predict(x) <= high).all() and (high > low).all()


def test_bootstrap_counts_failed_resamples_and_says_what_its_interval_covers():
    points = {1.0: np.array([10.0, 0.0]), 2.0: np.array([5.0])}     # a resample of [0, 0] leaves one point
    slope = lambda a, b: power_law_fit(a, b).params["k"]             # noqa: E731
    ci = bootstrap(points, slope, n_boot=400, seed=3)
    rng, fitted = np.random.default_rng(3), []                        # replay the resamples independently
    for _ in range(400):
        first, second = points[1.0][rng.integers(0, 2, 2)], points[2.0][rng.integers(0, 1, 1)]
        if (first > 0).any():
            fitted.append(np.log(second[0] / np.exp(np.log(first[first > 0]).mean())) / np.log(2.0))
    assert ci.failed == 400 - len(fitted) and 60 < ci.failed < 140   # about a quarter
    np.testing.assert_allclose([ci.low, ci.high], np.quantile(fitted, [0.025, 0.975]), rtol=1e-12)
    assert f"the {len(fitted)} of 400 resamples that could be fitted ({ci.failed} failed" in ci.describe()
    assert power_law_band(points, np.array([1.0, 2.0]), n_boot=400, seed=3).failed == ci.failed
    calls = []

    def converges_once(a, b):                                         # fits the data, no resample
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("no convergence")
        return 0.0
    with pytest.raises(ValueError, match="none of the 10 bootstrap resamples could be fitted"):
        bootstrap(points, converges_once, n_boot=10)


def test_compare_laws_prefers_the_law_that_made_the_data():
    from corekit import scaling as sc
    p = np.array([31.0, 43, 53, 61, 79, 89, 101])
    log_made = sc.log_law(p, 500.0, 20.0)
    power_made = 4000.0 * p ** -1.0
    on_log, on_power = sc.compare_laws(p, log_made), sc.compare_laws(p, power_made)
    assert on_log["loo_log"] < 1e-8 < on_log["loo_power"]
    assert on_log["aic_log"] < on_log["aic_power"]
    assert on_power["loo_power"] < 1e-10
    # held-out error by hand for the power law: refit without each point with numpy's polyfit
    errs = []
    for i in range(len(p)):
        keep = np.arange(len(p)) != i
        k, a = np.polyfit(np.log(p[keep]), np.log(log_made[keep]), 1)
        errs.append((np.log(log_made[i]) - (a + k * np.log(p[i]))) ** 2)
    assert on_log["loo_power"] == pytest.approx(np.mean(errs), rel=1e-9)
    n, rss = len(p), np.sum((np.log(log_made) - np.log(sc.power_law_fit(p, log_made).predict(p))) ** 2)
    assert on_log["aic_power"] == pytest.approx(n * np.log(rss / n) + 4, rel=1e-9)


def test_aic_difference_matches_rss_by_hand_and_is_finite_for_a_law_with_a_pole():
    from corekit import scaling as sc
    p = np.array([31.0, 37, 43, 53])
    tau = sc.log_law(p, 500.0, 25.0) * np.exp([0.02, -0.01, 0.015, -0.02])
    log, power = sc.log_law_fit(p, tau), sc.power_law_fit(p, tau)
    rss = lambda pred: np.sum((np.log(tau) - np.log(pred)) ** 2)  # noqa: E731
    by_hand = len(p) * (np.log(rss(log.predict(p))) - np.log(rss(power.predict(p))))   # the 2k terms cancel
    assert sc.aic_difference(p, tau) == pytest.approx(by_hand, rel=1e-9)
    assert np.isfinite(sc.aic_difference(p[1:], tau[1:]))      # p_c fitted on the rest stays below their min


def test_power_law_aic_null_favours_the_power_law_on_power_law_data():
    from corekit import scaling as sc
    p = np.array([31.0, 43, 53, 61, 79])
    tau = 9000.0 * p ** -1.5 * np.exp([0.01, -0.01, 0.005, 0.0, -0.005])
    draws = sc.power_law_aic_null(p, tau, n_draws=50, seed=1)
    assert draws.shape == (50,)
    assert np.mean(draws[np.isfinite(draws)] > 0) > 0.8
    with pytest.raises(ValueError, match="at least 3 points"):
        sc.power_law_aic_null(p[:2], tau[:2])


def test_log_law_aic_null_favours_the_log_law_on_log_law_data():
    from corekit import scaling as sc
    p = np.array([31.0, 43, 53, 61, 79, 89, 101])
    tau = sc.log_law(p, 500.0, 24.0) * np.exp([0.01, -0.01, 0.005, 0.0, -0.005, 0.01, -0.01])
    draws = sc.log_law_aic_null(p, tau, n_draws=50, seed=1)
    assert draws.shape == (50,)
    assert np.mean(draws[np.isfinite(draws)] <= 0) > 0.8          # the comparison can see a pole in such data
    power = 4000.0 * p ** -2.0 * np.exp([0.01, -0.01, 0.005, 0.0, -0.005, 0.01, -0.01])
    assert sc.aic_difference(p, power) > np.nanpercentile(sc.log_law_aic_null(p, tau, n_draws=50, seed=1), 95)
    with pytest.raises(ValueError, match="at least 3 points"):
        sc.log_law_aic_null(p[:2], tau[:2])


def test_permuted_points_keeps_counts_and_the_pooled_times():
    from corekit import scaling as sc
    points = {1.0: np.array([1.0, 2.0]), 2.0: np.array([3.0]), 3.0: np.array([4.0, 5.0, 6.0])}
    out = sc.permuted_points(points, seed=3)
    assert list(out) == list(points) and [len(v) for v in out.values()] == [2, 1, 3]
    assert sorted(np.concatenate(list(out.values()))) == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert np.array_equal(np.concatenate(list(out.values())),
                          np.random.default_rng(3).permutation(np.arange(1.0, 7.0)))


def test_collapse_ratio_by_hand():
    from corekit import scaling as sc
    points = {(31.0, 1.0): np.array([100.0, 400.0]), (43.0, 1.0): np.array([150.0]), (31.0, 2.0): np.array([0.0, 90.0])}
    products = [200.0 * 31, 150.0 * 43, 90.0 * 62]                 # geometric means 200, 150, 90 (τ = 0 skipped)
    assert sc.collapse_ratio(points) == pytest.approx(max(products) / min(products))
    with pytest.raises(ValueError):
        sc.collapse_ratio({(31.0, 1.0): np.array([5.0])})
