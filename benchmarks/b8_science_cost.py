"""B8: what the science costs: one epoch of chapter 02's p-53 training and one step of an 03 shard past 3 p_c.

The workloads are the chapters' own training calls, their settings read from the notebooks' profiles:

- ``02_epoch_d64`` and ``02_epoch_d128``: one epoch of chapter 02's training at p 53 (the cpu profile, d_model 64,
  and the paper profile, d_model 128): 6 models (3 seeds, each with its ω → 0 branch, weight decays 1, 1, 1, 0, 0, 0),
  batch 512 with the last batch kept (3 steps an epoch), dropout 0.1, AdamW lr 1e-3;
- ``03_shard_p79``: one training step of chapter 03's cpu-profile shard at p = 79 (8 seeds, full batch of 3,120
  pairs, d_model 64, lr 3e-3, ω = 1), with the evaluation of both sets every 2 steps that the chapter makes.

A time is the best over ``--repeats`` of (a run of n + 1 units − a run of 1 unit) / n, so a run's set-up cancels;
``--label`` names the library measured (``PYTHONPATH=OTHER/lib python benchmarks/b8_science_cost.py --label
before`` measures another checkout with the same script). One JSON record per workload goes to
``benchmarks/results.jsonl`` (id "B8").

    python benchmarks/b8_science_cost.py --threads 1 --label after
"""
from __future__ import annotations

import argparse
import datetime
import os
import time
from dataclasses import replace
from pathlib import Path

import torch
from common import RESULTS, append

from corekit.chapters import grokking_scaling_law
from corekit.models import BatchedTransformer, TransformerConfig
from corekit.runs.notebooks import Notebook
from corekit.runs.parameters import effective_parameters, resolved_parameters
from corekit.tasks.modular import modular_addition
from corekit.train import Dataset, steps_per_epoch, train_ensemble

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = ("02_epoch_d64", "02_epoch_d128", "03_shard_p79")


def profile(name: str, profile_name: str) -> dict:
    """Return every parameter of notebook ``name`` at ``profile_name``: the profile's values, else the defaults."""
    nb = Notebook(ROOT, name)
    return resolved_parameters(nb, effective_parameters(nb, profile_name, {}))


def grokking_cores_epochs(profile_name: str):
    """Return (run(epochs), unit name): chapter 02's training for a number of epochs at ``profile_name``."""
    c = profile("02_grokking_cores", profile_name)
    task = modular_addition(c["p"], c["train_frac"], c["data_seed"], split=c["split"])
    train, test = task.datasets(c["equals_token"])
    config = TransformerConfig(vocab=c["p"] + int(c["equals_token"]), n_ctx=train.x.shape[1], d_model=c["d_model"],
                               n_heads=c["n_heads"], d_mlp=c["d_mlp"], n_layers=c["n_layers"], norm=c["norm"],
                               dropout=c["dropout"], causal=c["causal"], qkv_bias=c["qkv_bias"], init=c["init"],
                               n_out=c["p"], embedding_dropout=c["embedding_dropout"])
    seeds = list(c["seeds"])
    spe = steps_per_epoch(len(train), c["batch_size"], c["drop_last"])

    def run(epochs: int) -> None:
        model = BatchedTransformer(config, seeds + seeds)
        train_ensemble(model, train, test, steps=epochs * spe, batch_size=c["batch_size"], lr=c["lr"],
                       betas=tuple(c["betas"]), weight_decay=[c["weight_decay"]] * len(seeds) + [0.0] * len(seeds),
                       drop_last=c["drop_last"], eval_every=None, progress=False)
    return run, "epoch", {"p": c["p"], "d_model": c["d_model"], "d_mlp": c["d_mlp"], "models": 2 * len(seeds),
                          "batch_size": c["batch_size"], "steps_per_epoch": spe}


def scaling_shard_steps(p: int = 79):
    """Return (run(steps), unit name): chapter 03's cpu-profile shard at modulus ``p`` for a number of steps."""
    c = profile("03_grokking_scaling_law", "cpu")
    model = replace(grokking_scaling_law.SWEEP_MODEL, d_model=c["d_model"], n_heads=c["n_heads"], d_mlp=c["d_mlp"],
                    norm=c["norm"], dropout=c["dropout"], causal=c["causal"], qkv_bias=c["qkv_bias"], init=c["init"],
                    embedding_dropout=c["embedding_dropout"])
    task = modular_addition(p, c["train_frac"], seed=c["data_seed"])
    x, y = task.tokens(c["equals_token"]), task.labels
    train, test = Dataset(x[task.train_idx], y[task.train_idx]), Dataset(x[task.test_idx], y[task.test_idx])
    config = replace(model, vocab=p + int(c["equals_token"]), n_ctx=x.shape[1], n_out=p)
    seeds = list(c["seeds"])

    def run(steps: int) -> None:
        train_ensemble(BatchedTransformer(config, seeds), train, test, steps=steps, lr=c["lr"], betas=tuple(c["betas"]),
                       weight_decay=c["sweep_weight_decay"], drop_last=c["drop_last"], eval_every=c["eval_every"],
                       eval_train_size=len(train), progress=False)
    return run, "step", {"p": p, "d_model": c["d_model"], "d_mlp": c["d_mlp"], "models": len(seeds),
                         "batch_size": len(train), "eval_every": c["eval_every"]}


def best_unit_seconds(run, units: int, repeats: int) -> float:
    """Return the best over ``repeats`` of (seconds of ``units`` + 1 units − seconds of 1 unit) / ``units``."""
    run(1)                                                                   # warm-up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run(1)
        one = time.perf_counter() - start
        start = time.perf_counter()
        run(units + 1)
        best = min(best, (time.perf_counter() - start - one) / units)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    parser.add_argument("--units", type=int, default=10, help="epochs (02) or steps (03) a timed run adds (>= 1)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--label", default="", help="what library this is, e.g. 'before' or a commit")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()
    if args.units < 1 or args.repeats < 1 or args.threads < 1:
        parser.error("--units, --repeats and --threads must be positive integers")
    torch.set_num_threads(args.threads)
    for name in args.workloads:
        load = os.getloadavg()[0]
        if name.startswith("02_epoch"):
            run, unit, sizes = grokking_cores_epochs("cpu" if name.endswith("d64") else "paper")
        else:
            run, unit, sizes = scaling_shard_steps()
        seconds = best_unit_seconds(run, args.units, args.repeats)
        record = {"id": "B8", "workload": name, "label": args.label, "device": "cpu", "precision": "fp32",
                  "threads": torch.get_num_threads(), "unit": unit, "units": args.units, "repeats": args.repeats,
                  f"seconds_per_{unit}": round(seconds, 4), "sizes": sizes, "load_before": round(load, 2),
                  "load_after": round(os.getloadavg()[0], 2), "torch": torch.__version__,
                  "date": datetime.date.today().isoformat()}
        append(record, args.out)


if __name__ == "__main__":
    main()
