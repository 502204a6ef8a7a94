# ---
# jupyter:
#   corekit:
#     headline_caption: How much of the ACE core of the final residual stream each parameter's
#       leading eNTK eigenvectors hold, against random subspaces.
#     headline_figure: per_parameter_alignment
#     own_hypotheses: true
#   jupytext:
#     notebook_metadata_filter: corekit
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.7
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # One network, two lenses: ACE cores and eNTK eigenspaces
#
# **Question.** Both methods of this book describe a trained network by a low-dimensional subspace.
# ACE ({cite}`schiffman2026cores`) takes the activations at a cut and keeps the directions that are both
# large and read by the rest of the network (the core: covariance × observability). The eNTK paper
# ({cite}`lin2025entk`) takes each parameter's kernel over the inputs and keeps its leading
# eigenvectors. On the modular-addition transformer of chapter 06
# ({doc}`06_entk_transformer_modular`) both are said to find the same Fourier structure. Do the two lenses
# see the same subspace, at the same time in training, and which of the two subspaces is causal for the
# model's answers? And on a language model, where ACE finds a 1-D axis of number agreement in
# Gemma-3-270M (chapter 04, {doc}`04_llm_agreement_axis`) and the eNTK paper reads word classes off
# per-layer kernels (chapter 07, {doc}`07_entk_gemma_grammar`): does the eNTK at the axis's layer see
# number at all?
#
# **Method.** The model is chapter 06's: the eNTK authors' 1-layer transformer on $a + b \bmod p$, trained
# with their settings (split, initial draw, batch order, AdamW; see chapter 06): seeds 2 and 3 by default, more
# where a profile adds them, for their 4000 epochs in the paper profile and 3000 by default (the run's
# parameters cell lists its seeds and epochs). On all $p^2$ inputs:
#
# - **ACE**: the core of the final residual stream at the last position under the centred logits
#   (`corekit.ace.extract`), of rank $r$ = its energy rank (99 % of $\sigma^2$); as functions over the
#   inputs, its $N \times r$ coordinates $Q^\top(h - \mu)$.
# - **eNTK**: every parameter's kernel flattened by the class-pair mean (chapter 06's kernels) and its top
#   $r + 1$ eigenvectors, $N \times (r+1)$: one more than the core's rank, because an uncentred kernel
#   spends one eigenvector on the mean.
# - **One score** for both: the book's alignment $\|Q_a^\top Q_b\|_F^2 / \min(d_a, d_b)$ of the two spans
#   (`corekit.subspaces.alignments`, 1 when one holds the other), with three nulls: random subspaces of the
#   same sizes, the same computation at initialisation, and PCA of the same activations.
#
# The same comparison then runs layer by layer on chapter 02's two-layer models
# ({doc}`02_grokking_cores`: the ACE authors' architecture), whose eNTK is taken per layer.
#
# One relation explains where to look (`corekit.chapters.two_lenses`, pinned by `tests/test_chapter_two_lenses.py`): for logits
# $hW_U$ the eNTK of $W_U$ is $h(x)\cdot h(x')/C$, the Gram matrix of the very residual stream that ACE
# cuts, and ACE weights that stream by the readout. The claims below were written before the first
# published run.

# %% tags=["parameters"]
p: int = 29  # range: [3, inf); a prime
d_model: int = 64  # range: [1, inf)
n_heads: int = 4  # range: [1, inf)
d_mlp: int = 256  # range: [1, inf)
train_frac: float = 0.5  # range: (0, 1)
lr: float = 3e-4  # range: (0, inf)
weight_decay: float = 1.0  # range: [0, inf)
betas: list[float] = [0.9, 0.999]  # length: 2; range: [0, 1)
batch_size: int = 64  # range: [1, inf)
epochs: int = 3000  # range: [1, inf); the eNTK authors train 4000 (the paper profile); both seeds here grok before 2000
seeds: list[int] = [2, 3]  # length: 1 or more; range: [0, inf); chapter 06's models
data_seed: int = 0  # range: [0, inf)
split: str = "python"  # one of: python, torch; the eNTK authors' split, or corekit's seeded randperm
init: str = "lin"  # one of: lin, nanda, fan_in; the eNTK authors' draw, or corekit's per-seed draws
batch_order: str = "loader"  # one of: loader, seeded; the authors' DataLoader order, or corekit's (seed, epoch) order
log_every_epochs: int = 20  # range: [1, inf); the authors' logging interval (their batch order depends on it)
dynamics_every_epochs: int = 100  # range: [1, inf); epochs between the snapshots both lenses are computed on
energy_threshold: float = 0.99  # range: (0, 1]; share of σ² the ACE core keeps
top_k: int = 40  # range: [1, inf); eigenvectors per kernel
null_samples: int = 200  # range: [1, inf); random subspaces per null
grok_p: int = 31  # range: [3, inf); a prime; chapter 02's models (the ACE authors' block at 02's cpu-profile size, below)
grok_d_model: int = 64  # range: [4, inf); a multiple of 4 (four heads)
grok_d_mlp: int = 256  # range: [1, inf)
grok_lr: float = 3e-3  # range: (0, inf)
grok_weight_decay: float = 1.0  # range: [0, inf)
grok_epochs: int = 2000  # range: [1, inf); the paper profile trains 4000 (02's cpu-profile models grok by epoch ~2,400)
grok_seeds: list[int] = [0]  # length: 1 or more; range: [0, inf); 02's cpu profile trains 0, 1, 2
grok_data_seed: int = 42  # range: [0, inf); the ACE authors' RandomState(42) split
language_model: str = "gemma-3-270m"  # one of: gemma-3-270m, smollm2-135m; an offline model of chapter 04
lm_n_train: int = 200  # range: [2, inf); even; chapter 04's agreement prompts (seeded split) that fit ACE's axis
lm_n_test: int = 200  # range: [2, inf); even; held-out prompts that score it
lm_top_k: int = 8  # range: [1, inf); eNTK eigenvectors at the axis's layer
lm_lanczos_vectors: int = 96  # range: [2, inf); at most this many Krylov vectors (blocks of 8)
lm_batch_size: int = 64  # range: [1, inf); prompts per forward pass
n_boot: int = 2000  # range: [1, inf); bootstrap resamples of the held-out AUROC's interval
device: str = "auto"
cpu_threads: int = 0  # range: [0, inf); CPU threads (0: as many as cores are free when the run starts)
output_dir: str = ""  # path; empty: the claims table and figures stay in the executed notebook only; else NAME.metrics.json and figures/NAME/ go there

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
from IPython.display import display

