"""B7: training throughput as a fraction of this machine's measured matmul peak.

The peak is measured in the same process at the same thread count: the best of 5 products of two float32
``n × n`` matrices (n = 2048 by default), 2n³ FLOP each. The workloads are the book's training programs,
``corekit.train.train_ensemble`` on a batched ``BatchedTransformer``:

- ``grokking``: B1's (a + b mod 113, 30 % train, full batch of 3,830 pairs, one layer, d_model 128, d_mlp 512,
  no LayerNorm), ``--models`` models (default 4);
- ``entk``: chapters 06 and 09's (a + b mod 29, half the pairs for training, batch 64 with the last batch kept,
  one layer, d_model 64, d_mlp 256, no LayerNorm), 16 models and 96 models (09's paper profile);
- ``ace_53_d128`` and ``ace_53_d64``: chapter 02's (a + b mod 53 read as [a, b], the 50/50 split, batch 512 with the
  last batch kept, the ACE authors' two post-LayerNorm layers with dropout 0.1, d_model 128 / d_mlp 512 as the
  paper profile and 64 / 256 as the cpu profile), 6 models (3 seeds and their ω → 0 branches).

The FLOPs of one training step are counted by ``torch.utils.flop_counter.FlopCounterMode`` (every matmul the
step executes, forward and backward) as the difference between a run of one step and one epoch more and a run of one
step, per step of that epoch (so the evaluation a run does at its ends cancels, and an epoch's shorter last batch
counts as often as it occurs); the time of a step is the same difference over whole epochs of at least ``--steps``
steps.
``--label`` names the library measured, so that the code of another commit can be measured with the same script
(``PYTHONPATH=OTHER/lib python benchmarks/b7_peak_fraction.py --label before``).

    python benchmarks/b7_peak_fraction.py --threads 2 --label after
"""
from __future__ import annotations

import argparse
import datetime
import os
import time

import torch
from common import RESULTS, append
from torch.utils.flop_counter import FlopCounterMode

from corekit.models import BatchedTransformer, TransformerConfig
from corekit.tasks.modular import modular_addition
from corekit.train import Dataset, steps_per_epoch, train_ensemble

WORKLOADS = {  # name: (p, train_frac, batch_size (None: full), d_model, n_heads, d_mlp, models, drop_last)
    "grokking": (113, 0.3, None, 128, 4, 512, 4, True),
    "entk_16": (29, 0.5, 64, 64, 4, 256, 16, False),
    "entk_96": (29, 0.5, 64, 64, 4, 256, 96, False),
    "ace_53_d128": (53, 0.5, 512, 128, 4, 512, 6, False),
    "ace_53_d64": (53, 0.5, 512, 64, 4, 256, 6, False),
}


