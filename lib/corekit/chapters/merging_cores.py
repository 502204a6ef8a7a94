"""Chapter 09: merging two trained transformers by their algorithmic cores instead of their weights.

The ACE paper observes that models trained from different seeds compute one algorithm in nearly orthogonal
subspaces of their residual streams (chapter 01: projector overlaps at the random level, CCA near 1) and suggests
that aligning cores rather than weights could be a principled basis for recombining models. The chapter tests
that on chapter 06's one-layer, LayerNorm-free transformers (:meth:`corekit.models.TransformerConfig.entk_authors`)
with the methods of :mod:`corekit.merging` (interpolation barriers, unit and stream permutations, Git Re-Basin,
rotations of the stream, stitching).

The notebook's protocol is :func:`train_models` (chapter 06's recipe), :func:`spawn_pair` (the pair that shares its
history), :func:`choose_pairs`, :func:`compare_paths` (every alignment's interpolation path and barrier),
:func:`stitch_models` and :func:`key_set_gap`; its claims are :data:`CLAIMS`, decided by :func:`claims` on
:class:`Findings`, and its rules on its parameters :func:`check_inputs`.
"""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from corekit import ace, fourier, recipes, subspaces
from corekit.inputs import Need, distinct, fits, heads_divide, require, transformer_parameters
from corekit.merging import (
    ALIGNMENTS,
    alignment_paths,
    alignments,
    barrier,
    continue_training,
    core_before_mlp,
    final_stream_core,
    function_change,
    mlp_readout,
    model_states,
    path_metrics,
    principal_components,
    stacked_model,
    stitch_accuracy,
)
from corekit.stats import pair_difference, paired_difference
from corekit.verdicts import Claim, Null, Spec, at_least, at_most, decide, declared, interval_above, reported

# ---------------------------------------------------------------------------------------------------------------------
# The notebook's protocol: the models, the pair that shares its history, the pairs, the paths and the stitches.

@dataclass(frozen=True)
class Models:
    """Chapter 06's models trained together: the run, each model's parameters, held-out accuracy (M,), key
    frequencies, the indices of the models that take part (``members``: those that generalise, or every model when
    fewer than two do), the seeds, the training seconds and the indices of the models that generalise."""

    run: recipes.AuthorsRun
    states: list[dict[str, Tensor]]
    test_accuracy: np.ndarray
    keys: list[tuple[int, ...]]
    members: list[int]
    seeds: list[int]
    seconds: float
    generalised: list[int]
    generalise_at: float = 0.99

    @property
    def shortfall(self) -> str | None:
        """Return why the run's claims about models that learnt the task are undecided (None: two or more did)."""
        if len(self.generalised) >= 2:
            return None
        return (f"fewer than two models reach held-out accuracy {self.generalise_at} (seeds {self.seeds}: "
                f"{[round(float(a), 4) for a in self.test_accuracy]}), so the pairs compared are of models that have not "
                "learnt the task; a longer run (epochs) decides it")

    def label(self, a: int, b: int) -> str:
        """Return the name "seed_a–seed_b" of the pair (or ordered pair) of model indices (a, b)."""
        return f"{self.seeds[a]}–{self.seeds[b]}"


def train_models(p: int, seeds: Sequence[int], epochs: int, generalise_at: float, *, device: str | torch.device = "cpu",
                 **recipe: Any) -> Models:
    """Return the :class:`Models` of ``seeds`` trained together by chapter 06's recipe
    (:func:`corekit.recipes.train_authors`, ``recipe`` its keyword arguments); a model takes
    part when its held-out accuracy reaches ``generalise_at``; when fewer than two do, every model takes part and
    :attr:`Models.shortfall` says why the claims are undecided."""
    t0 = time.perf_counter()
    run = recipes.train_authors(p, seeds, epochs, device=device, **recipe)
    seconds = time.perf_counter() - t0
    states = model_states(run.model)
    accuracy = run.history.curve("test_acc")[-1].numpy()                               # (M,)
    keys = [tuple(fourier.key_frequencies(s["W_E"][:p].cpu())) for s in states]
    generalised = [i for i in range(len(seeds)) if accuracy[i] >= generalise_at]
    members = generalised if len(generalised) >= 2 else list(range(len(seeds)))
    return Models(run, states, accuracy, keys, members, list(seeds), seconds, generalised, generalise_at)


