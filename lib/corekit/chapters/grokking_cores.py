"""Chapter 02 (grokking cores): the ACE authors' last-token protocol on a grokking transformer.

The chapter trains a weight-decay ensemble and its ω → 0 branch, takes checkpoints on the schedule
:func:`checkpoint_steps` gives, finds where the weight-decay models memorise and grok
(:func:`grokking_points`), runs :func:`last_token_summary` at every checkpoint under both analyses
(:func:`cores_at_checkpoints`), fits the shift operator on models without the effect at the same rank
(:func:`exact_fit_controls`) and moves the authors' analysis off its defaults (:func:`null_direction_ranks`).
:func:`export_checkpoints` writes every checkpoint's weights for ``scripts/oracle/cores_02.py``, which reads
them back with :func:`load_checkpoints`. The chapter's claims are declared in :data:`CLAIMS` and decided by
:func:`claims` on the run's :class:`Findings`; :func:`check_inputs` refuses parameters a run cannot use.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch import Tensor

from corekit import shard_records
from corekit.ace import (
    Core,
    class_means,
    energy_rank,
    extract,
    first_rank,
    frequency_modes,
    linear_ablation_curves,
    linear_observability,
    necessary_rank,
    shift_operator,
    sufficient_rank,
    unit_circle_fraction,
)
from corekit.curves import GROKKING_THRESHOLD, first_step_reaching, grokking_step
from corekit.fourier import fourier_power
from corekit.inputs import Need, distinct, fits, heads_divide, require, show, transformer_parameters
from corekit.models import BatchedTransformer, TransformerConfig
from corekit.tasks.modular import modular_addition
from corekit.train import History, steps_per_epoch, train_ensemble
from corekit.verdicts import (
    Claim,
    Null,
    Spec,
    at_least,
    at_most,
    between,
    decide,
    declared,
    holds,
    reported,
)

#: The analyses :func:`last_token_summary` runs.
ANALYSES = ("corekit", "authors")


def last_token_summary(model, train_x: Tensor, test_x: Tensor, test_y: Tensor, all_x: Tensor,
                       all_labels: Tensor, energy_threshold: float = 0.99, analysis: str = "corekit",
                       jitter: float | None = None, centre: bool | None = None) -> dict:
    """Return ACE of every model at the last-token readout of a modular-arithmetic transformer.

    ``analysis="corekit"``: extract on ``train_x`` with the centred logits as task outputs, ablate about
    the training mean on ``test_x`` / ``test_y`` (N_test,), necessary and sufficient ranks scanned from 0,
    and identify the shift operator on all inputs ``all_x`` grouped by ``all_labels``.

    ``analysis="authors"``: the ACE authors' ``analyze_epoch`` (``src/cores/modular_addition_analysis.py``):
    extraction on the test pairs with the plain logits as outputs and a 1e-8 jitter in the factors,
    keep QQᵀh and remove h − QQᵀh without the mean, the necessary rank scanned upward from the energy
    rank and the sufficient rank from 1 (each d_model when no rank qualifies), both "operational"
    ranks floored at the energy rank, and the class means over the test pairs. ``jitter`` and
    ``centre`` (ablate about the mean) override either analysis's choice, for the controls.

    Both fit the shift operator on the core of rank max(energy, necessary). Keys (each a list over
    the M models): ``energy``, ``sufficient`` and ``necessary`` ranks (the authors': operational),
    ``necessary_strict`` and ``sufficient_strict`` (before the floor; = the others for corekit),
    ``fit_rank``, the operator's ``eigs`` (np.ndarray each), ``r2``, ``circle`` (fraction on the unit
    circle), ``modes`` (distinct frequency bins of the fit), ``fourier_modes`` (:func:`fourier_mode_count` of the
    class means the fit uses, no fit involved), ``spectrum`` (σ²/σ₀², np.ndarray (D,) each), and
    ``core`` (the :class:`corekit.ace.Core`, its mean zero where the ablations use none) with ``fit_on``
    ("all" or "test") for controls at the same rank.
    """
    if analysis not in ANALYSES:
        raise ValueError(f"analysis must be one of {ANALYSES}, got {analysis!r}")
    authors = analysis == "authors"
    jitter = (1e-8 if authors else 0.0) if jitter is None else float(jitter)
    centre = (not authors) if centre is None else bool(centre)
    p = model.config.out_vocab
    with torch.no_grad():                                    # (M, N, D): the last position of the inputs used
        h_test = model.residual(test_x, last=1)[:, :, -1]
        h_ext = h_test if authors else model.residual(train_x, last=1)[:, :, -1]
        h_all = None if authors else model.residual(all_x, last=1)[:, :, -1]
    core = extract(h_ext, linear_observability(model.p("W_U"), centre=not authors), jitter=jitter)   # unembed is linear
    if not centre:
        core = Core(basis=core.basis, sigma=core.sigma, mean=torch.zeros_like(core.mean))
    rank = energy_rank(core.sigma, energy_threshold)

    def accuracy(h: Tensor) -> Tensor:
        return (model.unembed(h.float()).argmax(-1) == test_y).float().mean(-1)

    D = h_test.shape[-1]
    ranks = list(range(D + 1))
    with torch.no_grad():
        keep, rem = linear_ablation_curves(core, h_test, model.p("W_U"), model.p("b_U"), test_y, ranks)
        base = accuracy(h_test)
    r = torch.tensor(ranks, device=keep.device)
    if authors:
        nec_ok = (rem <= 2 / p) & (r[None, :] >= rank[:, None].to(r.device))
        suf_ok = (keep >= base[:, None] - 1e-3) & (r[None, :] >= 1)
        necessary_strict = torch.where(nec_ok.any(1), first_rank(nec_ok, ranks), torch.full_like(rank, D))
        sufficient_strict = torch.where(suf_ok.any(1), first_rank(suf_ok, ranks), torch.full_like(rank, D))
        necessary, sufficient = torch.maximum(rank, necessary_strict), torch.maximum(rank, sufficient_strict)
    else:
        necessary_strict = necessary = necessary_rank(rem, 2 / p, ranks)
        sufficient_strict = sufficient = sufficient_rank(keep, base, ranks)
    fit_rank = torch.maximum(rank, necessary)
    h_fit, y_fit = (h_test, test_y) if authors else (h_all, all_labels)
    z_fit = core.coordinates(h_fit, int(fit_rank.max()))                 # (M, N, r_max): each model its own core
    fits = [shift_operator(z_fit[m, :, :int(fit_rank[m])], y_fit, p) for m in range(h_fit.shape[0])]
    means = [class_means(z_fit[m, :, :int(fit_rank[m])], y_fit, p) for m in range(h_fit.shape[0])]   # (p, r_m) each
    energy = core.sigma.double() ** 2
    return {"energy": rank.tolist(), "sufficient": sufficient.tolist(), "necessary": necessary.tolist(),
            "sufficient_strict": sufficient_strict.tolist(), "necessary_strict": necessary_strict.tolist(),
            "fit_rank": fit_rank.tolist(), "eigs": [f.eigenvalues for f in fits], "r2": [f.r2 for f in fits],
            "circle": [unit_circle_fraction(f.eigenvalues, p) for f in fits],
            "modes": [len(frequency_modes(f.eigenvalues, p)) for f in fits],
            "fourier_modes": [fourier_mode_count(mu) for mu in means],
            "spectrum": list((energy / energy[:, :1].clamp_min(1e-300)).cpu().numpy()),
            "core": core, "fit_on": "test" if authors else "all"}


def checkpoint_steps(epochs: int, epoch_steps: int, fork_epoch: int, checkpoint_every: int, dense_until: int,
                     checkpoint_every_after: int) -> list[int]:
    """Return the sorted checkpoint steps: every ``checkpoint_every`` epochs up to ``dense_until``, then every
    ``checkpoint_every_after``, plus the fork and the last step (an epoch is ``epoch_steps`` steps)."""
    steps, fork_step = epochs * epoch_steps, fork_epoch * epoch_steps
    checkpoint_epochs = set(range(0, min(dense_until, epochs) + 1, checkpoint_every))
    checkpoint_epochs |= set(range(dense_until, epochs + 1, checkpoint_every_after)) if dense_until < epochs else set()
    return sorted({e * epoch_steps for e in checkpoint_epochs} | {fork_step, steps})


def at_checkpoints(history, curve: Tensor, checkpoints: Sequence[int]) -> Tensor:
    """Return the rows (C, M) of ``curve`` (evaluated steps, M), one of ``history.curve``, at the checkpoint steps (C,)
    (``history``: anything with the evaluated ``steps``)."""
    return torch.stack([curve[history.steps.index(s)] for s in checkpoints])


def _first_at(curve: Sequence[float], level: float) -> int | None:
    """Return the first index at which ``curve`` is ≥ ``level`` (None: never)."""
    return next((i for i, v in enumerate(curve) if v >= level), None)


@dataclass(frozen=True)
class GrokkingPoints:
    """Where the weight-decay ensemble memorises and groks (see :func:`grokking_points`).

    ``grok_step`` and ``memorised_step`` are checkpoint steps (None: never reached); ``i_grok`` (the last
    checkpoint when it never groks), ``i_before`` and ``final`` are checkpoint indices; ``seed_grok`` and
    ``seed_memorised`` (S,) each weight-decay model's own first checkpoint index at ``GROKKING_THRESHOLD``
    test or training accuracy (None: never).
    """

    grok_step: float | None
    memorised_step: float | None
    i_grok: int
    i_before: int
    final: int
    seed_grok: list[int | None]
    seed_memorised: list[int | None]

    @property
    def has_grok(self) -> bool:
        """Whether every weight-decay model groks by the last checkpoint."""
        return self.grok_step is not None

    @property
    def seed_i_grok(self) -> list[int]:
        """Return each weight-decay model's own grokking checkpoint index (S,), the last checkpoint when it never groks."""
        return [self.final if g is None else g for g in self.seed_grok]

    @property
    def seed_i_before(self) -> list[int]:
        """Return each weight-decay model's own "before" checkpoint index (S,): its memorisation checkpoint (0 when it
        never memorises), or the one just before its grokking if memorisation is not earlier."""
        return [m if m < g else max(0, g - 1)
                for m, g in zip((0 if m is None else m for m in self.seed_memorised), self.seed_i_grok)]


