"""Empirical neural tangent kernels: exact kernels, kernel-vector products and top eigenpairs.

A model is a pure function ``fn(params, x) -> outputs (N, C)`` of a dict of parameter tensors. Its
empirical NTK is K_{cc'}(n, m) = Σ_μ ∂f_c(x_n)/∂θ_μ · ∂f_c'(x_m)/∂θ_μ, and a *per-parameter* kernel
restricts the sum to one parameter tensor, so the per-parameter kernels add up to the full one.
Every kernel function takes a ``mode`` naming which part of K it returns:

============== ================= ==========================================================
mode            shape             what
============== ================= ==========================================================
"full"          (N, C, N, C)      every block K_cc'; :func:`flatten` gives the (NC, NC) matrix
"blocks"        (C, N, N)         the diagonal class blocks K_cc
"class_mean"    (N, N)            mean_c K_cc (the MLP chapter's per-layer kernels)
"pair_mean"     (N, N)            mean_{c,c'} K_cc' = the eNTK of mean_c f_c (the transformer chapter)
============== ================= ==========================================================

Three ways to get them:

- :func:`kernels` for a :class:`FunctionalModel` (:func:`functional_mlp`, :func:`functional_transformer`):
  every linear map y = x W (+ b) inside the model gives its per-parameter kernel as
  Σ_{t,s} (x_t·x_s) ∘ (g_t·g_s) (input Gram ∘ output-gradient Gram, summed over positions), with
  g = ∂f/∂y from one vector-Jacobian product per class, never forming a parameter Jacobian;
- :func:`jacobian_kernels` for any ``fn``: per-example Jacobians (``vmap(jacrev)``) contracted;
- :func:`kernel_matvec`: K·V without forming K (a VJP, then a JVP, batched over vectors), for
  :func:`lanczos` when the kernel does not fit in memory.

:func:`top_eigenpairs` returns the leading eigenpairs with their residuals ‖Kv − λv‖ (dense ``eigh``
for a matrix, block Lanczos with full reorthogonalisation for an operator).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.func import jacrev, jvp, vjp, vmap

MODES = ("full", "blocks", "class_mean", "pair_mean")
Params = Mapping[str, Tensor]


def _check_mode(mode: str, allowed: Sequence[str] = MODES) -> str:
    """Return ``mode`` or raise ValueError listing the accepted modes."""
    if mode not in allowed:
        raise ValueError(f"mode must be one of {tuple(allowed)}, got {mode!r}")
    return mode


def _check_names(params: Params, names: Sequence[str] | None) -> list[str]:
    """Return ``names`` (default: every parameter), or raise ValueError naming unknown ones."""
    if names is None:
        return list(params)
    names = list(names)
    unknown = [n for n in names if n not in params]
    if unknown or not names:
        raise ValueError(f"names must list parameters of the model {sorted(params)}, got unknown {unknown or names}")
    return names


# --------------------------------------------------------------------------------------------
# Models as functions of their parameters, with taps on the outputs of their linear maps


@dataclass
class LinearSite:
    """A linear map y = x W (+ b) inside a model: its inputs (N, T, d_in) and the parameters it uses."""

    inputs: Tensor
    d_out: int
    weight: str | None
    bias: str | None = None


@dataclass
class FunctionalModel:
    """One model as ``forward(params, x, taps) -> (N, C)`` with named linear sites; call it as ``fn(params, x)``.

    ``taps`` maps a site name to a tensor (N, T, d_out) added to that linear map's output, so the
    gradient of the outputs with respect to a zero tap is ∂f/∂y. ``record`` (a dict) receives each
    site's inputs (N, T, d_in) during a forward pass.
    """

    params: dict[str, Tensor]
    forward: Callable[..., Tensor] = field(repr=False)
    site_params: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)

    def __call__(self, params: Params, x: Tensor) -> Tensor:
        """Return the outputs (N, C) for inputs x."""
        return self.forward(params, x)

    def sites(self, params: Params, x: Tensor) -> dict[str, LinearSite]:
        """Return every linear site's inputs (N, T, d_in), output width and parameters, from one forward pass."""
        record: dict[str, tuple[Tensor, int]] = {}
        with torch.no_grad():
            self.forward(params, x, record=record)
        return {name: LinearSite(record[name][0], record[name][1], *self.site_params[name]) for name in record}

    def to(self, dtype: torch.dtype | None = None, device: torch.device | str | None = None) -> "FunctionalModel":
        """Return the same model with its parameters converted to ``dtype`` / moved to ``device``."""
        params = {k: v.to(device=device, dtype=dtype) for k, v in self.params.items()}
        return FunctionalModel(params, self.forward, self.site_params)


