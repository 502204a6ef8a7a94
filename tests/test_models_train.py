"""Batched models and trainer: against a plain per-model reference, torch.optim.AdamW and lone runs."""

import math
import warnings

import pytest
import torch
import torch.nn.functional as F

import corekit.train as train_module
from corekit.device import default_device
from corekit.models import BatchedTransformer, TransformerConfig
from corekit.train import BatchedAdamW, Dataset, steps_per_epoch, train_ensemble

CFG = TransformerConfig(vocab=5, n_ctx=8, d_model=16, n_heads=2, d_mlp=32, n_layers=2, norm="post")


def _reference_forward(model, m, tokens):
    """One model's logits computed with torch's own attention and layer norm (an independent path)."""
    c, P = model.config, lambda name: model.p(name)[m]
    x = P("W_E")[tokens] + P("W_pos")[: tokens.shape[-1]]
    for i in range(c.n_layers):
        def split(W):
            return torch.einsum("btd,hde->bhte", x, W)
        att = F.scaled_dot_product_attention(split(P(f"{i}.W_Q")), split(P(f"{i}.W_K")), split(P(f"{i}.W_V")),
                                             is_causal=True)
        att = torch.einsum("bhte,hed->btd", att, P(f"{i}.W_O")) + P(f"{i}.b_O")
        ln = lambda y, j: F.layer_norm(y, (c.d_model,), P(f"{i}.ln{j}_w"), P(f"{i}.ln{j}_b"))  # noqa: E731
        x = ln(x + att, 1)
        mlp = F.relu(x @ P(f"{i}.W_in") + P(f"{i}.b_in")) @ P(f"{i}.W_out") + P(f"{i}.b_out")
        x = ln(x + mlp, 2)
    return x @ P("W_U") + P("b_U")


@pytest.mark.parametrize("T", [2, 3, 8])
def test_batched_forward_matches_per_model_reference(T):
    """Logits and gradients of every model equal a plain per-model forward, for short contexts (attention as broadcast
    products, T <= SHORT_CONTEXT) and long ones (batched matrix products)."""
    model = BatchedTransformer(CFG, seeds=[0, 1, 2]).double()
    tokens = torch.randint(0, 5, (4, T))
    logits = model(tokens)
    grads = torch.autograd.grad(logits.square().sum(), list(model.parameters()))
    ref = [_reference_forward(model, m, tokens) for m in range(3)]
    ref_grads = torch.autograd.grad(sum(r.square().sum() for r in ref), list(model.parameters()))
    for m in range(3):
        torch.testing.assert_close(logits[m], ref[m])
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r)


@pytest.mark.parametrize("T", [3, 8])
@pytest.mark.parametrize("norm, encoder", [("post", False), ("pre", False), ("none", False), ("post", True)])
def test_tabulated_first_layer_matches_per_example_rows(norm, encoder, T):
    extra = dict(causal=False, qkv_bias=True, init="torch") if encoder else {}
    cfg = TransformerConfig(vocab=5, n_ctx=8, d_model=16, n_heads=2, d_mlp=32, n_layers=2, norm=norm, **extra)
    model = BatchedTransformer(cfg, seeds=[0, 1]).double()
    tokens = torch.randint(0, 5, (32, T))                       # B > vocab: layer 0 reads a (token, position) table
    batched = model(tokens, last=2)
    one_by_one = torch.cat([model(tokens[b:b + 1], last=2) for b in range(32)], dim=1)   # B = 1: per-row keys
    torch.testing.assert_close(batched, one_by_one)
    grads = torch.autograd.grad(batched.square().sum(), list(model.parameters()))
    ref = torch.autograd.grad(one_by_one.square().sum(), list(model.parameters()))
    for g, r in zip(grads, ref):
        torch.testing.assert_close(g, r)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_first_layer_table_in_training_when_only_the_blocks_drop_out(norm, monkeypatch):
    """With dropout inside the blocks only (the ACE authors' model), training reads layer 0's keys and values from the
    (token, position) table: the same logits and gradients as per-example rows under the same dropout masks."""
    cfg = TransformerConfig(vocab=5, n_ctx=3, d_model=16, n_heads=2, d_mlp=32, n_layers=2, norm=norm, dropout=0.3,
                            qkv_bias=True, embedding_dropout=False)
    model = BatchedTransformer(cfg, seeds=[0, 1]).double().train()
    tokens = torch.randint(0, 5, (32, 3))                       # B > vocab
    masks = model.dropout_state()
    calls = []
    table = model._token_keys_values
    monkeypatch.setattr(model, "_token_keys_values", lambda t: calls.append(1) or table(t))
    tabulated = model(tokens, last=1)
    assert calls, "training did not read the first layer's table"
    grads = torch.autograd.grad(tabulated.square().sum(), list(model.parameters()))
    monkeypatch.setattr(model, "_token_keys_values", lambda t: None)   # per-example keys and values
    model.load_dropout_state(masks)
    rows = model(tokens, last=1)
    torch.testing.assert_close(tabulated, rows)
    for g, r in zip(grads, torch.autograd.grad(rows.square().sum(), list(model.parameters()))):
        torch.testing.assert_close(g, r)


