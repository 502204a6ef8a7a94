# ---
# jupyter:
#   corekit:
#     headline_caption: Held-out accuracy along the straight line between two independently
#       trained models, as trained, after weight matching, after aligning their cores,
#       and after aligning as many principal components; the pair that shares its history
#       for reference.
#     headline_figure: interpolation_paths
#     own_hypotheses: true
#   jupytext:
#     formats: ipynb,py:percent
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
# # Merging by cores, not weights
#
# **Question.** The ACE paper ({cite}`schiffman2026cores`) ends with an implication it does not test:
# models trained from different seeds compute one algorithm in nearly orthogonal subspaces of their
# residual streams (chapter 01, {doc}`01_markov_cores`: projector overlaps at the random level while
# CCA is near 1), which would explain why averaging two independently trained models fails, and it
# suggests that aligning their *cores*, rather than their weights, could be a principled basis for
# recombining them. Does naive merging fail here, does the standard fix (matching weights) repair it,
# does aligning cores repair it, and is a core enough to stitch one model onto another?
#
# **Subjects.** Chapter 06's one-layer transformers on $a + b \bmod p$ ({doc}`06_entk_transformer_modular`),
# trained with the eNTK authors' recipe by the same function (`train_authors`). They have no LayerNorm, so
# an orthogonal rotation $R$ of the residual stream, applied to every weight that writes it ($W_E, W_{pos},
# W_O, W_{out}$: $W \mapsto WR$) and that reads it ($W_Q, W_K, W_V, W_{in}, W_U$: $W \mapsto R^\top W$),
# leaves the model's function unchanged. Chapter 01's models are left out: their post-LayerNorm blocks
# normalise each stream vector, which a rotation that does not fix the all-ones direction changes.
#
# **Methods** (`corekit.chapters.merging_cores`). The pairs are chosen by the question, before the run: the
# claims about merging *one* algorithm cover every pair of models that generalise and share their key
# frequencies (chapter 06: the few frequencies a model's embedding uses), since two models on different
# frequencies are not one solution up to a symmetry, whatever the alignment; the first `max_contrast_pairs`
# pairs with different key sets are the contrast.
#
# 1. *Naive merging*: the held-out accuracy and loss of $\theta(\alpha) = (1-\alpha)\theta_A + \alpha\theta_B$
#    on a grid of $\alpha$, and the **barrier**, the largest fall of the accuracy below the straight line
#    between its ends (linear mode connectivity, {cite}`frankle2020lmc`). Null: two continuations of one
#    parent, trained on from a common checkpoint in different batch orders, which share their history.
# 2. *Weight matching*: Git Re-Basin ({cite}`ainsworth2023rebasin`), one permutation of the residual stream
#    shared by every weight that reads or writes it and one of each layer's MLP units and heads, found by
#    alternating linear assignments that maximise $\sum \langle W_A, \pi(W_B) \rangle$; then with each head's
#    inner bases aligned too (below); and the same paper's *activation matching*, each permutation from the
#    correlations of the two models' activations. The chapter's first variant (units and heads permuted, the
#    stream's basis fixed) is reported beside.
# 3. *Aligning every symmetry, by the core*: a LayerNorm-free block is unchanged by an orthogonal rotation of
#    its stream, by permutations of its units and heads, and inside each head by an orthogonal map shared by
#    $W_Q$ and $W_K$ and another shared by $W_V$ and $W_O^\top$. The core construction rotates B's stream so
#    that its ACE core (chapter 08's core of the final stream at the last position, rank $r$ the larger of the
#    two energy ranks) lands on A's with B's core coordinates matched to A's by orthogonal Procrustes (the
#    complement matched the same way), then matches units and heads and fits each head's inner maps by
#    Procrustes. It is built in steps: the chapter's first construction (the core rotation fitted at the last
#    position, then units and heads permuted); + each head's inner maps; + the rotation fitted on the streams
#    at every residual point and position ("full"). Nulls, the full construction with the core replaced by
#    the top $r$ principal components of the same streams, by a Procrustes map of the whole stream, and by a
#    random rotation (the best of several draws): a core-specific claim passes only where the core beats the
#    principal components.
# 4. *Stitching* ({cite}`bansal2021stitching`): where B's remainder is nonlinear, after the attention and
#    before the MLP, A's stream is mapped into B's through a rank-$r$ linear map from A's core coordinates
#    to B's (least squares on the training pairs), then runs through B's MLP and unembedding; $r$ is the
#    core rank at that cut. Its score is taken as a share of the full-rank stitch's, the ceiling of any
#    linear stitch at that cut. Nulls: the same stitch through random subspaces and through the top $r$
#    principal components.
# 5. *Does stitching know the algorithm?* The ACE view predicts that a core stitch works when both models run
#    the same algorithm: stitches between models with the same key set against stitches between models with
#    different ones, with a bootstrap over models, the principal-component stitch as the null.
#
# The targets below were written before the first run.

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
epochs: int = 2500  # range: [1, inf); chapter 06's seeds 2 and 3 generalise by epoch ~1,900
seeds: list[int] = [2, 3]  # length: 2 or more; range: [0, inf); chapter 06's models, trained together
data_seed: int = 0  # range: [0, inf)
split: str = "python"  # one of: python, torch; the eNTK authors' split, or corekit's seeded randperm
init: str = "lin"  # one of: lin, nanda, fan_in; the eNTK authors' draw, or corekit's per-seed draws
batch_order: str = "loader"  # one of: loader, seeded; the authors' DataLoader order, or corekit's (seed, epoch) order
log_every_epochs: int = 20  # range: [1, inf); the authors' logging interval (their batch order depends on it)
spawn_epoch: int = 500  # range: [1, inf); a multiple of log_every_epochs below epochs; where the pair that shares its history forks
generalise_at: float = 0.99  # range: (0, 1]; held-out accuracy a model needs to take part
n_alphas: int = 11  # range: [3, inf); points on each interpolation path, ends included
max_contrast_pairs: int = 10  # range: [0, inf); pairs with different key sets compared as the contrast (the first, in seed order)
energy_threshold: float = 0.99  # range: (0, 1]; share of σ² the ACE cores keep
random_rotations: int = 5  # range: [1, inf); random rotations per pair; the null is the best of them
min_same_key_pairs: int = 6  # range: [1, inf); pairs sharing their key set needed to decide the claims over them
n_boot: int = 2000  # range: [1, inf); bootstrap resamples over models
device: str = "auto"
cpu_threads: int = 0  # range: [0, inf); CPU threads (0: as many as cores are free when the run starts); 96 models train 1.7x faster on 2 threads than on 1
output_dir: str = ""  # path; empty: the claims table and figures stay in the executed notebook only; else NAME.metrics.json and figures/NAME/ go there

