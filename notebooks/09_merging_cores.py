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
# **Methods** (`corekit.chapters.merging_cores`), on every pair of models that generalise:
#
# 1. *Naive merging*: the held-out accuracy and loss of $\theta(\alpha) = (1-\alpha)\theta_A + \alpha\theta_B$
#    on a grid of $\alpha$, and the **barrier**, the largest fall of the accuracy below the straight line
#    between its ends (linear mode connectivity, {cite}`frankle2020lmc`). Null: two continuations of one
#    parent, trained on from a common checkpoint in different batch orders, which share their history.
# 2. *Weight matching* ({cite}`ainsworth2023rebasin`): B's MLP units and attention heads permuted to match
#    A's weights (one linear assignment per layer), then the same path.
# 3. *Core alignment*: the ACE core of each model's final stream at the last position (chapter 08's
#    core, rank $r$ the larger of the two energy ranks); the rotation that carries B's core onto A's with
#    B's core coordinates matched to A's by orthogonal Procrustes (the complement matched the same way).
#    A rotation of the stream does not line up B's MLP units or heads with A's, so the units are then
#    matched as in method 2, and the path follows. Nulls: a random rotation in place of the core alignment
#    (the best of several draws), and the same construction on the top $r$ principal components instead of
#    the cores. The core rotation alone is reported beside.
# 4. *Stitching* ({cite}`bansal2021stitching`): where B's remainder is nonlinear, after the attention and
#    before the MLP, A's stream is mapped into B's through a rank-$r$ linear map from A's core coordinates
#    to B's (least squares on the training pairs), then runs through B's MLP and unembedding; $r$ is the
#    core rank at that cut. Nulls: the same stitch through random subspaces and through the top $r$
#    principal components; the full-rank least-squares stitch is the ceiling.
# 5. *Does stitching know the algorithm?* Each model uses a few key frequencies (chapter 06). The ACE view
#    predicts that a core stitch works when both models run the same algorithm: stitches between models
#    with the same key set against stitches between models with different ones, with a bootstrap over
#    models.
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
max_path_pairs: int = 10  # range: [1, inf); pairs whose interpolation paths are computed (the first, in seed order)
energy_threshold: float = 0.99  # range: (0, 1]; share of σ² the ACE cores keep
random_rotations: int = 5  # range: [1, inf); random rotations per pair; the null is the best of them
min_same_key_pairs: int = 6  # range: [1, inf); pairs sharing their key set needed to decide question 5
n_boot: int = 2000  # range: [1, inf); bootstrap resamples over models
device: str = "auto"
cpu_threads: int = 0  # range: [0, inf); torch threads on a CPU (0: torch default); 96 models train 1.7x faster on 2 threads than on 1
output_dir: str = ""  # path; empty: the claims table and figures stay in the executed notebook only; else NAME.metrics.json and figures/NAME/ go there

# %%
import itertools
import time

import matplotlib.pyplot as plt
import numpy as np
import torch

from corekit import ace, fourier, subspaces
from corekit.chapters import entk_transformer_modular
from corekit.chapters import merging_cores as mc
from corekit.plots import panel_grid
from corekit.runs.claims import Null, at_least, at_most
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
pairs = list(itertools.combinations(members, 2))[:max_path_pairs]
if not pairs:
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
# ## Interpolation paths: as trained, weight-matched, core-aligned
#
# For each pair (A, B) (the first `max_path_pairs` pairs of models that generalise) the final streams of
# both models on all $p^2$ inputs give the cores and principal components that the rotations align; every
# path is evaluated on the held-out pairs, all its $\alpha$ in one batched forward pass.

# %%
h, core = mc.final_stream_core(run.model, tokens, p)                           # h (M, p², D)
ranks = ace.energy_rank(core.sigma, energy_threshold)                          # (M,)


def path(a_state, b_state):
    """Held-out (accuracy, loss) along the path from a_state to b_state."""
    acc, loss = mc.path_metrics(config, a_state, b_state, alphas, tokens[test_idx], labels[test_idx], p)
    return acc.cpu().numpy(), loss.cpu().numpy()


