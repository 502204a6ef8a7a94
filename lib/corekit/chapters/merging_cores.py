"""Chapter 09: merging two trained transformers by their algorithmic cores instead of their weights.

The ACE paper observes that models trained from different seeds compute one algorithm in nearly orthogonal
subspaces of their residual streams (chapter 01: projector overlaps at the random level, CCA near 1) and suggests
that aligning cores rather than weights could be a principled basis for recombining models. The chapter tests
that on chapter 06's one-layer, LayerNorm-free transformers (:meth:`corekit.models.TransformerConfig.entk_authors`),
with the methods below, each on one model's parameters (a dict name → tensor, the names of
:class:`~corekit.models.BatchedTransformer`'s ``params`` without the leading model dimension):

- linear interpolation of two models' weights, every α of a path evaluated in one batched forward pass
  (:func:`path_metrics`) and its barrier (:func:`barrier`; linear mode connectivity, Frankle et al. 2020);
- weight matching (Ainsworth et al. 2023): the permutation of B's MLP units and attention heads that best matches
  A's weights (:func:`match_units`), applied by :func:`permute_units` (a model's function does not change);
- rotations of the residual stream (:func:`rotate_stream`: the function of a LayerNorm-free model does not change)
  that carry a subspace of B's stream onto one of A's (:func:`block_rotation`: B's core onto A's core, or B's top
  principal components onto A's), and a random one (:func:`random_rotation`) as the null;
- stitching (Bansal, Nakkiran & Barak 2021): A up to its MLP, a rank-r linear map from A's coordinates in one
  subspace into B's, then B's MLP and unembedding (:func:`stitch_accuracy`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from scipy.optimize import linear_sum_assignment
from torch import Tensor

from corekit import ace
from corekit.models import BatchedTransformer, TransformerConfig

State = Mapping[str, Tensor]


def model_states(model: BatchedTransformer) -> list[dict[str, Tensor]]:
    """Return each model's parameters {name: tensor without the model dimension}, detached copies."""
    return [{k: v.detach()[m].clone() for k, v in model.params.items()} for m in range(model.n_models)]


def stacked_model(config: TransformerConfig, states: Sequence[State]) -> BatchedTransformer:
    """Return a BatchedTransformer of len(states) models holding ``states`` (in eval mode, on their device and dtype)."""
    if not states:
        raise ValueError("states: expected at least one model's parameters")
    first = next(iter(states[0].values()))
    model = BatchedTransformer(config, seeds=list(range(len(states)))).to(first.device, first.dtype)
    names = set(model.params)
    for i, state in enumerate(states):
        if set(state) != names:
            raise ValueError(f"states[{i}]: parameters {sorted(set(state) ^ names)} do not match the config's")
    with torch.no_grad():
        for name, param in model.params.items():
            param.copy_(torch.stack([s[name] for s in states]))
    return model.eval()


def interpolate(a: State, b: State, alpha: float) -> dict[str, Tensor]:
    """Return the parameters (1 − α)·a + α·b."""
    return {k: (1 - alpha) * a[k] + alpha * b[k] for k in a}


def logits_and_metrics(model: BatchedTransformer, tokens: Tensor, labels: Tensor,
                       n_classes: int) -> tuple[Tensor, Tensor, Tensor]:
    """Return (logits (M, N, n_classes) at the last position, accuracy (M,), mean cross-entropy (M,)) on labels (N,)."""
    with torch.no_grad():
        logits = model(tokens, last=1)[:, :, -1, :n_classes]
        loss = F.cross_entropy(logits.transpose(1, 2), labels.expand(logits.shape[0], -1), reduction="none").mean(-1)
        accuracy = (logits.argmax(-1) == labels).double().mean(-1)
    return logits, accuracy, loss


def path_metrics(config: TransformerConfig, a: State, b: State, alphas: Sequence[float], tokens: Tensor,
                 labels: Tensor, n_classes: int) -> tuple[Tensor, Tensor]:
    """Return (accuracy (A,), loss (A,)) of the interpolated models at every α of ``alphas``, evaluated together."""
    model = stacked_model(config, [interpolate(a, b, float(alpha)) for alpha in alphas])
    _, accuracy, loss = logits_and_metrics(model, tokens, labels, n_classes)
    return accuracy, loss