@dataclass(frozen=True)
class Spawned:
    """The pair that shares its history: the parent's seed, the fork's epoch, the two models' parameters, their
    held-out accuracy (2,), and the held-out accuracy (A,) along the straight line between them with its barrier."""

    parent_seed: int
    epoch: int
    states: list[dict[str, Tensor]]
    accuracy: np.ndarray
    path: np.ndarray
    barrier: float


def _device(models: Models) -> torch.device:
    """Return the device the models' parameters are on."""
    return models.states[0]["W_E"].device


def spawn_pair(models: Models, spawn_epoch: int, epochs: int, alphas: Sequence[float], *, batch_size: int, lr: float,
               weight_decay: float, betas: Sequence[float], log_every_epochs: int) -> Spawned:
    """Return the :class:`Spawned` pair: the first model that generalises, as saved after epoch ``spawn_epoch``
    (the authors' numbering), trained on twice for the remaining epochs (:func:`~corekit.merging.continue_training`),
    and its path."""
    run, dev = models.run, _device(models)
    p, spe, first = run.task.p, run.steps_per_epoch, models.members[0]
    spawn_step = (spawn_epoch + 1) * spe                                        # the authors' epoch e ends at (e+1)·spe
    parent = {k.removeprefix("params."): v[first].to(dev) for k, v in run.history.snapshots[spawn_step].items()}
    train_set, test_set = run.task.datasets()
    states, history = continue_training(
        run.model.config, parent, train_set, test_set, steps=(epochs - spawn_epoch - 1) * spe, batch_size=batch_size,
        lr=lr, weight_decay=weight_decay, betas=tuple(betas), drop_last=False, loss_outputs=p,
        eval_every=spe * log_every_epochs)
    test_idx = run.task.test_idx.to(dev)
    path = path_metrics(run.model.config, *states, alphas, run.tokens.to(dev)[test_idx],
                        run.task.labels.to(dev)[test_idx], p)[0].cpu().numpy()
    return Spawned(models.seeds[first], spawn_epoch, states, history.curve("test_acc")[-1].numpy(), path,
                   barrier(path, alphas))


@dataclass(frozen=True)
class Pairs:
    """The pairs of model indices compared: ``same`` share their key set (the claims cover them), ``contrast`` do
    not; ``labels`` names every ordered pair of models that generalise."""

    same: list[tuple[int, int]]
    contrast: list[tuple[int, int]]
    labels: dict[tuple[int, int], str]

    @property
    def compared(self) -> list[tuple[int, int]]:
        """The pairs whose paths are compared: the same-key pairs, then the contrast."""
        return self.same + self.contrast

    @property
    def same_labels(self) -> list[str]:
        """The names of the pairs that share their key set."""
        return [self.labels[k] for k in self.same]

    @property
    def contrast_labels(self) -> list[str]:
        """The names of the contrast pairs."""
        return [self.labels[k] for k in self.contrast]


def choose_pairs(models: Models, max_contrast_pairs: int) -> Pairs:
    """Return the :class:`Pairs`: every pair of models that generalise and share their key set, and the first
    ``max_contrast_pairs`` pairs whose key sets differ (the first pair when there is neither, to show its paths)."""
    candidates = list(itertools.combinations(models.members, 2))
    same = [(i, j) for i, j in candidates if models.keys[i] == models.keys[j]]
    contrast = [(i, j) for i, j in candidates if models.keys[i] != models.keys[j]][:max_contrast_pairs]
    if not same and not contrast:
        contrast = candidates[:1]
    labels = {(i, j): models.label(i, j) for i in models.members for j in models.members if i != j}
    return Pairs(same, contrast, labels)


@dataclass(frozen=True)
class PathComparison:
    """Every alignment's interpolation paths: ``paths`` {pair: {alignment: (accuracy (A,), loss (A,))}}, ``barriers``
    {alignment: {pair name: barrier}}, the largest relative change of B's logits under any alignment, the largest
    distance of a path's end from its model's held-out accuracy, and the mean seconds of aligning a pair."""

    paths: dict[tuple[int, int], dict[str, tuple[np.ndarray, np.ndarray]]]
    barriers: dict[str, dict[str, float]]
    function_error: float
    end_error: float
    seconds: float


