"""The eNTK paper's per-parameter measurement on modular addition: eigenvector blocks vs Fourier features.

For one model of a :class:`~corekit.models.BatchedTransformer` on all p² pairs, every parameter tensor
gets its own kernel, flattened as the mean over all class pairs (``mode="pair_mean"``: the eNTK of
the mean output, over every output the model has), and its top eigenvectors. With K key frequencies
a feature family spans 2K dimensions; the paper scores the blocks of eigenvectors ``0 … 2K`` and
``2K+1 … 4K`` (for K = 2 its ``[0:5]`` and ``[5:9]``), with no eigenvector passed over, against the
sum features cos/sin ω_k(a+b) and the input features cos ω_k a + cos ω_k b, sin ω_k a + sin ω_k b
(:func:`corekit.subspaces.alignment`, as a fraction of 2K). Which block holds which family is measured
per parameter (:meth:`BlockScores.holding`), not assumed; each block's share of the constant
function is reported beside its scores.

The models are trained by the authors' recipe (:func:`train_authors`: their split, initial draw, batch
order and AdamW); :func:`matches_authors` says whether a run's settings are theirs (their oracle record,
``results/oracle/06.json``, applies only then), :func:`log_gap` compares a training log with theirs up to the
epoch where float32 rounding starts to move a run (:func:`rounding_horizon`, against the run in float64), and
:func:`unembedding_alignment` follows W_U's leading block against the sum features over saved states.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from corekit import entk, fourier, subspaces, train
from corekit.models import BatchedTransformer, TransformerConfig
from corekit.tasks.modular import ModularAddition, modular_addition
from corekit.train import History, train_ensemble

#: Feature families scored: name → :func:`corekit.fourier.fourier_basis` kind.
FAMILIES = {"sum": "sum", "input": "input_sum"}

#: The authors' settings (``modular_arithmetic_transformer_v4.ipynb`` in ``jylin04/mi-ntk``), by parameter name.
AUTHORS_SETTINGS = dict(p=29, d_model=64, n_heads=4, d_mlp=256, train_frac=0.5, lr=3e-4, weight_decay=1.0,
                        betas=[0.9, 0.999], batch_size=64, data_seed=0, split="python", init="lin",
                        batch_order="loader", log_every_epochs=20)


def matches_authors(settings: Mapping[str, object]) -> dict[str, bool]:
    """Return {setting: whether ``settings[setting]`` equals the authors' value} for every key of AUTHORS_SETTINGS."""
    missing = sorted(set(AUTHORS_SETTINGS) - set(settings))
    if missing:
        raise ValueError(f"settings lack {missing}")
    return {k: settings[k] == v for k, v in AUTHORS_SETTINGS.items()}


@dataclass
class AuthorsRun:
    """A run of the authors' recipe: the task, its tokens (p², 3), the trained models, their history, the optimizer
    steps per epoch and the authors' logged epochs (0, E, 2E, … below ``epochs``)."""

    task: ModularAddition
    tokens: Tensor
    model: BatchedTransformer
    history: History
    steps_per_epoch: int
    log_epochs: list[int]

    def after_epochs(self, name: str, epochs: Sequence[int]) -> np.ndarray:
        """Return the history curve ``name`` (e.g. "test_acc") after each of ``epochs`` in the authors' numbering (their
        epoch e ends after e + 1 epochs of training): (len(epochs), M)."""
        at = {step: j for j, step in enumerate(self.history.steps)}
        missing = [e for e in epochs if (e + 1) * self.steps_per_epoch not in at]
        if missing:
            evaluated = sorted(round(s / self.steps_per_epoch) - 1 for s in at if s)
            raise ValueError(f"epochs {missing[:5]} were not evaluated; the run evaluated after epochs {evaluated[:10]}"
                             f"{' …' if len(evaluated) > 10 else ''} (the logged and saved ones, or every epoch with "
                             "eval_every_epoch=True)")
        curve = self.history.curve(name).numpy()
        return curve[[at[(e + 1) * self.steps_per_epoch] for e in epochs]]


def train_authors(p: int, seeds: Sequence[int], epochs: int, *, d_model: int = 64, n_heads: int = 4, d_mlp: int = 256,
                  train_frac: float = 0.5, lr: float = 3e-4, weight_decay: float = 1.0,
                  betas: Sequence[float] = (0.9, 0.999), batch_size: int = 64, data_seed: int = 0, split: str = "python",
                  init: str = "lin", batch_order: str = "loader", log_every_epochs: int = 20,
                  snapshot_every_epochs: int | None = None, eval_every_epoch: bool = False,
                  device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32) -> AuthorsRun:
    """Return the models of ``seeds`` trained together by the authors' recipe for ``epochs`` epochs.

    :meth:`corekit.models.TransformerConfig.entk_authors` with the given sizes and ``init``, a batch order with
    ``log_every_epochs`` (whose logging draws from the loader's generator when ``batch_order="loader"``), the loss on
    the first p outputs, ``drop_last=False``; parameters saved at step 0 and after every logged epoch e with e %
    ``snapshot_every_epochs`` == 0 (None: every logged epoch), under the step (e + 1) · steps_per_epoch. The models
    are evaluated where the authors log (at step 0, after every logged epoch, at the end), or after every epoch with
    ``eval_every_epoch``; an evaluation changes no draw, so the trained models are the same either way. ``dtype``
    float64 trains the same initial weights (drawn in float32) in float64, the reference that shows where float32
    rounding starts to move the run (:func:`rounding_horizon`).
    """
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype!r}")
    task = modular_addition(p, train_frac, data_seed, split=split)
    tokens = task.tokens()                                               # (p², 3): a, b, "=" (token p)
    train_set, test_set = task.datasets()
    config = TransformerConfig.entk_authors(p, d_model=d_model, n_heads=n_heads, d_mlp=d_mlp, init=init)
    model = BatchedTransformer(config, seeds=list(seeds)).to(device, dtype)
    spe = train.steps_per_epoch(len(train_set), batch_size, drop_last=False)
    log_epochs = list(range(0, epochs, log_every_epochs))
    every = log_every_epochs if snapshot_every_epochs is None else snapshot_every_epochs
    history = train_ensemble(model, train_set, test_set, steps=epochs * spe, batch_size=batch_size, lr=lr,
                             weight_decay=weight_decay, betas=tuple(betas), drop_last=False, batch_order=batch_order,
                             loader_eval_every=log_every_epochs if batch_order == "loader" else None, loss_outputs=p,
                             eval_every=spe if eval_every_epoch else None, eval_steps=[(e + 1) * spe for e in log_epochs],
                             snapshot_steps=[0] + [(e + 1) * spe for e in log_epochs if e % every == 0],
                             progress=False)
    return AuthorsRun(task, tokens, model, history, spe, log_epochs)


