"""The papers' training recipes, for any chapter: the eNTK authors' one-layer transformer on modular addition.

:func:`train_authors` trains models of several seeds together as ``modular_arithmetic_transformer_v4.ipynb`` in
``jylin04/mi-ntk`` does (their split, initial draw, batch order, AdamW and logging) and returns an
:class:`AuthorsRun`; :data:`AUTHORS_SETTINGS` are their settings and :func:`matches_authors` says which of a run's
settings are theirs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from corekit import train
from corekit.models import BatchedTransformer, TransformerConfig
from corekit.tasks.modular import ModularAddition, modular_addition
from corekit.train import History, train_ensemble

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
    rounding starts to move the run (:func:`corekit.chapters.entk_transformer_modular.rounding_horizon`).
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
