"""Interventions on the residual stream: the ACE core edits, and their readouts layer by layer."""
from __future__ import annotations

from typing import Callable, Sequence

import torch
from torch import Tensor

from corekit import ace
from corekit.lm.batch import Batch
from corekit.lm.model import LM
from corekit.lm.stream import Prefix, Readout, last_token, readouts, residuals

#: Where :func:`ablations` edits: the last prompt position, or every position from the subject on.
SCOPES = ("last", "from_subject")


def core_edit(kind: str, q: Tensor, mean: Tensor) -> Callable[[Tensor], Tensor]:
    """Return the ACE intervention h ↦ keep_only / remove / flip (about ``mean``) with the basis q (D, r)."""
    ops = {"keep_only": ace.keep_only, "remove": ace.remove, "flip": ace.flip}
    if kind not in ops:
        raise ValueError(f"kind must be one of {sorted(ops)}, got {kind!r}")
    op = ops[kind]

    def fn(h: Tensor) -> Tensor:
        return op(h[None], q[None].to(h.device), mean[None].to(h.device))[0].to(h.dtype)
    return fn


def rms_coordinate(h: Tensor, q: Tensor) -> Tensor:
    """Return qᵀh / rms(h) (...) for residuals h (..., D) and a direction q (D,): the coordinate the final RMS norm passes on."""
    h = h.double()
    return (h @ q.double()) / h.pow(2).mean(-1).sqrt()


def ablations(lm: LM, data: Prefix | Batch, readout: Readout, q: Tensor, mean: Tensor, layers: Sequence[int],
              kinds: Sequence[str] = ("keep_only", "remove", "flip"), scope: str = "last",
              states: Tensor | None = None) -> dict[str, Tensor]:
    """Return {kind: readouts (len(layers), B)} with the core (q (L+1, D, r), mean (L+1, D)) ablated at each layer.

    ``scope`` "last" edits the last prompt position only (``data`` a :class:`Prefix`; ``states``, the
    last token's residuals (L+1, B, D), spares recomputing the blocks before each layer); "from_subject"
    edits every position from the subject on (``data`` a :class:`Batch` encoded with subject offsets).
    """
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
    if scope == "last" and not isinstance(data, Prefix):
        raise ValueError("scope 'last' needs a Prefix (corekit.lm.prefix(lm, batch))")
    if scope == "from_subject" and (not isinstance(data, Batch) or bool((data.subject_pos < 0).any())):
        raise ValueError("scope 'from_subject' needs a Batch encoded with subject_chars")
    if scope == "last" and states is None:
        states = last_token(data, readout, read=range(lm.n_layers + 1)).h
    out = {k: [] for k in kinds}
    for layer in layers:
        if scope == "from_subject":
            start = residuals(lm, data, [layer])[0]
        for kind in kinds:
            edit = core_edit(kind, q[layer], mean[layer])
            if scope == "last":
                out[kind].append(last_token(data, readout, layer=layer, edit=edit, start=states[layer]).value)
            else:
                out[kind].append(readouts(lm, data, readout, layer=layer, edit=edit, positions=data.from_subject(),
                                         start=start))
    return {k: torch.stack(v) for k, v in out.items()}

