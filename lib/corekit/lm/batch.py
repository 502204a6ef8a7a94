"""Prompts as left-padded batches: the last prompt token is the last column of every row.

Explicit position ids make a batch give the same numbers as the prompts one by one.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

from corekit.lm.model import LM


@dataclass
class Batch:
    """Prompts stored left-padded (the last prompt token is column −1 of every row).

    :meth:`groups` chunks the rows by token length and :meth:`rows` drops the padding columns a chunk
    does not need. ``subject_pos`` (B,) is the column of the token holding each prompt's subject (−1 if
    unknown).
    """

    prompts: list[str]
    input_ids: Tensor
    attention_mask: Tensor
    position_ids: Tensor
    subject_pos: Tensor

    def __len__(self) -> int:
        return len(self.prompts)

    def from_subject(self) -> Tensor:
        """Return the mask (B, T) of the positions from the subject on."""
        cols = torch.arange(self.input_ids.shape[1], device=self.input_ids.device)
        return cols[None, :] >= self.subject_pos[:, None]

    def groups(self, batch_size: int) -> list[Tensor]:
        """Return row indices of chunks of ≤ ``batch_size`` rows, the rows sorted by token length (least padding)."""
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        order = torch.argsort(self.attention_mask.sum(1).cpu(), stable=True)
        return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]

    def rows(self, index: Tensor) -> tuple["Batch", int]:
        """Return the sub-batch of rows ``index`` without the padding columns all its rows share, and
        how many columns were dropped."""
        index = torch.as_tensor(index, device=self.input_ids.device)
        mask = self.attention_mask[index]
        drop = mask.shape[1] - int(mask.sum(1).max())
        sub = Batch([self.prompts[i] for i in index.tolist()], self.input_ids[index, drop:], mask[:, drop:],
                    self.position_ids[index, drop:], self.subject_pos[index] - drop)
        return sub, drop


def encode(lm: LM, prompts: Sequence[str], subject_chars: Sequence[int] | None = None) -> Batch:
    """Return the left-padded batch of ``prompts``; ``subject_chars`` locate each subject (character offsets)."""
    if isinstance(prompts, str) or not prompts:
        raise ValueError("prompts must be a non-empty list of strings")
    tok = lm.tokenizer
    enc = [tok(p, return_offsets_mapping=subject_chars is not None) for p in prompts]
    T = max(len(e["input_ids"]) for e in enc)
    if min(len(e["input_ids"]) for e in enc) < 2:
        raise ValueError("every prompt must hold at least two tokens")
    ids = torch.full((len(prompts), T), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros(len(prompts), T, dtype=torch.long)
    subject = torch.full((len(prompts),), -1, dtype=torch.long)
    for i, e in enumerate(enc):
        n = len(e["input_ids"])
        ids[i, T - n:] = torch.tensor(e["input_ids"])
        mask[i, T - n:] = 1
        if subject_chars is not None:
            c = subject_chars[i]
            hits = [j for j, (a, b) in enumerate(e["offset_mapping"]) if a <= c < b]
            if not hits:
                raise ValueError(f"no token of {prompts[i]!r} covers character {c}")
            subject[i] = T - n + hits[0]
    position = (mask.cumsum(1) - 1).clamp_min(0)
    dev = lm.device
    return Batch(list(prompts), ids.to(dev), mask.to(dev), position.to(dev), subject.to(dev))