@pytest.mark.parametrize("norm, causal", [("post", True), ("pre", True), ("none", True), ("post", False)])
def test_last_positions_match_the_full_forward(norm, causal):
    cfg = TransformerConfig(vocab=5, n_ctx=8, d_model=16, n_heads=2, d_mlp=32, n_layers=2, norm=norm, causal=causal)
    model = BatchedTransformer(cfg, seeds=[0, 1]).double()
    tokens = torch.randint(0, 5, (4, 8))
    full = model(tokens)
    for last in (1, 3, 8):
        torch.testing.assert_close(model(tokens, last=last), full[:, :, -last:])
    with pytest.raises(ValueError, match="last must be between 1 and the sequence length 8"):
        model(tokens, last=9)


def test_each_seed_initialises_the_same_model_in_any_ensemble():
    a, b = BatchedTransformer(CFG, seeds=[3, 7]), BatchedTransformer(CFG, seeds=[7])
    for name, p in a.params.items():
        torch.testing.assert_close(p[1], b.params[name][0])


def test_config_errors_name_the_parameter():
    with pytest.raises(ValueError, match="divisible by n_heads"):
        TransformerConfig(vocab=4, n_ctx=8, d_model=10, n_heads=4)
    with pytest.raises(ValueError, match="norm must be one of"):
        TransformerConfig(vocab=4, n_ctx=8, norm="rms")
    with pytest.raises(ValueError, match="exceeds n_ctx"):
        BatchedTransformer(CFG, [0])(torch.zeros(1, 9, dtype=torch.long))


def _step_batched_and_single(stacked, opt, singles, refs):
    """One step of the batched optimizer on ``stacked`` and of each model's own torch AdamW, on a shared target."""
    target = torch.randn(3, 4)
    stacked.grad = None
    ((stacked - target) ** 3).sum().backward()
    opt.step()
    for single, ref in zip(singles, refs):
        ref.zero_grad()
        ((single - target) ** 3).sum().backward()
        ref.step()


