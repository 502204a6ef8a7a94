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
# each parameter's empirical NTK find those features, and the *right* ones for that parameter: the
# inputs $\cos\omega_k a + \cos\omega_k b$ where the model reads $a$ and $b$, the answer
# $\cos\omega_k(a+b)$ where it writes the logits? Does the alignment appear when the model groks?
# And, beyond the paper: does it hold for every seed, and how does it depend on whether a model
# generalised and on how many key frequencies it uses?
#
# **Method** ({cite}`lin2025entk`, Section 4 and Table 2), as the authors' code computes it. A 1-layer
# transformer (no LayerNorm, no biases, 4 heads, $p+1$ outputs with the loss on the first $p$) reads
# `a b =` and predicts $a+b \bmod p$ at the last position. Its key frequencies come from the Fourier
# power of the token embedding. Each of the nine parameter tensors ($W_E, W_{pos}, W_Q, W_K, W_V,
# W_O, W_{in}, W_{out}, W_U$) gets its own eNTK over all $p^2$ inputs, flattened as the mean over all
# $(p+1)^2$ class pairs, $\bar K(x, x') = \frac{1}{C^2}\sum_{c,c'} K_{cc'}(x, x')$, and its top 40
# eigenvectors. With $K$ key frequencies a feature family spans $2K$ dimensions, and the paper scores
# the eigenvector blocks $0\dots2K$ and $2K+1\dots4K$ (for $K=2$ its `[0:5]` and `[5:9]`; no
# eigenvector is passed over), by $\|Q^\top F\|_F^2/2K$ with $F$ the centred features at the key
# frequencies. Which block holds which family is measured for every parameter and seed, not assumed.
#
# **Training settings** are the authors' run (`modular_arithmetic_transformer_v4.ipynb` in
# `jylin04/mi-ntk`): their split (Python's `random.seed(0)` shuffling the pairs, the first half for
# training), their initial draw (`torch.manual_seed(seed)`, then every matrix in their module order,
# shapes and scales: `init="lin"`), their batch order (a shuffling `DataLoader`, 7 batches of 64 an
# epoch with the last one kept, including the draws that their logging every 20 epochs takes from the
# same generator: `batch_order="loader"`), AdamW with lr $3\cdot10^{-4}$, default betas and weight
# decay 1, for 4000 epochs. All seeds train together as one batched program; each model's batches and
# weights are those a lone run of the authors' script with that seed draws.

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
seeds = [2, 3]  # length: 1 or more; range: [0, inf); studied in full, training dynamics included
extra_seeds = []  # length: 0 or more; range: [0, inf); more models, final state only (the dependence on keys)
data_seed = 0  # range: [0, inf)
split = "python"  # one of: python, torch; the authors' split, or corekit's seeded randperm
init = "lin"  # one of: lin, nanda, fan_in; the authors' draw, or corekit's per-seed draws
batch_order = "loader"  # one of: loader, seeded; the authors' DataLoader order, or corekit's (seed, epoch) order
log_every_epochs = 20  # range: [1, inf); the authors' logging interval (their batch order depends on it)
dynamics_every_epochs = 100  # range: [1, inf); epochs between the kernel snapshots of the dynamics
top_k = 40  # range: [1, inf)
device = "auto"
cpu_threads = 1  # range: [0, inf); torch threads on a CPU (0: torch default); small models gain nothing from more
output_dir = ""  # path; empty: the claims table and figures stay in the executed notebook only; else NAME.metrics.json and figures/NAME/ go there

# %%
import numpy as np
import torch
import matplotlib.pyplot as plt

from corekit import entk_blocks, fourier, oracle, plots, train
from corekit.claims import Claims
from corekit.curves import first_step_reaching, steepest_rise
from corekit.device import default_device
from corekit.models import BatchedTransformer, TransformerConfig
from corekit.tasks.modular import check_modulus, modular_addition
from corekit.train import Dataset, train_ensemble