def barrier(values: Tensor | np.ndarray, alphas: Sequence[float], higher_is_better: bool = True) -> float:
    """Return the largest shortfall of ``values`` (A,) along a path from the straight line between its endpoints.

    For accuracy (``higher_is_better``) the drop below the line, for a loss the rise above it; 0 when the path
    never falls short (linear mode connectivity).
    """
    v = np.asarray(values, dtype=float) * (1 if higher_is_better else -1)
    t = np.asarray(alphas, dtype=float)
    if v.shape != t.shape or len(t) < 2 or t[0] != 0 or t[-1] != 1:
        raise ValueError(f"alphas: expected a grid from 0 to 1 as long as values ({len(v)}), got {list(t)}")
    line = (1 - t) * v[0] + t * v[-1]
    return float(max(0.0, (line - v).max()))


@dataclass
class UnitPermutation:
    """Per layer, the order of B's MLP units (d_mlp,) and attention heads (n_heads,) that lines them up with A's."""

    mlp: list[np.ndarray]
    heads: list[np.ndarray]


def _layers(state: State) -> int:
    return sum(1 for k in state if k.endswith("_W_in"))


def match_units(a: State, b: State) -> UnitPermutation:
    """Return the permutation of B's MLP units and heads that maximises their weights' inner products with A's, per layer.

    Weight matching (Ainsworth et al. 2023) with the residual basis fixed: a unit's weights are its W_in column,
    its W_out row (and b_in); a head's its W_Q, W_K, W_V, W_O slices (and query, key, value biases); each layer is
    one linear assignment problem (scipy's ``linear_sum_assignment``).
    """
    mlp, heads = [], []
    for i in range(_layers(a)):
        unit_parts = [(f"{i}_W_in", lambda w: w.T), (f"{i}_W_out", lambda w: w), (f"{i}_b_in", lambda w: w[:, None])]
        head_parts = [(f"{i}_W_{x}", lambda w: w.flatten(1)) for x in ("Q", "K", "V", "O")]
        head_parts += [(f"{i}_b_{x}", lambda w: w) for x in ("Q", "K", "V")]
        for parts, out in ((unit_parts, mlp), (head_parts, heads)):
            score = sum(view(a[k]).double() @ view(b[k]).double().T for k, view in parts if k in a)   # (n, n)
            out.append(linear_sum_assignment(score.cpu().numpy(), maximize=True)[1])
    return UnitPermutation(mlp, heads)


def permute_units(state: State, perm: UnitPermutation) -> dict[str, Tensor]:
    """Return ``state`` with each layer's MLP units and heads put in the order ``perm`` (the same function)."""
    out = dict(state)
    for i, (units, heads) in enumerate(zip(perm.mlp, perm.heads)):
        u, h = torch.as_tensor(units), torch.as_tensor(heads)
        out[f"{i}_W_in"] = state[f"{i}_W_in"][:, u]
        out[f"{i}_W_out"] = state[f"{i}_W_out"][u]
        for name in (f"{i}_b_in",):
            if name in state:
                out[name] = state[name][u]
        for x in ("Q", "K", "V", "O"):
            out[f"{i}_W_{x}"] = state[f"{i}_W_{x}"][h]
        for x in ("Q", "K", "V"):
            if f"{i}_b_{x}" in state:
                out[f"{i}_b_{x}"] = state[f"{i}_b_{x}"][h]
    return out


#: How each parameter of a LayerNorm-free model changes when its stream x (rows) becomes x R: writers (W_E, W_pos,
#: W_O, W_out and their biases) are multiplied by R on the right, readers (W_Q, W_K, W_V, W_in, W_U) by Rᵀ on the left.
WRITERS = ("W_E", "W_pos", "W_O", "W_out", "b_O", "b_out")
READERS = ("W_Q", "W_K", "W_V", "W_in", "W_U")


def rotate_stream(state: State, R: Tensor, config: TransformerConfig) -> dict[str, Tensor]:
    """Return the parameters of the same function with its residual stream rotated, x ↦ x R for R (D, D) orthogonal."""
    if config.norm != "none":
        raise ValueError(f"config.norm: a rotation of the stream preserves the function only without LayerNorm "
                         f"(norm='none'), got {config.norm!r}")
    R = R.to(next(iter(state.values())))
    out = {}
    for name, value in state.items():
        base = name.split("_", 1)[1] if name[0].isdigit() else name
        if base in WRITERS:
            out[name] = value @ R
        elif base in READERS:
            out[name] = torch.einsum("dc,...de->...ce", R, value)
        else:
            out[name] = value
    return out


def aligned(a: State, b: State, config: TransformerConfig, rotation: Tensor | None = None,
            match: bool = True) -> dict[str, Tensor]:
    """Return B's parameters with its stream rotated by ``rotation`` (D, D) if given, then (``match``) its MLP units
    and heads permuted to match A's weights: the same function as B, placed to be averaged with A."""
    out = dict(b) if rotation is None else rotate_stream(b, rotation, config)
    return permute_units(out, match_units(a, out)) if match else out


