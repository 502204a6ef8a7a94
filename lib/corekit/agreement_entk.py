"""A language model's eNTK beside ACE's number-agreement axis (chapter 08, question 4).

ACE's axis (:func:`corekit.number_axis.find_axis`) lives in the residual stream ``layer`` at the last
prompt token. The eNTK at that layer is the residual-stream operator of the decoder block that writes
the stream (:class:`~corekit.entk.ResidualStreamNTK` of block ``layer``'s ``mlp.down_proj``), whose
inputs must share one token length: :func:`number_lens` keeps the prompts (train and test) of the most
common unpadded length, takes the operator's top eigenpairs by block Lanczos and gives every
eigenvector one score per prompt (:func:`~corekit.entk.eigenvector_scores`). Two readings of the
same prompts follow: whether a score separates singular from plural (:func:`held_out_auroc`: the
eigenvector is chosen and signed on the training prompts, scored on the held-out ones), and the
angle between ACE's axis and the eNTK's directions in the residual stream (each eigenvector's scores
mapped to a direction by least squares, :func:`stream_directions`; :func:`span_cos2`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from corekit import stats
from corekit.entk import Eigenpairs, ResidualStreamNTK, eigenvector_scores, lanczos
from corekit.lenses import residual_directions
from corekit.number_axis import Axis, Measured


def modal_length_rows(mask: Tensor) -> tuple[Tensor, int]:
    """Return the rows (n,) of a left-padded attention mask (N, T) whose unpadded length is the most common one, and
    that length (ties: the shorter)."""
    if mask.dim() != 2:
        raise ValueError(f"mask must be an (N, T) attention mask, got shape {tuple(mask.shape)}")
    lengths = mask.sum(1)
    values, counts = torch.unique(lengths, return_counts=True)
    length = int(values[counts.argmax()])
    return torch.nonzero(lengths == length)[:, 0], length


@dataclass
class NumberLens:
    """The eNTK of block ``layer`` on the prompts of one token length, beside ACE's axis at that layer: which prompts
    (``rows`` into train + test, ``is_train`` (n,)), their labels y (n,) (1 = plural), the residual h (n, D) at the
    last token, the axis coordinate z (n,), the top eigenpairs, their scores (k, n), and the times of the cached
    forward pass and of Lanczos."""

    layer: int
    module: str
    tokens: int
    rows: np.ndarray
    is_train: np.ndarray
    y: np.ndarray
    h: Tensor
    z: np.ndarray
    pairs: Eigenpairs
    scores: Tensor
    cache_seconds: float
    lanczos_seconds: float

    @property
    def relative_residuals(self) -> np.ndarray:
        """Return ‖K̃v − λv‖ / λ (k,) of every pair."""
        return (self.pairs.residuals / self.pairs.values.abs()).cpu().numpy()


def number_lens(m: Measured, axis: Axis, layer: int, top_k: int, block_size: int = 8, max_vectors: int = 96,
                tol: float = 1e-3, seed: int = 0, chunk_size: int = 64, vector_chunk: int = 8) -> NumberLens:
    """Return the top-``top_k`` eigenpairs of block ``layer``'s residual-stream eNTK on the measured prompts of the most
    common token length, by block Lanczos until each relative residual is ≤ ``tol`` (at most ``max_vectors``
    vectors), with ACE's axis coordinate on the same prompts."""
    if not isinstance(layer, int) or isinstance(layer, bool) or not 1 <= layer <= m.n_layers:
        raise ValueError(f"layer must be a decoder block in [1, {m.n_layers}] (the block that writes the axis's "
                         f"residual stream), got {layer!r}")
    if max_vectors < top_k + block_size:
        raise ValueError(f"max_vectors must be at least top_k + block_size = {top_k + block_size}, got {max_vectors}")
    splits = (m.train, m.test)
    if m.train.batch.input_ids.shape[1] != m.test.batch.input_ids.shape[1]:
        width = max(s.batch.input_ids.shape[1] for s in splits)
        pad = [width - s.batch.input_ids.shape[1] for s in splits]
        ids = torch.cat([torch.nn.functional.pad(s.batch.input_ids, (p, 0)) for s, p in zip(splits, pad)])
        mask = torch.cat([torch.nn.functional.pad(s.batch.attention_mask, (p, 0)) for s, p in zip(splits, pad)])
    else:
        ids = torch.cat([s.batch.input_ids for s in splits])
        mask = torch.cat([s.batch.attention_mask for s in splits])
    rows, tokens = modal_length_rows(mask)
    n_train = len(m.train.y)
    is_train = (rows < n_train).numpy()
    if is_train.sum() < 2 or (~is_train).sum() < 2:
        raise ValueError(f"only {int(is_train.sum())} train and {int((~is_train).sum())} test prompts have the most "
                         f"common length ({tokens} tokens): measure more prompts")
    y = np.concatenate([m.train.y, m.test.y])[rows.numpy()]
    h = torch.cat([m.train.last.h[layer], m.test.last.h[layer]])[rows].double()
    z = ((h - axis.core.mean[layer].double()) @ axis.q[layer, :, 0].double()).cpu().numpy()
    start = time.perf_counter()
    op = ResidualStreamNTK(m.lm, ids[rows][:, -tokens:].to(m.lm.device), layer, chunk_size=chunk_size,
                           vector_chunk=vector_chunk)
    cache_seconds = time.perf_counter() - start
    start = time.perf_counter()
    pairs = lanczos(op.matvec, op.n, top_k, block_size=block_size, max_steps=max_vectors // block_size, tol=tol,
                    seed=seed, device=m.lm.device, relative_to="each")
    lanczos_seconds = time.perf_counter() - start
    return NumberLens(layer, op.module_path, tokens, rows.numpy(), is_train, y, h.cpu(), z, pairs,
                      eigenvector_scores(pairs.vectors.cpu(), len(rows)), cache_seconds, lanczos_seconds)