plots.use_style()
claims = Claims("06_entk_transformer_modular")
figures = plots.Figures(output_dir, claims.notebook)
p = check_modulus(p)
all_seeds = list(seeds) + list(extra_seeds)
claims.require(len(set(all_seeds)) == len(all_seeds), "extra_seeds", f"seeds not already in seeds = {seeds}",
               extra_seeds)
claims.require(len(set(seeds)) == len(seeds), "seeds", "distinct seeds", seeds)
claims.require(epochs > dynamics_every_epochs, "epochs",
               f"more than dynamics_every_epochs = {dynamics_every_epochs} (the dynamics need two snapshots)", epochs)
claims.require(dynamics_every_epochs % log_every_epochs == 0, "dynamics_every_epochs",
               f"a multiple of log_every_epochs = {log_every_epochs}", dynamics_every_epochs)
dev = default_device(device)
if dev.type == "cpu" and cpu_threads:
    torch.set_num_threads(cpu_threads)   # extra threads only spin on tiny ops, badly on a busy machine
claims.resolve(device=str(dev))
AUTHORS_SETTINGS = dict(p=29, d_model=64, n_heads=4, d_mlp=256, train_frac=0.5, lr=3e-4, weight_decay=1.0,
                        betas=[0.9, 0.999], batch_size=64, data_seed=0, split="python", init="lin",
                        batch_order="loader", log_every_epochs=20)
authors = oracle.load("06")
same = {k: globals()[k] == v for k, v in AUTHORS_SETTINGS.items()}
if authors and not (all(same.values()) and epochs == authors["epochs"]):
    authors = None                                                       # their record is for other settings
print("authors' run on the same seeds:", "results/oracle/06.json, commit " + authors["authors_commit"][:10]
      if authors else "none for these settings (scripts/oracle/mi_ntk_06.py with a clone of jylin04/mi-ntk writes it)")

# %% [markdown]
# ## Training
#
# Every model is evaluated after every epoch; its parameters are saved after epoch 0 and every
# `log_every_epochs` epochs after it, where the authors log (their epoch $e$ is our
# evaluation after $e+1$ epochs).

# %%
task = modular_addition(p, train_frac, data_seed, split=split)
tokens = task.tokens()                                                   # (p², 3): a, b, "=" (token p)
train_set = Dataset(tokens[task.train_idx], task.labels[task.train_idx])
test_set = Dataset(tokens[task.test_idx], task.labels[task.test_idx])
config = TransformerConfig(vocab=p + 1, n_ctx=3, d_model=d_model, n_heads=n_heads, d_mlp=d_mlp, n_layers=1,
                           norm="none", bias=False, init=init)
model = BatchedTransformer(config, seeds=all_seeds).to(dev)
spe = train.steps_per_epoch(len(train_set), batch_size, drop_last=False)
log_epochs = list(range(0, epochs, log_every_epochs))                    # the authors' logged epochs
history = train_ensemble(model, train_set, test_set, steps=epochs * spe, batch_size=batch_size, lr=lr,
                         weight_decay=weight_decay, betas=tuple(betas), drop_last=False, batch_order=batch_order,
                         loader_eval_every=log_every_epochs if batch_order == "loader" else None, loss_outputs=p,
                         eval_every=spe, snapshot_steps=[0] + [(e + 1) * spe for e in log_epochs], progress=False)
