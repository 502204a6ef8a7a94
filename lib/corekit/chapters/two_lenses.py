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

Kernels come per parameter (:func:`corekit.entk.parameter_eigenpairs`) or per layer
(:func:`layer_eigenpairs`: the parameters of :func:`corekit.models.layer_groups` summed), for any
:class:`~corekit.models.BatchedTransformer`, chapter 02's post-LayerNorm encoder block with query, key and value
biases included.

To act on an eNTK eigenspace inside the network, :func:`corekit.subspaces.residual_directions` maps its eigenfunctions to
directions of the residual stream by least squares (for the readout's own kernel this recovers the right
singular vectors of H exactly); ACE's keep-only and remove ablations then apply to any orthonormal basis
(:func:`keep_remove_accuracy`), and :func:`corekit.subspaces.random_subspaces` draws the null of the same dimension.

On a language model (question 4), ACE's axis (:func:`corekit.number_axis.find_axis`) lives in the
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
:func:`number_readings` and :func:`axis_span` read the language model's eNTK against ACE's axis. Chapter 06's
training is :func:`corekit.recipes.train_authors`, its kernels :func:`corekit.entk.parameter_eigenpairs`.

The claims are the book's own: :data:`CLAIMS` declares them and :func:`claims` decides them on the run's
:class:`Findings`. A claim about trained models covers every model that generalises (final held-out accuracy ≥
:data:`GENERALISES`), with a precondition counting those models; the keep-only and remove ablations at the final
stream, read by a linear unembedding, are set against the same ablations at initialisation (where they pass by
construction), ACE's number axis against the difference of class means, and what training adds to the lenses'
agreement against the memorising checkpoint, for both architectures. :func:`check_inputs` holds the chapter's rules
on its parameters.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
import torch
from torch import Tensor

from corekit import ace, entk, fourier, stats, subspaces, train
from corekit.entk import Eigenpairs, ResidualStreamNTK, eigenvector_scores, lanczos
from corekit.inputs import distinct, fits, heads_divide, kernels, language_model, require
from corekit.models import BatchedTransformer, TransformerConfig, layer_groups, with_state
from corekit.number_axis import Axis, Measured, find_axis, measure, sweep
from corekit.probes import pca_scores
from corekit.subspaces import residual_directions
from corekit.tasks.modular import ModularAddition, modular_addition
from corekit.train import History, train_ensemble
from corekit.verdicts import Claim, Null, Spec, at_least, at_most, decide, declared, per_model, reported


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
    return entk.parameter_group_eigenpairs(model, m, tokens, top_k, layer_groups(model.config))


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
                      device: str | torch.device = "cpu", snapshot_every_epochs: int | None = None) -> GrokRun:
    """Return chapter 02's models of ``seeds`` (:meth:`corekit.models.TransformerConfig.ace_authors`, the split
    ``RandomState(data_seed)`` with half for training) trained by AdamW for ``epochs`` epochs, evaluated every 20,
    saved at initialisation and, with ``snapshot_every_epochs``, every that many epochs (a multiple of 20 adds no
    evaluation)."""
    task = modular_addition(p, 0.5, data_seed, split="numpy")
    tokens = task.tokens(equals=False)                                   # (p², 2): a, b
    train_set, test_set = task.datasets(equals=False)
    model = BatchedTransformer(TransformerConfig.ace_authors(p, d_model=d_model, d_mlp=d_mlp), seeds=seeds).to(device)
    spe = train.steps_per_epoch(len(train_set), batch_size, drop_last=False)
    every = snapshot_every_epochs
    saved = [0] + ([] if every is None else list(range(every * spe, epochs * spe + 1, every * spe)))
    history = train_ensemble(model, train_set, test_set, steps=epochs * spe, batch_size=batch_size, lr=lr,
                             weight_decay=weight_decay, betas=(0.9, 0.999), drop_last=False, eval_every=spe * 20,
                             snapshot_steps=saved, progress=False)
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
    the random null's 99th percentile, each single row's held-out AUROC ({"eNTK": [...], "PCA": [...]}), the PCA
    scores (k, n) and the difference of the training prompts' class means (``dom``, a supervised direction)."""

    ace: HeldOut
    entk: HeldOut
    pca: HeldOut
    random_auroc99: float
    per_vector: dict[str, list[float]]
    pca_scores: Tensor
    dom: HeldOut | None = None


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
    dom = held_out_auroc(difference_of_means_scores(number.h, number.y, number.is_train), number.y, number.is_train,
                         n_boot, seed=seed)
    return NumberReadings(ace_number, entk_number, pca_number, random_auroc99, per_vector, pca_lm, dom)


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


