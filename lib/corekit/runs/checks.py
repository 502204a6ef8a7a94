"""Each chapter's rules on its parameters beyond the parameters cell's: values that must agree, and the run's size.

The parameters cell declares what each value accepts on its own (:mod:`corekit.runs.paramspec`). The rules here
tie values together (distinct seeds, a batch no larger than the training set, a snapshot interval inside the run,
a row-stochastic chain, heads that divide the model width, a split that leaves pairs on both sides), check what a
declaration cannot say (the items of a list whose default is empty, the dtypes and models the loader takes) and check
the run's size: the memory it needs at least, estimated from its parameters
(the largest tensors it must hold at once), against what the machine has (the CUDA device's memory once torch is
loaded and the run is on one, else this machine's physical memory), and every such tensor within the 2**63 - 1
elements that 64-bit indices reach.

One function per notebook takes the notebook's parameter values as a dict (every parameter: profile, ``-p`` and
defaults) and raises :class:`~corekit.runs.paramspec.ParameterError` with one line naming the parameter, its value
and what is accepted. ``corekit run`` calls it before a kernel starts (:data:`CHECKS`); the notebook calls it again
in its first cell after the parameters, so that papermill, nbmake and Jupyter runs stop there too. Nothing here
imports torch: ``corekit run`` refuses a request in a second.
"""
from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NoReturn

import numpy as np

from corekit.runs.paramspec import INT64_MAX, ParameterError, show

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


# --------------------------------------------------------------------------------------------
# One function per notebook


def markov_cores(params: dict) -> None:
    """Check chapter 01's parameters: distinct seeds, a batch within the training set, heads that divide d_model, two
    valid chains, the size (the training and test sets, each read by the ACE in one pass)."""
    nb = "01_markov_cores"
    distinct(nb, "seeds", params["seeds"], "distinct seeds (each model is compared with the others)")
    require(params["batch_size"] <= params["n_train"], nb, "batch_size", params["batch_size"],
            f"at most n_train = {params['n_train']} (a larger batch trains 0 steps)")
    m, seq_len, d_model, n_heads = len(params["seeds"]), params["seq_len"], params["d_model"], params["n_heads"]
    require(d_model % n_heads == 0, nb, "n_heads", n_heads,
            f"a divisor of d_model = {d_model} (each head reads d_model / n_heads of its dimensions)")
    for name in ("transition", "transition_deficient"):
        row_stochastic(nb, name, params[name])
    n_train, n_test = params["n_train"], params["n_test"]
    stream, test_stream = m * n_train * seq_len * d_model, m * n_test * seq_len * d_model
    scores = m * params["batch_size"] * n_heads * seq_len ** 2
    every, largest = max((n_test, "test"), (n_train, "training"))    # the ACE reads each set in one pass
    all_scores = m * every * n_heads * seq_len ** 2
    tokens = max(n_train, n_test) * seq_len
    fits(nb, params, [
        Need("the residual stream at every position of the training sequences, every model", 4 * stream, stream,
             "n_train"),
        Need("the residual stream at every position of the test sequences, every model", 4 * test_stream, test_stream,
             "n_test"),
        Need("the attention scores of a training batch", 4 * scores, scores, "seq_len"),
        Need(f"the attention scores of every {largest} sequence at once, every model", 4 * all_scores, all_scores,
             "seq_len" if seq_len ** 2 >= every else f"n_{'test' if largest == 'test' else 'train'}"),
        Need("the sampled sequences of both chains (int64)", 8 * 2 * (n_train + n_test) * seq_len, tokens,
             "n_test" if n_test >= n_train else "n_train"),
    ])


