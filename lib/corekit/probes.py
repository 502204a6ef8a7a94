"""The probe protocol: every candidate direction gives one score per example; for each binary label the
direction and its sign are chosen on the training half by average precision, and AUROC / AP are
reported on the test half (:func:`evaluate`). :func:`pca_scores` gives the principal-component baseline.
Over several stratified splits (:func:`evaluate_splits`), :func:`paired_bootstrap` puts a confidence
interval on the difference between two families of directions by resampling the contexts
(:func:`bootstrap_weights`, :func:`weighted_auroc`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from torch import Tensor

from corekit import stats


def stratified_split(classes: Sequence, seed: int = 0, train_fraction: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Return (train, test) index arrays that split every class in ``classes`` (N,) at ``train_fraction`` (seeded)."""
    if not 0 < train_fraction < 1:
        raise ValueError(f"train_fraction must be in (0, 1), got {train_fraction}")
    classes = np.asarray(classes)
    rng = np.random.default_rng(seed)
    train, test = [], []
    for c in sorted(set(classes.tolist())):
        idx = rng.permutation(np.flatnonzero(classes == c))
        cut = int(round(len(idx) * train_fraction))
        train += idx[:cut].tolist()
        test += idx[cut:].tolist()
    return np.sort(train), np.sort(test)


def pca_scores(h: Tensor, k: int) -> Tensor:
    """Return the projections (k, N) of the centred states h (N, d) on their top-k principal directions."""
    if h.dim() != 2 or not 1 <= k <= min(h.shape):
        raise ValueError(f"h must be (N, d) and k in 1..min(N, d), got {tuple(h.shape)} and k={k}")
    hc = h.double() - h.double().mean(0)
    _, _, Vt = torch.linalg.svd(hc, full_matrices=False)
    return (hc @ Vt[:k].T).T


