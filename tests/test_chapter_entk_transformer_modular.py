"""Chapter 06's measurement (corekit.chapters.entk_transformer_modular) against a dense reference: autograd Jacobians
of the summed output for one parameter, numpy eigh, QR-orthonormalised blocks and centred Fourier features."""
import numpy as np
import pytest
import torch

from corekit.chapters import entk_transformer_modular
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
    assert entk_transformer_modular.paper_blocks(2) == [[0, 1, 2, 3, 4], [5, 6, 7, 8]]
    assert entk_transformer_modular.paper_blocks(3) == [list(range(7)), list(range(7, 13))]
    with pytest.raises(ValueError, match="top_k must be at least 4K"):
        entk_transformer_modular.paper_blocks(3, top_k=12)
    with pytest.raises(ValueError, match="n_keys"):
        entk_transformer_modular.paper_blocks(0)


@pytest.mark.parametrize("name", ["W_E", "0.W_Q", "0.W_O", "0.W_in", "0.W_out", "W_U"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_block_scores_match_a_dense_reference(name, dtype):
    """float64 to 1e-8; float32 (the default, the authors' precision): eigenvalues within 4·N·ε₃₂·λ_1 of the float64
    reference and scores within 1e-4 (the blocks' subspaces move by about N·ε₃₂·λ_1 / gap)."""
    torch.manual_seed(0)
    model = BatchedTransformer(CFG, seeds=[3]).double()
    tokens = modular_addition(P, 0.5, 0).tokens()
    keys = [1, 3]
    eig = entk_transformer_modular.parameter_eigenpairs(model, 0, tokens, top_k=9, names=[name], dtype=dtype)
    K = _reference_kernel(model, name, tokens)
    ref = np.linalg.eigvalsh(K)[::-1][:9]
    atol = 1e-10 * np.abs(K).max() if dtype == torch.float64 else 4 * len(K) * float(torch.finfo(dtype).eps) * ref[0]
    score_atol = 1e-6 if dtype == torch.float64 else 1e-4
    np.testing.assert_allclose(eig[name].values.double().numpy(), ref, rtol=1e-8, atol=atol)
    w, V = np.linalg.eigh(K)
    V = V[:, ::-1]
    scores = entk_transformer_modular.score_blocks(eig, P, keys)
    for family in ("sum", "input"):
        want = [_reference_overlap(V[:, 0:5], P, keys, family), _reference_overlap(V[:, 5:9], P, keys, family)]
        np.testing.assert_allclose(scores.scores[name][family], want, atol=score_atol)
    ones = np.ones((P * P, 1)) / P
    np.testing.assert_allclose(scores.constant[name], [float(np.square(V[:, :5].T @ ones).sum()),
                                                       float(np.square(V[:, 5:9].T @ ones).sum())], atol=score_atol)


def test_holding_picks_the_block_that_carries_the_family():
    eigs = {"W_U": None}
    scores = entk_transformer_modular.BlockScores([1, 2], entk_transformer_modular.paper_blocks(2), {"W_U": {"sum": [0.1, 0.97],
                                                                                    "input": [0.9, 0.2]}},
                                     {"W_U": [0.0, 0.0]}, eigs)
    assert scores.holding("W_U", "sum") == (1, 0.97)
    assert scores.holding("W_U", "input") == (0, 0.9)
    with pytest.raises(ValueError, match="family one of"):
        scores.holding("W_U", "diff")


def test_measure_finds_keys_and_shortens_names():
    model = BatchedTransformer(CFG, seeds=[1])
    tokens = modular_addition(P, 0.5, 0).tokens()
    result = entk_transformer_modular.measure(model, 0, tokens, P, top_k=9, keys=[1, 2])
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
    eig = entk_transformer_modular.group_eigenpairs(model, 0, tokens, 6, {"attention": names}, state=other.state_dict())
    K = sum(_reference_kernel(other, name, tokens) for name in names)
    np.testing.assert_allclose(eig["attention"].values.numpy(), np.linalg.eigvalsh(K)[::-1][:6], rtol=1e-8,
                               atol=1e-10 * np.abs(K).max())
    own = entk_transformer_modular.group_eigenpairs(model, 0, tokens, 6, {"attention": names})
    assert not np.allclose(own["attention"].values.numpy(), eig["attention"].values.numpy())


def test_matches_authors_compares_every_setting_by_equality():
    mine = dict(entk_transformer_modular.AUTHORS_SETTINGS, lr=1e-3, extra="ignored")
    same = entk_transformer_modular.matches_authors(mine)
    assert set(same) == set(entk_transformer_modular.AUTHORS_SETTINGS)
    assert [k for k, v in same.items() if not v] == ["lr"]
    assert not entk_transformer_modular.matches_authors(dict(mine, betas=(0.9, 0.999)))["betas"]   # a tuple is not their list
    with pytest.raises(ValueError, match="settings lack"):
        entk_transformer_modular.matches_authors({"p": 29})


def test_train_authors_is_the_authors_recipe_written_out():
    """The run equals the recipe spelled out by hand: split, datasets, config, loader order, snapshots."""
    from corekit import train
    from corekit.train import Dataset, train_ensemble
    kw = dict(d_model=16, n_heads=2, d_mlp=32, batch_size=8, lr=1e-3, log_every_epochs=2)
    run = entk_transformer_modular.train_authors(P, [2, 3], 5, snapshot_every_epochs=4, **kw)
    task = modular_addition(P, 0.5, 0, split="python")
    tokens = task.tokens()
    train_set = Dataset(tokens[task.train_idx], task.labels[task.train_idx])
    test_set = Dataset(tokens[task.test_idx], task.labels[task.test_idx])
    config = TransformerConfig(vocab=P + 1, n_ctx=3, d_model=16, n_heads=2, d_mlp=32, n_layers=1, norm="none",
                               bias=False, init="lin")
    assert run.model.config == config
    model = BatchedTransformer(config, seeds=[2, 3])
    spe = -(-len(train_set) // 8)
    history = train_ensemble(model, train_set, test_set, steps=5 * spe, batch_size=8, lr=1e-3, weight_decay=1.0,
                             betas=(0.9, 0.999), drop_last=False, batch_order="loader", loader_eval_every=2,
                             loss_outputs=P, eval_every=None, eval_steps=[spe, 3 * spe, 5 * spe],
                             snapshot_steps=[0, spe, 5 * spe], progress=False)
    assert run.steps_per_epoch == spe == train.steps_per_epoch(len(train_set), 8, drop_last=False)
    assert run.log_epochs == [0, 2, 4]
    assert torch.equal(run.tokens, tokens)
    assert sorted(run.history.snapshots) == sorted(history.snapshots) == [0, spe, 5 * spe]
    for name, value in model.state_dict().items():
        assert torch.equal(run.model.state_dict()[name], value), name
    assert run.history.epoch_train_loss == history.epoch_train_loss
    assert run.history.steps == history.steps == [0, spe, 3 * spe, 5 * spe]        # where the authors log, and the end
    assert run.history.test_acc == history.test_acc


def test_after_epochs_reads_the_authors_logged_epochs_of_a_run_evaluated_every_epoch():
    """after_epochs(e) is the evaluation after e + 1 epochs: the same values as the run evaluated after every epoch
    (whose trained models are the same bit for bit); an epoch that was not evaluated is a clear error."""
    kw = dict(d_model=16, n_heads=2, d_mlp=32, batch_size=8, lr=1e-3, log_every_epochs=2)
    logged = entk_transformer_modular.train_authors(P, [2, 3], 5, **kw)
    every = entk_transformer_modular.train_authors(P, [2, 3], 5, eval_every_epoch=True, **kw)
    spe = every.steps_per_epoch
    assert every.history.steps == [e * spe for e in range(6)]
    for name in ("test_acc", "train_acc", "test_loss"):
        per_epoch = every.history.curve(name).numpy()
        assert np.array_equal(logged.after_epochs(name, [0, 2, 4]), per_epoch[[1, 3, 5]])
        assert np.array_equal(every.after_epochs(name, [1, 3]), per_epoch[[2, 4]])
    for name, value in every.model.state_dict().items():
        assert torch.equal(logged.model.state_dict()[name], value), name
    with pytest.raises(ValueError, match=r"epochs \[1\] were not evaluated"):
        logged.after_epochs("test_acc", [1])


def test_log_gap_is_the_largest_early_difference():
    epoch_loss = np.array([1.0, 0.9, 0.8, 0.7, 0.6, 0.5])
    log = {"epoch": [0, 2, 4, 5], "train_loss": [1.1, 0.75, 0.0, 9.0]}     # epoch 5 lies past ``through_epoch``
    assert entk_transformer_modular.log_gap(epoch_loss, log, through_epoch=4) == pytest.approx(max(0.1, 0.05, 0.6))
    assert entk_transformer_modular.log_gap(epoch_loss, log, through_epoch=0) == pytest.approx(0.1)
    assert entk_transformer_modular.log_gap(epoch_loss[:5], log, through_epoch=4) == pytest.approx(0.6)  # a short run


def test_train_authors_in_float64_is_the_float32_draw_trained_in_float64():
    """dtype=float64 trains the float32 run's initial weights, converted exactly, by the same recipe in float64; its
    losses stay within float32 rounding of the float32 run's over the first epochs; another dtype is refused."""
    kw = dict(d_model=16, n_heads=2, d_mlp=32, batch_size=8, lr=1e-3, log_every_epochs=2)
    run32 = entk_transformer_modular.train_authors(P, [2, 3], 3, **kw)
    run64 = entk_transformer_modular.train_authors(P, [2, 3], 3, dtype=torch.float64, **kw)
    for name, value in run64.history.snapshots[0].items():
        assert value.dtype == torch.float64 and torch.equal(value, run32.history.snapshots[0][name].double()), name
    assert all(v.dtype == torch.float64 for v in run64.model.parameters())
    loss32, loss64 = np.asarray(run32.history.epoch_train_loss), np.asarray(run64.history.epoch_train_loss)
    assert loss32.shape == loss64.shape == (3, 2)
    np.testing.assert_allclose(loss32, loss64, rtol=1e-5)
    with pytest.raises(ValueError, match="dtype must be torch.float32 or torch.float64"):
        entk_transformer_modular.train_authors(P, [2], 1, dtype=torch.float16, **kw)


def test_rounding_horizon_is_the_last_logged_epoch_within_tolerance_of_the_float64_run():
    exact = np.array([3.0, 2.9, 2.8, 2.7, 2.6, 2.5, 2.4])
    run = exact + np.array([1e-7, 5e-6, 2e-6, 3e-5, 1e-6, 9e-6, 1e-3])     # epoch 3 (not logged) is off; 6 is off
    assert entk_transformer_modular.rounding_horizon(run, exact, [0, 2, 4, 5, 6], 1e-5) == 5
    assert entk_transformer_modular.rounding_horizon(run, exact, [0, 3, 4], 1e-5) == 0      # stops at the first miss
    assert entk_transformer_modular.rounding_horizon(run, exact, [3, 4], 1e-5) is None
    assert entk_transformer_modular.rounding_horizon(run, exact, [0, 1, 2, 3, 4, 5, 6], 1.0) == 6
    with pytest.raises(ValueError, match="tol must be positive"):
        entk_transformer_modular.rounding_horizon(run, exact, [0], 0.0)
    with pytest.raises(ValueError, match="epochs must be ascending"):
        entk_transformer_modular.rounding_horizon(run, exact, [2, 0], 1e-5)
    with pytest.raises(ValueError, match="exact_loss must be"):
        entk_transformer_modular.rounding_horizon(run, exact[:3], [0, 4], 1e-5)


def test_unembedding_alignment_matches_a_dense_reference_on_each_state():
    torch.manual_seed(0)
    model = BatchedTransformer(CFG, seeds=[3, 4]).double()
    others = [BatchedTransformer(CFG, seeds=[5, 6]).double(), model]
    tokens = modular_addition(P, 0.5, 0).tokens()
    keys = [1, 3]
    rng = np.random.default_rng(0)
    cores = [torch.from_numpy(rng.normal(size=(P * P, r))) for r in (2, 6)]
    sums, lens = entk_transformer_modular.unembedding_alignment(model, 1, tokens, P, keys,
                                                                [o.state_dict() for o in others], cores=cores)
    only, none = entk_transformer_modular.unembedding_alignment(model, 1, tokens, P, keys,
                                                                [o.state_dict() for o in others], top_k=9)
    assert none is None
    for j, other in enumerate(others):
        w, V = np.linalg.eigh(_kernel_of(other, 1, tokens))
        V = V[:, ::-1]
        # float32 kernels and eigenvectors (parameter_eigenpairs' default): subspaces within about N·ε₃₂·λ_1 / gap
        assert sums[j] == pytest.approx(_reference_overlap(V[:, :5], P, keys, "sum"), abs=1e-4)
        assert only[j] == pytest.approx(sums[j], abs=1e-6)             # two float32 solves, different k
        r = cores[j].shape[1]
        Q, _ = np.linalg.qr(V[:, :r + 1])
        Z = cores[j].numpy() - cores[j].numpy().mean(0)
        Zq, _ = np.linalg.qr(Z)
        assert lens[j] == pytest.approx(float(np.square(Q.T @ Zq).sum()) / r, abs=1e-4)


def _kernel_of(model, m, tokens):
    """W_U's kernel (N, N) of model m: J Jᵀ / C² with J the Jacobian of Σ_c f_c w.r.t. W_U (autograd)."""
    param = model.params["W_U"]
    rows = []
    for x in tokens:
        model.zero_grad()
        model(x[None])[m, 0, -1].sum().backward()
        rows.append(param.grad[m].flatten().double().clone())
    J = torch.stack(rows)
    return (J @ J.T / CFG.out_vocab ** 2).numpy()
