"""Chapter 01's analyses (corekit.chapters.markov_cores) against numpy references on tiny hand-built ACE results:
index look-ups and first-rank loops, numpy least squares and eigenvalues, Mahalanobis distances, cosines, CCA; and
the chapter's claims decided on hand-made findings: every fail, every null that can pass, every undecided rule."""
import itertools
from types import SimpleNamespace

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


# --------------------------------------------------------------------------------------------
# The claims, decided on hand-made findings (no training)

SEEDS = [0, 100, 200]
PAPER_T = np.array([[0.75, 0.25, 0, 0], [0, 0.75, 0.25, 0], [0, 0, 0.75, 0.25], [0.25, 0, 0, 0.75]])
DEFICIENT_T = np.array([[0.05, 0.05, 0.8, 0.1], [0.05, 0.05, 0.8, 0.1], [0.1, 0.05, 0.05, 0.8], [0.5, 0.4, 0.05, 0.05]])


def _pairs(values):
    """A symmetric (3, 3) matrix with ones on the diagonal and ``values`` at (0, 1), (0, 2), (1, 2)."""
    m = np.eye(3)
    for (a, b), v in zip([(0, 1), (0, 2), (1, 2)], values):
        m[a, b] = m[b, a] = v
    return m


def _ensemble(acc, rank, ratio, removed, err, r2_ratio, cca, percentile):
    """The per-ensemble findings of one ensemble: ACE result, validation, operator fit and seed comparison."""
    return (SimpleNamespace(base_acc=torch.tensor(acc, dtype=torch.float64), rank=torch.tensor(rank)),
            dict(ratio=np.array(ratio, dtype=float), removed=np.array(removed, dtype=float)),
            dict(err=list(err), r2_ratio=np.array(r2_ratio, dtype=float)),
            dict(cca_min=_pairs(cca), cca_all=list(cca) * 2, overlap=_pairs([0.05, 0.06, 0.07]),
                 percentile=_pairs(percentile), random_mean=0.09375))


def _findings() -> markov_cores.Findings:
    """Findings where every tested claim passes: trained models at the Bayes accuracy with the expected cores, and
    controls (hand-made, not what an untrained model gives) that fail every bound."""
    bayes_p, bayes_d = markov.bayes_accuracy(PAPER_T), markov.bayes_accuracy(DEFICIENT_T)
    control = dict(acc=[0.6, 0.6, 0.6], rank=[1, 1, 1], ratio=[0.5, 0.6, 0.7], removed=[0.6, 0.6, 0.6],
                   err=[0.3, 0.4, 0.5], r2_ratio=[0.4, 0.5, 0.6], cca=[0.2, 0.3, 0.4], percentile=[1.0, 1.0, 1.0])
    ensembles = {
        "paper": _ensemble([bayes_p] * 3, [3, 3, 3], [1.0, 0.999, 1.0], [0.25, 0.26, 0.27], [0.01, 0.02, 0.005],
                           [1.0, 0.99, 1.01], [0.97, 0.98, 0.99], [0.3, 0.5, 0.9]),
        "paper, untrained": _ensemble(**control),
        "paper, shuffled": _ensemble(**control),
        "deficient": _ensemble([bayes_d] * 3, [2, 2, 2], [1.0, 1.0, 0.995], [0.33, 0.34, 0.35], [0.01, 0.002, 0.02],
                               [0.99, 0.985, 1.0], [0.98, 0.98, 0.99], [0.3, 0.4, 0.5]),
        "deficient, untrained": _ensemble(**control),
    }
    merged = markov_cores.SharedRows(row_of=np.array([0, 0, 1, 2]), shared=[(0, 1)], distances=[],
                                     shared_distance=[0.01, 0.02, 0.03], apart_distance=[2.5, 2.6, 2.7],
                                     shares=torch.zeros(3, 4, 4))
    cosines = dict(trained=_pairs([0.01, -0.02, 0.015]), init=_pairs([0.2, 0.1, -0.3]), self=np.ones(3),
                   own_init=np.array([0.5, 0.6, 0.4]))
    return markov_cores.Findings(seeds=SEEDS, chains={"paper": PAPER_T, "deficient": DEFICIENT_T},
                                 results={n: e[0] for n, e in ensembles.items()},
                                 validation={n: e[1] for n, e in ensembles.items()},
                                 identified={n: e[2] for n, e in ensembles.items()},
                                 compared={n: e[3] for n, e in ensembles.items()}, cosines=cosines, merged=merged)


def _decided(findings) -> dict:
    """{id: claim} of the claims decided on ``findings``."""
    return {c.id: c for c in markov_cores.claims(findings)}