@pytest.mark.parametrize("fused", [True, False])
def test_batched_adamw_matches_torch_adamw_per_model(fused):
    torch.manual_seed(0)
    lr, wd = torch.tensor([1e-2, 3e-2]), torch.tensor([0.0, 0.5])
    stacked = torch.randn(2, 3, 4, requires_grad=True)
    opt = BatchedAdamW([stacked], lr, wd, betas=(0.9, 0.98), fused=fused)
    singles = [stacked.detach()[m].clone().requires_grad_(True) for m in range(2)]
    refs = [torch.optim.AdamW([singles[m]], lr=float(lr[m]), weight_decay=float(wd[m]), betas=(0.9, 0.98))
            for m in range(2)]
    for _ in range(25):
        _step_batched_and_single(stacked, opt, singles, refs)
    for m in range(2):
        torch.testing.assert_close(stacked.detach()[m], singles[m].detach(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fused_batched_adamw_is_torch_fused_adamw_per_model_bit_for_bit(dtype):
    """Each model of the fused update is ``torch.optim.AdamW(fused=True)`` on that model alone, through a reset of one
    model's optimizer (its own step count) and a change of decay: equal bit for bit."""
    gen = torch.Generator().manual_seed(0)
    shapes = [(3, 7, 5), (3, 13), (3, 4, 2, 9), (3,)]
    ours = [torch.randn(s, generator=gen, dtype=dtype) for s in shapes]
    singles = [[p[m].clone() for p in ours] for m in range(3)]
    lr, wd = [1e-3, 3e-3, 1e-2], [1.0, 0.0, 0.3]

    def lone(m):
        return torch.optim.AdamW(singles[m], lr=lr[m], weight_decay=wd[m], betas=(0.9, 0.98), fused=True)

    opt = BatchedAdamW(ours, torch.tensor(lr, dtype=torch.float64), torch.tensor(wd, dtype=torch.float64),
                       betas=(0.9, 0.98), fused=True)
    refs = [lone(m) for m in range(3)]
    for i in range(60):
        if i == 30:
            opt.reset(torch.tensor([False, True, False]))
            wd = [0.5, 0.5, 2.0]
            opt.weight_decay = torch.tensor(wd, dtype=torch.float64)
            for m, ref in enumerate(refs):
                ref.param_groups[0]["weight_decay"] = wd[m]
            refs[1] = lone(1)
        grads = [torch.randn(p.shape, generator=gen, dtype=dtype) * (1 + i % 7) for p in ours]
        for p, g in zip(ours, grads):
            p.grad = g
        for m in range(3):
            for s, g in zip(singles[m], grads):
                s.grad = g[m].clone()
        opt.step()
        for ref in refs:
            ref.step()
    for m in range(3):
        assert all(torch.equal(p[m], s) for p, s in zip(ours, singles[m]))


def test_fused_batched_adamw_models_sharing_a_call_are_lone_models_bit_for_bit():
    """Models 2 and 3 share one fused call (same lr and decay) and still step as lone ``torch.optim.AdamW(fused=True)``
    models, bit for bit, whatever their sizes (the kernel rounds its vectorised loop and its tail differently)."""
    gen = torch.Generator().manual_seed(0)
    ours = [torch.randn(4, n, generator=gen) for n in range(30, 45)]
    singles = [[p[m].clone() for p in ours] for m in range(4)]
    lr, wd = [1e-3, 1e-3, 1e-2, 1e-2], [0.5, 0.5, 2.0, 2.0]
    opt = BatchedAdamW(ours, torch.tensor(lr, dtype=torch.float64), torch.tensor(wd, dtype=torch.float64), fused=True)
    refs = [torch.optim.AdamW(singles[m], lr=lr[m], weight_decay=wd[m], fused=True) for m in range(4)]
    for i in range(40):
        for p in ours:
            p.grad = torch.randn(p.shape, generator=gen) * 10.0 ** -(i % 4)
        for m in range(4):
            for s, p in zip(singles[m], ours):
                s.grad = p.grad[m].clone()
        opt.step()
        for ref in refs:
            ref.step()
    for m in range(4):
        assert all(torch.equal(p[m], s) for p, s in zip(ours, singles[m])), f"model {m}"


def _per_parameter_adamw_step(params, exp_avg, exp_avg_sq, step, lr, wd, betas=(0.9, 0.98), eps=1e-8):
    """The per-parameter loop of ``torch.optim.AdamW`` (foreach=False) with a per-model lr, decay and step (M,)."""
    beta1, beta2 = betas
    with torch.no_grad():
        for p, m, v in zip(params, exp_avg, exp_avg_sq):
            view = (-1,) + (1,) * (p.dim() - 1)
            bias1 = torch.tensor([1 - beta1 ** s for s in step.tolist()], dtype=torch.float64).to(p.dtype).view(view)
            bias2 = torch.tensor([(1 - beta2 ** s) ** 0.5 for s in step.tolist()], dtype=torch.float64).to(p.dtype)
            p.mul_(1 - lr.view(view) * wd.view(view))
            m.lerp_(p.grad, 1 - beta1)
            v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
            p.sub_(lr.view(view) / bias1 * m / (v.sqrt() / bias2.view(view) + eps))


@pytest.mark.parametrize("fused, dtype", [(False, torch.float32), (False, torch.float64), (True, torch.float64)])
def test_batched_adamw_is_the_per_parameter_loop(fused, dtype):
    """The foreach update (``fused=False``) applies the per-parameter loop's operations to the same tensors: equal bit
    for bit; the fused kernel, in float64 with float64 hyperparameters, differs from it by rounding only. Through a
    reset of one model's optimizer and a change of decay, models 0 and 1 sharing one fused call."""
    gen = torch.Generator().manual_seed(0)
    shapes = [(3, 7, 5), (3, 13), (3, 4, 2, 9), (3,)]
    ours = [torch.randn(s, generator=gen, dtype=dtype) for s in shapes]
    ref = [p.clone() for p in ours]
    ref_m, ref_v = [torch.zeros_like(p) for p in ref], [torch.zeros_like(p) for p in ref]
    hyper = torch.float64 if fused else torch.float32
    lr, wd = torch.tensor([1e-3, 1e-3, 1e-2], dtype=hyper), torch.tensor([1.0, 1.0, 0.3], dtype=hyper)
    opt = BatchedAdamW(ours, lr, wd, betas=(0.9, 0.98), fused=fused)
    step = torch.zeros(3, dtype=torch.long)
    for i in range(60):
        if i == 30:
            opt.reset(torch.tensor([False, True, False]))
            step[1] = 0
            for buf in ref_m + ref_v:
                buf[1] = 0
            opt.weight_decay = wd = torch.tensor([0.5, 0.5, 2.0], dtype=hyper)
        for a, b in zip(ours, ref):
            a.grad = torch.randn(a.shape, generator=gen, dtype=dtype) * (1 + i % 7)
            b.grad = a.grad.clone()
        opt.step()
        step += 1
        _per_parameter_adamw_step(ref, ref_m, ref_v, step, lr, wd)
    atol = 1e-13 if fused else 0.0
    for mine, theirs in zip(ours + opt.exp_avg + opt.exp_avg_sq, ref + ref_m + ref_v):
        torch.testing.assert_close(mine, theirs, rtol=0, atol=atol)


def _data(n=96, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 5, (n, 8), generator=gen)
    return Dataset(x, (x.cumsum(1) % 5))                 # running sum mod 5 at every position


def test_ensemble_equals_independent_runs():
    train, test = _data(), _data(seed=1)
    kwargs = dict(steps=30, batch_size=32, lr=[3e-3, 1e-3, 2e-3], weight_decay=[0.0, 0.1, 1.0],
                  eval_every=10, progress=False)
    ensemble = BatchedTransformer(CFG, seeds=[0, 1, 2])
    hist = train_ensemble(ensemble, train, test, **kwargs)
    for m, seed in enumerate([0, 1, 2]):
        lone = BatchedTransformer(CFG, seeds=[seed])
        lone_hist = train_ensemble(lone, train, test, **{**kwargs, "lr": kwargs["lr"][m],
                                                          "weight_decay": kwargs["weight_decay"][m]})
        for name, p in ensemble.params.items():
            torch.testing.assert_close(p[m], lone.params[name][0], rtol=1e-4, atol=1e-5)
        assert hist.curve("test_loss")[:, m].tolist() == pytest.approx(lone_hist.curve("test_loss")[:, 0].tolist(),
                                                                      rel=1e-4)


def test_interrupted_run_resumes_to_the_same_result(tmp_path, capsys):
    train = _data()
    cfg = TransformerConfig(vocab=5, n_ctx=8, d_model=16, n_heads=2, d_mlp=32, dropout=0.1)
    kwargs = dict(batch_size=32, lr=3e-3, eval_every=5, checkpoint_every=10, progress=False)
    full = BatchedTransformer(cfg, seeds=[0, 1])
    full_hist = train_ensemble(full, train, steps=40, **kwargs)
    part = BatchedTransformer(cfg, seeds=[0, 1])
    train_ensemble(part, train, steps=20, checkpoint_dir=tmp_path, **kwargs)      # "interrupted" at step 20
    torch.manual_seed(123)                                                          # a new process
    resumed = BatchedTransformer(cfg, seeds=[0, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")                                              # the checkpoint must load
        hist = train_ensemble(resumed, train, steps=40, checkpoint_dir=tmp_path, **kwargs)
    for name, p in full.params.items():
        assert torch.equal(resumed.params[name], p), name                           # dropout streams resumed too
    assert hist.steps == full_hist.steps and hist.test_loss == full_hist.test_loss
    state = torch.load(tmp_path / "last.pt", weights_only=True)                    # tensors and plain values only
    assert state["step"] == 40 and len(state["dropout"]["states"]) == 2
    train_ensemble(BatchedTransformer(cfg, seeds=[0, 1]), train, steps=40, checkpoint_dir=tmp_path,
                   **{**kwargs, "progress": True})
    assert "training resumed from its checkpoint at step 40 of 40" in capsys.readouterr().out   # the page says so


def test_dropout_masks_depend_only_on_each_models_seed():
    cfg = TransformerConfig(vocab=5, n_ctx=8, d_model=16, n_heads=2, d_mlp=32, dropout=0.5)
    ensemble, lone = BatchedTransformer(cfg, seeds=[3, 7]), BatchedTransformer(cfg, seeds=[7])
    torch.manual_seed(0)
    masks = ensemble.train()._dropout(torch.ones(2, 4, 8, 16))
    torch.manual_seed(1)
    lone_masks = lone.train()._dropout(torch.ones(1, 4, 8, 16))
    assert torch.equal(masks[1], lone_masks[0])                 # the global generator plays no part
    assert not torch.equal(masks[0], masks[1])
    assert set(masks.unique().tolist()) == {0.0, 2.0}           # kept entries scaled by 1 / (1 − rate)
    assert abs((masks == 0).float().mean().item() - 0.5) < 0.05
    assert torch.equal(ensemble.eval()._dropout(torch.ones(2, 3)), torch.ones(2, 3))


def test_dropout_drops_each_entry_independently_with_the_rounded_rate():
    """Each entry is dropped with probability q = round(rate · 2¹⁶) / 2¹⁶, whatever its place among the 16-bit lanes of
    a 64-bit draw, independently of its neighbours, and kept entries are scaled by 1 / (1 − q)."""
    cfg = TransformerConfig(vocab=5, n_ctx=8, d_model=16, n_heads=2, d_mlp=32, dropout=0.1)
    model = BatchedTransformer(cfg, seeds=[0, 1]).train()
    q = round(0.1 * 2 ** 16) / 2 ** 16
    scale = model._dropout(torch.ones(2, 2 ** 21, dtype=torch.float64))
    assert set(scale.unique().tolist()) == {0.0, 1 / (1 - q)}
    dropped = (scale == 0).double()
    n = dropped.numel()
    five_sigma = 5 * math.sqrt(q * (1 - q) / (n / 4))              # per lane: a quarter of the entries
    lanes = dropped.view(2, -1, 4).mean(dim=(0, 1))               # the four 16-bit lanes of each draw
    assert (lanes - q).abs().max().item() < five_sigma, lanes
    neighbours = (dropped[:, 1:] * dropped[:, :-1]).mean().item()  # P(both dropped) = q² when independent
    assert abs(neighbours - q * q) < 5 * math.sqrt(q * q * (1 - q * q) / n)
    assert not torch.equal(model._dropout(torch.ones(2, 64)), model._dropout(torch.ones(2, 64)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rate", [0.1, 0.5, 1e-5, 0.9999])
def test_a_dropout_mask_keeps_the_entries_whose_16_bits_reach_the_threshold(dtype, rate):
    """Model m's mask is 1 / (1 − q) where the signed 16-bit lanes of its generator's next 64-bit draws are at least
    round(rate · 2¹⁶) − 2¹⁵, else 0, in ``dtype``: compared here with a comparison on a copy of the generator."""
    model = BatchedTransformer(TransformerConfig(vocab=5, n_ctx=8, dropout=rate), seeds=[0, 1]).train()
    copies = [torch.Generator().manual_seed(0) for _ in range(2)]
    for copy, gen in zip(copies, model.dropout_generators(torch.device("cpu"))):
        copy.set_state(gen.get_state())
    drop = round(rate * 2 ** 16)
    scale = model._dropout_scale((3, 7), dtype, torch.device("cpu"))               # 21 entries: 6 draws a model
    for m, copy in enumerate(copies):
        lanes = torch.empty(6, dtype=torch.int64).random_(-2 ** 63, None, generator=copy).view(torch.int16)[:21]
        expected = (lanes >= drop - 2 ** 15).double() * (1 / (1 - drop / 2 ** 16))      # in float64, then
        expected = expected.to(dtype if dtype == torch.float64 else torch.float32).to(dtype).view(3, 7)  # as torch rounds
        assert scale.dtype == dtype and torch.equal(scale[m], expected)


def test_ensemble_with_dropout_equals_independent_runs():
    cfg = TransformerConfig(vocab=5, n_ctx=8, d_model=16, n_heads=2, d_mlp=32, dropout=0.2)
    train = _data()
    kwargs = dict(steps=12, batch_size=32, lr=3e-3, eval_every=6, progress=False)
    ensemble = BatchedTransformer(cfg, seeds=[0, 1])
    train_ensemble(ensemble, train, **kwargs)
    for m, seed in enumerate([0, 1]):
        lone = BatchedTransformer(cfg, seeds=[seed])
        train_ensemble(lone, train, **kwargs)
        for name, p in ensemble.params.items():
            torch.testing.assert_close(p[m], lone.params[name][0], rtol=1e-4, atol=1e-5)


def test_training_learns_and_snapshots():
    train = _data(256)
    model = BatchedTransformer(CFG, seeds=[0])
    hist = train_ensemble(model, train, steps=150, batch_size=64, lr=1e-2, eval_every=50,
                          snapshot_steps=[50], progress=False)
    acc = hist.curve("train_acc")[:, 0]
    assert acc[-1] > acc[0] + 0.2
    assert set(hist.snapshots) == {50}


def test_evaluating_at_chosen_steps_gives_the_per_step_values_there_and_changes_no_training():
    """eval_every=None with eval_steps evaluates at 0, those steps, the snapshots and the end, with the values a
    per-step evaluation has there; the trained parameters and epoch losses are the same bit for bit."""
    cfg = TransformerConfig(vocab=5, n_ctx=8, d_model=16, n_heads=2, d_mlp=32, dropout=0.1)
    train, test = _data(), _data(seed=1)
    kwargs = dict(steps=25, batch_size=40, drop_last=False, lr=3e-3, batch_order="loader", loader_eval_every=2,
                  progress=False)
    every, chosen = BatchedTransformer(cfg, seeds=[0, 1]), BatchedTransformer(cfg, seeds=[0, 1])
    ref = train_ensemble(every, train, test, eval_every=1, **kwargs)
    hist = train_ensemble(chosen, train, test, eval_every=None, eval_steps=[3, 7, 9], snapshot_steps=[12], **kwargs)
    assert hist.steps == [0, 3, 7, 9, 12, 25]
    for name in ("train_loss", "train_acc", "test_loss", "test_acc"):
        assert getattr(hist, name) == [getattr(ref, name)[s] for s in hist.steps], name
    assert hist.epoch_train_loss == ref.epoch_train_loss and sorted(hist.snapshots) == [12]
    for name, p in every.params.items():
        assert torch.equal(chosen.params[name], p), name
    with pytest.raises(ValueError, match="eval_every >= 1 \\(or None\\)"):
        train_ensemble(chosen, train, steps=1, eval_every=0, progress=False)
    with pytest.raises(ValueError, match="dense_eval needs a periodic evaluation"):
        train_ensemble(chosen, train, steps=1, eval_every=None, dense_eval=lambda h: False, progress=False)


def test_bad_training_arguments():
    with pytest.raises(ValueError, match="one per model"):
        train_ensemble(BatchedTransformer(CFG, [0, 1]), _data(), steps=1, lr=[1e-3, 1e-3, 1e-3], progress=False)
    with pytest.raises(ValueError, match="same N"):
        Dataset(torch.zeros(3, 4, dtype=torch.long), torch.zeros(2, 4, dtype=torch.long))


def test_cuda_request_without_gpu_is_a_clear_error():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(ValueError, match="no CUDA GPU"):
        default_device("cuda")
    with pytest.raises(ValueError, match="device must be"):
        default_device("tpu:x")
    assert default_device("auto").type == "cpu"


def test_weight_decay_schedule_forks_a_branch():
    train = _data()
    model = BatchedTransformer(CFG, seeds=[4, 4])                     # two copies of one model
    hist = train_ensemble(model, train, steps=20, batch_size=32, lr=3e-3, weight_decay={0: 1.0, 10: [1.0, 0.0]},
                          eval_every=5, snapshot_steps=[10], progress=False)
    before = hist.snapshots[10]
    for p in before.values():
        torch.testing.assert_close(p[0], p[1])                        # identical until the fork
    assert not torch.allclose(model.p("W_U")[0], model.p("W_U")[1])   # different after it
    lone = BatchedTransformer(CFG, seeds=[4])
    train_ensemble(lone, train, steps=20, batch_size=32, lr=3e-3, weight_decay=1.0, eval_every=5, progress=False)
    torch.testing.assert_close(model.p("W_U")[0], lone.p("W_U")[0], rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="from step 0"):
        train_ensemble(lone, train, steps=1, weight_decay={5: 0.0}, progress=False)


def test_steps_per_epoch_counts_the_batches_an_epoch_draws():
    for n, batch_size, want in ((10, 3, 3), (10, 5, 2), (10, None, 1), (10, 0, 1), (10, 10, 1), (10, 20, 1)):
        assert steps_per_epoch(n, batch_size) == want
    assert len(train_module._batch_indices(0, 0, 10, 3, torch.device("cpu"))) == steps_per_epoch(10, 3)
    for n, batch_size, want in ((10, 3, 4), (10, 5, 2), (1404, 512, 3), (10, None, 1)):
        assert steps_per_epoch(n, batch_size, drop_last=False) == want
    batches = train_module._batch_indices(0, 0, 10, 3, torch.device("cpu"), drop_last=False)
    assert [len(b) for b in batches] == [3, 3, 3, 1] and sorted(torch.cat(batches).tolist()) == list(range(10))


def test_an_epoch_without_drop_last_is_a_dataloader_epoch():
    train = _data(40)
    model = BatchedTransformer(CFG, seeds=[5])
    train_ensemble(model, train, steps=steps_per_epoch(40, 16, drop_last=False) * 2, batch_size=16, lr=3e-3,
                   drop_last=False, progress=False)
    lone = BatchedTransformer(CFG, seeds=[5])
    params = [p[0].detach().clone().requires_grad_(True) for p in lone.params.values()]
    opt = torch.optim.AdamW(params, lr=3e-3, weight_decay=0.0)
    for epoch in range(2):
        for idx in train_module._batch_indices(5, epoch, 40, 16, torch.device("cpu"), drop_last=False):
            logits = torch.func.functional_call(lone, {f"params.{k}": q[None] for k, q in zip(lone.params, params)},
                                                (train.x[idx],), {"last": train.y.shape[1]})
            loss = F.cross_entropy(logits[0].flatten(0, 1), train.y[idx].flatten())
            opt.zero_grad()
            loss.backward()
            opt.step()
    for (name, p), q in zip(model.params.items(), params):
        torch.testing.assert_close(p[0], q.detach(), rtol=1e-4, atol=1e-5, msg=name)


# The grokking-cores authors' block: torch.nn.TransformerEncoderLayer with its defaults.
ENC = TransformerConfig(vocab=7, n_ctx=5, d_model=16, n_heads=2, d_mlp=32, n_layers=2, norm="post", dropout=0.1,
                        qkv_bias=True, init="torch", n_out=6)


class _AttentionWeightsDropoutLayer(torch.nn.TransformerEncoderLayer):
    """torch's encoder layer with attention run on its explicit path, whose pattern dropout calls F.dropout."""

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        return self.dropout1(self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                            need_weights=True)[0])


def _torch_encoder(model, layer_class=torch.nn.TransformerEncoderLayer):
    """Lone torch encoder layers (ModuleList) holding model 0's weights of a BatchedTransformer."""
    c, P = model.config, lambda name: model.p(name)[0].detach()
    layers = torch.nn.ModuleList()
    for i in range(c.n_layers):
        layer = layer_class(c.d_model, c.n_heads, dim_feedforward=c.d_mlp, dropout=c.dropout, batch_first=True)
        heads = lambda W: W.permute(0, 2, 1).reshape(c.d_model, c.d_model)      # noqa: E731  (H, D, e) -> (H·e, D)
        sd = {"self_attn.in_proj_weight": torch.cat([heads(P(f"{i}.W_{n}")) for n in "QKV"]),
              "self_attn.in_proj_bias": torch.cat([P(f"{i}.b_{n}").flatten() for n in "QKV"]),
              "self_attn.out_proj.weight": P(f"{i}.W_O").reshape(c.d_model, c.d_model).T,
              "self_attn.out_proj.bias": P(f"{i}.b_O"),
              "linear1.weight": P(f"{i}.W_in").T, "linear1.bias": P(f"{i}.b_in"),
              "linear2.weight": P(f"{i}.W_out").T, "linear2.bias": P(f"{i}.b_out"),
              "norm1.weight": P(f"{i}.ln1_w"), "norm1.bias": P(f"{i}.ln1_b"),
              "norm2.weight": P(f"{i}.ln2_w"), "norm2.bias": P(f"{i}.ln2_b")}
        layer.load_state_dict(sd)
        layers.append(layer.to(P("W_E").dtype))
    return layers


def _torch_logits(model, layers, tokens, causal, embed_dropout=lambda x: x):
    """Logits (B, T, V) of model 0 computed by torch's encoder layers."""
    P = lambda name: model.p(name)[0].detach()                                    # noqa: E731
    x = embed_dropout(P("W_E")[tokens] + P("W_pos")[: tokens.shape[1]])
    T = tokens.shape[1]
    mask = torch.nn.Transformer.generate_square_subsequent_mask(T, dtype=x.dtype) if causal else None
    for layer in layers:
        x = layer(x, src_mask=mask, is_causal=causal)
    return x @ P("W_U") + P("b_U")


@pytest.mark.parametrize("causal", [False, True])
def test_post_ln_block_in_eval_mode_is_torch_transformer_encoder_layer(causal):
    model = BatchedTransformer(TransformerConfig(**{**ENC.as_dict(), "causal": causal}), seeds=[3]).double().eval()
    tokens = torch.randint(0, 7, (9, 5))
    layers = _torch_encoder(model).eval()
    with torch.no_grad():
        torch.testing.assert_close(model(tokens)[0], _torch_logits(model, layers, tokens, causal))
        torch.testing.assert_close(model(tokens, last=1)[0], _torch_logits(model, layers, tokens, causal)[:, -1:])


@pytest.mark.parametrize("causal", [False, True])
def test_post_ln_dropout_with_a_fixed_mask_is_torch_transformer_encoder_layer(causal, monkeypatch):
    model = BatchedTransformer(TransformerConfig(**{**ENC.as_dict(), "causal": causal}), seeds=[3]).double().train()
    tokens = torch.randint(0, 7, (9, 5))
    masks, own = [], model._dropout

    def recording(x):                                       # our masks, in the order the forward draws them
        factor = own(torch.ones_like(x))
        masks.append(factor[0])
        return x * factor

    monkeypatch.setattr(model, "_dropout", recording)
    ours = model(tokens)[0]
    assert len(masks) == 1 + 4 * ENC.n_layers               # embedding, then per layer: pattern, attn out, MLP, out
    assert all(((f == 0) | torch.isclose(f, torch.tensor(1 / 0.9, dtype=f.dtype))).all() for f in masks)
    replay = list(masks)

    def replayed_dropout(x, p=0.5, training=True, inplace=False):
        assert training and p == pytest.approx(0.1)
        return x * replay.pop(0).reshape(x.shape)

    monkeypatch.setattr(torch.nn.functional, "dropout", replayed_dropout)
    layers = _torch_encoder(model, _AttentionWeightsDropoutLayer).train()
    theirs = _torch_logits(model, layers, tokens, causal, embed_dropout=lambda x: replayed_dropout(x, 0.1))
    assert not replay                                       # torch's layers drew every mask we recorded
    torch.testing.assert_close(ours, theirs)


def test_torch_init_draws_what_torch_modules_draw():
    cfg = TransformerConfig(**{**ENC.as_dict(), "d_model": 128, "d_mlp": 512, "n_heads": 4, "n_out": 128})
    model = BatchedTransformer(cfg, seeds=[0])
    torch.manual_seed(0)
    ref = torch.nn.TransformerEncoderLayer(128, 4, dim_feedforward=512, batch_first=True)
    readout = torch.nn.Linear(128, 128)
    pairs = {"0.W_Q": ref.self_attn.in_proj_weight, "0.W_O": ref.self_attn.out_proj.weight,
             "0.W_in": ref.linear1.weight, "0.b_in": ref.linear1.bias, "0.W_out": ref.linear2.weight,
             "0.b_out": ref.linear2.bias, "W_U": readout.weight, "b_U": readout.bias}
    for name, theirs in pairs.items():
        mine, theirs = model.p(name)[0].flatten(), theirs.detach().flatten()
        assert mine.abs().max() <= theirs.abs().max() * 1.05 + 1e-6, name       # the same uniform bound
        assert mine.std().item() == pytest.approx(theirs.std().item(), rel=0.2), name
    for name in ("0.b_Q", "0.b_K", "0.b_V", "0.b_O"):
        assert torch.equal(model.p(name), torch.zeros_like(model.p(name))), name
    assert model.p("W_E").std().item() == pytest.approx(1.0, rel=0.1)
    with pytest.raises(ValueError, match="qkv_bias=True needs bias=True"):
        TransformerConfig(vocab=4, n_ctx=2, bias=False, qkv_bias=True)


def test_optimizer_reset_is_a_fresh_torch_adamw_for_the_flagged_models():
    torch.manual_seed(0)
    lr, wd = torch.tensor([1e-2, 1e-2]), torch.tensor([0.5, 0.5])
    stacked = torch.randn(2, 3, 4, requires_grad=True)
    opt = BatchedAdamW([stacked], lr, wd)
    singles = [stacked.detach()[m].clone().requires_grad_(True) for m in range(2)]
    refs = [torch.optim.AdamW([singles[m]], lr=1e-2, weight_decay=0.5) for m in range(2)]
    for step in range(30):
        if step == 15:
            opt.reset(torch.tensor([False, True]))
            refs[1] = torch.optim.AdamW([singles[1]], lr=1e-2, weight_decay=0.5)
        _step_batched_and_single(stacked, opt, singles, refs)
    for m in range(2):
        torch.testing.assert_close(stacked.detach()[m], singles[m].detach(), rtol=1e-5, atol=1e-6)
    assert opt.step_count.tolist() == [30, 15]
    with pytest.raises(ValueError, match="betas must be two numbers"):
        BatchedAdamW([stacked], lr, wd, betas=(0.9, 1.0))


def test_fork_with_optimizer_reset_is_a_second_run_from_the_fork():
    train = _data()
    kwargs = dict(lr=3e-3, eval_every=5, progress=False)
    model = BatchedTransformer(CFG, seeds=[4, 4])
    train_ensemble(model, train, steps=20, weight_decay={0: 1.0, 10: [1.0, 0.0]},
                   optimizer_reset={10: [False, True]}, **kwargs)
    lone = BatchedTransformer(CFG, seeds=[4])
    train_ensemble(lone, train, steps=10, weight_decay=1.0, **kwargs)
    train_ensemble(lone, train, steps=10, weight_decay=0.0, **kwargs)     # a new call: a fresh optimizer
    for name, p in lone.params.items():
        torch.testing.assert_close(model.params[name][1], p[0], rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="optimizer_reset must map"):
        train_ensemble(lone, train, steps=1, optimizer_reset={0: True}, progress=False)
