"""Batched equals alone: for every entry point that takes an ensemble (a leading model dimension M), model m's
result equals the same computation on model m alone, for every m of a batch of three different models."""
import numpy as np
import pytest
import torch

from corekit import ace
from corekit.chapters import grokking_cores
from corekit.models import BatchedTransformer, TransformerConfig
from corekit.tasks.modular import modular_addition
from corekit.train import evaluate, train_ensemble

P = 11
SEEDS = [0, 1, 2]
CFG = TransformerConfig(vocab=P + 1, n_ctx=3, d_model=16, n_heads=2, d_mlp=32, n_layers=1, norm="pre", n_out=P)


@pytest.fixture(scope="module")
def trained():
    """Three different models trained a little (so that their cores and operators differ)."""
    task = modular_addition(P, 0.6, 0)
    tokens = task.tokens()
    data, _ = task.datasets()
    model = BatchedTransformer(CFG, seeds=SEEDS)
    train_ensemble(model, data, steps=150, lr=[3e-3, 1e-2, 2e-2], weight_decay=[0.0, 1.0, 0.3], progress=False)
    return task, tokens, model


def _alone(model, m):
    """Return model m of an ensemble as an ensemble of one."""
    one = BatchedTransformer(model.config, seeds=[model.seeds[m]])
    one.load_state_dict({k: v[m:m + 1] for k, v in model.state_dict().items()})
    return one


def _inputs(task, tokens):
    return (tokens[task.train_idx], tokens[task.test_idx], task.labels[task.test_idx], tokens, task.labels)


def test_last_token_summary_of_each_model_is_its_own(trained):
    task, tokens, model = trained
    batched = grokking_cores.last_token_summary(model, *_inputs(task, tokens))
    assert len(set(batched["fit_rank"])) > 1 or np.ptp(batched["r2"]) > 1e-3       # the three models differ
    for m in range(len(SEEDS)):
        alone = grokking_cores.last_token_summary(_alone(model, m), *_inputs(task, tokens))
        for key in ("energy", "sufficient", "necessary", "fit_rank", "modes"):
            assert batched[key][m] == alone[key][0], key
        # The activations are float32 and a batched matmul may sum in another order than a single one (about 1e-7
        # relative, machine-dependent); the fp64 fit carries that on, so the fitted values agree to float32 precision.
        for key in ("r2", "circle"):
            assert batched[key][m] == pytest.approx(alone[key][0], rel=1e-5, abs=1e-5), key
        np.testing.assert_allclose(np.sort_complex(batched["eigs"][m]), np.sort_complex(alone["eigs"][0]), atol=1e-4)


def test_next_token_ace_of_each_model_is_its_own(trained):
    task, tokens, model = trained
    x, y = tokens[:60, :2], tokens[:60, 1:]
    batched = ace.next_token_ace(model, x, x, y, ranks=[0, 1, 2, 4])
    for m in range(len(SEEDS)):
        alone = ace.next_token_ace(_alone(model, m), x, x, y, ranks=[0, 1, 2, 4])
        assert int(batched.rank[m]) == int(alone.rank[0])
        torch.testing.assert_close(batched.keep_acc[m], alone.keep_acc[0])
        torch.testing.assert_close(batched.remove_acc[m], alone.remove_acc[0])
        torch.testing.assert_close(batched.core.sigma[m], alone.core.sigma[0])
        torch.testing.assert_close(batched.coordinates("test", 3)[m].abs(), alone.coordinates("test", 3)[0].abs())


def test_extract_and_observability_of_each_model_are_its_own(trained):
    task, tokens, model = trained
    with torch.no_grad():
        h = model.residual(tokens)[:, :, -1]
    core = ace.extract(h, ace.observability(ace.centred_logits(model.unembed), h))
    for m in range(len(SEEDS)):
        one = _alone(model, m)
        h1 = h[m:m + 1]
        c1 = ace.extract(h1, ace.observability(ace.centred_logits(one.unembed), h1))
        torch.testing.assert_close(core.sigma[m], c1.sigma[0])
        torch.testing.assert_close(core.mean[m], c1.mean[0])
        torch.testing.assert_close(core.coordinates(h, 4)[m].abs(), c1.coordinates(h1, 4)[0].abs())


def test_evaluate_of_each_model_is_its_own(trained):
    task, tokens, model = trained
    _, data = task.datasets()
    loss, acc = evaluate(model, data)
    for m in range(len(SEEDS)):
        l1, a1 = evaluate(_alone(model, m), data)
        torch.testing.assert_close(loss[m], l1[0])
        torch.testing.assert_close(acc[m], a1[0])
