"""Chapter 02 (grokking cores): the ACE authors' last-token protocol on a grokking transformer.

The chapter trains a weight-decay ensemble and its ω → 0 branch, takes checkpoints on the schedule
:func:`checkpoint_steps` gives, finds where the weight-decay models memorise and grok
(:func:`grokking_points`), runs :func:`last_token_summary` at every checkpoint under both analyses
(:func:`cores_at_checkpoints`), fits the shift operator on models without the effect at the same rank
(:func:`exact_fit_controls`) and moves the authors' analysis off its defaults (:func:`null_direction_ranks`).
:func:`export_checkpoints` writes every checkpoint's weights for ``scripts/oracle/cores_02.py``, which reads
them back with :func:`load_checkpoints`.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch import Tensor

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
from corekit.models import BatchedTransformer, TransformerConfig

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
    """Return the rows (C, M) of ``curve`` (evaluated steps, M), one of ``history.curve``, at the checkpoint steps (C,)."""
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
                       runs: dict[str, dict[str, list]], cases: dict[str, tuple[int, int, bool]], n_models: int,
                       analyses: Sequence[str] = ANALYSES) -> dict[str, dict[str, list[tuple[float, float, int, int]]]]:
    """Return {analysis: {case: [:func:`shift_fit` (R², circle fraction, modes, Fourier modes) of each of the first
    ``n_models`` models]}}.

    Each case (:func:`control_cases`) fits the shift operator (:func:`shift_fit`) on the last-token states of
    the model at its checkpoint, in the core ``runs[analysis]["core"]`` of that checkpoint, at the fit rank of
    the case's rank checkpoint, on the inputs and labels the analysis fits on (authors: test pairs; corekit: all
    pairs; ``data`` as in :func:`cores_at_checkpoints`); shuffled cases permute the labels with seed m. The
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

    return {a: {name: [fit_at(i, m, int(runs[a]["fit_rank"][j][m]), a, shuffle_seed=m if shuffled else None)
                       for m in range(n_models)] for name, (i, j, shuffled) in cases.items()} for a in analyses}


#: The null-direction controls of :func:`null_direction_ranks`: label → :func:`last_token_summary` overrides.
NULL_CONTROLS = (("jitter 0", dict(jitter=0.0)), ("jitter 1e-8", dict(jitter=1e-8)), ("jitter 1e-6", dict(jitter=1e-6)),
                 ("centred", dict(centre=True)))


def null_direction_ranks(model, state: dict[str, Tensor], data: Sequence[Tensor], n_models: int,
                         energy_threshold: float = 0.99) -> dict[str, list[int]]:
    """Return {control: the authors' necessary rank of each of the first ``n_models`` models} with ``state`` loaded
    into ``model``, under each of ``NULL_CONTROLS`` (the factors' jitter 0, 1e-8, 1e-6; ablations about the mean)."""
    model.load_state_dict(state)
    return {label: last_token_summary(model, *data, energy_threshold=energy_threshold, analysis="authors",
                                      **kw)["necessary"][:n_models] for label, kw in NULL_CONTROLS}


def spectrum_at_necessary(runs: dict[str, list], i: int, n_models: int) -> list[float]:
    """Return σ²_r/σ²_0 at each model's necessary rank r (the r-th value of its spectrum) at checkpoint i, for the
    first ``n_models`` models of one analysis's ``runs`` (:class:`CheckpointCores`)."""
    return [float(runs["spectrum"][i][m][int(runs["necessary"][i][m]) - 1]) for m in range(n_models)]


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
