"""Merging two trained one-layer transformers: interpolation paths and barriers, the permutation and rotation symmetries
of a LayerNorm-free model, Git Re-Basin, alignment of residual-stream subspaces, and stitching.

Each function works on one model's parameters (a dict name → tensor, the names of
:class:`~corekit.models.BatchedTransformer`'s ``params`` without the leading model dimension):

- linear interpolation of two models' weights, every α of a path evaluated in one batched forward pass
  (:func:`path_metrics`) and its barrier (:func:`barrier`; linear mode connectivity, Frankle et al. 2020);
- weight matching with the stream's basis fixed: the permutation of B's MLP units and attention heads that best
  matches A's weights (:func:`match_units`), applied by :func:`permute_units` (a model's function does not change);
  it is not Git Re-Basin, which permutes the residual stream too (below);
- rotations of the residual stream (:func:`rotate_stream`: the function of a LayerNorm-free model does not change)
  that carry a subspace of B's stream onto one of A's (:func:`block_rotation`: B's core onto A's core, or B's top
  principal components onto A's), and a random one (:func:`random_rotation`) as the null;
- stitching (Bansal, Nakkiran & Barak 2021): A up to its MLP, a rank-r linear map from A's coordinates in one
  subspace into B's, then B's MLP and unembedding (:func:`stitch_accuracy`);
- the published Git Re-Basin baselines (Ainsworth, Hayase & Srinivasa 2023) with the residual stream permuted too:
  weight matching by alternating linear assignments (:func:`rebasin_weight_matching`) and activation matching
  (:func:`rebasin_activation_matching`), applied by :func:`permute_model`;
- the whole symmetry group of a LayerNorm-free transformer (:func:`symmetry_alignment`): a rotation of the stream
  (:func:`stream_rotation`, fitted on every residual point or by the core / PCA / random constructions above), MLP
  units and heads permuted, and each head's two within-head orthogonal maps (:func:`align_heads`); every
  construction at once is :func:`alignments`, their paths :func:`alignment_paths`.
"""
from __future__ import annotations

import math
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

    The chapter's first variant of weight matching (Ainsworth et al. 2023), with the residual basis fixed (Git
    Re-Basin permutes the stream too: :func:`rebasin_weight_matching`): a unit's weights are its W_in column,
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
    """Return the orthogonal O (..., k, k) minimising ‖x O − y‖ for x, y (..., N, k) (batched over leading dims)."""
    u, _, vh = torch.linalg.svd(x.mT @ y)
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




# ---------------------------------------------------------------------------------------------------------------------
# Git Re-Basin with the residual permutation (Ainsworth, Hayase & Srinivasa 2023), and the whole symmetry group.
#
# Convention (that of :func:`permute_units`): a permutation ``perm`` of n indices puts B's index perm[j] at index j, so
# the aligned B's stream coordinate, MLP unit or head j is B's perm[j], matched to A's j.

#: Parameters indexed by the residual stream on their last axis (the writers, and LayerNorm gains and biases, which act
#: coordinate-wise); the READERS are indexed by it on their second-to-last axis.
STREAM_LAST = WRITERS + ("ln1_w", "ln1_b", "ln2_w", "ln2_b", "lnf_w", "lnf_b")


def _stream_axis(name: str) -> int | None:
    """Return the axis of parameter ``name`` that indexes the residual stream (−1 or −2), or None."""
    base = name.split("_", 1)[1] if name[0].isdigit() else name
    return -1 if base in STREAM_LAST else -2 if base in READERS else None


