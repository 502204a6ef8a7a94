# ---
# jupyter:
#   corekit:
#     headline_caption: Leading eNTK eigenvectors of the MLP against the Fourier features
#       of the inputs and of their sum.
#     headline_figure: eigenvector_features
#     paper: eNTK
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
# # eNTK features of an MLP on modular addition
#
# **Question.** A network trained on $a + b \bmod p$ ends up computing with Fourier features
# ({cite}`nanda2023progress`). Can we read those features off the *empirical neural tangent
# kernel* ({cite}`jacot2018ntk`) of the trained network, without knowing what to look for?
#
# **Method** ({cite}`lin2025entk`, Section 4). A one-hidden-layer MLP
# $y = W_2\,(W_1 x/\sqrt{2p})^{2}/\text{width}$ (no biases, $\mathcal N(0,1)$ initialisation, $x$ the
# one-hot codes of $a$ and $b$ concatenated) is trained full batch with AdamW on the mean squared error
# to one-hot targets. Over all $p^2$ inputs we compute, for each weight matrix, the eNTK
# $K_{cc'}(x, x') = \sum_\mu \partial_\mu f_c(x)\,\partial_\mu f_{c'}(x')$ restricted to that matrix,
# average its diagonal class blocks ($\tfrac1p\sum_c K_{cc}$), and add the two layers. The top
# eigenvectors of this $p^2 \times p^2$ kernel are functions on the input grid; we compare their spans
# with Fourier features of $a$ and $b$ ($\cos\omega_k a, \sin\omega_k a, \cos\omega_k b, \sin\omega_k b$),
# of the sum $a+b$ and of the difference $a-b$, $\omega_k = 2\pi k/p$, $k = 1\dots\lfloor p/2\rfloor$,
# with the alignment $\|Q^\top F\|_F^2 / \min(d, m)$ of orthonormal bases ($F$ centred; 1 = one
# span contains the other).
#
# The paper finds two *spectral cliffs* after a constant top eigenvector: the first
# $4\lfloor p/2\rfloor$ eigenvectors span the features of $a$ and $b$, the next $4\lfloor p/2\rfloor$
# the sum and difference features, and the alignment grows during training at the time the network
# generalises. Every number below is computed in this run; any prime `p` can be passed
# (`corekit run 05_entk_mlp_modular -p p 31`).

# %% tags=["parameters"]
p: int = 29  # range: [3, inf); a prime
width: int = 512  # range: [1, inf)
train_frac: float = 0.7  # range: (0, 1)
lr: float = 0.05  # range: (0, inf)
weight_decay: float = 0.01  # range: [0, inf)
betas: list[float] = [0.9, 0.999]  # length: 2; range: [0, 1)
epochs: int = 500  # range: [1, inf)
seed: int = 0  # range: [0, inf)
data_seed: int = 0  # range: [0, inf)
top_k: int = 200  # range: [1, inf); eigenpairs; at least 8⌊p/2⌋ + 2 are computed (both cliffs and the one after)
eval_every: int = 1  # range: [1, inf)
n_log_snapshots: int = 12  # range: [0, inf)
n_dense_snapshots: int = 12  # range: [0, inf)
device: str = "auto"
cpu_threads: int = 1  # range: [0, inf); CPU threads (0: as many as cores are free when the run starts); small models gain nothing from more
output_dir: str = ""  # path; empty: the claims table and figures stay in the executed notebook only; else NAME.metrics.json and figures/NAME/ go there

# %%
import matplotlib.pyplot as plt
import numpy as np
import torch

from corekit import entk, fourier, subspaces
from corekit.chapters import entk_mlp_modular
from corekit.chapters.entk_mlp_modular import alignment_dynamics, cliff_alignments, initial_cliffs, mlp_spectrum
from corekit.chapters.entk_mlp_modular import random_block_q99, train_onehot_mse
from corekit.models import BatchedQuadraticMLP
from corekit.plots import panel_grid
from corekit.runs.session import setup
from corekit.tables import table
from corekit.tasks.modular import modular_addition

