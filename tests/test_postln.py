"""The post-LN transformer's hand-derived step: against autograd through the model's own forward, in float64."""

import copy

import pytest
import torch

import corekit.train as train_module
from corekit import postln
from corekit.models import BatchedTransformer, TransformerConfig
from corekit.train import Dataset, losses, train_ensemble


def _config(**change) -> TransformerConfig:
    return TransformerConfig(**{**TransformerConfig.ace_authors(7, d_model=16, d_mlp=32, n_layers=2).as_dict(),
                                **change})


@pytest.mark.parametrize("change", [{}, {"n_layers": 1}, {"n_layers": 3, "n_ctx": 6}, {"causal": False},
                                    {"qkv_bias": False}, {"embedding_dropout": True}, {"dropout": 0.0},
                                    {"n_out": 5, "vocab": 9}])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("n_outputs", [None, 4])
def test_loss_gradients_and_dropout_draws_equal_autograds(change, training, n_outputs):
    """Loss and every gradient equal autograd's through ``BatchedTransformer.forward`` with the same dropout masks
    to float64 rounding, and the dropout generators end in the same states."""
    config = _config(**change)
    auto = BatchedTransformer(config, seeds=[0, 1, 2]).double().train(training)
    hand = copy.deepcopy(auto)
    gen = torch.Generator().manual_seed(len(change))
    T = config.n_ctx
    tokens = torch.randint(0, config.vocab, (3, 40, T), generator=gen)
    y = torch.randint(0, n_outputs or config.out_vocab, (3, 40, 1), generator=gen)
    loss = losses(auto(tokens, last=1), y, n_outputs)
    reference = torch.autograd.grad(loss.sum(), list(auto.parameters()))
    by_hand = postln.loss_and_grads(hand, tokens, y, n_outputs)
    torch.testing.assert_close(by_hand, loss, rtol=1e-12, atol=0)
    scale = max(ref.abs().max().item() for ref in reference)    # b_K's gradient is 0 (softmax ignores a shift): noise
    for (name, p), ref in zip(hand.named_parameters(), reference):
        torch.testing.assert_close(p.grad, ref, rtol=1e-10, atol=1e-13 * scale, msg=name)
    for a, b in zip(auto.dropout_generators(torch.device("cpu")), hand.dropout_generators(torch.device("cpu"))):
        assert torch.equal(a.get_state(), b.get_state())


def test_training_by_hand_equals_training_through_autograd(monkeypatch):
    """Thirty minibatch steps of ``train_ensemble`` with dropout (which takes the hand-derived step for this model)
    end at the weights and outputs that the autograd step reaches, to float64 rounding. The key biases are left out:
    softmax ignores them, so their gradient is rounding noise on both sides, which AdamW scales up to steps of lr."""
    gen = torch.Generator().manual_seed(0)
    train = Dataset(torch.randint(0, 7, (96, 2), generator=gen), torch.randint(0, 7, (96, 1), generator=gen))
    kwargs = dict(steps=30, batch_size=32, lr=3e-3, weight_decay=0.5, eval_every=10, progress=False)
    calls = []
    step = postln.loss_and_grads
    monkeypatch.setattr(postln, "loss_and_grads", lambda *a: calls.append(1) or step(*a))
    by_hand = BatchedTransformer(_config(), seeds=[0, 1]).double()
    hand_history = train_ensemble(by_hand, train, **kwargs)
    assert len(calls) == 30
    monkeypatch.setattr(train_module.postln, "applies", lambda model, last: False)
    autograd = BatchedTransformer(_config(), seeds=[0, 1]).double()
    auto_history = train_ensemble(autograd, train, **kwargs)
    for name, p in by_hand.params.items():
        if "b_K" not in name:
            torch.testing.assert_close(p, autograd.params[name], rtol=1e-10, atol=1e-12, msg=name)
    torch.testing.assert_close(by_hand.eval()(train.x), autograd.eval()(train.x), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(torch.tensor(hand_history.epoch_train_loss), torch.tensor(auto_history.epoch_train_loss),
                               rtol=1e-6, atol=0)                # recorded in float32


@pytest.mark.parametrize("change, last, applies", [
    ({}, 1, True), ({"n_layers": 1, "dropout": 0.0}, 1, True), ({}, 2, False), ({"norm": "pre"}, 1, False),
    ({"norm": "none"}, 1, False), ({"bias": False, "qkv_bias": False}, 1, False)])
def test_applies_to_post_layernorm_models_with_biases_trained_on_the_last_position(change, last, applies):
    assert postln.applies(BatchedTransformer(_config(**change), seeds=[0]), last) is applies


def test_each_models_loss_and_gradients_are_its_own_with_dropout():
    """A stack of three different models gets, model for model, the loss and gradients (and dropout masks) of that
    model alone."""
    model = BatchedTransformer(_config(), seeds=[0, 1, 2]).double().train()
    gen = torch.Generator().manual_seed(3)
    tokens, y = torch.randint(0, 7, (3, 20, 2), generator=gen), torch.randint(0, 7, (3, 20, 1), generator=gen)
    stacked = postln.loss_and_grads(model, tokens, y)
    grads = {name: p.grad.clone() for name, p in model.params.items()}
    scale = max(g.abs().max().item() for g in grads.values())
    for m, seed in enumerate([0, 1, 2]):
        alone = BatchedTransformer(_config(), seeds=[seed]).double().train()
        loss = postln.loss_and_grads(alone, tokens[m:m + 1], y[m:m + 1])
        torch.testing.assert_close(loss[0], stacked[m], rtol=1e-12, atol=0)
        for name, p in alone.params.items():
            torch.testing.assert_close(p.grad[0], grads[name][m], rtol=1e-10, atol=1e-13 * scale, msg=name)
