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
#       jupytext_version: 1.19.6
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
import itertools
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
from tqdm import tqdm

from corekit import ace, fourier, subspaces
from corekit.chapters import entk_transformer_modular
from corekit.chapters import merging_cores as mc
from corekit.plots import panel_grid
from corekit.runs.claims import Null, at_least, at_most, interval_above
from corekit.runs.session import setup
from corekit.tables import table

claims, figures, dev = setup("09_merging_cores", globals())
alphas = np.linspace(0, 1, n_alphas)

# %% [markdown]
# ## The models
#
# Chapter 06's recipe, every seed trained together; a model takes part when its held-out accuracy reaches
# `generalise_at`. Its key frequencies are read off its embedding as in chapter 06.

# %%
t0 = time.perf_counter()
run = entk_transformer_modular.train_authors(
    p, seeds, epochs, d_model=d_model, n_heads=n_heads, d_mlp=d_mlp, train_frac=train_frac, lr=lr,
    weight_decay=weight_decay, betas=betas, batch_size=batch_size, data_seed=data_seed, split=split, init=init,
    batch_order=batch_order, log_every_epochs=log_every_epochs, snapshot_every_epochs=spawn_epoch, device=dev)
train_seconds = time.perf_counter() - t0
config, tokens, task = run.model.config, run.tokens.to(dev), run.task
labels, test_idx = task.labels.to(dev), task.test_idx.to(dev)
states = mc.model_states(run.model)
test_acc = run.history.curve("test_acc")[-1].numpy()                            # (M,)
keys = [tuple(fourier.key_frequencies(s["W_E"][:p].cpu())) for s in states]
members = [i for i in range(len(seeds)) if test_acc[i] >= generalise_at]
if len(members) < 2:
    raise RuntimeError(f"fewer than two models reach held-out accuracy {generalise_at} (seeds {seeds}: "
                       f"{np.round(test_acc, 4).tolist()}): train longer (epochs) or lower generalise_at")
pair_label = {(i, j): f"{seeds[i]}–{seeds[j]}" for i in members for j in members if i != j}
table([{"seed": seeds[i], "held-out accuracy": test_acc[i], "key frequencies": keys[i],
        "takes part": i in members} for i in range(len(seeds))],
      caption=f"The models after {epochs} epochs ({train_seconds:.0f} s of training for all)", digits=4)

# %% [markdown]
# ## The pair that shares its history
#
# The parameters of the first model that generalises, as they were after epoch `spawn_epoch`, are trained on
# twice for the remaining epochs, in two different batch orders (corekit's seeded order, a fresh optimizer
# each): two models that agree on everything learnt before the fork, from a start whose own run learnt the task.

# %%
spe = run.steps_per_epoch
spawn_step = (spawn_epoch + 1) * spe                                            # the authors' epoch e ends at step (e+1)·spe
parent_seed = seeds[members[0]]                                                # a parent whose own run learnt the task
parent = {k.removeprefix("params."): v[members[0]].to(dev) for k, v in run.history.snapshots[spawn_step].items()}
train_set, test_set = task.datasets()
spawned, spawn_history = mc.continue_training(
    config, parent, train_set, test_set, steps=(epochs - spawn_epoch - 1) * spe, batch_size=batch_size, lr=lr,
    weight_decay=weight_decay, betas=tuple(betas), drop_last=False, loss_outputs=p, eval_every=spe * log_every_epochs)
spawn_acc = spawn_history.curve("test_acc")[-1].numpy()
print(f"continuations of seed {parent_seed} from epoch {spawn_epoch}: held-out accuracy {spawn_acc[0]:.4f} and "
      f"{spawn_acc[1]:.4f}")

# %% [markdown]
# ## The pairs, chosen by the question
#
# Every pair of models that generalise and share their key set is covered by the claims about merging one
# algorithm; the first `max_contrast_pairs` pairs whose key sets differ are the contrast.

# %%
candidates = list(itertools.combinations(members, 2))
same_pairs = [(i, j) for i, j in candidates if keys[i] == keys[j]]
contrast_pairs = [(i, j) for i, j in candidates if keys[i] != keys[j]][:max_contrast_pairs]
if not same_pairs and not contrast_pairs:
    contrast_pairs = candidates[:1]                                             # something to show the paths of
