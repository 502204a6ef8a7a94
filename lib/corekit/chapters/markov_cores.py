"""Chapter 01 (Markov cores): validate, identify and compare the next-state cores of Markov-chain transformers.

Each function takes the :class:`~corekit.ace.NextTokenACE` of one ensemble of M seeds (from
:func:`corekit.ace.next_token_ace`) and returns plain per-seed (or per-pair) values for the notebook's
prints, plots and claims: the ablations at the energy rank (:func:`validate_at_energy_rank`), the
transition operator fitted on core coordinates (:func:`identify_operator`), the states of a chain
that share a row of T (:func:`shared_row_analysis`), and the seeds against each other
(:func:`weight_cosines`, :func:`compare_seeds`).

The chapter's claims are declared in :data:`CLAIMS` and decided by :func:`claims` on the :class:`Findings` of a run;
:func:`check_inputs` holds the rules that tie the parameters together.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np
import torch
from torch import Tensor

from corekit import ace, subspaces
from corekit.ace import NextTokenACE
from corekit.inputs import Need, distinct, fits, heads_divide, require, row_stochastic
from corekit.tasks import markov
from corekit.train import Dataset
from corekit.verdicts import (
    Bound,
    Claim,
    Null,
    Spec,
    at_least,
    at_most,
    decide,
    decide_over,
    declared,
    equal_to,
    per_model,
    reported,
)

NOTEBOOK = "01_markov_cores"


def chain_datasets(T: np.ndarray, n_train: int, n_test: int, seq_len: int, seed: int) -> tuple[Dataset, Dataset]:
    """Return (train, test) next-state Datasets of T: n sequences of seq_len − 1 inputs (n, seq_len − 1) and targets.

    The training sequences are sampled with ``seed``, the test sequences with ``seed + 1``.
    """
    train_seq = markov.sample_sequences(T, n_train, seq_len, seed=seed)
    test_seq = markov.sample_sequences(T, n_test, seq_len, seed=seed + 1)
    return Dataset(train_seq[:, :-1], train_seq[:, 1:]), Dataset(test_seq[:, :-1], test_seq[:, 1:])


def fit_ranks(res: NextTokenACE, rank: int | None = None) -> list[int]:
    """Return the rank per seed (M,): each model's own energy rank, or ``rank`` for every model when given."""
    return [rank if rank is not None else int(r) for r in res.rank]


def validate_at_energy_rank(res: NextTokenACE, floor: float) -> dict:
    """Return the held-out ablations of every model at its own energy rank, and its sufficient / necessary ranks.

    Keys: ``kept`` and ``removed`` (M,) the keep-only and remove accuracies at the energy rank, ``ratio``
    (M,) keep-only / intact accuracy (np.ndarray each), ``sufficient`` (list of M ints, within 1e-3 of
    the model's accuracy) and ``necessary`` (list of M ints, removal at ``floor`` or below; −1 where none).
    """
    rank_at = res.ranks.index
    idx = torch.tensor([rank_at(int(r)) for r in res.rank])
    keep = res.keep_acc.gather(1, idx[:, None].to(res.keep_acc.device))[:, 0]
    removed = res.remove_acc.gather(1, idx[:, None].to(res.remove_acc.device))[:, 0]
    return dict(kept=keep.double().cpu().numpy(), ratio=(keep / res.base_acc).double().cpu().numpy(),
                removed=removed.double().cpu().numpy(),
                sufficient=ace.sufficient_rank(res.keep_acc, res.base_acc, res.ranks).tolist(),
                necessary=ace.necessary_rank(res.remove_acc, floor, res.ranks).tolist())


