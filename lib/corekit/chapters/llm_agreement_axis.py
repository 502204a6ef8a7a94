"""The grammatical-number axis of a language model (notebook 04), one small object per step.

The axis itself is :mod:`corekit.number_axis` (:func:`~corekit.number_axis.measure` reads the last token,
:func:`~corekit.number_axis.find_axis` extracts and orients a rank-1 ACE core per layer,
:func:`~corekit.number_axis.sweep` runs the keep-only / remove / flip ablations over layers and picks the layer on the
training prompts). This module holds the chapter's further steps: :func:`sufficient_rank` asks how many
core dimensions keep-only needs, :func:`fit_margin` fits the margin on the coordinate,
:func:`flip_generation` flips the axis while the model writes (greedy or sampled), and
:func:`newest_position_generation` steers it as the ACE authors' demo does (the newest position only,
a strength chosen at every step). Every figure reported comes from the held-out prompts.
:func:`model_nulls` and :func:`cross_model_nulls` measure the same statistics without the axis (random directions,
shuffled prompts) and along the difference-of-means direction (:func:`mean_difference_directions`), and
:func:`authors_comparison` runs the pipeline on the authors' sentences beside their code's record
(:func:`authors_sentences_comparisons`: every recorded model, loaded and measured on their split). The notebook picks its
layer below the last (``sweep(..., before_last=True)``): layer L, the last block's output, is read by the final norm
and the unembedding alone. :data:`CLAIMS` declares the chapter's claims, :func:`claims` decides them on
:class:`Findings`, and :func:`check_inputs` checks the parameters before a run.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import numpy as np
import torch
from torch import Tensor

from corekit import ace, stats
from corekit.inputs import MODEL_DTYPES, distinct, fits, language_model, loadable_model, require
from corekit.lm import (
    OFFLINE,
    PositionEdit,
    ablations,
    core_edit,
    encode,
    generate,
    last_token,
    load,
    residual_hooks,
    rms_coordinate,
    sample_tokens,
)
from corekit.lm.model import final_logit_softcap
from corekit.lm.stream import forward
from corekit.number_axis import (
    LAST_LAYER_RECIPES,
    Axis,
    Measured,
    Sweep,
    find_axis,
    lowest_index,
    measure,
    sweep,
)
from corekit.tasks.agreement import Sentence, first_verb_number, margin_head
from corekit.verdicts import Bound, Claim, Null, Spec, at_least, at_most, decide, declared, equal_to, reported


def mean_difference_directions(m: Measured) -> Tensor:
    """Return the difference-of-means direction of every layer (L+1, D): the mean last-token residual of the plural
    training prompts minus that of the singular ones, normalised to unit length (float64)."""
    h = m.train.last.h.double()
    plural = torch.as_tensor(np.asarray(m.train.y) == 1, device=h.device)
    if bool(plural.all()) or not bool(plural.any()):
        raise ValueError("the difference-of-means direction needs singular and plural training prompts")
    d = h[:, plural].mean(1) - h[:, ~plural].mean(1)
    return d / d.norm(dim=-1, keepdim=True)


def directions_layer_choice(m: Measured, axis: Axis, directions: Tensor, before_last: bool = False) -> int:
    """Return the layer the last-position rule picks (lowest training flip AUROC over layers 0 … L, or 0 … L − 1 with
    ``before_last``) when each layer's axis is the given unit direction (L+1, D), reflected about the same mean."""
    layers = list(range(m.n_layers + 1))
    q = directions[:, :, None].to(axis.q)
    flip = ablations(m.lm, m.train.prefix, margin_head(m.lm), q, {l: axis.core.mean[l] for l in layers}, layers,
                     ["flip"], scope="last", states=m.train.last.h)["flip"]
    return layers[lowest_index(stats.auroc(flip, m.train.y), layers, m.n_layers if before_last else None)]