from corekit import entk, fourier, recipes
from corekit import lm as language_models
from corekit.chapters import two_lenses
from corekit.curves import first_step_reaching, settling_epoch, steepest_rise
from corekit.models import with_state
from corekit.plots import panel_grid
from corekit.runs.session import setup
from corekit.tables import table
from corekit.tasks import agreement

claims, figures, dev = setup("08_two_lenses", globals())

# %% [markdown]
# ## The model
#
# Chapter 06's training, unchanged (`corekit.recipes.train_authors`): every model
# is evaluated where the authors log (every `log_every_epochs` epochs) and its parameters are saved every
# `dynamics_every_epochs` epochs (and at initialisation).

# %%
t0 = time.perf_counter()
run = recipes.train_authors(
    p, seeds, epochs, d_model=d_model, n_heads=n_heads, d_mlp=d_mlp, train_frac=train_frac, lr=lr,
    weight_decay=weight_decay, betas=betas, batch_size=batch_size, data_seed=data_seed, split=split, init=init,
    batch_order=batch_order, log_every_epochs=log_every_epochs, snapshot_every_epochs=dynamics_every_epochs, device=dev)
train_seconds = time.perf_counter() - t0
task, tokens, model, history, spe = run.task, run.tokens, run.model, run.history, run.steps_per_epoch
log_epochs = run.log_epochs
dyn_epochs = [e for e in log_epochs if e % dynamics_every_epochs == 0]     # the saved snapshots
test_acc = history.curve("test_acc").numpy()                             # (evaluations, models)
logged_test, logged_train = run.after_epochs("test_acc", log_epochs), run.after_epochs("train_acc", log_epochs)
grok_epoch = [first_step_reaching(log_epochs, logged_test[:, i], 0.99) for i in range(len(seeds))]
print(f"{train_seconds:.0f} s of training for all seeds")
table([{"seed": seed, "final test accuracy": test_acc[-1, i], "test ≥ 0.99 from epoch": None if g is None else round(g)}
       for i, (seed, g) in enumerate(zip(seeds, grok_epoch))],
      caption="Each model after training: its held-out accuracy and the first logged epoch of test accuracy ≥ 0.99",
      digits=4)

# %% [markdown]
# ## Both lenses on the final model
#
# For every model: the residual stream $h$ (M, N, D) at the last position, its ACE core and energy rank
# (`corekit.chapters.two_lenses.final_residual_core`), and every parameter's eNTK with its top `top_k` eigenvectors.
# {numref}`fig-08-per-parameter` shows, one dot per seed, how much of the ACE core each parameter's leading
# eNTK eigenvectors hold, against random subspaces (99th percentile) and the unembedding at initialisation.

# %%
tokens_dev = tokens.to(dev)
model.eval()
t0 = time.perf_counter()
h, core, ranks = two_lenses.final_residual_core(model, tokens_dev, energy_threshold)
ace_seconds = time.perf_counter() - t0
t0 = time.perf_counter()
eigs = [entk.parameter_eigenpairs(model, i, tokens_dev, top_k) for i in range(len(seeds))]
entk_seconds = time.perf_counter() - t0
h_init, core_init, ranks_init = two_lenses.final_residual_core(model, tokens_dev, energy_threshold, history.snapshots[0])
gram_gap = two_lenses.gram_gap(h, eigs, model.p("W_U").shape[-1])
W_E = model.p("W_E")[:, :p].detach().cpu()
keys = [fourier.key_frequencies(W) for W in W_E]
print(f"ACE on all models: {ace_seconds:.2f} s; every parameter's eNTK and eigenvectors: {entk_seconds:.1f} s")
print(f"top eigenvalue of W_U's eNTK vs that of the residual Gram h·h'/C: relative difference {gram_gap:.1e}")
table([{"seed": seed, "ACE energy rank": int(ranks[i]), "at initialisation": int(ranks_init[i]), "key frequencies": keys[i]}
       for i, seed in enumerate(seeds)], caption="Each model's ACE energy rank, trained and at initialisation, and its "
                                                 "key frequencies")

