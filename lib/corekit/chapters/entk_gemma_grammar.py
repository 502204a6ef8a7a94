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
null); :func:`label_table` and :func:`run_summary` write the per-label table and the closing summary. :func:`claims`
decides the chapter's claims (:data:`CLAIMS`) on the run's :class:`Findings`, and :func:`check_inputs` refuses parameters
that cannot make a run.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from corekit.entk import Eigenpairs, ResidualStreamNTK, dense_eigenpairs, eigenvector_scores, lanczos
from corekit.inputs import LANGUAGE_MODELS, N_WORD_CLASSES, Need, fits, kernels, language_model, loadable_model, require
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
from corekit.verdicts import (
    Claim,
    Null,
    Spec,
    at_least,
    at_most,
    decide,
    declared,
    interval_above,
    interval_contains,
    reported,
)


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


# --------------------------------------------------------------------------------------------
# Claims

#: The paper's numbers (Lin 2025, Table 3 and its layer-16 table): macro AUROC of the eNTK eigenvectors and of PCA on
#: word classes (pos) and morphology (morph), and the word classes' macro average precision.
PAPER = dict(pos_entk=0.827, pos_pca=0.745, morph_entk=0.783, morph_pca=0.743, pos_ap_entk=0.523, pos_ap_pca=0.409)
#: The setting the paper's numbers come from.
PAPER_SETTING = dict(layer=16, context_tokens=64, contexts=1024, corpus="TinyStories", labeller="Stanza",
                     model="Gemma-3-270M (released weights)", morph_labels=12)
#: What decides a claim on the paper's numbers: a run at the paper's setting.
AT_PAPER_SETTING = ("a run at the paper's setting decides it: TinyStories labelled by Stanza, the released Gemma-3-270M "
                    "weights, model.layers.16, 128 contexts per class of 64 tokens")
_DIFF = "eNTK − PCA macro AUROC: its 95 % paired-bootstrap interval"
#: The chapter's claims, in the order the notebook records them. Bounds that depend on the run (the Lanczos tolerance,
#: the number of morphology labels kept) are declared at the paper profile's values and set by :func:`claims`.
CLAIMS: tuple[Spec, ...] = (
    Spec("lanczos_max_residual", "check", "max ‖K̃v − λv‖/λ of the scored pairs", at_most(1e-3),
         no_null="numerical check"),
    Spec("lanczos_rel_error", "check", "largest relative error of the top eigenvalues, Lanczos vs dense eigh",
         at_most(1e-3), no_null="numerical check"),
    Spec("pos_macro_auroc_diff", "paper", f"{_DIFF}, word classes", interval_above(0),
         paper=round(PAPER["pos_entk"] - PAPER["pos_pca"], 3)),
    Spec("pos_macro_auroc_diff_paper", "paper", f"{_DIFF}, word classes",
         interval_contains(round(PAPER["pos_entk"] - PAPER["pos_pca"], 3)),
         paper=round(PAPER["pos_entk"] - PAPER["pos_pca"], 3)),
    Spec("pos_macro_auroc_entk", "paper", "macro AUROC over 8 classes of the eNTK eigenvectors: its 95 % bootstrap",
         interval_contains(PAPER["pos_entk"]), paper=PAPER["pos_entk"]),
    Spec("pos_macro_auroc_pca", "paper", "macro AUROC over 8 classes of PCA: its 95 % bootstrap",
         interval_contains(PAPER["pos_pca"]), paper=PAPER["pos_pca"]),
    Spec("morph_macro_auroc_diff", "paper", f"{_DIFF}, morphology", interval_above(0),
         paper=round(PAPER["morph_entk"] - PAPER["morph_pca"], 3)),
    Spec("morph_macro_auroc_diff_paper", "paper", f"{_DIFF}, morphology",
         interval_contains(round(PAPER["morph_entk"] - PAPER["morph_pca"], 3)),
         paper=round(PAPER["morph_entk"] - PAPER["morph_pca"], 3)),
    Spec("morph_macro_auroc_entk", "paper", "macro AUROC over the morphology labels of the eNTK eigenvectors: its 95 % "
         "bootstrap", interval_contains(PAPER["morph_entk"]), paper=PAPER["morph_entk"]),
    Spec("morph_macro_auroc_pca", "paper", "macro AUROC over the morphology labels of PCA: its 95 % bootstrap",
         interval_contains(PAPER["morph_pca"]), paper=PAPER["morph_pca"]),
    Spec("pos_macro_ap", "paper", "eNTK − PCA macro average precision over 8 classes: its 95 % paired-bootstrap interval",
         interval_above(0), paper=round(PAPER["pos_ap_entk"] - PAPER["pos_ap_pca"], 3)),
    Spec("pos_classes_entk_wins", "paper", "word classes (of 8) on which the eNTK's mean test AUROC is above PCA's",
         at_least(7), paper="7 of 8 in the paper's own model.layers.16 table (PRON .703 < .723); 'every class' is "
                            "Table 3's best layer per class"),
    Spec("morph_features_entk_wins", "paper", "morphology labels on which the eNTK's mean test AUROC is above PCA's",
         at_least(11), paper="all but one (of 12 labels)"),
    Spec("best_layer", "paper", "word classes (of 8) whose best eNTK layer has a higher mean test AUROC than PCA's best "
         "block", at_least(8), paper="8 of 8 (Table 3: each class at its best of the 18 blocks)"),
    Spec("layer_chosen_on_train", "paper", "the layer chosen on the training halves", paper="model.layers.16 (Table 3)"),
    Spec("contexts_kept", "check", "contexts whose predicted word has the true UPOS", paper="1024 (128 per class)"),
    Spec("lanczos_seconds", "check", "shared cache, then top-k Lanczos per layer",
         paper="~480 (A100, model.layers.16, N = 1024)"),
)
_SPEC = declared(CLAIMS)