epoch_axis = np.asarray(history.steps) / spe                             # epochs trained at each evaluation
test_acc = history.curve("test_acc").numpy()                             # (evaluations, models)
train_acc = history.curve("train_acc").numpy()
epoch_loss = np.asarray(history.epoch_train_loss)                        # (epochs, models)
logged = [e + 1 for e in log_epochs]                                     # our evaluation index of their epoch e
milestones = [{level: first_step_reaching(log_epochs, test_acc[logged, i], level) for level in (0.5, 0.99)}
              for i in range(len(all_seeds))]                            # on the authors' logged epochs

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Training and held-out accuracy of each seed (dotted black: the authors' code on the same seed), with the epochs the paper marks (150 dashed, 1900 dotted).", "name": "fig-06-training"}}
fig, axes = plt.subplots(1, len(seeds), figsize=(5 * len(seeds), 3.4), squeeze=False)
for ax, (i, seed) in zip(axes[0], enumerate(seeds)):
    ax.plot(epoch_axis, train_acc[:, i], label="train")
    ax.plot(epoch_axis, test_acc[:, i], label="test")
    if authors and str(seed) in authors["seeds"]:
        log = authors["seeds"][str(seed)]["log"]
        ax.plot(np.asarray(log["epoch"]) + 1, np.asarray(log["test_acc"]) / 100, "k:", lw=1, label="test (authors' code)")
    for x, style in ((150, "--"), (1900, ":")):
        ax.axvline(x, color="0.4", ls=style, lw=0.8)
    ax.set(xlabel="epoch", ylabel="accuracy", title=f"seed {seed}: a + b mod {p}")
    ax.legend(fontsize=8)
figures.save(fig, "training_curves")
plt.show()

# %% [markdown]
# Grey lines: the paper's two markers (its figure 3: epochs 150 and 1,900). Dotted black: the test
# accuracy of the authors' own code for the same seed on this machine (`results/oracle/06.json`).

# %%
for i, seed in enumerate(all_seeds):
    m = milestones[i]
    print(f"seed {seed}: final train accuracy {train_acc[-1, i]:.4f}, test accuracy {test_acc[-1, i]:.4f}; "
          f"test ≥ 50 % at logged epoch {m[0.5]}, ≥ 99 % at {m[0.99]}")
log_gap = {}
for i, seed in enumerate(seeds):
    if authors and str(seed) in authors["seeds"]:
        log = authors["seeds"][str(seed)]["log"]
        ours = epoch_loss[np.asarray(log["epoch"]), i]
        early = [j for j, e in enumerate(log["epoch"]) if e <= 60]
        log_gap[seed] = float(np.abs(ours[early] - np.asarray(log["train_loss"])[early]).max())
        a = authors["seeds"][str(seed)]
        print(f"seed {seed} vs the authors' code: epoch train loss through epoch 60 differs by at most "
              f"{log_gap[seed]:.1e}; theirs reach 50 % at {a['first_epoch_test_acc_50']}, 99 % at "
              f"{a['first_epoch_test_acc_99']}")

# %% [markdown]
# ## Key frequencies
#
# The Fourier power of the embedding rows of the $p$ number tokens, per frequency; the key frequencies
# are those above the largest drop in the sorted powers. Their share of the non-constant power is
# compared with a null: the share of the same number of strongest frequencies in the *initial*
# embedding of the same seed.

# %%
W_E = model.p("W_E")[:, :p].detach().cpu()                              # (models, p, d_model)
W_E_init = history.snapshots[0]["params.W_E"][:, :p]
keys = [fourier.key_frequencies(W) for W in W_E]
key_share = [fourier.key_frequency_fraction(W, k) for W, k in zip(W_E, keys)]
null_share = [fourier.top_frequency_share(W, len(k)) for W, k in zip(W_E_init, keys)]
for seed, k, share, null in zip(all_seeds, keys, key_share, null_share):
    print(f"seed {seed}: key frequencies {k} hold {share:.1%} of the embedding's non-constant Fourier power "
          f"(initial embedding, its {len(k)} strongest: {null:.1%})")

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Share of the embedding's Fourier power at each frequency k, per seed; the key frequencies (orange) are the ones the model uses.", "name": "fig-06-keys"}}
fig, axes = plt.subplots(1, len(seeds), figsize=(5 * len(seeds), 3), squeeze=False)
ks = np.arange(1, p // 2 + 1)
for ax, seed, W, k in zip(axes[0], seeds, W_E, keys):
    power = fourier.fourier_power(W)[1:].numpy()
    ax.bar(ks, power / power.sum(), color=["#D55E00" if j in k else "0.6" for j in ks])
    ax.set(xlabel="frequency k", ylabel="share of Fourier power", title=f"seed {seed}: key frequencies {k}")
figures.save(fig, "key_frequencies")
plt.show()

# %% [markdown]
# ## Per-parameter kernels and the paper's blocks
#
# For each model and parameter: the kernel by linear-site Grams (one vector-Jacobian product of the
# mean output), its top `top_k` eigenvectors by dense `eigh` in float64, and the two blocks
# scored against both families (`corekit.entk_blocks.measure`). The paper's block sizes follow from
# the number of keys $K$ found above: $2K+1$ and $2K$ eigenvectors.

# %%
tokens_dev = tokens.to(dev)
results = [entk_blocks.measure(model, i, tokens_dev, p, top_k=top_k, keys=keys[i]) for i in range(len(all_seeds))]
for seed, r in zip(seeds, results):
    print(f"seed {seed} (K = {len(r.keys)}; blocks {r.blocks[0][0]}…{r.blocks[0][-1]} and "
          f"{r.blocks[1][0]}…{r.blocks[1][-1]}):")
    for name, row in r.table().items():
        print(f"  {name:6s} sum {row['sum'][0]:.3f} | {row['sum'][1]:.3f}   input {row['input'][0]:.3f} | "
              f"{row['input'][1]:.3f}   constant share {row['constant'][0]:.2f} | {row['constant'][1]:.2f}")
ATTENTION = ["0.W_Q", "0.W_K", "0.W_V", "0.W_O"]                        # one summed kernel, reported beside
grouped = [entk_blocks.score_blocks(entk_blocks.group_eigenpairs(model, i, tokens_dev, top_k, {"attention": ATTENTION}),
                                    p, keys[i]).scores["attention"] for i in range(len(seeds))]
for seed, g in zip(seeds, grouped):
    print(f"seed {seed}: W_Q + W_K + W_V + W_O as one kernel: input {g['input'][0]:.3f} | {g['input'][1]:.3f}, "
          f"sum {g['sum'][0]:.3f} | {g['sum'][1]:.3f}")

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Overlap of the leading eigenvectors of four parameter blocks' eNTK with the a + b features (circles) and the input a, b features (squares) at the key frequencies, per seed; the dotted lines mark 2 and 4 times the number of keys, the sizes of the expected blocks.", "name": "fig-06-features"}}
fig, axes = plt.subplots(len(seeds), 4, figsize=(15, 3.3 * len(seeds)), sharey=True, squeeze=False,
                         layout="constrained")
SHOWN = ["0.W_in", "0.W_O", "0.W_out", "W_U"]
for row, i, seed in zip(axes, range(len(seeds)), seeds):
    eig = entk_blocks.parameter_eigenpairs(model, i, tokens_dev, top_k, names=SHOWN)
    F_sum, F_in = fourier.fourier_basis(p, "sum", keys[i]), fourier.fourier_basis(p, "input_sum", keys[i])
    for ax, (name, e) in zip(row, eig.items()):
        ax.plot(fourier.alignment_profile(e.vectors, F_sum).cpu(), "o-", ms=3, lw=0.8, label="a + b")
        ax.plot(fourier.alignment_profile(e.vectors, F_in).cpu(), "s-", ms=3, lw=0.8, label="input a, b")
        for edge in (2 * len(keys[i]) + 0.5, 4 * len(keys[i]) + 0.5):
            ax.axvline(edge, color="0.6", ls=":", lw=1)
        ax.set(title=f"seed {seed}: {name.removeprefix('0.')}", xlabel="eigenvector index", xlim=(-1, 20))
    row[0].set_ylabel("overlap with the features")
axes[0, 0].legend()
figures.save(fig, "eigenvector_features")
plt.show()

# %% [markdown]
# Each panel shows the first 20 eigenvectors' overlaps $\|F_o^\top v\|^2$ with the sum features
# and with the input features at that seed's key frequencies; dotted lines close the paper's two
# blocks. An eigenvector that is mostly the constant function can still carry part of a family,
# which is why the blocks include it rather than skip it (its share of the constant function is
# printed above, per block).

# %% [markdown]
# ## Alignment during training
#
# The paper's figure 3 follows the unembedding's leading block (its `[0:5]`) against the sum
# features through training, at the final model's key frequencies, with its derivative (central
# differences). We compute it on the parameters saved every `dynamics_every_epochs` epochs (the
# authors: every 20) and find the epoch where the derivative peaks.

# %%
dyn_epochs = [e for e in log_epochs if e % dynamics_every_epochs == 0]
dynamics = []
for i, seed in enumerate(seeds):
    curve = []
    for e in dyn_epochs:
        eig = entk_blocks.parameter_eigenpairs(model, i, tokens_dev, top_k, names=["W_U"],
                                               state=history.snapshots[(e + 1) * spe])
        curve.append(entk_blocks.score_blocks(eig, p, keys[i]).scores["W_U"]["sum"][0])
    curve = np.asarray(curve)
    t_peak, _ = steepest_rise(dyn_epochs, curve)
    dynamics.append(dict(curve=curve, t_peak=t_peak))
    print(f"seed {seed}: unembedding [0:{2 * len(keys[i]) + 1}] vs sum features {curve[0]:.3f} after epoch "
          f"{dyn_epochs[0]}, {curve[-1]:.3f} at the end; its derivative peaks at epoch {t_peak:.0f}")

# %% tags=["hide-input"] mystnb={"figure": {"caption": "The unembedding eNTK's overlap with the sum features over training (circles), its derivative (\u00d7 100), and the held-out accuracy, per seed; the orange line is the derivative's peak, the black lines the paper's epochs 150 and 1900.", "name": "fig-06-dynamics"}}
fig, axes = plt.subplots(1, len(seeds), figsize=(5.5 * len(seeds), 3.6), squeeze=False, layout="constrained")
for ax, i, seed, d in zip(axes[0], range(len(seeds)), seeds, dynamics):
    n = 2 * len(keys[i])
    ax.plot(dyn_epochs, d["curve"] * n, "o-", ms=2, label=f"overlap with sum modes (of {n})")
    ax.plot(dyn_epochs, np.gradient(d["curve"] * n, dyn_epochs) * 100, label="derivative × 100")
    ax.plot(epoch_axis, test_acc[:, i] * n, color="0.5", lw=1, label=f"test accuracy × {n}")
    for x, style in ((150, "--"), (1900, ":")):
        ax.axvline(x, color="k", ls=style, lw=0.8)
    ax.axvline(d["t_peak"], color="#D55E00", lw=1, label=f"derivative peak ({d['t_peak']:.0f})")
    ax.set(xlabel="epoch", title=f"seed {seed}: unembedding eNTK vs sum features")
    ax.legend(fontsize=7)
figures.save(fig, "alignment_dynamics")
plt.show()

# %% [markdown]
# Black lines: the paper's markers at epochs 150 (dashed) and 1,900 (dotted). The overlap's
# derivative peaks while the training loss falls, long before the test accuracy rises: the
# unembedding's kernel finds the answer's Fourier features first, and the model generalises later.

# %% [markdown]
# ## Beyond seed 2: generalisation and the number of key frequencies
#
# The paper shows one seed. Here every model of the run, `seeds` and `extra_seeds`, is measured the
# same way, and its unembedding alignments are set against whether it generalised (final test
# accuracy ≥ 0.99) and how many key frequencies it uses. The block sizes follow each model's own
# number of keys.

# %%
summary = []
for i, seed in enumerate(all_seeds):
    r = results[i]
    summary.append(dict(seed=seed, test=float(test_acc[-1, i]), n_keys=len(keys[i]),
                        sum=r.holding("W_U", "sum")[1], input=r.holding("W_U", "input")[1]))
    s = summary[-1]
    print(f"seed {seed}: test accuracy {s['test']:.3f}, {s['n_keys']} keys {keys[i]}, unembedding sum {s['sum']:.3f}, "
          f"input {s['input']:.3f}")

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Unembedding alignment with the sum (circles) and input (squares) features against the number of key frequencies, one point per seed (filled: test accuracy \u2265 0.99).", "name": "fig-06-keys-alignment"}}
fig, ax = plt.subplots(figsize=(6, 3.6))
for s in summary:
    done = s["test"] >= 0.99
    ax.scatter(s["n_keys"], s["sum"], marker="o", s=40, color="#0072B2" if done else "white", edgecolor="#0072B2")
    ax.scatter(s["n_keys"] + 0.12, s["input"], marker="s", s=40, color="#D55E00" if done else "white",
               edgecolor="#D55E00")
    ax.annotate(str(s["seed"]), (s["n_keys"] - 0.18, s["sum"]), fontsize=7)
ax.scatter([], [], marker="o", color="#0072B2", label="sum features (filled: test ≥ 0.99)")
ax.scatter([], [], marker="s", color="#D55E00", label="input features")
ax.set(xlabel="number of key frequencies", ylabel="unembedding alignment (of max)",
       xticks=sorted({s["n_keys"] for s in summary}))
ax.legend(fontsize=7)
figures.save(fig, "alignment_vs_keys")
plt.show()

# %% [markdown]
# Filled markers: models that generalised. The paper's two blocks are sized for the keys each model
# uses; a model with more keys spreads its features over more eigenvectors, and the printed table
# above shows which of them stay inside the leading block.
#
# **Same weights, same numbers.** `scripts/oracle/mi_ntk_06.py` trains seeds 2 and 3 with the authors'
# own notebook code, measures all nine parameters with their code, loads the same weights into
# corekit and measures them with `entk_blocks.measure` as above; `results/oracle/06.json` holds both
# (its `max_abs_diff_of_max` is the largest difference of any score, as a fraction of its maximum).
# The authors' values in the claims below come from that record: their model for the same seed,
# trained by their code on this machine. After about 40 epochs the two trainings part in the last
# bits (both are rounding-exact copies of one another's arithmetic only up to there), so the two
# runs are two draws of the same model, not one.

# %% [markdown]
# ## Claims
#
# Targets from the paper ({cite}`lin2025entk`, Table 2 and figure 3) and its authors' code, one row
# per seed; a failing row is shown as failing, with its measured value. Each block claim uses the
# block (of the paper's two) that holds the family for that parameter, names it, and gives the
# authors' code's value on the same seed when their run is on record (`results/oracle/06.json`).
# The unembedding targets are ≥ 0.95 of the maximum (paper: 3.965/4 and 3.940/4), the others ≥ 0.9.

# %%
BLOCK_CLAIMS = {"unembed_sum": ("W_U", "sum", 0.95, round(3.965 / 4, 4)),
                "unembed_input": ("W_U", "input", 0.95, round(3.940 / 4, 4)),
                "mlp_in_input": ("W_in", "input", 0.9, "aligned"), "mlp_out_sum": ("W_out", "sum", 0.9, "aligned"),
                "mlp_out_input": ("W_out", "input", 0.9, "aligned"),
                "attention_W_O_input": ("W_O", "input", 0.9, "aligned"),
                "attention_W_V_input": ("W_V", "input", 0.9, "aligned"),
                "attention_W_Q_input": ("W_Q", "input", None, "no feature block"),
                "attention_W_K_input": ("W_K", "input", None, "no feature block")}


def authors_value(seed, param, family):
    """Return (block, value) of the authors' code on this seed, or None without their run."""
    rec = authors["seeds"].get(str(seed)) if authors else None
    if rec is None:
        return None
    values = rec["authors"][param][family]
    j = int(np.argmax(values))
    return j, round(values[j], 4)


for i, seed in enumerate(seeds):
    tag, r, a = f"_seed{seed}", results[i], (authors or {}).get("seeds", {}).get(str(seed))
    claims.add("final_test_accuracy" + tag, round(float(test_acc[-1, i]), 4), paper=1.0 if seed == 2 else None,
               target="≥ 0.99", passed=test_acc[-1, i] >= 0.99, authors=a["final_test_acc"] if a else None)
    claims.add("key_frequencies" + tag, keys[i], paper=[1, 12] if p == 29 and seed == 2 else None,
               target="found from the embedding; seed-dependent" + ("; the same as the authors' code" if a else ""),
               passed=(keys[i] == a["keys"]) if a else None, authors=a["keys"] if a else None)
    excess = (key_share[i] - null_share[i]) / (1 - null_share[i])        # share of the null's headroom
    claims.add("key_frequency_sparsity" + tag, round(key_share[i], 4), paper="sparse",
               target=f"share of Fourier power at the keys ≥ 0.8 and (share − null)/(1 − null) ≥ 0.5; null = "
                      f"{null_share[i]:.3f} (initial embedding), excess {excess:.3f}",
               passed=key_share[i] >= 0.8 and excess >= 0.5)
    for name, (param, family, level, paper) in BLOCK_CLAIMS.items():
        j, value = r.holding(param, family)
        b = r.blocks[j]
        theirs = authors_value(seed, param, family)
        note = f"; authors' code: block {theirs[0]}" if theirs else ""
        claims.add(f"{name}_alignment" + tag, round(value, 4), paper=paper if seed == 2 else None,
                   target=("≥ " + str(level) if level else "reported") + f" ({param} vs {family} features, block {j}: "
                          f"eigenvectors {b[0]}…{b[-1]}{note})", passed=None if level is None else value >= level,
                   authors=theirs[1] if theirs else None)
    g = grouped[i]
    claims.add("attention_summed_input" + tag, round(max(g["input"]), 4), paper=None,
               target="reported: W_Q + W_K + W_V + W_O as one kernel, the better block vs input features")
    d = dynamics[i]
    claims.add("alignment_at_init" + tag, round(float(d["curve"][0]), 4), paper="weak at initialisation",
               target=f"unembedding sum alignment after epoch {dyn_epochs[0]} ≤ 0.3 × final ({d['curve'][-1]:.3f})",
               passed=d["curve"][0] <= 0.3 * d["curve"][-1])
    tol = max(60, dynamics_every_epochs)
    claims.add("alignment_peak_epoch" + tag, d["t_peak"], paper=150 if seed == 2 else None,
               target=f"the derivative of the unembedding sum alignment peaks within ±{tol} epochs of the paper's "
                      f"marker at epoch 150 (snapshots every {dynamics_every_epochs} epochs)",
               passed=abs(d["t_peak"] - 150) <= tol)
    m = milestones[i]
    reference = {0.5: 860, 0.99: 1840} if seed == 2 and all(same.values()) and epochs == 4000 else None
    theirs = {0.5: a["first_epoch_test_acc_50"], 0.99: a["first_epoch_test_acc_99"]} if a else None
    claims.add("grokking_epochs" + tag, {"test_50": m[0.5], "test_99": m[0.99]},
               paper="150 / 1900 (figure 3 markers)" if seed == 2 else None,
               target=("within ±60 epochs of the authors' run of seed 2 on a 2-core CPU (DESIGN.md: test ≥ 0.5 at "
                       "860, ≥ 0.99 at 1,840); the same code's run on this machine beside, as the authors' value"
                       if reference else "reported: logged epochs of test ≥ 0.5 / ≥ 0.99"),
               passed=None if reference is None else all(m[k] is not None and abs(m[k] - reference[k]) <= 60 for k in m),
               authors={"test_50": theirs[0.5], "test_99": theirs[0.99]} if theirs else None)
    if a:
        claims.add("training_log_match" + tag, log_gap[seed], paper=None,
                   target="epoch train loss through epoch 60 equals the authors' code to ≤ 1e-4 (their logged epochs)",
                   passed=log_gap[seed] <= 1e-4)

two_key = [s for s in summary if s["test"] >= 0.99 and s["n_keys"] == 2]
claims.add("two_key_generalisers_align", {s["seed"]: round(s["sum"], 4) for s in two_key}, paper=None,
           target=f"every model that generalises (test ≥ 0.99) with two key frequencies has unembedding sum ≥ 0.9 "
                  f"({len(two_key)} of {len(summary)} models; needs at least one)",
           passed=bool(two_key) and all(s["sum"] >= 0.9 for s in two_key))
others = [s for s in summary if s not in two_key]
claims.add("alignment_other_models", {s["seed"]: {"test": round(s["test"], 3), "keys": s["n_keys"], "sum": round(s["sum"], 3)}
                                      for s in others}, paper=None,
           target="reported: models that did not generalise or use another number of key frequencies")
claims.write()
claims.table()
