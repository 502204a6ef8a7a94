"""Fourier features over Z_p and the key frequencies of a trained model.

Inputs of the modular-addition task are all p² pairs (a, b) in the order of
:func:`corekit.tasks.modular.modular_addition`: row ``a * p + b``. With ω_k = 2πk/p, a feature block
holds one cosine and one sine column per frequency k (k = 1 … ⌊p/2⌋ unless ``freqs`` says otherwise):

=========== ===================================================== =========================
kind        columns (per frequency k)                              width
=========== ===================================================== =========================
"a"         cos ω_k a, sin ω_k a                                   2·len(freqs)
"b"         cos ω_k b, sin ω_k b                                   2·len(freqs)
"ab"        cos ω_k a, sin ω_k a, cos ω_k b, sin ω_k b             4·len(freqs)
"sum"       cos ω_k (a+b), sin ω_k (a+b)                           2·len(freqs)
"diff"      cos ω_k (a−b), sin ω_k (a−b)                           2·len(freqs)
"sum_diff"  the "sum" columns, then the "diff" columns             4·len(freqs)
"input_sum" cos ω_k a + cos ω_k b, sin ω_k a + sin ω_k b           2·len(freqs)
=========== ===================================================== =========================

The alignment of an eigenvector block Q (N, d) with a feature block F (N, m) is the authors' score
‖QᵀF‖²_F after orthonormalising both (F centred first); it lies in [0, min(d, m)] and
:func:`corekit.subspaces.alignment` reports it as a fraction of min(d, m). Random d-dimensional Q give ≈ d·m/N.
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import Tensor

from corekit.tasks.modular import check_modulus

KINDS = ("a", "b", "ab", "sum", "diff", "sum_diff", "input_sum")


def frequencies(p: int) -> list[int]:
    """Return the non-zero frequencies 1 … ⌊p/2⌋ of Z_p (each one a cos/sin pair)."""
    return list(range(1, check_modulus(p) // 2 + 1))


def _check_freqs(p: int, freqs: Sequence[int] | None) -> list[int]:
    """Return ``freqs`` as a list of distinct ints in 1 … ⌊p/2⌋, or raise ValueError naming it."""
    if freqs is None:
        return frequencies(p)
    out = [int(k) for k in freqs]
    if not out or len(set(out)) != len(out) or any(not 1 <= k <= p // 2 for k in out):
        raise ValueError(f"freqs must be distinct integers in 1..{p // 2} (p = {p}), got {list(freqs)!r}")
    return out


def pair_inputs(p: int) -> tuple[Tensor, Tensor]:
    """Return a, b (p²,) for all pairs in task order (row a·p + b)."""
    p = check_modulus(p)
    a, b = torch.meshgrid(torch.arange(p), torch.arange(p), indexing="ij")
    return a.flatten(), b.flatten()


def fourier_features(a: Tensor, b: Tensor, p: int, kind: str, freqs: Sequence[int] | None = None,
                     dtype: torch.dtype = torch.float64) -> Tensor:
    """Return the ``kind`` Fourier features (N, m) of the pairs a, b (N,) over Z_p (see the module table)."""
    p = check_modulus(p)
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    ks = torch.tensor(_check_freqs(p, freqs), dtype=dtype)
    a, b = a.to(dtype)[:, None], b.to(dtype)[:, None]
    w = 2 * math.pi * ks[None, :] / p

    def pair(z: Tensor) -> Tensor:  # (N, 2·K): cos, sin interleaved per frequency
        return torch.stack([torch.cos(w * z), torch.sin(w * z)], dim=-1).flatten(1)

    if kind == "a":
        return pair(a)
    if kind == "b":
        return pair(b)
    if kind == "ab":
        return torch.stack([pair(a).view(len(a), -1, 2), pair(b).view(len(b), -1, 2)], dim=2).flatten(1)
    if kind == "sum":
        return pair(a + b)
    if kind == "diff":
        return pair(a - b)
    if kind == "sum_diff":
        return torch.cat([pair(a + b), pair(a - b)], dim=1)
    return pair(a) + pair(b)  # input_sum


def fourier_basis(p: int, kind: str, freqs: Sequence[int] | None = None,
                  dtype: torch.dtype = torch.float64) -> Tensor:
    """Return the ``kind`` Fourier features (p², m) over all pairs in task order (row a·p + b)."""
    a, b = pair_inputs(p)
    return fourier_features(a, b, p, kind, freqs, dtype)


def fourier_power(W: Tensor) -> Tensor:
    """Return the Fourier power (⌊p/2⌋+1,) at k = 0 … ⌊p/2⌋ of a token-indexed matrix W (p, d), summed over d.

    Power at k is ``Σ_d |Σ_a W[a, d] e^{-iω_k a}|²``, the energy of the cos/sin pair k (k = 0: the mean).
    """
    if W.dim() != 2:
        raise ValueError(f"W must be (p, d) with one row per residue, got shape {tuple(W.shape)}")
    spec = torch.fft.rfft(W.detach().double(), dim=0)      # (⌊p/2⌋+1, d)
    return spec.abs().pow(2).sum(-1)


def key_frequencies(W: Tensor, max_keys: int | None = None) -> list[int]:
    """Return the key frequencies (sorted) of W (p, d): the k ≥ 1 above the largest drop in sorted Fourier power.

    Powers at k = 1 … ⌊p/2⌋ are sorted in decreasing order; the cut is placed at the largest ratio
    between consecutive powers among the first ``max_keys`` + 1 (default ⌊p/4⌋), so a trained
    model's few dominant cos/sin pairs are returned and a flat spectrum gives many.
    """
    power = fourier_power(W)[1:]                             # (⌊p/2⌋,) for k = 1 …
    p = check_modulus(W.shape[0])
    n = len(power)
    max_keys = max(1, min(n - 1, max_keys if max_keys is not None else max(1, p // 4)))
    order = torch.argsort(power, descending=True)
    sorted_power = power[order].clamp_min(1e-300)
    ratios = sorted_power[:max_keys] / sorted_power[1:max_keys + 1]
    cut = int(torch.argmax(ratios)) + 1
    return sorted(int(k) + 1 for k in order[:cut])


def top_frequency_share(W: Tensor, n: int) -> float:
    """Return the fraction of W's (p, d) non-constant Fourier power held by its ``n`` strongest frequencies k ≥ 1.

    With ``n`` the number of key frequencies of a trained W, the same number on an untrained W is
    the null for the key frequencies' share (a flat spectrum holds about n/⌊p/2⌋).
    """
    power = fourier_power(W)[1:]
    if not isinstance(n, int) or not 1 <= n <= len(power):
        raise ValueError(f"n must be an integer in 1..{len(power)} (the non-zero frequencies of Z_p), got {n!r}")
    return float(power.sort(descending=True).values[:n].sum() / power.sum())


def key_frequency_fraction(W: Tensor, freqs: Sequence[int]) -> float:
    """Return the fraction of W's (p, d) non-constant Fourier power that lies at the frequencies ``freqs``."""
    power = fourier_power(W)[1:]
    idx = torch.tensor(_check_freqs(W.shape[0], freqs)) - 1
    return float(power[idx].sum() / power.sum())