# %%
PARAMS = list(eigs[0])
lenses, init_readout = two_lenses.lenses_per_parameter(
    model, tokens_dev, h, core, ranks, eigs, history.snapshots[0], (h_init, core_init, ranks_init), null_samples,
    [fourier.fourier_basis(p, "sum", k) for k in keys])
align, pca, init_all = [c.align for c in lenses], [c.pca for c in lenses], [c.init_all for c in lenses]
init_align, null99, null99_init = [c.init("W_U") for c in lenses], [c.null99 for c in lenses], [c.null99_init for c in lenses]
fourier_core, fourier_init = [c.features for c in lenses], [c.features_init for c in lenses]
display(table([{"parameter": n.removeprefix("0."), **{f"seed {s} (r = {int(ranks[i])})": align[i][n]
                                                      for i, s in enumerate(seeds)}} for n in PARAMS],
              caption="Alignment of the ACE core (rank r) with each parameter's top r + 1 eNTK eigenvectors, per seed"))
table([{"seed": seeds[i], "closest kernel": max(align[i], key=align[i].get).removeprefix("0."),
        "PCA of h vs W_U": pca[i], "W_U at initialisation": init_align[i], "random, 99th percentile": null99[i],
        "core vs a + b features": fourier_core[i], "at initialisation": fourier_init[i]} for i in range(len(seeds))],
      caption="Per seed: the kernel closest to the ACE core, the nulls of the W_U alignment (PCA of the same "
              "activations, the same pair at initialisation, random subspaces), and the core's alignment with the "
              "a + b features at the keys, trained and at initialisation")

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Alignment of the ACE core of the final residual stream with the leading eigenvectors of each parameter's eNTK, one dot per seed. Look for the one parameter whose kernel holds the core, against the grey band of random subspaces (99th percentile) and the hollow markers of the same pair at initialisation.", "name": "fig-08-per-parameter"}}
fig, ax = plt.subplots(figsize=(7.5, 3.4), layout="constrained")
x = np.arange(len(PARAMS))
spread = np.linspace(-0.25, 0.25, len(seeds)) if len(seeds) > 1 else np.zeros(1)
for i in range(len(seeds)):
    ax.scatter(x + spread[i], [align[i][n] for n in PARAMS], s=14, color="#0072B2", label="trained" if i == 0 else None)
ax.scatter(x[PARAMS.index("W_U")] + spread, init_align, s=14, facecolor="white", edgecolor="k",
           label="W_U at initialisation")
ax.axhspan(0, max(null99), color="0.85", label="random subspaces, 99th percentile")
ax.set(xticks=x, ylim=(0, 1.05), ylabel="alignment with the ACE core",
       title=f"{len(seeds)} seeds; ACE ranks {sorted(int(r) for r in ranks)}")
ax.set_xticklabels([n.removeprefix("0.") for n in PARAMS])
ax.set_xlabel("parameter")
ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
figures.save(fig, "per_parameter_alignment")
plt.show()

# %% [markdown]
# ## The same question on chapter 02's models, layer by layer
#
# Chapter 02's grokking models ({doc}`02_grokking_cores`) are another architecture: the ACE authors' two
# `nn.TransformerEncoderLayer` blocks (post-LayerNorm, ReLU, dropout 0.1 inside the blocks, query, key and
# value biases, a causal mask), input $[a, b]$, their split (`RandomState(42)`, first half for training) and
# AdamW with a full batch of 512, at the size of chapter 02's cpu profile (the `grok_*` parameters: $p = 31$,
# d_model 64, lr 3e-3, ω = 1). The same settings and seeds train here for `grok_epochs` epochs, so these are
# chapter 02's weight-decay models at that checkpoint. The eNTK is taken per *layer*
# (`corekit.models.layer_groups`: the embeddings; each block's attention and its MLP, each with the LayerNorm
# that follows it; the unembedding with its bias), the sum of its parameters' kernels, and each layer's
# top $r + 1$ eigenvectors are scored against the ACE core of rank $r$ of the final residual stream, with the
# same three nulls (`two_lenses.compare_lenses`, as for chapter 06's models; the models by
# `two_lenses.train_ace_authors`). {numref}`fig-08-per-layer` shows, one dot per seed, how much of the ACE
# core each layer's leading eNTK eigenvectors hold, against random subspaces (99th percentile) and the
# unembedding at initialisation.

# %%
t0 = time.perf_counter()
grok = two_lenses.train_ace_authors(grok_p, grok_seeds, grok_epochs, d_model=grok_d_model, d_mlp=grok_d_mlp, lr=grok_lr,
                                    weight_decay=grok_weight_decay, data_seed=grok_data_seed, device=dev,
                                    snapshot_every_epochs=dynamics_every_epochs)