def log_gap(epoch_loss: np.ndarray, log: Mapping[str, Sequence[float]], through_epoch: int = 60) -> float:
    """Return the largest abs(epoch train loss (epochs,) − the authors' logged ``train_loss``) over their logged epochs
    (``log["epoch"]``) up to ``through_epoch``; ``epoch_loss`` needs only those epochs."""
    early = [j for j, e in enumerate(log["epoch"]) if e <= through_epoch]
    ours = np.asarray(epoch_loss)[np.asarray(log["epoch"])[early]]
    return float(np.abs(ours - np.asarray(log["train_loss"])[early]).max())


def rounding_horizon(epoch_loss: np.ndarray, exact_loss: np.ndarray, epochs: Sequence[int], tol: float) -> int | None:
    """Return the last of ``epochs`` (ascending) up to which the epoch train loss (≥ max(epochs) + 1,) stays within
    ``tol`` of ``exact_loss``, the same run in float64, at every one of ``epochs``; None when it already does not at
    the first. Past it, float32 rounding alone moves the run by more than ``tol``."""
    if not tol > 0:
        raise ValueError(f"tol must be positive, got {tol!r}")
    epochs = [int(e) for e in epochs]
    if not epochs or epochs != sorted(set(epochs)) or epochs[0] < 0:
        raise ValueError(f"epochs must be ascending distinct epochs >= 0, got {epochs}")
    for name, loss in (("epoch_loss", epoch_loss), ("exact_loss", exact_loss)):
        if np.ndim(loss) != 1 or len(loss) <= epochs[-1]:
            raise ValueError(f"{name} must be (epochs,) with at least {epochs[-1] + 1} epochs, got shape "
                             f"{np.shape(loss)}")
    last = None
    for e in epochs:
        if not abs(float(epoch_loss[e]) - float(exact_loss[e])) <= tol:
            break
        last = e
    return last


