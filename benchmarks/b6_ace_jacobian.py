"""B6: the Jacobians ACE needs (the J of H·Jᵀ), batched, vs a per-example ``torch.autograd.grad`` loop.

Two workloads, each timed baseline-then-ours in one process on the same device and dtype:

* **llm**: g = ∂margin/∂h_l, the agreement margin logit(are) + logit(were) − logit(is) − logit(was)
  w.r.t. the residual stream at layer l (the last prompt position), for N prompts. Baseline: for each
  prompt alone, the full causal-LM forward (all logits), a forward hook that turns h_l into a leaf,
  and ``torch.autograd.grad``. Ours: ``corekit.lm`` (one cached pass over the prompt prefixes, then
  the last token of every prompt at once through the margin's four unembedding rows, one backward).
* **grokking**: all (centred) logits w.r.t. the last layer's residual stream of a small batched
  2-layer transformer on a + b mod p (M models × N inputs × K = p outputs). Baseline: one
  ``autograd.grad`` per (model, input, output). Ours: ``corekit.ace.output_jacobian`` (one vmapped VJP).

Accuracy: the singular values of H_c·Jᵀ (centred activations times Jacobians, the matrix whose
spectrum ACE reads) from ours (float32) against a float64 reference (the model cast to float64, the
baseline loop), as the largest relative error over the top singular values (target ≤ 1e-5).

Prints the speedups and appends one JSON line to ``benchmarks/results.jsonl``.

    python benchmarks/b6_ace_jacobian.py                      # CPU: smollm2-135m, 32 prompts
    python benchmarks/b6_ace_jacobian.py --model gemma-3-270m --prompts 256 --layer 9   # any layer / model
"""
from __future__ import annotations

import argparse
import datetime
import time

import torch
from common import add_common_arguments, emit, setup, sync

from corekit import ace
from corekit import lm as llm
from corekit.models import BatchedTransformer, TransformerConfig
from corekit.tasks import agreement
from corekit.tasks.agreement import margin_head, verb_tokens
from corekit.tasks.modular import modular_addition


def top_sv_rel_error(h: torch.Tensor, J: torch.Tensor, h_ref: torch.Tensor, J_ref: torch.Tensor, k: int) -> float:
    """Return max_i≤k |σ_i − σ_i^ref| / σ_i^ref for the singular values of H_c·Jᵀ (J flattened over outputs)."""
    def sv(h, J):
        h, J = h.double().cpu(), J.double().cpu().reshape(-1, h.shape[-1])
        return torch.linalg.svdvals((h - h.mean(0)) @ J.T)
    s, s_ref = sv(h, J), sv(h_ref, J_ref)
    k = min(k, int((s_ref > 1e-9 * s_ref[0]).sum()))
    return float(((s[:k] - s_ref[:k]).abs() / s_ref[:k]).max())


# ------------------------------------------------------------------------------------------------
# Workload 1: margin gradients of a language model