def random_directions(d: int, k: int, seed: int) -> Tensor:
    """Return k directions (k, d) drawn uniformly on the unit sphere of R^d (float64; the same for the same seed)."""
    if k < 1 or d < 1:
        raise ValueError(f"k and d must be positive, got k={k}, d={d}")
    x = torch.randn(k, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return x / x.norm(dim=1, keepdim=True)


def random_layer_choice(m: Measured, axis: Axis, seed: int, before_last: bool = False) -> int:
    """Return the layer the last-position rule picks (lowest training flip AUROC over layers 0 … L, or 0 … L − 1 with
    ``before_last``) when each layer's axis is a random unit direction (one per layer, seeded), reflected about the same
    mean as the axis."""
    return directions_layer_choice(m, axis, random_directions(m.lm.d_model, m.n_layers + 1, seed), before_last)


@dataclass
class RandomNull:
    """The chapter's statistics with k random unit directions (k, D) in place of the axis at ``layer`` in one scope,
    each edited exactly as the axis is (same centres): the held-out margin AUROC of each ablation {kind: (k,)} and the
    flip rate of the correctly handled prompts (k,); for the last position also the held-out coordinates
    z = rᵀ(h − μ), signed on the training prompts (k, N_test), their AUROC (k,), and the held-out R² of m ≈ a z + b
    fitted on train (k,)."""

    scope: str
    layer: int
    directions: Tensor
    auroc: dict[str, np.ndarray]
    flip_rate: np.ndarray
    z_test: Tensor | None = None
    coordinate_auroc: np.ndarray | None = None
    margin_r2: np.ndarray | None = None


def random_null(m: Measured, axis: Axis, scope: Sweep, k: int, seed: int,
                kinds: Sequence[str] = ("keep_only", "remove", "flip")) -> RandomNull:
    """Return :class:`RandomNull` of ``k`` random unit directions (seeded) at ``scope``'s chosen layer."""
    return directions_null(m, axis, scope, random_directions(m.lm.d_model, k, seed), kinds)


def directions_null(m: Measured, axis: Axis, scope: Sweep, directions: Tensor,
                    kinds: Sequence[str] = ("keep_only", "remove", "flip")) -> RandomNull:
    """Return :class:`RandomNull` of the given unit directions (k, D) (random ones, or the difference-of-means
    direction) in place of the axis at ``scope``'s chosen layer, each edited exactly as the axis is."""
    layer, head = scope.layer, margin_head(m.lm)
    R = directions.to(axis.q)
    data, states = ((m.test.prefix, m.test.last.h) if scope.scope == "last" else (m.test.batch, None))
    margins = {kind: [] for kind in kinds}
    for r in R:
        out = ablations(m.lm, data, head, {layer: r[:, None]}, {layer: scope.centres[layer]}, [layer], kinds,
                        scope=scope.scope, states=states)
        for kind in kinds:
            margins[kind].append(out[kind][0])
    auroc = {kind: np.atleast_1d(stats.auroc(torch.stack(v), m.test.y)) for kind, v in margins.items()}
    rates = np.array([stats.flip_rate(m.test.last.value, f, m.test.y)[0] for f in margins.get("flip", [])])
    null = RandomNull(scope.scope, layer, R.cpu(), auroc, rates)
    if scope.scope == "last":
        mu = axis.core.mean[layer].to(R)
        z_train = (m.train.last.h[layer].to(R) - mu) @ R.T                      # (N_train, k)
        z_test = (m.test.last.h[layer].to(R) - mu) @ R.T
        sign = torch.as_tensor(np.atleast_1d(stats.orient(z_train.T, m.train.y))).to(R)
        null.z_test = (z_test.T * sign[:, None]).cpu()
        null.coordinate_auroc = np.atleast_1d(stats.auroc(null.z_test, m.test.y))
        null.margin_r2 = np.array([stats.held_out_affine_r2(z_train[:, j], m.train.last.value, z_test[:, j],
                                                            m.test.last.value)[2] for j in range(len(R))])
    return null


@dataclass
class RankCurve:
    """Held-out keep-only AUROCs (len(ranks),) of the rank-r core at ``layer`` (last position), and the smallest
    rank of ``ranks`` within ``tol`` of the model's own margin AUROC (``sufficient``; −1 when none is)."""

    layer: int
    ranks: list[int]
    auroc: np.ndarray
    tol: float
    sufficient: int


def sufficient_rank(m: Measured, axis: Axis, layer: int, ranks: Sequence[int], tol: float = 0.02,
                    basis: Tensor | None = None) -> RankCurve:
    """Return the keep-only AUROC of the ACE core of each rank in ``ranks`` at ``layer`` and the smallest sufficient rank;
    ``basis`` (D, ≥ max rank), orthonormal, replaces the core's directions (its first r columns; e.g. a random one)."""
    ranks = sorted({int(r) for r in ranks})
    if not ranks or ranks[0] < 1 or ranks[-1] > m.lm.d_model:
        raise ValueError(f"ranks must lie in [1, d_model = {m.lm.d_model}], got {ranks}")
    if basis is not None and (basis.dim() != 2 or basis.shape[0] != m.lm.d_model or basis.shape[1] < ranks[-1]):
        raise ValueError(f"basis must be (d_model = {m.lm.d_model}, ≥ {ranks[-1]}), got {tuple(basis.shape)}")
    head, start = margin_head(m.lm), m.test.last.h[layer]
    aurocs = []
    for r in ranks:
        q = axis.core.q(r)[layer] if basis is None else basis[:, :r].to(axis.core.mean)
        edit = core_edit("keep_only", q, axis.core.mean[layer])
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
                    nlp, sample: bool = False, seed: int = 0, direction: Tensor | None = None,
                    plain: Generation | None = None) -> Generation:
    """Return continuations of ``prompts``, plain and with the axis flipped from the subject on at ``scope``'s layer
    (each prompt position about its class's training mean, generated positions about the last token's), greedy or
    sampled as the ACE authors (temperature 1, top-k 50, one seed per prompt shared by both runs).

    ``direction`` (D,), a unit vector, is reflected in place of the axis (e.g. a random one, for the null); ``plain``,
    the Generation of the same prompts and decoding, spares generating the plain continuations again."""
    if scope.scope != "from_subject":
        raise ValueError(f"flip_generation needs the 'from_subject' sweep, got scope {scope.scope!r}")
    layer = scope.layer
    q = axis.q[layer] if direction is None else direction.reshape(-1, 1).to(axis.q)
    edit = PositionEdit("flip", q, scope.centres[layer])
    texts, chars = [s.prompt for s in prompts], [s.subject_char for s in prompts]
    decoding = dict(sample=sample, temperature=1.0, top_k=50, seed=seed)
    if plain is not None and (plain.mode != ("sampled" if sample else "greedy") or len(plain.plain) != len(prompts)):
        raise ValueError(f"plain must be the {'sampled' if sample else 'greedy'} Generation of the same "
                         f"{len(prompts)} prompts, got {plain.mode} of {len(plain.plain)}")
    plain = plain.plain if plain is not None else generate(m.lm, texts, max_new_tokens, start_chars=chars, **decoding)
    flipped = generate(m.lm, texts, max_new_tokens, layer=layer, edit=edit, start_chars=chars, **decoding)
    n_plain = [first_verb_number(s.prompt, c, nlp) for s, c in zip(prompts, plain)]
    n_flipped = [first_verb_number(s.prompt, c, nlp) for s, c in zip(prompts, flipped)]
    right = [i for i, s in enumerate(prompts) if n_plain[i] == s.label]
    switched = sum(n_flipped[i] == 1 - prompts[i].label for i in right)
    return Generation("sampled" if sample else "greedy", layer, plain, flipped, n_plain, n_flipped, len(right),
                      switched)


