"""The vocabulary of a chapter's input checks: refusals that name the parameter, and the memory a run needs.

The parameters cell declares what each value accepts on its own (:mod:`corekit.runs.paramspec`). A chapter module's
``check_inputs(params)`` adds the rules that tie values together (distinct seeds, a batch no larger than the training
set, a snapshot interval inside the run, a row-stochastic chain, heads that divide the model width), checks what a
declaration cannot say (the items of a list whose default is empty, the dtypes and models the loader takes) and checks
the run's size: the memory it needs at least, estimated from its parameters (the largest tensors it must hold at
once), against what the machine has (the CUDA device's memory once torch is loaded and the run is on one, else this
machine's physical memory), and every such tensor within the 2**63 - 1 elements that 64-bit indices reach. Each
refusal is a :class:`ParameterError` with one line naming the parameter, its value and what is accepted. Nothing here
imports torch.
"""
from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

#: The largest element count 64-bit indices reach.
INT64_MAX = 2**63 - 1


class ParameterError(ValueError):
    """A parameter value a notebook refuses: shown in Jupyter, papermill and nbmake as its one line, no traceback."""

    def _render_traceback_(self) -> list[str]:
        """Return the lines IPython shows for this error instead of a traceback."""
        return [f"ParameterError: {self}"]


def show(value: Any) -> str:
    """Return a value as the user would type it (YAML-like, strings quoted)."""
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(show(v) for v in value) + "]"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


#: The offline language models: (parameters, d_model, layers), for the size of the runs that load them.
LANGUAGE_MODELS = {"gemma-3-270m": (268_098_176, 640, 18), "smollm2-135m": (134_515_008, 576, 30)}
#: The dtypes :func:`corekit.lm.load` takes by name ("auto": bfloat16 on a CUDA device, float32 elsewhere).
MODEL_DTYPES = ("auto", "float32", "bfloat16", "float16")
#: The Hugging Face hub the loader consults for a model id that is not offline (``$HF_ENDPOINT`` overrides it).
HUB = "https://huggingface.co"
#: Word classes of chapter 07 (:data:`corekit.tasks.grammar.UPOS_CLASSES`): contexts are drawn per class.
N_WORD_CLASSES = 8
UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB")


def refuse(notebook: str, name: str, value: Any, accepted: str, why: str | None = None) -> NoReturn:
    """Raise the ParameterError that names parameter ``name`` of ``notebook``, its value and what is accepted."""
    raise ParameterError(f"{notebook}: parameter {name!r}: expected {accepted}, got {show(value)}"
                         + (f" ({why})" if why else ""))


def require(ok: bool, notebook: str, name: str, value: Any, accepted: str) -> None:
    """Refuse ``value`` of parameter ``name`` unless ``ok``."""
    if not ok:
        refuse(notebook, name, value, accepted)


def heads_divide(notebook: str, params: dict, heads: str = "n_heads", width: str = "d_model") -> None:
    """Refuse a head count that does not divide the model width (each head reads width / heads of its dimensions)."""
    require(params[width] % params[heads] == 0, notebook, heads, params[heads],
            f"a divisor of {width} = {params[width]} (each head reads {width} / {heads} of its dimensions)")


def distinct(notebook: str, name: str, values: list, accepted: str = "distinct seeds") -> None:
    """Refuse a list with a repeated item."""
    require(len(set(values)) == len(values), notebook, name, values, accepted)


def seed_items(notebook: str, name: str, values: list, accepted: str) -> None:
    """Refuse a list of seeds holding an item that is not an integer >= 0 (a bool, a string, a list, a float)."""
    bad = next((v for v in values if isinstance(v, bool) or not isinstance(v, int) or v < 0), None)
    if bad is not None:
        refuse(notebook, name, values, accepted, f"{show(bad)} is not an integer >= 0")


def hub_reachable(timeout: float = 3.0) -> bool:
    """Return whether a TCP connection to the Hugging Face hub opens within ``timeout`` seconds (as the loader asks,
    :func:`corekit.lm.loading.hub_reachable`, without importing torch)."""
    from urllib.parse import urlparse

    url = urlparse(os.environ.get("HF_ENDPOINT") or HUB)
    try:
        socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)), timeout).close()
        return True
    except (OSError, ValueError):
        return False


def in_hub_cache(model_id: str) -> bool:
    """Return whether the local Hugging Face cache holds a snapshot of ``model_id`` (what the loader can use offline)."""
    home = os.environ.get("HF_HOME") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "huggingface"
    cache = Path(os.environ.get("HF_HUB_CACHE") or Path(home) / "hub")
    snapshots = cache / f"models--{model_id.replace('/', '--')}" / "snapshots"
    try:
        return snapshots.is_dir() and any(snapshots.iterdir())
    except (OSError, ValueError):
        return False


def loadable_model(notebook: str, name: str, value: str) -> None:
    """Refuse a model name :func:`corekit.lm.load` cannot load here, before a kernel tries (transformers not imported):
    it takes an offline model, a folder holding a saved model, a .gguf file, or a Hugging Face id while the hub is
    reachable (and ``HF_HUB_OFFLINE`` unset) or its local cache holds the model."""
    offline = ", ".join(LANGUAGE_MODELS)
    accepted = (f"one of the offline models ({offline}), a folder holding a saved model, a .gguf file, or a Hugging "
                "Face id that the hub or its local cache provides")
    if value in LANGUAGE_MODELS:
        return
    if not value.strip():
        refuse(notebook, name, value, accepted, "an empty name")
    try:
        path = Path(value).expanduser()
        is_file, is_dir = path.is_file(), path.is_dir()
    except (OSError, ValueError, RuntimeError):
        is_file = is_dir = False
    if value.endswith(".gguf"):
        if not is_file:
            refuse(notebook, name, value, accepted, "no such .gguf file")
        return
    if is_dir:
        return
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        refuse(notebook, name, value, accepted, "not an offline model nor a folder, and HF_HUB_OFFLINE is set, so the "
                                                "Hugging Face hub is not consulted")
    if in_hub_cache(value) or hub_reachable():
        return
    refuse(notebook, name, value, accepted, f"not an offline model nor a folder, the Hugging Face hub "
                                            f"({os.environ.get('HF_ENDPOINT') or HUB}) is not reachable from this "
                                            "machine and its local cache holds no copy")


