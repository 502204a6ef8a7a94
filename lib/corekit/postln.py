"""The post-LayerNorm transformer's training step with its gradients derived by hand.

The ACE authors' model (``nn.TransformerEncoderLayer`` blocks: post-LN, biases, ReLU, dropout on the attention
pattern, the MLP hidden layer and both sublayer outputs; chapters 01, 02, 03 and 08) trained on its last position
spends as long on autograd's elementwise passes and bookkeeping as on its matrix products. :func:`loss_and_grads`
computes the same loss and gradients with fused LayerNorm kernels, ReLU and dropout as one multiplier, the biases
inside the products, layer 0's queries, keys and values read from a (token, position) table, and the last layer's
queries and MLP at the last position only. It draws the dropout masks the model's forward draws, in its order, so
``tests/test_postln.py`` checks loss and gradients against autograd in float64 with dropout on.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from .models import SHORT_CONTEXT, BatchedTransformer, _rows

EPS = 1e-5                                                                    # nn.LayerNorm's, as models._layer_norm


def applies(model: BatchedTransformer, last: int) -> bool:
    """Return whether :func:`loss_and_grads` computes ``model``'s training step for a loss on the last ``last`` positions."""
    c = model.config
    return c.norm == "post" and c.bias and last == 1


def _scores(q: Tensor, k: Tensor) -> Tensor:
    """Return q·k (M, B, H, T', T) for queries (M, B, H, T', e) and keys (M, B, H, T, e)."""
    if k.shape[-2] <= SHORT_CONTEXT:
        return (q.unsqueeze(-2) * k.unsqueeze(-3)).sum(-1)
    return q @ k.transpose(-1, -2)


def _mix(a: Tensor, v: Tensor) -> Tensor:
    """Return a @ v (M, B, H, T', e) for weights (M, B, H, T', T) and values (M, B, H, T, e)."""
    if v.shape[-2] <= SHORT_CONTEXT:
        return (a.unsqueeze(-1) * v.unsqueeze(-3)).sum(-2)
    return a @ v


def _mix_t(a: Tensor, g: Tensor) -> Tensor:
    """Return aᵀ @ g (M, B, H, T, e) for weights (M, B, H, T', T) and g (M, B, H, T', e)."""
    if a.shape[-1] <= SHORT_CONTEXT:
        return (a.unsqueeze(-1) * g.unsqueeze(-2)).sum(-3)
    return a.transpose(-1, -2) @ g