def _procrustes(x: Tensor, y: Tensor) -> Tensor:
    """Return the orthogonal O (k, k) minimising ‖x O − y‖ for x, y (N, k)."""
    u, _, vh = torch.linalg.svd(x.T @ y)
    return u @ vh


def _complement(q: Tensor) -> Tensor:
    """Return an orthonormal basis (D, D − r) of the orthogonal complement of the columns of q (D, r)."""
    full = torch.linalg.svd(q, full_matrices=True)[0]
    return full[:, q.shape[1]:]


def block_rotation(h_a: Tensor, h_b: Tensor, q_a: Tensor, q_b: Tensor) -> Tensor:
    """Return R (D, D) orthogonal carrying span(q_b) onto span(q_a) so that B's coordinates there match A's.

    h_a, h_b (N, D) are the two models' streams on the same inputs, q_a, q_b (D, r) orthonormal bases (cores, or
    top principal components). Inside the subspace the map is the orthogonal Procrustes solution between the
    centred coordinates (h_b − μ_b) q_b and (h_a − μ_a) q_a; the complements are matched the same way, so
    (x R) q_a = x q_b O for every stream vector x of B.
    """
    h_a, h_b, q_a, q_b = (t.double() for t in (h_a, h_b, q_a, q_b))
    c_a, c_b = h_a - h_a.mean(0), h_b - h_b.mean(0)
    p_a, p_b = _complement(q_a), _complement(q_b)
    inside = _procrustes(c_b @ q_b, c_a @ q_a)
    outside = _procrustes(c_b @ p_b, c_a @ p_a)
    return q_b @ inside @ q_a.T + p_b @ outside @ p_a.T