claims, figures, dev = setup("05_entk_mlp_modular", globals())
n_cliff = 4 * (p // 2)                          # expected size of each cliff
n_eig = max(top_k, 2 * n_cliff + 2)            # both cliffs and the eigenvalue after them, at least

# %% [markdown]
# ## Training
#
# Full batch: one AdamW step per epoch on the training pairs. An input is the one-hot code of $(a, b)$, so its
# first layer is the sum of two rows of $W_1$: `train_onehot_mse` gathers those rows and scatters the gradient back
# to them instead of multiplying by zeros (the same AdamW steps as autograd's, up to the order of float sums;
# tested against `train_mse` in float64). The parameters are saved at every
# evaluation (every `eval_every` epochs); the snapshots whose kernels we study at the end are chosen
# from these after training, once the test-accuracy curve ({numref}`fig-05-training`) shows when the
# network generalises.

# %%
task = modular_addition(p, train_frac, data_seed)
X = task.one_hot().to(dev)                                              # (p², 2p), row a·p + b
labels = task.labels.to(dev)
model = BatchedQuadraticMLP(2 * p, width, p, seeds=[seed]).to(dev)
history = train_onehot_mse(model, X[task.train_idx], labels[task.train_idx], X[task.test_idx], labels[task.test_idx],
                           steps=epochs, lr=lr, weight_decay=weight_decay, betas=tuple(betas), eval_every=eval_every,
                           snapshot_steps=range(0, epochs + 1, eval_every), progress=False)
test_acc = history.curve("test_acc")[:, 0].numpy()
train_acc = history.curve("train_acc")[:, 0].numpy()
print(f"final train accuracy {train_acc[-1]:.4f}, test accuracy {test_acc[-1]:.4f}")

# %% tags=["hide-input"] mystnb={"figure": {"caption": "MSE loss (left) and accuracy on a + b mod p (right), on the training and held-out pairs: the late rise of the held-out accuracy is grokking.", "name": "fig-05-training"}}
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.4))
ax1.semilogy(history.steps, history.curve("train_loss")[:, 0], label="train")
ax1.semilogy(history.steps, history.curve("test_loss")[:, 0], label="test")
ax1.set(xlabel="epoch", ylabel="MSE", title="Loss")
ax1.legend()
ax2.plot(history.steps, train_acc, label="train")
ax2.plot(history.steps, test_acc, label="test")
ax2.set(xlabel="epoch", ylabel="accuracy", title=f"a + b mod {p}")
ax2.legend()
figures.save(fig, "training_curves")
plt.show()

# %% [markdown]
# ## The kernel and its spectrum
#
# Per-layer kernels by Jacobian contraction (input Gram ∘ output-gradient Gram for each weight
# matrix), class-averaged, summed; top `top_k` eigenpairs by dense `eigh` (the kernel is
# $p^2 \times p^2$). The cliffs are *detected*: the two largest ratios $\lambda_{i-1}/\lambda_i$ after
# the top eigenvalue ({numref}`fig-05-spectrum`).

# %%
eig = mlp_spectrum(model, X, n_eig)                                     # float64, vectors (p², n_eig)
edge1, edge2 = entk.cliff_edges(eig.values, n_edges=2, start=1)
cliff1_size, cliff2_size = edge1 - 1, edge2 - edge1
constant_overlap = subspaces.alignment(eig.vectors[:, :1], torch.ones(p * p, 1, dtype=torch.float64),
                                     centre_features=False)
values = eig.values.cpu().numpy()
print(f"eigenvector 0 · constant: {constant_overlap:.4f}; detected cliff sizes {cliff1_size}, {cliff2_size} "
      f"(4⌊p/2⌋ = {n_cliff}); largest ratios λ{edge1 - 1}/λ{edge1} = {values[edge1 - 1] / values[edge1]:.3f}, "
      f"λ{edge2 - 1}/λ{edge2} = {values[edge2 - 1] / values[edge2]:.3f}")

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Eigenvalues of the eNTK over all p\u00b2 inputs, with the two cliffs the paper predicts shaded (blue, orange) and the edges this run detects (dashed).", "name": "fig-05-spectrum"}}
fig, ax = plt.subplots(figsize=(7, 3.6))
ax.semilogy(np.arange(n_eig), values, ".", ms=4, color="black")
ax.axvspan(0.5, n_cliff + 0.5, color="#0072B2", alpha=0.12, label=f"expected cliff 1: 1…{n_cliff}")
ax.axvspan(n_cliff + 0.5, 2 * n_cliff + 0.5, color="#D55E00", alpha=0.12,
           label=f"expected cliff 2: {n_cliff + 1}…{2 * n_cliff}")
for e in (edge1, edge2):
    ax.axvline(e - 0.5, color="black", ls="--", lw=1)
ax.set(xlabel="eigenvalue index", ylabel="λ", title=f"eNTK spectrum (detected edges at {edge1}, {edge2})")
ax.legend()
figures.save(fig, "spectrum")
plt.show()

# %% [markdown]
# ## What the eigenvectors are
#
# Each eigenvector is a function on the $p \times p$ grid of inputs. Two from each cliff are drawn over
# $(a, b)$ in {numref}`fig-05-eigenvectors`: the first cliff's vary along one input only, the second
# cliff's along the diagonals $a + b$ or $a - b$. {numref}`fig-05-features` gives every eigenvector's
# overlap with each feature family
# ($\|F_o^\top v\|^2$, $F_o$ an orthonormal basis of the family).