def random_scores(h: Tensor, k: int, seed: int) -> Tensor:
    """Return the projections (k, N) of the centred states h (N, d) on k random unit directions (seeded): the family of
    directions without any learned structure, beside :func:`pca_scores`."""
    if h.dim() != 2 or k < 1:
        raise ValueError(f"h must be (N, d) and k ≥ 1, got {tuple(h.shape)} and k={k}")
    R = torch.randn(k, h.shape[1], generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    R = R / R.norm(dim=1, keepdim=True)
    hc = h.double().cpu() - h.double().cpu().mean(0)
    return R @ hc.T


@dataclass
class ProbeResult:
    """Per label: the chosen direction and sign, train AP (the selection figure), test AUROC and test AP."""

    names: list[str]
    direction: np.ndarray
    sign: np.ndarray
    train_ap: np.ndarray
    test_auroc: np.ndarray
    test_ap: np.ndarray

    def macro(self, names: Sequence[str] | None = None) -> float:
        """Return the mean test AUROC over ``names`` (default: every label)."""
        idx = [self.names.index(n) for n in (names or self.names)]
        return float(np.mean(self.test_auroc[idx]))

    def train_auroc_macro(self, scores: np.ndarray, labels: np.ndarray, train: np.ndarray) -> float:
        """Return the mean *training* AUROC of the chosen directions (the figure a layer choice may use)."""
        vals = [stats.auroc(self.sign[i] * scores[self.direction[i], train], labels[i, train])
                for i in range(len(self.names))]
        return float(np.mean(vals))


def average_precision(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Return the average precision (R,) of each row of ``scores`` (R, n) for binary ``labels`` (n,): the step-wise
    Σ (R_k − R_{k−1}) P_k over distinct thresholds (scikit-learn's definition; tied scores share one threshold)."""
    S, y = np.atleast_2d(np.asarray(scores, dtype=float)), np.asarray(labels).astype(bool)
    if y.ndim != 1 or S.shape[1] != len(y) or not y.any():
        raise ValueError(f"scores (R, n) and labels (n,) with a positive must agree, got {S.shape} and {y.shape}")
    order = np.argsort(-S, axis=1, kind="mergesort")
    s_sorted, y_sorted = np.take_along_axis(S, order, axis=1), y[order]
    n = len(y)
    ends = np.ones_like(s_sorted, dtype=bool)
    ends[:, :-1] = s_sorted[:, :-1] != s_sorted[:, 1:]
    tp = np.cumsum(y_sorted, axis=1)
    precision = tp / np.arange(1, n + 1)
    group_end = np.minimum.accumulate(np.where(ends, np.arange(n), n)[:, ::-1], axis=1)[:, ::-1]
    return (y_sorted * np.take_along_axis(precision, group_end, axis=1)).sum(1) / y.sum()


def evaluate(scores, labels: np.ndarray, names: Sequence[str], train: np.ndarray, test: np.ndarray) -> ProbeResult:
    """Return, for each binary label row of ``labels`` (L, N), the direction of ``scores`` (K, N) and sign with the
    best average precision on ``train``, and its AUROC and AP on ``test``."""
    S = scores.detach().cpu().double().numpy() if isinstance(scores, Tensor) else np.asarray(scores, dtype=float)
    labels = np.asarray(labels)
    if S.ndim != 2 or labels.ndim != 2 or S.shape[1] != labels.shape[1] or len(names) != labels.shape[0]:
        raise ValueError(f"scores (K, N), labels (L, N) and names (L,) must agree, got {S.shape}, {labels.shape}, "
                         f"{len(names)}")
    signed = np.stack([S, -S], axis=1).reshape(-1, S.shape[1])             # rows (k, +1), (k, −1), ...
    out = {k: [] for k in ("direction", "sign", "train_ap", "test_auroc", "test_ap")}
    for y in labels:
        for idx, half in ((train, "train"), (test, "test")):
            if y[idx].min() == y[idx].max():
                raise ValueError(f"every label needs positives and negatives in the {half} half")
        aps = average_precision(signed[:, train], y[train])
        best = int(np.argmax(aps))
        k, sign = best // 2, (1.0, -1.0)[best % 2]
        out["direction"].append(k)
        out["sign"].append(sign)
        out["train_ap"].append(float(aps[best]))
        out["test_auroc"].append(stats.auroc(sign * S[k, test], y[test]))
        out["test_ap"].append(float(average_precision(sign * S[k, test], y[test])[0]))
    return ProbeResult(list(names), **{k: np.array(v) for k, v in out.items()})


@dataclass
class SplitProbes:
    """One family of directions probed on several stratified splits: per split its test indices and
    :class:`ProbeResult`, and the chosen, signed scores on the test half (L, n_test) that AUROC reads."""

    names: list[str]
    tests: list[np.ndarray]
    results: list[ProbeResult]
    test_scores: list[np.ndarray]

    def auroc(self) -> np.ndarray:
        """Return the test AUROC (splits, L)."""
        return np.stack([r.test_auroc for r in self.results])

    def ap(self) -> np.ndarray:
        """Return the test average precision (splits, L)."""
        return np.stack([r.test_ap for r in self.results])


def evaluate_splits(scores, labels: np.ndarray, names: Sequence[str],
                    splits: Sequence[tuple[np.ndarray, np.ndarray]]) -> SplitProbes:
    """Return :func:`evaluate` of ``scores`` (K, N) on ``labels`` (L, N) for every (train, test) split of ``splits``."""
    S = scores.detach().cpu().double().numpy() if isinstance(scores, Tensor) else np.asarray(scores, dtype=float)
    results = [evaluate(S, labels, names, train, test) for train, test in splits]
    chosen = [r.sign[:, None] * S[r.direction][:, test] for r, (_, test) in zip(results, splits)]
    return SplitProbes(list(names), [test for _, test in splits], results, chosen)


def bootstrap_weights(classes: Sequence, n_boot: int, seed: int = 0) -> np.ndarray:
    """Return resampling counts (n_boot, N): each row draws, within every class of ``classes`` (N,), as many
    examples with replacement as the class holds."""
    if not isinstance(n_boot, int) or n_boot < 1:
        raise ValueError(f"n_boot must be a positive integer, got {n_boot!r}")
    classes = np.asarray(classes)
    rng = np.random.default_rng(seed)
    W = np.zeros((n_boot, len(classes)), dtype=np.int64)
    for c in sorted(set(classes.tolist())):
        idx = np.flatnonzero(classes == c)
        draws = rng.integers(0, len(idx), size=(n_boot, len(idx)))
        np.add.at(W, (np.arange(n_boot)[:, None], idx[draws]), 1)
    return W


def weighted_auroc(scores: np.ndarray, labels: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Return the AUROC (B,) of ``scores`` (n,) for binary ``labels`` (n,) with each example counted ``weights``
    (B, n) times (ties count one half); NaN where a row weighs no positive or no negative."""
    s, y, W = np.asarray(scores, dtype=float), np.asarray(labels).astype(bool), np.asarray(weights, dtype=float)
    if s.ndim != 1 or y.shape != s.shape or W.ndim != 2 or W.shape[1] != len(s):
        raise ValueError(f"scores (n,), labels (n,) and weights (B, n) must agree, got {s.shape}, {y.shape}, {W.shape}")
    _, group = np.unique(s, return_inverse=True)
    G = group.max() + 1
    pos, neg = np.zeros((G, len(W))), np.zeros((G, len(W)))
    if G == len(s):                                       # no ties: one example per group
        pos[group[y]], neg[group[~y]] = W[:, y].T, W[:, ~y].T
    else:
        np.add.at(pos, group[y], W[:, y].T)
        np.add.at(neg, group[~y], W[:, ~y].T)
    below = np.cumsum(neg, axis=0) - neg
    den = pos.sum(0) * neg.sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (pos * (below + 0.5 * neg)).sum(0) / den, np.nan)


def weighted_average_precision(scores: np.ndarray, labels: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Return the average precision (B,) of ``scores`` (n,) for binary ``labels`` (n,) with each example counted
    ``weights`` (B, n) times (tied scores share one threshold, as :func:`average_precision`); NaN where a row weighs
    no positive."""
    s, y, W = np.asarray(scores, dtype=float), np.asarray(labels).astype(bool), np.asarray(weights, dtype=float)
    if s.ndim != 1 or y.shape != s.shape or W.ndim != 2 or W.shape[1] != len(s):
        raise ValueError(f"scores (n,), labels (n,) and weights (B, n) must agree, got {s.shape}, {y.shape}, {W.shape}")
    order = np.argsort(-s, kind="mergesort")
    s_sorted, y_sorted, W = s[order], y[order], W[:, order]
    ends = np.ones(len(s), dtype=bool)
    ends[:-1] = s_sorted[:-1] != s_sorted[1:]                 # the last example of each group of tied scores
    tp, seen = np.cumsum(W * y_sorted, axis=1)[:, ends], np.cumsum(W, axis=1)[:, ends]
    gained = np.diff(tp, axis=1, prepend=0.0)                 # positives at each threshold
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(seen > 0, tp / np.where(seen > 0, seen, 1.0), 0.0)
        total = tp[:, -1]
        return np.where(total > 0, (gained * precision).sum(1) / np.where(total > 0, total, 1.0), np.nan)


_WEIGHTED = {"auroc": weighted_auroc, "ap": weighted_average_precision}


def bootstrap_macro(a: SplitProbes, labels: np.ndarray, weights: np.ndarray, level: float = 0.95,
                    metric: str = "auroc") -> tuple[float, tuple[float, float]]:
    """Return one family's test macro ``metric`` ("auroc" or "ap", mean over labels and splits) and its percentile
    interval at ``level`` from resampling the contexts by ``weights`` (B, N); the chosen directions stay fixed."""
    if metric not in _WEIGHTED or not 0 < level < 1:
        raise ValueError(f"metric must be one of {sorted(_WEIGHTED)} and level in (0, 1), got {metric!r}, {level!r}")
    point = float((a.auroc() if metric == "auroc" else a.ap()).mean())
    reps = np.zeros((len(weights), len(a.names)))
    for test, sa in zip(a.tests, a.test_scores):
        for i, y in enumerate(labels[:, test]):
            reps[:, i] += _WEIGHTED[metric](sa[i], y, weights[:, test])
    lo, hi = np.nanpercentile(reps.mean(1) / len(a.tests), [(1 - level) / 2 * 100, (1 + level) / 2 * 100])
    return point, (float(lo), float(hi))


@dataclass
class PairedDifference:
    """AUROC of family A minus family B, averaged over splits: per label (L,) and macro (over labels), each with
    its bootstrap interval (lower, upper), and the bootstrap replicates of the macro difference (B,)."""

    names: list[str]
    diff: np.ndarray
    interval: np.ndarray
    macro: float
    macro_interval: tuple[float, float]
    replicates: np.ndarray


def paired_bootstrap(a: SplitProbes, b: SplitProbes, labels: np.ndarray, weights: np.ndarray,
                     level: float = 0.95, metric: str = "auroc") -> PairedDifference:
    """Return the test-AUROC (``metric`` "auroc") or average-precision ("ap") difference A − B (mean over splits) with
    percentile intervals at ``level`` from resampling the contexts by ``weights`` (B, N): the same resample for both
    families and every split (paired); the directions chosen on each training half stay fixed."""
    if a.names != b.names or len(a.tests) != len(b.tests) or labels.shape[0] != len(a.names):
        raise ValueError("a, b and labels must hold the same labels probed on the same splits")
    if not 0 < level < 1 or metric not in _WEIGHTED:
        raise ValueError(f"level must be in (0, 1) and metric one of {sorted(_WEIGHTED)}, got {level}, {metric!r}")
    point = (a.auroc() - b.auroc()).mean(0) if metric == "auroc" else (a.ap() - b.ap()).mean(0)
    reps = np.zeros((len(weights), len(a.names)))
    weighted = _WEIGHTED[metric]
    for test, sa, sb in zip(a.tests, a.test_scores, b.test_scores):
        W = weights[:, test]
        for i, y in enumerate(labels[:, test]):
            reps[:, i] += weighted(sa[i], y, W) - weighted(sb[i], y, W)
    reps /= len(a.tests)
    q = [(1 - level) / 2 * 100, (1 + level) / 2 * 100]
    macro_reps = reps.mean(1)
    lo, hi = np.nanpercentile(macro_reps, q)
    return PairedDifference(list(a.names), point, np.nanpercentile(reps, q, axis=0).T, float(point.mean()),
                            (float(lo), float(hi)), macro_reps)
