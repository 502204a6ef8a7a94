"""``grokking_cores.last_token_summary(analysis="authors")`` against the ACE authors' analyze_epoch, re-derived here in numpy
from its published steps (test-pair extraction with plain logits and a 1e-8 jitter, ablations without the mean,
the necessary scan from the energy rank, operational ranks, test-pair class means, their mode bins)."""
import numpy as np
import pytest
import torch

from corekit import ace
from corekit.chapters import grokking_cores
from corekit.models import BatchedTransformer, TransformerConfig
from corekit.tasks.modular import modular_addition
from corekit.train import train_ensemble

P = 13
CFG = TransformerConfig.ace_authors(P, d_model=16, d_mlp=32, n_heads=2, dropout=0.0)


def _factor(A, eps=1e-8):
    tr = np.trace(A)
    w, U = np.linalg.eigh(A)
    return U @ np.diag(np.sqrt(np.clip(w, 0, None) + eps * (tr / A.shape[0] if tr > 0 else 1.0)))


def _reference(h, W, b, y, p, threshold=0.99):
    """The authors' per-model analysis of last-token states h (N, D) with readout logits = h W + b."""
    N, D = h.shape
    hc = h - h.mean(0)
    cov, obs = hc.T @ hc / (N - 1), W @ W.T
    Lc, Lo = _factor(cov), _factor(obs)
    U, s, _ = np.linalg.svd(Lc.T @ Lo)
    Q, _ = np.linalg.qr(Lc @ U)
    w = s ** 2
    cum = np.cumsum(w) / (w.sum() + 1e-12)
    energy = int(np.nonzero(cum >= threshold)[0][0]) + 1
    acc = lambda hh: float(np.mean(np.argmax(hh @ W + b, -1) == y))  # noqa: E731
    base = acc(h)
    proj = lambda r: h @ Q[:, :r] @ Q[:, :r].T  # noqa: E731
    nec = next((r for r in range(energy, D + 1) if acc(h - proj(r)) <= 2 / p), D)
    suf = next((r for r in range(1, D + 1) if acc(proj(r)) >= base - 1e-3), D)
    r_nec, r_suf = max(energy, nec), max(energy, suf)
    Z = h @ Q[:, :r_nec]
    reps = np.stack([Z[y == c].mean(0) for c in range(p)])
    X, Y = reps - reps.mean(0), np.roll(reps, -1, axis=0) - reps.mean(0)
    _, sv, Vt = np.linalg.svd(X, full_matrices=False)
    k = max(1, min(int(np.sum(sv >= 1e-3 * sv[0])), p - 1, r_nec))
    Xk, Yk = X @ Vt[:k].T, Y @ Vt[:k].T
    A = np.linalg.lstsq(Xk, Yk, rcond=None)[0]
    r2 = 1 - np.sum((Yk - Xk @ A) ** 2) / np.sum((Yk - Yk.mean(0)) ** 2)
    ev = np.linalg.eigvals(A)
    near = np.abs(np.abs(ev) - 1) <= np.sin(np.pi / p)
    kk = np.mod(np.rint(np.angle(ev[near]) * p / (2 * np.pi)).astype(int), p)
    return {"energy": energy, "necessary": r_nec, "sufficient": r_suf, "necessary_strict": nec,
            "sufficient_strict": suf, "r2": r2, "circle": float(np.mean(near)),
            "modes": len(set(np.minimum(kk, p - kk).tolist()))}


@pytest.fixture(scope="module")
def setup():
    task = modular_addition(P, 0.5, 42, split="numpy")
    tokens = task.tokens(equals=False)
    model = BatchedTransformer(CFG, seeds=[0, 1, 2])
    train, _ = task.datasets(equals=False)
    train_ensemble(model, train, steps=200, lr=[3e-3, 1e-2, 3e-2], weight_decay=1.0, progress=False)
    model.eval()
    data = (tokens[task.train_idx], tokens[task.test_idx], task.labels[task.test_idx], tokens, task.labels)
    return model, data


def test_authors_analysis_returns_the_reference_numbers(setup):
    model, data = setup
    got = grokking_cores.last_token_summary(model, *data, analysis="authors")
    with torch.no_grad():
        h = model.residual(data[1])[:, :, -1].double().numpy()
    y = data[2].numpy()
    for m in range(model.n_models):
        want = _reference(h[m], model.p("W_U")[m].detach().double().numpy(),
                          model.p("b_U")[m].detach().double().numpy(), y, P)
        for key in ("energy", "necessary", "sufficient", "necessary_strict", "sufficient_strict", "modes"):
            assert got[key][m] == want[key], (m, key)
        assert got["r2"][m] == pytest.approx(want["r2"], abs=1e-6)
        assert got["circle"][m] == pytest.approx(want["circle"], abs=1e-9)
    assert got["fit_on"] == "test"


def test_analyses_differ_where_documented_and_names_are_checked(setup):
    model, data = setup
    ours = grokking_cores.last_token_summary(model, *data)
    theirs = grokking_cores.last_token_summary(model, *data, analysis="authors")
    assert ours["fit_on"] == "all" and theirs["fit_on"] == "test"
    assert all(n >= e for n, e in zip(theirs["necessary"], theirs["energy"]))      # operational floor
    with pytest.raises(ValueError, match="analysis must be one of"):
        grokking_cores.last_token_summary(model, *data, analysis="paper")


def test_minus_one_falls_in_the_last_bin():
    for p in (7, 31, 53):
        assert ace.frequency_modes(np.array([-1.0 + 0j]), p) == [p // 2]
        assert ace.frequency_modes(np.exp(2j * np.pi * np.arange(p) / p), p) == list(range(p // 2 + 1))


def test_jitter_lifts_both_factors():
    h = torch.randn(1, 40, 6, dtype=torch.float64)
    h[..., 5] = 0                                                         # a null direction
    obs = torch.eye(6, dtype=torch.float64)[None]
    plain, lifted = ace.extract(h, obs), ace.extract(h, obs, jitter=1e-6)
    assert float(plain.sigma[0, -1]) < 1e-12 < float(lifted.sigma[0, -1])
    torch.testing.assert_close(plain.sigma[0, :5], lifted.sigma[0, :5], rtol=1e-4, atol=0)
