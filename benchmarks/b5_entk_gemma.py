"""B5: Gemma-3-270M's residual-stream eNTK (one MLP's down-projection): kernel-vector products and the
top-25 eigenpairs, ``corekit.entk.ResidualStreamNTK`` vs a per-vector autograd loop.

Baseline, per vector v (N·d): the whole model's forward pass from the token ids with the module's weight
requiring gradients, then two ``torch.autograd.grad`` calls: u = S^{1/2} v, g = J_rᵀu (with
``create_graph``), and J_r g as the gradient of ⟨J_rᵀu, g⟩ with respect to u (the double-VJP trick),
then S^{1/2} again. Ours: everything upstream of the module cached once, then batched VJP + JVP
through the downstream blocks only (the last block at the last position only).

Timed baseline-then-ours in one process on the same device: products on the same ``--vectors``
random vectors (their results must agree), and the top-25 by block Lanczos (``--lanczos-vectors`` Krylov
vectors). The baseline's Lanczos time is its measured per-product time times the products Lanczos
used (marked "extrapolated"). Prints the speedup and appends one JSON line to ``benchmarks/results.jsonl``.

    python benchmarks/b5_entk_gemma.py                 # CPU: 16 contexts of 32 tokens, model.layers.16
    python benchmarks/b5_entk_gemma.py --full          # GPU default: 1024 contexts of 64 tokens, model.layers.16
"""
from __future__ import annotations

import argparse
import datetime
import time

import torch
from common import add_common_arguments, emit, setup, sync

from corekit import entk
from corekit import lm as llm
from corekit.chapters.entk_gemma_grammar import stream_of
from corekit.tasks import grammar


def contexts(lm: llm.LM, n: int, tokens: int) -> torch.Tensor:
    """Return n contexts (n, 1 + tokens) of consecutive story tokens after BOS, from the shipped corpus."""
    ids = []
    for text in grammar.load_corpus("shipped").stories:
        toks = lm.tokenizer(text, add_special_tokens=False)["input_ids"]
        ids += [[lm.tokenizer.bos_token_id] + toks[i:i + tokens] for i in range(0, len(toks) - tokens, tokens)]
        if len(ids) >= n:
            break
    if len(ids) < n:
        raise ValueError(f"the corpus holds only {len(ids)} contexts of {tokens} tokens, asked for {n}")
    return torch.tensor(ids[:n], device=lm.device)