def row_stochastic(notebook: str, name: str, matrix: Any, tol: float = 1e-6) -> None:
    """Refuse unless ``matrix`` is a K x K transition matrix (K >= 2): entries >= 0, rows summing to 1 (within
    ``tol``), one stationary distribution (as :func:`corekit.tasks.markov.validate_transition` asks)."""
    accepted = "a row-stochastic K x K matrix, K >= 2 (entries >= 0, every row sums to 1) with one stationary distribution"
    try:
        T = np.asarray(matrix, dtype=np.float64)
    except (TypeError, ValueError):
        refuse(notebook, name, matrix, accepted, "not a square list of lists of numbers")
    if T.ndim != 2 or T.shape[0] != T.shape[1] or T.shape[0] < 2:
        refuse(notebook, name, matrix, accepted, f"shape {T.shape}")
    if not np.all(np.isfinite(T)) or np.any(T < 0):
        refuse(notebook, name, matrix, accepted, "an entry is negative or not finite")
    sums = T.sum(axis=1)
    bad = np.flatnonzero(np.abs(sums - 1.0) > tol)
    if bad.size:
        refuse(notebook, name, matrix, accepted, f"rows {bad.tolist()} sum to {sums[bad].round(6).tolist()}")
    if np.sum(np.abs(np.linalg.eigvals(T) - 1.0) < 1e-8) > 1:
        refuse(notebook, name, matrix, accepted, "several closed classes, so more than one stationary distribution")


@dataclass(frozen=True)
class Need:
    """A tensor (or set of tensors) a run must hold at once: what it is, its bytes, its largest tensor's element count,
    and the parameter that sets its size."""

    what: str
    bytes: int
    elements: int
    parameter: str


def size_text(n: float) -> str:
    """Return a number of bytes in binary units ("8.0 GiB")."""
    unit = 0
    while n >= 1024 and unit < len(UNITS) - 1:
        n, unit = n / 1024, unit + 1
    return f"{n:.0f} {UNITS[unit]}" if unit == 0 else f"{n:.1f} {UNITS[unit]}"


def memory_limit(device: Any) -> tuple[int, str] | None:
    """Return (bytes, where) a run on ``device`` must fit in: the CUDA device's memory when torch is loaded and the run
    is on one, else this machine's physical memory; None where neither is known."""
    torch = sys.modules.get("torch")
    device = str(device)
    if torch is not None and device.startswith(("cuda", "auto")) and torch.cuda.is_available():
        index = int(device.split(":")[1]) if device.startswith("cuda:") else torch.cuda.current_device()
        name = torch.cuda.get_device_name(index)
        return torch.cuda.get_device_properties(index).total_memory, f"the memory of the device ({name})"
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "this machine's memory"
    except (AttributeError, ValueError, OSError):    # no sysconf (Windows): the run finds out itself
        return None


def fits(notebook: str, params: dict, needs: list[Need]) -> None:
    """Refuse when a tensor of ``needs`` has more elements than 64-bit indices reach, or they do not fit in memory
    together, naming the parameter behind the offending (else the largest) need and the estimate."""
    total = sum(need.bytes for need in needs)
    limit = memory_limit(params.get("device", "cpu"))
    beyond = [need for need in needs if need.elements > INT64_MAX]
    if not beyond and (limit is None or total <= limit[0]):
        return
    worst = beyond[0] if beyond else max(needs, key=lambda need: need.bytes)
    estimate = f"the run needs at least {size_text(total)}: " + ", ".join(f"{need.what} {size_text(need.bytes)}"
                                                                        for need in needs)
    if beyond:
        estimate += f"; a tensor of {worst.elements:.3g} elements is beyond 2**63-1, the most 64-bit indices reach"
    where = f"{limit[1]} ({size_text(limit[0])})" if limit else "memory"
    refuse(notebook, worst.parameter, params[worst.parameter], f"a size whose run fits in {where}", estimate)


def transformer_parameters(vocab: int, n_ctx: int, d_model: int, d_mlp: int, n_layers: int, d_out: int) -> int:
    """Return the number of weights of a transformer (embeddings, attention, MLP, unembedding; no biases or norms)."""
    return vocab * d_model + n_ctx * d_model + n_layers * (4 * d_model ** 2 + 2 * d_model * d_mlp) + d_model * d_out


def kernels(count: int, n: int, parameter: str, what: str) -> Need:
    """Return the need of ``count`` dense n x n float64 kernels."""
    return Need(f"{what} ({count} × {n:,}² in float64)", 8 * count * n * n, n * n, parameter)


def language_model(name: str, parameter: str, bytes_per_weight: int) -> list[Need]:
    """Return the need of an offline language model's weights (none for a name the loader will refuse itself)."""
    if name not in LANGUAGE_MODELS:
        return []
    n = LANGUAGE_MODELS[name][0]
    return [Need(f"the weights of {name}", bytes_per_weight * n, n, parameter)]