def grokking_cores(params: dict) -> None:
    """Check chapter 02's parameters: a fork inside the run, the size of the checkpoints kept for the analysis."""
    nb = "02_grokking_cores"
    distinct(nb, "seeds", params["seeds"], "distinct seeds (each trains one model per branch)")
    require(params["split"] != "numpy" or params["data_seed"] < 2**32, nb, "data_seed", params["data_seed"],
            "a seed below 2**32 with split numpy (numpy's RandomState takes 0 ... 2**32 - 1)")
    epochs = params["epochs"]
    require(0 < params["fork_epoch"] < epochs, nb, "fork_epoch", params["fork_epoch"],
            f"an epoch inside the run, 0 < fork_epoch < epochs = {epochs}")
    p, m = params["p"], len(params["seeds"])
    n_ctx = 3 if params["equals_token"] else 2
    weights = transformer_parameters(p + 1, n_ctx, params["d_model"], params["d_mlp"], params["n_layers"], p)
    dense = min(epochs, params["dense_until"])
    snapshots = (len(range(0, dense + 1, params["checkpoint_every"]))
                 + len(range(dense + params["checkpoint_every_after"], epochs + 1, params["checkpoint_every_after"])))
    logits = m * p * p * p
    fits(nb, params, [
        Need(f"the {snapshots:,} checkpoints kept for the analysis, every model", 4 * m * snapshots * weights,
             m * weights, "epochs"),
        Need("the logits of all p² pairs, every model", 4 * logits, logits, "p"),
    ])


def grokking_scaling_law(params: dict) -> None:
    """Check chapter 03's parameters: distinct seeds, ray_address only with Ray, the size of the largest shard's batch."""
    nb = "03_grokking_scaling_law"
    distinct(nb, "seeds", params["seeds"], "distinct seeds (the bootstrap resamples them)")
    distinct(nb, "p_values", params["p_values"], "distinct moduli (each is one point of the p sweep)")
    distinct(nb, "probe_p_values", params["probe_p_values"], "two distinct moduli")
    distinct(nb, "probe_seeds", params["probe_seeds"], "distinct seeds")
    require(set(params["probe_seeds"]) <= set(params["seeds"]), nb, "probe_seeds", params["probe_seeds"],
            f"seeds of the sweep (seeds = {params['seeds']}), so the probe repeats runs of the sweep at another rate")
    require(set(params["probe_p_values"]) <= set(params["p_values"]), nb, "probe_p_values", params["probe_p_values"],
            f"moduli of the p sweep (p_values = {params['p_values']}), so the probe compares the same points")
    require(not params.get("ray_address") or params["executor"] == "ray", nb, "ray_address", params.get("ray_address"),
            "an empty string unless executor is 'ray' (the local executor does not use Ray)")
    n_seeds, frac = len(params["seeds"]), params["train_frac"]
    cap = params["max_models_per_shard"] or None
    n_ctx = 3 if params["equals_token"] else 2
    shards = [(min(n_seeds, cap or n_seeds), int(frac * p * p), "p_values") for p in params["p_values"]]
    omega_pairs = int(frac * params["omega_p"] ** 2)
    batch = params["omega_batch_size"] if 0 < params["omega_batch_size"] < omega_pairs else omega_pairs
    models = len(params["weight_decays"]) * n_seeds
    shards.append((min(models, cap or models), batch, "omega_p"))
    models, batch, parameter = max(shards, key=lambda shard: shard[0] * shard[1])
    hidden = models * batch * n_ctx * params["d_mlp"]
    fits(nb, params, [Need("the MLP activations of a batch of the largest shard", 4 * hidden, hidden, parameter)])


def llm_agreement_axis(params: dict) -> None:
    """Check chapter 04's parameters: models without repeats, a dtype the loader takes, the size of the largest model's
    weights."""
    nb = "04_llm_agreement_axis"
    distinct(nb, "models", params["models"], "a list of models without repeats")
    require(params["dtype"] in MODEL_DTYPES, nb, "dtype", params["dtype"],
            f"one of {', '.join(MODEL_DTYPES)} (auto: bfloat16 on a CUDA device, float32 elsewhere)")
    needs = [need for name in params["models"] for need in language_model(name, "models", 2)]
    if needs:
        fits(nb, params, [max(needs, key=lambda need: need.bytes)])