def paper_blocks(n_keys: int, top_k: int | None = None) -> list[list[int]]:
    """Return the paper's two eigenvector blocks for ``n_keys`` key frequencies: [0 … 2K] and [2K+1 … 4K]."""
    if not isinstance(n_keys, int) or n_keys < 1:
        raise ValueError(f"n_keys must be a positive integer, got {n_keys!r}")
    n = 2 * n_keys
    if top_k is not None and 2 * n + 1 > top_k:
        raise ValueError(f"top_k must be at least 4K + 1 = {2 * n + 1} for K = {n_keys} key frequencies, got {top_k}")
    return [list(range(0, n + 1)), list(range(n + 1, 2 * n + 1))]


@dataclass
class BlockScores:
    """Scores of one model: ``scores[param][family]`` and ``constant[param]`` hold one value per block."""

    keys: list[int]
    blocks: list[list[int]]
    scores: dict[str, dict[str, list[float]]]
    constant: dict[str, list[float]]
    eigenvalues: dict[str, Tensor]

    def holding(self, param: str, family: str) -> tuple[int, float]:
        """Return (block index, alignment) of the block of ``param`` that holds ``family`` best."""
        if param not in self.scores or family not in FAMILIES:
            raise ValueError(f"param must be one of {sorted(self.scores)} and family one of {tuple(FAMILIES)}, "
                             f"got {param!r}, {family!r}")
        values = self.scores[param][family]
        j = max(range(len(values)), key=values.__getitem__)
        return j, values[j]

    def table(self) -> dict[str, dict[str, list[float]]]:
        """Return {param: {"sum": [...], "input": [...], "constant": [...]}} (one value per block), plain floats."""
        return {name: {**fams, "constant": self.constant[name]} for name, fams in self.scores.items()}


def parameter_eigenpairs(model, m: int, tokens: Tensor, top_k: int, names: Sequence[str] | None = None,
                         state: Mapping[str, Tensor] | None = None,
                         dtype: torch.dtype = torch.float32) -> dict[str, entk.Eigenpairs]:
    """Return {parameter: top-k eigenpairs} of model m's per-parameter "pair_mean" kernels (N, N) on tokens (N, T),
    kernels and eigensolves in ``dtype`` (default float32, as the eNTK authors compute them)."""
    fm = entk.functional_transformer(model, m=m, state=state).to(dtype=dtype, device=tokens.device)
    per_param = entk.kernels(fm, tokens, mode="pair_mean", names=names)
    return {name: entk.dense_eigenpairs(K, top_k, dtype=dtype) for name, K in per_param.items()}


def group_eigenpairs(model, m: int, tokens: Tensor, top_k: int, groups: Mapping[str, Sequence[str]],
                     state: Mapping[str, Tensor] | None = None,
                     dtype: torch.dtype = torch.float64) -> dict[str, entk.Eigenpairs]:
    """Return {group: top-k eigenpairs} of the summed per-parameter kernels of each group (e.g. all of attention),
    on model m's parameters or on a saved ``state`` (e.g. the snapshot at initialisation)."""
    names = sorted({n for group in groups.values() for n in group})
    fm = entk.functional_transformer(model, m=m, state=state).to(dtype=dtype, device=tokens.device)
    return entk.group_eigenpairs(entk.kernels(fm, tokens, mode="pair_mean", names=names), groups, top_k)


