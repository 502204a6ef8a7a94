"""The three named ways to compute the same empirical NTK, one entry point for each.

====================== ========================================================================
strategy               how
====================== ========================================================================
"linear-site-gram"     every linear map y = x W (+ b) gives Σ_{t,s} (x_t·x_s) ∘ (g_t·g_s): an input
                       Gram times an output-gradient Gram, never a parameter Jacobian (:func:`kernels`)
"jacobian-contraction" per-example Jacobians (``vmap(jacrev)``) contracted (:func:`jacobian_kernels`)
"vjp-jvp"              K V by a VJP then a JVP, applied to the identity (:func:`kernel_matvec`)
====================== ========================================================================

``tests/test_entk.py`` checks each against the others and against a dense autograd reference, as
neural-tangents tests its implementations against one another.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from corekit.entk.exact import check_mode, jacobian_kernels, kernels, total
from corekit.entk.functional import FunctionalModel
from corekit.entk.matvec import kernel_matvec

STRATEGIES = ("linear-site-gram", "jacobian-contraction", "vjp-jvp")


def kernel(strategy: str, model: FunctionalModel, x: Tensor, mode: str = "pair_mean",
           names: Sequence[str] | None = None) -> Tensor:
    """Return the kernel of the parameters ``names`` (default: all) of ``model`` on inputs x (N, ...), shaped by
    ``mode`` ((N, C, N, C), (C, N, N) or (N, N)), computed by ``strategy``."""
    check_mode(mode)
    if strategy == "linear-site-gram":
        return total(kernels(model, x, mode, names))
    if strategy == "jacobian-contraction":
        return total(jacobian_kernels(model, model.params, x, mode, names))
    if strategy != "vjp-jvp":
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    matvec = kernel_matvec(model, model.params, x, mode, names)
    N = x.shape[0]
    dtype = next(iter(model.params.values())).dtype
    if mode in ("class_mean", "pair_mean"):
        return matvec(torch.eye(N, dtype=dtype))                              # K e_n = row n (K symmetric)
    C = model(model.params, x[:1]).shape[-1]
    if mode == "full":
        return matvec(torch.eye(N * C, dtype=dtype).reshape(N * C, N, C)).reshape(N, C, N, C)
    basis = torch.eye(N, dtype=dtype)[:, None, :].expand(N, C, N)              # e_n in every class
    return matvec(basis).permute(1, 0, 2)                                      # (C, N, N)
