"""Dense references for the eNTK of a one-layer transformer on modular addition: autograd Jacobians of the summed
output for one parameter, and the overlap of a block of eigenvectors with centred Fourier features, in numpy."""
import numpy as np
import torch

from corekit.models import TransformerConfig

P = 7
CFG = TransformerConfig(vocab=P + 1, n_ctx=3, d_model=16, n_heads=2, d_mlp=32, n_layers=1, norm="none", bias=False,
                        init="lin")


def reference_kernel(model, name, tokens, m=0):
    """K (N, N) = J Jᵀ / C² with J the Jacobian of model m's Σ_c f_c (all C outputs) w.r.t. one parameter (autograd)."""
    param = model.params[name.replace(".", "_")]
    rows = []
    for x in tokens:
        model.zero_grad()
        model(x[None])[m, 0, -1].sum().backward()
        rows.append(param.grad[m].flatten().double().clone())
    J = torch.stack(rows)
    return (J @ J.T / CFG.out_vocab ** 2).numpy()


def reference_overlap(V, p, keys, family):
    """‖QᵀF‖²_F / 2K with Q = QR(V), F = QR(centred features), in numpy."""
    a, b = np.divmod(np.arange(p * p), p)
    cols = []
    for k in keys:
        w = 2 * np.pi * k / p
        if family == "sum":
            cols += [np.cos(w * (a + b)), np.sin(w * (a + b))]
        else:
            cols += [np.cos(w * a) + np.cos(w * b), np.sin(w * a) + np.sin(w * b)]
    F = np.stack(cols, 1)
    Fq, _ = np.linalg.qr(F - F.mean(0))
    Q, _ = np.linalg.qr(V)
    return float(np.square(Q.T @ Fq).sum()) / (2 * len(keys))