def test_claims_all_pass_with_the_declared_ids_in_order_and_kinds():
    out = markov_cores.claims(_findings())
    assert [c.id for c in out] == [s.id for s in markov_cores.CLAIMS]
    assert {c.id for c in out if c.kind == "precondition"} == {"model_accuracy", "model_accuracy_deficient"}
    assert {c.id for c in out if c.kind == "extension"} == {"weight_cosine_init"} | {
        f"{i}_deficient" for i in ("core_rank", "keep_only_ratio", "remove_only_accuracy", "cca_min", "eig_max_error",
                                   "r2_core_over_oracle", "shared_row_distance")}
    assert {c.kind for c in out} == {"paper", "precondition", "extension"}
    verdicts = {c.id: c.verdict for c in out}
    reported = {"weight_cosine_init", "projector_overlap_random", "shared_row_distance_deficient"}
    assert {i for i, v in verdicts.items() if v == "reported"} == reported
    assert {i: v for i, v in verdicts.items() if i not in reported} == {i: "pass" for i in verdicts if i not in reported}
    assert {s.id for s in markov_cores.CLAIMS if s.kind == "precondition"} == {"model_accuracy", "model_accuracy_deficient"}


def test_claims_keep_the_chains_reference_values_in_bound_and_paper():
    out = _decided(_findings())
    assert out["model_accuracy"].target.endswith("= 0.75 ± 0.01, for every one of the seeds the profile trains "
                                                 "(only 3 models)")
    assert out["model_accuracy"].paper == 0.75
    assert "= 2, for every one" in out["core_rank_deficient"].target and out["core_rank_deficient"].paper == 2
    guess = markov.stationary_guess_accuracy(DEFICIENT_T)
    assert f"stationary guess {guess:.4f} + 0.05 ≤ {guess + 0.05:.4g}" in out["remove_only_accuracy_deficient"].target
    assert out["weight_cosine_init"].measured == pytest.approx(0.3)
    assert out["shared_row_distance_deficient"].measured == [0.01, 0.02, 0.03]
    assert out["shared_row_distance_deficient"].target == (
        "reported: whitened distance between the mean core coordinates of the states that share a row (0 for the "
        "Bayes code; the largest between states with different rows: 2.50–2.70)")


def _set(findings, table, ensemble, key, values):
    """Replace ``table``[ensemble][key] of ``findings`` by ``values`` (a per-seed array or a pair matrix)."""
    getattr(findings, table)[ensemble][key] = values


#: (claim, how to break it, verdict, a substring of its reason): a fail of each tested claim.
FAILS = [
    ("model_accuracy", lambda f: f.results["paper"].base_acc.__setitem__(1, 0.7), "Fails: 2 of 3 models"),
    ("model_accuracy_deficient", lambda f: f.results["deficient"].base_acc.__setitem__(0, 0.72), "not seed 0"),
    ("core_rank", lambda f: f.results["paper"].rank.__setitem__(2, 2), "not seed 200 (2)"),
    ("core_rank_deficient", lambda f: f.results["deficient"].rank.__setitem__(2, 3), "not seed 200 (3)"),
    ("keep_only_ratio", lambda f: _set(f, "validation", "paper", "ratio", np.array([1.0, 0.9, 1.0])), "not seed 100"),
    ("keep_only_ratio_deficient", lambda f: _set(f, "validation", "deficient", "ratio", np.array([0.5, 1, 1])),
     "not seed 0"),
    ("remove_only_accuracy", lambda f: _set(f, "validation", "paper", "removed", np.array([0.25, 0.31, 0.25])),
     "not seed 100 (0.31)"),
    ("remove_only_accuracy_deficient", lambda f: _set(f, "validation", "deficient", "removed", np.array([0.4] * 3)),
     "0 of 3 models"),
    ("weight_cosine_max", lambda f: f.cosines.__setitem__("trained", _pairs([0.01, 0.07, 0.0])), "measured 0.07"),
    ("projector_overlap", lambda f: _set(f, "compared", "paper", "percentile", _pairs([0.3, 0.9995, 0.5])),
     "not 0–200 (0.9995)"),
    ("cca_min", lambda f: _set(f, "compared", "paper", "cca_min", _pairs([0.95, 0.5, 0.97])), "not 0–200 (0.5)"),
    ("cca_min_deficient", lambda f: _set(f, "compared", "deficient", "cca_min", _pairs([0.8, 0.95, 0.97])),
     "not 0–100 (0.8)"),
    ("cca_mean", lambda f: _set(f, "compared", "paper", "cca_all", [0.9, 0.95]), "measured 0.925"),
    ("eig_max_error", lambda f: _set(f, "identified", "paper", "err", [0.01, 0.05, 0.01]), "not seed 100 (0.05)"),
    ("eig_max_error_deficient", lambda f: _set(f, "identified", "deficient", "err", [0.01, 0.01, 0.11]),
     "whitened distance seed 0: 0.01, seed 100: 0.02, seed 200: 0.03"),
    ("r2_core_over_oracle", lambda f: _set(f, "identified", "paper", "r2_ratio", np.array([0.97, 1.0, 1.0])),
     "not seed 0 (0.97)"),
    ("r2_core_over_oracle_deficient", lambda f: _set(f, "identified", "deficient", "r2_ratio", np.array([0.95] * 3)),
     "the bound is the paper's on its cyclic chain"),
]