def compare_paths(models: Models, pairs: Pairs, alphas: Sequence[float], energy_threshold: float,
                  random_rotations: int) -> PathComparison:
    """Return the :class:`PathComparison` of ``pairs.compared``: each pair aligned by every construction of
    :data:`~corekit.merging.ALIGNMENTS` (:func:`~corekit.merging.alignments`; cores of rank the larger of the two
    energy ranks at ``energy_threshold``, ``random_rotations`` random rotations), each path evaluated on the held-out pairs."""
    run, dev = models.run, _device(models)
    config, p, tokens = run.model.config, run.task.p, run.tokens.to(dev)
    labels, test_idx = run.task.labels.to(dev), run.task.test_idx.to(dev)
    _, core = final_stream_core(run.model, tokens, p)
    ranks = ace.energy_rank(core.sigma, energy_threshold)                               # (M,)
    paths, errors, seconds = {}, [], []
    for a, b in pairs.compared:
        t = time.perf_counter()
        variants = alignments(models.states[a], models.states[b], config, tokens, int(max(ranks[a], ranks[b])), p,
                              random_seeds=[1000 * a + 10 * b + k for k in range(random_rotations)])
        seconds.append(time.perf_counter() - t)
        paths[(a, b)] = alignment_paths(config, models.states[a], variants, alphas, tokens[test_idx],
                                        labels[test_idx], p)
        errors.append(function_change(config, models.states[b], variants, tokens, p))
    barriers = {name: {pairs.labels[k]: barrier(paths[k][name][0], alphas) for k in pairs.compared}
                for name in ALIGNMENTS}
    acc = models.test_accuracy
    end_error = max(max(abs(paths[(a, b)]["naive"][0][0] - acc[a]) for a, b in pairs.compared),
                    max(abs(paths[(a, b)]["naive"][0][-1] - acc[b]) for a, b in pairs.compared))
    return PathComparison(paths, barriers, max(errors, default=0.0), float(end_error), float(np.mean(seconds)))


def median_barriers(barriers: Mapping[str, Mapping[str, float]], same: Sequence[str],
                    contrast: Sequence[str]) -> dict[str, dict[str, float | None]]:
    """Return {alignment: {"same keys": median barrier over the pairs ``same``, "different keys": over ``contrast``}}
    (4 digits; None over no pair)."""
    def median(labels: Sequence[str], name: str) -> float | None:
        return round(float(np.median([barriers[name][k] for k in labels])), 4) if labels else None
    return {name: {"same keys": median(same, name), "different keys": median(contrast, name)} for name in barriers}


#: The subspaces a stitch goes through: the cores, the top principal components, random ones, the whole stream.
STITCHES = ("core", "pca", "random", "full")


@dataclass(frozen=True)
class Stitching:
    """Stitches at the cut before the MLP between every ordered pair of models that generalise: ``scores``
    {subspace of :data:`STITCHES`: {(a, b): stitched held-out accuracy / B's own}}, ``same`` {(a, b): whether A and B
    share their key set}, the rank of each stitch, the pairs' names and the mean seconds of the four stitches."""

    scores: dict[str, dict[tuple[int, int], float]]
    same: dict[tuple[int, int], bool]
    ranks: dict[tuple[int, int], int]
    labels: dict[tuple[int, int], str]
    seconds: float | None

    @property
    def same_labels(self) -> list[str]:
        """The names of the ordered pairs that share their key set."""
        return [self.labels[k] for k, s in self.same.items() if s]

    def shares(self) -> dict[str, dict[str, float]]:
        """Return {subspace: {ordered pair name: score}} (4 digits): "core", "pca" and "random" as a share of the
        full-rank stitch's (the ceiling of a linear stitch at the cut), "full" as a share of B's own accuracy."""
        full = self.scores["full"]
        out = {kind: {self.labels[k]: round(v / max(full[k], 1e-9), 4) for k, v in self.scores[kind].items()}
               for kind in STITCHES[:-1]}
        return out | {"full": {self.labels[k]: round(v, 4) for k, v in full.items()}}


