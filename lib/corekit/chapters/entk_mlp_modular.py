"""eNTK features of an MLP on modular addition (notebook 05): the kernel's cliffs against Fourier features.

The kernel is the eNTK of a :class:`~corekit.models.BatchedQuadraticMLP` over all p² inputs, per weight matrix,
class-averaged (the mean of its diagonal class blocks) and summed over ``W_1`` and ``W_2``; :func:`mlp_spectrum`
gives its top eigenpairs, for the model's current parameters or a saved state. Cliff 1 is eigenvectors
1 … n_cliff and cliff 2 the next n_cliff (n_cliff = 4⌊p/2⌋, the paper's definition): :func:`cliff_alignments`
scores them against the Fourier features of a, b and of a ± b; :func:`initial_cliffs` (the kernel at a saved
state) and :func:`random_block_q99` (random orthonormal blocks) are the claims' nulls; :func:`alignment_dynamics`
follows the alignments over parameter snapshots and times their rise against the test accuracy's.
:func:`claims` decides the chapter's claims (:data:`CLAIMS`) on the run's :class:`Findings`; :func:`check_inputs`
refuses parameters that cannot make a run. :func:`train_onehot_mse` trains the MLP as :func:`~corekit.train.train_mse`
does, with gradients derived by hand for one-hot inputs (the first layer gathered and scattered by index, not
multiplied).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor
from tqdm import tqdm

from corekit import entk, subspaces
from corekit.curves import first_step_reaching, grid_spacing, snapshot_schedule, steepest_rise
from corekit.entk import Eigenpairs
from corekit.inputs import Need, fits, kernels, require
from corekit.models import BatchedQuadraticMLP
from corekit.train import BatchedAdamW, History
from corekit.verdicts import Claim, Null, Spec, at_least, at_most, decide, declared, equal_to


def onehot_columns(x: Tensor, name: str = "x") -> Tensor:
    """Return the columns of the ones (N, k) of x (N, d_in), each row k ones (ascending columns) and zeros elsewhere."""
    ones = x == 1
    if x.dim() != 2 or not bool((ones | (x == 0)).all()):
        raise ValueError(f"{name} must be (N, d_in) with entries 0 or 1 (one-hot encoded tuples, e.g. "
                         f"modular_addition(...).one_hot()), got shape {tuple(x.shape)}")
    counts = ones.sum(1)
    if len(x) == 0 or int(counts[0]) == 0 or not bool((counts == counts[0]).all()):
        raise ValueError(f"every row of {name} must hold the same positive number of ones, got counts "
                         f"{sorted(set(counts.tolist()))}")
    return ones.nonzero()[:, 1].view(len(x), int(counts[0]))


def _onehot_forward(model: BatchedQuadraticMLP, cols: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Return the scaled pre-activations s = x W_1 / √d_in, the activations h = s² (M, N, width) and the outputs
    h W_2 / width (M, N, C) of ``model`` at the one-hot inputs whose ones sit at ``cols`` (N, k).

    x W_1 is the sum of the rows ``cols`` of W_1 (one ``embedding_bag`` over the M models' stacked rows); h W_2 is
    formed as (W_2ᵀ hᵀ)ᵀ, which BLAS does 1.6× faster than h W_2 at C = 29.
    """
    W_1, W_2 = model.params["W_1"], model.params["W_2"]
    M, d_in, width = W_1.shape
    rows = (cols + d_in * torch.arange(M, device=cols.device).view(M, 1, 1)).flatten(0, 1)        # (M·N, k)
    s = F.embedding_bag(rows, W_1.view(M * d_in, width), mode="sum").view(M, len(cols), width)
    s = s.div_(math.sqrt(d_in))
    h = s.square()
    return s, h, torch.bmm(W_2.mT, h.mT).mT.div_(width)


def _mse_accuracy(out: Tensor, target: Tensor, labels: Tensor) -> tuple[list[float], list[float]]:
    """Return per-model MSE and argmax accuracy (M,) of out (M, N, C) as lists."""
    return ((out - target).square().mean(dim=(1, 2)).tolist(),
            (out.argmax(-1) == labels).float().mean(-1).tolist())