@dataclass(frozen=True)
class Findings:
    """What the claims are decided on: the :class:`Spectra` and the headline ``layer``; the :class:`DenseCheck`; each
    swept layer's :class:`Comparison`; the :class:`RandomNull`; the :class:`LayerSweep`; the :class:`ProbeLabels`; the
    contexts kept (N), tried, and the classes short of ``n_per_class``; where the run differs from the paper or not
    (corpus, labeller, model and its weights, blocks in the model, device); and the run's parameters that the claims'
    statistics name."""

    spec: Spectra
    layer: int
    check: DenseCheck
    results: Mapping[int, Comparison]
    null: RandomNull
    sweep: LayerSweep
    labels: ProbeLabels
    kept: int
    tried: int
    short: Mapping[str, int]
    corpus: str
    model: str
    weights: str
    n_layers: int
    device: str
    top_k: int
    block_size: int
    lanczos_tol: float
    n_boot: int
    split_seeds: int
    min_support: int
    n_per_class: int
    context_tokens: int
    labeller: str = "spaCy"


def paper_setting_differences(f: Findings) -> list[str]:
    """Return what in the run differs from the setting of the paper's numbers (:data:`PAPER_SETTING`), one phrase each
    (empty at the paper's setting)."""
    paper = PAPER_SETTING
    out = []
    if not f.corpus.startswith(paper["corpus"]):
        out.append(f"the corpus is {f.corpus}, not {paper['corpus']}")
    if f.labeller != paper["labeller"]:
        out.append(f"the labels are {f.labeller}'s, not {paper['labeller']}'s")
    if "gemma-3-270m" not in f.model.lower() or "GGUF" in f.weights:
        out.append(f"the weights are {f.weights}, not the paper's {paper['model']}")
    if f.layer != paper["layer"]:
        out.append(f"the layer is model.layers.{f.layer}, not model.layers.{paper['layer']}")
    if f.context_tokens != paper["context_tokens"]:
        out.append(f"the contexts are {f.context_tokens} tokens long, not {paper['context_tokens']}")
    if f.kept != paper["contexts"]:
        out.append(f"N = {f.kept} contexts, not {paper['contexts']}")
    return out


