"""Causal language models, one job per module.

=============== ================================================================================
module          job
=============== ================================================================================
``model``       :class:`LM` (a loaded model, its decoder blocks, the layer convention)
``loading``     :func:`load` from an offline GGUF package, a Hugging Face id, a folder or a .gguf
``batch``       :func:`encode`: prompts as a left-padded :class:`Batch`
``stream``      residual-stream hooks, forward passes, readouts of the last token (:func:`last_token`)
``edits``       the ACE core edits (about one mean, or each position's own), readouts layer by layer (:func:`ablations`)
``generation``  greedy or sampled generation with an edit (:func:`generate`)
``gemma3``      Gemma-3's decoder block at the last position and its post-MLP norm
=============== ================================================================================

Imports run one way: model ← loading, batch ← stream ← edits, generation; ``gemma3`` stands alone. Outside the
package, ``loading`` records the weights it checks through :mod:`corekit.runinfo` and ``edits`` applies the ACE
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
from corekit.lm.loading import OFFLINE, ModelNotAvailable, OfflineModel, cache_root, clear_loaded, load
from corekit.lm.model import LM
from corekit.lm.stream import (
           LastToken,
           Prefix,
           Readout,
           last_token,
           masked,
           prefix,
           readouts,
           residual_hooks,
           residuals,
)

__all__ = ["Batch", "encode", "SCOPES", "PositionEdit", "ablations", "core_edit", "n_offsets", "position_classes",
           "position_means", "rms_coordinate", "generate", "sample_tokens", "OFFLINE",
           "ModelNotAvailable", "OfflineModel", "cache_root", "clear_loaded", "load", "LM", "LastToken", "Prefix",
           "Readout", "last_token", "masked", "prefix", "readouts", "residual_hooks", "residuals"]