@torch.no_grad()
def train_onehot_mse(model: BatchedQuadraticMLP, x: Tensor, labels: Tensor, x_test: Tensor | None = None,
                     labels_test: Tensor | None = None, *, steps: int, lr: float | Sequence[float] = 1e-3,
                     weight_decay: float | Sequence[float] = 0.0, betas: tuple[float, float] = (0.9, 0.999),
                     eval_every: int = 10, snapshot_steps: Sequence[int] = (), progress: bool = True) -> History:
    """Return the :class:`~corekit.train.History` of :func:`~corekit.train.train_mse` (same arguments, same steps) for
    one-hot inputs x (N, d_in), with the MSE gradients derived by hand: x W_1 gathers rows of W_1 and ∂L/∂W_1
    scatters the pre-activation gradient back to them (``index_add_``, sequential on the CPU), which skips the products
    with zeros. On a GPU, where ``index_add_`` adds in no fixed order, ∂L/∂W_1 is the product xᵀ ∂L/∂(x W_1) instead,
    so that a seed repeats its run there too.

    The same AdamW (:class:`~corekit.train.BatchedAdamW`), evaluation and snapshots as ``train_mse``; the values
    differ from its autograd run only by the order of float sums.
    """
    M, device = model.n_models, model.params["W_1"].device
    if steps < 0 or eval_every < 1:
        raise ValueError(f"steps >= 0 and eval_every >= 1 required, got steps={steps}, eval_every={eval_every}")
    for name, (xs, ys) in {"x": (x, labels), "x_test": (x_test, labels_test)}.items():
        if xs is not None and (xs.dim() != 2 or xs.shape[-1] != model.d_in or ys is None or ys.shape != xs.shape[:1]):
            raise ValueError(f"{name} must be (N, {model.d_in}) and its labels (N,), got {tuple(xs.shape)} and "
                             f"{None if ys is None else tuple(ys.shape)}")
    x, labels = x.to(device), labels.to(device)
    cols = onehot_columns(x)
    x_t = x.to(model.params["W_1"].dtype).mT if device.type != "cpu" else None     # (d_in, N): ∂L/∂W_1 on a GPU
    target = F.one_hot(labels, model.d_out).to(model.params["W_1"].dtype)
    if x_test is not None:
        cols_test, labels_test = onehot_columns(x_test.to(device), "x_test"), labels_test.to(device)
        target_test = F.one_hot(labels_test, model.d_out).to(target.dtype)
    W_1, W_2 = model.params["W_1"], model.params["W_2"]
    W_1.grad, W_2.grad = torch.zeros_like(W_1), torch.zeros_like(W_2)
    per_model = {}                                               # lr and weight_decay (M,), as train_mse takes them
    for name, value in (("lr", lr), ("weight_decay", weight_decay)):
        per_model[name] = torch.as_tensor(value, dtype=torch.float32, device=device).flatten()
        if per_model[name].numel() not in (1, M):
            raise ValueError(f"{name} must be a number or a list of {M} numbers (one per model), got {value!r}")
    opt = BatchedAdamW([W_1, W_2], per_model["lr"].expand(M).clone(), per_model["weight_decay"].expand(M).clone(),
                       betas=betas)
    history, snapshot_steps = History(), set(int(s) for s in snapshot_steps)
    grad_scale = 2.0 / (target.numel() * model.width)            # ∂(mean of squares)/∂out, then out's 1/width
    act_scale = 2.0 / math.sqrt(model.d_in)                      # ∂s²/∂s, then s's 1/√d_in

    def record(step: int) -> None:
        history.steps.append(step)
        if x_test is not None:
            loss, acc = _mse_accuracy(_onehot_forward(model, cols_test)[2], target_test, labels_test)
            history.test_loss.append(loss)
            history.test_acc.append(acc)
        if step in snapshot_steps:
            history.snapshots[step] = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}

    model.train()
    record(0)
    pending = True                       # the training metrics of the last recorded step are still to come
    for step in tqdm(range(1, steps + 1), desc=f"training {M} model(s)", disable=not progress, mininterval=1.0):
        s, h, out = _onehot_forward(model, cols)                 # (M, N, width) twice, (M, N, C)
        if pending:
            loss, acc = _mse_accuracy(out, target, labels)
            history.train_loss.append(loss)
            history.train_acc.append(acc)
        g = (out - target).mul_(grad_scale)                      # ∂L/∂(h W_2) (M, N, C)
        W_2.grad.copy_(torch.bmm(g.mT, h).mT)                    # (gᵀ h)ᵀ: 2.2× faster than hᵀ g at C = 29
        ds = torch.bmm(g, W_2.mT).mul_(s).mul_(act_scale)        # ∂L/∂(x W_1) (M, N, width)
        if device.type == "cpu":
            W_1.grad.zero_()
            for j in range(cols.shape[1]):
                W_1.grad.index_add_(1, cols[:, j], ds)
        else:
            torch.matmul(x_t, ds, out=W_1.grad)
        opt.step()
        pending = step % eval_every == 0 or step == steps or step in snapshot_steps
        if pending:
            record(step)
    if pending:
        loss, acc = _mse_accuracy(_onehot_forward(model, cols)[2], target, labels)
        history.train_loss.append(loss)
        history.train_acc.append(acc)
    model.eval()
    return history


