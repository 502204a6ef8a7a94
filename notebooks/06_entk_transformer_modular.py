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
# $\cos\omega_k(a+b)$ where it writes the logits?
#
# **Method** ({cite}`lin2025entk`, Section 4). A 1-layer transformer (no LayerNorm, no biases, 4 heads)
# reads `a b =` and predicts $a+b \bmod p$ at the last position. After training we find its key
# frequencies from the Fourier power of the token embedding. For each parameter tensor we compute the
# eNTK over all $p^2$ inputs, flattened as the mean over all class pairs,
# $\bar K(x, x') = \frac{1}{p^2}\sum_{c,c'} K_{cc'}(x, x')$ (the eNTK of $\frac1p\sum_c f_c$), sum the
# tensors of each layer (attention: $W_Q, W_K, W_V, W_O$; MLP-in: $W_{in}$; MLP-out: $W_{out}$;
# unembedding: $W_U$), take the top 40 eigenvectors, and measure their alignment
# $\|Q^\top F\|_F^2/\min(d, m)$ with the Fourier features at the key frequencies ($F$ centred).
#
# **Training settings.** The paper trains with AdamW at lr $3\cdot10^{-4}$, weight decay 1, batch 64, for
# 4000 epochs — hours on a CPU. The quick defaults below keep the architecture, weight decay, batch
# size and 50 % split but use lr $5\cdot10^{-3}$ and 750 epochs: with this library's initialisation the
# model groks (test accuracy → 1) within minutes on two CPU cores. `notebooks/params/paper/` holds
# the paper's settings.

# %% tags=["parameters"]
p = 29  # range: [3, inf); a prime
d_model = 64  # range: [1, inf)
n_heads = 4  # range: [1, inf)
d_mlp = 256  # range: [1, inf)
train_frac = 0.5  # range: (0, 1)
lr = 5e-3  # range: (0, inf)
weight_decay = 1.0  # range: [0, inf)
betas = [0.9, 0.98]  # length: 2; range: [0, 1)
batch_size = 64  # range: [1, inf)
epochs = 750  # range: [1, inf)
seed = 2  # range: [0, inf)
data_seed = 0  # range: [0, inf)
top_k = 40  # range: [1, inf)
n_snapshots = 31  # range: [2, inf)
eval_every_epochs = 10  # range: [1, inf)
smooth_window = 5  # range: [1, inf)
device = "auto"
cpu_threads = 1  # range: [0, inf); torch threads on a CPU (0: torch default); small models gain nothing from more

# %%
import numpy as np
import torch
import matplotlib.pyplot as plt

from corekit import entk, fourier, plots
from corekit.claims import Claims
from corekit.device import default_device
from corekit.models import BatchedTransformer, TransformerConfig
from corekit.tasks.modular import check_modulus, modular_addition
from corekit.curves import first_step_reaching, moving_average, steepest_rise
from corekit.train import Dataset, train_ensemble

plots.use_style()
p = check_modulus(p)
if not 8 <= top_k <= p * p:
    raise ValueError(f"top_k must be in 8..{p * p}, got {top_k}")
dev = default_device(device)
if dev.type == "cpu" and cpu_threads:
    torch.set_num_threads(cpu_threads)   # extra threads only spin on tiny ops, badly on a busy machine
claims = Claims("06_entk_transformer_modular", parameters=dict(
    p=p, d_model=d_model, n_heads=n_heads, d_mlp=d_mlp, train_frac=train_frac, lr=lr, weight_decay=weight_decay,
    betas=betas, batch_size=batch_size, epochs=epochs, seed=seed, data_seed=data_seed, top_k=top_k,
    n_snapshots=n_snapshots, eval_every_epochs=eval_every_epochs, smooth_window=smooth_window, device=str(dev),
    cpu_threads=cpu_threads))

# %% [markdown]
# ## Training