# --------------------------------------------------------------------------------------------
# The chapter's steps on chapter 06's and chapter 04's models (their training, kernels and axis from the wings)


def gram_gap(h: Tensor, eigs: list[dict[str, Eigenpairs]], n_outputs: int, readout: str = "W_U") -> float:
    """Return the largest relative difference over models between the top eigenvalue of the readout's eNTK and that of
    the residual Gram h hᵀ / C of h (M, N, D) (:func:`linear_readout_kernel`): 0 up to rounding."""
    gaps = []
    for m, e in enumerate(eigs):
        top = float(e[readout].values[0])
        gram = float(torch.linalg.eigvalsh(linear_readout_kernel(h[m:m + 1], n_outputs)[0])[-1])
        gaps.append(abs(top - gram) / abs(top))
    return max(gaps)


def lenses_per_parameter(model, tokens: Tensor, h: Tensor, core: ace.Core, ranks: Tensor,
                         eigs: list[dict[str, Eigenpairs]], init_state: dict[str, Tensor],
                         init: tuple[Tensor, ace.Core, Tensor], null_samples: int,
                         features: list[Tensor]) -> tuple[list[LensComparison], list[Tensor]]:
    """Return every chapter-06 model's :class:`LensComparison` (per parameter, nulls against W_U) and the top r₀ + 1
    eigenvectors (N, r₀ + 1) of W_U's eNTK at initialisation (``init_state``, whose :func:`final_residual_core` is
    ``init``), r₀ the core's rank there; ``features`` one (N, f) tensor per model."""
    h0, core0, ranks0 = init
    out, init_readout = [], []
    for m in range(len(eigs)):
        init_eigs = entk.parameter_eigenpairs(model, m, tokens, int(ranks0[m]) + 1, state=init_state)
        out.append(compare_lenses(m, h, core, ranks, eigs[m], h0, core0, ranks0, init_eigs, "W_U", null_samples,
                                  features=features[m]))
        init_readout.append(init_eigs["W_U"].vectors)
    return out, init_readout


def lenses_per_layer(model, tokens: Tensor, h: Tensor, core: ace.Core, ranks: Tensor,
                     eigs: list[dict[str, Eigenpairs]], init_state: dict[str, Tensor], energy_threshold: float,
                     null_samples: int) -> tuple[list[LensComparison], Tensor]:
    """Return every chapter-02 model's :class:`LensComparison` (per layer, nulls against the unembedding) and the
    energy ranks (M,) of its core at initialisation (``init_state``)."""
    h0, core0, ranks0 = final_residual_core(model, tokens, energy_threshold, init_state)
    return [compare_lenses(m, h, core, ranks, eigs[m], h0, core0, ranks0,
                           layer_eigenpairs(model, m, tokens, int(ranks0[m]) + 1, state=init_state), "unembed",
                           null_samples) for m in range(len(eigs))], ranks0


def readout_alignment(model, m: int, tokens: Tensor, state: dict[str, Tensor], energy_threshold: float = 0.99,
                      readout: str = "unembed") -> float:
    """Return model m's alignment at ``state`` (a snapshot) of the ACE core of its final residual stream (rank r) with
    the top r + 1 eigenvectors of the layer ``readout``'s eNTK (:func:`layer_eigenpairs`): one point of the two
    lenses' alignment over training."""
    h, core, ranks = final_residual_core(model, tokens, energy_threshold, state)
    r = int(ranks[m])
    snapshot = with_state(model, state)
    pairs = entk.parameter_group_eigenpairs(snapshot, m, tokens, r + 1, {readout: layer_groups(model.config)[readout]})
    return subspaces.alignments(pairs[readout].vectors[:, :r + 1][None], core.coordinates(h, r)[m:m + 1])[0]