def mlp_spectrum(model: BatchedQuadraticMLP, X: Tensor, k: int, state: Mapping[str, Tensor] | None = None,
                 dtype: torch.dtype = torch.float64, device=None) -> Eigenpairs:
    """Return the top-``k`` eigenpairs (vectors (N, k)) of the class-averaged eNTK (N, N) of ``model`` (or of its saved
    ``state``) on the inputs X (N, 2p), summed over W_1 and W_2, computed in ``dtype`` on ``device`` (default: X's, also
    for a ``state`` saved on another device)."""
    fm = entk.functional_mlp(model, state=state).to(dtype, X.device if device is None else device)
    per_layer = entk.kernels(fm, X.to(dtype), mode="class_mean")             # {"W_1": (N, N), "W_2": (N, N)}
    return entk.top_eigenpairs(entk.total(per_layer), k)


def cliff_alignments(vectors: Tensor, n_cliff: int, F_ab: Tensor, F_sum: Tensor, F_diff: Tensor) -> dict[str, float]:
    """Return {"ab": cliff 1 (eigenvectors 1 … n_cliff of ``vectors`` (N, k)) against F_ab (N, m), "sum" and "diff":
    cliff 2 (the next n_cliff) against F_sum and F_diff}, each as the alignment's fraction of its maximum."""
    Q1 = vectors[:, 1:1 + n_cliff]
    Q2 = vectors[:, 1 + n_cliff:1 + 2 * n_cliff]
    return dict(ab=subspaces.alignment(Q1, F_ab), sum=subspaces.alignment(Q2, F_sum),
                diff=subspaces.alignment(Q2, F_diff))


def initial_cliffs(model: BatchedQuadraticMLP, state: Mapping[str, Tensor], X: Tensor, k: int, n_cliff: int,
                   F_ab: Tensor, F_sum: Tensor, F_diff: Tensor) -> dict[str, float]:
    """Return the float64 kernel of ``state`` (top ``k`` pairs) scored as the trained one: its detected cliff sizes
    ("cliff1_size", "cliff2_size", from the two largest eigenvalue ratios after the top one), the two detected edges
    ("edge1" < "edge2") and :func:`cliff_alignments` ("ab", "sum", "diff")."""
    eig_0 = mlp_spectrum(model, X, k, state=state)
    edge1_0, edge2_0 = entk.cliff_edges(eig_0.values, n_edges=2, start=1)
    return dict(cliff1_size=edge1_0 - 1, cliff2_size=edge2_0 - edge1_0, edge1=edge1_0, edge2=edge2_0,
                **cliff_alignments(eig_0.vectors, n_cliff, F_ab, F_sum, F_diff))


def random_block_q99(D: int, r: int, features: Mapping[str, Tensor], n: int = 200, seed: int = 0) -> dict[str, float]:
    """Return {name: the 99th percentile of the alignment of ``n`` seeded random orthonormal blocks (D, r) with the
    features (D, m) of that name}."""
    random_blocks = subspaces.random_orthonormal(D, r, n, seed=seed)                  # (n, D, r)
    return {name: float(np.quantile([subspaces.alignment(Q, F) for Q in random_blocks], 0.99))
            for name, F in features.items()}


