"""The eNTK paper's per-parameter measurement on modular addition: eigenvector blocks vs Fourier features.

For one model of a :class:`~corekit.models.BatchedTransformer` on all p² pairs, every parameter tensor
gets its own kernel, flattened as the mean over all class pairs (``mode="pair_mean"``: the eNTK of
the mean output, over every output the model has), and its top eigenvectors. With K key frequencies
a feature family spans 2K dimensions; the paper scores the blocks of eigenvectors ``0 … 2K`` and
``2K+1 … 4K`` (for K = 2 its ``[0:5]`` and ``[5:9]``), with no eigenvector passed over, against the
sum features cos/sin ω_k(a+b) and the input features cos ω_k a + cos ω_k b, sin ω_k a + sin ω_k b
(:func:`corekit.fourier.alignment`, as a fraction of 2K). Which block holds which family is measured
per parameter (:meth:`BlockScores.holding`), not assumed; each block's share of the constant
function is reported beside its scores.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import torch
from torch import Tensor

from corekit import entk, fourier

#: Feature families scored: name → :func:`corekit.fourier.fourier_basis` kind.
FAMILIES = {"sum": "sum", "input": "input_sum"}


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


def parameter_eigenpairs(model, m: int, tokens: Tensor, top_k: int, names: Sequence[str] | None = None,
                         state: Mapping[str, Tensor] | None = None,
                         dtype: torch.dtype = torch.float64) -> dict[str, entk.Eigenpairs]:
    """Return {parameter: top-k eigenpairs} of model m's per-parameter "pair_mean" kernels (N, N) on tokens (N, T)."""
    fm = entk.functional_transformer(model, m=m, state=state).to(dtype=dtype, device=tokens.device)
    per_param = entk.kernels(fm, tokens, mode="pair_mean", names=names)
    return {name: entk.dense_eigenpairs(K, top_k) for name, K in per_param.items()}


def group_eigenpairs(model, m: int, tokens: Tensor, top_k: int, groups: Mapping[str, Sequence[str]],
                     state: Mapping[str, Tensor] | None = None,
                     dtype: torch.dtype = torch.float64) -> dict[str, entk.Eigenpairs]:
    """Return {group: top-k eigenpairs} of the summed per-parameter kernels of each group (e.g. all of attention),
    on model m's parameters or on a saved ``state`` (e.g. the snapshot at initialisation)."""
    names = sorted({n for group in groups.values() for n in group})
    fm = entk.functional_transformer(model, m=m, state=state).to(dtype=dtype, device=tokens.device)
    return entk.group_eigenpairs(entk.kernels(fm, tokens, mode="pair_mean", names=names), groups, top_k)


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
        scores[name] = {fam: [fourier.alignment(V[:, b], F) for b in blocks] for fam, F in features.items()}
        ones = torch.ones(p * p, 1, dtype=torch.float64)
        constant[name] = [fourier.alignment(V[:, b], ones, centre_features=False) for b in blocks]
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
    return short_names(score_blocks(parameter_eigenpairs(model, m, tokens, top_k, state=state), p, keys))
