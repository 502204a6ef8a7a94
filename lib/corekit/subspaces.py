"""Subspace geometry, in one place: how much of one span lies in another, angles, CCA, and random nulls.

Every chapter compares subspaces (cores of two seeds, a core and an eNTK eigenspace, an axis and a kernel's
directions). Three scores of "how much of span A lies in span B" are used, each for a reason; side by side, for
orthonormal bases A (D, r_A) and B (D, r_B) and s = ‖AᵀB‖²_F (the sum of the squared cosines of the principal angles):

==========================  ===================  ===========================================================
score                       value                use
==========================  ===================  ===========================================================
:func:`projector_overlap`   s / √(r_A r_B)       symmetric, 1 only for the same span: cores of two seeds (01)
:func:`alignment`           s / min(r_A, r_B)    1 when one span holds the other: eigenvectors against
                                                 features, the second centred (05, 06, 08)
:func:`span_cos2`           s with r_A = 1       one direction against a span: the squared cosine (08)
==========================  ===================  ===========================================================

For random spans the expected s is r_A r_B / D, so each score has a null of its own over spans of Gaussian matrices
(uniform on the Grassmannian; :func:`random_orthonormal` draws them as orthonormal bases):
:func:`random_projector_overlap`, :func:`random_alignment_null`, :func:`random_span_cos2`. :func:`principal_angles`
gives the angles themselves, :func:`cca` the canonical correlations of two representations of the same inputs, and
:func:`residual_directions` turns functions over the inputs into directions of a residual stream by least squares.
"""
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


def orthonormal_basis(X: Tensor, centre: bool = False, rtol: float = 1e-8) -> Tensor:
    """Return an orthonormal basis (N, r) of the column span of X (N, m) (centred first if asked); r = rank."""
    if X.dim() != 2:
        raise ValueError(f"X must be (N, m), got shape {tuple(X.shape)}")
    X = X.double()
    if centre:
        X = X - X.mean(0, keepdim=True)
    U, S, _ = torch.linalg.svd(X, full_matrices=False)
    if S.numel() == 0 or S[0] == 0:
        return U[:, :0]
    return U[:, S > rtol * S[0]]


def alignment(Q: Tensor, F: Tensor, centre_features: bool = True, fraction: bool = True) -> float:
    """Return ‖QᵀF‖²_F of eigenvectors Q (N, d) and features F (N, m), both orthonormalised (F centred).

    With ``fraction`` (default) the score is divided by its maximum min(d, m), so 1 means one span
    contains the other; random d-dimensional Q score ≈ d·m/N before division.
    """
    if Q.dim() != 2 or F.dim() != 2 or Q.shape[0] != F.shape[0]:
        raise ValueError(f"Q and F must be (N, d) and (N, m) with the same N, got {tuple(Q.shape)} and "
                         f"{tuple(F.shape)}")
    Qo = orthonormal_basis(Q)
    Fo = orthonormal_basis(F.to(Qo.device), centre=centre_features)
    score = float((Qo.T @ Fo).pow(2).sum())
    if not fraction:
        return score
    top = min(Qo.shape[1], Fo.shape[1])
    return score / top if top else 0.0


def alignment_profile(V: Tensor, F: Tensor, centre_features: bool = True) -> Tensor:
    """Return each column's alignment (k,) with the span of F (N, m): ‖Fₒᵀ v_i‖² for the unit columns v_i of V (N, k)."""
    if V.dim() != 2 or F.dim() != 2 or V.shape[0] != F.shape[0]:
        raise ValueError(f"V and F must be (N, k) and (N, m) with the same N, got {tuple(V.shape)} and "
                         f"{tuple(F.shape)}")
    Fo = orthonormal_basis(F.to(V.device), centre=centre_features)
    V = V.double()
    V = V / V.norm(dim=0, keepdim=True).clamp_min(1e-300)
    return (Fo.T @ V).pow(2).sum(0)


def leading_eigenvectors(K: Tensor, k: int) -> Tensor:
    """Return the top-k eigenvectors (M, N, k) of symmetric kernels K (M, N, N) (dense eigh, float64), largest first."""
    if K.dim() != 3 or K.shape[1] != K.shape[2]:
        raise ValueError(f"K must be (M, N, N), got shape {tuple(K.shape)}")
    if not isinstance(k, int) or not 1 <= k <= K.shape[1]:
        raise ValueError(f"k must be an integer in [1, N = {K.shape[1]}], got {k!r}")
    _, V = torch.linalg.eigh(K.double())
    return V.flip(-1)[..., :k]