@dataclass
class AlignmentDynamics:
    """The snapshot epochs (S,), cliff 1's alignment with the a, b features (S,) and cliff 2's with the a ± b features
    (S,) at each; the epochs where the test accuracy rises fastest (t_grok) and first reaches 0.95 (None: never), where
    cliff 2's and cliff 1's alignments rise fastest, and the snapshot spacing at cliff 2's."""

    epochs: np.ndarray
    ab: np.ndarray
    sd: np.ndarray
    t_grok: float
    t_95: float | None
    t_peak: float
    t_peak_ab: float
    spacing: float


def alignment_dynamics(model: BatchedQuadraticMLP, history: History, test_acc: np.ndarray, X: Tensor, n_cliff: int,
                       F_ab: Tensor, F_sd: Tensor, n_log: int, n_dense: int, device=None) -> AlignmentDynamics:
    """Return the cliffs' alignments at ``n_log`` log-spaced snapshots of ``history`` and ``n_dense`` evenly spaced over
    [0.5, 1.5] t_grok (t_grok read from ``test_acc`` (S,)), from float32 kernels on ``device``, and their timing."""
    t_grok, _ = steepest_rise(history.steps, test_acc)
    t_95 = first_step_reaching(history.steps, test_acc, 0.95)
    snap_epochs = np.asarray(snapshot_schedule(history.steps, n_log, (0.5 * t_grok, 1.5 * t_grok), n_dense))
    snap_ab, snap_sd = [], []
    for epoch in snap_epochs:
        V_t = mlp_spectrum(model, X, 2 * n_cliff + 1, state=history.snapshots[int(epoch)], dtype=torch.float32,
                           device=device).vectors
        snap_ab.append(subspaces.alignment(V_t[:, 1:1 + n_cliff], F_ab))
        snap_sd.append(subspaces.alignment(V_t[:, 1 + n_cliff:1 + 2 * n_cliff], F_sd))
    snap_ab, snap_sd = np.asarray(snap_ab), np.asarray(snap_sd)
    t_peak, _ = steepest_rise(snap_epochs, snap_sd)
    t_peak_ab, _ = steepest_rise(snap_epochs, snap_ab)
    return AlignmentDynamics(snap_epochs, snap_ab, snap_sd, t_grok, t_95, t_peak, t_peak_ab,
                             grid_spacing(snap_epochs, t_peak))


# --------------------------------------------------------------------------------------------
# Claims

#: The run's trained-model test: a network that generalises has held-out accuracy at least this.
GENERALISES = 0.99
#: The chapter's claims, in the order the notebook records them. The cliff sizes' bound is 4⌊p/2⌋ of the run's p
#: (declared here at the paper's p = 29; :func:`claims` sets it from ``Findings.p``).
CLAIMS: tuple[Spec, ...] = (
    Spec("cliff1_size", "paper", "size of the first cliff (detected from the largest eigenvalue ratio after the top "
         "one; 4⌊p/2⌋ expected)", equal_to(56), paper=56),
    Spec("cliff2_size", "paper", "size of the second cliff (detected from the second-largest ratio; 4⌊p/2⌋ expected)",
         equal_to(56), paper=56),
    Spec("cliff1_alignment_ab", "paper", "alignment of eigenvectors 1…4⌊p/2⌋ with the a, b features (fraction of its "
         "maximum)", at_least(0.97)),
    Spec("cliff2_alignment_sum", "paper", "alignment of the next 4⌊p/2⌋ eigenvectors with the a + b features (fraction "
         "of its maximum)", at_least(0.9)),
    Spec("cliff2_alignment_diff", "paper", "alignment of the next 4⌊p/2⌋ eigenvectors with the a − b features "
         "(fraction of its maximum)", at_least(0.85)),
    Spec("alignment_peak_near_grok", "paper", "|t_peak − t_grok| in units of the tolerance max(snapshot spacing, "
         "0.2 t_grok)", at_most(1), paper="near grokking"),
    Spec("alignment_at_init", "check", "cliff-2 alignment with the a ± b features at the first snapshot, as a fraction "
         "of its value at the last", at_most(0.3), paper="weak at initialisation"),
    Spec("final_test_accuracy", "precondition", "held-out accuracy at the last epoch", at_least(GENERALISES), paper=1.0),
)
_SPEC = declared(CLAIMS)


