"""ACE's grammatical-number axis of a causal language model, for any chapter: the readings, the rank-1 core of every
layer and its ablations.

For one model and a train / test split of agreement prompts (:mod:`corekit.tasks.agreement`): :func:`measure` reads
the last token (margins, residuals and margin gradients at every layer), :func:`find_axis` extracts a rank-1 ACE core
per layer and orients it (plural positive), and :func:`sweep` runs the keep-only / remove / flip ablations over layers
and picks the layer on the training prompts (from the subject on, each position is edited about its own position
class's training mean, :mod:`corekit.lm.edits`).

``find_axis(..., last_layer="post_norm")`` reproduces one step of the authors' ``SVA_uni.py``: at the last layer L
their axis and mean come from ``hidden_states[L]``, the output of the final norm, while their edit acts on the last
block's output, before that norm.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from torch import Tensor

from corekit import ace, stats
from corekit.lm import (
    LM,
    Batch,
    LastToken,
    Prefix,
    ablations,
    encode,
    final_norm,
    last_token,
    n_offsets,
    position_means,
    prefix,
)
from corekit.tasks.agreement import Sentence, labels, margin_head


@dataclass
class Split:
    """One split of prompts for one model: labels y (N,), the batch, its cached prefix and its last token."""

    y: np.ndarray
    batch: Batch
    prefix: Prefix
    last: LastToken


@dataclass
class Measured:
    """A model's readings on the train (with margin gradients) and test prompts, and its own margin's AUROC."""

    name: str
    lm: LM
    train: Split
    test: Split
    base_auroc: float
    base_accuracy: float

    @property
    def n_layers(self) -> int:
        """Return the number of decoder blocks L (layers run 0 … L)."""
        return self.lm.n_layers


def measure(lm: LM, name: str, train: Sequence[Sentence], test: Sequence[Sentence], batch_size: int) -> Measured:
    """Return the margins, residuals h (L+1, N, D) and (train only) gradients g = ∂m/∂h (L+1, N, D) of both splits."""
    head, layers = margin_head(lm), range(lm.n_layers + 1)
    splits = []
    for sentences, grad in ((train, True), (test, False)):
        batch = encode(lm, [s.prompt for s in sentences], [s.subject_char for s in sentences])
        pre = prefix(lm, batch, batch_size)
        splits.append(Split(np.array(labels(sentences)), batch, pre, last_token(pre, head, read=layers, grad=grad)))
    tr, te = splits
    base_auroc = stats.auroc(te.last.value, te.y)
    base_accuracy = float(((te.last.value.cpu() > 0).numpy() == (te.y == 1)).mean())
    return Measured(name, lm, tr, te, base_auroc, base_accuracy)


@dataclass
class Axis:
    """The oriented rank-1 core of every layer: basis q (L+1, D, 1) (plural = positive), the core (its mean μ),
    coordinates z = qᵀ(h − μ) on both splits (L+1, N), their held-out AUROC (L+1,), σ₁²/Σσ² (L+1,), and the
    recipe of the last layer (:data:`LAST_LAYER_RECIPES`)."""

    core: ace.Core
    q: Tensor
    z_train: Tensor
    z_test: Tensor
    auroc: np.ndarray
    top_energy: np.ndarray
    last_layer: str = "block_output"


#: Where the last layer's axis comes from: the last block's output (where every edit acts), or the final norm's
#: output (the authors' ``hidden_states[L]``), then applied to the block's output as their hook does.
LAST_LAYER_RECIPES = ("block_output", "post_norm")


def post_norm_readings(m: Measured, h: Tensor, grad: bool) -> tuple[Tensor, Tensor | None]:
    """Return the final norm's output x (N, D) of last-layer residuals h (N, D) and, with ``grad``, ∂margin/∂x (N, D)."""
    with torch.no_grad():
        x = final_norm(m.lm)(h.to(m.lm.model.dtype)).detach()
    if not grad:
        return x, None
    x = x.clone().requires_grad_(True)
    with torch.enable_grad():
        (gx,) = torch.autograd.grad(margin_head(m.lm)(x).sum(), x)
    return x.detach(), gx