def llm_baseline(lm: llm.LM, model, prompts: list[str], layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (h_l, g) (N, D) at the last position, one prompt at a time, with the model's full logits."""
    ids = verb_tokens(lm)
    blocks = llm.LM(lm.name, model, lm.tokenizer, lm.source).blocks     # this model's own blocks
    block = blocks[layer - 1] if layer > 0 else None
    hs, gs = [], []
    for prompt in prompts:
        enc = lm.tokenizer(prompt, return_tensors="pt").to(lm.device)
        leaf = {}

        def hook(module, args, output):
            h = output[0] if isinstance(output, tuple) else output
            leaf["h"] = h.detach().requires_grad_(True)
            return (leaf["h"],) + tuple(output[1:]) if isinstance(output, tuple) else leaf["h"]

        def pre_hook(module, args, kwargs):
            h = args[0] if args else kwargs["hidden_states"]
            leaf["h"] = h.detach().requires_grad_(True)
            return ((leaf["h"],) + tuple(args[1:]), kwargs) if args else (args, dict(kwargs, hidden_states=leaf["h"]))

        handle = (block.register_forward_hook(hook) if block is not None
                  else blocks[0].register_forward_pre_hook(pre_hook, with_kwargs=True))
        try:
            with torch.enable_grad():
                logits = model(**enc).logits[0, -1]
                margin = logits[ids[0]] + logits[ids[1]] - logits[ids[2]] - logits[ids[3]]
                (g,) = torch.autograd.grad(margin, leaf["h"])
        finally:
            handle.remove()
        hs.append(leaf["h"][0, -1].detach())
        gs.append(g[0, -1])
    return torch.stack(hs), torch.stack(gs)


def llm_ours(lm: llm.LM, prompts: list[str], layer: int, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (h_l, g) (N, D) at the last position for every prompt at once."""
    pre = llm.prefix(lm, llm.encode(lm, prompts), batch_size)
    out = llm.last_token(pre, margin_head(lm), read=[layer], grad=True)
    return out.h[0], out.g[0]


def bench_llm(args, device: torch.device) -> dict:
    lm = llm.load(args.model, device=device, dtype="float32")
    layer = lm.n_layers if args.layer is None else lm.check_layer(args.layer)
    prompts = [s.prompt for s in agreement.generate(args.prompts, seed=3)]
    llm_baseline(lm, lm.model, prompts[:2], layer)                                      # warm-up
    llm_ours(lm, prompts[:2], layer, args.batch_size)
    sync(device)
    t = time.perf_counter()
    h_base, g_base = llm_baseline(lm, lm.model, prompts, layer)
    sync(device)
    baseline_s = time.perf_counter() - t
    t = time.perf_counter()
    h_ours, g_ours = llm_ours(lm, prompts, layer, args.batch_size)
    sync(device)
    ours_s = time.perf_counter() - t

    ref_prompts = prompts[: args.reference_prompts]
    n = len(ref_prompts)
    model64 = _float64_copy(lm.model)
    h_ref, g_ref = llm_baseline(lm, model64, ref_prompts, layer)
    del model64
    k = args.top
    return {
        "sizes": {"model": args.model, "n_layers": lm.n_layers, "d_model": lm.d_model, "layer": layer,
                  "prompts": len(prompts), "reference_prompts": n, "top_singular_values": k},
        "baseline_s": baseline_s, "ours_s": ours_s,
        "errors": {
            "g_max_rel_err_vs_baseline": float(((g_ours - g_base).norm(dim=1) / g_base.norm(dim=1)).max()),
            "sv_rel_err_ours_fp32_vs_fp64": top_sv_rel_error(h_ours[:n], g_ours[:n, None], h_ref, g_ref[:, None], k),
            "sv_rel_err_baseline_fp32_vs_fp64": top_sv_rel_error(h_base[:n], g_base[:n, None], h_ref, g_ref[:, None], k),
        },
    }


def _float64_copy(model):
    """Return a float64 copy of ``model`` (the reference); the float32 original is left alone."""
    import copy
    return copy.deepcopy(model).double()


# ------------------------------------------------------------------------------------------------
# Workload 2: all logits of a batched grokking transformer w.r.t. its last layer


def bench_grokking(args, device: torch.device) -> dict:
    p = args.p
    config = TransformerConfig(vocab=p + 1, n_ctx=3, d_model=128, n_heads=4, d_mlp=512, n_layers=2, norm="pre",
                               n_out=p)
    model = BatchedTransformer(config, seeds=list(range(args.models))).to(device).requires_grad_(False)
    task = modular_addition(p, 0.5, seed=0)
    x = task.tokens()[: args.inputs].to(device)
    with torch.no_grad():
        h = model.residual(x)[:, :, -1]                                   # (M, N, D): what the unembedding reads
    fn = ace.centred_logits(model.unembed)

    def baseline(model, h):
        """One autograd.grad per (model, input, output), through model m's own unembedding."""
        W_U, b_U = model.p("W_U"), model.p("b_U")
        M, N, D = h.shape
        J = torch.empty(M, N, p, D, dtype=h.dtype, device=h.device)
        for m in range(M):
            for n in range(N):
                leaf = h[m, n].detach().requires_grad_(True)
                with torch.enable_grad():
                    logits = leaf @ W_U[m] + (0 if b_U is None else b_U[m])
                    out = logits - logits.mean()
                    for k in range(p):
                        (J[m, n, k],) = torch.autograd.grad(out[k], leaf, retain_graph=k < p - 1)
        return J

    def ours(h):
        return ace.output_jacobian(fn, h)

    baseline(model, h[:, :2])
    ours(h[:, :2])
    sync(device)
    t = time.perf_counter()
    J_base = baseline(model, h)
    sync(device)
    baseline_s = time.perf_counter() - t
    t = time.perf_counter()
    J_ours = ours(h)
    sync(device)
    ours_s = time.perf_counter() - t

    model64 = _float64_copy(model)
    with torch.no_grad():
        h64 = model64.residual(x)[:, :, -1]
    J_ref = baseline(model64, h64)
    errs = [top_sv_rel_error(h[m], J_ours[m], h64[m], J_ref[m], args.top) for m in range(args.models)]
    errs_b = [top_sv_rel_error(h[m], J_base[m], h64[m], J_ref[m], args.top) for m in range(args.models)]
    return {
        "sizes": {"p": p, "models": args.models, "inputs": int(x.shape[0]), "outputs": p, "d_model": 128,
                  "n_layers": 2, "top_singular_values": args.top},
        "baseline_s": baseline_s, "ours_s": ours_s,
        "errors": {"J_max_abs_err_vs_baseline": float((J_ours - J_base).abs().max()),
                   "sv_rel_err_ours_fp32_vs_fp64": max(errs), "sv_rel_err_baseline_fp32_vs_fp64": max(errs_b)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m", help="an offline alias or Hugging Face id")
    parser.add_argument("--prompts", type=int, default=None, help="prompts (default 512 on CUDA, 32 on CPU)")
    parser.add_argument("--reference-prompts", type=int, default=16, help="prompts in the float64 reference")
    parser.add_argument("--layer", type=int, default=None, help="residual-stream layer (default: the last)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--p", type=int, default=53)
    parser.add_argument("--models", type=int, default=2, help="grokking models in the batch")
    parser.add_argument("--inputs", type=int, default=None, help="grokking inputs (default 2809 on CUDA, 128 on CPU)")
    parser.add_argument("--top", type=int, default=8, help="singular values compared with the float64 reference")
    parser.add_argument("--parts", default="llm,grokking",
                        help="comma-separated workloads: llm, grokking (grokking alone needs no language model)")
    add_common_arguments(parser)
    args = parser.parse_args()
    device = setup(args)
    cuda = device.type == "cuda"
    args.prompts = args.prompts or (512 if cuda else 32)
    args.inputs = args.inputs or (args.p ** 2 if cuda else 128)
    if args.prompts % 2:
        args.prompts += 1

    workloads = {"llm": bench_llm, "grokking": bench_grokking}
    chosen = args.parts.split(",")
    if not chosen or any(part not in workloads for part in chosen):
        parser.error(f"--parts must be a comma-separated list of {', '.join(workloads)}, got {args.parts!r}")
    parts = {name: workloads[name](args, device) for name in chosen}
    for name, part in parts.items():
        part["speedup"] = round(part["baseline_s"] / part["ours_s"], 2)
        part["baseline_s"], part["ours_s"] = round(part["baseline_s"], 4), round(part["ours_s"], 4)
        print(f"{name}: baseline {part['baseline_s']:.3f} s, ours {part['ours_s']:.4f} s, speedup "
              f"{part['speedup']}×; errors {part['errors']}")
    baseline_s = sum(p["baseline_s"] for p in parts.values())
    ours_s = sum(p["ours_s"] for p in parts.values())
    errors = {f"{name}.{k}": v for name, part in parts.items() for k, v in part["errors"].items()}
    record = {
        "id": "B6", "device": torch.cuda.get_device_name(device) if cuda else "cpu", "precision": "fp32",
        "sizes": {name: part["sizes"] for name, part in parts.items()},
        "baseline_s": round(baseline_s, 4), "ours_s": round(ours_s, 4), "speedup": round(baseline_s / ours_s, 2),
        "speedups": {name: part["speedup"] for name, part in parts.items()},
        "parts_s": {name: {"baseline": part["baseline_s"], "ours": part["ours_s"]} for name, part in parts.items()},
        "errors": errors,
        "targets": {"speedup": ">= 50", "sv_rel_err": "<= 1e-5"},
        "date": datetime.date.today().isoformat(),
    }
    print(f"speedup {record['speedup']}× (" + ", ".join(f"{n} {p['speedup']}×" for n, p in parts.items()) + ")")
    emit(record, args.out)


if __name__ == "__main__":
    main()
