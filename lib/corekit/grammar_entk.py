"""Grammar features in a language model's eNTK (notebook 07), one small object per step.

:func:`probe_labels` splits the selected contexts and builds their binary labels; :func:`spectra`
computes, for each layer, the top eigenpairs of the residual-stream operator
(:class:`~corekit.entk.ResidualStreamNTK`, one shared forward pass) by block Lanczos, with per-context
eigenvector scores and the PCA baseline's scores; :func:`dense_check` compares Lanczos with a dense
``eigh`` on a few short contexts; :func:`compare` runs the probe protocol (:mod:`corekit.probes`) on
both sets of directions.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from corekit.entk import Eigenpairs, ResidualStreamNTK, dense_eigenpairs, eigenvector_scores, lanczos
from corekit.lm import LM
from corekit.probes import ProbeResult, evaluate, pca_scores, stratified_split
from corekit.tasks.grammar import UPOS_CLASSES, Selection, label_matrix, morph_labels


@dataclass
class ProbeLabels:
    """A stratified train / test split (index arrays) of the contexts and their binary labels: word classes
    (8, N) and the morphology labels ``morph_names`` (len(morph_names), N)."""

    train: np.ndarray
    test: np.ndarray
    pos: np.ndarray
    morph_names: list[str]
    morph: np.ndarray


def probe_labels(sel: Selection, seed: int, min_support: int) -> ProbeLabels:
    """Return a seeded 50/50 split stratified by word class and the labels with ≥ ``min_support`` positives and
    negatives in each half."""
    train, test = stratified_split(sel.upos, seed=seed)
    names = morph_labels(sel.contexts, (train, test), min_support)
    return ProbeLabels(train, test, label_matrix(sel.contexts, UPOS_CLASSES), names, label_matrix(sel.contexts, names))


@dataclass
class LayerSpectrum:
    """One layer's top eigenpairs of K̃ (Lanczos) and their time, the per-context eigenvector scores (k, N), the PCA
    baseline's scores (k, N), and the operator's size: parameters, blocks downstream of the module, n = N·d."""

    layer: int
    pairs: Eigenpairs
    seconds: float
    scores: Tensor
    pca: Tensor
    n_params: int
    downstream: int
    n: int


@dataclass
class Spectra:
    """The time of the shared forward pass that caches every layer, and each layer's :class:`LayerSpectrum`."""

    cache_seconds: float
    layers: dict[int, LayerSpectrum]


def spectra(lm: LM, sel: Selection, layers: list[int], top_k: int, lanczos_vectors: int, block_size: int, seed: int,
            chunk_size: int, vector_chunk: int) -> Spectra:
    """Return the top-``top_k`` eigenpairs of every layer's operator, by block Lanczos with a Krylov space of
    ``lanczos_vectors`` vectors (tolerance 1e-6 λ₁), after one shared forward pass."""
    N = len(sel.contexts)
    start = time.perf_counter()
    ops = ResidualStreamNTK.for_layers(lm, sel.input_ids, layers, chunk_size=chunk_size, vector_chunk=vector_chunk)
    cache_seconds = time.perf_counter() - start
    out = {}
    for layer in layers:
        op = ops.pop(layer)
        start = time.perf_counter()
        pairs = lanczos(op.matvec, op.n, top_k, block_size=block_size, max_steps=lanczos_vectors // block_size,
                        tol=1e-6, seed=seed, device=lm.device)
        seconds = time.perf_counter() - start
        out[layer] = LayerSpectrum(layer, pairs, seconds, eigenvector_scores(pairs.vectors.cpu(), N),
                                   pca_scores(sel.residuals[sel.layers.index(layer)], top_k), op.n_params,
                                   len(op.downstream), op.n)
        del op
    return Spectra(cache_seconds, out)


@dataclass
class DenseCheck:
    """Lanczos against dense ``eigh`` on a few short contexts: the contexts, n = N·d, the dense eigenpairs, Lanczos
    run to convergence and with the runs' short budget, and the times of the dense and converged solves."""

    contexts: list[int]
    tokens: int
    n: int
    dense: Eigenpairs
    converged: Eigenpairs
    short: Eigenpairs
    dense_seconds: float
    lanczos_seconds: float

    @property
    def rel_error(self) -> np.ndarray:
        """Return |λ_Lanczos − λ_dense| / λ_dense (k,) for Lanczos run to convergence."""
        return ((self.converged.values.cpu() - self.dense.values.cpu()).abs() / self.dense.values.cpu()).numpy()

    @property
    def rel_error_short(self) -> np.ndarray:
        """Return the same relative errors (k,) for Lanczos with the runs' short Krylov budget."""
        return ((self.short.values.cpu() - self.dense.values.cpu()).abs() / self.dense.values.cpu()).numpy()


def dense_check(lm: LM, sel: Selection, layer: int, n_examples: int, tokens: int, top_k: int, block_size: int,
                lanczos_vectors: int, seed: int, chunk_size: int, vector_chunk: int) -> DenseCheck:
    """Return the dense check of ``layer``'s operator on ``n_examples`` contexts (spread over the word classes) cut to
    their last ``tokens`` tokens after BOS."""
    per_class = max(1, n_examples // len(UPOS_CLASSES))
    pick = [i for c in UPOS_CLASSES for i in np.flatnonzero(sel.upos == c)[:per_class]][:n_examples]
    ids = torch.cat([sel.input_ids[pick, :1], sel.input_ids[pick, -tokens:]], dim=1)
    op = ResidualStreamNTK(lm, ids, layer, chunk_size=chunk_size, vector_chunk=vector_chunk)
    start = time.perf_counter()
    dense = dense_eigenpairs(op.dense(), top_k)
    dense_seconds = time.perf_counter() - start
    start = time.perf_counter()
    converged = lanczos(op.matvec, op.n, top_k, block_size=block_size, tol=1e-8, seed=seed, device=lm.device)
    lanczos_seconds = time.perf_counter() - start
    short = lanczos(op.matvec, op.n, top_k, block_size=block_size, max_steps=lanczos_vectors // block_size, tol=1e-6,
                    seed=seed, device=lm.device)
    return DenseCheck([int(i) for i in pick], int(ids.shape[1]), op.n, dense, converged, short, dense_seconds,
                      lanczos_seconds)


@dataclass
class Comparison:
    """The probe protocol's results at one layer for eNTK eigenvector scores and PCA scores, on word classes and
    on morphology."""

    entk_pos: ProbeResult
    entk_morph: ProbeResult
    pca_pos: ProbeResult
    pca_morph: ProbeResult


def compare(spectrum: LayerSpectrum, labels: ProbeLabels) -> Comparison:
    """Return the held-out probe results of the eNTK and PCA directions of one layer."""
    def run(scores: Tensor) -> tuple[ProbeResult, ProbeResult]:
        return (evaluate(scores, labels.pos, UPOS_CLASSES, labels.train, labels.test),
                evaluate(scores, labels.morph, labels.morph_names, labels.train, labels.test))
    return Comparison(*run(spectrum.scores), *run(spectrum.pca))