def newest_position_generation(m: Measured, axis: Axis, layer: int, prompts: Sequence[Sentence], max_new_tokens: int,
                               nlp, plain: Generation, seed: int = 0, target: float = 1.0, probe: float = 0.2,
                               cap: float = 50.0, batch_size: int = 64, direction: Tensor | None = None) -> Generation:
    """Return sampled continuations steered as the ACE authors' demo steers (``SVA_uni.generate_surgical``), scored
    against the unedited ``plain`` continuations of the same prompts and seeds.

    At every step only the newest position is edited at ``layer``, about the core's mean:
    h ↦ h − 2 s qqᵀ(h − μ), with a strength s per prompt and step chosen so that the copula margin
    m = logsumexp(are, were) − logsumexp(is, was) moves to ∓``target`` (its current sign flipped): with m0
    the unedited margin and m1 the margin at strength ``probe``, s = clip((∓target − m0) / ((m1 − m0) / probe),
    −``cap``, ``cap``). Earlier positions are never edited (each step re-reads the whole sequence), and
    sampling is the authors' (temperature 1, top-k 50; prompt i draws with seed ``seed`` + i, as ``plain``).
    ``direction`` (D,), a unit vector, is steered along in place of the axis (e.g. a random one, for the null).
    """
    if plain.mode != "sampled" or len(plain.plain) != len(prompts):
        raise ValueError(f"plain must be the sampled Generation of the same {len(prompts)} prompts, got "
                         f"{plain.mode} of {len(plain.plain)}")
    lm = m.lm
    lm.check_layer(layer)
    q = (axis.q[layer, :, 0] if direction is None else direction.reshape(-1).to(axis.q)).double()
    mu = axis.core.mean[layer].double()
    ids_verbs = margin_head(lm).ids  # are, were, is, was
    unembed = lm.model.get_output_embeddings()
    batch = encode(lm, [s.prompt for s in prompts])
    eos = lm.tokenizer.eos_token_id
    eos = set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}
    steered: list[str] = [""] * len(prompts)

    def logits_at(ids, attn, pos, strength):
        def steer(h):
            x = h[:, -1].double() - mu.to(h.device)
            out = h.clone()
            out[:, -1] = (h[:, -1].double() - 2 * strength[:, None] * (x @ q)[:, None] * q).to(h.dtype)
            return out
        with residual_hooks(lm, write={} if strength is None else {layer: steer}):
            hidden, _ = forward(lm, ids, attn, pos)
        return final_logit_softcap(lm, unembed(hidden[:, -1])).double()

    def copula(logits):
        return (torch.logsumexp(logits[:, ids_verbs[:2]], -1) - torch.logsumexp(logits[:, ids_verbs[2:]], -1))

    with torch.no_grad():
        for idx in batch.groups(batch_size):
            sub, _ = batch.rows(idx)
            ids, attn, pos = sub.input_ids, sub.attention_mask, sub.position_ids
            generators = [torch.Generator().manual_seed(seed + int(i)) for i in idx.tolist()]
            done = torch.zeros(len(idx), dtype=torch.bool, device=lm.device)
            out = []
            for _ in range(max_new_tokens):
                m0 = copula(logits_at(ids, attn, pos, None))
                slope = (copula(logits_at(ids, attn, pos, torch.full_like(m0, probe))) - m0) / probe
                goal = torch.where(m0 > 0, -target, target)
                strength = torch.where(slope.abs() > 1e-8, ((goal - m0) / slope.where(slope.abs() > 1e-8, 1.0))
                                       .clamp(-cap, cap), torch.zeros_like(m0))
                chosen = sample_tokens(logits_at(ids, attn, pos, strength), generators).to(lm.device)
                nxt = torch.where(done, torch.full_like(chosen, lm.tokenizer.pad_token_id), chosen)
                out.append(nxt)
                done |= torch.tensor([int(t) in eos for t in nxt], device=lm.device)
                if bool(done.all()):
                    break
                ids = torch.cat([ids, nxt[:, None]], 1)
                attn = torch.cat([attn, torch.ones_like(attn[:, :1])], 1)
                pos = torch.cat([pos, pos[:, -1:] + 1], 1)
            for j, row in zip(idx.tolist(), torch.stack(out, 1).tolist()):
                cut = next((i for i, t in enumerate(row) if t in eos), len(row))
                steered[j] = lm.tokenizer.decode(row[:cut], skip_special_tokens=True)
    n_steered = [first_verb_number(s.prompt, c, nlp) for s, c in zip(prompts, steered)]
    right = [i for i, s in enumerate(prompts) if plain.number_plain[i] == s.label]
    switched = sum(n_steered[i] == 1 - prompts[i].label for i in right)
    return Generation("newest_position", layer, plain.plain, steered, plain.number_plain, n_steered, len(right),
                      switched)


@dataclass
class MeanDifferenceNull:
    """The chapter's statistics with the difference-of-means direction (plural minus singular training mean of the
    last-token residual, per layer, :func:`mean_difference_directions` (L+1, D)) in place of the axis, edited exactly as
    the axis is: at the last-position layer and the from-subject layer (:class:`RandomNull` of one direction), the layer
    the last-position rule picks with it at every layer, and our flip (``generation``) and the authors' steering
    (``steering``) along it."""

    directions: Tensor
    last: RandomNull
    subject: RandomNull
    layer: int
    generation: Generation
    steering: Generation


@dataclass
class Nulls:
    """The nulls of one model's claims: ``n_random`` random unit directions at the last-position layer and
    ``n_random_subject`` at the from-subject layer (:class:`RandomNull`), the layer the last-position rule picks with a
    random direction at every layer, the rank curve of random nested subspaces, our flip (``generation``) and the
    authors' steering (``steering``) along one random direction, and the same statistics along the difference-of-means
    direction (:class:`MeanDifferenceNull`)."""

    last: RandomNull
    subject: RandomNull
    layer: int
    rank: RankCurve
    generation: Generation
    steering: Generation
    mean_difference: MeanDifferenceNull | None = None


def model_nulls(m: Measured, axis: Axis, last: Sweep, subject: Sweep, prompts: Sequence[Sentence], max_new_tokens: int,
                nlp, plain: Generation, ranks: Sequence[int], n_random: int, n_random_subject: int, seed: int,
                generation_seed: int, before_last: bool = False) -> Nulls:
    """Return :class:`Nulls` of one model: random directions seeded ``seed`` (last and from-subject scopes), ``seed`` + 1
    (the layer), ``seed`` + 2 (the random basis (D, max(ranks)), orthonormalised by QR) and ``seed`` + 3 (the one
    direction of the generation nulls, sampled with ``generation_seed`` against the ``plain`` sampled Generation), and
    the difference-of-means direction's; ``before_last`` as the sweeps' layer rule (layers below L only)."""
    D, r0 = m.lm.d_model, random_directions(m.lm.d_model, 1, seed + 3)[0]
    basis = torch.linalg.qr(random_directions(D, max(ranks), seed + 2).T)[0]
    diff = mean_difference_directions(m)
    mean_difference = MeanDifferenceNull(
        directions=diff.cpu(),
        last=directions_null(m, axis, last, diff[last.layer][None]),
        subject=directions_null(m, axis, subject, diff[subject.layer][None]),
        layer=directions_layer_choice(m, axis, diff, before_last),
        generation=flip_generation(m, axis, subject, prompts, max_new_tokens, nlp, sample=True, seed=generation_seed,
                                   direction=diff[subject.layer], plain=plain),
        steering=newest_position_generation(m, axis, last.layer, prompts, max_new_tokens, nlp, plain,
                                            seed=generation_seed, direction=diff[last.layer]))
    return Nulls(
        last=random_null(m, axis, last, n_random, seed),
        subject=random_null(m, axis, subject, n_random_subject, seed),
        layer=random_layer_choice(m, axis, seed + 1, before_last),
        rank=sufficient_rank(m, axis, last.layer, ranks, basis=basis),
        generation=flip_generation(m, axis, subject, prompts, max_new_tokens, nlp, sample=True, seed=generation_seed,
                                   direction=r0, plain=plain),
        steering=newest_position_generation(m, axis, last.layer, prompts, max_new_tokens, nlp, plain,
                                            seed=generation_seed, direction=r0),
        mean_difference=mean_difference)


def cross_model_nulls(names: Sequence[str], coordinates: dict[str, Tensor], random_z: dict[str, Tensor], n_boot: int,
                   seed: int) -> dict[str, dict[str, float]]:
    """Return {"a ~ b": {"shuffled": the 99th percentile of Spearman ρ(z_a, z_b) over ``n_boot`` shuffles of b's prompts,
    "random": the largest ρ of paired random-direction coordinates (k, N)}} for every pair a < b of ``names``, the
    coordinates z (N,) of each model; the shuffles draw from one generator seeded ``seed``, pair after pair."""
    rng = np.random.default_rng(seed)
    out = {}
    for i, a_name in enumerate(names):
        for b_name in names[i + 1:]:
            za, zb = (coordinates[x].cpu().double().numpy() for x in (a_name, b_name))
            shuffled = [stats.spearman(za, zb[rng.permutation(len(zb))]) for _ in range(n_boot)]
            random_pairs = [stats.spearman(x, y) for x, y in zip(random_z[a_name], random_z[b_name])]
            out[f"{a_name} ~ {b_name}"] = {"shuffled": float(np.percentile(shuffled, 99)),
                                           "random": float(np.max(random_pairs))}
    return out