@dataclass
class StreamPermutation:
    """A permutation of a whole model: ``residual`` (D,) of its stream coordinates, per layer ``mlp`` (d_mlp,) of its
    MLP units and ``heads`` (n_heads,) of its heads; index j of the permuted model holds the original's perm[j]."""

    residual: np.ndarray
    mlp: list[np.ndarray]
    heads: list[np.ndarray]

    @classmethod
    def identity(cls, state: State) -> StreamPermutation:
        """Return the permutation that changes nothing in a model with ``state``'s shapes."""
        layers = range(_layers(state))
        return cls(np.arange(state["W_E"].shape[-1]), [np.arange(state[f"{i}_W_in"].shape[-1]) for i in layers],
                   [np.arange(state[f"{i}_W_Q"].shape[0]) for i in layers])

    def groups(self) -> list[tuple[str, int]]:
        """Return the permutation groups: ("residual", 0), then ("mlp", i) and ("heads", i) per layer."""
        return [("residual", 0)] + [(kind, i) for i in range(len(self.mlp)) for kind in ("mlp", "heads")]

    def get(self, group: tuple[str, int]) -> np.ndarray:
        """Return the permutation of one group."""
        kind, i = group
        return self.residual if kind == "residual" else getattr(self, kind)[i]

    def replaced(self, group: tuple[str, int], value: np.ndarray) -> StreamPermutation:
        """Return a copy with the permutation of ``group`` replaced by ``value``."""
        kind, i = group
        out = StreamPermutation(self.residual, list(self.mlp), list(self.heads))
        if kind == "residual":
            out.residual = value
        else:
            getattr(out, kind)[i] = value
        return out


