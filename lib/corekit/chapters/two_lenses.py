"""Two lenses on one network: an ACE core and an eNTK eigenspace, compared as functions over the inputs.

Both methods describe a trained network by a low-dimensional subspace. ACE (:mod:`corekit.ace`) takes the
activations h (N, D) at a cut and the readout's Jacobian there; its core of rank r gives N × r core
coordinates Qᵀ(h − μ). The eNTK (:mod:`corekit.entk`) gives each parameter's kernel over the N inputs and
its leading eigenvectors, N × d functions. Both are subspaces of functions over the same inputs, so one
score compares them: :func:`corekit.subspaces.alignment`, ‖Q_aᵀ Q_b‖²_F / min(d, r) of the orthonormalised
spans (the second centred), 1 when one span holds the other.

One relation ties them at the readout. For logits ``h W_U + b`` the eNTK of ``W_U`` with the class-pair mean
("pair_mean", the eNTK paper's flattening) is h(x)·h(x′)/C, the uncentred Gram of the residual stream over
the C outputs (:func:`linear_readout_kernel`); its eigenvectors are the left singular vectors of H. The ACE
core is the balanced truncation of Cov(h) and the readout's Gram: when that Gram is isotropic the core is
the PCA of h, its coordinates the left singular vectors of the centred H. The two lenses then differ only by
centring: for activations of mean zero the core of rank r and the kernel's top r eigenvectors span the same
functions; otherwise the uncentred kernel mixes the mean (the constant function) into its leading block.

Kernels come per parameter (:func:`corekit.chapters.entk_transformer_modular.parameter_eigenpairs`) or per layer
(:func:`layer_eigenpairs`: the parameters of :func:`corekit.models.layer_groups` summed), for any
:class:`~corekit.models.BatchedTransformer`, chapter 02's post-LayerNorm encoder block with query, key and value
biases included.

To act on an eNTK eigenspace inside the network, :func:`corekit.subspaces.residual_directions` maps its eigenfunctions to
directions of the residual stream by least squares (for the readout's own kernel this recovers the right
singular vectors of H exactly); ACE's keep-only and remove ablations then apply to any orthonormal basis
(:func:`keep_remove_accuracy`), and :func:`corekit.subspaces.random_subspaces` draws the null of the same dimension.

On a language model (question 4), ACE's axis (:func:`corekit.chapters.llm_agreement_axis.find_axis`) lives in the
residual stream ``layer`` at the last prompt token. The eNTK at that layer is the residual-stream operator of the
decoder block that writes the stream (:class:`~corekit.entk.ResidualStreamNTK` of block ``layer``'s ``mlp.down_proj``), whose
inputs must share one token length: :func:`number_lens` keeps the prompts (train and test) of the most
common unpadded length, takes the operator's top eigenpairs by block Lanczos and gives every
eigenvector one score per prompt (:func:`~corekit.entk.eigenvector_scores`). Two readings of the
same prompts follow: whether a score separates singular from plural (:func:`held_out_auroc`: the
eigenvector is chosen and signed on the training prompts, scored on the held-out ones), and the
angle between ACE's axis and the eNTK's directions in the residual stream (each eigenvector's scores
mapped to a direction by least squares, :func:`stream_directions`; :func:`corekit.subspaces.span_cos2`).

The chapter's steps: :func:`compare_lenses` scores one model's core against every kernel with the nulls (PCA, the
model at initialisation, random subspaces), for chapter 06's models per parameter and for chapter 02's
(:func:`train_ace_authors`) per layer; :func:`subspace_ablations` keeps and removes each lens's subspace;
:func:`number_readings` and :func:`axis_span` read the language model's eNTK against ACE's axis.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from torch import Tensor

from corekit import ace, entk, stats, subspaces, train
from corekit.chapters import entk_transformer_modular
from corekit.chapters.llm_agreement_axis import Axis, Measured
from corekit.entk import Eigenpairs, ResidualStreamNTK, eigenvector_scores, lanczos
from corekit.models import BatchedTransformer, TransformerConfig, layer_groups, with_state
from corekit.probes import pca_scores
from corekit.subspaces import residual_directions
from corekit.tasks.modular import ModularAddition, modular_addition
from corekit.train import History, train_ensemble


def linear_readout_kernel(h: Tensor, n_outputs: int) -> Tensor:
    """Return h hᵀ / C (M, N, N): the class-pair-mean eNTK of the weight of a linear readout of h (M, N, D) to C outputs."""
    if h.dim() != 3:
        raise ValueError(f"h must be (M, N, D), got shape {tuple(h.shape)}")
    if not isinstance(n_outputs, int) or n_outputs < 1:
        raise ValueError(f"n_outputs must be a positive integer, got {n_outputs!r}")
    h = h.double()
    return h @ h.transpose(1, 2) / n_outputs


def keep_remove_accuracy(h: Tensor, q: Tensor, mean: Tensor,
                         accuracy: Callable[[Tensor], Tensor]) -> tuple[Tensor, Tensor]:
    """Return (keep-only, remove) accuracies (M,) of ``accuracy(h')`` for the subspaces q (M, D, r) about mean (M, D)."""
    if q.dim() != 3 or q.shape[:2] != (h.shape[0], h.shape[-1]):
        raise ValueError(f"q must be (M, D, r) with M = {h.shape[0]} and D = {h.shape[-1]}, got {tuple(q.shape)}")
    q = q.to(h.dtype)
    mean = mean.to(h.dtype)
    return accuracy(ace.keep_only(h, q, mean)), accuracy(ace.remove(h, q, mean))


def layer_eigenpairs(model, m: int, tokens: Tensor, top_k: int,
                     state: dict[str, Tensor] | None = None) -> dict[str, entk.Eigenpairs]:
    """Return {layer: top-k eigenpairs} of model m's per-layer eNTKs (N, N) on tokens (N, T).

    Layers as in :func:`corekit.models.layer_groups`.

    A layer's kernel is the sum of its parameters' "pair_mean" kernels (the eNTK paper's flattening, as in
    chapter 06), computed in float64; ``state`` (a snapshot's state_dict) replaces the model's weights.
    """
    model = with_state(model, state)
    return entk_transformer_modular.group_eigenpairs(model, m, tokens, top_k, layer_groups(model.config))


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


@dataclass
class LensComparison:
    """One model's ACE core (rank ``rank``; ``rank_init`` at initialisation) against kernels: each kernel's alignment
    ``align`` (top rank + 1 eigenvectors vs the core), the readout kernel's block vs PCA of h (``pca``), every
    alignment at initialisation (``init_all``), the random nulls' 99th percentiles (trained, initial ranks) and, with
    features, the core's alignment with them (``features``, ``features_init``; else None)."""

    rank: int
    rank_init: int
    align: dict[str, float]
    pca: float
    init_all: dict[str, float]
    null99: float
    null99_init: float
    features: float | None
    features_init: float | None

    def init(self, readout: str) -> float:
        """Return the alignment at initialisation of the kernel ``readout`` (e.g. "W_U")."""
        return self.init_all[readout]


def compare_lenses(m: int, h: Tensor, core: ace.Core, ranks: Tensor, eigs: dict[str, Eigenpairs],
                   h_init: Tensor, core_init: ace.Core, ranks_init: Tensor, init_eigs: dict[str, Eigenpairs],
                   readout: str, null_samples: int = 200, features: Tensor | None = None) -> LensComparison:
    """Return model m's :class:`LensComparison` from h (M, N, D), its core and ranks (M,), the trained kernels'
    eigenpairs (N, ≥ r + 1) and the initial ones (N, r₀ + 1); ``readout`` names the kernel PCA is set against,
    ``features`` (N, f) optional functions the core is scored on (random nulls seeded with m)."""
    r, r0 = int(ranks[m]), int(ranks_init[m])
    Z = core.coordinates(h, r)[m:m + 1]                                  # (1, N, r)
    align = {name: subspaces.alignments(e.vectors[:, :r + 1][None], Z)[0] for name, e in eigs.items()}
    U = pca_scores(h[m].cpu(), r).T                                     # (N, r): PCA of the same activations
    pca = subspaces.alignments(eigs[readout].vectors[:, :r + 1][None].cpu(), U[None])[0]
    Z0 = core_init.coordinates(h_init, r0)[m:m + 1]
    init_all = {name: subspaces.alignments(e.vectors[None], Z0)[0] for name, e in init_eigs.items()}
    Z = core.coordinates(h, r)[m].cpu()
    null99 = float(np.quantile(subspaces.random_alignment_null(Z, r + 1, null_samples, seed=m), 0.99))
    null99_init = float(np.quantile(subspaces.random_alignment_null(Z0[0].cpu(), r0 + 1, null_samples, seed=m), 0.99))
    fit = fit_init = None
    if features is not None:
        fit = subspaces.alignment(Z, features)
        fit_init = subspaces.alignment(core_init.coordinates(h_init, r0)[m].cpu(), features)
    return LensComparison(r, r0, align, pca, init_all, null99, null99_init, fit, fit_init)


@dataclass
class GrokRun:
    """Chapter 02's models trained here: the task, its inputs (p², 2), the models, their history and steps per epoch."""

    task: ModularAddition
    tokens: Tensor
    model: BatchedTransformer
    history: History
    steps_per_epoch: int


def train_ace_authors(p: int, seeds: list[int], epochs: int, d_model: int = 64, d_mlp: int = 256, lr: float = 3e-3,
                      weight_decay: float = 1.0, data_seed: int = 42, batch_size: int = 512,
                      device: str | torch.device = "cpu") -> GrokRun:
    """Return chapter 02's models of ``seeds`` (:meth:`corekit.models.TransformerConfig.ace_authors`, the split
    ``RandomState(data_seed)`` with half for training) trained by AdamW for ``epochs`` epochs, evaluated every 20,
    saved at initialisation."""
    task = modular_addition(p, 0.5, data_seed, split="numpy")
    tokens = task.tokens(equals=False)                                   # (p², 2): a, b
    train_set, test_set = task.datasets(equals=False)
    model = BatchedTransformer(TransformerConfig.ace_authors(p, d_model=d_model, d_mlp=d_mlp), seeds=seeds).to(device)
    spe = train.steps_per_epoch(len(train_set), batch_size, drop_last=False)
    history = train_ensemble(model, train_set, test_set, steps=epochs * spe, batch_size=batch_size, lr=lr,
                             weight_decay=weight_decay, betas=(0.9, 0.999), drop_last=False, eval_every=spe * 20,
                             snapshot_steps=[0], progress=False)
    return GrokRun(task, tokens, model, history, spe)


def subspace_ablations(model, h: Tensor, core: ace.Core, ranks: Tensor, readout_vectors: list[Tensor],
                       test_idx: Tensor, labels: Tensor,
                       n_classes: int) -> tuple[Tensor, list[dict[str, tuple[float, float]]]]:
    """Return the held-out accuracies (M,) of the unembedding on h (M, N, D) and, per model m, {subspace: (keep only,
    remove)} for its ACE core of rank r, the stream directions of its readout eigenvectors (N, ≥ r + 1) and random
    subspaces of dimensions r and r + 1 (seeded with m), ablated about the core's mean on the ``test_idx`` rows."""
    test_y = labels[test_idx].to(h.device)                               # labels (p²,), test_idx (n,)
    h_test = h[:, torch.as_tensor(test_idx, device=h.device)]
    accuracy = readout_accuracy(model, test_y, n_classes)
    base = accuracy(h_test)
    M, D = h.shape[0], h.shape[-1]
    ablation = []
    for i in range(M):
        r = int(ranks[i])
        one = slice(i, i + 1)
        q_entk = subspaces.residual_directions(h[one].cpu(), readout_vectors[i][:, :r + 1][None].cpu()).to(h.device)
        rows = {}
        for name, q in (("ACE core", core.q(r)[one]), ("eNTK W_U block", q_entk),
                        ("random, dim r", subspaces.random_subspaces(1, D, r, seed=i).to(h.device)),
                        ("random, dim r + 1", subspaces.random_subspaces(1, D, r + 1, seed=i).to(h.device))):
            keep, rem = keep_remove_accuracy(h_test, q.expand(M, -1, -1), core.mean, accuracy)
            rows[name] = (float(keep[i]), float(rem[i]))
        ablation.append(rows)
    return base, ablation


def modal_length_rows(mask: Tensor) -> tuple[Tensor, int]:
    """Return the rows (n,) of a left-padded attention mask (N, T) whose unpadded length is the most common one, and
    that length (ties: the shorter)."""
    if mask.dim() != 2:
        raise ValueError(f"mask must be an (N, T) attention mask, got shape {tuple(mask.shape)}")
    lengths = mask.sum(1)
    values, counts = torch.unique(lengths, return_counts=True)
    length = int(values[counts.argmax()])
    return torch.nonzero(lengths == length)[:, 0], length


@dataclass
class NumberLens:
    """The eNTK of block ``layer`` on the prompts of one token length, beside ACE's axis at that layer: which prompts
    (``rows`` into train + test, ``is_train`` (n,)), their labels y (n,) (1 = plural), the residual h (n, D) at the
    last token, the axis coordinate z (n,), the top eigenpairs, their scores (k, n), and the times of the cached
    forward pass and of Lanczos."""

    layer: int
    module: str
    tokens: int
    rows: np.ndarray
    is_train: np.ndarray
    y: np.ndarray
    h: Tensor
    z: np.ndarray
    pairs: Eigenpairs
    scores: Tensor
    cache_seconds: float
    lanczos_seconds: float

    @property
    def relative_residuals(self) -> np.ndarray:
        """Return ‖K̃v − λv‖ / λ (k,) of every pair."""
        return (self.pairs.residuals / self.pairs.values.abs()).cpu().numpy()


def number_lens(m: Measured, axis: Axis, layer: int, top_k: int, block_size: int = 8, max_vectors: int = 96,
                tol: float = 1e-3, seed: int = 0, chunk_size: int = 64, vector_chunk: int = 8) -> NumberLens:
    """Return the top-``top_k`` eigenpairs of block ``layer``'s residual-stream eNTK on the measured prompts of the most
    common token length, by block Lanczos until each relative residual is ≤ ``tol`` (at most ``max_vectors``
    vectors), with ACE's axis coordinate on the same prompts."""
    if not isinstance(layer, int) or isinstance(layer, bool) or not 1 <= layer <= m.n_layers:
        raise ValueError(f"layer must be a decoder block in [1, {m.n_layers}] (the block that writes the axis's "
                         f"residual stream), got {layer!r}")
    if max_vectors < top_k + block_size:
        raise ValueError(f"max_vectors must be at least top_k + block_size = {top_k + block_size}, got {max_vectors}")
    splits = (m.train, m.test)
    if m.train.batch.input_ids.shape[1] != m.test.batch.input_ids.shape[1]:
        width = max(s.batch.input_ids.shape[1] for s in splits)
        pad = [width - s.batch.input_ids.shape[1] for s in splits]
        ids = torch.cat([torch.nn.functional.pad(s.batch.input_ids, (p, 0)) for s, p in zip(splits, pad)])
        mask = torch.cat([torch.nn.functional.pad(s.batch.attention_mask, (p, 0)) for s, p in zip(splits, pad)])
    else:
        ids = torch.cat([s.batch.input_ids for s in splits])
        mask = torch.cat([s.batch.attention_mask for s in splits])
    rows, tokens = modal_length_rows(mask)
    n_train = len(m.train.y)
    is_train = (rows < n_train).numpy()
    if is_train.sum() < 2 or (~is_train).sum() < 2:
        raise ValueError(f"only {int(is_train.sum())} train and {int((~is_train).sum())} test prompts have the most "
                         f"common length ({tokens} tokens): measure more prompts")
    y = np.concatenate([m.train.y, m.test.y])[rows.numpy()]
    h = torch.cat([m.train.last.h[layer], m.test.last.h[layer]])[rows].double()
    z = ((h - axis.core.mean[layer].double()) @ axis.q[layer, :, 0].double()).cpu().numpy()
    start = time.perf_counter()
    op = ResidualStreamNTK(m.lm, ids[rows][:, -tokens:].to(m.lm.device), layer, chunk_size=chunk_size,
                           vector_chunk=vector_chunk)
    cache_seconds = time.perf_counter() - start
    start = time.perf_counter()
    pairs = lanczos(op.matvec, op.n, top_k, block_size=block_size, max_steps=max_vectors // block_size, tol=tol,
                    seed=seed, device=m.lm.device, relative_to="each")
    lanczos_seconds = time.perf_counter() - start
    return NumberLens(layer, op.module_path, tokens, rows.numpy(), is_train, y, h.cpu(), z, pairs,
                      eigenvector_scores(pairs.vectors.cpu(), len(rows)), cache_seconds, lanczos_seconds)


@dataclass
class HeldOut:
    """The score row chosen on the training prompts (highest oriented train AUROC), its sign, its train AUROC, its
    held-out AUROC and that AUROC's percentile-bootstrap interval over the held-out prompts."""

    index: int
    sign: float
    train_auroc: float
    test_auroc: float
    interval: tuple[float, float]


def held_out_auroc(scores: Tensor | np.ndarray, y: np.ndarray, is_train: np.ndarray, n_boot: int = 2000,
                   level: float = 0.95, seed: int = 0) -> HeldOut:
    """Return the held-out AUROC (with interval; ``n_boot`` 0: none, NaN) of the row of ``scores`` (k, n) that separates
    ``y`` (n,) best on the training prompts (``is_train`` (n,)), each row signed on the training prompts."""
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2 or s.shape[1] != len(y) or len(is_train) != len(y):
        raise ValueError(f"scores must be (k, n) with n = len(y) = len(is_train), got {s.shape}, {len(y)}, "
                         f"{len(is_train)}")
    train, test = np.asarray(is_train, bool), ~np.asarray(is_train, bool)
    signs = np.atleast_1d(stats.orient(s[:, train], y[train]))
    oriented = s * signs[:, None]
    train_auroc = np.atleast_1d(stats.auroc(oriented[:, train], y[train]))
    best = int(np.argmax(train_auroc))
    row, y_test = oriented[best, test], y[test]
    interval = (np.nan, np.nan) if n_boot == 0 else stats.bootstrap_interval(
        lambda a, b: stats.auroc(a, b) if 0 < b.sum() < len(b) else np.nan, (row, y_test), n_boot=n_boot, level=level,
        seed=seed)
    return HeldOut(best, float(signs[best]), float(train_auroc[best]), float(stats.auroc(row, y_test)), interval)


def random_scores(h: Tensor, k: int, seed: int = 0) -> Tensor:
    """Return the projections (k, n) of the centred states h (n, D) on k random unit directions (seeded)."""
    if h.dim() != 2 or not isinstance(k, int) or k < 1:
        raise ValueError(f"h must be (n, D) and k a positive integer, got {tuple(h.shape)} and {k!r}")
    gen = torch.Generator().manual_seed(seed)
    d = torch.randn(h.shape[1], k, generator=gen, dtype=torch.float64)
    hc = h.double().cpu() - h.double().cpu().mean(0)
    return (hc @ (d / d.norm(dim=0))).T


def stream_directions(h: Tensor, scores: Tensor) -> Tensor:
    """Return one unit direction (D, k) of the stream per score row (k, n) of the states h (n, D): the least-squares
    readout of that row alone (:func:`corekit.subspaces.residual_directions`; minimum norm when n ≤ D)."""
    if h.dim() != 2 or scores.dim() != 2 or scores.shape[1] != h.shape[0]:
        raise ValueError(f"h must be (n, D) and scores (k, n) with the same n, got {tuple(h.shape)} and "
                         f"{tuple(scores.shape)}")
    h, scores = h.double().cpu(), scores.double().cpu()
    return torch.cat([residual_directions(h[None], row[None, :, None])[0] for row in scores], dim=1)


@dataclass
class NumberReadings:
    """Held-out AUROCs (plural vs singular) of ACE's axis, the best eNTK eigenvector and the best principal direction,
    the random null's 99th percentile, each single row's held-out AUROC ({"eNTK": [...], "PCA": [...]}) and the PCA
    scores (k, n)."""

    ace: HeldOut
    entk: HeldOut
    pca: HeldOut
    random_auroc99: float
    per_vector: dict[str, list[float]]
    pca_scores: Tensor


def number_readings(number: NumberLens, top_k: int, null_samples: int = 200, n_boot: int = 2000,
                    seed: int = 0) -> NumberReadings:
    """Return the :class:`NumberReadings` of ``number``'s prompts: every reading chosen and signed on its training
    prompts, scored on the held-out ones; the null the best of ``top_k`` random directions, ``null_samples`` times."""
    ace_number = held_out_auroc(number.z[None], number.y, number.is_train, n_boot, seed=seed)
    entk_number = held_out_auroc(number.scores, number.y, number.is_train, n_boot, seed=seed)
    pca_lm = pca_scores(number.h, top_k)
    pca_number = held_out_auroc(pca_lm, number.y, number.is_train, n_boot, seed=seed)
    random_number = np.array([held_out_auroc(random_scores(number.h, top_k, seed=s), number.y, number.is_train,
                                             n_boot=0).test_auroc for s in range(null_samples)])
    random_auroc99 = float(np.quantile(random_number, 0.99))
    per_vector = {name: [held_out_auroc(S[j:j + 1], number.y, number.is_train, n_boot=0).test_auroc
                         for j in range(top_k)] for name, S in (("eNTK", number.scores), ("PCA", pca_lm))}
    return NumberReadings(ace_number, entk_number, pca_number, random_auroc99, per_vector, pca_lm)


@dataclass
class AxisSpan:
    """cos² of ACE's axis with the span of the first k = 1 … top_k eNTK and PCA directions of the stream, the random
    k-dimensional null's 99th percentiles, the ceiling (the span of all the prompts' centred states) and the absolute
    cosine with each single eNTK direction."""

    entk: list[float]
    pca: list[float]
    random99: list[float]
    ceiling: float
    single: list[float]


def axis_span(q_axis: Tensor, h: Tensor, entk_scores: Tensor, pca_scores: Tensor, top_k: int,
              null_samples: int = 200) -> AxisSpan:
    """Return the :class:`AxisSpan` of the axis q_axis (D,) against the stream directions of the eNTK and PCA score
    rows (k, n) of the states h (n, D) (:func:`stream_directions`); the random nulls seeded with k."""
    D = q_axis.shape[0]
    q_entk = stream_directions(h, entk_scores)                          # (D, k): one per eigenvector
    q_pca = stream_directions(h, pca_scores)                            # (D, k): the principal axes
    span_entk = [subspaces.span_cos2(q_axis, q_entk[:, :j]) for j in range(1, top_k + 1)]
    span_pca = [subspaces.span_cos2(q_axis, q_pca[:, :j]) for j in range(1, top_k + 1)]
    random_span99 = [float(np.quantile(subspaces.random_span_cos2(D, j, null_samples, seed=j), 0.99))
                     for j in range(1, top_k + 1)]
    ceiling = subspaces.span_cos2(q_axis, (h - h.mean(0)).T)
    single = [abs(float(q_axis @ q_entk[:, j] / q_entk[:, j].norm())) for j in range(top_k)]
    return AxisSpan(span_entk, span_pca, random_span99, ceiling, single)