# %%
import matplotlib.pyplot as plt
import numpy as np

from corekit.chapters import merging_cores as mc
from corekit.plots import panel_grid
from corekit.runs.session import setup
from corekit.tables import table

claims, figures, dev = setup("09_merging_cores", globals())
alphas = np.linspace(0, 1, n_alphas)

# %% [markdown]
# ## The models
#
# Chapter 06's recipe (`merging_cores.train_models` runs chapter 06's `train_authors`), every seed trained together;
# a model takes part when its held-out accuracy reaches `generalise_at`. Its key frequencies are read off its
# embedding as in chapter 06.

# %%
models = mc.train_models(
    p, seeds, epochs, generalise_at, device=dev, d_model=d_model, n_heads=n_heads, d_mlp=d_mlp, train_frac=train_frac,
    lr=lr, weight_decay=weight_decay, betas=betas, batch_size=batch_size, data_seed=data_seed, split=split, init=init,
    batch_order=batch_order, log_every_epochs=log_every_epochs, snapshot_every_epochs=spawn_epoch)
table([{"seed": seed, "held-out accuracy": models.test_accuracy[i], "key frequencies": models.keys[i],
        "takes part": i in models.members} for i, seed in enumerate(seeds)],
      caption=f"The models after {epochs} epochs ({models.seconds:.0f} s of training for all)", digits=4)

