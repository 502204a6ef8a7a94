"""Grammar features in a language model's eNTK (notebook 07), one small object per step.

Layers are named as in Hugging Face: ``layer`` N is the decoder block ``model.layers.N`` (0-based), its
eNTK is taken with respect to ``model.layers.N.mlp.down_proj`` and its PCA baseline reads that block's
output (``hidden_states[N + 1]``, the residual stream N + 1 of :mod:`corekit.lm`). :func:`probe_labels`
splits the selected contexts several times and builds their binary labels; :func:`spectra` computes,
for each layer, the top eigenpairs of the residual-stream operator (:class:`~corekit.entk.ResidualStreamNTK`,
one shared forward pass) by block Lanczos run until every scored pair has converged, with per-context
eigenvector scores; :func:`pca_by_layer` gives the baseline's scores at every block; :func:`dense_check`
compares Lanczos with a dense ``eigh`` on a few short contexts; :func:`compare` runs the probe protocol
(:mod:`corekit.probes`) on both families with a paired bootstrap over contexts.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from corekit.entk import Eigenpairs, ResidualStreamNTK, dense_eigenpairs, eigenvector_scores, lanczos
from corekit.lm import LM
from corekit.probes import (
    PairedDifference,
    SplitProbes,
    bootstrap_weights,
    evaluate_splits,
    paired_bootstrap,
    pca_scores,
    random_scores,
    stratified_split,
)
from corekit.tasks.grammar import UPOS_CLASSES, MorphLabels, Selection, label_matrix, morph_labels


def stream_of(lm: LM, layer: int) -> int:
    """Return the residual stream of :mod:`corekit.lm` (and 1-based block of :mod:`corekit.entk`) that the Hugging
    Face block ``model.layers.<layer>`` writes: ``layer`` + 1."""
    if not isinstance(layer, int) or isinstance(layer, bool) or not 0 <= layer < lm.n_layers:
        raise ValueError(f"layer must be an integer in [0, {lm.n_layers - 1}] (Hugging Face's model.layers.N of "
                         f"{lm.name}), got {layer!r}")
    return layer + 1


@dataclass
class ProbeLabels:
    """Stratified train / test splits (one (train, test) pair of index arrays per seed), the word-class labels
    (8, N), the morphology labels of the predicted word (``morph.names``; (len(morph.names), N)) and the
    bootstrap's resampling counts (n_boot, N), drawn within each word class."""

    splits: list[tuple[np.ndarray, np.ndarray]]
    pos: np.ndarray
    morph: MorphLabels
    morph_matrix: np.ndarray
    weights: np.ndarray


def probe_labels(sel: Selection, seeds: list[int], min_support: int, n_boot: int, boot_seed: int,
                 purity: float = 0.9, coverage: float = 0.9) -> ProbeLabels:
    """Return seeded 50/50 splits stratified by word class, the labels of the predicted words (morphology filtered by
    support, purity and coverage as the paper does) and the bootstrap's counts."""
    if not seeds:
        raise ValueError("split seeds must name at least one seed")
    splits = [stratified_split(sel.upos, seed=s) for s in seeds]
    morph = morph_labels(sel.predicted_morph, sel.upos, min_support, purity, coverage)
    sets = sel.predicted_labels()
    Y = label_matrix(sets, morph.names)
    for name, y in zip(morph.names, Y):
        if any(y[idx].min() == y[idx].max() for split in splits for idx in split):
            raise ValueError(f"morphology label {name} lacks positives or negatives in a split half: raise min_support")
    return ProbeLabels(splits, label_matrix(sets, UPOS_CLASSES), morph, Y,
                       bootstrap_weights(sel.upos, n_boot, seed=boot_seed))


@dataclass
class LayerSpectrum:
    """One layer's top eigenpairs of K̃ (Lanczos) and their time, the per-context eigenvector scores (k, N), the
    module's Hugging Face name, and the operator's size: parameters, blocks downstream of the module, n = N·d."""

    layer: int
    module: str
    pairs: Eigenpairs
    seconds: float
    scores: Tensor
    n_params: int
    downstream: int
    n: int

    @property
    def relative_residuals(self) -> np.ndarray:
        """Return ‖K̃v − λv‖ / λ (k,) of every scored pair."""
        return (self.pairs.residuals / self.pairs.values.abs()).cpu().numpy()


@dataclass
class Spectra:
    """The time of the shared forward pass that caches every layer, and each layer's :class:`LayerSpectrum`."""

    cache_seconds: float
    layers: dict[int, LayerSpectrum]


def _lanczos(op: ResidualStreamNTK, top_k: int, max_vectors: int, block_size: int, tol: float, seed: int,
             device) -> Eigenpairs:
    """Return the top-``top_k`` pairs of ``op`` by block Lanczos, stopped once every ‖K̃v − λv‖ ≤ ``tol`` · λ (or after
    ``max_vectors`` Krylov vectors)."""
    if max_vectors < top_k + block_size:
        raise ValueError(f"lanczos_vectors must be at least top_k + block_size = {top_k + block_size}, got {max_vectors}")
    return lanczos(op.matvec, op.n, top_k, block_size=block_size, max_steps=max_vectors // block_size, tol=tol,
                   seed=seed, device=device, relative_to="each")


