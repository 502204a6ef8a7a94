"""The eNTK of a causal LM's module as an operator on the residual stream: K̃ = S^{1/2} K_r S^{1/2}."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch
from torch import Tensor
from torch.func import jvp, vjp, vmap

from corekit.lm import gemma3
from corekit.lm.layout import final_norm, layout_of, mlp_out
from corekit.lm.model import block_hidden
from corekit.lm.stream import forward

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


@dataclass
class _LMChunk:
    """One chunk of examples, cached up to the module: its inputs x (n, T, d_in), outputs y (n, T, d),
    the residual h_mid (n, T, d) the module's branch is added to, and every downstream block's other arguments."""

    rows: Tensor
    x: Tensor
    y: Tensor
    h_mid: Tensor
    args: list[tuple]
    kwargs: list[dict]


class ResidualStreamNTK:
    """The eNTK of one module's parameters as the operator K̃ = S^{1/2} K_r S^{1/2} on R^{N·d} (a causal LM).

    K_r = J_r J_rᵀ with J_r the Jacobian of the final *normed* last-token states (N, d) with respect
    to the MLP output projection of decoder block ``layer`` (1-indexed: block ``layer`` writes the
    residual stream ``layer`` of :mod:`corekit.lm`; the module's name comes from the model's family,
    :mod:`corekit.lm.layout`: ``mlp.down_proj``, GPT-2's ``mlp.c_proj``, GPT-NeoX's ``mlp.dense_4h_to_h``), and
    S = (UᵀU) ⊗ I_N with U (V, d) the unembedding, so K̃ has
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

    def __init__(self, lm, input_ids: Tensor, layer: int, chunk_size: int = 64, vector_chunk: int = 8,
                 cache: bool = True):
        self.linear = mlp_out(lm, layer)
        if input_ids.dim() != 2 or input_ids.shape[1] < 2:
            raise ValueError(f"input_ids must be (N, T) token ids with T >= 2, got shape {tuple(input_ids.shape)}")
        if chunk_size < 1 or vector_chunk < 1:
            raise ValueError("chunk_size and vector_chunk must be positive integers")
        softcap = getattr(lm.config, "final_logit_softcapping", None)
        if softcap is not None:
            raise ValueError(f"{lm.name} soft-caps its logits (final_logit_softcapping={softcap}): the residual-stream "
                             "operator needs logits linear in the normed state")
        self.lm, self.layer, self.module = lm, layer, layout_of(lm).mlp_out
        self.block = lm.blocks[layer - 1]
        self.branch_norm = gemma3.mlp_branch_norm(self.block)
        self.downstream = list(lm.blocks[layer:])
        self.norm = final_norm(lm)
        self.vector_chunk = vector_chunk
        self.N, self.d = int(input_ids.shape[0]), lm.d_model
        self.n = self.N * self.d
        head = lm.model.get_output_embeddings().weight
        self.S_half = psd_sqrt(unembedding_gram(head)).to(head.device)
        self.chunks: list[_LMChunk] = []
        if cache:
            _fill_caches([self], input_ids, chunk_size)

    @classmethod
    def for_layers(cls, lm, input_ids: Tensor, layers: Sequence[int], chunk_size: int = 64,
                   vector_chunk: int = 8) -> dict[int, "ResidualStreamNTK"]:
        """Return {layer: operator} for several layers, their caches filled by one shared forward pass per chunk."""
        ops = {l: cls(lm, input_ids, l, chunk_size, vector_chunk, cache=False) for l in layers}
        _fill_caches(list(ops.values()), input_ids, chunk_size)
        return ops

    @property
    def module_path(self) -> str:
        """Return the differentiated module's name in the model (Hugging Face's, e.g. ``model.layers.16.mlp.down_proj``)."""
        return next(name for name, m in self.lm.model.named_modules() if m is self.linear)

    @property
    def n_params(self) -> int:
        """Return the number of parameters the kernel differentiates."""
        return self.linear.weight.numel()

    def _hooks(self, got: dict) -> list:
        """Return forward hooks that record this operator's cache of one forward pass into ``got``."""
        got["kwargs"] = [None] * len(self.downstream)
        got["args"] = [()] * len(self.downstream)

        def at_linear(module, args, out):
            got["x"], got["y"] = args[0].detach(), out.detach()

        def at_block(module, args, out):
            got["out"] = block_hidden(out).detach()

        def at_downstream(j):
            def hook(module, args, kwargs):   # GPT-2 passes its mask positionally (after the cache, None here)
                got["args"][j] = tuple(args[1:])
                got["kwargs"][j] = {k: v for k, v in kwargs.items()
                                    if k in ("attention_mask", "position_embeddings", "position_ids")}
            return hook
        handles = [self.linear.register_forward_hook(at_linear), self.block.register_forward_hook(at_block)]
        return handles + [b.register_forward_pre_hook(at_downstream(j), with_kwargs=True)
                          for j, b in enumerate(self.downstream)]

    def _chunk(self, got: dict, rows: Tensor) -> _LMChunk:
        """Return the cached chunk of rows from what :meth:`_hooks` recorded."""
        h_mid = got["out"] - self._branch(got["y"])
        return _LMChunk(rows.to(self.lm.device), got["x"], got["y"], h_mid, got["args"], got["kwargs"])

    def _branch(self, y: Tensor) -> Tensor:
        """Return what the module's output y adds to the residual stream (Gemma normalises it first)."""
        return y if self.branch_norm is None else self.branch_norm(y)

    def _tail(self, chunk: _LMChunk) -> Callable[[Tensor], Tensor]:
        """Return y (n, T, d) ↦ the final normed last-token states (n, d), running only the blocks after the module."""
        def fn(y: Tensor) -> Tensor:
            h = chunk.h_mid + self._branch(y)
            for j, (block, args, kwargs) in enumerate(zip(self.downstream, chunk.args, chunk.kwargs)):
                if j == len(self.downstream) - 1 and gemma3.is_gemma3_block(block):
                    return self.norm(gemma3.last_position_output(block, h, kwargs))
                h = block_hidden(block(h, *args, **kwargs))
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
        d_out, d_in = self.chunks[0].y.shape[-1], self.chunks[0].x.shape[-1]   # GPT-2's Conv1D stores W as (d_in, d_out)
        for s in range(0, V.shape[0], self.vector_chunk):
            Vs = V[s:s + self.vector_chunk]
            grad = torch.zeros(Vs.shape[0], d_out, d_in, dtype=W.dtype, device=W.device)     # (b, d_out, d_in)
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
    lm = ops[0].lm
    for i in range(0, input_ids.shape[0], chunk_size):
        ids = input_ids[i:i + chunk_size].to(lm.device)
        rows = torch.arange(i, i + ids.shape[0])
        got = [{} for _ in ops]
        handles = [h for op, g in zip(ops, got) for h in op._hooks(g)]
        try:
            with torch.no_grad():
                forward(lm, ids, torch.ones_like(ids), torch.arange(ids.shape[1], device=lm.device)[None].expand_as(ids))
        finally:
            for h in handles:
                h.remove()
        for op, g in zip(ops, got):
            op.chunks.append(op._chunk(g, rows))

