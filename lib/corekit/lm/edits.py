"""Interventions on the residual stream: the ACE core edits, and their readouts layer by layer.

An edit at the last prompt position is centred on the last token's training mean μ (the mean the
core was extracted with). An edit at every position from the subject on centres each position on
*its own* training mean: positions fall into classes (:func:`position_classes`: the offset from the
subject, and one class for the last prompt token and every generated token), and
:func:`position_means` averages the training residuals of each class. Reflecting an earlier position
about the last token's mean would also push it along q by 2 qᵀ(μ_last − μ_position).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import torch
from torch import Tensor

from corekit import ace
from corekit.lm.batch import Batch
from corekit.lm.model import LM
from corekit.lm.stream import Prefix, Readout, forward, last_token, readouts, residual_hooks, residuals

#: Where :func:`ablations` edits: the last prompt position, or every position from the subject on.
SCOPES = ("last", "from_subject")


def _operation(kind: str) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
    """Return the ACE operation named ``kind`` (keep_only, remove or flip)."""
    ops = {"keep_only": ace.keep_only, "remove": ace.remove, "flip": ace.flip}
    if kind not in ops:
        raise ValueError(f"kind must be one of {sorted(ops)}, got {kind!r}")
    return ops[kind]


def core_edit(kind: str, q: Tensor, mean: Tensor) -> Callable[[Tensor], Tensor]:
    """Return the ACE intervention h ↦ keep_only / remove / flip (about ``mean``) with the basis q (D, r)."""
    op = _operation(kind)

    def fn(h: Tensor) -> Tensor:
        return op(h[None], q[None].to(h.device), mean[None].to(h.device))[0].to(h.dtype)
    return fn


def position_classes(batch: Batch, n_offsets: int) -> Tensor:
    """Return each position's class (B, T): −1 before the subject, min(offset from the subject, n_offsets − 1) up to
    the last prompt token, and ``n_offsets`` at the last prompt token."""
    if not isinstance(n_offsets, int) or n_offsets < 1:
        raise ValueError(f"n_offsets must be a positive integer, got {n_offsets!r}")
    if bool((batch.subject_pos < 0).any()):
        raise ValueError("position classes need a Batch encoded with subject_chars")
    cols = torch.arange(batch.input_ids.shape[1], device=batch.input_ids.device)
    offset = cols[None, :] - batch.subject_pos[:, None]
    classes = torch.where(offset >= 0, offset.clamp_max(n_offsets - 1), torch.full_like(offset, -1))
    classes[:, -1] = n_offsets
    return classes


def n_offsets(batch: Batch) -> int:
    """Return how many offsets from the subject the positions before the last prompt token take in ``batch`` (≥ 1)."""
    return max(1, int((batch.input_ids.shape[1] - 1 - batch.subject_pos).max()))


def position_means(lm: LM, batch: Batch, layers: Sequence[int], offsets: int, batch_size: int = 64) -> Tensor:
    """Return the mean residual (len(layers), offsets + 1, D) of each position class (:func:`position_classes`) of
    ``batch`` at each of ``layers``, in float64 (one forward pass)."""
    layers = [lm.check_layer(layer) for layer in layers]
    classes = position_classes(batch, offsets)
    sums = torch.zeros(len(layers), offsets + 1, lm.d_model, dtype=torch.float64, device=lm.device)
    counts = torch.bincount(classes[classes >= 0].cpu(), minlength=offsets + 1).to(sums)
    if bool((counts == 0).any()):
        raise ValueError(f"position classes {torch.nonzero(counts == 0).flatten().tolist()} have no member in batch")
    with torch.no_grad():
        for idx in batch.groups(batch_size):
            sub, drop = batch.rows(idx)
            cls = classes[idx, drop:]
            keep = cls >= 0

            def accumulate(j):
                def fn(h):
                    sums[j].index_add_(0, cls[keep].to(sums.device), h[keep.to(h.device)].double().to(sums.device))
                    return h
                return fn
            with residual_hooks(lm, write={layer: accumulate(j) for j, layer in enumerate(layers)}):
                forward(lm, sub.input_ids, sub.attention_mask, sub.position_ids)
    return sums / counts[None, :, None]


@dataclass
class PositionEdit:
    """An ACE edit whose centre depends on the position: ``kind``, basis q (D, r), one mean per position class (C, D).

    :meth:`at` binds it to the classes (b, T) of a chunk of positions (−1: left untouched).
    """

    kind: str
    q: Tensor
    means: Tensor

    def __post_init__(self):
        _operation(self.kind)

    @property
    def last_class(self) -> int:
        """Return the class of the last prompt token (and of every generated token)."""
        return self.means.shape[0] - 1

    def at(self, classes: Tensor) -> Callable[[Tensor], Tensor]:
        """Return h (b, T, D) ↦ h with each position of class c ≥ 0 edited about means[c] (classes (b, T))."""
        op = _operation(self.kind)

        def fn(h: Tensor) -> Tensor:
            if h.shape[:2] != classes.shape:
                raise ValueError(f"classes cover {tuple(classes.shape)} positions, the residual stream {tuple(h.shape[:2])}")
            flat = h.reshape(-1, 1, h.shape[-1])
            mu = self.means.to(h.device, torch.float64)[classes.clamp_min(0).reshape(-1).to(h.device)]
            q = self.q.to(h.device, torch.float64)[None].expand(flat.shape[0], *self.q.shape)
            edited = op(flat.double(), q, mu).reshape(h.shape).to(h.dtype)
            return torch.where((classes >= 0)[..., None].to(h.device), edited, h)
        return fn


def rms_coordinate(h: Tensor, q: Tensor) -> Tensor:
    """Return qᵀh / rms(h) (...) for residuals h (..., D) and a direction q (D,): the coordinate the final RMS norm passes on."""
    h = h.double()
    return (h @ q.double()) / h.pow(2).mean(-1).sqrt()


def ablations(lm: LM, data: Prefix | Batch, readout: Readout, q: Tensor, mean: Tensor | Mapping[int, Tensor],
              layers: Sequence[int], kinds: Sequence[str] = ("keep_only", "remove", "flip"), scope: str = "last",
              states: Tensor | None = None) -> dict[str, Tensor]:
    """Return {kind: readouts (len(layers), B)} with the core (q (L+1, D, r)) ablated about ``mean`` at each layer.

    ``scope`` "last" edits the last prompt position only (``data`` a :class:`Prefix`, ``mean[layer]`` the
    last token's training mean (D,); ``states``, the last token's residuals (L+1, B, D), spares recomputing
    the blocks before each layer); "from_subject" edits every position from the subject on (``data`` a
    :class:`Batch` encoded with subject offsets, ``mean[layer]`` the position-class means (C, D) of
    :func:`position_means`, each position edited about its own class's mean).
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
            if scope == "last":
                edit = core_edit(kind, q[layer], mean[layer])
                out[kind].append(last_token(data, readout, layer=layer, edit=edit, start=states[layer]).value)
            else:
                edit = PositionEdit(kind, q[layer], mean[layer])
                out[kind].append(readouts(lm, data, readout, layer=layer, edit=edit,
                                          positions=position_classes(data, edit.last_class), start=start))
    return {k: torch.stack(v) for k, v in out.items()}