#: The ablations the authors' code records at every layer.
ABLATIONS = ("keep_only", "remove", "flip")


def authors_layer(flip_auroc: np.ndarray) -> int:
    """Return the authors' layer of flip AUROCs (L+1,) at layers 0 … L: the lowest of layers 1 … L (layer 0 not edited)."""
    return 1 + int(np.argmin(flip_auroc[1:]))


def largest_difference(auroc: dict[str, np.ndarray], rows: Sequence[dict]) -> float:
    """Return max abs(auroc[kind][layer] − row[kind]) over the authors' rows ({"layer": l, kind: AUROC}) and the kinds of
    :data:`ABLATIONS`, ``auroc`` {kind: (L+1,)} this library's at every layer."""
    return max(abs(float(auroc[k][r["layer"]]) - r[k]) for r in rows for k in ABLATIONS)


@dataclass
class AuthorsComparison:
    """The chapter's pipeline on the authors' sentences beside their code's record: the readings, each last-layer
    recipe's axis {recipe: Axis}, the last-position ablations at every layer 0 … L with their recipe (``post_norm``)
    and at L only with this chapter's (``block_output``), each recipe's layer by the authors' rule (``layers``; ``layer``
    their recipe's) and the held-out AUROCs there (``at_layer``) and at L (``last`` {recipe: {kind: AUROC}}), the
    last-layer core AUROC per recipe, each recipe's held-out coordinates at its layer {recipe: (N,)}, the largest
    absolute difference from their code over layers 1 … L and the three ablations, and the model's own margin AUROC on all
    (``base``) and on the well-formed held-out sentences."""

    measured: Measured
    axes: dict[str, Axis]
    post_norm: Sweep
    block_output: Sweep
    base: float
    layer: int
    max_diff: float
    at_layer: dict[str, float]
    last: dict[str, dict[str, float]]
    core_auroc: dict[str, float]
    layers: dict[str, int]
    z_test: dict[str, Tensor]
    base_well_formed: float
    n_well_formed: int


def authors_comparison(m: Measured, record: dict, well_formed: Sequence[bool]) -> AuthorsComparison:
    """Return :class:`AuthorsComparison` of readings ``m`` on the authors' split against ``record`` (their code's run of
    this model: ``layer_sweep`` rows, layer 0 first), ``well_formed`` (N_test,) marking the held-out agreement prompts."""
    axes = {recipe: find_axis(m, last_layer=recipe) for recipe in LAST_LAYER_RECIPES}
    L = m.n_layers
    s_pn = sweep(m, axes["post_norm"], range(L + 1), "last")
    s_bo = sweep(m, axes["block_output"], [L], "last")
    flips = {"post_norm": s_pn.auroc["flip"], "block_output": np.r_[s_pn.auroc["flip"][:L], s_bo.auroc["flip"]]}
    layers = {recipe: authors_layer(f) for recipe, f in flips.items()}
    layer = layers["post_norm"]
    well_formed = np.array(well_formed)
    return AuthorsComparison(
        measured=m, axes=axes, post_norm=s_pn, block_output=s_bo, base=m.base_auroc, layer=layer,
        max_diff=largest_difference(s_pn.auroc, record["layer_sweep"][1:]),
        at_layer={k: float(s_pn.auroc[k][layer]) for k in ABLATIONS},
        last={recipe: {k: float(sw.auroc[k][-1]) for k in ABLATIONS} for recipe, sw in (("post_norm", s_pn),
                                                                                       ("block_output", s_bo))},
        core_auroc={recipe: float(axes[recipe].auroc[L]) for recipe in LAST_LAYER_RECIPES},
        layers=layers, z_test={recipe: axes[recipe].z_test[layers[recipe]] for recipe in LAST_LAYER_RECIPES},
        base_well_formed=stats.auroc(m.test.last.value[torch.as_tensor(well_formed)], m.test.y[well_formed]),
        n_well_formed=int(well_formed.sum()))


def recipe_spearman(a: AuthorsComparison, b: AuthorsComparison) -> dict[str, float]:
    """Return {recipe: Spearman ρ of the two models' held-out coordinates, each at its own layer of that recipe}."""
    return {recipe: stats.spearman(a.z_test[recipe], b.z_test[recipe]) for recipe in LAST_LAYER_RECIPES}


def authors_sentences_comparisons(names: Sequence[str], authors: dict, their, n_authors: int | None, batch_size: int,
                                  device: str = "auto", dtype: str = "auto") -> dict[str, AuthorsComparison]:
    """Return {name: :class:`AuthorsComparison`} for each of ``names`` in the authors' record (``authors["models"]``),
    the model loaded afresh and measured on the first ``n_authors`` of each half of ``their`` split (None: all of it)."""
    out = {}
    for name in names:
        if name not in authors["models"]:
            continue
        tr, te = (their.train, their.test) if n_authors is None else (their.train[:n_authors], their.test[:n_authors])
        mt = measure(load(name, device=device, dtype=dtype), name, tr, te, batch_size)
        out[name] = authors_comparison(mt, authors["models"][name], their.clean(te))
    return out


def authors_note(authors: dict | None, name: str, key: str) -> str:
    """Return a note for a claim's statistic quoting the authors' code on their own sentences (``authors`` their record,
    ``key`` one of its per-model entries), or "" when the record has no such model."""
    rec = (authors or {}).get("models", {}).get(name)
    if rec is None:
        return ""
    value = {"chosen_layer": f"{rec['chosen_layer']} of {rec['n_layers']}",
             "margin_r2": f"{rec['margin_fit']['r2']} (fitted and scored on their test half)"}.get(key, rec.get(key))
    return f" (authors' code on their sentences, n = {authors['n_samples']}: {value})"


def rate_or_none(gen: Generation) -> float | None:
    """Return a Generation's flip rate rounded to 4 decimals, or None when no continuation was scorable."""
    return None if np.isnan(gen.rate) else round(gen.rate, 4)


def generation_undecided(gen: Generation, n_prompts: int) -> str | None:
    """Return why a generation flip claim (≥ 0.8 of ≥ 100 scorable continuations of ``n_prompts`` prompts) is undecided:
    fewer than 100 scorable while the Wilson interval still reaches 0.8; None when it is decided."""
    lo, hi = gen.interval
    short = gen.right < MIN_SCORABLE and hi >= 0.8
    return (f"only {gen.right} of the {n_prompts} prompts give a scorable continuation (the claim "
            f"needs {MIN_SCORABLE}) and the Wilson interval [{lo:.3f}, {hi:.3f}] reaches 0.8; the cpu profile "
            "generates from 400 prompts") if short else None


