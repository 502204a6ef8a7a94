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


def _run_key(model: BatchedTransformer, train: Dataset, **settings) -> str:
    """Return a hash identifying a run (model, data, settings; not the step budget)."""
    h = hashlib.sha256(json.dumps({"config": model.config.as_dict(), "seeds": model.seeds, **settings},
                                  sort_keys=True, default=str).encode())
    h.update(train.x.cpu().numpy().tobytes())
    h.update(train.y.cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def load_checkpoint(path: Path, device: torch.device) -> dict | None:
    """Return the checkpoint at ``path`` (tensors and plain values only), or None if absent or unreadable.

    Loaded with ``weights_only=True``, so a file in a shared folder cannot run code; an unreadable
    (truncated, corrupt or foreign) file is named in a warning and the run starts from step 0.
    """
    if not path.exists():
        return None
    try:
        state = torch.load(path, map_location=device, weights_only=True)
        if not (isinstance(state, dict) and CHECKPOINT_KEYS <= state.keys()):
            raise ValueError("not a checkpoint written by corekit.train")
    except Exception as err:  # torch.load raises many types (RuntimeError, EOFError, UnpicklingError, ...)
        reason = (str(err).strip().splitlines() or [""])[0]
        warnings.warn(f"checkpoint {path} is unreadable ({type(err).__name__}: {reason}); training from step 0",
                      stacklevel=3)
        return None
    return state


def train_ensemble(
    model: BatchedTransformer,
    train: Dataset,
    test: Dataset | None = None,
    *,
    steps: int,
    batch_size: int | None = None,
    lr: float | Sequence[float] = 1e-3,
    weight_decay: float | Sequence[float] | dict[int, float | Sequence[float]] = 0.0,
    betas: tuple[float, float] = (0.9, 0.999),
    optimizer_reset: dict[int, bool | Sequence[bool]] | None = None,
    drop_last: bool = True,
    batch_order: str = "seeded",
    loader_eval_every: int | None = None,
    loss_outputs: int | None = None,
    eval_every: int | None = 100,
    eval_steps: Sequence[int] = (),
    eval_train_size: int = 2048,
    snapshot_steps: Sequence[int] = (),
    checkpoint_dir: str | os.PathLike | None = None,
    checkpoint_every: int = 1000,
    stop: Callable[[History], bool] | None = None,
    dense_eval: Callable[[History], bool] | None = None,
    progress: bool = True,
) -> History:
    """Return the training history of all M models trained together for ``steps`` optimizer steps.

    ``batch_size=None`` trains full batch; an epoch draws n // batch_size batches, or with ``drop_last=False``
    also the shorter remainder (as a ``torch.utils.data.DataLoader`` does by default). ``weight_decay`` may change
    during training:
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
    model, data and settings, resumes from the last checkpoint and ends with the same numbers. ``stop(history)``,
    asked after every evaluation, ends the run early when it returns True. ``dense_eval(history)``, asked after
    every evaluation, evaluates at every step while it returns True; when it turns True at an evaluation made
    every ``eval_every`` steps, the run first goes back to the previous evaluation (a copy of the whole training
    state is kept there) and retraces those steps, the same numbers, evaluating at each, so a crossing inside
    that window is found at its step (``checkpoint_every`` must then be a multiple of ``eval_every``).
    """
    device = next(model.parameters()).device
    M, N = model.n_models, len(train)
    if batch_size is None or batch_size >= N:
        batch_size = N
    if batch_order not in BATCH_ORDERS:
        raise ValueError(f"batch_order must be one of {BATCH_ORDERS}, got {batch_order!r}")
    out_vocab = getattr(model.config, "out_vocab", None)
    if loss_outputs is not None and not (isinstance(loss_outputs, int) and 1 <= loss_outputs <= (out_vocab or loss_outputs)):
        raise ValueError(f"loss_outputs must be an integer in 1..{out_vocab} (the model's outputs), got {loss_outputs!r}")
    if loader_eval_every is not None and (batch_order != "loader" or not isinstance(loader_eval_every, int)
                                          or loader_eval_every < 1):
        raise ValueError(f'loader_eval_every must be a positive integer, with batch_order="loader"; got '
                         f"{loader_eval_every!r} with batch_order={batch_order!r}")
    if steps < 0 or batch_size < 1 or (eval_every is not None and eval_every < 1) or checkpoint_every < 1:
        raise ValueError(f"steps >= 0, batch_size >= 1, eval_every >= 1 (or None) and checkpoint_every >= 1 required; "
                         f"got steps={steps}, batch_size={batch_size}, eval_every={eval_every}, "
                         f"checkpoint_every={checkpoint_every}")
    if dense_eval is not None and eval_every is None:
        raise ValueError("dense_eval needs a periodic evaluation: eval_every must be a positive integer, got None")
    if dense_eval is not None and checkpoint_every % eval_every:
        raise ValueError(f"with dense_eval, checkpoint_every ({checkpoint_every}) must be a multiple of eval_every "
                         f"({eval_every}): a checkpoint is then never inside a window that may be retraced")
    train, test = train.to(device), (test.to(device) if test is not None else None)
    train_eval = Dataset(train.x[:eval_train_size], train.y[:eval_train_size])
    wd_schedule = _weight_decay_schedule(weight_decay, M, device)
    opt = BatchedAdamW(list(model.parameters()), _per_model(lr, M, "lr", device), wd_schedule[0][1], betas=betas)
    resets = _reset_schedule(optimizer_reset, M)
    history, step = History(), 0
    snapshot_steps = set(int(s) for s in snapshot_steps)
    eval_steps = set(int(s) for s in eval_steps)

    ckpt = Path(checkpoint_dir).expanduser().resolve() / "last.pt" if checkpoint_dir is not None else None
    key = _run_key(model, train, batch_size=batch_size, lr=opt.lr.tolist(), betas=betas, eval_every=eval_every,
                   wd=[(k, v.tolist()) for k, v in wd_schedule],
                   **({"resets": [(k, v.tolist()) for k, v in sorted(resets.items())]} if resets else {}),
                   **({"drop_last": False} if not drop_last else {}),
                   **({"batch_order": batch_order, "loader_eval_every": loader_eval_every}
                      if batch_order != "seeded" else {}),
                   **({"loss_outputs": loss_outputs} if loss_outputs is not None else {}),
                   **({"dense_eval": True} if dense_eval is not None else {}),
                   **({"eval_steps": sorted(eval_steps)} if eval_steps else {}))
    state = load_checkpoint(ckpt, device) if ckpt is not None else None
    if state is not None and state["key"] == key and state["step"] <= steps:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        model.load_dropout_state(state["dropout"])
        history, step = History(**state["history"]), state["step"]
        if progress:
            print(f"training resumed from its checkpoint at step {step:,} of {steps:,}", flush=True)

    def save_checkpoint() -> None:
        ckpt.parent.mkdir(parents=True, exist_ok=True)
        tmp = ckpt.with_suffix(".tmp")
        torch.save({"key": key, "step": step, "model": model.state_dict(), "opt": opt.state_dict(),
                    "history": vars(history), "dropout": model.dropout_state()}, tmp)
        os.replace(tmp, ckpt)

    def record() -> None:
        history.steps.append(step)
        for name, data in (("train", train_eval), ("test", test)):
            if data is None:
                continue
            loss, acc = evaluate(model, data, n_outputs=loss_outputs)
            getattr(history, f"{name}_loss").append(loss.tolist())
            getattr(history, f"{name}_acc").append(acc.tolist())
        if step in snapshot_steps:
            history.snapshots[step] = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}

    n_batches = steps_per_epoch(N, batch_size, drop_last)
    model.train()
    last = train.y.shape[-1]                                      # the gradients derived by hand, where they apply
    by_hand = next((m.loss_and_grads for m in (onelayer, postln) if m.applies(model, last)), None)
    bar = tqdm(total=steps, initial=step, desc=f"training {M} model(s)", disable=not progress,
               mininterval=1.0)
    if step == 0:
        record()
    stopped = stop is not None and stop(history)
    batches, loader_gens, epoch_losses = None, None, []
    dense = dense_eval is not None and dense_eval(history)
    window, dense_until = None, 0                                # the training state at the last sparse evaluation

    def keep_window() -> dict:
        return {"step": step, "model": {k: v.detach().clone() for k, v in model.state_dict().items()},
                "opt": {k: [t.clone() for t in v] if isinstance(v, list) else v.clone()
                        for k, v in opt.state_dict().items()},
                "dropout": model.dropout_state(), "batches": batches, "epoch_losses": list(epoch_losses),
                "loaders": None if loader_gens is None else [g.get_state() for g in loader_gens],
                "history": {k: len(v) for k, v in vars(history).items() if isinstance(v, list)},
                "snapshots": set(history.snapshots)}

    if dense_eval is not None and not dense:
        window = keep_window()
    while step < steps and not stopped:
        if batch_size == N:                                      # full batch: every model sees (N, T)
            x, y = train.x, train.y
        else:
            epoch, within = divmod(step, n_batches)
            if batches is None or within == 0:
                if batch_order == "loader":
                    if loader_gens is None:                      # a resumed run replays the epochs before
                        loader_gens = model.init_generators()
                        for e in range(epoch):
                            for g in loader_gens:
                                for _ in range(_loader_draws(e, loader_eval_every)):
                                    _draw(g)
                    elif epoch > 0 and _loader_draws(epoch - 1, loader_eval_every) > 2:
                        for g in loader_gens:                    # the logging passes after the last epoch
                            for _ in range(3):
                                _draw(g)
                    per_model = [_loader_batches(g, N, batch_size, device, drop_last) for g in loader_gens]
                else:
                    per_model = [_batch_indices(s, epoch, N, batch_size, device, drop_last) for s in model.seeds]
                batches = [torch.stack(b) for b in zip(*per_model)]
                if within != 0:
                    epoch_losses = [torch.full((M,), float("nan"), device=device)]
            idx = batches[within]                                # (M, batch_size)
            x, y = train.x[idx], train.y[idx]
        opt.weight_decay = next(wd for first, wd in reversed(wd_schedule) if step >= first)
        if step in resets:
            opt.reset(resets[step])
        if by_hand is not None:
            loss = by_hand(model, x, y, loss_outputs)
        else:
            loss = losses(model(x, last=y.shape[-1]), y, loss_outputs)
            model.zero_grad(set_to_none=False)
            loss.sum().backward()                                # models are independent: ∂Σ/∂θ_m = ∂L_m/∂θ_m
        opt.step()
        step += 1
        if batch_size < N:
            epoch_losses.append(loss.detach())
            if step % n_batches == 0:
                history.epoch_train_loss.append(torch.stack(epoch_losses).mean(0).tolist())
                epoch_losses = []
        bar.update(1)
        periodic = eval_every is not None and step % eval_every == 0
        if periodic or step == steps or step in snapshot_steps or step in eval_steps or dense:
            record()
            if test is not None:
                bar.set_postfix(test_acc=f"{min(history.test_acc[-1]):.3f}–{max(history.test_acc[-1]):.3f}")
            if dense_eval is not None:
                was_dense, dense = dense, dense_eval(history) or step < dense_until
                if dense and not was_dense and step - window["step"] > 1:      # retrace the window, densely
                    dense_until = step
                    step, batches, epoch_losses = window["step"], window["batches"], list(window["epoch_losses"])
                    model.load_state_dict(window["model"])
                    opt.load_state_dict(window["opt"])
                    model.load_dropout_state(window["dropout"])
                    if window["loaders"] is None:
                        loader_gens = None
                    else:
                        for g, state in zip(loader_gens, window["loaders"]):
                            g.set_state(state)
                    for name, length in window["history"].items():
                        del getattr(history, name)[length:]
                    for snap in set(history.snapshots) - window["snapshots"]:
                        del history.snapshots[snap]
                    bar.n = step
                    continue
                if not dense:
                    window = keep_window()
            stopped = stop is not None and stop(history)
        if ckpt is not None and (step % checkpoint_every == 0 or step == steps or stopped):
            save_checkpoint()
    bar.close()
    model.eval()
    return history


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
