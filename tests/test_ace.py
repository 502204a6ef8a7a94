"""ACE against independent references: the SVD of H·Jᵀ in fp64, finite differences, per-example autograd."""
import itertools

import numpy as np
import pytest
import torch

from corekit import ace

torch.manual_seed(0)


def _readout(M=2, D=6, K=4, seed=0):
    """A nonlinear per-example readout h (M, N, D) -> (M, N, K) and its weights."""
    gen = torch.Generator().manual_seed(seed)
    W = torch.randn(M, D, K, generator=gen, dtype=torch.float64)
    return (lambda h: torch.tanh(torch.einsum("mnd,mdk->mnk", h, W))), W


def test_output_jacobian_matches_finite_differences_and_autograd_loop():
    fn, _ = _readout()
    h = torch.randn(2, 5, 6, dtype=torch.float64)
    J = ace.output_jacobian(fn, h)                                   # (M, N, K, D)
    eps = 1e-6
    for m, n, d in [(0, 0, 0), (1, 3, 5), (0, 4, 2)]:
        dh = torch.zeros_like(h)
        dh[m, n, d] = eps
        fd = (fn(h + dh) - fn(h - dh))[m, n] / (2 * eps)
        torch.testing.assert_close(J[m, n, :, d], fd, atol=1e-8, rtol=1e-6)
    for m, n, k in itertools.product(range(2), range(5), range(4)):
        x = h.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(fn(x)[m, n, k], x)
        torch.testing.assert_close(J[m, n, k], g[m, n])


def test_extract_spectrum_is_the_svd_of_H_Jt_in_fp64():
    fn, _ = _readout(M=2, D=6, K=4)
    h = torch.randn(2, 300, 6, dtype=torch.float64) @ torch.randn(6, 6, dtype=torch.float64)
    obs = ace.observability(fn, h, chunk=64)
    core = ace.extract(h.float(), obs)
    J = ace.output_jacobian(fn, h).numpy()
    for m in range(2):
        Hc = (h[m] - h[m].mean(0)).numpy() / np.sqrt(h.shape[1] - 1)
        Js = J[m].reshape(-1, 6) / np.sqrt(h.shape[1])              # (N·K, D)
        ref = np.linalg.svd(Hc @ Js.T, compute_uv=False)[:4]        # rank ≤ K
        np.testing.assert_allclose(core.sigma[m, :4].numpy(), ref, rtol=1e-5)
        cov = Hc.T @ Hc
        eig = np.sort(np.linalg.eigvals(cov @ obs[m].numpy()).real)[::-1][:4]
        np.testing.assert_allclose(core.sigma[m, :4].numpy() ** 2, eig, rtol=1e-6)
    eye = torch.eye(6, dtype=torch.float64).expand(2, 6, 6)
    torch.testing.assert_close(core.basis.transpose(1, 2) @ core.basis, eye, atol=1e-10, rtol=0)


@pytest.mark.parametrize("centre", [False, True])
def test_linear_observability_is_the_per_example_jacobian_gram(centre):
    """W Wᵀ (or W C Wᵀ) against E_n[JᵀJ] of h ↦ hW + b by per-example autodiff, and against finite differences."""
    gen = torch.Generator().manual_seed(3)
    M, N, D, K = 2, 40, 5, 7
    W, b = torch.randn(M, D, K, generator=gen, dtype=torch.float64), torch.randn(M, K, generator=gen, dtype=torch.float64)
    h = torch.randn(M, N, D, generator=gen, dtype=torch.float64)
    readout = lambda x: torch.einsum("mnd,mdk->mnk", x, W) + b[:, None, :]  # noqa: E731
    fn = ace.centred_logits(readout) if centre else readout
    got = ace.linear_observability(W.float(), centre=centre)
    torch.testing.assert_close(got, ace.observability(fn, h), atol=1e-5, rtol=1e-5)   # W rounded to float32
    eps, J = 1e-6, torch.zeros(K, D, dtype=torch.float64)
    for d in range(D):
        dh = torch.zeros_like(h)
        dh[0, 0, d] = eps
        J[:, d] = (fn(h + dh) - fn(h - dh))[0, 0] / (2 * eps)
    torch.testing.assert_close(ace.linear_observability(W, centre=centre)[0], J.T @ J, atol=1e-7, rtol=1e-7)