def identify_operator(res: NextTokenACE, T: np.ndarray, rank: int | None = None) -> dict:
    """Return the operator z_{t+1} ≈ A z_t of every model fitted on its training core coordinates, scored on held-out ones.

    Each model is fitted at its own energy rank, or at ``rank`` when given (:func:`fit_ranks`). Keys:
    ``eigs`` (M arrays (r,), eig(A)), ``err`` (M floats, max abs(eig(A) − eig(T)) against
    :func:`corekit.tasks.markov.core_eigenvalues` of rank r), ``r2`` (M floats, :func:`corekit.ace.operator_r2`
    on the test sequences) and ``r2_ratio`` (np.ndarray (M,), r2 / :func:`corekit.tasks.markov.oracle_r2`).
    """
    fit = dict(eigs=[], err=[], r2=[])
    for m, r in enumerate(fit_ranks(res, rank)):
        A = ace.fit_transition_operator(*ace.consecutive_pairs(res.coordinates("train", r)[m:m + 1]))
        fit["eigs"].append(torch.linalg.eigvals(A[0]).cpu().numpy())
        fit["err"].append(ace.eigenvalue_error(fit["eigs"][-1], markov.core_eigenvalues(T, r)))
        fit["r2"].append(float(ace.operator_r2(*ace.consecutive_pairs(res.coordinates("test", r)[m:m + 1]), A)[0]))
    fit["r2_ratio"] = np.array(fit["r2"]) / markov.oracle_r2(T)
    return fit