pairs = same_pairs + contrast_pairs
print(f"{len(members)} models generalise: {len(same_pairs)} pair(s) share their key set "
      f"({', '.join(pair_label[k] for k in same_pairs) or 'none'}); {len(contrast_pairs)} contrast pair(s)")

# %% [markdown]
# ## Interpolation paths after each alignment
#
# For each pair (A, B), every alignment of `merging_cores.ALIGNMENTS` gives a copy of B that computes what B
# computes (checked below); the path from A to it is evaluated on the held-out pairs, all its $\alpha$ in one
# batched forward pass.

# %%
h, core = mc.final_stream_core(run.model, tokens, p)                           # h (M, p², D)
ranks = ace.energy_rank(core.sigma, energy_threshold)                          # (M,)
spawn_acc_path = mc.path_metrics(config, *spawned, alphas, tokens[test_idx], labels[test_idx], p)[0].cpu().numpy()
paths, function_error, align_seconds = {}, {}, []
for a, b in tqdm(pairs, desc="aligning pairs"):
    t = time.perf_counter()
    variants = mc.alignments(states[a], states[b], config, tokens, int(max(ranks[a], ranks[b])), p,
                             random_seeds=[1000 * a + 10 * b + k for k in range(random_rotations)])
    align_seconds.append(time.perf_counter() - t)
    paths[(a, b)] = mc.alignment_paths(config, states[a], variants, alphas, tokens[test_idx], labels[test_idx], p)
    function_error[(a, b)] = mc.function_change(config, states[b], variants, tokens, p)
barriers = {name: {pair_label[k]: mc.barrier(paths[k][name][0], alphas) for k in pairs} for name in mc.ALIGNMENTS}
same_labels, contrast_labels = [pair_label[k] for k in same_pairs], [pair_label[k] for k in contrast_pairs]
over = lambda name, labels: {k: barriers[name][k] for k in labels}                # noqa: E731
spawn_barrier = mc.barrier(spawn_acc_path, alphas)
median = lambda values: round(float(np.median(values)), 4) if values else None   # noqa: E731
steps = {name: {"same keys": median(list(over(name, same_labels).values())),
                "different keys": median(list(over(name, contrast_labels).values()))} for name in mc.ALIGNMENTS}
table([{"alignment": name, "median barrier, same key set": v["same keys"],
        "median barrier, different key sets": v["different keys"]} for name, v in steps.items()],
      caption=f"Barrier of the held-out accuracy after each alignment, median over the {len(same_pairs)} pairs "
              f"sharing their key set and the {len(contrast_pairs)} contrast pairs (the pair that shares its "
              f"history: {spawn_barrier:.4f})", digits=4)

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Barrier of the held-out accuracy after each alignment (a point per pair): pairs sharing their key set (filled) and pairs whose key sets differ (open); the dashed line is the pair that shares its history.", "name": "fig-09-barriers"}}
fig, ax = plt.subplots(figsize=(8, 3.8), layout="constrained")
y = np.arange(len(mc.ALIGNMENTS))
for labels_, style in ((same_labels, dict(color="C0", label="same key set")),
                       (contrast_labels, dict(facecolors="none", edgecolors="C3", label="different key sets"))):
    for i, name in enumerate(mc.ALIGNMENTS):
        values = list(over(name, labels_).values())
        ax.scatter(values, np.full(len(values), y[i]) + (0.15 if labels_ is same_labels else -0.15), s=14,
                   **({**style, "label": style["label"] if i == 0 else None}))
ax.axvline(spawn_barrier, color="0.4", ls="--", lw=1, label="shares its history")
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
    for k in pairs:
        ax.plot(alphas, paths[k][kind][0], "o-" if k in same_pairs else "o:", ms=3, lw=1,
                color="C0" if k in same_pairs else "C3", alpha=0.8)
    if kind == "naive":
        ax.plot(alphas, spawn_acc_path, "s--", ms=3, color="0.4", label=f"{parent_seed} spawned twice")
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
# training mean plus the mapped coordinates. The score is the stitched model's held-out accuracy as a
# share of B's own, and, for the claims, as a share of the full-rank stitch's: no linear stitch at this cut does
# better than the full-rank one, so a rank-$r$ stitch is judged against what a linear map can carry there.

