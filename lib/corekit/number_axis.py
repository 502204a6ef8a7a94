"""The grammatical-number axis of a language model (notebook 04), one small object per step.

For one model and a train / test split of agreement prompts: :func:`measure` reads the last token
(margins, residuals and margin gradients at every layer), :func:`find_axis` extracts a rank-1 ACE
core per layer and orients it, :func:`sweep` runs the keep-only / remove / flip ablations over layers
and picks the layer on the training prompts, :func:`fit_margin` fits the margin on the coordinate,
and :func:`flip_generation` flips the axis while the model writes. Every figure reported comes from
the held-out prompts.
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
    core_edit,
    encode,
    generate,
    last_token,
    prefix,
    rms_coordinate,
)
from corekit.tasks.agreement import Sentence, first_verb_number, labels, margin_head


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
    coordinates z = qᵀ(h − μ) on both splits (L+1, N), their held-out AUROC (L+1,) and σ₁²/Σσ² (L+1,)."""

    core: ace.Core
    q: Tensor
    z_train: Tensor
    z_test: Tensor
    auroc: np.ndarray
    top_energy: np.ndarray


def find_axis(m: Measured) -> Axis:
    """Return the rank-1 ACE core of every layer (Obs = E[g gᵀ] on the training prompts), signed on the training prompts."""
    h, g = m.train.last.h, m.train.last.g.double()
    obs = torch.einsum("lnd,lne->lde", g, g) / g.shape[1]
    core = ace.extract(h, obs)
    z_train = core.coordinates(h, 1)[..., 0]
    sign = torch.as_tensor(stats.orient(z_train, m.train.y), device=z_train.device)
    z_test = core.coordinates(m.test.last.h, 1)[..., 0] * sign[:, None]
    energy = (core.sigma**2 / (core.sigma**2).sum(-1, keepdim=True))[:, 0]
    return Axis(core, core.q(1) * sign[:, None, None], z_train * sign[:, None], z_test, stats.auroc(z_test, m.test.y),
                energy.cpu().numpy())


@dataclass
class Sweep:
    """Ablations of the axis at ``layers`` in one scope: the training flip AUROC (len(layers),) that picks ``layer``,
    and the held-out margins {kind: (len(layers), N)} and their AUROCs {kind: (len(layers),)}."""

    scope: str
    layers: list[int]
    flip_train_auroc: np.ndarray
    layer: int
    margins: dict[str, Tensor]
    auroc: dict[str, np.ndarray]

    @property
    def index(self) -> int:
        """Return the position of the chosen layer in ``layers``."""
        return self.layers.index(self.layer)

    def at_layer(self, kind: str) -> float:
        """Return the held-out AUROC of ``kind`` at the chosen layer."""
        return float(self.auroc[kind][self.index])


def sweep(m: Measured, axis: Axis, layers: Sequence[int], scope: str = "last") -> Sweep:
    """Return the ablations of ``axis`` at ``layers`` in ``scope`` ("last" or "from_subject"), the layer chosen by the
    lowest flip AUROC on the training prompts."""
    head, layers = margin_head(m.lm), list(layers)
    data = {"last": (m.train.prefix, m.test.prefix), "from_subject": (m.train.batch, m.test.batch)}[scope]
    states = (m.train.last.h, m.test.last.h) if scope == "last" else (None, None)
    flip_train = ablations(m.lm, data[0], head, axis.q, axis.core.mean, layers, ["flip"], scope=scope,
                           states=states[0])["flip"]
    flip_train_auroc = stats.auroc(flip_train, m.train.y)
    layer = layers[int(np.argmin(flip_train_auroc))]
    margins = ablations(m.lm, data[1], head, axis.q, axis.core.mean, layers, scope=scope, states=states[1])
    return Sweep(scope, layers, flip_train_auroc, layer, margins,
                 {k: stats.auroc(v, m.test.y) for k, v in margins.items()})


@dataclass
class MarginFit:
    """Held-out fits m ≈ a x + b at one layer: on z (``z``: a, b, R²), on qᵀh/rms(h) (``normalised``), R² of z at
    every layer (L+1,), the normalised test coordinates (N,) and cos(q, mean margin gradient)."""

    layer: int
    z: tuple[float, float, float]
    normalised: tuple[float, float, float]
    r2_layers: list[float]
    x_test_normalised: Tensor
    cos_gradient: float


def fit_margin(m: Measured, axis: Axis, layer: int) -> MarginFit:
    """Return the affine fits of the margin on the core coordinate at ``layer`` (fitted on train, R² held out)."""
    tr, te = m.train.last, m.test.last
    xn_train, xn_test = (rms_coordinate(s.h[layer], axis.q[layer, :, 0]) for s in (tr, te))
    z = stats.held_out_affine_r2(axis.z_train[layer], tr.value, axis.z_test[layer], te.value)
    normalised = stats.held_out_affine_r2(xn_train, tr.value, xn_test, te.value)
    r2_layers = [stats.held_out_affine_r2(axis.z_train[k], tr.value, axis.z_test[k], te.value)[2]
                 for k in range(m.n_layers + 1)]
    cos = float(torch.nn.functional.cosine_similarity(axis.q[layer, :, 0], tr.g[layer].double().mean(0), dim=0))
    return MarginFit(layer, z, normalised, r2_layers, xn_test.cpu(), cos)


@dataclass
class Generation:
    """Greedy continuations without and with the flip, the number (1, 0, None) of each one's first verb, and the
    share of the continuations with a verb of the right number that switch number (``rate``, of ``right``)."""

    layer: int
    plain: list[str]
    flipped: list[str]
    number_plain: list[int | None]
    number_flipped: list[int | None]
    rate: float
    right: int


def flip_generation(m: Measured, axis: Axis, layer: int, prompts: Sequence[Sentence], max_new_tokens: int,
                    nlp) -> Generation:
    """Return greedy continuations of ``prompts`` plain and with the axis flipped at ``layer`` from the subject on."""
    edit = core_edit("flip", axis.q[layer], axis.core.mean[layer])
    texts = [s.prompt for s in prompts]
    plain = generate(m.lm, texts, max_new_tokens)
    flipped = generate(m.lm, texts, max_new_tokens, layer=layer, edit=edit, start_chars=[s.subject_char for s in prompts])
    n_plain = [first_verb_number(s.prompt, c, nlp) for s, c in zip(prompts, plain)]
    n_flipped = [first_verb_number(s.prompt, c, nlp) for s, c in zip(prompts, flipped)]
    right = [i for i, s in enumerate(prompts) if n_plain[i] == s.label]
    switched = [i for i in right if n_flipped[i] == 1 - prompts[i].label]
    rate = len(switched) / len(right) if right else float("nan")
    return Generation(layer, plain, flipped, n_plain, n_flipped, rate, len(right))