def random_rotation(D: int, seed: int) -> Tensor:
    """Return a Haar-random orthogonal matrix (D, D) in float64 drawn from ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    q, r = torch.linalg.qr(torch.randn(D, D, generator=gen, dtype=torch.float64))
    return q * torch.sign(torch.diagonal(r))


def principal_components(h: Tensor, r: int) -> Tensor:
    """Return the top-r principal directions (D, r) of the rows of h (N, D)."""
    centred = h.double() - h.double().mean(0)
    return torch.linalg.svd(centred, full_matrices=False)[2][:r].T


def stream_before_mlp(model: BatchedTransformer, tokens: Tensor) -> Tensor:
    """Return the stream (M, N, D) after a one-layer, LayerNorm-free model's attention, before its MLP, at the last position.

    Computed as the final stream of a copy whose MLP writes nothing (W_out = 0, b_out = 0): x + attention(x).
    """
    c = model.config
    if c.n_layers != 1 or c.norm != "none":
        raise ValueError(f"model: expected one layer without LayerNorm (chapter 06's models), got n_layers="
                         f"{c.n_layers}, norm={c.norm!r}")
    silent = [dict(s) | {"0_W_out": torch.zeros_like(s["0_W_out"])} | ({"0_b_out": torch.zeros_like(s["0_b_out"])}
                                                                        if "0_b_out" in s else {})
              for s in model_states(model)]
    with torch.no_grad():
        return stacked_model(c, silent).residual(tokens, last=1)[:, :, -1]


def mlp_readout(model: BatchedTransformer, n_classes: int):
    """Return x (M, N, D) ↦ logits (M, N, n_classes) of a one-layer model's remainder from before its MLP: the MLP
    added to the stream, then the unembedding."""
    def readout(x: Tensor) -> Tensor:
        hidden = torch.einsum("mnd,mdf->mnf", x, model.p("0.W_in"))
        if model.p("0.b_in") is not None:
            hidden = hidden + model.p("0.b_in")[:, None, :]
        out = torch.einsum("mnf,mfd->mnd", F.relu(hidden), model.p("0.W_out"))
        if model.p("0.b_out") is not None:
            out = out + model.p("0.b_out")[:, None, :]
        return model.unembed(x + out)[..., :n_classes]
    return readout


def core_before_mlp(model: BatchedTransformer, tokens: Tensor, n_classes: int) -> tuple[Tensor, ace.Core]:
    """Return (the stream before the MLP (M, N, D), its ACE core under the model's own remainder's centred logits)."""
    x = stream_before_mlp(model, tokens)
    readout = mlp_readout(model, n_classes)
    return x, ace.extract(x, ace.observability(ace.centred_logits(readout), x))


def stitch_map(x_a: Tensor, x_b: Tensor, q_a: Tensor, q_b: Tensor) -> Tensor:
    """Return the least-squares map M (r_a, r_b) from A's centred coordinates (x_a − μ_a) q_a to B's, x (N, D)."""
    z_a = (x_a - x_a.mean(0)).double() @ q_a.double()
    z_b = (x_b - x_b.mean(0)).double() @ q_b.double()
    return torch.linalg.lstsq(z_a, z_b).solution


def stitched_stream(x_a: Tensor, mean_a: Tensor, mean_b: Tensor, q_a: Tensor, q_b: Tensor, M: Tensor) -> Tensor:
    """Return B's stream rebuilt from A's: μ_b + ((x_a − μ_a) q_a M) q_bᵀ, for x_a (N, D)."""
    return (mean_b.double() + ((x_a.double() - mean_a.double()) @ q_a.double() @ M) @ q_b.double().T).to(x_a.dtype)


def stitch_accuracy(x_a: Tensor, x_b: Tensor, q_a: Tensor, q_b: Tensor, readout_b, labels: Tensor,
                    train_idx: Tensor, test_idx: Tensor, M: Tensor | None = None) -> float:
    """Return B's accuracy on ``test_idx`` when its stream before the MLP is rebuilt from A's through the subspaces.

    x_a, x_b (N, D) are the two models' streams on the same inputs; the map (fitted on ``train_idx`` by
    :func:`stitch_map` unless ``M`` is given) and the means come from the training inputs; ``readout_b`` maps a
    stream (1, n, D) to B's logits (1, n, K).
    """
    mean_a, mean_b = x_a[train_idx].mean(0), x_b[train_idx].mean(0)
    if M is None:
        M = stitch_map(x_a[train_idx], x_b[train_idx], q_a, q_b)
    x_hat = stitched_stream(x_a[test_idx], mean_a, mean_b, q_a, q_b, M)
    with torch.no_grad():
        predicted = readout_b(x_hat[None]).argmax(-1)[0]
    return float((predicted == labels[test_idx]).double().mean())


def final_stream_core(model: BatchedTransformer, tokens: Tensor, n_classes: int) -> tuple[Tensor, ace.Core]:
    """Return (the final stream at the last position (M, N, D), its ACE core under the first ``n_classes`` centred
    logits): what the rotations align."""
    with torch.no_grad():
        h = model.residual(tokens, last=1)[:, :, -1]
    return h, ace.extract(h, ace.observability(ace.centred_logits(lambda x: model.unembed(x)[..., :n_classes]), h))


def continue_training(config: TransformerConfig, parent: State, train_set, test_set, steps: int,
                      **train_kwargs) -> tuple[list[dict[str, Tensor]], object]:
    """Return (the two models' parameters, their history): two copies of ``parent`` trained on for ``steps`` steps in
    two different batch orders (corekit's seeded order for seeds 0 and 1), a fresh AdamW state each; the pair that
    shares its history, for the null of linear mode connectivity. ``train_kwargs`` go to
    :func:`corekit.train.train_ensemble`."""
    from corekit.train import train_ensemble

    model = stacked_model(config, [parent, parent])
    history = train_ensemble(model, train_set, test_set, steps=steps, batch_order="seeded", progress=False,
                             **train_kwargs)
    return model_states(model), history


def pair_difference(values: Mapping[tuple[int, int], float], same: Mapping[tuple[int, int], bool],
                    n_boot: int = 2000, seed: int = 0) -> tuple[float, tuple[float, float] | None]:
    """Return (mean over ``same`` pairs − mean over the other pairs, its 95 % bootstrap interval over models).

    ``values`` and ``same`` are keyed by ordered pairs of model indices. A resample draws the models with
    replacement and keeps the pairs of two different draws; resamples without both kinds of pair are skipped, and the
    interval is None when fewer than half of them have both.
    """
    kinds = [same[k] for k in values]
    if all(kinds) or not any(kinds):
        raise ValueError("same: expected pairs of both kinds (some sharing their keys, some not)")
    def difference(pairs: list[tuple[int, int]]) -> float | None:
        a = [values[k] for k in pairs if same[k]]
        b = [values[k] for k in pairs if not same[k]]
        return float(np.mean(a) - np.mean(b)) if a and b else None

    observed = difference(list(values))
    models = sorted({i for pair in values for i in pair})
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_boot):
        chosen = rng.choice(models, size=len(models), replace=True)
        pairs = [(i, j) for x, i in enumerate(chosen) for y, j in enumerate(chosen) if x != y and (i, j) in values]
        d = difference(pairs)
        if d is not None:
            draws.append(d)
    if len(draws) < n_boot / 2:
        return observed, None
    return observed, (float(np.quantile(draws, 0.025)), float(np.quantile(draws, 0.975)))
