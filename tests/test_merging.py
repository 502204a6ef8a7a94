"""The merging toolbox against independent computations: invariances of the function, planted permutations and
rotations recovered, stitching a model to itself, the ends of an interpolation path; Git Re-Basin (weight and
activation matching with the residual permutation) and the whole-symmetry alignment recovering a model from a copy
carried through its symmetries, and never changing what the aligned model computes."""
import numpy as np
import pytest
import torch

from corekit import ace
from corekit import merging as mg
from corekit.models import BatchedTransformer, TransformerConfig

P = 7
CONFIG = TransformerConfig.entk_authors(P, d_model=16, n_heads=2, d_mlp=24)


def tokens_labels():
    a, b = torch.meshgrid(torch.arange(P), torch.arange(P), indexing="ij")
    tokens = torch.stack([a.flatten(), b.flatten(), torch.full((P * P,), P)], dim=1)     # (p², 3): a, b, "="
    return tokens, (a.flatten() + b.flatten()) % P


def two_models(config=CONFIG, seeds=(0, 1)):
    model = BatchedTransformer(config, seeds=list(seeds)).double().eval()
    return model, mg.model_states(model)


def logits_of(config, state, tokens):
    return mg.stacked_model(config, [state])(tokens, last=1)[0, :, -1]


def test_a_rotation_of_the_stream_leaves_the_logits_unchanged():
    tokens, _ = tokens_labels()
    _, (a, _) = two_models()
    R = mg.random_rotation(CONFIG.d_model, seed=3)
    with torch.no_grad():
        before, after = logits_of(CONFIG, a, tokens), logits_of(CONFIG, mg.rotate_stream(a, R, CONFIG), tokens)
    assert torch.allclose(before, after, rtol=0, atol=1e-12 * before.abs().max())
    assert not torch.allclose(a["W_E"], mg.rotate_stream(a, R, CONFIG)["W_E"])


def test_a_rotation_is_refused_for_a_model_with_layer_norm():
    config = TransformerConfig(vocab=P + 1, n_ctx=3, d_model=16, n_heads=2, d_mlp=24, norm="post")
    _, (a, _) = two_models(config)
    with pytest.raises(ValueError, match="config.norm: .*got 'post'"):
        mg.rotate_stream(a, torch.eye(16, dtype=torch.float64), config)


def test_weight_matching_recovers_a_planted_permutation_exactly():
    tokens, _ = tokens_labels()
    _, (a, _) = two_models()
    gen = torch.Generator().manual_seed(5)
    planted = mg.UnitPermutation([torch.randperm(CONFIG.d_mlp, generator=gen).numpy()],
                                 [torch.randperm(CONFIG.n_heads, generator=gen).numpy()])
    b = mg.permute_units(a, planted)
    with torch.no_grad():
        assert torch.allclose(logits_of(CONFIG, a, tokens), logits_of(CONFIG, b, tokens), atol=1e-12)
    found = mg.match_units(a, b)
    restored = mg.permute_units(b, found)
    assert all(torch.equal(restored[k], a[k]) for k in a)
    assert np.array_equal(planted.mlp[0][found.mlp[0]], np.arange(CONFIG.d_mlp))