KINDS = ("naive", "weights", "core", "core + weights", "pca + weights", "random + weights")
paths, seconds, function_error = {}, {}, {}
paths["spawned"] = path(*spawned)
for a, b in pairs:
    A, B = states[a], states[b]
    r = int(max(ranks[a], ranks[b]))
    t = time.perf_counter()
    R = mc.block_rotation(h[a], h[b], core.q(r)[a], core.q(r)[b])
    R_pca = mc.block_rotation(h[a], h[b], mc.principal_components(h[a], r), mc.principal_components(h[b], r))
    seconds.setdefault("core and PCA rotations", []).append(time.perf_counter() - t)
    variants = {"naive": B, "weights": mc.aligned(A, B, config), "core": mc.aligned(A, B, config, R, match=False),
                "core + weights": mc.aligned(A, B, config, R), "pca + weights": mc.aligned(A, B, config, R_pca)}
    for kind, B_kind in variants.items():
        t = time.perf_counter()
        paths[(kind, a, b)] = path(A, B_kind)
        seconds.setdefault(f"{kind} path", []).append(time.perf_counter() - t)
    randoms = [path(A, mc.aligned(A, B, config, mc.random_rotation(d_model, seed=1000 * a + 10 * b + k)))
               for k in range(random_rotations)]
    paths[("random + weights", a, b)] = min(randoms, key=lambda pl: mc.barrier(pl[0], alphas))
    with torch.no_grad():
        before = mc.logits_and_metrics(mc.stacked_model(config, [B]), tokens, labels, p)[0]
        after = mc.logits_and_metrics(mc.stacked_model(config, [variants["core + weights"]]), tokens, labels, p)[0]
    function_error[(a, b)] = float((after - before).abs().max() / before.abs().max())

barriers = {kind: {pair_label[(a, b)]: mc.barrier(paths[(kind, a, b)][0], alphas) for a, b in pairs} for kind in KINDS}
spawn_barrier = mc.barrier(paths["spawned"][0], alphas)
table([{"pair": pair_label[(a, b)], "core rank": int(max(ranks[a], ranks[b])),
        **{f"barrier, {kind}": barriers[kind][pair_label[(a, b)]] for kind in barriers},
        "core + weights: max logit change (relative)": function_error[(a, b)]} for a, b in pairs]
      + [{"pair": f"{parent_seed} spawned twice", "barrier, naive": spawn_barrier}],
      caption="Barrier of the held-out accuracy along each path (the largest fall below the line between its ends)",
      digits=4)

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Held-out accuracy along the straight line from model A (\u03b1 = 0) to model B (\u03b1 = 1) for every pair: as trained (grey: the pair that shares its history), after weight matching, after aligning the cores, and after aligning as many principal components.", "name": "fig-09-paths"}}
kinds = {"naive": "as trained", "weights": "weight matching", "core + weights": "cores aligned, then weight matching",
         "pca + weights": "principal components aligned, then weight matching"}
fig, axes = panel_grid(len(kinds), ncols=2, panel=(5, 3.2), sharey=True)
for ax, (kind, title) in zip(axes, kinds.items()):
    for a, b in pairs:
        ax.plot(alphas, paths[(kind, a, b)][0], "o-", ms=3, label=pair_label[(a, b)])
    if kind == "naive":
        ax.plot(alphas, paths["spawned"][0], "s--", ms=3, color="0.5", label=f"{parent_seed} spawned twice")
    ax.set(xlabel="α (0: A, 1: B)", ylabel="held-out accuracy", title=title, ylim=(0, 1.02))
handles = {lab: line for ax in axes for line, lab in zip(*ax.get_legend_handles_labels())}
fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncols=min(len(handles), 5))
figures.save(fig, "interpolation_paths")
plt.show()

# %% [markdown]
# {numref}`fig-09-paths` shows every path. A barrier near 0 means the two models are linearly connected
# once aligned; a barrier near the models' accuracy means the midpoint has forgotten the task.

