"""Representation metrics against independent references (scipy, scikit-learn, closed forms)."""
import numpy as np
import pytest
import scipy.linalg
import torch
from sklearn.cross_decomposition import CCA

from corekit import subspaces


def _correlated(n=3000, dx=4, dy=3, seed=0):
    rng = np.random.default_rng(seed)
    shared = rng.standard_normal((n, 2))
    X = np.c_[shared @ rng.standard_normal((2, dx)), np.zeros((n, 0))] + 0.5 * rng.standard_normal((n, dx))
    Y = shared @ rng.standard_normal((2, dy)) + 0.8 * rng.standard_normal((n, dy))
    return X, Y


def test_cca_matches_whitened_covariance_reference():
    X, Y = _correlated()
    Xc, Yc = X - X.mean(0), Y - Y.mean(0)
    Sxx, Syy, Sxy = Xc.T @ Xc, Yc.T @ Yc, Xc.T @ Yc
    ref = scipy.linalg.svdvals(scipy.linalg.sqrtm(np.linalg.inv(Sxx)) @ Sxy @ scipy.linalg.sqrtm(np.linalg.inv(Syy)))
    ours = subspaces.cca(torch.tensor(X), torch.tensor(Y), ridge=0.0).numpy()
    np.testing.assert_allclose(ours, np.sort(ref.real)[::-1], atol=1e-8)


def test_cca_first_correlation_matches_scikit_learn():
    X, Y = _correlated(seed=1)
    Xs, Ys = CCA(n_components=1, max_iter=2000, tol=1e-10).fit_transform(X, Y)
    ref = np.corrcoef(Xs[:, 0], Ys[:, 0])[0, 1]
    assert float(subspaces.cca(torch.tensor(X), torch.tensor(Y))[0]) == pytest.approx(abs(ref), abs=1e-4)


def test_cca_is_invariant_to_invertible_maps():
    X, _ = _correlated(seed=2)
    A = np.random.default_rng(3).standard_normal((4, 4))
    cc = subspaces.cca(torch.tensor(X), torch.tensor(X @ A + 5.0), ridge=0.0)
    np.testing.assert_allclose(cc.numpy(), 1.0, atol=1e-6)


def test_cca_rejects_mismatched_samples():
    with pytest.raises(ValueError, match="same N"):
        subspaces.cca(torch.zeros(5, 2), torch.zeros(4, 2))


def test_projector_overlap_extremes_and_random_mean():
    Q = subspaces.random_orthonormal(16, 3, 1, seed=0)[0]
    rot = torch.linalg.qr(torch.randn(3, 3, dtype=torch.float64))[0]
    assert float(subspaces.projector_overlap(Q, Q @ rot)) == pytest.approx(1.0)       # basis-independent
    E = torch.eye(16, dtype=torch.float64)
    assert float(subspaces.projector_overlap(E[:, :3], E[:, 3:6])) == pytest.approx(0.0)
    samples = subspaces.random_projector_overlap(64, 3, 3, n=4000)
    assert float(samples.mean()) == pytest.approx(3 / 64, rel=0.05)


def test_principal_angles_match_scipy():
    rng = np.random.default_rng(4)
    A, B = rng.standard_normal((10, 3)), rng.standard_normal((10, 2))
    ours = subspaces.principal_angles(torch.tensor(A), torch.tensor(B)).numpy()
    np.testing.assert_allclose(np.sort(ours), np.sort(scipy.linalg.subspace_angles(A, B)), atol=1e-10)


def test_cosine_matrix_and_off_diagonal():
    W = torch.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    C = subspaces.cosine_matrix(W)
    np.testing.assert_allclose(subspaces.off_diagonal(C), [0.0, 2 ** -0.5, 2 ** -0.5], atol=1e-12)


def test_class_mean_distances_match_scipy_mahalanobis():
    from scipy.spatial.distance import mahalanobis

    gen = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 4, (3000,), generator=gen)
    z = torch.randn(3000, 3, generator=gen, dtype=torch.float64) @ torch.tensor([[2.0, 0.3, 0], [0, 1, 0.5], [0, 0, 0.2]],
                                                                              dtype=torch.float64)
    z[labels == 1] += torch.tensor([1.0, -2.0, 0.3], dtype=torch.float64)
    z[labels == 2] = z[labels == 3] = z[labels == 2].mean(0)  # two classes with the same mean: distance 0
    dist = subspaces.class_mean_distances(z, labels, [0, 1, 2, 3])
    inverse = np.linalg.inv(np.cov(z.numpy().T))
    means = [z[labels == k].mean(0).numpy() for k in range(4)]
    for a in range(4):
        for b in range(4):
            assert abs(float(dist[a, b]) - mahalanobis(means[a], means[b], inverse)) < 1e-9
    assert float(dist[2, 3]) < 1e-9 < float(dist[0, 1])
    with pytest.raises(ValueError, match=r"classes \[7\]"):
        subspaces.class_mean_distances(z, labels, [0, 7])


def test_the_three_scores_are_the_squared_cosines_of_scipys_principal_angles_normalised_three_ways():
    """projector_overlap, alignment and span_cos2 all sum cos²θ over the principal angles (scipy's
    subspace_angles, an independent computation), divided by √(r_A r_B), min(r_A, r_B) and 1."""
    from scipy.linalg import subspace_angles

    gen = torch.Generator().manual_seed(3)
    X, Y, q = (torch.randn(40, k, generator=gen, dtype=torch.float64) for k in (3, 5, 1))
    s = float((np.cos(subspace_angles(X.numpy(), Y.numpy())) ** 2).sum())
    A, B = torch.linalg.qr(X)[0], torch.linalg.qr(Y)[0]
    assert float(subspaces.projector_overlap(A, B)) == pytest.approx(s / 15 ** 0.5, rel=1e-10)
    assert subspaces.alignment(X, Y, centre_features=False) == pytest.approx(s / 3, rel=1e-10)
    s_q = float(np.cos(subspace_angles(q.numpy(), Y.numpy())[0]) ** 2)
    assert subspaces.span_cos2(q[:, 0], Y) == pytest.approx(s_q, rel=1e-10)


def test_random_subspaces_are_the_one_sampler():
    """random_subspaces (one basis per model) draws exactly what random_orthonormal draws: one sampler, two names
    of its arguments."""
    assert torch.equal(subspaces.random_subspaces(4, 9, 2, seed=5), subspaces.random_orthonormal(9, 2, 4, seed=5))