def grokking_points(checkpoints: Sequence[int], test_acc: Tensor, train_acc: Tensor, n_models: int) -> GrokkingPoints:
    """Return the grokking and memorisation checkpoints of the first ``n_models`` models (the weight-decay branch).

    ``test_acc`` and ``train_acc`` (C, M) are the accuracies at the checkpoints (C,). Grokking is the first
    checkpoint at which every one of them has test accuracy ≥ 0.99 (:func:`~corekit.curves.grokking_step`),
    memorisation the first at which every one has training accuracy ≥ 0.99; "before" is the memorisation
    checkpoint, or the one just before grokking if memorisation is not earlier.
    """
    S = n_models
    grok_step = grokking_step(checkpoints, test_acc[:, :S].min(1).values.tolist())
    memorised_step = first_step_reaching(checkpoints, train_acc[:, :S].min(1).values.tolist(), 0.99)
    final = len(checkpoints) - 1
    i_grok = checkpoints.index(grok_step) if grok_step is not None else final
    i_memorised = checkpoints.index(memorised_step) if memorised_step is not None else 0
    i_before = i_memorised if i_memorised < i_grok else max(0, i_grok - 1)
    return GrokkingPoints(grok_step=grok_step, memorised_step=memorised_step, i_grok=i_grok, i_before=i_before,
                          final=final,
                          seed_grok=[_first_at(test_acc[:, m].tolist(), GROKKING_THRESHOLD) for m in range(S)],
                          seed_memorised=[_first_at(train_acc[:, m].tolist(), GROKKING_THRESHOLD) for m in range(S)])


#: The share of the class means' non-constant Fourier power that :func:`fourier_mode_count` asks its modes to hold.
MODE_POWER_SHARE = 0.9


def fourier_mode_count(means: Tensor, share: float = MODE_POWER_SHARE) -> int:
    """Return the fewest frequencies k ≥ 1 of Z_p whose Fourier power holds ``share`` of the class means' (p, r).

    The means are indexed by the answer c = 0 … p − 1; the power at k (:func:`corekit.fourier.fourier_power`) is that
    of the cos/sin pair k over c, summed over the r core directions; the constant (k = 0) is left out. A core that
    computes with a few rotations c ↦ c + 1 puts its power at those few k; means that depend on c arbitrarily (an
    untrained model) spread it over most of the ⌊p/2⌋ frequencies. No shift operator is fitted, so the count has no
    cap from a fit's rank.
    """
    if not 0 < share <= 1:
        raise ValueError(f"share must be in (0, 1], got {share!r}")
    full = fourier_power(means)                                          # (⌊p/2⌋ + 1,)
    power, total = full[1:], float(full[1:].sum())
    if total <= 1e-12 * float(full.sum()):                               # means that do not depend on c
        return 0
    held = torch.cumsum(power.sort(descending=True).values, 0) / total
    return int(torch.searchsorted(held, torch.tensor(share * (1 - 1e-12), dtype=held.dtype))) + 1


def settle_checkpoint(ranks: Sequence[float], i_grok: int, tol: float = 1, after: int = 5) -> int | None:
    """Return the first checkpoint index from which ``ranks`` (C,) stays within ``tol`` of ``ranks[i_grok]`` through
    grokking and the ``after`` checkpoints that follow it (None: it does not stay there even after grokking)."""
    ranks = np.asarray(ranks, dtype=float)
    if ranks.ndim != 1 or not 0 <= i_grok < len(ranks):
        raise ValueError(f"ranks must be (C,) and i_grok an index into it, got shape {ranks.shape} and {i_grok!r}")
    end = min(len(ranks) - 1, i_grok + after)
    close = np.abs(ranks[:end + 1] - ranks[i_grok]) <= tol
    if not close[i_grok:].all():
        return None
    start = i_grok
    while start > 0 and close[start - 1]:
        start -= 1
    return start


def crystallization_gaps(energy: np.ndarray, seed_grok: Sequence[int | None], seed_memorised: Sequence[int | None],
                         tol: float = 1, after: int = 5) -> tuple[list[int | None], list[int | None], list[int | None]]:
    """Return, per model m of ``energy`` (C, S), (checkpoints between the settle checkpoint and m's grokking checkpoint,
    the same from m's memorisation checkpoint, the settle checkpoint itself), None where undefined.

    The settle checkpoint (:func:`settle_checkpoint`) is the first from which the energy rank stays within ``tol`` of
    its value at m's grokking checkpoint; "the core crystallizes at grokking" puts it near grokking, a rank that is
    set by memorisation puts it near memorisation.
    """
    settle = [None if g is None else settle_checkpoint(energy[:, m], g, tol, after) for m, g in enumerate(seed_grok)]
    gap = lambda j, i: None if j is None or i is None else abs(j - i)  # noqa: E731
    return ([gap(j, g) for j, g in zip(settle, seed_grok)], [gap(j, i) for j, i in zip(settle, seed_memorised)], settle)


def seed_values(labels: Sequence[str], values: Sequence) -> dict:
    """Return {label: value} over the models, floats rounded to 3 decimals, integers, booleans and None kept."""
    if len(labels) != len(values):
        raise ValueError(f"one value per model needed: {len(labels)} labels, {len(values)} values")
    return {k: round(float(v), 3) if isinstance(v, (float, np.floating)) else
            int(v) if isinstance(v, (np.integer,)) else bool(v) if isinstance(v, np.bool_) else v
            for k, v in zip(labels, values)}


def regime_reason(values: dict, bound, regimes: Sequence[tuple[str, dict]] = (),
                  undefined: tuple[str, dict] | None = None) -> str | None:
    """Return why a claim over models is undecided, or None when it is decided.

    ``values`` {model: value} is tested with ``bound.test``; ``regimes`` are (what the regime is, {model: whether it
    is in it}) in order of preference; ``undefined`` is one more such pair, for models whose statistic the run cannot
    define (e.g. a seed that never grokked), undecided whether its value passes or not. The claim is undecided when
    every failing model is in one of the regimes (or in ``undefined``) and some model is failing or undefined; the
    reason names each such model with its regime. A failing model outside them makes it a fail, and no failing or
    undefined model leaves the verdict to the value and its nulls.
    """
    undefined_models = [m for m in values if undefined is not None and undefined[1].get(m)]
    failing = [m for m, v in values.items() if not bound.test(v) and m not in undefined_models]
    named: dict[str, list] = {undefined[0]: undefined_models} if undefined_models else {}
    for m in failing:
        what = next((what for what, members in regimes if members.get(m)), None)
        if what is None:
            return None
        named.setdefault(what, []).append(m)
    return "; ".join(f"{what} for {', '.join(map(str, ms))}" for what, ms in named.items()) or None


