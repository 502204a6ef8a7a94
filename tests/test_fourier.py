"""Fourier features over Z_p, key-frequency detection and subspace alignment."""
import math

import numpy as np
import pytest
import torch

from corekit import fourier, subspaces


@pytest.mark.parametrize("p", [5, 13, 29])
@pytest.mark.parametrize("kind,width", [("a", 2), ("b", 2), ("ab", 4), ("sum", 2), ("diff", 2), ("sum_diff", 4),
                                        ("input_sum", 2)])
def test_bases_are_orthogonal_centred_and_of_the_right_width(p, kind, width):
    F = fourier.fourier_basis(p, kind)
    assert F.shape == (p * p, width * (p // 2))
    gram = F.T @ F
    norm = p * p if kind == "input_sum" else p * p / 2
    torch.testing.assert_close(gram, norm * torch.eye(F.shape[1], dtype=F.dtype), atol=1e-9, rtol=0)
    torch.testing.assert_close(F.mean(0), torch.zeros(F.shape[1], dtype=F.dtype), atol=1e-12, rtol=0)


def test_basis_values_follow_the_task_order():
    p = 7
    F = fourier.fourier_basis(p, "sum", freqs=[2])
    a, b = 3, 5                                      # row a·p + b
    w = 2 * math.pi * 2 / p
    torch.testing.assert_close(F[a * p + b], torch.tensor([math.cos(w * (a + b)), math.sin(w * (a + b))],
                                                          dtype=torch.float64))
    ab = fourier.fourier_basis(p, "ab", freqs=[1, 3])
    assert ab.shape == (p * p, 8)
    torch.testing.assert_close(ab[a * p + b, 4:6], torch.tensor([math.cos(2 * math.pi * 3 * a / p),
                                                                  math.sin(2 * math.pi * 3 * a / p)],
                                                                 dtype=torch.float64))


def test_a_b_sum_and_diff_features_are_the_whole_non_constant_space_of_functions_of_a_or_b():
    p = 11
    ab = fourier.fourier_basis(p, "ab")
    sd = fourier.fourier_basis(p, "sum_diff")
    # a/b features and sum/diff features are orthogonal (different 2-D frequency vectors)
    assert (ab.T @ sd).abs().max() < 1e-9
    # cos(ω a) + cos(ω b) lies in the span of the a/b features
    assert subspaces.alignment(ab, fourier.fourier_basis(p, "input_sum"), fraction=True) == pytest.approx(1.0)


def test_alignment_of_identical_spans_is_one_and_of_random_subspaces_about_dm_over_n():
    gen = torch.Generator().manual_seed(0)
    p = 13
    F = fourier.fourier_basis(p, "sum")
    Q = F @ torch.randn(F.shape[1], F.shape[1], generator=gen, dtype=torch.float64)   # same span, mixed
    assert subspaces.alignment(Q, F) == pytest.approx(1.0, abs=1e-10)
    assert subspaces.alignment(Q[:, :3], F) == pytest.approx(1.0, abs=1e-10)           # Q inside F: fraction of min
    N, d, m = F.shape[0], 20, F.shape[1]
    scores = [subspaces.alignment(torch.randn(N, d, generator=gen, dtype=torch.float64), F, fraction=False)
              for _ in range(60)]
    assert sum(scores) / len(scores) == pytest.approx(d * m / N, rel=0.1)
    assert subspaces.alignment(torch.randn(N, d, generator=gen, dtype=torch.float64), F) < 0.2


def test_alignment_centres_the_features():
    p = 7
    F = fourier.fourier_basis(p, "a") + 5.0                # a constant offset does not count
    assert subspaces.alignment(fourier.fourier_basis(p, "a"), F) == pytest.approx(1.0)
    const = torch.ones(p * p, 1, dtype=torch.float64)
    assert subspaces.alignment(const, const, centre_features=False) == pytest.approx(1.0)


def test_key_frequencies_found_from_a_sparse_embedding():
    gen = torch.Generator().manual_seed(1)
    p, d = 29, 16
    a = torch.arange(p, dtype=torch.float64)[:, None]
    W = 0.02 * torch.randn(p, d, generator=gen, dtype=torch.float64)
    for k, scale in ((1, 1.0), (12, 0.7)):
        phase = torch.rand(1, d, generator=gen, dtype=torch.float64) * 2 * math.pi
        W += scale * torch.cos(2 * math.pi * k * a / p + phase) * torch.randn(1, d, generator=gen, dtype=torch.float64)
    assert fourier.key_frequencies(W) == [1, 12]
    assert fourier.key_frequency_fraction(W, [1, 12]) > 0.95


def test_fourier_power_matches_a_direct_sum():
    gen = torch.Generator().manual_seed(2)
    W = torch.randn(7, 3, generator=gen, dtype=torch.float64)
    a = torch.arange(7, dtype=torch.float64)
    for k in range(4):
        z = torch.exp(-2j * math.pi * k * a / 7).to(torch.complex128)
        direct = (z[:, None] * W.to(torch.complex128)).sum(0).abs().pow(2).sum()
        assert float(fourier.fourier_power(W)[k]) == pytest.approx(float(direct))


def test_bad_parameters_raise_clear_errors():
    with pytest.raises(ValueError, match="p must be prime"):
        fourier.fourier_basis(15, "a")
    with pytest.raises(ValueError, match="kind must be one of"):
        fourier.fourier_basis(7, "product")
    with pytest.raises(ValueError, match="freqs must be distinct integers in 1..3"):
        fourier.fourier_basis(7, "a", freqs=[4])
    with pytest.raises(ValueError, match="Q and F must be"):
        subspaces.alignment(torch.zeros(5, 2), torch.zeros(6, 2))
    with pytest.raises(ValueError, match="W must be"):
        fourier.key_frequencies(torch.zeros(7))


def test_top_frequency_share_matches_a_numpy_fft_and_is_flat_at_random():
    gen = torch.Generator().manual_seed(5)
    p, d = 13, 6
    a = torch.arange(p, dtype=torch.float64)[:, None]
    W = (torch.cos(2 * math.pi * 3 * a / p) * torch.randn(1, d, generator=gen, dtype=torch.float64)
         + 0.5 * torch.sin(2 * math.pi * 5 * a / p) * torch.randn(1, d, generator=gen, dtype=torch.float64)
         + 0.05 * torch.randn(p, d, generator=gen, dtype=torch.float64) + 2.0)        # + a constant (k = 0)
    power = (np.abs(np.fft.fft(W.numpy(), axis=0)) ** 2).sum(1)[1:p // 2 + 1]   # k = 1 … ⌊p/2⌋
    expected = np.sort(power)[::-1]
    for n in (1, 2, 6):
        assert fourier.top_frequency_share(W, n) == pytest.approx(expected[:n].sum() / power.sum(), rel=1e-10)
    assert fourier.top_frequency_share(W, 2) > 0.95
    flat = [fourier.top_frequency_share(torch.randn(29, 64, generator=gen, dtype=torch.float64), 2) for _ in range(20)]
    assert 2 / 14 < np.mean(flat) < 0.25                                     # top 2 of 14 flat-spectrum pairs
    with pytest.raises(ValueError, match="n must be an integer in 1..6"):
        fourier.top_frequency_share(W, 7)