@dataclass(frozen=True)
class Findings:
    """What the claims are decided on: the modulus ``p``; the trained kernel's two detected cliff edges (e1 < e2) and
    its :func:`cliff_alignments`; :func:`initial_cliffs` of the kernel at initialisation (epoch ``first_epoch``);
    :func:`random_block_q99` over ``n_random`` blocks; the :class:`AlignmentDynamics`; the held-out accuracy (S,) at
    every evaluation epoch ``steps`` (S,)."""

    p: int
    edges: tuple[int, int]
    align: Mapping[str, float]
    init: Mapping[str, float]
    random_q99: Mapping[str, float]
    dynamics: AlignmentDynamics
    test_acc: Sequence[float]
    steps: Sequence[float]
    n_random: int = 200

    @property
    def first_epoch(self) -> int:
        """Return the first evaluated epoch (the network at initialisation)."""
        return int(self.steps[0])

    def generalising_snapshot(self) -> int | None:
        """Return the index of the first kernel snapshot before the last whose held-out accuracy is ≥
        :data:`GENERALISES`, None when there is none (the last is the trained network the fractions divide by)."""
        accuracy = dict(zip((float(s) for s in self.steps), (float(a) for a in self.test_acc)))
        return next((i for i, e in enumerate(self.dynamics.epochs[:-1]) if accuracy.get(float(e), 0.0) >= GENERALISES),
                    None)


def _fraction(first: float, last: float) -> float:
    """Return first / last, infinite when ``last`` is not positive (no alignment to be a fraction of)."""
    return float(first) / float(last) if float(last) > 0 else math.inf