@pytest.mark.parametrize("claim_id, breaks, reason", FAILS, ids=[c[0] for c in FAILS])
def test_claims_fail_when_the_trained_models_miss_the_bound(claim_id, breaks, reason):
    findings = _findings()
    breaks(findings)
    out = _decided(findings)
    assert out[claim_id].verdict == "fail"
    assert out[claim_id].reason.startswith("Fails: ") and reason in out[claim_id].reason
    assert sum(c.verdict == "fail" for c in out.values()) == 1       # the others are untouched


def test_every_tested_claim_has_a_fail_case():
    tested = {s.id for s in markov_cores.CLAIMS if s.bound is not None}
    assert {c[0] for c in FAILS} == tested


#: (claim, the control or null that meets the bound, a substring of its reason): each null that can pass.
UNINFORMATIVE = [
    ("model_accuracy", lambda f: f.results["paper, shuffled"].base_acc.__setitem__(0, 0.755),
     "the same seeds trained on shuffled targets gives"),
    ("model_accuracy_deficient", lambda f: f.results["deficient, untrained"].base_acc.__setitem__(2, 0.7067),
     "the same seeds untrained gives"),
    ("core_rank", lambda f: f.results["paper, untrained"].rank.__setitem__(0, 3),
     "Centred logits cap the rank at K − 1 = 3, which any model reaches"),
    ("core_rank_deficient", lambda f: f.results["deficient, untrained"].rank.__setitem__(0, 2), "(1 of 3 cases pass)"),
    ("keep_only_ratio", lambda f: _set(f, "validation", "paper, shuffled", "ratio", np.array([1.4, 0.6, 0.6])),
     "keeps what its logits see"),
    ("keep_only_ratio_deficient", lambda f: _set(f, "validation", "deficient, untrained", "ratio", np.ones(3)),
     "(3 of 3 cases pass)"),
    ("remove_only_accuracy", lambda f: _set(f, "validation", "paper, untrained", "removed", np.array([0.22, 0.6, 0.6])),
     "meets with its core or without it"),
    ("remove_only_accuracy_deficient",
     lambda f: _set(f, "validation", "deficient, untrained", "removed", np.array([0.26, 0.16, 0.22])),
     "the same seeds untrained gives seed 0: 0.26"),
    ("weight_cosine_max", lambda f: f.cosines.__setitem__("init", _pairs([0.0186, 0.01, 0.0])),
     "near-orthogonal before training"),
    ("weight_cosine_max", lambda f: f.cosines.__setitem__("own_init", np.array([0.5, 0.03, 0.4])),
     "each trained model against its own initialisation gives"),
    ("projector_overlap", lambda f: _set(f, "compared", "paper, untrained", "percentile", _pairs([0.8, 1.0, 1.0])),
     "Cores that no training shaped are as near-orthogonal"),
    ("projector_overlap", lambda f: _set(f, "compared", "paper, shuffled", "percentile", _pairs([1.0, 1.0, 0.4])),
     "the same seeds trained on shuffled targets (cores at rank(T − 1πᵀ)) gives"),
    ("cca_min", lambda f: _set(f, "compared", "paper, shuffled", "cca_min", _pairs([0.95, 0.96, 0.97])),
     "(3 of 3 cases pass)"),
    ("cca_min_deficient", lambda f: _set(f, "compared", "deficient, untrained", "cca_min", _pairs([0.2, 0.3, 0.91])),
     "(1 of 3 cases pass)"),
    ("cca_mean", lambda f: _set(f, "compared", "paper, untrained", "cca_all", [0.98]), "the same seeds untrained gives 0.98"),
    ("eig_max_error", lambda f: _set(f, "identified", "paper, untrained", "err", [0.02, 0.4, 0.5]), "(1 of 3 cases pass)"),
    ("eig_max_error_deficient", lambda f: _set(f, "identified", "deficient, untrained", "err", [0.3, 0.0, 0.5]),
     "the same seeds untrained gives"),
    ("r2_core_over_oracle", lambda f: _set(f, "identified", "paper, shuffled", "r2_ratio", np.array([0.4, 0.99, 0.6])),
     "the same seeds trained on shuffled targets gives"),
    ("r2_core_over_oracle_deficient",
     lambda f: _set(f, "identified", "deficient, untrained", "r2_ratio", np.array([0.4, 0.5, 0.99])),
     "(1 of 3 cases pass)"),
]


