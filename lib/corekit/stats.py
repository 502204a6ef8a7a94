"""Small statistics the notebooks share: AUROC, Spearman correlation, affine fits and R², Wilson and bootstrap intervals
(of a mean, of a paired difference, of a difference between two kinds of model pair).

Batched where it helps (a leading dimension of scores, e.g. one row per layer); tested against
scikit-learn and SciPy.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np


def _as_numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):                      # a torch tensor (torch is not imported here)
        x = x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=float)


def _ranks(x: np.ndarray) -> np.ndarray:
    """Return average ranks (1-based, ties share their mean rank) along the last axis."""
    order = np.argsort(x, axis=-1, kind="mergesort")
    sorted_x = np.take_along_axis(x, order, axis=-1)
    ranks = np.empty_like(x, dtype=float)
    flat_x, flat_o, flat_r = sorted_x.reshape(-1, x.shape[-1]), order.reshape(-1, x.shape[-1]), ranks.reshape(-1, x.shape[-1])
    for row in range(flat_x.shape[0]):
        v = flat_x[row]
        starts = np.r_[0, np.flatnonzero(np.diff(v)) + 1]
        ends = np.r_[starts[1:], len(v)]
        avg = np.repeat((starts + ends + 1) / 2.0, ends - starts)
        flat_r[row, flat_o[row]] = avg
    return flat_r.reshape(x.shape)


def auroc(scores, labels) -> np.ndarray | float:
    """Return the area under the ROC curve of ``scores`` (..., N) for binary ``labels`` (N,) (1 = positive).

    Ties count one half (the Mann-Whitney statistic); a leading dimension gives one AUROC per row.
    """
    s, y = _as_numpy(scores), _as_numpy(labels).astype(bool)
    if y.ndim != 1 or s.shape[-1] != y.shape[0]:
        raise ValueError(f"scores (..., N) and labels (N,) must agree, got {s.shape} and {y.shape}")
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError("labels must hold both classes")
    r = _ranks(s)
    out = (r[..., y].sum(-1) - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
    return float(out) if np.ndim(out) == 0 else out


def orient(scores, labels) -> np.ndarray | float:
    """Return the sign (+1 / −1, per row) that makes ``scores`` rank the positives higher (AUROC ≥ 0.5)."""
    a = np.asarray(auroc(scores, labels))
    sign = np.where(a >= 0.5, 1.0, -1.0)
    return float(sign) if sign.ndim == 0 else sign


def spearman(x, y) -> float:
    """Return Spearman's rank correlation of two samples (N,) (ties get average ranks)."""
    x, y = _as_numpy(x), _as_numpy(y)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 3:
        raise ValueError(f"x and y must be two samples of the same length ≥ 3, got {x.shape} and {y.shape}")
    rx, ry = _ranks(x), _ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    return float((rx @ ry) / np.sqrt((rx @ rx) * (ry @ ry)))


def spearman_matrix(columns: dict) -> tuple[list[str], np.ndarray]:
    """Return (names, the matrix of pairwise Spearman correlations) of named samples of equal length."""
    names = list(columns)
    out = np.eye(len(names))
    for i, a in enumerate(names):
        for j in range(i + 1, len(names)):
            out[i, j] = out[j, i] = spearman(columns[a], columns[names[j]])
    return names, out


def affine_fit(x, y) -> tuple[float, float]:
    """Return (a, b) minimising Σ (a·x + b − y)² over samples x, y (N,)."""
    x, y = _as_numpy(x), _as_numpy(y)
    A = np.stack([x, np.ones_like(x)], axis=1)
    (a, b), *_ = np.linalg.lstsq(A, y, rcond=None)
    return float(a), float(b)


def r2(y_true, y_pred) -> float:
    """Return the coefficient of determination 1 − SS_res / SS_tot (can be negative out of sample)."""
    y, p = _as_numpy(y_true), _as_numpy(y_pred)
    ss_tot = ((y - y.mean()) ** 2).sum()
    if ss_tot == 0:
        raise ValueError("y_true is constant: R² is undefined")
    return float(1 - ((y - p) ** 2).sum() / ss_tot)


def held_out_affine_r2(x_train, y_train, x_test, y_test) -> tuple[float, float, float]:
    """Return (a, b, R² on the test sample) of y ≈ a·x + b fitted on the training sample."""
    a, b = affine_fit(x_train, y_train)
    return a, b, r2(y_test, a * _as_numpy(x_test) + b)


