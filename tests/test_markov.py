"""Markov-chain task: validation errors and closed forms against simulation and numpy references."""
import numpy as np
import pytest
import torch

from corekit.tasks import markov

PAPER_T = markov.cyclic_transition(4, 0.75)


@pytest.mark.parametrize("bad, message", [
    ([[0.5, 0.5]], "square"),
    ([[0.5, 0.4], [0.5, 0.5]], "row-stochastic"),
    ([[1.2, -0.2], [0.5, 0.5]], ">= 0"),
    ([[1.0, 0.0], [0.0, 1.0]], "irreducible"),
    ("abc", "square"),
])
def test_validate_transition_names_the_problem(bad, message):
    with pytest.raises(ValueError, match=message):
        markov.validate_transition(bad)


def test_stationary_distribution_matches_left_eigenvector():
    rng = np.random.default_rng(0)
    T = rng.random((5, 5))
    T /= T.sum(1, keepdims=True)
    w, V = np.linalg.eig(T.T)
    ref = np.real(V[:, np.argmin(np.abs(w - 1))])
    np.testing.assert_allclose(markov.stationary_distribution(T), ref / ref.sum(), atol=1e-12)


def test_paper_chain_closed_forms():
    assert markov.bayes_accuracy(PAPER_T) == pytest.approx(0.75)
    assert markov.stationary_guess_accuracy(PAPER_T) == pytest.approx(0.25)
    assert markov.expected_core_rank(PAPER_T) == 3
    np.testing.assert_allclose(np.sort_complex(markov.nontrivial_eigenvalues(PAPER_T)),
                               np.sort_complex(np.array([0.5, 0.75 - 0.25j, 0.75 + 0.25j])), atol=1e-12)


def test_core_rank_of_degenerate_chains():
    iid = np.tile([0.2, 0.3, 0.5], (3, 1))                  # next state independent of the current one
    assert markov.expected_core_rank(iid) == 0
    two_alike = np.array([[0.2, 0.3, 0.5], [0.2, 0.3, 0.5], [0.6, 0.2, 0.2]])
    assert markov.expected_core_rank(two_alike) == 1


def test_bayes_accuracy_matches_simulation():
    rng = np.random.default_rng(1)
    T = rng.random((4, 4)) ** 3
    T /= T.sum(1, keepdims=True)
    seq = markov.sample_sequences(T, 4000, 40, seed=3).numpy()
    bayes_prediction = T.argmax(1)[seq[:, :-1]]
    empirical = (bayes_prediction == seq[:, 1:]).mean()
    assert empirical == pytest.approx(markov.bayes_accuracy(T), abs=0.01)
    counts = np.bincount(seq[:, 0], minlength=4) / len(seq)
    np.testing.assert_allclose(counts, markov.stationary_distribution(T), atol=0.03)


def test_sampling_is_seeded():
    a = markov.sample_sequences(PAPER_T, 10, 8, seed=5)
    assert (a == markov.sample_sequences(PAPER_T, 10, 8, seed=5)).all()
    assert not (a == markov.sample_sequences(PAPER_T, 10, 8, seed=6)).all()


def _chain_with_shared_rows(rows: np.ndarray, state_class: list[int]) -> np.ndarray:
    """A chain (K, K) whose state x moves with the row ``rows[state_class[x]]``."""
    return np.asarray(rows)[state_class]


def _random_rows(n_rows: int, K: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rows = rng.random((n_rows, K)) + 0.05
    return rows / rows.sum(1, keepdims=True)


@pytest.mark.parametrize("state_class", [[0, 1, 2, 3], [0, 0, 1, 2], [0, 1, 0, 1, 2], [0, 0, 0, 1, 1]])
def test_expected_core_rank_matches_numpy(state_class):
    K = len(state_class)
    T = _chain_with_shared_rows(_random_rows(max(state_class) + 1, K, seed=K), state_class)
    w, V = np.linalg.eig(T.T)                                      # π from numpy's eigenvector, not ours
    pi = np.real(V[:, np.argmin(np.abs(w - 1))])
    pi /= pi.sum()
    reference = np.linalg.matrix_rank(T - np.outer(np.ones(K), pi), tol=1e-10)
    assert markov.expected_core_rank(T) == reference == max(state_class)   # distinct rows − 1
    np.testing.assert_allclose(markov.centred_transition(T), T - np.outer(np.ones(K), pi), atol=1e-12)


def _monte_carlo_r2(T: np.ndarray, n: int, length: int, seed: int) -> float:
    """R² of least squares q_{t+1} ≈ A q_t on simulated states, averaged over whitened coordinates."""
    seq = markov.sample_sequences(T, n, length, seed=seed).numpy()
    B = T - np.outer(np.ones(len(T)), markov.stationary_distribution(T))
    q_now, q_next = B[seq[:, :-1]].reshape(-1, len(T)), B[seq[:, 1:]].reshape(-1, len(T))
    # coordinates on the r-dimensional span of the samples (principal components)
    _, s, Vt = np.linalg.svd(q_next - q_next.mean(0), full_matrices=False)
    basis = Vt[s > 1e-8 * s[0]].T
    x, y = q_now @ basis, q_next @ basis
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = y - x @ coef
    yc = y - y.mean(0)
    L = np.linalg.cholesky(yc.T @ yc / len(y))                     # whiten the targets
    rw, yw = np.linalg.solve(L, resid.T), np.linalg.solve(L, yc.T)
    per_coordinate = 1 - (rw ** 2).sum(1) / (yw ** 2).sum(1)
    return float(per_coordinate.mean())


@pytest.mark.parametrize("T", [
    PAPER_T,
    _chain_with_shared_rows(_random_rows(3, 4, seed=1), [0, 0, 1, 2]),
    _random_rows(5, 5, seed=2),
], ids=["paper", "shared-rows", "random"])
def test_oracle_r2_matches_monte_carlo(T):
    assert markov.oracle_r2(T) == pytest.approx(_monte_carlo_r2(T, 4000, 60, seed=7), abs=0.01)


def test_oracle_r2_of_a_symmetric_chain_is_the_mean_squared_eigenvalue():
    # symmetric and doubly stochastic: π uniform, canonical correlations = |eigenvalues| of T on 1⊥
    lam = np.array([0.15, -0.1, 0.12, 0.05])
    U = np.linalg.qr(np.c_[np.ones(5), np.random.default_rng(0).standard_normal((5, 4))])[0][:, 1:]
    T = np.full((5, 5), 0.2) + U @ np.diag(lam) @ U.T                 # |U diag(λ) Uᵀ| ≤ 0.15 < 0.2
    assert (T > 0).all()
    assert markov.oracle_r2(T) == pytest.approx(np.mean(lam ** 2), abs=1e-12)
    assert markov.oracle_r2(PAPER_T) == pytest.approx((0.625 + 0.625 + 0.25) / 3, abs=1e-12)
    assert np.isnan(markov.oracle_r2(np.tile([0.2, 0.3, 0.5], (3, 1))))


def test_shuffle_targets_keeps_the_marginal_and_breaks_the_dependence():
    seq = markov.sample_sequences(PAPER_T, 2000, 20, seed=0)
    y = markov.shuffle_targets(seq[:, 1:], seed=1)
    assert y.shape == seq[:, 1:].shape
    assert (torch.bincount(y.flatten(), minlength=4) == torch.bincount(seq[:, 1:].flatten(), minlength=4)).all()
    bayes_hits = (torch.as_tensor(PAPER_T.argmax(1))[seq[:, :-1]] == y).float().mean()
    assert float(bayes_hits) == pytest.approx(0.25, abs=0.01)           # was 0.75 before shuffling