#: The keys of :func:`last_token_summary` that :class:`CheckpointCores` tabulates as ranks, and as the operator fit.
RANK_KEYS = ("energy", "sufficient", "necessary", "fit_rank")
FIT_KEYS = ("circle", "modes", "r2", "fourier_modes")


@dataclass(frozen=True)
class CheckpointCores:
    """ACE at every checkpoint under each analysis (see :func:`cores_at_checkpoints`).

    ``runs[analysis][key]`` is the list over the C checkpoints of :func:`last_token_summary`'s ``key`` (a list
    over the M models each); ``ranks[analysis][k]`` (k in ``RANK_KEYS``) and ``fit[analysis][k]`` (k in
    ``FIT_KEYS``) are the same values as float arrays (C, M).
    """

    runs: dict[str, dict[str, list]]
    ranks: dict[str, dict[str, np.ndarray]]
    fit: dict[str, dict[str, np.ndarray]]


def cores_at_checkpoints(model, snapshots: dict[int, dict[str, Tensor]], checkpoints: Sequence[int], data: Sequence[Tensor],
                         energy_threshold: float = 0.99, analyses: Sequence[str] = ANALYSES) -> CheckpointCores:
    """Return :func:`last_token_summary` of every model at every checkpoint step under each analysis.

    ``snapshots`` maps a step to the ensemble's state; ``data`` is (train_x, test_x, test_y, all_x, all_labels)
    as :func:`last_token_summary` takes them. The states are loaded into ``model`` in checkpoint order, so it
    holds the last checkpoint's state afterwards.
    """
    raw = {a: [] for a in analyses}
    for step in checkpoints:
        model.load_state_dict(snapshots[step])
        for a in analyses:
            raw[a].append(last_token_summary(model, *data, energy_threshold=energy_threshold, analysis=a))
    runs = {a: {key: [c[key] for c in raw[a]] for key in raw[a][0]} for a in analyses}   # key -> (C, M)
    return CheckpointCores(runs=runs,
                           ranks={a: {k: np.array(runs[a][k], dtype=float) for k in RANK_KEYS} for a in analyses},
                           fit={a: {k: np.array(runs[a][k], dtype=float) for k in FIT_KEYS} for a in analyses})


def shift_fit(core: Core, h: Tensor, labels: Tensor, rank: int, m: int, p: int,
              shuffle_seed: int | None = None) -> tuple[float, float, int, int]:
    """Return (R², unit-circle fraction, distinct frequency modes, Fourier modes of the class means) of the
    shift-operator fit of model m (the last by :func:`fourier_mode_count`, without the fit).

    The fit (:func:`~corekit.ace.shift_operator`) is on model m's top-``rank`` coordinates of ``core`` of the
    states ``h`` (M, N, D), grouped by ``labels`` (N,) into p classes; ``shuffle_seed`` permutes the labels
    first (``torch.randperm`` from a generator with that seed).
    """
    if shuffle_seed is not None:
        labels = labels[torch.randperm(len(labels), generator=torch.Generator().manual_seed(shuffle_seed)).to(labels.device)]
    z = core.coordinates(h, rank)[m]                                                   # (N, rank)
    f_ = shift_operator(z, labels, p)
    return (f_.r2, unit_circle_fraction(f_.eigenvalues, p), len(frequency_modes(f_.eigenvalues, p)),
            fourier_mode_count(class_means(z, labels, p)))


def control_cases(i_grok: int, i_before: int, final: int) -> dict[str, tuple[int, int, bool]]:
    """Return the exact-fit nulls, name → (checkpoint of the model, checkpoint whose fit rank the fit uses, labels
    shuffled): the grokked fit itself, then memorising, shuffled and untrained models at the grokking, the
    memorising and the final fit rank."""
    return {"grokked": (i_grok, i_grok, False), "memorising": (i_before, i_grok, False),
            "shuffled": (i_grok, i_grok, True), "untrained": (0, i_grok, False),
            "untrained_at_before_rank": (0, i_before, False), "grokked_at_before_rank": (i_grok, i_before, False),
            "memorising_at_final_rank": (i_before, final, False), "untrained_at_final_rank": (0, final, False)}


def exact_fit_controls(model, snapshots: dict[int, dict[str, Tensor]], checkpoints: Sequence[int], data: Sequence[Tensor],
                       runs: dict[str, dict[str, list]], cases: Sequence[dict[str, tuple[int, int, bool]]],
                       analyses: Sequence[str] = ANALYSES) -> dict[str, dict[str, list[tuple[float, float, int, int]]]]:
    """Return {analysis: {case: [:func:`shift_fit` (R², circle fraction, modes, Fourier modes) of each of the first
    ``len(cases)`` models]}}.

    ``cases[m]`` are model m's cases (:func:`control_cases` at its seed's own checkpoints, the same names for every
    model). Each case fits the shift operator (:func:`shift_fit`) on the last-token states of
    the model at its checkpoint, in the core ``runs[analysis]["core"]`` of that checkpoint, at the fit rank of
    the case's rank checkpoint, on the inputs and labels the analysis fits on (authors: test pairs; corekit: all
    pairs; ``data`` as in :func:`cores_at_checkpoints`); shuffled cases permute the labels with model m's seed (so
    a model gets the same permutation in any ensemble). The
    states are loaded into ``model`` as needed.
    """
    states = {}

    def fit_at(i: int, m: int, rank: int, analysis: str, shuffle_seed: int | None) -> tuple[float, float, int, int]:
        x_fit, y = (data[1], data[2]) if analysis == "authors" else (data[3], data[4])
        if (i, analysis) not in states:
            model.load_state_dict(snapshots[checkpoints[i]])
            with torch.no_grad():
                states[i, analysis] = model.residual(x_fit)[:, :, -1]
        return shift_fit(runs[analysis]["core"][i], states[i, analysis], y, rank, m, model.config.out_vocab,
                         shuffle_seed=shuffle_seed)

    def case_fit(analysis: str, name: str, m: int) -> tuple[float, float, int, int]:
        i, j, shuffled = cases[m][name]
        return fit_at(i, m, int(runs[analysis]["fit_rank"][j][m]), analysis, shuffle_seed=model.seeds[m] if shuffled else None)

    return {a: {name: [case_fit(a, name, m) for m in range(len(cases))] for name in cases[0]} for a in analyses}


#: The null-direction controls of :func:`null_direction_ranks`: label → :func:`last_token_summary` overrides.
NULL_CONTROLS = (("jitter 0", dict(jitter=0.0)), ("jitter 1e-8", dict(jitter=1e-8)), ("jitter 1e-6", dict(jitter=1e-6)),
                 ("centred", dict(centre=True)))


def null_direction_ranks(model, snapshots: dict[int, dict[str, Tensor]], steps: Sequence[int], data: Sequence[Tensor],
                         energy_threshold: float = 0.99) -> dict[str, list[int]]:
    """Return {control: the authors' necessary rank of each of the first ``len(steps)`` models, model m at checkpoint
    step ``steps[m]``} under each of ``NULL_CONTROLS`` (the factors' jitter 0, 1e-8, 1e-6; ablations about the
    mean); ``snapshots`` maps a step to the ensemble's state, loaded into ``model`` once per distinct step."""
    out = {label: [0] * len(steps) for label, _ in NULL_CONTROLS}
    for step in sorted(set(steps)):
        model.load_state_dict(snapshots[step])
        for label, kw in NULL_CONTROLS:
            ranks = last_token_summary(model, *data, energy_threshold=energy_threshold, analysis="authors", **kw)
            for m in (m for m, s in enumerate(steps) if s == step):
                out[label][m] = ranks["necessary"][m]
    return out


def spectrum_at_necessary(runs: dict[str, list], indices: Sequence[int]) -> list[float]:
    """Return σ²_r/σ²_0 at each model's necessary rank r (the r-th value of its spectrum), model m at checkpoint index
    ``indices[m]``, for the first ``len(indices)`` models of one analysis's ``runs`` (:class:`CheckpointCores`)."""
    return [float(runs["spectrum"][i][m][int(runs["necessary"][i][m]) - 1]) for m, i in enumerate(indices)]