# %%
x, core_cut = mc.core_before_mlp(run.model, tokens, p)                         # x (M, p², D)
ranks_cut = ace.energy_rank(core_cut.sigma, energy_threshold)
train_idx = task.train_idx.to(dev)
readouts = {b: mc.mlp_readout(mc.stacked_model(config, [states[b]]), p) for b in members}
own = {b: float((readouts[b](x[b][None, test_idx]).argmax(-1)[0] == labels[test_idx]).double().mean())
       for b in members}
stitch, ranks_used = {kind: {} for kind in ("core", "pca", "random", "full")}, {}
stitch_seconds = []
for a, b in itertools.permutations(members, 2):
    r = int(max(ranks_cut[a], ranks_cut[b]))
    ranks_used[(a, b)] = r
    t = time.perf_counter()
    bases = {"core": (core_cut.q(r)[a], core_cut.q(r)[b]),
             "pca": (mc.principal_components(x[a][train_idx], r), mc.principal_components(x[b][train_idx], r)),
             "random": tuple(subspaces.random_orthonormal(d_model, r, 2, seed=100 * a + b).to(x.device)),
             "full": (torch.eye(d_model, dtype=torch.float64, device=x.device),) * 2}
    for kind, (q_a, q_b) in bases.items():
        accuracy = mc.stitch_accuracy(x[a], x[b], q_a, q_b, readouts[b], labels, train_idx, test_idx)
        stitch[kind][(a, b)] = accuracy / own[b]
    stitch_seconds.append(time.perf_counter() - t)
relative = {kind: {pair_label[k]: round(v / max(stitch["full"][k], 1e-9), 4) for k, v in stitch[kind].items()}
            for kind in ("core", "pca", "random")}
same = {k: keys[k[0]] == keys[k[1]] for k in stitch["core"]}                # does A use B's key set?
same_ordered = [pair_label[k] for k in stitch["core"] if same[k]]
table([{"A → B": pair_label[k], "rank r": ranks_used[k], "same key set": same[k], "full rank (the ceiling)": stitch["full"][k],
        **{f"{kind}, share of the ceiling": relative[kind][pair_label[k]] for kind in relative}}
       for k in stitch["core"] if same[k]],
      caption="Stitched held-out accuracy between models that share their key set: through the whole stream as a share "
              "of B's own (the ceiling of a linear stitch), and through A's and B's cores of rank r, their top r "
              "principal components and random subspaces of rank r as a share of that ceiling", digits=4)