# %% [markdown]
# ## Stitching through the core
#
# The cut is after the attention and before the MLP, where B's remainder (its MLP, then its unembedding) is
# nonlinear. Each model's core at the cut is taken under its own remainder's centred logits; the stitch
# keeps A's coordinates in its core of rank $r$ (the larger of the two models' energy ranks there), maps
# them by least squares on the training pairs into B's core coordinates, and rebuilds B's stream as its
# training mean plus the mapped coordinates. The score is the stitched model's held-out accuracy as a
# share of B's own.

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
table([{"A → B": pair_label[k], "rank r": ranks_used[k], **{f"{kind}": stitch[kind][k] for kind in stitch}}
       for k in stitch["core"]],
      caption="Stitched held-out accuracy as a share of B's own, through A's and B's cores of rank r, their top r "
              "principal components, random subspaces of rank r, and the whole stream (the ceiling)", digits=4)

# %% tags=["hide-input"] mystnb={"figure": {"caption": "For every stitch, the share of ordered pairs (A \u2192 B) whose stitched held-out accuracy reaches at least a given share of B's own: through the cores, the top principal components and random subspaces of the same rank, through the whole stream (the ceiling), and through the cores for the pairs that share their key set (dashed); the dotted line is the 0.99 target.", "name": "fig-09-stitch"}}
same = {k: keys[k[0]] == keys[k[1]] for k in stitch["core"]}                # does A use B's key set?
shares = np.linspace(0, 1, 201)
curves = {kind: list(scores.values()) for kind, scores in stitch.items()}
curves["core, same key set"] = [v for k, v in stitch["core"].items() if same[k]]
fig, ax = plt.subplots(figsize=(6.4, 3.4), layout="constrained")
for label, values in curves.items():
    if values:
        reached = (np.asarray(values)[:, None] >= shares).mean(0)             # (201,)
        ax.plot(shares, reached, ls="--" if "same" in label else "-", label=f"{label} ({len(values)} pairs)")
ax.axvline(0.99, color="black", ls=":", lw=1)
ax.set(xlabel="stitched accuracy as a share of B's own", ylabel="share of ordered pairs reaching it",
       xlim=(0, 1.02), ylim=(0, 1.02))
ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1))
figures.save(fig, "stitching")
plt.show()

# %% [markdown]
# {numref}`fig-09-stitch` sets the core stitch beside its nulls and its ceiling.
#
# ## Does stitching know the algorithm?
#
# Ordered pairs whose models share their exact key set against pairs whose key sets differ: the difference
# of the mean core-stitch scores, with a 95 % interval from resampling the models. Null: the same
# difference with the key sets shuffled among the models.

# %%
n_same_pairs = sum(same.values()) // 2
rng = np.random.default_rng(0)
if 0 < sum(same.values()) < len(same):
    difference, interval = mc.pair_difference(stitch["core"], same, n_boot=n_boot, seed=0)
    shuffled = []
    for _ in range(200):
        order = rng.permutation(members)
        shuffled_keys = {m: keys[o] for m, o in zip(members, order)}
        s = {k: shuffled_keys[k[0]] == shuffled_keys[k[1]] for k in stitch["core"]}
        if 0 < sum(s.values()) < len(s):
            shuffled.append(mc.pair_difference(stitch["core"], s, n_boot=1)[0])
    shuffled_difference = float(np.mean(shuffled)) if shuffled else None
else:
    difference, interval, shuffled_difference = None, None, None
print(f"{n_same_pairs} pair(s) of models share their key set, {len(same) // 2 - n_same_pairs} do not"
      + ("" if difference is None else f"; same − different: {difference:+.4f}, 95 % interval "
         f"{'—' if interval is None else f'[{interval[0]:+.4f}, {interval[1]:+.4f}]'}"))

# %% [markdown]
# ## Claims
#
# Every claim covers the pairs named before the run: every pair (or ordered pair) of the models that
# generalise. A claim over fewer than five says so.

# %%
COVERS = f"pair of independently trained models that generalise (the first {max_path_pairs} in seed order)"
STITCHED = "ordered pair of independently trained models that generalise"
if n_same_pairs < min_same_key_pairs:
    open_question = (f"only {n_same_pairs} pair(s) of models share their key set, {min_same_key_pairs} are needed; "
                     "more seeds (the `seeds` parameter) give more such pairs")
elif difference is None:
    open_question = "every pair of models shares its key set, so there is nothing to compare with"
else:
    open_question = None