def stitch_models(models: Models, energy_threshold: float) -> Stitching:
    """Return the :class:`Stitching` of every ordered pair of models that generalise: A's stream before the MLP
    carried into B's through their cores at the cut (rank r the larger of the two energy ranks at
    ``energy_threshold``), their top r principal components, random subspaces of rank r and the whole stream
    (:func:`~corekit.merging.stitch_accuracy`, the map fitted on the training pairs)."""
    run, dev = models.run, _device(models)
    config, p, tokens = run.model.config, run.task.p, run.tokens.to(dev)
    labels, train_idx, test_idx = (t.to(dev) for t in (run.task.labels, run.task.train_idx, run.task.test_idx))
    x, core = core_before_mlp(run.model, tokens, p)                                    # x (M, p², D)
    ranks_cut = ace.energy_rank(core.sigma, energy_threshold)
    readouts = {b: mlp_readout(stacked_model(config, [models.states[b]]), p) for b in models.members}
    own = {b: float((readouts[b](x[b][None, test_idx]).argmax(-1)[0] == labels[test_idx]).double().mean())
           for b in models.members}
    scores, ranks, seconds = {kind: {} for kind in STITCHES}, {}, []
    D = config.d_model
    for a, b in itertools.permutations(models.members, 2):
        r = ranks[(a, b)] = int(max(ranks_cut[a], ranks_cut[b]))
        t = time.perf_counter()
        bases = {"core": (core.q(r)[a], core.q(r)[b]),
                 "pca": (principal_components(x[a][train_idx], r), principal_components(x[b][train_idx], r)),
                 "random": tuple(subspaces.random_orthonormal(D, r, 2, seed=100 * a + b).to(x.device)),
                 "full": (torch.eye(D, dtype=torch.float64, device=x.device),) * 2}
        for kind, (q_a, q_b) in bases.items():
            scores[kind][(a, b)] = stitch_accuracy(x[a], x[b], q_a, q_b, readouts[b], labels, train_idx,
                                                   test_idx) / own[b]
        seconds.append(time.perf_counter() - t)
    same = {k: models.keys[k[0]] == models.keys[k[1]] for k in scores["core"]}
    return Stitching(scores, same, ranks, {k: models.label(*k) for k in scores["core"]},
                     float(np.mean(seconds)) if seconds else None)


@dataclass(frozen=True)
class KeySetGap:
    """The mean core-stitch score of ordered pairs sharing their key set minus that of pairs whose sets differ, with
    its 95 % bootstrap interval over models (None when too few resamples have both kinds); the same difference for
    the stitch through the top principal components; and its mean over the ``shuffles`` shufflings of the key sets
    among the models that leave both kinds of pair (None when none does)."""

    difference: float
    interval: tuple[float, float] | None
    pca_difference: float
    shuffled_difference: float | None
    shuffles: int = 0


def key_set_gap(stitching: Stitching, models: Models, n_boot: int, shuffles: int = 200,
                seed: int = 0) -> KeySetGap | None:
    """Return the :class:`KeySetGap` of ``stitching`` (``n_boot`` bootstrap resamples, ``shuffles`` shuffles of the
    key sets from ``seed``), None unless some ordered pairs share their key set and some do not."""
    same = stitching.same
    if not 0 < sum(same.values()) < len(same):
        return None
    difference, interval = pair_difference(stitching.scores["core"], same, n_boot=n_boot, seed=seed)
    pca_difference, _ = pair_difference(stitching.scores["pca"], same, n_boot=n_boot, seed=seed)
    rng, shuffled = np.random.default_rng(seed), []
    for _ in range(shuffles):
        order = rng.permutation(models.members)
        keys = {m: models.keys[o] for m, o in zip(models.members, order)}
        s = {k: keys[k[0]] == keys[k[1]] for k in stitching.scores["core"]}
        if 0 < sum(s.values()) < len(s):
            shuffled.append(pair_difference(stitching.scores["core"], s, n_boot=1)[0])
    return KeySetGap(difference, interval, pca_difference, float(np.mean(shuffled)) if shuffled else None,
                     len(shuffled))