def _tap(taps: Mapping[str, Tensor] | None, name: str, y: Tensor) -> Tensor:
    """Return y plus the tap ``name`` (reshaped to y) when one is given."""
    if taps is None or name not in taps:
        return y
    return y + taps[name].reshape(y.shape)


def _record(record: dict | None, name: str, inputs: Tensor, d_out: int) -> None:
    """Store a site's inputs (N, T, d_in) and output width when recording."""
    if record is not None:
        record[name] = (inputs.detach(), d_out)


def _model_slice(source, m: int) -> dict[str, Tensor]:
    """Return model m's parameters {name: tensor} from a batched model or its state_dict ("params.W_E" keys)."""
    state = source.state_dict() if hasattr(source, "state_dict") else source
    out = {}
    for key, value in state.items():
        name = key[len("params."):] if key.startswith("params.") else key
        name = re.sub(r"^(\d+)_", r"\1.", name)                       # "0_W_Q" → "0.W_Q"
        if m >= value.shape[0]:
            raise ValueError(f"model index m={m} is out of range: the ensemble holds {value.shape[0]} model(s)")
        out[name] = value[m].detach().clone()
    return out


def functional_mlp(model, m: int = 0, state: Mapping[str, Tensor] | None = None) -> FunctionalModel:
    """Return model m of a :class:`~corekit.models.BatchedQuadraticMLP` (or of its ``state``) as a FunctionalModel.

    Inputs x (N, d_in), outputs (N, d_out) = ((x W_1 / √d_in)²) W_2 / width; sites "W_1", "W_2".
    """
    d_in, width = model.d_in, model.width
    params = _model_slice(state if state is not None else model, m)

    def forward(params: Params, x: Tensor, taps=None, record=None) -> Tensor:
        x = x.to(params["W_1"].dtype)[:, None, :]                            # (N, 1, d_in)
        _record(record, "W_1", x, width)
        pre = _tap(taps, "W_1", x @ params["W_1"])
        hidden = (pre / math.sqrt(d_in)).square()
        _record(record, "W_2", hidden, params["W_2"].shape[-1])
        return (_tap(taps, "W_2", hidden @ params["W_2"]) / width)[:, 0, :]

    return FunctionalModel(params, forward, {"W_1": ("W_1", None), "W_2": ("W_2", None)})


