"""A loaded causal language model and where its residual stream lives.

``layer`` l ∈ {0, …, L} names the residual stream *between* decoder blocks: l = 0 is the input of
the first block (the embeddings), l ≥ 1 the output of block l (1-indexed), so l = L is the last
block's output, the input of the final norm.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import torch
from torch import Tensor, nn


@dataclass(eq=False)
class LM:
    """A loaded causal LM: ``model, tokenizer = load(name)`` unpacks it; ``weights`` names the exact weights."""

    name: str
    model: nn.Module
    tokenizer: object
    source: str
    weights: str = ""

    def __iter__(self) -> Iterator:
        yield self.model
        yield self.tokenizer

    @property
    def config(self):
        """Return the text model's configuration."""
        return self.model.config.get_text_config()

    @property
    def n_layers(self) -> int:
        """Return the number of decoder blocks L."""
        return int(self.config.num_hidden_layers)

    @property
    def d_model(self) -> int:
        """Return the residual-stream width D."""
        return int(self.config.hidden_size)

    @property
    def device(self) -> torch.device:
        """Return the device of the input embeddings."""
        return self.model.get_input_embeddings().weight.device

    @property
    def blocks(self) -> nn.ModuleList:
        """Return the decoder blocks (the first ModuleList of ``n_layers`` modules in the base model)."""
        for module in self.model.base_model.modules():
            if isinstance(module, nn.ModuleList) and len(module) == self.n_layers:
                return module
        raise RuntimeError(f"{self.name}: found no list of {self.n_layers} decoder blocks")

    def check_layer(self, layer: int) -> int:
        """Return ``layer`` if it names a residual stream of this model, else a ValueError naming the range."""
        if not isinstance(layer, int) or isinstance(layer, bool) or not 0 <= layer <= self.n_layers:
            raise ValueError(f"layer must be an integer in [0, {self.n_layers}] for {self.name} "
                             f"(0 = embeddings, {self.n_layers} = last block's output), got {layer!r}")
        return layer


def block_hidden(output) -> Tensor:
    """Return a decoder block's hidden states (B, T, D) whether it returns a tensor or a tuple."""
    return output[0] if isinstance(output, tuple) else output


def replace_hidden(output, value: Tensor):
    """Return a decoder block's output with its hidden states replaced by ``value`` (same tuple-or-tensor form)."""
    return (value,) + tuple(output[1:]) if isinstance(output, tuple) else value


def widen(x: Tensor) -> Tensor:
    """Return x in float32 unless it already is float32 or float64 (half-precision models)."""
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def final_logit_softcap(lm: LM, logits: Tensor) -> Tensor:
    """Return ``logits`` (..., V) through the model's final-logit soft-capping (Gemma), unchanged if it has none."""
    softcap = getattr(lm.config, "final_logit_softcapping", None)
    return logits if softcap is None else torch.tanh(logits / softcap) * softcap