#: The keys of :func:`last_token_summary` a run keeps at every checkpoint (no cores, no spectra: those are used where
#: they are computed, or kept at each seed's grokking checkpoint).
KEPT_KEYS = RANK_KEYS + FIT_KEYS + ("eigs",)
#: The version of what :func:`measure` returns, in a seed record's key: raise it when a change to the measurement
#: would change a record, so that no record of the old measurement is re-read.
MEASURE_VERSION = 1
#: The parameters of 02's notebook that shape what one seed's models measure, its record's key with the seed.
RECORD_PARAMETERS = ("p", "train_frac", "n_layers", "d_model", "n_heads", "d_mlp", "norm", "dropout", "causal",
                     "qkv_bias", "embedding_dropout", "init", "equals_token", "lr", "betas", "weight_decay",
                     "batch_size", "drop_last", "epochs", "fork_epoch", "reset_optimizer_at_fork", "checkpoint_every",
                     "dense_until", "checkpoint_every_after", "energy_threshold", "split", "data_seed")


@dataclass(frozen=True)
class Measured:
    """What chapter 02's figures and claims read of a run, without its weights (see :func:`measure`).

    ``seeds`` (S,); model m < S is seed m's ω branch and model S + m its ω → 0 branch. ``checkpoints`` (C,) and the
    evaluated ``steps`` (E,); ``test_acc`` and ``train_acc`` (E, 2S) at those steps; ``runs[analysis][key]`` the
    :data:`KEPT_KEYS` of :func:`last_token_summary` at every checkpoint (C lists of 2S values); ``control`` the
    exact-fit controls at each seed's own checkpoints (:func:`exact_fit_controls`), ``null_ranks`` the authors'
    necessary rank under each null-direction control at each seed's grokking checkpoint
    (:func:`null_direction_ranks`), ``spectrum_at_grok`` (S,) the authors' σ²/σ₀² there (D,) each.
    """

    seeds: list[int]
    checkpoints: list[int]
    steps: list[int]
    test_acc: Tensor
    train_acc: Tensor
    runs: dict[str, dict[str, list]]
    control: dict[str, dict[str, list]]
    null_ranks: dict[str, list[int]]
    spectrum_at_grok: list[np.ndarray]

    def at_checkpoints(self, curve: Tensor) -> Tensor:
        """Return the rows (C, 2S) of ``curve`` (E, 2S) at the checkpoint steps."""
        return at_checkpoints(self, curve, self.checkpoints)

    @property
    def points(self) -> GrokkingPoints:
        """Return :func:`grokking_points` of the ω branch."""
        return grokking_points(self.checkpoints, self.at_checkpoints(self.test_acc),
                               self.at_checkpoints(self.train_acc), len(self.seeds))

    @property
    def cores(self) -> CheckpointCores:
        """Return the kept summaries as :class:`CheckpointCores` (``runs`` without cores)."""
        runs = self.runs
        return CheckpointCores(runs=runs,
                               ranks={a: {k: np.array(runs[a][k], dtype=float) for k in RANK_KEYS} for a in runs},
                               fit={a: {k: np.array(runs[a][k], dtype=float) for k in FIT_KEYS} for a in runs})

    @property
    def spectrum(self) -> list[float]:
        """Return σ²_r/σ²_0 (S,) at each seed's authors' necessary rank r at its grokking checkpoint."""
        nec = [self.runs["authors"]["necessary"][i][m] for m, i in enumerate(self.points.seed_i_grok)]
        return [float(spec[int(r) - 1]) for spec, r in zip(self.spectrum_at_grok, nec)]

    def as_json(self) -> dict:
        """Return the measurement as JSON values (complex eigenvalues as [real parts, imaginary parts])."""
        def plain(key: str, v):
            return [np.real(v).tolist(), np.imag(v).tolist()] if key == "eigs" else v
        return {"seeds": list(self.seeds), "checkpoints": list(self.checkpoints), "steps": list(self.steps),
                "test_acc": self.test_acc.tolist(), "train_acc": self.train_acc.tolist(),
                "runs": {a: {k: [[plain(k, v) for v in row] for row in rows] for k, rows in keys.items()}
                         for a, keys in self.runs.items()},
                "control": {a: {c: [list(r) for r in rows] for c, rows in cases.items()} for a, cases in self.control.items()},
                "null_ranks": {k: list(v) for k, v in self.null_ranks.items()},
                "spectrum_at_grok": [np.asarray(v).tolist() for v in self.spectrum_at_grok]}

    @classmethod
    def from_json(cls, data: dict) -> "Measured":
        """Return the measurement :meth:`as_json` wrote."""
        def back(key: str, v):
            return np.array(v[0]) + 1j * np.array(v[1]) if key == "eigs" else v
        return cls(seeds=list(data["seeds"]), checkpoints=list(data["checkpoints"]), steps=list(data["steps"]),
                   test_acc=torch.tensor(data["test_acc"]), train_acc=torch.tensor(data["train_acc"]),
                   runs={a: {k: [[back(k, v) for v in row] for row in rows] for k, rows in keys.items()}
                         for a, keys in data["runs"].items()},
                   control={a: {c: [tuple(r) for r in rows] for c, rows in cases.items()}
                            for a, cases in data["control"].items()},
                   null_ranks={k: list(v) for k, v in data["null_ranks"].items()},
                   spectrum_at_grok=[np.array(v) for v in data["spectrum_at_grok"]])

    @classmethod
    def joined(cls, parts: Sequence["Measured"]) -> "Measured":
        """Return the measurement of the seeds of ``parts`` together (their checkpoints and steps the same), in the
        order of ``parts``: the ω models of every part, then the ω → 0 models."""
        first = parts[0]
        if any(m.checkpoints != first.checkpoints or m.steps != first.steps for m in parts):
            raise ValueError("the parts of a run must share their checkpoints and evaluated steps")
        order = [(j, m) for half in (0, 1) for j, part in enumerate(parts)
                 for m in range(half * len(part.seeds), (half + 1) * len(part.seeds))]

        def columns(rows_of) -> list:
            return [[rows_of(parts[j])[c][m] for j, m in order] for c in range(len(rows_of(first)))]

        def stacked(name: str) -> Tensor:
            return torch.stack([getattr(parts[j], name)[:, m] for j, m in order], 1)

        return cls(seeds=[s for part in parts for s in part.seeds], checkpoints=list(first.checkpoints),
                   steps=list(first.steps), test_acc=stacked("test_acc"), train_acc=stacked("train_acc"),
                   runs={a: {k: columns(lambda part: part.runs[a][k]) for k in first.runs[a]} for a in first.runs},
                   control={a: {c: [r for part in parts for r in part.control[a][c]] for c in first.control[a]}
                            for a in first.control},
                   null_ranks={k: [r for part in parts for r in part.null_ranks[k]] for k in first.null_ranks},
                   spectrum_at_grok=[v for part in parts for v in part.spectrum_at_grok])


def schedule(params: dict, n_train: int) -> tuple[int, list[int]]:
    """Return (steps in an epoch, the checkpoint steps (C,)) of a run of 02 on ``n_train`` training pairs."""
    epoch_steps = steps_per_epoch(n_train, params["batch_size"], params["drop_last"])
    return epoch_steps, checkpoint_steps(params["epochs"], epoch_steps, params["fork_epoch"], params["checkpoint_every"],
                                         params["dense_until"], params["checkpoint_every_after"])