grok_train_seconds = time.perf_counter() - t0
grok_model, grok_history = grok.model, grok.history
grok_acc = grok_history.curve("test_acc").numpy()                          # (evaluations, models)
grok_evaluated = np.asarray(grok_history.steps) / grok.steps_per_epoch     # epochs of the evaluations
grok_grokked = [first_step_reaching(grok_evaluated, grok_acc[:, i], 0.99) for i in range(len(grok_seeds))]
grok_model.eval()
grok_tokens = grok.tokens.to(dev)                                          # (p², 2): a, b
t0 = time.perf_counter()
grok_h, grok_core, grok_ranks = two_lenses.final_residual_core(grok_model, grok_tokens, energy_threshold)
grok_ace_seconds = time.perf_counter() - t0
t0 = time.perf_counter()
grok_eigs = [two_lenses.layer_eigenpairs(grok_model, i, grok_tokens, int(grok_ranks[i]) + 1) for i in range(len(grok_seeds))]
grok_entk_seconds = time.perf_counter() - t0
grok_saved = sorted(s for s in grok_history.snapshots if s)               # steps of the saved snapshots after step 0
grok_at = [grok_history.steps.index(s) for s in grok_saved]
grok_mem = two_lenses.first_memorising(grok_history.curve("train_acc").numpy()[grok_at], grok_acc[grok_at])
grok_at_mem = [None if j is None else two_lenses.readout_alignment(grok_model, i, grok_tokens,
                                                                   grok_history.snapshots[grok_saved[j]], energy_threshold)
               for i, j in enumerate(grok_mem)]                            # the two lenses at the memorising checkpoint

# %%
LAYERS = list(grok_eigs[0])
grok_lenses, init_ranks = two_lenses.lenses_per_layer(grok_model, grok_tokens, grok_h, grok_core, grok_ranks, grok_eigs,
                                                      grok_history.snapshots[0], energy_threshold, null_samples)
grok_align, grok_pca = [c.align for c in grok_lenses], [c.pca for c in grok_lenses]
grok_init, grok_init_all = [c.init("unembed") for c in grok_lenses], [c.init_all for c in grok_lenses]
grok_null99, grok_null99_init = [c.null99 for c in grok_lenses], [c.null99_init for c in grok_lenses]
print(f"training {grok_train_seconds:.0f} s; ACE {grok_ace_seconds:.2f} s; every layer's eNTK {grok_entk_seconds:.1f} s "
      f"(N = {grok_p ** 2} inputs, D = {grok_d_model})")
display(table([{"seed": seed, "final test accuracy": grok_acc[-1, i],
                "test ≥ 0.99 from epoch": None if grok_grokked[i] is None else f"{grok_grokked[i]:g}",
                "ACE energy rank": int(grok_ranks[i]), "at initialisation": int(init_ranks[i]),
                "PCA of h vs unembedding": grok_pca[i], "unembedding at initialisation": grok_init[i],
                "random, 99th percentile": grok_null99[i],
                "memorising checkpoint (epoch)": None if grok_mem[i] is None else grok_saved[grok_mem[i]] / grok.steps_per_epoch,
                "lenses there": grok_at_mem[i]} for i, seed in enumerate(grok_seeds)],
              caption="Chapter 02's models: held-out accuracy, the ACE core's energy rank, the nulls of the core's "
                      "alignment with the unembedding layer's eNTK block, and the memorising checkpoint (the first "
                      "snapshot with train accuracy ≥ 0.99 and test accuracy below) with that alignment there"))
