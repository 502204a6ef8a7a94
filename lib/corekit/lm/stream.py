"""The residual stream of a causal LM: read and write hooks, forward passes, readouts of the last token, the rest of
the network from a layer.

Reading and writing always happen at the same place, before the final norm (a core extracted
after the norm and applied before it is a known pitfall). :func:`prefix` runs every prompt token but
the last once and keeps the key / value cache; :func:`last_token` then re-runs only the last token,
which is all an intervention at the last position needs (earlier positions cannot see it).

A *readout* maps the final normed hidden states (..., D) to one number each (...): the task passes
it in (e.g. :func:`corekit.tasks.agreement.margin_head`).

:func:`from_layer` holds a batch's context fixed and maps the residual at one layer and one position
to the final normed state there, differentiably, running only the blocks after that layer;
:func:`logit_readout` maps final normed states to the logits of K tokens. Composed, they are the
function ACE's observability differentiates (the paper's K-logit readout), for any family
:mod:`corekit.lm.layout` knows::

    f = from_layer(lm, batch, 12)                         # (B, D) ↦ (B, D)
    readout = logit_readout(lm, [" is", " are"])          # (..., D) ↦ (..., K)
    obs = ace.observability(lambda x: readout(f(x[0]))[None], h[None])   # [None]: ACE's leading model axis
"""
from __future__ import annotations

import contextlib
import copy
import inspect
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Mapping, Sequence

import torch
from torch import Tensor

from corekit.lm.batch import Batch
from corekit.lm.model import LM, block_hidden, final_logit_softcap, replace_hidden, widen

Readout = Callable[[Tensor], Tensor]


@contextlib.contextmanager
def residual_hooks(lm: LM, read: Iterable[int] = (),
                   write: Mapping[int, Callable[[Tensor], Tensor]] | None = None) -> Iterator[dict[int, Tensor]]:
    """Read and write the residual stream (B, T, D) at layers during the forward passes inside the block.

    ``write[l](h)`` returns the value downstream layers see instead of h; ``read`` layers are recorded
    in the yielded dict after any write at the same layer (the latest forward pass wins).
    """
    write = dict(write or {})
    read = [lm.check_layer(layer) for layer in read]
    for layer in write:
        lm.check_layer(layer)
    captured: dict[int, Tensor] = {}
    blocks = lm.blocks
    handles = []

    def transform(layer: int, h: Tensor) -> Tensor:
        if layer in write:
            h = write[layer](h)
        if layer in read:
            captured[layer] = h
        return h

    for layer in sorted(set(read) | set(write)):
        if layer == 0:
            def pre(module, args, kwargs, layer=layer):
                if args:
                    return (transform(layer, args[0]),) + tuple(args[1:]), kwargs
                kwargs = dict(kwargs, hidden_states=transform(layer, kwargs["hidden_states"]))
                return args, kwargs
            handles.append(blocks[0].register_forward_pre_hook(pre, with_kwargs=True))
        else:
            def post(module, args, output, layer=layer):
                h = block_hidden(output)
                return replace_hidden(output, transform(layer, h))
            handles.append(blocks[layer - 1].register_forward_hook(post))
    try:
        yield captured
    finally:
        for handle in handles:
            handle.remove()