def spread_layers(n_layers: int, n: int | None, chosen: int) -> list[int]:
    """Return the sorted layers a from-subject sweep visits: n evenly spaced layers L/n, 2L/n, …, L (rounded; None:
    every layer 0 … L) and the ``chosen`` layer."""
    spread = range(n_layers + 1) if n is None else np.linspace(0, n_layers, n + 1)[1:]
    return sorted({int(round(x)) for x in spread} | {chosen})


def spearman_pairs(coordinates: dict[str, Tensor], n_boot: int, seed: int) -> tuple[list[str], np.ndarray, dict]:
    """Return (names, Spearman ρ matrix (M, M), {"a ~ b": {"rho", "ci95"}} for every pair a < b, rounded to 4 decimals)
    of the models' coordinates z (N,) on the same prompts, the interval a percentile bootstrap of the prompts
    (``n_boot`` resamples, seeded ``seed`` for every pair)."""
    names, rho = stats.spearman_matrix(coordinates)
    pairs = {f"{a} ~ {b}": {"rho": round(float(rho[i, j]), 4),
                            "ci95": [round(v, 4) for v in stats.bootstrap_interval(
                                stats.spearman, (coordinates[a], coordinates[b]), n_boot=n_boot, seed=seed)]}
             for i, a in enumerate(names) for j, b in enumerate(names) if j > i}
    return names, rho, pairs


# --------------------------------------------------------------------------------------------
# The claims: declared before the run, decided on what the steps return

#: The six models of the paper's agreement experiment (the paper profile's); a bound taken from the paper's numbers is
#: decided only on them.
PAPER_MODELS = ("gpt2", "gpt2-medium", "gpt2-large", "meta-llama/Llama-3.1-8B", "google/gemma-2-9b", "Qwen/Qwen2.5-32B")
#: The keep-only bars: within this much of the model's own margin AUROC.
KEEP_TOL = 0.02
#: The smallest number of scorable continuations a generation claim needs.
MIN_SCORABLE = 100

#: Every claim the notebook records, in its order: ``{model}`` stands for each model's name (one block per model),
#: ``{model}`` in the last block for each model run on the authors' sentences. A bound relative to the model (its
#: own margin AUROC, its depth L) is declared in its form and set per model when the claim is decided.
CLAIMS: tuple[Spec, ...] = (
    Spec("weights[{model}]", "check", "the weights loaded (file, quantisation), checked at load"),
    Spec("base_auroc[{model}]", "precondition", "the model's own margin AUROC (held out)"),
    Spec("chosen_layer[{model}]", "paper", "the layer of the lowest flip AUROC on the training prompts (last position), "
         "of layers 0 … L − 1", at_least(2 / 3), paper="late layers"),
    Spec("core_auroc[{model}]", "paper", "held-out AUROC of the rank-1 core coordinate at the chosen layer (bar: the "
         "model's own margin AUROC − 0.02)", at_least(1 - KEEP_TOL)),
    Spec("keep_only_auroc[{model}]", "paper", "held-out margin AUROC with only the rank-1 core kept at the last position "
         "(bar: the model's own − 0.02)", at_least(1 - KEEP_TOL)),
    Spec("remove_auroc[{model}]", "paper", "held-out margin AUROC with the core removed at the last position",
         at_most(0.6)),
    Spec("flip_auroc[{model}]", "paper", "held-out margin AUROC with the core reflected at the last position",
         at_most(0.3)),
    Spec("flip_rate[{model}]", "paper", "share of the held-out prompts the model gets right whose margin changes sign "
         "under the flip (last position)", at_least(0.8)),
    Spec("sufficient_rank[{model}]", "paper", "smallest rank whose core keeps the held-out margin AUROC ≥ base − 0.02",
         equal_to(1)),
    Spec("chosen_layer[{model}, from subject]", "extension", "the lowest training flip AUROC among the layers swept "
         "from the subject on (below L)"),
    Spec("keep_only_auroc[{model}, from subject]", "extension", "held-out margin AUROC with only the core kept at every "
         "position from the subject on (bar: the model's own − 0.02)", at_least(1 - KEEP_TOL)),
    Spec("remove_auroc[{model}, from subject]", "extension", "held-out margin AUROC with the core removed from the "
         "subject on", at_most(0.6)),
    Spec("flip_auroc[{model}, from subject]", "extension", "held-out margin AUROC with the core reflected from the "
         "subject on", at_most(0.3)),
    Spec("flip_rate[{model}, from subject]", "extension", "share of the held-out prompts the model gets right whose "
         "margin changes sign under the flip from the subject on", at_least(0.8)),
    Spec("margin_r2[{model}]", "paper", "held-out R² of m ≈ a z + b fitted on the training prompts", at_least(0.5),
         paper="the projection predicts the margin"),
    Spec("margin_r2_normalised[{model}]", "extension", "m ≈ a qᵀh/rms(h) + b, fitted on train, R² held out"),
    Spec("at_layer_L[{model}]", "paper", "the same statistics at layer L, the last block's output (left out of the "
         "layer rule)"),
    Spec("generation_flip_rate[{model}]", "paper", "share of the held-out continuations with a verb of the subject's "
         "number that switch number under the flip from the subject on (sampled), Wilson 95 % interval",
         at_least(0.8)),
    Spec("generation_flip_rate_greedy[{model}]", "paper", "the same prompts, greedy decoding"),
    Spec("generation_flip_rate_authors_steering[{model}]", "paper", "share of the continuations that switch number "
         "under the authors' steering (newest position only), Wilson 95 % interval", at_least(0.8)),
    Spec("cross_model_spearman", "paper", "smallest Spearman ρ over the model pairs of the held-out core coordinates, "
         "each model at its chosen layer, 95 % bootstrap interval", at_least(0.8), paper="up to 0.93 (other models)"),
    Spec("authors_sentences_flawed", "check", "the authors' sentences that are not agreement prompts, by kind "
         "(corekit.tasks.sva_sentences)"),
    Spec("authors_sentences_same_numbers[{model}]", "check", "largest |this library − authors' code| over the base "
         "AUROC and every layer's keep-only / remove / flip AUROC, on their sentences and split, with their last-layer "
         "recipe", at_most(0.01), no_null="provenance"),
    Spec("authors_sentences_ablations[{model}]", "check", "at the lowest held-out flip layer (the authors' rule), their "
         "sentences, their recipe"),
    Spec("authors_sentences_last_layer[{model}]", "check", "layer L, the authors' recipe (post_norm) vs this "
         "chapter's (block_output)"),
    Spec("authors_sentences_base_auroc_well_formed[{model}]", "check", "the model's own margin AUROC on their "
         "well-formed held-out sentences, beside all"),
    Spec("cross_model_spearman_authors_sentences", "check", "cross-model Spearman ρ on their held-out sentences with "
         "their recipe (post_norm), each model at its lowest held-out flip layer, against the authors' code",
         equal_to(0.0, 0.01), no_null="provenance"),
)
_SPEC = declared(CLAIMS)