def functional_transformer(model, m: int = 0, state: Mapping[str, Tensor] | None = None) -> FunctionalModel:
    """Return model m of a :class:`~corekit.models.BatchedTransformer` as a FunctionalModel: tokens (N, T) → logits (N, V).

    The outputs are the logits at the last position; they match ``model(tokens)[m, :, -1]`` in eval
    mode (no dropout). ``state`` (a snapshot's state_dict) replaces the model's current parameters.
    Sites: "W_E", "W_pos", "i.W_Q", "i.W_K", "i.W_V", "i.W_O" (+ "i.b_O"), "i.W_in" (+ "i.b_in"),
    "i.W_out" (+ "i.b_out"), "W_U" (+ "b_U"); LayerNorm parameters have no site (their kernels come
    from Jacobians).
    """
    c = model.config
    params = _model_slice(state if state is not None else model, m)
    H, dh, D = c.n_heads, c.d_head, c.d_model
    site_params = {"W_E": ("W_E", None), "W_pos": ("W_pos", None)}
    for i in range(c.n_layers):
        site_params |= {f"{i}.W_Q": (f"{i}.W_Q", None), f"{i}.W_K": (f"{i}.W_K", None),
                        f"{i}.W_V": (f"{i}.W_V", None)}
        site_params |= {f"{i}.{w}": (f"{i}.{w}", f"{i}.{b}" if c.bias else None)
                        for w, b in (("W_O", "b_O"), ("W_in", "b_in"), ("W_out", "b_out"))}
    site_params["W_U"] = ("W_U", "b_U" if c.bias else None)

    def ln(P, x, name):
        return F.layer_norm(x, (D,), P[f"{name}_w"], P[f"{name}_b"])

    def bias(P, name):
        return P[name] if c.bias else 0.0

    def forward(P: Params, tokens: Tensor, taps=None, record=None) -> Tensor:
        N, T = tokens.shape
        if T > c.n_ctx:
            raise ValueError(f"sequence length {T} exceeds n_ctx={c.n_ctx}")
        dtype = P["W_E"].dtype
        if record is not None:
            _record(record, "W_E", F.one_hot(tokens, c.vocab).to(dtype), D)
            _record(record, "W_pos", torch.eye(T, c.n_ctx, dtype=dtype, device=tokens.device).expand(N, T, c.n_ctx), D)
        x = _tap(taps, "W_E", P["W_E"][tokens]) + _tap(taps, "W_pos", P["W_pos"][:T].expand(N, T, D))
        mask = torch.ones(T, T, dtype=torch.bool, device=tokens.device).triu(1)
        for i in range(c.n_layers):
            h = ln(P, x, f"{i}.ln1") if c.norm == "pre" else x
            qkv = []
            for w in ("W_Q", "W_K", "W_V"):
                _record(record, f"{i}.{w}", h, H * dh)
                qkv.append(_tap(taps, f"{i}.{w}", torch.einsum("ntd,hde->nthe", h, P[f"{i}.{w}"])))
            q, k, v = qkv
            scores = torch.einsum("nthe,nshe->nhts", q, k) / math.sqrt(dh)
            pattern = scores.masked_fill(mask, float("-inf")).softmax(dim=-1)
            z = torch.einsum("nhts,nshe->nthe", pattern, v)
            _record(record, f"{i}.W_O", z.reshape(N, T, H * dh), D)
            att = _tap(taps, f"{i}.W_O", torch.einsum("nthe,hed->ntd", z, P[f"{i}.W_O"]) + bias(P, f"{i}.b_O"))
            x = ln(P, x + att, f"{i}.ln1") if c.norm == "post" else x + att
            h = ln(P, x, f"{i}.ln2") if c.norm == "pre" else x
            _record(record, f"{i}.W_in", h, c.d_mlp)
            pre = _tap(taps, f"{i}.W_in", h @ P[f"{i}.W_in"] + bias(P, f"{i}.b_in"))
            post = F.relu(pre)
            _record(record, f"{i}.W_out", post, D)
            mlp = _tap(taps, f"{i}.W_out", post @ P[f"{i}.W_out"] + bias(P, f"{i}.b_out"))
            x = ln(P, x + mlp, f"{i}.ln2") if c.norm == "post" else x + mlp
        if c.norm == "pre":
            x = ln(P, x, "lnf")
        last = x[:, -1:, :]
        _record(record, "W_U", last, c.out_vocab)
        return _tap(taps, "W_U", last @ P["W_U"] + bias(P, "b_U"))[:, 0, :]

    return FunctionalModel(params, forward, site_params)


# --------------------------------------------------------------------------------------------
# Exact kernels


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
    _check_mode(mode)
    params = dict(params if params is not None else model.params)
    names = _check_names(params, names)
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
    names = _check_names(params, names)
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
    _check_mode(mode)
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
    _check_mode(mode)
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


# --------------------------------------------------------------------------------------------
# Kernel-vector products without the kernel


def kernel_matvec(fn: Callable[[Params, Tensor], Tensor], params: Params, x: Tensor, mode: str = "pair_mean",
                  names: Sequence[str] | None = None, chunk: int | None = None) -> Callable[[Tensor], Tensor]:
    """Return V ↦ K V for the kernel of ``names`` in ``mode``, by a VJP then a JVP (batched over the k vectors).

    V is (k, N, C) for "full", (k, C, N) for "blocks" and (k, N) for "class_mean" / "pair_mean"; the
    result has V's shape. "blocks" and "class_mean" cost C products per vector. ``chunk`` bounds how
    many output directions are differentiated at once.
    """
    _check_mode(mode)
    names = _check_names(params, names)
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


# --------------------------------------------------------------------------------------------
# Top eigenpairs


@dataclass
class Eigenpairs:
    """Leading eigenpairs: values (k,) descending, vectors (n, k) orthonormal, residuals ‖Kv − λv‖ (k,)."""

    values: Tensor
    vectors: Tensor
    residuals: Tensor
    method: str
    n_matvecs: int = 0


def dense_eigenpairs(K: Tensor, k: int) -> Eigenpairs:
    """Return the top-k eigenpairs of a symmetric matrix K (n, n) by ``torch.linalg.eigh`` in float64."""
    if K.dim() != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"K must be a square matrix, got shape {tuple(K.shape)}")
    if not 1 <= k <= K.shape[0]:
        raise ValueError(f"k must be in 1..{K.shape[0]}, got {k}")
    Kd = K.double()
    Kd = (Kd + Kd.T) / 2
    w, V = torch.linalg.eigh(Kd)
    w, V = w.flip(0)[:k], V.flip(1)[:, :k]
    res = (Kd @ V - V * w).norm(dim=0)
    return Eigenpairs(w, V, res, "dense", 0)


