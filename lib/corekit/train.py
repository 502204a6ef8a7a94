"""Train an ensemble of models as one batched program: stacked parameters, one AdamW step for all.

:func:`train_ensemble` trains every model of a :class:`~corekit.models.BatchedTransformer` on the
same data with its own batch order (from its seed), its own weight decay and learning rate,
evaluates all models in one pass, keeps parameter snapshots at chosen steps, and checkpoints so that
an interrupted run resumes where it stopped and ends with the same numbers.
"""
from __future__ import annotations

import hashlib
import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor
from tqdm import tqdm

from corekit import onelayer, postln
from corekit.models import BatchedTransformer

#: What a checkpoint written by :func:`train_ensemble` holds.
CHECKPOINT_KEYS = frozenset({"key", "step", "model", "opt", "history", "dropout"})


@dataclass
class Dataset:
    """Token inputs x (N, T) and targets y (N, T_y) for the last T_y positions of the logits."""

    x: Tensor
    y: Tensor

    def __post_init__(self):
        if self.y.dim() == 1:
            self.y = self.y[:, None]
        if self.x.dim() != 2 or self.y.dim() != 2 or self.x.shape[0] != self.y.shape[0]:
            raise ValueError(f"x must be (N, T) and y (N, T_y) with the same N, got {tuple(self.x.shape)} "
                             f"and {tuple(self.y.shape)}")
        if self.y.shape[1] > self.x.shape[1]:
            raise ValueError("y cannot have more positions than x")

    def __len__(self) -> int:
        return self.x.shape[0]

    def to(self, device: torch.device) -> "Dataset":
        """Return the dataset on ``device``."""
        return Dataset(self.x.to(device), self.y.to(device))


def _weight_decay_schedule(value, M: int, device: torch.device) -> list[tuple[int, Tensor]]:
    """Return [(first_step, wd (M,)), ...] from a number, a per-model list or {first_step: either}."""
    if not isinstance(value, dict):
        value = {0: value}
    if 0 not in value:
        raise ValueError(f"a weight_decay schedule must give the value from step 0, got keys {sorted(value)}")
    return [(int(k), _per_model(v, M, f"weight_decay[{k}]", device)) for k, v in sorted(value.items())]


def _reset_schedule(value, M: int) -> dict[int, Tensor]:
    """Return {step: models to reset (M,) bool} from {step: a bool or one bool per model}."""
    out = {}
    for step, flags in (value or {}).items():
        t = torch.as_tensor(flags, dtype=torch.bool).flatten()
        if t.numel() == 1:
            t = t.expand(M).clone()
        if t.numel() != M or int(step) != step or step < 1:
            raise ValueError(f"optimizer_reset must map steps >= 1 to a bool or {M} bools (one per model), "
                             f"got {{{step!r}: {flags!r}}}")
        out[int(step)] = t
    return out


def _per_model(value: float | Sequence[float], M: int, name: str, device: torch.device) -> Tensor:
    """Return ``value`` as a (M,) float tensor (a scalar is shared by every model)."""
    t = torch.as_tensor(value, dtype=torch.float32, device=device).flatten()
    if t.numel() == 1:
        t = t.expand(M).clone()
    if t.numel() != M:
        raise ValueError(f"{name} must be a number or a list of {M} numbers (one per model), got {value!r}")
    return t


