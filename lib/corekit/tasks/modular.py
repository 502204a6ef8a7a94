"""Modular addition a + b mod p: token sequences for transformers, one-hot pairs for MLPs, seeded splits."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


def is_prime(n: int) -> bool:
    """Return whether n is a prime number."""
    if n < 2:
        return False
    return all(n % k for k in range(2, int(n ** 0.5) + 1))


def check_modulus(p: int, require_prime: bool = True) -> int:
    """Return p as an int, or raise ValueError when it is not an integer ≥ 3 (and prime if required)."""
    if isinstance(p, bool) or int(p) != p or p < 3:
        raise ValueError(f"p must be an integer >= 3, got {p!r}")
    if require_prime and not is_prime(int(p)):
        raise ValueError(f"p must be prime (the Fourier structure of Z_p needs it), got {p}; "
                         f"nearby primes: {[q for q in range(max(3, p - 10), p + 11) if is_prime(q)]}")
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

    def one_hot(self) -> Tensor:
        """Return MLP inputs (p², 2p): one-hot a concatenated with one-hot b."""
        eye = torch.eye(self.p)
        return torch.cat([eye[self.a], eye[self.b]], dim=1)


def modular_addition(p: int, train_frac: float, seed: int, require_prime: bool = True) -> ModularAddition:
    """Return the a + b mod p task with a random ``train_frac`` of the p² pairs for training."""
    p = check_modulus(p, require_prime)
    if not 0.0 < train_frac < 1.0:
        raise ValueError(f"train_frac must be in (0, 1), got {train_frac!r}")
    a, b = torch.meshgrid(torch.arange(p), torch.arange(p), indexing="ij")
    a, b = a.flatten(), b.flatten()
    perm = torch.randperm(p * p, generator=torch.Generator().manual_seed(seed))
    n_train = int(round(train_frac * p * p))
    return ModularAddition(p=p, a=a, b=b, labels=(a + b) % p,
                           train_idx=perm[:n_train].sort().values, test_idx=perm[n_train:].sort().values)
