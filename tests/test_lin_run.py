"""The eNTK authors' run in corekit: their split, initial draw, DataLoader batch order and loss, against a
plain reference script written as theirs is (torch's global generator, nn.Parameter draws, DataLoader, AdamW)."""
import random

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from corekit.models import BatchedTransformer, TransformerConfig, load_lin_weights
from corekit.tasks.modular import modular_addition
from corekit.train import Dataset, train_ensemble

P, D, H, D_MLP = 7, 8, 2, 16
CFG = TransformerConfig(vocab=P + 1, n_ctx=3, d_model=D, n_heads=H, d_mlp=D_MLP, n_layers=1, norm="none",
                        bias=False, init="lin")


class Reference(nn.Module):
    """A 1-layer transformer in the authors' layout, drawn from the global generator in their module order."""

    def __init__(self):
        super().__init__()
        e, V = D // H, P + 1
        self.W_E = nn.Parameter(torch.randn(V, D) / D ** 0.5)
        self.W_pos = nn.Parameter(torch.randn(3, D) / D ** 0.5)
        self.W_Q = nn.Parameter(torch.randn(H, e, D) / D ** 0.5)
        self.W_K = nn.Parameter(torch.randn(H, e, D) / D ** 0.5)
        self.W_V = nn.Parameter(torch.randn(H, e, D) / D ** 0.5)
        self.W_O = nn.Parameter(torch.randn(D, D) / D ** 0.5)
        self.W_in = nn.Parameter(torch.randn(D, D_MLP) / D_MLP ** 0.5)
        self.W_out = nn.Parameter(torch.randn(D_MLP, D) / D ** 0.5)
        self.W_U = nn.Parameter(torch.randn(D, V) / V ** 0.5)

    def forward(self, x):
        h = self.W_E[x] + self.W_pos
        q, k, v = (torch.einsum("nhm,bsm->bsnh", W, h) for W in (self.W_Q, self.W_K, self.W_V))
        att = torch.einsum("bqnh,bknh->bnqk", q, k) / (D // H) ** 0.5
        att = att.masked_fill(torch.triu(torch.ones(3, 3), diagonal=1).bool(), float("-inf")).softmax(-1)
        z = torch.einsum("bnqk,bknh->bqnh", att, v).flatten(2)
        h = h + torch.einsum("mn,bsn->bsm", self.W_O, z)
        h = h + F.relu(h @ self.W_in) @ self.W_out
        return (h @ self.W_U)[:, 2, :]


def _task():
    task = modular_addition(P, 0.5, 0, split="python")
    tokens = task.tokens()
    return task, tokens, Dataset(tokens[task.train_idx], task.labels[task.train_idx]), \
        Dataset(tokens[task.test_idx], task.labels[task.test_idx])


def test_python_split_is_random_shuffle_of_the_pairs():
    task = modular_addition(P, 0.5, 3, split="python")
    pairs = [(i, j) for i in range(P) for j in range(P)]
    random.seed(3)
    random.shuffle(pairs)
    assert [(int(task.a[i]), int(task.b[i])) for i in task.train_idx] == pairs[:int(0.5 * P * P)]
    assert sorted(task.train_idx.tolist() + task.test_idx.tolist()) == list(range(P * P))
    with pytest.raises(ValueError, match="split must be one of"):
        modular_addition(P, 0.5, 0, split="sklearn")


def test_lin_init_and_loaded_weights_give_the_reference_model():
    torch.manual_seed(5)
    ref = Reference()
    model = BatchedTransformer(CFG, seeds=[5, 6])
    loaded = BatchedTransformer(CFG, seeds=[0])
    load_lin_weights(loaded, 0, {k: v for k, v in ref.state_dict().items()})
    _, tokens, _, _ = _task()
    with torch.no_grad():
        torch.testing.assert_close(model(tokens)[0, :, -1], ref(tokens), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(loaded(tokens)[0, :, -1], ref(tokens), atol=1e-5, rtol=1e-5)
    assert torch.equal(model.init_generators()[0].get_state(), torch.default_generator.get_state())
    with pytest.raises(ValueError, match="lacks the parameter"):
        load_lin_weights(loaded, 0, {"W_E": ref.W_E})
    with pytest.raises(ValueError, match='init="lin"'):
        TransformerConfig(vocab=8, n_ctx=3, init="lin")


def test_loader_order_trains_the_model_the_reference_script_trains():
    """Two epochs logged out of every two, as the authors' loop logs (their logging passes draw too)."""
    _, _, train_set, test_set = _task()
    epochs, log_every, batch = 5, 2, 5
    torch.manual_seed(4)
    ref = Reference()
    opt = torch.optim.AdamW(ref.parameters(), lr=1e-2, weight_decay=1.0)
    train_loader = DataLoader(TensorDataset(train_set.x, train_set.y[:, 0]), batch_size=batch, shuffle=True)
    test_loader = DataLoader(TensorDataset(test_set.x, test_set.y[:, 0]), batch_size=batch, shuffle=False)
    ref_losses = []
    for epoch in range(epochs):
        losses = []
        for x, y in train_loader:
            opt.zero_grad()
            loss = F.cross_entropy(ref(x)[:, :P], y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        ref_losses.append(sum(losses) / len(losses))
        if epoch % log_every == 0:
            for loader in (test_loader, train_loader):                   # what their test() passes draw
                for _ in loader:
                    pass
    model = BatchedTransformer(CFG, seeds=[4, 9])
    spe = -(-len(train_set) // batch)
    history = train_ensemble(model, train_set, test_set, steps=epochs * spe, batch_size=batch, lr=1e-2,
                             weight_decay=1.0, drop_last=False, batch_order="loader", loader_eval_every=log_every,
                             loss_outputs=P, eval_every=spe, progress=False)
    ours = {k: v for k, v in ref.state_dict().items()}
    check = BatchedTransformer(CFG, seeds=[0])
    load_lin_weights(check, 0, ours)
    for name in model.params:
        torch.testing.assert_close(model.params[name].data[0], check.params[name].data[0], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(torch.tensor(history.epoch_train_loss)[:, 0], torch.tensor(ref_losses),
                               atol=1e-5, rtol=1e-5)


def test_loader_order_resumes_to_the_same_model(tmp_path):
    _, _, train_set, test_set = _task()
    kw = dict(batch_size=5, lr=1e-2, weight_decay=1.0, drop_last=False, batch_order="loader", loader_eval_every=2,
              loss_outputs=P, eval_every=5, progress=False, checkpoint_dir=tmp_path, checkpoint_every=7)
    whole = BatchedTransformer(CFG, seeds=[1])
    train_ensemble(whole, train_set, test_set, steps=25, **{**kw, "checkpoint_dir": None})
    part = BatchedTransformer(CFG, seeds=[1])
    train_ensemble(part, train_set, test_set, steps=14, **kw)
    resumed = BatchedTransformer(CFG, seeds=[1])
    train_ensemble(resumed, train_set, test_set, steps=25, **kw)
    for name in whole.params:
        torch.testing.assert_close(resumed.params[name], whole.params[name])


def test_loader_arguments_are_checked():
    _, _, train_set, _ = _task()
    model = BatchedTransformer(CFG, seeds=[0])
    with pytest.raises(ValueError, match="batch_order must be one of"):
        train_ensemble(model, train_set, steps=1, batch_order="shuffled", progress=False)
    with pytest.raises(ValueError, match="loader_eval_every"):
        train_ensemble(model, train_set, steps=1, loader_eval_every=2, progress=False)
    with pytest.raises(ValueError, match="loss_outputs must be an integer in 1..8"):
        train_ensemble(model, train_set, steps=1, loss_outputs=9, progress=False)
