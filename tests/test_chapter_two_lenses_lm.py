"""corekit.chapters.two_lenses against independent references: the Lanczos pairs against dense eigh of the operator built
from explicit Jacobians, the prompts' residuals against an unpadded Hugging Face forward pass, the held-out AUROC
against scikit-learn, the span angle against scipy's principal angles."""
from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
from test_llm import tiny  # noqa: E402

from corekit import subspaces  # noqa: E402
from corekit.chapters import two_lenses as ae  # noqa: E402
from corekit.entk import ResidualStreamNTK, dense_eigenpairs  # noqa: E402
from corekit.number_axis import find_axis, measure  # noqa: E402
from corekit.tasks import agreement  # noqa: E402


@pytest.fixture(scope="module")
def lens():
    train, test = agreement.split(30, 30, seed=3)
    m = measure(tiny("llama"), "tiny", train, test, batch_size=16)
    return m, ae.number_lens(m, find_axis(m), 2, top_k=4, block_size=4, max_vectors=64, tol=1e-9)


def test_modal_rows_are_the_most_common_unpadded_length():
    mask = torch.tensor([[0, 1, 1], [1, 1, 1], [0, 1, 1], [0, 0, 1], [1, 1, 1]])
    rows, length = ae.modal_length_rows(mask)
    assert length == 2 and rows.tolist() == [0, 2]     # lengths 2, 3, 2, 1, 3: a tie between 2 and 3 takes 2
    with pytest.raises(ValueError, match="attention mask"):
        ae.modal_length_rows(mask[0])


def test_lanczos_pairs_are_the_dense_spectrum_of_the_same_prompts(lens):
    m, L = lens
    ids = torch.cat([m.train.batch.input_ids, m.test.batch.input_ids])
    mask = torch.cat([m.train.batch.attention_mask, m.test.batch.attention_mask])
    assert (mask[L.rows].sum(1) == L.tokens).all() and len(L.rows) >= 4
    op = ResidualStreamNTK(m.lm, ids[L.rows][:, -L.tokens:], 2)
    dense = dense_eigenpairs(op.dense(), 4)
    torch.testing.assert_close(L.pairs.values.cpu(), dense.values, rtol=1e-6, atol=0)
    overlap = (L.pairs.vectors.cpu().double().T @ dense.vectors).abs().diagonal()
    assert overlap.min() > 1 - 1e-6


def test_residuals_and_axis_coordinate_are_those_of_the_unpadded_prompts(lens):
    m, L = lens
    ids = torch.cat([m.train.batch.input_ids, m.test.batch.input_ids])[L.rows][:, -L.tokens:]
    with torch.no_grad():
        hs = m.lm.model(input_ids=ids, output_hidden_states=True).hidden_states[2][:, -1].double()
    torch.testing.assert_close(L.h, hs, rtol=1e-4, atol=1e-4 * float(hs.abs().max()))
    axis = find_axis(m)
    z = (hs - axis.core.mean[2].double()) @ axis.q[2, :, 0].double()
    np.testing.assert_allclose(L.z, z.numpy(), atol=1e-4 * float(np.abs(L.z).max()))
    y = np.array(agreement.labels(agreement.split(30, 30, seed=3)[0] + agreement.split(30, 30, seed=3)[1]))
    assert (L.y == y[L.rows]).all()


def test_held_out_auroc_chooses_and_signs_on_train_and_scores_on_test_as_sklearn():
    from sklearn.metrics import roc_auc_score
    rng = np.random.default_rng(0)
    n = 200
    y = rng.integers(0, 2, n)
    is_train = np.arange(n) < 100
    noise = rng.normal(size=(3, n))
    scores = noise.copy()
    scores[0, ~is_train] = y[~is_train]             # perfect on the test half only: must not be chosen
    scores[2] = -(y + 0.8 * noise[2])               # good on train with the opposite sign
    got = ae.held_out_auroc(scores, y, is_train, n_boot=300)
    assert got.index == 2 and got.sign == -1.0
    assert got.test_auroc == pytest.approx(roc_auc_score(y[~is_train], -scores[2, ~is_train]), abs=1e-12)
    assert got.train_auroc == pytest.approx(roc_auc_score(y[is_train], -scores[2, is_train]), abs=1e-12)
    assert got.interval[0] < got.test_auroc < got.interval[1]
    with pytest.raises(ValueError, match="scores must be"):
        ae.held_out_auroc(scores[:, :10], y, is_train)


def test_span_cos2_is_the_cosine_of_scipys_principal_angle_and_the_random_null_has_mean_k_over_d():
    from scipy.linalg import subspace_angles
    gen = torch.Generator().manual_seed(1)
    q, Q = torch.randn(40, generator=gen, dtype=torch.float64), torch.randn(40, 5, generator=gen, dtype=torch.float64)
    angle = subspace_angles(q[:, None].numpy(), Q.numpy())[0]
    assert subspaces.span_cos2(q, Q) == pytest.approx(np.cos(angle) ** 2, abs=1e-12)
    assert subspaces.span_cos2(Q[:, 0] + 2 * Q[:, 3], Q) == pytest.approx(1.0, abs=1e-12)
    null = subspaces.random_span_cos2(40, 5, samples=2000, seed=0)
    assert abs(null.mean() - 5 / 40) < 4 * null.std() / np.sqrt(len(null))
    with pytest.raises(ValueError, match="k must be"):
        subspaces.random_span_cos2(40, 41)


def test_random_scores_are_projections_on_unit_directions():
    h = torch.randn(50, 8, dtype=torch.float64)
    s = ae.random_scores(h, 3, seed=0)
    assert s.shape == (3, 50)
    d = torch.linalg.lstsq(h - h.mean(0), s.T).solution                       # the directions, recovered
    torch.testing.assert_close(d.norm(dim=0), torch.ones(3, dtype=torch.float64), rtol=1e-10, atol=0)


def test_stream_directions_of_principal_scores_are_the_principal_axes():
    gen = torch.Generator().manual_seed(2)
    h = torch.randn(60, 10, generator=gen, dtype=torch.float64) * torch.linspace(3, 0.5, 10, dtype=torch.float64)
    hc = (h - h.mean(0)).numpy()
    _, _, Vt = np.linalg.svd(hc, full_matrices=False)
    scores = torch.as_tensor(hc @ Vt[:3].T).T                                # (3, n)
    q = ae.stream_directions(h, scores)
    np.testing.assert_allclose(np.abs(np.sum(q.numpy() * Vt[:3].T, axis=0)), 1.0, atol=1e-10)
    with pytest.raises(ValueError, match="same n"):
        ae.stream_directions(h, scores[:, :5])
