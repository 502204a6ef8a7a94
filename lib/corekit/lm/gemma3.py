"""Gemma-3 specifics: its decoder block evaluated at the last position only, and its post-MLP norm.

A Gemma-3 block normalises what its MLP adds to the residual stream (``post_feedforward_layernorm``)
and soft-caps its attention scores; :func:`last_position_output` re-implements the block for the one
position a last-token readout needs (eager attention semantics, checked against the block itself in
``tests/test_entk_lm.py``).
"""
from __future__ import annotations

from typing import Mapping

import torch
from torch import Tensor, nn

#: The class name transformers gives a Gemma-3 decoder block.
BLOCK_CLASS = "Gemma3DecoderLayer"


def is_gemma3_block(block: nn.Module) -> bool:
    """Return whether ``block`` is a Gemma-3 decoder block."""
    return type(block).__name__ == BLOCK_CLASS


def mlp_branch_norm(block: nn.Module) -> nn.Module | None:
    """Return the norm a block applies to its MLP's output before adding it to the residual stream (Gemma), or None."""
    return getattr(block, "post_feedforward_layernorm", None)


def rotate_half(x: Tensor) -> Tensor:
    """Return the rotary "rotate half" of x (..., 2h): (−x₂, x₁)."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def last_position_output(block, h: Tensor, kwargs: Mapping) -> Tensor:
    """Return a Gemma-3 decoder block's output (n, d) at the last position for its input h (n, T, d).

    Keys and values come from every position, the query and everything after attention from the last
    one only: what the final normed last-token state needs, at a fraction of the block's cost.
    """
    attn = block.self_attn
    x = block.input_layernorm(h)
    n, T = x.shape[:2]
    hd = attn.head_dim
    q = attn.q_norm(attn.q_proj(x[:, -1:]).view(n, 1, -1, hd).transpose(1, 2))             # (n, H, 1, hd)
    k = attn.k_norm(attn.k_proj(x).view(n, T, -1, hd).transpose(1, 2))                    # (n, H_kv, T, hd)
    v = attn.v_proj(x).view(n, T, -1, hd).transpose(1, 2)
    cos, sin = kwargs["position_embeddings"]
    cos, sin = cos[:, None], sin[:, None]
    q = q * cos[..., -1:, :] + rotate_half(q) * sin[..., -1:, :]
    k = k * cos + rotate_half(k) * sin
    k = k.repeat_interleave(attn.num_key_value_groups, dim=1)
    v = v.repeat_interleave(attn.num_key_value_groups, dim=1)
    scores = (q @ k.transpose(2, 3)) * attn.scaling                                        # (n, H, 1, T)
    if getattr(attn, "attn_logit_softcapping", None) is not None:
        scores = torch.tanh(scores / attn.attn_logit_softcapping) * attn.attn_logit_softcapping
    mask = kwargs.get("attention_mask")
    if mask is not None:
        scores = scores + mask[..., -1:, :T]
    z = (scores.softmax(-1, dtype=torch.float32).to(q.dtype) @ v).transpose(1, 2).reshape(n, 1, -1)
    h = h[:, -1:] + block.post_attention_layernorm(attn.o_proj(z))
    h = h + block.post_feedforward_layernorm(block.mlp(block.pre_feedforward_layernorm(h)))
    return h[:, 0]
