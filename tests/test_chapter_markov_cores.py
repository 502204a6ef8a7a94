"""Chapter 01's analyses (corekit.chapters.markov_cores) against numpy references on tiny hand-built ACE results:
index look-ups and first-rank loops, numpy least squares and eigenvalues, Mahalanobis distances, cosines, CCA."""
import itertools

import numpy as np
import pytest
import torch

from corekit import subspaces
from corekit.ace import Core, NextTokenACE
from corekit.chapters import markov_cores
from corekit.tasks import markov

M, D, K = 3, 6, 4


def _orthogonal(rng, n):
    """n random orthogonal matrices (n, D, D) from numpy QR."""
    return np.stack([np.linalg.qr(rng.standard_normal((D, D)))[0] for _ in range(n)])


def _result(rng, rank=(2, 2, 3), n=40, T_len=5, keep=None, remove=None, base=None):
    """A NextTokenACE over M models with random orthogonal cores, random means and random activations."""
    basis = torch.tensor(_orthogonal(rng, M))
    mean = torch.tensor(rng.standard_normal((M, D)))
    sigma = torch.sort(torch.tensor(rng.random((M, D))), dim=1, descending=True).values
    ranks = list(range(K + 1))
    return NextTokenACE(core=Core(basis=basis, sigma=sigma, mean=mean), rank=torch.tensor(rank),
                        h_train=torch.tensor(rng.standard_normal((M, n, T_len, D))),
                        h_test=torch.tensor(rng.standard_normal((M, n, T_len, D))), ranks=ranks,
                        base_acc=torch.tensor([0.9, 0.8, 0.7]) if base is None else base,
                        keep_acc=torch.rand(M, len(ranks)) if keep is None else keep,
                        remove_acc=torch.rand(M, len(ranks)) if remove is None else remove)


def _coords(res, split, m, r):
    """numpy z = (h − μ) Q[:, :r] (N, T, r) of model m."""
    h = (res.h_train if split == "train" else res.h_test)[m].numpy()
    return (h - res.core.mean[m].numpy()) @ res.core.basis[m, :, :r].numpy()


def test_chain_datasets_are_the_sampled_sequences_shifted_by_one():
    T = markov.cyclic_transition(4)
    train, test = markov_cores.chain_datasets(T, 5, 3, 7, seed=11)
    for ds, n, seed in [(train, 5, 11), (test, 3, 12)]:
        seq = markov.sample_sequences(T, n, 7, seed=seed).numpy()
        assert ds.x.shape == (n, 6) and ds.y.shape == (n, 6)
        np.testing.assert_array_equal(ds.x.numpy(), seq[:, :-1])
        np.testing.assert_array_equal(ds.y.numpy(), seq[:, 1:])


def test_fit_ranks_own_or_given():
    res = _result(np.random.default_rng(0), rank=(1, 3, 2))
    assert markov_cores.fit_ranks(res) == [1, 3, 2]
    assert markov_cores.fit_ranks(res, 2) == [2, 2, 2]


def test_validate_at_energy_rank_matches_loops():
    keep = torch.tensor([[0.1, 0.5, 0.8995, 0.9, 0.9], [0.2, 0.3, 0.4, 0.5, 0.8], [0.1, 0.2, 0.3, 0.4, 0.5]])
    remove = torch.tensor([[0.9, 0.5, 0.2, 0.1, 0.1], [0.8, 0.8, 0.8, 0.3, 0.1], [0.7, 0.7, 0.7, 0.7, 0.7]])
    base = torch.tensor([0.9, 0.8, 0.7])
    res = _result(np.random.default_rng(1), rank=(2, 3, 1), keep=keep, remove=remove, base=base)
    floor = 0.25
    out = markov_cores.validate_at_energy_rank(res, floor)
    for m, r in enumerate([2, 3, 1]):
        assert out["kept"][m] == pytest.approx(float(keep[m, r]))
        assert out["removed"][m] == pytest.approx(float(remove[m, r]))
        assert out["ratio"][m] == pytest.approx(float(keep[m, r]) / float(base[m]), rel=1e-6)
    suff = [next((r for r in range(K + 1) if keep[m, r] >= base[m] - 1e-3), -1) for m in range(M)]
    nec = [next((r for r in range(K + 1) if remove[m, r] <= floor), -1) for m in range(M)]
    assert out["sufficient"] == suff == [2, 4, -1]
    assert out["necessary"] == nec == [2, 4, -1]