@dataclass
class HeldOut:
    """The score row chosen on the training prompts (highest oriented train AUROC), its sign, its train AUROC, its
    held-out AUROC and that AUROC's percentile-bootstrap interval over the held-out prompts."""

    index: int
    sign: float
    train_auroc: float
    test_auroc: float
    interval: tuple[float, float]


def held_out_auroc(scores: Tensor | np.ndarray, y: np.ndarray, is_train: np.ndarray, n_boot: int = 2000,
                   level: float = 0.95, seed: int = 0) -> HeldOut:
    """Return the held-out AUROC (with interval; ``n_boot`` 0: none, NaN) of the row of ``scores`` (k, n) that separates
    ``y`` (n,) best on the training prompts (``is_train`` (n,)), each row signed on the training prompts."""
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2 or s.shape[1] != len(y) or len(is_train) != len(y):
        raise ValueError(f"scores must be (k, n) with n = len(y) = len(is_train), got {s.shape}, {len(y)}, "
                         f"{len(is_train)}")
    train, test = np.asarray(is_train, bool), ~np.asarray(is_train, bool)
    signs = np.atleast_1d(stats.orient(s[:, train], y[train]))
    oriented = s * signs[:, None]
    train_auroc = np.atleast_1d(stats.auroc(oriented[:, train], y[train]))
    best = int(np.argmax(train_auroc))
    row, y_test = oriented[best, test], y[test]
    interval = (np.nan, np.nan) if n_boot == 0 else stats.bootstrap_interval(
        lambda a, b: stats.auroc(a, b) if 0 < b.sum() < len(b) else np.nan, (row, y_test), n_boot=n_boot, level=level,
        seed=seed)
    return HeldOut(best, float(signs[best]), float(train_auroc[best]), float(stats.auroc(row, y_test)), interval)


def random_scores(h: Tensor, k: int, seed: int = 0) -> Tensor:
    """Return the projections (k, n) of the centred states h (n, D) on k random unit directions (seeded)."""
    if h.dim() != 2 or not isinstance(k, int) or k < 1:
        raise ValueError(f"h must be (n, D) and k a positive integer, got {tuple(h.shape)} and {k!r}")
    gen = torch.Generator().manual_seed(seed)
    d = torch.randn(h.shape[1], k, generator=gen, dtype=torch.float64)
    hc = h.double().cpu() - h.double().cpu().mean(0)
    return (hc @ (d / d.norm(dim=0))).T


def stream_directions(h: Tensor, scores: Tensor) -> Tensor:
    """Return one unit direction (D, k) of the stream per score row (k, n) of the states h (n, D): the least-squares
    readout of that row alone (:func:`corekit.lenses.residual_directions`; minimum norm when n ≤ D)."""
    if h.dim() != 2 or scores.dim() != 2 or scores.shape[1] != h.shape[0]:
        raise ValueError(f"h must be (n, D) and scores (k, n) with the same n, got {tuple(h.shape)} and "
                         f"{tuple(scores.shape)}")
    h, scores = h.double().cpu(), scores.double().cpu()
    return torch.cat([residual_directions(h[None], row[None, :, None])[0] for row in scores], dim=1)


def span_cos2(q: Tensor, Q: Tensor) -> float:
    """Return the squared cosine of the angle between a direction q (D,) and the span of the columns of Q (D, k)."""
    if q.dim() != 1 or Q.dim() != 2 or Q.shape[0] != q.shape[0]:
        raise ValueError(f"q must be (D,) and Q (D, k) with the same D, got {tuple(q.shape)} and {tuple(Q.shape)}")
    basis = torch.linalg.qr(Q.double().cpu())[0]
    q = q.double().cpu()
    return float((basis.T @ q).square().sum() / q.square().sum())


def random_span_cos2(D: int, k: int, samples: int = 200, seed: int = 0) -> np.ndarray:
    """Return the squared cosines (samples,) of a fixed direction with random k-dimensional subspaces of R^D (mean
    k / D)."""
    if not isinstance(k, int) or not 1 <= k <= D:
        raise ValueError(f"k must be an integer in [1, D = {D}], got {k!r}")
    gen = torch.Generator().manual_seed(seed)
    e = torch.zeros(D, dtype=torch.float64)
    e[0] = 1.0
    return np.array([span_cos2(e, torch.randn(D, k, generator=gen, dtype=torch.float64)) for _ in range(samples)])