class BatchedAdamW:
    """AdamW over stacked parameters (M, ...) with a per-model learning rate and weight decay.

    Follows ``torch.optim.AdamW`` step for step (decoupled decay, bias-corrected moments), so model m
    of the ensemble follows the same trajectory as a lone model stepped by ``torch.optim.AdamW``.
    Each model counts its own steps, so :meth:`reset` gives chosen models a fresh optimizer. ``fused`` applies the
    update with torch's fused AdamW kernel (``torch.optim.AdamW(fused=True)``'s), one call for each run of consecutive
    models that share a learning rate, decay and step count; ``fused=False`` with one ``torch._foreach_*`` call per
    operation (``torch.optim.AdamW(foreach=True)``'s). The two differ by float rounding only.
    """

    def __init__(self, params: Sequence[Tensor], lr: Tensor, weight_decay: Tensor,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, fused: bool = True):
        self.params, self.fused = list(params), fused
        if len(betas) != 2 or not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {betas!r}")
        self.lr, self.weight_decay, self.betas, self.eps = lr, weight_decay, tuple(betas), eps
        self.step_count = torch.zeros(lr.shape[0], dtype=torch.long)            # (M,) on the CPU
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]

    def _bias_corrections(self, like: Tensor) -> tuple[Tensor, Tensor]:
        """Return 1 − β₁ᵗ and √(1 − β₂ᵗ) (M,) for each model's step count t, in the dtype and on the device of ``like``."""
        beta1, beta2 = self.betas
        t = self.step_count.tolist()
        values = torch.tensor([[1 - beta1 ** s for s in t], [(1 - beta2 ** s) ** 0.5 for s in t]], dtype=torch.float64)
        values = values.to(device=like.device, dtype=like.dtype)
        return values[0], values[1]

    @torch.no_grad()
    def step(self) -> None:
        """Apply one AdamW update to every model's parameters from their ``.grad`` (fused or foreach, see the class)."""
        self.step_count += 1
        groups: dict[tuple, list[int]] = {}
        for i, p in enumerate(self.params):
            groups.setdefault((p.dtype, p.device), []).append(i)
        for idx in groups.values():
            (self._fused_step if self.fused else self._foreach_step)(idx)

    def _model_runs(self) -> list[tuple[int, int, float, float, int]]:
        """Return (first, end, lr, weight decay, step) for each run of consecutive models sharing all three."""
        keys = list(zip(self.lr.tolist(), self.weight_decay.tolist(), self.step_count.tolist()))
        runs, first = [], 0
        for m in range(1, len(keys) + 1):
            if m == len(keys) or keys[m] != keys[first]:
                runs.append((first, m, *keys[first]))
                first = m
        return runs

    def _fused_step(self, idx: list[int]) -> None:
        """Update parameters ``idx`` with torch's fused AdamW kernel, one call per run of models sharing lr, decay, step.

        The kernel gets each model's slice as a tensor of its own, as a lone model's: it rounds the elements of its
        vectorised loop and of the loop's tail differently, so a slice of several models would step a model
        differently from its lone run.
        """
        beta1, beta2 = self.betas
        for first, end, lr, wd, t in self._model_runs():
            def cut(tensors: list[Tensor]) -> list[Tensor]:
                return [x[m] for x in tensors for m in range(first, end)]     # contiguous, as a lone model's
            params = cut([self.params[i] for i in idx])
            step = torch.tensor(float(t), device=params[0].device)
            torch._fused_adamw_(params, cut([self.params[i].grad for i in idx]), cut([self.exp_avg[i] for i in idx]),
                                cut([self.exp_avg_sq[i] for i in idx]), [], [step] * len(params), lr=lr,
                                beta1=beta1, beta2=beta2, weight_decay=wd, eps=self.eps, amsgrad=False,
                                maximize=False)

    def _foreach_step(self, idx: list[int]) -> None:
        """Update parameters ``idx`` with one ``torch._foreach_*`` call per operation of ``torch.optim.AdamW``'s
        per-parameter loop, on the same tensors, each model's lr, decay and bias corrections broadcast over its own."""
        beta1, beta2 = self.betas
        params = [self.params[i] for i in idx]
        grads = [p.grad for p in params]
        exp_avg, exp_avg_sq = [self.exp_avg[i] for i in idx], [self.exp_avg_sq[i] for i in idx]
        bias1, bias2_sqrt = self._bias_corrections(params[0])
        lr = self.lr.to(params[0].device)
        per_model = {"decay": 1 - lr * self.weight_decay.to(lr.device), "step": lr / bias1, "bias2": bias2_sqrt}
        views = {name: [v.view((-1,) + (1,) * (p.dim() - 1)) for p in params] for name, v in per_model.items()}
        torch._foreach_mul_(params, views["decay"])
        torch._foreach_lerp_(exp_avg, grads, 1 - beta1)
        torch._foreach_mul_(exp_avg_sq, beta2)
        torch._foreach_addcmul_(exp_avg_sq, grads, grads, value=1 - beta2)
        update = torch._foreach_mul(views["step"], exp_avg)
        denom = torch._foreach_sqrt(exp_avg_sq)
        torch._foreach_div_(denom, views["bias2"])
        torch._foreach_add_(denom, self.eps)
        torch._foreach_addcdiv_(params, update, denom, value=-1)        # p + (−1·u)/d = p − u/d exactly

    @torch.no_grad()
    def reset(self, models: Tensor) -> None:
        """Give the models flagged in ``models`` (M,) bool a fresh optimizer: zero moments and step count."""
        models = torch.as_tensor(models, dtype=torch.bool)
        for buf in self.exp_avg + self.exp_avg_sq:
            buf[models.to(buf.device)] = 0
        self.step_count[models.cpu()] = 0

    def state_dict(self) -> dict:
        """Return the optimizer state for a checkpoint."""
        return {"step_count": self.step_count.clone(), "exp_avg": self.exp_avg, "exp_avg_sq": self.exp_avg_sq}

    def load_state_dict(self, state: dict) -> None:
        """Restore the optimizer state from a checkpoint."""
        self.step_count = torch.as_tensor(state["step_count"], dtype=torch.long).cpu().expand(len(self.step_count)).clone()
        for dst, src in zip(self.exp_avg + self.exp_avg_sq, state["exp_avg"] + state["exp_avg_sq"]):
            dst.copy_(src)


