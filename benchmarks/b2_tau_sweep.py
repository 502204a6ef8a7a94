"""B2: the grokking-time sweep of notebook 03 (both sweeps, every seed), timed end to end.

The sweep is the one the notebook runs with the chosen profile (``--profile paper`` on a GPU: seven
moduli and six weight decays, 12 seeds each; ``quick`` on a CPU), with any ``-p NAME VALUE``
overrides. Every run of one modulus and batch size trains as one batched program
(``corekit.sweep``). The baseline is the same sweep as a loop of single-model runs: one run per
shard is timed alone for ``--loop-steps`` steps and the loop's time is extrapolated as
Σ over runs (steps that run needed × seconds per step of a lone model of its shard).

    python benchmarks/b2_tau_sweep.py                       # CPU: the quick profile
    python benchmarks/b2_tau_sweep.py --profile paper       # on a GPU (target: ≤ 600 s)
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import datetime
import time

import torch
from common import add_common_arguments, emit, setup, sync

from corekit.cli import effective_parameters, find_root, get_notebook, parse_value, read_parameters
from corekit.sweep import RunSpec, SweepSettings, grid, run_shard, run_sweep, shard_problem, shards
from corekit.train import train_ensemble

NOTEBOOK = "03_grokking_scaling_law"


def notebook_parameters(profile: str, overrides: dict) -> dict:
    """Return notebook 03's parameters for ``profile`` with ``overrides`` applied (names checked)."""
    nb = get_notebook(find_root(), NOTEBOOK)
    values = {name: ast.literal_eval(p.default) for name, p in read_parameters(nb).items()}
    return {**values, **effective_parameters(nb, profile, overrides)}


def lone_seconds_per_step(spec: RunSpec, settings: SweepSettings, device: torch.device, steps: int) -> float:
    """Return seconds per optimizer step of a single model of ``spec``'s shard (after one warm-up step)."""
    model, train, test = shard_problem([spec], settings, str(device))
    train, test = train.to(device), test.to(device)
    kwargs = dict(batch_size=spec.batch_size or None, lr=settings.lr, betas=settings.betas,
                  weight_decay=spec.weight_decay, eval_every=settings.eval_every, eval_train_size=len(train),
                  progress=False)
    train_ensemble(model, train, test, steps=1, **kwargs)
    sync(device)
    start = time.perf_counter()
    train_ensemble(model, train, test, steps=steps, **kwargs)
    sync(device)
    return (time.perf_counter() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", choices=("quick", "paper"), default=None,
                        help="notebook 03 profile (default: paper on CUDA, quick on CPU)")
    parser.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help="override a notebook parameter, as in `corekit run`")
    parser.add_argument("--executor", choices=("local", "ray"), default="local")
    parser.add_argument("--loop-steps", type=int, default=None, help="timed steps per lone model (default 200)")
    add_common_arguments(parser)
    args = parser.parse_args()

    device = setup(args)
    profile = args.profile or ("paper" if device.type == "cuda" else "quick")
    params = notebook_parameters(profile, {name: parse_value(name, value) for name, value in args.p})
    settings = SweepSettings(d_model=params["d_model"], n_heads=params["n_heads"], d_mlp=params["d_mlp"], n_layers=1,
                             norm=params["norm"], lr=params["lr"], betas=tuple(params["betas"]),
                             train_frac=params["train_frac"], data_seed=params["data_seed"],
                             max_steps=params["max_steps"], margin=params["margin"], eval_every=params["eval_every"])
    specs = list(dict.fromkeys(grid(params["p_values"], [params["sweep_weight_decay"]], params["seeds"])
                               + grid([params["omega_p"]], params["weight_decays"], params["seeds"],
                                      batch_size=params["omega_batch_size"])))
    parts = shards(specs)
    run_shard(parts[0][:1], dataclasses.replace(settings, max_steps=2), str(device), progress=False)
    sync(device)                                            # warm-up: kernels, allocator
    start = time.perf_counter()
    results = run_sweep(specs, settings, executor=args.executor, device=str(device), progress=True)
    sync(device)
    ours_s = time.perf_counter() - start

    model_steps = sum(len(part) * max(r.steps_run for r in results if r.spec in set(part)) for part in parts)
    loop_steps = args.loop_steps or 200
    per_step = {(part[0].p, part[0].batch_size): lone_seconds_per_step(part[0], settings, device, loop_steps)
                for part in parts}
    by_spec = {r.spec: r for r in results}
    loop_s = sum(by_spec[s].steps_run * per_step[(s.p, s.batch_size)] for s in specs)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    record = {
        "id": "B2", "device": name, "precision": "fp32", "profile": profile, "executor": args.executor,
        "runs": len(specs), "programs": len(parts), "censored": sum(r.censored for r in results),
        "max_steps": settings.max_steps, "model_steps": model_steps,
        "ours_s": round(ours_s, 2), "ours_model_steps_per_s": round(model_steps / ours_s, 1),
        "baseline_s": round(loop_s, 2), "baseline": f"loop of lone runs, extrapolated from {loop_steps} timed steps per shard",
        "speedup": round(loop_s / ours_s, 2), "targets": {"ours_s": "<= 600 on one H200"},
        "overrides": {name: value for name, value in args.p}, "date": datetime.date.today().isoformat(),
    }
    emit(record, args.out)


if __name__ == "__main__":
    main()
