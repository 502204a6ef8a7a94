"""Small transformers, batched over an ensemble: every parameter has a leading model dimension M.

One :class:`BatchedTransformer` holds M independently initialised models (one seed each) and runs
them together with batched matmuls, so an ensemble trains as one program. Model m's slice of every
parameter is initialised from ``torch.Generator().manual_seed(seeds[m])``, and model m's dropout
masks come from its own generator seeded from ``seeds[m]`` (:func:`dropout_seed`), so an ensemble of
seeds ``[s0, s1]`` holds and trains exactly the models that ensembles ``[s0]`` and ``[s1]`` would.

With ``norm="post"``, ``causal=False``, ``qkv_bias=True``, ``init="torch"`` and ``dropout=0.1`` a layer
is ``torch.nn.TransformerEncoderLayer`` with its defaults (post-LN, ReLU, dropout on the attention
pattern, the MLP hidden layer and both sublayer outputs), the grokking-cores authors' block; its dropout
rate is the nearest multiple of 2⁻¹⁶ (0.1 → 0.100006), drawn 16 bits an entry.
"""
from __future__ import annotations

import hashlib
import math
import re
from dataclasses import asdict, dataclass
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

_NORMS = ("post", "pre", "none")
#: Contexts up to this length compute attention scores and mixtures as broadcast products summed, not as batched
#: matrix products: a (1 × e) @ (e × T) product per head and example is all overhead.
SHORT_CONTEXT = 4
_INITS = ("fan_in", "nanda", "torch", "lin")