# %% [markdown]
# ## The pair that shares its history
#
# The parameters of the first model that generalises, as they were after epoch `spawn_epoch`, are trained on
# twice for the remaining epochs, in two different batch orders (corekit's seeded order, a fresh optimizer
# each): two models that agree on everything learnt before the fork, from a start whose own run learnt the task.

# %%
spawned = mc.spawn_pair(models, spawn_epoch, epochs, alphas, batch_size=batch_size, lr=lr, weight_decay=weight_decay,
                        betas=betas, log_every_epochs=log_every_epochs)
print(f"continuations of seed {spawned.parent_seed} from epoch {spawn_epoch}: held-out accuracy "
      f"{spawned.accuracy[0]:.4f} and {spawned.accuracy[1]:.4f}; barrier between them {spawned.barrier:.4f}")

# %% [markdown]
# ## The pairs, chosen by the question
#
# Every pair of models that generalise and share their key set is covered by the claims about merging one
# algorithm; the first `max_contrast_pairs` pairs whose key sets differ are the contrast.

# %%
pairs = mc.choose_pairs(models, max_contrast_pairs)
print(f"{len(models.generalised)} of {len(seeds)} models generalise: {len(pairs.same)} pair(s) share their key set "
      f"({', '.join(pairs.same_labels) or 'none'}); {len(pairs.contrast)} contrast pair(s)")

# %% [markdown]
# ## Interpolation paths after each alignment
#
# For each pair (A, B), every alignment of `merging_cores.ALIGNMENTS` gives a copy of B that computes what B
# computes (checked in the claims); the path from A to it is evaluated on the held-out pairs, all its $\alpha$ in
# one batched forward pass (`merging_cores.compare_paths`). A list of random rotations counts by its best path.

# %%
paths = mc.compare_paths(models, pairs, alphas, energy_threshold, random_rotations)
steps = mc.median_barriers(paths.barriers, pairs.same_labels, pairs.contrast_labels)
table([{"alignment": name, "median barrier, same key set": v["same keys"],
        "median barrier, different key sets": v["different keys"]} for name, v in steps.items()],
      caption=f"Barrier of the held-out accuracy after each alignment, median over the {len(pairs.same)} pairs "
              f"sharing their key set and the {len(pairs.contrast)} contrast pairs (the pair that shares its "
              f"history: {spawned.barrier:.4f})", digits=4)

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Barrier of the held-out accuracy after each alignment (a point per pair): pairs sharing their key set (filled) and pairs whose key sets differ (open); the dashed line is the pair that shares its history.", "name": "fig-09-barriers"}}
fig, ax = plt.subplots(figsize=(8, 3.8), layout="constrained")
y = np.arange(len(mc.ALIGNMENTS))
for labels_, style in ((pairs.same_labels, dict(color="C0", label="same key set")),
                       (pairs.contrast_labels, dict(facecolors="none", edgecolors="C3", label="different key sets"))):
    for i, name in enumerate(mc.ALIGNMENTS):
        values = [paths.barriers[name][k] for k in labels_]
        ax.scatter(values, np.full(len(values), y[i]) + (0.15 if labels_ is pairs.same_labels else -0.15), s=14,
                   **({**style, "label": style["label"] if i == 0 else None}))
ax.axvline(spawned.barrier, color="0.4", ls="--", lw=1, label="shares its history")
ax.set(yticks=y, yticklabels=mc.ALIGNMENTS, xlabel="barrier of the held-out accuracy", xlim=(-0.02, 1.02))
ax.invert_yaxis()
fig.legend(loc="outside lower center", ncols=3, fontsize=8)
figures.save(fig, "barriers")
plt.show()

