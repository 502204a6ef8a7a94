"""Chapter 02's measurement (corekit.chapters.grokking_cores) against independent references: brute-force walks over
the epochs, hand tables of accuracies, numpy least-squares shift fits and ablations, and the checkpoint file read back
with plain ``torch.load``; its claims on hand-made findings, one test for every rule that yields a verdict but pass."""
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from corekit import shard_records
from corekit.chapters import grokking_cores
from corekit.models import BatchedTransformer, TransformerConfig
from corekit.tasks.modular import modular_addition
from corekit.train import History, train_ensemble

REPO = Path(__file__).resolve().parents[1]
P = 11
CFG = TransformerConfig.ace_authors(P, d_model=12, d_mlp=24, n_heads=2, n_layers=1, dropout=0.0)
SEEDS = [0, 1, 0, 1]
STEPS = [0, 40, 80]


@pytest.fixture(scope="module")
def trained():
    """Four tiny models with snapshots at STEPS, and the chapter's data tuple (train_x, test_x, test_y, all_x, all_labels)."""
    task = modular_addition(P, 0.5, 42, split="numpy")
    train, test = task.datasets(equals=False)
    model = BatchedTransformer(CFG, seeds=SEEDS)
    history = train_ensemble(model, train, test, steps=STEPS[-1], lr=[3e-3, 1e-2, 3e-2, 1e-2], weight_decay=1.0,
                             snapshot_steps=STEPS, eval_every=40, progress=False)
    model.eval()
    tokens = task.tokens(equals=False)
    return model, history, (train.x, test.x, test.y[:, 0] if test.y.dim() > 1 else test.y, tokens, task.labels)


def _fresh(state):
    """Return a new ensemble (CFG, SEEDS) in eval mode holding ``state``."""
    model = BatchedTransformer(CFG, seeds=SEEDS).eval()
    model.load_state_dict(state)
    return model


def _shift_fit_reference(z, y, p, rcond=1e-3):
    """(R², circle fraction, modes) of the least-squares shift fit on centred class means of z (N, r), in numpy."""
    means = np.stack([z[y == c].mean(0) for c in range(p)])
    means = means - means.mean(0)
    _, s, vt = np.linalg.svd(means, full_matrices=False)
    k = min(int(np.sum((s > 0) & (s >= rcond * s[0]))), p - 1)
    X = means @ vt[:k].T
    Y = np.roll(X, -1, axis=0)
    A = np.linalg.lstsq(X, Y, rcond=None)[0]
    r2 = 1 - np.sum((Y - X @ A) ** 2) / np.sum(Y ** 2)
    ev = np.linalg.eigvals(A)
    near = np.abs(np.abs(ev) - 1) <= np.sin(np.pi / p)
    kk = np.mod(np.rint(np.angle(ev[near]) * p / (2 * np.pi)).astype(int), p)
    return r2, float(np.mean(near)), len(set(np.minimum(kk, p - kk).tolist()))


def test_checkpoint_steps_match_a_walk_over_the_epochs():
    assert grokking_cores.checkpoint_steps(10, 2, 3, 4, 6, 3) == [0, 6, 8, 12, 18, 20]      # by hand
    for epochs, epoch_steps, fork, every, dense, after in [(10, 2, 3, 4, 6, 3), (25, 1, 7, 5, 30, 4),
                                                           (25, 3, 0, 5, 0, 4), (9, 1, 9, 2, 5, 10)]:
        want = {e * epoch_steps for e in range(epochs + 1)
                if (e <= dense and e % every == 0) or (dense < epochs and e >= dense and (e - dense) % after == 0)}
        want |= {fork * epoch_steps, epochs * epoch_steps}
        assert grokking_cores.checkpoint_steps(epochs, epoch_steps, fork, every, dense, after) == sorted(want)


def test_at_checkpoints_picks_the_evaluated_rows():
    history = History(steps=[0, 5, 10, 15])
    curve = torch.arange(8.0).reshape(4, 2)
    got = grokking_cores.at_checkpoints(history, curve, [0, 10, 15])
    assert got.tolist() == [[0.0, 1.0], [4.0, 5.0], [6.0, 7.0]]


