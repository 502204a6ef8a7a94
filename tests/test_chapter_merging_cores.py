"""Chapter 09's methods against independent computations: invariances of the function, planted permutations and
rotations recovered, stitching a model to itself, the ends of an interpolation path; Git Re-Basin (weight and
activation matching with the residual permutation) and the whole-symmetry alignment recovering a model from a copy
carried through its symmetries, and never changing what the aligned model computes."""
import numpy as np
import pytest
import torch

from corekit import ace
from corekit.chapters import merging_cores as mc
from corekit.models import BatchedTransformer, TransformerConfig

P = 7
CONFIG = TransformerConfig.entk_authors(P, d_model=16, n_heads=2, d_mlp=24)


def tokens_labels():
    a, b = torch.meshgrid(torch.arange(P), torch.arange(P), indexing="ij")
    tokens = torch.stack([a.flatten(), b.flatten(), torch.full((P * P,), P)], dim=1)     # (p², 3): a, b, "="
    return tokens, (a.flatten() + b.flatten()) % P


def two_models(config=CONFIG, seeds=(0, 1)):
    model = BatchedTransformer(config, seeds=list(seeds)).double().eval()
    return model, mc.model_states(model)


def logits_of(config, state, tokens):
    return mc.stacked_model(config, [state])(tokens, last=1)[0, :, -1]


def test_a_rotation_of_the_stream_leaves_the_logits_unchanged():
    tokens, _ = tokens_labels()
    _, (a, _) = two_models()
    R = mc.random_rotation(CONFIG.d_model, seed=3)
    with torch.no_grad():
        before, after = logits_of(CONFIG, a, tokens), logits_of(CONFIG, mc.rotate_stream(a, R, CONFIG), tokens)
    assert torch.allclose(before, after, rtol=0, atol=1e-12 * before.abs().max())
    assert not torch.allclose(a["W_E"], mc.rotate_stream(a, R, CONFIG)["W_E"])


def test_a_rotation_is_refused_for_a_model_with_layer_norm():
    config = TransformerConfig(vocab=P + 1, n_ctx=3, d_model=16, n_heads=2, d_mlp=24, norm="post")
    _, (a, _) = two_models(config)
    with pytest.raises(ValueError, match="config.norm: .*got 'post'"):
        mc.rotate_stream(a, torch.eye(16, dtype=torch.float64), config)


def test_weight_matching_recovers_a_planted_permutation_exactly():
    tokens, _ = tokens_labels()
    _, (a, _) = two_models()
    gen = torch.Generator().manual_seed(5)
    planted = mc.UnitPermutation([torch.randperm(CONFIG.d_mlp, generator=gen).numpy()],
                                 [torch.randperm(CONFIG.n_heads, generator=gen).numpy()])
    b = mc.permute_units(a, planted)
    with torch.no_grad():
        assert torch.allclose(logits_of(CONFIG, a, tokens), logits_of(CONFIG, b, tokens), atol=1e-12)
    found = mc.match_units(a, b)
    restored = mc.permute_units(b, found)
    assert all(torch.equal(restored[k], a[k]) for k in a)
    assert np.array_equal(planted.mlp[0][found.mlp[0]], np.arange(CONFIG.d_mlp))


