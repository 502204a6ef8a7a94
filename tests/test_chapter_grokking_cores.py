"""Chapter 02's measurement (corekit.chapters.grokking_cores) against independent references: brute-force walks over
the epochs, hand tables of accuracies, numpy least-squares shift fits and ablations, and the checkpoint file read back
with plain ``torch.load``."""
import numpy as np
import pytest
import torch

from corekit.chapters import grokking_cores
from corekit.models import BatchedTransformer, TransformerConfig
from corekit.tasks.modular import modular_addition
from corekit.train import History, train_ensemble

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
    # memorised at the grokking checkpoint: "before" is the one just before it
    same = grokking_cores.grokking_points(steps, test, torch.where(torch.arange(5)[:, None] < 3, 0.0, 1.0).expand(5, 4), 2)
    assert (same.i_grok, same.i_before, same.memorised_step) == (3, 2, 30)
    # never groks: grokking falls on the last checkpoint, memorisation never reached counts as the first
    never = grokking_cores.grokking_points(steps, test * 0.5, train * 0.5, 2)
    assert not never.has_grok and never.grok_step is None and never.memorised_step is None
    assert (never.i_grok, never.i_before, never.final) == (4, 0, 4)
    assert never.seed_grok == [None, None] and never.seed_memorised == [None, None]


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
    got = grokking_cores.exact_fit_controls(model, history.snapshots, STEPS, data, cores.runs, cases, S)
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
    got = grokking_cores.null_direction_ranks(model, state, data, S, 0.99)
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
    assert grokking_cores.spectrum_at_necessary(runs, 1, 2) == [0.5, 0.01]


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
