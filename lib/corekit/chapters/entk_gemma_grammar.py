"""Grammar features in a language model's eNTK (notebook 07), one small object per step.

Layers are named as in Hugging Face: ``layer`` N is the decoder block ``model.layers.N`` (0-based), its
eNTK is taken with respect to ``model.layers.N.mlp.down_proj`` and its PCA baseline reads that block's
output (``hidden_states[N + 1]``, the residual stream N + 1 of :mod:`corekit.lm`). :func:`probe_labels`
splits the selected contexts several times and builds their binary labels; :func:`spectra` computes,
for each layer, the top eigenpairs of the residual-stream operator (:class:`~corekit.entk.ResidualStreamNTK`,
one shared forward pass) by block Lanczos run until every scored pair has converged, with per-context
eigenvector scores; :func:`pca_by_layer` gives the baseline's scores at every block; :func:`dense_check`
compares Lanczos with a dense ``eigh`` on a few short contexts; :func:`compare` runs the probe protocol
(:mod:`corekit.probes`) on both families with a paired bootstrap over contexts; :func:`layer_sweep` chooses the eNTK
and PCA layers on the training halves; :func:`random_null` scores random directions by the same protocol (the claims'
null); :func:`label_table` and :func:`run_summary` write the per-label table and the closing summary.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from torch import Tensor

from corekit.entk import Eigenpairs, ResidualStreamNTK, dense_eigenpairs, eigenvector_scores, lanczos
from corekit.lm import LM
from corekit.probes import (
    PairedDifference,
    SplitProbes,
    bootstrap_macro,
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
        """Return abs(λ_Lanczos − λ_dense) / λ_dense (k,)."""
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


def label_table(e: SplitProbes, p: SplitProbes, d: PairedDifference) -> list[str]:
    """Return the lines of a table with one row per label: mean test AUROC and AP of both families and the difference
    with its interval (after a header line)."""
    lines = [f"   {'label':>22s}   eNTK AUROC   PCA AUROC   difference [95 % interval]   eNTK AP   PCA AP"]
    for i, name in enumerate(d.names):
        lines.append(f"   {name:>22s}      {e.auroc()[:, i].mean():.3f}       {p.auroc()[:, i].mean():.3f}     "
                     f"{d.diff[i]:+.3f} [{d.interval[i, 0]:+.3f}, {d.interval[i, 1]:+.3f}]      "
                     f"{e.ap()[:, i].mean():.3f}     {p.ap()[:, i].mean():.3f}")
    return lines


def train_macro(probe: SplitProbes, scores: Tensor, labels: ProbeLabels) -> float:
    """Return the mean training AUROC of the chosen directions of ``probe`` (on ``scores`` (k, N)) over the word classes
    and the splits."""
    return float(np.mean([r.train_auroc_macro(scores.numpy(), labels.pos, train)
                          for r, (train, _) in zip(probe.results, labels.splits)]))


@dataclass
class LayerSweep:
    """The word-class probes of PCA at every block, the mean training AUROC (:func:`train_macro`) of the eNTK at each
    swept layer and of PCA at every block, and the layer each family chooses on the training halves."""

    pca: dict[int, SplitProbes]
    entk_train: dict[int, float]
    pca_train: dict[int, float]
    best_entk: int
    best_pca: int


def layer_sweep(results: dict[int, Comparison], spec: Spectra, pca: dict[int, Tensor], labels: ProbeLabels,
                layers: list[int]) -> LayerSweep:
    """Return the layer sweep: PCA probed on the word classes at every block of ``pca`` (scores (k, N) each), the eNTK
    read from ``results`` at ``layers``, and each family's best layer by mean training AUROC (the first on ties)."""
    pca_sweep = {l: evaluate_splits(pca[l], labels.pos, list(UPOS_CLASSES), labels.splits) for l in pca}
    entk_train = {l: train_macro(results[l].entk_pos, spec.layers[l].scores, labels) for l in layers}
    pca_train = {l: train_macro(pca_sweep[l], pca[l], labels) for l in pca}
    return LayerSweep(pca_sweep, entk_train, pca_train, max(entk_train, key=entk_train.get),
                      max(pca_train, key=pca_train.get))


def macro_level(probe: SplitProbes, Y: np.ndarray, weights: np.ndarray) -> tuple[float, tuple[float, float]]:
    """Return (test macro AUROC, its 95 % interval over the bootstrap's resamples ``weights`` (B, N) of the contexts) of
    ``probe`` on labels ``Y`` (L, N); NaN without labels."""
    return bootstrap_macro(probe, Y, weights) if probe.names else (float("nan"), (float("nan"), float("nan")))