def losses(logits: Tensor, y: Tensor, n_outputs: int | None = None) -> Tensor:
    """Return per-model cross-entropy (M,) of logits (M, B, T, V) on y (B, T_y) or (M, B, T_y), on the first
    ``n_outputs`` logits (the eNTK authors' loss on ``logits[:, :p]`` of p + 1 outputs)."""
    logits = logits[:, :, -y.shape[-1]:, :n_outputs]
    y = y.expand(logits.shape[:3])
    return F.cross_entropy(logits.flatten(0, 2), y.flatten(), reduction="none").view(y.shape).mean(dim=(1, 2))


def losses_and_accuracy(logits: Tensor, y: Tensor, n_outputs: int | None = None) -> tuple[Tensor, Tensor]:
    """Return per-model cross-entropy and accuracy (M,), (M,) as :func:`losses` reads them."""
    acc = (logits[:, :, -y.shape[-1]:, :n_outputs].argmax(-1) == y).float().mean(dim=(1, 2))
    return losses(logits, y, n_outputs), acc


@torch.no_grad()
def evaluate(model: BatchedTransformer, data: Dataset, batch_size: int = 4096,
             n_outputs: int | None = None) -> tuple[Tensor, Tensor]:
    """Return every model's loss and accuracy (M,), (M,) on ``data`` in eval mode (on the first ``n_outputs`` logits)."""
    was_training = model.training
    model.eval()
    loss_sum = torch.zeros(model.n_models, device=data.x.device)
    acc_sum = torch.zeros(model.n_models, device=data.x.device)
    for start in range(0, len(data), batch_size):
        x, y = data.x[start:start + batch_size], data.y[start:start + batch_size]
        loss, acc = losses_and_accuracy(model(x, last=y.shape[-1]), y, n_outputs)
        loss_sum += loss * x.shape[0]
        acc_sum += acc * x.shape[0]
    model.train(was_training)
    return loss_sum / len(data), acc_sum / len(data)


@dataclass
class History:
    """Evaluation record: ``steps`` (S,) and per-model curves (S, M); ``snapshots`` maps step → params.

    ``epoch_train_loss`` (E, M) holds each epoch's mean training-batch loss (mini-batch runs; NaN for an
    epoch that a resumed run entered part-way).
    """

    steps: list[int] = field(default_factory=list)
    train_loss: list[list[float]] = field(default_factory=list)
    train_acc: list[list[float]] = field(default_factory=list)
    test_loss: list[list[float]] = field(default_factory=list)
    test_acc: list[list[float]] = field(default_factory=list)
    snapshots: dict[int, dict[str, Tensor]] = field(default_factory=dict)
    epoch_train_loss: list[list[float]] = field(default_factory=list)

    def curve(self, name: str) -> Tensor:
        """Return the curve ``name`` (e.g. "test_acc") as a (S, M) tensor."""
        return torch.tensor(getattr(self, name))


def steps_per_epoch(n_examples: int, batch_size: int | None, drop_last: bool = True) -> int:
    """Return the optimizer steps in one epoch of :func:`train_ensemble`: n // batch_size (⌈n / batch_size⌉ without
    ``drop_last``), 1 for full batch (None, 0 or ≥ n)."""
    batch_size = min(batch_size or n_examples, n_examples)
    return n_examples // batch_size if drop_last else -(-n_examples // batch_size)