def _at_other(what: str, differs: list[str]) -> str | None:
    """Return the reason a claim on the paper's number is undecided at this run's setting (``what`` the number is), or
    None at the paper's setting (``differs`` empty)."""
    return f"{what}, and this run's differs ({'; '.join(differs)}); {AT_PAPER_SETTING}" if differs else None


def _interval(d: PairedDifference) -> tuple[float, float]:
    """Return a difference's macro interval, rounded to 4 digits."""
    return round(float(d.macro_interval[0]), 4), round(float(d.macro_interval[1]), 4)


def _rounded(x: float | None) -> float | None:
    """Return ``x`` rounded to 4 digits, None when it is missing or not finite."""
    return None if x is None or not np.isfinite(x) else round(float(x), 4)


def claims(findings: Findings) -> list[Claim]:
    """Return the chapter's claims (:data:`CLAIMS`, in order) decided on ``findings``: the two numerical checks of
    Lanczos, the signs and the paper's values of the eNTK − PCA differences and of each family's macro AUROC, the
    class and label counts and the best layer, each against random directions probed by the same protocol (claims on
    the paper's numbers undecided at another setting, naming what differs), and three reported figures."""
    f = findings
    head, head_spec, rand, levels = f.results[f.layer], f.spec.layers[f.layer], f.null.results[f.layer], f.null.levels
    module, n_morph, nan = head_spec.module, len(f.labels.morph.names), (math.nan, math.nan)
    layers = list(f.results)
    setting = f"{module}, N = {f.kept} ({f.n_per_class} per class asked), {f.context_tokens}-token contexts"
    differs = paper_setting_differences(f)
    if n_morph != PAPER_SETTING["morph_labels"]:
        differs_morph = [*differs, f"{n_morph} morphology labels are kept, the paper's {PAPER_SETTING['morph_labels']}"]
    else:
        differs_morph = differs
    no_morph = None if n_morph else (f"no morphology label of the predicted word passes support ≥ {f.min_support} and "
                                     f"the purity/coverage filter at N = {f.kept}; the cpu profile (N = 1024) keeps 10")
    level_why = f"PCA gives {levels['pca', 'pos'][0]:.3f} on word classes here against the paper's {PAPER['pos_pca']}"
    random_what = f"{f.top_k} random unit directions of the block output in place of the eNTK eigenvectors"
    out = [decide(replace(_SPEC["lanczos_max_residual"], bound=at_most(f.lanczos_tol)),
                  float(head_spec.relative_residuals.max()),
                  statistic=f"max ‖K̃v − λv‖/λ of the {f.top_k} scored pairs, {module} ({head_spec.pairs.n_matvecs} "
                            f"products, blocks of {f.block_size})"),
           decide(_SPEC["lanczos_rel_error"], float(f.check.rel_error.max()),
                  statistic=f"largest relative error of the top-{f.top_k} eigenvalues, Lanczos "
                            f"({f.check.lanczos.n_matvecs} products) vs dense eigh on {len(f.check.contexts)} contexts "
                            f"of {f.check.tokens} tokens, {module}")]
    for kind, d, r, n_labels, over in (("pos", head.pos, rand.pos, 8, "8 classes"),
                                       ("morph", head.morph, rand.morph, n_morph, "the morphology labels")):
        has = n_labels > 0
        gone = no_morph if kind == "morph" else None
        at_label = _at_other("the paper's number is for its own setting", differs_morph if kind == "morph" else differs)
        null = Null(f"{random_what}, against the same PCA", _rounded(r.macro) if has else None,
                    interval=_interval(r) if has else nan)
        what = (f"eNTK − PCA macro AUROC over {over} ({setting}; n_boot {f.n_boot}, {f.split_seeds} splits): its 95 % "
                "paired-bootstrap")
        value, ci = (_rounded(d.macro), _interval(d)) if has else (None, nan)
        out.append(decide(_SPEC[f"{kind}_macro_auroc_diff"], value, statistic=what, interval=ci, null=null,
                          undecided=gone))
        out.append(decide(_SPEC[f"{kind}_macro_auroc_diff_paper"], value, statistic=what, interval=ci, null=null,
                          undecided=gone or at_label, why=level_why))
        for family, source in (("entk", "the eNTK eigenvectors"), ("pca", f"PCA of the output of model.layers.{f.layer}")):
            point, ci_f = levels[family, kind]
            random_point, random_ci = levels["random", kind]
            out.append(decide(
                _SPEC[f"{kind}_macro_auroc_{family}"], _rounded(point),
                statistic=f"macro AUROC over {over} of {source} (mean of {f.split_seeds} splits, held out; {setting}): "
                          "its 95 % bootstrap",
                interval=tuple(round(x, 4) for x in ci_f) if has else nan,
                null=Null(random_what, _rounded(random_point),
                          interval=tuple(round(x, 4) for x in random_ci) if has else nan),
                undecided=gone or at_label, why=level_why))
    pos_e, pos_p = head.entk_pos.auroc().mean(0), head.pca_pos.auroc().mean(0)
    morph_e, morph_p = head.entk_morph.auroc().mean(0), head.pca_morph.auroc().mean(0)
    out.append(decide(
        _SPEC["pos_macro_ap"], _rounded(head.pos_ap.macro), interval=_interval(head.pos_ap),
        statistic=f"eNTK − PCA macro average precision over 8 classes (eNTK {head.entk_pos.ap().mean():.3f}, PCA "
                  f"{head.pca_pos.ap().mean():.3f}; paper {PAPER['pos_ap_entk']} vs {PAPER['pos_ap_pca']}; {setting}): "
                  "its 95 % paired-bootstrap",
        null=Null(f"{random_what}, against the same PCA", _rounded(rand.pos_ap.macro), interval=_interval(rand.pos_ap))))
    out.append(decide(
        _SPEC["pos_classes_entk_wins"], int((pos_e > pos_p).sum()),
        statistic=f"word classes (of 8) on which the eNTK's mean test AUROC is above PCA's, {module} (the per-class "
                  f"interval lies above 0 on {int((head.pos.interval[:, 0] > 0).sum())})",
        null=Null(f"{random_what} against the same PCA", int((rand.entk_pos.auroc().mean(0) > pos_p).sum())),
        undecided=_at_other("the bound is the paper's own count at its setting", differs)))
    out.append(decide(
        replace(_SPEC["morph_features_entk_wins"], bound=at_least(n_morph - 1)), int((morph_e > morph_p).sum()),
        statistic=f"morphology labels (predicted word, support ≥ {f.min_support}, purity/coverage filter; {n_morph} "
                  f"kept) on which the eNTK's mean test AUROC is above PCA's, {module}",
        null=Null(f"{random_what} against the same PCA", int((rand.entk_morph.auroc().mean(0) > morph_p).sum())),
        undecided=no_morph or _at_other("'all but one' is the paper's count over its 12 labels at its setting",
                                        differs_morph)))
    out.append(_best_layer(f, layers, random_what, differs))
    best_entk, best_pca = f.sweep.best_entk, f.sweep.best_pca
    out.append(reported(
        _SPEC["layer_chosen_on_train"],
        {"entk": f"model.layers.{best_entk}.mlp.down_proj",
         "entk_test_pos_macro": round(float(f.results[best_entk].entk_pos.auroc().mean()), 4),
         "pca": f"output of model.layers.{best_pca}",
         "pca_test_pos_macro": round(float(f.sweep.pca[best_pca].auroc().mean()), 4)},
        statistic=f"the layer chosen on the training halves; eNTK among model.layers.{layers}, PCA among every block"))
    out.append(reported(_SPEC["contexts_kept"], {"kept": f.kept, "tried": f.tried, "short": dict(f.short)},
                        statistic=f"contexts whose predicted word has the true UPOS ({f.context_tokens}-token "
                                  f"contexts); classes short of {f.n_per_class}"))
    out.append(reported(_SPEC["lanczos_seconds"], {"cache (all layers)": round(f.spec.cache_seconds, 1)}
                        | {s.module: round(s.seconds, 1) for s in f.spec.layers.values()},
                        statistic=f"shared cache, then top-{f.top_k} Lanczos per layer on {f.device}"))
    return out