claims.check("naive_barrier", barriers["naive"], at_least(0.2), covers=COVERS,
             statistic="barrier of the held-out accuracy on the straight line between the two models' weights",
             null=Null(f"the pair that shares its history (seed {parent_seed} trained on twice from epoch {spawn_epoch})",
                       round(spawn_barrier, 4)),
             why="the ACE paper's geometry (cores in nearly orthogonal subspaces) predicts that averaging fails")
claims.check("spawned_pair_connected", round(spawn_barrier, 4), at_most(0.05),
             statistic=f"barrier of the pair that shares its history (seed {parent_seed}, forked at epoch {spawn_epoch})",
             null=Null("the independently trained pairs", barriers["naive"]),
             undecided=None if spawn_acc.min() >= generalise_at else
             f"the continuations reach held-out accuracy {spawn_acc.min():.4f}, below generalise_at = {generalise_at}: "
             "two models that have not learnt the task say nothing about connectivity")
claims.report("weight_matched_barrier", barriers["weights"],
              statistic="barrier after permuting B's MLP units and heads to match A's weights (Git Re-Basin)")
claims.report("core_rotated_barrier", barriers["core"],
              statistic="barrier after rotating B's stream so that its core coordinates match A's, without matching units")
claims.check("core_aligned_connects", barriers["core + weights"], at_most(0.05), covers=COVERS,
             statistic="barrier after rotating B's stream so that its core coordinates match A's, then matching its "
                       "MLP units and heads to A's weights",
             null=[Null(f"a random rotation in place of the core alignment (best of {random_rotations})",
                        barriers["random + weights"]),
                   Null("the rotation that aligns as many top principal components", barriers["pca + weights"])])
claims.check("core_alignment_halves_barrier",
             {k: round(barriers["core + weights"][k] / max(barriers["weights"][k], 1e-9), 4) for k in barriers["core"]},
             at_most(0.5), covers=COVERS,
             statistic="barrier with the cores aligned before weight matching, as a share of weight matching's alone",
             null=Null(f"a random rotation (best of {random_rotations}) in place of the core alignment",
                       {k: round(barriers["random + weights"][k] / max(barriers["weights"][k], 1e-9), 4)
                        for k in barriers["core"]}))
claims.check("core_stitch_sufficient", {pair_label[k]: round(v, 4) for k, v in stitch["core"].items()}, at_least(0.99),
             covers=STITCHED,
             statistic="held-out accuracy stitched through the cores at the cut before the MLP, as a share of B's own",
             null=[Null("random subspaces of the same rank", {pair_label[k]: round(v, 4) for k, v in stitch["random"].items()}),
                   Null("the top principal components of the same rank",
                        {pair_label[k]: round(v, 4) for k, v in stitch["pca"].items()})])
claims.report("full_rank_stitch", {pair_label[k]: round(v, 4) for k, v in stitch["full"].items()},
              statistic="the ceiling: held-out accuracy stitched through the whole stream, as a share of B's own")
claims.check("same_keys_stitch_better", None if difference is None else round(difference, 4), at_least(0.05),
             statistic="mean core-stitch score of pairs sharing their key set minus that of pairs whose sets differ",
             interval=interval,
             null=Null("the key sets shuffled among the models (mean of 200 shuffles)",
                       None if shuffled_difference is None else round(shuffled_difference, 4)),
             undecided=open_question)
claims.check("alignment_preserves_function", round(max(function_error.values(), default=0.0), 8), at_most(1e-4),
             statistic="largest change of B's logits under the core rotation and unit matching, relative to their "
                       "largest value",
             no_null="numerical check")
claims.check("path_ends_are_the_models",
             round(max(max(abs(paths[("naive", a, b)][0][0] - test_acc[a]) for a, b in pairs),
                       max(abs(paths[("naive", a, b)][0][-1] - test_acc[b]) for a, b in pairs)), 8),
             at_most(1e-6), statistic="largest difference between a path's end and its model's held-out accuracy",
             no_null="numerical check")
claims.report("cost_seconds", {"training (all seeds)": round(train_seconds, 1),
                               **{k: round(float(np.mean(v)), 3) for k, v in seconds.items()},
                               "stitching, 4 subspaces": round(float(np.mean(stitch_seconds)), 3) if stitch_seconds else None},
              statistic="seconds of each method per pair on this run's device")
claims.write()
claims.table()