def alignments(A: Tensor, B: Tensor) -> list[float]:
    """Return the alignment score of span(A[m]) with span(B[m]) (B centred), one per model, for A (M, N, a), B (M, N, b)."""
    if A.dim() != 3 or B.dim() != 3 or A.shape[:2] != B.shape[:2]:
        raise ValueError(f"A and B must be (M, N, ·) with the same M and N, got {tuple(A.shape)} and {tuple(B.shape)}")
    return [alignment(a, b) for a, b in zip(A.double().cpu(), B.double().cpu())]


def random_alignment_null(B: Tensor, d: int, samples: int = 200, seed: int = 0) -> np.ndarray:
    """Return the alignment scores (samples,) of random d-dimensional subspaces of R^N with span(B) (N, b) centred."""
    if B.dim() != 2:
        raise ValueError(f"B must be (N, b), got shape {tuple(B.shape)}")
    if not isinstance(d, int) or not 1 <= d <= B.shape[0]:
        raise ValueError(f"d must be an integer in [1, N = {B.shape[0]}], got {d!r}")
    if not isinstance(samples, int) or samples < 1:
        raise ValueError(f"samples must be a positive integer, got {samples!r}")
    gen = torch.Generator().manual_seed(seed)
    B = B.double().cpu()
    return np.array([alignment(torch.randn(B.shape[0], d, generator=gen, dtype=torch.float64), B)
                     for _ in range(samples)])


def residual_directions(h: Tensor, V: Tensor, rtol: float = 1e-8) -> Tensor:
    """Return orthonormal residual directions (M, D, k) whose centred readout fits eigenfunctions V (M, N, k) best.

    Solves min_W ‖(h − μ)W − (V − V̄)‖ by least squares for h (M, N, D) and orthonormalises the columns of W
    (QR; a column is dropped only if W is rank-deficient, then the last ones are zero). A function of the
    inputs becomes the direction of the stream whose coordinate reproduces it.
    """
    if h.dim() != 3 or V.dim() != 3 or h.shape[:2] != V.shape[:2]:
        raise ValueError(f"h and V must be (M, N, D) and (M, N, k) with the same M and N, got {tuple(h.shape)} "
                         f"and {tuple(V.shape)}")
    hc = h.double() - h.double().mean(1, keepdim=True)
    Vc = V.double() - V.double().mean(1, keepdim=True)
    W = torch.linalg.lstsq(hc, Vc, rcond=rtol).solution                  # (M, D, k)
    U, S, _ = torch.linalg.svd(W, full_matrices=False)                   # the span of W, ordered by weight
    keep = S > rtol * S[..., :1]
    return U * keep[:, None, :]


def random_subspaces(n_models: int, dim: int, rank: int, seed: int = 0) -> Tensor:
    """Return random orthonormal bases (M, D, r), one per model: :func:`random_orthonormal` with the rank checked."""
    if not isinstance(rank, int) or not 1 <= rank <= dim:
        raise ValueError(f"rank must be an integer in [1, D = {dim}], got {rank!r}")
    return random_orthonormal(dim, rank, n_models, seed)


def span_cos2(q: Tensor, Q: Tensor) -> float:
    """Return the squared cosine of the angle between a direction q (D,) and the span of the columns of Q (D, k)."""
    if q.dim() != 1 or Q.dim() != 2 or Q.shape[0] != q.shape[0]:
        raise ValueError(f"q must be (D,) and Q (D, k) with the same D, got {tuple(q.shape)} and {tuple(Q.shape)}")
    basis = torch.linalg.qr(Q.double().cpu())[0]
    q = q.double().cpu()
    return float((basis.T @ q).square().sum() / q.square().sum())


def random_span_cos2(D: int, k: int, samples: int = 200, seed: int = 0) -> np.ndarray:
    """Return the squared cosines (samples,) of a fixed direction with random k-dimensional subspaces of R^D (mean
    k / D)."""
    if not isinstance(k, int) or not 1 <= k <= D:
        raise ValueError(f"k must be an integer in [1, D = {D}], got {k!r}")
    gen = torch.Generator().manual_seed(seed)
    e = torch.zeros(D, dtype=torch.float64)
    e[0] = 1.0
    return np.array([span_cos2(e, torch.randn(D, k, generator=gen, dtype=torch.float64)) for _ in range(samples)])