# %% [markdown]
# {numref}`fig-09-barriers` lays out every construction; a barrier near 0 means the two models are linearly
# connected once aligned, a barrier near the models' accuracy that the midpoint has forgotten the task.

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Held-out accuracy along the straight line from model A (\u03b1 = 0) to model B (\u03b1 = 1) for the pairs that share their key set (solid) and the contrast pairs (dotted): as trained (grey dashed: the pair that shares its history), after Git Re-Basin, after aligning every symmetry by the cores, and by as many principal components.", "name": "fig-09-paths"}}
kinds = {"naive": "as trained", "rebasin": "Git Re-Basin (weight matching)", "core, full": "every symmetry, by the cores",
         "pca, full": "every symmetry, by principal components"}
fig, axes = panel_grid(len(kinds), ncols=2, panel=(5, 3.2), sharey=True)
for ax, (kind, title) in zip(axes, kinds.items()):
    for k in pairs.compared:
        ax.plot(alphas, paths.paths[k][kind][0], "o-" if k in pairs.same else "o:", ms=3, lw=1,
                color="C0" if k in pairs.same else "C3", alpha=0.8)
    if kind == "naive":
        ax.plot(alphas, spawned.path, "s--", ms=3, color="0.4", label=f"{spawned.parent_seed} spawned twice")
        ax.legend(loc="lower left", fontsize=8)
    ax.set(xlabel="α (0: A, 1: B)", ylabel="held-out accuracy", title=title, ylim=(0, 1.02))
figures.save(fig, "interpolation_paths")
plt.show()

# %% [markdown]
# ## Stitching through the core
#
# The cut is after the attention and before the MLP, where B's remainder (its MLP, then its unembedding) is
# nonlinear. Each model's core at the cut is taken under its own remainder's centred logits; the stitch
# keeps A's coordinates in its core of rank $r$ (the larger of the two models' energy ranks there), maps
# them by least squares on the training pairs into B's core coordinates, and rebuilds B's stream as its
# training mean plus the mapped coordinates (`merging_cores.stitch_models`). The score is the stitched model's
# held-out accuracy as a share of B's own, and, for the claims, as a share of the full-rank stitch's: no linear
# stitch at this cut does better than the full-rank one, so a rank-$r$ stitch is judged against what a linear map
# can carry there.

# %%
stitching = mc.stitch_models(models, energy_threshold)
shares = stitching.shares()                             # {subspace: {A–B: share of the ceiling (full: of B's own)}}
table([{"A → B": name, "rank r": stitching.ranks[k], "full rank (the ceiling)": shares["full"][name],
        **{f"{kind}, share of the ceiling": shares[kind][name] for kind in ("core", "pca", "random")}}
       for k, name in stitching.labels.items() if stitching.same[k]],
      caption="Stitched held-out accuracy between models that share their key set: through the whole stream as a share "
              "of B's own (the ceiling of a linear stitch), and through A's and B's cores of rank r, their top r "
              "principal components and random subspaces of rank r as a share of that ceiling", digits=4)

# %% tags=["hide-input"] mystnb={"figure": {"caption": "For the stitches through the cores, the top principal components and random subspaces of the same rank, the share of ordered pairs (A \u2192 B) whose stitched held-out accuracy reaches at least a given share of the full-rank stitch's (the ceiling): the pairs that share their key set (solid) and all pairs (dashed); the dotted line is the 0.99 target.", "name": "fig-09-stitch"}}
reach = np.linspace(0, 1.2, 241)
fig, ax = plt.subplots(figsize=(6.4, 3.4), layout="constrained")
for i, kind in enumerate(("core", "pca", "random")):
    for chosen, ls in ((stitching.same_labels, "-"), (list(shares[kind]), "--")):
        values = [shares[kind][k] for k in chosen]
        if values:
            reached = (np.asarray(values)[:, None] >= reach).mean(0)              # (241,)
            ax.plot(reach, reached, ls=ls, color=f"C{i}",
                    label=f"{kind}, {'same key set' if ls == '-' else 'all'} ({len(values)} pairs)")
