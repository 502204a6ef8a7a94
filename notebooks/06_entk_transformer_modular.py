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
# # eNTK features of a transformer on modular addition
#
# **Question.** A one-layer transformer that groks $a + b \bmod p$ uses a few *key frequencies*
# $\omega_k = 2\pi k/p$, different for every seed ({cite}`nanda2023progress`). Do the eigenvectors of
# each layer's empirical NTK find those features, and the *right* ones for that layer: the inputs
# $\cos\omega_k a + \cos\omega_k b$ where the model reads $a$ and $b$, the answer
# $\cos\omega_k(a+b)$ where it writes the logits? And does the alignment appear when the model groks?
#
# **Method** ({cite}`lin2025entk`, Section 4). A 1-layer transformer (no LayerNorm, no biases, 4 heads)
# reads `a b =` and predicts $a+b \bmod p$ at the last position. After training we find its key
# frequencies from the Fourier power of the token embedding. For each parameter tensor we compute the
# eNTK over all $p^2$ inputs, flattened as the mean over all class pairs,
# $\bar K(x, x') = \frac{1}{p^2}\sum_{c,c'} K_{cc'}(x, x')$ (the eNTK of $\frac1p\sum_c f_c$), sum the
# tensors of each layer (attention: $W_Q, W_K, W_V$; MLP-in: $W_{in}$; MLP-out: $W_{out}$;
# unembedding: $W_U$), take the top 40 eigenvectors, and measure their alignment
# $\|Q^\top F\|_F^2/\min(d, m)$ with the Fourier features at the key frequencies ($F$ centred).
#
# **Training settings** are the paper's: AdamW with lr $3\cdot10^{-4}$, the default betas
# $(0.9, 0.999)$, weight decay 1, batch 64, 50 % of the pairs for training, 4000 epochs, and the
# initialisation scales of the authors' code (after {cite}`nanda2023progress`: every matrix
# $\mathcal N(0, 1/d_\text{model})$, the unembedding $\mathcal N(0, 1/d_\text{vocab})$). The paper
# shows seed 2; we train seeds 2 and 3 together (one batched program) and test every claim on each.
# Our seed 2 is not the paper's model: the same seed number draws other weights and another split in
# this library. Training both seeds for 4000 epochs takes about three minutes of one CPU core (about
# 6 ms per optimizer step of the two models together), so the quick defaults are the paper's
# settings; the paper profile only computes kernels on more snapshots.

# %% tags=["parameters"]
p = 29  # range: [3, inf); a prime
d_model = 64  # range: [1, inf)
n_heads = 4  # range: [1, inf)
d_mlp = 256  # range: [1, inf)
train_frac = 0.5  # range: (0, 1)
lr = 3e-4  # range: (0, inf)
weight_decay = 1.0  # range: [0, inf)
betas = [0.9, 0.999]  # length: 2; range: [0, 1)
batch_size = 64  # range: [1, inf)
epochs = 4000  # range: [1, inf)
seeds = [2, 3]  # length: 1 or more; range: [0, inf)
data_seed = 0  # range: [0, inf)
init = "nanda"  # one of: nanda, fan_in; the authors' initialisation scales, or 1/sqrt(fan_in)
top_k = 40  # range: [1, inf)
eval_every_epochs = 10  # range: [1, inf)
n_log_snapshots = 10  # range: [0, inf)
n_dense_snapshots = 10  # range: [0, inf)
smooth_window = 5  # range: [1, inf)
device = "auto"
cpu_threads = 1  # range: [0, inf); torch threads on a CPU (0: torch default); small models gain nothing from more

# %%
import numpy as np
import torch
import matplotlib.pyplot as plt

from corekit import entk, fourier, plots
from corekit.claims import Claims
from corekit.curves import first_step_reaching, grid_spacing, snapshot_schedule, steepest_rise
from corekit.device import default_device
from corekit.models import BatchedTransformer, TransformerConfig
from corekit.tasks.modular import check_modulus, modular_addition
from corekit import train
from corekit.train import Dataset, train_ensemble

plots.use_style()
p = check_modulus(p)
if not 8 <= top_k <= p * p:
    raise ValueError(f"top_k must be in 8..{p * p}, got {top_k}")
if not seeds or len(set(seeds)) != len(seeds):
    raise ValueError(f"seeds must be a non-empty list of distinct integers, got {seeds!r}")
dev = default_device(device)
if dev.type == "cpu" and cpu_threads:
    torch.set_num_threads(cpu_threads)   # extra threads only spin on tiny ops, badly on a busy machine
