"""The relations chapter 08 relies on, against independent dense computations in float64 (autograd Jacobians,
numpy SVD / eigh, direct projections)."""
import numpy as np
import pytest
import torch

from corekit import ace, fourier, lenses
from corekit.models import BatchedTransformer, TransformerConfig

P = 7
CFG = TransformerConfig(vocab=P + 1, n_ctx=3, d_model=12, n_heads=2, d_mlp=24, n_layers=1, norm="none", bias=False,
                        init="lin")


@pytest.fixture(scope="module")
def model():
    return BatchedTransformer(CFG, seeds=[0, 1]).double()


def _tokens():
    a, b = torch.meshgrid(torch.arange(P), torch.arange(P), indexing="ij")
    return torch.stack([a.flatten(), b.flatten(), torch.full((P * P,), P)], 1)


def test_unembedding_entk_is_the_residual_gram_over_the_outputs(model):
    tokens = _tokens()
    with torch.no_grad():
        h = model.residual(tokens)[:, :, -1]                               # (M, N, D)
    C = model.p("W_U").shape[-1]
    ours = lenses.linear_readout_kernel(h, C)
    for m in range(2):
        W_U = model.p("W_U").detach()[m].clone()

        def mean_output(W):                                                # the class-pair mean: eNTK of the mean output
            return (h[m] @ W).mean(-1)
        J = torch.autograd.functional.jacobian(mean_output, W_U).reshape(len(tokens), -1)   # (N, D·C)
        torch.testing.assert_close(ours[m], J @ J.T, atol=1e-12, rtol=1e-10)
        logits = model(tokens)[m, :, -1].detach()
        torch.testing.assert_close(logits, h[m] @ W_U, atol=1e-12, rtol=1e-10)  # the readout is that linear map


def test_leading_eigenvectors_span_the_top_of_dense_eigh():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2, 30, 6)) * np.array([5.0, 4, 3, 2, 1, 0.5])
    K = torch.from_numpy(X @ X.transpose(0, 2, 1))
    V = lenses.leading_eigenvectors(K, 3)
    for m in range(2):
        w, U = np.linalg.eigh(K[m].numpy())
        ref = U[:, ::-1][:, :3]
        np.testing.assert_allclose(np.abs(V[m].numpy().T @ ref), np.eye(3), atol=1e-10)
    with pytest.raises(ValueError, match="k must be an integer in \\[1, N = 30\\]"):
        lenses.leading_eigenvectors(K, 31)


def _activations(mean_zero: bool):
    rng = np.random.default_rng(1)
    Z = rng.normal(size=(1, 200, 8)) * np.array([6.0, 5, 4, 3, 2, 1, 0.5, 0.25])
    Z = Z @ np.linalg.qr(rng.normal(size=(8, 8)))[0]                       # a rotated anisotropic cloud
    if mean_zero:
        Z = Z - Z.mean(1, keepdims=True)
    else:
        Z = Z + 3.0
    return torch.from_numpy(Z)


def test_ace_core_with_an_isotropic_readout_is_the_pca_of_the_activations():
    h = _activations(mean_zero=False)
    core = ace.extract(h, torch.eye(8, dtype=torch.float64)[None])
    Z = core.coordinates(h, 3)[0].numpy()                                  # (N, 3)
    U = np.linalg.svd(h[0].numpy() - h[0].numpy().mean(0), full_matrices=False)[0][:, :3]
    assert fourier.alignment(torch.from_numpy(U), torch.from_numpy(Z)) == pytest.approx(1.0, abs=1e-10)


def test_for_centred_activations_the_core_is_the_readout_kernels_leading_block():
    h = _activations(mean_zero=True)
    core = ace.extract(h, torch.eye(8, dtype=torch.float64)[None])
    V = lenses.leading_eigenvectors(lenses.linear_readout_kernel(h, 5), 3)
    assert lenses.alignments(V, core.coordinates(h, 3)) == pytest.approx([1.0], abs=1e-10)
    shifted = h + 3.0                                                      # a mean: the uncentred kernel mixes it in
    V_shift = lenses.leading_eigenvectors(lenses.linear_readout_kernel(shifted, 5), 3)
    assert lenses.alignments(V_shift, core.coordinates(h, 3))[0] < 1 - 1e-3


def test_residual_directions_recover_the_right_singular_vectors_of_the_readout_kernel():
    h = _activations(mean_zero=False)
    V = lenses.leading_eigenvectors(lenses.linear_readout_kernel(h, 5), 4)
    D = lenses.residual_directions(h, V)[0].numpy()                        # (8, 4)
    _, _, Vt = np.linalg.svd(h[0].numpy(), full_matrices=False)
    ref = Vt[:4].T                                                         # H = U S Vᵀ: eigenvector i is H v_i / s_i
    np.testing.assert_allclose(D.T @ D, np.eye(4), atol=1e-10)
    np.testing.assert_allclose(np.linalg.svd(D.T @ ref)[1], np.ones(4), atol=1e-9)   # the same span


def test_random_null_matches_the_expected_overlap():
    N, d, b = 60, 4, 3
    B = torch.from_numpy(np.random.default_rng(2).normal(size=(N, b)))
    scores = lenses.random_alignment_null(B, d, samples=400, seed=0)
    expected = d * b / N / min(d, b)                                       # E‖QᵀF‖² = d·b/N for uniform Q
    assert scores.mean() == pytest.approx(expected, abs=4 * scores.std() / np.sqrt(len(scores)))
    assert np.array_equal(scores, lenses.random_alignment_null(B, d, samples=400, seed=0))


