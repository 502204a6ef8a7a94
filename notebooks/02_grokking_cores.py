# ---
# jupyter:
#   jupytext:
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
# # Grokking: cores crystallize, rotate and inflate
#
# **Question.** Transformers trained on $a + b \bmod p$ first memorise the training pairs and only
# much later generalise ("grokking", {cite}`power2022grokking`); the generalising solution is known
# to work with rotations in a few Fourier frequencies ({cite}`nanda2023progress`). What does the
# algorithmic core look like along the way? The ACE paper ({cite}`schiffman2026cores`, Section 4)
# reports that the core *crystallizes* at grokking, that the operator it implements moves onto the
# unit circle (a rotation $c \mapsto c + 1$), and that under continued weight decay the core
# *inflates*: the dimensions needed to break the model grow while the dimensions needed to run it
# stay flat, as more and more equivalent frequency modes are recruited, up to all
# $\lfloor p/2 \rfloor + 1$ of them. Without weight decay nothing of the sort happens.
#
# **Method.** One batched program trains every seed twice: with weight decay throughout, and in a
# branch that switches weight decay off at `fork_epoch`, before grokking. At checkpoints across
# training we run ACE at the last-token residual stream that the unembedding reads: extract on the
# training pairs, measure keep-only / remove accuracy on the held-out pairs (sufficient and
# necessary rank), and identify the operator by fitting $m_c A \approx m_{c+1 \bmod p}$ on the
# per-class mean core vectors; an eigenvalue is on the unit circle if $||\lambda| - 1| \le \sin(\pi/p)$
# and its frequency is $k = \operatorname{round}(p\,|\arg\lambda| / 2\pi)$.
#
# The quick defaults keep the paper's modulus (p = 53) but a 4× narrower model, full-batch steps and
# a larger learning rate and weight decay, so that grokking happens within CPU minutes;
# `notebooks/params/paper/02_grokking_cores.yaml` holds the paper's settings (d_model 128, batch
# 512, lr 1e-3, ω = 1, 20,000 epochs). The models are pre-LayerNorm (`norm`): without LayerNorm the
# narrow quick-profile models trained unstably in our trials (training accuracy collapsing and
# recovering), with it every seed we tried grokked. The cut is the residual stream after the final
# LayerNorm, which the unembedding reads linearly.

# %% tags=["parameters"]
p = 53  # range: [3, inf); a prime
train_frac = 0.5  # range: (0, 1)
seeds = [0, 1]  # length: 1 or more; range: [0, inf)
n_layers = 2  # range: [1, inf)
d_model = 32  # range: [1, inf)
n_heads = 4  # range: [1, inf)
d_mlp = 128  # range: [1, inf)
norm = "pre"  # one of: pre, post, none
lr = 2e-3  # range: (0, inf)
betas = [0.9, 0.98]  # length: 2; range: [0, 1)
weight_decay = 2.0  # range: [0, inf)
batch_size = 0  # range: [0, inf); 0: full batch
epochs = 2000  # range: [1, inf)
fork_epoch = 250  # range: [0, inf)
n_checkpoints = 25  # range: [1, inf)
energy_threshold = 0.99  # range: (0, 1]
data_seed = 0  # range: [0, inf)
device = "auto"

# %%
import numpy as np
import torch
import matplotlib.pyplot as plt

from corekit import ace, plots
from corekit.claims import Claims
from corekit.curves import grokking_step
from corekit.device import default_device
from corekit.models import BatchedTransformer, TransformerConfig
from corekit.tasks.modular import modular_addition
from corekit.train import Dataset, steps_per_epoch, train_ensemble

plots.use_style()
dev = default_device(device)
task = modular_addition(p, train_frac, seed=data_seed)
if not 0 < fork_epoch < epochs:
    raise ValueError(f"fork_epoch must lie inside the run (0 < fork_epoch < epochs={epochs}), got {fork_epoch}")
claims = Claims("02_grokking_cores", resolved={"device": str(dev)})

# %% [markdown]
# ## Training both branches at once
#
# Models $0 \dots S-1$ keep weight decay $\omega$; models $S \dots 2S-1$ are the same seeds with
# weight decay switched to 0 at `fork_epoch`. `batch_size = 0` means full batch (one step per epoch).

# %%
x, labels = task.tokens(), task.labels
train_set = Dataset(x[task.train_idx], labels[task.train_idx])
test_set = Dataset(x[task.test_idx], labels[task.test_idx])
S = len(seeds)
config = TransformerConfig(vocab=p + 1, n_ctx=3, d_model=d_model, n_heads=n_heads, d_mlp=d_mlp,
                           n_layers=n_layers, norm=norm, n_out=p)