claims = Claims("06_entk_transformer_modular", resolved={"device": str(dev)})

# %% [markdown]
# ## Training
#
# Both seeds train as one batched program, each with its own batch order. The parameters are saved
# at every evaluation (every `eval_every_epochs` epochs); the snapshots whose kernels we study are
# chosen from these after training, once the test-accuracy curve shows where grokking happens.

# %%
task = modular_addition(p, train_frac, data_seed)
tokens = task.tokens()                                                   # (p², 3): a, b, "=" (token p)
train_set = Dataset(tokens[task.train_idx], task.labels[task.train_idx])
test_set = Dataset(tokens[task.test_idx], task.labels[task.test_idx])
config = TransformerConfig(vocab=p + 1, n_ctx=3, d_model=d_model, n_heads=n_heads, d_mlp=d_mlp, n_layers=1,
                           norm="none", bias=False, n_out=p, init=init)
model = BatchedTransformer(config, seeds=seeds).to(dev)
steps_per_epoch = train.steps_per_epoch(len(train_set), batch_size)
eval_every = eval_every_epochs * steps_per_epoch
history = train_ensemble(model, train_set, test_set, steps=epochs * steps_per_epoch, batch_size=batch_size, lr=lr,
                         weight_decay=weight_decay, betas=tuple(betas), eval_every=eval_every,
                         snapshot_steps=range(0, epochs * steps_per_epoch + 1, eval_every), progress=False)
epoch_axis = np.asarray(history.steps) / steps_per_epoch
test_acc = history.curve("test_acc").numpy()                             # (evaluations, seeds)
train_acc = history.curve("train_acc").numpy()

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, len(seeds), figsize=(5 * len(seeds), 3.4), squeeze=False)
for ax, (i, seed) in zip(axes[0], enumerate(seeds)):
    ax.plot(epoch_axis, train_acc[:, i], label="train")
    ax.plot(epoch_axis, test_acc[:, i], label="test")
    ax.set(xlabel="epoch", ylabel="accuracy", title=f"seed {seed}: a + b mod {p}")
    ax.legend()
plots.savefig(fig, "training_curves")
plt.show()

# %%
for i, seed in enumerate(seeds):
    print(f"seed {seed}: final train accuracy {train_acc[-1, i]:.4f}, test accuracy {test_acc[-1, i]:.4f}")

# %% [markdown]
# ## Key frequencies
#
# The Fourier power of the embedding rows of the $p$ number tokens, per frequency; the key frequencies
# are those above the largest drop in the sorted powers. Their share of the non-constant power is
# compared with a null: the share of the same number of strongest frequencies in the *initial*
# embedding of the same seed.

