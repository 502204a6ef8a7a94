"""The grammatical-number axis of a language model (notebook 04), one small object per step.

For one model and a train / test split of agreement prompts: :func:`measure` reads the last token
(margins, residuals and margin gradients at every layer), :func:`find_axis` extracts a rank-1 ACE
core per layer and orients it, :func:`sweep` runs the keep-only / remove / flip ablations over layers
and picks the layer on the training prompts (from the subject on, each position is edited about its
own position class's training mean, :mod:`corekit.lm.edits`), :func:`sufficient_rank` asks how many
core dimensions keep-only needs, :func:`fit_margin` fits the margin on the coordinate, and
:func:`flip_generation` flips the axis while the model writes (greedy or sampled). Every figure
reported comes from the held-out prompts.
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
    PositionEdit,
    Prefix,
    ablations,
    core_edit,
    encode,
    generate,
    last_token,
    n_offsets,
    position_means,
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


def sweep(m: Measured, axis: Axis, layers: Sequence[int], scope: str = "last") -> Sweep:
    """Return the ablations of ``axis`` at ``layers`` in ``scope`` ("last" or "from_subject"), the layer chosen by the
    lowest flip AUROC on the training prompts.

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
    layer = layers[int(np.argmin(flip_train_auroc))]
    margins = ablations(m.lm, data[1], head, axis.q, centres, layers, scope=scope, states=states[1])
    return Sweep(scope, layers, flip_train_auroc, layer, margins,
                 {k: stats.auroc(v, m.test.y) for k, v in margins.items()}, centres)


@dataclass
class RankCurve:
    """Held-out keep-only AUROCs (len(ranks),) of the rank-r core at ``layer`` (last position), and the smallest
    rank of ``ranks`` within ``tol`` of the model's own margin AUROC (``sufficient``; −1 when none is)."""

    layer: int
    ranks: list[int]
    auroc: np.ndarray
    tol: float
    sufficient: int


def sufficient_rank(m: Measured, axis: Axis, layer: int, ranks: Sequence[int], tol: float = 0.02) -> RankCurve:
    """Return the keep-only AUROC of the ACE core of each rank in ``ranks`` at ``layer`` and the smallest sufficient rank."""
    ranks = sorted({int(r) for r in ranks})
    if not ranks or ranks[0] < 1 or ranks[-1] > m.lm.d_model:
        raise ValueError(f"ranks must lie in [1, d_model = {m.lm.d_model}], got {ranks}")
    head, start = margin_head(m.lm), m.test.last.h[layer]
    aurocs = []
    for r in ranks:
        edit = core_edit("keep_only", axis.core.q(r)[layer], axis.core.mean[layer])
        aurocs.append(stats.auroc(last_token(m.test.prefix, head, layer=layer, edit=edit, start=start).value, m.test.y))
    aurocs = np.array(aurocs)
    first = ace.sufficient_rank(torch.as_tensor(aurocs)[None], torch.tensor([m.base_auroc], dtype=torch.float64),
                                ranks, tol=tol)
    return RankCurve(layer, ranks, aurocs, tol, int(first[0]))


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
    """Continuations without and with the flip (``mode`` "greedy" or "sampled"), the number (1, 0, None) of each one's
    first verb, and of the ``right`` continuations whose verb has the subject's number, how many switch number
    (``switched``): their share ``rate`` and its Wilson 95 % interval."""

    mode: str
    layer: int
    plain: list[str]
    flipped: list[str]
    number_plain: list[int | None]
    number_flipped: list[int | None]
    right: int
    switched: int

    @property
    def rate(self) -> float:
        """Return switched / right (NaN when no continuation is right)."""
        return self.switched / self.right if self.right else float("nan")

    @property
    def interval(self) -> tuple[float, float]:
        """Return the Wilson 95 % interval of ``rate`` ((0, 1) when no continuation is right)."""
        return stats.wilson_interval(self.switched, self.right) if self.right else (0.0, 1.0)


def flip_generation(m: Measured, axis: Axis, scope: Sweep, prompts: Sequence[Sentence], max_new_tokens: int,
                    nlp, sample: bool = False, seed: int = 0) -> Generation:
    """Return continuations of ``prompts``, plain and with the axis flipped from the subject on at ``scope``'s layer
    (each prompt position about its class's training mean, generated positions about the last token's), greedy or
    sampled as the ACE authors (temperature 1, top-k 50, one seed per prompt shared by both runs)."""
    if scope.scope != "from_subject":
        raise ValueError(f"flip_generation needs the 'from_subject' sweep, got scope {scope.scope!r}")
    layer = scope.layer
    edit = PositionEdit("flip", axis.q[layer], scope.centres[layer])
    texts, chars = [s.prompt for s in prompts], [s.subject_char for s in prompts]
    decoding = dict(sample=sample, temperature=1.0, top_k=50, seed=seed)
    plain = generate(m.lm, texts, max_new_tokens, start_chars=chars, **decoding)
    flipped = generate(m.lm, texts, max_new_tokens, layer=layer, edit=edit, start_chars=chars, **decoding)
    n_plain = [first_verb_number(s.prompt, c, nlp) for s, c in zip(prompts, plain)]
    n_flipped = [first_verb_number(s.prompt, c, nlp) for s, c in zip(prompts, flipped)]
    right = [i for i, s in enumerate(prompts) if n_plain[i] == s.label]
    switched = sum(n_flipped[i] == 1 - prompts[i].label for i in right)
    return Generation("sampled" if sample else "greedy", layer, plain, flipped, n_plain, n_flipped, len(right),
                      switched)
