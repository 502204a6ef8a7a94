"""Modular addition a + b mod p: token sequences for transformers, one-hot pairs for MLPs, seeded splits."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from corekit.primes import is_prime, nearest_primes

if TYPE_CHECKING:
    from corekit.train import Dataset

#: Ways to split the pairs (see :func:`modular_addition`).
SPLITS = ("torch", "python", "numpy")


def check_modulus(p: int, require_prime: bool = True) -> int:
    """Return p as an int, or raise ValueError when it is not an integer ≥ 3 (and prime if required)."""
    if isinstance(p, bool) or int(p) != p or p < 3:
        raise ValueError(f"p must be an integer >= 3, got {p!r}")
    if require_prime and not is_prime(int(p)):
        raise ValueError(f"p must be prime (the Fourier structure of Z_p needs it), got {p}; "
                         f"nearest primes: {nearest_primes(int(p))}")
    return int(p)


@dataclass
class ModularAddition:
    """All p² pairs: a, b (p²,), labels (a + b) mod p (p²,), and a seeded train / test index split."""

    p: int
    a: Tensor
    b: Tensor
    labels: Tensor
    train_idx: Tensor
    test_idx: Tensor

    def tokens(self, equals: bool = True) -> Tensor:
        """Return transformer inputs (p², 3): [a, b, "="] with "=" the token p, or (p², 2): [a, b] without it.

        The model reads its answer at the last position either way; [a, b] is the ACE authors' format.
        """
        pair = [self.a, self.b]
        return torch.stack(pair + [torch.full_like(self.a, self.p)] if equals else pair, dim=1)

    def datasets(self, equals: bool = True) -> tuple[Dataset, Dataset]:
        """Return the (train, test) datasets of transformer inputs (:meth:`tokens`) and labels, in the split's order."""
        from corekit.train import Dataset

        x = self.tokens(equals)
        return (Dataset(x[self.train_idx], self.labels[self.train_idx]),
                Dataset(x[self.test_idx], self.labels[self.test_idx]))

    def one_hot(self) -> Tensor:
        """Return MLP inputs (p², 2p): one-hot a concatenated with one-hot b."""
        eye = torch.eye(self.p)
        return torch.cat([eye[self.a], eye[self.b]], dim=1)


def modular_addition(p: int, train_frac: float, seed: int, require_prime: bool = True,
                     split: str = "torch") -> ModularAddition:
    """Return the a + b mod p task with a random ``train_frac`` of the p² pairs for training.

    ``split="torch"``: ``round(train_frac·p²)`` pairs from a ``torch.randperm`` seeded with ``seed``,
    indices sorted. ``split="python"``: the eNTK authors' split, Python's ``random.seed(seed)``
    shuffling the pairs in row order and the first ``int(train_frac·p²)`` for training, indices kept in
    the shuffled order (a shuffling data loader indexes that order). ``split="numpy"``: the ACE
    authors' split, ``np.random.RandomState(seed).permutation(p²)`` with the first ``int(train_frac·p²)``
    for training (their ``len // 2`` at 0.5, seed 42), in that order.
    """
    p = check_modulus(p, require_prime)
    if not 0.0 < train_frac < 1.0:
        raise ValueError(f"train_frac must be in (0, 1), got {train_frac!r}")
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    a, b = torch.meshgrid(torch.arange(p), torch.arange(p), indexing="ij")
    a, b = a.flatten(), b.flatten()
    if split == "numpy":
        perm, n_train = torch.from_numpy(np.random.RandomState(seed).permutation(p * p)), int(train_frac * p * p)
        train_idx, test_idx = perm[:n_train], perm[n_train:]
    elif split == "python":
        order = list(range(p * p))
        random.Random(seed).shuffle(order)
        perm, n_train = torch.tensor(order), int(train_frac * p * p)
        train_idx, test_idx = perm[:n_train], perm[n_train:]
    else:
        perm = torch.randperm(p * p, generator=torch.Generator().manual_seed(seed))
        n_train = int(round(train_frac * p * p))
        train_idx, test_idx = perm[:n_train].sort().values, perm[n_train:].sort().values
    return ModularAddition(p=p, a=a, b=b, labels=(a + b) % p, train_idx=train_idx, test_idx=test_idx)
