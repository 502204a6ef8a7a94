"""eNTK features of an MLP on modular addition (notebook 05): the kernel's cliffs against Fourier features.

The kernel is the eNTK of a :class:`~corekit.models.BatchedQuadraticMLP` over all p² inputs, per weight matrix,
class-averaged (the mean of its diagonal class blocks) and summed over ``W_1`` and ``W_2``; :func:`mlp_spectrum`
gives its top eigenpairs, for the model's current parameters or a saved state. Cliff 1 is eigenvectors
1 … n_cliff and cliff 2 the next n_cliff (n_cliff = 4⌊p/2⌋, the paper's definition): :func:`cliff_alignments`
scores them against the Fourier features of a, b and of a ± b; :func:`initial_cliffs` (the kernel at a saved
state) and :func:`random_block_q99` (random orthonormal blocks) are the claims' nulls; :func:`alignment_dynamics`
follows the alignments over parameter snapshots and times their rise against the test accuracy's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np
import torch
from torch import Tensor

from corekit import entk, subspaces
from corekit.curves import first_step_reaching, grid_spacing, snapshot_schedule, steepest_rise
from corekit.entk import Eigenpairs
from corekit.models import BatchedQuadraticMLP
from corekit.train import History


def mlp_spectrum(model: BatchedQuadraticMLP, X: Tensor, k: int, state: Mapping[str, Tensor] | None = None,
                 dtype: torch.dtype = torch.float64, device=None) -> Eigenpairs:
    """Return the top-``k`` eigenpairs (vectors (N, k)) of the class-averaged eNTK (N, N) of ``model`` (or of its saved
    ``state``) on the inputs X (N, 2p), summed over W_1 and W_2, computed in ``dtype`` (on ``device``)."""
    fm = entk.functional_mlp(model, state=state).to(dtype, device)
    per_layer = entk.kernels(fm, X.to(dtype), mode="class_mean")             # {"W_1": (N, N), "W_2": (N, N)}
    return entk.top_eigenpairs(entk.total(per_layer), k)


def cliff_alignments(vectors: Tensor, n_cliff: int, F_ab: Tensor, F_sum: Tensor, F_diff: Tensor) -> dict[str, float]:
    """Return {"ab": cliff 1 (eigenvectors 1 … n_cliff of ``vectors`` (N, k)) against F_ab (N, m), "sum" and "diff":
    cliff 2 (the next n_cliff) against F_sum and F_diff}, each as the alignment's fraction of its maximum."""
    Q1 = vectors[:, 1:1 + n_cliff]
    Q2 = vectors[:, 1 + n_cliff:1 + 2 * n_cliff]
    return dict(ab=subspaces.alignment(Q1, F_ab), sum=subspaces.alignment(Q2, F_sum),
                diff=subspaces.alignment(Q2, F_diff))


def initial_cliffs(model: BatchedQuadraticMLP, state: Mapping[str, Tensor], X: Tensor, k: int, n_cliff: int,
                   F_ab: Tensor, F_sum: Tensor, F_diff: Tensor) -> dict[str, float]:
    """Return the float64 kernel of ``state`` (top ``k`` pairs) scored as the trained one: its detected cliff sizes
    ("cliff1_size", "cliff2_size", from the two largest eigenvalue ratios after the top one) and
    :func:`cliff_alignments` ("ab", "sum", "diff")."""
    eig_0 = mlp_spectrum(model, X, k, state=state)
    edge1_0, edge2_0 = entk.cliff_edges(eig_0.values, n_edges=2, start=1)
    return dict(cliff1_size=edge1_0 - 1, cliff2_size=edge2_0 - edge1_0,
                **cliff_alignments(eig_0.vectors, n_cliff, F_ab, F_sum, F_diff))


def random_block_q99(D: int, r: int, features: Mapping[str, Tensor], n: int = 200, seed: int = 0) -> dict[str, float]:
    """Return {name: the 99th percentile of the alignment of ``n`` seeded random orthonormal blocks (D, r) with the
    features (D, m) of that name}."""
    random_blocks = subspaces.random_orthonormal(D, r, n, seed=seed)                  # (n, D, r)
    return {name: float(np.quantile([subspaces.alignment(Q, F) for Q in random_blocks], 0.99))
            for name, F in features.items()}


@dataclass
class AlignmentDynamics:
    """The snapshot epochs (S,), cliff 1's alignment with the a, b features (S,) and cliff 2's with the a ± b features
    (S,) at each; the epochs where the test accuracy rises fastest (t_grok) and first reaches 0.95 (None: never), where
    cliff 2's and cliff 1's alignments rise fastest, and the snapshot spacing at cliff 2's."""

    epochs: np.ndarray
    ab: np.ndarray
    sd: np.ndarray
    t_grok: float
    t_95: float | None
    t_peak: float
    t_peak_ab: float
    spacing: float


def alignment_dynamics(model: BatchedQuadraticMLP, history: History, test_acc: np.ndarray, X: Tensor, n_cliff: int,
                       F_ab: Tensor, F_sd: Tensor, n_log: int, n_dense: int, device=None) -> AlignmentDynamics:
    """Return the cliffs' alignments at ``n_log`` log-spaced snapshots of ``history`` and ``n_dense`` evenly spaced over
    [0.5, 1.5] t_grok (t_grok read from ``test_acc`` (S,)), from float32 kernels on ``device``, and their timing."""
    t_grok, _ = steepest_rise(history.steps, test_acc)
    t_95 = first_step_reaching(history.steps, test_acc, 0.95)
    snap_epochs = np.asarray(snapshot_schedule(history.steps, n_log, (0.5 * t_grok, 1.5 * t_grok), n_dense))
    snap_ab, snap_sd = [], []
    for epoch in snap_epochs:
        V_t = mlp_spectrum(model, X, 2 * n_cliff + 1, state=history.snapshots[int(epoch)], dtype=torch.float32,
                           device=device).vectors
        snap_ab.append(subspaces.alignment(V_t[:, 1:1 + n_cliff], F_ab))
        snap_sd.append(subspaces.alignment(V_t[:, 1 + n_cliff:1 + 2 * n_cliff], F_sd))
    snap_ab, snap_sd = np.asarray(snap_ab), np.asarray(snap_sd)
    t_peak, _ = steepest_rise(snap_epochs, snap_sd)
    t_peak_ab, _ = steepest_rise(snap_epochs, snap_ab)
    return AlignmentDynamics(snap_epochs, snap_ab, snap_sd, t_grok, t_95, t_peak, t_peak_ab,
                             grid_spacing(snap_epochs, t_peak))