def _spec(template: str, model: str | None = None, bound: Bound | None = None) -> Spec:
    """Return the declared spec ``template`` with ``{model}`` filled in and, for a bound relative to the model, its
    bound set."""
    spec = _SPEC[template]
    changes = {} if model is None else {"id": template.format(model=model)}
    return replace(spec, **changes, **({} if bound is None else {"bound": bound}))


@dataclass(frozen=True)
class Findings:
    """What chapter 04's claims are decided on: the models in order, each model's readings
    (:class:`~corekit.number_axis.Measured`), axis, last-position and from-subject sweeps (layer chosen below L), rank
    curves at the chosen layer and at L, margin fit, nulls; the generations {(model, "sampled" | "greedy" | "authors"):
    Generation} from ``n_prompts`` prompts (seed ``generation_seed``); the cross-model Spearman pairs and their nulls
    (``n_boot`` shuffles); and the authors' record, their sentences and the comparisons on them (the first
    ``n_authors`` of each half; None: all)."""

    models: Sequence[str]
    measured: dict
    axes: dict
    last: dict
    subject: dict
    ranks: dict
    ranks_last: dict
    fits: dict
    generations: dict
    nulls: dict
    n_prompts: int
    generation_seed: int
    pairs: dict
    spearman_nulls: dict
    n_boot: int
    authors: dict | None = None
    their: Any = None
    comparison: dict = field(default_factory=dict)
    n_authors: int | None = None


def _r(x) -> float:
    """Return ``x`` as a float rounded to 4 decimals."""
    return round(float(x), 4)


def _rank_or_none(rc: RankCurve) -> int | None:
    """Return a rank curve's sufficient rank, None when no rank of it suffices."""
    return rc.sufficient if rc.sufficient > 0 else None


def _model_claims(f: Findings, name: str) -> list[Claim]:
    """Return one model's claims, in the notebook's order."""
    m, a, s, sub, rc, fit = f.measured[name], f.axes[name], f.last[name], f.subject[name], f.ranks[name], f.fits[name]
    nu = f.nulls[name]
    nl, ns, md = nu.last, nu.subject, nu.mean_difference
    base, l, L, bar = m.base_auroc, s.layer, m.n_layers, m.base_auroc - KEEP_TOL
    value, y = m.test.last.value, m.test.y
    authors, c = f.authors, f.comparison.get(name)
    most_l, least_l = (f"{w} of {len(nl.directions)} random unit directions at layer {l}" for w in ("largest", "smallest"))
    most_s, least_s = (f"{w} of {len(ns.directions)} random unit directions at layer {sub.layer}, from the subject on"
                       for w in ("largest", "smallest"))
    diff_l = f"the difference-of-means direction (plural − singular training mean) at layer {l}"
    diff_s = f"the difference-of-means direction at layer {sub.layer}, from the subject on"
    offline = OFFLINE.get(name)
    flip_rate = stats.flip_rate(value, s.margins["flip"][s.index], y)
    sub_rate = stats.flip_rate(value, sub.margins["flip"][sub.index], y)
    on_their_sentences = "" if c is None else (
        f"; on the authors' sentences the same pipeline's last-layer core gives {c.core_auroc['block_output']:.3f} "
        f"against that set's base {c.base:.3f} ({f.their.flawed()} of their {len(f.their.kinds)} sentences are not "
        f"agreement prompts; the base is {c.base_well_formed:.3f} on the {c.n_well_formed} well-formed held-out ones)")
    below = f"of layers 0 … {L - 1} (layer L = {L}, the last block's output, is left out: at_layer_L[{name}])"
    out = [
        reported(_spec("weights[{model}]", name), m.lm.weights, statistic=(
            f"GGUF file sha256 {offline.sha256[:12]}… checked at load" if offline else m.lm.source)),
        reported(_spec("base_auroc[{model}]", name), _r(base),
                 statistic="the model's own margin AUROC (held out)" + authors_note(authors, name, "base_auroc")),
        decide(_spec("chosen_layer[{model}]", name, at_least(2 * L / 3)), l,
               statistic=f"the layer of the lowest flip AUROC on the training prompts (last position), {below}"
                         + authors_note(authors, name, "chosen_layer"),
               null=[Null("the same rule with a random unit direction at every layer", nu.layer),
                     Null("the same rule with the difference-of-means direction at every layer", md.layer)]),
        decide(_spec("core_auroc[{model}]", name, at_least(bar)), _r(a.auroc[l]),
               statistic=f"held-out AUROC of the rank-1 core coordinate at layer {l} (bar: the model's own margin "
                         f"AUROC {base:.3f} − {KEEP_TOL})",
               null=[Null(most_l, _r(nl.coordinate_auroc.max())), Null(diff_l, _r(md.last.coordinate_auroc[0]))],
               why=f"the rank-1 core coordinate at layer {l} separates the held-out prompts to {a.auroc[l]:.3f}, the "
                   f"model's own margin to {base:.3f}" + on_their_sentences),
        decide(_spec("keep_only_auroc[{model}]", name, at_least(bar)), _r(s.at_layer("keep_only")),
               statistic=f"held-out margin AUROC with only the rank-1 core kept at the last position, layer {l} (bar: "
                         f"the model's own {base:.3f} − {KEEP_TOL})" + authors_note(authors, name, "keep_only_auroc"),
               null=[Null(most_l, _r(nl.auroc["keep_only"].max())), Null(diff_l, _r(md.last.auroc["keep_only"][0]))],
               why=f"keeping only the rank-1 core at layer {l} leaves {s.at_layer('keep_only'):.3f} of the model's "
                   f"{base:.3f}; the rank sweep below says how many dimensions it takes" + on_their_sentences),
        decide(_spec("remove_auroc[{model}]", name), _r(s.at_layer("remove")),
               statistic=f"held-out margin AUROC with the core removed at the last position, layer {l}"
                         + authors_note(authors, name, "remove_auroc"),
               null=[Null(least_l, _r(nl.auroc["remove"].min())), Null(diff_l, _r(md.last.auroc["remove"][0]))]),
        decide(_spec("flip_auroc[{model}]", name), _r(s.at_layer("flip")),
               statistic=f"held-out margin AUROC with the core reflected at the last position, layer {l}"
                         + authors_note(authors, name, "flip_auroc"),
               null=[Null(least_l, _r(nl.auroc["flip"].min())), Null(diff_l, _r(md.last.auroc["flip"][0]))]),
        decide(_spec("flip_rate[{model}]", name), _r(flip_rate[0]),
               statistic=f"share of the {flip_rate[1]} held-out prompts the model gets right whose margin changes "
                         f"sign under the flip (last position, layer {l})",
               null=[Null(most_l, _r(nl.flip_rate.max())), Null(diff_l, _r(md.last.flip_rate[0]))],
               why="the 0.8 bar is the book's own; the paper says the flip inverts number but gives no rate"),
        decide(_spec("sufficient_rank[{model}]", name), _rank_or_none(rc),
               statistic=f"smallest r in {rc.ranks} whose rank-r core keeps the held-out margin AUROC ≥ base − "
                         f"{rc.tol} = {base - rc.tol:.3f} (keep-only, layer {rc.layer}, last position; —: none)",
               null=[Null("random nested subspaces in place of the core (a random orthonormal basis; —: none up to "
                          f"{rc.ranks[-1]})", _rank_or_none(nu.rank)),
                     Null(f"{diff_l} as a 1-D core (1 when its keep-only AUROC reaches base − {rc.tol}; —: it does "
                          "not)", 1 if md.last.auroc["keep_only"][0] >= base - rc.tol else None)],
               why=f"keep-only with the rank-1 core gives {rc.auroc[0]:.3f} against base − {rc.tol} = "
                   f"{base - rc.tol:.3f}; " + (f"rank {rc.sufficient} is the first of {rc.ranks} to reach it"
                                               if rc.sufficient > 0 else f"no rank up to {rc.ranks[-1]} reaches it")),
        reported(_spec("chosen_layer[{model}, from subject]", name), {"layer": sub.layer, "n_layers": L},
                 statistic=f"lowest training flip AUROC among layers {[k for k in sub.layers if k < L] or sub.layers}"
                           f" (swept: {sub.layers})"),
    ]
    scope = f"from the subject on, layer {sub.layer}"
    out += [
        decide(_spec("keep_only_auroc[{model}, from subject]", name, at_least(bar)), _r(sub.at_layer("keep_only")),
               statistic=f"held-out margin AUROC with only the core kept at every position from the subject on (each "
                         f"about its own mean), layer {sub.layer} (bar: the model's own {base:.3f} − {KEEP_TOL})",
               null=[Null(most_s, _r(ns.auroc["keep_only"].max())), Null(diff_s, _r(md.subject.auroc["keep_only"][0]))]),
        decide(_spec("remove_auroc[{model}, from subject]", name), _r(sub.at_layer("remove")),
               statistic=f"held-out margin AUROC with the core removed {scope}",
               null=[Null(least_s, _r(ns.auroc["remove"].min())), Null(diff_s, _r(md.subject.auroc["remove"][0]))]),
        decide(_spec("flip_auroc[{model}, from subject]", name), _r(sub.at_layer("flip")),
               statistic=f"held-out margin AUROC with the core reflected {scope}",
               null=[Null(least_s, _r(ns.auroc["flip"].min())), Null(diff_s, _r(md.subject.auroc["flip"][0]))]),
        decide(_spec("flip_rate[{model}, from subject]", name), _r(sub_rate[0]),
               statistic=f"share of the {sub_rate[1]} held-out prompts the model gets right whose margin changes sign "
                         f"under the flip {scope}",
               null=[Null(most_s, _r(ns.flip_rate.max())), Null(diff_s, _r(md.subject.flip_rate[0]))],
               why="the 0.8 bar is the book's own; the paper says the flip inverts number but gives no rate"),
        decide(_spec("margin_r2[{model}]", name), _r(fit.z[2]),
               statistic=f"held-out R² of m ≈ a z + b fitted on the training prompts, z the core coordinate at layer "
                         f"{fit.layer}" + authors_note(authors, name, "margin_r2"),
               null=[Null(most_l, _r(nl.margin_r2.max())), Null(diff_l, _r(md.last.margin_r2[0]))]),
        reported(_spec("margin_r2_normalised[{model}]", name), _r(fit.normalised[2])),
        reported(_spec("at_layer_L[{model}]", name), at_layer_L(f, name),
                 statistic=f"the same statistics at layer L = {L}, the last block's output that the final norm and the "
                           "unembedding read (left out of the layer rule): core AUROC, last-position ablations and flip "
                           "rate, sufficient rank, margin R², and the from-subject ablations where swept"),
    ]
    return out + _generation_claims(f, name)