def test_extract_finds_a_planted_core():
    # Activations vary in 5 directions; the readout sees only a 2-D subspace of them.
    gen = torch.Generator().manual_seed(1)
    D = 8
    basis = torch.linalg.qr(torch.randn(D, D, generator=gen, dtype=torch.float64))[0]
    z = torch.randn(2000, 5, generator=gen, dtype=torch.float64)
    z = torch.linalg.qr(z - z.mean(0))[0] * 2000 ** 0.5           # sample covariance exactly diagonal
    z = (z * torch.tensor([3.0, 2.0, 1.5, 1.0, 0.5], dtype=torch.float64))[None]
    h = z @ basis[:, :5].T + 1.0
    W = basis[:, :2][None]                                          # readout = projection on 2 dims
    obs = W @ W.transpose(1, 2)
    core = ace.extract(h, obs)
    assert int(ace.energy_rank(core.sigma, 0.999)) == 2
    overlap = (core.q(2)[0].T @ basis[:, :2]).pow(2).sum() / 2
    assert float(overlap) == pytest.approx(1.0, abs=1e-10)


def test_energy_rank():
    sigma = torch.tensor([[2.0, 1.0, 0.1, 0.0], [1.0, 1.0, 1.0, 1.0]])
    assert ace.energy_rank(sigma, 0.99).tolist() == [2, 4]
    assert ace.energy_rank(sigma, 0.999).tolist() == [3, 4]
    with pytest.raises(ValueError, match="threshold"):
        ace.energy_rank(sigma, 1.5)


def test_ablations_decompose_about_the_mean():
    h = torch.randn(2, 50, 5, dtype=torch.float64)
    q = torch.linalg.qr(torch.randn(2, 5, 2, dtype=torch.float64))[0]
    mean = h.mean(1)
    keep, rem, fl = ace.keep_only(h, q, mean), ace.remove(h, q, mean), ace.flip(h, q, mean)
    torch.testing.assert_close(keep + rem - h, mean[:, None, :].expand_as(h))   # the parts add up
    torch.testing.assert_close(torch.einsum("mnd,mdr->mnr", rem - mean[:, None], q), torch.zeros(2, 50, 2, dtype=torch.float64))
    torch.testing.assert_close(fl, 2 * rem - h)                                 # reflection about the mean
    proj = q @ q.transpose(1, 2)
    torch.testing.assert_close(keep, mean[:, None] + (h - mean[:, None]) @ proj)