def test_block_rotation_recovers_a_planted_rotation_of_the_stream():
    gen = torch.Generator().manual_seed(0)
    h_b = torch.randn(200, 8, generator=gen, dtype=torch.float64) * torch.linspace(3, 0.5, 8, dtype=torch.float64)
    S = mc.random_rotation(8, seed=1)
    h_a = h_b @ S
    q_b = mc.principal_components(h_b, 3)
    R = mc.block_rotation(h_a, h_b, S.T @ q_b, q_b)
    assert torch.allclose(R @ R.T, torch.eye(8, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(h_b @ R, h_a, atol=1e-10)


def test_the_core_of_a_rotated_model_is_the_rotated_core():
    tokens, _ = tokens_labels()
    model, (a, _) = two_models()
    R = mc.random_rotation(CONFIG.d_model, seed=2)
    rotated = mc.stacked_model(CONFIG, [a, mc.rotate_stream(a, R, CONFIG)])
    x, core = mc.core_before_mlp(rotated, tokens, P)
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
    one = mc.stacked_model(CONFIG, [a])
    x, core = mc.core_before_mlp(one, tokens, P)
    readout = mc.mlp_readout(one, P)
    everything = torch.arange(P * P)
    n = len(labels)
    own = float((readout(x).argmax(-1)[0] == labels).double().mean())
    for r in (2, 5):
        q = core.q(r)[0]
        kept = ace.keep_only(x, core.q(r), x.mean(1))
        keep_acc = float((readout(kept).argmax(-1)[0] == labels).double().mean())
        identity = torch.eye(r, dtype=torch.float64)
        stitched = mc.stitch_accuracy(x[0], x[0], q, q, readout, labels, everything, everything, M=identity)
        assert abs(stitched - keep_acc) <= _near_ties(readout(kept)) / n + 1e-12, r
    full = core.q(CONFIG.d_model)[0]
    stitched = mc.stitch_accuracy(x[0], x[0], full, full, readout, labels, everything, everything)
    assert abs(stitched - own) <= _near_ties(readout(x)) / n + 1e-12


def test_the_ends_of_an_interpolation_path_are_the_two_models():
    tokens, labels = tokens_labels()
    model, (a, b) = two_models()
    acc, loss = mc.path_metrics(CONFIG, a, b, [0.0, 0.5, 1.0], tokens, labels, P)
    _, acc_ab, loss_ab = mc.logits_and_metrics(model, tokens, labels, P)
    assert torch.allclose(acc[[0, 2]], acc_ab) and torch.allclose(loss[[0, 2]], loss_ab, atol=1e-12)


def test_the_barrier_is_the_largest_fall_below_the_line_between_the_ends():
    alphas = [0, 0.25, 0.5, 0.75, 1]
    assert mc.barrier([1.0, 0.9, 0.2, 0.8, 0.9], alphas) == pytest.approx(0.95 - 0.2)
    assert mc.barrier([1.0, 1.0, 1.0, 1.0, 1.0], alphas) == 0
    assert mc.barrier([0.1, 0.5, 2.0, 0.5, 0.3], alphas, higher_is_better=False) == pytest.approx(2.0 - 0.2)
    with pytest.raises(ValueError, match="alphas: expected a grid from 0 to 1"):
        mc.barrier([1, 2], [0.1, 1])


def test_a_stack_of_models_gives_each_model_what_it_gives_alone():
    tokens, labels = tokens_labels()
    _, states = two_models(seeds=(0, 1, 2))
    alphas = [0.0, 0.3, 0.7, 1.0]
    acc, loss = mc.path_metrics(CONFIG, states[0], states[2], alphas, tokens, labels, P)
    for k, alpha in enumerate(alphas):
        alone = mc.stacked_model(CONFIG, [mc.interpolate(states[0], states[2], alpha)])
        _, acc_alone, loss_alone = mc.logits_and_metrics(alone, tokens, labels, P)
        assert acc[k] == acc_alone[0] and torch.allclose(loss[k], loss_alone[0], rtol=1e-12)
    stacked = mc.stacked_model(CONFIG, states)
    logits, _, _ = mc.logits_and_metrics(stacked, tokens, labels, P)
    for m, state in enumerate(states):
        assert torch.allclose(logits[m], mc.logits_and_metrics(mc.stacked_model(CONFIG, [state]), tokens, labels, P)[0][0],
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
    state = mc.model_states(BatchedTransformer(config, seeds=[seed]).eval())[0]
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
    b = dict(mc.permute_units(mc.rotate_stream(a, R, config), mc.UnitPermutation([units], [heads])))
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
    acc, loss = mc.path_metrics(config, a, b, ALPHAS, tokens, labels, P)
    assert mc.barrier(acc, ALPHAS) <= 1e-6 and mc.barrier(loss, ALPHAS, higher_is_better=False) <= 1e-6


@pytest.mark.parametrize("kind", SYMMETRY_CONFIGS)
def test_activations_are_the_models_own_streams_hidden_units_and_heads(kind):
    config, (tokens, _) = SYMMETRY_CONFIGS[kind], tokens_labels()
    a = float32_model(config, 0)
    act = mc.activations(config, a, tokens)
    assert act.streams.shape == (3, P * P, 3, config.d_model) and act.heads[0].shape == (4, P * P, 3, 16)
    with torch.no_grad():
        model = mc.stacked_model(config, [a])
        final = model.residual(tokens)[0].double()
        assert torch.allclose(act.streams[-1], final, rtol=0, atol=100 * EPS * float(final.abs().max()))
        if kind == "chapter":
            before = mc.stream_before_mlp(model, tokens)[0].double()
            assert torch.allclose(act.streams[1][:, -1], before, rtol=0, atol=100 * EPS * float(before.abs().max()))
    b_O = a.get("0_b_O", torch.zeros(1)).double()
    assert torch.allclose(act.heads[0].sum(0) + b_O, act.streams[1] - act.streams[0], atol=1e-12)
    b_in = a.get("0_b_in", torch.zeros(1)).double()
    assert torch.equal(act.hidden[0], torch.relu(act.streams[1] @ a["0_W_in"].double() + b_in))
    with pytest.raises(ValueError, match="config.norm: expected a LayerNorm-free model"):
        mc.activations(TransformerConfig(vocab=P + 1, n_ctx=3, d_model=16, n_heads=4, d_mlp=32), a, tokens)


@pytest.mark.parametrize("kind", SYMMETRY_CONFIGS)
def test_rebasin_weight_matching_recovers_a_planted_permutation_of_the_stream_units_and_heads(kind):
    config, (tokens, labels) = SYMMETRY_CONFIGS[kind], tokens_labels()
    a = float32_model(config, 0)
    sigma, units, heads = planted(config, 1)
    b = carried(a, config, permutation_matrix(sigma), units, heads)
    assert_same_function(config, a, b, tokens)
    assert not torch.equal(a["W_E"], b["W_E"])
    perm, objective = mc.rebasin_weight_matching(a, b, seed=2)
    assert np.array_equal(perm.residual, np.argsort(sigma))
    assert np.array_equal(perm.mlp[0], np.argsort(units)) and np.array_equal(perm.heads[0], np.argsort(heads))
    assert len(objective) > len(perm.groups()) and np.all(np.diff(objective) >= 0)
    assert objective[-1] == pytest.approx(mc.weight_inner_product(a, a), rel=1e-12)
    b_aligned = mc.permute_model(b, perm)
    assert all(torch.equal(b_aligned[k], a[k]) for k in a)            # index moves only: bit for bit
    assert_linearly_connected(config, a, b_aligned, tokens, labels)


@pytest.mark.parametrize("kind", SYMMETRY_CONFIGS)
def test_rebasin_activation_matching_recovers_the_same_permutations(kind):
    config, (tokens, labels) = SYMMETRY_CONFIGS[kind], tokens_labels()
    a = float32_model(config, 0)
    dead = (mc.activations(config, a, tokens).hidden[0].flatten(0, 1).amax(0) == 0).sum()
    assert dead <= 1                                  # units dead on every input could be matched in any order
    sigma, units, heads = planted(config, 3)
    b = carried(a, config, permutation_matrix(sigma), units, heads)
    perm = mc.rebasin_activation_matching(a, b, config, tokens)
    assert np.array_equal(perm.residual, np.argsort(sigma))
    assert np.array_equal(perm.mlp[0], np.argsort(units)) and np.array_equal(perm.heads[0], np.argsort(heads))
    b_aligned = mc.permute_model(b, perm)
    assert all(torch.equal(b_aligned[k], a[k]) for k in a)
    assert_linearly_connected(config, a, b_aligned, tokens, labels)


@pytest.mark.parametrize("kind", SYMMETRY_CONFIGS)
def test_symmetry_alignment_recovers_a_model_from_a_rotated_permuted_copy_with_within_head_maps(kind):
    config, (tokens, labels) = SYMMETRY_CONFIGS[kind], tokens_labels()
    a = float32_model(config, 0)
    gen = torch.Generator().manual_seed(4)
    _, units, heads = planted(config, 4)
    S = mc.random_rotation(config.d_model, seed=5)                      # orthogonal, not a permutation
    M, N = haar(config.d_head, gen, config.n_heads), haar(config.d_head, gen, config.n_heads)
    b = carried(a, config, S, units, heads, M, N)
    assert_same_function(config, a, b, tokens)
    R = mc.stream_rotation(a, b, config, tokens)
    assert torch.allclose(R, S.T, rtol=0, atol=100 * EPS)
    b_aligned = mc.symmetry_alignment(a, b, config, tokens)
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
    b_aligned = mc.align_heads(a, b)
    for k in a:
        assert torch.allclose(b_aligned[k], a[k], rtol=0, atol=100 * EPS * float(a[k].abs().max())), k
    assert_same_function(config, b_aligned, b, tokens)
    other = mc.align_heads(float32_model(config, 7), b)                  # a different model's heads as the target
    assert_same_function(config, other, b, tokens)
    assert not torch.allclose(other["0_W_V"], b["0_W_V"], atol=1e-3)


@pytest.mark.parametrize("kind", SYMMETRY_CONFIGS)
def test_every_alignment_of_two_different_models_keeps_what_b_computes(kind):
    config, (tokens, _) = SYMMETRY_CONFIGS[kind], tokens_labels()
    a, b = float32_model(config, 10), float32_model(config, 11)
    perm, objective = mc.rebasin_weight_matching(a, b, seed=0)
    assert np.all(np.diff(objective) >= 0) and objective[-1] > objective[0]
    assert objective[-1] == pytest.approx(mc.weight_inner_product(a, mc.permute_model(b, perm)), rel=1e-12)
    alignments = {"weight matching": mc.permute_model(b, perm),
                  "activation matching": mc.permute_model(b, mc.rebasin_activation_matching(a, b, config, tokens)),
                  "heads": mc.align_heads(a, b)}
    for basis in mc.ROTATION_BASES:
        alignments[basis] = mc.symmetry_alignment(a, b, config, tokens, basis=basis, rank=4, n_classes=P, seed=8)
    for name, b_aligned in alignments.items():
        assert set(b_aligned) == set(b), name
        assert not torch.allclose(b_aligned["0_W_Q"], b["0_W_Q"]), name      # the alignment did something
        lb, la = logits_no_grad(config, b, tokens), logits_no_grad(config, b_aligned, tokens)
        assert torch.allclose(la, lb, rtol=0, atol=100 * EPS * float(lb.abs().max())), name


def test_stream_rotation_offers_the_chapters_constructions_and_refuses_unknown_ones():
    config, (tokens, _) = SYMMETRY_CONFIGS["chapter"], tokens_labels()
    a, b = float32_model(config, 12), float32_model(config, 13)
    eye = torch.eye(config.d_model, dtype=torch.float64)
    for basis in mc.ROTATION_BASES:
        R = mc.stream_rotation(a, b, config, tokens, basis=basis, rank=3, n_classes=P, seed=9)
        assert R.dtype == torch.float64 and torch.allclose(R @ R.T, eye, atol=1e-12), basis
    assert torch.equal(mc.stream_rotation(a, b, config, tokens, basis="random", seed=9), mc.random_rotation(16, 9))
    with torch.no_grad():
        h, core = mc.final_stream_core(mc.stacked_model(config, [a, b]), tokens, P)
    expected = mc.block_rotation(h[0], h[1], core.q(3)[0], core.q(3)[1])
    assert torch.allclose(mc.stream_rotation(a, b, config, tokens, basis="core", rank=3, n_classes=P), expected)
    with pytest.raises(ValueError, match="rank: the 'pca' rotation needs"):
        mc.stream_rotation(a, b, config, tokens, basis="pca")
    with pytest.raises(ValueError, match="basis: expected one of"):
        mc.stream_rotation(a, b, config, tokens, basis="cores")


@pytest.mark.parametrize("basis", ["core", "pca", "procrustes"])
def test_the_full_alignment_fitted_at_every_position_recovers_a_rotated_copy_through_any_basis(basis):
    """B is A with a Haar rotation of its stream, permuted units and heads and within-head maps: the core's and the
    principal components' subspaces are then B's rotated, so every construction fitted at every position recovers A."""
    config, (tokens, labels) = SYMMETRY_CONFIGS["chapter"], tokens_labels()
    a = float32_model(config, 20)
    gen = torch.Generator().manual_seed(21)
    _, units, heads = planted(config, 21)
    M, N = haar(config.d_head, gen, config.n_heads), haar(config.d_head, gen, config.n_heads)
    b = carried(a, config, mc.random_rotation(config.d_model, seed=22), units, heads, M, N)
    b_aligned = mc.symmetry_alignment(a, b, config, tokens, basis, rank=5, n_classes=P, positions="all")
    for k in a:
        assert torch.allclose(b_aligned[k], a[k], rtol=0, atol=1000 * EPS * float(a[k].abs().max())), (basis, k)
    assert_linearly_connected(config, a, b_aligned, tokens, labels)


def test_alignments_returns_every_construction_and_each_keeps_what_b_computes():
    config, (tokens, _) = SYMMETRY_CONFIGS["chapter"], tokens_labels()
    a, b = float32_model(config, 30), float32_model(config, 31)
    variants = mc.alignments(a, b, config, tokens, rank=4, n_classes=P, random_seeds=(1, 2))
    assert tuple(variants) == mc.ALIGNMENTS and len(variants["random, full"]) == 2
    for name, value in variants.items():
        for b_aligned in value if isinstance(value, list) else [value]:
            assert set(b_aligned) == set(b), name
            assert_same_function(config, b_aligned, b, tokens)
    assert not torch.allclose(variants["core, full"]["0_W_Q"], variants["core + heads, last position"]["0_W_Q"])
    with pytest.raises(ValueError, match="positions: expected one of"):
        mc.stream_rotation(a, b, config, tokens, "core", rank=4, n_classes=P, positions="first")


def test_paired_difference_is_the_mean_difference_with_a_percentile_bootstrap_interval():
    x, y = {"a": 0.5, "b": 0.7, "c": 0.9}, {"a": 0.4, "b": 0.4, "c": 0.4}
    mean, (low, high) = mc.paired_difference(x, y, n_boot=4000, seed=1)
    assert mean == pytest.approx(0.3) and 0.1 - 1e-12 <= low < mean < high <= 0.5 + 1e-12
    assert mc.paired_difference({"a": 1.0}, {"a": 0.5}) == (0.5, None)
    with pytest.raises(ValueError, match="the same keys"):
        mc.paired_difference(x, {"a": 0.0})


def test_alignment_paths_pick_the_best_random_rotation_and_function_change_is_rounding():
    config, (tokens, labels) = SYMMETRY_CONFIGS["chapter"], tokens_labels()
    a, b = float32_model(config, 40), float32_model(config, 41)
    variants = {"naive": b, "random": [mc.symmetry_alignment(a, b, config, tokens, "random", seed=s) for s in (1, 2)]}
    paths = mc.alignment_paths(config, a, variants, ALPHAS, tokens, labels, P)
    each = [mc.path_metrics(config, a, v, ALPHAS, tokens, labels, P)[0].numpy() for v in variants["random"]]
    assert min(mc.barrier(acc, ALPHAS) for acc in each) == mc.barrier(paths["random"][0], ALPHAS)
    assert np.array_equal(paths["naive"][0], mc.path_metrics(config, a, b, ALPHAS, tokens, labels, P)[0].numpy())
    assert mc.function_change(config, b, variants, tokens, P) < 100 * EPS
    assert mc.function_change(config, b, {"other": a}, tokens, P) > 0.1


# ---------------------------------------------------------------------------------------------------------------------
# The claims, decided on hand-made findings (no training), and the protocol on a few tiny trained models.

from dataclasses import replace  # noqa: E402

SAME_PAIRS = ["1–2", "1–3", "2–3", "4–5", "4–6", "5–6"]
CONTRAST = ["1–4"]
SAME_ORDERED = [x for k in SAME_PAIRS for x in (k, "–".join(reversed(k.split("–"))))]
IDS = ["naive_barrier", "spawned_pair_connected", "units_matched_barrier", "rebasin_barrier", "rebasin_heads_barrier",
       "activation_matching_barrier", "construction_steps", "core_aligned_connects", "core_alignment_halves_barrier",
       "core_beats_pca", "core_stitch_sufficient", "full_rank_stitch", "same_keys_stitch_better",
       "alignment_preserves_function", "path_ends_are_the_models", "cost_seconds"]


def barriers(**level):
    """{alignment: {pair: barrier}}: every alignment at a level where all claims pass, Procrustes beside PCA ± 0.01."""
    levels = {"naive": 0.9, "units": 0.9, "rebasin": 0.8, "rebasin + heads": 0.6, "activations": 0.85,
              "core, last position": 0.8, "core + heads, last position": 0.5, "core, full": 0.01, "pca, full": 0.6,
              "procrustes, full": 0.6, "random, full": 0.95} | level
    out = {name: {k: v + 0.002 * i for i, k in enumerate(SAME_PAIRS + CONTRAST)} for name, v in levels.items()}
    if "procrustes, full" not in level:
        out["procrustes, full"] = {k: v + (0.01 if i % 2 else -0.01) for i, (k, v) in enumerate(out["pca, full"].items())}
    return out


def stitch(**level):
    """{subspace: {ordered pair: share}} with every ordered pair of the pairs above at the given level."""
    levels = {"core": 0.995, "pca": 0.9, "random": 0.3, "full": 0.8} | level
    ordered = SAME_ORDERED + ["1–4", "4–1"]
    return {kind: {k: v for k in ordered} for kind, v in levels.items()}


def findings(**change):
    base = mc.Findings(barriers=barriers(), same_pairs=SAME_PAIRS, contrast_pairs=CONTRAST, spawn_barrier=0.0,
                       spawn_accuracy=1.0, parent_seed=1, spawn_epoch=500, stitch=stitch(), same_ordered=SAME_ORDERED,
                       gap=mc.KeySetGap(0.3, (0.2, 0.4), 0.01, 0.0), function_error=1e-7, path_end_error=0.0,
                       train_seconds=10.0, align_seconds=0.5, stitch_seconds=0.01, n_boot=500)
    return replace(base, **change)


def by_id(f):
    return {c.id: c for c in mc.claims(f)}


def test_the_claims_are_the_declared_ones_in_order_each_with_its_kind_and_all_pass_on_fair_findings():
    out = mc.claims(findings())
    assert [c.id for c in out] == IDS == [s.id for s in mc.CLAIMS]
    assert {c.kind for c in out} == {"extension", "check"}       # the paper has no merging claim: all are the book's
    assert {c.id for c in out if c.kind == "check"} == {"alignment_preserves_function", "path_ends_are_the_models"}
    assert {c.id: c.verdict for c in out if c.verdict != "reported"} == dict.fromkeys(
        ["naive_barrier", "spawned_pair_connected", "core_aligned_connects", "core_alignment_halves_barrier",
         "core_beats_pca", "core_stitch_sufficient", "same_keys_stitch_better", "alignment_preserves_function",
         "path_ends_are_the_models"], "pass")
    claims_ = by_id(findings())
    assert claims_["full_rank_stitch"].measured == {k: 0.8 for k in SAME_ORDERED}
    assert claims_["construction_steps"].measured["naive"] == {"same keys": 0.905, "different keys": 0.912}
    assert claims_["cost_seconds"].measured == {"training (all seeds)": 10.0, "every alignment of a pair": 0.5,
                                                "stitching, 4 subspaces": 0.01}
    assert claims_["core_alignment_halves_barrier"].models["n"] == 6


def test_too_few_pairs_sharing_their_key_set_leave_the_claims_over_them_undecided():
    out = by_id(findings(same_pairs=SAME_PAIRS[:2], same_ordered=SAME_ORDERED[:4]))
    for claim_id in ("naive_barrier", "core_aligned_connects", "core_alignment_halves_barrier", "core_beats_pca",
                     "core_stitch_sufficient", "same_keys_stitch_better"):
        assert out[claim_id].verdict == "undecided", claim_id
        assert "only 2 pair(s) of models share their key set, 6 are needed" in out[claim_id].reason
    assert out["spawned_pair_connected"].verdict == "pass"


def test_without_a_pair_sharing_its_key_set_the_contrast_is_measured_and_named_and_nothing_is_decided():
    out = by_id(findings(same_pairs=[], same_ordered=[], gap=None))
    assert list(out["naive_barrier"].measured) == CONTRAST and out["naive_barrier"].verdict == "undecided"
    assert "contrast pairs" in out["spawned_pair_connected"].nulls[0]["what"]
    assert "only 0 pair(s)" in out["same_keys_stitch_better"].reason


def test_one_pair_gives_core_beats_pca_no_interval():
    out = by_id(findings(same_pairs=SAME_PAIRS[:1], min_same_key_pairs=1))
    assert out["core_beats_pca"].verdict == "undecided" and "one pair gives no interval" in out["core_beats_pca"].reason
    assert out["core_aligned_connects"].verdict == "pass"


def test_the_spawned_pair_is_undecided_when_its_continuations_do_not_generalise():
    claim = by_id(findings(spawn_accuracy=0.5))["spawned_pair_connected"]
    assert claim.verdict == "undecided" and "continuations reach held-out accuracy 0.5000" in claim.reason


def test_the_key_set_gap_is_undecided_without_both_kinds_of_pair():
    claim = by_id(findings(gap=None))["same_keys_stitch_better"]
    assert claim.verdict == "undecided" and "every pair of models shares its key set" in claim.reason


@pytest.mark.parametrize("change, claim_id, reason", [
    (dict(barriers=barriers(naive=0.1)), "naive_barrier", "0 of 6 models satisfy ≥ 0.2"),
    (dict(spawn_barrier=0.1), "spawned_pair_connected", "does not satisfy ≤ 0.05"),
    (dict(barriers=barriers(**{"core, full": 0.2})), "core_aligned_connects", "0 of 6 models satisfy ≤ 0.05"),
    (dict(barriers=barriers(**{"core, full": 0.45})), "core_alignment_halves_barrier", "0 of 6 models satisfy ≤ 0.5"),
    (dict(barriers=barriers(**{"core, full": 0.6})), "core_beats_pca", "does not satisfy interval above 0"),
    (dict(stitch=stitch(core=0.9)), "core_stitch_sufficient", "0 of 12 models satisfy ≥ 0.99"),
    (dict(gap=mc.KeySetGap(0.01, (-0.1, 0.1), 0.0, 0.0)), "same_keys_stitch_better", "does not satisfy ≥ 0.05"),
    (dict(function_error=1e-3), "alignment_preserves_function", "does not satisfy ≤ 0.0001"),
    (dict(path_end_error=1e-3), "path_ends_are_the_models", "does not satisfy ≤ 1e-06"),
])
def test_each_claim_fails_when_its_value_misses_the_bound(change, claim_id, reason):
    claim = by_id(findings(**change))[claim_id]
    assert claim.verdict == "fail" and reason in claim.reason


@pytest.mark.parametrize("change, claim_id, null", [
    (dict(spawn_barrier=0.3), "naive_barrier", "the pair that shares its history"),
    (dict(barriers=barriers(naive=0.04)), "spawned_pair_connected", "the independently trained pairs"),
    (dict(barriers=barriers(**{"random, full": 0.02})), "core_aligned_connects", "a random rotation"),
    (dict(barriers=barriers(**{"pca, full": 0.02})), "core_aligned_connects", "principal components"),
    (dict(barriers=barriers(**{"procrustes, full": 0.02})), "core_aligned_connects", "Procrustes map"),
    (dict(barriers=barriers(**{"pca, full": 0.3})), "core_alignment_halves_barrier", "principal components"),
    (dict(barriers=barriers(**{"procrustes, full": 0.3})), "core_alignment_halves_barrier", "Procrustes map"),
    (dict(barriers=barriers(**{"random, full": 0.3})), "core_alignment_halves_barrier", "a random rotation"),
    (dict(barriers=barriers(**{"procrustes, full": 0.9})), "core_beats_pca", "whole-stream Procrustes"),
    (dict(stitch=stitch(pca=0.995)), "core_stitch_sufficient", "principal components"),
    (dict(stitch=stitch(random=0.995)), "core_stitch_sufficient", "random subspaces"),
    (dict(gap=mc.KeySetGap(0.3, (0.2, 0.4), 0.29, 0.0)), "same_keys_stitch_better", "principal components"),
    (dict(gap=mc.KeySetGap(0.3, (0.2, 0.4), 0.0, 0.1)), "same_keys_stitch_better", "key sets shuffled"),
])
def test_each_claim_is_uninformative_when_a_null_passes_too(change, claim_id, null):
    claim = by_id(findings(**change))[claim_id]
    assert claim.verdict == "uninformative" and null in claim.reason


def test_the_protocol_runs_end_to_end_on_tiny_models_and_its_findings_decide_every_claim():
    kw = dict(d_model=16, n_heads=2, d_mlp=32, batch_size=32, log_every_epochs=2, snapshot_every_epochs=4)
    models = mc.train_models(P, [0, 1, 2], 10, 0.0, **kw)
    assert models.members == [0, 1, 2] and models.label(0, 2) == "0–2" and len(models.keys) == 3
    with pytest.raises(RuntimeError, match="fewer than two models reach held-out accuracy 1.1"):
        mc.train_models(P, [0, 1], 4, 1.1, **kw | {"snapshot_every_epochs": 2})
    spawned = mc.spawn_pair(models, 4, 10, ALPHAS, batch_size=32, lr=3e-4, weight_decay=1.0, betas=(0.9, 0.999),
                            log_every_epochs=2)
    assert spawned.parent_seed == 0 and spawned.path.shape == (len(ALPHAS),) and spawned.barrier >= 0
    pairs = mc.choose_pairs(models, 1)
    assert len(pairs.compared) >= 1 and set(pairs.labels) == {(i, j) for i in range(3) for j in range(3) if i != j}
    paths = mc.compare_paths(models, pairs, ALPHAS, 0.99, 2)
    assert set(paths.barriers) == set(mc.ALIGNMENTS) and paths.function_error < 1e-3 and paths.end_error < 1e-6
    stitching = mc.stitch_models(models, 0.99)
    assert len(stitching.scores["core"]) == 6 and set(stitching.shares()) == set(mc.STITCHES)
    f = mc.Findings(barriers=paths.barriers, same_pairs=pairs.same_labels, contrast_pairs=pairs.contrast_labels,
                    spawn_barrier=spawned.barrier, spawn_accuracy=float(spawned.accuracy.min()), parent_seed=0,
                    spawn_epoch=4, stitch=stitching.shares(), same_ordered=stitching.same_labels,
                    gap=mc.key_set_gap(stitching, models, 50), function_error=paths.function_error,
                    path_end_error=paths.end_error, train_seconds=models.seconds, align_seconds=paths.seconds,
                    stitch_seconds=stitching.seconds, n_boot=50)
    out = mc.claims(f)
    assert [c.id for c in out] == IDS and out[-3].verdict == "pass"


def test_key_set_gap_counts_the_shuffles_behind_its_null():
    from types import SimpleNamespace
    keys = {0: (1, 2), 1: (1, 2), 2: (3, 4), 3: (3, 4)}
    ordered = [(i, j) for i in keys for j in keys if i != j]
    core = {k: (0.9 if keys[k[0]] == keys[k[1]] else 0.2) + 0.01 * k[0] for k in ordered}
    stitching = SimpleNamespace(scores={"core": core, "pca": {k: 0.5 for k in ordered}},
                                same={k: keys[k[0]] == keys[k[1]] for k in ordered})
    gap = mc.key_set_gap(stitching, SimpleNamespace(members=list(keys), keys=keys), n_boot=20, shuffles=30)
    same = [v for k, v in core.items() if stitching.same[k]]
    other = [v for k, v in core.items() if not stitching.same[k]]
    assert gap.shuffles == 30                           # every shuffle of two pairs of keys leaves both kinds
    assert gap.difference == pytest.approx(np.mean(same) - np.mean(other), abs=1e-12)
    assert gap.pca_difference == pytest.approx(0.0, abs=1e-12) and gap.shuffled_difference < gap.difference