def find_axis(m: Measured, last_layer: str = "block_output") -> Axis:
    """Return the rank-1 ACE core of every layer (Obs = E[g gᵀ] on the training prompts), signed on the training prompts;
    ``last_layer="post_norm"`` takes the last layer's from the final norm's output (the authors' recipe)."""
    if last_layer not in LAST_LAYER_RECIPES:
        raise ValueError(f"last_layer must be one of {LAST_LAYER_RECIPES}, got {last_layer!r}")
    h, g, h_test = m.train.last.h, m.train.last.g, m.test.last.h
    if last_layer == "post_norm":
        L = m.n_layers
        x, gx = post_norm_readings(m, h[L], grad=True)
        x_test, _ = post_norm_readings(m, h_test[L], grad=False)
        h, g, h_test = (torch.cat([a[:L], b[None].to(a)]) for a, b in ((h, x), (g, gx), (h_test, x_test)))
    g = g.double()
    obs = torch.einsum("lnd,lne->lde", g, g) / g.shape[1]
    core = ace.extract(h, obs)
    z_train = core.coordinates(h, 1)[..., 0]
    sign = torch.as_tensor(stats.orient(z_train, m.train.y), device=z_train.device)
    z_test = core.coordinates(h_test, 1)[..., 0] * sign[:, None]
    energy = (core.sigma**2 / (core.sigma**2).sum(-1, keepdim=True))[:, 0]
    return Axis(core, core.q(1) * sign[:, None, None], z_train * sign[:, None], z_test, stats.auroc(z_test, m.test.y),
                energy.cpu().numpy(), last_layer)


@dataclass
class Sweep:
    """Ablations of the axis at ``layers`` in one scope: the training flip AUROC (len(layers),) that picks ``layer``,
    the held-out margins {kind: (len(layers), N)} and their AUROCs {kind: (len(layers),)}, and the centres the
    edits used at each layer ({layer: (D,)} the last token's mean, or {layer: (C, D)} the position-class means)."""

    scope: str
    layers: list[int]
    flip_train_auroc: np.ndarray
    layer: int
    margins: dict[str, Tensor]
    auroc: dict[str, np.ndarray]
    centres: dict[int, Tensor]

    @property
    def index(self) -> int:
        """Return the position of the chosen layer in ``layers``."""
        return self.layers.index(self.layer)

    def at_layer(self, kind: str) -> float:
        """Return the held-out AUROC of ``kind`` at the chosen layer."""
        return float(self.auroc[kind][self.index])

    def value(self, kind: str, layer: int) -> float:
        """Return the held-out AUROC of ``kind`` at ``layer`` (one of ``layers``)."""
        return float(self.auroc[kind][self.layers.index(layer)])


def sweep(m: Measured, axis: Axis, layers: Sequence[int], scope: str = "last", before_last: bool = False) -> Sweep:
    """Return the ablations of ``axis`` at ``layers`` in ``scope`` ("last" or "from_subject"), the layer chosen by the
    lowest flip AUROC on the training prompts (with ``before_last``, among the layers below L only: layer L, the last
    block's output, is read by the final norm and the unembedding alone, so any direction that moves the margin there
    acts on it; the layers swept are all measured).

    "last" edits about the last token's training mean (the core's); "from_subject" edits each position
    about the training mean of its own position class (offset from the subject; the last prompt token
    its own class), estimated on the training prompts.
    """
    head, layers = margin_head(m.lm), list(layers)
    data = {"last": (m.train.prefix, m.test.prefix), "from_subject": (m.train.batch, m.test.batch)}[scope]
    states = (m.train.last.h, m.test.last.h) if scope == "last" else (None, None)
    if scope == "last":
        centres = {layer: axis.core.mean[layer] for layer in layers}
    else:
        means = position_means(m.lm, m.train.batch, layers, n_offsets(m.train.batch))
        centres = dict(zip(layers, means))
    flip_train = ablations(m.lm, data[0], head, axis.q, centres, layers, ["flip"], scope=scope,
                           states=states[0])["flip"]
    flip_train_auroc = stats.auroc(flip_train, m.train.y)
    layer = layers[lowest_index(flip_train_auroc, layers, m.n_layers if before_last else None)]
    margins = ablations(m.lm, data[1], head, axis.q, centres, layers, scope=scope, states=states[1])
    return Sweep(scope, layers, flip_train_auroc, layer, margins,
                 {k: stats.auroc(v, m.test.y) for k, v in margins.items()}, centres)


def lowest_index(flip_auroc: np.ndarray, layers: Sequence[int], below: int | None) -> int:
    """Return the index of the lowest of ``flip_auroc`` (len(layers),) among the layers below ``below`` (None: all; all
    when none is below), the first on ties."""
    eligible = [i for i, layer in enumerate(layers) if below is None or layer < below] or list(range(len(layers)))
    return eligible[int(np.argmin(np.asarray(flip_auroc)[eligible]))]
