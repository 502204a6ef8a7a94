"""The eNTK of one model of a :class:`~corekit.models.BatchedTransformer`, parameter by parameter and by group of
parameters, with its top eigenpairs, and how the unembedding's leading eigenvectors align with given features.

The kernels are the eNTK paper's flattening (``mode="pair_mean"``: the eNTK of the mean output over every output the
model has) on the model's own weights or on a saved ``state`` (e.g. a snapshot at initialisation).
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from corekit.entk.eigen import Eigenpairs, dense_eigenpairs, group_eigenpairs
from corekit.entk.exact import kernels
from corekit.entk.functional import functional_transformer
from corekit.subspaces import alignment, alignments


def parameter_eigenpairs(model, m: int, tokens: Tensor, top_k: int, names: Sequence[str] | None = None,
                         state: Mapping[str, Tensor] | None = None,
                         dtype: torch.dtype = torch.float32) -> dict[str, Eigenpairs]:
    """Return {parameter: top-k eigenpairs} of model m's per-parameter "pair_mean" kernels (N, N) on tokens (N, T),
    kernels and eigensolves in ``dtype`` (default float32, as the eNTK authors compute them)."""
    fm = functional_transformer(model, m=m, state=state).to(dtype=dtype, device=tokens.device)
    per_param = kernels(fm, tokens, mode="pair_mean", names=names)
    return {name: dense_eigenpairs(K, top_k, dtype=dtype) for name, K in per_param.items()}


def parameter_group_eigenpairs(model, m: int, tokens: Tensor, top_k: int, groups: Mapping[str, Sequence[str]],
                     state: Mapping[str, Tensor] | None = None,
                     dtype: torch.dtype = torch.float64) -> dict[str, Eigenpairs]:
    """Return {group: top-k eigenpairs} of the summed per-parameter kernels of each group (e.g. all of attention),
    on model m's parameters or on a saved ``state`` (e.g. the snapshot at initialisation)."""
    names = sorted({n for group in groups.values() for n in group})
    fm = functional_transformer(model, m=m, state=state).to(dtype=dtype, device=tokens.device)
    return group_eigenpairs(kernels(fm, tokens, mode="pair_mean", names=names), groups, top_k)


def unembedding_alignment(model, m: int, tokens: Tensor, features: Tensor, states: Sequence[Mapping[str, Tensor]],
                          top_k: int | None = None,
                          cores: Sequence[Tensor] | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Return (S,) alignments of W_U's leading block (f + 1 eigenvectors) with ``features`` (N, f) on model m's saved
    ``states`` and, with ``cores`` (one (N, r) tensor per state), (S,) alignments of its top r + 1 with each.

    Each state's W_U kernel gets its top ``top_k`` eigenvectors (None: as many as the blocks use, max(f + 1, r + 1)).
    With the sum features at K key frequencies (f = 2K) the leading block is the eNTK paper's first block.
    """
    F = features
    n = F.shape[1] + 1
    if cores is not None and len(cores) != len(states):
        raise ValueError(f"cores must hold one tensor per state ({len(states)}), got {len(cores)}")
    sums, lens = [], []
    for j, state in enumerate(states):
        r = None if cores is None else cores[j].shape[1]
        k = top_k if top_k is not None else max(n, n if r is None else r + 1)
        V = parameter_eigenpairs(model, m, tokens, k, names=["W_U"], state=state)["W_U"].vectors.cpu()
        sums.append(alignment(V[:, :n], F))
        if r is not None:
            lens.append(alignments(V[:, :r + 1][None], cores[j][None].cpu())[0])
    return np.asarray(sums), (None if cores is None else np.asarray(lens))