def _batch_indices(seed: int, epoch: int, n: int, batch_size: int, device: torch.device,
                   drop_last: bool = True) -> list[Tensor]:
    """Return the epoch's batches of one model, each (batch_size,) (the last one shorter without ``drop_last``),
    from (seed, epoch) alone."""
    gen = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    perm = torch.randperm(n, generator=gen)
    if drop_last:
        perm = perm[: n // batch_size * batch_size]
    return list(perm.to(device).split(batch_size))


#: Batch orders of :func:`train_ensemble`.
BATCH_ORDERS = ("seeded", "loader")


def _draw(gen: torch.Generator) -> int:
    """Return the next int64 of ``gen`` as ``DataLoader`` takes it (``torch.empty((), dtype=int64).random_()``)."""
    return int(torch.empty((), dtype=torch.int64).random_(generator=gen).item())


def _loader_batches(gen: torch.Generator, n: int, batch_size: int, device: torch.device,
                    drop_last: bool) -> list[Tensor]:
    """Return one epoch's batches as ``DataLoader(shuffle=True)`` draws them from the global generator ``gen``.

    Each pass over a loader takes one int64 from the global generator for its workers' base seed
    when the iterator is made; ``RandomSampler`` then takes another, seeds a fresh generator with it
    and returns that generator's ``randperm``.
    """
    _draw(gen)
    seed = _draw(gen)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    if drop_last:
        perm = perm[: n // batch_size * batch_size]
    return list(perm.to(device).split(batch_size))


def _loader_draws(epoch: int, eval_every: int | None) -> int:
    """Return how many int64s the eNTK authors' epoch ``epoch`` takes from the global generator (2, +3 when it logs)."""
    return 2 + (3 if eval_every and epoch % eval_every == 0 else 0)


#: The version of the checkpoint format :func:`train_ensemble` writes; a checkpoint of another version is retrained.
CHECKPOINT_FORMAT = 2


@dataclass(frozen=True)
class TrainOptions:
    """What :func:`train_ensemble` does with an ensemble: the step budget, the optimizer, the batch order,
    the evaluation schedule, checkpoints and the callbacks (see :func:`train_ensemble` for each)."""

    steps: int
    batch_size: int | None = None
    lr: float | Sequence[float] = 1e-3
    weight_decay: float | Sequence[float] | dict[int, float | Sequence[float]] = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    optimizer_reset: dict[int, bool | Sequence[bool]] | None = None
    drop_last: bool = True
    batch_order: str = "seeded"
    loader_eval_every: int | None = None
    loss_outputs: int | None = None
    eval_every: int | None = 100
    eval_steps: Sequence[int] = ()
    eval_train_size: int = 2048
    snapshot_steps: Sequence[int] = ()
    checkpoint_dir: str | os.PathLike | None = None
    checkpoint_every: int = 1000
    stop: Callable[[History], bool] | None = None
    dense_eval: Callable[[History], bool] | None = None
    progress: bool = True

    def check(self, n_examples: int, out_vocab: int | None) -> None:
        """Raise ValueError naming the option when a value cannot be trained with (``n_examples`` training pairs)."""
        batch_size = n_examples if self.batch_size is None else self.batch_size
        if self.batch_order not in BATCH_ORDERS:
            raise ValueError(f"batch_order must be one of {BATCH_ORDERS}, got {self.batch_order!r}")
        lo = self.loss_outputs
        if lo is not None and not (isinstance(lo, int) and 1 <= lo <= (out_vocab or lo)):
            raise ValueError(f"loss_outputs must be an integer in 1..{out_vocab} (the model's outputs), got {lo!r}")
        le = self.loader_eval_every
        if le is not None and (self.batch_order != "loader" or not isinstance(le, int) or le < 1):
            raise ValueError(f'loader_eval_every must be a positive integer, with batch_order="loader"; got '
                             f"{le!r} with batch_order={self.batch_order!r}")
        if (self.steps < 0 or batch_size < 1 or (self.eval_every is not None and self.eval_every < 1)
                or self.checkpoint_every < 1):
            raise ValueError(f"steps >= 0, batch_size >= 1, eval_every >= 1 (or None) and checkpoint_every >= 1 "
                             f"required; got steps={self.steps}, batch_size={batch_size}, "
                             f"eval_every={self.eval_every}, checkpoint_every={self.checkpoint_every}")
        if self.dense_eval is not None and self.eval_every is None:
            raise ValueError("dense_eval needs a periodic evaluation: eval_every must be a positive integer, got None")
        if self.dense_eval is not None and self.checkpoint_every % self.eval_every:
            raise ValueError(f"with dense_eval, checkpoint_every ({self.checkpoint_every}) must be a multiple of "
                             f"eval_every ({self.eval_every}): a checkpoint is then never inside a window that may "
                             f"be retraced")


@dataclass
class TrainState:
    """Everything a run carries from one step to the next: the step count, the model, its optimizer, the
    history, and where the batch order stands (the epoch's batches, the loader generators, the epoch's losses)."""

    model: BatchedTransformer
    opt: BatchedAdamW
    history: History = field(default_factory=History)
    step: int = 0
    batches: list[Tensor] | None = None          # this epoch's (M, batch) index tensors
    loader_gens: list[torch.Generator] | None = None
    epoch_losses: list[Tensor] = field(default_factory=list)

    def copy(self) -> dict:
        """Return a copy of the state that :meth:`restore` returns to (parameters, optimizer, dropout, batch order)."""
        return {"step": self.step, "model": {k: v.detach().clone() for k, v in self.model.state_dict().items()},
                "opt": {k: [t.clone() for t in v] if isinstance(v, list) else v.clone()
                        for k, v in self.opt.state_dict().items()},
                "dropout": self.model.dropout_state(), "batches": self.batches,
                "epoch_losses": list(self.epoch_losses),
                "loaders": None if self.loader_gens is None else [g.get_state() for g in self.loader_gens],
                "history": {k: len(v) for k, v in vars(self.history).items() if isinstance(v, list)},
                "snapshots": set(self.history.snapshots)}

    def restore(self, saved: dict) -> None:
        """Return the run to a :meth:`copy`, dropping the history recorded since."""
        self.step, self.batches, self.epoch_losses = saved["step"], saved["batches"], list(saved["epoch_losses"])
        self.model.load_state_dict(saved["model"])
        self.opt.load_state_dict(saved["opt"])
        self.model.load_dropout_state(saved["dropout"])
        if saved["loaders"] is None:
            self.loader_gens = None
        else:
            for g, gen_state in zip(self.loader_gens, saved["loaders"]):
                g.set_state(gen_state)
        for name, length in saved["history"].items():
            del getattr(self.history, name)[length:]
        for snap in set(self.history.snapshots) - saved["snapshots"]:
            del self.history.snapshots[snap]


class Batches:
    """The batch order of a run: each model's batch (M, batch_size) at a step, and each epoch's mean loss."""

    def __init__(self, train: Dataset, o: TrainOptions, seeds: Sequence[int], batch_size: int):
        self.train, self.o, self.seeds, self.batch_size = train, o, list(seeds), batch_size
        self.full = batch_size == len(train)
        self.n_batches = steps_per_epoch(len(train), batch_size, o.drop_last)

    def at(self, s: TrainState) -> tuple[Tensor, Tensor]:
        """Return the inputs and targets of step ``s.step``: (N, T), (N, T_y) full batch, else (M, B, T), (M, B, T_y)."""
        if self.full:                                             # full batch: every model sees (N, T)
            return self.train.x, self.train.y
        epoch, within = divmod(s.step, self.n_batches)
        if s.batches is None or within == 0:
            s.batches = [torch.stack(b) for b in zip(*self._epoch(s, epoch))]
            if within != 0:                                       # a resumed run entered this epoch part-way
                s.epoch_losses = [torch.full((len(self.seeds),), float("nan"), device=self.train.x.device)]
        idx = s.batches[within]                                   # (M, batch_size)
        return self.train.x[idx], self.train.y[idx]

    def _epoch(self, s: TrainState, epoch: int) -> list[list[Tensor]]:
        """Return each model's batches of ``epoch``, in the run's batch order."""
        n, device, o = len(self.train), self.train.x.device, self.o
        if o.batch_order != "loader":
            return [_batch_indices(seed, epoch, n, self.batch_size, device, o.drop_last) for seed in self.seeds]
        if s.loader_gens is None:                                 # a resumed run replays the epochs before
            s.loader_gens = s.model.init_generators()
            for e in range(epoch):
                for g in s.loader_gens:
                    for _ in range(_loader_draws(e, o.loader_eval_every)):
                        _draw(g)
        elif epoch > 0 and _loader_draws(epoch - 1, o.loader_eval_every) > 2:
            for g in s.loader_gens:                               # the logging passes after the last epoch
                for _ in range(3):
                    _draw(g)
        return [_loader_batches(g, n, self.batch_size, device, o.drop_last) for g in s.loader_gens]

    def after_step(self, s: TrainState, loss: Tensor) -> None:
        """Add the step's loss (M,) to its epoch's, closing the epoch's mean at its last batch (mini-batch runs)."""
        if self.full:
            return
        s.epoch_losses.append(loss.detach())
        if s.step % self.n_batches == 0:
            s.history.epoch_train_loss.append(torch.stack(s.epoch_losses).mean(0).tolist())
            s.epoch_losses = []


class Evaluation:
    """The evaluation schedule: when to record, and the record (losses, accuracies and snapshots at a step)."""

    def __init__(self, o: TrainOptions, train: Dataset, test: Dataset | None):
        self.o, self.test = o, test
        self.train_eval = Dataset(train.x[:o.eval_train_size], train.y[:o.eval_train_size])
        self.snapshot_steps, self.eval_steps = set(map(int, o.snapshot_steps)), set(map(int, o.eval_steps))

    def due(self, step: int, dense: bool) -> bool:
        """Return whether the run evaluates after ``step`` steps."""
        periodic = self.o.eval_every is not None and step % self.o.eval_every == 0
        return periodic or step == self.o.steps or step in self.snapshot_steps or step in self.eval_steps or dense

    def record(self, s: TrainState) -> None:
        """Append the evaluation at ``s.step`` to the history (and the parameters, at a snapshot step)."""
        s.history.steps.append(s.step)
        for name, data in (("train", self.train_eval), ("test", self.test)):
            if data is None:
                continue
            loss, acc = evaluate(s.model, data, n_outputs=self.o.loss_outputs)
            getattr(s.history, f"{name}_loss").append(loss.tolist())
            getattr(s.history, f"{name}_acc").append(acc.tolist())
        if s.step in self.snapshot_steps:
            s.history.snapshots[s.step] = {k: v.detach().cpu().clone() for k, v in s.model.state_dict().items()}


class DenseWindow:
    """The ``dense_eval`` callback: evaluate at every step while the rule asks, retracing the coarse window before.

    It keeps a copy of the training state at the last sparse evaluation; when the rule turns True at a sparse
    evaluation, :meth:`after_record` returns the run to that copy (the same numbers follow) and evaluates every
    step from there up to the step it turned True at.
    """

    def __init__(self, rule: Callable[[History], bool], s: TrainState):
        self.rule, self.until = rule, 0
        self.dense = rule(s.history)
        self.window = None if self.dense else s.copy()

    def after_record(self, s: TrainState) -> bool:
        """Return True when the run was sent back to the window's start (the caller skips the rest of the step)."""
        was_dense, self.dense = self.dense, self.rule(s.history) or s.step < self.until
        if self.dense and not was_dense and s.step - self.window["step"] > 1:
            self.until = s.step
            s.restore(self.window)
            return True
        if not self.dense:
            self.window = s.copy()
        return False


class Checkpoints:
    """The checkpoint callback: the run's state saved under ``checkpoint_dir`` and read back by a run of the same key."""

    def __init__(self, folder: str | os.PathLike, key: str, every: int, steps: int):
        self.path, self.key, self.every, self.steps = Path(folder).expanduser().resolve() / "last.pt", key, every, steps

    def resume(self, s: TrainState, progress: bool) -> None:
        """Restore ``s`` from the checkpoint of this run, if there is one; any other file is named and trained over."""
        saved = load_checkpoint(self.path, next(s.model.parameters()).device)
        if saved is None:
            return
        why = ("another run's (its model, data or training settings differ)" if saved["key"] != self.key
               else f"past this run's {self.steps:,} steps (at step {saved['step']:,})" if saved["step"] > self.steps
               else None)
        if why is None:
            fresh = {k: v.detach().clone() for k, v in s.model.state_dict().items()}
            try:
                s.model.load_state_dict(saved["model"])
                s.opt.load_state_dict(saved["opt"])
                s.model.load_dropout_state(saved["dropout"])
                s.history, s.step = History(**saved["history"]), saved["step"]
            except Exception as err:   # a checkpoint whose tensors do not fit this run: named, then trained over
                s.model.load_state_dict(fresh)
                s.opt = BatchedAdamW(s.opt.params, s.opt.lr, s.opt.weight_decay, betas=s.opt.betas,
                                     fused=s.opt.fused)
                s.history, s.step = History(), 0
                why = f"unreadable ({type(err).__name__}: {(str(err).strip().splitlines() or [''])[0]})"
        if why is not None:
            warnings.warn(f"checkpoint {self.path} is {why}; training from step 0", stacklevel=4)
        elif progress:
            print(f"training resumed from its checkpoint at step {s.step:,} of {self.steps:,}", flush=True)

    def due(self, step: int, stopped: bool) -> bool:
        """Return whether the run saves its state after ``step`` steps."""
        return step % self.every == 0 or step == self.steps or stopped

    def save(self, s: TrainState) -> None:
        """Write the run's state atomically (a temporary file renamed over the last checkpoint)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        torch.save({"key": self.key, "format": CHECKPOINT_FORMAT, "step": s.step, "model": s.model.state_dict(),
                    "opt": s.opt.state_dict(), "history": vars(s.history), "dropout": s.model.dropout_state()}, tmp)
        os.replace(tmp, self.path)


def run_key(model: BatchedTransformer, train: Dataset, test: Dataset | None, o: TrainOptions, batch_size: int) -> str:
    """Return a hash of everything that shapes a run's saved state: the model, the data, the settings, the evaluation
    and snapshot schedules and the checkpoint format (not the step budget, the callbacks' code or ``progress``)."""
    M = model.n_models
    settings = {"format": CHECKPOINT_FORMAT, "config": model.config.as_dict(), "seeds": model.seeds,
                "batch_size": batch_size, "lr": _per_model(o.lr, M, "lr", torch.device("cpu")).tolist(),
                "betas": list(o.betas), "eval_every": o.eval_every,
                "wd": [(k, v.tolist()) for k, v in _weight_decay_schedule(o.weight_decay, M, torch.device("cpu"))],
                "resets": [(k, v.tolist()) for k, v in sorted(_reset_schedule(o.optimizer_reset, M).items())],
                "drop_last": o.drop_last, "batch_order": o.batch_order, "loader_eval_every": o.loader_eval_every,
                "loss_outputs": o.loss_outputs, "dense_eval": o.dense_eval is not None,
                "eval_steps": sorted(set(map(int, o.eval_steps))), "eval_train_size": min(o.eval_train_size, len(train)),
                "snapshot_steps": sorted(set(map(int, o.snapshot_steps)))}
    h = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode())
    for data in (train,) + ((test,) if test is not None else ()):
        h.update(data.x.cpu().numpy().tobytes())
        h.update(data.y.cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def load_checkpoint(path: Path, device: torch.device) -> dict | None:
    """Return the checkpoint at ``path`` (tensors and plain values only), or None if absent or unreadable.

    Loaded with ``weights_only=True``, so a file in a shared folder cannot run code; an unreadable
    (truncated, corrupt, foreign or of another format version) file is named in a warning and the run
    starts from step 0.
    """
    if not path.exists():
        return None
    try:
        state = torch.load(path, map_location=device, weights_only=True)
        if not (isinstance(state, dict) and CHECKPOINT_KEYS <= state.keys()):
            raise ValueError("not a checkpoint written by corekit.train")
        if state.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"format {state.get('format', 1)}, this version reads format {CHECKPOINT_FORMAT}")
    except Exception as err:  # torch.load raises many types (RuntimeError, EOFError, UnpicklingError, ...)
        reason = (str(err).strip().splitlines() or [""])[0]
        warnings.warn(f"checkpoint {path} is unreadable ({type(err).__name__}: {reason}); training from step 0",
                      stacklevel=3)
        return None
    return state


def train_ensemble(model: BatchedTransformer, train: Dataset, test: Dataset | None = None,
                   options: TrainOptions | None = None, **kwargs) -> History:
    """Return the training history of all M models trained together for ``steps`` optimizer steps.

    The options are a :class:`TrainOptions` or its fields as keywords. ``batch_size=None`` trains full batch; an
    epoch draws n // batch_size batches, or with ``drop_last=False`` also the shorter remainder (as a
    ``torch.utils.data.DataLoader`` does by default). ``weight_decay`` may change during training:
    ``{0: 1.0, 900: [1.0, 0.0]}`` forks a weight-decay-0 branch (model 1) at step 900. Training metrics are measured on
    the first ``eval_train_size`` training examples, test metrics on the whole test set. ``batch_order="seeded"``
    draws model m's epoch e from (seed, e) alone; ``"loader"`` draws it as ``DataLoader(shuffle=True)`` would in a
    lone script that seeded the global generator with model m's seed and then built the model
    (:meth:`~corekit.models.BatchedTransformer.init_generators`), batch for batch; ``loader_eval_every`` E adds what
    the eNTK authors' logging takes from that generator after every epoch e with e % E == 0 (a pass over an
    unshuffled test loader, one draw, and over the shuffled train loader, two). ``loss_outputs`` trains and
    evaluates on the first logits only. The models are evaluated at step 0, every ``eval_every`` steps (None: never on
    a period), at each of ``eval_steps`` and ``snapshot_steps`` and at the end. ``lr`` and ``weight_decay``
    are one number or one per model. ``optimizer_reset`` {step: flags} gives the flagged models a fresh
    AdamW state (zero moments, step count 0) just before the update at that step, as when a branch
    forked at that step starts a new optimizer.
    With ``checkpoint_dir`` (made absolute against the current folder) the run saves its state,
    dropout generators included, every ``checkpoint_every`` steps and, when called again with the same
    model, data and settings (:func:`run_key`), resumes from the last checkpoint and ends with the same numbers;
    a checkpoint of another run, of another format or that cannot be read is named in a warning and trained over.
    ``stop(history)``, asked after every evaluation, ends the run early when it returns True. ``dense_eval(history)``,
    asked after every evaluation, evaluates at every step while it returns True (:class:`DenseWindow`: a crossing
    inside a coarse window is found at its step; ``checkpoint_every`` must then be a multiple of ``eval_every``).
    """
    o = options if options is not None else TrainOptions(**kwargs)
    if options is not None and kwargs:
        raise TypeError("pass the options either as a TrainOptions or as keywords, not both")
    device = next(model.parameters()).device
    M, N = model.n_models, len(train)
    o.check(N, getattr(model.config, "out_vocab", None))
    batch_size = N if o.batch_size is None or o.batch_size >= N else o.batch_size
    key = run_key(model, train, test, o, batch_size)
    train, test = train.to(device), (test.to(device) if test is not None else None)
    wd_schedule, resets = _weight_decay_schedule(o.weight_decay, M, device), _reset_schedule(o.optimizer_reset, M)
    s = TrainState(model, BatchedAdamW(list(model.parameters()), _per_model(o.lr, M, "lr", device), wd_schedule[0][1],
                                       betas=o.betas))
    checkpoints = None if o.checkpoint_dir is None else Checkpoints(o.checkpoint_dir, key, o.checkpoint_every, o.steps)
    if checkpoints is not None:
        checkpoints.resume(s, o.progress)
    batches, evaluation = Batches(train, o, model.seeds, batch_size), Evaluation(o, train, test)
    model.train()
    last = train.y.shape[-1]                                      # the gradients derived by hand, where they apply
    by_hand = next((m.loss_and_grads for m in (onelayer, postln) if m.applies(model, last)), None)
    bar = tqdm(total=o.steps, initial=s.step, desc=f"training {M} model(s)", disable=not o.progress, mininterval=1.0)
    if s.step == 0:
        evaluation.record(s)
    stopped = o.stop is not None and o.stop(s.history)
    dense = DenseWindow(o.dense_eval, s) if o.dense_eval is not None else None
    while s.step < o.steps and not stopped:
        x, y = batches.at(s)
        s.opt.weight_decay = next(wd for first, wd in reversed(wd_schedule) if s.step >= first)
        if s.step in resets:                                      # a forked branch starts a fresh optimizer
            s.opt.reset(resets[s.step])
        if by_hand is not None:
            loss = by_hand(model, x, y, o.loss_outputs)
        else:
            loss = losses(model(x, last=y.shape[-1]), y, o.loss_outputs)
            model.zero_grad(set_to_none=False)
            loss.sum().backward()                                 # models are independent: ∂Σ/∂θ_m = ∂L_m/∂θ_m
        s.opt.step()
        s.step += 1
        batches.after_step(s, loss)
        bar.update(1)
        if evaluation.due(s.step, dense is not None and dense.dense):
            evaluation.record(s)
            if test is not None:
                bar.set_postfix(test_acc=f"{min(s.history.test_acc[-1]):.3f}–{max(s.history.test_acc[-1]):.3f}")
            if dense is not None and dense.after_record(s):
                bar.n = s.step
                continue
            stopped = o.stop is not None and o.stop(s.history)
        if checkpoints is not None and checkpoints.due(s.step, stopped):
            checkpoints.save(s)
    bar.close()
    model.eval()
    return s.history


def _mse_and_accuracy(out: Tensor, target: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """Return per-model MSE (mean over examples and outputs) and argmax accuracy (M,), (M,) of out (M, B, C)."""
    loss = (out - target).square().mean(dim=(1, 2))
    acc = (out.argmax(-1) == labels).float().mean(-1)
    return loss, acc


def train_mse(
    model: torch.nn.Module,
    x: Tensor,
    labels: Tensor,
    x_test: Tensor | None = None,
    labels_test: Tensor | None = None,
    *,
    steps: int,
    lr: float | Sequence[float] = 1e-3,
    weight_decay: float | Sequence[float] = 0.0,
    betas: tuple[float, float] = (0.9, 0.999),
    eval_every: int = 10,
    snapshot_steps: Sequence[int] = (),
    progress: bool = True,
) -> History:
    """Return the history of M stacked models (``model(x)`` → (M, N, C)) trained full batch on MSE to one-hot labels.

    Inputs x (N, d_in), integer labels (N,); the targets are one-hot rows of width C. Every model
    takes one :class:`BatchedAdamW` step per epoch (full batch); ``history.steps`` counts epochs and
    the loss curves hold the MSE, the accuracy curves the argmax accuracy. The training metrics of an
    evaluated epoch are read from the forward pass that starts the next epoch (the same parameters and
    inputs, so the same numbers as a separate evaluation, without its cost).
    """
    device = next(model.parameters()).device
    M = model.n_models
    if steps < 0 or eval_every < 1:
        raise ValueError(f"steps >= 0 and eval_every >= 1 required, got steps={steps}, eval_every={eval_every}")
    if x.dim() != 2 or labels.shape != (x.shape[0],):
        raise ValueError(f"x must be (N, d_in) and labels (N,), got {tuple(x.shape)} and {tuple(labels.shape)}")
    x, labels = x.to(device), labels.to(device)
    n_classes = model(x[:1]).shape[-1]
    target = F.one_hot(labels, n_classes).to(x.dtype)
    if x_test is not None:
        x_test, labels_test = x_test.to(device), labels_test.to(device)
        target_test = F.one_hot(labels_test, n_classes).to(x.dtype)
    opt = BatchedAdamW(list(model.parameters()), _per_model(lr, M, "lr", device),
                       _per_model(weight_decay, M, "weight_decay", device), betas=betas)
    history, snapshot_steps = History(), set(int(s) for s in snapshot_steps)

    def record_train(loss: Tensor, acc: Tensor) -> None:
        history.train_loss.append(loss.tolist())
        history.train_acc.append(acc.tolist())

    def record(step: int) -> None:
        history.steps.append(step)
        if x_test is not None:
            with torch.no_grad():
                loss, acc = _mse_and_accuracy(model(x_test), target_test, labels_test)
            history.test_loss.append(loss.tolist())
            history.test_acc.append(acc.tolist())
        if step in snapshot_steps:
            history.snapshots[step] = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}

    model.train()
    record(0)
    pending = True                       # the training metrics of the last recorded step are still to come
    for step in tqdm(range(1, steps + 1), desc=f"training {M} model(s)", disable=not progress, mininterval=1.0):
        loss, acc = _mse_and_accuracy(model(x), target, labels)
        if pending:
            record_train(loss.detach(), acc)
        model.zero_grad(set_to_none=False)
        loss.sum().backward()                                    # models are independent
        opt.step()
        pending = step % eval_every == 0 or step == steps or step in snapshot_steps
        if pending:
            record(step)
    if pending:
        with torch.no_grad():
            record_train(*_mse_and_accuracy(model(x), target, labels))
    model.eval()
    return history