# %%
F_ab = fourier.fourier_basis(p, "ab")
F_sum = fourier.fourier_basis(p, "sum")
F_diff = fourier.fourier_basis(p, "diff")
shown = 2 * n_cliff + 8
profile = {name: subspaces.alignment_profile(eig.vectors[:, :shown], F).cpu().numpy()
           for name, F in (("a, b", F_ab), ("a + b", F_sum), ("a − b", F_diff))}

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Eigenvectors 1 and 2 (first cliff) and the first two of the second cliff as p \u00d7 p images over (a, b): look for waves along a or along b in the first pair and along the diagonals a \u00b1 b in the second.", "name": "fig-05-eigenvectors"}}
fig, axes = panel_grid(4, ncols=2, panel=(4.2, 3.6))
for ax, i in zip(axes, (1, 2, n_cliff + 1, n_cliff + 2)):
    ax.imshow(eig.vectors[:, i].reshape(p, p).cpu().numpy(), cmap="RdBu_r")
    ax.set(title=f"eigenvector {i}", xlabel="b", ylabel="a")
    ax.grid(False)
figures.save(fig, "eigenvectors")
plt.show()

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Overlap of each leading eigenvector with the Fourier features of a and b, of a + b, and of a \u2212 b; the dashed lines are the detected cliff edges.", "name": "fig-05-features"}}
fig, ax = plt.subplots(figsize=(8, 3.4))
for name, values_ in profile.items():
    ax.plot(np.arange(shown), values_, ".-", ms=3, lw=0.8, label=name)
ax.axvline(edge1 - 0.5, color="black", ls="--", lw=1)
ax.axvline(edge2 - 0.5, color="black", ls="--", lw=1)
ax.set(xlabel="eigenvector index", ylabel="overlap with the family", title="Which features each eigenvector carries")
ax.legend()
figures.save(fig, "eigenvector_features")
plt.show()

# %% [markdown]
# ## Alignment of the cliffs with Fourier features
#
# Cliff 1 is eigenvectors $1 \dots 4\lfloor p/2\rfloor$, cliff 2 the next $4\lfloor p/2\rfloor$ (the
# paper's definition, used whatever sizes were detected above).
#
# Two references for each score, which the claims below use as nulls: the same kernel, cliffs and
# scores for the network at initialisation (the parameters saved at epoch 0, in float64 as above), and
# random blocks of the same number of orthonormal directions in $\mathbb{R}^{p^2}$ (the 99th percentile
# of 200 draws).

# %%
align = cliff_alignments(eig.vectors, n_cliff, F_ab, F_sum, F_diff)
random_level = n_cliff / (p * p)            # expected fraction for a random block of the same size
init = initial_cliffs(model, history.snapshots[0], X, n_eig, n_cliff, F_ab, F_sum, F_diff)
random_q99 = random_block_q99(p * p, n_cliff, {"ab": F_ab, "sum": F_sum, "diff": F_diff}, 200, seed=data_seed)
print(f"at initialisation the detected edges are {init['edge1']}, {init['edge2']} (cliff sizes {init['cliff1_size']}, "
      f"{init['cliff2_size']}); a random block of {n_cliff} directions scores about {random_level:.3f} on average")