def entk_mlp_modular(params: dict) -> None:
    """Check chapter 05's parameters: two cliffs and top_k within the p² inputs, training and held-out pairs both,
    snapshots that reach the last epoch, the size of the p² x p² kernels."""
    nb = "05_entk_mlp_modular"
    p, top_k = params["p"], params["top_k"]
    n_cliff = 4 * (p // 2)
    require(2 * n_cliff + 2 <= p * p, nb, "p", p, "a prime of at least 5 (two cliffs of 4⌊p/2⌋ eigenvectors among p² inputs)")
    require(top_k <= p * p, nb, "top_k", top_k, f"at most p² = {p * p} (the number of inputs)")
    n_train = int(round(params["train_frac"] * p * p))                 # modular_addition's torch split
    require(0 < n_train < p * p, nb, "train_frac", params["train_frac"],
            f"a fraction that leaves at least one training and one held-out pair of the p² = {p * p} pairs "
            f"(round(train_frac · p²) = {n_train} training pairs)")
    epochs, eval_every = params["epochs"], params["eval_every"]
    require(epochs % eval_every == 0, nb, "eval_every", eval_every,
            f"a divisor of epochs = {epochs} (the parameters are saved every eval_every epochs, and the kernels are "
            "computed at the last epoch too)")
    snapshots = epochs // eval_every + 1
    weights = 3 * p * params["width"]
    fits(nb, params, [
        kernels(3, p * p, "p", "the kernels of both layers and their sum"),
        Need(f"the {snapshots:,} parameter snapshots", 4 * snapshots * weights, weights, "epochs"),
    ])


def entk_transformer_modular(params: dict) -> None:
    """Check chapter 06's parameters: distinct seeds (extra_seeds integers >= 0, its default [] declaring no item
    type), snapshots that fit the run and the log, the kernels' size."""
    nb = "06_entk_transformer_modular"
    seeds, extra = params["seeds"], params["extra_seeds"]
    seed_items(nb, "extra_seeds", extra, "a list of seeds, integers >= 0 (each trains one more model)")
    require(len(set(seeds + extra)) == len(seeds + extra), nb, "extra_seeds", extra, f"seeds not already in seeds = {seeds}")
    distinct(nb, "seeds", seeds)
    epochs, every, log_every = params["epochs"], params["dynamics_every_epochs"], params["log_every_epochs"]
    require(epochs > every, nb, "epochs", epochs,
            f"more than dynamics_every_epochs = {every} (the dynamics need two snapshots)")
    require(every % log_every == 0, nb, "dynamics_every_epochs", every, f"a multiple of log_every_epochs = {log_every}")
    p, models = params["p"], len(seeds) + len(extra)
    weights = transformer_parameters(p + 1, 3, params["d_model"], params["d_mlp"], 1, p)
    snapshots = epochs // log_every + 1
    fits(nb, params, [
        kernels(4, p * p, "p", "the attention kernels W_Q, W_K, W_V, W_O of a model"),
        Need(f"the {snapshots:,} parameter snapshots, every model", 4 * models * snapshots * weights, models * weights,
             "epochs"),
    ])


def entk_gemma_grammar(params: dict) -> None:
    """Check chapter 07's parameters: top_k below the Lanczos ceiling, dense tokens within a context, a model the loader
    can load here, the size of the Lanczos basis, the dense reference and the model."""
    nb = "07_entk_gemma_grammar"
    top_k, vectors = params["top_k"], params["lanczos_vectors"]
    require(top_k < vectors, nb, "top_k", top_k, f"fewer than lanczos_vectors = {vectors}")
    require(params["dense_tokens"] <= params["context_tokens"], nb, "dense_tokens", params["dense_tokens"],
            f"at most context_tokens = {params['context_tokens']}")
    loadable_model(nb, "model", params["model"])
    if params["model"] not in LANGUAGE_MODELS:
        return
    d = LANGUAGE_MODELS[params["model"]][1]
    n = N_WORD_CLASSES * params["n_per_class"] * d
    fits(nb, params, [
        Need(f"the Lanczos basis of one layer ({vectors} vectors of {n:,} numbers in float64)", 8 * vectors * n,
             vectors * n, "lanczos_vectors"),
        kernels(1, params["dense_examples"] * d, "dense_examples", "the dense reference"),
        *language_model(params["model"], "model", 4),
    ])


def two_lenses(params: dict) -> None:
    """Check chapter 08's parameters: distinct seeds, heads that divide d_model, snapshots that fit the run and the log,
    top_k within the inputs, even prompt counts, enough Lanczos vectors, the size of the kernels and the model."""
    nb = "08_two_lenses"
    distinct(nb, "seeds", params["seeds"])
    distinct(nb, "grok_seeds", params["grok_seeds"])
    require(params["grok_d_model"] % 4 == 0, nb, "grok_d_model", params["grok_d_model"], "a multiple of the 4 heads")
    epochs, every, log_every = params["epochs"], params["dynamics_every_epochs"], params["log_every_epochs"]
    require(epochs > every, nb, "epochs", epochs,
            f"more than dynamics_every_epochs = {every} (the dynamics need two snapshots)")
    require(every % log_every == 0, nb, "dynamics_every_epochs", every, f"a multiple of log_every_epochs = {log_every}")
    p = params["p"]
    require(params["top_k"] < p * p, nb, "top_k", params["top_k"], f"fewer than the p² = {p * p} inputs")
    for name in ("lm_n_train", "lm_n_test"):
        require(params[name] % 2 == 0, nb, name, params[name], "an even number (half singular, half plural prompts)")
    lm_top_k = params["lm_top_k"]
    require(params["lm_lanczos_vectors"] >= lm_top_k + 8, nb, "lm_lanczos_vectors", params["lm_lanczos_vectors"],
            f"at least lm_top_k + 8 = {lm_top_k + 8}")
    grok_p = params["grok_p"]
    fits(nb, params, [
        kernels(4, p * p, "p", "the attention kernels W_Q, W_K, W_V, W_O of chapter 06's model"),
        kernels(1, grok_p * grok_p, "grok_p", "a kernel of chapter 02's model"),
        *language_model(params["language_model"], "language_model", 4),
    ])


def merging_cores(params: dict) -> None:
    """Check chapter 09's parameters: distinct seeds, a fork on a logged epoch inside the run, the size of the paths."""
    nb = "09_merging_cores"
    distinct(nb, "seeds", params["seeds"])
    epochs, spawn, log_every = params["epochs"], params["spawn_epoch"], params["log_every_epochs"]
    require(spawn % log_every == 0, nb, "spawn_epoch", spawn, f"a multiple of log_every_epochs = {log_every}")
    require(spawn < epochs - 1, nb, "spawn_epoch", spawn, f"an epoch before the last (epochs = {epochs})")
    p, models = params["p"], len(params["seeds"])
    weights = transformer_parameters(p + 1, 3, params["d_model"], params["d_mlp"], 1, p)
    snapshots = epochs // spawn + 2
    fits(nb, params, [
        Need(f"the {snapshots:,} parameter snapshots, every model", 4 * models * snapshots * weights, models * weights,
             "epochs"),
        Need(f"the {params['n_alphas']} models of one interpolation path", 4 * params["n_alphas"] * weights,
             params["n_alphas"] * weights, "n_alphas"),
    ])


#: The check of each notebook, by name.
CHECKS: dict[str, Callable[[dict], None]] = {
    "01_markov_cores": markov_cores,
    "02_grokking_cores": grokking_cores,
    "03_grokking_scaling_law": grokking_scaling_law,
    "04_llm_agreement_axis": llm_agreement_axis,
    "05_entk_mlp_modular": entk_mlp_modular,
    "06_entk_transformer_modular": entk_transformer_modular,
    "07_entk_gemma_grammar": entk_gemma_grammar,
    "08_two_lenses": two_lenses,
    "09_merging_cores": merging_cores,
}
