"""Chapter 06's measurement (corekit.entk_blocks) against a dense reference: autograd Jacobians of the summed
output for one parameter, numpy eigh, QR-orthonormalised blocks and centred Fourier features."""
import numpy as np
import pytest
import torch

from corekit import entk_blocks
from corekit.models import BatchedTransformer, TransformerConfig
from corekit.tasks.modular import modular_addition

P = 7
CFG = TransformerConfig(vocab=P + 1, n_ctx=3, d_model=16, n_heads=2, d_mlp=32, n_layers=1, norm="none", bias=False,
                        init="lin")


def _reference_kernel(model, name, tokens):
    """K (N, N) = J Jᵀ / C² with J the Jacobian of Σ_c f_c (all C outputs) w.r.t. one parameter (by autograd)."""
    param = model.params[name.replace(".", "_")]
    rows = []
    for x in tokens:
        model.zero_grad()
        model(x[None])[0, 0, -1].sum().backward()
        rows.append(param.grad[0].flatten().double().clone())
    J = torch.stack(rows)
    return (J @ J.T / CFG.out_vocab ** 2).numpy()


def _reference_overlap(V, p, keys, family):
    """‖QᵀF‖²_F / 2K with Q = QR(V), F = QR(centred features), in numpy."""
    a, b = np.divmod(np.arange(p * p), p)
    cols = []
    for k in keys:
        w = 2 * np.pi * k / p
        if family == "sum":
            cols += [np.cos(w * (a + b)), np.sin(w * (a + b))]
        else:
            cols += [np.cos(w * a) + np.cos(w * b), np.sin(w * a) + np.sin(w * b)]
    F = np.stack(cols, 1)
    Fq, _ = np.linalg.qr(F - F.mean(0))
    Q, _ = np.linalg.qr(V)
    return float(np.square(Q.T @ Fq).sum()) / (2 * len(keys))


def test_paper_blocks_follow_the_number_of_keys():
    assert entk_blocks.paper_blocks(2) == [[0, 1, 2, 3, 4], [5, 6, 7, 8]]
    assert entk_blocks.paper_blocks(3) == [list(range(7)), list(range(7, 13))]
    with pytest.raises(ValueError, match="top_k must be at least 4K"):
        entk_blocks.paper_blocks(3, top_k=12)
    with pytest.raises(ValueError, match="n_keys"):
        entk_blocks.paper_blocks(0)


@pytest.mark.parametrize("name", ["W_E", "0.W_Q", "0.W_O", "0.W_in", "0.W_out", "W_U"])
def test_block_scores_match_a_dense_reference(name):
    torch.manual_seed(0)
    model = BatchedTransformer(CFG, seeds=[3]).double()
    tokens = modular_addition(P, 0.5, 0).tokens()
    keys = [1, 3]
    eig = entk_blocks.parameter_eigenpairs(model, 0, tokens, top_k=9, names=[name])
    K = _reference_kernel(model, name, tokens)
    np.testing.assert_allclose(eig[name].values.numpy(), np.linalg.eigvalsh(K)[::-1][:9], rtol=1e-8,
                               atol=1e-10 * np.abs(K).max())
    w, V = np.linalg.eigh(K)
    V = V[:, ::-1]
    scores = entk_blocks.score_blocks(eig, P, keys)
    for family in ("sum", "input"):
        want = [_reference_overlap(V[:, 0:5], P, keys, family), _reference_overlap(V[:, 5:9], P, keys, family)]
        np.testing.assert_allclose(scores.scores[name][family], want, atol=1e-6)
    ones = np.ones((P * P, 1)) / P
    np.testing.assert_allclose(scores.constant[name], [float(np.square(V[:, :5].T @ ones).sum()),
                                                       float(np.square(V[:, 5:9].T @ ones).sum())], atol=1e-6)


def test_holding_picks_the_block_that_carries_the_family():
    eigs = {"W_U": None}
    scores = entk_blocks.BlockScores([1, 2], entk_blocks.paper_blocks(2), {"W_U": {"sum": [0.1, 0.97],
                                                                                    "input": [0.9, 0.2]}},
                                     {"W_U": [0.0, 0.0]}, eigs)
    assert scores.holding("W_U", "sum") == (1, 0.97)
    assert scores.holding("W_U", "input") == (0, 0.9)
    with pytest.raises(ValueError, match="family one of"):
        scores.holding("W_U", "diff")


def test_measure_finds_keys_and_shortens_names():
    model = BatchedTransformer(CFG, seeds=[1])
    tokens = modular_addition(P, 0.5, 0).tokens()
    result = entk_blocks.measure(model, 0, tokens, P, top_k=9, keys=[1, 2])
    assert set(result.table()) == {"W_E", "W_pos", "W_Q", "W_K", "W_V", "W_O", "W_in", "W_out", "W_U"}
    assert result.keys == [1, 2]
    assert all(0.0 <= v <= 1.0 + 1e-9 for row in result.table().values() for vs in row.values() for v in vs)


def test_group_eigenpairs_on_a_saved_state_match_the_summed_dense_reference():
    """A group's kernel on a saved state (another model's parameters) is the sum of that model's dense kernels."""
    torch.manual_seed(0)
    model = BatchedTransformer(CFG, seeds=[3]).double()
    other = BatchedTransformer(CFG, seeds=[5]).double()
    tokens = modular_addition(P, 0.5, 0).tokens()
    names = ["0.W_Q", "0.W_K", "0.W_V", "0.W_O"]
    eig = entk_blocks.group_eigenpairs(model, 0, tokens, 6, {"attention": names}, state=other.state_dict())
    K = sum(_reference_kernel(other, name, tokens) for name in names)
    np.testing.assert_allclose(eig["attention"].values.numpy(), np.linalg.eigvalsh(K)[::-1][:6], rtol=1e-8,
                               atol=1e-10 * np.abs(K).max())
    own = entk_blocks.group_eigenpairs(model, 0, tokens, 6, {"attention": names})
    assert not np.allclose(own["attention"].values.numpy(), eig["attention"].values.numpy())