table([{"cliff vs features": name, "trained": align[key], "directions matched": f"{align[key] * size:.2f} / {size}",
        "at initialisation": init[key], "random blocks, 99th percentile": random_q99[key]}
       for name, key, size in (("cliff 1 vs a, b", "ab", n_cliff), ("cliff 2 vs a + b", "sum", n_cliff // 2),
                               ("cliff 2 vs a − b", "diff", n_cliff // 2))],
      caption="Alignment of each cliff with its Fourier family: trained, at initialisation, and random blocks", digits=4)

# %% [markdown]
# ## Alignment during training
#
# Kernel snapshots are chosen from the parameters saved in this run: `n_log_snapshots` log-spaced
# over the whole run and `n_dense_snapshots` evenly spaced over $[0.5\,t_\text{grok}, 1.5\,t_\text{grok}]$,
# where $t_\text{grok}$ is the epoch at which the test accuracy rises fastest. At every snapshot we compute the same kernel
# (float32 here: only eigenvector spans are compared) and score the cliffs at their expected
# positions: cliff 1 against the $a, b$ features, cliff 2 against the sum and difference features
# together. $t_\text{peak}$ is the epoch where the cliff-2 alignment rises fastest (the argmax of its
# derivative over the snapshots); {numref}`fig-05-dynamics` sets both beside the held-out accuracy.
#
# The first cliff is aligned from the start: on one-hot inputs the kernel of the untrained network
# is, on average over its random weights, a function of $x\cdot x' = [a = a'] + [b = b']$, whose
# leading eigenvectors after the constant are functions of $a$ alone or $b$ alone. What training
# builds is the second cliff, so the dynamics claims are read from it.

# %%
F_sd = fourier.fourier_basis(p, "sum_diff")
dyn = alignment_dynamics(model, history, test_acc, X, n_cliff, F_ab, F_sd, n_log_snapshots, n_dense_snapshots, dev)
snap_epochs, snap_ab, snap_sd = dyn.epochs, dyn.ab, dyn.sd
t_grok, t_95, t_peak, spacing = dyn.t_grok, dyn.t_95, dyn.t_peak, dyn.spacing
t_peak_ab = dyn.t_peak_ab                                   # the same timing for cliff 1, aligned from the start
reach = "never" if t_95 is None else f"epoch {t_95:.0f}"
print(f"{len(snap_epochs)} snapshots; test accuracy rises fastest at epoch {t_grok:.0f} (first ≥ 0.95: {reach}); "
      f"cliff-2 alignment rises fastest at epoch {t_peak:.0f} (snapshot spacing there {spacing:.0f}); "
      f"cliff-1 alignment at epoch {t_peak_ab:.0f}")

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Left: alignment of the first cliff with the a, b features and of the second cliff with the a \u00b1 b features during training, beside the held-out accuracy. Right: their rates of change, each scaled to its maximum; the dashed line marks the fastest rise of the second cliff's alignment, the dotted line grokking.", "name": "fig-05-dynamics"}}
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.6))
ax1.plot(snap_epochs, snap_ab, "o-", ms=3, label="cliff 1 vs a, b")
ax1.plot(snap_epochs, snap_sd, "s-", ms=3, label="cliff 2 vs a ± b")
ax1.plot(history.steps, test_acc, color="0.5", lw=1, label="test accuracy")
ax1.set(xlabel="epoch", ylabel="alignment / accuracy", title="Alignment during training")
ax1.legend()
rate, acc_rate = np.gradient(snap_sd, snap_epochs), np.gradient(test_acc, history.steps)
ax2.plot(snap_epochs, rate / max(rate.max(), 1e-12), "s-", ms=3, label="d/dt cliff-2 alignment (scaled)")
ax2.plot(history.steps, acc_rate / max(acc_rate.max(), 1e-12), color="0.5", lw=1, label="d/dt test accuracy (scaled)")
ax2.axvline(t_peak, color="#D55E00", ls="--", lw=1)
ax2.axvline(t_grok, color="0.3", ls=":", lw=1)
ax2.set(xlabel="epoch", ylabel="rate / its maximum", title="Derivatives")
ax2.legend()
for ax in (ax1, ax2):
    ax.set_xscale("symlog", linthresh=10)
    ax.set_xlim(left=0)
figures.save(fig, "alignment_dynamics")
plt.show()

# %% [markdown]
# ## Claims
#
# Targets from the paper ({cite}`lin2025entk`) and the issue; a failing row is shown as failing,
# with its measured value. The "paper" column holds values printed in the paper (for p = 29); the
# first cliff's alignment is not printed there, and 55.16 / 56 is what the authors' code gives, so
# it is labelled as such. `entk_mlp_modular.claims` decides every row; each is tested against a null,
# the same statistic where the claimed effect is absent, and passes only when that null fails its bound:
#
# - the two cliff sizes (4⌊p/2⌋ each) against the kernel at initialisation: for the first cliff, the
#   blocks that end at *either* of its two detected edges, so that an edge after eigenvalue 4⌊p/2⌋ that is
#   there before training counts against the claim, whichever ratio the detector ranks first;
# - the three cliff alignments against the kernel at initialisation and against random blocks of the same
#   size;
# - the timing claim (the cliff-2 alignment rises fastest near grokking, in units of the tolerance) against
#   the same timing read from cliff 1, which is aligned from the start; it needs a network that
#   generalises, and without one it is undecided;
# - "weak at initialisation" (the cliff-2 alignment at the first snapshot as a fraction of its last
#   value, at most 0.3) against the same fraction for cliff 1, an alignment training does not build, and
#   at the first snapshot of the network that generalises (a check, not a test of the paper: any random
#   initialisation satisfies it, so it is never counted as the paper reproduced);
# - the held-out accuracy the claims presuppose (a precondition) against the network at initialisation.
#
# On one-hot inputs the first cliff is a block of any first-layer kernel (see above), so its two rows
# test nothing that training builds; the table says whether their nulls pass.

# %%
findings = entk_mlp_modular.Findings(p=p, edges=(edge1, edge2), align=align, init=init, random_q99=random_q99,
                                     dynamics=dyn, test_acc=test_acc, steps=history.steps)
claims.add(*entk_mlp_modular.claims(findings))
claims.write()
claims.table()
