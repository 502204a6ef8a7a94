"""Algorithmic Core Extraction: extract, validate and identify a layer's task core.

Extract (a balanced truncation, as the ACE paper computes it): with centred activations H_c (N, D)
and task-output Jacobians J (N, K, D) at the cut, Cov = H_cᵀH_c/(N−1) and Obs = E[JᵀJ]; factor
Cov = L_c L_cᵀ and Obs = L_o L_oᵀ, take SVD(L_cᵀ L_o) = U Σ Vᵀ; the core of rank r is the orthonormalised
span of L_c U[:, :r], and σ² are the eigenvalues of Cov·Obs (the squared singular values of H_c Jᵀ,
suitably scaled). Every function is batched over a leading model dimension M and works in float64.

Validate: keep-only h ↦ μ + QQᵀ(h − μ), remove h ↦ h − QQᵀ(h − μ), flip h ↦ h − 2QQᵀ(h − μ), all
about the training mean μ (the authors' code keeps QQᵀh and removes QQᵀh, without μ), and accuracy
against rank. Identify: fit a linear operator on core coordinates, read its eigenvalues and its R².
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment
from torch import Tensor


@dataclass
class Core:
    """Result of :func:`extract`: basis (M, D, D) (columns ordered by σ), sigma (M, D), mean (M, D)."""

    basis: Tensor
    sigma: Tensor
    mean: Tensor

    def q(self, rank: int | Tensor) -> Tensor:
        """Return the orthonormal core basis of ``rank`` (M, D, r); a per-model rank pads with zeros."""
        if isinstance(rank, int):
            return self.basis[..., :rank]
        rank = torch.as_tensor(rank, device=self.basis.device)
        keep = torch.arange(self.basis.shape[-1], device=self.basis.device)[None, :] < rank[:, None]
        return (self.basis * keep[:, None, :])[..., : int(rank.max())]

    def coordinates(self, h: Tensor, rank: int) -> Tensor:
        """Return core coordinates z = Qᵀ(h − μ) (M, ..., r) of activations h (M, ..., D)."""
        return torch.einsum("m...d,mdr->m...r", _centred(h, self.mean), self.q(rank).to(h.dtype))


def _centred(h: Tensor, mean: Tensor) -> Tensor:
    """Return h − μ with μ (M, D) broadcast over the middle dimensions of h (M, ..., D)."""
    return h - mean.to(h.dtype).view((mean.shape[0],) + (1,) * (h.dim() - 2) + (mean.shape[-1],))


def _psd_factor(A: Tensor, jitter: float = 0.0) -> Tensor:
    """Return L (M, D, D) with L Lᵀ = A + jitter·(tr A / D)·I for symmetric positive semi-definite A (M, D, D).

    The ACE authors' factorisation adds that jitter (1e-8) to every eigenvalue before the square root.
    """
    w, V = torch.linalg.eigh(A)
    scale = torch.diagonal(A, dim1=-2, dim2=-1).mean(-1, keepdim=True)
    lift = jitter * torch.where(scale > 0, scale, torch.ones_like(scale))
    return V * (w.clamp_min(0) + lift).sqrt()[..., None, :]


def output_jacobian(fn: Callable[[Tensor], Tensor], h: Tensor) -> Tensor:
    """Return J (M, N, K, D): ∂fn(h)[m, n, k] / ∂h[m, n] for an fn acting on each h[m, n] independently."""
    out, vjp_fn = torch.func.vjp(fn, h)                             # out: (M, N, K)
    K = out.shape[-1]
    cotangents = torch.eye(K, dtype=out.dtype, device=out.device)[:, None, None, :].expand(K, *out.shape)
    (J,) = torch.func.vmap(vjp_fn)(cotangents)                       # (K, M, N, D)
    return J.permute(1, 2, 0, 3)


def observability(fn: Callable[[Tensor], Tensor], h: Tensor, chunk: int = 4096) -> Tensor:
    """Return Obs = E_n[J_nᵀ J_n] (M, D, D) in float64 for the outputs fn(h) (M, N, K) of h (M, N, D)."""
    M, N, D = h.shape
    obs = torch.zeros(M, D, D, dtype=torch.float64, device=h.device)
    with torch.no_grad():  # torch.func.vjp still differentiates fn; parameters get no graph
        for start in range(0, N, chunk):
            J = output_jacobian(fn, h[:, start:start + chunk].detach()).double()    # (M, n, K, D)
            obs += torch.einsum("mnkd,mnke->mde", J, J)
    return obs / N


def linear_observability(weight: Tensor, centre: bool) -> Tensor:
    """Return Obs (M, D, D) in float64 of the linear readout h ↦ h W + b with W (M, D, K): W Wᵀ, or W C Wᵀ with C the
    class-centring projector when ``centre`` (the readout's centred logits).

    A linear readout's Jacobian is Wᵀ (C Wᵀ for the centred logits) at every input, so E_n[JᵀJ] needs no
    activations: the matrix :func:`observability` averages over N examples, in O(D²K) instead of O(N D K²).
    """
    if weight.dim() != 3:
        raise ValueError(f"weight must be (M, D, K), got shape {tuple(weight.shape)}")
    W = weight.detach().double()
    if centre:
        W = W - W.mean(dim=-1, keepdim=True)
    return W @ W.transpose(1, 2)


def centred_logits(readout: Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    """Return h ↦ readout(h) minus its mean over classes: the logits modulo softmax's shift invariance."""
    def fn(h: Tensor) -> Tensor:
        logits = readout(h)
        return logits - logits.mean(dim=-1, keepdim=True)
    return fn


def extract(h: Tensor, obs: Tensor, jitter: float = 0.0) -> Core:
    """Return the ACE core of activations h (M, N, D) under the observability Gram obs (M, D, D).

    ``jitter`` lifts both Grams' eigenvalues by jitter·tr/D before factoring (the authors: 1e-8); it
    orders the directions that Cov·Obs leaves numerically null.
    """
    if h.dim() != 3 or obs.shape != (h.shape[0], h.shape[2], h.shape[2]):
        raise ValueError(f"h must be (M, N, D) and obs (M, D, D), got {tuple(h.shape)} and {tuple(obs.shape)}")
    h64, obs = h.detach().double(), obs.detach()
    mean = h64.mean(dim=1)
    hc = h64 - mean[:, None, :]
    cov = hc.transpose(1, 2) @ hc / (h.shape[1] - 1)
    L_c, L_o = _psd_factor(cov, jitter), _psd_factor(obs.double(), jitter)
    U, sigma, _ = torch.linalg.svd(L_c.transpose(1, 2) @ L_o)
    basis, R = torch.linalg.qr(L_c @ U)
    basis = basis * torch.sign(torch.diagonal(R, dim1=1, dim2=2)).masked_fill(
        torch.diagonal(R, dim1=1, dim2=2) == 0, 1.0)[:, None, :]
    return Core(basis=basis, sigma=sigma, mean=mean)


def energy_rank(sigma: Tensor, threshold: float = 0.99) -> Tensor:
    """Return the smallest r (M,) whose top-r σ² hold at least ``threshold`` of the total."""
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    energy = sigma.double() ** 2
    frac = energy.cumsum(-1) / energy.sum(-1, keepdim=True)
    return (frac < threshold - 1e-12).sum(-1) + 1


def keep_only(h: Tensor, q: Tensor, mean: Tensor) -> Tensor:
    """Return μ + QQᵀ(h − μ) for h (M, ..., D), q (M, D, r), mean (M, D): every other direction at its mean."""
    return h - _centred(h, mean) + _project(h, q, mean)


def _project(h: Tensor, q: Tensor, mean: Tensor) -> Tensor:
    """Return QQᵀ(h − μ) (M, ..., D)."""
    q = q.to(h.dtype)
    z = torch.einsum("m...d,mdr->m...r", _centred(h, mean), q)
    return torch.einsum("m...r,mdr->m...d", z, q)


def remove(h: Tensor, q: Tensor, mean: Tensor) -> Tensor:
    """Return h − QQᵀ(h − μ): the core coordinates replaced by their mean."""
    return h - _project(h, q, mean)


def flip(h: Tensor, q: Tensor, mean: Tensor) -> Tensor:
    """Return h − 2QQᵀ(h − μ): the core coordinates reflected about their mean."""
    return h - 2 * _project(h, q, mean)


def ablation_curves(core: Core, h: Tensor, accuracy: Callable[[Tensor], Tensor],
                    ranks: list[int]) -> tuple[Tensor, Tensor]:
    """Return keep-only and remove accuracies (M, R) of ``accuracy(h')`` (M,) at each rank in ``ranks``."""
    keep, rem = [], []
    for r in ranks:
        q = core.q(r)
        keep.append(accuracy(keep_only(h, q, core.mean)))
        rem.append(accuracy(remove(h, q, core.mean)))
    return torch.stack(keep, 1), torch.stack(rem, 1)


def linear_ablation_curves(core: Core, h: Tensor, weight: Tensor, bias: Tensor | None, targets: Tensor,
                           ranks: list[int]) -> tuple[Tensor, Tensor]:
    """Return keep-only and remove accuracies (M, R) of the readout h ↦ h W + b at each rank in ``ranks``.

    h (M, N, D), weight W (M, D, V), bias b (M, V) or None, targets (N,); accuracy is the fraction of the
    N examples whose argmax logit is the target. The same curves as :func:`ablation_curves` with that
    accuracy (where two logits tie exactly, rounding picks either way in both), in float64 and by one
    projection: with z = Qᵀ(h − μ) on the full basis and g_i = q_iᵀW, keep-only's logits at rank r are
    μW + b + Σ_{i<r} z_i g_i and remove's are hW + b − Σ_{i<r} z_i g_i, both updated in place over the
    ranks taken in increasing order.
    """
    if h.dim() != 3 or weight.dim() != 3 or weight.shape[:2] != (h.shape[0], h.shape[2]):
        raise ValueError(f"h must be (M, N, D) and weight (M, D, V), got {tuple(h.shape)} and {tuple(weight.shape)}")
    if targets.shape != (h.shape[1],):
        raise ValueError(f"targets must be (N,) = ({h.shape[1]},), got {tuple(targets.shape)}")
    if not ranks or any(not 0 <= r <= core.basis.shape[-1] for r in ranks):
        raise ValueError(f"ranks must be a non-empty list of ranks in 0..{core.basis.shape[-1]}, got {ranks}")
    h, W, basis, mean = h.double(), weight.double(), core.basis.double(), core.mean.double()
    b = 0.0 if bias is None else bias.double()[:, None, :]
    z = torch.einsum("mnd,mdr->mnr", _centred(h, mean), basis)                  # (M, N, D)
    g = basis.transpose(1, 2) @ W                                               # (M, D, V)
    keep_logits = (mean[:, None, :] @ W + b).expand(-1, h.shape[1], -1).contiguous()   # (M, N, V), rank 0
    rem_logits = h @ W + b
    targets = targets.to(h.device)
    keep: dict[int, Tensor] = {}
    rem: dict[int, Tensor] = {}
    done = 0
    for r in sorted(set(ranks)):
        if r > done:
            keep_logits.baddbmm_(z[..., done:r], g[:, done:r])
            rem_logits.baddbmm_(z[..., done:r], g[:, done:r], alpha=-1)
            done = r
        keep[r] = (keep_logits.argmax(-1) == targets).float().mean(-1)
        rem[r] = (rem_logits.argmax(-1) == targets).float().mean(-1)
    return torch.stack([keep[r] for r in ranks], 1), torch.stack([rem[r] for r in ranks], 1)


def sufficient_rank(keep_acc: Tensor, base_acc: Tensor, ranks: list[int], tol: float = 1e-3) -> Tensor:
    """Return the smallest rank (M,) whose keep-only accuracy is within ``tol`` of the model's."""
    ok = keep_acc >= base_acc[:, None] - tol
    return first_rank(ok, ranks)


def necessary_rank(remove_acc: Tensor, floor: float, ranks: list[int]) -> Tensor:
    """Return the smallest rank (M,) whose removal brings accuracy to ``floor`` or below."""
    return first_rank(remove_acc <= floor, ranks)


def first_rank(ok: Tensor, ranks: list[int]) -> Tensor:
    """Return ranks[first True] per row of ok (M, R); −1 where no rank qualifies."""
    r = torch.tensor(ranks, device=ok.device)
    first = torch.where(ok.any(1), ok.float().argmax(1), torch.full_like(ok[:, 0], -1, dtype=torch.long))
    return torch.where(first >= 0, r[first.clamp_min(0)], first)


def fit_transition_operator(z_now: Tensor, z_next: Tensor) -> Tensor:
    """Return A (M, r, r) minimising ‖z_next − z_now Aᵀ‖ for centred coordinates z (M, N, r)."""
    sol = torch.linalg.lstsq(z_now.double(), z_next.double()).solution   # z_now X ≈ z_next, X = Aᵀ
    return sol.transpose(1, 2)


def consecutive_pairs(z: Tensor) -> tuple[Tensor, Tensor]:
    """Return (z_t, z_{t+1}), each (M, N·(T−1), r), from core coordinates of sequences z (M, N, T, r)."""
    return z[:, :, :-1].flatten(1, 2), z[:, :, 1:].flatten(1, 2)


def operator_r2(z_now: Tensor, z_next: Tensor, A: Tensor) -> Tensor:
    """Return R² (M,) of z_next ≈ z_now Aᵀ (z: (M, N, r), A: (M, r, r)) in the whitened coordinates of z_next.

    R² = 1 − tr(Σ⁻¹ E[eeᵀ]) / r with Σ the covariance of z_next and e the residual: the mean of the
    per-coordinate R² after whitening, so any invertible change of core coordinates leaves it unchanged.
    """
    z_now, z_next, A = z_now.double(), z_next.double(), A.double()
    resid = z_next - z_now @ A.transpose(1, 2)
    err = resid.transpose(1, 2) @ resid / z_next.shape[1]
    zc = z_next - z_next.mean(1, keepdim=True)
    cov = zc.transpose(1, 2) @ zc / z_next.shape[1]
    return 1 - torch.linalg.solve(cov, err).diagonal(dim1=1, dim2=2).sum(-1) / z_next.shape[-1]


@dataclass
class ShiftFit:
    """Result of :func:`fit_shift_operator` for one model.

    ``operator`` A (k, k) acts on the coordinates y = (m − m̄) V of the centred class means in the
    orthonormal ``basis`` V (r, k); ``eigenvalues`` (k,) are eig(A) and ``r2`` the fit's R².
    """

    operator: Tensor
    basis: Tensor
    eigenvalues: np.ndarray
    r2: float


def fit_shift_operator(class_means: Tensor, rcond: float = 1e-3) -> ShiftFit:
    """Return the least-squares fit y_c A ≈ y_{c+1 mod C} on the centred class means (C, r), as the ACE authors fit it.

    The means are centred over the C classes and projected onto their top k right singular vectors,
    those with σ ≥ ``rcond``·σ_max (k ≤ C − 1, since centring removes one dimension), so directions
    the class means do not span add no spurious eigenvalues near 0. R² = 1 − ‖y_next − yA‖² / ‖y_next‖²
    (y_next is centred). The shift permutes the C classes, so when the means span all C − 1 centred
    dimensions the fit is exact (R² = 1, every eigenvalue a C-th root of unity) whatever the means are.
    """
    if class_means.dim() != 2 or class_means.shape[0] < 2:
        raise ValueError(f"class_means must be (C, r) with C >= 2 classes, got {tuple(class_means.shape)}")
    if not 0 < rcond < 1:
        raise ValueError(f"rcond must be in (0, 1), got {rcond}")
    m = class_means.double()
    m = m - m.mean(0)
    _, s, vh = torch.linalg.svd(m, full_matrices=False)
    k = min(int((s > 0).logical_and(s >= rcond * s[0]).sum()), m.shape[0] - 1)
    basis = vh[:k].T                                                  # (r, k)
    if k == 0:
        return ShiftFit(operator=m.new_zeros(0, 0), basis=basis, eigenvalues=np.zeros(0, complex), r2=float("nan"))
    y = m @ basis                                                     # (C, k)
    nxt = torch.roll(y, shifts=-1, dims=0)
    A = torch.linalg.lstsq(y, nxt).solution                          # (k, k)
    r2 = 1 - float((nxt - y @ A).square().sum() / nxt.square().sum())
    return ShiftFit(operator=A, basis=basis, eigenvalues=torch.linalg.eigvals(A).cpu().numpy(), r2=r2)


def eigenvalue_error(fitted: np.ndarray, reference: np.ndarray) -> float:
    """Return the largest distance between optimally matched fitted and reference eigenvalues.

    Unmatched eigenvalues (when the counts differ) count as error ∞ so a wrong rank never passes.
    """
    fitted, reference = np.asarray(fitted), np.asarray(reference)
    if fitted.size == 0 or reference.size == 0:
        return 0.0 if fitted.size == reference.size else float("inf")
    cost = np.abs(fitted[:, None] - reference[None, :])
    rows, cols = linear_sum_assignment(cost)
    if len(rows) < max(len(fitted), len(reference)):
        return float("inf")
    return float(cost[rows, cols].max())


def unit_circle_fraction(eigenvalues: np.ndarray, p: int) -> float:
    """Return the fraction of eigenvalues with ||λ| − 1| ≤ sin(π/p) (a rotation's eigenvalues lie there)."""
    eigenvalues = np.asarray(eigenvalues)
    if eigenvalues.size == 0:
        return float("nan")
    return float(np.mean(np.abs(np.abs(eigenvalues) - 1.0) <= np.sin(np.pi / p)))


def frequency_modes(eigenvalues: np.ndarray, p: int) -> list[int]:
    """Return the distinct frequencies k ∈ {0, …, ⌊p/2⌋} of the unit-circle eigenvalues, as the authors bin them.

    ``k = round(p·arg λ / 2π) mod p`` folded to min(k, p − k), so λ = −1 (k = p/2 rounded) lands in bin ⌊p/2⌋.
    """
    eigenvalues = np.asarray(eigenvalues)
    on_circle = eigenvalues[np.abs(np.abs(eigenvalues) - 1.0) <= np.sin(np.pi / p)]
    k = np.mod(np.rint(np.angle(on_circle) * p / (2 * np.pi)).astype(int), p)
    return sorted({int(j) for j in np.minimum(k, p - k)})


def class_means(z: Tensor, labels: Tensor, n_classes: int) -> Tensor:
    """Return the per-class means (C, r) of vectors z (N, r) with integer labels (N,) in [0, C)."""
    onehot = torch.nn.functional.one_hot(labels.to(z.device), n_classes).to(z.dtype)     # (N, C)
    counts = onehot.sum(0)
    if bool((counts == 0).any()):
        raise ValueError(f"every class 0..{n_classes - 1} needs at least one example in labels")
    return (onehot.T @ z) / counts[:, None]


def shift_operator(z: Tensor, labels: Tensor, n_classes: int) -> ShiftFit:
    """Return the :func:`fit_shift_operator` fit m_c A ≈ m_{c+1} on the per-class means of core coordinates z (N, r)."""
    return fit_shift_operator(class_means(z, labels, n_classes))


@dataclass
class NextTokenACE:
    """ACE of M next-token models at the residual stream the unembedding reads (see :func:`next_token_ace`).

    ``core`` and ``rank`` (M,) come from the training inputs; ``h_train`` (M, N, T, D) and ``h_test``
    (M, N', T, D) are the activations; ``keep_acc`` and ``remove_acc`` (M, R) are the held-out
    accuracies of the ablations at each of ``ranks``, ``base_acc`` (M,) the intact models'.
    """

    core: Core
    rank: Tensor
    h_train: Tensor
    h_test: Tensor
    ranks: list[int]
    base_acc: Tensor
    keep_acc: Tensor
    remove_acc: Tensor

    def coordinates(self, split: str, rank: int) -> Tensor:
        """Return the top-``rank`` core coordinates (M, N, T, r) of the "train" or "test" activations."""
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        return self.core.coordinates(self.h_train if split == "train" else self.h_test, rank)


def next_token_ace(model, train_x: Tensor, test_x: Tensor, test_y: Tensor, energy_threshold: float = 0.999,
                   ranks: list[int] | None = None) -> NextTokenACE:
    """Return ACE of every model of a :class:`~corekit.models.BatchedTransformer` predicting the next token.

    Extracts on ``train_x`` (N, T) with the centred logits as task outputs, chooses the energy rank and
    runs keep-only / remove at each of ``ranks`` (default 0 … K) on ``test_x`` with targets ``test_y`` (N', T).
    """
    with torch.no_grad():
        h_train, h_test = model.residual(train_x), model.residual(test_x)           # (M, N, T, D)
    flat = h_train.flatten(1, 2)
    core = extract(flat, observability(centred_logits(model.unembed), flat))
    y = test_y.flatten()

    def accuracy(h: Tensor) -> Tensor:
        return (model.unembed(h.float()).argmax(-1) == y).float().mean(-1)

    ranks = list(range(model.config.out_vocab + 1)) if ranks is None else ranks
    with torch.no_grad():
        h = h_test.flatten(1, 2)
        keep, rem = linear_ablation_curves(core, h, model.p("W_U"), model.p("b_U"), y, ranks)
        base = accuracy(h)
    return NextTokenACE(core=core, rank=energy_rank(core.sigma, energy_threshold), h_train=h_train,
                        h_test=h_test, ranks=ranks, base_acc=base, keep_acc=keep, remove_acc=rem)