table([{"layer": n, **{f"seed {s} (r = {int(grok_ranks[i])})": grok_align[i][n] for i, s in enumerate(grok_seeds)}}
       for n in LAYERS],
      caption="Chapter 02's models: alignment of the ACE core (rank r) with each layer's top r + 1 eNTK eigenvectors, per seed")

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Chapter 02's models: alignment of the ACE core of the final residual stream with the leading eigenvectors of each layer's eNTK (the sum of its parameters' kernels), one dot per seed, against the grey band of random subspaces (99th percentile) and, hollow, the unembedding at initialisation.", "name": "fig-08-per-layer"}}
fig, ax = plt.subplots(figsize=(7.5, 3.4), layout="constrained")
x = np.arange(len(LAYERS))
spread = np.linspace(-0.2, 0.2, len(grok_seeds)) if len(grok_seeds) > 1 else np.zeros(1)
for i in range(len(grok_seeds)):
    ax.scatter(x + spread[i], [grok_align[i][n] for n in LAYERS], s=14, color="#0072B2",
               label="trained" if i == 0 else None)
ax.scatter(x[LAYERS.index("unembed")] + spread, grok_init, s=14, facecolor="white", edgecolor="k",
           label="unembedding at initialisation")
ax.axhspan(0, max(grok_null99), color="0.85", label="random subspaces, 99th percentile")
ax.set(xticks=x, xticklabels=LAYERS, ylim=(0, 1.05), xlabel="layer", ylabel="alignment with the ACE core",
       title=f"a + b mod {grok_p}, {len(grok_seeds)} seed(s), {grok_epochs} epochs; ACE ranks "
             f"{sorted(int(r) for r in grok_ranks)}")
ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
figures.save(fig, "per_layer_alignment")
plt.show()

# %% [markdown]
# ## Over training
#
# On every snapshot: the ACE core's energy rank, the alignment of the unembedding's eNTK block with the
# $a + b$ features at the final keys (chapter 06's curve) and the alignment of the two lenses. Three
# epochs per seed: where the core *settles* (the first snapshot from which its energy rank never again
# exceeds the final one), where the eNTK alignment rises fastest (the peak of its derivative) and where
# the model groks (test accuracy ≥ 0.99). {numref}`fig-08-timing` follows, for chapter 06's seeds, the
# core's energy rank, the eNTK's alignment with the $a + b$ features and the alignment of the two lenses
# beside the held-out accuracy, and sets the three epochs side by side for every seed.

# %%
dyn_states = [history.snapshots[(e + 1) * spe] for e in dyn_epochs]
# (snapshots, models) each: the core's energy rank, W_U vs the a + b features, W_U vs the ACE core
dyn_rank, dyn_entk, dyn_lens = two_lenses.snapshot_lenses(model, tokens_dev, p, keys, dyn_states, energy_threshold)
t_ace = [settling_epoch(dyn_epochs, dyn_rank[:, i]) for i in range(len(seeds))]
t_entk = [steepest_rise(dyn_epochs, dyn_entk[:, i])[0] for i in range(len(seeds))]
dyn_test, dyn_train = run.after_epochs("test_acc", dyn_epochs), run.after_epochs("train_acc", dyn_epochs)
t_test = [steepest_rise(dyn_epochs, dyn_test[:, i])[0] for i in range(len(seeds))]   # nulls of the timing claims
memorised = [first_step_reaching(log_epochs, logged_train[:, i], 0.99) for i in range(len(seeds))]
mem_snapshot = two_lenses.first_memorising(dyn_train, dyn_test)        # the memorising checkpoint, if any
table([{"seed": seed, "eNTK rises fastest": round(t_entk[i]), "core settles": round(t_ace[i]),
        "energy rank": f"{int(dyn_rank[0, i])} → {int(dyn_rank[-1, i])}",
        "test ≥ 0.99": None if grok_epoch[i] is None else round(grok_epoch[i]),
        "train ≥ 0.99": None if memorised[i] is None else round(memorised[i]), "test rises fastest": round(t_test[i]),
        "memorising checkpoint": None if mem_snapshot[i] is None else dyn_epochs[mem_snapshot[i]],
        "lenses there": None if mem_snapshot[i] is None else dyn_lens[mem_snapshot[i], i]} for i, seed in enumerate(seeds)],
      caption="Epochs per seed: where the eNTK alignment rises fastest, where the ACE core settles (its energy rank "
              "from the first to the last snapshot beside), grokking, fitting the training pairs, the held-out "
              "accuracy's steepest rise, and the memorising checkpoint with the two lenses' alignment there (a dash: "
              "no snapshot fits the training pairs before test ≥ 0.99)")

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Over training, for chapter 06's seeds (first panels): the ACE core's energy rank (left axis), the unembedding eNTK's alignment with the a + b features and the alignment of the two lenses (right axis), with the held-out accuracy in grey; dashed lines mark where the eNTK alignment rises fastest (orange) and where the core settles (blue), the dotted line grokking. Last panel: the three epochs for every seed.", "name": "fig-08-timing"}}
shown = list(range(min(2, len(seeds))))
fig, axes = panel_grid(len(shown) + 1, ncols=2, panel=(5.2, 3.6))
epoch_axis = np.asarray(history.steps) / spe
for ax, i in zip(axes, shown):
    ax.plot(dyn_epochs, dyn_rank[:, i], color="#0072B2", label="ACE energy rank")
    ax.set(xlabel="epoch", ylabel="ACE energy rank", title=f"seed {seeds[i]}")
    right = ax.twinx()
    right.plot(dyn_epochs, dyn_entk[:, i], color="#D55E00", label="eNTK W_U vs a + b features")
    right.plot(dyn_epochs, dyn_lens[:, i], color="#009E73", label="ACE core vs eNTK W_U")
    right.plot(epoch_axis, test_acc[:, i], color="0.6", lw=1, label="test accuracy")
    right.set(ylim=(0, 1.05), ylabel="alignment / accuracy")
    for x, colour, style in ((t_entk[i], "#D55E00", "--"), (t_ace[i], "#0072B2", "--"), (grok_epoch[i], "k", ":")):
        if x is not None:
            ax.axvline(x, color=colour, ls=style, lw=1)
lines = axes[0].get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
fig.legend(lines, [ln.get_label() for ln in lines], loc="outside lower center", ncols=2)
ax = axes[-1]
rows = np.arange(len(seeds))
ax.scatter(t_entk, rows, color="#D55E00", marker="o", label="eNTK alignment rises fastest")
ax.scatter(t_ace, rows, color="#0072B2", marker="s", label="ACE core settles")
ax.scatter([g if g is not None else np.nan for g in grok_epoch], rows, color="k", marker="x", label="test ≥ 0.99")
ax.set(yticks=rows, yticklabels=[str(s) for s in seeds], xlabel="epoch", ylabel="seed", title="every seed")
ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
figures.save(fig, "timing")
plt.show()

# %% [markdown]
# ## Which subspace is causal?
#
# ACE's ablations about the mean, on the held-out pairs: *keep only* a subspace of the residual stream
# (every other direction at its mean) and *remove* it (its coordinates at their mean). Three subspaces of
# the final residual stream: (a) the ACE core of rank $r$; (b) the span in the residual stream of the
# unembedding eNTK's top $r + 1$ eigenvectors, mapped to directions by least squares
# (`corekit.subspaces.residual_directions`: the directions whose centred coordinates reproduce those
# eigenfunctions; for this kernel they are the right singular vectors of $h$ exactly); (c) random
# subspaces of the same dimensions. {numref}`fig-08-ablations` shows, per seed, the held-out accuracy when
# only one of these subspaces is kept and when it is removed: a subspace is sufficient if keeping it keeps
# the accuracy, necessary if removing it destroys it.
#
# At this cut the test has little power. The final residual stream is read by a linear unembedding, and both
# subspaces are principal subspaces of that stream: keeping the core of 99 % of the logits' energy keeps
# the logits, and removing it leaves a near-constant prediction, whatever the weights. So the same
# ablations also run on the same models at initialisation (their own core and $W_U$ block), the null the
# claims below set these rows against.

# %%
base, ablation = two_lenses.subspace_ablations(model, h, core, ranks, [e["W_U"].vectors for e in eigs], task.test_idx,
                                               task.labels, p)
base_init, ablation_init = two_lenses.subspace_ablations(with_state(model, history.snapshots[0]), h_init, core_init,
                                                         ranks_init, init_readout, task.test_idx, task.labels, p)
names = list(ablation[0])
kept = np.array([[ablation[i][n] for n in names] for i in range(len(seeds))])  # (seeds, subspaces, keep/remove)
kept_init = np.array([[ablation_init[i][n] for n in names] for i in range(len(seeds))])
table([{"subspace": n, "keep only: mean": kept[:, k, 0].mean(), "lowest seed": kept[:, k, 0].min(),
        "remove: mean": kept[:, k, 1].mean(), "highest seed": kept[:, k, 1].max(),
        "at initialisation, keep only: mean": kept_init[:, k, 0].mean(),
        "at initialisation, remove: mean": kept_init[:, k, 1].mean()} for k, n in enumerate(names)],
      caption=f"Held-out accuracy over the {len(seeds)} seeds when only a subspace of the final residual stream is "
              f"kept or when it is removed (the models' own: {float(base.mean()):.3f} trained, "
              f"{float(base_init.mean()):.3f} at initialisation; chance: 1/p = {1 / p:.3f})")

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Held-out accuracy when only a subspace of the final residual stream is kept (left) or when it is removed (right), per seed: the ACE core, the eNTK's unembedding block mapped into the stream, and random subspaces of the same dimensions. A subspace is sufficient if keeping it keeps the accuracy, necessary if removing it destroys it.", "name": "fig-08-ablations"}}
fig, axes = plt.subplots(1, 2, figsize=(10, 3.4), layout="constrained")
spread = np.linspace(-0.2, 0.2, len(seeds)) if len(seeds) > 1 else np.zeros(1)
for j, (ax, title) in enumerate(zip(axes, ("keep only", "remove"))):
    for k, name in enumerate(names):
        values = [ablation[i][name][j] for i in range(len(seeds))]
        ax.bar(k, np.mean(values), 0.7, color="#0072B2" if "random" not in name else "0.7")
        ax.scatter(k + spread, values, s=10, color="k", zorder=3)
    ax.axhline(1 / p, color="k", ls=":", lw=1, label="chance")
    ax.set(xticks=np.arange(len(names)), ylim=(0, 1.05), title=f"{title} (bars: mean; dots: seeds)",
           xlabel="subspace", ylabel="test accuracy")
    ax.set_xticklabels(names, rotation=20, fontsize=8)
axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
figures.save(fig, "ablations")
plt.show()

# %% [markdown]
# ## The language model: ACE's number axis and the eNTK at its layer
#
# Chapter 04 ({doc}`04_llm_agreement_axis`) finds a 1-D ACE core of number agreement in Gemma-3-270M: on
# prompts that end right before the verb ("The keys to the cabinet …"), the axis of the last token's residual
# stream at one layer reads singular against plural, and editing along it flips the model's verb. Chapter 07
# computes the eNTK of the same model per layer. Here both run on the same prompts: ACE's axis by chapter 04's
# recipe (`two_lenses.number_axis`, chapter 04's functions: a rank-1 core at every layer under the observability of the
# verb margin, the layer where flipping it on the training prompts hurts the margin most), and the eNTK of the
# decoder block that writes that layer's residual stream (chapter 07's operator of its `mlp.down_proj`,
# `corekit.chapters.two_lenses`). The operator needs prompts of one token length; it runs on the train and
# test prompts of the most common length. Two questions, each with PCA directions of the same states and
# random directions as nulls (and, for ACE's axis, which is itself chosen through a readout of number, the
# difference of the training prompts' plural and singular means: a supervised direction any probe finds):
#
# - does any of the top `lm_top_k` eNTK eigenvectors separate singular from plural? Each eigenvector gives
#   one score per prompt (the top singular component of its per-prompt block); the eigenvector and its
#   sign are chosen on the training prompts, and its AUROC is measured on the held-out ones, with a
#   bootstrap interval;
# - how far is ACE's axis from the eNTK's directions in the residual stream? Each eigenvector's scores are
#   mapped to a direction of the stream by least squares (as for the modular model above, the
#   minimum-norm solution within the span of these prompts' states), and the angle is that of the axis
#   with their span.
#
# {numref}`fig-08-language-model` answers both at the layer of ACE's number axis: the held-out AUROC of
# each eNTK eigenvector and principal direction against ACE's axis and the random null (left), and how much
# of ACE's axis the span of the first k eNTK or PCA directions holds against random subspaces (right).

# %%
lm_train, lm_test = agreement.split(lm_n_train, lm_n_test, seed=data_seed)
t0 = time.perf_counter()
lm = language_models.load(language_model, device=dev, dtype="float32")
measured, axis, layer = two_lenses.number_axis(lm, language_model, lm_train, lm_test, lm_batch_size)
axis_seconds = time.perf_counter() - t0
number = two_lenses.number_lens(measured, axis, layer, lm_top_k, max_vectors=lm_lanczos_vectors, seed=data_seed)
n_lens = len(number.y)
print(f"{lm.weights}: ACE's axis at layer {layer} of {lm.n_layers} (held-out AUROC of its coordinate on all "
      f"{lm_n_test} test prompts {axis.auroc[layer]:.3f}; axis and layer in {axis_seconds:.0f} s)")
print(f"eNTK of {number.module} on the {n_lens} prompts of {number.tokens} tokens ({int(number.is_train.sum())} "
      f"train, {int((~number.is_train).sum())} test): cache {number.cache_seconds:.1f} s, Lanczos "
      f"{number.lanczos_seconds:.1f} s, largest relative residual {number.relative_residuals.max():.1e}")

# %%
test_mask = ~number.is_train
readings = two_lenses.number_readings(number, lm_top_k, null_samples, n_boot, seed=data_seed)
ace_number, entk_number, pca_number = readings.ace, readings.entk, readings.pca
random_auroc99, per_vector = readings.random_auroc99, readings.per_vector
table([{"direction": name, "chosen on train": r.index, "train AUROC": r.train_auroc, "held-out AUROC": r.test_auroc,
        "95 % interval": r.interval} for name, r in (("ACE axis", ace_number), ("eNTK", entk_number), ("PCA", pca_number),
                                                     ("difference of class means", readings.dom))]
      + [{"direction": f"random (best of {lm_top_k} on train), 99th percentile", "held-out AUROC": random_auroc99}],
      caption="Singular against plural: each lens's direction (row) chosen and signed on the training prompts, its "
              "AUROC there and on the held-out prompts with a bootstrap interval, and the random null")

# %%
q_axis = axis.q[layer, :, 0].double().cpu()                               # (D,): ACE's axis at the layer
spans = two_lenses.axis_span(q_axis, number.h, number.scores, readings.pca_scores, lm_top_k, null_samples)
span_entk, span_pca, random_span99 = spans.entk, spans.pca, spans.random99
ceiling, single = spans.ceiling, spans.single
print(f"closest single eNTK direction: eigenvector {int(np.argmax(single))}, angle "
      f"{np.degrees(np.arccos(max(single))):.1f}°")
table([{"span": f"top {lm_top_k} eNTK directions", "cos² with ACE's axis": span_entk[-1]},
       {"span": f"top {lm_top_k} PCA directions", "cos² with ACE's axis": span_pca[-1]},
       {"span": f"random {lm_top_k}-dim subspaces, 99th percentile", "cos² with ACE's axis": random_span99[-1]},
       {"span": f"all {n_lens} prompts' centred states (the ceiling)", "cos² with ACE's axis": ceiling}],
      caption="How much of ACE's axis each span of the stream holds (squared cosine)", digits=4)

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Gemma-3-270M at the layer of ACE's number axis. Left: held-out AUROC of singular against plural for each of the top eNTK eigenvectors and the top principal directions (each signed on the training prompts), with ACE's axis as a line and, grey, the random null: the 99th percentile of the best of as many random directions, chosen and signed on the training prompts (the bar the chosen eigenvector must clear). Right: how much of ACE's axis the span of the first k eNTK (or PCA) directions holds, squared cosine, against random subspaces of the same dimension.", "name": "fig-08-language-model"}}
fig, axes = plt.subplots(1, 2, figsize=(10, 3.4), layout="constrained")
k_axis = np.arange(1, lm_top_k + 1)
ax = axes[0]
ax.axhspan(1 - random_auroc99, random_auroc99, color="0.85", label=f"best of {lm_top_k} random directions, 99th percentile")
ax.plot(k_axis, per_vector["eNTK"], "o-", color="#D55E00", label="eNTK eigenvector")
ax.plot(k_axis, per_vector["PCA"], "s--", color="0.4", ms=4, label="principal direction")
ax.axhline(ace_number.test_auroc, color="#0072B2", label="ACE's axis")
ax.set(xlabel="eigenvector / component", ylabel="held-out AUROC (plural vs singular)", ylim=(0, 1.02),
       xticks=k_axis, title=f"{language_model}, layer {layer}: {int(test_mask.sum())} held-out prompts")
ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2))
ax = axes[1]
ax.plot(k_axis, span_entk, "o-", color="#D55E00", label="top-k eNTK directions")
ax.plot(k_axis, span_pca, "s--", color="0.4", ms=4, label="top-k principal directions")
ax.plot(k_axis, random_span99, ":", color="k", label="random k-dim, 99th percentile")
ax.axhline(ceiling, color="0.6", lw=0.8, label="all the prompts' states")
ax.set(xlabel="k", ylabel="cos² (ACE's axis, span)", ylim=(0, 1.02), xticks=k_axis, title="ACE's axis in the eNTK span")
ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2))
figures.save(fig, "language_model")
plt.show()