def claims(findings: Findings) -> list[Claim]:
    """Return the chapter's claims (:data:`CLAIMS`, in order) decided on ``findings``: the cliff sizes and alignments
    against the kernel at initialisation and random blocks, the timing of the cliff-2 alignment against cliff 1's, its
    weakness at initialisation against cliff 1 (built before training), and the accuracy the claims presuppose."""
    f, dyn = findings, findings.dynamics
    n_cliff = 4 * (f.p // 2)
    at_init = f"the kernel at initialisation (epoch {f.first_epoch})"
    random_block = f"99th percentile of {f.n_random} random blocks of {n_cliff} directions"
    cliff1_there = ("on one-hot inputs the functions of a alone and of b alone (2(p − 1) of them) are a block of any "
                    "first-layer kernel, so the untrained network's kernel already has this cliff")
    edge_blocks = {f"edge {int(f.init[e])}": int(f.init[e]) - 1 for e in ("edge1", "edge2")}
    test_acc = np.asarray(f.test_acc, dtype=float)
    unfit = None if test_acc[-1] >= GENERALISES else (
        f"the network does not generalise (final test accuracy {test_acc[-1]:.3f} < {GENERALISES}, its precondition), "
        "and the claim is about the kernel of one that does; a longer run (the notebook's defaults) decides it")
    size_bound = equal_to(n_cliff)
    size1 = decide(replace(_SPEC["cliff1_size"], bound=size_bound), int(f.edges[0]) - 1, paper=n_cliff,
                   null=Null(f"{at_init}: the block 1…e−1 before each of its two detected edges e", edge_blocks),
                   why=cliff1_there if n_cliff in edge_blocks.values() else None, undecided=unfit)
    size2 = decide(replace(_SPEC["cliff2_size"], bound=size_bound), int(f.edges[1]) - int(f.edges[0]), paper=n_cliff,
                   null=Null(at_init, int(f.init["cliff2_size"])), undecided=unfit)
    ab = _SPEC["cliff1_alignment_ab"]
    out = [size1, size2,
           decide(ab, float(f.align["ab"]), paper=f"{55.16 / 56:.4f} (authors' code, not printed)" if f.p == 29 else None,
                  null=[Null(at_init, float(f.init["ab"])), Null(random_block, float(f.random_q99["ab"]))],
                  why=cliff1_there if ab.bound.test(f.init["ab"]) else None, undecided=unfit)]
    for key, printed in (("sum", 26.47), ("diff", 25.21)):
        out.append(decide(_SPEC[f"cliff2_alignment_{key}"], float(f.align[key]),
                          paper=round(printed / 28, 4) if f.p == 29 else None,
                          null=[Null(at_init, float(f.init[key])), Null(random_block, float(f.random_q99[key]))],
                          undecided=unfit))
    tol = max(float(dyn.spacing), 0.2 * float(dyn.t_grok))
    out.append(decide(
        _SPEC["alignment_peak_near_grok"], abs(dyn.t_peak - dyn.t_grok) / tol,
        statistic=f"|t_peak − t_grok| = {abs(dyn.t_peak - dyn.t_grok):.0f} epochs (cliff-2 alignment rises fastest at "
                  f"{dyn.t_peak:.0f}, test accuracy at {dyn.t_grok:.0f}) in units of the tolerance max(snapshot "
                  f"spacing {dyn.spacing:.0f}, 0.2 t_grok) = {tol:.4g} epochs",
        null=Null("the same timing read from cliff 1's alignment, which is there from initialisation",
                  abs(dyn.t_peak_ab - dyn.t_grok) / tol),
        undecided=None if test_acc[-1] >= GENERALISES else
        f"the network does not generalise (final test accuracy {test_acc[-1]:.3f} < {GENERALISES}), so there is no "
        "grokking to time; the notebook's defaults (the paper's settings) decide it"))
    first, last = float(dyn.epochs[0]), float(dyn.epochs[-1])
    nulls = [Null(f"the same fraction for cliff 1 against the a, b features ({float(dyn.ab[0]):.3f} at epoch "
                  f"{first:.0f}, {float(dyn.ab[-1]):.3f} at {last:.0f}), an alignment training does not build",
                  _fraction(dyn.ab[0], dyn.ab[-1]))]
    g = f.generalising_snapshot()
    if g is not None:
        nulls.append(Null(f"the same fraction at the first snapshot of the network that generalises (epoch "
                          f"{float(dyn.epochs[g]):.0f}, held-out accuracy ≥ {GENERALISES})",
                          _fraction(dyn.sd[g], dyn.sd[-1])))
    out.append(decide(
        _SPEC["alignment_at_init"], _fraction(dyn.sd[0], dyn.sd[-1]),
        statistic=f"cliff-2 alignment with the a ± b features at epoch {first:.0f} ({float(dyn.sd[0]):.3f}) as a "
                  f"fraction of its value at epoch {last:.0f} ({float(dyn.sd[-1]):.3f})", null=nulls))
    out.append(decide(_SPEC["final_test_accuracy"], float(test_acc[-1]),
                      null=Null(f"the network at initialisation (epoch {f.first_epoch})", float(test_acc[0]))))
    return out


# --------------------------------------------------------------------------------------------
# Inputs


def check_inputs(params: dict) -> None:
    """Check chapter 05's parameters: two cliffs and top_k within the p² inputs, training and held-out pairs both,
    snapshots that reach the last epoch, the size of the p² x p² kernels (returns None; raises ParameterError)."""
    nb = "05_entk_mlp_modular"
    p, top_k = params["p"], params["top_k"]
    n_cliff = 4 * (p // 2)
    require(2 * n_cliff + 2 <= p * p, nb, "p", p, "a prime of at least 5 (two cliffs of 4⌊p/2⌋ eigenvectors among p² inputs)")
    require(top_k <= p * p, nb, "top_k", top_k, f"at most p² = {p * p} (the number of inputs)")
    n_train = int(round(params["train_frac"] * p * p))                 # modular_addition's torch split
    require(0 < n_train < p * p, nb, "train_frac", params["train_frac"],
            f"a fraction that leaves at least one training and one held-out pair of the p² = {p * p} pairs "
            f"(round(train_frac · p²) = {n_train} training pairs)")
    epochs, eval_every = params["epochs"], params["eval_every"]
    require(epochs % eval_every == 0, nb, "eval_every", eval_every,
            f"a divisor of epochs = {epochs} (the parameters are saved every eval_every epochs, and the kernels are "
            "computed at the last epoch too)")
    snapshots = epochs // eval_every + 1
    weights = 3 * p * params["width"]
    fits(nb, params, [
        kernels(3, p * p, "p", "the kernels of both layers and their sum"),
        Need(f"the {snapshots:,} parameter snapshots", 4 * snapshots * weights, weights, "epochs"),
    ])
