"""Kernel-vector products K V without forming K: a VJP, then a JVP, batched over the vectors (the
"vjp-jvp" strategy), for :func:`corekit.entk.lanczos` when the kernel does not fit in memory."""
from __future__ import annotations

from typing import Callable, Sequence

import torch
from torch import Tensor
from torch.func import jvp, vjp, vmap

from corekit.entk.exact import check_mode, check_names
from corekit.entk.functional import Params


def kernel_matvec(fn: Callable[[Params, Tensor], Tensor], params: Params, x: Tensor, mode: str = "pair_mean",
                  names: Sequence[str] | None = None, chunk: int | None = None) -> Callable[[Tensor], Tensor]:
    """Return V ↦ K V for the kernel of ``names`` in ``mode``, by a VJP then a JVP (batched over the k vectors).

    V is (k, N, C) for "full", (k, C, N) for "blocks" and (k, N) for "class_mean" / "pair_mean"; the
    result has V's shape. "blocks" and "class_mean" cost C products per vector. ``chunk`` bounds how
    many output directions are differentiated at once.
    """
    check_mode(mode)
    names = check_names(params, names)
    fixed = {k: v for k, v in params.items() if k not in names}
    primals = {k: params[k] for k in names}

    def f(p: Params) -> Tensor:
        return fn({**fixed, **p}, x)

    out, vjp_fn = vjp(f, primals)
    N, C = out.shape

    def jvp_fn(t: Params) -> Tensor:
        return jvp(f, (primals,), (t,))[1]

    def apply(U: Tensor) -> Tensor:  # (k, N, C) → (k, N, C)
        step = chunk or U.shape[0]
        parts = []
        for i in range(0, U.shape[0], step):
            (t,) = vmap(vjp_fn)(U[i:i + step])
            parts.append(vmap(jvp_fn)(t))
        return torch.cat(parts)

    def matvec(V: Tensor) -> Tensor:
        V = V.to(out.dtype)
        if mode == "full":
            if V.dim() != 3 or V.shape[1:] != (N, C):
                raise ValueError(f"V must be (k, {N}, {C}) for mode 'full', got {tuple(V.shape)}")
            return apply(V)
        if mode == "pair_mean":
            if V.dim() != 2 or V.shape[1] != N:
                raise ValueError(f"V must be (k, {N}) for mode 'pair_mean', got {tuple(V.shape)}")
            return apply(V[:, :, None].expand(-1, N, C) / C).mean(-1)
        if mode == "class_mean":
            if V.dim() != 2 or V.shape[1] != N:
                raise ValueError(f"V must be (k, {N}) for mode 'class_mean', got {tuple(V.shape)}")
            V = V[:, None, :].expand(-1, C, N)
        elif V.dim() != 3 or V.shape[1:] != (C, N):
            raise ValueError(f"V must be (k, {C}, {N}) for mode 'blocks', got {tuple(V.shape)}")
        k = V.shape[0]
        eye = torch.eye(C, dtype=V.dtype, device=V.device)
        U = V[:, :, :, None] * eye[None, :, None, :]                          # (k, C, N, C): class c only
        KU = apply(U.reshape(k * C, N, C)).reshape(k, C, N, C)
        diag = torch.diagonal(KU, dim1=1, dim2=3).transpose(1, 2)            # (k, C, N)
        return diag.mean(1) if mode == "class_mean" else diag

    return matvec