# %%
task = modular_addition(p, train_frac, data_seed)
tokens = task.tokens()                                                   # (p², 3): a, b, "=" (token p)
train_set = Dataset(tokens[task.train_idx], task.labels[task.train_idx])
test_set = Dataset(tokens[task.test_idx], task.labels[task.test_idx])
config = TransformerConfig(vocab=p + 1, n_ctx=3, d_model=d_model, n_heads=n_heads, d_mlp=d_mlp, n_layers=1,
                           norm="none", bias=False, n_out=p)
model = BatchedTransformer(config, seeds=[seed]).to(dev)
steps_per_epoch = max(1, len(train_set) // batch_size)
snapshot_epochs = sorted({int(e) for e in np.linspace(0, epochs, n_snapshots).round()})
history = train_ensemble(model, train_set, test_set, steps=epochs * steps_per_epoch, batch_size=batch_size, lr=lr,
                         weight_decay=weight_decay, betas=tuple(betas), eval_every=eval_every_epochs * steps_per_epoch,
                         snapshot_steps=[e * steps_per_epoch for e in snapshot_epochs])
epoch_axis = np.asarray(history.steps) / steps_per_epoch
test_acc = history.curve("test_acc")[:, 0].numpy()

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.4))
ax1.semilogy(epoch_axis, history.curve("train_loss")[:, 0], label="train")
ax1.semilogy(epoch_axis, history.curve("test_loss")[:, 0], label="test")
ax1.set(xlabel="epoch", ylabel="cross-entropy", title="Loss")
ax1.legend()
ax2.plot(epoch_axis, history.curve("train_acc")[:, 0], label="train")
ax2.plot(epoch_axis, test_acc, label="test")
ax2.set(xlabel="epoch", ylabel="accuracy", title=f"a + b mod {p}")
ax2.legend()
plots.savefig(fig, "training_curves")
plt.show()
print(f"final test accuracy {test_acc[-1]:.4f}")

# %% [markdown]
# ## Key frequencies
#
# The Fourier power of the embedding rows of the $p$ number tokens, per frequency; the key frequencies
# are those above the largest drop in the sorted powers.

# %%
W_E = model.p("W_E")[0, :p].detach().cpu()
power = fourier.fourier_power(W_E)[1:].numpy()
keys = fourier.key_frequencies(W_E)
key_fraction = fourier.key_frequency_fraction(W_E, keys)
n_feat = 2 * len(keys)                                                  # a cos / sin pair per key frequency

