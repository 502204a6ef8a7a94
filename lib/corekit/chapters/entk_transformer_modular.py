"""The eNTK paper's per-parameter measurement on modular addition: eigenvector blocks vs Fourier features.

For one model of a :class:`~corekit.models.BatchedTransformer` on all p² pairs, every parameter tensor
gets its own kernel, flattened as the mean over all class pairs (``mode="pair_mean"``: the eNTK of
the mean output, over every output the model has), and its top eigenvectors. With K key frequencies
a feature family spans 2K dimensions; the paper scores the blocks of eigenvectors ``0 … 2K`` and
``2K+1 … 4K`` (for K = 2 its ``[0:5]`` and ``[5:9]``), with no eigenvector passed over, against the
sum features cos/sin ω_k(a+b) and the input features cos ω_k a + cos ω_k b, sin ω_k a + sin ω_k b
(:func:`corekit.subspaces.alignment`, as a fraction of 2K). Which block holds which family is measured
per parameter (:meth:`BlockScores.holding`), not assumed; each block's share of the constant
function is reported beside its scores.

The models are trained by the authors' recipe (:func:`corekit.recipes.train_authors`: their split, initial draw, batch
order and AdamW); their oracle record (``results/oracle/06.json``) applies only when
:func:`corekit.recipes.matches_authors` says a run's settings are theirs (:func:`authors_record`), :func:`log_gap`
compares a training log with theirs up to the epoch where float32 rounding starts to move a run
(:func:`rounding_horizon`, against the run in float64), and :func:`corekit.entk.unembedding_alignment` follows W_U's
leading block against the sum features over saved states. The kernels are :func:`corekit.entk.parameter_eigenpairs`.

The chapter's claims are declared in :data:`CLAIMS` (a seed's rows by :func:`seed_specs`) and decided by
:func:`claims` on :class:`Findings`: the block alignments, the sparsity of the key frequencies (against the models of
the run that did not generalise) and the weak alignment at initialisation (against the generalising checkpoint,
:func:`checkpoint_alignment`) over every model that generalises, then each studied seed's rows. :func:`check_inputs`
holds the chapter's rules on its parameters.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from corekit import entk, fourier, subspaces
from corekit.curves import first_step_reaching
from corekit.inputs import Need, distinct, fits, heads_divide, kernels, require, seed_items, transformer_parameters
from corekit.recipes import AuthorsRun, matches_authors
from corekit.verdicts import Claim, Null, Spec, at_least, at_most, between, decide, declared, equal_to, per_model, reported

#: The held-out accuracy from which a model counts as generalised.
GENERALISED = 0.99
#: Feature families scored: name → :func:`corekit.fourier.fourier_basis` kind.
FAMILIES = {"sum": "sum", "input": "input_sum"}








def log_gap(epoch_loss: np.ndarray, log: Mapping[str, Sequence[float]], through_epoch: int = 60) -> float:
    """Return the largest abs(epoch train loss (epochs,) − the authors' logged ``train_loss``) over their logged epochs
    (``log["epoch"]``) up to ``through_epoch``; ``epoch_loss`` needs only those epochs."""
    early = [j for j, e in enumerate(log["epoch"]) if e <= through_epoch]
    ours = np.asarray(epoch_loss)[np.asarray(log["epoch"])[early]]
    return float(np.abs(ours - np.asarray(log["train_loss"])[early]).max())


def rounding_horizon(epoch_loss: np.ndarray, exact_loss: np.ndarray, epochs: Sequence[int], tol: float) -> int | None:
    """Return the last of ``epochs`` (ascending) up to which the epoch train loss (≥ max(epochs) + 1,) stays within
    ``tol`` of ``exact_loss``, the same run in float64, at every one of ``epochs``; None when it already does not at
    the first. Past it, float32 rounding alone moves the run by more than ``tol``."""
    if not tol > 0:
        raise ValueError(f"tol must be positive, got {tol!r}")
    epochs = [int(e) for e in epochs]
    if not epochs or epochs != sorted(set(epochs)) or epochs[0] < 0:
        raise ValueError(f"epochs must be ascending distinct epochs >= 0, got {epochs}")
    for name, loss in (("epoch_loss", epoch_loss), ("exact_loss", exact_loss)):
        if np.ndim(loss) != 1 or len(loss) <= epochs[-1]:
            raise ValueError(f"{name} must be (epochs,) with at least {epochs[-1] + 1} epochs, got shape "
                             f"{np.shape(loss)}")
    last = None
    for e in epochs:
        if not abs(float(epoch_loss[e]) - float(exact_loss[e])) <= tol:
            break
        last = e
    return last


def paper_blocks(n_keys: int, top_k: int | None = None) -> list[list[int]]:
    """Return the paper's two eigenvector blocks for ``n_keys`` key frequencies: [0 … 2K] and [2K+1 … 4K]."""
    if not isinstance(n_keys, int) or n_keys < 1:
        raise ValueError(f"n_keys must be a positive integer, got {n_keys!r}")
    n = 2 * n_keys
    if top_k is not None and 2 * n + 1 > top_k:
        raise ValueError(f"top_k must be at least 4K + 1 = {2 * n + 1} for K = {n_keys} key frequencies, got {top_k}")
    return [list(range(0, n + 1)), list(range(n + 1, 2 * n + 1))]


@dataclass
class BlockScores:
    """Scores of one model: ``scores[param][family]`` and ``constant[param]`` hold one value per block."""

    keys: list[int]
    blocks: list[list[int]]
    scores: dict[str, dict[str, list[float]]]
    constant: dict[str, list[float]]
    eigenvalues: dict[str, Tensor]

    def holding(self, param: str, family: str) -> tuple[int, float]:
        """Return (block index, alignment) of the block of ``param`` that holds ``family`` best."""
        if param not in self.scores or family not in FAMILIES:
            raise ValueError(f"param must be one of {sorted(self.scores)} and family one of {tuple(FAMILIES)}, "
                             f"got {param!r}, {family!r}")
        values = self.scores[param][family]
        j = max(range(len(values)), key=values.__getitem__)
        return j, values[j]

    def table(self) -> dict[str, dict[str, list[float]]]:
        """Return {param: {"sum": [...], "input": [...], "constant": [...]}} (one value per block), plain floats."""
        return {name: {**fams, "constant": self.constant[name]} for name, fams in self.scores.items()}






def score_blocks(eigs: Mapping[str, entk.Eigenpairs], p: int, keys: Sequence[int]) -> BlockScores:
    """Return the paper's two blocks of every kernel's eigenvectors (N = p², k) scored on the families at ``keys``."""
    keys = [int(k) for k in keys]
    top_k = min(e.vectors.shape[1] for e in eigs.values())
    blocks = paper_blocks(len(keys), top_k)
    features = {fam: fourier.fourier_basis(p, kind, keys) for fam, kind in FAMILIES.items()}
    scores, constant = {}, {}
    for name, e in eigs.items():
        V = e.vectors.double().cpu()
        if V.shape[0] != p * p:
            raise ValueError(f"eigenvectors of {name!r} have {V.shape[0]} rows; the p² = {p * p} pairs were expected")
        scores[name] = {fam: [subspaces.alignment(V[:, b], F) for b in blocks] for fam, F in features.items()}
        ones = torch.ones(p * p, 1, dtype=torch.float64)
        constant[name] = [subspaces.alignment(V[:, b], ones, centre_features=False) for b in blocks]
    return BlockScores(keys, blocks, scores, constant, {n: e.values.cpu() for n, e in eigs.items()})


def short_names(scores: BlockScores) -> BlockScores:
    """Return ``scores`` with layer-0 parameter names shortened ("0.W_Q" → "W_Q"), as in the paper's tables."""
    rename = lambda n: n[2:] if n.startswith("0.") else n  # noqa: E731
    return BlockScores(scores.keys, scores.blocks, {rename(n): v for n, v in scores.scores.items()},
                       {rename(n): v for n, v in scores.constant.items()},
                       {rename(n): v for n, v in scores.eigenvalues.items()})


def measure(model, m: int, tokens: Tensor, p: int, top_k: int = 40, keys: Sequence[int] | None = None,
            state: Mapping[str, Tensor] | None = None) -> BlockScores:
    """Return chapter 06's measurement of model m: key frequencies (from W_E unless given) and every parameter's blocks."""
    if keys is None:
        W_E = (state["params.W_E"][m] if state is not None else model.p("W_E")[m]).detach().cpu()[:p]
        keys = fourier.key_frequencies(W_E)
    return short_names(score_blocks(entk.parameter_eigenpairs(model, m, tokens, top_k, state=state), p, keys))




# --------------------------------------------------------------------------------------------
# The generalising checkpoint, the authors' record, the claims and the input checks


def first_logged_epochs(run: AuthorsRun, name: str = "test_acc", level: float = GENERALISED) -> list[int | None]:
    """Return, per model, the first of the authors' logged epochs at which the history curve ``name`` is ≥ ``level``
    (by default the generalising checkpoint: held-out accuracy ≥ 0.99), None where it never is."""
    curve = run.after_epochs(name, run.log_epochs)                          # (logged epochs, M)
    first = [first_step_reaching(run.log_epochs, curve[:, m], level) for m in range(curve.shape[1])]
    return [None if e is None else int(e) for e in first]


def unembedding_sum_alignment(model, m: int, tokens: Tensor, p: int, keys: Sequence[int], state: Mapping[str, Tensor],
                              top_k: int = 40) -> float:
    """Return the alignment of the better of the paper's two blocks of W_U's eNTK with the sum features at ``keys``, on
    model m's saved ``state`` (the statistic of :meth:`BlockScores.holding` ("W_U", "sum"))."""
    eigs = entk.parameter_eigenpairs(model, m, tokens, top_k, names=["W_U"], state=state)
    return score_blocks(eigs, p, keys).holding("W_U", "sum")[1]


def checkpoint_alignment(run: AuthorsRun, tokens: Tensor, p: int, keys: Sequence[Sequence[int]], top_k: int = 40,
                         name: str = "test_acc", level: float = GENERALISED
                         ) -> tuple[list[int | None], list[float | None]]:
    """Return (epochs, alignments), one per model: its checkpoint (:func:`first_logged_epochs`, by default the first
    logged epoch at held-out accuracy ≥ 0.99) and W_U's block alignment with the sum features at its own ``keys`` there
    (:func:`unembedding_sum_alignment`); None for a model that never reaches ``level``."""
    epochs = first_logged_epochs(run, name, level)
    values = [None if e is None else unembedding_sum_alignment(
        run.model, m, tokens, p, keys[m], run.history.snapshots[(e + 1) * run.steps_per_epoch], top_k)
        for m, e in enumerate(epochs)]
    return epochs, values


def authors_record(record: Mapping | None, settings: Mapping[str, object], epochs: int) -> tuple[Mapping | None, list[str]]:
    """Return (the authors' oracle record if it applies to this run, else None; the settings that differ from theirs,
    ``epochs`` included): their record is for their settings only."""
    differs = [k for k, same in matches_authors(settings).items() if not same]
    if record is not None and epochs != record.get("epochs"):
        differs.append("epochs")
    return (record if record is not None and not differs else None), differs


#: The feature families in words, for the claims' statistics.
FAMILY_TEXT = {"sum": "a + b features cos/sin ω(a+b)", "input": "input features cos ωa + cos ωb, sin ωa + sin ωb"}
#: The models the claims over models cover, as declared before the run.
COVERS = "every model that generalises (test accuracy ≥ 0.99), blocks sized to its own key frequencies"
#: The seeds the paper shows: seed 2 (Section 4, figure 3) and seed 3 (its Table 2); every profile studies them.
PAPER_SEEDS = (2, 3)
#: The paper's printed alignments of seed 2's unembedding blocks (3.965/4 and 3.940/4).
PAPER_SEED2 = {"unembed_sum": round(3.965 / 4, 4), "unembed_input": round(3.940 / 4, 4)}
#: The per-parameter block claims over every model that generalises: id stem → (parameter, family, bar, the paper's
#: words, kind). ``paper``: the paper states the alignment of its trained model in words (Table 2, Section 4);
#: ``extension``: the unembedding's (the paper prints seed 2's numbers, the ``_seed`` rows), W_O (an output
#: projection) and the summed attention kernel, beside the paper's claim.
BLOCK_CLAIMS = {
    "unembed_sum": ("W_U", "sum", 0.95, "3.965/4 (seed 2)", "extension"),
    "unembed_input": ("W_U", "input", 0.95, "3.940/4 (seed 2)", "extension"),
    "mlp_in_input": ("W_in", "input", 0.9, "aligned", "paper"),
    "mlp_out_sum": ("W_out", "sum", 0.9, "aligned", "paper"),
    "mlp_out_input": ("W_out", "input", 0.9, "aligned", "paper"),
    "attention_W_Q_input": ("W_Q", "input", 0.9, "aligned (the attention's input weights)", "paper"),
    "attention_W_K_input": ("W_K", "input", 0.9, "aligned (the attention's input weights)", "paper"),
    "attention_W_V_input": ("W_V", "input", 0.9, "aligned (the attention's input weights)", "paper"),
    "attention_W_O_input": ("W_O", "input", 0.9, None, "extension"),
}


def _block_statistic(param: str, family: str) -> str:
    """Return the statistic of a block claim in words."""
    label = f"{param} (the attention's output projection, not one of its input weights)" if param == "W_O" else param
    return (f"{label}'s eNTK: alignment of the better of the paper's two eigenvector blocks with the {FAMILY_TEXT[family]} "
            "at the model's keys")


def seed_specs(seed: int) -> tuple[Spec, ...]:
    """Return the declared claims of one seed studied in full (``seeds``): the paper's kind for its seeds 2 and 3
    (the paper's markers and numbers are seed 2's), ``extension`` for another seed."""
    own = "paper" if seed in PAPER_SEEDS else "extension"
    tag = f"_seed{seed}"
    paper_keys = [1, 12] if seed == 2 else None
    return (
        Spec("final_test_accuracy" + tag, "precondition", f"seed {seed}: held-out accuracy after training",
             at_least(GENERALISED), paper=1.0 if seed == 2 else None),
        Spec("key_frequencies" + tag, "check", f"seed {seed}: how many of the key frequencies found from the embedding "
             "differ from the authors' code's on the same seed", equal_to(0), paper=paper_keys, no_null="provenance"),
        Spec("unembed_sum_alignment" + tag, own, f"seed {seed}: W_U's eNTK better block vs the {FAMILY_TEXT['sum']}",
             at_least(0.95), paper=PAPER_SEED2["unembed_sum"] if seed == 2 else None),
        Spec("unembed_input_alignment" + tag, own, f"seed {seed}: W_U's eNTK better block vs the {FAMILY_TEXT['input']}",
             at_least(0.95), paper=PAPER_SEED2["unembed_input"] if seed == 2 else None),
        Spec("alignment_peak_epoch" + tag, "paper" if seed == 2 else "extension",
             f"seed {seed}: epoch where the derivative of W_U's block alignment with the a + b features peaks "
             "(the paper's marker: epoch 150)", between(90, 210), paper=150 if seed == 2 else None),
        Spec("grokking_epochs" + tag, own, f"seed {seed}: first logged epochs of held-out accuracy ≥ 0.5 / ≥ 0.99",
             paper="150 / 1900 (figure 3 markers)" if seed == 2 else None),
        Spec("training_log_match" + tag, "check", f"seed {seed}: largest difference of the epoch train loss from the "
             "authors' code's over their early logged epochs", at_most(1e-4)),
    )


#: Every claim the notebook records, in its order (the ``_seed`` rows for the seeds every profile studies, 2 and 3).
CLAIMS: tuple[Spec, ...] = (
    *(Spec(f"{name}_alignment", kind, _block_statistic(param, family), at_least(bar), paper=paper, covers=COVERS)
      for name, (param, family, bar, paper, kind) in BLOCK_CLAIMS.items()),
    Spec("attention_summed_input_alignment", "extension",
         "W_Q + W_K + W_V + W_O summed into one kernel (beside the paper's per-weight claim): alignment of the better "
         f"of its two blocks with the {FAMILY_TEXT['input']} at the keys", at_least(0.9), covers=COVERS),
    Spec("key_frequency_sparsity", "paper", "share of the embedding's non-constant Fourier power at the key frequencies",
         at_least(0.8), paper="sparse", covers=COVERS),
    Spec("alignment_at_init", "check", "W_U's block alignment with the a + b features at initialisation, as a fraction "
         "of the same model's after training", at_most(0.3), paper="weak at initialisation", covers=COVERS),
    *(spec for seed in PAPER_SEEDS for spec in seed_specs(seed)),
)
_SPEC = declared(CLAIMS)


def _spec(claim_id: str, seed: int | None = None) -> Spec:
    """Return the declared claim ``claim_id`` (a seed's claims for a seed the profiles do not study: :func:`seed_specs`)."""
    if claim_id in _SPEC:
        return _SPEC[claim_id]
    return {s.id: s for s in seed_specs(seed)}[claim_id]


@dataclass(frozen=True)
class Findings:
    """What chapter 06's claims are decided on: per model (``all_seeds``: ``seeds`` first, studied in full, then
    ``extra_seeds``) its final and initial test accuracy, keys, block scores after training and at initialisation, the
    summed attention kernel's scores ({"sum": [..], "input": [..]}) both ways, the random-block null ({family: 99th
    percentile}), the key frequencies' share of the embedding's power and the initial embedding's null, the generalising
    checkpoint's W_U alignment with the sum features (None: never reached); per studied seed (``seeds``) the epoch of
    the alignment's steepest rise and of the test accuracy's, its first logged epochs at test accuracy ≥ 0.5 and 0.99
    ({0.5: e, 0.99: e}), and the log match ({seed: value}); the authors' record (None when it does not apply) and the
    settings that differ from theirs."""

    all_seeds: Sequence[int]
    seeds: Sequence[int]
    epochs: int
    p: int
    test_acc: Sequence[float]
    test_acc_init: Sequence[float]
    keys: Sequence[Sequence[int]]
    results: Sequence[BlockScores]
    results_init: Sequence[BlockScores]
    grouped: Sequence[Mapping[str, Sequence[float]]]
    grouped_init: Sequence[Mapping[str, Sequence[float]]]
    random_block: Sequence[Mapping[str, float]]
    null_samples: int
    key_share: Sequence[float]
    null_share: Sequence[float]
    checkpoint_sum: Sequence[float | None]
    checkpoint_epochs: Sequence[int | None]
    peak_epochs: Sequence[float]
    test_rise_epochs: Sequence[float]
    dynamics_every_epochs: int
    milestones: Sequence[Mapping[float, float | None]]
    authors: Mapping | None = None
    differs: Sequence[str] = ()
    log_gap: Mapping[int, float] = field(default_factory=dict)
    null_gap: Mapping[int, float] = field(default_factory=dict)
    horizon: Mapping[int, int | None] = field(default_factory=dict)
    through: Mapping[int, int] = field(default_factory=dict)
    log_match_through: int = 60
    rounding_tol: float = 1e-5

    @property
    def generalisers(self) -> list[int]:
        """The indices of the models whose final test accuracy is ≥ 0.99."""
        return [i for i, acc in enumerate(self.test_acc) if acc >= GENERALISED]

    def on_record(self, seed: int) -> Mapping | None:
        """The authors' run of ``seed`` in their record, None without one."""
        return (self.authors or {}).get("seeds", {}).get(str(seed))

    def authors_value(self, seed: int, param: str, family: str) -> tuple[int, float] | None:
        """(block, value) of the authors' code's better block on ``seed``, None without their run."""
        record = self.on_record(seed)
        if record is None:
            return None
        values = record["authors"][param][family]
        j = int(np.argmax(values))
        return j, round(values[j], 4)

    def no_record(self, seed: int) -> str:
        """Why the authors' run of ``seed`` is not compared: their settings differ, or their record lacks the seed."""
        if self.differs:
            return (f"this run's {', '.join(self.differs)} differ from the authors' run, whose record "
                    "(results/oracle/06.json) holds their settings only; a run at their settings decides it")
        return ("the authors' record (results/oracle/06.json) holds no run of seed "
                f"{seed}; scripts/oracle/mi_ntk_06.py with that seed decides it")


def _rounded(values: Sequence[float | None]) -> list[float | None]:
    """Return values rounded to 4 digits (None kept)."""
    return [None if v is None else round(float(v), 4) for v in values]


def _over_generalisers(spec: Spec, f: Findings, values: Sequence[float], nulls: Sequence[tuple[str, Sequence]],
                       *, extra_nulls: Sequence[Null] = (), statistic: str | None = None, authors=None,
                       why_none: str | None = None) -> Claim:
    """Return claim ``spec`` over every model that generalises: ``values`` and each null's values one per model (a
    null's None dropped), ``extra_nulls`` on other models; undecided when no model generalises, or ``why_none`` (a
    fair null this run lacks)."""
    covered = f.generalisers
    left_out = [f.all_seeds[i] for i in range(len(f.all_seeds)) if i not in covered]
    statistic = (statistic or spec.statistic) + (f" (not covered, as they did not generalise: seeds "
                                                 f"{', '.join(map(str, left_out))})" if left_out and covered else "")
    if not covered:
        return decide(spec, per_model(f.all_seeds, _rounded(values), label=""), statistic=statistic,
                      null=[Null(what, per_model(f.all_seeds, _rounded(v), label="")) for what, v in nulls]
                      + list(extra_nulls),
                      undecided="no model of this run generalised (test accuracy ≥ 0.99), so there is no model to "
                                "test; a run with more seeds or epochs decides it", authors=authors)
    keep = [f.all_seeds[i] for i in covered]
    null = [Null(what, {k: x for k, x in per_model(keep, _rounded([v[i] for i in covered]), label="").items()
                        if x is not None}) for what, v in nulls] + list(extra_nulls)
    return decide(spec, per_model(keep, _rounded([values[i] for i in covered]), label=""), null=null,
                  statistic=statistic, undecided=why_none, authors=authors)


def claims(f: Findings) -> list[Claim]:
    """Return chapter 06's claims decided on ``f``, in the notebook's order: the block alignments, the summed attention
    kernel, the key frequencies' sparsity and the alignment at initialisation over every model that generalises, then
    per studied seed its accuracy, keys, unembedding alignments, the epoch of the alignment's rise, its grokking epochs
    and its training log against the authors'."""
    random_what = f"a random block of 2K + 1 directions (99th percentile of {f.null_samples})"
    init_what = "the same models at initialisation"
    out = []
    for name, (param, family, _, _, _) in BLOCK_CLAIMS.items():
        theirs = {str(s): f.authors_value(s, param, family)[1] for s in f.all_seeds if f.on_record(s)}
        out.append(_over_generalisers(
            _SPEC[f"{name}_alignment"], f, [r.holding(param, family)[1] for r in f.results],
            [(init_what, [r.holding(param, family)[1] for r in f.results_init]),
             (random_what, [rb[family] for rb in f.random_block])], authors=theirs or None))
    out.append(_over_generalisers(
        _SPEC["attention_summed_input_alignment"], f, [max(g["input"]) for g in f.grouped],
        [(init_what, [max(g["input"]) for g in f.grouped_init]), (random_what, [rb["input"] for rb in f.random_block])]))
    failed = [i for i in range(len(f.all_seeds)) if i not in f.generalisers]
    shares = Null("the models of this run that did not generalise (test accuracy < 0.99), the share of their own key "
                  "frequencies", per_model([f.all_seeds[i] for i in failed], _rounded([f.key_share[i] for i in failed]),
                                           label=""))
    out.append(_over_generalisers(
        _SPEC["key_frequency_sparsity"], f, f.key_share,
        [("the initial embedding of the same seed, its as many strongest frequencies", f.null_share)],
        extra_nulls=[shares] if failed else [],
        why_none=None if failed else "the key frequencies are those above the largest drop of the sorted powers, so "
        "their share is high wherever there is a drop; the fair null, the same share in a model of this run that did "
        "not generalise, is missing, as every model generalised (a run whose extra_seeds include models that do not "
        "generalise, e.g. the paper profile, decides it)"))
    final_sum = [r.holding("W_U", "sum")[1] for r in f.results]
    init_sum = [r.holding("W_U", "sum")[1] for r in f.results_init]
    checkpoint = [None if c is None else c / s for c, s in zip(f.checkpoint_sum, final_sum)]
    reached = [f.checkpoint_sum[i] is not None for i in f.generalisers]
    out.append(_over_generalisers(
        _SPEC["alignment_at_init"], f, [a / s for a, s in zip(init_sum, final_sum)],
        [("the same models at their generalising checkpoint (the first logged epoch with held-out accuracy ≥ 0.99), "
          "as a fraction of the same model's after training", checkpoint)],
        why_none=None if all(reached) else "a model that generalises reached held-out accuracy ≥ 0.99 at no logged "
        "epoch, only at the end, so its generalising checkpoint, the null, is missing"))
    for i, seed in enumerate(f.seeds):
        out += _seed_claims(f, i, seed)
    return out


#: The widest snapshot interval (epochs) at which the epoch of the alignment's rise is decided: the bound's tolerance
#: about the paper's marker (epoch 150 ± 60; the paper's curve has a point every 20 epochs).
PEAK_TOLERANCE = 60


def _seed_claims(f: Findings, i: int, seed: int) -> list[Claim]:
    """Return the claims of seed ``seed`` (model i, studied in full), in the notebook's order."""
    tag, r, a = f"_seed{seed}", f.results[i], f.on_record(seed)
    out = [decide(_spec("final_test_accuracy" + tag, seed), round(float(f.test_acc[i]), 4),
                  statistic=f"seed {seed}: held-out accuracy after {f.epochs} epochs",
                  null=Null("the same model at initialisation", round(float(f.test_acc_init[i]), 4)),
                  authors=a["final_test_acc"] if a else None)]
    unfit = (None if out[0].verdict == "pass" else
             f"seed {seed} did not generalise ({out[0].id}: held-out accuracy {out[0].measured} after {f.epochs} "
             "epochs, its precondition), and the claim is about a model that did; a longer run decides it")
    keys = [int(k) for k in f.keys[i]]
    paper_keys = [1, 12] if f.p == 29 and seed == 2 else None
    spec = _spec("key_frequencies" + tag, seed)
    if a:
        out.append(decide(spec, len(set(keys) ^ set(a["keys"])), paper=paper_keys, authors=a["keys"],
                          statistic=f"seed {seed}: key frequencies found from the embedding, {keys}: how many differ "
                                    f"from the authors' code's on the same seed, {a['keys']}"))
    else:
        out.append(decide(spec, None, paper=paper_keys, undecided=f.no_record(seed),
                          statistic=f"seed {seed}: key frequencies found from the embedding, {keys}: how many differ "
                                    "from the authors' code's on the same seed"))
    for name in ("unembed_sum", "unembed_input"):                        # the numbers the paper prints
        param, family = BLOCK_CLAIMS[name][:2]
        j, value = r.holding(param, family)
        b, theirs = r.blocks[j], f.authors_value(seed, param, family)
        out.append(decide(
            _spec(f"{name}_alignment" + tag, seed), round(value, 4), undecided=unfit,
            statistic=f"seed {seed}: W_U's eNTK block {j} (eigenvectors {b[0]}…{b[-1]}) vs the {FAMILY_TEXT[family]}"
                      + (f" (authors' code: block {theirs[0]})" if theirs else ""),
            null=[Null("the same model at initialisation", round(f.results_init[i].holding(param, family)[1], 4)),
                  Null(f"a random block of 2K + 1 directions (99th percentile of {f.null_samples})",
                       round(f.random_block[i][family], 4))],
            authors=theirs[1] if theirs else None))
    every = f.dynamics_every_epochs
    undecided = unfit
    if undecided is None and f.differs:
        undecided = (f"the paper's marker (epoch 150) is an epoch of the authors' recipe, and this run's "
                     f"{', '.join(f.differs)} differ from theirs; a run at their settings decides it")
    elif undecided is None and every > PEAK_TOLERANCE:
        undecided = (f"snapshots every {every} epochs place the peak only to within {every} epochs, more than the "
                     f"bound's tolerance of {PEAK_TOLERANCE} (the paper's curve has a point every 20 epochs); "
                     f"dynamics_every_epochs ≤ {PEAK_TOLERANCE}, e.g. the paper profile's 20, decides it")
    out.append(decide(
        _spec("alignment_peak_epoch" + tag, seed), float(f.peak_epochs[i]), undecided=undecided,
        statistic=f"seed {seed}: epoch where the derivative of W_U's block alignment with the a + b features peaks "
                  f"(snapshots every {every} epochs; the paper's marker: epoch 150)",
        null=Null("the epoch where the same model's held-out accuracy rises fastest (same snapshots)",
                  float(f.test_rise_epochs[i]))))
    m = f.milestones[i]
    out.append(reported(
        _spec("grokking_epochs" + tag, seed), {"test_50": m[0.5], "test_99": m[0.99]},
        statistic=f"seed {seed}: first logged epochs of held-out accuracy ≥ 0.5 / ≥ 0.99, beside the authors' code's "
                  "run of the same seed on this machine (past epoch ~40 the two trainings are two draws of the same "
                  "model, so their epochs differ by more than rounding)",
        authors={"test_50": a["first_epoch_test_acc_50"], "test_99": a["first_epoch_test_acc_99"]} if a else None))
    null_what = "the same seed trained with corekit's batch order instead of the authors'"
    spec = _spec("training_log_match" + tag, seed)
    if a:
        horizon = f.horizon.get(seed)
        out.append(decide(
            spec, f.log_gap[seed], null=Null(null_what, f.null_gap[seed]),
            statistic=f"seed {seed}: largest difference of the epoch train loss from the authors' code's over their "
                      f"logged epochs through epoch {f.through[seed]}, the last (≤ {f.log_match_through}) up to which "
                      f"this run stays within {f.rounding_tol:g} of its float64 rerun",
            undecided=None if horizon is not None else
            f"float32 rounding moves seed {seed}'s run by more than {f.rounding_tol:g} from its float64 rerun already "
            "at epoch 0, so no logged epoch can be compared at this tolerance"))
    else:
        out.append(decide(spec, None, null=Null(null_what, None), undecided=f.no_record(seed)))
    return out


def check_inputs(params: dict) -> None:
    """Check chapter 06's parameters: distinct seeds (extra_seeds integers >= 0, its default [] declaring no item
    type), snapshots that fit the run and the log, the kernels' size."""
    nb = "06_entk_transformer_modular"
    seeds, extra = params["seeds"], params["extra_seeds"]
    heads_divide(nb, params)
    distinct(nb, "seeds", seeds)                            # a repeat inside seeds is named as seeds, not extra_seeds
    seed_items(nb, "extra_seeds", extra, "a list of seeds, integers >= 0 (each trains one more model)")
    require(len(set(seeds + extra)) == len(seeds + extra), nb, "extra_seeds", extra, f"seeds not already in seeds = {seeds}")
    epochs, every, log_every = params["epochs"], params["dynamics_every_epochs"], params["log_every_epochs"]
    require(epochs > every, nb, "epochs", epochs,
            f"more than dynamics_every_epochs = {every} (the dynamics need two snapshots)")
    require(every % log_every == 0, nb, "dynamics_every_epochs", every, f"a multiple of log_every_epochs = {log_every}")
    p, models = params["p"], len(seeds) + len(extra)
    weights = transformer_parameters(p + 1, 3, params["d_model"], params["d_mlp"], 1, p)
    snapshots = epochs // log_every + 1
    fits(nb, params, [
        kernels(4, p * p, "p", "the attention kernels W_Q, W_K, W_V, W_O of a model"),
        Need(f"the {snapshots:,} parameter snapshots, every model", 4 * models * snapshots * weights, models * weights,
             "epochs"),
    ])
