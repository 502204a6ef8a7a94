"""The one-layer transformer's hand-derived step: against autograd through the model's own forward, in float64."""

import pytest
import torch

import corekit.train as train_module
from corekit import onelayer
from corekit.models import BatchedTransformer, TransformerConfig
from corekit.train import Dataset, losses, train_ensemble


def _config(causal: bool) -> TransformerConfig:
    return TransformerConfig(vocab=8, n_ctx=3, d_model=16, n_heads=4, d_mlp=32, n_layers=1, norm="none", bias=False,
                             init="lin", causal=causal)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("n_outputs", [None, 7])
@pytest.mark.parametrize("batch, per_model", [(5, False), (40, False), (40, True)])
def test_loss_and_gradients_equal_autograds(causal, n_outputs, batch, per_model):
    """Loss and every gradient equal autograd's through ``BatchedTransformer.forward`` (which tabulates layer 0's keys
    and values when the batch outnumbers the vocabulary) to float64 rounding."""
    model = BatchedTransformer(_config(causal), seeds=[0, 1, 2]).double().train()
    gen = torch.Generator().manual_seed(batch)
    lead = (3, batch) if per_model else (batch,)
    tokens, y = torch.randint(0, 8, lead + (3,), generator=gen), torch.randint(0, 7, lead + (1,), generator=gen)
    loss = losses(model(tokens, last=1), y, n_outputs)
    reference = torch.autograd.grad(loss.sum(), list(model.parameters()))
    by_hand = onelayer.loss_and_grads(model, tokens, y, n_outputs)
    torch.testing.assert_close(by_hand, loss, rtol=1e-13, atol=0)
    for (name, p), ref in zip(model.named_parameters(), reference):
        torch.testing.assert_close(p.grad, ref, rtol=1e-12, atol=1e-14 * ref.abs().max().item(), msg=name)


def test_training_by_hand_equals_training_through_autograd(monkeypatch):
    """Thirty minibatch steps of ``train_ensemble`` (which takes the hand-derived step for this model) end at the
    weights that the autograd step reaches, to float64 rounding."""
    gen = torch.Generator().manual_seed(0)
    train = Dataset(torch.randint(0, 8, (96, 3), generator=gen), torch.randint(0, 7, (96, 1), generator=gen))
    kwargs = dict(steps=30, batch_size=32, lr=3e-3, weight_decay=0.5, loss_outputs=7, eval_every=10, progress=False)
    calls = []
    step = onelayer.loss_and_grads
    monkeypatch.setattr(onelayer, "loss_and_grads", lambda *a: calls.append(1) or step(*a))
    by_hand = BatchedTransformer(_config(True), seeds=[0, 1]).double()
    hand_history = train_ensemble(by_hand, train, **kwargs)
    assert len(calls) == 30
    monkeypatch.setattr(train_module.onelayer, "applies", lambda model, last: False)
    autograd = BatchedTransformer(_config(True), seeds=[0, 1]).double()
    auto_history = train_ensemble(autograd, train, **kwargs)
    for name, p in by_hand.params.items():
        torch.testing.assert_close(p, autograd.params[name], rtol=1e-10, atol=1e-12, msg=name)
    torch.testing.assert_close(torch.tensor(hand_history.epoch_train_loss), torch.tensor(auto_history.epoch_train_loss),
                               rtol=1e-6, atol=0)                # recorded in float32


@pytest.mark.parametrize("change, last, training", [
    ({}, 1, True), ({"norm": "post", "init": "fan_in"}, 1, True), ({"bias": True, "init": "fan_in"}, 1, True),
    ({"n_layers": 2}, 1, True), ({"dropout": 0.1}, 1, True), ({"dropout": 0.1}, 1, False), ({}, 2, True)])
def test_applies_to_the_one_layer_model_without_norms_biases_or_dropout(change, last, training):
    config = TransformerConfig(**{**_config(True).as_dict(), **change})
    model = BatchedTransformer(config, seeds=[0]).train(training)
    expected = not ({"norm", "bias", "n_layers"} & set(change)) and last == 1 and not (training and "dropout" in change)
    assert onelayer.applies(model, last) is expected


def test_each_models_gradients_are_its_own():
    """A stack of three different models gets, model for model, the loss and gradients of that model alone."""
    model = BatchedTransformer(_config(True), seeds=[0, 1, 2]).double().train()
    gen = torch.Generator().manual_seed(3)
    tokens, y = torch.randint(0, 8, (3, 20, 3), generator=gen), torch.randint(0, 7, (3, 20, 1), generator=gen)
    stacked = onelayer.loss_and_grads(model, tokens, y)
    grads = {name: p.grad.clone() for name, p in model.params.items()}
    for m, seed in enumerate([0, 1, 2]):
        alone = BatchedTransformer(_config(True), seeds=[seed]).double().train()
        loss = onelayer.loss_and_grads(alone, tokens[m:m + 1], y[m:m + 1])
        torch.testing.assert_close(loss[0], stacked[m], rtol=1e-13, atol=0)
        for name, p in alone.params.items():
            torch.testing.assert_close(p.grad[0], grads[name][m], rtol=1e-12, atol=1e-15, msg=name)
