"""Exact empirical NTKs: per-parameter kernels by linear-site Grams or by contracted Jacobians.

Every kernel function takes a ``mode`` naming which part of K it returns:

============== ================= ==========================================================
mode            shape             what
============== ================= ==========================================================
"full"          (N, C, N, C)      every block K_cc'; :func:`flatten` gives the (NC, NC) matrix
"blocks"        (C, N, N)         the diagonal class blocks K_cc
"class_mean"    (N, N)            mean_c K_cc (the MLP chapter's per-layer kernels)
"pair_mean"     (N, N)            mean_{c,c'} K_cc' = the eNTK of mean_c f_c (the transformer chapter)
============== ================= ==========================================================
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import torch
from torch import Tensor
from torch.func import jacrev, vjp, vmap

from corekit.entk.functional import FunctionalModel, LinearSite, Params

MODES = ("full", "blocks", "class_mean", "pair_mean")


def check_mode(mode: str, allowed: Sequence[str] = MODES) -> str:
    """Return ``mode`` or raise ValueError listing the accepted modes."""
    if mode not in allowed:
        raise ValueError(f"mode must be one of {tuple(allowed)}, got {mode!r}")
    return mode


def check_names(params: Params, names: Sequence[str] | None) -> list[str]:
    """Return ``names`` (default: every parameter), or raise ValueError naming unknown ones."""
    if names is None:
        return list(params)
    names = list(names)
    unknown = [n for n in names if n not in params]
    if unknown or not names:
        raise ValueError(f"names must list parameters of the model {sorted(params)}, got unknown {unknown or names}")
    return names


def _cotangents(mode: str, classes: Sequence[int], N: int, C: int, like: Tensor) -> Tensor:
    """Return output cotangents (k, N, C): one-hot classes, or the single mean direction 1/C for "pair_mean"."""
    if mode == "pair_mean":
        return torch.full((1, N, C), 1.0 / C, dtype=like.dtype, device=like.device)
    cot = torch.zeros(len(classes), N, C, dtype=like.dtype, device=like.device)
    cot[torch.arange(len(classes)), :, torch.as_tensor(list(classes))] = 1.0
    return cot


def _gram_kernel(X: Tensor | None, G: Tensor, mode: str, out: Tensor | None, offset: int = 0,
                 n_classes: int | None = None) -> Tensor:
    """Return ``out`` plus Σ_{t,s} (X_t X_sᵀ) ∘ (G_t G_sᵀ) for inputs X (N, T, d_in) and output gradients G (k, N, T, d).

    X None stands for a bias (inputs of ones). In "blocks" mode the k gradient directions are the
    classes offset … offset + k − 1 of ``n_classes``.
    """
    k, N, T, _ = G.shape
    active = [t for t in range(T) if bool(G[:, :, t].abs().amax() > 0)]
    if out is None:
        shape = {"full": (N, k, N, k), "blocks": (n_classes or k, N, N)}.get(mode, (N, N))
        out = torch.zeros(shape, dtype=G.dtype, device=G.device)
    for t in active:
        for s in active:
            if mode != "full" and s < t:
                continue
            A = X[:, t] @ X[:, s].T if X is not None else None            # (N, N)
            if mode == "full":
                B = torch.einsum("knd,jmd->nkmj", G[:, :, t], G[:, :, s])
                out += B if A is None else B * A[:, None, :, None]
                continue
            if mode == "blocks":
                B = torch.einsum("knd,kmd->knm", G[:, :, t], G[:, :, s])
                term = B if A is None else B * A
                out[offset:offset + k] += term if s == t else term + term.transpose(-1, -2)
                continue
            Gt, Gs = G[:, :, t].transpose(0, 1).reshape(N, -1), G[:, :, s].transpose(0, 1).reshape(N, -1)
            term = Gt @ Gs.T if A is None else (Gt @ Gs.T) * A
            out += term if s == t else term + term.T
    return out


def _default_class_chunk(sites: Mapping[str, LinearSite], N: int, budget: float = 2.5e8) -> int:
    """Return how many classes to differentiate at once so that the output gradients hold ≤ ``budget`` numbers."""
    per_class = N * sum(s.inputs.shape[1] * s.d_out for s in sites.values())
    return max(1, int(budget // max(per_class, 1)))


def kernels(model: FunctionalModel, x: Tensor, mode: str = "class_mean", names: Sequence[str] | None = None,
            class_chunk: int | None = None, params: Params | None = None) -> dict[str, Tensor]:
    """Return the per-parameter kernels {name: kernel} of ``model`` on inputs x (N, ...) (shape by ``mode``).

    Parameters of linear sites use input Gram ∘ output-gradient Gram (one VJP per class, in chunks of
    ``class_chunk`` classes); any other parameter (e.g. a LayerNorm gain) falls back to Jacobians.
    """
    check_mode(mode)
    params = dict(params if params is not None else model.params)
    names = check_names(params, names)
    sites = model.sites(params, x)
    out0 = model(params, x[:1])
    N, C = x.shape[0], out0.shape[-1]
    wanted = {s: site for s, site in sites.items() if site.weight in names or site.bias in names}
    result: dict[str, Tensor] = {}
    if wanted:
        taps0 = {s: torch.zeros(N, site.inputs.shape[1], site.d_out, dtype=out0.dtype, device=out0.device)
                 for s, site in wanted.items()}
        _, vjp_fn = vjp(lambda taps: model.forward(params, x, taps), taps0)
        chunk = class_chunk or _default_class_chunk(wanted, N)
        groups = [[0]] if mode == "pair_mean" else [list(range(i, min(C, i + chunk))) for i in range(0, C, chunk)]
        if mode == "full":
            groups = [list(range(C))]
        for classes in groups:
            (grads,) = vmap(vjp_fn)(_cotangents(mode, classes, N, C, out0))   # {site: (k, N, T, d_out)}
            for s, site in wanted.items():
                G = grads[s]
                for pname, X in ((site.weight, site.inputs), (site.bias, None)):
                    if pname in names:
                        result[pname] = _gram_kernel(X, G, mode, result.get(pname), classes[0], C)
        if mode == "class_mean":
            for pname in result:
                result[pname] /= C
    rest = [n for n in names if n not in result]
    if rest:
        result |= jacobian_kernels(model, params, x, mode=mode, names=rest)
    return {n: result[n] for n in names}


def jacobians(fn: Callable[[Params, Tensor], Tensor], params: Params, x: Tensor, names: Sequence[str] | None = None,
              chunk: int | None = None) -> dict[str, Tensor]:
    """Return per-example Jacobians ``{name: (N, C, *shape)}`` of fn(params, x) (N, C) by ``vmap(jacrev)`` over examples."""
    names = check_names(params, names)
    fixed = {k: v for k, v in params.items() if k not in names}
    primals = {k: params[k] for k in names}

    def single(p: Params, xi: Tensor) -> Tensor:
        return fn({**fixed, **p}, xi[None])[0]

    per_example = vmap(jacrev(single), in_dims=(None, 0))
    chunk = chunk or x.shape[0]
    parts = [per_example(primals, x[i:i + chunk]) for i in range(0, x.shape[0], chunk)]
    return {n: torch.cat([part[n] for part in parts]) for n in names}


def contract(J: Tensor, mode: str = "class_mean", J2: Tensor | None = None) -> Tensor:
    """Return the kernel of Jacobians J (N, C, ...) (and J2 (M, C, ...), default J) in ``mode``."""
    check_mode(mode)
    J = J.flatten(2)
    J2 = J if J2 is None else J2.flatten(2)
    if mode == "full":
        return torch.einsum("ncp,mdp->ncmd", J, J2)
    if mode == "blocks":
        return torch.einsum("ncp,mcp->cnm", J, J2)
    if mode == "class_mean":
        return torch.einsum("ncp,mcp->nm", J, J2) / J.shape[1]
    return J.mean(1) @ J2.mean(1).T


def jacobian_kernels(fn: Callable[[Params, Tensor], Tensor], params: Params, x: Tensor, mode: str = "class_mean",
                     names: Sequence[str] | None = None, chunk: int | None = None) -> dict[str, Tensor]:
    """Return per-parameter kernels {name: kernel} of any fn(params, x) (N, C) by contracting per-example Jacobians."""
    check_mode(mode)
    J = jacobians(fn, params, x, names, chunk)
    return {n: contract(j, mode) for n, j in J.items()}


def total(per_param: Mapping[str, Tensor], names: Sequence[str] | None = None) -> Tensor:
    """Return the sum of the per-parameter kernels ``names`` (default: all) — the kernel of those parameters."""
    names = list(per_param) if names is None else list(names)
    missing = [n for n in names if n not in per_param]
    if missing or not names:
        raise ValueError(f"names must be kernels in {sorted(per_param)}, got {missing or names}")
    return sum(per_param[n] for n in names)


def flatten(K: Tensor) -> Tensor:
    """Return a "full" kernel (N, C, N, C) as the (NC, NC) matrix with row index n·C + c."""
    if K.dim() != 4:
        raise ValueError(f"K must be a full kernel (N, C, N, C), got shape {tuple(K.shape)}")
    N, C = K.shape[:2]
    return K.reshape(N * C, N * C)
