"""Sequences from a finite Markov chain, and the closed-form quantities a model of it can reach."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch import Tensor


def cyclic_transition(n_states: int = 4, stay: float = 0.75) -> np.ndarray:
    """Return the cyclic chain (K, K): stay with probability ``stay``, else advance to the next state."""
    T = np.eye(n_states) * stay
    T[np.arange(n_states), (np.arange(n_states) + 1) % n_states] += 1.0 - stay
    return T


def validate_transition(transition: Sequence[Sequence[float]] | np.ndarray, tol: float = 1e-6) -> np.ndarray:
    """Return ``transition`` as a float64 (K, K) array, or raise ValueError saying what is wrong."""
    try:
        T = np.asarray(transition, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"transition must be a square list of lists of numbers, got {transition!r}") from err
    if T.ndim != 2 or T.shape[0] != T.shape[1] or T.shape[0] < 2:
        raise ValueError(f"transition must be a square K x K matrix with K >= 2, got shape {T.shape}")
    if not np.all(np.isfinite(T)) or np.any(T < 0):
        raise ValueError("transition entries must be finite and >= 0")
    row_sums = T.sum(axis=1)
    bad = np.flatnonzero(np.abs(row_sums - 1.0) > tol)
    if bad.size:
        raise ValueError(f"transition must be row-stochastic (every row sums to 1); rows {bad.tolist()} "
                         f"sum to {row_sums[bad].round(6).tolist()}")
    eigvals = np.linalg.eigvals(T)
    if np.sum(np.abs(eigvals - 1.0) < 1e-8) > 1:
        raise ValueError("transition must be irreducible (a single stationary distribution); "
                         "this chain has several closed classes")
    return T


def stationary_distribution(T: np.ndarray) -> np.ndarray:
    """Return π (K,) with πᵀT = πᵀ and Σπ = 1."""
    K = T.shape[0]
    # Solve (Tᵀ - I) π = 0 with the normalisation row appended.
    A = np.vstack([T.T - np.eye(K), np.ones((1, K))])
    b = np.zeros(K + 1)
    b[-1] = 1.0
    pi, *_ = np.linalg.lstsq(A, b, rcond=None)
    pi = np.clip(pi, 0.0, None)
    return pi / pi.sum()


def bayes_accuracy(T: np.ndarray) -> float:
    """Return the best next-state accuracy any predictor reaches in stationarity: Σ_i π_i max_j T_ij."""
    return float(stationary_distribution(T) @ T.max(axis=1))


def stationary_guess_accuracy(T: np.ndarray) -> float:
    """Return the accuracy of always predicting the most likely stationary state: max_j π_j."""
    return float(stationary_distribution(T).max())


def centred_transition(T: np.ndarray) -> np.ndarray:
    """Return T − 1πᵀ (K, K): row x is the Bayes prediction after state x minus the stationary guess."""
    return T - stationary_distribution(T)[None, :]


def expected_core_rank(T: np.ndarray, tol: float = 1e-8) -> int:
    """Return rank(T − 1πᵀ) (≤ K − 1): the dimension of the state information a next-state predictor needs.

    States with the same row of T need not be told apart, so shared rows lower the rank below K − 1.
    """
    return int(np.linalg.matrix_rank(centred_transition(T), tol=tol))


def oracle_r2(T: np.ndarray, tol: float = 1e-10) -> float:
    """Return R²_oracle: the R² of the Bayes predictor of the next centred prediction, in whitened coordinates.

    With q_t = (T − 1πᵀ)ᵀ e_{x_t} (the centred prediction after state x_t; any invertible linear code
    of it gives the same value) and x_t ~ π, E[q_{t+1} | x_t] = A q_t is linear in q_t, and
    R² = 1 − tr(Σ⁻¹ E[(q_{t+1} − A q_t)(q_{t+1} − A q_t)ᵀ]) / r, the mean squared canonical correlation
    of q_t and q_{t+1} over the r = rank(T − 1πᵀ) dimensions: no model of the chain's dynamics on
    such a core does better in expectation. NaN when r = 0 (the next state ignores the current one).
    """
    pi = stationary_distribution(T)
    B = centred_transition(T)
    cov = B.T @ (pi[:, None] * B)                                   # Σ = E[q qᵀ]
    cross = B.T @ (pi[:, None] * (T @ B))                           # E[q_t q_{t+1}ᵀ]
    w, V = np.linalg.eigh(cov)
    keep = w > tol * max(w.max(), tol)
    if not keep.any():
        return float("nan")
    W = V[:, keep] / np.sqrt(w[keep])                               # whitening on the support of Σ
    return float(np.sum((W.T @ cross @ W) ** 2) / keep.sum())


def nontrivial_eigenvalues(T: np.ndarray) -> np.ndarray:
    """Return eig(T) (K − 1,) without one eigenvalue 1 (the one of the stationary distribution)."""
    eig = np.linalg.eigvals(T)
    return np.delete(eig, np.argmin(np.abs(eig - 1.0)))


def core_eigenvalues(T: np.ndarray, rank: int) -> np.ndarray:
    """Return the ``rank`` largest-modulus eigenvalues of T other than its unit eigenvalue (what a rank-r core's
    operator can show)."""
    eig = nontrivial_eigenvalues(T)
    return eig[np.argsort(-np.abs(eig), kind="stable")[:rank]]


def shuffle_targets(y: Tensor, seed: int) -> Tensor:
    """Return the targets y (N, T) permuted across all sequences and positions: marginal kept, dependence on x destroyed."""
    gen = torch.Generator().manual_seed(seed)
    return y.flatten()[torch.randperm(y.numel(), generator=gen)].view(y.shape)


def sample_sequences(T: np.ndarray, n: int, length: int, seed: int) -> Tensor:
    """Return n sequences (n, length) of states, the first drawn from π, the rest from T."""
    if n < 1 or length < 2:
        raise ValueError(f"need n >= 1 sequences of length >= 2, got n={n}, length={length}")
    gen = torch.Generator().manual_seed(seed)
    T_t = torch.as_tensor(T, dtype=torch.float64)
    pi = torch.as_tensor(stationary_distribution(T), dtype=torch.float64)
    states = torch.empty(n, length, dtype=torch.long)
    states[:, 0] = torch.multinomial(pi.expand(n, -1), 1, generator=gen)[:, 0]
    for t in range(1, length):
        states[:, t] = torch.multinomial(T_t[states[:, t - 1]], 1, generator=gen)[:, 0]
    return states