def test_block_rotation_recovers_a_planted_rotation_of_the_stream():
    gen = torch.Generator().manual_seed(0)
    h_b = torch.randn(200, 8, generator=gen, dtype=torch.float64) * torch.linspace(3, 0.5, 8, dtype=torch.float64)
    S = mg.random_rotation(8, seed=1)
    h_a = h_b @ S
    q_b = mg.principal_components(h_b, 3)
    R = mg.block_rotation(h_a, h_b, S.T @ q_b, q_b)
    assert torch.allclose(R @ R.T, torch.eye(8, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(h_b @ R, h_a, atol=1e-10)


def test_the_core_of_a_rotated_model_is_the_rotated_core():
    tokens, _ = tokens_labels()
    model, (a, _) = two_models()
    R = mg.random_rotation(CONFIG.d_model, seed=2)
    rotated = mg.stacked_model(CONFIG, [a, mg.rotate_stream(a, R, CONFIG)])
    x, core = mg.core_before_mlp(rotated, tokens, P)
    assert torch.allclose(x[0] @ R, x[1], atol=1e-10)
    sigma = core.sigma[0, :8]
    r = int(torch.argmax(sigma[:-1] / sigma[1:])) + 1                   # a rank at a clear gap: the span is stable
    q0, q1 = core.q(r)
    assert torch.allclose(R.T @ q0 @ q0.T @ R, q1 @ q1.T, atol=1e-6)    # the same subspace, rotated


def _near_ties(logits: torch.Tensor, tol: float = 1e-4) -> int:
    """Return how many rows of logits (..., n, classes) have their top two within ``tol``: the predictions that
    float32 rounding in another summation order may flip."""
    top2 = logits.topk(2, -1).values
    return int(((top2[..., 0] - top2[..., 1]) < tol).sum())


def test_stitching_a_model_to_itself_through_its_core_is_keep_only_and_at_full_rank_the_model():
    tokens, labels = tokens_labels()
    model, (a, _) = two_models()
    one = mg.stacked_model(CONFIG, [a])
    x, core = mg.core_before_mlp(one, tokens, P)
    readout = mg.mlp_readout(one, P)
    everything = torch.arange(P * P)
    n = len(labels)
    own = float((readout(x).argmax(-1)[0] == labels).double().mean())
    for r in (2, 5):
        q = core.q(r)[0]
        kept = ace.keep_only(x, core.q(r), x.mean(1))
        keep_acc = float((readout(kept).argmax(-1)[0] == labels).double().mean())
        identity = torch.eye(r, dtype=torch.float64)
        stitched = mg.stitch_accuracy(x[0], x[0], q, q, readout, labels, everything, everything, M=identity)
        assert abs(stitched - keep_acc) <= _near_ties(readout(kept)) / n + 1e-12, r
    full = core.q(CONFIG.d_model)[0]
    stitched = mg.stitch_accuracy(x[0], x[0], full, full, readout, labels, everything, everything)
    assert abs(stitched - own) <= _near_ties(readout(x)) / n + 1e-12


def test_the_ends_of_an_interpolation_path_are_the_two_models():
    tokens, labels = tokens_labels()
    model, (a, b) = two_models()
    acc, loss = mg.path_metrics(CONFIG, a, b, [0.0, 0.5, 1.0], tokens, labels, P)
    _, acc_ab, loss_ab = mg.logits_and_metrics(model, tokens, labels, P)
    assert torch.allclose(acc[[0, 2]], acc_ab) and torch.allclose(loss[[0, 2]], loss_ab, atol=1e-12)


def test_the_barrier_is_the_largest_fall_below_the_line_between_the_ends():
    alphas = [0, 0.25, 0.5, 0.75, 1]
    assert mg.barrier([1.0, 0.9, 0.2, 0.8, 0.9], alphas) == pytest.approx(0.95 - 0.2)
    assert mg.barrier([1.0, 1.0, 1.0, 1.0, 1.0], alphas) == 0
    assert mg.barrier([0.1, 0.5, 2.0, 0.5, 0.3], alphas, higher_is_better=False) == pytest.approx(2.0 - 0.2)
    with pytest.raises(ValueError, match="alphas: expected a grid from 0 to 1"):
        mg.barrier([1, 2], [0.1, 1])


def test_a_stack_of_models_gives_each_model_what_it_gives_alone():
    tokens, labels = tokens_labels()
    _, states = two_models(seeds=(0, 1, 2))
    alphas = [0.0, 0.3, 0.7, 1.0]
    acc, loss = mg.path_metrics(CONFIG, states[0], states[2], alphas, tokens, labels, P)
    for k, alpha in enumerate(alphas):
        alone = mg.stacked_model(CONFIG, [mg.interpolate(states[0], states[2], alpha)])
        _, acc_alone, loss_alone = mg.logits_and_metrics(alone, tokens, labels, P)
        assert acc[k] == acc_alone[0] and torch.allclose(loss[k], loss_alone[0], rtol=1e-12)
    stacked = mg.stacked_model(CONFIG, states)
    logits, _, _ = mg.logits_and_metrics(stacked, tokens, labels, P)
    for m, state in enumerate(states):
        assert torch.allclose(logits[m], mg.logits_and_metrics(mg.stacked_model(CONFIG, [state]), tokens, labels, P)[0][0],
                              rtol=0, atol=1e-12)
    assert not torch.allclose(logits[0], logits[1])


# --- Git Re-Basin with the residual permutation, and the whole symmetry group --------------------------------------
# The models are float32, as the chapter trains them; the alignments compute their scores, Procrustes maps and
# activations in float64 and cast back, so "equal" below means equal to float32 rounding: EPS (float32's) times a
# small factor times the tensor's scale. The planted symmetries are applied with rotate_stream (a permutation matrix
# or a Haar rotation), permute_units and the test's own within-head maps, not with the functions under test.

SYMMETRY_CONFIGS = {
    "chapter": TransformerConfig.entk_authors(P, d_model=16, n_heads=4, d_mlp=32),
    "biases": TransformerConfig(vocab=P + 1, n_ctx=3, d_model=16, n_heads=4, d_mlp=32, norm="none", bias=True,
                                qkv_bias=True),
}
EPS = torch.finfo(torch.float32).eps
ALPHAS = [0.0, 0.25, 0.5, 0.75, 1.0]


def float32_model(config, seed):
    """One random float32 model's parameters, its biases (0 in a fresh model) drawn at random so that they count."""
    state = mg.model_states(BatchedTransformer(config, seeds=[seed]).eval())[0]
    gen = torch.Generator().manual_seed(1000 + seed)
    return {k: 0.3 * torch.randn(v.shape, generator=gen) if k.startswith("b_") or "_b_" in k else v
            for k, v in state.items()}


def permutation_matrix(sigma):
    """Return P (n, n) with x P = x[sigma]: coordinate j of the permuted stream is coordinate sigma[j]."""
    P = torch.zeros(len(sigma), len(sigma), dtype=torch.float64)
    P[torch.as_tensor(sigma), torch.arange(len(sigma))] = 1
    return P


def haar(n, gen, batch):
    """Return ``batch`` Haar-random orthogonal matrices (batch, n, n) in float64."""
    q, r = torch.linalg.qr(torch.randn(batch, n, n, generator=gen, dtype=torch.float64))
    return q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))[..., None, :]