def train_branches(params: dict, seeds: Sequence[int], task, device: torch.device,
                   checkpoint_dir: str | None = None, progress: bool = True) -> tuple[BatchedTransformer, History]:
    """Return the trained ensemble of both branches of ``seeds`` (S,) on ``task`` and its history: models 0 … S − 1
    keep weight decay ω, models S … 2S − 1 (the same seeds) drop it to 0 at the fork, with a fresh optimizer when
    ``reset_optimizer_at_fork``; checkpoints (:func:`schedule`) are kept as snapshots."""
    S, equals = len(seeds), params["equals_token"]
    train_set, test_set = task.datasets(equals)
    p = params["p"]
    config = TransformerConfig(vocab=p + int(equals), n_ctx=3 if equals else 2, d_model=params["d_model"],
                               n_heads=params["n_heads"], d_mlp=params["d_mlp"], n_layers=params["n_layers"],
                               norm=params["norm"], dropout=params["dropout"], causal=params["causal"],
                               qkv_bias=params["qkv_bias"], init=params["init"], n_out=p,
                               embedding_dropout=params["embedding_dropout"])
    model = BatchedTransformer(config, list(seeds) + list(seeds)).to(device)
    epoch_steps, checkpoints = schedule(params, len(train_set))
    steps, fork_step, wd = params["epochs"] * epoch_steps, params["fork_epoch"] * epoch_steps, params["weight_decay"]
    history = train_ensemble(model, train_set, test_set, steps=steps, batch_size=params["batch_size"] or None,
                             lr=params["lr"], betas=tuple(params["betas"]),
                             weight_decay={0: wd, fork_step: [wd] * S + [0.0] * S},
                             optimizer_reset={fork_step: [False] * S + [True] * S}
                             if params["reset_optimizer_at_fork"] else None,
                             drop_last=params["drop_last"], eval_every=max(1, steps // 100), snapshot_steps=checkpoints,
                             checkpoint_dir=checkpoint_dir, progress=progress)
    return model, history


def analysis_data(task, equals_token: bool, device: torch.device) -> list[Tensor]:
    """Return (train_x, test_x, test_y, all_x, all_labels) of ``task`` on ``device``, as :func:`last_token_summary`
    takes them."""
    train_set, test_set = task.datasets(equals_token)
    return [t.to(device) for t in (train_set.x, test_set.x, test_set.y[:, 0], task.tokens(equals_token), task.labels)]


def measure(model, history: History, checkpoints: Sequence[int], data: Sequence[Tensor],
            energy_threshold: float = 0.99) -> Measured:
    """Return what the figures and claims read of a trained ensemble of both branches (:func:`train_branches`): ACE at
    every checkpoint under both analyses, and each seed's controls at its own memorisation, grokking and final
    checkpoints. ``data`` as :func:`analysis_data` returns it; the states are loaded into ``model``."""
    S = len(model.seeds) // 2
    test_acc, train_acc = history.curve("test_acc"), history.curve("train_acc")
    pts = grokking_points(checkpoints, at_checkpoints(history, test_acc, checkpoints),
                          at_checkpoints(history, train_acc, checkpoints), S)
    cores = cores_at_checkpoints(model, history.snapshots, checkpoints, data, energy_threshold)
    cases = [control_cases(g, b, pts.final) for g, b in zip(pts.seed_i_grok, pts.seed_i_before)]
    control = exact_fit_controls(model, history.snapshots, checkpoints, data, cores.runs, cases)
    null = null_direction_ranks(model, history.snapshots, [checkpoints[g] for g in pts.seed_i_grok], data,
                                energy_threshold)
    return Measured(seeds=list(model.seeds[:S]), checkpoints=list(checkpoints), steps=list(history.steps),
                    test_acc=test_acc, train_acc=train_acc,
                    runs={a: {k: cores.runs[a][k] for k in KEPT_KEYS} for a in cores.runs}, control=control,
                    null_ranks=null,
                    spectrum_at_grok=[cores.runs["authors"]["spectrum"][g][m] for m, g in enumerate(pts.seed_i_grok)])


def record_key(params: dict, seed: int) -> str:
    """Return the key of seed ``seed``'s record: a hash of it, :data:`RECORD_PARAMETERS` and :data:`MEASURE_VERSION`."""
    text = json.dumps({"seed": seed, "measure": MEASURE_VERSION,
                       **{k: params[k] for k in RECORD_PARAMETERS}}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def record_name(params: dict, seed: int) -> str:
    """Return the name of seed ``seed``'s record (and of its checkpoint folder): the seed and :func:`record_key`."""
    return f"seed{seed}_{record_key(params, seed)}"


def measure_seed(params: dict, seed: int, task, device: torch.device, records: str | None = None,
                 checkpoint_dir: str | None = None, progress: bool = True,
                 write: bool = False) -> tuple[Measured, dict]:
    """Return seed ``seed``'s measurement (both its branches) and its record summary (seed, re-read, training seconds,
    segments, commit): re-read from its record in ``records`` (:mod:`corekit.shard_records`, key :func:`record_key`)
    when there, else trained alone (checkpointing under ``checkpoint_dir``, so an interrupted seed resumes) and
    measured, its record written into ``records`` when ``write``."""
    name, key = record_name(params, seed), record_key(params, seed)
    record = shard_records.read(records, name, key)
    if record is not None:
        return Measured.from_json(record["measured"]), {"seed": seed, "re_read": True, **_record_summary(record)}
    folder = None if checkpoint_dir is None else Path(checkpoint_dir).expanduser().resolve() / name
    started = time.perf_counter()
    model, history = train_branches(params, [seed], task, device, None if folder is None else str(folder), progress)
    segments = shard_records.add_segment(folder, time.perf_counter() - started, history.steps[-1])
    found = measure(model, history, schedule(params, len(task.train_idx))[1],
                    analysis_data(task, params["equals_token"], device), params["energy_threshold"])
    summary = {"seed": seed, "re_read": False, "training_s": round(sum(s["seconds"] for s in segments), 1),
               "segments": len(segments), "commit": "this run"}
    if write:
        shard_records.write(records, name, key, {"label": f"seed {seed}", "measured": found.as_json()},
                            runtime_s=summary["training_s"], segments=len(segments))
    return found, summary


def measure_by_seed(params: dict, task, device: torch.device, records: str | None,
                    checkpoint_dir: str | None = None, progress: bool = True) -> tuple[Measured, list[dict]]:
    """Return the run's measurement taken seed by seed (:func:`measure_seed`, each seed's record re-read when in
    ``records``) and each seed's record summary."""
    found = [measure_seed(params, seed, task, device, records, checkpoint_dir, progress) for seed in params["seeds"]]
    return Measured.joined([m for m, _ in found]), [summary for _, summary in found]


def _record_summary(record: dict) -> dict:
    """Return a seed record's training seconds, segments and the commit (with its dirty flag) that wrote it."""
    run = record["run"]
    return {"training_s": record["runtime_s"], "segments": record["segments"],
            "commit": f"{(run['commit'] or '?')[:7]}{' (dirty)' if run['dirty'] else ''}"}


def export_checkpoints(path: str | os.PathLike, config: TransformerConfig, seeds: Sequence[int],
                       snapshots: dict[int, dict[str, Tensor]], checkpoints: Sequence[int], epoch_steps: int, *,
                       p: int, split: str, data_seed: int, train_frac: float) -> Path:
    """Return the resolved ``path`` after writing every checkpoint's weights there (``torch.save``).

    The file holds {"config": ``config.as_dict()``, "seeds" (M,), "p", "split", "data_seed", "train_frac",
    "epochs": {step / ``epoch_steps``: state_dict of the M models}}; :func:`load_checkpoints` reads it.
    """
    export_path = Path(path).resolve()
    export_path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"config": config.as_dict(), "seeds": list(seeds), "p": p, "split": split, "data_seed": data_seed,
                "train_frac": train_frac, "epochs": {s / epoch_steps: snapshots[s] for s in checkpoints}}, export_path)
    return export_path


@dataclass(frozen=True)
class CheckpointExport:
    """Checkpoints :func:`export_checkpoints` wrote: the models' ``config`` and ``seeds`` (M,), the task (``p``,
    ``split``, ``data_seed``, ``train_frac``) and ``epochs`` {epoch: state_dict of the M models}, in file order."""

    config: TransformerConfig
    seeds: list[int]
    p: int
    split: str
    data_seed: int
    train_frac: float
    epochs: dict[float, dict[str, Tensor]]

    def model(self, epoch: float | None = None) -> BatchedTransformer:
        """Return the ensemble in eval mode, holding the state of ``epoch`` (None: its initialisation)."""
        model = BatchedTransformer(self.config, seeds=self.seeds).eval()
        if epoch is not None:
            model.load_state_dict(self.epochs[epoch])
        return model


def load_checkpoints(path: str | os.PathLike) -> CheckpointExport:
    """Return the checkpoints :func:`export_checkpoints` wrote to ``path``."""
    export = torch.load(path, weights_only=True)
    return CheckpointExport(config=TransformerConfig(**export["config"]), seeds=export["seeds"], p=export["p"],
                            split=export["split"], data_seed=export["data_seed"], train_frac=export["train_frac"],
                            epochs=export["epochs"])


# --------------------------------------------------------------------------------------------
# The chapter's input checks