def at_layer_L(f: Findings, name: str) -> dict:
    """Return the chapter's statistics for model ``name`` at layer L (the last block's output), as a dict of numbers."""
    m, a, s, sub = f.measured[name], f.axes[name], f.last[name], f.subject[name]
    L, value, y = m.n_layers, m.test.last.value, m.test.y
    record = {"layer": L, "core_auroc": _r(a.auroc[L])}
    if L in s.layers:
        record |= {k: _r(s.value(k, L)) for k in ABLATIONS}
        record["flip_rate"] = _r(stats.flip_rate(value, s.margins["flip"][s.layers.index(L)], y)[0])
    record["sufficient_rank"] = _rank_or_none(f.ranks_last[name])
    record["margin_r2"] = _r(f.fits[name].r2_layers[L])
    if L in sub.layers:
        rate = stats.flip_rate(value, sub.margins["flip"][sub.layers.index(L)], y)[0]
        record["from_subject"] = {**{k: _r(sub.value(k, L)) for k in ABLATIONS}, "flip_rate": _r(rate)}
    return record


def _generation_claims(f: Findings, name: str) -> list[Claim]:
    """Return one model's generation claims: our flip sampled, greedy (reported), the authors' steering."""
    nu, n = f.nulls[name], f.n_prompts
    gs, gg, ga = f.generations[name, "sampled"], f.generations[name, "greedy"], f.generations[name, "authors"]
    rec_gen = (f.authors or {}).get("models", {}).get(name, {}).get("generation")
    return [
        decide(_spec("generation_flip_rate[{model}]", name), rate_or_none(gs), interval=tuple(_r(v) for v in gs.interval),
               null=[Null("the same flip along a random unit direction", rate_or_none(nu.generation)),
                     Null("the same flip along the difference-of-means direction",
                          rate_or_none(nu.mean_difference.generation))],
               undecided=generation_undecided(gs, n),
               statistic=f"share of the {gs.right} held-out continuations with a verb of the subject's number (of "
                         f"{n} prompts; sampled: T = 1, top-k 50, seed {f.generation_seed}) that switch number "
                         f"under the flip from the subject on at layer {gs.layer}, Wilson 95 % interval",
               why=f"{gs.switched} of {gs.right} switch number under our flip; the authors' steering switches "
                   f"{ga.switched} of the same {ga.right}; the 0.8 bar is the book's own: the paper shows examples, "
                   "not a rate"),
        reported(_spec("generation_flip_rate_greedy[{model}]", name),
                 {"rate": rate_or_none(gg), "switched": gg.switched, "of": gg.right,
                  "wilson95": [_r(v) for v in gg.interval]}),
        decide(_spec("generation_flip_rate_authors_steering[{model}]", name), rate_or_none(ga),
               interval=tuple(_r(v) for v in ga.interval),
               null=[Null("the authors' steering along a random unit direction", rate_or_none(nu.steering)),
                     Null("the authors' steering along the difference-of-means direction",
                          rate_or_none(nu.mean_difference.steering))],
               undecided=generation_undecided(ga, n),
               statistic=f"share of the {ga.right} continuations that switch number under the authors' steering (newest "
                         f"position only, a strength per step; layer {ga.layer}), the same prompts and seeds as our "
                         "flip, Wilson 95 % interval" + (
                             f" (authors' code on {rec_gen['prompts']} of their sentences: {rec_gen['switched']} of "
                             f"{rec_gen['right']})" if rec_gen else ""),
               why=f"{ga.switched} of {ga.right} switch number; the 0.8 bar is that of our flip (the book's)"),
    ]