def test_identify_operator_against_numpy_lstsq():
    rng = np.random.default_rng(2)
    res = _result(rng)
    T = np.array([[0.05, 0.05, 0.8, 0.1], [0.05, 0.05, 0.8, 0.1], [0.1, 0.05, 0.05, 0.8], [0.5, 0.4, 0.05, 0.05]])
    for rank, expected_ranks in [(None, [2, 2, 3]), (2, [2, 2, 2])]:
        fit = markov_cores.identify_operator(res, T, rank)
        oracle = markov.oracle_r2(T)
        for m, r in enumerate(expected_ranks):
            z = _coords(res, "train", m, r)
            X, Y = z[:, :-1].reshape(-1, r), z[:, 1:].reshape(-1, r)
            A = np.linalg.lstsq(X, Y, rcond=None)[0].T
            eig = np.linalg.eigvals(A)
            np.testing.assert_allclose(np.sort_complex(fit["eigs"][m]), np.sort_complex(eig), atol=1e-10)
            ref = np.linalg.eigvals(T)
            ref = np.delete(ref, np.argmin(np.abs(ref - 1)))
            ref = ref[np.argsort(-np.abs(ref), kind="stable")[:r]]
            best = min(itertools.permutations(range(r)), key=lambda p: sum(abs(eig[i] - ref[j]) for i, j in enumerate(p)))
            err = max(abs(eig[i] - ref[j]) for i, j in enumerate(best))       # the max over the min-cost matching
            assert fit["err"][m] == pytest.approx(err, abs=1e-10)
            zt = _coords(res, "test", m, r)
            Xt, Yt = zt[:, :-1].reshape(-1, r), zt[:, 1:].reshape(-1, r)
            e = Yt - Xt @ A.T
            Yc = Yt - Yt.mean(0)
            r2 = 1 - np.trace(np.linalg.solve(Yc.T @ Yc, e.T @ e)) / r
            assert fit["r2"][m] == pytest.approx(r2, abs=1e-10)
            assert fit["r2_ratio"][m] == pytest.approx(r2 / oracle, abs=1e-10)


def test_shared_rows_by_hand():
    T = np.array([[0.1, 0.9, 0.0], [0.5, 0.5, 0.0], [0.1, 0.9, 0.0]])
    row_of, shared = markov_cores.shared_rows(T)
    assert shared == [(0, 2)]
    assert row_of[0] == row_of[2] != row_of[1]
    _, none = markov_cores.shared_rows(markov.cyclic_transition(4))
    assert none == []


class _Linear:
    """A stand-in model whose unembed is h W + b."""

    def __init__(self, W, b):
        self.W, self.b = torch.tensor(W, dtype=torch.float32), torch.tensor(b, dtype=torch.float32)

    def unembed(self, h):
        return h @ self.W + self.b