def test_keep_and_remove_are_the_projections_about_the_mean():
    h = _activations(mean_zero=False).float()
    q = lenses.random_subspaces(1, 8, 2, seed=3)
    np.testing.assert_allclose(q[0].T @ q[0], np.eye(2), atol=1e-12)
    mean = h.mean(1)
    seen = []

    def accuracy(x):
        seen.append(x.double())
        return x.sum(dim=(1, 2))
    lenses.keep_remove_accuracy(h, q, mean, accuracy)
    hc, Q, mu = (h[0] - mean[0]).double().numpy(), q[0].numpy(), mean[0].double().numpy()
    np.testing.assert_allclose(seen[0][0].numpy(), mu + hc @ Q @ Q.T, atol=1e-4)
    np.testing.assert_allclose(seen[1][0].numpy(), h[0].double().numpy() - hc @ Q @ Q.T, atol=1e-4)
    with pytest.raises(ValueError, match="q must be \\(M, D, r\\) with M = 1 and D = 8"):
        lenses.keep_remove_accuracy(h, q[:, :5], mean, accuracy)


def test_settling_epoch_is_where_the_values_stop_exceeding_their_final_value():
    assert lenses.settling_epoch([0, 10, 20, 30, 40], [9, 9, 4, 5, 4]) == 40.0
    assert lenses.settling_epoch([0, 10, 20, 30], [9, 4, 3, 4]) == 10.0
    assert lenses.settling_epoch([0, 10], [2, 2]) == 0.0
    with pytest.raises(ValueError, match="same non-zero length"):
        lenses.settling_epoch([0, 1], [1])


def test_a_snapshot_state_gives_the_core_of_the_model_with_those_weights(model):
    tokens = _tokens()
    other = BatchedTransformer(CFG, seeds=[5, 6]).double()
    h, core, ranks = lenses.final_residual_core(model, tokens, state=other.state_dict())
    h_ref, core_ref, ranks_ref = lenses.final_residual_core(other, tokens)
    torch.testing.assert_close(h, h_ref)
    torch.testing.assert_close(core.sigma, core_ref.sigma)
    assert torch.equal(ranks, ranks_ref)
    with torch.no_grad():
        logits = other(tokens)[:, :, -1]                                   # (M, N, V)
    labels = logits[0, :, :P].argmax(-1)
    acc = lenses.readout_accuracy(other, labels, P)(h_ref)
    assert float(acc[0]) == 1.0
    assert float(acc[1]) == pytest.approx(float((logits[1, :, :P].argmax(-1) == labels).double().mean()))


#: Chapter 02's block (nn.TransformerEncoderLayer: post-LN, query / key / value biases, causal mask), input [a, b].
GROK_CFG = TransformerConfig(vocab=P, n_ctx=2, d_model=8, n_heads=2, d_mlp=16, n_layers=2, norm="post", dropout=0.1,
                             causal=True, qkv_bias=True, init="torch", n_out=P, embedding_dropout=False)


def _grok_model(seeds=(0, 1)):
    model = BatchedTransformer(GROK_CFG, seeds=list(seeds)).double().eval()
    gen = torch.Generator().manual_seed(sum(seeds))
    with torch.no_grad():                                                  # torch's init leaves biases at zero
        for value in model.params.values():
            value.add_(0.1 * torch.randn(value.shape, generator=gen, dtype=torch.float64))
    return model


@pytest.mark.parametrize("config", [CFG, GROK_CFG, TransformerConfig(vocab=5, n_ctx=3, d_model=8, n_heads=2, d_mlp=8,
                                                                      n_layers=3, norm="pre", bias=True)])
def test_layer_groups_hold_every_parameter_once(config):
    model = BatchedTransformer(config, seeds=[0])
    names = {key.replace("_", ".", 1) if key[0].isdigit() else key for key in model.params}
    groups = lenses.layer_groups(config)
    flat = [name for members in groups.values() for name in members]
    assert sorted(flat) == sorted(names)
    assert list(groups) == ["embed"] + [f"{i}.{s}" for i in range(config.n_layers) for s in ("attn", "mlp")] + ["unembed"]


def test_layer_eigenpairs_are_those_of_each_layers_autograd_kernel():
    """Each layer's kernel from autograd Jacobians of the mean output of the nn.Module, eigendecomposed by numpy."""
    model = _grok_model()
    a, b = torch.meshgrid(torch.arange(P), torch.arange(P), indexing="ij")
    tokens = torch.stack([a.flatten(), b.flatten()], 1)                    # (N, 2): the authors' input [a, b]
    other = _grok_model(seeds=(3, 4))
    ours = lenses.layer_eigenpairs(model, 1, tokens, 4, state=other.state_dict())
    keys = {(key.replace("_", ".", 1) if key[0].isdigit() else key): key for key in other.params}
    for layer, members in lenses.layer_groups(GROK_CFG).items():
        weights = {name: other.params[keys[name]].detach().clone() for name in members}

        def mean_output(*tensors):
            state = {f"params.{keys[n]}": t for n, t in zip(members, tensors)}
            return torch.func.functional_call(other, state, (tokens,))[1, :, -1].mean(-1)   # (N,)
        J = torch.autograd.functional.jacobian(mean_output, tuple(weights.values()))
        J = torch.cat([j.reshape(len(tokens), -1) for j in J], 1)         # (N, parameters of the layer)
        w, U = np.linalg.eigh((J @ J.T).numpy())
        w, U = w[::-1][:4], U[:, ::-1][:, :4]
        np.testing.assert_allclose(ours[layer].values.numpy(), w, rtol=1e-8, atol=1e-12 * w[0], err_msg=layer)
        overlap = ours[layer].vectors.numpy().T @ U                        # distinct eigenvalues: ±1 on the diagonal
        np.testing.assert_allclose(np.abs(np.diag(overlap)), np.ones(4), atol=1e-6, err_msg=layer)
