"""Generation with an intervention on the residual stream: greedy, or sampled with a seed per prompt."""
from __future__ import annotations

from typing import Callable, Sequence

import torch
from torch import Tensor

from corekit.lm.batch import encode
from corekit.lm.edits import PositionEdit, position_classes
from corekit.lm.model import LM, final_logit_softcap
from corekit.lm.stream import forward, masked, residual_hooks


def sample_tokens(logits: Tensor, generators: Sequence[torch.Generator], temperature: float = 1.0,
                  top_k: int = 50) -> Tensor:
    """Return one token id per row (B,) drawn from softmax(logits / temperature) (B, V) restricted to the top_k logits.

    Row i draws with ``generators[i]`` (CPU generators), so a row's draw depends on its own seed only.
    """
    if not temperature > 0:
        raise ValueError(f"temperature must be positive, got {temperature!r}")
    if not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k must be a positive integer, got {top_k!r}")
    values, ids = logits.double().cpu().topk(min(top_k, logits.shape[-1]), dim=-1)
    probs = torch.softmax(values / temperature, dim=-1)
    pick = torch.cat([torch.multinomial(p, 1, generator=g) for p, g in zip(probs, generators)])
    return ids.gather(1, pick[:, None])[:, 0].to(logits.device)


def generate(lm: LM, prompts: Sequence[str], max_new_tokens: int = 12, layer: int | None = None,
             edit: Callable[[Tensor], Tensor] | PositionEdit | None = None, start_chars: Sequence[int] | None = None,
             batch_size: int = 64, sample: bool = False, temperature: float = 1.0, top_k: int = 50,
             seed: int = 0) -> list[str]:
    """Return continuations of ``prompts`` with ``edit`` applied at ``layer``: greedy, or with ``sample`` drawn at
    ``temperature`` from the ``top_k`` logits, prompt i with its own generator seeded ``seed + i``.

    The edit acts on the prompt positions from ``start_chars`` on (every prompt position when None)
    and on every generated position; a :class:`corekit.lm.edits.PositionEdit` edits each prompt position about its
    class's mean and every generated position about the last prompt token's. A row that emits the
    end-of-sequence token stops there. Seeds per prompt make a sampled continuation independent of
    the batching, and the same prompt draws the same random numbers with and without an edit.
    """
    positional = isinstance(edit, PositionEdit)
    if positional and start_chars is None:
        raise ValueError("a PositionEdit needs start_chars (its classes count from the subject)")
    batch = encode(lm, prompts, subject_chars=start_chars)
    if edit is not None:
        lm.check_layer(layer)
    if positional:
        where = position_classes(batch, edit.last_class)
    elif start_chars is not None:
        where = batch.from_subject()
    else:
        where = torch.ones_like(batch.attention_mask, dtype=torch.bool)
    eos = lm.tokenizer.eos_token_id
    eos = set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}
    head = lm.model.get_output_embeddings()
    texts: list[str] = [""] * len(prompts)
    with torch.no_grad():
        for idx in batch.groups(batch_size):
            sub, drop = batch.rows(idx)
            ids, attn, pos, step_mask = sub.input_ids, sub.attention_mask, sub.position_ids, where[idx, drop:]
            generators = [torch.Generator().manual_seed(seed + int(i)) for i in idx.tolist()] if sample else None
            out = torch.empty(len(idx), 0, dtype=torch.long, device=lm.device)
            done = torch.zeros(len(idx), dtype=torch.bool, device=lm.device)
            cache = None
            for _ in range(max_new_tokens):
                write = {} if edit is None else {layer: masked(edit, step_mask)}
                with residual_hooks(lm, write=write):
                    hidden, cache = forward(lm, ids, attn, pos, cache=cache, use_cache=True)
                logits = final_logit_softcap(lm, head(hidden[:, -1]))
                chosen = sample_tokens(logits, generators, temperature, top_k) if sample else logits.argmax(-1)
                nxt = torch.where(done, torch.full_like(done, lm.tokenizer.pad_token_id, dtype=torch.long),
                                  chosen.to(lm.device))
                out = torch.cat([out, nxt[:, None]], dim=1)
                done |= torch.tensor([int(t) in eos for t in nxt], device=lm.device)
                if bool(done.all()):
                    break
                attn = torch.cat([attn, torch.ones_like(attn[:, :1])], dim=1)
                pos, ids = pos[:, -1:] + 1, nxt[:, None]
                step_mask = (torch.full((len(idx), 1), edit.last_class, dtype=torch.long, device=lm.device)
                             if positional else torch.ones(len(idx), 1, dtype=torch.bool, device=lm.device))
            for j, row in zip(idx.tolist(), out.tolist()):
                cut = next((i for i, t in enumerate(row) if t in eos), len(row))
                texts[j] = lm.tokenizer.decode(row[:cut], skip_special_tokens=True)
    return texts