def test_shared_row_analysis_against_numpy():
    rng = np.random.default_rng(3)
    n, L = 30, 4
    x = torch.tensor(np.tile(np.arange(K), n * L // K).reshape(n, L))     # every state occurs
    res = _result(rng, rank=(2, 3, 2), n=n, T_len=L)
    T = np.array([[0.05, 0.05, 0.8, 0.1], [0.05, 0.05, 0.8, 0.1], [0.1, 0.05, 0.05, 0.8], [0.5, 0.4, 0.05, 0.05]])
    W, b = rng.standard_normal((D, K)), rng.standard_normal(K)
    out = markov_cores.shared_row_analysis(_Linear(W, b), res, T, x)
    assert out.shared == [(0, 1)]
    labels = x.flatten().numpy()
    for m, r in enumerate([2, 3, 2]):
        z = _coords(res, "test", m, r).reshape(-1, r)
        cov_inv = np.linalg.inv(np.atleast_2d(np.cov(z.T)))
        means = np.stack([z[labels == k].mean(0) for k in range(K)])
        dist = np.array([[np.sqrt((means[a] - means[c]) @ cov_inv @ (means[a] - means[c])) for c in range(K)]
                         for a in range(K)])
        np.testing.assert_allclose(out.distances[m].numpy(), dist, atol=1e-6)
        assert out.shared_distance[m] == pytest.approx(dist[0, 1], abs=1e-6)
        assert out.apart_distance[m] == pytest.approx(max(dist[a, c] for a in range(K) for c in range(a + 1, K)
                                                          if {a, c} != {0, 1}), abs=1e-6)
        h = res.h_test[m].numpy().reshape(-1, D)
        Q, mu = res.core.basis[m, :, :r].numpy(), res.core.mean[m].numpy()
        pred = ((h - (h - mu) @ Q @ Q.T) @ W + b).argmax(-1)
        for k in range(K):
            counts = np.array([np.sum(pred[labels == k] == j) for j in range(K)])
            np.testing.assert_allclose(out.shares[m, k].numpy(), counts / counts.sum(), atol=1e-12)


class _Weights:
    """A stand-in ensemble whose weight_matrices() are fixed rows."""

    def __init__(self, W):
        self.W = torch.tensor(W)

    def weight_matrices(self):
        return self.W


def test_weight_cosines_against_numpy():
    rng = np.random.default_rng(4)
    Wt, Wi = rng.standard_normal((M, 10)), rng.standard_normal((M, 10))
    out = markov_cores.weight_cosines(_Weights(Wt), _Weights(Wi))

    def cos(u, v):
        return u @ v / np.linalg.norm(u) / np.linalg.norm(v)

    for a in range(M):
        assert out["own_init"][a] == pytest.approx(cos(Wt[a], Wi[a]))
        assert out["self"][a] == pytest.approx(1.0)
        for c in range(M):
            assert out["trained"][a, c] == pytest.approx(cos(Wt[a], Wt[c]))
            assert out["init"][a, c] == pytest.approx(cos(Wi[a], Wi[c]))


def _numpy_cca(X, Y):
    """Canonical correlations by QR of each centred block and the SVD of QxᵀQy."""
    Qx = np.linalg.qr(X - X.mean(0))[0]
    Qy = np.linalg.qr(Y - Y.mean(0))[0]
    return np.linalg.svd(Qx.T @ Qy, compute_uv=False)


def test_compare_seeds_against_numpy():
    rng = np.random.default_rng(5)
    res = _result(rng, n=50)
    ranks = [2, 2, 3]
    out = markov_cores.compare_seeds(res, ranks)
    Q = res.core.basis.numpy()
    cca_all = []
    for a, c in [(0, 1), (0, 2), (1, 2)]:
        ra, rc = ranks[a], ranks[c]
        ov = np.sum((Q[a, :, :ra].T @ Q[c, :, :rc]) ** 2) / np.sqrt(ra * rc)
        assert out["overlap"][a, c] == out["overlap"][c, a] == pytest.approx(ov)
        cc = _numpy_cca(_coords(res, "test", a, ra).reshape(-1, ra), _coords(res, "test", c, rc).reshape(-1, rc))
        cca_all.extend(cc)
        assert out["cca_min"][a, c] == pytest.approx(cc.min(), abs=1e-5)
        null = subspaces.random_projector_overlap(D, ra, rc).numpy()
        assert out["percentile"][a, c] == pytest.approx(np.mean(null < ov))
    np.testing.assert_allclose(out["cca_all"], cca_all, atol=1e-5)
    np.testing.assert_array_equal(np.diag(out["overlap"]), 1.0)
    assert out["self_percentile"] == [1.0, 1.0, 1.0]          # a core against itself beats every random pair
    assert len(out["random_q999"]) == 3
    assert out["random_mean"] == pytest.approx(np.mean([2 / D, np.sqrt(6) / D, np.sqrt(6) / D]))


def test_compare_seeds_orthogonal_cores_are_below_chance():
    rng = np.random.default_rng(6)
    res = _result(rng, n=20)
    res.core.basis[1] = res.core.basis[0].roll(-2, dims=1)          # model 1's top 2 = model 0's directions 3, 4
    out = markov_cores.compare_seeds(res, [2, 2, 2])
    assert out["overlap"][0, 1] == pytest.approx(0.0, abs=1e-12)
    assert out["percentile"][0, 1] == 0.0