# ---------------------------------------------------------------------------------------------------------------------
# The claims: declared before the run, decided on what the protocol returned.

#: The pairs the claims about merging one algorithm cover.
SAME = "pair of models that generalise and share their key set"
#: The alignments whose barriers are reported, with their claim ids.
REPORTED_ALIGNMENTS = (("units", "units_matched_barrier"), ("rebasin", "rebasin_barrier"),
                       ("rebasin + heads", "rebasin_heads_barrier"), ("activations", "activation_matching_barrier"))
#: A bootstrap interval that does not exist (one pair): it satisfies no bound on intervals.
NO_INTERVAL = (float("nan"), float("nan"))

CLAIMS: tuple[Spec, ...] = (
    Spec("naive_barrier", "extension", "barrier of the held-out accuracy on the straight line between the two models' "
         "weights", at_least(0.2), covers=SAME),
    Spec("spawned_pair_connected", "extension", "barrier of the pair that shares its history", at_most(0.05)),
    *(Spec(claim_id, "extension", f"barrier after the alignment '{name}' (pairs sharing their key set)")
      for name, claim_id in REPORTED_ALIGNMENTS),
    Spec("construction_steps", "extension", "median barrier after each alignment over the pairs sharing their key set "
         "and over the contrast pairs (the core construction step by step, then its nulls)"),
    Spec("core_aligned_connects", "extension", "barrier after aligning every symmetry by the cores (stream rotated by "
         "the cores fitted at every position, units and heads matched, each head's inner maps aligned)", at_most(0.05),
         covers=SAME),
    Spec("core_alignment_halves_barrier", "extension", "barrier after aligning every symmetry by the cores, as a share "
         "of Git Re-Basin's", at_most(0.5), covers=SAME),
    Spec("core_beats_pca", "extension", "mean over the pairs sharing their key set of the barrier after aligning every "
         "symmetry by the top principal components minus that by the cores (95 % bootstrap interval over the pairs)",
         interval_above(0)),
    Spec("core_stitch_sufficient", "extension", "held-out accuracy stitched through the cores at the cut before the "
         "MLP, as a share of the full-rank stitch's (the ceiling of a linear stitch there)", at_least(0.99),
         covers="ordered " + SAME),
    Spec("full_rank_stitch", "extension", "the ceiling: held-out accuracy stitched through the whole stream, as a share "
         "of B's own (ordered pairs sharing their key set)"),
    Spec("same_keys_stitch_better", "extension", "mean core-stitch score of pairs sharing their key set minus that of "
         "pairs whose sets differ", at_least(0.05)),
    Spec("alignment_preserves_function", "check", "largest change of B's logits under any of the alignments, relative "
         "to their largest value", at_most(1e-4), no_null="numerical check"),
    Spec("path_ends_are_the_models", "check", "largest difference between a path's end and its model's held-out "
         "accuracy", at_most(1e-6), no_null="numerical check"),
    Spec("cost_seconds", "extension", "seconds of each method per pair on this run's device"),
)
_SPEC = declared(CLAIMS)


@dataclass(frozen=True)
class Findings:
    """What the claims need: ``barriers`` {alignment of :data:`~corekit.merging.ALIGNMENTS`: {pair name: barrier}} over every pair
    compared, the names of the pairs sharing their key set (``same_pairs``) and of the contrast pairs, the pair that
    shares its history (its barrier, its continuations' lower held-out accuracy, its parent's seed and fork epoch),
    ``stitch`` :meth:`Stitching.shares`, the ordered pairs sharing their key set (``same_ordered``), the key-set gap
    (None without both kinds of ordered pair), the two numerical checks, the seconds of training, aligning a pair and
    stitching one (None without a stitch), why fewer than two models learnt the task (``shortfall``, None when two or
    more did: :attr:`Models.shortfall`) and the parameters that decide what the run can decide."""

    barriers: Mapping[str, Mapping[str, float]]
    same_pairs: Sequence[str]
    contrast_pairs: Sequence[str]
    spawn_barrier: float
    spawn_accuracy: float
    parent_seed: int
    spawn_epoch: int
    stitch: Mapping[str, Mapping[str, float]]
    same_ordered: Sequence[str]
    gap: KeySetGap | None
    function_error: float
    path_end_error: float
    train_seconds: float
    align_seconds: float
    stitch_seconds: float | None
    generalise_at: float = 0.99
    shortfall: str | None = None
    min_same_key_pairs: int = 6
    random_rotations: int = 5
    n_boot: int = 2000