def test_grokking_points_on_hand_tables():
    steps = [0, 10, 20, 30, 40]
    # two weight-decay models, then two ω → 0 models that never count
    test = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.1, 0.2, 1.0, 1.0], [0.5, 0.995, 1.0, 1.0],
                         [0.99, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    train = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.99, 0.5, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0],
                          [1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    pts = grokking_cores.grokking_points(steps, test, train, 2)
    assert (pts.grok_step, pts.memorised_step, pts.i_grok, pts.i_before, pts.final) == (30, 20, 3, 2, 4)
    assert pts.has_grok and pts.seed_grok == [3, 2] and pts.seed_memorised == [1, 2]
    # each seed at its own checkpoints: seed 1 memorises and groks at index 2, so its "before" is index 1
    assert pts.seed_i_grok == [3, 2] and pts.seed_i_before == [1, 1]
    # memorised at the grokking checkpoint: "before" is the one just before it
    same = grokking_cores.grokking_points(steps, test, torch.where(torch.arange(5)[:, None] < 3, 0.0, 1.0).expand(5, 4), 2)
    assert (same.i_grok, same.i_before, same.memorised_step) == (3, 2, 30)
    # never groks: grokking falls on the last checkpoint, memorisation never reached counts as the first
    never = grokking_cores.grokking_points(steps, test * 0.5, train * 0.5, 2)
    assert not never.has_grok and never.grok_step is None and never.memorised_step is None
    assert (never.i_grok, never.i_before, never.final) == (4, 0, 4)
    assert never.seed_grok == [None, None] and never.seed_memorised == [None, None]
    assert never.seed_i_grok == [4, 4] and never.seed_i_before == [0, 0]


def test_cores_at_checkpoints_tabulates_each_checkpoint(trained):
    model, history, data = trained
    cores = grokking_cores.cores_at_checkpoints(model, history.snapshots, STEPS, data, 0.99)
    for a in grokking_cores.ANALYSES:
        for c, step in enumerate(STEPS):
            want = grokking_cores.last_token_summary(_fresh(history.snapshots[step]), *data, analysis=a)
            for key in ("energy", "sufficient", "necessary", "fit_rank", "modes"):
                assert cores.runs[a][key][c] == want[key], (a, step, key)
            np.testing.assert_allclose(cores.runs[a]["r2"][c], want["r2"], rtol=1e-6)
        for k in grokking_cores.RANK_KEYS:
            assert cores.ranks[a][k].shape == (len(STEPS), len(SEEDS)) and cores.ranks[a][k].dtype == float
            assert cores.ranks[a][k].tolist() == [[float(v) for v in row] for row in cores.runs[a][k]]
        for k in grokking_cores.FIT_KEYS:
            np.testing.assert_array_equal(cores.fit[a][k], np.array(cores.runs[a][k], dtype=float))
    for name, value in model.state_dict().items():                         # the model holds the last checkpoint
        torch.testing.assert_close(value, history.snapshots[STEPS[-1]][name])


def _fourier_modes_reference(means, share=0.9):
    """The fewest frequencies k >= 1 holding ``share`` of the non-constant power of class means (p, r), by explicit
    cos/sin projections over the classes (no FFT)."""
    p = means.shape[0]
    c = np.arange(p)
    power = np.array([np.sum((np.cos(2 * np.pi * k * c / p) @ means) ** 2 + (np.sin(2 * np.pi * k * c / p) @ means) ** 2)
                      for k in range(1, p // 2 + 1)])
    held = np.cumsum(np.sort(power)[::-1]) / power.sum()
    return int(np.argmax(held >= share - 1e-12)) + 1


def test_fourier_mode_count_against_cos_sin_projections():
    gen = np.random.default_rng(0)
    for p, r in [(7, 3), (31, 12), (53, 40)]:
        means = torch.from_numpy(gen.standard_normal((p, r)))
        for share in (0.5, 0.9, 1.0):
            assert grokking_cores.fourier_mode_count(means, share) == _fourier_modes_reference(means.numpy(), share)
    c = torch.arange(31, dtype=torch.float64)
    wave = lambda k, amp: amp * torch.stack([torch.cos(2 * np.pi * k * c / 31), torch.sin(2 * np.pi * k * c / 31)], 1)  # noqa: E731
    assert grokking_cores.fourier_mode_count(wave(3, 1.0)) == 1                    # one rotation: one mode
    two = torch.cat([wave(3, 1.0), wave(11, 0.5)], 1)                             # power 1 : 0.25 → 80 % at k = 3
    assert grokking_cores.fourier_mode_count(two, 0.75) == 1 and grokking_cores.fourier_mode_count(two, 0.9) == 2
    assert grokking_cores.fourier_mode_count(torch.ones(31, 2, dtype=torch.float64)) == 0   # constant means: no mode
    with pytest.raises(ValueError, match="share"):
        grokking_cores.fourier_mode_count(two, 0.0)


def test_settle_checkpoint_and_crystallization_gaps_on_hand_tables():
    #        0   1   2   3   4   5   6   7   8   9  10
    ranks = [30, 25, 20, 14, 13, 12, 12, 13, 12, 12, 12]
    assert grokking_cores.settle_checkpoint(ranks, 5) == 4                         # 13 is within 1 of 12, 14 is not
    assert grokking_cores.settle_checkpoint(ranks, 5, tol=2) == 3
    assert grokking_cores.settle_checkpoint(ranks, 5, tol=0) is None              # 13 at checkpoint 7 leaves the band
    assert grokking_cores.settle_checkpoint(ranks, 5, tol=0, after=1) == 5
    assert grokking_cores.settle_checkpoint([5, 5, 5, 9, 5], 1, after=1) == 0
    assert grokking_cores.settle_checkpoint([5, 5, 5, 9, 5], 1, after=2) is None  # leaves the band right after grokking
    energy = np.array([[30, 30], [20, 12], [13, 12], [12, 12], [12, 12]])       # (C, S)
    to_grok, to_mem, settle = grokking_cores.crystallization_gaps(energy, [3, None], [1, 1])
    assert settle == [2, None] and to_grok == [1, None] and to_mem == [1, None]
    with pytest.raises(ValueError, match="i_grok"):
        grokking_cores.settle_checkpoint(ranks, 11)


def test_regime_reason_undecided_only_for_failing_seeds_in_the_regime():
    bound = type("AtLeast2", (), {"test": staticmethod(lambda v: v is not None and v >= 2)})()
    saturated = ("a rank at the cap", {"seed 0": True, "seed 1": False, "seed 2": False})
    never = ("no grokking", {"seed 0": False, "seed 1": False, "seed 2": True})
    # the only failing seed is saturated: undecided, naming it
    assert grokking_cores.regime_reason({"seed 0": 1.1, "seed 1": 2.5, "seed 2": 3.0}, bound, [saturated, never]) == \
        "a rank at the cap for seed 0"
    # an unsaturated seed fails too: the claim fails (None)
    assert grokking_cores.regime_reason({"seed 0": 1.1, "seed 1": 1.5, "seed 2": 3.0}, bound, [saturated, never]) is None
    # every seed passes: decided by the value and its nulls (None)
    assert grokking_cores.regime_reason({"seed 0": 2.1, "seed 1": 2.5, "seed 2": 3.0}, bound, [saturated]) is None
    # two regimes, each failing seed in one
    assert grokking_cores.regime_reason({"seed 0": 1.0, "seed 1": 2.5, "seed 2": None}, bound, [saturated, never]) == \
        "a rank at the cap for seed 0; no grokking for seed 2"
    # an undefined model makes the claim undecided even when its value passes ...
    assert grokking_cores.regime_reason({"seed 0": 2.1, "seed 1": 2.5, "seed 2": 3.0}, bound, undefined=never) == \
        "no grokking for seed 2"
    # ... but not when another model fails outside every regime
    assert grokking_cores.regime_reason({"seed 0": 2.1, "seed 1": 1.0, "seed 2": 3.0}, bound, [saturated],
                                        undefined=never) is None
    assert grokking_cores.regime_reason({"seed 0": 1.0, "seed 1": 2.5, "seed 2": 3.0}, bound, [saturated],
                                        undefined=never) == "no grokking for seed 2; a rank at the cap for seed 0"


def test_seed_values_rounds_floats_and_keeps_the_rest():
    got = grokking_cores.seed_values(["a", "b", "c", "d"], [np.float64(0.12345), np.int64(3), np.bool_(True), None])
    assert got == {"a": 0.123, "b": 3, "c": True, "d": None} and type(got["b"]) is int and type(got["c"]) is bool
    with pytest.raises(ValueError, match="one value per model"):
        grokking_cores.seed_values(["a"], [1, 2])


def test_shift_fit_matches_numpy_and_an_exact_rotation():
    gen = torch.Generator().manual_seed(0)
    M, N, D, p = 2, 60, 6, 7
    h = torch.randn(M, N, D, generator=gen, dtype=torch.float64)
    basis = torch.linalg.qr(torch.randn(M, D, D, generator=gen, dtype=torch.float64))[0]
    core = grokking_cores.Core(basis=basis, sigma=torch.ones(M, D, dtype=torch.float64), mean=h.mean(1))
    y = torch.arange(N) % p
    for m, rank, shuffle in [(0, 4, None), (1, 3, None), (1, 5, 3)]:
        yy = y if shuffle is None else y[torch.randperm(N, generator=torch.Generator().manual_seed(shuffle))]
        z = ((h[m] - h[m].mean(0)) @ basis[m, :, :rank]).numpy()
        r2, circle, modes = _shift_fit_reference(z, yy.numpy(), p)
        got = grokking_cores.shift_fit(core, h, y, rank, m, p, shuffle_seed=shuffle)
        assert got[0] == pytest.approx(r2, abs=1e-9) and got[1] == pytest.approx(circle) and got[2] == modes
        means = np.stack([z[yy.numpy() == c].mean(0) for c in range(p)])
        assert got[3] == _fourier_modes_reference(means)
    # class means on a circle at frequency 2: the shift is that rotation, R² 1, every eigenvalue on the circle
    angle = 2 * np.pi * 2 * y.double() / p
    h_rot = torch.stack([angle.cos(), angle.sin()], -1)[None]
    core_2 = grokking_cores.Core(basis=torch.eye(2, dtype=torch.float64)[None], sigma=torch.ones(1, 2),
                                 mean=torch.zeros(1, 2, dtype=torch.float64))
    r2, circle, modes, fourier = grokking_cores.shift_fit(core_2, h_rot, y, 2, 0, p)
    assert r2 == pytest.approx(1.0) and circle == 1.0 and modes == 1 and fourier == 1


def test_control_cases_name_model_and_rank_checkpoints():
    cases = grokking_cores.control_cases(i_grok=5, i_before=2, final=9)
    assert cases == {"grokked": (5, 5, False), "memorising": (2, 5, False), "shuffled": (5, 5, True),
                     "untrained": (0, 5, False), "untrained_at_before_rank": (0, 2, False),
                     "grokked_at_before_rank": (5, 2, False), "memorising_at_final_rank": (2, 9, False),
                     "untrained_at_final_rank": (0, 9, False)}


def test_exact_fit_controls_match_numpy_fits(trained):
    model, history, data = trained
    cores = grokking_cores.cores_at_checkpoints(model, history.snapshots, STEPS, data)
    cases = grokking_cores.control_cases(i_grok=2, i_before=1, final=2)
    S = 2
    got = grokking_cores.exact_fit_controls(model, history.snapshots, STEPS, data, cores.runs, [cases] * S)
    for a in grokking_cores.ANALYSES:
        x_fit, y = (data[1], data[2]) if a == "authors" else (data[3], data[4])
        for name, (i, j, shuffled) in cases.items():
            with torch.no_grad():
                h = _fresh(history.snapshots[STEPS[i]]).residual(x_fit)[:, :, -1].double()
            core = cores.runs[a]["core"][i]
            for m in range(S):
                rank = int(cores.runs[a]["fit_rank"][j][m])
                yy = y[torch.randperm(len(y), generator=torch.Generator().manual_seed(m))] if shuffled else y
                z = ((h[m] - core.mean[m]) @ core.basis[m, :, :rank]).numpy()
                r2, circle, modes = _shift_fit_reference(z, yy.numpy(), P)
                assert got[a][name][m][0] == pytest.approx(r2, abs=1e-4), (a, name, m)
                assert got[a][name][m][1] == pytest.approx(circle) and got[a][name][m][2] == modes, (a, name, m)
                means = np.stack([z[yy.numpy() == c].mean(0) for c in range(P)])
                assert got[a][name][m][3] == _fourier_modes_reference(means), (a, name, m)


def _authors_necessary(h, W, b, y, p, eps, centre, threshold=0.99):
    """The authors' operational necessary rank of last-token states h (N, D) (readout h W + b), in numpy, with the
    factors' jitter ``eps`` and, with ``centre``, ablations about the mean of h."""
    N, D = h.shape
    hc = h - h.mean(0)

    def factor(A):
        w, U = np.linalg.eigh(A)
        tr = np.trace(A)
        return U @ np.diag(np.sqrt(np.clip(w, 0, None) + eps * (tr / A.shape[0] if tr > 0 else 1.0)))

    Lc, Lo = factor(hc.T @ hc / (N - 1)), factor(W @ W.T)
    U, s, _ = np.linalg.svd(Lc.T @ Lo)
    Q, _ = np.linalg.qr(Lc @ U)
    energy = int(np.nonzero(np.cumsum(s ** 2) / np.sum(s ** 2) >= threshold - 1e-12)[0][0]) + 1
    mu = h.mean(0) if centre else np.zeros(D)
    acc = lambda hh: float(np.mean(np.argmax(hh @ W + b, -1) == y))  # noqa: E731
    nec = next((r for r in range(energy, D + 1) if acc(h - (h - mu) @ Q[:, :r] @ Q[:, :r].T) <= 2 / p), D)
    return max(energy, nec)


def test_null_direction_ranks_match_numpy_ablations(trained):
    model, history, data = trained
    state = history.snapshots[STEPS[-1]]
    S = 3
    got = grokking_cores.null_direction_ranks(model, history.snapshots, [STEPS[-1]] * S, data, 0.99)
    assert list(got) == ["jitter 0", "jitter 1e-8", "jitter 1e-6", "centred"]
    fresh = _fresh(state)
    with torch.no_grad():
        h = fresh.residual(data[1])[:, :, -1].double().numpy()
    W, b = fresh.p("W_U").detach().double().numpy(), fresh.p("b_U").detach().double().numpy()
    for label, eps, centre in (("jitter 1e-8", 1e-8, False), ("jitter 1e-6", 1e-6, False), ("centred", 1e-8, True)):
        assert got[label] == [_authors_necessary(h[m], W[m], b[m], data[2].numpy(), P, eps, centre) for m in range(S)]
    assert got["jitter 0"] == grokking_cores.last_token_summary(fresh, *data, analysis="authors", jitter=0.0)["necessary"][:S]


def test_spectrum_at_necessary_reads_the_rank_th_value():
    runs = {"spectrum": [None, [np.array([1.0, 0.5, 0.1]), np.array([1.0, 0.2, 0.01])]], "necessary": [None, [2, 3]]}
    assert grokking_cores.spectrum_at_necessary(runs, [1, 1]) == [0.5, 0.01]
    runs["spectrum"][0], runs["necessary"][0] = [np.array([1.0, 0.3]), None], [1, None]
    assert grokking_cores.spectrum_at_necessary(runs, [0, 1]) == [1.0, 0.01]          # each model at its own index


def test_checkpoints_round_trip(trained, tmp_path):
    model, history, data = trained
    path = tmp_path / "sub" / "ckpts.pt"
    written = grokking_cores.export_checkpoints(path, CFG, SEEDS, history.snapshots, STEPS, 40, p=P, split="numpy",
                                                data_seed=42, train_frac=0.5)
    assert written == path.resolve() and path.is_file()
    # the file is the documented dict, byte for byte what torch.save of it writes under the same name
    epochs = {s / 40: history.snapshots[s] for s in STEPS}
    plain = tmp_path / "ckpts.pt"                                      # torch.save names the archive after the file
    torch.save({"config": CFG.as_dict(), "seeds": SEEDS, "p": P, "split": "numpy", "data_seed": 42,
                "train_frac": 0.5, "epochs": epochs}, plain)
    assert path.read_bytes() == plain.read_bytes()
    back = grokking_cores.load_checkpoints(path)
    assert back.config == CFG and back.seeds == SEEDS and (back.p, back.split, back.data_seed, back.train_frac) == (
        P, "numpy", 42, 0.5)
    assert list(back.epochs) == [0.0, 1.0, 2.0]
    for e, state in epochs.items():
        assert back.epochs[e].keys() == state.keys()
        for name in state:
            assert torch.equal(back.epochs[e][name], state[name])
        loaded = back.model(e)
        assert not loaded.training
        with torch.no_grad():
            torch.testing.assert_close(loaded(data[3]), _fresh(state)(data[3]), rtol=0, atol=0)
            rebuilt = BatchedTransformer(TransformerConfig(**torch.load(path)["config"]), seeds=SEEDS).eval()
            rebuilt.load_state_dict(torch.load(path)["epochs"][e])
            assert torch.equal(loaded(data[3]), rebuilt(data[3]))


# --------------------------------------------------------------------------------------------
# claims(): hand-made findings, no training

#: Ten checkpoints (epoch_steps 1): the ω seeds memorise at index 1 (epoch 100) and grok at index 4 (epoch 400).
HAND_CHECKPOINTS = [0, 100, 200, 300, 400, 500, 600, 700, 800, 20001]
I_MEM, I_GROK, FINAL = 1, 4, 9
#: One seed of the hand tables over the 10 checkpoints, ω branch; the ω → 0 branch copies it but its necessary rank.
HAND_SEED = {
    "energy": [40, 30, 25, 20, 15, 15, 15, 15, 15, 15],
    "sufficient": [40, 30, 20, 15, 10, 10, 10, 10, 10, 10],
    "necessary": [40, 30, 20, 15, 10, 12, 15, 18, 20, 25],
    "fit_rank": [40, 30, 25, 20, 15, 15, 15, 18, 20, 25],
    "circle": [0.2, 0.1, 0.3, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
    "modes": [10, 8, 6, 5, 5, 6, 7, 8, 10, 12],
    "r2": [0.2, 0.3, 0.5, 0.7, 0.95, 0.96, 0.97, 0.98, 0.99, 0.99],
    "fourier_modes": [20, 15, 10, 8, 6, 8, 12, 16, 20, 25],
}
HAND_WD0_NECESSARY = [40, 30, 20, 15, 10, 10, 10, 10, 10, 10]
#: The exact-fit controls of one seed: (R², circle fraction, fit modes, Fourier modes); all fail the claims' bounds.
HAND_CONTROL = {"grokked": (0.95, 1.0, 5, 6), "memorising": (0.5, 0.0, 2, 15), "shuffled": (0.1, 0.0, 1, 20),
                "untrained": (0.3, 0.2, 3, 20), "untrained_at_before_rank": (0.3, 0.1, 3, 20),
                "grokked_at_before_rank": (0.99, 1.0, 5, 6), "memorising_at_final_rank": (0.6, 0.1, 4, 8),
                "untrained_at_final_rank": (0.4, 0.2, 5, 10)}


def _hand_findings(change=None, params=None, seed_grok=(I_GROK, I_GROK), seed_memorised=(I_MEM, I_MEM),
                   test_acc=None, null_ranks=None, spectrum=(0.01, 0.02)):
    """Return Findings for seeds 0 and 1 built from HAND_SEED / HAND_CONTROL at the paper's setting (fork epoch 901),
    after ``change(tables, control)`` edits them: tables[analysis][key] is an array (10, 4) (seeds 0, 1, then the ω → 0
    models), control[analysis][case] a list of two lists (one per seed)."""
    tables = {a: {k: np.array([v, v, v, v], dtype=float).T for k, v in HAND_SEED.items()} for a in grokking_cores.ANALYSES}
    for a in grokking_cores.ANALYSES:
        tables[a]["necessary"][:, 2:] = np.array(HAND_WD0_NECESSARY, dtype=float)[:, None]
    control = {a: {case: [list(row), list(row)] for case, row in HAND_CONTROL.items()} for a in grokking_cores.ANALYSES}
    if change is not None:
        change(tables, control)
    cores = grokking_cores.CheckpointCores(
        runs={}, ranks={a: {k: tables[a][k] for k in grokking_cores.RANK_KEYS} for a in tables},
        fit={a: {k: tables[a][k] for k in grokking_cores.FIT_KEYS} for a in tables})
    points = grokking_cores.GrokkingPoints(grok_step=HAND_CHECKPOINTS[I_GROK], memorised_step=HAND_CHECKPOINTS[I_MEM],
                                           i_grok=I_GROK, i_before=I_MEM, final=FINAL, seed_grok=list(seed_grok),
                                           seed_memorised=list(seed_memorised))
    if test_acc is None:
        test_acc = np.full((len(HAND_CHECKPOINTS), 4), 1.0)
        test_acc[0] = 0.02
    return grokking_cores.Findings(
        seeds=[0, 1], params={**grokking_cores.PAPER_SETTING, "fork_epoch": 901, **(params or {})},
        checkpoints=HAND_CHECKPOINTS, epoch_steps=1, test_acc=test_acc, points=points, cores=cores, control=control,
        null_ranks=null_ranks or {"jitter 0": [10, 10], "jitter 1e-8": [10, 11], "jitter 1e-6": [11, 11],
                                  "centred": [10, 12]},
        spectrum=list(spectrum))


def _decided(findings) -> dict:
    """Return {id: claim} of grokking_cores.claims(findings)."""
    return {c.id: c for c in grokking_cores.claims(findings)}


def _edit(key, row, column, value, analyses=("corekit",)):
    """Return a change() setting tables[a][key][row, column] = value for each analysis in ``analyses``."""
    def change(tables, control):
        for a in analyses:
            tables[a][key][row, column] = value
    return change


def _control(case, seed, index, value, analyses=("corekit",)):
    """Return a change() setting item ``index`` of control[a][case][seed] to ``value``."""
    def change(tables, control):
        for a in analyses:
            control[a][case][seed][index] = value
    return change


def test_claims_all_pass_on_a_grokking_run_at_the_paper_setting_in_the_declared_order_and_kinds():
    found = grokking_cores.claims(_hand_findings())
    assert [c.id for c in found] == [s.id for s in grokking_cores.CLAIMS]
    assert {c.id: c.kind for c in found if c.kind != "paper"} == {
        "grok_epoch": "precondition", "modes_at_grok": "extension", "modes_at_grok_authors": "extension",
        "null_direction_control": "check", "null_direction_spectrum": "check"}
    verdicts = {c.id: c.verdict for c in found}
    assert {i: v for i, v in verdicts.items() if v != "pass"} == {"modes_at_grok": "reported",
                                                                   "modes_at_grok_authors": "reported"}
    assert len(found) == 25
    claim = {c.id: c for c in found}
    assert claim["necessary_rank_growth"].measured == {"seed 0": 2.5, "seed 1": 2.5}
    assert claim["rank_at_grok"].measured == {"seed 0": 15, "seed 1": 15}
    assert claim["crystallization"].measured == {"seed 0": 0, "seed 1": 0}
    assert claim["null_direction_control"].measured == {"seed 0": 1, "seed 1": 2}


def test_grok_epoch_fails_below_the_threshold_and_is_uninformative_when_the_initial_model_passes():
    acc = np.full((len(HAND_CHECKPOINTS), 4), 1.0)
    acc[0], acc[-1, 1] = 0.02, 0.9
    claim = _decided(_hand_findings(test_acc=acc))["grok_epoch"]
    assert claim.verdict == "fail" and "not seed 1 (0.9)" in claim.reason
    acc = np.full((len(HAND_CHECKPOINTS), 4), 1.0)
    claim = _decided(_hand_findings(test_acc=acc))["grok_epoch"]
    assert claim.verdict == "uninformative" and "at initialisation" in claim.reason


def test_crystallization_fails_when_the_rank_settles_at_memorisation_and_is_uninformative_near_it():
    settles_early = _edit("energy", slice(1, 4), 0, 15)                        # 15 from checkpoint 1 on: 3 from grokking
    claim = _decided(_hand_findings(settles_early))["crystallization"]
    assert claim.verdict == "fail" and "not seed 0 (3)" in claim.reason
    claim = _decided(_hand_findings(seed_memorised=(3, 3)))["crystallization"]   # memorised one checkpoint before
    assert claim.verdict == "uninformative" and "memorisation checkpoint" in claim.reason


def test_a_seed_that_never_grokked_leaves_its_claims_undecided():
    found = _decided(_hand_findings(seed_grok=(None, I_GROK)))
    for cid in ("crystallization", "rank_at_grok", "crystallization_authors"):
        assert found[cid].verdict == "undecided", cid
        assert "no grokking checkpoint within 20001 epochs" in found[cid].reason and "seed 0" in found[cid].reason


def test_a_setting_other_than_the_papers_leaves_only_the_papers_numbers_undecided():
    found = _decided(_hand_findings(params={"d_model": 64, "d_mlp": 256}))
    for cid in ("rank_at_grok", "modes_final", "rank_at_grok_authors", "modes_final_authors"):
        assert found[cid].verdict == "undecided", cid
        assert "d_model 64, not 128; d_mlp 256, not 512" in found[cid].reason
        assert "paper profile" in found[cid].reason and "for seed 0, seed 1" in found[cid].reason
    assert "energy rank ≈ 15 at grokking" in found["rank_at_grok"].reason
    others = {c: v.verdict for c, v in found.items() if c not in grokking_cores.AT_PAPER_SETTING
              and c.removesuffix("_authors") not in grokking_cores.AT_PAPER_SETTING}
    assert set(others.values()) == {"pass", "reported"}
    # the two halves of inflation follow one rule: a shape (grows, stays flat), decided at any setting
    assert found["sufficient_rank_growth"].verdict == found["necessary_rank_growth"].verdict == "pass"


def test_rank_at_grok_fails_outside_the_band_and_is_uninformative_when_the_untrained_model_is_in_it():
    claim = _decided(_hand_findings(_edit("energy", slice(I_GROK, None), 0, 25)))["rank_at_grok"]
    assert claim.verdict == "fail" and "not seed 0 (25)" in claim.reason
    claim = _decided(_hand_findings(_edit("energy", 0, slice(None), 15)))["rank_at_grok"]
    assert claim.verdict == "uninformative" and "the untrained model (epoch 0)" in claim.reason


def test_unit_circle_fraction_at_grok_fails_and_is_uninformative_against_the_memorising_fit():
    claim = _decided(_hand_findings(_edit("circle", I_GROK, 0, 0.5)))["unit_circle_fraction_at_grok"]
    assert claim.verdict == "fail" and "not seed 0 (0.5)" in claim.reason
    claim = _decided(_hand_findings(_control("memorising", 1, 1, 0.9)))["unit_circle_fraction_at_grok"]
    assert claim.verdict == "uninformative" and "the memorising checkpoint at the same fit rank" in claim.reason


def test_each_seed_is_read_at_its_own_grokking_checkpoint():
    # seed 1 groks one checkpoint earlier than seed 0, where its circle fraction is 0.5: read there, it fails,
    # though at seed 0's grokking checkpoint (where the ensemble as a whole has grokked) it is 1.0
    early = _edit("circle", I_GROK - 1, 1, 0.5)
    claim = _decided(_hand_findings(early, seed_grok=(I_GROK, I_GROK - 1)))["unit_circle_fraction_at_grok"]
    assert claim.verdict == "fail" and "not seed 1 (0.5)" in claim.reason
    assert _decided(_hand_findings(early))["unit_circle_fraction_at_grok"].verdict == "pass"
    # its growth runs from its own grokking checkpoint: necessary rank 15 there, 25 at the end
    growth = _decided(_hand_findings(seed_grok=(I_GROK, I_GROK - 1)))["necessary_rank_growth"]
    assert growth.measured == {"seed 0": 2.5, "seed 1": round(25 / 15, 3)}


def test_unit_circle_fraction_before_fails_and_its_null_can_pass():
    claim = _decided(_hand_findings(_edit("circle", I_MEM, 0, 1.0)))["unit_circle_fraction_before"]
    assert claim.verdict == "fail" and "not seed 0 (False)" in claim.reason
    def untrained_below_memorising(tables, control):
        control["corekit"]["untrained"][0][1], control["corekit"]["memorising"][0][1] = 0.0, 0.5
    claim = _decided(_hand_findings(untrained_below_memorising))["unit_circle_fraction_before"]
    assert claim.verdict == "uninformative" and "the untrained model below the memorising one" in claim.reason


def test_operator_r2_before_fails_is_undecided_in_its_regimes_and_uninformative_against_the_grokked_fit():
    high = _edit("r2", I_MEM, 0, 0.8)
    claim = _decided(_hand_findings(high))["operator_r2_before"]
    assert claim.verdict == "fail" and "not seed 0 (0.8)" in claim.reason

    def untrained_high(tables, control):
        high(tables, control)
        control["corekit"]["untrained_at_before_rank"][0][0] = 0.7
    claim = _decided(_hand_findings(untrained_high))["operator_r2_before"]
    assert claim.verdict == "undecided"
    assert "an untrained model that already gives R² > 0.5 at the same fit rank ([0.7, 0.3])" in claim.reason
    assert "for seed 0" in claim.reason and "paper profile" not in claim.reason
    published = re.search(r"an untrained model that already gives R² > ([\d.]+) at the same fit rank \(\[([^\]]*)\]\)",
                          claim.reason)
    assert published and published.group(2) == "0.7, 0.3"              # what tests/test_published_decisions.py reads

    def near_p(tables, control):
        high(tables, control)
        tables["corekit"]["fit_rank"][I_MEM, 0] = 51
    claim = _decided(_hand_findings(near_p))["operator_r2_before"]
    assert claim.verdict == "undecided" and "a fit rank within 2 of p − 1 = 52" in claim.reason
    assert re.search(r"Fit rank \[51, 30\] before, \[15, 15\] at grokking, \[25, 25\] at the end", claim.reason)
    claim = _decided(_hand_findings(_control("grokked_at_before_rank", 1, 0, 0.4)))["operator_r2_before"]
    assert claim.verdict == "uninformative" and "the grokked checkpoint" in claim.reason


def test_operator_r2_after_fails_on_its_lowest_checkpoint_and_is_uninformative_against_the_memorising_fit():
    claim = _decided(_hand_findings(_edit("r2", 6, 0, 0.8)))["operator_r2_after"]
    assert claim.verdict == "fail" and "not seed 0 (0.8)" in claim.reason and "Lowest at epoch [600, 400]" in claim.reason
    claim = _decided(_hand_findings(_control("memorising", 0, 0, 0.95)))["operator_r2_after"]
    assert claim.verdict == "uninformative" and "the memorising checkpoint at the grokking fit rank" in claim.reason


def test_necessary_rank_growth_fails_is_undecided_without_room_or_at_the_cap_and_uninformative_against_wd0():
    claim = _decided(_hand_findings(_edit("necessary", FINAL, 0, 12)))["necessary_rank_growth"]
    assert claim.verdict == "fail" and "not seed 0 (1.2)" in claim.reason
    no_room = _edit("necessary", slice(I_GROK, None), 0, 30)                  # 2 × 30 > min(p − 3, d_model) = 50
    claim = _decided(_hand_findings(no_room))["necessary_rank_growth"]
    assert claim.verdict == "undecided" and "no room to double below min(p − 3, d_model) = 50 (a run whose" in claim.reason
    assert "for seed 0" in claim.reason and "paper profile" not in claim.reason

    def capped(tables, control):
        tables["corekit"]["necessary"][I_GROK:, 0] = [20, 30, 50, 40, 35, 35]
    claim = _decided(_hand_findings(capped))["necessary_rank_growth"]
    assert claim.verdict == "undecided" and "reaches min(p − 3, d_model) = 50 after grokking" in claim.reason
    claim = _decided(_hand_findings(_edit("necessary", FINAL, 2, 30)))["necessary_rank_growth"]
    assert claim.verdict == "uninformative" and "the ω → 0 branch" in claim.reason


def test_sufficient_rank_growth_fails_and_is_uninformative_when_the_necessary_rank_is_flat_too():
    claim = _decided(_hand_findings(_edit("sufficient", FINAL, 1, 20)))["sufficient_rank_growth"]
    assert claim.verdict == "fail" and "not seed 1 (2)" in claim.reason
    claim = _decided(_hand_findings(_edit("necessary", FINAL, 0, 10)))["sufficient_rank_growth"]
    assert claim.verdict == "uninformative" and "the necessary rank's growth" in claim.reason


def test_modes_final_fails_and_is_uninformative_when_the_untrained_model_spreads_its_power():
    claim = _decided(_hand_findings(_edit("fourier_modes", FINAL, 0, 10)))["modes_final"]
    assert claim.verdict == "fail" and "not seed 0 (10)" in claim.reason
    claim = _decided(_hand_findings(_control("untrained_at_final_rank", 0, 3, 25)))["modes_final"]
    assert claim.verdict == "uninformative" and "the untrained model at the final fit rank" in claim.reason


def test_wd0_growth_fails_is_undecided_for_a_fork_before_grokking_and_uninformative_against_a_flat_omega_branch():
    grows = _edit("necessary", FINAL, 2, 20)
    claim = _decided(_hand_findings(grows))["wd0_necessary_rank_growth"]
    assert claim.verdict == "fail" and "not seed 0 (2)" in claim.reason
    claim = _decided(_hand_findings(grows, params={"fork_epoch": 300}))["wd0_necessary_rank_growth"]
    assert claim.verdict == "undecided" and "a fork at epoch 300 before the seed's grokking" in claim.reason
    claim = _decided(_hand_findings(_edit("necessary", FINAL, 0, 11)))["wd0_necessary_rank_growth"]
    assert claim.verdict == "uninformative" and "the same seed with weight decay throughout" in claim.reason


def test_the_null_direction_checks_fail_on_a_moving_rank_and_a_null_spectrum():
    moving = {"jitter 0": [10, 10], "jitter 1e-8": [10, 10], "jitter 1e-6": [13, 10], "centred": [10, 10]}
    found = _decided(_hand_findings(null_ranks=moving, spectrum=(1e-9, 0.02)))
    assert found["null_direction_control"].verdict == "fail" and "not seed 0 (3)" in found["null_direction_control"].reason
    assert found["null_direction_spectrum"].verdict == "fail" and "not seed 0 (1e-09)" in found["null_direction_spectrum"].reason
    assert found["null_direction_control"].no_null == "numerical check"


def test_setting_differences_name_each_value_and_the_paper_setting_is_the_paper_profile():
    assert grokking_cores.setting_differences(dict(grokking_cores.PAPER_SETTING)) == []
    params = {**grokking_cores.PAPER_SETTING, "d_model": 64, "norm": "pre", "betas": [0.9, 0.98], "causal": False,
              "lr": 1e-3}
    assert grokking_cores.setting_differences(params) == ["d_model 64, not 128", "norm 'pre', not 'post'",
                                                          "causal false, not true", "betas [0.9, 0.98], not [0.9, 0.999]"]
    profile = yaml.safe_load((REPO / "notebooks" / "params" / "paper" / "02_grokking_cores.yaml").read_text())
    assert {k: profile[k] for k in grokking_cores.PAPER_SETTING} == grokking_cores.PAPER_SETTING
    assert set(grokking_cores.AT_PAPER_SETTING) <= {s.id for s in grokking_cores.CLAIMS}


def test_check_inputs_refuses_a_fork_outside_the_run_and_repeated_seeds():
    profile = yaml.safe_load((REPO / "notebooks" / "params" / "cpu" / "02_grokking_cores.yaml").read_text())
    params = {**profile, "checkpoint_every": 100, "dense_until": 2000, "checkpoint_every_after": 500, "device": "cpu"}
    assert grokking_cores.check_inputs(params) is None
    with pytest.raises(ValueError, match="parameter 'fork_epoch': expected an epoch inside the run"):
        grokking_cores.check_inputs({**params, "fork_epoch": 20001})
    with pytest.raises(ValueError, match="parameter 'seeds': expected distinct seeds"):
        grokking_cores.check_inputs({**params, "seeds": [0, 0]})


#: A tiny run of 02 (both branches, mini-batches, dropout) for the record tests: every parameter the chapter reads.
TINY = {"p": P, "train_frac": 0.5, "seeds": [3, 5], "n_layers": 1, "d_model": 12, "n_heads": 2, "d_mlp": 24,
        "norm": "post", "dropout": 0.1, "causal": True, "qkv_bias": True, "embedding_dropout": False, "init": "torch",
        "equals_token": False, "lr": 1e-2, "betas": [0.9, 0.999], "weight_decay": 1.0, "batch_size": 32,
        "drop_last": False, "epochs": 30, "fork_epoch": 10, "reset_optimizer_at_fork": True, "checkpoint_every": 10,
        "dense_until": 20, "checkpoint_every_after": 5, "energy_threshold": 0.99, "split": "numpy", "data_seed": 42}


def _close(a, b, path=""):
    """Assert two measurement JSON values equal, floats to 1e-5 relative (a model trained alone or in an ensemble
    takes the same steps; its batched matrix products may round differently in the last bits)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, float):
        assert b == pytest.approx(a, rel=1e-5, abs=1e-6), path
    else:
        assert a == b, path


def test_a_run_by_seed_measures_what_one_ensemble_does_and_its_records_are_re_read(tmp_path):
    task = modular_addition(P, 0.5, 42, split="numpy")
    dev = torch.device("cpu")
    model, history = grokking_cores.train_branches(TINY, TINY["seeds"], task, dev, progress=False)
    _, checkpoints = grokking_cores.schedule(TINY, len(task.train_idx))
    assert checkpoints == [0, 20, 40, 50, 60] and history.steps[-1] == 60        # 2 steps an epoch
    whole = grokking_cores.measure(model, history, checkpoints, grokking_cores.analysis_data(task, False, dev))
    records = tmp_path / "records"
    parts = [grokking_cores.measure_seed(TINY, s, task, dev, str(records), str(tmp_path / "ck"), False, write=True)
             for s in TINY["seeds"]]
    assert [summary["re_read"] for _, summary in parts] == [False, False]
    by_seed, summaries = grokking_cores.measure_by_seed(TINY, task, dev, str(records))
    assert [summary["re_read"] for summary in summaries] == [True, True]           # the records, nothing trained
    _close(whole.as_json(), grokking_cores.Measured.joined([m for m, _ in parts]).as_json())
    assert by_seed.as_json() == grokking_cores.Measured.joined([m for m, _ in parts]).as_json()   # JSON round trip
    assert by_seed.points == whole.points and by_seed.spectrum == pytest.approx(whole.spectrum, rel=1e-5)
    assert by_seed.seeds == TINY["seeds"] and by_seed.test_acc.shape == (len(history.steps), 4)
    # another setting is another key: its record is not taken for this one
    other = {**TINY, "lr": 3e-2}
    assert grokking_cores.record_key(other, 3) != grokking_cores.record_key(TINY, 3)
    assert shard_records.read(records, grokking_cores.record_name(other, 3), grokking_cores.record_key(other, 3)) is None
    assert shard_records.read(records, grokking_cores.record_name(TINY, 3), grokking_cores.record_key(TINY, 3))


def test_a_run_by_seed_exports_no_checkpoints():
    profile = yaml.safe_load((REPO / "notebooks" / "params" / "paper" / "02_grokking_cores.yaml").read_text())
    params = {**profile, "device": "cpu"}
    assert params["shard_records"] and grokking_cores.check_inputs(params) is None
    with pytest.raises(ValueError, match="parameter 'export_checkpoints': expected empty when shard_records is set"):
        grokking_cores.check_inputs({**params, "export_checkpoints": "_build/x.pt"})