# %% [markdown]
# ## What each lens costs
#
# Measured above on this run's device, for all seeds at once: ACE needs one pass for the activations,
# the readout's Jacobian and a $D \times D$ factorisation; the eNTK needs a kernel per parameter over
# all $N^2$ pairs of inputs and its eigenvectors.

# %%
table([{"model": "chapter 06's", "ACE": "core (activations, observability, extraction)", "ACE (s)": f"{ace_seconds:.2f}",
        "eNTK": f"the nine eNTKs and their top {top_k} eigenvectors", "eNTK (s)": f"{entk_seconds:.1f}",
        "eNTK / ACE": f"{entk_seconds / max(ace_seconds, 1e-9):.0f}×", "inputs": f"N = {p * p}, D = {d_model}"},
       {"model": "chapter 02's", "ACE": "core", "ACE (s)": f"{grok_ace_seconds:.2f}",
        "eNTK": f"the {len(LAYERS)} layers' eNTKs and their top eigenvectors", "eNTK (s)": f"{grok_entk_seconds:.1f}",
        "eNTK / ACE": f"{grok_entk_seconds / max(grok_ace_seconds, 1e-9):.0f}×",
        "inputs": f"N = {grok_p ** 2}, D = {grok_d_model}"},
       {"model": language_model, "ACE": f"the axis at every layer and the layer sweep on {lm_n_train + lm_n_test} prompts "
                                        "(model loading included)", "ACE (s)": f"{axis_seconds:.0f}",
        "eNTK": f"one block on {n_lens} prompts, top {lm_top_k} eigenpairs",
        "eNTK (s)": f"{number.cache_seconds + number.lanczos_seconds:.0f}"}],
      caption="Wall time of each lens on this run's device, for all seeds at once")