def check_inputs(params: dict) -> None:
    """Return None, or refuse chapter 02's parameters (:class:`corekit.inputs.ParameterError`): distinct seeds, a numpy
    split seed below 2**32, a fork inside the run, heads that divide d_model, the size of the checkpoints kept for the
    analysis, no export from a run by seed, and a held-out set that holds every class."""
    nb = "02_grokking_cores"
    distinct(nb, "seeds", params["seeds"], "distinct seeds (each trains one model per branch)")
    heads_divide(nb, params)
    require(params["split"] != "numpy" or params["data_seed"] < 2**32, nb, "data_seed", params["data_seed"],
            "a seed below 2**32 with split numpy (numpy's RandomState takes 0 ... 2**32 - 1)")
    epochs = params["epochs"]
    require(0 < params["fork_epoch"] < epochs, nb, "fork_epoch", params["fork_epoch"],
            f"an epoch inside the run, 0 < fork_epoch < epochs = {epochs}")
    p, m = params["p"], len(params["seeds"])
    n_ctx = 3 if params["equals_token"] else 2
    weights = transformer_parameters(p + 1, n_ctx, params["d_model"], params["d_mlp"], params["n_layers"], p)
    dense = min(epochs, params["dense_until"])
    snapshots = (len(range(0, dense + 1, params["checkpoint_every"]))
                 + len(range(dense + params["checkpoint_every_after"], epochs + 1, params["checkpoint_every_after"])))
    logits = m * p * p * p
    fits(nb, params, [
        Need(f"the {snapshots:,} checkpoints kept for the analysis, every model", 4 * m * snapshots * weights,
             m * weights, "epochs"),
        Need("the logits of all p² pairs, every model", 4 * logits, logits, "p"),
    ])
    require(not (params.get("shard_records") and params.get("export_checkpoints")), nb, "export_checkpoints",
            params.get("export_checkpoints"), "empty when shard_records is set (a run by seed keeps no weights to export)")
    task = modular_addition(params["p"], params["train_frac"], seed=params["data_seed"], split=params["split"])
    missing = params["p"] - len(set(task.labels[task.test_idx].tolist()))
    require(missing == 0, nb, "train_frac", params["train_frac"],
            f"a split whose held-out pairs hold every class of a + b mod {params['p']} (the class means of the "
            f"authors' analysis are taken on them); here {missing} of the {params['p']} classes have no held-out pair")


# --------------------------------------------------------------------------------------------
# The chapter's claims

#: The setting at which the paper states its numbers (``notebooks/params/paper/02_grokking_cores.yaml``): the task,
#: model, training and analysis values. A run that differs in any of them leaves a claim whose bound is one of those
#: numbers (:data:`AT_PAPER_SETTING`) undecided.
PAPER_SETTING = {"p": 53, "train_frac": 0.5, "n_layers": 2, "d_model": 128, "n_heads": 4, "d_mlp": 512, "norm": "post",
                 "dropout": 0.1, "causal": True, "qkv_bias": True, "embedding_dropout": False, "init": "torch",
                 "equals_token": False, "lr": 0.001, "betas": [0.9, 0.999], "weight_decay": 1.0, "batch_size": 512,
                 "drop_last": False, "epochs": 20001, "energy_threshold": 0.99}
#: The claims (without the ``_authors`` suffix) whose bound is a number the paper states at its setting, with that
#: number; every other claim the paper states independently of its setting (the rotation of a grokked core, the
#: timing of crystallization, inflation as a shape: the necessary rank grows while the sufficient rank stays flat,
#: none without weight decay) and is decided at any profile.
AT_PAPER_SETTING = {"rank_at_grok": "energy rank ≈ 15 at grokking",
                    "modes_final": "all ⌊p/2⌋ + 1 = 27 frequency modes at epoch 20,001"}
#: What decides a claim that a run outside :data:`PAPER_SETTING` leaves undecided.
PAPER_DECIDES = ("the paper profile (notebooks/params/paper/02_grokking_cores.yaml) decides it, seed by seed "
                 "(scripts/train-shards.py 02_grokking_cores --profile paper): the six models of its three seeds took "
                 "0.35 s an epoch together on two idle CPU threads, about 2 h for 20,001 epochs")
#: The models most claims cover, and those of the ω → 0 claim.
COVERS = "the weight-decay seeds the profile trains"
COVERS_WD0 = "the seeds the profile trains, in the ω → 0 branch"
#: The modes the paper counts at the end, ⌊53/2⌋ + 1, and the share of them ``modes_final`` asks for.
PAPER_MODES, MODES_SHARE = 27, 0.8


def _analysis_specs(a: str) -> tuple[Spec, ...]:
    """Return the declared claims of analysis ``a`` (ids suffixed ``_authors`` for the authors'), in recorded order."""
    tag = "" if a == "corekit" else "_authors"
    return (
        Spec("crystallization" + tag, "paper", f"checkpoints between the settle checkpoint of the energy rank ({a} "
             "analysis: the first from which it stays within 1 of its value at grokking) and the seed's grokking "
             "checkpoint", at_most(2), paper="the core crystallizes at grokking", covers=COVERS),
        Spec("rank_at_grok" + tag, "paper", f"energy rank of the core at the seed's grokking checkpoint ({a} analysis)",
             between(10, 20), paper="≈ 15 (p = 53)", covers=COVERS),
        Spec("unit_circle_fraction_at_grok" + tag, "paper", "fraction of the shift operator's eigenvalues on the unit "
             f"circle at grokking ({a} analysis)", at_least(0.8), paper="≈ 1", covers=COVERS),
        Spec("unit_circle_fraction_before" + tag, "paper", f"the unit-circle fraction at the memorising checkpoint ({a} "
             "analysis) is below the one at grokking", holds(), paper="< at grokking", covers=COVERS),
        Spec("operator_r2_before" + tag, "paper", f"R² of the shift-operator fit at the memorising checkpoint ({a} "
             "analysis)", at_most(0.5), paper="low before grokking", covers=COVERS),
        Spec("operator_r2_after" + tag, "paper", "smallest R² of the shift-operator fit over every checkpoint from "
             f"grokking on ({a} analysis)", at_least(0.9), paper="≈ 1 after grokking", covers=COVERS),
        Spec("necessary_rank_growth" + tag, "paper", f"growth of the necessary rank, final / at grokking ({a} analysis)",
             at_least(2), paper="≈ 4 (15 → 60)", covers=COVERS),
        Spec("sufficient_rank_growth" + tag, "paper", f"growth of the sufficient rank, final / at grokking ({a} "
             "analysis)", between(0.8, 1.25), paper="≈ 1 (flat)", covers=COVERS),
        Spec("modes_at_grok" + tag, "extension", f"frequency modes at grokking ({a} analysis): distinct bins of the "
             "shift fit, and Fourier modes of the means"),
        Spec("modes_final" + tag, "paper", f"Fourier modes of the final core's class means ({a} analysis: the fewest "
             "frequencies holding 90 % of their power)", at_least(MODES_SHARE * PAPER_MODES),
             paper=f"{PAPER_MODES} (all ⌊p/2⌋ + 1)", covers=COVERS),
        Spec("wd0_necessary_rank_growth" + tag, "paper", "growth of the necessary rank of the ω → 0 model, final / at "
             f"grokking ({a} analysis)", at_most(1.25), paper="no inflation without weight decay", covers=COVERS_WD0),
    )


#: Chapter 02's claims, in the order the notebook records them.
CLAIMS: tuple[Spec, ...] = (
    Spec("grok_epoch", "precondition", "test accuracy of each ω model at the end of training",
         at_least(GROKKING_THRESHOLD), paper="reported", covers=COVERS),
    *(spec for a in ANALYSES for spec in _analysis_specs(a)),
    Spec("null_direction_control", "check", "how far the authors' necessary rank at grokking moves under jitter 0 / "
         "1e-8 / 1e-6 and centring", at_most(2), covers=COVERS, no_null="numerical check"),
    Spec("null_direction_spectrum", "check", "σ²/σ₀² of the authors' Cov·Obs spectrum at their necessary rank at "
         "grokking (≥: the rank lies in directions Cov·Obs does not leave numerically null)", at_least(1e-6),
         covers=COVERS, no_null="numerical check"),
)
_SPEC = declared(CLAIMS)


@dataclass(frozen=True)
class Findings:
    """What chapter 02's claims read from a run.

    ``seeds`` (S,) are the weight-decay models' seeds (the ω → 0 models are the same seeds, after them);
    ``params`` the run's parameters (at least :data:`PAPER_SETTING`'s names and ``fork_epoch``); ``checkpoints`` (C,)
    the checkpoint steps, ``epoch_steps`` the steps of an epoch; ``test_acc`` (C, 2S) the test accuracy at the
    checkpoints (:func:`at_checkpoints`); ``points`` :func:`grokking_points`; ``cores`` :func:`cores_at_checkpoints`;
    ``control`` :func:`exact_fit_controls` on :func:`control_cases`; ``null_ranks`` :func:`null_direction_ranks` at
    the grokking checkpoint; ``spectrum`` (S,) :func:`spectrum_at_necessary` of the authors' analysis there.
    """

    seeds: Sequence[int]
    params: dict
    checkpoints: Sequence[int]
    epoch_steps: int
    test_acc: Tensor | np.ndarray
    points: GrokkingPoints
    cores: CheckpointCores
    control: dict[str, dict[str, list[tuple[float, float, int, int]]]]
    null_ranks: dict[str, list[int]]
    spectrum: Sequence[float]