def _orthonormal_rows(X: Tensor, basis: Tensor | None, gen: torch.Generator, rtol: float = 1e-10) -> Tensor:
    """Return X (b, n) orthogonalised (twice) against the rows of ``basis`` (m, n), then orthonormalised.

    Rows lost to rank deficiency (an invariant subspace was found) are replaced by random ones.
    """
    for _ in range(3):
        if basis is not None and basis.shape[0]:
            for _ in range(2):
                X = X - (X @ basis.T) @ basis
        Q, R = torch.linalg.qr(X.T)
        d = R.diagonal().abs()
        scale = max(float(d.max()) if d.numel() else 0.0, 1.0)
        bad = d <= rtol * scale
        if not bool(bad.any()):
            return Q.T.contiguous()
        X = Q.T.clone()
        X[bad] = torch.randn(int(bad.sum()), X.shape[1], generator=gen, dtype=X.dtype).to(X.device)
    return X


def lanczos(matvec: Callable[[Tensor], Tensor], n: int, k: int, block_size: int = 4, max_steps: int | None = None,
            tol: float = 1e-8, seed: int = 0, dtype: torch.dtype = torch.float64,
            device: torch.device | str | None = None, check_every: int = 1) -> Eigenpairs:
    """Return the top-k eigenpairs of a symmetric PSD operator ``matvec`` (b, n) ↦ (b, n) by block Lanczos.

    Full reorthogonalisation of every new block against the whole basis, Rayleigh–Ritz on Qᵀ(KQ), and
    stopping once every one of the k residuals ‖Kv − λv‖ is ≤ ``tol`` · λ_1 (or after ``max_steps``
    blocks, default enough for 4k + 40 vectors). ``block_size`` ≥ 2 resolves degenerate pairs (the
    cos/sin pairs of Fourier features). Residuals are exact: K v is kept from the products.
    """
    if not isinstance(block_size, int) or block_size < 2:
        raise ValueError(f"block_size must be an integer >= 2 (degenerate pairs need a block), got {block_size!r}")
    if not 1 <= k <= n:
        raise ValueError(f"k must be in 1..n={n}, got {k}")
    if max_steps is None:
        max_steps = math.ceil((4 * k + 40) / block_size)
    if max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    gen = torch.Generator().manual_seed(seed)
    X = _orthonormal_rows(torch.randn(block_size, n, generator=gen, dtype=dtype).to(device), None, gen)
    Qs: list[Tensor] = []
    KQs: list[Tensor] = []
    result = None
    for step in range(max_steps):
        W = matvec(X).to(dtype)
        Qs.append(X)
        KQs.append(W)
        m = sum(q.shape[0] for q in Qs)
        last = step == max_steps - 1 or m + block_size > n
        if m >= k and (last or step % check_every == 0):
            Q, KQ = torch.cat(Qs), torch.cat(KQs)
            T = Q @ KQ.T
            theta, S = torch.linalg.eigh((T + T.T) / 2)
            theta, S = theta.flip(0)[:k], S.flip(1)[:, :k]
            V, KV = S.T @ Q, S.T @ KQ                                          # (k, n)
            res = (KV - theta[:, None] * V).norm(dim=1)
            result = Eigenpairs(theta, V.T.contiguous(), res, "lanczos", m)
            if bool((res <= tol * theta[0].abs().clamp_min(1e-300)).all()):
                break
        if last:
            break
        X = _orthonormal_rows(W, torch.cat(Qs), gen)[: min(block_size, n - m)]
    if result is None:
        raise ValueError(f"max_steps={max_steps} blocks of {block_size} give fewer than k={k} vectors")
    return result


def top_eigenpairs(K: Tensor | Callable[[Tensor], Tensor], k: int, n: int | None = None, method: str = "auto",
                   **lanczos_options) -> Eigenpairs:
    """Return the top-k eigenpairs of K: a matrix (n, n) (eigh; or "lanczos") or an operator (b, n) ↦ (b, n) (Lanczos, with n)."""
    if method not in ("auto", "dense", "lanczos"):
        raise ValueError(f"method must be 'auto', 'dense' or 'lanczos', got {method!r}")
    if isinstance(K, Tensor):
        if method in ("auto", "dense"):
            return dense_eigenpairs(K, k)
        Kd = K.double()
        return lanczos(lambda V: V @ Kd, K.shape[0], k, device=K.device, **lanczos_options)
    if method == "dense":
        raise ValueError("method='dense' needs the kernel as a matrix, got an operator")
    if n is None:
        raise ValueError("n (the operator's dimension) is required when K is an operator")
    return lanczos(K, n, k, **lanczos_options)