fig, ax = plt.subplots(figsize=(7, 3))
ks = np.arange(1, p // 2 + 1)
ax.bar(ks, power / power.sum(), color=["#D55E00" if k in keys else "0.6" for k in ks])
ax.set(xlabel="frequency k", ylabel="share of Fourier power", title=f"Embedding: key frequencies {keys}")
plots.savefig(fig, "key_frequencies")
plt.show()
print(f"key frequencies {keys} hold {key_fraction:.1%} of the embedding's non-constant Fourier power")

# %% [markdown]
# ## Per-layer kernels and their eigenvectors
#
# Kernels of every parameter tensor (input Gram ∘ output-gradient Gram for each linear map; one
# vector-Jacobian product, since the flattened kernel only needs the gradient of $\frac1p\sum_c f_c$),
# summed per layer; top `top_k` eigenvectors by dense `eigh`. Below, each eigenvector's overlap
# $\|F_o^\top v\|^2$ with the sum features $\cos/\sin\,\omega_k(a+b)$ and with the input features
# $\cos\omega_k a + \cos\omega_k b$, $\sin\omega_k a + \sin\omega_k b$ at the key frequencies.

# %%
LAYERS = {"attention": ["0.W_Q", "0.W_K", "0.W_V", "0.W_O"], "MLP-in": ["0.W_in"], "MLP-out": ["0.W_out"],
          "unembedding": ["W_U"]}
F_sum = fourier.fourier_basis(p, "sum", keys)
F_in = fourier.fourier_basis(p, "input_sum", keys)
fm = entk.functional_transformer(model).to(torch.float64)
per_param = entk.kernels(fm, tokens.to(dev), mode="pair_mean")           # {tensor name: (p², p²)}
eig = entk.group_eigenpairs(per_param, LAYERS, top_k)
fig, axes = plt.subplots(1, 4, figsize=(15, 3.2), sharey=True)
for ax, (layer, e) in zip(axes, eig.items()):
    ax.plot(fourier.alignment_profile(e.vectors, F_sum).cpu(), "o-", ms=3, lw=0.8, label="a + b")
    ax.plot(fourier.alignment_profile(e.vectors, F_in).cpu(), "s-", ms=3, lw=0.8, label="input a, b")
    ax.set(title=layer, xlabel="eigenvector index")
axes[0].set_ylabel("overlap with the features")
axes[0].legend()
plots.savefig(fig, "eigenvector_features")
plt.show()

# %% [markdown]
# ## Alignments
#
# For the unembedding we use the paper's blocks: eigenvectors $0 \dots 2K$ (the constant mode and
# one vector per feature, $K$ key frequencies) against the sum features, and the next $2K$ against
# the input features. For the other layers the paper does not fix the positions, and they differ:
# MLP-out, for instance, carries the input features first and the sum features after them. There we
# report the best-aligned block of $2K+1$ consecutive eigenvectors among the top 40, and where it
# sits; that block is *chosen on the same kernel it is scored on* (a random block of this size would
# score about $(2K+1)/p^2$).

# %%
V_U = eig["unembedding"].vectors
align = {"unembed_sum": fourier.alignment(V_U[:, :n_feat + 1], F_sum),
         "unembed_input": fourier.alignment(V_U[:, n_feat + 1:2 * n_feat + 1], F_in)}
blocks = {}
for name, layer, F in (("attention_input", "attention", F_in), ("mlp_in_input", "MLP-in", F_in),
                       ("mlp_out_sum", "MLP-out", F_sum)):
    blocks[name], align[name] = fourier.best_block_alignment(eig[layer].vectors, F, n_feat + 1)
leading = {layer: (fourier.alignment(e.vectors[:, :n_feat + 1], F_sum), fourier.alignment(e.vectors[:, :n_feat + 1], F_in))
           for layer, e in eig.items()}
for name, value in align.items():
    where = f"eigenvectors {blocks[name]}–{blocks[name] + n_feat}" if name in blocks else ""
    print(f"{name:16s} {value:.4f}  ({value * n_feat:.3f} / {n_feat}) {where}")
print("leading block (0…2K) vs sum / input features:",
      {layer: (round(s, 3), round(i, 3)) for layer, (s, i) in leading.items()})
print(f"random block of {n_feat + 1}: about {(n_feat + 1) / p**2:.3f}")

# %% [markdown]
# ## Alignment during training
#
# The same measurements on parameter snapshots (float32 kernels), with the key frequencies of the
# final model. The derivative of the unembedding's sum alignment is set against test accuracy. (On
# the quick defaults the model fits the training set within a few dozen epochs and test accuracy
# then climbs over a few hundred, less abruptly than in the paper's slower run.)

# %%
snap = {name: [] for name in align}
for epoch in snapshot_epochs:
    fm_t = entk.functional_transformer(model, state=history.snapshots[epoch * steps_per_epoch]).to(torch.float32)
    e_t = entk.group_eigenpairs(entk.kernels(fm_t, tokens.to(dev), mode="pair_mean"), LAYERS, top_k)
    snap["unembed_sum"].append(fourier.alignment(e_t["unembedding"].vectors[:, :n_feat + 1], F_sum))
    snap["unembed_input"].append(fourier.alignment(e_t["unembedding"].vectors[:, n_feat + 1:2 * n_feat + 1], F_in))
    for name, layer, F in (("attention_input", "attention", F_in), ("mlp_in_input", "MLP-in", F_in),
                           ("mlp_out_sum", "MLP-out", F_sum)):
        snap[name].append(fourier.best_block_alignment(e_t[layer].vectors, F, n_feat + 1)[1])
snap = {k: np.asarray(v) for k, v in snap.items()}
peak_epoch, peak_rate = steepest_rise(snapshot_epochs, snap["unembed_sum"])
grok_epoch, grok_rate = steepest_rise(epoch_axis, test_acc, window=smooth_window)
reach95 = first_step_reaching(epoch_axis, test_acc, 0.95)

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.6))
for name, values in snap.items():
    ax1.plot(snapshot_epochs, values, "o-", ms=3, label=name.replace("_", " "))
