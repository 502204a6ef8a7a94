"""The probe protocol: every candidate direction gives one score per example; for each binary label the
direction and its sign are chosen on the training half by average precision, and AUROC / AP are
reported on the test half (:func:`evaluate`). :func:`pca_scores` gives the principal-component baseline.
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


def evaluate(scores, labels: np.ndarray, names: Sequence[str], train: np.ndarray, test: np.ndarray) -> ProbeResult:
    """Return, for each binary label row of ``labels`` (L, N), the direction of ``scores`` (K, N) and sign with the
    best average precision on ``train``, and its AUROC and AP on ``test``."""
    from sklearn.metrics import average_precision_score
    S = scores.detach().cpu().double().numpy() if isinstance(scores, Tensor) else np.asarray(scores, dtype=float)
    labels = np.asarray(labels)
    if S.ndim != 2 or labels.ndim != 2 or S.shape[1] != labels.shape[1] or len(names) != labels.shape[0]:
        raise ValueError(f"scores (K, N), labels (L, N) and names (L,) must agree, got {S.shape}, {labels.shape}, "
                         f"{len(names)}")
    out = {k: [] for k in ("direction", "sign", "train_ap", "test_auroc", "test_ap")}
    for y in labels:
        for idx, half in ((train, "train"), (test, "test")):
            if y[idx].min() == y[idx].max():
                raise ValueError(f"every label needs positives and negatives in the {half} half")
        best = (-1.0, 0, 1.0)
        for k in range(S.shape[0]):
            for sign in (1.0, -1.0):
                ap = average_precision_score(y[train], sign * S[k, train])
                if ap > best[0]:
                    best = (ap, k, sign)
        ap, k, sign = best
        out["direction"].append(k)
        out["sign"].append(sign)
        out["train_ap"].append(ap)
        out["test_auroc"].append(stats.auroc(sign * S[k, test], y[test]))
        out["test_ap"].append(average_precision_score(y[test], sign * S[k, test]))
    return ProbeResult(list(names), **{k: np.array(v) for k, v in out.items()})