def _group_axes(state: State, group: tuple[str, int]) -> list[tuple[str, int]]:
    """Return (parameter name, axis) for every parameter of ``state`` with an axis that ``group`` permutes."""
    kind, i = group
    if kind == "residual":
        return [(name, axis) for name in state if (axis := _stream_axis(name)) is not None]
    axes = {"mlp": [(f"{i}_W_in", -1), (f"{i}_b_in", -1), (f"{i}_W_out", 0)],
            "heads": [(f"{i}_{w}", 0) for w in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V")]}[kind]
    return [(name, axis) for name, axis in axes if name in state]


def permute_model(state: State, perm: StreamPermutation) -> dict[str, Tensor]:
    """Return ``state`` with its stream coordinates, MLP units and heads put in the order ``perm`` (the same function)."""
    out = dict(state)
    for group in perm.groups():
        index = torch.as_tensor(np.asarray(perm.get(group)), dtype=torch.long)
        for name, axis in _group_axes(state, group):
            out[name] = out[name].index_select(axis % out[name].dim(), index.to(out[name].device))
    return out


def _group_cost(a: State, b: State, group: tuple[str, int]) -> np.ndarray:
    """Return C (n, n): C[j, k] = Σ over the group's parameters of ⟨A's slice j, B's slice k⟩ along the permuted axis."""
    cost = 0
    for name, axis in _group_axes(a, group):
        x, y = (s[name].detach().double().movedim(axis, 0) for s in (a, b))
        cost = cost + x.reshape(len(x), -1) @ y.reshape(len(y), -1).T
    return cost.cpu().numpy()


def weight_inner_product(a: State, b: State) -> float:
    """Return Σ over parameters of the Frobenius inner product ⟨W_A, W_B⟩ (the weight-matching objective)."""
    return float(sum((a[k].detach().double() * b[k].detach().double()).sum() for k in a))


def rebasin_weight_matching(a: State, b: State, max_iter: int = 100,
                            seed: int = 0) -> tuple[StreamPermutation, list[float]]:
    """Return (the permutation of B maximising Σ ⟨W_A, π(W_B)⟩, the objective initially and after each update).

    Git Re-Basin weight matching (Ainsworth et al. 2023, their Algorithm 1): one permutation of the residual stream
    shared by every parameter that reads or writes it, and per layer one of the MLP units and one of the heads. Each
    sweep visits the groups in a seeded random order and solves each one's linear assignment (scipy's
    ``linear_sum_assignment``) with the others fixed, keeping a new permutation only when it raises the objective
    (by more than 1e-12 of the cost matrix's size, so float64 ties never cycle): the objective never decreases. It
    stops after a sweep that changes nothing, or after ``max_iter`` sweeps. Apply the result with
    :func:`permute_model`.
    """
    perm = StreamPermutation.identity(b)
    groups = perm.groups()
    rng = np.random.default_rng(seed)
    objective = [weight_inner_product(a, b)]
    for _ in range(max_iter):
        changed = False
        for g in rng.permutation(len(groups)):
            group = groups[g]
            n = len(perm.get(group))
            cost = _group_cost(a, permute_model(b, perm.replaced(group, np.arange(n))), group)
            new = linear_sum_assignment(cost, maximize=True)[1]
            rows = np.arange(n)
            gain = cost[rows, new].sum() - cost[rows, perm.get(group)].sum()
            if gain > 1e-12 * np.abs(cost).sum():
                perm, changed = perm.replaced(group, new), True
            objective.append(weight_inner_product(a, permute_model(b, perm)))
        if not changed:
            break
    return perm, objective


@dataclass
class Activations:
    """A LayerNorm-free model's activations on tokens (N, T), in float64: ``streams`` (2L + 1, N, T, D) every residual
    point (after the embedding, then after each layer's attention and after its MLP), per layer ``hidden``
    (N, T, d_mlp) the MLP's activations after the ReLU and ``heads`` (H, N, T, D) each head's output in the stream
    (without b_O)."""

    streams: Tensor
    hidden: list[Tensor]
    heads: list[Tensor]


def activations(config: TransformerConfig, state: State, tokens: Tensor) -> Activations:
    """Return the :class:`Activations` of the LayerNorm-free model ``state`` (with ``config``) on tokens (N, T)."""
    if config.norm != "none":
        raise ValueError(f"config.norm: expected a LayerNorm-free model (norm='none'), got {config.norm!r}")
    s = {k: v.detach().double() for k, v in state.items()}
    tokens = tokens.to(s["W_E"].device)
    T = tokens.shape[-1]
    x = s["W_E"][tokens] + s["W_pos"][:T]                                              # (N, T, D)
    streams, hidden, heads = [x], [], []
    for i in range(config.n_layers):
        def project(w: str) -> Tensor:                                                 # (N, H, T, e)
            out = torch.einsum("ntd,hde->nhte", x, s[f"{i}_W_{w}"])
            return out if f"{i}_b_{w}" not in s else out + s[f"{i}_b_{w}"][None, :, None, :]
        scores = project("Q") @ project("K").transpose(-1, -2) / math.sqrt(config.d_head)
        if config.causal:
            scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
        per_head = torch.einsum("nhte,hed->hntd", scores.softmax(-1) @ project("V"), s[f"{i}_W_O"])
        x = x + per_head.sum(0) + s.get(f"{i}_b_O", 0)
        streams.append(x)
        hidden.append(F.relu(x @ s[f"{i}_W_in"] + s.get(f"{i}_b_in", 0)))
        x = x + hidden[-1] @ s[f"{i}_W_out"] + s.get(f"{i}_b_out", 0)
        streams.append(x)
        heads.append(per_head)
    return Activations(torch.stack(streams), hidden, heads)


def _cosines(x: Tensor, y: Tensor) -> np.ndarray:
    """Return (n, n) the cosines between the rows of x and of y (n, K); a zero row has cosine 0 with everything."""
    unit = lambda z: z / z.norm(dim=1, keepdim=True).clamp_min(torch.finfo(z.dtype).tiny)  # noqa: E731
    return (unit(x) @ unit(y).T).cpu().numpy()


def _correlations(x: Tensor, y: Tensor) -> np.ndarray:
    """Return (n, n) the correlations between the columns of x and of y (N, n); a constant column correlates 0."""
    return _cosines((x - x.mean(0)).T, (y - y.mean(0)).T)


def rebasin_activation_matching(a: State, b: State, config: TransformerConfig, tokens: Tensor) -> StreamPermutation:
    """Return the permutation of B whose activations best correlate with A's on tokens (N, T), one assignment a group.

    Git Re-Basin activation matching (Ainsworth et al. 2023) with the residual permutation: the stream coordinates by
    the correlations of the two models' streams over every (residual point, input, position); per layer the MLP units
    by the correlations of their post-ReLU activations over every (input, position); the heads by the correlation of
    each head's centred output in the stream (N·T·D numbers, B's put in A's coordinates by the residual permutation).
    Each group is one ``linear_sum_assignment``. Apply the result with :func:`permute_model`.
    """
    act_a, act_b = activations(config, a, tokens), activations(config, b, tokens)
    assign = lambda score: linear_sum_assignment(score, maximize=True)[1]               # noqa: E731
    D = act_a.streams.shape[-1]
    residual = assign(_correlations(act_a.streams.reshape(-1, D), act_b.streams.reshape(-1, D)))
    mlp = [assign(_correlations(x.flatten(0, 1), y.flatten(0, 1))) for x, y in zip(act_a.hidden, act_b.hidden)]
    centred = lambda h: (h - h.mean((1, 2), keepdim=True)).flatten(1)                   # noqa: E731
    heads = [assign(_cosines(centred(x), centred(y[..., torch.as_tensor(residual, device=y.device)])))
             for x, y in zip(act_a.heads, act_b.heads)]
    return StreamPermutation(residual, mlp, heads)


def _augmented(state: State, i: int, w: str) -> Tensor:
    """Return layer i's [W_w; b_w] (H, D + 1, e) in float64 (a zero bias row when the model has none)."""
    W = state[f"{i}_W_{w}"].detach().double()
    b = state.get(f"{i}_b_{w}")
    return torch.cat([W, torch.zeros_like(W[:, :1]) if b is None else b.detach().double()[:, None, :]], 1)


def head_forms(state: State, i: int) -> tuple[Tensor, Tensor]:
    """Return layer i's per-head query-key forms [W_Q; b_Q][W_K; b_K]ᵀ (H, D + 1, D + 1) and value-output maps
    [W_V; b_V] W_O (H, D + 1, D): what a head computes, unchanged by its within-head orthogonal maps."""
    return (_augmented(state, i, "Q") @ _augmented(state, i, "K").mT,
            _augmented(state, i, "V") @ state[f"{i}_W_O"].detach().double())


def match_heads(a: State, b: State) -> list[np.ndarray]:
    """Return per layer the order of B's heads (n_heads,) maximising Σ_h ⟨QK_A[h], QK_B[π h]⟩ + ⟨OV_A[h], OV_B[π h]⟩.

    The inner products are of :func:`head_forms`, so the match does not depend on the within-head maps (which make
    :func:`match_units`' inner products of the raw W_Q, W_K, W_V, W_O slices arbitrary); the stream bases of A and B
    must already agree.
    """
    out = []
    for i in range(_layers(a)):
        score = sum(x.flatten(1) @ y.flatten(1).T for x, y in zip(head_forms(a, i), head_forms(b, i)))
        out.append(linear_sum_assignment(score.cpu().numpy(), maximize=True)[1])
    return out


def align_heads(a: State, b: State, match: bool = True) -> dict[str, Tensor]:
    """Return B with its heads matched to A's (:func:`match_heads`, unless ``match`` is False: head h is A's h) and
    each head's within-head orthogonal maps fitted to A's (the same function as B).

    Per head, M (e, e) is the orthogonal Procrustes map of B's stacked [W_Q; W_K; b_Q; b_K] onto A's, applied as
    W_Q, W_K, b_Q, b_K ↦ (·) M (queries·keys unchanged), and N (e, e) that of [W_V; b_V; W_Oᵀ], applied as
    W_V, b_V ↦ (·) N and W_O ↦ Nᵀ W_O (a head's output unchanged).
    """
    if match:
        layers = range(_layers(b))
        b = permute_units(b, UnitPermutation([np.arange(b[f"{i}_W_in"].shape[-1]) for i in layers], match_heads(a, b)))
    out = dict(b)
    for i in range(_layers(b)):
        def stacked(s: State, names: tuple[str, ...]) -> Tensor:                       # (H, rows, e)
            parts = {"Q": _augmented(s, i, "Q"), "K": _augmented(s, i, "K"), "V": _augmented(s, i, "V"),
                     "O": s[f"{i}_W_O"].detach().double().mT}
            return torch.cat([parts[n] for n in names], 1)
        M = _procrustes(stacked(b, ("Q", "K")), stacked(a, ("Q", "K")))                # (H, e, e)
        N = _procrustes(stacked(b, ("V", "O")), stacked(a, ("V", "O")))
        for w, R in (("Q", M), ("K", M), ("V", N)):
            out[f"{i}_W_{w}"] = (b[f"{i}_W_{w}"].double() @ R).to(b[f"{i}_W_{w}"].dtype)
            if f"{i}_b_{w}" in b:
                out[f"{i}_b_{w}"] = torch.einsum("he,hef->hf", b[f"{i}_b_{w}"].double(), R).to(b[f"{i}_b_{w}"].dtype)
        out[f"{i}_W_O"] = (N.mT @ b[f"{i}_W_O"].double()).to(b[f"{i}_W_O"].dtype)
    return out


#: The constructions of the stream rotation that :func:`stream_rotation` offers.
ROTATION_BASES = ("procrustes", "core", "pca", "random")


#: Where the core and PCA rotations are fitted: the final stream at the last position, or every residual point and
#: position (:func:`activations`).
ROTATION_POSITIONS = ("last", "all")


def _all_streams(config: TransformerConfig, state: State, tokens: Tensor) -> Tensor:
    """Return the model's streams at every residual point and position on tokens (N, T), each point centred over its
    N·T rows, stacked (P·N·T, D) in float64."""
    s = activations(config, state, tokens).streams
    return (s - s.mean((1, 2), keepdim=True)).reshape(-1, s.shape[-1])


def stream_rotation(a: State, b: State, config: TransformerConfig, tokens: Tensor, basis: str = "procrustes",
                    rank: int | None = None, n_classes: int | None = None, seed: int = 0,
                    positions: str = "last") -> Tensor:
    """Return an orthogonal R (D, D) (float64) carrying B's residual stream towards A's, for :func:`rotate_stream`.

    ``basis`` picks the construction: "procrustes", the orthogonal Procrustes map of B's streams onto A's at every
    residual point and position on tokens (N, T) (:func:`activations`; each point centred over its N·T rows, the
    points stacked); "core" or "pca", :func:`block_rotation` through the two models' ACE cores of the final stream at
    the last position (under their first ``n_classes``, default all, centred logits) or their top principal components,
    of rank ``rank``, its Procrustes maps fitted on the final stream at the last position (``positions="last"``, the
    chapter's first construction) or on every residual point and position (``"all"``, where PCA is of those streams
    too); "random", :func:`random_rotation` from ``seed`` (the null).
    """
    if positions not in ROTATION_POSITIONS:
        raise ValueError(f"positions: expected one of {ROTATION_POSITIONS}, got {positions!r}")
    if basis == "random":
        return random_rotation(config.d_model, seed)
    if basis == "procrustes":
        streams = [_all_streams(config, x, tokens) for x in (a, b)]
        return _procrustes(streams[1], streams[0])
    if basis in ("core", "pca"):
        if rank is None:
            raise ValueError(f"rank: the {basis!r} rotation needs the rank of the subspaces it aligns")
        h, core = final_stream_core(stacked_model(config, [a, b]), tokens.to(a["W_E"].device),
                                    n_classes or config.out_vocab)
        if positions == "all":
            h = torch.stack([_all_streams(config, x, tokens) for x in (a, b)])
        q = core.q(rank) if basis == "core" else torch.stack([principal_components(x, rank) for x in h])
        return block_rotation(h[0], h[1], q[0], q[1])
    raise ValueError(f"basis: expected one of {ROTATION_BASES}, got {basis!r}")


def symmetry_alignment(a: State, b: State, config: TransformerConfig, tokens: Tensor, basis: str = "procrustes",
                       rank: int | None = None, n_classes: int | None = None, seed: int = 0,
                       positions: str = "all") -> dict[str, Tensor]:
    """Return B aligned to A over the whole symmetry group of a LayerNorm-free transformer (the same function as B).

    (i) The stream rotated by :func:`stream_rotation` (``basis``, ``rank``, ``n_classes``, ``seed``, ``positions`` go
    to it), (ii) MLP units matched by :func:`match_units` and heads by :func:`match_heads`, (iii) each head's
    within-head maps fitted by :func:`align_heads`.
    """
    R = stream_rotation(a, b, config, tokens, basis, rank, n_classes, seed, positions)
    rotated = rotate_stream(b, R, config)
    matched = permute_units(rotated, UnitPermutation(match_units(a, rotated).mlp, match_heads(a, rotated)))
    return align_heads(a, matched, match=False)


#: The alignments of B to A that :func:`alignments` returns, in the chapter's order: as trained; the weight matchings
#: (units and heads with the stream fixed, Git Re-Basin with the stream permuted, then with the heads aligned inside;
#: activation matching); the core construction step by step (the chapter's first construction: the core rotation at
#: the last position, then units matched; + heads aligned inside; + the rotation fitted at every position); and the
#: last step with the core replaced by the top principal components, a whole-stream Procrustes and random rotations.
ALIGNMENTS = ("naive", "units", "rebasin", "rebasin + heads", "activations", "core, last position",
              "core + heads, last position", "core, full", "pca, full", "procrustes, full", "random, full")


def alignments(a: State, b: State, config: TransformerConfig, tokens: Tensor, rank: int, n_classes: int,
               random_seeds: Sequence[int] = (0,)) -> dict[str, dict[str, Tensor] | list[dict[str, Tensor]]]:
    """Return {name: B aligned to A} for every name of :data:`ALIGNMENTS` (each the same function as B), the "random,
    full" entry a list, one alignment per seed of ``random_seeds``; cores and components of rank ``rank``, cores under
    the first ``n_classes`` logits, streams on tokens (N, T)."""
    core_last = stream_rotation(a, b, config, tokens, "core", rank, n_classes, positions="last")
    rebasin = permute_model(b, rebasin_weight_matching(a, b)[0])
    full = lambda basis, seed=0: symmetry_alignment(a, b, config, tokens, basis, rank, n_classes, seed)  # noqa: E731
    out = {"naive": dict(b), "units": aligned(a, b, config), "rebasin": rebasin,
           "rebasin + heads": align_heads(a, rebasin),
           "activations": permute_model(b, rebasin_activation_matching(a, b, config, tokens)),
           "core, last position": aligned(a, b, config, core_last),
           "core + heads, last position": symmetry_alignment(a, b, config, tokens, "core", rank, n_classes,
                                                             positions="last"),
           "core, full": full("core"), "pca, full": full("pca"), "procrustes, full": full("procrustes"),
           "random, full": [full("random", seed) for seed in random_seeds]}
    return out


def alignment_paths(config: TransformerConfig, a: State, variants: Mapping[str, State | Sequence[State]],
                    alphas: Sequence[float], tokens: Tensor, labels: Tensor,
                    n_classes: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Return {name: (accuracy (A,), loss (A,))} along the path from A to each aligned B of ``variants``
    (:func:`alignments`); for a list of alignments (the random rotations) the path with the smallest accuracy barrier."""
    out = {}
    for name, value in variants.items():
        paths = [path_metrics(config, a, b, alphas, tokens, labels, n_classes)
                 for b in (value if isinstance(value, (list, tuple)) else [value])]
        acc, loss = min(paths, key=lambda path: barrier(path[0].cpu().numpy(), alphas))
        out[name] = (acc.cpu().numpy(), loss.cpu().numpy())
    return out


def function_change(config: TransformerConfig, b: State, variants: Mapping[str, State | Sequence[State]],
                    tokens: Tensor, n_classes: int) -> float:
    """Return the largest change of B's logits (at the last position, first ``n_classes``) under any alignment of
    ``variants``, relative to their largest value: 0 up to rounding when every alignment keeps B's function."""
    stack = [s for value in variants.values() for s in (value if isinstance(value, (list, tuple)) else [value])]
    with torch.no_grad():
        logits = stacked_model(config, [b, *stack])(tokens, last=1)[:, :, -1, :n_classes]      # (1 + V, N, C)
    return float((logits[1:] - logits[0]).abs().max() / logits[0].abs().max())
