"""What every benchmark shares: the device / threads / output options, timing sync, the JSON record."""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import torch

from corekit.device import default_device

RESULTS = Path(__file__).with_name("results.jsonl")


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """Add --device, --threads and --out to a benchmark's argument parser."""
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (default: torch's); 1 avoids spinning threads on a busy machine")
    parser.add_argument("--out", default=str(RESULTS), help="JSON-lines file the record is appended to")


def setup(args: argparse.Namespace) -> torch.device:
    """Return the benchmark's device after applying --threads."""
    if args.threads:
        torch.set_num_threads(args.threads)
    return default_device(args.device)


def sync(device: torch.device) -> None:
    """Wait for queued GPU work so that wall-clock timings are honest."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def append(record: dict, out: str | Path) -> None:
    """Print ``record`` as one JSON line and append it to ``out``."""
    line = json.dumps(record)
    print(line, flush=True)
    with open(out, "a") as fh:
        fh.write(line + "\n")


def emit(record: dict, out: str | Path) -> None:
    """Print ``record`` as one JSON line and append it to ``out``; fail when it holds no finite speedup."""
    append(record, out)
    if not math.isfinite(record.get("speedup", float("nan"))):
        raise SystemExit("benchmark produced no timing")


def add_size_arguments(parser: argparse.ArgumentParser) -> None:
    """Add --small / --full (CPU or paper size of the grokking transformer) and --p to a parser."""
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--small", action="store_true", help="CPU size (the default on a CPU)")
    size.add_argument("--full", action="store_true", help="paper size (the default on a GPU)")
    parser.add_argument("--p", type=int, help="override the modulus")


def grokking_transformer(args: argparse.Namespace, device: torch.device, small: dict, full: dict):
    """Return (sizes, model, tokens (p², 3)): the 1-layer bias-free grokking transformer the eNTK benchmarks use."""
    from corekit.models import BatchedTransformer, TransformerConfig
    from corekit.tasks.modular import modular_addition

    sizes = dict(full if args.full or (device.type == "cuda" and not args.small) else small)
    if args.p:
        sizes["p"] = args.p
    p = sizes["p"]
    config = TransformerConfig(vocab=p + 1, n_ctx=3, d_model=sizes["d_model"], n_heads=sizes["n_heads"],
                               d_mlp=sizes["d_mlp"], n_layers=1, norm="none", bias=False, n_out=p)
    model = BatchedTransformer(config, seeds=[0]).to(device).eval()
    return sizes, model, modular_addition(p, 0.5, seed=0).tokens().to(device)
