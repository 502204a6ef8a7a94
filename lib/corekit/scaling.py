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
    """Return τ(p) = −Ω·log(1 − p_c/p) (≈ Ω·p_c/p for p ≫ p_c) at p (n,)."""
    return -omega_scale * np.log1p(-p_c / np.asarray(p, dtype=float))


def log_law_fit(p, tau) -> Fit:
    """Return the least-squares fit of τ = −Ω·log(1 − p_c/p) (params Omega, p_c with 0 < p_c < min p; R² in τ space)."""
    p, tau = _check_xy(p, tau)
    guess_pc = 0.5 * p.min()
    guess_omega = float(np.median(tau / -np.log1p(-guess_pc / p)))
    (omega, p_c), _ = curve_fit(log_law, p, tau, p0=(guess_omega, guess_pc),
                                bounds=([0.0, 1e-9], [np.inf, p.min() * (1 - 1e-9)]), maxfev=20_000)
    return Fit({"Omega": float(omega), "p_c": float(p_c)}, _r2(tau, log_law(p, omega, p_c)),
               lambda v: log_law(v, omega, p_c))


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


def bootstrap(points: Mapping[float, np.ndarray], statistic: Callable[[np.ndarray, np.ndarray], float],
              n_boot: int = 1000, level: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """Return (estimate, low, high): ``statistic(x, geometric means)`` and its percentile interval over seed resamples."""
    if not 0 < level < 1 or n_boot < 10:
        raise ValueError(f"level must be in (0, 1) and n_boot >= 10, got {level!r}, {n_boot!r}")
    estimate = statistic(*geometric_means(points))
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_boot):
        resampled = _resample(points, rng)
        try:
            draws.append(statistic(*geometric_means(resampled)))
        except (ValueError, RuntimeError):        # a resample can leave too few points to fit
            continue
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return float(estimate), float(lo), float(hi)


def power_law_band(points: Mapping[float, np.ndarray], xs, n_boot: int = 1000, level: float = 0.95,
                   seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Return (low, high) (n,): the percentile band of bootstrap power-law fits evaluated at xs (n,)."""
    rng, preds = np.random.default_rng(seed), []
    for _ in range(n_boot):
        resampled = _resample(points, rng)
        try:
            preds.append(power_law_fit(*geometric_means(resampled)).predict(xs))
        except ValueError:
            continue
    low, high = np.quantile(preds, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return low, high


def collapse_values(p, weight_decay, tau) -> np.ndarray:
    """Return τ·ω·p (n,) for runs with modulus p, weight decay ω and grokking time τ (n,)."""
    return np.asarray(tau, dtype=float) * np.asarray(weight_decay, dtype=float) * np.asarray(p, dtype=float)


def coefficient_of_variation(values) -> float:
    """Return std / mean of a sample (n,) (population std)."""
    v = np.asarray(values, dtype=float)
    if v.size < 2 or v.mean() == 0:
        raise ValueError("the coefficient of variation needs at least two values with a non-zero mean")
    return float(v.std() / v.mean())
