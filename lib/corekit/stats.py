"""Small statistics the notebooks share: AUROC, Spearman correlation, affine fits and R².

Batched where it helps (a leading dimension of scores, e.g. one row per layer); tested against
scikit-learn and SciPy.
"""
from __future__ import annotations

import numpy as np
from torch import Tensor


def _as_numpy(x) -> np.ndarray:
    if isinstance(x, Tensor):
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