def cliff_edges(values: Tensor, n_edges: int = 2, start: int = 1, floor: float = 1e-10) -> list[int]:
    """Return the ``n_edges`` positions e (ascending) with the largest drops λ_{e−1}/λ_e, for e > ``start``.

    ``values`` (k,) are descending eigenvalues; an edge e means eigenvalues start … e−1 form a cliff
    above eigenvalue e. Eigenvalues below ``floor`` · λ_0 (numerical zeros) are not considered.
    """
    values = values.double().cpu()
    if values.dim() != 1 or len(values) < start + 2:
        raise ValueError(f"values must be (k,) with k >= start + 2 = {start + 2}, got shape {tuple(values.shape)}")
    keep = values > floor * values[0].abs()
    ratios = torch.full((len(values),), -math.inf, dtype=torch.float64)
    for e in range(start + 1, len(values)):
        if keep[e]:
            ratios[e] = values[e - 1] / values[e]
    if not 1 <= n_edges <= int(torch.isfinite(ratios).sum()):
        raise ValueError(f"n_edges must be in 1..{int(torch.isfinite(ratios).sum())}, got {n_edges}")
    return sorted(int(e) for e in torch.topk(ratios, n_edges).indices)


def group_eigenpairs(per_param: Mapping[str, Tensor], groups: Mapping[str, Sequence[str]],
                     k: int) -> dict[str, Eigenpairs]:
    """Return {group: top-k eigenpairs} of the summed (N, N) kernels of each group of parameters (e.g. a layer)."""
    return {group: top_eigenpairs(total(per_param, names), k) for group, names in groups.items()}


# --------------------------------------------------------------------------------------------
# Language models: the residual-stream operator K̃ = S^{1/2} K_r S^{1/2}

#: Modules of a decoder block whose parameters the language-model operator differentiates.
LM_MODULES = ("mlp.down_proj",)


_GRAMS: dict[tuple, Tensor] = {}


def unembedding_gram(weight: Tensor, chunk: int = 16384) -> Tensor:
    """Return UᵀU (d, d) in float64 for an unembedding U (V, d): chunk products in U's dtype, summed in float64.

    The result is remembered for the same weight tensor (the LM operator asks for it once per model).
    """
    if weight.dim() != 2:
        raise ValueError(f"weight must be an unembedding matrix (V, d), got shape {tuple(weight.shape)}")
    key = (id(weight), weight.data_ptr(), tuple(weight.shape), weight.dtype, weight._version)
    if key not in _GRAMS:
        d = weight.shape[1]
        out = torch.zeros(d, d, dtype=torch.float64, device=weight.device)
        for i in range(0, weight.shape[0], chunk):
            block = weight[i:i + chunk].detach()
            out += (block.T @ block).double()
        _GRAMS[key] = out
    return _GRAMS[key]


def psd_sqrt(S: Tensor) -> Tensor:
    """Return the symmetric square root (d, d) of a symmetric PSD matrix S (d, d), in float64."""
    if S.dim() != 2 or S.shape[0] != S.shape[1]:
        raise ValueError(f"S must be a square matrix, got shape {tuple(S.shape)}")
    w, Q = torch.linalg.eigh((S.double() + S.double().T) / 2)
    return (Q * w.clamp_min(0).sqrt()) @ Q.T


def eigenvector_scores(vectors: Tensor, n_examples: int) -> Tensor:
    """Return per-example scores (k, N) of eigenvectors (N·d, k): each one's (N, d) block matrix's top singular component u₁σ₁.

    The sign makes each score vector's largest-magnitude entry positive. For the residual-stream
    operator this equals the same reduction of the full output eNTK's eigenvector, whose (N, V)
    blocks are the (N, d) blocks times the isometry S^{-1/2}Uᵀ.
    """
    if vectors.dim() != 2 or vectors.shape[0] % n_examples:
        raise ValueError(f"vectors must be (N·d, k) with N = n_examples = {n_examples}, got {tuple(vectors.shape)}")
    blocks = vectors.T.reshape(vectors.shape[1], n_examples, -1).double()         # (k, N, d)
    U, s, _ = torch.linalg.svd(blocks, full_matrices=False)
    scores = U[:, :, 0] * s[:, :1]
    top = scores.abs().argmax(dim=1)
    sign = torch.sign(scores[torch.arange(len(scores)), top])
    return scores * sign[:, None]


