"""Chapter 09's methods against independent computations: invariances of the function, planted permutations and
rotations recovered, stitching a model to itself, the ends of an interpolation path."""
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


def test_stitching_a_model_to_itself_through_its_core_is_keep_only_and_at_full_rank_the_model():
    tokens, labels = tokens_labels()
    model, (a, _) = two_models()
    one = mc.stacked_model(CONFIG, [a])
    x, core = mc.core_before_mlp(one, tokens, P)
    readout = mc.mlp_readout(one, P)
    everything = torch.arange(P * P)
    own = float((readout(x).argmax(-1)[0] == labels).double().mean())
    for r in (2, 5):
        q = core.q(r)[0]
        kept = ace.keep_only(x, core.q(r), x.mean(1))
        keep_acc = float((readout(kept).argmax(-1)[0] == labels).double().mean())
        identity = torch.eye(r, dtype=torch.float64)
        assert mc.stitch_accuracy(x[0], x[0], q, q, readout, labels, everything, everything, M=identity) == keep_acc
    full = core.q(CONFIG.d_model)[0]
    assert mc.stitch_accuracy(x[0], x[0], full, full, readout, labels, everything, everything) == own


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
