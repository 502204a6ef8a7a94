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


def emit(record: dict, out: str | Path) -> None:
    """Print ``record`` as one JSON line and append it to ``out``; fail when it holds no finite speedup."""
    line = json.dumps(record)
    print(line)
    with open(out, "a") as fh:
        fh.write(line + "\n")
    if not math.isfinite(record.get("speedup", float("nan"))):
        raise SystemExit("benchmark produced no timing")
