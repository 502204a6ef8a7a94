"""Training-curve analysis: where a curve first reaches a level, the grokking step, where it rises fastest, smoothing.

The **grokking step** is defined once, here (:func:`grokking_step`): the first evaluated step at which
test accuracy is ≥ a threshold (:data:`GROKKING_THRESHOLD` = 0.99 unless a notebook says otherwise).
Where the steepest rise of test accuracy is reported instead (:func:`steepest_rise`), it is a
different quantity and carries a different claim id.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np


def steepest_rise(steps: Sequence[float], curve: Sequence[float], window: int = 1) -> tuple[float, float]:
    """Return (step, rate) where the curve (S,) over ``steps`` (S,) rises fastest (central differences, uneven steps allowed).

    ``window`` (odd) first smooths the curve with a centred moving average of that many points.
    """
    steps, curve = np.asarray(steps, dtype=float), np.asarray(curve, dtype=float)
    if steps.ndim != 1 or steps.shape != curve.shape or len(steps) < 2:
        raise ValueError(f"steps and curve must be (S,) with S >= 2, got {steps.shape} and {curve.shape}")
    rate = np.gradient(moving_average(curve, window), steps)
    i = int(np.argmax(rate))
    return float(steps[i]), float(rate[i])


def first_step_reaching(steps: Sequence[float], curve: Sequence[float], level: float) -> float | None:
    """Return the first step (from ``steps`` (S,)) at which ``curve`` (S,) is ≥ ``level``, or None if it never is."""
    for step, value in zip(steps, curve):
        if value >= level:
            return float(step)
    return None


#: The test accuracy at which a model counts as grokked.
GROKKING_THRESHOLD = 0.99


def grokking_step(steps: Sequence[float], test_accuracy: Sequence[float],
                  threshold: float = GROKKING_THRESHOLD) -> float | None:
    """Return the grokking step: the first of ``steps`` (S,) at which ``test_accuracy`` (S,) is ≥ ``threshold`` (None: never).

    For an ensemble that must grok together, pass the minimum over its models' accuracies (S,).
    """
    return first_step_reaching(steps, test_accuracy, threshold)


def largest_drop(curve: Sequence[float]) -> int:
    """Return the index j ≥ 1 of ``curve`` (S,) ending its largest single decrease curve[j − 1] − curve[j] (the first of ties)."""
    curve = np.asarray(curve, dtype=float)
    if curve.ndim != 1 or len(curve) < 2:
        raise ValueError(f"curve must be (S,) with S >= 2, got {curve.shape}")
    return int(np.argmax(curve[:-1] - curve[1:])) + 1


def moving_average(curve: Sequence[float], window: int = 1):
    """Return the centred moving average (S,) of ``curve`` (S,) over an odd ``window`` (edges padded with the end values)."""
    curve = np.asarray(curve, dtype=float)
    if not isinstance(window, int) or window < 1 or window % 2 == 0:
        raise ValueError(f"window must be a positive odd integer, got {window!r}")
    if window == 1:
        return curve
    return np.convolve(np.pad(curve, window // 2, mode="edge"), np.ones(window) / window, mode="valid")


def snapshot_schedule(candidates: Sequence[int], n_log: int, dense: tuple[float, float], n_dense: int) -> list[int]:
    """Return sorted distinct steps from ``candidates``: first, last, ``n_log`` log-spaced, ``n_dense`` even in ``dense``.

    Each target step is replaced by the nearest candidate (e.g. the steps at which a run saved its
    parameters), so the log-spaced part covers the whole run and the dense part resolves a
    transition found from the same run's curves.
    """
    cand = np.unique(np.asarray(candidates, dtype=np.int64))
    if cand.size < 2:
        raise ValueError(f"candidates must hold at least 2 distinct steps, got {cand.tolist()}")
    if n_log < 0 or n_dense < 0:
        raise ValueError(f"n_log and n_dense must be >= 0, got {n_log!r}, {n_dense!r}")
    lo, hi = float(dense[0]), float(dense[1])
    if lo > hi:
        raise ValueError(f"dense must be a range (start, end) with start <= end, got {dense!r}")
    first_positive = cand[cand > 0][0] if (cand > 0).any() else 1
    targets = np.concatenate([cand[[0, -1]], np.geomspace(first_positive, max(cand[-1], first_positive), n_log),
                              np.linspace(lo, hi, n_dense)])
    nearest = np.abs(cand[None, :] - targets[:, None]).argmin(1)
    return sorted(int(s) for s in np.unique(cand[nearest]))


def grid_spacing(steps: Sequence[float], at: float) -> float:
    """Return the larger of the two gaps of the sorted grid ``steps`` (S,) beside the grid point nearest to ``at``."""
    steps = np.sort(np.asarray(steps, dtype=float))
    if steps.ndim != 1 or len(steps) < 2:
        raise ValueError(f"steps must be (S,) with S >= 2, got shape {steps.shape}")
    i = int(np.abs(steps - at).argmin())
    gaps = [steps[j + 1] - steps[j] for j in (i - 1, i) if 0 <= j < len(steps) - 1]
    return float(max(gaps))


def settling_epoch(epochs: Sequence[float], values: Sequence[float]) -> float:
    """Return the first epoch from which ``values`` stay at or below their final value (e.g. an energy rank settling)."""
    epochs, values = np.asarray(epochs, dtype=float), np.asarray(values, dtype=float)
    if epochs.ndim != 1 or epochs.shape != values.shape or len(epochs) == 0:
        raise ValueError(f"epochs and values must be 1-D of the same non-zero length, got {epochs.shape} and "
                         f"{values.shape}")
    above = np.nonzero(values > values[-1])[0]
    return float(epochs[above[-1] + 1] if len(above) else epochs[0])