ax.axvline(0.99, color="black", ls=":", lw=1)
ax.set(xlabel="stitched accuracy as a share of the full-rank stitch's", ylabel="share of ordered pairs reaching it",
       xlim=(0, 1.2), ylim=(0, 1.02))
ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
figures.save(fig, "stitching")
plt.show()

# %% [markdown]
# {numref}`fig-09-stitch` sets the core stitch beside its nulls, each as a share of the ceiling.
#
# ## Does stitching know the algorithm?
#
# Ordered pairs whose models share their exact key set against pairs whose key sets differ: the difference
# of the mean core-stitch scores, with a 95 % interval from resampling the models (`merging_cores.key_set_gap`).
# Nulls: the same difference with the key sets shuffled among the models, and the same difference for the stitch
# through the top principal components (if it shows the same gap, stitching knows the key set, not the core).

# %%
gap = mc.key_set_gap(stitching, models, n_boot)
n_same_ordered = len(stitching.same_labels)
print(f"{n_same_ordered // 2} pair(s) of models share their key set, {(len(stitching.same) - n_same_ordered) // 2} do not"
      + ("" if gap is None else f"; same − different: {gap.difference:+.4f} (principal components: "
         f"{gap.pca_difference:+.4f}), 95 % interval "
         + ("—" if gap.interval is None else f"[{gap.interval[0]:+.4f}, {gap.interval[1]:+.4f}]")))

# %% [markdown]
# ## Claims
#
# The claims about merging one algorithm cover the pairs (or ordered pairs) of models that generalise and share
# their key set, named by the rule above before the run; the contrast pairs are reported. A claim over fewer than
# five says so, and one over fewer than `min_same_key_pairs` pairs is undecided. Every claim is the book's own (the
# ACE paper states none of them); each is tested against a null measured in this run:
#
# - `naive_barrier`: the straight line between two independently trained models loses at least 0.2 of held-out
#   accuracy; null, the pair that shares its history (which should not).
# - `spawned_pair_connected`: the pair that shares its history is connected (barrier ≤ 0.05); null, the independently
#   trained pairs. Undecided when its continuations do not reach `generalise_at`.
# - The barriers after Git Re-Basin's weight matching (with and without each head's inner bases) and activation
#   matching, after the chapter's first variant, and the construction step by step are reported.
# - `core_aligned_connects` (barrier ≤ 0.05 after aligning every symmetry by the cores) and
#   `core_alignment_halves_barrier` (at most half of Git Re-Basin's barrier): nulls, the same construction through a
#   random rotation, as many principal components and a Procrustes map of the whole stream. If the stream's own
#   statistics do as well, the core adds nothing and the claim is uninformative.
# - `core_beats_pca`: the principal components' barrier minus the cores', its bootstrap interval above 0; null, the
#   whole-stream Procrustes map minus the principal components.
# - `core_stitch_sufficient`: the stitch through the cores keeps ≥ 0.99 of the full-rank stitch's accuracy; nulls,
#   random subspaces and principal components of the same rank. The full-rank stitch itself is reported.
# - `same_keys_stitch_better`: the core stitch works better (by ≥ 0.05) between models with the same key set; nulls,
#   the key sets shuffled among the models and the same gap for the principal-component stitch.
# - Two numerical checks (every alignment keeps B's logits; every path ends at its models) and the cost.

# %%
findings = mc.Findings(
    barriers=paths.barriers, same_pairs=pairs.same_labels, contrast_pairs=pairs.contrast_labels,
    spawn_barrier=spawned.barrier, spawn_accuracy=float(spawned.accuracy.min()), parent_seed=spawned.parent_seed,
    spawn_epoch=spawn_epoch, stitch=shares, same_ordered=stitching.same_labels, gap=gap,
    function_error=paths.function_error, path_end_error=paths.end_error, train_seconds=models.seconds,
    align_seconds=paths.seconds, stitch_seconds=stitching.seconds, generalise_at=generalise_at,
    shortfall=models.shortfall, min_same_key_pairs=min_same_key_pairs, random_rotations=random_rotations, n_boot=n_boot)
claims.add(*mc.claims(findings))
claims.write()
claims.table()