def _cross_model_claim(f: Findings) -> Claim:
    """Return the cross-model Spearman claim over the pairs of ``f.models`` (at least two)."""
    models, pairs, authors = list(f.models), f.pairs, f.authors
    theirs_rho = (authors or {}).get("cross_model_spearman", {})
    worst = min(pairs, key=lambda p: pairs[p]["rho"])
    theirs_rho = theirs_rho.get(worst)
    a, b = worst.split(" ~ ")
    diff_rho = stats.spearman(*(f.nulls[x].mean_difference.last.z_test[0] for x in (a, b)))
    other = [x for x in models if x not in PAPER_MODELS]
    undecided = None if not other else (
        f"the bound 0.8 stands for the paper's 'up to 0.93', its best pair among its own six models "
        f"({', '.join(PAPER_MODELS)}, bfloat16); {', '.join(other)} {'is' if len(other) == 1 else 'are'} not among "
        "them, so this run cannot tell whether its pairs fall short of the paper's; the paper profile (the paper's "
        "models, on GPUs) decides it")
    return decide(_SPEC["cross_model_spearman"], pairs[worst]["rho"], interval=tuple(pairs[worst]["ci95"]),
                  statistic=f"smallest Spearman ρ over the model pairs ({worst}) of the held-out core coordinates, each "
                            "model at its chosen layer, 95 % bootstrap interval" + (
                                f" (authors' code on their sentences, this pair: {theirs_rho})"
                                if theirs_rho is not None else ""),
                  null=[Null(f"one model's prompts shuffled (99th percentile of {f.n_boot} shuffles)",
                             _r(f.spearman_nulls[worst]["shuffled"])),
                        Null(f"random unit directions in both models (largest of "
                             f"{len(f.nulls[a].last.directions)} pairs)", _r(f.spearman_nulls[worst]["random"])),
                        Null("the difference-of-means directions of both models", _r(diff_rho))],
                  undecided=undecided,
                  why="the book asks every pair ≥ 0.8; the paper's 0.93 is its best pair, among larger models")


def _authors_claims(f: Findings) -> list[Claim]:
    """Return the claims on the authors' sentences: the flawed ones, each model's comparison, the cross-model ρ."""
    authors, their, comparison = f.authors, f.their, f.comparison
    full = their is not None and (f.n_authors is None or f.n_authors >= max(len(their.train), len(their.test)))
    subset_why = None if full else (f"n_authors = {f.n_authors}: a subset of their split, while the authors' numbers "
                                    "are on all of it (the cpu profile uses every sentence)")
    out = []
    if their is not None:
        out.append(reported(_SPEC["authors_sentences_flawed"],
                            {"flawed": their.flawed(), "of": len(their.kinds), **their.counts()}))
    for name, c in comparison.items():
        rec = authors["models"][name]
        worst = max(c.max_diff, abs(c.base - rec["base_auroc"]))
        out += [
            decide(_spec("authors_sentences_same_numbers[{model}]", name), _r(worst), undecided=subset_why),
            reported(_spec("authors_sentences_ablations[{model}]", name),
                     {"layer": c.layer, **{k: _r(v) for k, v in c.at_layer.items()}},
                     authors={"layer": rec["chosen_layer"], "keep_only": rec["keep_only_auroc"],
                              "remove": rec["remove_auroc"], "flip": rec["flip_auroc"]}),
            reported(_spec("authors_sentences_last_layer[{model}]", name),
                     {recipe: {"core_auroc": _r(c.core_auroc[recipe]), **{k: _r(v) for k, v in lr.items()}}
                      for recipe, lr in c.last.items()},
                     statistic=f"layer {c.measured.n_layers}, the authors' recipe (post_norm) vs this chapter's "
                               f"(block_output); base AUROC {c.base:.3f}"),
            reported(_spec("authors_sentences_base_auroc_well_formed[{model}]", name),
                     {"auroc": _r(c.base_well_formed), "of": c.n_well_formed, "all": _r(c.base)}),
        ]
    if len(comparison) > 1:
        a_, b_ = list(comparison)[:2]
        rho_t = recipe_spearman(comparison[a_], comparison[b_])
        theirs = authors["cross_model_spearman"][f"{a_} ~ {b_}"]
        out.append(decide(_spec("cross_model_spearman_authors_sentences", bound=equal_to(theirs, 0.01)),
                          _r(rho_t["post_norm"]), authors=theirs, undecided=subset_why,
                          statistic="cross-model Spearman ρ on their held-out sentences with their recipe (post_norm), "
                                    "each model at its lowest held-out flip layer, against the authors' code "
                                    f"(block_output recipe: {rho_t['block_output']:.4f})"))
    return out


def claims(findings: Findings) -> list[Claim]:
    """Return chapter 04's claims decided on ``findings``, in the notebook's order: each model's block, the cross-model
    Spearman (two models or more), then the claims on the authors' sentences."""
    out = [claim for name in findings.models for claim in _model_claims(findings, name)]
    if len(findings.models) > 1:
        out.append(_cross_model_claim(findings))
    return out + _authors_claims(findings)


#: The most prompts (train and test together) a run of 04 draws: ten times the paper's 1,200, drawn in seconds.
MAX_PROMPTS = 12_000


def check_inputs(params: dict) -> None:
    """Check chapter 04's parameters: even prompt counts within :data:`MAX_PROMPTS`, models without repeats, a dtype the
    loader takes, the size of the largest model's weights."""
    nb = "04_llm_agreement_axis"
    for name in ("n_train", "n_test"):
        require(params[name] >= 2 and params[name] % 2 == 0, nb, name, params[name],
                "an even number of prompts ≥ 2 (half singular, half plural)")
    require(params["n_train"] + params["n_test"] <= MAX_PROMPTS, nb, "n_train", params["n_train"],
            f"n_train + n_test ≤ {MAX_PROMPTS:,} distinct prompts (the paper's split is 600 / 600), got "
            f"{params['n_train']:,} + {params['n_test']:,}")
    distinct(nb, "models", params["models"], "a list of models without repeats")
    for name in params["models"]:
        loadable_model(nb, "models", name)
    require(params["dtype"] in MODEL_DTYPES, nb, "dtype", params["dtype"],
            f"one of {', '.join(MODEL_DTYPES)} (auto: bfloat16 on a CUDA device, float32 elsewhere)")
    width = 2 if params["dtype"] in ("bfloat16", "float16") else 4    # auto: float32 on a CPU
    needs = [need for name in params["models"] for need in language_model(name, "models", width)]
    if needs:
        fits(nb, params, [max(needs, key=lambda need: need.bytes)])