def _best_layer(f: Findings, layers: list[int], random_what: str, differs: list[str]) -> Claim:
    """Return the claim that each word class's best eNTK layer beats PCA's best block, against random directions at the
    same layers; undecided while blocks are unswept or the setting is not the paper's."""
    entk_best = np.max([f.results[l].entk_pos.auroc().mean(0) for l in layers], axis=0)
    random_best = np.max([f.null.results[l].entk_pos.auroc().mean(0) for l in layers], axis=0)
    pca_best = np.max([probe.auroc().mean(0) for probe in f.sweep.pca.values()], axis=0)
    unswept = [l for l in range(f.n_layers) if l not in layers]
    reasons = []
    if unswept:
        reasons.append(f"the eNTK ran at model.layers.{layers} only, {len(unswept)} of the {f.n_layers} blocks were not "
                       "swept, and Table 3 takes each class's best over all of them (the paper profile's sweep: about "
                       "180 CPU-hours on this machine, hours on one GPU)")
    if differs:
        reasons.append(_at_other("Table 3 is at the paper's setting", differs))
    return decide(_SPEC["best_layer"], int((entk_best > pca_best).sum()),
                  paper=f"8 of 8 (Table 3: each class at its best of the {f.n_layers} blocks)",
                  statistic=f"word classes (of 8) whose best eNTK layer (among model.layers.{layers}) has a higher mean "
                            "test AUROC than PCA's best block (among every block)",
                  null=Null(f"{random_what}, best among the same layers", int((random_best > pca_best).sum())),
                  undecided="; besides, ".join(reasons) or None)


