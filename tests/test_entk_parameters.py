"""The eNTK of one model of a BatchedTransformer by parameter group and W_U's leading block against given features,
against dense references (autograd Jacobians, numpy eigh, QR-orthonormalised blocks)."""
import numpy as np
import pytest
import torch
from entk_reference import CFG, P, reference_kernel, reference_overlap

from corekit import entk, fourier
from corekit.models import BatchedTransformer
from corekit.tasks.modular import modular_addition


def test_group_eigenpairs_on_a_saved_state_match_the_summed_dense_reference():
    """A group's kernel on a saved state (another model's parameters) is the sum of that model's dense kernels."""
    torch.manual_seed(0)
    model = BatchedTransformer(CFG, seeds=[3]).double()
    other = BatchedTransformer(CFG, seeds=[5]).double()
    tokens = modular_addition(P, 0.5, 0).tokens()
    names = ["0.W_Q", "0.W_K", "0.W_V", "0.W_O"]
    eig = entk.parameter_group_eigenpairs(model, 0, tokens, 6, {"attention": names}, state=other.state_dict())
    K = sum(reference_kernel(other, name, tokens) for name in names)
    np.testing.assert_allclose(eig["attention"].values.numpy(), np.linalg.eigvalsh(K)[::-1][:6], rtol=1e-8,
                               atol=1e-10 * np.abs(K).max())
    own = entk.parameter_group_eigenpairs(model, 0, tokens, 6, {"attention": names})
    assert not np.allclose(own["attention"].values.numpy(), eig["attention"].values.numpy())


def test_unembedding_alignment_matches_a_dense_reference_on_each_state():
    torch.manual_seed(0)
    model = BatchedTransformer(CFG, seeds=[3, 4]).double()
    others = [BatchedTransformer(CFG, seeds=[5, 6]).double(), model]
    tokens = modular_addition(P, 0.5, 0).tokens()
    keys = [1, 3]
    rng = np.random.default_rng(0)
    cores = [torch.from_numpy(rng.normal(size=(P * P, r))) for r in (2, 6)]
    sums, lens = entk.unembedding_alignment(model, 1, tokens, fourier.fourier_basis(P, "sum", keys),
                                                                [o.state_dict() for o in others], cores=cores)
    only, none = entk.unembedding_alignment(model, 1, tokens, fourier.fourier_basis(P, "sum", keys),
                                                                [o.state_dict() for o in others], top_k=9)
    assert none is None
    for j, other in enumerate(others):
        w, V = np.linalg.eigh(reference_kernel(other, "W_U", tokens, m=1))
        V = V[:, ::-1]
        # float32 kernels and eigenvectors (parameter_eigenpairs' default): subspaces within about N·ε₃₂·λ_1 / gap
        assert sums[j] == pytest.approx(reference_overlap(V[:, :5], P, keys, "sum"), abs=1e-4)
        assert only[j] == pytest.approx(sums[j], abs=1e-6)             # two float32 solves, different k
        r = cores[j].shape[1]
        Q, _ = np.linalg.qr(V[:, :r + 1])
        Z = cores[j].numpy() - cores[j].numpy().mean(0)
        Zq, _ = np.linalg.qr(Z)
        assert lens[j] == pytest.approx(float(np.square(Q.T @ Zq).sum()) / r, abs=1e-4)
