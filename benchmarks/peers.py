"""PEERS: corekit side by side with the papers' authors' code, the same job on the same inputs, timed in one process.

Each workload runs on both sides interleaved (authors, ours, authors, ours, …, ``--repeats`` each, default 3)
on one thread (``torch.set_num_threads(1)`` and one BLAS/OpenMP thread for numpy and scipy), prints a line
per run and appends one JSON record per workload (id "PEERS", field "workload") to
``benchmarks/results.jsonl``: both sides' min and median seconds, ratio = authors' median / ours median
(> 1: corekit is faster), whether the outputs agree and within which tolerance, the 1-minute load
average before and after, the authors' commit and the torch version. The authors' code is loaded at run
time from their clones (``scripts/oracle/mi_ntk_06.py`` and ``cores_02.py`` do the loading and the weight
mapping); a workload whose clone is absent is skipped with a message and not recorded. Where ours is not
at least 2× faster (``--profile auto``), ours is run once more under cProfile and its top functions are
printed and recorded. ``--interleave`` adds the project's own baselines b1 and b4 (ours vs baseline, not
authors), interleaved the same way.

Workloads (``benchmarks/peers_workloads.py``):

* ``06_training``: 06 training of seed 2 for ``--epochs-06`` epochs (default 300): the authors' notebook loop
  (``modular_arithmetic_transformer_v4.ipynb`` cells 11-26, as the oracle runs it) vs
  ``entk_transformer_modular.train_authors`` with the paper profile; agreement: chapter 06's ``training_log_match``
  (their logged train losses within 1e-4 up to the last logged epoch ≤ 60 at which our run is within 1e-5 of its
  float64 rerun; past it float32 rounding alone separates two runs, the authors' code on two machines included).
* ``06_training_profile_seeds``: the same for every seed of 06's paper profile (16): the authors' loop once per
  seed vs the chapter's one ``train_authors`` call, which trains the models batched.
* ``06_kernels_eig``: the 9 per-parameter pair-mean kernels over all 841 inputs and the top-40 eigenpairs of
  each, on seed 2's weights (their ``empirical_ntk_by_layer`` + ``ntk.eig_decompose`` vs ``parameter_eigenpairs``).
* ``05_training``: the MLP of 05 (p 29, width 512), 500 full-batch epochs from the same initial weights and
  split: their ``ma.train``/``ma.test`` loop vs ``entk_mlp_modular.train_onehot_mse`` with the paper profile (plus
  ``ours_matched``, at the authors' logging cadence).
* ``05_kernel_eig96``: the class-mean kernel of the trained MLP on the first 96 inputs and its eigenpairs
  (their ``empirical_ntk_by_layer`` + ``eig_decompose`` vs ``mlp_spectrum``).
* ``05_top200_eig``: top-200 eigenpairs of the full 841 × 841 kernel (``eig_decompose`` vs ``entk.top_eigenpairs``).
* ``02_ace_analysis``: the ACE authors' ``analyze_epoch`` vs ``grokking_cores.last_token_summary(analysis="authors")``
  on 3 checkpoints × 6 models of the 02 cpu profile (trained once for ``--ace-epochs`` epochs and cached in
  ``_build/peers/``, or three checkpoints of ``--ace-checkpoints``, a file chapter 02's ``export_checkpoints`` wrote).
* with ``--interleave``: ``b1_batched_training`` (b1's lone-module loop vs ``train_ensemble``) and ``b4_lanczos``
  (b4's dense kernel + eigh vs Lanczos), each side timed as b1 and b4 time it.

    python benchmarks/peers.py --authors-repo-ntk ../mi-ntk --authors-repo-ace ../cores
    python benchmarks/peers.py --authors-repo-ntk ../mi-ntk --only 05_top200_eig --repeats 5
    python benchmarks/peers.py --only b1_batched_training b4_lanczos        # the interleaved b1 / b4 only
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

NAMES = ("06_training", "06_training_profile_seeds", "06_kernels_eig", "05_training", "05_kernel_eig96", "05_top200_eig",
         "02_ace_analysis", "b1_batched_training", "b4_lanczos")


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--authors-repo-ntk", type=Path, help="local clone of jylin04/mi-ntk (05 and 06)")
    ap.add_argument("--authors-repo-ace", type=Path, help="local clone of joshseth/cores (02)")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs of each side, interleaved (at least 3 for a record)")
    ap.add_argument("--warmup", type=int, default=0, help="untimed runs of each side before the timed ones")
    ap.add_argument("--only", nargs="+", choices=NAMES, metavar="NAME", help=f"workloads to run, of {', '.join(NAMES)}")
    ap.add_argument("--interleave", action="store_true", help="also run b1 and b4 (ours vs baseline), interleaved")
    ap.add_argument("--threads", type=int, default=1, help="torch and BLAS threads (default 1)")
    ap.add_argument("--profile", choices=("auto", "always", "never"), default="auto",
                    help="cProfile ours once more: where the ratio is under 2 (auto), always or never")
    ap.add_argument("--epochs-06", type=int, default=300, help="epochs of 06_training (7 steps each)")
    ap.add_argument("--ace-epochs", type=int, default=300, help="epochs of the short 02 run made for 02_ace_analysis")
    ap.add_argument("--ace-checkpoints", type=Path, help="chapter 02's exported checkpoints to analyse instead")
    ap.add_argument("--b1-models", type=int, default=4)
    ap.add_argument("--b1-steps", type=int, default=5)
    ap.add_argument("--b4-p", type=int, default=None, help="b4's modulus (default b4's CPU size, 71)")
    ap.add_argument("--out", default=str(Path(__file__).with_name("results.jsonl")),
                    help="JSON-lines file the records are appended to")
    args = ap.parse_args(argv)
    if args.repeats < 1 or args.warmup < 0 or args.threads < 1:
        ap.error("--repeats and --threads must be >= 1 and --warmup >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):   # before numpy / torch load BLAS
        os.environ[var] = str(args.threads)

    import cProfile  # noqa: PLC0415
    import datetime  # noqa: PLC0415
    import gc  # noqa: PLC0415
    import pstats  # noqa: PLC0415
    import time  # noqa: PLC0415
    import traceback  # noqa: PLC0415
    import warnings  # noqa: PLC0415

    import peers_workloads as pw  # noqa: PLC0415
    import torch  # noqa: PLC0415
    from common import emit  # noqa: PLC0415
    from threadpoolctl import threadpool_limits  # noqa: PLC0415

    from corekit import oracle  # noqa: PLC0415
    from corekit.runinfo import git_state  # noqa: PLC0415

    warnings.filterwarnings("ignore", category=FutureWarning)   # functorch's deprecation notes, from the authors' ntk.py
    torch.set_num_threads(args.threads)
    threadpool_limits(args.threads)
    names = list(args.only or [n for n in NAMES if n not in pw.INTERLEAVED])
    if args.interleave:
        names += [n for n in pw.INTERLEAVED if n not in names]
    repos = {"ntk": args.authors_repo_ntk, "ace": args.authors_repo_ace}
    repos = {k: (v.expanduser().resolve() if v else None) for k, v in repos.items()}
    problems = {"ntk": pw.Context.ntk_problem(repos["ntk"]), "ace": pw.Context.ace_problem(repos["ace"])}
    ctx = pw.Context(repos["ntk"], repos["ace"], args)
    command = oracle.command_line(sys.argv[0], argv if argv is not None else sys.argv[1:])
    failed, lines = [], []
    t_all = time.perf_counter()
    for name in names:
        clone, build = pw.WORKLOADS[name]
        if clone and problems[clone]:
            print(f"[{name}] skipped: {problems[clone]}", flush=True)
            continue
        try:
            t0 = time.perf_counter()
            w = build(ctx)
            setup_s = time.perf_counter() - t0
            print(f"[{name}] {w.what} (setup {setup_s:.1f} s)", flush=True)
            sides = list(w.sides)
            for r in range(args.warmup):
                for side in sides:
                    w.sides[side]()
                print(f"[{name}] warm-up {r + 1}/{args.warmup} done", flush=True)
            times = {side: [] for side in sides}
            outputs: dict[str, object] = {}
            load_before = os.getloadavg()[0]
            for r in range(args.repeats):
                for side in sides:
                    outputs.pop(side, None)
                    gc.collect()
                    start = time.perf_counter()
                    out = w.sides[side]()
                    seconds = time.perf_counter() - start
                    if isinstance(out, pw.Timed):
                        out, seconds = out.output, out.seconds
                    outputs[side] = out
                    times[side].append(seconds)
                    print(f"[{name}] repeat {r + 1}/{args.repeats} {side:>12}: {seconds:8.3f} s   "
                          f"(load {os.getloadavg()[0]:.2f})", flush=True)
            load_after = os.getloadavg()[0]
            agreement = w.compare(outputs)
            ref = sides[0]
            stats = {side: pw.summary(t) for side, t in times.items()}
            ratio = stats[ref]["median"] / stats["ours"]["median"]
            record = {"id": "PEERS", "workload": name, "what": w.what, "device": "cpu", "threads": args.threads,
                      "repeats": args.repeats, "warmup": args.warmup, "order": "interleaved " + ", ".join(sides),
                      **{f"{side}_s": stats[side] for side in sides},
                      "ratio": round(ratio, 3), "speedup": round(ratio, 3),
                      "ratio_is": f"{ref} median / ours median (> 1: corekit faster)",
                      "agree": agreement.pop("agree"), "agreement": agreement, **w.info,
                      "loadavg_1min": {"before": round(load_before, 2), "after": round(load_after, 2)},
                      "setup_s": round(setup_s, 1), "wall_s": round(time.perf_counter() - t0, 1),
                      "date": datetime.date.today().isoformat(), "torch": torch.__version__,
                      "corekit": git_state(pw.ROOT)}
            if clone:
                record["authors_repo"] = pw.NTK_REPO if clone == "ntk" else pw.ACE_REPO
                record["authors_commit"] = pw.commit(repos[clone])
            record["command"] = command
            if args.profile == "always" or (args.profile == "auto" and ratio < 2):
                record["ours_profile"] = profile(w, pw, pstats, cProfile, gc)
            emit(record, args.out)
            lines.append(f"{name:22s} {ref} {stats[ref]['median']:9.3f} s  ours {stats['ours']['median']:9.3f} s  "
                         f"ratio {ratio:7.2f}  agree {record['agree']}")
        except Exception:                                    # report, go on with the next workload
            traceback.print_exc()
            failed.append(name)
            print(f"[{name}] FAILED", flush=True)
    print(f"\nPEERS done in {time.perf_counter() - t_all:.0f} s (threads {args.threads}, repeats {args.repeats})")
    for line in lines:
        print("  " + line)
    if failed:
        print("failed:", ", ".join(failed))
    return 1 if failed else 0


def profile(w, pw, pstats, cProfile, gc, top: int = 12) -> dict:
    """Run ours once under cProfile; print and return its top functions by own time and, in corekit, by total time."""
    gc.collect()
    prof = cProfile.Profile()
    prof.enable()
    w.sides["ours"]()
    prof.disable()
    stats = pstats.Stats(prof)
    total = stats.total_tt

    def where(func) -> str:
        file, line, fn = func
        for marker in ("/lib/", "/site-packages/", f"{pw.ROOT}/"):
            if marker in file:
                file = file.split(marker, 1)[1]
                break
        return f"{file}:{line}({fn})"

    rows = [(where(f), cc, nc, tt, ct) for f, (cc, nc, tt, ct, _) in stats.stats.items()]
    own = sorted(rows, key=lambda r: -r[3])[:top]
    corekit = sorted((r for r in rows if r[0].startswith("corekit/")), key=lambda r: -r[4])[:top]
    print(f"[{w.name}] cProfile of ours: {total:.3f} s in all; top by own time:")
    for r in own:
        print(f"    {r[3]:8.3f} s own  {r[4]:8.3f} s total  {r[2]:7d} calls  {r[0]}")
    print(f"[{w.name}] corekit functions by total time:")
    for r in corekit:
        print(f"    {r[4]:8.3f} s total  {r[3]:8.3f} s own  {r[2]:7d} calls  {r[0]}")
    fmt = lambda r: {"function": r[0], "own_s": round(r[3], 4), "total_s": round(r[4], 4), "calls": r[2]}  # noqa: E731
    return {"seconds": round(total, 3), "top_own": [fmt(r) for r in own], "corekit_by_total": [fmt(r) for r in corekit]}


if __name__ == "__main__":
    raise SystemExit(main())
