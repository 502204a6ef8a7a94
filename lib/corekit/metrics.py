"""Comparisons between representations and models: CCA, projector overlap, principal angles, cosines."""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor


def _whiten(X: Tensor, ridge: float) -> Tensor:
    """Return an orthonormal-column basis (N, d) of centred X (N, d) after a relative ridge on its covariance."""
    Xc = X - X.mean(0, keepdim=True)
    cov = Xc.T @ Xc / (X.shape[0] - 1)
    cov = cov + ridge * cov.diagonal().mean() * torch.eye(cov.shape[0], dtype=X.dtype, device=X.device)
    w, V = torch.linalg.eigh(cov)
    return Xc @ (V / w.clamp_min(1e-300).sqrt()) / (X.shape[0] - 1) ** 0.5


def cca(X: Tensor, Y: Tensor, ridge: float = 1e-6) -> Tensor:
    """Return the canonical correlations (min(d_x, d_y),), descending, between X (N, d_x) and Y (N, d_y)."""
    if X.dim() != 2 or Y.dim() != 2 or X.shape[0] != Y.shape[0]:
        raise ValueError(f"X and Y must be (N, d) with the same N, got {tuple(X.shape)} and {tuple(Y.shape)}")
    if X.shape[0] < 2:
        raise ValueError("cca needs at least 2 samples")
    Wx, Wy = _whiten(X.double(), ridge), _whiten(Y.double(), ridge)
    return torch.linalg.svdvals(Wx.T @ Wy).clamp(0.0, 1.0)


def projector_overlap(A: Tensor, B: Tensor) -> Tensor:
    """Return ‖AᵀB‖²_F / √(r_A r_B) for orthonormal bases A (..., D, r_A), B (..., D, r_B); 1 = same span."""
    ra, rb = A.shape[-1], B.shape[-1]
    return (A.transpose(-1, -2) @ B).pow(2).sum((-1, -2)) / (ra * rb) ** 0.5


def random_orthonormal(D: int, r: int, n: int, seed: int = 0, dtype=torch.float64) -> Tensor:
    """Return n Haar-random orthonormal bases (n, D, r) of r-dimensional subspaces of R^D."""
    gen = torch.Generator().manual_seed(seed)
    Q, R = torch.linalg.qr(torch.randn(n, D, r, generator=gen, dtype=dtype))
    return Q * torch.sign(torch.diagonal(R, dim1=-2, dim2=-1))[:, None, :]


def random_projector_overlap(D: int, r_a: int, r_b: int, n: int = 4000, seed: int = 0) -> Tensor:
    """Return n samples (n,) of the projector overlap of independent random r_a- and r_b-dim subspaces of R^D.

    Its mean is √(r_a r_b)/D (r/D for equal ranks: 3/64 ≈ 0.047).
    """
    return projector_overlap(random_orthonormal(D, r_a, n, seed), random_orthonormal(D, r_b, n, seed + 1))


def principal_angles(A: Tensor, B: Tensor) -> Tensor:
    """Return the principal angles (min(r_A, r_B),) in radians, ascending, between spans of A (D, r_A), B (D, r_B)."""
    Qa, _ = torch.linalg.qr(A.double())
    Qb, _ = torch.linalg.qr(B.double())
    return torch.arccos(torch.linalg.svdvals(Qa.T @ Qb).clamp(-1.0, 1.0))


def cosine_matrix(W: Tensor) -> Tensor:
    """Return the pairwise cosine similarities (M, M) of the rows of W (M, P)."""
    Wn = W.double() / W.double().norm(dim=1, keepdim=True)
    return Wn @ Wn.T


def off_diagonal(A: Tensor | np.ndarray) -> np.ndarray:
    """Return the entries of a square matrix above its diagonal (M(M−1)/2,)."""
    A = np.asarray(A.cpu() if isinstance(A, Tensor) else A)
    return A[np.triu_indices(A.shape[0], k=1)]


def class_mean_distances(z: Tensor, labels: Tensor, classes: list[int]) -> Tensor:
    """Return the Mahalanobis distances (C, C) between the means of z (N, r) over each class in ``classes``.

    Distances are in units of z's own covariance (whitened coordinates), so they do not depend on the
    basis of z; a class absent from ``labels`` raises.
    """
    missing = [k for k in classes if not bool((labels == k).any())]
    if missing:
        raise ValueError(f"classes {missing} do not occur in labels")
    z = z.double()
    factor = torch.linalg.cholesky(torch.atleast_2d(torch.cov(z.T)))
    means = torch.stack([z[labels == k].mean(0) for k in classes])                       # (C, r)
    white = torch.linalg.solve_triangular(factor, means.T, upper=False).T
    return torch.cdist(white, white)