@dataclass
class RandomNull:
    """Random unit directions of each block's output probed in place of the eNTK eigenvectors: per swept layer their
    :class:`Comparison` with PCA (its ``entk_*`` fields hold the random family), and {(family, kind): (macro AUROC,
    interval)} at the headline layer for family "entk", "pca", "random" and kind "pos", "morph"."""

    results: dict[int, Comparison]
    levels: dict[tuple[str, str], tuple[float, tuple[float, float]]]


def random_null(sel: Selection, pca: dict[int, Tensor], labels: ProbeLabels, layers: list[int], k: int, seed: int,
                head: Comparison, layer: int) -> RandomNull:
    """Return the random-direction null: ``k`` seeded random directions (:func:`random_by_layer`) against PCA at every
    layer of ``layers``, and each family's macro AUROC with its bootstrap interval at ``layer`` (``head``: the eNTK's)."""
    family = random_by_layer(sel, k, seed)
    results = {l: compare(family[l], pca[l], labels) for l in layers}
    rand = results[layer]
    rows = {"pos": labels.pos, "morph": labels.morph_matrix}
    levels = {(name, kind): macro_level(getattr(r, f"{side}_{kind}"), rows[kind], labels.weights)
              for name, r, side in (("entk", head, "entk"), ("pca", head, "pca"), ("random", rand, "entk"))
              for kind in ("pos", "morph")}
    return RandomNull(results, levels)


def behind(names: Sequence[str], entk: np.ndarray, pca: np.ndarray) -> list[str]:
    """Return the names of the labels (in order) on which the eNTK's score (L,) is not above PCA's (L,)."""
    return [n for n, e, p in zip(names, entk, pca) if e <= p]


def run_summary(setting: str, head_spec: LayerSpectrum, head: Comparison, labels: ProbeLabels, min_support: int,
                N: int, short: dict[str, int], n_per_class: int) -> list[str]:
    """Return the closing summary's sentences: convergence, the word classes' and morphology's eNTK − PCA macro AUROC
    with intervals, the classes and labels where PCA is level or ahead, and the classes the corpus ran short of."""
    pos_e, pos_p = head.entk_pos.auroc().mean(0), head.pca_pos.auroc().mean(0)
    morph_e, morph_p = head.entk_morph.auroc().mean(0), head.pca_morph.auroc().mean(0)
    pos_wins, morph_wins, n_morph = int((pos_e > pos_p).sum()), int((morph_e > morph_p).sum()), len(labels.morph.names)
    pos_behind = behind(UPOS_CLASSES, pos_e, pos_p)
    morph_behind = behind(labels.morph.names, morph_e, morph_p)
    lines = [f"On {setting}, the 25 eNTK eigenvectors (converged: max relative residual "
             f"{float(head_spec.relative_residuals.max()):.1e} after "
             f"{head_spec.pairs.n_matvecs} products) separate the 8 word classes with macro AUROC {pos_e.mean():.3f} "
             f"against PCA's {pos_p.mean():.3f} (paper .827 / .745): a difference of {head.pos.macro:+.3f}, 95 % interval "
             f"[{head.pos.macro_interval[0]:+.3f}, {head.pos.macro_interval[1]:+.3f}], which "
             f"{'excludes' if head.pos.macro_interval[0] > 0 else 'does not exclude'} zero.",
             f"eNTK is ahead on {pos_wins} of 8 classes"
             + (f"; PCA is level or ahead on {', '.join(pos_behind)}" if pos_behind else "")
             + f"; the per-class interval lies above zero on {int((head.pos.interval[:, 0] > 0).sum())} of the 8 classes."]
    if n_morph:
        lines.append(f"Morphology ({n_morph} label(s) of the predicted word pass support ≥ {min_support} and the "
                     f"purity/coverage filter): eNTK {morph_e.mean():.3f} against PCA {morph_p.mean():.3f} (paper .783 / "
                     f".743), difference {head.morph.macro:+.3f} [{head.morph.macro_interval[0]:+.3f}, "
                     f"{head.morph.macro_interval[1]:+.3f}]; eNTK ahead on {morph_wins} of {n_morph}"
                     + (f" (not on {', '.join(morph_behind)})" if morph_behind else "") + ".")
    else:
        lines.append(f"No morphology label passes support ≥ {min_support} and the purity/coverage filter at N = {N}.")
    if short:
        lines.append(f"The corpus ran short for {', '.join(f'{c} ({k} of {n_per_class})' for c, k in short.items())}.")
    return lines