def baseline_products(lm: llm.LM, ids: torch.Tensor, layer: int, S_half: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
    """Return K̃ V (b, N·d) one vector at a time: a full forward pass and two autograd.grad calls per vector."""
    W = lm.blocks[layer - 1].mlp.down_proj.weight                                          # corekit's 1-based block
    N, d = ids.shape[0], lm.d_model
    S = S_half.to(W.dtype)
    out = []
    W.requires_grad_(True)
    try:
        for v in V:
            with torch.enable_grad():
                h = lm.model.model(input_ids=ids).last_hidden_state[:, -1]                    # (N, d)
                u = (v.reshape(N, d).to(W.dtype) @ S).requires_grad_(True)
                (g,) = torch.autograd.grad(h, W, grad_outputs=u, create_graph=True)           # J_rᵀ u
                (Jg,) = torch.autograd.grad(g, u, grad_outputs=g.detach())                    # J_r J_rᵀ u
            out.append((Jg.double() @ S_half).reshape(-1))
    finally:
        W.requires_grad_(False)
    return torch.stack(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--small", action="store_true", help="CPU size (the default on a CPU)")
    size.add_argument("--full", action="store_true", help="paper size (the default on a GPU)")
    parser.add_argument("--contexts", type=int, default=None, help="N (default 16 small, 1024 full)")
    parser.add_argument("--tokens", type=int, default=None, help="tokens per context after BOS (32 small, 64 full)")
    parser.add_argument("--layer", type=int, default=None, help="Hugging Face block N of model.layers.N.mlp.down_proj (16)")
    parser.add_argument("--vectors", type=int, default=None, help="vectors in the product timing (4 small, 8 full)")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--lanczos-vectors", type=int, default=None, help="Krylov vectors (48 small, 50 full)")
    parser.add_argument("--block-size", type=int, default=None, help="Lanczos block size (8 small, 5 full)")
    parser.add_argument("--chunk-size", type=int, default=64, help="contexts per cached chunk")
    add_common_arguments(parser)
    args = parser.parse_args()
    device = setup(args)
    full = args.full or (device.type == "cuda" and not args.small)
    N = args.contexts or (1024 if full else 16)
    T = args.tokens or (64 if full else 32)
    hf_layer = 16 if args.layer is None else args.layer
    b = args.vectors or (8 if full else 4)
    krylov, block = args.lanczos_vectors or (50 if full else 48), args.block_size or (5 if full else 8)

    lm = llm.load("gemma-3-270m", device=device, dtype="float32")
    ids = contexts(lm, N, T)
    layer = stream_of(lm, hf_layer)
    op = entk.ResidualStreamNTK(lm, ids[:2], layer)                           # warm-up (and the UᵀU cache)
    V = torch.randn(b, op.n, dtype=torch.float64, generator=torch.Generator().manual_seed(0)).to(device)
    baseline_products(lm, ids[:2], layer, op.S_half, V[:1])
    op.matvec(V[:1])

    sync(device)
    t = time.perf_counter()
    op = entk.ResidualStreamNTK(lm, ids, layer, chunk_size=args.chunk_size)
    sync(device)
    cache_s = time.perf_counter() - t
    V = torch.randn(b, op.n, dtype=torch.float64, generator=torch.Generator().manual_seed(1)).to(device)
    t = time.perf_counter()
    KV_base = baseline_products(lm, ids, layer, op.S_half, V)
    sync(device)
    baseline_s = time.perf_counter() - t
    t = time.perf_counter()
    KV_ours = op.matvec(V)
    sync(device)
    ours_s = time.perf_counter() - t
    rel = float((KV_ours - KV_base).norm() / KV_base.norm())

    t = time.perf_counter()
    pairs = entk.lanczos(op.matvec, op.n, args.top, block_size=block, max_steps=krylov // block, tol=1e-6, device=device)
    sync(device)
    lanczos_s = time.perf_counter() - t
    top_s = cache_s + lanczos_s
    baseline_top_s = baseline_s / b * pairs.n_matvecs
    record = {
        "id": "B5", "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "precision": "fp32 model; fp64 Lanczos basis and S^1/2",
        "sizes": {"model": "gemma-3-270m", "contexts": N, "tokens": T + 1, "module": op.module_path,
                  "parameters": op.n_params, "n": op.n, "downstream_blocks": len(op.downstream), "vectors": b,
                  "top": args.top, "krylov_vectors": pairs.n_matvecs, "block_size": block},
        "baseline_s": round(baseline_s, 3), "ours_s": round(ours_s, 3), "speedup": round(baseline_s / ours_s, 2),
        "per_product_s": {"baseline": round(baseline_s / b, 3), "ours": round(ours_s / b, 3)},
        "top25_s": {"ours_cache": round(cache_s, 2), "ours_lanczos": round(lanczos_s, 2), "ours_total": round(top_s, 2),
                    "baseline_extrapolated": round(baseline_top_s, 1)},
        "speedup_top25": round(baseline_top_s / top_s, 2),
        "errors": {"product_rel_err_vs_baseline": rel,
                   "residual_rel_max_top5": float((pairs.residuals[:5] / pairs.values[0]).max()),
                   "residual_rel_max": float((pairs.residuals / pairs.values[0]).max())},
        "targets": {"speedup": ">= 4", "top25": "minutes, not tens of minutes (paper: ~8 min on an A100)"},
        "threads": torch.get_num_threads(), "date": datetime.date.today().isoformat(),
    }
    print(f"products: baseline {baseline_s:.2f} s, ours {ours_s:.2f} s for {b} vectors: {record['speedup']}×; "
          f"top-{args.top}: ours {top_s:.1f} s (cache {cache_s:.1f} s + Lanczos {lanczos_s:.1f} s, {pairs.n_matvecs} "
          f"products), baseline ≈ {baseline_top_s:.0f} s (extrapolated); product rel. error {rel:.1e}")
    emit(record, args.out)


if __name__ == "__main__":
    main()
