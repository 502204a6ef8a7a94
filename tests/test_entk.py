"""eNTK kernels, kernel-vector products and Lanczos, against independent references (fp64)."""
import math

import pytest
import torch

from corekit import entk
from corekit.models import BatchedQuadraticMLP, BatchedTransformer, TransformerConfig


@pytest.fixture(autouse=True)
def float64():
    """Run every test of this module in float64, then restore the default dtype."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


#: Chapter 02's block (``nn.TransformerEncoderLayer``'s: query, key and value biases), with and without a causal mask.
ENCODER = dict(qkv_bias=True, init="torch")


def _tiny_transformer(norm="none", bias=False, seeds=(0, 1), **extra):
    cfg = TransformerConfig(vocab=6, n_ctx=3, d_model=8, n_heads=2, d_mlp=12, norm=norm, bias=bias, n_out=5, **extra)
    model = BatchedTransformer(cfg, list(seeds)).double()
    if cfg.qkv_bias:                                  # torch's init draws them as zeros: give them values to test
        with torch.no_grad():
            for key, value in model.params.items():
                if key.split("_", 1)[-1] in ("b_Q", "b_K", "b_V"):
                    value.copy_(torch.randn_like(value, dtype=torch.float64))
    return model


def _tokens(n=6, seed=0):
    return torch.randint(0, 6, (n, 3), generator=torch.Generator().manual_seed(seed))


def _naive_full_kernels(model, m, tokens):
    """Per-parameter full kernels (N, C, N, C) from per-example, per-class torch.autograd.grad on the nn.Module."""
    names = {key: key.replace("_", ".", 1) if key[0].isdigit() else key for key in model.params}
    rows = []
    for n in range(tokens.shape[0]):
        logits = model(tokens[n:n + 1])[m, 0, -1]
        per_class = []
        for c in range(logits.shape[0]):
            grads = torch.autograd.grad(logits[c], list(model.params.values()), retain_graph=True, allow_unused=True)
            per_class.append({names[k]: (g[m] if g is not None else torch.zeros_like(v[m])).flatten()
                              for (k, v), g in zip(model.params.items(), grads)})
        rows.append(per_class)
    out = {}
    for name in names.values():
        J = torch.stack([torch.stack([rows[n][c][name] for c in range(len(rows[0]))]) for n in range(len(rows))])
        out[name] = torch.einsum("ncp,mdp->ncmd", J, J)
    return out


def _reduce(K_full, mode):
    """A full kernel (N, C, N, C) reduced to ``mode`` (independent of corekit.entk.contract)."""
    C = K_full.shape[1]
    if mode == "full":
        return K_full
    if mode == "blocks":
        return torch.stack([K_full[:, c, :, c] for c in range(C)])
    if mode == "class_mean":
        return sum(K_full[:, c, :, c] for c in range(C)) / C
    return K_full.sum(dim=(1, 3)) / C**2


@pytest.mark.parametrize("norm,bias,extra", [("none", False, {}), ("pre", True, {}), ("post", True, {}),
                                             ("post", True, ENCODER), ("post", True, ENCODER | {"causal": False})])
def test_functional_transformer_matches_the_module(norm, bias, extra):
    model = _tiny_transformer(norm, bias, **extra)
    tokens = _tokens()
    fm = entk.functional_transformer(model, 1)
    torch.testing.assert_close(fm(fm.params, tokens), model(tokens)[1, :, -1])
    snapshot = {k: v.clone() for k, v in model.state_dict().items()}
    other = _tiny_transformer(norm, bias, seeds=(7, 8), **extra)            # parameters from the snapshot
    from_state = entk.functional_transformer(other, 0, state=snapshot)
    torch.testing.assert_close(from_state(from_state.params, tokens), model(tokens)[0, :, -1])


def test_functional_mlp_matches_the_module():
    model = BatchedQuadraticMLP(6, 5, 3, seeds=[0, 4]).double()
    x = torch.randn(7, 6)
    fm = entk.functional_mlp(model, 1)
    torch.testing.assert_close(fm(fm.params, x), model(x)[1])
    torch.testing.assert_close(fm(fm.params, x),
                               ((x @ model.p("W_1")[1] / math.sqrt(6)) ** 2) @ model.p("W_2")[1] / 5)


@pytest.mark.parametrize("norm,bias,extra", [("none", False, {}), ("pre", True, {}),
                                             ("post", True, ENCODER | {"causal": False})])
def test_structured_kernels_match_naive_autograd_in_every_mode(norm, bias, extra):
    model = _tiny_transformer(norm, bias, **extra)
    tokens = _tokens()
    naive = _naive_full_kernels(model, 1, tokens)
    fm = entk.functional_transformer(model, 1)
    for mode in entk.MODES:
        ours = entk.kernels(fm, tokens, mode=mode, class_chunk=2)
        assert set(ours) == set(naive)
        for name in naive:
            torch.testing.assert_close(ours[name], _reduce(naive[name], mode), atol=1e-10, rtol=1e-9,
                                       msg=f"{mode} kernel of {name}")


@pytest.mark.parametrize("mode", entk.MODES)
def test_every_kernel_strategy_agrees_with_the_others_and_with_naive_autograd(mode):
    """Each named strategy against each other one and against the dense per-example autograd reference."""
    model = _tiny_transformer("pre", True)
    tokens = _tokens(n=4)
    naive = _naive_full_kernels(model, 0, tokens)
    reference = _reduce(sum(naive.values()), mode)
    fm = entk.functional_transformer(model, 0)
    got = {strategy: entk.kernel(strategy, fm, tokens, mode) for strategy in entk.STRATEGIES}
    for strategy, K in got.items():
        torch.testing.assert_close(K, reference, atol=1e-10, rtol=1e-9, msg=f"{strategy} vs naive autograd ({mode})")
    for a in entk.STRATEGIES:
        for b in entk.STRATEGIES:
            torch.testing.assert_close(got[a], got[b], atol=1e-10, rtol=1e-9, msg=f"{a} vs {b} ({mode})")
    with pytest.raises(ValueError, match="strategy must be one of"):
        entk.kernel("finite-differences", fm, tokens, mode)


def test_mlp_kernels_match_finite_differences():
    model = BatchedQuadraticMLP(6, 4, 3, seeds=[3]).double()
    fm = entk.functional_mlp(model)
    x = torch.eye(6)[torch.tensor([[0, 3], [1, 4], [2, 5], [0, 5]])].sum(1)   # one-hot pairs (N=4, 6)
    eps = 1e-6
    jac = {}
    for name, value in fm.params.items():
        cols = []
        for i in range(value.numel()):
            d = torch.zeros_like(value).flatten()
            d[i] = eps
            up = fm({**fm.params, name: value + d.view_as(value)}, x)
            down = fm({**fm.params, name: value - d.view_as(value)}, x)
            cols.append((up - down) / (2 * eps))
        jac[name] = torch.stack(cols, dim=-1)                                  # (N, C, P)
    ours = entk.kernels(fm, x, mode="full")
    for name, J in jac.items():
        torch.testing.assert_close(ours[name], torch.einsum("ncp,mdp->ncmd", J, J), atol=1e-7, rtol=1e-6)


def test_transformer_kernel_matches_finite_differences_along_a_direction():
    model = _tiny_transformer()
    fm = entk.functional_transformer(model, 0)
    tokens = _tokens(4)
    gen = torch.Generator().manual_seed(5)
    # Σ_μ J_μ(x) u_μ by central differences along a random direction u, for every parameter tensor:
    # ⟨J(x) u, J(x') u⟩ averaged over u ~ N(0, I) is K(x, x'); here check J u itself against the Jacobians.
    J = entk.jacobians(fm, fm.params, tokens)
    for name, value in fm.params.items():
        u = torch.randn(value.shape, generator=gen)
        eps = 1e-6
        up, down = fm({**fm.params, name: value + eps * u}, tokens), fm({**fm.params, name: value - eps * u}, tokens)
        fd = (up - down) / (2 * eps)
        torch.testing.assert_close(torch.einsum("ncp,p->nc", J[name].flatten(2), u.flatten()), fd, atol=1e-7, rtol=1e-6)


def test_per_parameter_kernels_sum_to_the_full_kernel():
    model = _tiny_transformer("pre", True)
    fm = entk.functional_transformer(model, 0)
    tokens = _tokens(5, seed=3)
    J = entk.jacobians(fm, fm.params, tokens)
    J_all = torch.cat([j.flatten(2) for j in J.values()], dim=2)            # one Jacobian of every parameter
    for mode in entk.MODES:
        per_param = entk.kernels(fm, tokens, mode=mode)
        torch.testing.assert_close(entk.total(per_param), entk.contract(J_all, mode), atol=1e-10, rtol=1e-9)
    attention = [n for n in fm.params if n.split(".")[-1] in ("W_Q", "W_K", "W_V", "W_O", "b_O")]
    per_param = entk.kernels(fm, tokens, mode="pair_mean", names=attention)
    J_att = torch.cat([J[n].flatten(2) for n in attention], dim=2)
    torch.testing.assert_close(entk.total(per_param), entk.contract(J_att, "pair_mean"))


@pytest.mark.parametrize("mode", entk.MODES)
def test_kernel_vector_products_match_dense_products(mode):
    model = _tiny_transformer()
    fm = entk.functional_transformer(model, 0)
    tokens = _tokens(5, seed=1)
    N, C = 5, 5
    names = ["0.W_in", "W_U"]
    K = entk.total(entk.kernels(fm, tokens, mode=mode, names=names))
    matvec = entk.kernel_matvec(fm, fm.params, tokens, mode=mode, names=names, chunk=4)
    gen = torch.Generator().manual_seed(2)
    shape = {"full": (3, N, C), "blocks": (3, C, N)}.get(mode, (3, N))
    V = torch.randn(shape, generator=gen)
    if mode == "full":
        expected = torch.einsum("ncmd,kmd->knc", K, V)
    elif mode == "blocks":
        expected = torch.einsum("cnm,kcm->kcn", K, V)
    else:
        expected = V @ K.T
    torch.testing.assert_close(matvec(V), expected, atol=1e-10, rtol=1e-9)


def _psd_with_spectrum(values, seed=0):
    gen = torch.Generator().manual_seed(seed)
    n = len(values)
    Q, _ = torch.linalg.qr(torch.randn(n, n, generator=gen))
    return (Q * torch.as_tensor(values)) @ Q.T


def test_lanczos_matches_dense_eigh_eigenvalues_and_subspaces():
    n = 300
    tail = 1e-3 * torch.rand(n - 30, generator=torch.Generator().manual_seed(1))
    values = torch.cat([10.0 * 0.8 ** torch.arange(30.0), tail])
    K = _psd_with_spectrum(values)
    ref_w, ref_V = torch.linalg.eigh(K)
    ref_w, ref_V = ref_w.flip(0), ref_V.flip(1)
    k = 10
    ours = entk.top_eigenpairs(lambda V: V @ K, k, n=n, block_size=4, tol=1e-10)
    assert ours.method == "lanczos" and ours.n_matvecs < n
    torch.testing.assert_close(ours.values, ref_w[:k], rtol=1e-9, atol=0)
    for i in range(k):                                                       # principal angle per vector
        assert abs(float(ours.vectors[:, i] @ ref_V[:, i])) == pytest.approx(1.0, abs=1e-8)
    torch.testing.assert_close(ours.residuals, (K @ ours.vectors - ours.vectors * ours.values).norm(dim=0),
                               atol=1e-10, rtol=1e-6)
    assert float(ours.residuals.max()) <= 1e-10 * float(ref_w[0])
    dense = entk.top_eigenpairs(K, k)
    assert dense.method == "dense"
    torch.testing.assert_close(dense.values, ref_w[:k])


def _blocks(values, rtol=1e-9):
    """Return [(start, stop)] of the runs of equal (to ``rtol`` of the largest) values in a descending (n,) array."""
    out, start = [], 0
    for i in range(1, len(values) + 1):
        if i == len(values) or values[i - 1] - values[i] > rtol * abs(values[0]):
            out.append((start, i))
            start = i
    return out


@pytest.mark.parametrize("k", [1, 10, 64, 120])
def test_dense_top_eigenpairs_match_numpy_eigh_with_degenerate_blocks(k):
    """Values within 1e-12·λ_1 of ``numpy.linalg.eigh``'s; the span of every whole degenerate block within 1e-9
    (projector distance), not its vectors; float32 and float64 input."""
    import numpy as np

    pairs = (40.0 / torch.arange(1.0, 31.0)).repeat_interleave(2)          # cos/sin-like pairs, as in Z_p features
    values = torch.cat([torch.tensor([50.0]), pairs, torch.full((3,), 0.9), torch.linspace(0.8, 0.1, 40),
                        torch.full((16,), 0.01)])                           # a triple, singles, a block of 16
    n = len(values)
    K = _psd_with_spectrum(values, seed=3)
    ref_w, ref_V = np.linalg.eigh(K.numpy())
    ref_w, ref_V = ref_w[::-1], ref_V[:, ::-1]
    whole = [(a, b) for a, b in _blocks(ref_w) if b <= k]
    assert [b - a for a, b in whole][:3] == [1, 2, 2][:k] and (k < n or len(whole) == 1 + 30 + 1 + 40 + 1)
    for dtype in (torch.float64, torch.float32):
        eig = entk.dense_eigenpairs(K.to(dtype), k)
        assert eig.values.dtype == torch.float64 and eig.vectors.shape == (n, k) and eig.method == "dense"
        Kd = K.to(dtype).double()
        w_ref = ref_w if dtype == torch.float64 else np.linalg.eigvalsh(((Kd + Kd.T) / 2).numpy())[::-1]
        np.testing.assert_allclose(eig.values.numpy(), w_ref[:k], rtol=0, atol=1e-12 * w_ref[0])
        torch.testing.assert_close(eig.vectors.T @ eig.vectors, torch.eye(k), rtol=0, atol=1e-12)
        torch.testing.assert_close(eig.residuals, (Kd @ eig.vectors - eig.vectors * eig.values).norm(dim=0),
                                   rtol=1e-6, atol=1e-13)
        assert float(eig.residuals.max()) <= 1e-12 * w_ref[0]
        if dtype == torch.float64:
            for a, b in whole:
                P = eig.vectors[:, a:b] @ eig.vectors[:, a:b].T
                R = torch.from_numpy(ref_V[:, a:b].copy())
                assert float(torch.linalg.matrix_norm(P - R @ R.T, ord=2)) <= 1e-9


@pytest.mark.parametrize("k", [5, 60])                 # n = 240: a partial (k ≤ n/6) and a full solve
def test_dense_eigenpairs_in_float32_hold_to_the_float64_reference(k):
    """Solving in float32 (the eNTK authors' precision): eigenvalues within 4·n·ε₃₂·λ_1 of float64 ``eigh`` (the
    backward error of a float32 symmetric eigensolver is about n·ε₃₂·‖K‖), and each separated eigenvector's
    projector within 4·n·ε₃₂·λ_1 / gap of the reference."""
    import numpy as np

    values = torch.cat([torch.tensor([50.0, 20.0, 10.0]), torch.linspace(8.0, 0.1, 237)])
    n = len(values)
    K = _psd_with_spectrum(values, seed=5)
    ref_w, ref_V = np.linalg.eigh(K.numpy())
    ref_w, ref_V = ref_w[::-1], ref_V[:, ::-1]
    eig = entk.dense_eigenpairs(K, k, dtype=torch.float32)
    eps32 = float(torch.finfo(torch.float32).eps)
    assert eig.values.dtype == torch.float32 and eig.vectors.shape == (n, k)
    np.testing.assert_allclose(eig.values.double().numpy(), ref_w[:k], rtol=0, atol=4 * n * eps32 * ref_w[0])
    for j in range(3):                                   # gaps of 30, 10 and 2 below λ_1, λ_2, λ_3
        gap = min(abs(ref_w[j] - ref_w[j + 1]), abs(ref_w[j - 1] - ref_w[j]) if j else np.inf)
        v = eig.vectors[:, j].double()
        cos2 = float((v @ torch.from_numpy(ref_V[:, j].copy())) ** 2 / (v @ v))
        assert 1 - cos2 <= (4 * n * eps32 * ref_w[0] / gap) ** 2 + 1e-10
    with pytest.raises(ValueError, match="dtype must be torch.float32 or torch.float64"):
        entk.dense_eigenpairs(K, k, dtype=torch.float16)


def test_dense_eigenpairs_of_the_whole_spectrum_and_bad_input():
    K = _psd_with_spectrum(torch.tensor([4.0, 3.0, 2.0, 1.0, 0.0]))
    eig = entk.dense_eigenpairs(K, 5)
    torch.testing.assert_close(eig.values, torch.tensor([4.0, 3.0, 2.0, 1.0, 0.0]), rtol=0, atol=1e-13)
    with pytest.raises(ValueError, match="k must be in 1..5"):
        entk.dense_eigenpairs(K, 6)
    with pytest.raises(ValueError, match="K must be a square matrix"):
        entk.dense_eigenpairs(K[:3], 2)


def test_lanczos_recovers_degenerate_cos_sin_pairs():
    # a symmetric circulant on Z_n: eigenvalue pairs with cos / sin eigenvectors, like Fourier features
    n = 64
    j = torch.arange(n)
    c = torch.zeros(n)
    for freq, amp in ((1, 5.0), (2, 3.0), (3, 2.0), (5, 1.5), (7, 1.0)):
        c += amp * torch.cos(2 * math.pi * freq * j / n)
    K = c[(j[:, None] - j[None, :]) % n] / n
    ours = entk.lanczos(lambda V: V @ K, n, 10, block_size=2, tol=1e-10)
    expected = torch.tensor([5.0, 5.0, 3.0, 3.0, 2.0, 2.0, 1.5, 1.5, 1.0, 1.0]) / 2
    torch.testing.assert_close(ours.values, expected, atol=1e-9, rtol=0)
    for pair, freq in enumerate((1, 2, 3, 5, 7)):
        F = torch.stack([torch.cos(2 * math.pi * freq * j / n), torch.sin(2 * math.pi * freq * j / n)], 1)
        Qf, _ = torch.linalg.qr(F)
        cosines = torch.linalg.svdvals(Qf.T @ ours.vectors[:, 2 * pair:2 * pair + 2])
        assert float(cosines.min()) == pytest.approx(1.0, abs=1e-8)          # both principal angles ≈ 0


def test_lanczos_on_a_matrix_free_kernel_matches_the_dense_kernel():
    model = _tiny_transformer()
    fm = entk.functional_transformer(model, 0)
    tokens = torch.cartesian_prod(torch.arange(5), torch.arange(5), torch.tensor([5]))   # 25 inputs
    K = entk.total(entk.kernels(fm, tokens, mode="class_mean"))
    matvec = entk.kernel_matvec(fm, fm.params, tokens, mode="class_mean")
    ours = entk.top_eigenpairs(matvec, 6, n=25, block_size=3, tol=1e-10)
    ref = torch.linalg.eigvalsh(K).flip(0)[:6]
    torch.testing.assert_close(ours.values, ref, rtol=1e-8, atol=1e-12)


def test_cliff_edges_find_the_largest_drops():
    values = torch.tensor([50.0] + [10.0] * 8 + [3.0] * 8 + [1.0, 0.9, 0.8, 0.7])
    assert entk.cliff_edges(values, 2) == [9, 17]
    assert entk.cliff_edges(values, 1) == [9]


def test_bad_parameters_raise_clear_errors():
    model = _tiny_transformer()
    fm = entk.functional_transformer(model, 0)
    tokens = _tokens()
    with pytest.raises(ValueError, match="mode must be one of"):
        entk.kernels(fm, tokens, mode="diagonal")
    with pytest.raises(ValueError, match="names must list parameters"):
        entk.kernels(fm, tokens, names=["W_X"])
    with pytest.raises(ValueError, match="block_size must be an integer >= 2"):
        entk.lanczos(lambda V: V, 10, 2, block_size=1)
    with pytest.raises(ValueError, match="k must be in 1..n=10"):
        entk.lanczos(lambda V: V, 10, 11)
    with pytest.raises(ValueError, match="model index m=2 is out of range"):
        entk.functional_transformer(model, 2)
    with pytest.raises(ValueError, match=r"V must be \(k, 6\)"):
        entk.kernel_matvec(fm, fm.params, tokens, mode="pair_mean")(torch.zeros(2, 5))
    with pytest.raises(ValueError, match="n \\(the operator's dimension\\) is required"):
        entk.top_eigenpairs(lambda V: V, 2)


def test_group_eigenpairs_sum_the_groups_kernels():
    model = _tiny_transformer()
    fm = entk.functional_transformer(model, 0)
    tokens = _tokens(6, seed=4)
    per_param = entk.kernels(fm, tokens, mode="pair_mean")
    groups = {"mlp": ["0.W_in", "0.W_out"], "unembed": ["W_U"]}
    eig = entk.group_eigenpairs(per_param, groups, 3)
    ref = torch.linalg.eigvalsh(per_param["0.W_in"] + per_param["0.W_out"]).flip(0)[:3]
    torch.testing.assert_close(eig["mlp"].values, ref)
    assert eig["unembed"].vectors.shape == (6, 3)


def test_nanda_initialisation_rescales_the_same_draws():
    """init="nanda" (the eNTK paper's transformer, after Nanda et al. 2023): σ = 1/√d_model, W_U σ = 1/√vocab."""
    kw = dict(vocab=30, n_ctx=3, d_model=64, n_heads=4, d_mlp=256, norm="none", bias=False, n_out=29)
    ref = BatchedTransformer(TransformerConfig(**kw), seeds=[2, 3])
    ours = BatchedTransformer(TransformerConfig(**kw, init="nanda"), seeds=[2, 3])
    fan_in_scale = {"W_E": 1.0, "W_pos": 1.0, "0.W_Q": 64, "0.W_K": 64, "0.W_V": 64, "0.W_O": 64, "0.W_in": 64,
                    "0.W_out": 256, "W_U": 64}                               # what the default divides by (squared)
    for name, fan_in in fan_in_scale.items():
        target = 30 if name == "W_U" else 64
        expected = ref.p(name) * math.sqrt(fan_in) / math.sqrt(target)        # same N(0, 1) draws, other scale
        torch.testing.assert_close(ours.p(name), expected, rtol=1e-6, atol=0)
    W_E = ours.p("W_E").detach()
    assert float(W_E.std()) == pytest.approx(1 / 8, rel=0.05)
    assert float(ref.p("W_E").detach().norm() / W_E.norm()) == pytest.approx(8.0, rel=1e-6)   # 8× the authors' norm
    with pytest.raises(ValueError, match="init must be one of"):
        TransformerConfig(vocab=6, n_ctx=3, init="xavier")


def test_lanczos_relative_to_each_eigenvalue():
    # a steep spectrum: the small pairs converge relative to λ_1 long before relative to their own λ
    n = 400
    values = torch.cat([10.0 * 0.3 ** torch.arange(10.0), 1e-4 * torch.rand(n - 10, generator=torch.Generator().manual_seed(2))])
    K = _psd_with_spectrum(values, seed=3)
    ref = torch.linalg.eigvalsh(K).flip(0)[:10]
    top = entk.lanczos(lambda V: V @ K, n, 10, block_size=2, tol=1e-6, relative_to="top")
    each = entk.lanczos(lambda V: V @ K, n, 10, block_size=2, tol=1e-6, relative_to="each")
    true_res = (K @ each.vectors - each.vectors * each.values).norm(dim=0)
    assert float((true_res / ref).max()) <= 1e-6
    assert float((top.residuals / top.values).max()) > 1e-3 and float((top.residuals / top.values[0]).max()) <= 1e-6
    assert each.n_matvecs > top.n_matvecs
    torch.testing.assert_close(each.values, ref, rtol=1e-9, atol=0)
    with pytest.raises(ValueError, match="relative_to must be"):
        entk.lanczos(lambda V: V @ K, n, 10, relative_to="max")