class _Block:
    """One post-LN block's forward at its query positions (the last ``n_query`` of T), keeping what its backward reads.

    Its inputs are the queries q (M, B·T', H·e), the keys and values side by side kv (M, B·T, 2·H·e) and the residual
    stream at the query positions x_q (M, B·T', D); ``drop(*shape)`` returns the next dropout multipliers or None.
    """

    def __init__(self, model: BatchedTransformer, i: int, q: Tensor, kv: Tensor, x_q: Tensor, T: int, drop):
        P, c = model.p, model.config
        M, N, D = x_q.shape
        H, e, n_query = c.n_heads, c.d_head, N // (kv.shape[1] // T)
        B = N // n_query
        self.i, self.B, self.T, self.n_query, self.scale = i, B, T, n_query, 1 / math.sqrt(e)
        self.q = q.view(M, B, n_query, H, e).transpose(2, 3)                   # (M, B, H, T', e)
        kv = kv.view(M, B, T, 2, H, e)
        self.k, self.v = kv[:, :, :, 0].transpose(2, 3), kv[:, :, :, 1].transpose(2, 3)     # (M, B, H, T, e)
        s = _scores(self.q, self.k).mul_(self.scale)                          # (M, B, H, T', T)
        if c.causal:
            future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)[T - n_query:]
            s += torch.zeros(n_query, T, dtype=s.dtype, device=s.device).masked_fill_(future, float("-inf"))
        self.a = s.softmax(-1)
        self.m_a = drop(B, H, n_query, T)
        self.ad = self.a if self.m_a is None else self.a * self.m_a
        self.z = _mix(self.ad, self.v).transpose(2, 3).reshape(M, N, H * e)    # (M, B·T', H·e)
        self.W_O = P(f"{i}.W_O").reshape(M, H * e, D)
        o = torch.baddbmm(P(f"{i}.b_O")[:, None], self.z, self.W_O)            # (M, B·T', D)
        self.m_o = drop(B, n_query, D)
        self.y1 = x_q + (o if self.m_o is None else o.mul_(self.m_o.view_as(o)))
        self.n1, self.mu1, self.rstd1 = torch.native_layer_norm(self.y1, (D,), None, None, EPS)
        self.g1 = P(f"{i}.ln1_w")[:, None]
        self.x1 = torch.addcmul(P(f"{i}.ln1_b")[:, None], self.n1, self.g1)  # (M, B·T', D)
        u = torch.baddbmm(P(f"{i}.b_in")[:, None], self.x1, P(f"{i}.W_in"))    # (M, B·T', F)
        self.s_h = torch.sign(u).clamp_min_(0)                                 # ReLU and dropout: one multiplier
        m_h = drop(B, n_query, u.shape[-1])
        if m_h is not None:
            self.s_h.mul_(m_h.view_as(u))
        self.r = u.mul_(self.s_h)
        w = torch.baddbmm(P(f"{i}.b_out")[:, None], self.r, P(f"{i}.W_out"))   # (M, B·T', D)
        self.m_w = drop(B, n_query, D)
        self.y2 = self.x1 + (w if self.m_w is None else w.mul_(self.m_w.view_as(w)))
        self.n2, self.mu2, self.rstd2 = torch.native_layer_norm(self.y2, (D,), None, None, EPS)
        self.g2 = P(f"{i}.ln2_w")[:, None]
        self.out = torch.addcmul(P(f"{i}.ln2_b")[:, None], self.n2, self.g2)  # (M, B·T', D)

    def backward(self, model: BatchedTransformer, d_out: Tensor, grads: dict[str, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        """Return ∂/∂ (x_q, q, kv), shaped as they are, from ∂/∂ the block's output (M, B·T', D), after writing its
        parameters' gradients (but the query, key and value weights') into ``grads``."""
        P, i, M = model.p, self.i, d_out.shape[0]
        H, e, B, n_query = self.q.shape[2], self.q.shape[-1], self.B, self.n_query
        grads[f"{i}.ln2_w"], grads[f"{i}.ln2_b"] = (d_out * self.n2).sum(1), d_out.sum(1)
        dy2 = _layer_norm_backward(d_out * self.g2, self.y2, self.mu2, self.rstd2)
        dw = dy2 if self.m_w is None else dy2 * self.m_w.view_as(dy2)
        grads[f"{i}.b_out"], grads[f"{i}.W_out"] = dw.sum(1), torch.bmm(self.r.transpose(1, 2), dw)
        du = torch.bmm(dw, P(f"{i}.W_out").transpose(1, 2)).mul_(self.s_h)    # (M, B·T', F)
        grads[f"{i}.b_in"], grads[f"{i}.W_in"] = du.sum(1), torch.bmm(self.x1.transpose(1, 2), du)
        dx1 = torch.baddbmm(dy2, du, P(f"{i}.W_in").transpose(1, 2))
        grads[f"{i}.ln1_w"], grads[f"{i}.ln1_b"] = (dx1 * self.n1).sum(1), dx1.sum(1)
        dy1 = _layer_norm_backward(dx1.mul_(self.g1), self.y1, self.mu1, self.rstd1)
        do = dy1 if self.m_o is None else dy1 * self.m_o.view_as(dy1)
        grads[f"{i}.b_O"] = do.sum(1)
        grads[f"{i}.W_O"] = torch.bmm(self.z.transpose(1, 2), do).view(M, H, e, -1)
        dz = torch.bmm(do, self.W_O.transpose(1, 2)).view(M, B, n_query, H, e).transpose(2, 3)   # (M, B, H, T', e)
        dv = _mix_t(self.ad, dz)                                               # (M, B, H, T, e)
        da = _scores(dz, self.v)                                               # (M, B, H, T', T)
        if self.m_a is not None:
            da = da.mul_(self.m_a)
        ds = self.a * (da - (self.a * da).sum(-1, keepdim=True)) * self.scale
        dq = _mix(ds, self.k).transpose(2, 3).reshape(M, B * n_query, H * e)
        dkv = torch.stack([_mix_t(ds, self.q), dv], 2).permute(0, 1, 4, 2, 3, 5).reshape(M, B * self.T, 2 * H * e)
        return dy1, dq, dkv


def _layer_norm_backward(dn: Tensor, y: Tensor, mu: Tensor, rstd: Tensor) -> Tensor:
    """Return ∂/∂y (M, N, D) of LayerNorm without affine, y ↦ (y − μ) / σ, from ∂/∂ its output ``dn`` (M, N, D)."""
    return torch.ops.aten.native_layer_norm_backward(dn, y, (y.shape[-1],), mu, rstd, None, None,
                                                     [True, False, False])[0]


def _weights(model: BatchedTransformer, i: int, names: str) -> tuple[Tensor, Tensor | None]:
    """Return layer i's weights of ``names`` ("Q" or "KV") side by side (M, D, k·H·e) and biases (M, 1, k·H·e) or
    None."""
    P = model.p
    W = torch.cat([P(f"{i}.W_{n}") for n in names], 1)                        # (M, k·H, D, e)
    M, kH, D, e = W.shape
    W = W.permute(0, 2, 1, 3).reshape(M, D, kH * e)
    if P(f"{i}.b_Q") is None:
        return W, None
    return W, torch.cat([P(f"{i}.b_{n}") for n in names], 1).view(M, 1, kH * e)


def _weight_grads(grads: dict[str, Tensor], i: int, names: str, g_W: Tensor, g_b: Tensor | None, H: int) -> None:
    """Write layer i's gradients of the weights ``names`` into ``grads`` from their side-by-side forms."""
    M, D, C = g_W.shape
    g_W = g_W.view(M, D, len(names), H, -1).permute(0, 2, 3, 1, 4)           # (M, k, H, D, e)
    for j, name in enumerate(names):
        grads[f"{i}.W_{name}"] = g_W[:, j]
        if g_b is not None:
            grads[f"{i}.b_{name}"] = g_b.view(M, len(names), H, -1)[:, j]


class _Rows:
    """The rows a projection reads: a matrix (M, N, D), or the rows ``index`` (M, N) of a table (M, R, D)."""

    def __init__(self, x: Tensor, index: Tensor | None = None):
        self.x, self.index = x, index

    def project(self, W: Tensor, b: Tensor | None) -> Tensor:
        """Return the rows times W (M, D, C) plus b (M, 1, C): (M, N, C)."""
        out = torch.bmm(self.x, W) if b is None else torch.baddbmm(b, self.x, W)
        return out if self.index is None else _rows(out, self.index)

    def backward(self, d: Tensor, W: Tensor, with_bias: bool) -> tuple[Tensor, Tensor | None, Tensor]:
        """Return ∂/∂W (M, D, C), ∂/∂b (M, C) or None, and ∂/∂ the matrix or table (M, N or R, D) from ∂/∂ the
        product's rows d (M, N, C)."""
        if self.index is not None:                                             # sum the rows' gradients per table row
            M, R, C = self.x.shape[0], self.x.shape[1], d.shape[-1]
            flat = (self.index + torch.arange(M, device=d.device)[:, None] * R).reshape(-1)
            d = torch.zeros(M * R, C, dtype=d.dtype, device=d.device).index_add_(0, flat, d.reshape(-1, C)).view(M, R, C)
        return torch.bmm(self.x.transpose(1, 2), d), d.sum(1) if with_bias else None, torch.bmm(d, W.transpose(1, 2))


@torch.no_grad()
def loss_and_grads(model: BatchedTransformer, tokens: Tensor, y: Tensor, n_outputs: int | None = None) -> Tensor:
    """Return each model's mean cross-entropy (M,) of its last-position logits on labels y (B, 1) or (M, B, 1), after
    writing into every parameter's ``.grad`` the gradient of the models' summed loss (what autograd's
    ``loss.sum().backward()`` gives) and drawing the dropout masks its forward draws. ``tokens`` (B, T) or (M, B, T);
    ``n_outputs`` keeps the first logits only."""
    P, c, M = model.p, model.config, model.n_models
    tokens = tokens.expand(M, *tokens.shape[-2:])
    y = y.expand(M, *y.shape[-2:])
    _, B, T = tokens.shape
    D, H, V, L = c.d_model, c.n_heads, c.vocab, c.n_layers
    W_E = P("W_E")

    def drop(*shape: int) -> Tensor | None:
        dropping = model.training and c.dropout > 0
        return model._dropout_scale(shape, W_E.dtype, W_E.device) if dropping else None

    # layer 0's input depends on (token, position) alone unless it is dropped out: its queries, keys and values
    # are then products of V·T table rows, gathered
    table = (W_E[:, :, None, :] + P("W_pos")[:, None, :T, :]).reshape(M, V * T, D)    # (M, V·T, D)
    rows = (tokens * T + torch.arange(T, device=tokens.device)).reshape(M, B * T)
    x = _rows(table, rows).view(M, B, T, D)
    m_emb = drop(B, T, D) if c.embedding_dropout else None
    if m_emb is not None:
        x = x * m_emb
    layers = []                                       # (block, the rows its queries read, its keys' and values')
    for i in range(L):
        n_query = 1 if i == L - 1 else T
        x_q = x[:, :, T - n_query:].reshape(M, B * n_query, D)
        if i == 0 and m_emb is None:
            q_rows = _Rows(table, rows.view(M, B, T)[:, :, T - n_query:].reshape(M, B * n_query))
            kv_rows = _Rows(table, rows)
        else:
            q_rows, kv_rows = _Rows(x_q), _Rows(x.reshape(M, B * T, D))
        block = _Block(model, i, q_rows.project(*_weights(model, i, "Q")), kv_rows.project(*_weights(model, i, "KV")),
                       x_q, T, drop)
        layers.append((block, q_rows, kv_rows))
        x = block.out.view(M, B, n_query, D)
    n = n_outputs or c.out_vocab
    h = x.view(M, B, D)
    W_U = P("W_U")[:, :, :n]
    logp = torch.baddbmm(P("b_U")[:, None, :n], h, W_U).log_softmax(-1)      # (M, B, n)
    loss = -logp.gather(-1, y).mean(dim=(1, 2))

    # backward, from ∂(Σ_m loss_m)/∂logits = (softmax − onehot) / B
    g = logp.exp_()
    g.scatter_add_(-1, y, torch.full_like(g[..., :1], -1.0)).div_(B)
    grads: dict[str, Tensor] = {"W_U": torch.zeros_like(P("W_U")), "b_U": torch.zeros_like(P("b_U"))}
    grads["W_U"][:, :, :n], grads["b_U"][:, :n] = torch.bmm(h.transpose(1, 2), g), g.sum(1)
    d_out = torch.bmm(g, W_U.transpose(1, 2))                                  # (M, B·1, D)
    d_table = torch.zeros_like(table)
    for block, q_rows, kv_rows in reversed(layers):
        i, n_query = block.i, block.n_query
        d_xq, dq, dkv = block.backward(model, d_out, grads)
        d_input = []
        for names, rows_of, d in (("Q", q_rows, dq), ("KV", kv_rows, dkv)):
            W, b = _weights(model, i, names)
            g_W, g_b, d_src = rows_of.backward(d, W, b is not None)
            _weight_grads(grads, i, names, g_W, g_b, H)
            if rows_of.index is None:
                d_input.append(d_src)
            else:
                d_table += d_src
        if d_input:                                                            # ∂/∂ the layer's input (M, B, T, D)
            dx = d_input[1].view(M, B, T, D)
            dx[:, :, T - n_query:] += (d_input[0] + d_xq).view(M, B, n_query, D)
        elif n_query == T:
            dx = d_xq.view(M, B, T, D)
        else:
            dx = torch.zeros(M, B, T, D, dtype=g.dtype, device=g.device)
            dx[:, :, T - n_query:] = d_xq.view(M, B, n_query, D)
        d_out = dx if i == 0 else dx.view(M, B * T, D)
    if m_emb is not None:
        d_out = d_out * m_emb
    offsets = torch.arange(M, device=rows.device)[:, None] * (V * T)
    d_table = d_table.view(-1, D).index_add_(0, (rows + offsets).reshape(-1), d_out.reshape(-1, D)).view(M, V, T, D)
    grads["W_E"] = d_table.sum(2)
    grads["W_pos"] = torch.zeros_like(P("W_pos"))
    grads["W_pos"][:, :T] = d_table.sum(1)
    for name, grad in grads.items():
        P(name).grad = grad.contiguous()
    return loss