def _over(f: Findings, name: str, labels: Sequence[str]) -> dict[str, float]:
    """Return {pair name: barrier after the alignment ``name``} for the pairs ``labels``."""
    return {k: f.barriers[name][k] for k in labels}


def _share_of_rebasin(f: Findings, name: str, labels: Sequence[str]) -> dict[str, float]:
    """Return {pair name: barrier after the alignment ``name`` / Git Re-Basin's} (4 digits) for the pairs ``labels``."""
    return {k: round(f.barriers[name][k] / max(f.barriers["rebasin"][k], 1e-9), 4) for k in labels}


def _same_ordered(values: Mapping[str, float], f: Findings) -> dict[str, float]:
    """Return ``values`` of the ordered pairs sharing their key set, all of them when there is none."""
    return {k: values[k] for k in f.same_ordered} or dict(values)


def claims(f: Findings) -> list[Claim]:
    """Return the chapter's claims (:data:`CLAIMS`, in order) decided on the findings ``f``."""
    n_same_ordered = len(f.same_ordered) // 2
    too_few = f.shortfall or (None if len(f.same_pairs) >= f.min_same_key_pairs else
                              f"only {len(f.same_pairs)} pair(s) of models share their key set, {f.min_same_key_pairs} "
                              "are needed; more seeds (the `seeds` parameter) give more such pairs")
    covered = list(f.same_pairs or f.contrast_pairs)    # a claim over models needs one; without same-key pairs undecided
    independent = ("the independently trained pairs that share their key set" if f.same_pairs else
                   "the independently trained contrast pairs (no pair shares its key set)")
    out = [
        decide(_SPEC["naive_barrier"], _over(f, "naive", covered), undecided=too_few,
               null=Null(f"the pair that shares its history (seed {f.parent_seed} trained on twice from epoch "
                         f"{f.spawn_epoch})", round(f.spawn_barrier, 4)),
               why="the ACE paper's geometry (cores in nearly orthogonal subspaces) predicts that averaging fails"),
        decide(_SPEC["spawned_pair_connected"], round(f.spawn_barrier, 4),
               statistic=f"barrier of the pair that shares its history (seed {f.parent_seed}, forked at epoch "
                         f"{f.spawn_epoch})",
               null=Null(independent, _over(f, "naive", covered)),
               undecided=f.shortfall or (None if f.spawn_accuracy >= f.generalise_at else
               f"the continuations reach held-out accuracy {f.spawn_accuracy:.4f}, below generalise_at = "
               f"{f.generalise_at}: two models that have not learnt the task say nothing about connectivity")),
        *(reported(_SPEC[claim_id], _over(f, name, covered)) for name, claim_id in REPORTED_ALIGNMENTS),
        reported(_SPEC["construction_steps"], median_barriers(f.barriers, f.same_pairs, f.contrast_pairs)),
    ]
    rotations = f"a random rotation (best of {f.random_rotations}) in place of the cores"
    pca, procrustes = ("as many top principal components in place of the cores",
                       "a Procrustes map of the whole stream in place of the cores")
    core_vs_pca, core_vs_pca_ci = paired_difference(_over(f, "pca, full", covered), _over(f, "core, full", covered),
                                                    f.n_boot)
    pca_vs_procrustes, pca_vs_procrustes_ci = paired_difference(_over(f, "procrustes, full", covered),
                                                                _over(f, "pca, full", covered), f.n_boot)
    out += [
        decide(_SPEC["core_aligned_connects"], _over(f, "core, full", covered), undecided=too_few,
               null=[Null(f"a random rotation in place of the cores (best of {f.random_rotations})",
                          _over(f, "random, full", covered)), Null(pca, _over(f, "pca, full", covered)),
                     Null(procrustes, _over(f, "procrustes, full", covered))]),
        decide(_SPEC["core_alignment_halves_barrier"], _share_of_rebasin(f, "core, full", covered), undecided=too_few,
               null=[Null(rotations, _share_of_rebasin(f, "random, full", covered)),
                     Null(pca, _share_of_rebasin(f, "pca, full", covered)),
                     Null(procrustes, _share_of_rebasin(f, "procrustes, full", covered))]),
        decide(_SPEC["core_beats_pca"], round(core_vs_pca, 4), interval=core_vs_pca_ci or NO_INTERVAL,
               undecided=too_few or (None if core_vs_pca_ci else "one pair gives no interval"),
               null=Null("the whole-stream Procrustes map minus the principal components (two constructions from the "
                         "stream's statistics alone)", round(pca_vs_procrustes, 4), pca_vs_procrustes_ci or NO_INTERVAL)),
        decide(_SPEC["core_stitch_sufficient"], _same_ordered(f.stitch["core"], f), undecided=too_few,
               null=[Null("random subspaces of the same rank", _same_ordered(f.stitch["random"], f)),
                     Null("the top principal components of the same rank", _same_ordered(f.stitch["pca"], f))]),
        reported(_SPEC["full_rank_stitch"], {k: f.stitch["full"][k] for k in f.same_ordered}),
    ]
    if f.shortfall:
        open_question = f.shortfall
    elif n_same_ordered < f.min_same_key_pairs:
        open_question = (f"only {n_same_ordered} pair(s) of models share their key set, {f.min_same_key_pairs} are "
                         "needed; more seeds (the `seeds` parameter) give more such pairs")
    elif f.gap is None:
        open_question = "every pair of models shares its key set, so there is nothing to compare with"
    else:
        open_question = None
    gap = f.gap
    out += [
        decide(_SPEC["same_keys_stitch_better"], None if gap is None else round(gap.difference, 4),
               interval=None if gap is None else gap.interval, undecided=open_question,
               null=[Null(f"the key sets shuffled among the models (mean of {0 if gap is None else gap.shuffles} shuffles)",
                          None if gap is None or gap.shuffled_difference is None else round(gap.shuffled_difference, 4)),
                     Null("the same difference for the stitch through the top principal components",
                          None if gap is None else round(gap.pca_difference, 4))]),
        decide(_SPEC["alignment_preserves_function"], round(f.function_error, 8)),
        decide(_SPEC["path_ends_are_the_models"], round(f.path_end_error, 8)),
        reported(_SPEC["cost_seconds"], {"training (all seeds)": round(f.train_seconds, 1),
                                         "every alignment of a pair": round(f.align_seconds, 3),
                                         "stitching, 4 subspaces": None if f.stitch_seconds is None else
                                         round(f.stitch_seconds, 3)}),
    ]
    return out


# ---------------------------------------------------------------------------------------------------------------------
# The chapter's rules on its parameters.

def check_inputs(params: dict) -> None:
    """Check chapter 09's parameters: distinct seeds, a fork on a logged epoch inside the run, the size of the paths."""
    nb = "09_merging_cores"
    distinct(nb, "seeds", params["seeds"])
    heads_divide(nb, params)
    epochs, spawn, log_every = params["epochs"], params["spawn_epoch"], params["log_every_epochs"]
    require(spawn % log_every == 0, nb, "spawn_epoch", spawn, f"a multiple of log_every_epochs = {log_every}")
    require(spawn < epochs - 1, nb, "spawn_epoch", spawn, f"an epoch before the last (epochs = {epochs})")
    p, models = params["p"], len(params["seeds"])
    weights = transformer_parameters(p + 1, 3, params["d_model"], params["d_mlp"], 1, p)
    snapshots = epochs // spawn + 2
    fits(nb, params, [
        Need(f"the {snapshots:,} parameter snapshots, every model", 4 * models * snapshots * weights, models * weights,
             "epochs"),
        Need(f"the {params['n_alphas']} models of one interpolation path", 4 * params["n_alphas"] * weights,
             params["n_alphas"] * weights, "n_alphas"),
    ])