@pytest.mark.parametrize("claim_id, null_passes, reason", UNINFORMATIVE,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(UNINFORMATIVE)])
def test_claims_are_uninformative_when_a_null_meets_the_bound(claim_id, null_passes, reason):
    findings = _findings()
    null_passes(findings)
    out = _decided(findings)
    assert out[claim_id].verdict == "uninformative"
    assert out[claim_id].reason.startswith("Uninformative: ") and reason in out[claim_id].reason
    assert sum(c.verdict == "uninformative" for c in out.values()) == 1


def test_every_tested_claim_has_an_uninformative_case():
    assert {c[0] for c in UNINFORMATIVE} == {s.id for s in markov_cores.CLAIMS if s.bound is not None}


def test_the_why_of_an_uninformative_row_is_absent_when_no_null_passes():
    out = _decided(_findings())
    assert out["remove_only_accuracy"].reason is None and out["weight_cosine_max"].reason is None


@pytest.mark.parametrize("chain", ["paper", "deficient"])
def test_claims_about_models_that_learned_are_undecided_when_a_seed_did_not(chain):
    findings = _findings()
    findings.results[chain].base_acc[1] = 0.3          # below halfway from the stationary guess to Bayes
    out = _decided(findings)
    sfx = "" if chain == "paper" else "_deficient"
    undecided = {i for i, c in out.items() if c.verdict == "undecided"}
    expected = {f"remove_only_accuracy{sfx}"} | ({"weight_cosine_max", "projector_overlap", "cca_mean"}
                                                 if chain == "paper" else set())
    assert undecided == expected
    for claim_id in expected:
        assert "Undecided: seed 100 (0.300) did not learn the chain" in out[claim_id].reason
    assert out[f"model_accuracy{sfx}"].verdict == "fail"
    for key in ("keep_only_ratio", "eig_max_error", "r2_core_over_oracle"):   # decided on the seeds that learned
        claim = out[f"{key}{sfx}"]
        assert "seed 100" not in claim.measured and "without seed 100" in claim.target, key
    assert all("100" not in pair for pair in out[f"cca_min{sfx}"].measured)


def test_d1_no_claim_about_trained_models_is_decided_when_no_seed_learned():
    findings = _findings()
    findings.results["paper"].base_acc[:] = 0.3
    out = _decided(findings)
    for key in ("keep_only_ratio", "cca_min", "cca_mean", "eig_max_error", "r2_core_over_oracle",
                "remove_only_accuracy", "weight_cosine_max", "projector_overlap"):
        assert out[key].verdict == "undecided", (key, out[key].verdict)
    assert out["model_accuracy"].verdict == "fail"


def test_the_old_nulls_that_could_not_pass_are_gone():
    out = _decided(_findings())
    whats = {c.id: [n["what"] for n in c.nulls] for c in out.values()}
    assert whats["weight_cosine_max"] == ["the same seeds' independent random initialisations (no training)",
                                          "each trained model against its own initialisation"]
    assert whats["projector_overlap"] == [f"{markov_cores.CONTROLS[c]} (cores at rank(T − 1πᵀ))"
                                          for c in ("untrained", "shuffled")]
    assert whats["remove_only_accuracy"] == list(markov_cores.CONTROLS.values())
    assert whats["remove_only_accuracy_deficient"] == ["the same seeds untrained"]


def test_unlearned_reason_names_the_seeds_below_halfway():
    assert markov_cores.unlearned_reason(SEEDS, [0.75, 0.75, 0.75], PAPER_T) is None
    reason = markov_cores.unlearned_reason(SEEDS, [0.75, 0.49, 0.2], PAPER_T)
    assert reason.startswith("seed 100 (0.490), seed 200 (0.200) did not learn the chain (held-out accuracy below 0.500")


def test_check_inputs_is_the_chapters():
    from corekit.runs import checks

    assert checks.chapter_check("01_markov_cores") is markov_cores.check_inputs
