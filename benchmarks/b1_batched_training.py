"""B1: train M grokking runs as one batched program vs a Python loop over M nn.Modules.

Workload (issue 3): a + b mod p (p = 113, 30% train, full batch), 1-layer transformer, d_model 128,
4 heads, d_mlp 512, no LayerNorm, AdamW lr 1e-3, betas (0.9, 0.98), weight decay 1. Baseline: M
ordinary single-model ``nn.Module``s, each stepped by its own ``torch.optim.AdamW`` (torch's default
foreach implementation), in one process on the same device and dtype. Ours: ``corekit.train``.

Prints model-steps/s for both, the ratio and the achieved FLOP/s (as a fraction of the device's
peak where it is known) and appends one JSON line to ``benchmarks/results.jsonl``.

    python benchmarks/b1_batched_training.py                    # CPU: M = 8, 20 steps
    python benchmarks/b1_batched_training.py --models 64 --steps 200 --tf32   # on a GPU
"""
from __future__ import annotations

import argparse
import datetime
import time

import torch
import torch.nn.functional as F
from common import add_common_arguments, emit, setup, sync
from torch import nn

from corekit.models import BatchedTransformer, TransformerConfig
from corekit.tasks.modular import modular_addition
from corekit.train import Dataset, train_ensemble

#: Dense peak FLOP/s by device name fragment and precision (vendor data sheets, no sparsity).
PEAK_FLOPS = {"H200": {"fp32": 67e12, "tf32": 494e12, "bf16": 989e12},
              "H100": {"fp32": 67e12, "tf32": 494e12, "bf16": 989e12},
              "A100": {"fp32": 19.5e12, "tf32": 156e12, "bf16": 312e12}}


class LoneTransformer(nn.Module):
    """The baseline: one ordinary 1-layer attention + MLP transformer without LayerNorm."""

    def __init__(self, vocab: int, n_out: int, d_model: int, n_heads: int, d_mlp: int, n_ctx: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.randn(n_ctx, d_model))
        self.attn = nn.MultiheadAttention(d_model, n_heads, bias=True, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_mlp), nn.ReLU(), nn.Linear(d_mlp, d_model))
        self.unembed = nn.Linear(d_model, n_out)
        self.register_buffer("mask", torch.ones(n_ctx, n_ctx, dtype=torch.bool).triu(1))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Return logits (B, T, n_out)."""
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        T = tokens.shape[1]
        x = x + self.attn(x, x, x, attn_mask=self.mask[:T, :T], need_weights=False)[0]
        x = x + self.mlp(x)
        return self.unembed(x)


def flops_per_model_step(n_examples: int, n_ctx: int, d_model: int, d_mlp: int, n_out: int, vocab: int) -> float:
    """Return the matmul FLOPs corekit executes for one forward + backward pass of one model (3× forward).

    The loss reads the last position only, so queries, attention output, MLP and unembedding run
    there; keys and values come from the (vocab × n_ctx) table of layer-0 inputs.
    """
    per_example = 2 * (2 * d_model * d_model + 2 * d_model * d_mlp + d_model * n_out) + 4 * n_ctx * d_model
    table = 2 * 2 * vocab * n_ctx * d_model * d_model
    return 3.0 * (n_examples * per_example + table)


def time_loop(models, optims, x, y, steps: int, device: torch.device) -> float:
    """Return seconds for ``steps`` full-batch steps of every lone model, one after another."""
    def one_round():
        for model, opt in zip(models, optims):
            loss = F.cross_entropy(model(x)[:, -1], y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    one_round()                                            # warm-up
    sync(device)
    start = time.perf_counter()
    for _ in range(steps):
        one_round()
    sync(device)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=None, help="ensemble size M (default 64 on CUDA, 8 on CPU)")
    parser.add_argument("--steps", type=int, default=None, help="timed steps (default 200 on CUDA, 20 on CPU)")
    parser.add_argument("--p", type=int, default=113)
    parser.add_argument("--tf32", action="store_true", help="allow TF32 matmuls (CUDA)")
    add_common_arguments(parser)
    args = parser.parse_args()

    device = setup(args)
    M = args.models or (64 if device.type == "cuda" else 8)
    steps = args.steps or (200 if device.type == "cuda" else 20)
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32

    d_model, n_heads, d_mlp, p = 128, 4, 512, args.p
    task = modular_addition(p, 0.3, seed=0)
    x, y = task.tokens()[task.train_idx].to(device), task.labels[task.train_idx].to(device)

    lone = [LoneTransformer(p + 1, p, d_model, n_heads, d_mlp, 3).to(device) for _ in range(M)]
    optims = [torch.optim.AdamW(m.parameters(), lr=1e-3, betas=(0.9, 0.98), weight_decay=1.0) for m in lone]
    baseline_s = time_loop(lone, optims, x, y, steps, device)

    config = TransformerConfig(vocab=p + 1, n_ctx=3, d_model=d_model, n_heads=n_heads, d_mlp=d_mlp,
                               norm="none", n_out=p)
    model = BatchedTransformer(config, seeds=list(range(M))).to(device)
    kwargs = dict(lr=1e-3, betas=(0.9, 0.98), weight_decay=1.0, eval_every=10 ** 9, progress=False)
    train_ensemble(model, Dataset(x, y), steps=1, **kwargs)                               # warm-up
    sync(device)
    start = time.perf_counter()
    train_ensemble(model, Dataset(x, y), steps=steps, **kwargs)
    sync(device)
    ours_s = time.perf_counter() - start

    flops = flops_per_model_step(len(x), 3, d_model, d_mlp, p, p + 1) * M * steps / ours_s
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    precision = "tf32" if args.tf32 and device.type == "cuda" else "fp32"
    peak = next((v[precision] for k, v in PEAK_FLOPS.items() if k in name), None)
    record = {
        "id": "B1", "device": name, "precision": precision, "models": M, "steps": steps, "p": p,
        "baseline_model_steps_per_s": round(M * steps / baseline_s, 2),
        "ours_model_steps_per_s": round(M * steps / ours_s, 2),
        "speedup": round(baseline_s / ours_s, 2), "baseline_s": round(baseline_s, 3), "ours_s": round(ours_s, 3),
        "achieved_tflops": round(flops / 1e12, 4),
        "fraction_of_peak": round(flops / peak, 4) if peak else None,
        "date": datetime.date.today().isoformat(),
    }
    emit(record, args.out)


if __name__ == "__main__":
    main()
