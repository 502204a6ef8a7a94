"""Causal language models, one job per module.

=============== ================================================================================
module          job
=============== ================================================================================
``model``       :class:`LM` (a loaded model, its decoder blocks, the layer convention)
``loading``     :func:`load` from an offline GGUF package, a Hugging Face id, a folder or a .gguf
``batch``       :func:`encode`: prompts as a left-padded :class:`Batch`
``layout``      where each family keeps its final norm and MLP output projection (:func:`layout_of`)
``stream``      residual-stream hooks, forward passes, readouts of the last token (:func:`last_token`), the rest of
                the network from a layer (:func:`from_layer`), K-logit readouts (:func:`logit_readout`)
``edits``       the ACE core edits (about one mean, or each position's own), readouts layer by layer (:func:`ablations`)
``generation``  greedy or sampled generation with an edit (:func:`generate`)
``gemma3``      Gemma-3's decoder block at the last position and its post-MLP norm
=============== ================================================================================

Imports run one way: model ← loading, layout, batch ← stream ← edits, generation; ``gemma3`` stands
alone. Outside the package, ``loading`` records the weights it checks through :mod:`corekit.runinfo` and ``edits`` applies the ACE
cores of :mod:`corekit.ace`.
A readout (final normed hidden states (..., D) ↦ one number each) belongs to the task and is passed
in (the agreement margin: :func:`corekit.tasks.agreement.margin_head`).
"""
from corekit.lm.batch import Batch, encode
from corekit.lm.edits import (
           SCOPES,
           PositionEdit,
           ablations,
           core_edit,
           n_offsets,
           position_classes,
           position_means,
           rms_coordinate,
)
from corekit.lm.generation import generate, sample_tokens
from corekit.lm.layout import LAYOUTS, Layout, final_norm, layout_of, mlp_out
from corekit.lm.loading import OFFLINE, ModelNotAvailable, OfflineModel, cache_root, clear_loaded, load
from corekit.lm.model import LM
from corekit.lm.stream import (
           LastToken,
           Prefix,
           Readout,
           from_layer,
           last_token,
           logit_readout,
           masked,
           prefix,
           readouts,
           residual_hooks,
           residuals,
)

__all__ = ["Batch", "encode", "from_layer", "logit_readout", "LAYOUTS", "Layout", "final_norm", "layout_of", "mlp_out",
           "SCOPES", "PositionEdit", "ablations", "core_edit", "n_offsets", "position_classes",
           "position_means", "rms_coordinate", "generate", "sample_tokens", "OFFLINE",
           "ModelNotAvailable", "OfflineModel", "cache_root", "clear_loaded", "load", "LM", "LastToken", "Prefix",
           "Readout", "last_token", "masked", "prefix", "readouts", "residual_hooks", "residuals"]
