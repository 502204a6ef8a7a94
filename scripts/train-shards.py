"""Train a chapter's long profile shard by shard, each finished shard's record written for the notebook to re-read.

    .venv/bin/python scripts/train-shards.py 03_grokking_scaling_law --profile paper --list
    .venv/bin/python scripts/train-shards.py 03_grokking_scaling_law --profile paper [--only 31 43] [--threads 2]
    .venv/bin/python scripts/train-shards.py 03_grokking_scaling_law --profile paper --shard p53_b512_d8e98ce8750f
    .venv/bin/python scripts/train-shards.py 02_grokking_cores --profile paper [--only 0] [--threads 2]

03's shards are its moduli (and the ω sweep's weight decays), 02's its seeds (both branches of a seed, trained and
measured alone: ``grokking_cores.measure_seed``). The profile names where the shards checkpoint
(``checkpoint_dir``, outside the work tree, so an interrupted shard resumes in a later process) and where their
records go (``shard_records``, committed): a shard whose record is there is skipped; the others train one after the
other, each writing its record the moment it finishes. The notebook run at the same profile then re-reads every
record and trains nothing. Stop it at any point (Ctrl-C, SIGTERM): the shard in progress resumes from its last
checkpoint when the script is run again.
"""
from __future__ import annotations

import argparse
import sys
import time

import torch

from corekit.chapters import grokking_cores as chapter02
from corekit.chapters import grokking_scaling_law as chapter03
from corekit.device import default_device
from corekit.runs.notebooks import find_root, get_notebook
from corekit.runs.parameters import check_chapter, effective_parameters, resolved_parameters
from corekit.shard_records import read
from corekit.tasks.modular import modular_addition

CHAPTERS = ("02_grokking_cores", "03_grokking_scaling_law")


def main(argv: list[str] | None = None) -> int:
    """Return the exit status after training (or listing) the shards the arguments ask for."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebook", choices=CHAPTERS)
    ap.add_argument("--profile", required=True, choices=("cpu", "paper"))
    ap.add_argument("--only", type=int, nargs="+", metavar="N", help="only the shards of these moduli (03) or seeds (02)")
    ap.add_argument("--shard", nargs="+", metavar="NAME", help="only the 03 shards of these names (as --list prints them)")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    ap.add_argument("--list", action="store_true", help="list the shards and whether each has its record")
    args = ap.parse_args(argv)
    nb = get_notebook(find_root(), args.notebook)
    values = effective_parameters(nb, args.profile, {})
    check_chapter(nb, values)
    params = resolved_parameters(nb, values)
    if not params.get("shard_records") or not params.get("checkpoint_dir"):
        sys.exit(f"the {args.profile} profile of {args.notebook} must set shard_records and checkpoint_dir")
    if args.threads is not None:
        if args.threads < 1:
            sys.exit(f"--threads must be a positive integer, got {args.threads}")
        torch.set_num_threads(args.threads)
    if args.notebook == "02_grokking_cores":
        if args.shard:
            sys.exit("--shard names 03's shards; choose 02's seeds with --only")
        return seeds_02(params, args.only, args.list)
    plan = chapter03.sweep_plan(params)
    programs = plan.programs(params["max_models_per_shard"] or None)
    todo = []
    for specs, settings in programs:
        done = chapter03.read_records([specs], settings, params["shard_records"])
        name = chapter03.shard_name(specs, settings)
        wanted = (args.only is None or specs[0].p in args.only) and (args.shard is None or name in args.shard)
        print(f"{'done' if done else 'to do' if wanted else 'skipped'}: {chapter03.shard_label(specs)} "
              f"({name})", flush=True)
        if not done and wanted:
            todo.append((specs, settings))
    if args.list:
        return 0
    for i, (specs, settings) in enumerate(todo, 1):
        print(f"shard {i}/{len(todo)}: {chapter03.shard_label(specs)}, {torch.get_num_threads()} threads", flush=True)
        started = time.perf_counter()
        results = chapter03.run_shard(specs, settings, "cpu", params["checkpoint_dir"], progress=True,
                                      checkpoint_every=params["checkpoint_every"], record_to=params["shard_records"])
        print(chapter03.shard_line(i, len(todo), specs, results) + f" in {time.perf_counter() - started:.0f} s",
              flush=True)
    return 0


def seeds_02(params: dict, only: list[int] | None, listing: bool) -> int:
    """Return 0 after listing, or training and measuring, chapter 02's seeds without a record (``only``: those seeds)."""
    todo = []
    for seed in params["seeds"]:
        name = chapter02.record_name(params, seed)
        done = read(params["shard_records"], name, chapter02.record_key(params, seed)) is not None
        wanted = only is None or seed in only
        print(f"{'done' if done else 'to do' if wanted else 'skipped'}: seed {seed} ({name})", flush=True)
        if not done and wanted:
            todo.append(seed)
    if listing:
        return 0
    task = modular_addition(params["p"], params["train_frac"], seed=params["data_seed"], split=params["split"])
    for i, seed in enumerate(todo, 1):
        print(f"shard {i}/{len(todo)}: seed {seed}, both branches, {torch.get_num_threads()} threads", flush=True)
        started = time.perf_counter()
        found, summary = chapter02.measure_seed(params, seed, task, default_device("cpu"), params["shard_records"],
                                                params["checkpoint_dir"], progress=True, write=True)
        pts = found.points
        print(f"shard {i}/{len(todo)} done: seed {seed}, grokking at step "
              f"{found.checkpoints[pts.seed_i_grok[0]] if pts.seed_grok[0] is not None else 'never'}, "
              f"{summary['training_s']:,.0f} s of training in {summary['segments']} segment(s), "
              f"{time.perf_counter() - started:,.0f} s in all", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