model = BatchedTransformer(config, seeds + seeds).to(dev)
epoch_steps = steps_per_epoch(len(train_set), batch_size)
steps, fork_step = epochs * epoch_steps, fork_epoch * epoch_steps
checkpoints = sorted({int(s) for s in np.linspace(0, steps, n_checkpoints + 1)} | {fork_step})
history = train_ensemble(model, train_set, test_set, steps=steps, batch_size=batch_size or None, lr=lr,
                         betas=tuple(betas), weight_decay={0: weight_decay, fork_step: [weight_decay] * S + [0.0] * S},
                         eval_every=max(1, steps // 100), snapshot_steps=checkpoints)
test_acc, train_acc = history.curve("test_acc"), history.curve("train_acc")      # (steps, 2S)

# %% [markdown]
# The grokking point is the grokking step (`corekit.curves.grokking_step`: the first evaluated step
# with test accuracy ≥ 0.99) of the weight-decay ensemble taken as a whole: the first checkpoint at
# which every weight-decay model has reached it.

# %%
ckpt_test_acc = torch.stack([test_acc[history.steps.index(s)] for s in checkpoints])   # (C, 2S)
grok_step = grokking_step(checkpoints, ckpt_test_acc[:, :S].min(1).values.tolist())
epoch = lambda step: step / epoch_steps  # noqa: E731

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=(8, 3.6))
for m in range(2 * S):
    style = "-" if m < S else "--"
    branch = f"ω={weight_decay}" if m < S else "ω→0"
    ax.plot(history.steps, test_acc[:, m], style, label=f"test, seed {seeds[m % S]}, {branch}")
ax.plot(history.steps, train_acc[:, :S].mean(1), color="0.4", lw=1, label="train (mean, ω branch)")
ax.axvline(fork_step, color="0.6", ls=":", label="fork (ω→0)")
if grok_step is not None:
    ax.axvline(grok_step, color="black", ls="--", lw=1, label="grokking")
ax.set(xlabel="step", ylabel="accuracy", title=f"a + b mod {p}")
ax.legend(ncol=2)
plots.savefig(fig, "accuracy")
plt.show()
print("grokking step:", grok_step)

# %% [markdown]
# ## ACE at every checkpoint
#
# `ace.last_token_summary` extracts each model's core on the training pairs, finds its energy,
# sufficient and necessary ranks from keep-only / remove ablations on the held-out pairs, and fits the
# shift operator on the per-class means of the core coordinates over all $p^2$ pairs.

# %%
dev_data = [t.to(dev) for t in (train_set.x, test_set.x, test_set.y[:, 0], x, labels)]
summaries = []
for step in checkpoints:
    model.load_state_dict(history.snapshots[step])
    summaries.append(ace.last_token_summary(model, *dev_data, energy_threshold=energy_threshold))
summary = {key: [s[key] for s in summaries] for key in summaries[0]}                 # key -> (C, 2S)
energy_r, sufficient_r, necessary_r = (np.array(summary[k], dtype=float) for k in ("energy", "sufficient", "necessary"))
circle, modes = np.array(summary["circle"]), np.array(summary["modes"])

# %% [markdown]
# ## Crystallization and inflation of the core
#
# Energy rank, sufficient rank (keep-only within 0.001 of the model) and necessary rank (removal
# down to $2/p$) at each checkpoint; solid lines keep weight decay, dashed lines lost it at the fork.
# A necessary rank of 0 means the model was not above $2/p$ on held-out pairs to begin with.

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, 3, figsize=(14, 3.6), sharey=True)
for ax, values, name in zip(axes, (energy_r, sufficient_r, necessary_r), ("energy", "sufficient", "necessary")):
    ax.plot(checkpoints, values[:, :S].mean(1), "o-", ms=3, label=f"ω={weight_decay}")
    ax.plot(checkpoints, values[:, S:].mean(1), "s--", ms=3, label="ω→0 at fork")
    if grok_step is not None:
        ax.axvline(grok_step, color="black", ls="--", lw=1, label="grokking")
    ax.set(xlabel="step", title=f"{name} rank (mean over seeds)")
axes[0].set_ylabel("core dimensions")
axes[0].legend()
plots.savefig(fig, "core_ranks")
plt.show()

# %% [markdown]
# ## The operator rotates onto the unit circle
#
# Eigenvalues of the fitted shift operator for the first seed, before grokking, at grokking and at
# the end of training (both branches), and over training the fraction on the unit circle and the
# number of distinct frequency modes out of $\lfloor p/2 \rfloor + 1$.

