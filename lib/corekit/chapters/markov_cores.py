"""Chapter 01 (Markov cores): validate, identify and compare the next-state cores of Markov-chain transformers.

Each function takes the :class:`~corekit.ace.NextTokenACE` of one ensemble of M seeds (from
:func:`corekit.ace.next_token_ace`) and returns plain per-seed (or per-pair) values for the notebook's
prints, plots and claims: the ablations at the energy rank (:func:`validate_at_energy_rank`), the
transition operator fitted on core coordinates (:func:`identify_operator`), the states of a chain
that share a row of T (:func:`shared_row_analysis`), and the seeds against each other
(:func:`weight_cosines`, :func:`compare_seeds`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from corekit import ace, subspaces
from corekit.ace import NextTokenACE
from corekit.tasks import markov
from corekit.train import Dataset


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
