"""Models as pure functions of their parameters, ``fn(params, x) -> outputs (N, C)``, with taps on the
outputs of their linear maps (what the "linear-site-gram" kernel strategy differentiates)."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Callable, Mapping

import torch
import torch.nn.functional as F
from torch import Tensor

#: Parameters of a functional model: {name: tensor}.
Params = Mapping[str, Tensor]


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
    Sites: "W_E", "W_pos", "i.W_Q", "i.W_K", "i.W_V" (+ "i.b_Q", "i.b_K", "i.b_V" with ``qkv_bias``),
    "i.W_O" (+ "i.b_O"), "i.W_in" (+ "i.b_in"), "i.W_out" (+ "i.b_out"), "W_U" (+ "b_U"); LayerNorm
    parameters have no site (their kernels come from Jacobians). Attention is causal as the config says.
    """
    c = model.config
    params = _model_slice(state if state is not None else model, m)
    H, dh, D = c.n_heads, c.d_head, c.d_model
    site_params = {"W_E": ("W_E", None), "W_pos": ("W_pos", None)}
    for i in range(c.n_layers):
        site_params |= {f"{i}.W_{x}": (f"{i}.W_{x}", f"{i}.b_{x}" if c.qkv_bias else None) for x in "QKV"}
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
            for qkv_name in "QKV":
                _record(record, f"{i}.W_{qkv_name}", h, H * dh)
                y = torch.einsum("ntd,hde->nthe", h, P[f"{i}.W_{qkv_name}"])
                qkv.append(_tap(taps, f"{i}.W_{qkv_name}", y + P[f"{i}.b_{qkv_name}"] if c.qkv_bias else y))
            q, k, v = qkv
            scores = torch.einsum("nthe,nshe->nhts", q, k) / math.sqrt(dh)
            pattern = (scores.masked_fill(mask, float("-inf")) if c.causal else scores).softmax(dim=-1)
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