# %%
W_E = model.p("W_E")[:, :p].detach().cpu()                              # (seeds, p, d_model)
W_E_init = history.snapshots[0]["params.W_E"][:, :p]
keys = [fourier.key_frequencies(W) for W in W_E]
key_share = [fourier.key_frequency_fraction(W, k) for W, k in zip(W_E, keys)]
null_share = [fourier.top_frequency_share(W, len(k)) for W, k in zip(W_E_init, keys)]
for seed, k, share, null in zip(seeds, keys, key_share, null_share):
    print(f"seed {seed}: key frequencies {k} hold {share:.1%} of the embedding's non-constant Fourier power "
          f"(initial embedding, its {len(k)} strongest: {null:.1%})")

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, len(seeds), figsize=(5 * len(seeds), 3), squeeze=False)
ks = np.arange(1, p // 2 + 1)
for ax, seed, W, k in zip(axes[0], seeds, W_E, keys):
    power = fourier.fourier_power(W)[1:].numpy()
    ax.bar(ks, power / power.sum(), color=["#D55E00" if j in k else "0.6" for j in ks])
    ax.set(xlabel="frequency k", ylabel="share of Fourier power", title=f"seed {seed}: key frequencies {k}")
plots.savefig(fig, "key_frequencies")
plt.show()

# %% [markdown]
# ## Per-layer kernels and their leading eigenvectors
#
# Kernels of every parameter tensor (input Gram ∘ output-gradient Gram for each linear map; one
# vector-Jacobian product, since the flattened kernel only needs the gradient of $\frac1p\sum_c f_c$),
# summed per layer; top `top_k` eigenvectors by dense `eigh` in float64.
#
# The paper's claims are about the **leading** eigenvectors. With $K$ key frequencies a feature family
# spans $2K$ dimensions (a cos/sin pair per frequency). A kernel may also have a *constant mode*, an
# eigenvector close to the constant function (squared overlap ≥ 0.5), which carries no centred
# feature; we pass over it. A layer's leading block is its first $2K$ other eigenvectors, and the
# unembedding's second block the $2K$ after those: with the constant mode at eigenvector 0 these
# are the paper's blocks $0\dots2K$ and $2K+1\dots4K$. Beside each leading block we report the
# best-aligned window of $2K+1$ consecutive eigenvectors among the top 40 and where it starts: that
# window is *chosen on the kernel it is scored on*, so it is a companion, not a test (a random block
# of this size would score about $(2K+1)/p^2$).

# %%
LAYERS = {"attention": ["0.W_Q", "0.W_K", "0.W_V"], "MLP-in": ["0.W_in"], "MLP-out": ["0.W_out"],
          "unembedding": ["W_U"]}
SCORED = {"unembed_sum": ("unembedding", "sum", 0), "unembed_input": ("unembedding", "input_sum", 1),
          "attention_input": ("attention", "input_sum", 0), "mlp_in_input": ("MLP-in", "input_sum", 0),
          "mlp_out_sum": ("MLP-out", "sum", 0)}


def layer_eigenpairs(m, state=None, dtype=torch.float64):
    """Top-k eigenpairs {layer: Eigenpairs} of seed m's per-layer kernels (final parameters, or a snapshot)."""
    fm = entk.functional_transformer(model, m=m, state=state).to(dtype)
    return entk.group_eigenpairs(entk.kernels(fm, tokens.to(dev), mode="pair_mean"), LAYERS, top_k)


def leading_alignments(eig, k):
    """{name: (eigenvector indices, alignment)} of each scored leading block, for key frequencies k."""
    n = 2 * len(k)
    out = {}
    for name, (layer, kind, j) in SCORED.items():
        V = eig[layer].vectors
        block = fourier.leading_blocks(V, [n, n], skip=fourier.constant_modes(V))[j]
        out[name] = (block, fourier.alignment(V[:, block], fourier.fourier_basis(p, kind, k)))
    return out


eigs = [layer_eigenpairs(i) for i in range(len(seeds))]
scores = [leading_alignments(eig, k) for eig, k in zip(eigs, keys)]
best = [{name: fourier.best_block_alignment(eig[layer].vectors, fourier.fourier_basis(p, kind, k), 2 * len(k) + 1)
         for name, (layer, kind, _) in SCORED.items()} for eig, k in zip(eigs, keys)]
for seed, eig, k, score, window in zip(seeds, eigs, keys, scores, best):
    n = 2 * len(k)
    print(f"seed {seed} (K = {len(k)}): constant modes",
          {layer: fourier.constant_modes(e.vectors) for layer, e in eig.items()})
    for name, (block, value) in score.items():
        start, top = window[name]
        print(f"  {name:16s} leading block {block[0]}…{block[-1]}: {value:.4f} ({value * n:.3f} / {n});  "
              f"best window {start}…{start + n}: {top:.4f}")
    for layer, e in eig.items():                                     # what each leading block carries
        block = fourier.leading_blocks(e.vectors, [n], skip=fourier.constant_modes(e.vectors))[0]
        on_sum, on_input = (fourier.alignment(e.vectors[:, block], fourier.fourier_basis(p, kind, k))
                            for kind in ("sum", "input_sum"))
        print(f"  {layer:12s} leading block {block[0]}…{block[-1]}: sum features {on_sum:.3f}, "
              f"input features {on_input:.3f}")

# %% tags=["hide-input"]
fig, axes = plt.subplots(len(seeds), 4, figsize=(15, 3.3 * len(seeds)), sharey=True, squeeze=False,
                         layout="constrained")
for row, seed, eig, k in zip(axes, seeds, eigs, keys):
    F_sum, F_in = fourier.fourier_basis(p, "sum", k), fourier.fourier_basis(p, "input_sum", k)
    for ax, (layer, e) in zip(row, eig.items()):
        ax.plot(fourier.alignment_profile(e.vectors, F_sum).cpu(), "o-", ms=3, lw=0.8, label="a + b")
        ax.plot(fourier.alignment_profile(e.vectors, F_in).cpu(), "s-", ms=3, lw=0.8, label="input a, b")
        ax.axvline(4 * len(k) + 0.5, color="0.6", ls=":", lw=1)
        ax.set(title=f"seed {seed}: {layer}", xlabel="eigenvector index")
    row[0].set_ylabel("overlap with the features")
axes[0, 0].legend()
plots.savefig(fig, "eigenvector_features")
plt.show()

# %% [markdown]
# Each panel shows every eigenvector's overlap $\|F_o^\top v\|^2$ with the sum features
# $\cos/\sin\,\omega_k(a+b)$ and with the input features $\cos\omega_k a + \cos\omega_k b$,
# $\sin\omega_k a + \sin\omega_k b$ at that seed's key frequencies (dotted line: the end of the
# first $4K$ eigenvectors).
#
# **What the leading blocks show** (published run, paper profile). The eigenvectors come in order of
# frequency strength, not family by family. In the unembedding of seed 3, which generalises fully,
# the first four eigenvectors are the sum features of its two strongest key frequencies, then comes
# the constant mode, then the input features of the same two frequencies: the paper's picture for
# its two-frequency seed. But seed 3 has a third, weak key frequency (a few per cent of the
# embedding's power), whose sum and input features follow only after these, so the leading $2K$
# block mixes the two families and scores well below 0.9. MLP-out's leading block after its
# constant mode carries the *input* features, with the sum features after them; MLP-in's leading
# block carries input features, partly; the attention kernel ($W_Q, W_K, W_V$) has no block aligned
# with either family. Seed 2 has not finished generalising after the paper's 4000 epochs, and two of
# its four key frequencies are weak; its blocks are less clean still. The claims below are stated as
# the paper states them, and fail where the blocks do not hold.

# %% [markdown]
# ## Alignment during training
#
# Kernel snapshots are chosen from the saved parameters of this run: `n_log_snapshots` log-spaced
# over the whole run and `n_dense_snapshots` evenly spaced over $[0.5\,t_\text{grok}, 1.5\,t_\text{grok}]$,
# where $t_\text{grok}$ is the epoch at which the test accuracy (smoothed over `smooth_window`
# evaluations) rises fastest. At every snapshot the same leading blocks are scored (float32 kernels,
# the final model's key frequencies). $t_\text{peak}$ is the epoch where the unembedding's sum
# alignment rises fastest (the argmax of its derivative over the snapshots). We also report when the
# test accuracy first reaches 0.95, since generalisation here can come in two steps: a jump while the
# training set is fitted, and a slower climb to 1 much later.

# %%
candidates = np.asarray(history.steps) // steps_per_epoch
dynamics = []
for i, seed in enumerate(seeds):
    t_grok, _ = steepest_rise(epoch_axis, test_acc[:, i], window=smooth_window)
    t_95 = first_step_reaching(epoch_axis, test_acc[:, i], 0.95)
    reach = "never" if t_95 is None else f"epoch {t_95:.0f}"
    snap_epochs = snapshot_schedule(candidates, n_log_snapshots, (0.5 * t_grok, 1.5 * t_grok), n_dense_snapshots)
    curves = {name: [] for name in SCORED}
    for epoch in snap_epochs:
        eig_t = layer_eigenpairs(i, state=history.snapshots[epoch * steps_per_epoch], dtype=torch.float32)
        for name, (_, value) in leading_alignments(eig_t, keys[i]).items():
            curves[name].append(value)
    curves = {name: np.asarray(v) for name, v in curves.items()}
    t_peak, _ = steepest_rise(snap_epochs, curves["unembed_sum"])
    dynamics.append(dict(epochs=np.asarray(snap_epochs), curves=curves, t_grok=t_grok, reach=reach, t_peak=t_peak,
                         spacing=grid_spacing(snap_epochs, t_peak)))
    print(f"seed {seed}: {len(snap_epochs)} snapshots; test accuracy rises fastest at epoch {t_grok:.0f} "
          f"(first ≥ 0.95: {reach}); unembedding sum alignment rises fastest at epoch {t_peak:.0f} "
          f"(snapshot spacing there {dynamics[-1]['spacing']:.0f})")

# %% tags=["hide-input"]
fig, axes = plt.subplots(len(seeds), 2, figsize=(11, 3.6 * len(seeds)), squeeze=False, layout="constrained")
for (ax1, ax2), seed, i, d in zip(axes, seeds, range(len(seeds)), dynamics):
    for name, values in d["curves"].items():
        ax1.plot(d["epochs"], values, "o-", ms=3, label=name.replace("_", " "))
    ax1.plot(epoch_axis, test_acc[:, i], color="0.5", lw=1, label="test accuracy")
    ax1.set(xlabel="epoch", ylabel="alignment / accuracy", title=f"seed {seed}: leading-block alignment")
    ax1.legend(fontsize=7)
    rate = np.gradient(d["curves"]["unembed_sum"], d["epochs"])
    acc_rate = np.gradient(test_acc[:, i], epoch_axis)
    ax2.plot(d["epochs"], rate / max(rate.max(), 1e-12), "o-", ms=3, label="d/dt unembedding sum alignment")
    ax2.plot(epoch_axis, acc_rate / max(acc_rate.max(), 1e-12), color="0.5", lw=1, label="d/dt test accuracy")
    ax2.axvline(d["t_peak"], color="#D55E00", ls="--", lw=1)
    ax2.axvline(d["t_grok"], color="0.3", ls=":", lw=1)
    ax2.set(xlabel="epoch", ylabel="rate / its maximum", title=f"seed {seed}: derivatives")
    ax2.legend(fontsize=7)
plots.savefig(fig, "alignment_dynamics")
plt.show()

# %% [markdown]
# **What the dynamics show** (published run). Test accuracy rises fastest early, in a jump while the
# training set is being fitted; for seed 3 the climb to 1 comes thousands of epochs later, and
# seed 2 has not finished it by epoch 4000. The unembedding's sum alignment starts near zero, rises
# fastest some tens of epochs after the early jump (about a third of $t_\text{grok}$ away, outside
# the 20 % tolerance below), and then keeps growing slowly, with no second peak at the late climb.

# %% [markdown]
# ## Claims
#
# Targets from the paper ({cite}`lin2025entk`) and the issue, one row per seed; a failing row is
# shown as failing, with its measured value. The "paper" column holds values printed in the paper
# (for its seed 2). The key frequencies come from each model's own initialisation, so ours are
# reported, and tested for sparsity against the initial embedding: the null is the share of the
# same number of strongest frequencies in the untrained embedding, and the keys must take at least
# half of the headroom above it (a fixed ratio to the null, such as 3×, could not be met by five or more keys).

# %%
PAPER = {"unembed_sum": round(3.965 / 4, 4), "unembed_input": round(3.940 / 4, 4)}
TARGET = {"unembed_sum": "leading block vs cos/sin ω_k(a+b)", "unembed_input": "next block vs cos ω_k a + cos ω_k b",
          "attention_input": "W_Q, W_K, W_V; leading block vs input features",
          "mlp_in_input": "leading block vs input features", "mlp_out_sum": "leading block vs sum features"}
for i, seed in enumerate(seeds):
    tag = f"_seed{seed}"
    claims.add("key_frequencies" + tag, keys[i], paper=[1, 12] if p == 29 and seed == 2 else None,
               target="reported: found from the embedding; seed-dependent")
    excess = (key_share[i] - null_share[i]) / (1 - null_share[i])        # share of the null's headroom
    claims.add("key_frequency_sparsity" + tag, round(key_share[i], 4), paper="sparse",
               target=f"share of Fourier power at the keys ≥ 0.8 and (share − null)/(1 − null) ≥ 0.5; null = "
                      f"{null_share[i]:.3f} (initial embedding), excess {excess:.3f}",
               passed=key_share[i] >= 0.8 and excess >= 0.5)
    for name, (block, value) in scores[i].items():
        start, top = best[i][name]
        claims.add(f"{name}_alignment" + tag, round(value, 4), paper=PAPER.get(name, "aligned") if seed == 2 else None,
                   target=f"≥ 0.9 ({TARGET[name]}: eigenvectors {block[0]}…{block[-1]}; best window "
                          f"{start}…{start + len(block)} scores {top:.3f}, reported)", passed=value >= 0.9)
    d = dynamics[i]
    tol = max(d["spacing"], 0.2 * d["t_grok"])
    claims.add("alignment_peak_near_grok" + tag, {"t_peak": d["t_peak"], "t_grok": d["t_grok"]}, paper="near grokking",
               target=f"|t_peak − t_grok| ≤ max(snapshot spacing, 0.2 t_grok) = {tol:.0f} epochs (test accuracy "
                      f"first ≥ 0.95: {d['reach']})",
               passed=abs(d["t_peak"] - d["t_grok"]) <= tol)
    start, final = d["curves"]["unembed_sum"][0], d["curves"]["unembed_sum"][-1]
    claims.add("alignment_at_init" + tag, round(float(start), 4), paper="weak at initialisation",
               target=f"unembedding sum alignment at epoch 0 ≤ 0.3 × final ({final:.3f})",
               passed=start <= 0.3 * final)
    claims.add("final_test_accuracy" + tag, round(float(test_acc[-1, i]), 4), paper=1.0, target="reported")
claims.write()
claims.table()