def matmul_peak(n: int = 2048, repeats: int = 5) -> float:
    """Return the best FLOP/s of ``repeats`` float32 (n, n) @ (n, n) products at the current thread count."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b                                                                   # warm-up
    best = min(_seconds(lambda: a @ b) for _ in range(repeats))
    return 2 * n ** 3 / best


def _seconds(fn) -> float:
    """Return the wall-clock seconds one call of ``fn`` takes."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def workload(name: str, models: int | None):
    """Return (model factory, train Dataset, test Dataset, train_ensemble keywords) of workload ``name``."""
    p, frac, batch, d_model, n_heads, d_mlp, m, drop_last = WORKLOADS[name]
    m = models or m
    ace = name.startswith("ace")
    task = modular_addition(p, frac, seed=42, split="numpy") if ace else modular_addition(p, frac, seed=0)
    tokens = task.tokens(equals=not ace)
    train = Dataset(tokens[task.train_idx], task.labels[task.train_idx])
    test = Dataset(tokens[task.test_idx], task.labels[task.test_idx])
    if ace:
        config = TransformerConfig.ace_authors(p, d_model=d_model, d_mlp=d_mlp, n_heads=n_heads)
    else:
        config = TransformerConfig(vocab=p + 1, n_ctx=3, d_model=d_model, n_heads=n_heads, d_mlp=d_mlp, n_layers=1,
                                   norm="none", n_out=p)
    decay = [1.0] * (m // 2) + [0.0] * (m - m // 2) if ace else 1.0          # 02: each seed and its ω → 0 branch
    kwargs = dict(batch_size=batch, lr=1e-3, betas=(0.9, 0.999) if ace else (0.9, 0.98), weight_decay=decay,
                  drop_last=drop_last,
                  eval_every=10 ** 9, progress=False)
    return (lambda: BatchedTransformer(config, seeds=list(range(m)))), train, test, kwargs, m


def epoch_steps(train, kwargs) -> int:
    """Return the steps of one epoch of the workload (1 for a full batch): a span over which every batch size occurs."""
    batch = kwargs["batch_size"]
    return 1 if batch is None else steps_per_epoch(len(train), batch, kwargs["drop_last"])


def step_flops(make, train, test, kwargs) -> float:
    """Return the FLOPs of one training step, averaged over an epoch: (a run of 1 + one epoch − a one-step run) / the
    epoch's steps (an epoch's last, shorter batch counted as often as it occurs)."""
    span, counts = epoch_steps(train, kwargs), []
    for steps in (1, 1 + span):
        with FlopCounterMode(display=False) as counter:
            train_ensemble(make(), train, test, steps=steps, **kwargs)
        counts.append(counter.get_total_flops())
    return float(counts[1] - counts[0]) / span


def step_seconds(make, train, test, kwargs, steps: int, repeats: int) -> float:
    """Return the best over ``repeats`` of (time of a run of 1 + whole epochs of at least ``steps`` − 1 steps − time of a
    one-step run) per step."""
    span = epoch_steps(train, kwargs)
    added = span * -(-(steps - 1) // span)
    train_ensemble(make(), train, test, steps=2, **kwargs)                  # warm-up
    best = float("inf")
    for _ in range(repeats):
        one = _seconds(lambda: train_ensemble(make(), train, test, steps=1, **kwargs))
        many = _seconds(lambda: train_ensemble(make(), train, test, steps=1 + added, **kwargs))
        best = min(best, (many - one) / added)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    parser.add_argument("--models", type=int, default=None, help="models per workload (default: the workload's)")
    parser.add_argument("--steps", type=int, default=60, help="training steps a timed run takes (at least 2)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n", type=int, default=2048, help="side of the matmul that measures the peak (>= 2048)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--label", default="", help="what library this is, e.g. 'before' or a commit")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()
    if args.steps < 2:
        parser.error(f"--steps must be at least 2, got {args.steps}")
    if args.threads:
        torch.set_num_threads(args.threads)
    load = os.getloadavg()[0]
    peak = matmul_peak(args.n)
    print(f"matmul peak ({args.n}³ float32, {torch.get_num_threads()} threads): {peak / 1e9:.1f} GFLOP/s", flush=True)
    for name in args.workloads:
        make, train, test, kwargs, m = workload(name, args.models)
        flops = step_flops(make, train, test, kwargs)
        seconds = step_seconds(make, train, test, kwargs, args.steps, args.repeats)
        record = {"id": "B7", "workload": name, "label": args.label, "device": "cpu", "precision": "fp32",
                  "threads": torch.get_num_threads(), "models": m, "steps": args.steps,
                  "step_gflop": round(flops / 1e9, 4), "step_s": round(seconds, 5),
                  "achieved_gflops": round(flops / seconds / 1e9, 2), "matmul_n": args.n,
                  "peak_gflops": round(peak / 1e9, 2), "fraction_of_peak": round(flops / seconds / peak, 4),
                  "load_before": round(load, 2), "load_after": round(os.getloadavg()[0], 2),
                  "torch": torch.__version__, "date": datetime.date.today().isoformat()}
        append(record, args.out)


if __name__ == "__main__":
    main()
