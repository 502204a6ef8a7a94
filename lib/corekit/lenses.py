"""Two lenses on one network: an ACE core and an eNTK eigenspace, compared as functions over the inputs.

Both methods describe a trained network by a low-dimensional subspace. ACE (:mod:`corekit.ace`) takes the
activations h (N, D) at a cut and the readout's Jacobian there; its core of rank r gives N × r core
coordinates Qᵀ(h − μ). The eNTK (:mod:`corekit.entk`) gives each parameter's kernel over the N inputs and
its leading eigenvectors, N × d functions. Both are subspaces of functions over the same inputs, so one
score compares them: :func:`corekit.fourier.alignment`, ‖Q_aᵀ Q_b‖²_F / min(d, r) of the orthonormalised
spans (the second centred), 1 when one span holds the other.

One relation ties them at the readout. For logits ``h W_U + b`` the eNTK of ``W_U`` with the class-pair mean
("pair_mean", the eNTK paper's flattening) is h(x)·h(x′)/C, the uncentred Gram of the residual stream over
the C outputs (:func:`linear_readout_kernel`); its eigenvectors are the left singular vectors of H. The ACE
core is the balanced truncation of Cov(h) and the readout's Gram: when that Gram is isotropic the core is
the PCA of h, its coordinates the left singular vectors of the centred H. The two lenses then differ only by
centring: for activations of mean zero the core of rank r and the kernel's top r eigenvectors span the same
functions; otherwise the uncentred kernel mixes the mean (the constant function) into its leading block.

Kernels come per parameter (:func:`corekit.entk_blocks.parameter_eigenpairs`) or per layer
(:func:`layer_eigenpairs`: the parameters of :func:`layer_groups` summed), for any
:class:`~corekit.models.BatchedTransformer`, chapter 02's post-LayerNorm encoder block with query, key and value
biases included.

To act on an eNTK eigenspace inside the network, :func:`residual_directions` maps its eigenfunctions to
directions of the residual stream by least squares (for the readout's own kernel this recovers the right
singular vectors of H exactly); ACE's keep-only and remove ablations then apply to any orthonormal basis
(:func:`keep_remove_accuracy`), and :func:`random_subspaces` draws the null of the same dimension.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch
from torch import Tensor

from corekit import ace, entk, entk_blocks, fourier


def linear_readout_kernel(h: Tensor, n_outputs: int) -> Tensor:
    """Return h hᵀ / C (M, N, N): the class-pair-mean eNTK of the weight of a linear readout of h (M, N, D) to C outputs."""
    if h.dim() != 3:
        raise ValueError(f"h must be (M, N, D), got shape {tuple(h.shape)}")
    if not isinstance(n_outputs, int) or n_outputs < 1:
        raise ValueError(f"n_outputs must be a positive integer, got {n_outputs!r}")
    h = h.double()
    return h @ h.transpose(1, 2) / n_outputs


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
    return [fourier.alignment(a, b) for a, b in zip(A.double().cpu(), B.double().cpu())]


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
    return np.array([fourier.alignment(torch.randn(B.shape[0], d, generator=gen, dtype=torch.float64), B)
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
    """Return random orthonormal bases (M, D, r), uniform on the Grassmannian (QR of a Gaussian), one per model."""
    if not isinstance(rank, int) or not 1 <= rank <= dim:
        raise ValueError(f"rank must be an integer in [1, D = {dim}], got {rank!r}")
    gen = torch.Generator().manual_seed(seed)
    G = torch.randn(n_models, dim, rank, generator=gen, dtype=torch.float64)
    Q, R = torch.linalg.qr(G)
    return Q * torch.sign(torch.diagonal(R, dim1=1, dim2=2))[:, None, :]


def keep_remove_accuracy(h: Tensor, q: Tensor, mean: Tensor,
                         accuracy: Callable[[Tensor], Tensor]) -> tuple[Tensor, Tensor]:
    """Return (keep-only, remove) accuracies (M,) of ``accuracy(h')`` for the subspaces q (M, D, r) about mean (M, D)."""
    if q.dim() != 3 or q.shape[:2] != (h.shape[0], h.shape[-1]):
        raise ValueError(f"q must be (M, D, r) with M = {h.shape[0]} and D = {h.shape[-1]}, got {tuple(q.shape)}")
    q = q.to(h.dtype)
    mean = mean.to(h.dtype)
    return accuracy(ace.keep_only(h, q, mean)), accuracy(ace.remove(h, q, mean))


def settling_epoch(epochs: Sequence[float], values: Sequence[float]) -> float:
    """Return the first epoch from which ``values`` stay at or below their final value (e.g. an energy rank settling)."""
    epochs, values = np.asarray(epochs, dtype=float), np.asarray(values, dtype=float)
    if epochs.ndim != 1 or epochs.shape != values.shape or len(epochs) == 0:
        raise ValueError(f"epochs and values must be 1-D of the same non-zero length, got {epochs.shape} and "
                         f"{values.shape}")
    above = np.nonzero(values > values[-1])[0]
    return float(epochs[above[-1] + 1] if len(above) else epochs[0])


def with_state(model, state: dict[str, Tensor] | None):
    """Return ``model`` itself when ``state`` is None, else a copy of it (same config, seeds, device, dtype) holding ``state``."""
    if state is None:
        return model
    weight = model.p("W_E")
    snapshot = type(model)(model.config, seeds=model.seeds).to(weight.device, weight.dtype)
    snapshot.load_state_dict(state)
    return snapshot.train(model.training)


def layer_groups(config) -> dict[str, list[str]]:
    """Return {layer: parameter names} of a :class:`~corekit.models.BatchedTransformer` with ``config``, every parameter once.

    Layers in reading order: "embed" (W_E, W_pos), then per block i "i.attn" (queries, keys, values, output and
    their biases, with the LayerNorm that belongs to the sublayer: before it in a pre-LN block, after it in a
    post-LN one) and "i.mlp", then "unembed" (W_U, b_U and a pre-LN model's final LayerNorm).
    """
    c = config
    groups = {"embed": ["W_E", "W_pos"]}
    for i in range(c.n_layers):
        attn = [f"{i}.W_{x}" for x in "QKV"] + ([f"{i}.b_{x}" for x in "QKV"] if c.qkv_bias else []) + [f"{i}.W_O"]
        mlp = [f"{i}.W_in", f"{i}.W_out"]
        if c.bias:
            attn.append(f"{i}.b_O")
            mlp += [f"{i}.b_in", f"{i}.b_out"]
        if c.norm != "none":
            attn += [f"{i}.ln1_w", f"{i}.ln1_b"]
            mlp += [f"{i}.ln2_w", f"{i}.ln2_b"]
        groups |= {f"{i}.attn": attn, f"{i}.mlp": mlp}
    groups["unembed"] = ["W_U"] + (["b_U"] if c.bias else []) + (["lnf_w", "lnf_b"] if c.norm == "pre" else [])
    return groups


def layer_eigenpairs(model, m: int, tokens: Tensor, top_k: int,
                     state: dict[str, Tensor] | None = None) -> dict[str, entk.Eigenpairs]:
    """Return {layer: top-k eigenpairs} of model m's per-layer eNTKs (N, N) on tokens (N, T) (:func:`layer_groups`).

    A layer's kernel is the sum of its parameters' "pair_mean" kernels (the eNTK paper's flattening, as in
    chapter 06), computed in float64; ``state`` (a snapshot's state_dict) replaces the model's weights.
    """
    model = with_state(model, state)
    return entk_blocks.group_eigenpairs(model, m, tokens, top_k, layer_groups(model.config))


def final_residual_core(model, tokens: Tensor, energy_threshold: float = 0.99,
                        state: dict[str, Tensor] | None = None) -> tuple[Tensor, ace.Core, Tensor]:
    """Return (h (M, N, D), its ACE core, energy ranks (M,)): a transformer's final residual stream at the last position.

    The core is taken under the centred logits (:func:`corekit.ace.centred_logits` of the model's unembedding);
    ``state`` (a snapshot's state_dict) replaces the model's current weights.
    """
    model = with_state(model, state)
    with torch.no_grad():
        h = model.residual(tokens, last=1)[:, :, -1]
    core = ace.extract(h, ace.observability(ace.centred_logits(model.unembed), h))
    return h, core, ace.energy_rank(core.sigma, energy_threshold)


def readout_accuracy(model, labels: Tensor, n_classes: int) -> Callable[[Tensor], Tensor]:
    """Return x (M, N, D) ↦ accuracy (M,) of each model's unembedding (argmax over its first n_classes outputs) on labels (N,)."""
    def accuracy(x: Tensor) -> Tensor:
        with torch.no_grad():
            return (model.unembed(x)[..., :n_classes].argmax(-1) == labels).double().mean(-1)
    return accuracy