def snapshot_lenses(model, tokens: Tensor, p: int, keys: list[list[int]], states: list[dict[str, Tensor]],
                    energy_threshold: float = 0.99) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return, over chapter 06's saved ``states`` (S) and models (M): the ACE core's energy rank (S, M), W_U's eNTK
    alignment with the a + b features at each model's ``keys`` (S, M) and the two lenses' alignment (S, M)."""
    cores = [final_residual_core(model, tokens, energy_threshold, state) for state in states]
    rank = np.array([r.cpu().numpy() for _, _, r in cores])
    pairs = [entk.unembedding_alignment(model, m, tokens, fourier.fourier_basis(p, "sum", keys[m]), states,
                                        cores=[c.coordinates(h, int(r[m]))[m] for h, c, r in cores])
             for m in range(rank.shape[1])]
    return rank, np.stack([f for f, _ in pairs], 1), np.stack([lens for _, lens in pairs], 1)


def first_memorising(train: np.ndarray, test: np.ndarray, level: float = 0.99) -> list[int | None]:
    """Return per model the first row of ``train`` / ``test`` accuracies (S, M) where train ≥ ``level`` while test is
    below it (the memorising checkpoint), None where there is none."""
    train, test = np.asarray(train), np.asarray(test)
    return [next((j for j in range(train.shape[0]) if train[j, m] >= level > test[j, m]), None)
            for m in range(train.shape[1])]


def number_axis(lm, name: str, train: list, test: list, batch_size: int) -> tuple[Measured, Axis, int]:
    """Return chapter 04's readings of the agreement prompts, ACE's number axis at every layer and the layer chosen by
    its sweep (:mod:`corekit.number_axis`: the layer where flipping the axis hurts the margin most)."""
    measured = measure(lm, name, train, test, batch_size)
    axis = find_axis(measured)
    return measured, axis, sweep(measured, axis, range(1, lm.n_layers + 1), "last").layer


def difference_of_means_scores(h: Tensor, y: np.ndarray, is_train: np.ndarray) -> Tensor:
    """Return the projections (1, n) of the centred states h (n, D) on the difference of the class means (y = 1 minus
    y = 0) of the training states (``is_train`` (n,)): a supervised direction, the null of a supervised axis."""
    h = h.double().cpu()
    train = torch.as_tensor(np.asarray(is_train, bool))
    labels = torch.as_tensor(np.asarray(y))
    d = h[train & (labels == 1)].mean(0) - h[train & (labels == 0)].mean(0)
    return ((h - h.mean(0)) @ (d / d.norm()))[None]


# --------------------------------------------------------------------------------------------
# Input checks


def check_inputs(params: dict) -> None:
    """Check chapter 08's parameters: distinct seeds, heads that divide d_model, snapshots that fit the run and the log,
    top_k within the inputs, even prompt counts, enough Lanczos vectors, the size of the kernels and the model."""
    nb = "08_two_lenses"
    distinct(nb, "seeds", params["seeds"])
    distinct(nb, "grok_seeds", params["grok_seeds"])
    heads_divide(nb, params)
    require(params["grok_d_model"] % 4 == 0, nb, "grok_d_model", params["grok_d_model"], "a multiple of the 4 heads")
    epochs, every, log_every = params["epochs"], params["dynamics_every_epochs"], params["log_every_epochs"]
    require(epochs > every, nb, "epochs", epochs,
            f"more than dynamics_every_epochs = {every} (the dynamics need two snapshots)")
    require(every % log_every == 0, nb, "dynamics_every_epochs", every, f"a multiple of log_every_epochs = {log_every}")
    p = params["p"]
    require(params["top_k"] < p * p, nb, "top_k", params["top_k"], f"fewer than the p² = {p * p} inputs")
    for name in ("lm_n_train", "lm_n_test"):
        require(params[name] % 2 == 0, nb, name, params[name], "an even number (half singular, half plural prompts)")
    lm_top_k = params["lm_top_k"]
    require(params["lm_lanczos_vectors"] >= lm_top_k + 8, nb, "lm_lanczos_vectors", params["lm_lanczos_vectors"],
            f"at least lm_top_k + 8 = {lm_top_k + 8}")
    grok_p = params["grok_p"]
    fits(nb, params, [
        kernels(4, p * p, "p", "the attention kernels W_Q, W_K, W_V, W_O of chapter 06's model"),
        kernels(1, grok_p * grok_p, "grok_p", "a kernel of chapter 02's model"),
        *language_model(params["language_model"], "language_model", 4),
    ])


# --------------------------------------------------------------------------------------------
# The claims (the book's own: chapter 08 tests no paper's claim)

#: The held-out accuracy from which a model counts as generalising (the models the claims cover).
GENERALISES = 0.99
COVERS = "every chapter-06 model that generalises (final held-out accuracy ≥ 0.99)"
GROK_COVERS = "every chapter-02 model that generalises (final held-out accuracy ≥ 0.99)"
_AUROC = "held-out AUROC, plural vs singular (its 95 % interval must clear the random null)"

#: The chapter's claims, declared before any run, in the order the notebook records them.
CLAIMS: tuple[Spec, ...] = (
    Spec("models_generalise", "precondition", "number of chapter 06's models whose final held-out accuracy is ≥ 0.99",
         at_least(1)),
    Spec("lenses_coincide_at_unembedding", "extension",
         "alignment of the ACE core (rank r) with W_U's top r + 1 eNTK eigenvectors", at_least(0.9), covers=COVERS),
    Spec("lenses_gain_over_init", "extension",
         "share of the initialised model's shortfall from 1 in the ACE core vs W_U block alignment that training "
         "closes, (trained − init)/(1 − init)", at_least(0.5), covers=COVERS),
    Spec("unembedding_kernel_is_closest", "extension",
         "alignment with the ACE core of W_U's eNTK block minus that of the best other parameter's", at_least(0),
         covers=COVERS),
    Spec("ace_core_is_fourier", "extension",
         "alignment of the ACE core with the a + b features at the model's key frequencies", at_least(0.9),
         covers=COVERS),
    Spec("ace_subspace_sufficient", "extension",
         "held-out accuracy keeping only the ACE core (the rest at its mean), minus the model's", at_least(-0.02),
         covers=COVERS),
    Spec("ace_subspace_necessary", "extension", "held-out accuracy with the ACE core removed (at its mean), against 2/p",
         at_most(0.0690), covers=COVERS),
    Spec("entk_subspace_sufficient", "extension",
         "held-out accuracy keeping only the eNTK W_U block (the rest at its mean), minus the model's", at_least(-0.02),
         covers=COVERS),
    Spec("entk_subspace_necessary", "extension",
         "held-out accuracy with the eNTK W_U block removed (at its mean), against 2/p", at_most(0.0690), covers=COVERS),
    Spec("models_generalise_grok", "precondition", "number of chapter 02's models whose final held-out accuracy is ≥ 0.99",
         at_least(1)),
    Spec("lenses_coincide_at_unembedding_grok", "extension",
         "alignment of the ACE core (rank r) with the unembedding layer's top r + 1 eNTK eigenvectors", at_least(0.9),
         covers=GROK_COVERS),
    Spec("lenses_gain_over_init_grok", "extension",
         "share of the initialised model's shortfall from 1 in the ACE core vs unembedding block "
         "alignment that training closes, (trained − init)/(1 − init)", at_least(0.5), covers=GROK_COVERS),
    Spec("unembedding_layer_is_closest_grok", "extension",
         "alignment with the ACE core of the unembedding layer's eNTK block minus that of the best other layer's",
         at_least(0), covers=GROK_COVERS),
    Spec("entk_rises_before_core_settles", "extension",
         "epochs from the steepest rise of W_U's eNTK alignment with the a + b features to the settling of the ACE core",
         at_least(100), covers=COVERS),
    Spec("core_settles_at_grokking", "extension",
         "distance of the ACE core's settling epoch from the grokking epoch (test ≥ 0.99), in units of max(2 snapshots, "
         "15 % of the grokking epoch)", at_most(1), covers=COVERS),
    Spec("ace_axis_separates_number", "extension", f"ACE's axis: {_AUROC}", at_least(0.8)),
    Spec("entk_separates_number", "extension",
         f"the best of the top eNTK eigenvectors (chosen and signed on the training prompts): {_AUROC}", at_least(0.8)),
    Spec("ace_axis_in_entk_span", "extension", "cos² of ACE's axis with the span of the top eNTK directions of the stream",
         at_least(0.5)),
    Spec("cost_seconds", "extension",
         "wall time in seconds of each lens on this run's device. ACE: the core of the final residual stream of all "
         "seeds (activations, observability, extraction); on the language model the axis at every layer with the layer "
         "sweep, model loading included. eNTK: every parameter's kernel and top eigenvectors (chapter 06's model), every "
         "layer's kernel and top eigenvectors (chapter 02's), one block's operator cache and Lanczos (the language "
         "model)"),
)
_SPEC = declared(CLAIMS)


@dataclass(frozen=True)
class Family:
    """One family of trained models for the claims: its seeds, final and initial held-out accuracies (M,), each
    model's :class:`LensComparison`, the two lenses' alignment at its memorising checkpoint (None: no such snapshot)
    and the name of its readout kernel ("W_U" or "unembed")."""

    seeds: list[int]
    test_final: list[float]
    test_init: list[float]
    lenses: list[LensComparison]
    at_memorising: list[float | None]
    readout: str


@dataclass(frozen=True)
class Ablations:
    """Held-out accuracies of the trained models (M,) and, per model, {subspace: (keep only, remove)}
    (:func:`subspace_ablations`), and the same for the models at initialisation."""

    base: list[float]
    rows: list[dict[str, tuple[float, float]]]
    base_init: list[float]
    rows_init: list[dict[str, tuple[float, float]]]


@dataclass(frozen=True)
class Timing:
    """Epochs per chapter-06 model: where the core settles, where the eNTK alignment and the held-out accuracy rise
    fastest, where train and test accuracy first reach 0.99 (None: never), and the snapshot interval."""

    core_settles: list[float]
    entk_rises: list[float]
    test_rises: list[float]
    memorised: list[float | None]
    grokked: list[float | None]
    every: int


@dataclass(frozen=True)
class Findings:
    """What chapter 08's claims need: the modulus and nulls' sample count, chapter 06's models (``modular``), their
    ablations and timing, chapter 02's models (``grok``, with its modulus and epochs), the language model's readings
    (its name, the axis's layer, :class:`NumberLens`, :class:`NumberReadings`, :class:`AxisSpan`) and the cost in
    seconds ({model: {"ACE": s, "eNTK": s}})."""

    p: int
    null_samples: int
    modular: Family
    ablations: Ablations
    timing: Timing
    grok: Family
    grok_p: int
    grok_epochs: int
    language_model: str
    layer: int
    number: NumberLens
    readings: NumberReadings
    span: AxisSpan
    seconds: dict[str, dict[str, float]]


def closed(trained: float, initial: float) -> float:
    """Return the share (trained − initial)/(1 − initial) of the initial shortfall from 1 that training closes."""
    return (trained - initial) / max(1 - initial, 1e-12)


def margin(scores: dict[str, float], own: str) -> float:
    """Return scores[own] minus the best other entry of ``scores`` (≥ 0 when ``own`` is the closest)."""
    return scores[own] - max(v for n, v in scores.items() if n != own)


def generalising(family: Family) -> list[int]:
    """Return the indices of the family's models whose final held-out accuracy is ≥ :data:`GENERALISES`."""
    return [m for m, acc in enumerate(family.test_final) if acc >= GENERALISES]


def _excluded(family: Family) -> str:
    """Return the text naming the family's models that did not generalise ("" when all did)."""
    out = [f"seed {s} ({family.test_final[m]:.3f})" for m, s in enumerate(family.seeds) if m not in generalising(family)]
    return f" (not covered, their final held-out accuracy below {GENERALISES}: {', '.join(out)})" if out else ""


def _covered(family: Family, values: list) -> dict:
    """Return {"seed s": value} over the family's generalising models (all models when none generalised), values
    rounded to 4 digits (None kept)."""
    idx = generalising(family) or list(range(len(family.seeds)))
    return per_model([family.seeds[m] for m in idx], [None if values[m] is None else round(float(values[m]), 4)
                                                     for m in idx])


def _over(spec_id: str | Spec, family: Family, values: list, nulls: list[tuple[str, list]], statistic: str | None = None,
          why: str | None = None) -> Claim:
    """Return claim ``spec_id`` decided over the family's generalising models, each null restricted to them (a null's
    None entries dropped, a null with none left recorded as not measured); undecided when no model generalised."""
    spec = _SPEC[spec_id] if isinstance(spec_id, str) else spec_id
    idx = set(generalising(family))
    undecided = None if idx else (f"no model generalised (final held-out accuracy ≥ {GENERALISES}); a run whose models "
                                  "generalise (more epochs) decides it")
    null = []
    for what, vals in nulls:
        kept = {k: v for k, v in _covered(family, vals).items() if v is not None}
        null.append(Null(what, kept or None))
    return decide(spec, _covered(family, values), null=null, undecided=undecided, why=why,
                  statistic=(statistic or spec.statistic) + _excluded(family))


def _count(spec_id: str, family: Family, what: str) -> Claim:
    """Return the precondition ``spec_id``: how many of the family's models generalise, against the same models at
    initialisation."""
    k = len(generalising(family))
    k0 = sum(acc >= GENERALISES for acc in family.test_init)
    return decide(_SPEC[spec_id], k, null=Null("the same models at initialisation", k0),
                  statistic=f"number of {what}'s {len(family.seeds)} models whose final held-out accuracy is ≥ "
                            f"{GENERALISES}" + _excluded(family))


def _lens_claims(family: Family, suffix: str, name: str, null_samples: int, prefix: str = "") -> list[Claim]:
    """Return the family's claims that the lenses coincide at the readout, that training closes the gap (against
    random subspaces and the memorising checkpoint) and that the readout's kernel is the closest."""
    L, ro = family.lenses, family.readout
    random = f"random subspaces of r + 1 dimensions (99th percentile of {null_samples})"
    ids = [f"lenses_coincide_at_unembedding{suffix}", f"lenses_gain_over_init{suffix}",
           f"unembedding_{'layer' if suffix else 'kernel'}_is_closest{suffix}"]
    said = [prefix + _SPEC[i].statistic for i in ids]
    coincide = _over(ids[0], family, [c.align[ro] for c in L],
                     [("the same models at initialisation", [c.init(ro) for c in L]),
                      (f"PCA of the same activations (rank r) vs {name}'s block", [c.pca for c in L]),
                      (random, [c.null99 for c in L])],
                     statistic=said[0], why=f"{name}'s eNTK is the Gram matrix of the residual stream the core is "
                                            "cut from, at initialisation too")
    gain = _over(ids[1], family, [closed(c.align[ro], c.init(ro)) for c in L],
                 [(f"random subspaces of r + 1 dimensions, trained vs initialised (99th percentiles of {null_samples})",
                   [closed(c.null99, c.null99_init) for c in L]),
                  ("the memorising checkpoint (first snapshot with train ≥ 0.99 while test < 0.99)",
                   [None if a is None else closed(a, c.init(ro)) for a, c in zip(family.at_memorising, L)])],
                 statistic=said[1])
    closest = _over(ids[2], family, [margin(c.align, ro) for c in L],
                    [("the same models at initialisation", [margin(c.init_all, ro) for c in L])], statistic=said[2],
                    why="closest per seed: " + ", ".join(f"{s} {max(c.align, key=c.align.get).removeprefix('0.')}"
                                                         for s, c in zip(family.seeds, L)))
    return [coincide, gain, closest]


def _kept(rows: list[dict[str, tuple[float, float]]], base: list[float], name: str) -> list[float]:
    """Return per model the held-out accuracy keeping only the subspace ``name``, minus the model's own."""
    return [r[name][0] - float(b) for r, b in zip(rows, base)]


def _ablation_claims(f: Findings) -> list[Claim]:
    """Return the keep-only and remove claims of the ACE core and the eNTK block, each against a random subspace of
    the same dimension and the same ablation of the same models at initialisation."""
    A, fam, out = f.ablations, f.modular, []
    init = ("the same ablation of the same models at initialisation (their own core and W_U block; at a cut read by a "
            "linear unembedding both pass there by construction)")
    for lens, name in (("ace", "ACE core"), ("entk", "eNTK W_U block")):
        rand = "random, dim r" if lens == "ace" else "random, dim r + 1"
        out.append(_over(f"{lens}_subspace_sufficient", fam, _kept(A.rows, A.base, name),
                         [("keep only a random subspace of the same dimension", _kept(A.rows, A.base, rand)),
                          (init, _kept(A.rows_init, A.base_init, name))]))
        necessary = replace(_SPEC[f"{lens}_subspace_necessary"], bound=at_most(round(2 / f.p, 4)))
        out.append(_over(necessary, fam, [r[name][1] for r in A.rows],
                         [("remove a random subspace of the same dimension", [r[rand][1] for r in A.rows]),
                          (init, [r[name][1] for r in A.rows_init])],
                         why=f"chance is 1/p = {1 / f.p:.3f}"))
    return out


def _timing_claims(f: Findings) -> list[Claim]:
    """Return the claims that the eNTK rises before the core settles (by at least one snapshot interval: the declared
    100 epochs are the notebook's default interval, the run's own replaces them) and that the core settles at grokking."""
    T, fam = f.timing, f.modular
    rises = _over(replace(_SPEC["entk_rises_before_core_settles"], bound=at_least(T.every)), fam,
                  [a - e for a, e in zip(T.core_settles, T.entk_rises)],
                  [("the held-out accuracy's steepest rise in place of the eNTK's",
                    [a - t for a, t in zip(T.core_settles, T.test_rises)])],
                  statistic=f"epochs from the steepest rise of W_U's eNTK alignment with the a + b features to the "
                            f"settling of the ACE core (snapshots every {T.every} epochs: at least one snapshot later)",
                  why="the eNTK's steepest rise and the core's settling, in epochs: " + "; ".join(
                      f"seed {s} {round(e)} and {round(a)}" for s, e, a in zip(fam.seeds, T.entk_rises, T.core_settles)))
    tol = [None if g is None else max(2 * T.every, 0.15 * g) for g in T.grokked]
    off = [None if g is None or t is None else round(abs(t - g) / w, 3) for t, g, w in zip(T.core_settles, T.grokked, tol)]
    off_mem = [None if g is None or t is None else round(abs(t - g) / w, 3) for t, g, w in zip(T.memorised, T.grokked, tol)]
    settles = _over("core_settles_at_grokking", fam, off,
                    [("the epoch the model fits its training pairs (train ≥ 0.99) in place of the core's settling",
                      off_mem)],
                    why="the core settles, train accuracy reaches 0.99, test accuracy reaches 0.99, in epochs: " + "; ".join(
                        f"seed {s} {round(a)}, {m}, {g}" for s, a, m, g in zip(fam.seeds, T.core_settles, T.memorised,
                                                                               T.grokked)))
    return [rises, settles]


def _rounded(interval: tuple[float, float]) -> tuple[float, float]:
    """Return an interval rounded to 4 digits."""
    return tuple(round(float(x), 4) for x in interval)


def _not_above(result: HeldOut, null: float) -> str | None:
    """Return why the run cannot decide an AUROC that clears 0.8 but whose interval does not clear the null, or None."""
    if result.test_auroc >= 0.8 and not result.interval[0] > null:
        return (f"the 95 % interval's low end {result.interval[0]:.3f} is not above the random null's {null:.3f}; "
                "more held-out prompts (lm_n_test) decide it")
    return None


def _number_claims(f: Findings) -> list[Claim]:
    """Return the language model's claims: ACE's axis and the eNTK separate number, and the axis lies in the eNTK's
    span."""
    R, S, k = f.readings, f.span, len(f.span.entk)
    n_test = int((~np.asarray(f.number.is_train, bool)).sum())
    where = f"{f.language_model}, layer {f.layer}, {n_test} held-out prompts of {f.number.tokens} tokens"
    random = round(R.random_auroc99, 4)
    rand_null = Null(f"random directions (best of {k}, chosen and signed on the training prompts), 99th percentile of "
                     f"{f.null_samples}", random)
    ace_nulls = [rand_null] + ([] if R.dom is None else [Null(
        "the difference of the training prompts' plural and singular means (a supervised direction, signed on the "
        "training prompts)", round(R.dom.test_auroc, 4))])
    ace_axis = decide(_SPEC["ace_axis_separates_number"], round(R.ace.test_auroc, 4), null=ace_nulls,
                      interval=_rounded(R.ace.interval), undecided=_not_above(R.ace, R.random_auroc99),
                      statistic=f"{where}: held-out AUROC of ACE's axis, plural vs singular (its 95 % interval must "
                                "clear the null)")
    entk_axis = decide(_SPEC["entk_separates_number"], round(R.entk.test_auroc, 4),
                       null=[Null(f"random directions (same protocol), 99th percentile of {f.null_samples}", random),
                             Null(f"PCA's top {k} (same protocol)", round(R.pca.test_auroc, 4))],
                       interval=_rounded(R.entk.interval), undecided=_not_above(R.entk, R.random_auroc99),
                       statistic=f"{where}: held-out AUROC of the best of the top {k} eNTK eigenvectors (chosen and "
                                 "signed on the training prompts), plural vs singular (its 95 % interval must clear the "
                                 "null)",
                       why=f"eigenvector {R.entk.index} (train AUROC {R.entk.train_auroc:.3f}); ACE's axis "
                           f"{R.ace.test_auroc:.3f}")
    span = decide(_SPEC["ace_axis_in_entk_span"], round(S.entk[-1], 4),
                  null=[Null(f"random {k}-dimensional subspaces, 99th percentile of {f.null_samples}",
                             round(S.random99[-1], 4)),
                        Null(f"the top {k} principal directions", round(S.pca[-1], 4))],
                  statistic=f"{f.language_model}, layer {f.layer}: cos² of ACE's axis with the span of the top {k} eNTK "
                            "directions of the stream",
                  why=f"angle {np.degrees(np.arccos(np.sqrt(min(S.entk[-1], 1.0)))):.0f}°; closest single eNTK direction "
                      f"{np.degrees(np.arccos(min(max(S.single), 1.0))):.0f}°; ceiling (the span of all {len(f.number.y)} "
                      f"prompts' states) {S.ceiling:.3f}")
    return [ace_axis, entk_axis, span]


def claims(findings: Findings) -> list[Claim]:
    """Return chapter 08's claims (:data:`CLAIMS`) decided on ``findings``, in the notebook's order."""
    f = findings
    fourier_core = _over("ace_core_is_fourier", f.modular, [c.features for c in f.modular.lenses],
                         [("the same models at initialisation (their cores, the final keys)",
                           [c.features_init for c in f.modular.lenses])])
    prefix = f"chapter 02's model (p = {f.grok_p}, {f.grok_epochs} epochs): "
    return [_count("models_generalise", f.modular, "chapter 06"), *_lens_claims(f.modular, "", "W_U", f.null_samples),
            fourier_core, *_ablation_claims(f), _count("models_generalise_grok", f.grok, "chapter 02"),
            *_lens_claims(f.grok, "_grok", "the unembedding", f.null_samples, prefix), *_timing_claims(f),
            *_number_claims(f), reported(_SPEC["cost_seconds"], f.seconds)]