def flip_rate(before, after, labels) -> tuple[float, int]:
    """Return (share of correctly handled items whose sign reverses, how many were correctly handled).

    An item is handled correctly when sign(before) agrees with its label (positive = label 1); it
    reverses when sign(after) is the opposite of sign(before).
    """
    b, a, y = _as_numpy(before), _as_numpy(after), _as_numpy(labels)
    correct = (b > 0) == (y > 0.5)
    n = int(correct.sum())
    if n == 0:
        return float("nan"), 0
    return float(((np.sign(a) != np.sign(b)) & (a != 0))[correct].mean()), n



def wilson_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Return the Wilson score interval (low, high) of a binomial proportion k / n at confidence ``level``."""
    from scipy.stats import norm
    if not (isinstance(n, (int, np.integer)) and n >= 1 and isinstance(k, (int, np.integer)) and 0 <= k <= n):
        raise ValueError(f"k and n must be integers with 0 ≤ k ≤ n and n ≥ 1, got k={k!r}, n={n!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    z = float(norm.ppf(0.5 + level / 2))
    p, z2 = k / n, z * z / n
    centre = (p + z2 / 2) / (1 + z2)
    half = z * np.sqrt(p * (1 - p) / n + z2 / (4 * n)) / (1 + z2)
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))


def bootstrap_interval(statistic, samples: tuple, n_boot: int = 2000, level: float = 0.95,
                       seed: int = 0) -> tuple[float, float]:
    """Return the percentile bootstrap interval (low, high) of ``statistic(*samples)``, resampling the N paired items.

    ``samples`` are arrays (N, ...) indexed by the same N items (e.g. two models' scores on the same
    prompts); each of the ``n_boot`` replicates draws N items with replacement (seeded).
    """
    arrays = [_as_numpy(s) for s in samples]
    n = arrays[0].shape[0]
    if any(a.shape[0] != n for a in arrays) or n < 2:
        raise ValueError(f"samples must share their first dimension N ≥ 2, got {[a.shape for a in arrays]}")
    if not isinstance(n_boot, int) or n_boot < 1:
        raise ValueError(f"n_boot must be a positive integer, got {n_boot!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    rng = np.random.default_rng(seed)
    values = np.array([statistic(*(a[idx] for a in arrays)) for idx in rng.integers(0, n, size=(n_boot, n))])
    low, high = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def pair_difference(values: Mapping[tuple[int, int], float], same: Mapping[tuple[int, int], bool],
                    n_boot: int = 2000, seed: int = 0) -> tuple[float, tuple[float, float] | None]:
    """Return (mean over ``same`` pairs − mean over the other pairs, its 95 % bootstrap interval over models).

    ``values`` and ``same`` are keyed by ordered pairs of model indices. A resample draws the models with
    replacement and keeps the pairs of two different draws; resamples without both kinds of pair are skipped, and the
    interval is None when fewer than half of them have both.
    """
    kinds = [same[k] for k in values]
    if all(kinds) or not any(kinds):
        raise ValueError("same: expected pairs of both kinds (some sharing their keys, some not)")
    def difference(pairs: list[tuple[int, int]]) -> float | None:
        a = [values[k] for k in pairs if same[k]]
        b = [values[k] for k in pairs if not same[k]]
        return float(np.mean(a) - np.mean(b)) if a and b else None

    observed = difference(list(values))
    models = sorted({i for pair in values for i in pair})
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_boot):
        chosen = rng.choice(models, size=len(models), replace=True)
        pairs = [(i, j) for x, i in enumerate(chosen) for y, j in enumerate(chosen) if x != y and (i, j) in values]
        d = difference(pairs)
        if d is not None:
            draws.append(d)
    if len(draws) < n_boot / 2:
        return observed, None
    return observed, (float(np.quantile(draws, 0.025)), float(np.quantile(draws, 0.975)))


def paired_difference(x: Mapping[str, float], y: Mapping[str, float], n_boot: int = 2000,
                      seed: int = 0) -> tuple[float, tuple[float, float] | None]:
    """Return (mean over the keys of x[k] − y[k], its 95 % bootstrap interval over the keys), the interval None for
    fewer than two keys."""
    keys = sorted(x)
    if sorted(y) != keys or not keys:
        raise ValueError(f"x and y: expected the same keys, at least one, got {keys} and {sorted(y)}")
    d = np.array([x[k] - y[k] for k in keys], dtype=float)
    if len(d) < 2:
        return float(d.mean()), None
    draws = np.random.default_rng(seed).choice(d, size=(n_boot, len(d)), replace=True).mean(1)
    return float(d.mean()), (float(np.quantile(draws, 0.025)), float(np.quantile(draws, 0.975)))
