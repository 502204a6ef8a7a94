"""Scaling-law fits for grokking times: power laws, τ(p) = −Ω·log(1 − p_c/p), seed bootstraps, collapse.

Each grid point (a value of ω or p) holds the grokking times τ (n,) of its uncensored seeds; a fit
uses the point's geometric mean, and :func:`bootstrap` resamples the seeds of every point (with
replacement, independently per point) to put a confidence interval on any fitted quantity.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np
from scipy.optimize import curve_fit

from corekit import stats


@dataclass
class Fit:
    """A fitted law: its named parameters, R² on the fitted points, and the law as a function."""

    params: dict[str, float]
    r2: float
    predict: Callable[[np.ndarray], np.ndarray]


def _check_xy(x, y) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.ndim != 1 or x.shape != y.shape or len(x) < 2:
        raise ValueError(f"x and y must be (n,) with n >= 2, got {x.shape} and {y.shape}")
    if (x <= 0).any() or (y <= 0).any():
        raise ValueError("a power law needs positive x and y")
    return x, y


def _r2(y: np.ndarray, pred: np.ndarray) -> float:
    """Return :func:`corekit.stats.r2` of a fit, NaN when y is constant (a degenerate sweep still reports its fit)."""
    return stats.r2(y, pred) if ((y - y.mean()) ** 2).sum() > 0 else float("nan")


def power_law_fit(x, y) -> Fit:
    """Return the least-squares fit of log y = log A + k·log x (params A, k; R² in log space) to points x, y (n,)."""
    x, y = _check_xy(x, y)
    k, log_a = np.polyfit(np.log(x), np.log(y), 1)
    return Fit({"A": float(np.exp(log_a)), "k": float(k)}, _r2(np.log(y), log_a + k * np.log(x)),
               lambda v: np.exp(log_a) * np.asarray(v, dtype=float) ** k)


def log_law(p, omega_scale: float, p_c: float) -> np.ndarray:
    """Return τ(p) = −Ω·log(1 − p_c/p) (≈ Ω·p_c/p for p ≫ p_c) at p (n,); inf where p ≤ p_c (the law's "never")."""
    ratio = p_c / np.asarray(p, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        tau = -omega_scale * np.log1p(-np.minimum(ratio, 1.0))
    return np.where(ratio >= 1.0, np.inf, tau)


def log_law_fit(p, tau) -> Fit:
    """Return the least-squares fit of τ = −Ω·log(1 − p_c/p) (params Omega, p_c with 0 < p_c < min p; R² in τ space).

    The fit runs in (A = Ω·p_c, p_c), so that data without a p_c (a pure 1/p law, A/p) converge to
    p_c at its lower bound instead of sending Ω to infinity.
    """
    p, tau = _check_xy(p, tau)

    def law(v, a, p_c):
        return log_law(v, a / p_c, p_c)

    guess_pc = 0.5 * p.min()
    guess_a = float(np.median(tau / -np.log1p(-guess_pc / p))) * guess_pc
    (a, p_c), _ = curve_fit(law, p, tau, p0=(guess_a, guess_pc),
                            bounds=([0.0, 1e-9], [np.inf, p.min() * (1 - 1e-9)]), maxfev=20_000)
    omega = a / p_c
    return Fit({"Omega": float(omega), "p_c": float(p_c)}, _r2(tau, log_law(p, omega, p_c)),
               lambda v: log_law(v, omega, p_c))


def log_aic(y, pred, n_params: int) -> float:
    """Return the AIC n·log(RSS/n) + 2k of predictions ``pred`` (n,) of y (n,) with residuals in log y (Gaussian errors)."""
    y, pred = np.asarray(y, dtype=float), np.asarray(pred, dtype=float)
    rss = float(np.sum((np.log(y) - np.log(pred)) ** 2))
    return len(y) * np.log(max(rss, 1e-300) / len(y)) + 2 * n_params


def leave_one_out_error(x, y, fitter: Callable[[np.ndarray, np.ndarray], Fit]) -> float:
    """Return the mean squared error in log y of each point (n,) predicted by ``fitter`` on the other points.

    NaN when a fit on the remaining points fails (too few of them, or no convergence).
    """
    x, y = _check_xy(x, y)
    errors = []
    for i in range(len(x)):
        keep = np.arange(len(x)) != i
        try:
            pred = float(fitter(x[keep], y[keep]).predict(x[i:i + 1])[0])
        except (ValueError, RuntimeError):
            return float("nan")
        errors.append((np.log(y[i]) - np.log(pred)) ** 2 if pred > 0 else np.inf)
    return float(np.mean(errors))


def compare_laws(p, tau) -> dict[str, float]:
    """Return the power law and the log law τ(p) = −Ω log(1 − p_c/p) side by side on points p, τ (n,).

    Keys: ``aic_power``, ``aic_log`` (:func:`log_aic`, 2 parameters each) and ``loo_power``, ``loo_log``
    (:func:`leave_one_out_error`); lower is better for all four. A log law that does not converge on all
    points gives NaN for its two.
    """
    p, tau = _check_xy(p, tau)
    power = power_law_fit(p, tau)
    out = {"aic_power": log_aic(tau, power.predict(p), 2), "loo_power": leave_one_out_error(p, tau, power_law_fit)}
    try:
        log = log_law_fit(p, tau)
    except RuntimeError:
        return {**out, "aic_log": float("nan"), "loo_log": float("nan")}
    return {**out, "aic_log": log_aic(tau, log.predict(p), 2), "loo_log": leave_one_out_error(p, tau, log_law_fit)}


def aic_difference(p, tau) -> float:
    """Return AIC(log law) − AIC(power law) (:func:`log_aic`, 2 parameters each) on points p, τ (n,); NaN if the log law fails.

    Both laws are scored only at the fitted moduli (all above the fitted p_c), so the difference is finite
    for a law with a pole; negative favours the log law.
    """
    p, tau = _check_xy(p, tau)
    try:
        log = log_law_fit(p, tau)
    except RuntimeError:
        return float("nan")
    return float(log_aic(tau, log.predict(p), 2) - log_aic(tau, power_law_fit(p, tau).predict(p), 2))


def power_law_aic_null(p, tau, n_draws: int = 200, seed: int = 0) -> np.ndarray:
    """Return :func:`aic_difference` (n_draws,) on data drawn from the power law fitted to p, τ (n,), n ≥ 3, without a pole.

    Each draw is the fitted power law times exp(Gaussian noise) whose scale is the fit's residual scatter in
    log τ (√(RSS / (n − 2))); draws where the log law fails are NaN.
    """
    p, tau = _check_xy(p, tau)
    if len(p) < 3:
        raise ValueError(f"a scatter estimate needs at least 3 points, got {len(p)}")
    power = power_law_fit(p, tau)
    base = np.log(power.predict(p))
    scale = float(np.sqrt(np.sum((np.log(tau) - base) ** 2) / (len(p) - 2)))
    rng = np.random.default_rng(seed)
    return np.array([aic_difference(p, np.exp(base + scale * rng.standard_normal(len(p)))) for _ in range(n_draws)])


def log_law_aic_null(p, tau, n_draws: int = 200, seed: int = 0) -> np.ndarray:
    """Return :func:`aic_difference` (n_draws,) on data drawn from the log law fitted to p, τ (n,), n ≥ 3, with its pole.

    The power of the comparison the other way: each draw is the fitted −Ω log(1 − p_c/p) times exp(Gaussian noise)
    whose scale is that fit's residual scatter in log τ (√(RSS / (n − 2))); draws where the log law fails are NaN.
    A positive difference (the power law preferred) is rare on these draws when the comparison can reject the log law.
    """
    p, tau = _check_xy(p, tau)
    if len(p) < 3:
        raise ValueError(f"a scatter estimate needs at least 3 points, got {len(p)}")
    base = np.log(log_law_fit(p, tau).predict(p))
    scale = float(np.sqrt(np.sum((np.log(tau) - base) ** 2) / (len(p) - 2)))
    rng = np.random.default_rng(seed)
    return np.array([aic_difference(p, np.exp(base + scale * rng.standard_normal(len(p)))) for _ in range(n_draws)])


def collapse_ratio(points: Mapping[tuple[float, float], np.ndarray]) -> float:
    """Return max / min over points {(p, ω): τ (n,)} of the geometric mean of τ·ω·p (points without a positive τ skipped)."""
    means = [float(np.exp(np.log(t[t > 0]).mean())) * p * w for (p, w), t in
             ((k, np.asarray(v, dtype=float)) for k, v in points.items()) if (t > 0).any()]
    if len(means) < 2:
        raise ValueError(f"a collapse needs at least two points with a grokked run, got {len(means)}")
    return max(means) / min(means)


def permuted_points(points: Mapping[float, np.ndarray], seed: int = 0) -> dict[float, np.ndarray]:
    """Return ``points`` {x: τ (n_x,)} with every run's τ permuted among all points, each point keeping n_x runs."""
    xs = list(points)
    pooled = np.concatenate([np.asarray(points[x], dtype=float) for x in xs]) if xs else np.zeros(0)
    shuffled = np.random.default_rng(seed).permutation(pooled)
    cuts = np.cumsum([len(points[x]) for x in xs])[:-1]
    return dict(zip(xs, np.split(shuffled, cuts)))


def fittable(points: Mapping[float, np.ndarray]) -> bool:
    """Return whether at least two points hold a positive τ (what a two-parameter fit needs)."""
    return sum(bool((np.asarray(t) > 0).any()) for t in points.values()) >= 2


def geometric_means(points: Mapping[float, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Return (x (n,), geometric mean of each point's positive τ (n,)) over points that have any."""
    keep = [(x, t[t > 0]) for x, t in points.items() if (np.asarray(t) > 0).any()]
    if len(keep) < 2:
        raise ValueError(f"a fit needs at least two points with a grokked run, got {len(keep)}")
    return (np.array([float(x) for x, _ in keep]), np.array([float(np.exp(np.log(t).mean())) for _, t in keep]))


def _resample(points: Mapping[float, np.ndarray], rng: np.random.Generator) -> dict[float, np.ndarray]:
    """Return every point's τ (n,) resampled with replacement (its seeds drawn again)."""
    return {x: t[rng.integers(0, len(t), len(t))] if len(t) else t for x, t in points.items()}


@dataclass(frozen=True)
class Interval:
    """A bootstrap estimate with its percentile interval over the ``n_boot − failed`` resamples that could be fitted.

    A resample fails when it leaves fewer than two points with a grokked run (or the fit raises);
    ``failed`` counts them. With ``failed > 0`` the interval is conditional on a fit existing (it
    is computed on the resamples that fit, not on all of them), which :meth:`describe` says.
    """

    estimate: float
    low: float
    high: float
    n_boot: int
    failed: int

    def describe(self, level: float = 0.95) -> str:
        """Return the interval's basis in words, e.g. "95% interval over 1000 resamples"."""
        if not self.failed:
            return f"{level:.0%} interval over {self.n_boot} resamples"
        return (f"{level:.0%} interval over the {self.n_boot - self.failed} of {self.n_boot} resamples that "
                f"could be fitted ({self.failed} failed; the interval is conditional on a fit)")

    def summary(self, level: float = 0.95) -> str:
        """Return the estimate with its interval and basis, e.g. "−0.94 [−1.05, −0.83] (95% interval over ...)"."""
        return f"{self.estimate:.3g} [{self.low:.3g}, {self.high:.3g}] ({self.describe(level)})"


@dataclass(frozen=True)
class Band:
    """A bootstrap band: ``low`` and ``high`` (n,) over the resamples that could be fitted, and how many ``failed``."""

    low: np.ndarray
    high: np.ndarray
    n_boot: int
    failed: int


def _resampled_values(points: Mapping[float, np.ndarray], compute: Callable[[np.ndarray, np.ndarray], object],
                      n_boot: int, seed: int) -> tuple[list, int]:
    """Return (``compute(x, geometric means)`` of every resample that could be fitted, how many could not)."""
    rng, values, failed = np.random.default_rng(seed), [], 0
    for _ in range(n_boot):
        try:
            values.append(compute(*geometric_means(_resample(points, rng))))
        except (ValueError, RuntimeError):        # too few points left to fit, or no convergence
            failed += 1
    if not values:
        raise ValueError(f"none of the {n_boot} bootstrap resamples could be fitted")
    return values, failed


def bootstrap(points: Mapping[float, np.ndarray], statistic: Callable[[np.ndarray, np.ndarray], float],
              n_boot: int = 1000, level: float = 0.95, seed: int = 0) -> Interval:
    """Return ``statistic(x, geometric means)`` with its percentile interval over seed resamples, failures counted."""
    if not 0 < level < 1 or n_boot < 10:
        raise ValueError(f"level must be in (0, 1) and n_boot >= 10, got {level!r}, {n_boot!r}")
    estimate = statistic(*geometric_means(points))
    draws, failed = _resampled_values(points, statistic, n_boot, seed)
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return Interval(float(estimate), float(lo), float(hi), n_boot, failed)


def power_law_band(points: Mapping[float, np.ndarray], xs, n_boot: int = 1000, level: float = 0.95,
                   seed: int = 0) -> Band:
    """Return the percentile band (n,) of bootstrap power-law fits evaluated at xs (n,), failures counted."""
    preds, failed = _resampled_values(points, lambda x, g: power_law_fit(x, g).predict(xs), n_boot, seed)
    low, high = np.quantile(preds, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return Band(low, high, n_boot, failed)


def collapse_values(p, weight_decay, tau) -> np.ndarray:
    """Return τ·ω·p (n,) for runs with modulus p, weight decay ω and grokking time τ (n,)."""
    return np.asarray(tau, dtype=float) * np.asarray(weight_decay, dtype=float) * np.asarray(p, dtype=float)


def coefficient_of_variation(values) -> float:
    """Return std / mean of a sample (n,) (population std)."""
    v = np.asarray(values, dtype=float)
    if v.size < 2 or v.mean() == 0:
        raise ValueError("the coefficient of variation needs at least two values with a non-zero mean")
    return float(v.std() / v.mean())