def score_blocks(eigs: Mapping[str, entk.Eigenpairs], p: int, keys: Sequence[int]) -> BlockScores:
    """Return the paper's two blocks of every kernel's eigenvectors (N = p², k) scored on the families at ``keys``."""
    keys = [int(k) for k in keys]
    top_k = min(e.vectors.shape[1] for e in eigs.values())
    blocks = paper_blocks(len(keys), top_k)
    features = {fam: fourier.fourier_basis(p, kind, keys) for fam, kind in FAMILIES.items()}
    scores, constant = {}, {}
    for name, e in eigs.items():
        V = e.vectors.double().cpu()
        if V.shape[0] != p * p:
            raise ValueError(f"eigenvectors of {name!r} have {V.shape[0]} rows; the p² = {p * p} pairs were expected")
        scores[name] = {fam: [subspaces.alignment(V[:, b], F) for b in blocks] for fam, F in features.items()}
        ones = torch.ones(p * p, 1, dtype=torch.float64)
        constant[name] = [subspaces.alignment(V[:, b], ones, centre_features=False) for b in blocks]
    return BlockScores(keys, blocks, scores, constant, {n: e.values.cpu() for n, e in eigs.items()})


def short_names(scores: BlockScores) -> BlockScores:
    """Return ``scores`` with layer-0 parameter names shortened ("0.W_Q" → "W_Q"), as in the paper's tables."""
    rename = lambda n: n[2:] if n.startswith("0.") else n  # noqa: E731
    return BlockScores(scores.keys, scores.blocks, {rename(n): v for n, v in scores.scores.items()},
                       {rename(n): v for n, v in scores.constant.items()},
                       {rename(n): v for n, v in scores.eigenvalues.items()})


def measure(model, m: int, tokens: Tensor, p: int, top_k: int = 40, keys: Sequence[int] | None = None,
            state: Mapping[str, Tensor] | None = None) -> BlockScores:
    """Return chapter 06's measurement of model m: key frequencies (from W_E unless given) and every parameter's blocks."""
    if keys is None:
        W_E = (state["params.W_E"][m] if state is not None else model.p("W_E")[m]).detach().cpu()[:p]
        keys = fourier.key_frequencies(W_E)
    return short_names(score_blocks(parameter_eigenpairs(model, m, tokens, top_k, state=state), p, keys))


def unembedding_alignment(model, m: int, tokens: Tensor, p: int, keys: Sequence[int],
                          states: Sequence[Mapping[str, Tensor]], top_k: int | None = None,
                          cores: Sequence[Tensor] | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Return (S,) alignments of W_U's leading block (2K + 1 eigenvectors) with the sum features at ``keys`` on model m's
    saved ``states`` and, with ``cores`` (one (N, r) tensor per state), (S,) alignments of its top r + 1 with each.

    Each state's W_U kernel gets its top ``top_k`` eigenvectors (None: as many as the blocks use, max(2K + 1, r + 1)).
    """
    F = fourier.fourier_basis(p, "sum", keys)
    n = 2 * len(keys) + 1
    if cores is not None and len(cores) != len(states):
        raise ValueError(f"cores must hold one tensor per state ({len(states)}), got {len(cores)}")
    sums, lens = [], []
    for j, state in enumerate(states):
        r = None if cores is None else cores[j].shape[1]
        k = top_k if top_k is not None else max(n, n if r is None else r + 1)
        V = parameter_eigenpairs(model, m, tokens, k, names=["W_U"], state=state)["W_U"].vectors.cpu()
        sums.append(subspaces.alignment(V[:, :n], F))
        if r is not None:
            lens.append(subspaces.alignments(V[:, :r + 1][None], cores[j][None].cpu())[0])
    return np.asarray(sums), (None if cores is None else np.asarray(lens))