def carried(a, config, R, units, heads, M=None, N=None):
    """Return A's stream rotated by R, its units and heads put in the orders ``units``, ``heads``, then each head's
    within-head maps M, N (H, e, e) applied (W_Q, W_K, b_Q, b_K ↦ (·) M; W_V, b_V ↦ (·) N; W_O ↦ Nᵀ W_O)."""
    b = dict(mg.permute_units(mg.rotate_stream(a, R, config), mg.UnitPermutation([units], [heads])))
    for w, X in (("Q", M), ("K", M), ("V", N)):
        for name in (f"0_W_{w}", f"0_b_{w}"):
            if X is not None and name in b:
                b[name] = torch.einsum("h...e,hef->h...f", b[name].double(), X).float()
    if N is not None:
        b["0_W_O"] = (N.mT @ b["0_W_O"].double()).float()
    return b


def planted(config, seed):
    """Return (σ (D,), unit order (d_mlp,), head order (H,)) drawn from ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randperm(n, generator=gen).numpy() for n in (config.d_model, config.d_mlp, config.n_heads))


def logits_no_grad(config, state, tokens):
    with torch.no_grad():
        return logits_of(config, state, tokens)


def assert_same_function(config, x, y, tokens, factor=100):
    lx, ly = logits_no_grad(config, x, tokens), logits_no_grad(config, y, tokens)
    assert torch.allclose(lx, ly, rtol=0, atol=factor * EPS * float(lx.abs().max()))


def assert_linearly_connected(config, a, b, tokens, labels):
    acc, loss = mg.path_metrics(config, a, b, ALPHAS, tokens, labels, P)
    assert mg.barrier(acc, ALPHAS) <= 1e-6 and mg.barrier(loss, ALPHAS, higher_is_better=False) <= 1e-6


@pytest.mark.parametrize("kind", SYMMETRY_CONFIGS)
def test_activations_are_the_models_own_streams_hidden_units_and_heads(kind):
    config, (tokens, _) = SYMMETRY_CONFIGS[kind], tokens_labels()
    a = float32_model(config, 0)
    act = mg.activations(config, a, tokens)
    assert act.streams.shape == (3, P * P, 3, config.d_model) and act.heads[0].shape == (4, P * P, 3, 16)
    with torch.no_grad():
        model = mg.stacked_model(config, [a])
        final = model.residual(tokens)[0].double()
        assert torch.allclose(act.streams[-1], final, rtol=0, atol=100 * EPS * float(final.abs().max()))
        if kind == "chapter":
            before = mg.stream_before_mlp(model, tokens)[0].double()
            assert torch.allclose(act.streams[1][:, -1], before, rtol=0, atol=100 * EPS * float(before.abs().max()))
    b_O = a.get("0_b_O", torch.zeros(1)).double()
    assert torch.allclose(act.heads[0].sum(0) + b_O, act.streams[1] - act.streams[0], atol=1e-12)
    b_in = a.get("0_b_in", torch.zeros(1)).double()
    assert torch.equal(act.hidden[0], torch.relu(act.streams[1] @ a["0_W_in"].double() + b_in))
    with pytest.raises(ValueError, match="config.norm: expected a LayerNorm-free model"):
        mg.activations(TransformerConfig(vocab=P + 1, n_ctx=3, d_model=16, n_heads=4, d_mlp=32), a, tokens)


@pytest.mark.parametrize("kind", SYMMETRY_CONFIGS)
def test_rebasin_weight_matching_recovers_a_planted_permutation_of_the_stream_units_and_heads(kind):
    config, (tokens, labels) = SYMMETRY_CONFIGS[kind], tokens_labels()
    a = float32_model(config, 0)
    sigma, units, heads = planted(config, 1)
    b = carried(a, config, permutation_matrix(sigma), units, heads)
    assert_same_function(config, a, b, tokens)
    assert not torch.equal(a["W_E"], b["W_E"])
    perm, objective = mg.rebasin_weight_matching(a, b, seed=2)
    assert np.array_equal(perm.residual, np.argsort(sigma))
    assert np.array_equal(perm.mlp[0], np.argsort(units)) and np.array_equal(perm.heads[0], np.argsort(heads))
    assert len(objective) > len(perm.groups()) and np.all(np.diff(objective) >= 0)
    assert objective[-1] == pytest.approx(mg.weight_inner_product(a, a), rel=1e-12)
    b_aligned = mg.permute_model(b, perm)
    assert all(torch.equal(b_aligned[k], a[k]) for k in a)            # index moves only: bit for bit
    assert_linearly_connected(config, a, b_aligned, tokens, labels)


@pytest.mark.parametrize("kind", SYMMETRY_CONFIGS)
def test_rebasin_activation_matching_recovers_the_same_permutations(kind):
    config, (tokens, labels) = SYMMETRY_CONFIGS[kind], tokens_labels()
    a = float32_model(config, 0)
    dead = (mg.activations(config, a, tokens).hidden[0].flatten(0, 1).amax(0) == 0).sum()
    assert dead <= 1                                  # units dead on every input could be matched in any order
    sigma, units, heads = planted(config, 3)
    b = carried(a, config, permutation_matrix(sigma), units, heads)
    perm = mg.rebasin_activation_matching(a, b, config, tokens)
    assert np.array_equal(perm.residual, np.argsort(sigma))
    assert np.array_equal(perm.mlp[0], np.argsort(units)) and np.array_equal(perm.heads[0], np.argsort(heads))
    b_aligned = mg.permute_model(b, perm)
    assert all(torch.equal(b_aligned[k], a[k]) for k in a)
    assert_linearly_connected(config, a, b_aligned, tokens, labels)


@pytest.mark.parametrize("kind", SYMMETRY_CONFIGS)
def test_symmetry_alignment_recovers_a_model_from_a_rotated_permuted_copy_with_within_head_maps(kind):
    config, (tokens, labels) = SYMMETRY_CONFIGS[kind], tokens_labels()
    a = float32_model(config, 0)
    gen = torch.Generator().manual_seed(4)
    _, units, heads = planted(config, 4)
    S = mg.random_rotation(config.d_model, seed=5)                      # orthogonal, not a permutation
    M, N = haar(config.d_head, gen, config.n_heads), haar(config.d_head, gen, config.n_heads)
    b = carried(a, config, S, units, heads, M, N)
    assert_same_function(config, a, b, tokens)
    R = mg.stream_rotation(a, b, config, tokens)
    assert torch.allclose(R, S.T, rtol=0, atol=100 * EPS)
    b_aligned = mg.symmetry_alignment(a, b, config, tokens)
    for k in a:                                                          # float32 rounding of the weights, scaled
        assert torch.allclose(b_aligned[k], a[k], rtol=0, atol=100 * EPS * float(a[k].abs().max())), k
    assert_same_function(config, b_aligned, b, tokens)
    assert_linearly_connected(config, a, b_aligned, tokens, labels)


def test_align_heads_undoes_planted_within_head_maps_and_keeps_the_function():
    config, (tokens, _) = SYMMETRY_CONFIGS["biases"], tokens_labels()
    a = float32_model(config, 0)
    gen = torch.Generator().manual_seed(6)
    M, N = haar(config.d_head, gen, config.n_heads), haar(config.d_head, gen, config.n_heads)
    _, _, heads = planted(config, 6)
    b = carried(a, config, torch.eye(config.d_model, dtype=torch.float64), np.arange(config.d_mlp), heads, M, N)
    assert not torch.allclose(b["0_W_Q"], a["0_W_Q"][heads], atol=1e-3)   # the maps changed the head weights
    assert_same_function(config, a, b, tokens)
    b_aligned = mg.align_heads(a, b)
    for k in a:
        assert torch.allclose(b_aligned[k], a[k], rtol=0, atol=100 * EPS * float(a[k].abs().max())), k
    assert_same_function(config, b_aligned, b, tokens)
    other = mg.align_heads(float32_model(config, 7), b)                  # a different model's heads as the target
    assert_same_function(config, other, b, tokens)
    assert not torch.allclose(other["0_W_V"], b["0_W_V"], atol=1e-3)


@pytest.mark.parametrize("kind", SYMMETRY_CONFIGS)
def test_every_alignment_of_two_different_models_keeps_what_b_computes(kind):
    config, (tokens, _) = SYMMETRY_CONFIGS[kind], tokens_labels()
    a, b = float32_model(config, 10), float32_model(config, 11)
    perm, objective = mg.rebasin_weight_matching(a, b, seed=0)
    assert np.all(np.diff(objective) >= 0) and objective[-1] > objective[0]
    assert objective[-1] == pytest.approx(mg.weight_inner_product(a, mg.permute_model(b, perm)), rel=1e-12)
    alignments = {"weight matching": mg.permute_model(b, perm),
                  "activation matching": mg.permute_model(b, mg.rebasin_activation_matching(a, b, config, tokens)),
                  "heads": mg.align_heads(a, b)}
    for basis in mg.ROTATION_BASES:
        alignments[basis] = mg.symmetry_alignment(a, b, config, tokens, basis=basis, rank=4, n_classes=P, seed=8)
    for name, b_aligned in alignments.items():
        assert set(b_aligned) == set(b), name
        assert not torch.allclose(b_aligned["0_W_Q"], b["0_W_Q"]), name      # the alignment did something
        lb, la = logits_no_grad(config, b, tokens), logits_no_grad(config, b_aligned, tokens)
        assert torch.allclose(la, lb, rtol=0, atol=100 * EPS * float(lb.abs().max())), name


def test_stream_rotation_offers_the_chapters_constructions_and_refuses_unknown_ones():
    config, (tokens, _) = SYMMETRY_CONFIGS["chapter"], tokens_labels()
    a, b = float32_model(config, 12), float32_model(config, 13)
    eye = torch.eye(config.d_model, dtype=torch.float64)
    for basis in mg.ROTATION_BASES:
        R = mg.stream_rotation(a, b, config, tokens, basis=basis, rank=3, n_classes=P, seed=9)
        assert R.dtype == torch.float64 and torch.allclose(R @ R.T, eye, atol=1e-12), basis
    assert torch.equal(mg.stream_rotation(a, b, config, tokens, basis="random", seed=9), mg.random_rotation(16, 9))
    with torch.no_grad():
        h, core = mg.final_stream_core(mg.stacked_model(config, [a, b]), tokens, P)
    expected = mg.block_rotation(h[0], h[1], core.q(3)[0], core.q(3)[1])
    assert torch.allclose(mg.stream_rotation(a, b, config, tokens, basis="core", rank=3, n_classes=P), expected)
    with pytest.raises(ValueError, match="rank: the 'pca' rotation needs"):
        mg.stream_rotation(a, b, config, tokens, basis="pca")
    with pytest.raises(ValueError, match="basis: expected one of"):
        mg.stream_rotation(a, b, config, tokens, basis="cores")


@pytest.mark.parametrize("basis", ["core", "pca", "procrustes"])
def test_the_full_alignment_fitted_at_every_position_recovers_a_rotated_copy_through_any_basis(basis):
    """B is A with a Haar rotation of its stream, permuted units and heads and within-head maps: the core's and the
    principal components' subspaces are then B's rotated, so every construction fitted at every position recovers A."""
    config, (tokens, labels) = SYMMETRY_CONFIGS["chapter"], tokens_labels()
    a = float32_model(config, 20)
    gen = torch.Generator().manual_seed(21)
    _, units, heads = planted(config, 21)
    M, N = haar(config.d_head, gen, config.n_heads), haar(config.d_head, gen, config.n_heads)
    b = carried(a, config, mg.random_rotation(config.d_model, seed=22), units, heads, M, N)
    b_aligned = mg.symmetry_alignment(a, b, config, tokens, basis, rank=5, n_classes=P, positions="all")
    for k in a:
        assert torch.allclose(b_aligned[k], a[k], rtol=0, atol=1000 * EPS * float(a[k].abs().max())), (basis, k)
    assert_linearly_connected(config, a, b_aligned, tokens, labels)


def test_alignments_returns_every_construction_and_each_keeps_what_b_computes():
    config, (tokens, _) = SYMMETRY_CONFIGS["chapter"], tokens_labels()
    a, b = float32_model(config, 30), float32_model(config, 31)
    variants = mg.alignments(a, b, config, tokens, rank=4, n_classes=P, random_seeds=(1, 2))
    assert tuple(variants) == mg.ALIGNMENTS and len(variants["random, full"]) == 2
    for name, value in variants.items():
        for b_aligned in value if isinstance(value, list) else [value]:
            assert set(b_aligned) == set(b), name
            assert_same_function(config, b_aligned, b, tokens)
    assert not torch.allclose(variants["core, full"]["0_W_Q"], variants["core + heads, last position"]["0_W_Q"])
    with pytest.raises(ValueError, match="positions: expected one of"):
        mg.stream_rotation(a, b, config, tokens, "core", rank=4, n_classes=P, positions="first")


def test_alignment_paths_pick_the_best_random_rotation_and_function_change_is_rounding():
    config, (tokens, labels) = SYMMETRY_CONFIGS["chapter"], tokens_labels()
    a, b = float32_model(config, 40), float32_model(config, 41)
    variants = {"naive": b, "random": [mg.symmetry_alignment(a, b, config, tokens, "random", seed=s) for s in (1, 2)]}
    paths = mg.alignment_paths(config, a, variants, ALPHAS, tokens, labels, P)
    each = [mg.path_metrics(config, a, v, ALPHAS, tokens, labels, P)[0].numpy() for v in variants["random"]]
    assert min(mg.barrier(acc, ALPHAS) for acc in each) == mg.barrier(paths["random"][0], ALPHAS)
    assert np.array_equal(paths["naive"][0], mg.path_metrics(config, a, b, ALPHAS, tokens, labels, P)[0].numpy())
    assert mg.function_change(config, b, variants, tokens, P) < 100 * EPS
    assert mg.function_change(config, b, {"other": a}, tokens, P) > 0.1