def spectra(lm: LM, sel: Selection, layers: list[int], top_k: int, max_vectors: int, block_size: int, tol: float,
            seed: int, chunk_size: int, vector_chunk: int) -> Spectra:
    """Return the top-``top_k`` eigenpairs of the operator of every Hugging Face block in ``layers``, by block Lanczos
    until each relative residual is ≤ ``tol`` (at most ``max_vectors`` vectors), after one shared forward pass."""
    N = len(sel.contexts)
    streams = {stream_of(lm, l): l for l in layers}
    start = time.perf_counter()
    ops = ResidualStreamNTK.for_layers(lm, sel.input_ids, list(streams), chunk_size=chunk_size,
                                       vector_chunk=vector_chunk)
    cache_seconds = time.perf_counter() - start
    out = {}
    for stream, layer in streams.items():
        op = ops.pop(stream)
        start = time.perf_counter()
        pairs = _lanczos(op, top_k, max_vectors, block_size, tol, seed, lm.device)
        seconds = time.perf_counter() - start
        out[layer] = LayerSpectrum(layer, op.module_path, pairs, seconds, eigenvector_scores(pairs.vectors.cpu(), N),
                                   op.n_params, len(op.downstream), op.n)
        del op
    return Spectra(cache_seconds, out)


def pca_by_layer(lm: LM, sel: Selection, top_k: int) -> dict[int, Tensor]:
    """Return {Hugging Face block N: the PCA baseline's scores (top_k, N) on that block's output at the last token} for
    every block whose output ``sel`` read."""
    return {s - 1: pca_scores(sel.residuals[i], top_k) for i, s in enumerate(sel.layers) if s >= 1}


def random_by_layer(sel: Selection, k: int, seed: int) -> dict[int, Tensor]:
    """Return {Hugging Face block N: scores (k, N) of that block's output at the last token on k random unit directions
    (seeded, the same for every block)} for every block whose output ``sel`` read: the null family beside PCA's."""
    return {s - 1: random_scores(sel.residuals[i], k, seed) for i, s in enumerate(sel.layers) if s >= 1}


@dataclass
class DenseCheck:
    """Lanczos against dense ``eigh`` on a few short contexts: the contexts, n = N·d, the dense eigenpairs, Lanczos
    with the runs' settings, and the times of the dense and Lanczos solves."""

    contexts: list[int]
    tokens: int
    n: int
    dense: Eigenpairs
    lanczos: Eigenpairs
    dense_seconds: float
    lanczos_seconds: float

    @property
    def rel_error(self) -> np.ndarray:
        """Return |λ_Lanczos − λ_dense| / λ_dense (k,)."""
        return ((self.lanczos.values.cpu() - self.dense.values.cpu()).abs() / self.dense.values.cpu()).numpy()


def dense_check(lm: LM, sel: Selection, layer: int, n_examples: int, tokens: int, top_k: int, max_vectors: int,
                block_size: int, tol: float, seed: int, chunk_size: int, vector_chunk: int) -> DenseCheck:
    """Return the dense check of Hugging Face block ``layer``'s operator on ``n_examples`` contexts (spread over the word
    classes) cut to their last ``tokens`` tokens after BOS, Lanczos run with the runs' settings."""
    per_class = max(1, n_examples // len(UPOS_CLASSES))
    pick = [i for c in UPOS_CLASSES for i in np.flatnonzero(sel.upos == c)[:per_class]][:n_examples]
    ids = torch.cat([sel.input_ids[pick, :1], sel.input_ids[pick, -tokens:]], dim=1)
    op = ResidualStreamNTK(lm, ids, stream_of(lm, layer), chunk_size=chunk_size, vector_chunk=vector_chunk)
    start = time.perf_counter()
    dense = dense_eigenpairs(op.dense(), top_k)
    dense_seconds = time.perf_counter() - start
    start = time.perf_counter()
    pairs = _lanczos(op, top_k, max_vectors, block_size, tol, seed, lm.device)
    return DenseCheck([int(i) for i in pick], int(ids.shape[1]), op.n, dense, pairs, dense_seconds,
                      time.perf_counter() - start)


@dataclass
class Comparison:
    """eNTK eigenvector scores against PCA scores at one layer, on word classes and on morphology: each family's
    probes over the splits and the paired differences eNTK − PCA with their intervals (AUROC; ``pos_ap``: the
    word classes' average precision)."""

    entk_pos: SplitProbes
    pca_pos: SplitProbes
    entk_morph: SplitProbes
    pca_morph: SplitProbes
    pos: PairedDifference
    morph: PairedDifference
    pos_ap: PairedDifference | None = None


def compare(entk_scores: Tensor, pca: Tensor, labels: ProbeLabels, level: float = 0.95) -> Comparison:
    """Return the held-out probe results of eNTK (k, N) and PCA (k, N) scores over every split, and their paired
    bootstrap differences at ``level``."""
    def run(Y: np.ndarray, names: list[str]) -> tuple[SplitProbes, SplitProbes, PairedDifference]:
        e, p = evaluate_splits(entk_scores, Y, names, labels.splits), evaluate_splits(pca, Y, names, labels.splits)
        return e, p, paired_bootstrap(e, p, Y, labels.weights, level)
    ep, pp, dp = run(labels.pos, list(UPOS_CLASSES))
    em, pm, dm = run(labels.morph_matrix, labels.morph.names)
    return Comparison(ep, pp, em, pm, dp, dm, paired_bootstrap(ep, pp, labels.pos, labels.weights, level, metric="ap"))