def _cache_kwarg(lm: LM) -> str:
    """Return the name of the base model's key / value cache argument."""
    params = inspect.signature(lm.model.base_model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def forward(lm: LM, ids: Tensor, mask: Tensor, position: Tensor, cache=None, use_cache: bool = False):
    """Return (final normed hidden states (B, T, D), cache) of the base model.

    Padding positions are zeroed after every block: a left pad attends to nothing, which some
    attention kernels turn into NaN (float64 eager attention), and 0 · NaN would reach the real tokens.
    """
    kwargs = {"input_ids": ids, "attention_mask": mask, "position_ids": position, "use_cache": use_cache}
    if cache is not None:
        kwargs[_cache_kwarg(lm)] = cache
    handles = []
    if ids.shape[1] == mask.shape[1] and not bool(mask.all()):
        keep = mask.bool()[..., None]

        def clean(module, args, output):
            h = block_hidden(output)
            return replace_hidden(output, torch.where(keep.to(h.device), h, torch.zeros((), dtype=h.dtype, device=h.device)))
        handles = [block.register_forward_hook(clean) for block in lm.blocks]
    try:
        out = lm.model.base_model(**kwargs)
    finally:
        for handle in handles:
            handle.remove()
    keys = set(out.keys())
    new_cache = next((out[k] for k in ("cache", "past_key_values") if k in keys), None)
    return out.last_hidden_state, new_cache


class _Stop(Exception):
    """Raised by a read hook once the deepest requested layer has been seen."""


@contextlib.contextmanager
def _start_at(lm: LM, layer: int, h: Tensor | None) -> Iterator[None]:
    """Skip the blocks before ``layer``: block ``layer``−1 returns the given residual h instead of computing it.

    The blocks before it pass their input through untouched (their key / value caches do not grow,
    which no later block reads), so a forward pass costs only the blocks after ``layer``. Hooks on
    block ``layer``−1 (a write at ``layer``) still see h.
    """
    if h is None or layer == 0:
        yield
        return
    blocks = lm.blocks
    tuple_out = _returns_tuple(lm)

    def passthrough(value):
        def forward(hidden_states=None, *args, **kwargs):
            hidden = hidden_states if hidden_states is not None else kwargs["hidden_states"]
            out = hidden if value is None else value.to(hidden.device)
            return (out,) if tuple_out else out
        return forward

    for i in range(layer):
        blocks[i].forward = passthrough(h if i == layer - 1 else None)
    try:
        yield
    finally:
        for i in range(layer):
            del blocks[i].forward


def _returns_tuple(lm: LM) -> bool:
    """Return whether this model's decoder blocks return tuples (transformers 4) rather than tensors (5)."""
    if not hasattr(lm, "_tuple_blocks"):
        seen = []
        handle = lm.blocks[0].register_forward_hook(lambda m, a, out: seen.append(isinstance(out, tuple)))
        try:
            with torch.no_grad():
                ids = torch.tensor([[lm.tokenizer.pad_token_id] * 2], device=lm.device)
                forward(lm, ids, torch.ones_like(ids), torch.arange(2, device=lm.device)[None])
        finally:
            handle.remove()
        lm._tuple_blocks = bool(seen and seen[0])
    return lm._tuple_blocks


def masked(edit: Callable[[Tensor], Tensor], mask: Tensor | None) -> Callable[[Tensor], Tensor]:
    """Return h ↦ edit(h) at the positions where ``mask`` (B, T) is true, h elsewhere (mask None: everywhere).

    A position-dependent edit (one with an ``at`` method, e.g. :class:`corekit.lm.edits.PositionEdit`)
    takes a class map (B, T) as ``mask`` instead and is bound to it.
    """
    if hasattr(edit, "at"):
        if mask is None:
            raise ValueError("a position-dependent edit needs the class map of the positions it edits")
        return edit.at(mask)
    if mask is None:
        return edit

    def fn(h: Tensor) -> Tensor:
        if h.shape[1] != mask.shape[1]:
            raise ValueError(f"mask covers {mask.shape[1]} positions, the residual stream has {h.shape[1]}")
        return torch.where(mask[..., None].to(h.device), edit(h), h)
    return fn


def readouts(lm: LM, batch: Batch, readout: Readout, layer: int | None = None,
             edit: Callable[[Tensor], Tensor] | None = None, positions: Tensor | None = None,
             start: Tensor | None = None, batch_size: int = 64) -> Tensor:
    """Return the readouts (B,) of the last prompt token, with ``edit`` applied at ``layer``.

    ``positions`` (B, T) limits the edit to some positions (None: every position; a class map for a
    position-dependent edit, see :func:`masked`). ``start``, the
    residual stream (B, T, D) at ``layer`` from :func:`residuals`, skips the blocks before ``layer``.
    """
    if layer is not None:
        lm.check_layer(layer)
    if start is not None and (layer is None or start.shape[:2] != batch.input_ids.shape):
        raise ValueError("start must be the residual stream (B, T, D) of this batch at the given layer")
    if start is not None:
        _returns_tuple(lm)  # probe (one tiny forward pass) before any hook is installed
    out = torch.empty(len(batch), dtype=torch.float64)
    with torch.no_grad():
        for idx in batch.groups(batch_size):
            sub, drop = batch.rows(idx)
            write = {}
            if edit is not None:
                write[layer] = masked(edit, None if positions is None else positions[idx, drop:])
            h0 = None if start is None else start[idx, drop:].to(lm.device, lm.model.dtype)
            with residual_hooks(lm, write=write), _start_at(lm, layer or 0, h0):
                hidden, _ = forward(lm, sub.input_ids, sub.attention_mask, sub.position_ids)
            out[idx.cpu()] = readout(hidden[:, -1]).double().cpu()
    return out.to(lm.device, widen(torch.empty(0, dtype=lm.model.dtype)).dtype)


def residuals(lm: LM, batch: Batch, layers: Sequence[int] | None = None, batch_size: int = 64) -> Tensor:
    """Return the residual stream (len(layers), B, T, D) at ``layers`` (default: all) for every position.

    The forward pass stops after the deepest requested layer.
    """
    layers = list(range(lm.n_layers + 1)) if layers is None else [lm.check_layer(l) for l in layers]
    deepest = max(layers)
    out = None
    with torch.no_grad():
        for idx in batch.groups(batch_size):
            sub, drop = batch.rows(idx)
            got: dict[int, Tensor] = {}

            def record(l):
                def fn(h):
                    got[l] = h
                    if l == deepest:
                        raise _Stop
                    return h
                return fn
            try:
                with residual_hooks(lm, write={l: record(l) for l in layers}):
                    forward(lm, sub.input_ids, sub.attention_mask, sub.position_ids)
            except _Stop:
                pass
            chunk = torch.stack([got[l].to(lm.device) for l in layers])          # (len(layers), b, T − drop, D)
            chunk = torch.where(sub.attention_mask.bool()[None, ..., None].to(chunk.device), chunk, 0)
            if out is None:
                out = chunk.new_zeros(len(layers), len(batch), batch.input_ids.shape[1], chunk.shape[-1])
            out[:, idx, drop:] = chunk
    return out


@dataclass
class Prefix:
    """A batch whose tokens but the last have been run once: the key / value cache of each chunk of rows."""

    lm: LM
    batch: Batch
    chunks: list[tuple[Tensor, object]] = field(default_factory=list)


def prefix(lm: LM, batch: Batch, batch_size: int = 64) -> Prefix:
    """Return the key / value cache of every prompt token but the last (no intervention)."""
    out = Prefix(lm, batch)
    with torch.no_grad():
        for idx in batch.groups(batch_size):
            sub, _ = batch.rows(idx)
            _, cache = forward(lm, sub.input_ids[:, :-1], sub.attention_mask[:, :-1], sub.position_ids[:, :-1],
                            use_cache=True)
            out.chunks.append((idx, cache))
    return out


@dataclass
class LastToken:
    """What :func:`last_token` returns: readouts (B,), residuals h (len(read), B, D), gradients g or None."""

    value: Tensor
    h: Tensor | None
    g: Tensor | None


def last_token(pre: Prefix, readout: Readout, layer: int | None = None, edit: Callable[[Tensor], Tensor] | None = None,
               read: Sequence[int] = (), grad: bool = False, start: Tensor | None = None) -> LastToken:
    """Return the readouts (and residuals at ``read`` layers) of the last prompt token, ``edit`` applied at ``layer``.

    With ``grad``, also g = ∂readout/∂h_l at the last position for every ``read`` layer l (one backward
    pass per chunk for every layer and prompt at once: prompts are independent, so the gradient of the
    summed readouts is each prompt's own gradient, and an additive zero perturbation at each layer
    makes its gradient the total derivative through every later layer). ``start``, the last token's
    residual (B, D) at ``layer`` (e.g. ``last_token(pre, readout, read=...).h[layer]``), skips the blocks before it.
    """
    lm, batch, head = pre.lm, pre.batch, readout
    read = [lm.check_layer(l) for l in read]
    if layer is not None:
        lm.check_layer(layer)
    if (edit is not None or start is not None) and layer is None:
        raise ValueError("an edit or a start residual needs its layer")
    if start is not None and any(l < layer for l in read):
        raise ValueError(f"with a start residual at layer {layer}, the layers before it are not computed")
    if start is not None:
        _returns_tuple(lm)  # probe (one tiny forward pass) before any hook is installed
    out_m, out_h, out_g, order = [], [], [], []
    for idx, cache in pre.chunks:
        cache = copy.deepcopy(cache)
        sub, _ = batch.rows(idx)
        ids, mask, pos = sub.input_ids[:, -1:], sub.attention_mask, sub.position_ids[:, -1:]
        order.append(idx)
        deltas: dict[int, Tensor] = {}
        seen: dict[int, Tensor] = {}

        def make(l):
            def fn(h):
                if edit is not None and l == layer:
                    h = edit(h)
                seen[l] = h.detach()
                if not grad:
                    return h
                deltas[l] = torch.zeros_like(h, requires_grad=True)  # on h's device (models may be sharded)
                return h + deltas[l]
            return fn
        write = {l: make(l) for l in read}
        if edit is not None and layer not in write:
            write[layer] = edit
        h0 = None if start is None else start[idx, None, :].to(lm.device, lm.model.dtype)
        with torch.set_grad_enabled(grad), residual_hooks(lm, write=write), _start_at(lm, layer or 0, h0):
            hidden, _ = forward(lm, ids, mask, pos, cache=cache, use_cache=True)
            m = head(hidden[:, -1])
        if grad and read:
            gs = torch.autograd.grad(m.sum(), [deltas[l] for l in read], allow_unused=True)
            out_g.append(widen(torch.stack([(torch.zeros_like(deltas[l]) if g is None else g)[:, 0].to(lm.device)
                                            for l, g in zip(read, gs)])))
        out_m.append(m.detach())
        if read:
            out_h.append(widen(torch.stack([seen[l][:, 0].to(lm.device) for l in read])))
    inverse = torch.argsort(torch.cat(order).cpu())                   # back to the batch's row order
    inverse = inverse.to(out_m[0].device)
    cat = lambda xs: torch.cat(xs, dim=1)[:, inverse.to(xs[0].device)] if xs else None  # noqa: E731
    return LastToken(torch.cat(out_m)[inverse], cat(out_h), cat(out_g))


def from_layer(lm: LM, batch: Batch, layer: int, position: int = -1) -> Callable[[Tensor], Tensor]:
    """Return h (B, D) ↦ the final normed states (B, D) at ``position`` when h is the residual at ``layer`` there.

    The positions before it keep the batch's own states (their key / value cache, computed once, here;
    later positions cannot influence this one); only the blocks after ``layer`` run at ``position``,
    so the function is differentiable by ``torch.autograd`` and ``torch.func`` alike. ``position``
    indexes the left-padded batch (−1: every prompt's last token); the function takes the whole batch
    at once (row b is prompt b).
    """
    lm.check_layer(layer)
    T = batch.input_ids.shape[1]
    if not isinstance(position, int) or isinstance(position, bool) or not -T <= position < T:
        raise ValueError(f"position must be an integer in [{-T}, {T - 1}] (the batch has {T} positions), got {position!r}")
    t = position % T
    if bool((batch.attention_mask[:, t] == 0).any()):
        raise ValueError(f"position {position} is padding in some prompts of the batch (left-padded to {T} tokens)")
    cache = None
    if t > 0:
        with torch.no_grad():
            _, cache = forward(lm, batch.input_ids[:, :t], batch.attention_mask[:, :t], batch.position_ids[:, :t],
                               use_cache=True)
    _returns_tuple(lm)  # probe (one tiny forward pass) before any hook is installed
    ids, mask, pos = batch.input_ids[:, t:t + 1], batch.attention_mask[:, :t + 1], batch.position_ids[:, t:t + 1]
    B, D = len(batch), lm.d_model

    def fn(h: Tensor) -> Tensor:
        if h.shape != (B, D):
            raise ValueError(f"h must be ({B}, {D}): one residual per prompt of the batch, got {tuple(h.shape)}")
        start = h[:, None].to(lm.model.dtype)                                                  # (B, 1, D)
        hooks = residual_hooks(lm, write={0: lambda _: start}) if layer == 0 else contextlib.nullcontext()
        with hooks, _start_at(lm, layer, start):
            hidden, _ = forward(lm, ids, mask, pos, cache=copy.deepcopy(cache), use_cache=cache is not None)
        return hidden[:, -1]
    return fn


def logit_readout(lm: LM, tokens: Sequence[int | str]) -> Callable[[Tensor], Tensor]:
    """Return x (..., D) ↦ the logits (..., K) of ``tokens`` (K ids, or K strings that are one token each).

    The rows of the unembedding (its bias, if any), through the final-logit soft-cap of models that have one.
    """
    if len(tokens) == 0:
        raise ValueError("tokens must name at least one token")
    ids = [_token_id(lm, token) for token in tokens]
    head = lm.model.get_output_embeddings()
    W = head.weight[ids]                                                                     # (K, D)
    b = None if getattr(head, "bias", None) is None else head.bias[ids]

    def readout(x: Tensor) -> Tensor:
        logits = x.to(W.dtype) @ W.T if b is None else x.to(W.dtype) @ W.T + b
        return final_logit_softcap(lm, logits)
    return readout


def _token_id(lm: LM, token: int | str) -> int:
    """Return the vocabulary id of ``token`` (an id, or a string the tokenizer encodes as exactly one token)."""
    V = lm.model.get_output_embeddings().weight.shape[0]
    if isinstance(token, int) and not isinstance(token, bool):
        if not 0 <= token < V:
            raise ValueError(f"token id {token} is outside {lm.name}'s vocabulary [0, {V})")
        return token
    if not isinstance(token, str):
        raise ValueError(f"tokens must be ids or strings, got {token!r}")
    ids = lm.tokenizer(token, add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        raise ValueError(f"{token!r} is {len(ids)} tokens for {lm.name}'s tokenizer, not one; pass its id instead")
    return int(ids[0])