@dataclass(frozen=True)
class TransformerConfig:
    """Architecture of one model; ``norm`` is "post" (the Markov paper), "pre" or "none".

    ``init`` sets the scales of the N(0, σ²) initial weights: "fan_in" gives embeddings σ = 1 and every
    other matrix σ = 1/√fan_in; "nanda" is the modular-addition code of Nanda et al. (2023), which
    the eNTK paper's transformer follows: σ = 1/√d_model for every matrix but the unembedding,
    σ = 1/√vocab there. "lin" is the eNTK authors' own transformer code (Lin 2025): each model's
    generator, seeded with its seed, draws in their module order (W_E, W_pos, W_Q, W_K, W_V, W_O,
    W_in, W_out, W_U), in their shapes (W_Q, W_K, W_V (H, d_head, D), W_O (D, D)) and scales (every
    matrix 1/√d_model except W_in 1/√d_mlp and W_U 1/√out_vocab), so model m holds exactly the
    weights their script draws after ``torch.manual_seed(seed)``; it needs ``bias=False`` and
    ``norm="none"``. "torch" draws what ``nn.TransformerEncoderLayer``, ``nn.Linear`` and
    ``nn.Embedding`` draw by default: embeddings N(0, 1), the joint query/key/value matrix
    Xavier-uniform, their biases and the attention output bias 0, every other weight and bias
    U(±1/√fan_in) (the distributions, not torch's random stream).

    ``causal`` masks attention to earlier positions (False: every position sees every other, as
    ``nn.TransformerEncoder`` without a mask); ``qkv_bias`` adds query, key and value biases;
    ``embedding_dropout`` applies ``dropout`` to the embeddings too (the ACE authors' models, whose
    blocks are ``nn.TransformerEncoderLayer``, drop out only inside the blocks).
    """

    vocab: int
    n_ctx: int
    d_model: int = 64
    n_heads: int = 4
    d_mlp: int = 256
    n_layers: int = 1
    norm: str = "post"
    dropout: float = 0.0
    bias: bool = True
    n_out: int | None = None  # output vocabulary; defaults to ``vocab``
    init: str = "fan_in"
    causal: bool = True
    qkv_bias: bool = False
    embedding_dropout: bool = True

    @classmethod
    def ace_authors(cls, p: int, d_model: int = 128, d_mlp: int = 512, n_heads: int = 4, n_layers: int = 2,
                    dropout: float = 0.1) -> TransformerConfig:
        """Return the ACE authors' modular-addition model (paper sizes by default): ``n_layers`` post-LayerNorm
        ``nn.TransformerEncoderLayer`` blocks with query, key and value biases, torch's initialisers, a causal mask
        and dropout inside the blocks only, reading [a, b] and predicting one of p classes."""
        return cls(vocab=p, n_ctx=2, d_model=d_model, n_heads=n_heads, d_mlp=d_mlp, n_layers=n_layers, norm="post",
                   dropout=dropout, causal=True, qkv_bias=True, init="torch", n_out=p, embedding_dropout=False)

    @classmethod
    def entk_authors(cls, p: int, d_model: int = 64, n_heads: int = 4, d_mlp: int = 256,
                     init: str = "lin") -> TransformerConfig:
        """Return the eNTK authors' one-layer transformer (paper sizes by default): no LayerNorm and no biases,
        reading [a, b, "="] ("=" the token p), with their own weight draws (``init="lin"``)."""
        return cls(vocab=p + 1, n_ctx=3, d_model=d_model, n_heads=n_heads, d_mlp=d_mlp, n_layers=1, norm="none",
                   bias=False, init=init)

    def __post_init__(self):
        for name in ("vocab", "n_ctx", "d_model", "n_heads", "d_mlp", "n_layers"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if self.norm not in _NORMS:
            raise ValueError(f"norm must be one of {_NORMS}, got {self.norm!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")
        if self.init not in _INITS:
            raise ValueError(f"init must be one of {_INITS}, got {self.init!r}")
        if self.qkv_bias and not self.bias:
            raise ValueError("qkv_bias=True needs bias=True")
        if self.init == "lin" and (self.bias or self.norm != "none"):
            raise ValueError(f'init="lin" (the eNTK authors\' model) needs bias=False and norm="none", got '
                             f"bias={self.bias!r}, norm={self.norm!r}")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def out_vocab(self) -> int:
        return self.n_out or self.vocab

    def as_dict(self) -> dict:
        """Return the configuration as a plain dict."""
        return asdict(self)


def dropout_seed(seed: int) -> int:
    """Return the seed of the dropout generator of the model initialised from ``seed`` (a separate stream)."""
    return int.from_bytes(hashlib.sha256(f"dropout:{seed}".encode()).digest()[:8], "little") >> 1


def _matmul(x: Tensor, W: Tensor) -> Tensor:
    """Return x (M, ..., D) @ W (M, D, F) for each model: (M, ..., F), one batched product over the flattened rows."""
    M, D = x.shape[0], x.shape[-1]
    return torch.bmm(x.reshape(M, -1, D), W).view(*x.shape[:-1], W.shape[-1])


def _rows(table: Tensor, index: Tensor) -> Tensor:
    """Return the rows ``table[m, index[m, j]]`` (M, N, C) of a per-model table (M, R, C) for an index (M, N).

    One row copy per entry (``index_select`` on the flattened table; its gradient adds whole rows), where
    ``torch.gather`` with an index expanded over the columns addresses every element on its own.
    """
    M, R, C = table.shape
    flat = (index + torch.arange(M, device=index.device)[:, None] * R).reshape(-1)
    return table.reshape(M * R, C).index_select(0, flat).view(M, -1, C)


def _layer_norm(x: Tensor, gain: Tensor | None, bias: Tensor | None, eps: float = 1e-5) -> Tensor:
    """Return LayerNorm of x (M, ..., D) with per-model gain / bias (M, D)."""
    x = F.layer_norm(x, x.shape[-1:], eps=eps)
    shape = (x.shape[0],) + (1,) * (x.dim() - 2) + (x.shape[-1],)
    if gain is not None:
        x = x * gain.view(shape)
    if bias is not None:
        x = x + bias.view(shape)
    return x


class BatchedTransformer(nn.Module):
    """M causal transformers with stacked parameters; ``forward`` returns logits (M, B, T, V)."""

    def __init__(self, config: TransformerConfig, seeds: Sequence[int]):
        super().__init__()
        seeds = [int(s) for s in seeds]
        if not seeds:
            raise ValueError("seeds must name at least one model")
        self.config, self.seeds = config, seeds
        c, M = config, len(seeds)
        shapes: dict[str, tuple[tuple[int, ...], str]] = {
            "W_E": ((c.vocab, c.d_model), "embed"),
            "W_pos": ((c.n_ctx, c.d_model), "embed"),
        }
        for i in range(c.n_layers):
            shapes |= {
                f"{i}.W_Q": ((c.n_heads, c.d_model, c.d_head), "fan_in"),
                f"{i}.W_K": ((c.n_heads, c.d_model, c.d_head), "fan_in"),
                f"{i}.W_V": ((c.n_heads, c.d_model, c.d_head), "fan_in"),
                f"{i}.W_O": ((c.n_heads, c.d_head, c.d_model), "fan_in_heads"),
                f"{i}.W_in": ((c.d_model, c.d_mlp), "fan_in"),
                f"{i}.W_out": ((c.d_mlp, c.d_model), "fan_in"),
            }
            if c.qkv_bias:
                shapes |= {f"{i}.b_Q": ((c.n_heads, c.d_head), "zero"), f"{i}.b_K": ((c.n_heads, c.d_head), "zero"),
                           f"{i}.b_V": ((c.n_heads, c.d_head), "zero")}
            if c.bias:
                shapes |= {f"{i}.b_O": ((c.d_model,), "zero"), f"{i}.b_in": ((c.d_mlp,), "bias"),
                           f"{i}.b_out": ((c.d_model,), "bias")}
            if c.norm != "none":
                shapes |= {f"{i}.ln1_w": ((c.d_model,), "one"), f"{i}.ln1_b": ((c.d_model,), "zero"),
                           f"{i}.ln2_w": ((c.d_model,), "one"), f"{i}.ln2_b": ((c.d_model,), "zero")}
        if c.norm == "pre":
            shapes |= {"lnf_w": ((c.d_model,), "one"), "lnf_b": ((c.d_model,), "zero")}
        shapes["W_U"] = ((c.d_model, c.out_vocab), "fan_in")
        if c.bias:
            shapes["b_U"] = ((c.out_vocab,), "bias")

        self.params = nn.ParameterDict()
        for name, (shape, _kind) in shapes.items():
            self.params[name.replace(".", "_")] = nn.Parameter(torch.empty((M,) + shape))
        self._post_init_states: list[Tensor] = []
        for m, seed in enumerate(seeds):
            gen = torch.Generator().manual_seed(seed)
            if c.init == "lin":
                load_lin_weights(self, m, _lin_draw(c, gen))
            else:
                for name, (shape, kind) in shapes.items():
                    self.params[name.replace(".", "_")].data[m] = self._init(name, shape, kind, gen)
            self._post_init_states.append(gen.get_state())
        self._dropout_generators: list[torch.Generator] = []

    def _init(self, name: str, shape: tuple[int, ...], kind: str, gen: torch.Generator) -> Tensor:
        """Return one model's initial value of the parameter ``name`` of ``shape`` (scales: ``config.init``)."""
        c = self.config
        if kind == "one":
            return torch.ones(shape)
        if c.init == "torch" and kind != "zero":
            return self._torch_init(name, shape, gen)
        if kind in ("zero", "bias"):
            return torch.zeros(shape)
        if c.init == "nanda":
            return torch.randn(shape, generator=gen) / math.sqrt(c.vocab if name == "W_U" else c.d_model)
        if kind == "embed":
            return torch.randn(shape, generator=gen)
        fan_in = shape[-2] * (shape[0] if kind == "fan_in_heads" else 1)
        return torch.randn(shape, generator=gen) / math.sqrt(fan_in)

    def _torch_init(self, name: str, shape: tuple[int, ...], gen: torch.Generator) -> Tensor:
        """Return one model's initial ``name`` as torch's default initialisers draw it (see :class:`TransformerConfig`)."""
        c = self.config
        if name in ("W_E", "W_pos"):
            return torch.randn(shape, generator=gen)
        kind = name.split(".")[-1]
        if kind in ("W_Q", "W_K", "W_V"):
            bound = math.sqrt(6 / (c.d_model + 3 * c.d_model))               # xavier_uniform_ of in_proj (3D, D)
        else:
            fan_in = {"W_O": c.d_model, "W_in": c.d_model, "b_in": c.d_model, "W_out": c.d_mlp, "b_out": c.d_mlp,
                      "W_U": c.d_model, "b_U": c.d_model}[kind]
            bound = 1 / math.sqrt(fan_in)                                     # nn.Linear's defaults
        return (torch.rand(shape, generator=gen) * 2 - 1) * bound

    @property
    def n_models(self) -> int:
        return len(self.seeds)

    def init_generators(self) -> list[torch.Generator]:
        """Return one CPU generator per model in the state its seed's generator has right after the initial draw.

        A lone script that calls ``torch.manual_seed(seed)`` and then builds this model leaves the
        global generator in that state: its next draws (e.g. a shuffling ``DataLoader``) continue from it.
        """
        out = []
        for state in self._post_init_states:
            gen = torch.Generator()
            gen.set_state(state)
            out.append(gen)
        return out

    def p(self, name: str) -> Tensor | None:
        """Return the stacked parameter ``name`` (e.g. "0.W_Q"), or None if the config has none."""
        key = name.replace(".", "_")
        return self.params[key] if key in self.params else None

    def dropout_generators(self, device: torch.device) -> list[torch.Generator]:
        """Return one dropout generator per model on ``device``, seeded from its seed when first used there."""
        device = torch.device(device)
        if not self._dropout_generators or self._dropout_generators[0].device != device:
            self._dropout_generators = [torch.Generator(device).manual_seed(dropout_seed(s)) for s in self.seeds]
        return self._dropout_generators

    def dropout_state(self) -> dict:
        """Return the dropout generators' device and states (one uint8 tensor per model) for a checkpoint."""
        gens = self.dropout_generators(next(self.parameters()).device)
        return {"device": str(gens[0].device), "states": [g.get_state() for g in gens]}

    def load_dropout_state(self, state: dict) -> None:
        """Restore the dropout generators from :meth:`dropout_state`."""
        for g, saved in zip(self.dropout_generators(torch.device(state["device"])), state["states"], strict=True):
            g.set_state(saved)

    def _dropout(self, x: Tensor) -> Tensor:
        """Return x (M, ...) after dropout in training mode, model m's mask drawn from its own generator."""
        if not (self.training and self.config.dropout > 0):
            return x
        return x * self._dropout_scale(x.shape[1:], x.dtype, x.device)

    def _dropout_scale(self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> Tensor:
        """Return dropout multipliers (M, *shape): 0 with probability q, else 1 / (1 − q), model m's from its generator.

        q is ``config.dropout`` rounded to a multiple of 2⁻¹⁶ (0.1 → 6554 / 65536). Each entry reads 16 bits of the
        generator's 64-bit integer draws: a quarter of the draws ``torch.rand`` makes; the comparison is a clamp of the
        entry shifted by the threshold (float passes, not a boolean tensor).
        """
        n, M = math.prod(shape), self.n_models
        drop = min(round(self.config.dropout * 2 ** 16), 2 ** 16 - 1)          # q = drop / 2¹⁶ < 1
        bits = torch.empty(M, -(-n // 4), dtype=torch.int64, device=device)
        for m, gen in enumerate(self.dropout_generators(device)):
            bits[m].random_(-2 ** 63, None, generator=gen)                     # all 64 bits uniform
        exact = dtype if dtype in (torch.float32, torch.float64) else torch.float32   # holds every 16-bit integer
        entries = bits.view(torch.int16)[:, :n].to(exact)
        keep = entries.add_(2 ** 15 - drop + 1).clamp_(0, 1)                 # 1 where entry >= drop − 2¹⁵, else 0
        return keep.mul_(1 / (1 - drop / 2 ** 16)).to(dtype).view(M, *shape)

    def weight_matrices(self) -> Tensor:
        """Return every model's matrices (embeddings, attention, MLP, unembedding) flattened: (M, P)."""
        return torch.cat([v.detach().flatten(1) for k, v in self.params.items() if "W_" in k], dim=1)

    def _token_keys_values(self, tokens: Tensor) -> tuple[Tensor, Tensor]:
        """Return layer 0's keys and values (M, B, H, T, e), computed once per (token, position) and gathered.

        Without dropout on the embeddings the first attention layer's input depends only on the token and its
        position, so V·T table rows replace B·T per-example rows (the same numbers, far fewer FLOPs when B ≫ V).
        """
        M, B, T = tokens.shape
        table = self.p("W_E")[:, :, None, :] + self.p("W_pos")[:, None, :T, :]        # (M, V, T, D)
        if self.config.norm == "pre":
            table = _layer_norm(table, self.p("0.ln1_w"), self.p("0.ln1_b"))
        rows = (tokens * T + torch.arange(T, device=tokens.device)).reshape(M, B * T)
        out = []
        for name in ("K", "V"):
            W, b = self.p(f"0.W_{name}"), self.p(f"0.b_{name}")                              # (M, H, D, e), (M, H, e)
            H, e = W.shape[1], W.shape[3]
            kv = table.reshape(M, -1, table.shape[-1]) @ W.permute(0, 2, 1, 3).reshape(M, -1, H * e)   # (M, V·T, H·e)
            if b is not None:
                kv = kv + b.reshape(M, 1, H * e)
            kv = _rows(kv, rows)                                                             # (M, B·T, H·e)
            out.append(kv.view(M, B, T, H, e).transpose(2, 3))
        return out[0], out[1]

    def _project(self, i: int, name: str, x: Tensor) -> Tensor:
        """Return layer i's per-head queries, keys or values (``name`` "Q", "K", "V") (M, B, H, T, e) of x (M, B, T, D)."""
        W = self.p(f"{i}.W_{name}")                                                     # (M, H, D, e)
        M, H, D, e = W.shape
        out = _matmul(x, W.transpose(1, 2).reshape(M, D, H * e))                      # (M, B, T, H·e)
        out = out.view(*out.shape[:-1], H, e).transpose(-2, -3)                        # (M, B, H, T, e)
        b = self.p(f"{i}.b_{name}")
        return out if b is None else out + b[:, None, :, None, :]

    def _attention(self, i: int, x: Tensor, last: int | None = None,
                   kv: tuple[Tensor, Tensor] | None = None) -> Tensor:
        """Return the multi-head attention output (M, B, T', D) of layer i at the last T' = ``last`` positions.

        ``last`` defaults to all positions; ``kv`` supplies precomputed keys and values (M, B, H, T, e).
        """
        T = x.shape[-2]
        last = T if last is None else last
        q = self._project(i, "Q", x[:, :, T - last:])
        k, v = (self._project(i, "K", x), self._project(i, "V", x)) if kv is None else kv
        short = T <= SHORT_CONTEXT                     # products of 1-4 terms: broadcasts beat tiny batched matmuls
        if short:
            scores = (q.unsqueeze(-2) * k.unsqueeze(-3)).sum(-1)           # (M, B, H, T', T)
        else:
            scores = q @ k.transpose(-1, -2)
        scores = scores / math.sqrt(self.config.d_head)
        if self.config.causal:
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)[T - last:]
            scores = scores.masked_fill(mask, float("-inf"))
        pattern = scores.softmax(dim=-1)
        pattern = self._dropout(pattern)
        mixed = (pattern.unsqueeze(-1) * v.unsqueeze(-3)).sum(-2) if short else pattern @ v   # (M, B, H, T', e)
        W_O = self.p(f"{i}.W_O")                                                        # (M, H, e, D)
        heads = mixed.transpose(-2, -3)                                                # (M, B, T', H, e)
        out = _matmul(heads.reshape(*heads.shape[:-2], -1), W_O.reshape(W_O.shape[0], -1, W_O.shape[-1]))
        b_O = self.p(f"{i}.b_O")
        return out if b_O is None else out + b_O[:, None, None, :]

    def _mlp(self, i: int, x: Tensor) -> Tensor:
        """Return the ReLU MLP output (M, B, T, D) of layer i."""
        hidden = _matmul(x, self.p(f"{i}.W_in"))
        if self.p(f"{i}.b_in") is not None:
            hidden = hidden + self.p(f"{i}.b_in")[:, None, None, :]
        hidden = self._dropout(F.relu(hidden))
        out = _matmul(hidden, self.p(f"{i}.W_out"))
        return out if self.p(f"{i}.b_out") is None else out + self.p(f"{i}.b_out")[:, None, None, :]

    def _block(self, i: int, x: Tensor, last: int | None = None, kv: tuple[Tensor, Tensor] | None = None) -> Tensor:
        """Return the residual stream (M, B, T', D) after layer i at the last T' = ``last`` (default: all) positions."""
        drop = self._dropout
        ln = lambda y, j: _layer_norm(y, self.p(f"{i}.ln{j}_w"), self.p(f"{i}.ln{j}_b"))  # noqa: E731
        kept = x if last is None else x[:, :, x.shape[-2] - last:]
        if self.config.norm == "post":
            x = ln(kept + drop(self._attention(i, x, last, kv)), 1)
            return ln(x + drop(self._mlp(i, x)), 2)
        if self.config.norm == "pre":
            x = kept + drop(self._attention(i, ln(x, 1), last, kv))
            return x + drop(self._mlp(i, ln(x, 2)))
        x = kept + drop(self._attention(i, x, last, kv))
        return x + drop(self._mlp(i, x))

    def residual(self, tokens: Tensor, last: int | None = None) -> Tensor:
        """Return the final residual stream h (M, B, T', D) that the unembedding reads, at the last T' = ``last`` positions.

        ``last`` defaults to all positions. With ``last`` the final layer computes its queries, MLP and
        output only at those positions (what a loss on the last tokens reads), with the same values as
        the full pass.
        """
        if tokens.dim() == 2:
            tokens = tokens.expand(self.n_models, *tokens.shape)
        if tokens.shape[0] != self.n_models:
            raise ValueError(f"tokens must be (B, T) or (M={self.n_models}, B, T), got {tuple(tokens.shape)}")
        if tokens.shape[-1] > self.config.n_ctx:
            raise ValueError(f"sequence length {tokens.shape[-1]} exceeds n_ctx={self.config.n_ctx}")
        M, B, T = tokens.shape
        W_E = self.p("W_E")
        x = _rows(W_E, tokens.reshape(M, B * T))
        x = x.view(M, B, T, -1) + self.p("W_pos")[:, None, :T, :]
        if self.config.embedding_dropout:
            x = self._dropout(x)
        if last is not None and not 1 <= last <= T:
            raise ValueError(f"last must be between 1 and the sequence length {T}, got {last!r}")
        dropped = self.training and self.config.dropout > 0 and self.config.embedding_dropout   # layer 0's input
        tabulate = B > self.config.vocab and not dropped
        kv = self._token_keys_values(tokens) if tabulate else None
        for i in range(self.config.n_layers):
            x = self._block(i, x, last if i == self.config.n_layers - 1 else None, kv if i == 0 else None)
        if self.config.norm == "pre":
            x = _layer_norm(x, self.p("lnf_w"), self.p("lnf_b"))
        return x

    def unembed(self, h: Tensor) -> Tensor:
        """Return logits (M, ..., V) from residual-stream vectors h (M, ..., D)."""
        M, D = h.shape[0], h.shape[-1]
        logits = (h.reshape(M, -1, D) @ self.p("W_U")).view(*h.shape[:-1], -1)
        if self.p("b_U") is not None:
            logits = logits + self.p("b_U").view((M,) + (1,) * (h.dim() - 2) + (-1,))
        return logits

    def forward(self, tokens: Tensor, last: int | None = None) -> Tensor:
        """Return logits (M, B, T', V) at the last T' = ``last`` (default: all) positions for tokens (B, T) or (M, B, T)."""
        return self.unembed(self.residual(tokens, last))


def _lin_draw(c: TransformerConfig, gen: torch.Generator) -> dict[str, Tensor]:
    """Return one model's initial weights {name: tensor} in the eNTK authors' layout, drawn from ``gen`` in their order."""
    D, H, e, V = c.d_model, c.n_heads, c.d_head, c.out_vocab
    shapes = {"W_E": ((c.vocab, D), D), "W_pos": ((c.n_ctx, D), D)}
    for i in range(c.n_layers):
        shapes |= {f"{i}.W_Q": ((H, e, D), D), f"{i}.W_K": ((H, e, D), D), f"{i}.W_V": ((H, e, D), D),
                   f"{i}.W_O": ((D, D), D), f"{i}.W_in": ((D, c.d_mlp), c.d_mlp), f"{i}.W_out": ((c.d_mlp, D), D)}
    shapes["W_U"] = ((D, V), V)
    return {name: torch.randn(shape, generator=gen) / math.sqrt(scale) for name, (shape, scale) in shapes.items()}


def load_lin_weights(model: BatchedTransformer, m: int, state: dict[str, Tensor]) -> None:
    """Set model m's weights from the eNTK authors' layout: their ``state_dict`` names, or "W_E", "W_Q", "0.W_Q", ....

    Their attention matrices W_Q, W_K, W_V are (H, d_head, D) and act as W x; W_O is (D, H·d_head);
    the others match corekit's shapes. A missing or misshaped tensor raises ValueError naming it.
    """
    c = model.config
    if c.bias or c.norm != "none":
        raise ValueError(f'load_lin_weights needs a model with bias=False and norm="none", got bias={c.bias}, '
                         f"norm={c.norm!r}")
    aliases = {"embed.W_E": "W_E", "pos_embed.W_pos": "W_pos", "unembed.W_U": "W_U"}
    for w in ("W_Q", "W_K", "W_V", "W_O", "W_in", "W_out"):
        aliases[f"transformer_block.{'attn' if w[2] in 'QKVO' else 'mlp'}.{w}"] = aliases[w] = f"0.{w}"
    state = {aliases.get(k, k): v for k, v in state.items()}
    H, e, D = c.n_heads, c.d_head, c.d_model
    for name in model.params:
        key = re.sub(r"^(\d+)_", r"\1.", name)
        if key not in state:
            raise ValueError(f"state lacks the parameter {key!r}; it holds {sorted(state)}")
        value = state[key].detach().to(torch.float32).cpu()
        kind = key.split(".")[-1]
        if kind in ("W_Q", "W_K", "W_V"):
            value = value.transpose(-1, -2)                                   # (H, e, D) → (H, D, e)
        elif kind == "W_O":
            value = value.T.reshape(H, e, D)                                 # (D, H·e) → (H, e, D)
        target = model.params[name].data[m]
        if value.shape != target.shape:
            raise ValueError(f"parameter {key!r} has shape {tuple(state[key].shape)}, which does not fit the model's "
                             f"{tuple(target.shape)} (after the layout change)")
        target.copy_(value)


class BatchedQuadraticMLP(nn.Module):
    """M one-hidden-layer MLPs y = ((x W_1 / √d_in)²) W_2 / width, no biases, N(0, 1) init; stacked (M, ...).

    The eNTK paper's modular-arithmetic MLP (Lin 2025): x is one-hot a concatenated with one-hot b
    (d_in = 2p), ``W_1`` is (M, d_in, width) and ``W_2`` (M, width, d_out). Model m is initialised from
    ``torch.Generator().manual_seed(seeds[m])`` (W_1 first, then W_2).
    """

    def __init__(self, d_in: int, width: int, d_out: int, seeds: Sequence[int]):
        super().__init__()
        for name, value in (("d_in", d_in), ("width", width), ("d_out", d_out)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        seeds = [int(s) for s in seeds]
        if not seeds:
            raise ValueError("seeds must name at least one model")
        self.d_in, self.width, self.d_out, self.seeds = d_in, width, d_out, seeds
        self.params = nn.ParameterDict({
            "W_1": nn.Parameter(torch.empty(len(seeds), d_in, width)),
            "W_2": nn.Parameter(torch.empty(len(seeds), width, d_out)),
        })
        for m, seed in enumerate(seeds):
            gen = torch.Generator().manual_seed(seed)
            self.params["W_1"].data[m] = torch.randn(d_in, width, generator=gen)
            self.params["W_2"].data[m] = torch.randn(width, d_out, generator=gen)

    @property
    def n_models(self) -> int:
        return len(self.seeds)

    def p(self, name: str) -> Tensor:
        """Return the stacked parameter ``name`` ("W_1" (M, d_in, width) or "W_2" (M, width, d_out))."""
        return self.params[name]

    def hidden(self, x: Tensor) -> Tensor:
        """Return the hidden activations (M, B, width) = (x W_1 / √d_in)² for x (B, d_in) or (M, B, d_in)."""
        if x.dim() == 2:
            x = x.expand(self.n_models, *x.shape)
        if x.dim() != 3 or x.shape[0] != self.n_models or x.shape[-1] != self.d_in:
            raise ValueError(f"x must be (B, {self.d_in}) or ({self.n_models}, B, {self.d_in}), got {tuple(x.shape)}")
        return (x @ self.params["W_1"] / math.sqrt(self.d_in)).square()

    def forward(self, x: Tensor) -> Tensor:
        """Return outputs (M, B, d_out) for inputs x (B, d_in) shared by all models or (M, B, d_in)."""
        return self.hidden(x) @ self.params["W_2"] / self.width


def with_state(model, state: dict[str, Tensor] | None):
    """Return ``model`` itself when ``state`` is None, else a copy of it (same config, seeds, device, dtype) holding ``state``."""
    if state is None:
        return model
    weight = model.p("W_E")
    snapshot = type(model)(model.config, seeds=model.seeds).to(weight.device, weight.dtype)
    snapshot.load_state_dict(state)
    return snapshot.train(model.training)


def layer_groups(config) -> dict[str, list[str]]:
    """Return {layer: parameter names} of a :class:`~corekit.models.BatchedTransformer` with ``config``, every parameter once.

    Layers in reading order: "embed" (W_E, W_pos), then per block i "i.attn" (queries, keys, values, output and
    their biases, with the LayerNorm that belongs to the sublayer: before it in a pre-LN block, after it in a
    post-LN one) and "i.mlp", then "unembed" (W_U, b_U and a pre-LN model's final LayerNorm).
    """
    c = config
    groups = {"embed": ["W_E", "W_pos"]}
    for i in range(c.n_layers):
        attn = [f"{i}.W_{x}" for x in "QKV"] + ([f"{i}.b_{x}" for x in "QKV"] if c.qkv_bias else []) + [f"{i}.W_O"]
        mlp = [f"{i}.W_in", f"{i}.W_out"]
        if c.bias:
            attn.append(f"{i}.b_O")
            mlp += [f"{i}.b_in", f"{i}.b_out"]
        if c.norm != "none":
            attn += [f"{i}.ln1_w", f"{i}.ln1_b"]
            mlp += [f"{i}.ln2_w", f"{i}.ln2_b"]
        groups |= {f"{i}.attn": attn, f"{i}.mlp": mlp}
    groups["unembed"] = ["W_U"] + (["b_U"] if c.bias else []) + (["lnf_w", "lnf_b"] if c.norm == "pre" else [])
    return groups