# %% [markdown]
# Where the two lenses agree, where they differ and what each costs, with this run's numbers, is the
# subject of the page after this chapter ({doc}`/book/two_lenses`).

# %% [markdown]
# ## Claims
#
# Written before the first published run, and since given the nulls they lacked; they are the book's own
# (`two_lenses.CLAIMS` declares them, `two_lenses.claims` decides them). A claim about the trained models
# covers **every model that generalises** (final held-out accuracy ≥ 0.99) among those the profile trains
# (chapter 06's `seeds`, chapter 02's `grok_seeds`), as chapter 06's claims do: it holds only if it holds
# for every such model, with k of n and a Wilson interval, and a model that did not generalise is named
# beside the claim. Two preconditions count those models against the same models at initialisation; with
# none, the claims over them are undecided. Each claim's nulls are the same statistic on a case without the
# effect:
#
# - the two lenses coincide at the unembedding (alignment ≥ 0.9), against the same models at initialisation,
#   PCA of the same activations and random subspaces. By the Gram identity above they coincide at
#   initialisation too, so these rows are expected to come out uninformative; what training adds is tested
#   on its own: the share of the initialised model's shortfall from 1 that training closes (≥ 0.5), against
#   random subspaces and the memorising checkpoint (the first snapshot that fits the training pairs before
#   the test pairs), for both architectures;
# - the unembedding's kernel is the one closest to the core, and the core is the $a + b$ Fourier features
#   at the keys (≥ 0.9), each against the same models at initialisation;
# - keeping only the core or the eNTK block keeps the held-out accuracy (within 0.02) and removing it brings
#   it to 2/p or below, against random subspaces of the same size and the same ablation at initialisation,
#   where the linear readout makes them pass by construction (see the ablations above);
# - the eNTK's alignment rises at least one snapshot before the core settles, against the held-out
#   accuracy's own steepest rise; the core settles at grokking, against the epoch the model fits its
#   training pairs;
# - on the language model, ACE's axis and the best eNTK eigenvector separate number (held-out AUROC ≥ 0.8,
#   its interval clear of the random null), against random directions, PCA's and, for the axis, the
#   difference of class means; ACE's axis lies in the eNTK's span (cos² ≥ 0.5), against random subspaces
#   and the principal directions.