ax1.plot(epoch_axis, test_acc, color="0.5", lw=1, label="test accuracy")
ax1.set(xlabel="epoch", ylabel="alignment / accuracy", title="Alignment during training")
ax1.legend(fontsize=7)
ax2.plot(snapshot_epochs, np.gradient(snap["unembed_sum"], snapshot_epochs) / max(peak_rate, 1e-12), "o-", ms=3,
         label="d/dt unembedding sum alignment (scaled)")
ax2.plot(epoch_axis, np.gradient(moving_average(test_acc, smooth_window), epoch_axis) / max(grok_rate, 1e-12), color="0.5", lw=1,
         label=f"d/dt test accuracy ({smooth_window}-point average, scaled)")
ax2.axvline(peak_epoch, color="#D55E00", ls="--", lw=1)
ax2.axvline(grok_epoch, color="0.3", ls=":", lw=1)
ax2.set(xlabel="epoch", ylabel="rate / its maximum", title="Derivatives")
ax2.legend(fontsize=7)
plots.savefig(fig, "alignment_dynamics")
plt.show()
print(f"unembedding sum alignment rises fastest at epoch {peak_epoch:.0f}; test accuracy at epoch {grok_epoch:.0f} "
      f"(first ≥ 0.95 at epoch {reach95})")

# %% [markdown]
# ## Claims
#
# Targets from the paper ({cite}`lin2025entk`) and the issue; a failing row is shown as failing,
# with its measured value. The paper's key frequencies (1 and 12 for its seed 2) come from its own
# initialisation, so ours are reported, and tested only for sparsity.

# %%
claims.add("key_frequencies", keys, paper=[1, 12] if p == 29 else None,
           target="found from the embedding; seed-dependent; pass = they hold ≥ 80% of its Fourier power",
           passed=key_fraction >= 0.8)
claims.add("unembed_sum_alignment", round(align["unembed_sum"], 4), paper=round(3.965 / 4, 4),
           target="≥ 0.95 (eigenvectors 0…2K vs cos/sin ω_k(a+b))", passed=align["unembed_sum"] >= 0.95)
claims.add("unembed_input_alignment", round(align["unembed_input"], 4), paper=round(3.940 / 4, 4),
           target="≥ 0.95 (eigenvectors 2K+1…4K vs cos ω_k a + cos ω_k b)", passed=align["unembed_input"] >= 0.95)
claims.add("mlp_in_input_alignment", round(align["mlp_in_input"], 4), paper="aligned",
           target="≥ 0.9 (best block of 2K+1 in the top 40, chosen on this kernel)", passed=align["mlp_in_input"] >= 0.9)
claims.add("attention_input_alignment", round(align["attention_input"], 4), paper="aligned",
           target="≥ 0.9 (best block of 2K+1 in the top 40, chosen on this kernel)",
           passed=align["attention_input"] >= 0.9)
claims.add("mlp_out_sum_alignment", round(align["mlp_out_sum"], 4), paper="aligned",
           target="≥ 0.9 (best block of 2K+1 in the top 40, chosen on this kernel)", passed=align["mlp_out_sum"] >= 0.9)
claims.add("alignment_peak_epoch", peak_epoch, paper="near grokking",
           target="reported: epoch of the steepest rise of the unembedding sum alignment (snapshots)")
claims.add("grok_epoch", grok_epoch, paper="near the alignment peak",
           target="reported: steepest rise of test accuracy (moving average over smooth_window evaluations)")
claims.add("final_test_accuracy", round(float(test_acc[-1]), 4), paper=1.0, target="reported")
claims.write()
claims.table()
