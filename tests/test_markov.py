"""Markov-chain task: validation errors and closed forms against simulation and numpy references."""
import numpy as np
import pytest

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
