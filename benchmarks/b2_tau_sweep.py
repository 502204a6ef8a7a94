"""B2: the grokking-time sweep of notebook 03 (both sweeps, every seed), timed end to end.

The sweep is the one the notebook runs with the chosen profile (``--profile paper`` on a GPU: seven
moduli and six weight decays, 12 seeds each; ``quick`` on a CPU), with any ``-p NAME VALUE``
overrides. Every run of one modulus and batch size trains as one batched program
(``corekit.chapters.grokking_scaling_law``). The baseline is the same sweep as a loop of single-model runs: one run per
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

from corekit.chapters.grokking_scaling_law import RunSpec, SweepSettings, grid, run_shard, run_sweep, shard_problem, shards
from corekit.models import TransformerConfig
from corekit.runs.notebooks import find_root, get_notebook
from corekit.runs.parameters import effective_parameters, parse_value, read_parameters
from corekit.tasks.modular import modular_addition
from corekit.train import steps_per_epoch, train_ensemble

NOTEBOOK = "03_grokking_scaling_law"


def notebook_parameters(profile: str, overrides: dict) -> dict:
    """Return notebook 03's parameters for ``profile`` with ``overrides`` applied (names checked)."""
    nb = get_notebook(find_root(), NOTEBOOK)
    values = {name: ast.literal_eval(p.default) for name, p in read_parameters(nb).items()}
    return {**values, **effective_parameters(nb, profile, overrides)}


def sweeps(params: dict) -> tuple[SweepSettings, SweepSettings, list[RunSpec], list[RunSpec]]:
    """Return (p-sweep settings, ω-sweep settings, p-sweep runs, ω-sweep runs) as notebook 03 builds them."""
    model = {f.name: params[f.name] for f in dataclasses.fields(TransformerConfig) if f.name in params}
    shared = {f.name: params[f.name] for f in dataclasses.fields(SweepSettings) if f.name in params}
    shared["betas"] = tuple(shared["betas"])
    p_settings = SweepSettings(model=TransformerConfig(vocab=1, n_ctx=1, **model, n_layers=1), **shared,
                               max_steps=params["p_max_epochs"])
    omega_pairs = len(modular_addition(params["omega_p"], params["train_frac"], seed=params["data_seed"]).train_idx)
    omega_steps = params["omega_max_epochs"] * steps_per_epoch(omega_pairs, params["omega_batch_size"], params["drop_last"])
    omega_settings = dataclasses.replace(p_settings, max_steps=omega_steps)
    p_specs = grid(params["p_values"], [params["sweep_weight_decay"]], params["seeds"])
    omega_specs = grid([params["omega_p"]], params["weight_decays"], params["seeds"], batch_size=params["omega_batch_size"])
    return p_settings, omega_settings, p_specs, omega_specs


def lone_seconds_per_step(spec: RunSpec, settings: SweepSettings, device: torch.device, steps: int) -> float:
    """Return seconds per optimizer step of a single model of ``spec``'s shard (after one warm-up step)."""
    model, train, test = shard_problem([spec], settings, str(device))
    train, test = train.to(device), test.to(device)
    kwargs = dict(batch_size=spec.batch_size or None, lr=settings.lr, betas=settings.betas, drop_last=settings.drop_last,
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
    p_settings, omega_settings, p_specs, omega_specs = sweeps(params)
    runs = ([(list(dict.fromkeys(p_specs + omega_specs)), p_settings)] if omega_settings == p_settings
            else [(p_specs, p_settings), (omega_specs, omega_settings)])
    first = shards(runs[0][0])[0][:1]
    run_shard(first, dataclasses.replace(p_settings, max_steps=2), str(device), progress=False)
    sync(device)                                            # warm-up: kernels, allocator
    start = time.perf_counter()
    results = [run_sweep(specs, settings, executor=args.executor, device=str(device), progress=True)
               for specs, settings in runs]                 # one list per sweep, in its specs' order
    sync(device)
    ours_s = time.perf_counter() - start

    loop_steps = args.loop_steps or 200
    model_steps, loop_s, programs = 0, 0.0, 0
    for (specs, settings), sweep_results in zip(runs, results):
        steps_run = {r.spec: r.steps_run for r in sweep_results}
        for part in shards(specs):
            per_step = lone_seconds_per_step(part[0], settings, device, loop_steps)
            model_steps += len(part) * max(steps_run[s] for s in part)
            loop_s += sum(steps_run[s] for s in part) * per_step
            programs += 1
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    record = {
        "id": "B2", "device": name, "precision": "fp32", "profile": profile, "executor": args.executor,
        "runs": sum(len(r) for r in results), "programs": programs,
        "censored": sum(r.censored for sweep_results in results for r in sweep_results),
        "max_steps": max(settings.max_steps for _, settings in runs), "model_steps": model_steps,
        "ours_s": round(ours_s, 2), "ours_model_steps_per_s": round(model_steps / ours_s, 1),
        "baseline_s": round(loop_s, 2), "baseline": f"loop of lone runs, extrapolated from {loop_steps} timed steps per shard",
        "speedup": round(loop_s / ours_s, 2), "targets": {"ours_s": "<= 600 on one H200"},
        "overrides": {name: value for name, value in args.p}, "date": datetime.date.today().isoformat(),
    }
    emit(record, args.out)


if __name__ == "__main__":
    main()
