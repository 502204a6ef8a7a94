"""Every notebook family's training path, run twice in one process, gives bitwise-equal results.

Each run starts from a differently seeded (and advanced) global torch generator: a result that drew
anything from it (dropout did, before each model got its own generator) would differ between runs.
The sizes are tiny; the code paths are the notebooks' own (data, model, trainer, sweep).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from corekit.chapters.grokking_scaling_law import SweepSettings, grid, run_sweep
from corekit.models import BatchedQuadraticMLP, BatchedTransformer, TransformerConfig
from corekit.tasks import markov
from corekit.tasks.modular import modular_addition
from corekit.train import Dataset, History, train_ensemble, train_mse

CURVES = ("steps", "train_loss", "train_acc", "test_loss", "test_acc")


def _markov_run() -> tuple[dict, History]:
    """Notebook 01: Markov sequences, a post-LN transformer with dropout, minibatches."""
    T = markov.validate_transition([[0.75, 0.25, 0.0], [0.0, 0.75, 0.25], [0.25, 0.0, 0.75]])
    train_seq, test_seq = markov.sample_sequences(T, 64, 9, seed=5), markov.sample_sequences(T, 32, 9, seed=6)
    config = TransformerConfig(vocab=3, n_ctx=8, d_model=16, n_heads=2, d_mlp=32, norm="post", dropout=0.1)
    model = BatchedTransformer(config, [0, 100])
    history = train_ensemble(model, Dataset(train_seq[:, :-1], train_seq[:, 1:]),
                             Dataset(test_seq[:, :-1], test_seq[:, 1:]), steps=12, batch_size=16, lr=1e-3,
                             eval_every=4, progress=False)
    return model.state_dict(), history


def _grokking_run() -> tuple[dict, History]:
    """Notebook 02: modular addition, pre-LN, full batch, a weight-decay-0 branch forked mid-run with a fresh optimizer."""
    task = modular_addition(7, 0.5, seed=0)
    x = task.tokens()
    config = TransformerConfig(vocab=8, n_ctx=3, d_model=16, n_heads=2, d_mlp=32, n_layers=2, norm="pre",
                               dropout=0.1, n_out=7)
    model = BatchedTransformer(config, [0, 1, 0, 1])
    history = train_ensemble(model, Dataset(x[task.train_idx], task.labels[task.train_idx]),
                             Dataset(x[task.test_idx], task.labels[task.test_idx]), steps=10, lr=2e-3,
                             betas=(0.9, 0.98), weight_decay={0: 1.0, 5: [1.0, 1.0, 0.0, 0.0]},
                             optimizer_reset={5: [False, False, True, True]}, eval_every=2,
                             snapshot_steps=[0, 5, 10], progress=False)
    return model.state_dict(), history


def _entk_transformer_run() -> tuple[dict, History]:
    """Notebook 06: modular addition, no LayerNorm, no biases, minibatches."""
    task = modular_addition(7, 0.5, seed=0)
    x = task.tokens()
    config = TransformerConfig(vocab=8, n_ctx=3, d_model=16, n_heads=2, d_mlp=32, norm="none", bias=False, n_out=7)
    model = BatchedTransformer(config, [2])
    history = train_ensemble(model, Dataset(x[task.train_idx], task.labels[task.train_idx]),
                             Dataset(x[task.test_idx], task.labels[task.test_idx]), steps=9, batch_size=8, lr=5e-3,
                             weight_decay=1.0, eval_every=3, snapshot_steps=[3, 9], progress=False)
    return model.state_dict(), history


def _entk_mlp_run() -> tuple[dict, History]:
    """Notebook 05: the quadratic MLP on one-hot pairs, full-batch MSE."""
    task = modular_addition(7, 0.7, seed=0)
    X = task.one_hot()
    model = BatchedQuadraticMLP(14, 32, 7, seeds=[0])
    history = train_mse(model, X[task.train_idx], task.labels[task.train_idx], X[task.test_idx],
                        task.labels[task.test_idx], steps=10, lr=0.05, weight_decay=0.01, eval_every=2,
                        snapshot_steps=[1, 10], progress=False)
    return model.state_dict(), history


def _sweep_run() -> tuple[dict, list]:
    """Notebook 03: a grokking-time sweep over two moduli, shards trained as batched programs."""
    model = TransformerConfig(vocab=1, n_ctx=1, d_model=16, n_heads=2, d_mlp=32, norm="pre")   # vocab, n_ctx: per p
    settings = SweepSettings(model=model, lr=1e-2, max_steps=20, margin=10, eval_every=10)
    results = run_sweep(grid([5, 7], [1.0, 2.0], [0]), settings, device="cpu", progress=False)
    return {}, [(r.spec, r.t_train, r.t_test, r.tau, r.steps, r.train_acc, r.test_acc) for r in results]


def _assert_bitwise_equal(first, second) -> None:
    """Fail unless two (state dict, history or records) results are identical bit for bit."""
    (state_a, rec_a), (state_b, rec_b) = first, second
    assert state_a.keys() == state_b.keys()
    for name in state_a:
        assert torch.equal(state_a[name], state_b[name]), f"parameter {name} differs between the two runs"
    if isinstance(rec_a, History):
        for name in CURVES:
            assert getattr(rec_a, name) == getattr(rec_b, name), f"history.{name} differs between the two runs"
        assert rec_a.snapshots.keys() == rec_b.snapshots.keys()
        for step, snap in rec_a.snapshots.items():
            assert all(torch.equal(v, rec_b.snapshots[step][k]) for k, v in snap.items()), f"snapshot {step} differs"
    else:
        assert rec_a == rec_b


@pytest.mark.parametrize("family", [_markov_run, _grokking_run, _sweep_run, _entk_mlp_run, _entk_transformer_run],
                         ids=["01_markov", "02_grokking", "03_sweep", "05_entk_mlp", "06_entk_transformer"])
def test_training_path_is_bitwise_repeatable(family):
    runs = []
    for global_seed in (1, 2):
        torch.manual_seed(global_seed)
        torch.rand(global_seed * 17)                 # leave the global generator somewhere different each time
        np.random.seed(global_seed)
        runs.append(family())
    _assert_bitwise_equal(*runs)
