"""Where each causal-LM family keeps the modules corekit differentiates: its final norm and its MLP's output projection.

The family is the text configuration's ``model_type``. Every family listed adds its MLP's output
projection to the residual stream directly (GPT-NeoX in parallel with attention), or through one norm
(Gemma 2 and 3's ``post_feedforward_layernorm``, see :func:`corekit.lm.gemma3.mlp_branch_norm`).
"""
from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from corekit.lm.model import LM


@dataclass(frozen=True)
class Layout:
    """A family's module names: the final norm (under the base model) and the MLP's output projection (under a block)."""

    final_norm: str
    mlp_out: str


_LLAMA = Layout(final_norm="norm", mlp_out="mlp.down_proj")

#: The text configuration's ``model_type`` ↦ where that family keeps its final norm and MLP output projection.
LAYOUTS: dict[str, Layout] = {
    "gpt2": Layout(final_norm="ln_f", mlp_out="mlp.c_proj"),
    "gpt_neox": Layout(final_norm="final_layer_norm", mlp_out="mlp.dense_4h_to_h"),
    "llama": _LLAMA,
    "mistral": _LLAMA,
    "qwen2": _LLAMA,
    "gemma": _LLAMA,
    "gemma2": _LLAMA,
    "gemma3": _LLAMA,
    "gemma3_text": _LLAMA,
}


def layout_of(lm: LM) -> Layout:
    """Return the module layout of ``lm``'s family, or a ValueError naming its architecture and the known ones."""
    family = getattr(lm.config, "model_type", None)
    if family not in LAYOUTS:
        raise ValueError(f"{lm.name}: corekit does not know where a {family!r} model keeps its final norm and MLP "
                         f"output projection; known architectures (config.model_type): {', '.join(sorted(LAYOUTS))}")
    return LAYOUTS[family]


def final_norm(lm: LM) -> nn.Module:
    """Return the model's final norm (between the last block and the unembedding)."""
    return lm.model.base_model.get_submodule(layout_of(lm).final_norm)


def mlp_out(lm: LM, layer: int) -> nn.Module:
    """Return the MLP output projection of decoder block ``layer`` (1-indexed: block ``layer`` writes residual ``layer``)."""
    if not isinstance(layer, int) or isinstance(layer, bool) or not 1 <= layer <= lm.n_layers:
        raise ValueError(f"layer must be an integer in [1, {lm.n_layers}] (a decoder block of {lm.name}), got {layer!r}")
    return lm.blocks[layer - 1].get_submodule(layout_of(lm).mlp_out)