def _returns_hidden(out) -> Tensor:
    """Return a decoder block's hidden states whether it returns a tensor or a tuple."""
    return out[0] if isinstance(out, tuple) else out


def _rotate_half(x: Tensor) -> Tensor:
    """Return the rotary "rotate half" of x (..., 2h): (−x₂, x₁)."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _gemma_last_position(block, h: Tensor, kwargs: Mapping) -> Tensor:
    """Return a Gemma-3 decoder block's output (n, d) at the last position for its input h (n, T, d).

    Keys and values come from every position, the query and everything after attention from the last
    one only: what the final normed last-token state needs, at a fraction of the block's cost.
    """
    attn = block.self_attn
    x = block.input_layernorm(h)
    n, T = x.shape[:2]
    hd = attn.head_dim
    q = attn.q_norm(attn.q_proj(x[:, -1:]).view(n, 1, -1, hd).transpose(1, 2))             # (n, H, 1, hd)
    k = attn.k_norm(attn.k_proj(x).view(n, T, -1, hd).transpose(1, 2))                    # (n, H_kv, T, hd)
    v = attn.v_proj(x).view(n, T, -1, hd).transpose(1, 2)
    cos, sin = kwargs["position_embeddings"]
    cos, sin = cos[:, None], sin[:, None]
    q = q * cos[..., -1:, :] + _rotate_half(q) * sin[..., -1:, :]
    k = k * cos + _rotate_half(k) * sin
    k = k.repeat_interleave(attn.num_key_value_groups, dim=1)
    v = v.repeat_interleave(attn.num_key_value_groups, dim=1)
    scores = (q @ k.transpose(2, 3)) * attn.scaling                                        # (n, H, 1, T)
    if getattr(attn, "attn_logit_softcapping", None) is not None:
        scores = torch.tanh(scores / attn.attn_logit_softcapping) * attn.attn_logit_softcapping
    mask = kwargs.get("attention_mask")
    if mask is not None:
        scores = scores + mask[..., -1:, :T]
    z = (scores.softmax(-1, dtype=torch.float32).to(q.dtype) @ v).transpose(1, 2).reshape(n, 1, -1)
    h = h[:, -1:] + block.post_attention_layernorm(attn.o_proj(z))
    h = h + block.post_feedforward_layernorm(block.mlp(block.pre_feedforward_layernorm(h)))
    return h[:, 0]


@dataclass
class _LMChunk:
    """One chunk of examples, cached up to the module: its inputs x (n, T, d_in), outputs y (n, T, d),
    the residual h_mid (n, T, d) the module's branch is added to, and every downstream block's kwargs."""

    rows: Tensor
    x: Tensor
    y: Tensor
    h_mid: Tensor
    kwargs: list[dict]


class ResidualStreamNTK:
    """The eNTK of one module's parameters as the operator K̃ = S^{1/2} K_r S^{1/2} on R^{N·d} (a causal LM).

    K_r = J_r J_rᵀ with J_r the Jacobian of the final *normed* last-token states (N, d) with respect
    to ``module`` of decoder block ``layer`` (1-indexed: block ``layer`` writes the residual stream
    ``layer`` of :mod:`corekit.llm`), and S = (UᵀU) ⊗ I_N with U (V, d) the unembedding, so K̃ has
    the nonzero spectrum of the full output eNTK (N·V × N·V) without any vocabulary-sized Jacobian.
    The eigenvectors of K̃ relate to the full kernel's by the isometry S^{-1/2}Uᵀ on each example's
    block. Models with a final logit soft-cap are refused (their logits are not linear in the state).

    Every example's module input and output and the residual stream the module's branch is added to
    are cached once (one forward pass); a product then runs only the blocks after the module: a VJP
    (batched over vectors with ``vmap``) gives ∂/∂y, the linear layer's weight gradient is
    Σ_t g_t x_tᵀ summed over examples, and a JVP pushes (dW) x_t back to the outputs. A Gemma-3
    last block runs its query and everything after attention at the last position only. The contexts
    (N, T) must share one length (no padding); load the model with eager attention.
    """

    def __init__(self, lm, input_ids: Tensor, layer: int, module: str = "mlp.down_proj", chunk_size: int = 64,
                 vector_chunk: int = 8, cache: bool = True):
        if module not in LM_MODULES:
            raise ValueError(f"module must be one of {LM_MODULES}, got {module!r}")
        L = lm.n_layers
        if not isinstance(layer, int) or isinstance(layer, bool) or not 1 <= layer <= L:
            raise ValueError(f"layer must be an integer in [1, {L}] (the decoder block whose {module} is "
                             f"differentiated), got {layer!r}")
        if input_ids.dim() != 2 or input_ids.shape[1] < 2:
            raise ValueError(f"input_ids must be (N, T) token ids with T >= 2, got shape {tuple(input_ids.shape)}")
        if chunk_size < 1 or vector_chunk < 1:
            raise ValueError("chunk_size and vector_chunk must be positive integers")
        softcap = getattr(lm.config, "final_logit_softcapping", None)
        if softcap is not None:
            raise ValueError(f"{lm.name} soft-caps its logits (final_logit_softcapping={softcap}): the residual-stream "
                             "operator needs logits linear in the normed state")
        self.lm, self.layer, self.module = lm, layer, module
        self.block = lm.blocks[layer - 1]
        self.linear = self.block.get_submodule(module)
        self.branch_norm = getattr(self.block, "post_feedforward_layernorm", None)   # Gemma's post-MLP norm
        self.downstream = list(lm.blocks[layer:])
        self.norm = lm.model.base_model.norm
        self.vector_chunk = vector_chunk
        self.N, self.d = int(input_ids.shape[0]), lm.d_model
        self.n = self.N * self.d
        head = lm.model.get_output_embeddings().weight
        self.S_half = psd_sqrt(unembedding_gram(head)).to(head.device)
        self.chunks: list[_LMChunk] = []
        if cache:
            _fill_caches([self], input_ids, chunk_size)

    @classmethod
    def for_layers(cls, lm, input_ids: Tensor, layers: Sequence[int], module: str = "mlp.down_proj",
                   chunk_size: int = 64, vector_chunk: int = 8) -> dict[int, "ResidualStreamNTK"]:
        """Return {layer: operator} for several layers, their caches filled by one shared forward pass per chunk."""
        ops = {l: cls(lm, input_ids, l, module, chunk_size, vector_chunk, cache=False) for l in layers}
        _fill_caches(list(ops.values()), input_ids, chunk_size)
        return ops

    @property
    def n_params(self) -> int:
        """Return the number of parameters the kernel differentiates."""
        return self.linear.weight.numel()

    def _hooks(self, got: dict) -> list:
        """Return forward hooks that record this operator's cache of one forward pass into ``got``."""
        got["kwargs"] = [None] * len(self.downstream)

        def at_linear(module, args, out):
            got["x"], got["y"] = args[0].detach(), out.detach()

        def at_block(module, args, out):
            got["out"] = _returns_hidden(out).detach()

        def at_downstream(j):
            def hook(module, args, kwargs):
                got["kwargs"][j] = {k: v for k, v in kwargs.items()
                                    if k in ("attention_mask", "position_embeddings", "position_ids")}
            return hook
        handles = [self.linear.register_forward_hook(at_linear), self.block.register_forward_hook(at_block)]
        return handles + [b.register_forward_pre_hook(at_downstream(j), with_kwargs=True)
                          for j, b in enumerate(self.downstream)]

    def _chunk(self, got: dict, rows: Tensor) -> _LMChunk:
        """Return the cached chunk of rows from what :meth:`_hooks` recorded."""
        h_mid = got["out"] - self._branch(got["y"])
        return _LMChunk(rows.to(self.lm.device), got["x"], got["y"], h_mid, got["kwargs"])

    def _branch(self, y: Tensor) -> Tensor:
        """Return what the module's output y adds to the residual stream (Gemma normalises it first)."""
        return y if self.branch_norm is None else self.branch_norm(y)

    def _tail(self, chunk: _LMChunk) -> Callable[[Tensor], Tensor]:
        """Return y (n, T, d) ↦ the final normed last-token states (n, d), running only the blocks after the module."""
        def fn(y: Tensor) -> Tensor:
            h = chunk.h_mid + self._branch(y)
            for j, (block, kwargs) in enumerate(zip(self.downstream, chunk.kwargs)):
                if j == len(self.downstream) - 1 and type(block).__name__ == "Gemma3DecoderLayer":
                    return self.norm(_gemma_last_position(block, h, kwargs))
                h = _returns_hidden(block(h, **kwargs))
            return self.norm(h[:, -1])
        return fn

    def outputs(self) -> Tensor:
        """Return the final normed last-token states (N, d) through the cached path."""
        with torch.no_grad():
            return torch.cat([self._tail(c)(c.y) for c in self.chunks])

    def kr_matvec(self, V: Tensor) -> Tensor:
        """Return K_r V (b, N, d) for vectors V (b, N, d) in the normed-state coordinates (a VJP, then a JVP)."""
        if V.dim() != 3 or V.shape[1:] != (self.N, self.d):
            raise ValueError(f"V must be (b, {self.N}, {self.d}), got {tuple(V.shape)}")
        W = self.linear.weight
        V = V.to(W.dtype)
        out = torch.empty_like(V)
        for s in range(0, V.shape[0], self.vector_chunk):
            Vs = V[s:s + self.vector_chunk]
            grad = torch.zeros(Vs.shape[0], *W.shape, dtype=W.dtype, device=W.device)     # (b, d_out, d_in)
            for c in self.chunks:
                _, vjp_fn = vjp(self._tail(c), c.y)
                (G,) = vmap(vjp_fn)(Vs[:, c.rows])                                          # (b, n, T, d_out)
                grad += torch.einsum("bnto,nti->boi", G, c.x)
            for c in self.chunks:
                tail = self._tail(c)
                dY = torch.einsum("boi,nti->bnto", grad, c.x)
                out[s:s + self.vector_chunk, c.rows] = vmap(lambda t: jvp(tail, (c.y,), (t,))[1])(dY)
        return out

    def matvec(self, V: Tensor) -> Tensor:
        """Return K̃ V (b, N·d) for vectors V (b, N·d) (float64 in and out; the model runs in its own dtype)."""
        if V.dim() != 2 or V.shape[1] != self.n:
            raise ValueError(f"V must be (b, {self.n}), got {tuple(V.shape)}")
        S = self.S_half.to(V.device)
        U = (V.reshape(-1, self.N, self.d).double() @ S).to(self.S_half.device)
        return (self.kr_matvec(U).double().to(V.device) @ S).reshape(V.shape[0], self.n).to(V.dtype)

    def output_jacobians(self, cotangent_chunk: int = 64) -> Tensor:
        """Return J_y (N, d, T, d_out): the normed last-token states' Jacobians w.r.t. the module's outputs, by VJPs."""
        eye = torch.eye(self.d, dtype=self.linear.weight.dtype, device=self.linear.weight.device)
        parts = []
        for c in self.chunks:
            _, vjp_fn = vjp(self._tail(c), c.y)
            n = len(c.rows)
            cols = []
            for i in range(0, self.d, cotangent_chunk):
                cot = eye[i:i + cotangent_chunk, None, :].expand(-1, n, -1)                  # (k, n, d)
                cols.append(vmap(vjp_fn)(cot)[0])                                           # (k, n, T, d_out)
            parts.append(torch.cat(cols).transpose(0, 1))
        return torch.cat(parts)

    def dense(self) -> Tensor:
        """Return K̃ (N·d, N·d) in float64 from explicit Jacobians and the linear layer's factorisation (small N only).

        ∂out_n/∂W = Σ_t J_y(n, t) ⊗ x_{n,t}, so K_r[n, m] = Σ_{t,s} (x_{n,t}·x_{m,s}) J_y(n, t) J_y(m, s)ᵀ.
        """
        J = self.output_jacobians().double()                                                # (N, d, T, d_out)
        X = torch.cat([c.x for c in self.chunks]).double()                                  # (N, T, d_in)
        N, d = self.N, self.d
        K = torch.empty(N, d, N, d, dtype=torch.float64, device=J.device)
        for n in range(N):
            for m in range(n, N):
                A = X[n] @ X[m].T                                                           # (T, T)
                B = torch.einsum("ts,jsc->jtc", A, J[m])
                K[n, :, m] = J[n].reshape(d, -1) @ B.reshape(d, -1).T
                K[m, :, n] = K[n, :, m].T
        S = self.S_half.to(K.device)
        K = torch.einsum("ab,nbmc,cd->namd", S, K, S)
        return K.reshape(N * d, N * d)


def _fill_caches(ops: Sequence[ResidualStreamNTK], input_ids: Tensor, chunk_size: int) -> None:
    """Fill every operator's cache (same model, same contexts) with one forward pass of the whole model per chunk."""
    from corekit import llm
    lm = ops[0].lm
    for i in range(0, input_ids.shape[0], chunk_size):
        ids = input_ids[i:i + chunk_size].to(lm.device)
        rows = torch.arange(i, i + ids.shape[0])
        got = [{} for _ in ops]
        handles = [h for op, g in zip(ops, got) for h in op._hooks(g)]
        try:
            with torch.no_grad():
                llm._run(lm, ids, torch.ones_like(ids), torch.arange(ids.shape[1], device=lm.device)[None].expand_as(ids))
        finally:
            for h in handles:
                h.remove()
        for op, g in zip(ops, got):
            op.chunks.append(op._chunk(g, rows))