def _linear_ablation_setup(M=3, N=400, D=10, V=7, seed=0, mean_zero=False, bias=True):
    """Random float64 activations with a planted low-rank signal, a core of them, and a linear readout."""
    gen = torch.Generator().manual_seed(seed)
    h = torch.randn(M, N, D, generator=gen, dtype=torch.float64) * torch.linspace(3, 0.1, D, dtype=torch.float64)
    h = h + torch.randn(M, 1, D, generator=gen, dtype=torch.float64)
    W = torch.randn(M, D, V, generator=gen, dtype=torch.float64)
    b = torch.randn(M, V, generator=gen, dtype=torch.float64) if bias else None
    targets = (h @ W + (0 if b is None else b[:, None])).argmax(-1)[0]
    targets[: N // 5] = torch.randint(0, V, (N // 5,), generator=gen)        # some examples the readout gets wrong
    core = ace.extract(h, W @ W.transpose(1, 2))
    if mean_zero:
        core = ace.Core(basis=core.basis, sigma=core.sigma, mean=torch.zeros_like(core.mean))
    return core, h, W, b, targets


@pytest.mark.parametrize("mean_zero, bias", [(False, True), (True, True), (False, False)])
def test_linear_ablation_curves_are_the_per_rank_ablations(mean_zero, bias):
    core, h, W, b, targets = _linear_ablation_setup(mean_zero=mean_zero, bias=bias)

    def accuracy(x):
        return ((x @ W + (0 if b is None else b[:, None])).argmax(-1) == targets).float().mean(-1)

    ranks = list(range(11))
    keep, rem = ace.linear_ablation_curves(core, h, W, b, targets, ranks)
    ref_keep, ref_rem = ace.ablation_curves(core, h, accuracy, ranks)       # the per-rank projections
    assert torch.equal(keep, ref_keep) and torch.equal(rem, ref_rem)
    assert keep.shape == (3, 11) and len(set(keep[0].tolist())) > 3         # the curves move with the rank
    shuffled = [7, 0, 3, 10, 3]                                             # any order, repeats allowed
    k2, r2 = ace.linear_ablation_curves(core, h, W, b, targets, shuffled)
    assert torch.equal(k2, keep[:, shuffled]) and torch.equal(r2, rem[:, shuffled])


def test_ablation_curves_keep_a_nonlinear_readout_exact():
    core, h, W, _, targets = _linear_ablation_setup(bias=False)

    def accuracy(x):                                                       # not affine: the scan does not apply
        return (torch.tanh(x @ W).square().argmax(-1) == targets).float().mean(-1)

    keep, rem = ace.ablation_curves(core, h, accuracy, [0, 4, 10])
    for j, r in enumerate([0, 4, 10]):
        q = core.basis[..., :r]
        proj = q @ q.transpose(1, 2)
        centred = h - core.mean[:, None]
        torch.testing.assert_close(keep[:, j], accuracy(core.mean[:, None] + centred @ proj), rtol=0, atol=0)
        torch.testing.assert_close(rem[:, j], accuracy(h - centred @ proj), rtol=0, atol=0)


def test_linear_ablation_curves_reject_bad_shapes_and_ranks():
    core, h, W, b, targets = _linear_ablation_setup(M=2, N=20)
    with pytest.raises(ValueError, match=r"weight \(M, D, V\)"):
        ace.linear_ablation_curves(core, h, W[:, :3], b, targets, [0, 1])
    with pytest.raises(ValueError, match="targets must be"):
        ace.linear_ablation_curves(core, h, W, b, targets[:5], [0, 1])
    with pytest.raises(ValueError, match="ranks must be a non-empty list of ranks in 0..10"):
        ace.linear_ablation_curves(core, h, W, b, targets, [0, 11])


def test_rank_rules_pick_first_qualifying_rank():
    ranks = [0, 1, 2, 3]
    keep = torch.tensor([[0.2, 0.5, 0.9, 0.9995], [0.2, 0.2, 0.2, 0.2]])
    assert ace.sufficient_rank(keep, torch.tensor([1.0, 1.0]), ranks).tolist() == [3, -1]
    remove = torch.tensor([[0.9, 0.5, 0.05, 0.01], [0.9, 0.01, 0.0, 0.0]])
    assert ace.necessary_rank(remove, 0.05, ranks).tolist() == [2, 1]


def test_fit_operators_recover_known_dynamics():
    A = torch.tensor([[0.75, -0.25], [0.25, 0.75]], dtype=torch.float64)
    z = torch.randn(1, 4000, 2, dtype=torch.float64)
    torch.testing.assert_close(ace.fit_transition_operator(z, z @ A.T)[0], A)
    theta = 2 * np.pi / 7
    rot = torch.tensor([[np.cos(theta), np.sin(theta)], [-np.sin(theta), np.cos(theta)]])
    means = torch.stack([torch.tensor([np.cos(c * theta), np.sin(c * theta)]) for c in range(7)]) + 3.0
    fit = ace.fit_shift_operator(means)                  # an offset is centred away; the basis is a rotation
    torch.testing.assert_close(fit.basis @ fit.operator @ fit.basis.T, rot, atol=1e-10, rtol=0)


def test_eigenvalue_error_matches_brute_force_matching():
    rng = np.random.default_rng(0)
    fitted = rng.standard_normal(4) + 1j * rng.standard_normal(4)
    ref = rng.standard_normal(4) + 1j * rng.standard_normal(4)
    # the assignment minimises the total cost; among optimal assignments the reported value is its max
    best = min(itertools.permutations(range(4)), key=lambda p: sum(abs(fitted[i] - ref[p[i]]) for i in range(4)))
    assert ace.eigenvalue_error(fitted, ref) == pytest.approx(max(abs(fitted[i] - ref[best[i]]) for i in range(4)))
    assert ace.eigenvalue_error(fitted[:3], ref) == float("inf")


def test_unit_circle_and_frequency_modes_of_rotations():
    p = 11
    rotation_eigs = np.exp(2j * np.pi * np.array([1, -1, 3, -3, 5]) / p)
    shrunk = 0.5 * np.exp(2j * np.pi * 2 / p)
    assert ace.unit_circle_fraction(np.r_[rotation_eigs, shrunk], p) == pytest.approx(5 / 6)
    assert ace.frequency_modes(np.r_[rotation_eigs, shrunk], p) == [1, 3, 5]
    # the operator c -> c+1 on the full Fourier basis of Z_p has every mode 0..floor(p/2)
    shift = np.roll(np.eye(p), 1, axis=1)
    assert ace.frequency_modes(np.linalg.eigvals(shift), p) == list(range(p // 2 + 1))


def test_shift_operator_of_a_noisy_rotation_code():
    p, k = 13, 3
    labels = torch.arange(p).repeat(20)
    angle = 2 * np.pi * k * labels.double() / p
    z = torch.stack([torch.cos(angle), torch.sin(angle)], 1) + 0.01 * torch.randn(len(labels), 2, dtype=torch.float64)
    fit = ace.shift_operator(z, labels, p)
    expected = np.exp(2j * np.pi * k / p * np.array([1, -1]))
    assert ace.eigenvalue_error(fit.eigenvalues, expected) < 0.01
    assert ace.frequency_modes(fit.eigenvalues, p) == [k]
    assert fit.r2 > 0.99


def _rotation_code(p, freqs, n_noise, per_class=6, seed=0):
    """Core coordinates z (N, r) and labels (N,): cos/sin of 2πkc/p for each k in freqs (plus a constant
    offset) and n_noise dimensions of noise that cancels exactly in every class mean, mixed by a random rotation."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(p), per_class)
    angles = 2 * np.pi * np.outer(labels, freqs) / p
    signal = np.concatenate([np.cos(angles), np.sin(angles)], 1)
    half = rng.standard_normal((p, per_class // 2, n_noise))
    noise = np.concatenate([half, -half], 1).reshape(-1, n_noise)          # ± pairs: class mean exactly 0
    z = np.concatenate([signal + 0.1 * rng.standard_normal(signal.shape[1]), noise], 1)
    mix = np.linalg.qr(rng.standard_normal((z.shape[1], z.shape[1])))[0]
    return torch.from_numpy(z @ mix), torch.from_numpy(labels)


@pytest.mark.parametrize("freqs, n_noise", [([1, 5, 9], 4), (list(range(1, 27)), 8)])
def test_shift_fit_of_an_exact_rotation_code_is_a_rotation_also_past_p_minus_1_dims(freqs, n_noise):
    p = 53
    z, labels = _rotation_code(p, freqs, n_noise)
    fit = ace.shift_operator(z, labels, p)
    expected = np.exp(2j * np.pi * np.array(freqs + [-f for f in freqs]) / p)
    assert fit.operator.shape == (2 * len(freqs),) * 2                     # the noise dimensions are truncated
    assert fit.r2 == pytest.approx(1.0, abs=1e-10)
    assert ace.eigenvalue_error(fit.eigenvalues, expected) < 1e-8
    assert ace.unit_circle_fraction(fit.eigenvalues, p) == 1.0
    assert ace.frequency_modes(fit.eigenvalues, p) == sorted(freqs)
    if z.shape[1] > p - 1:
        # the same data fitted without centring or truncation (plain lstsq, minimum norm) leaves the
        # unit circle: the noise dimensions and the uncentred direction add eigenvalues near 0
        means = ace.class_means(z, labels, p).numpy()
        plain = np.linalg.lstsq(means, np.roll(means, -1, 0), rcond=None)[0]
        assert ace.unit_circle_fraction(np.linalg.eigvals(plain), p) < 0.9


def test_shift_fit_of_a_random_embedding_matches_sklearn_and_explains_little():
    from sklearn.linear_model import LinearRegression
    from sklearn.metrics import r2_score

    p, r = 53, 5
    means = np.random.default_rng(1).standard_normal((p, r)) + 2.0
    fit = ace.fit_shift_operator(torch.from_numpy(means))
    centred = means - means.mean(0)
    target = np.roll(centred, -1, 0)
    reg = LinearRegression(fit_intercept=False).fit(centred, target)
    assert fit.r2 == pytest.approx(r2_score(target, reg.predict(centred), multioutput="variance_weighted"), abs=1e-10)
    np.testing.assert_allclose(np.sort_complex(fit.eigenvalues), np.sort_complex(np.linalg.eigvals(reg.coef_)),
                               atol=1e-10)
    assert fit.r2 < 0.3


def test_shift_fit_is_exact_once_the_means_span_every_centred_dimension():
    # the shift permutes the classes, so on p − 1 independent centred means it is exactly linear
    p = 11
    fit = ace.fit_shift_operator(torch.randn(p, 15, dtype=torch.float64))
    assert fit.operator.shape == (p - 1, p - 1)
    assert fit.r2 == pytest.approx(1.0, abs=1e-10)
    assert ace.eigenvalue_error(fit.eigenvalues, np.exp(2j * np.pi * np.arange(1, p) / p)) < 1e-8


def test_shift_fit_of_identical_means_is_empty():
    fit = ace.fit_shift_operator(torch.ones(7, 3, dtype=torch.float64))
    assert fit.operator.shape == (0, 0) and fit.eigenvalues.size == 0 and np.isnan(fit.r2)


def test_shift_fit_rejects_bad_input():
    with pytest.raises(ValueError, match="class_means"):
        ace.fit_shift_operator(torch.randn(1, 3))
    with pytest.raises(ValueError, match="rcond"):
        ace.fit_shift_operator(torch.randn(5, 3), rcond=0)
    with pytest.raises(ValueError, match="every class"):
        ace.class_means(torch.randn(4, 2), torch.tensor([0, 0, 1, 1]), 3)


def test_operator_r2_is_sklearn_r2_in_whitened_coordinates_and_coordinate_free():
    from sklearn.metrics import r2_score
    gen = torch.Generator().manual_seed(3)
    A = torch.tensor([[0.6, -0.3, 0.0], [0.2, 0.5, 0.1], [0.0, 0.1, -0.4]], dtype=torch.float64)
    scales = torch.diag(torch.tensor([3.0, 1.0, 0.2], dtype=torch.float64))
    z_now = torch.randn(1, 5000, 3, generator=gen, dtype=torch.float64) @ scales
    z_next = z_now @ A.T + 0.5 * torch.randn(1, 5000, 3, generator=gen, dtype=torch.float64)
    A_fit = ace.fit_transition_operator(z_now, z_next)
    r2 = float(ace.operator_r2(z_now, z_next, A_fit)[0])
    y, pred = z_next[0].numpy(), (z_now[0] @ A_fit[0].T).numpy()
    L = np.linalg.cholesky(np.cov(y.T, bias=True))
    whiten = lambda v: np.linalg.solve(L, v.T).T                    # noqa: E731
    assert r2 == pytest.approx(r2_score(whiten(y), whiten(pred)), abs=1e-10)
    G = torch.randn(3, 3, generator=gen, dtype=torch.float64)     # another basis of the same core
    A_G = ace.fit_transition_operator(z_now @ G.T, z_next @ G.T)
    assert float(ace.operator_r2(z_now @ G.T, z_next @ G.T, A_G)[0]) == pytest.approx(r2, abs=1e-10)


def _chain_model(T: np.ndarray, n_ctx: int, D: int = 10, seed: int = 0):
    """A 1-layer transformer whose logits are exactly log T[x_t] (attention and MLP zeroed), with
    position embeddings that vary in directions the unembedding cannot see."""
    from corekit.models import BatchedTransformer, TransformerConfig
    K = len(T)
    model = BatchedTransformer(TransformerConfig(vocab=K, n_ctx=n_ctx, d_model=D, n_heads=1, d_mlp=4,
                                                 norm="none"), [seed])
    gen = torch.Generator().manual_seed(seed)
    basis = torch.linalg.qr(torch.randn(D, D, generator=gen, dtype=torch.float64))[0]
    readout, hidden = basis[:, :K], basis[:, K:]                   # (D, K), (D, D − K)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.p("W_E")[0] = (torch.log(torch.as_tensor(T)) @ readout.T).float()
        model.p("W_pos")[0] = (torch.randn(n_ctx, D - K, generator=gen, dtype=torch.float64) @ hidden.T).float()
        model.p("W_U")[0] = readout.float()
    return model


@pytest.mark.parametrize("T", [
    [[0.05, 0.05, 0.8, 0.1], [0.05, 0.05, 0.8, 0.1], [0.1, 0.05, 0.05, 0.8], [0.5, 0.4, 0.05, 0.05]],
    [[0.6, 0.2, 0.1, 0.1], [0.1, 0.6, 0.2, 0.1], [0.1, 0.1, 0.6, 0.2], [0.2, 0.1, 0.1, 0.6]],
    [[0.5, 0.3, 0.2], [0.5, 0.3, 0.2], [0.1, 0.2, 0.7]],
], ids=["two-states-share-a-row", "full-rank", "rank-1"])
def test_ace_of_a_model_that_realises_a_chain_exactly(T):
    from corekit.tasks import markov
    T = markov.validate_transition(T)
    model = _chain_model(T, n_ctx=24)
    train = markov.sample_sequences(T, 1500, 25, seed=0)
    test = markov.sample_sequences(T, 1500, 25, seed=1)
    with torch.no_grad():
        probs = model(train[:50, :-1])[0].softmax(-1)
    torch.testing.assert_close(probs, torch.as_tensor(T, dtype=torch.float32)[train[:50, :-1]], atol=1e-5, rtol=0)

    result = ace.next_token_ace(model, train[:, :-1], test[:, :-1], test[:, 1:], energy_threshold=0.999)
    r = markov.expected_core_rank(T)
    assert int(result.rank[0]) == r                                 # the energy rank is rank(T − 1πᵀ)
    assert result.core.sigma[0, r] < 1e-5 * result.core.sigma[0, 0]
    torch.testing.assert_close(result.keep_acc[:, r], result.base_acc)  # keep-only at that rank loses nothing
    A = ace.fit_transition_operator(*ace.consecutive_pairs(result.coordinates("train", r)))
    assert ace.eigenvalue_error(torch.linalg.eigvals(A[0]).numpy(), markov.core_eigenvalues(T, r)) < 0.03
    r2 = ace.operator_r2(*ace.consecutive_pairs(result.coordinates("test", r)), A)
    assert float(r2[0]) == pytest.approx(markov.oracle_r2(T), abs=0.015)
