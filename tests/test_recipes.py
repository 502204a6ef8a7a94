"""The eNTK authors' training recipe (corekit.recipes) against the recipe written out by hand, its logged epochs, its
float64 reference run and the comparison of a run's settings with theirs."""
import numpy as np
import pytest
import torch

from corekit import recipes
from corekit.models import BatchedTransformer, TransformerConfig
from corekit.tasks.modular import modular_addition

P = 7


def test_matches_authors_compares_every_setting_by_equality():
    mine = dict(recipes.AUTHORS_SETTINGS, lr=1e-3, extra="ignored")
    same = recipes.matches_authors(mine)
    assert set(same) == set(recipes.AUTHORS_SETTINGS)
    assert [k for k, v in same.items() if not v] == ["lr"]
    assert not recipes.matches_authors(dict(mine, betas=(0.9, 0.999)))["betas"]   # a tuple is not their list
    with pytest.raises(ValueError, match="settings lack"):
        recipes.matches_authors({"p": 29})


def test_train_authors_is_the_authors_recipe_written_out():
    """The run equals the recipe spelled out by hand: split, datasets, config, loader order, snapshots."""
    from corekit import train
    from corekit.train import Dataset, train_ensemble
    kw = dict(d_model=16, n_heads=2, d_mlp=32, batch_size=8, lr=1e-3, log_every_epochs=2)
    run = recipes.train_authors(P, [2, 3], 5, snapshot_every_epochs=4, **kw)
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
    logged = recipes.train_authors(P, [2, 3], 5, **kw)
    every = recipes.train_authors(P, [2, 3], 5, eval_every_epoch=True, **kw)
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


def test_train_authors_in_float64_is_the_float32_draw_trained_in_float64():
    """dtype=float64 trains the float32 run's initial weights, converted exactly, by the same recipe in float64; its
    losses stay within float32 rounding of the float32 run's over the first epochs; another dtype is refused."""
    kw = dict(d_model=16, n_heads=2, d_mlp=32, batch_size=8, lr=1e-3, log_every_epochs=2)
    run32 = recipes.train_authors(P, [2, 3], 3, **kw)
    run64 = recipes.train_authors(P, [2, 3], 3, dtype=torch.float64, **kw)
    for name, value in run64.history.snapshots[0].items():
        assert value.dtype == torch.float64 and torch.equal(value, run32.history.snapshots[0][name].double()), name
    assert all(v.dtype == torch.float64 for v in run64.model.parameters())
    loss32, loss64 = np.asarray(run32.history.epoch_train_loss), np.asarray(run64.history.epoch_train_loss)
    assert loss32.shape == loss64.shape == (3, 2)
    np.testing.assert_allclose(loss32, loss64, rtol=1e-5)
    with pytest.raises(ValueError, match="dtype must be torch.float32 or torch.float64"):
        recipes.train_authors(P, [2], 1, dtype=torch.float16, **kw)
