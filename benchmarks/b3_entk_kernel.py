"""B3: the exact per-class eNTK of a grokking transformer over all p² inputs, vs the torch.func tutorial.

Workload: the 1-layer modular-addition transformer of B1 (p 113, d_model 128, 4 heads, d_mlp 512,
no LayerNorm, no biases; weights at initialisation: the cost does not depend on training) and its
empirical NTK over all p² inputs `a b =`, per class: mean_c K_cc (mode "class_mean", which needs every
class block K_cc; ``--mode blocks`` keeps the C blocks, at C× the memory).

- Baseline: the torch.func "neural tangent kernels" tutorial, Jacobian contraction:
  ``vmap(jacrev(fnet_single), (None, 0))`` per-example Jacobians of every parameter, then
  ``einsum('Naf,Maf->NM')`` (or ``'Naf,Maf->aNM'`` for blocks), summed over parameters. Its Jacobians
  of all inputs are computed once and reused for both sides (in the tutorial they are computed twice).
- Ours: :func:`corekit.entk.kernels`: per linear map, input Gram ∘ output-gradient Gram, with the
  output gradients from one batched VJP per class.

At full size the baseline's Jacobians (N·C·P numbers, 10¹¹ here) do not fit in memory: with
``--subset n`` it runs on n random inputs and its time is extrapolated (Jacobians ∝ N, contraction
∝ N²); the error is measured on that block. Error = max |K_ours − K_baseline| / max |K_baseline|;
with ``--fp64-check`` also against our kernel in float64.

    python benchmarks/b3_entk_kernel.py                  # CPU: --small (p 23, d_model 32, d_mlp 128)
    python benchmarks/b3_entk_kernel.py --full --subset 512    # on a GPU
"""
from __future__ import annotations

import argparse
import datetime
import time

import torch
from common import add_common_arguments, add_size_arguments, emit, grokking_transformer, setup, sync
from torch.func import functional_call, jacrev, vmap

from corekit import entk
from corekit.models import BatchedTransformer

SMALL = dict(p=23, d_model=32, d_mlp=128, n_heads=4)
FULL = dict(p=113, d_model=128, d_mlp=512, n_heads=4)


def tutorial_kernel(model: BatchedTransformer, tokens: torch.Tensor, mode: str,
                    chunk: int) -> tuple[torch.Tensor, float, float]:
    """Return the baseline kernel and the seconds spent on Jacobians and on the contraction."""
    params = {k: v.detach() for k, v in model.named_parameters()}

    def fnet_single(params, x):
        return functional_call(model, params, (x.unsqueeze(0),))[0, 0, -1]          # logits (C,)

    device = tokens.device
    sync(device)
    start = time.perf_counter()
    jac = [vmap(jacrev(fnet_single), (None, 0))(params, tokens[i:i + chunk]) for i in range(0, len(tokens), chunk)]
    jac = [torch.cat([j[k] for j in jac]).flatten(2) for k in params]              # (N, C, P_k) per parameter
    sync(device)
    t_jac = time.perf_counter() - start
    expr = {"class_mean": "Naf,Maf->NM", "blocks": "Naf,Maf->aNM"}[mode]
    start = time.perf_counter()
    K = torch.stack([torch.einsum(expr, j, j) for j in jac]).sum(0)
    if mode == "class_mean":
        K = K / jac[0].shape[1]
    sync(device)
    return K, t_jac, time.perf_counter() - start


def ours_kernel(model: BatchedTransformer, tokens: torch.Tensor, mode: str, dtype: torch.dtype) -> torch.Tensor:
    """Return corekit's kernel of every parameter, summed."""
    fm = entk.functional_transformer(model).to(dtype, tokens.device)
    return entk.total(entk.kernels(fm, tokens, mode=mode))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_size_arguments(parser)
    parser.add_argument("--mode", choices=["class_mean", "blocks"], default="class_mean")
    parser.add_argument("--subset", type=int, default=None, help="baseline on this many inputs, time extrapolated")
    parser.add_argument("--chunk", type=int, default=64, help="inputs per vmap(jacrev) call in the baseline")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each side; the fastest counts")
    parser.add_argument("--fp64-check", action="store_true", help="also compare with our kernel in float64")
    add_common_arguments(parser)
    args = parser.parse_args()

    device = setup(args)
    sizes, model, tokens = grokking_transformer(args, device, SMALL, FULL)
    p = sizes["p"]
    N = len(tokens)

    # warm-up of both paths on a few inputs (torch.func transforms have a first-call cost)
    tutorial_kernel(model, tokens[:8], args.mode, args.chunk)
    ours_kernel(model, tokens[:8], args.mode, torch.float32)

    ours_times, base_times = [], []
    subset = args.subset if args.subset and args.subset < N else None
    idx = torch.randperm(N, generator=torch.Generator().manual_seed(0))[:subset].sort().values.to(device)
    for _ in range(args.repeat):                     # the machine may be shared: keep the best of each
        sync(device)
        start = time.perf_counter()
        K_ours = ours_kernel(model, tokens, args.mode, torch.float32)
        sync(device)
        ours_times.append(time.perf_counter() - start)
        K_base, t_jac, t_ein = tutorial_kernel(model, tokens[idx] if subset else tokens, args.mode, args.chunk)
        scale = N / subset if subset else 1.0
        base_times.append((t_jac * scale + t_ein * scale**2, t_jac, t_ein))
    ours_s = min(ours_times)
    baseline_s, t_jac, t_ein = min(base_times)
    K_ref = K_ours[..., idx[:, None], idx[None, :]] if subset else K_ours
    err = float((K_ref - K_base).abs().max() / K_base.abs().max())
    errors = {"max_rel_err_vs_baseline": err}
    if args.fp64_check:
        K64 = ours_kernel(model, tokens, args.mode, torch.float64)
        if subset:
            K64 = K64[..., idx[:, None], idx[None, :]]
        errors["ours_fp32_vs_fp64"] = float((K_ref.double() - K64).abs().max() / K64.abs().max())
        errors["baseline_fp32_vs_fp64"] = float((K_base.double() - K64).abs().max() / K64.abs().max())

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    n_params = sum(v.numel() for v in model.parameters())
    record = {
        "id": "B3", "device": name, "precision": "fp32", "mode": args.mode,
        "sizes": {**sizes, "N": N, "classes": p, "parameters": n_params},
        "baseline_s": round(baseline_s, 3), "ours_s": round(ours_s, 3), "speedup": round(baseline_s / ours_s, 2),
        "baseline_parts_s": {"jacobians": round(t_jac, 3), "contraction": round(t_ein, 3)},
        "baseline_extrapolated_from": subset, "repeat": args.repeat,
        "errors": errors, "targets": {"speedup": ">= 3", "max_rel_err": "<= 1e-5"},
        "threads": torch.get_num_threads() if device.type == "cpu" else None,
        "date": datetime.date.today().isoformat(),
    }
    print(f"B3 {args.mode} eNTK, N = {N}, C = {p}, P = {n_params}: baseline {baseline_s:.2f} s, ours {ours_s:.2f} s, "
          f"speedup {baseline_s / ours_s:.1f}x, max rel error {err:.2e}")
    emit(record, args.out)


if __name__ == "__main__":
    main()