def shared_rows(T: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Return the row class (K,) of each state (equal rows of T, to 12 decimals, share one) and the pairs a < b sharing one."""
    K = T.shape[0]
    row_of = np.unique(T.round(12), axis=0, return_inverse=True)[1].ravel()
    return row_of, [(a, b) for a in range(K) for b in range(a + 1, K) if row_of[a] == row_of[b]]


@dataclass
class SharedRows:
    """Result of :func:`shared_row_analysis` for M models of a K-state chain.

    ``row_of`` (K,) and ``shared`` as :func:`shared_rows`; ``distances`` M tensors (K, K), the whitened
    distances between the states' mean core coordinates (each model at its energy rank); ``shared_distance``
    (M floats, the largest over shared pairs, nan when none) and ``apart_distance`` (M floats, the largest
    between states with different rows); ``shares`` (M, K, K), row k the fractions of held-out positions at
    state k that each next state is predicted for, with the core removed.
    """

    row_of: np.ndarray
    shared: list[tuple[int, int]]
    distances: list[Tensor]
    shared_distance: list[float]
    apart_distance: list[float]
    shares: Tensor


def removed_core_predictions(model, res: NextTokenACE) -> Tensor:
    """Return the predicted next state (M, N'·T) of every model on the held-out activations with its core removed."""
    with torch.no_grad():
        removed = ace.remove(res.h_test.flatten(1, 2), res.core.q(res.rank), res.core.mean)
        return model.unembed(removed.float()).argmax(-1)


def shared_row_analysis(model, res: NextTokenACE, T: np.ndarray, test_x: Tensor) -> SharedRows:
    """Return whether the states that share a row of T are merged in the cores (distances) and what removal leaves.

    ``test_x`` (N', T) are the held-out input states that ``res.h_test`` was computed on.
    """
    K = T.shape[0]
    row_of, shared = shared_rows(T)
    x_test = test_x.flatten().to(res.h_test.device)
    predicted = removed_core_predictions(model, res)                                  # (M, N'·T)
    distances, shared_distance, apart_distance, shares = [], [], [], []
    for m in range(predicted.shape[0]):
        dist = subspaces.class_mean_distances(res.coordinates("test", int(res.rank[m]))[m].flatten(0, 1), x_test,
                                              list(range(K)))
        distances.append(dist)
        apart_distance.append(max(float(dist[a, b]) for a in range(K) for b in range(a + 1, K) if row_of[a] != row_of[b]))
        shared_distance.append(max((float(dist[a, b]) for a, b in shared), default=float("nan")))
        counts = [torch.bincount(predicted[m][x_test == k], minlength=K).double() for k in range(K)]
        shares.append(torch.stack([share / share.sum() for share in counts]))
    return SharedRows(row_of=row_of, shared=shared, distances=distances, shared_distance=shared_distance,
                      apart_distance=apart_distance, shares=torch.stack(shares))


def weight_cosines(trained, untrained) -> dict:
    """Return the cosines of the seeds' flattened weights (np.ndarray each).

    Keys: ``trained`` and ``init`` (M, M) between the seeds of each ensemble, ``self`` (M,) the trained
    diagonal (each model against itself), ``own_init`` (M,) each trained model against its own initialisation.
    """
    M = trained.weight_matrices().shape[0]
    weight_cos = subspaces.cosine_matrix(trained.weight_matrices()).cpu().numpy()
    weight_cos_init = subspaces.cosine_matrix(untrained.weight_matrices()).cpu().numpy()
    both = subspaces.cosine_matrix(torch.cat([trained.weight_matrices(), untrained.weight_matrices()]))
    return dict(trained=weight_cos, init=weight_cos_init, self=np.diag(weight_cos),
                own_init=np.diag(both[:M, M:].cpu().numpy()))


def compare_seeds(res: NextTokenACE, ranks: list[int]) -> dict:
    """Return every pair of seeds' core overlaps and canonical correlations, each core at its rank in ``ranks`` (M,).

    Keys: ``overlap`` (M, M) projector overlaps and ``cca_min`` (M, M) the smallest top-r canonical
    correlation of the held-out core coordinates (ones on the diagonals); ``cca_all`` every pair's canonical
    correlations, concatenated; for each pair, ``random_q999`` the 0.999 quantile of 4000 random subspace
    pairs' overlaps and ``percentile`` (M, M) the fraction of them below the pair's overlap; ``self_percentile``
    (M floats) the same for each core against itself; ``random_mean`` the mean √(r_a r_b)/D over the pairs.
    """
    M, D = res.core.basis.shape[0], res.core.basis.shape[-2]
    pairs = [(a, b) for a in range(M) for b in range(a + 1, M)]
    z = res.coordinates("test", max(ranks)).flatten(1, 2)
    overlap, cca_min = np.eye(M), np.eye(M)
    cca_all, random_q999, percentile = [], [], np.ones((M, M))
    for a, b in pairs:
        ra, rb = ranks[a], ranks[b]
        overlap[a, b] = overlap[b, a] = float(subspaces.projector_overlap(res.core.q(ra)[a], res.core.q(rb)[b]))
        cc = subspaces.cca(z[a, :, :ra], z[b, :, :rb])
        cca_min[a, b] = cca_min[b, a] = float(cc.min())
        cca_all.extend(cc.tolist())
        chance = subspaces.random_projector_overlap(D, ra, rb)
        random_q999.append(float(chance.quantile(0.999)))
        percentile[a, b] = percentile[b, a] = float((chance < overlap[a, b]).double().mean())
    self_percentile = [float((subspaces.random_projector_overlap(D, r, r) < float(subspaces.projector_overlap(
        res.core.q(r)[m], res.core.q(r)[m]))).double().mean()) for m, r in enumerate(ranks)]
    return dict(overlap=overlap, cca_min=cca_min, cca_all=cca_all, random_q999=random_q999,
                percentile=percentile, self_percentile=self_percentile,
                random_mean=float(np.mean([np.sqrt(ranks[a] * ranks[b]) / D for a, b in pairs])))


# --------------------------------------------------------------------------------------------
# The parameters' rules


def check_inputs(params: dict) -> None:
    """Return None, or refuse chapter 01's parameters: distinct seeds, a batch within the training set, heads that
    divide d_model, two valid chains, the size (the training and test sets, each read by the ACE in one pass)."""
    nb = NOTEBOOK
    distinct(nb, "seeds", params["seeds"], "distinct seeds (each model is compared with the others)")
    require(params["batch_size"] <= params["n_train"], nb, "batch_size", params["batch_size"],
            f"at most n_train = {params['n_train']} (a larger batch trains 0 steps)")
    m, seq_len, d_model, n_heads = len(params["seeds"]), params["seq_len"], params["d_model"], params["n_heads"]
    heads_divide(nb, params)
    for name in ("transition", "transition_deficient"):
        row_stochastic(nb, name, params[name])
    n_train, n_test = params["n_train"], params["n_test"]
    stream, test_stream = m * n_train * seq_len * d_model, m * n_test * seq_len * d_model
    scores = m * params["batch_size"] * n_heads * seq_len ** 2
    every, largest = max((n_test, "test"), (n_train, "training"))    # the ACE reads each set in one pass
    all_scores = m * every * n_heads * seq_len ** 2
    tokens = max(n_train, n_test) * seq_len
    fits(nb, params, [
        Need("the residual stream at every position of the training sequences, every model", 4 * stream, stream,
             "n_train"),
        Need("the residual stream at every position of the test sequences, every model", 4 * test_stream, test_stream,
             "n_test"),
        Need("the attention scores of a training batch", 4 * scores, scores, "seq_len"),
        Need(f"the attention scores of every {largest} sequence at once, every model", 4 * all_scores, all_scores,
             "seq_len" if seq_len ** 2 >= every else f"n_{'test' if largest == 'test' else 'train'}"),
        Need("the sampled sequences of both chains (int64)", 8 * 2 * (n_train + n_test) * seq_len, tokens,
             "n_test" if n_test >= n_train else "n_train"),
    ])


# --------------------------------------------------------------------------------------------
# The claims

#: The models a claim over seeds covers, and over pairs of seeds.
EVERY_SEED, EVERY_PAIR = "the seeds the profile trains", "the pairs of seeds the profile trains"
#: The controls of a chain (ensemble "CHAIN, CONTROL"), as each null names them.
CONTROLS = {"untrained": "the same seeds untrained", "shuffled": "the same seeds trained on shuffled targets"}


def _chain_claims(sfx: str, kind: str) -> tuple[Spec, ...]:
    """Return the specs of the claims both chains have, with id suffix ``sfx`` and ``kind`` for the chain's claims."""
    return (
        Spec(f"model_accuracy{sfx}", "precondition", "held-out next-state accuracy, against the Bayes accuracy",
             equal_to(0, 0.01), covers=EVERY_SEED),
        Spec(f"core_rank{sfx}", kind, "core rank by energy, against rank(T − 1πᵀ)", equal_to(0), covers=EVERY_SEED),
        Spec(f"keep_only_ratio{sfx}", kind, "held-out keep-only accuracy at the core rank / model accuracy",
             at_least(0.99), paper="≈ 1", covers=EVERY_SEED),
        Spec(f"remove_only_accuracy{sfx}", kind, "held-out accuracy with the core removed, against the stationary "
             "guess + 0.05", at_most(0.05), covers=EVERY_SEED),
    )


CLAIMS: tuple[Spec, ...] = (
    *_chain_claims("", "paper"),
    Spec("weight_cosine_max", "paper", "largest |cos| between the flattened weights of two seeds", at_most(0.06),
         paper="≈ 0 (authors' runs 0.029–0.052)"),
    Spec("weight_cosine_init", "extension", "largest |cos| between the seeds' independent random initialisations"),
    Spec("projector_overlap", "paper", "percentile of the pair's core projector overlap among 4000 pairs of random "
         "subspaces of the same ranks", at_most(0.999), paper="0.02–0.04", covers=EVERY_PAIR),
    Spec("projector_overlap_random", "paper", "mean overlap of random subspaces of the cores' ranks, √(r_a r_b)/D",
         paper=round(3 / 64, 4)),
    Spec("cca_min", "paper", "smallest top-r canonical correlation of the pair's core coordinates", at_least(0.9),
         paper="0.92–0.999", covers=EVERY_PAIR),
    Spec("cca_mean", "paper", "mean top-r canonical correlation over all pairs of seeds", at_least(0.97),
         paper="≈ 0.99 (authors' runs: mean 0.980)"),
    Spec("eig_max_error", "paper", "max |eig(A) − eig(T)| of the operator fitted on core coordinates", at_most(0.03),
         paper="≤ 0.02", covers=EVERY_SEED),
    Spec("r2_core_over_oracle", "paper", "R²_core / R²_oracle on held-out sequences", at_least(0.98), paper="> 0.98",
         covers=EVERY_SEED),
    *_chain_claims("_deficient", "extension"),
    Spec("cca_min_deficient", "extension", "smallest top-r canonical correlation of the pair's core coordinates",
         at_least(0.9), paper="0.92–0.999", covers=EVERY_PAIR),
    Spec("eig_max_error_deficient", "extension", "max |eig(A) − eig(T)| of the operator fitted on core coordinates",
         at_most(0.03), paper="≤ 0.02", covers=EVERY_SEED),
    Spec("r2_core_over_oracle_deficient", "extension", "R²_core / R²_oracle on held-out sequences", at_least(0.98),
         paper="> 0.98", covers=EVERY_SEED),
    Spec("shared_row_distance_deficient", "extension", "whitened distance between the mean core coordinates of the "
         "states that share a row (0 for the Bayes code)", paper=0),
)
_SPEC = declared(CLAIMS)


@dataclass(frozen=True)
class Findings:
    """What chapter 01's claims are decided on, keyed by ensemble ("paper", "paper, untrained", "paper, shuffled",
    "deficient", "deficient, untrained": a chain's trained models, then its controls).

    ``seeds`` the M seeds; ``chains`` {"paper": T, "deficient": T}; ``results`` {ensemble: the
    :class:`~corekit.ace.NextTokenACE` (its ``base_acc`` and ``rank``, (M,) each)}; ``validation``,
    ``identified``, ``compared`` {ensemble: what :func:`validate_at_energy_rank`, :func:`identify_operator`,
    :func:`compare_seeds` returned}; ``cosines`` :func:`weight_cosines` of the paper chain's trained models and
    their initialisations; ``merged`` :func:`shared_row_analysis` of the deficient chain's trained models.
    """

    seeds: Sequence[int]
    chains: dict[str, np.ndarray]
    results: dict[str, Any]
    validation: dict[str, dict]
    identified: dict[str, dict]
    compared: dict[str, dict]
    cosines: dict
    merged: SharedRows


def _numbers(values: Any) -> np.ndarray:
    """Return a tensor, list or array of per-seed numbers as a float64 numpy array (M,)."""
    if isinstance(values, Tensor):
        values = values.detach().double().cpu().numpy()
    return np.asarray(values, dtype=np.float64)


def _shifted(spec: Spec, by: float) -> Spec:
    """Return ``spec`` with its bound moved by ``by``: a bound declared as an offset from a property of the run's
    chain (its Bayes accuracy, rank(T − 1πᵀ) or stationary-guess accuracy), so it holds for any ``transition``."""
    bound = spec.bound
    return replace(spec, bound=Bound(bound.kind, bound.a + by, bound.b))


def learned_seeds(seeds: Sequence[int], accuracy: Sequence[float], T: np.ndarray) -> list[int]:
    """Return the seeds whose held-out ``accuracy`` is at least halfway from the stationary guess to the Bayes accuracy
    of chain ``T`` (the models the claims about trained models cover)."""
    bayes, guess = markov.bayes_accuracy(T), markov.stationary_guess_accuracy(T)
    return [s for s, a in zip(seeds, accuracy) if a >= (bayes + guess) / 2]


def unlearned_reason(seeds: Sequence[int], accuracy: Sequence[float], T: np.ndarray) -> str | None:
    """Return why claims about models that learned chain ``T`` are undecided (the seeds whose held-out ``accuracy`` is
    below halfway from the stationary guess to the Bayes accuracy), or None when every seed learned it."""
    bayes, guess = markov.bayes_accuracy(T), markov.stationary_guess_accuracy(T)
    not_learned = [f"seed {s} ({a:.3f})" for s, a in zip(seeds, accuracy) if a < (bayes + guess) / 2]
    if not not_learned:
        return None
    return (f"{', '.join(not_learned)} did not learn the chain (held-out accuracy below {(bayes + guess) / 2:.3f}, "
            f"halfway from the stationary guess {guess:.4f} to the Bayes accuracy {bayes:.4f}), and the claim is "
            "about models that did; a profile whose seeds learn the chain (the defaults, or the paper's) decides it")


def _any_passes(spec: Spec, nulls: list[Null]) -> bool:
    """Return whether a null satisfies the spec's bound (the claim is then uninformative)."""
    return any(null.passing(spec.bound) for null in nulls)


def claims(findings: Findings) -> list[Claim]:
    """Return chapter 01's claims decided on ``findings``, in the order :data:`CLAIMS` declares them (each chain's
    claims on its trained models, against the same statistic on its controls)."""
    f, seeds = findings, list(findings.seeds)
    pairs = [(a, b) for a in range(len(seeds)) for b in range(a + 1, len(seeds))]

    def by_seed(values):
        return per_model(seeds, list(values) if isinstance(values, list) else _numbers(values))

    def by_pair(matrix):
        return per_model([f"{seeds[a]}–{seeds[b]}" for a, b in pairs], [float(matrix[a][b]) for a, b in pairs], "")

    out: list[Claim] = []
    for chain, T in f.chains.items():
        sfx = "" if chain == "paper" else "_deficient"
        spec = {key: _SPEC[f"{key}{sfx}"] for key in ("model_accuracy", "core_rank", "keep_only_ratio",
                                                     "remove_only_accuracy", "cca_min", "eig_max_error",
                                                     "r2_core_over_oracle")}
        K, bayes, guess = T.shape[0], markov.bayes_accuracy(T), markov.stationary_guess_accuracy(T)
        r_exp = markov.expected_core_rank(T)
        controls = {n.split(", ", 1)[1]: n for n in f.results if n.split(", ", 1)[0] == chain and ", " in n}
        controls = {c: n for c, n in controls.items() if c in CONTROLS}
        cmp, fit, val = f.compared[chain], f.identified[chain], f.validation[chain]
        accuracy = _numbers(f.results[chain].base_acc)
        unlearned = unlearned_reason(seeds, accuracy, T)
        learned = [f"seed {s}" for s in learned_seeds(seeds, accuracy, T)]
        learned_pairs = [f"{seeds[a]}–{seeds[b]}" for a, b in pairs
                         if f"seed {seeds[a]}" in learned and f"seed {seeds[b]}" in learned]
        why_not = "did not learn the chain (held-out accuracy below halfway from the stationary guess to the Bayes accuracy)"

        def nulls(values):
            """Return one Null per control of this chain, each {model: value} from values(ensemble name)."""
            return [Null(CONTROLS[c], values(n)) for c, n in controls.items()]

        out.append(decide(_shifted(spec["model_accuracy"], bayes), by_seed(accuracy), paper=round(bayes, 4),
                          null=nulls(lambda n: by_seed(f.results[n].base_acc))))
        out.append(decide(_shifted(spec["core_rank"], r_exp), by_seed([int(r) for r in f.results[chain].rank]),
                          paper=r_exp, null=nulls(lambda n: by_seed([int(r) for r in f.results[n].rank])),
                          why=f"centred logits cap the rank at K − 1 = {K - 1}, which any model reaches"
                          if r_exp == K - 1 else None))
        out.append(decide_over(spec["keep_only_ratio"], by_seed(val["ratio"]), learned, unqualified=why_not,
                          null=nulls(lambda n: by_seed(f.validation[n]["ratio"])),
                          why="keep-only at a model's own energy rank keeps what its logits see, trained or not"))
        removed = nulls(lambda n: by_seed(f.validation[n]["removed"]))
        remove_spec = _shifted(spec["remove_only_accuracy"], guess)
        out.append(decide(remove_spec, by_seed(val["removed"]), paper=round(guess, 4), null=removed,
                          statistic=f"held-out accuracy with the core removed, against the stationary guess "
                                    f"{guess:.4f} + 0.05", undecided=unlearned,
                          why="the bound is on the accuracy left after the removal, which a model that never learned "
                              "the chain meets with its core or without it" if _any_passes(remove_spec, removed)
                          else None))
        if chain == "paper":
            out.extend(_difference_claims(f, by_seed, by_pair, unlearned))
        out.append(decide_over(spec["cca_min"], by_pair(cmp["cca_min"]), learned_pairs, unqualified=why_not,
                          null=nulls(lambda n: by_pair(f.compared[n]["cca_min"]))))
        if chain == "paper":
            out.append(decide(_SPEC["cca_mean"], float(np.mean(cmp["cca_all"])), undecided=unlearned,
                              null=nulls(lambda n: float(np.mean(f.compared[n]["cca_all"])))))
        if chain == "paper":
            apart = None
        else:
            shared = ", ".join(f"seed {s}: {d:.2f}" for s, d in zip(seeds, f.merged.shared_distance))
            apart = (f"the models keep the states that share a row at whitened distance {shared} (0 for the Bayes "
                     "code, which the oracle assumes); the bound is the paper's on its cyclic chain, and this chain "
                     "is the book's" if f.merged.shared else None)
        out.append(decide_over(spec["eig_max_error"], by_seed(fit["err"]), learned, unqualified=why_not,
                          null=nulls(lambda n: by_seed(f.identified[n]["err"])), why=apart))
        out.append(decide_over(spec["r2_core_over_oracle"], by_seed(fit["r2_ratio"]), learned, unqualified=why_not,
                          statistic=f"R²_core / R²_oracle on held-out sequences (R²_oracle = {markov.oracle_r2(T):.4f})",
                          null=nulls(lambda n: by_seed(f.identified[n]["r2_ratio"])), why=apart))
        if chain != "paper":
            distances = f.merged.apart_distance
            out.append(reported(_SPEC["shared_row_distance_deficient"], np.round(f.merged.shared_distance, 3).tolist(),
                                statistic="whitened distance between the mean core coordinates of the states that "
                                          "share a row (0 for the Bayes code; the largest between states with "
                                          f"different rows: {min(distances):.2f}–{max(distances):.2f})"))
    return out


def _difference_claims(f: Findings, by_seed, by_pair, unlearned: str | None) -> list[Claim]:
    """Return the paper chain's claims that the seeds differ (weights, core subspaces) and their reported figures,
    each against the same statistic where training is absent (the initial weights, the untrained cores)."""
    cos = f.cosines
    pair_cos = float(np.abs(subspaces.off_diagonal(cos["trained"])).max())
    init_cos = float(np.abs(subspaces.off_diagonal(cos["init"])).max())
    spec = _SPEC["weight_cosine_max"]
    weight_nulls = [Null("the same seeds' independent random initialisations (no training)", init_cos),
                    Null("each trained model against its own initialisation", by_seed(np.abs(cos["own_init"])))]
    out = [decide(spec, pair_cos, null=weight_nulls, undecided=unlearned,
                  why=f"the seeds' initial weights are as far apart ({init_cos:.4f}): random weights in this many "
                      "dimensions are near-orthogonal before training, so the claim is a premise of the comparison, "
                      "not an effect of training" if _any_passes(spec, weight_nulls[:1]) else None),
           reported(_SPEC["weight_cosine_init"], init_cos)]
    cmp, spec = f.compared["paper"], _SPEC["projector_overlap"]
    overlap_nulls = [Null(f"{CONTROLS[c]} (cores at rank(T − 1πᵀ))", by_pair(f.compared[f"paper, {c}"]["percentile"]))
                     for c in CONTROLS if f"paper, {c}" in f.compared]
    out.append(decide(spec, by_pair(cmp["percentile"]), null=overlap_nulls, undecided=unlearned,
                      statistic="percentile of the pair's core projector overlap ("
                                + ", ".join(f"{o:.4f}" for o in subspaces.off_diagonal(cmp["overlap"]))
                                + ") among 4000 pairs of random subspaces of the same ranks",
                      why="cores that no training shaped are as near-orthogonal, so the claim is a premise of the "
                          "comparison, not an effect of training" if _any_passes(spec, overlap_nulls) else None))
    out.append(reported(_SPEC["projector_overlap_random"], cmp["random_mean"]))
    return out