# %% tags=["hide-input"] mystnb={"figure": {"caption": "For the stitches through the cores, the top principal components and random subspaces of the same rank, the share of ordered pairs (A \u2192 B) whose stitched held-out accuracy reaches at least a given share of the full-rank stitch's (the ceiling): the pairs that share their key set (solid) and all pairs (dashed); the dotted line is the 0.99 target.", "name": "fig-09-stitch"}}
shares = np.linspace(0, 1.2, 241)
fig, ax = plt.subplots(figsize=(6.4, 3.4), layout="constrained")
for i, kind in enumerate(relative):
    for chosen, ls in ((same_ordered, "-"), (list(relative[kind]), "--")):
        values = [relative[kind][k] for k in chosen]
        if values:
            reached = (np.asarray(values)[:, None] >= shares).mean(0)             # (241,)
            ax.plot(shares, reached, ls=ls, color=f"C{i}",
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
# of the mean core-stitch scores, with a 95 % interval from resampling the models. Nulls: the same
# difference with the key sets shuffled among the models, and the same difference for the stitch through the top
# principal components (if it shows the same gap, stitching knows the key set, not the core).

# %%
n_same_pairs = sum(same.values()) // 2
rng = np.random.default_rng(0)
if 0 < sum(same.values()) < len(same):
    difference, interval = mc.pair_difference(stitch["core"], same, n_boot=n_boot, seed=0)
    pca_difference, pca_interval = mc.pair_difference(stitch["pca"], same, n_boot=n_boot, seed=0)
    shuffled = []
    for _ in range(200):
        order = rng.permutation(members)
        shuffled_keys = {m: keys[o] for m, o in zip(members, order)}
        s = {k: shuffled_keys[k[0]] == shuffled_keys[k[1]] for k in stitch["core"]}
        if 0 < sum(s.values()) < len(s):
            shuffled.append(mc.pair_difference(stitch["core"], s, n_boot=1)[0])
    shuffled_difference = float(np.mean(shuffled)) if shuffled else None
else:
    difference, interval, shuffled_difference, pca_difference = None, None, None, None
print(f"{n_same_pairs} pair(s) of models share their key set, {len(same) // 2 - n_same_pairs} do not"
      + ("" if difference is None else f"; same − different: {difference:+.4f}, 95 % interval "
         f"{'—' if interval is None else f'[{interval[0]:+.4f}, {interval[1]:+.4f}]'}"))

# %% [markdown]
# ## Claims
#
# The claims about merging one algorithm cover the pairs (or ordered pairs) of models that generalise and
# share their key set, named by the rule above before the run; the contrast pairs are reported. A claim over
# fewer than five says so, and one over fewer than `min_same_key_pairs` pairs is undecided.

# %%
SAME = "pair of models that generalise and share their key set"
NO_INTERVAL = (float("nan"), float("nan"))                                        # one pair: no bootstrap interval
too_few = (None if len(same_pairs) >= min_same_key_pairs else
           f"only {len(same_pairs)} pair(s) of models share their key set, {min_same_key_pairs} are needed; more seeds "
           "(the `seeds` parameter) give more such pairs")
covered = same_labels or contrast_labels            # a claim over models needs one; with no same-key pair it is undecided
ratio = lambda name: {k: round(barriers[name][k] / max(barriers["rebasin"][k], 1e-9), 4) for k in covered}  # noqa: E731
core_vs_pca, core_vs_pca_ci = mc.paired_difference(over("pca, full", covered), over("core, full", covered), n_boot)
pca_vs_procrustes, pca_vs_procrustes_ci = mc.paired_difference(over("procrustes, full", covered),
                                                               over("pca, full", covered), n_boot)
if n_same_pairs < min_same_key_pairs:
    open_question = (f"only {n_same_pairs} pair(s) of models share their key set, {min_same_key_pairs} are needed; "
                     "more seeds (the `seeds` parameter) give more such pairs")
elif difference is None:
    open_question = "every pair of models shares its key set, so there is nothing to compare with"
else:
    open_question = None

# %%
claims.check("naive_barrier", over("naive", covered), at_least(0.2), covers=SAME, undecided=too_few,
             statistic="barrier of the held-out accuracy on the straight line between the two models' weights",
             null=Null(f"the pair that shares its history (seed {parent_seed} trained on twice from epoch {spawn_epoch})",
                       round(spawn_barrier, 4)),
             why="the ACE paper's geometry (cores in nearly orthogonal subspaces) predicts that averaging fails")
claims.check("spawned_pair_connected", round(spawn_barrier, 4), at_most(0.05),
             statistic=f"barrier of the pair that shares its history (seed {parent_seed}, forked at epoch {spawn_epoch})",
             null=Null("the independently trained pairs that share their key set", over("naive", covered)),
             undecided=None if spawn_acc.min() >= generalise_at else
             f"the continuations reach held-out accuracy {spawn_acc.min():.4f}, below generalise_at = {generalise_at}: "
             "two models that have not learnt the task say nothing about connectivity")
for name, claim_id in (("units", "units_matched_barrier"), ("rebasin", "rebasin_barrier"),
                       ("rebasin + heads", "rebasin_heads_barrier"), ("activations", "activation_matching_barrier")):
    claims.report(claim_id, over(name, covered), statistic=f"barrier after the alignment '{name}' (pairs sharing their "
                  "key set)")
claims.report("construction_steps", steps, statistic="median barrier after each alignment over the pairs sharing "
              "their key set and over the contrast pairs (the core construction step by step, then its nulls)")

# %%
claims.check("core_aligned_connects", over("core, full", covered), at_most(0.05), covers=SAME, undecided=too_few,
             statistic="barrier after aligning every symmetry by the cores (stream rotated by the cores fitted at "
                       "every position, units and heads matched, each head's inner maps aligned)",
             null=[Null(f"a random rotation in place of the cores (best of {random_rotations})", over("random, full", covered)),
                   Null("as many top principal components in place of the cores", over("pca, full", covered)),
                   Null("a Procrustes map of the whole stream in place of the cores", over("procrustes, full", covered))])
claims.check("core_alignment_halves_barrier", ratio("core, full"), at_most(0.5), covers=SAME, undecided=too_few,
             statistic="barrier after aligning every symmetry by the cores, as a share of Git Re-Basin's",
             null=[Null(f"a random rotation (best of {random_rotations}) in place of the cores", ratio("random, full")),
                   Null("as many top principal components in place of the cores", ratio("pca, full"))])
claims.check("core_beats_pca", round(core_vs_pca, 4), interval_above(0), interval=core_vs_pca_ci or NO_INTERVAL,
             undecided=too_few or (None if core_vs_pca_ci else "one pair gives no interval"),
             statistic="mean over the pairs sharing their key set of the barrier after aligning every symmetry by the "
                       "top principal components minus that by the cores (95 % bootstrap interval over the pairs)",
             null=Null("the whole-stream Procrustes map minus the principal components (two constructions from the "
                       "stream's statistics alone)", round(pca_vs_procrustes, 4), pca_vs_procrustes_ci or NO_INTERVAL))

# %%
claims.check("core_stitch_sufficient", {k: relative["core"][k] for k in same_ordered} or relative["core"],
             at_least(0.99), covers="ordered " + SAME, undecided=too_few,
             statistic="held-out accuracy stitched through the cores at the cut before the MLP, as a share of the "
                       "full-rank stitch's (the ceiling of a linear stitch there)",
             null=[Null("random subspaces of the same rank", {k: relative["random"][k] for k in same_ordered} or relative["random"]),
                   Null("the top principal components of the same rank",
                        {k: relative["pca"][k] for k in same_ordered} or relative["pca"])])
claims.report("full_rank_stitch", {pair_label[k]: round(v, 4) for k, v in stitch["full"].items() if same[k]},
              statistic="the ceiling: held-out accuracy stitched through the whole stream, as a share of B's own "
                        "(ordered pairs sharing their key set)")
claims.check("same_keys_stitch_better", None if difference is None else round(difference, 4), at_least(0.05),
             statistic="mean core-stitch score of pairs sharing their key set minus that of pairs whose sets differ",
             interval=interval,
             null=[Null("the key sets shuffled among the models (mean of 200 shuffles)",
                        None if shuffled_difference is None else round(shuffled_difference, 4)),
                   Null("the same difference for the stitch through the top principal components",
                        None if pca_difference is None else round(pca_difference, 4))],
             undecided=open_question)
claims.check("alignment_preserves_function", round(max(function_error.values(), default=0.0), 8), at_most(1e-4),
             statistic="largest change of B's logits under any of the alignments, relative to their largest value",
             no_null="numerical check")
claims.check("path_ends_are_the_models",
             round(max(max(abs(paths[(a, b)]["naive"][0][0] - test_acc[a]) for a, b in pairs),
                       max(abs(paths[(a, b)]["naive"][0][-1] - test_acc[b]) for a, b in pairs)), 8),
             at_most(1e-6), statistic="largest difference between a path's end and its model's held-out accuracy",
             no_null="numerical check")
claims.report("cost_seconds", {"training (all seeds)": round(train_seconds, 1),
                               "every alignment of a pair": round(float(np.mean(align_seconds)), 3),
                               "stitching, 4 subspaces": round(float(np.mean(stitch_seconds)), 3) if stitch_seconds else None},
              statistic="seconds of each method per pair on this run's device")
claims.write()
claims.table()
