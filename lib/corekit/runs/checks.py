"""Each chapter's rules on its parameters beyond the parameters cell's, looked up by notebook name.

A chapter module (``corekit.chapters.NAME`` for notebook ``NN_NAME``) may define ``check_inputs(params)``: it takes the
notebook's parameter values as a dict (every parameter: profile, ``-p`` and defaults) and raises
:class:`corekit.inputs.ParameterError` with one line naming the parameter, its value and what is accepted (the
vocabulary is :mod:`corekit.inputs`). ``corekit run`` calls it before a kernel starts (:func:`chapter_check`); the
notebook calls it again in its first cell after the parameters, so that papermill, nbmake and Jupyter runs stop there
too.
"""
from __future__ import annotations

from typing import Callable

from corekit.inputs import (  # transitional: the chapters' functions below
    LANGUAGE_MODELS,
    MODEL_DTYPES,
    N_WORD_CLASSES,
    Need,
    distinct,
    fits,
    kernels,
    language_model,
    loadable_model,
    require,
    row_stochastic,
    seed_items,
    transformer_parameters,
)
from corekit.runs.notebooks import chapter_module

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


def chapter_check(notebook: str) -> Callable[[dict], None] | None:
    """Return the ``check_inputs`` of notebook ``NN_NAME``'s chapter module ``corekit.chapters.NAME``, None when it has
    none."""
    module = chapter_module(notebook)
    check = getattr(module, "check_inputs", None) if module is not None else None
    return check if check is not None else CHECKS.get(notebook)
