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


def moving_average(curve: Sequence[float], window: int = 1):
    """Return the centred moving average (S,) of ``curve`` (S,) over an odd ``window`` (edges padded with the end values)."""
    curve = np.asarray(curve, dtype=float)
    if not isinstance(window, int) or window < 1 or window % 2 == 0:
        raise ValueError(f"window must be a positive odd integer, got {window!r}")
    if window == 1:
        return curve
    return np.convolve(np.pad(curve, window // 2, mode="edge"), np.ones(window) / window, mode="valid")