# --------------------------------------------------------------------------------------------
# Inputs


#: The longest context 07 takes, in tokens: a context must fit inside one story before a word, and the shipped
#: corpus's longest story is 1,598 characters.
MAX_CONTEXT_TOKENS = 512


def check_inputs(params: dict) -> None:
    """Check chapter 07's parameters: top_k below the Lanczos ceiling, contexts within :data:`MAX_CONTEXT_TOKENS`, dense
    tokens within a context, a model the loader can load here, the size of the Lanczos basis, the dense reference and
    the model (returns None; raises ParameterError)."""
    nb = "07_entk_gemma_grammar"
    top_k, vectors = params["top_k"], params["lanczos_vectors"]
    require(top_k < vectors, nb, "top_k", top_k, f"fewer than lanczos_vectors = {vectors}")
    require(params["context_tokens"] <= MAX_CONTEXT_TOKENS, nb, "context_tokens", params["context_tokens"],
            f"at most {MAX_CONTEXT_TOKENS} (a context must fit inside one story before a word; the shipped corpus's "
            "longest story is 1,598 characters)")
    require(params["dense_tokens"] <= params["context_tokens"], nb, "dense_tokens", params["dense_tokens"],
            f"at most context_tokens = {params['context_tokens']}")
    loadable_model(nb, "model", params["model"])
    if params["model"] not in LANGUAGE_MODELS:
        return
    d = LANGUAGE_MODELS[params["model"]][1]
    n = N_WORD_CLASSES * params["n_per_class"] * d
    fits(nb, params, [
        Need(f"the Lanczos basis of one layer ({vectors} vectors of {n:,} numbers in float64)", 8 * vectors * n,
             vectors * n, "lanczos_vectors"),
        kernels(1, params["dense_examples"] * d, "dense_examples", "the dense reference"),
        *language_model(params["model"], "model", 4),
    ])