# %%
modular = two_lenses.Family(seeds, test_acc[-1].tolist(), test_acc[0].tolist(), lenses,
                            [None if j is None else float(dyn_lens[j, i]) for i, j in enumerate(mem_snapshot)], "W_U")
grok_family = two_lenses.Family(grok_seeds, grok_acc[-1].tolist(), grok_acc[0].tolist(), grok_lenses, grok_at_mem,
                                "unembed")
findings = two_lenses.Findings(
    p=p, null_samples=null_samples, modular=modular,
    ablations=two_lenses.Ablations(base.tolist(), ablation, base_init.tolist(), ablation_init),
    timing=two_lenses.Timing(t_ace, t_entk, t_test, memorised, grok_epoch, dynamics_every_epochs),
    grok=grok_family, grok_p=grok_p, grok_epochs=grok_epochs, language_model=language_model, layer=layer,
    number=number, readings=readings, span=spans,
    seconds={f"chapter 06's model, {len(seeds)} seeds": {"ACE": round(ace_seconds, 2), "eNTK": round(entk_seconds, 1)},
             f"chapter 02's model, {len(grok_seeds)} seeds": {"ACE": round(grok_ace_seconds, 2),
                                                              "eNTK": round(grok_entk_seconds, 1)},
             language_model: {"ACE": round(axis_seconds, 1),
                              "eNTK": round(number.cache_seconds + number.lanczos_seconds, 1)}})
claims.add(*two_lenses.claims(findings))
claims.write()
claims.table()
