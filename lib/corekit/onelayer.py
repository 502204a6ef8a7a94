"""The one-layer transformer's training step with its gradients derived by hand.

The eNTK authors' model (one attention-and-MLP layer, no LayerNorm, no biases, no dropout; chapters 06 and 09)
trained on its last position spends most of an autograd step on launching ~200 small operations and on the
autograd engine itself. :func:`loss_and_grads` computes the same loss and gradients in about 60 operations,
written out below; ``tests/test_onelayer.py`` checks them against autograd in float64.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from .models import BatchedTransformer, _rows


def applies(model: BatchedTransformer, last: int) -> bool:
    """Return whether :func:`loss_and_grads` computes ``model``'s training step for a loss on the last ``last`` positions."""
    c = model.config
    return (c.n_layers == 1 and c.norm == "none" and not c.bias and last == 1
            and not (model.training and c.dropout > 0))


@torch.no_grad()
def loss_and_grads(model: BatchedTransformer, tokens: Tensor, y: Tensor, n_outputs: int | None = None) -> Tensor:
    """Return each model's mean cross-entropy (M,) of its last-position logits on labels y (B, 1) or (M, B, 1), after
    writing into every parameter's ``.grad`` the gradient of the models' summed loss (what autograd's
    ``loss.sum().backward()`` gives). ``tokens`` (B, T) or (M, B, T); ``n_outputs`` keeps the first logits only."""
    M = model.n_models
    tokens = tokens.expand(M, *tokens.shape[-2:])
    y = y.expand(M, *y.shape[-2:])
    P = model.p
    W_E, W_pos, W_in, W_out = P("W_E"), P("W_pos"), P("0.W_in"), P("0.W_out")
    W_Q, W_K, W_V, W_O = P("0.W_Q"), P("0.W_K"), P("0.W_V"), P("0.W_O")        # (M, H, D, e) ×3, (M, H, e, D)
    _, B, T = tokens.shape
    H, D, e = W_Q.shape[1:]
    n = n_outputs or model.config.out_vocab
    W_U = P("W_U")[:, :, :n]                                                   # (M, D, n)
    scale = 1 / math.sqrt(e)

    # forward: every position's keys and values, the last position's query, attention, MLP and logits
    rows = tokens.reshape(M, B * T)
    x = _rows(W_E, rows).view(M, B, T, D) + W_pos[:, None, :T]                # (M, B, T, D)
    W_kv = torch.cat([W_K, W_V], 1).permute(0, 2, 1, 3).reshape(M, D, 2 * H * e)
    kv = torch.bmm(x.view(M, B * T, D), W_kv).view(M, B, T, 2, H, e)
    k, v = kv[:, :, :, 0].transpose(2, 3), kv[:, :, :, 1].transpose(2, 3)     # (M, B, H, T, e)
    x_last = x[:, :, -1]                                                       # (M, B, D)
    W_q = W_Q.permute(0, 2, 1, 3).reshape(M, D, H * e)
    q = torch.bmm(x_last, W_q).view(M, B, H, 1, e)
    a = ((q * k).sum(-1) * scale).softmax(-1)                                  # (M, B, H, T): the last row sees all
    z = (a.unsqueeze(-1) * v).sum(-2).reshape(M, B, H * e)
    W_o = W_O.reshape(M, H * e, D)
    h = x_last + torch.bmm(z, W_o)                                             # (M, B, D)
    u = torch.bmm(h, W_in)                                                     # (M, B, F)
    r = u.clamp_min(0)
    h2 = h + torch.bmm(r, W_out)
    logp = torch.bmm(h2, W_U).log_softmax(-1)                                  # (M, B, n)
    loss = -logp.gather(-1, y).mean(dim=(1, 2))

    # backward, from ∂(Σ_m loss_m)/∂logits = (softmax − onehot) / B
    g = logp.exp_()
    g.scatter_add_(-1, y, torch.full_like(g[..., :1], -1.0)).div_(B)
    grad_U = torch.zeros_like(P("W_U"))
    grad_U[:, :, :n] = torch.bmm(h2.transpose(1, 2), g)
    dh2 = torch.bmm(g, W_U.transpose(1, 2))                                    # (M, B, D)
    grad_out = torch.bmm(r.transpose(1, 2), dh2)
    du = torch.bmm(dh2, W_out.transpose(1, 2)).mul_(u > 0)                     # (M, B, F)
    grad_in = torch.bmm(h.transpose(1, 2), du)
    dh = dh2 + torch.bmm(du, W_in.transpose(1, 2))
    grad_O = torch.bmm(z.transpose(1, 2), dh).view(M, H, e, D)
    dz = torch.bmm(dh, W_o.transpose(1, 2)).view(M, B, H, 1, e)
    da = (dz * v).sum(-1)                                                      # (M, B, H, T)
    ds = a * (da - (a * da).sum(-1, keepdim=True)) * scale
    dq = (ds.unsqueeze(-1) * k).sum(-2).reshape(M, B, H * e)
    dkv = torch.stack([(ds.unsqueeze(-1) * q).transpose(2, 3), (a.unsqueeze(-1) * dz).transpose(2, 3)], 3)
    dkv = dkv.reshape(M, B * T, 2 * H * e)                                     # (M, B·T, 2He): ∂keys, ∂values
    grad_kv = torch.bmm(x.view(M, B * T, D).transpose(1, 2), dkv).view(M, D, 2, H, e).permute(0, 2, 3, 1, 4)
    grad_q = torch.bmm(x_last.transpose(1, 2), dq).view(M, D, H, e).transpose(1, 2)
    dx = torch.bmm(dkv, W_kv.transpose(1, 2)).view(M, B, T, D)
    dx[:, :, -1] += dh + torch.bmm(dq, W_q.transpose(1, 2))
    grad_pos = torch.zeros_like(W_pos)
    grad_pos[:, :T] = dx.sum(1)
    offsets = torch.arange(M, device=rows.device)[:, None] * W_E.shape[1]
    grad_E = torch.zeros_like(W_E).view(-1, D).index_add_(0, (rows + offsets).reshape(-1), dx.view(-1, D))

    grads = {"W_E": grad_E.view_as(W_E), "W_pos": grad_pos, "0.W_Q": grad_q, "0.W_K": grad_kv[:, 0],
             "0.W_V": grad_kv[:, 1], "0.W_O": grad_O, "0.W_in": grad_in, "0.W_out": grad_out, "W_U": grad_U}
    for name, grad in grads.items():
        P(name).grad = grad.contiguous()
    return loss