# %%
i_grok = checkpoints.index(grok_step) if grok_step is not None else len(checkpoints) - 1
i_before = max(0, i_grok - 1)

# %% tags=["hide-input"]
panels = [(i_before, 0, "before grokking"), (i_grok, 0, "at grokking"), (len(checkpoints) - 1, 0, f"final, ω={weight_decay}"),
          (len(checkpoints) - 1, S, "final, ω→0")]
fig, axes = plt.subplots(1, 4, figsize=(15, 4))
for ax, (i, m, title) in zip(axes, panels):
    plots.complex_plane(ax)
    e = summary["eigs"][i][m]
    ax.scatter(e.real, e.imag, s=14, color="C1")
    ax.set_title(f"{title} (step {checkpoints[i]})\n{len(e)} eigenvalues, {circle[i, m]:.0%} on circle")
plots.savefig(fig, "operator_eigenvalues")
plt.show()

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.4))
ax1.plot(checkpoints, circle[:, :S].mean(1), "o-", ms=3, label=f"ω={weight_decay}")
ax1.plot(checkpoints, circle[:, S:].mean(1), "s--", ms=3, label="ω→0")
ax1.set(xlabel="step", ylabel="fraction of eigenvalues", title="on the unit circle")
ax2.plot(checkpoints, modes[:, :S].mean(1), "o-", ms=3, label=f"ω={weight_decay}")
ax2.plot(checkpoints, modes[:, S:].mean(1), "s--", ms=3, label="ω→0")
ax2.axhline(p // 2 + 1, color="black", ls=":", lw=1, label="⌊p/2⌋+1")
ax2.set(xlabel="step", ylabel="distinct frequencies", title="frequency modes")
for ax in (ax1, ax2):
    if grok_step is not None:
        ax.axvline(grok_step, color="black", ls="--", lw=1)
    ax.legend()
plots.savefig(fig, "unit_circle_and_modes")
plt.show()

# %% [markdown]
# ## Claims
#
# "At grokking" is the grokking checkpoint, "before" the checkpoint just before it, "final" the last
# checkpoint; values are means over the weight-decay seeds unless a list is shown. On the quick
# profile the models train only about as long again after grokking as before it (the paper: about
# 20 times as long), so inflation has barely begun and the fitted operator is still only
# approximately a rotation (its eigenvalues sit just inside the circle); the paper profile is the
# test of the paper's numbers.

# %%
final = len(checkpoints) - 1
has_grok = grok_step is not None
nec_growth = (necessary_r[final, :S] / np.maximum(necessary_r[i_grok, :S], 1)).mean() if has_grok else float("nan")
suf_growth = (sufficient_r[final, :S] / np.maximum(sufficient_r[i_grok, :S], 1)).mean() if has_grok else float("nan")
claims.add("grok_epoch", epoch(grok_step) if has_grok else None, paper="reported",
           target=f"every ω model ≥ 0.99 test accuracy within {epoch(steps):g} epochs", passed=has_grok)
claims.add("rank_at_grok", energy_r[i_grok, :S].tolist() if has_grok else None, paper="≈ 15 (p = 53)",
           target="reported: energy rank at the grokking checkpoint")
claims.add("unit_circle_fraction_after", round(float(circle[final, :S].mean()), 3), paper="≈ 1",
           target="≥ 0.9 at the final checkpoint", passed=bool(circle[final, :S].mean() >= 0.9))
claims.add("unit_circle_fraction_before", round(float(circle[i_before, :S].mean()), 3), paper="< after",
           target="reported: checkpoint before grokking")
claims.add("necessary_rank_growth", round(float(nec_growth), 2), paper="≈ 4 (15 → 60)",
           target="reported: necessary rank final / at grokking", passed=None)
claims.add("sufficient_rank_growth", round(float(suf_growth), 2), paper="≈ 1",
           target="reported: sufficient rank final / at grokking", passed=None)
claims.add("modes_final", modes[final, :S].tolist(), paper=p // 2 + 1,
           target=f"reported: distinct frequency modes at the end, out of ⌊p/2⌋+1 = {p // 2 + 1}")
claims.add("wd0_modes_final", modes[final, S:].tolist(), paper="no inflation",
           target="reported: the same for the ω→0 branch (should stay below the ω branch)",
           passed=bool(modes[final, S:].mean() < modes[final, :S].mean()))
claims.write()
claims.table()
