"""Greedy generation with an intervention on the residual stream."""
from __future__ import annotations

from typing import Callable, Sequence

import torch
from torch import Tensor

from corekit.lm.batch import encode
from corekit.lm.model import LM, final_logit_softcap
from corekit.lm.stream import forward, masked, residual_hooks


def generate(lm: LM, prompts: Sequence[str], max_new_tokens: int = 12, layer: int | None = None,
             edit: Callable[[Tensor], Tensor] | None = None, start_chars: Sequence[int] | None = None,
             batch_size: int = 64) -> list[str]:
    """Return greedy continuations of ``prompts`` with ``edit`` applied at ``layer``.

    The edit acts on the prompt positions from ``start_chars`` on (every prompt position when None)
    and on every generated position. A row that emits the end-of-sequence token stops there.
    """
    batch = encode(lm, prompts, subject_chars=start_chars)
    if edit is not None:
        lm.check_layer(layer)
    where = batch.from_subject() if start_chars is not None else torch.ones_like(batch.attention_mask, dtype=torch.bool)
    eos = lm.tokenizer.eos_token_id
    eos = set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}
    head = lm.model.get_output_embeddings()
    texts: list[str] = [""] * len(prompts)
    with torch.no_grad():
        for idx in batch.groups(batch_size):
            sub, drop = batch.rows(idx)
            ids, attn, pos, step_mask = sub.input_ids, sub.attention_mask, sub.position_ids, where[idx, drop:]
            out = torch.empty(len(idx), 0, dtype=torch.long, device=lm.device)
            done = torch.zeros(len(idx), dtype=torch.bool, device=lm.device)
            cache = None
            for _ in range(max_new_tokens):
                write = {} if edit is None else {layer: masked(edit, step_mask)}
                with residual_hooks(lm, write=write):
                    hidden, cache = forward(lm, ids, attn, pos, cache=cache, use_cache=True)
                logits = final_logit_softcap(lm, head(hidden[:, -1]))
                nxt = torch.where(done, torch.full_like(done, lm.tokenizer.pad_token_id, dtype=torch.long),
                                  logits.argmax(-1).to(lm.device))
                out = torch.cat([out, nxt[:, None]], dim=1)
                done |= torch.tensor([int(t) in eos for t in nxt], device=lm.device)
                if bool(done.all()):
                    break
                attn = torch.cat([attn, torch.ones_like(attn[:, :1])], dim=1)
                pos, ids = pos[:, -1:] + 1, nxt[:, None]
                step_mask = torch.ones(len(idx), 1, dtype=torch.bool, device=lm.device)
            for j, row in zip(idx.tolist(), out.tolist()):
                cut = next((i for i, t in enumerate(row) if t in eos), len(row))
                texts[j] = lm.tokenizer.decode(row[:cut], skip_special_tokens=True)
    return texts