def _same(value, want) -> bool:
    """Return whether a parameter's ``value`` is the paper's ``want`` (lists item by item, numbers to 1e-9)."""
    if isinstance(want, (list, tuple)):
        return isinstance(value, (list, tuple)) and len(value) == len(want) and all(map(_same, value, want))
    if isinstance(want, (bool, str)) or isinstance(value, (bool, str)):
        return isinstance(value, type(want)) and value == want
    return bool(np.isclose(float(value), float(want), rtol=1e-9, atol=0.0))


def setting_differences(params: dict) -> list[str]:
    """Return "NAME VALUE, not PAPER'S" for every parameter of :data:`PAPER_SETTING` in which ``params`` differ."""
    return [f"{name} {show(params[name])}, not {show(want)}" for name, want in PAPER_SETTING.items()
            if not _same(params[name], want)]


def _per_seed(seeds: Sequence[int], values: Sequence) -> dict:
    """Return {"seed s": value} (:func:`seed_values`: floats to 3 decimals)."""
    return seed_values([f"seed {s}" for s in seeds], list(values))


def _column(control: dict[str, list], n_models: int, case: str, k: int) -> list:
    """Return item ``k`` (0 R², 1 circle fraction, 2 fit modes, 3 Fourier modes) of control ``case`` for each of the
    first ``n_models`` models (:func:`exact_fit_controls`)."""
    return [control[case][m][k] for m in range(n_models)]


def _members(seeds: Sequence[int], flags: Sequence) -> dict[str, bool]:
    """Return {"seed s": whether the seed is in a regime}."""
    return {f"seed {s}": bool(flag) for s, flag in zip(seeds, flags)}


@dataclass(frozen=True)
class _Run:
    """What every analysis's claims share: the seeds, the modulus, the grokking points, the setting's differences."""

    seeds: list[int]
    p: int
    cap: int
    ep: list[int]                      # the epoch of each checkpoint, by index
    no_grok: tuple[str, dict]
    fork_before: tuple[str, dict]
    off_setting: list[str]

    def epochs(self, indices: Sequence[int | None]) -> list[int | None]:
        """Return the epochs of checkpoint ``indices`` (None kept)."""
        return [None if i is None else self.ep[i] for i in indices]

    def setting_reason(self, claim: str) -> str | None:
        """Return why a claim whose bound is the paper's number at its setting is undecided here (None: same setting)."""
        if claim not in AT_PAPER_SETTING or not self.off_setting:
            return None
        return (f"the paper states its number ({AT_PAPER_SETTING[claim]}) at its own setting, and this run's setting "
                f"differs ({'; '.join(self.off_setting)}); {PAPER_DECIDES}, for "
                + ", ".join(f"seed {s}" for s in self.seeds))


def claims(findings: Findings) -> list[Claim]:
    """Return chapter 02's claims (:data:`CLAIMS`, in that order) decided on ``findings``: values per ω seed, nulls
    from the same run, and the computed reason of every verdict but pass."""
    f = findings
    seeds, S, params = list(f.seeds), len(f.seeds), f.params
    p, epochs, fork_epoch = int(params["p"]), int(params["epochs"]), int(params["fork_epoch"])
    pts, checkpoints = f.points, list(f.checkpoints)
    test_acc = torch.as_tensor(f.test_acc).detach().cpu().double().numpy()
    fork_after = [g is not None and fork_epoch * f.epoch_steps > checkpoints[g] for g in pts.seed_grok]
    run = _Run(seeds=seeds, p=p, cap=min(p - 3, int(params["d_model"])),
               ep=[round(c / f.epoch_steps) for c in checkpoints],
               no_grok=(f"no grokking checkpoint within {epochs} epochs (test accuracy < {GROKKING_THRESHOLD})",
                        _members(seeds, [g is None for g in pts.seed_grok])),
               fork_before=(f"a fork at epoch {fork_epoch} before the seed's grokking (its ω → 0 branch never held a "
                            "grokked core)", _members(seeds, [not a for a in fork_after])),
               off_setting=setting_differences(params))
    found = [decide(_SPEC["grok_epoch"], _per_seed(seeds, test_acc[-1, :S].tolist()),
                    null=Null("the same models at initialisation (epoch 0)", _per_seed(seeds, test_acc[0, :S].tolist())),
                    statistic=f"test accuracy of each ω model after {checkpoints[-1] / f.epoch_steps:g} epochs",
                    why=f"grokking (test accuracy ≥ {GROKKING_THRESHOLD}) per seed at epoch "
                        f"{run.epochs(pts.seed_grok)}")]
    for a in ANALYSES:
        found += _analysis_claims(f, run, a)
    null = f.null_ranks
    spread = [max(v[m] for v in null.values()) - min(v[m] for v in null.values()) for m in range(S)]
    found.append(decide(_SPEC["null_direction_control"], _per_seed(seeds, spread),
                        why="; ".join(f"{k}: {v}" for k, v in null.items())))
    found.append(decide(_SPEC["null_direction_spectrum"],
                        {f"seed {s}": float(f"{v:.3g}") for s, v in zip(seeds, f.spectrum)}))
    return found


def _analysis_claims(f: Findings, run: _Run, a: str) -> list[Claim]:
    """Return the claims of analysis ``a`` (:func:`_analysis_specs`'s order) on ``f``."""
    tag, seeds, S, p, pts = "" if a == "corekit" else "_authors", run.seeds, len(run.seeds), run.p, f.points
    ig, ib, final = pts.seed_i_grok, pts.seed_i_before, pts.final
    R, Fi, C = f.cores.ranks[a], f.cores.fit[a], f.control[a]
    by_seed = partial(_per_seed, seeds)
    col = partial(_column, C, S)

    def spec(name: str) -> Spec:
        """Return the declared claim ``name`` of this analysis."""
        return _SPEC[name + tag]

    fit_r = R["fit_rank"].astype(int)
    energy_r, sufficient_r, necessary_r = (R[k].astype(int) for k in ("energy", "sufficient", "necessary"))
    fit_note = (f"fit rank {_at(fit_r, ib).tolist()} before, {_at(fit_r, ig).tolist()} at grokking, "
                f"{fit_r[final, :S].tolist()} at the end (p − 1 = {p - 1} makes a shift fit exact)")
    exact_fit = (f"a fit rank within 2 of p − 1 = {p - 1}, where a shift fit is exact for any model",
                 _members(seeds, _at(fit_r, ib) >= p - 3))
    out = []

    to_grok, to_mem, settle = crystallization_gaps(energy_r[:, :S], pts.seed_grok, pts.seed_memorised)
    out.append(decide(spec("crystallization"), by_seed(to_grok),
                      null=Null("the same distance from the seed's memorisation checkpoint (a core set while "
                                "memorising)", by_seed(to_mem)),
                      undecided=regime_reason(by_seed(to_grok), spec("crystallization").bound, undefined=run.no_grok),
                      why=f"the energy rank settles at epoch {run.epochs(settle)}; grokking at "
                          f"{run.epochs(pts.seed_grok)}, memorisation at {run.epochs(pts.seed_memorised)}"))
    at_grok = by_seed([energy_r[g, m] if g is not None else None for m, g in enumerate(pts.seed_grok)])
    out.append(decide(spec("rank_at_grok"), at_grok, null=Null("the untrained model (epoch 0)",
                                                               by_seed(energy_r[0, :S].tolist())),
                      undecided=run.setting_reason("rank_at_grok")
                      or regime_reason(at_grok, spec("rank_at_grok").bound, undefined=run.no_grok)))
    circle_grok, circle_before = _at(Fi["circle"], ig), _at(Fi["circle"], ib)
    out.append(decide(spec("unit_circle_fraction_at_grok"), by_seed(circle_grok),
                      null=[Null("the memorising checkpoint at the same fit rank", by_seed(col("memorising", 1))),
                            Null("the grokking checkpoint with shuffled class labels, same fit rank",
                                 by_seed(col("shuffled", 1)))],
                      undecided=regime_reason(by_seed(circle_grok), spec("unit_circle_fraction_at_grok").bound,
                                              undefined=run.no_grok), why=fit_note))
    before_lower = by_seed([bool(b < g) for b, g in zip(circle_before, circle_grok)])
    out.append(decide(spec("unit_circle_fraction_before"), before_lower,
                      null=Null("the same ordering between two models without the rotation: the untrained model below "
                                "the memorising one, both at the grokking fit rank",
                                by_seed([bool(u < m_) for u, m_ in zip(col("untrained", 1), col("memorising", 1))])),
                      undecided=regime_reason(before_lower, holds(), undefined=run.no_grok),
                      why=f"circle fraction {circle_before.round(3).tolist()} before, {circle_grok.round(3).tolist()} "
                          f"at grokking; {fit_note}"))
    out += _operator_r2_claims(f, run, a, fit_note, exact_fit)
    out += _inflation_claims(f, run, a, necessary_r, sufficient_r)
    modes_grok = {"shift fit": by_seed(_at(Fi["modes"], ig).astype(int).tolist()),
                  "Fourier power": by_seed(_at(Fi["fourier_modes"], ig).astype(int).tolist())}
    out.append(reported(spec("modes_at_grok"), modes_grok, paper=p // 2 + 1,
                        statistic=f"frequency modes at grokking (of ⌊p/2⌋ + 1 = {p // 2 + 1}), {a} analysis: distinct "
                                  "bins of the shift fit, and Fourier modes of the means"))
    modes_final = by_seed(Fi["fourier_modes"][final, :S].astype(int).tolist())
    out.append(decide(spec("modes_final"), modes_final,
                      null=[Null("the untrained model at the final fit rank", by_seed(col("untrained_at_final_rank", 3))),
                            Null("the memorising checkpoint at the final fit rank",
                                 by_seed(col("memorising_at_final_rank", 3)))],
                      undecided=run.setting_reason("modes_final"),
                      why=f"final fit rank {fit_r[final, :S].tolist()}; the shift fit's bins "
                          f"{Fi['modes'][final, :S].astype(int).tolist()} (at most ⌈r/2⌉ each)"))
    out.append(_wd0_claim(f, run, a, necessary_r))
    return out


def _operator_r2_claims(f: Findings, run: _Run, a: str, fit_note: str, exact_fit: tuple[str, dict]) -> list[Claim]:
    """Return ``operator_r2_before`` and ``operator_r2_after`` of analysis ``a``."""
    tag, seeds, S, pts = "" if a == "corekit" else "_authors", run.seeds, len(run.seeds), f.points
    Fi, C, fit_r = f.cores.fit[a], f.control[a], f.cores.ranks[a]["fit_rank"].astype(int)
    col = partial(_column, C, S)
    r2_before = _per_seed(seeds, _at(Fi["r2"], pts.seed_i_before))
    untrained_before = col("untrained_at_before_rank", 0)
    untrained = ("an untrained model that already gives R² > 0.5 at the same fit rank "
                 f"({np.round(untrained_before, 3).tolist()}), without any learning (a run whose memorising "
                 "checkpoint has a fit rank low enough for an untrained model to stay at R² ≤ 0.5 decides it: random "
                 "class means give about r/(p − 1))", _members(seeds, [u > 0.5 for u in untrained_before]))
    before = decide(_SPEC["operator_r2_before" + tag], r2_before,
                    null=Null("the grokked checkpoint at the same fit rank (a model with the rotation)",
                              _per_seed(seeds, col("grokked_at_before_rank", 0))),
                    undecided=regime_reason(r2_before, at_most(0.5), [exact_fit, untrained], undefined=run.no_grok),
                    why=fit_note)
    i_low = [g + int(np.argmin(Fi["r2"][g:, m])) for m, g in enumerate(pts.seed_i_grok)]
    r2_after = _per_seed(seeds, _at(Fi["r2"], i_low))
    after = decide(_SPEC["operator_r2_after" + tag], r2_after,
                   null=[Null("the memorising checkpoint at the grokking fit rank", _per_seed(seeds, col("memorising", 0))),
                         Null("the untrained model at the grokking fit rank", _per_seed(seeds, col("untrained", 0)))],
                   undecided=regime_reason(r2_after, at_least(0.9), undefined=run.no_grok),
                   why=f"lowest at epoch {run.epochs(i_low)}, fit rank there "
                       f"{[int(fit_r[i, m]) for m, i in enumerate(i_low)]} (random class means give about r/(p − 1))")
    return [before, after]


def _at(values: np.ndarray, indices: Sequence[int], offset: int = 0) -> np.ndarray:
    """Return ``values[indices[m], offset + m]`` for each m (S,): model ``offset + m`` of ``values`` (C, M) at its
    seed's checkpoint index (``offset`` S for the ω → 0 branch)."""
    return np.array([values[i, offset + m] for m, i in enumerate(indices)])


def _growth(values: np.ndarray, i_grok: Sequence[int], final: int, offset: int = 0) -> np.ndarray:
    """Return final / at-grokking (S,) of ``values`` (C, M) for models ``offset`` … ``offset + S − 1``, each from its
    seed's grokking checkpoint ``i_grok`` (S,) (the denominator at least 1)."""
    S = len(i_grok)
    return values[final, offset:offset + S] / np.maximum(_at(values, i_grok, offset), 1)


def _necessary_note(f: Findings, run: _Run, necessary_r: np.ndarray) -> str:
    """Return the necessary ranks at grokking and at the end, in both branches, as a sentence."""
    S, ig, final = len(run.seeds), f.points.seed_i_grok, f.points.final
    return (f"necessary rank {_at(necessary_r, ig).tolist()} at grokking, {necessary_r[final, :S].tolist()} "
            f"at epoch {run.ep[final]}; ω → 0 branch {_at(necessary_r, ig, S).tolist()} → "
            f"{necessary_r[final, S:].tolist()}")


def _inflation_claims(f: Findings, run: _Run, a: str, necessary_r: np.ndarray, sufficient_r: np.ndarray) -> list[Claim]:
    """Return ``necessary_rank_growth`` and ``sufficient_rank_growth`` of analysis ``a``."""
    tag, seeds, S, ig, final = "" if a == "corekit" else "_authors", run.seeds, len(run.seeds), f.points.seed_i_grok, \
        f.points.final
    nec_g = _per_seed(seeds, _growth(necessary_r, ig, final))
    suf_g = _per_seed(seeds, _growth(sufficient_r, ig, final))
    wd0_g = _per_seed(seeds, _growth(necessary_r, ig, final, S))
    no_room = (f"no room to double below min(p − 3, d_model) = {run.cap} (a run whose necessary rank at grokking is "
               "at most half of that decides it)", _members(seeds, [2 * necessary_r[g, m] > run.cap for m, g in enumerate(ig)]))
    saturated = (f"a necessary rank that reaches min(p − 3, d_model) = {run.cap} after grokking (the exact-fit / "
                 "null-direction regime; only a run whose rank stays below it decides it)",
                 _members(seeds, [necessary_r[g:, m].max() >= run.cap for m, g in enumerate(ig)]))
    necessary = decide(_SPEC["necessary_rank_growth" + tag], nec_g,
                       null=Null("the same seed in the ω → 0 branch (no weight decay after the fork)", wd0_g),
                       undecided=regime_reason(nec_g, at_least(2), [no_room, saturated], undefined=run.no_grok),
                       why=_necessary_note(f, run, necessary_r))
    sufficient = decide(_SPEC["sufficient_rank_growth" + tag], suf_g,
                        null=Null("the necessary rank's growth over the same checkpoints (the rank the paper says "
                                  "inflates)", nec_g),
                        undecided=run.setting_reason("sufficient_rank_growth")
                        or regime_reason(suf_g, between(0.8, 1.25), undefined=run.no_grok),
                        why=f"sufficient rank {_at(sufficient_r, ig).tolist()} at grokking, "
                            f"{sufficient_r[final, :S].tolist()} at the end" + (
                                "; the authors' operational rank is floored at the energy rank" if tag else ""))
    return [necessary, sufficient]


def _wd0_claim(f: Findings, run: _Run, a: str, necessary_r: np.ndarray) -> Claim:
    """Return ``wd0_necessary_rank_growth`` of analysis ``a``: the ω → 0 branch against the ω branch."""
    tag, seeds, ig, final = "" if a == "corekit" else "_authors", run.seeds, f.points.seed_i_grok, f.points.final
    nec_g = _per_seed(seeds, _growth(necessary_r, ig, final))
    wd0_g = _per_seed(seeds, _growth(necessary_r, ig, final, len(seeds)))
    return decide(_SPEC["wd0_necessary_rank_growth" + tag], wd0_g,
                  null=Null("the same seed with weight decay throughout (the ω branch, which the paper says inflates)",
                            nec_g),
                  undecided=regime_reason(wd0_g, at_most(1.25), [run.fork_before], undefined=run.no_grok),
                  why=_necessary_note(f, run, necessary_r))
