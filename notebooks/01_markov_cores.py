# ---
# jupyter:
#   corekit:
#     headline_caption: 'Eigenvalues of the operator fitted on each model''s core against
#       the chain''s own (crosses: untrained control).'
#     headline_figure: operator_eigenvalues
#     paper: ACE
#   jupytext:
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
# # Invariant cores of Markov-chain transformers
#
# **Question.** Train several small transformers, from different seeds, to predict the next state of
# a Markov chain. Their weights have nothing in common. Do they nevertheless compute with the *same*
# algorithm, can we read that algorithm off their activations, and how much of what we read is due
# to training rather than to the architecture and the inputs?
#
# **Method** ({cite}`schiffman2026cores`, Section 3). For each model we run Algorithmic Core
# Extraction (see [the method page](../book/ace.md)) at the residual stream that the unembedding
# reads: **extract** the core from the spectrum of Cov·Obs on training sequences, **validate** it
# with keep-only and remove ablations on held-out sequences, and **identify** the operator the core
# implements by fitting $z_{t+1} \approx A z_t$ on core coordinates. We do this on two chains (the
# paper's, and one whose core must be *smaller* than the paper's) and, as controls, on the same
# architecture and seeds left untrained and trained on shuffled targets.
#
# Every number below is computed in this run; the claims table at the end compares them with the
# paper. Parameters can be changed with `corekit run 01_markov_cores -p NAME VALUE` (any
# row-stochastic `transition` and `transition_deficient`, any list of `seeds`).

# %% tags=["parameters"]
transition: list[list[float]] = [[0.75, 0.25, 0.0, 0.0], [0.0, 0.75, 0.25, 0.0], [0.0, 0.0, 0.75, 0.25], [0.25, 0.0, 0.0, 0.75]]  # range: [0, 1]; row-stochastic, any number of states
transition_deficient: list[list[float]] = [[0.05, 0.05, 0.8, 0.1], [0.05, 0.05, 0.8, 0.1], [0.1, 0.05, 0.05, 0.8], [0.5, 0.4, 0.05, 0.05]]  # range: [0, 1]; row-stochastic, some rows shared
seeds: list[int] = [0, 100, 200]  # length: 2 or more; range: [0, inf)
seq_len: int = 32  # range: [2, inf)
n_train: int = 2000  # range: [1, inf)
n_test: int = 2000  # range: [1, inf)
d_model: int = 32  # range: [1, inf)
n_heads: int = 4  # range: [1, inf)
d_mlp: int = 128  # range: [1, inf)
dropout: float = 0.1  # range: [0, 1)
lr: float = 1e-3  # range: (0, inf)
epochs: int = 8  # range: [1, inf)
batch_size: int = 64  # range: [1, inf)
energy_threshold: float = 0.999  # range: (0, 1]
data_seed: int = 12345  # range: [0, inf)
device: str = "auto"
cpu_threads: int = 0  # range: [0, inf); CPU threads (0: as many as cores are free when the run starts)
output_dir: str = ""  # path; empty: the claims table and figures stay in the executed notebook only; else NAME.metrics.json and figures/NAME/ go there

# %%
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import display

from corekit import ace, plots, subspaces
from corekit.chapters import markov_cores
from corekit.models import BatchedTransformer, TransformerConfig
from corekit.plots import integer_ticks, panel_grid
from corekit.runs.session import setup
from corekit.tables import table
from corekit.tasks import markov
from corekit.train import Dataset, train_ensemble

claims, figures, dev = setup("01_markov_cores", globals())
chains = {"paper": markov.validate_transition(transition),
          "deficient": markov.validate_transition(transition_deficient)}    # each chain at its own number of states

# %% [markdown]
# ## Two chains, and what an ideal predictor achieves
#
# After state $x_t$ the best prediction is the row $T_{x_t,:}$. A model therefore has to carry
# $T_{x_t,:} - \pi^\top$ (its deviation from the stationary guess), a vector in a space of dimension
# $\operatorname{rank}(T - \mathbf{1}\pi^\top)$: that is the core rank we expect.
#
# ACE reads the model through its **centred logits** $\ell - \bar\ell\,\mathbf{1}$. Softmax ignores a
# shift shared by all logits, $\operatorname{softmax}(\ell + c\mathbf{1}) = \operatorname{softmax}(\ell)$,
# so the direction that only moves every logit together changes no prediction, and centring removes
# exactly that direction from $\mathrm{Obs}$. The price is a cap: centred logits live in a space of
# dimension $K - 1$, so **no core can have rank above $K - 1$**. The paper's cyclic chain has
# $\operatorname{rank}(T - \mathbf{1}\pi^\top) = K - 1 = 3$, so there a rank claim can only fail by
# being too small. The second chain (`transition_deficient`) sends states 0 and 1 along the same row:
# a predictor need not tell them apart, $\operatorname{rank}(T - \mathbf{1}\pi^\top) = 2 < K - 1$,
# and a model whose logits kept the two states apart would show a rank-3 core. On that chain the rank
# claim can fail in both directions.
#
# For each chain: the stationary distribution $\pi$, the Bayes accuracy $\sum_i \pi_i \max_j T_{ij}$,
# the accuracy of always guessing the likeliest stationary state (what is left when a model forgets
# the current state), the expected rank, the eigenvalues of $T$ on the span of
# $T - \mathbf{1}\pi^\top$ (what the core's operator should show), and $R^2_\text{oracle}$, defined
# with the operator fit below.

# %%
n_states = {name: T.shape[0] for name, T in chains.items()}
expected_rank = {name: markov.expected_core_rank(T) for name, T in chains.items()}
data = {name: markov_cores.chain_datasets(T, n_train, n_test, seq_len, seed=data_seed + 2 * i)
        for i, (name, T) in enumerate(chains.items())}                   # train on seed, test on seed + 1
table([{"chain": name, "π": markov.stationary_distribution(T), "Bayes accuracy": markov.bayes_accuracy(T),
        "stationary guess": markov.stationary_guess_accuracy(T), "rank(T − 1πᵀ)": expected_rank[name],
        "cap K − 1": n_states[name] - 1,
        "core eigenvalues": [f"{z:g}" for z in np.round(markov.core_eigenvalues(T, expected_rank[name]), 4)],
        "R²_oracle": markov.oracle_r2(T)} for name, T in chains.items()],
      caption="Each chain and what an ideal predictor of it achieves", digits=4)

# %% [markdown]
# ## Training, and two controls
#
# One batched program trains every seed at once (a 1-layer post-LN transformer, as in the paper;
# each seed has its own initialisation and batch order). Two controls run the same ACE pipeline:
#
# - **untrained**: the same architecture and seeds, with the initial weights (no training);
# - **shuffled**: the same models trained on the paper chain's sequences with the targets permuted
#   across all sequences and positions, which keeps their frequencies and removes any dependence on
#   the input: such a model can learn $\pi$ and nothing about the current state.
#
# If a linear read-out of the current token alone gave the headline numbers, the controls would
# reach them too. {numref}`fig-01-training` follows every seed's held-out accuracy during training
# against the Bayes accuracy and the stationary guess.

# %%
configs = {name: TransformerConfig(vocab=K, n_ctx=seq_len, d_model=d_model, n_heads=n_heads, d_mlp=d_mlp,
                                   n_layers=1, norm="post", dropout=dropout) for name, K in n_states.items()}
steps = epochs * (n_train // batch_size)
train_sets = {"paper": data["paper"][0], "deficient": data["deficient"][0],
              "shuffled": Dataset(data["paper"][0].x, markov.shuffle_targets(data["paper"][0].y, seed=data_seed))}
models, histories = {}, {}
for name, train_set in train_sets.items():
    curve_set = data["deficient" if name == "deficient" else "paper"][1]
    curve_set = Dataset(curve_set.x[:512], curve_set.y[:512])     # learning curves on 512 held-out sequences
    models[name] = BatchedTransformer(configs["deficient" if name == "deficient" else "paper"], seeds).to(dev)
    histories[name] = train_ensemble(models[name], train_set, curve_set, steps=steps, batch_size=batch_size, lr=lr,
                                     eval_every=max(1, steps // 20), eval_train_size=512, progress=False)
untrained = {name: BatchedTransformer(config, seeds).to(dev).eval() for name, config in configs.items()}

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Held-out next-state accuracy during training, one colour per seed, against the Bayes accuracy (dashed black) and the stationary guess (dotted grey): left the paper's chain (dashed lines: the shuffled-target control), right the rank-deficient chain.", "name": "fig-01-training"}}
fig, axes = panel_grid(2, ncols=2, panel=(5, 3.4), sharey=True)
for ax, chain in zip(axes, chains):
    runs = ["paper", "shuffled"] if chain == "paper" else ["deficient"]
    for run, style in zip(runs, ["-", "--"]):
        for m, seed in enumerate(seeds):
            ax.plot(histories[run].steps, histories[run].curve("test_acc")[:, m], style, color=f"C{m}",
                    label=f"seed {seed}" + (" (shuffled targets)" if run == "shuffled" else ""))
    ax.axhline(markov.bayes_accuracy(chains[chain]), color="black", ls="--", lw=1, label="Bayes accuracy")
    ax.axhline(markov.stationary_guess_accuracy(chains[chain]), color="0.5", ls=":", lw=1, label="stationary guess")
    ax.set(xlabel="step", title=f"{chain} chain, 512 held-out sequences")
axes[0].set_ylabel("test accuracy")
fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=4)
figures.save(fig, "training_curves")
plt.show()

# %% [markdown]
# ## Extract: the ACE spectrum
#
# Activations $h$ are the residual stream at every position of the *training* sequences; the task
# outputs are the centred logits, so $\mathrm{Obs} = \mathbb{E}[J^\top J]$ sees only what can change
# a prediction. The core rank is the smallest $r$ whose $\sigma^2$ hold a fraction `energy_threshold`
# of the total. The controls go through the same extraction; each ensemble is listed with the chain
# whose sequences it reads. {numref}`fig-01-spectrum` shows each component's share of $\sigma^2$ for
# the trained models and the controls, against $\operatorname{rank}(T - \mathbf{1}\pi^\top)$.

# %%
ensembles = {"paper": ("paper", models["paper"]), "paper, untrained": ("paper", untrained["paper"]),
             "paper, shuffled": ("paper", models["shuffled"]), "deficient": ("deficient", models["deficient"]),
             "deficient, untrained": ("deficient", untrained["deficient"])}
results = {}
for name, (chain, model) in ensembles.items():
    train_set, test_set = data[chain]
    results[name] = ace.next_token_ace(model, train_set.x.to(dev), test_set.x.to(dev), test_set.y.to(dev),
                                       energy_threshold)
table([{"ensemble": name, "held-out accuracy": results[name].base_acc.cpu().numpy(),
        "core rank by energy": results[name].rank.tolist(), "rank(T − 1πᵀ)": expected_rank[chain]}
       for name, (chain, _model) in ensembles.items()],
      caption=f"Each ensemble's held-out accuracy and core rank, per seed ({', '.join(map(str, seeds))})", digits=4)

# %% tags=["hide-input"] mystnb={"figure": {"caption": "ACE spectrum (each component's share of \u03c3\u00b2) of the trained models (circles), their untrained twins (crosses) and the shuffled-target control (squares). The dashed line marks the rank of T \u2212 1\u03c0\u1d40, the dimensions a model needs to carry the chain's algorithm; the dotted line is the energy threshold.", "name": "fig-01-spectrum"}}
fig, axes = panel_grid(2, ncols=2, panel=(5, 3.6), sharey=True)
for ax, chain in zip(axes, chains):
    for name, kind, style in [(chain, "trained", "o-"), (f"{chain}, untrained", "untrained", "x:"),
                              (f"{chain}, shuffled", "shuffled targets", "s--")]:
        if name not in results:
            continue
        sigma2 = results[name].core.sigma.square().cpu().numpy()
        energy = sigma2 / sigma2.sum(-1, keepdims=True)
        for m, seed in enumerate(seeds):
            ax.semilogy(np.arange(1, n_states[chain] + 2), energy[m, :n_states[chain] + 1].clip(1e-18), style, ms=4,
                        color=f"C{m}", label=f"{kind}, seed {seed}")
    ax.axvline(expected_rank[chain] + 0.5, color="black", ls="--", lw=1, label="rank(T − 1πᵀ)")
    ax.axhline(1 - energy_threshold, color="0.5", ls=":", lw=1, label="1 − energy threshold")
    ax.set(xlabel="component", title=f"{chain} chain, rank(T − 1πᵀ) = {expected_rank[chain]}")
    integer_ticks(ax, "x")
axes[0].set_ylabel("σ² / Σσ²")
fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=4)
figures.save(fig, "ace_spectrum")
plt.show()

# %% [markdown]
# ## Validate: is the core necessary and sufficient?
#
# On *held-out* sequences, keep only the top-$r$ core coordinates (every other direction set to its
# training mean, $h \mapsto \mu + QQ^\top(h - \mu)$) or remove them ($h \mapsto h - QQ^\top(h - \mu)$),
# and measure next-state accuracy for every $r$. Both ablations are taken about the training mean
# $\mu$, as defined on [the method page](../book/ace.md). The controls are ablated the same way, each
# at its own energy rank. {numref}`fig-01-ablations` plots both accuracies of the trained models
# against $r$.

# %%
validation = {}
for name, (chain, _model) in ensembles.items():
    validation[name] = markov_cores.validate_at_energy_rank(results[name],
                                                            markov.stationary_guess_accuracy(chains[chain]) + 0.01)
table([{"ensemble": name, "sufficient rank": val["sufficient"], "necessary rank": val["necessary"],
        "keep-only / model accuracy": val["ratio"], "accuracy after removal": val["removed"]}
       for name, val in validation.items()],
      caption="Ablations of each ensemble at its energy rank, per seed (necessary rank −1: none)", digits=4)

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Held-out accuracy when only the top-r core directions are kept (circles) or removed (squares), against r: a sufficient core reaches the Bayes accuracy (dashed) at small r, and a necessary one leaves about the stationary guess (dotted) once removed.", "name": "fig-01-ablations"}}
fig, axes = panel_grid(2, ncols=2, panel=(5, 3.6), sharey=True)
for ax, chain in zip(axes, chains):
    res = results[chain]
    for m, seed in enumerate(seeds):
        ax.plot(res.ranks, res.keep_acc[m].cpu(), "o-", ms=3, color=f"C{m}", label=f"keep-only, seed {seed}")
        ax.plot(res.ranks, res.remove_acc[m].cpu(), "s--", ms=3, color=f"C{m}", label=f"remove, seed {seed}")
    ax.axhline(markov.bayes_accuracy(chains[chain]), color="black", ls="--", lw=1, label="Bayes")
    ax.axhline(markov.stationary_guess_accuracy(chains[chain]), color="0.5", ls=":", lw=1, label="stationary guess")
    ax.set(xlabel="core rank r", title=f"Ablations against rank, {chain} chain")
    integer_ticks(ax, "x")
axes[0].set_ylabel("held-out accuracy")
fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=4)
figures.save(fig, "ablations")
plt.show()

# %% [markdown]
# ## Identify: which operator does the core implement?
#
# Fit $z_{t+1} \approx A z_t$ by least squares on centred core coordinates of consecutive positions
# of the *training* sequences. If the core carries the chain, $\operatorname{eig}(A)$ are the
# eigenvalues of $T$ on the span of $T - \mathbf{1}\pi^\top$: all of $\operatorname{eig}(T)$ but 1
# for the paper chain, and for the second chain also without the eigenvalue 0 that the shared row
# adds. How much of the next step the fitted operator explains is its $R^2$ on *held-out* sequences,
# in whitened core coordinates,
#
# $$R^2_\text{core} = 1 - \tfrac{1}{r}\operatorname{tr}\!\big(\Sigma^{-1}\,\mathbb{E}[(z_{t+1} - A z_t)(z_{t+1} - A z_t)^\top]\big),$$
#
# with $\Sigma$ the covariance of $z_{t+1}$: the mean $R^2$ over whitened coordinates, unchanged by any
# invertible change of core coordinates. A chain is random, so even the Bayes predictor explains only
# part of the next step: $R^2_\text{oracle}$ is the same quantity for the exact code
# $q_t = (T - \mathbf{1}\pi^\top)^\top e_{x_t}$ with the true dynamics, in closed form from $T$ (the
# mean squared canonical correlation of $q_t$ and $q_{t+1}$; see `markov.oracle_r2`). The paper
# reports $R^2_\text{core}/R^2_\text{oracle} > 0.98$; the whitened definition is this book's choice,
# made so that the oracle depends on $T$ alone and any correct core can reach it. The
# controls are fitted at the rank $\operatorname{rank}(T - \mathbf{1}\pi^\top)$ a correct core has,
# whatever their own energy rank: the most favourable rank for them. {numref}`fig-01-operator` sets
# the fitted eigenvalues of each seed and of its untrained control beside the chain's own.

# %%
identified = {}
for name, (chain, _model) in ensembles.items():
    fit = markov_cores.identify_operator(results[name], chains[chain], None if name == chain else expected_rank[chain])
    identified[name] = fit
table([{"ensemble": name, "max |eig(A) − eig(T)|": fit["err"], "R²_core / R²_oracle": fit["r2_ratio"]}
       for name, fit in identified.items()], caption="The operator fitted on each ensemble's core, per seed", digits=4)

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Eigenvalues of the transition operator fitted on the core coordinates (dots, one colour per seed) and on the untrained control (crosses), with the chain's own core eigenvalues as the reference: a recovered algorithm puts the dots on the reference points.", "name": "fig-01-operator"}}
fig, axes = panel_grid(2, ncols=2, panel=(5, 4.8))
for ax, chain in zip(axes, chains):
    plots.complex_plane(ax, reference=markov.core_eigenvalues(chains[chain], expected_rank[chain]))
    for m, seed in enumerate(seeds):
        lam = identified[chain]["eigs"][m]
        ax.scatter(lam.real, lam.imag, s=25, color=f"C{m}", label=f"eig(A), seed {seed}", zorder=4)
        lam = identified[f"{chain}, untrained"]["eigs"][m]
        ax.scatter(lam.real, lam.imag, s=25, marker="x", color=f"C{m}",
                   label=f"untrained control, seed {seed}", zorder=4)
    ax.set_title(f"Fitted operator, {chain} chain")
fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=4)
figures.save(fig, "operator_eigenvalues")
plt.show()

# %% [markdown]
# ### The second chain: are the states that share a row merged?
#
# States with the same row of $T$ have the same future, so the Bayes code gives them the same core
# coordinates, and the core's operator and its $R^2$ assume it. Two measurements per seed, on held-out
# positions: the distance between the mean core coordinates of two such states, in whitened units
# (0 for the Bayes code; 1 is one standard deviation of the core), beside the largest such distance
# between states with different rows; and, with the core removed, which state each current state
# is predicted to go to. With the core gone, the prediction should no longer depend on the current
# state; when the two likeliest stationary states are close in $\pi$, any state-dependent residue
# decides between them, and the removal accuracy moves away from the stationary guess.
#
# How to read the rows of the second chain: a seed whose shared-row distance is near 0 merged the two
# states, as the Bayes code does, and should pass every `_deficient` row. A seed that keeps them
# apart carries one direction more than the task needs: its energy rank reads K − 1 instead of
# $\operatorname{rank}(T - \mathbf{1}\pi^\top)$ (the rank claim failing upwards, which the paper's chain
# cannot show), and its linear operator must send two different points to one future, which lowers
# $R^2_\text{core}/R^2_\text{oracle}$ and moves the eigenvalues. The distance is in the claims table as
# `shared_row_distance_deficient`.

# %%
T_def, K = chains["deficient"], n_states["deficient"]
merged = markov_cores.shared_row_analysis(models["deficient"], results["deficient"], T_def, data["deficient"][1].x)
shared, shared_distance, apart_distance = merged.shared, merged.shared_distance, merged.apart_distance
print(f"π = {np.round(markov.stationary_distribution(T_def), 4)}; states sharing a row: {shared}")
display(table([{"seed": seed, **{f"distance {a}–{b}": float(merged.distances[m][a, b]) for a, b in shared},
                "largest distance, different rows": apart_distance[m]} for m, seed in enumerate(seeds)],
              caption="Whitened distance between the mean core coordinates of states that share a row, per seed"))
table([{"seed": seed, "current state": k, **{f"→ {j}": share for j, share in enumerate(merged.shares[m, k].tolist())}}
       for m, seed in enumerate(seeds) for k in range(K)],
      caption="With the core removed: the share of held-out positions at each current state predicted to go to "
              "each next state (→ j)")

# %% [markdown]
# ## Compare models: different weights, different subspaces, the same computation
#
# Three views of every pair of seeds: the cosine of their flattened weight matrices, beside the same
# statistic between their random initialisations (independent random vectors in many dimensions are
# nearly orthogonal already); the projector overlap $\|Q_a^\top Q_b\|_F^2/\sqrt{r_a r_b}$ of their
# cores (1 = the same subspace; independent random subspaces give $\sqrt{r_a r_b}/D$); and the
# canonical correlations of their core coordinates on the same held-out inputs (1 = the same
# information up to a change of coordinates). The controls get the overlaps and the canonical
# correlations too. The two claims of *difference* (small weight cosines, overlaps at the level of
# chance) are tested against the same statistic where training played no part: the seeds' initial
# weights, and the cores of the untrained and shuffled-target controls. If those are as far apart,
# different weights and different subspaces are a premise of the comparison rather than something
# training produced, and the claims are uninformative. {numref}`fig-01-seeds` shows the three views
# for every pair of seeds on the paper's chain, and {numref}`fig-01-controls` sets each ensemble's
# headline numbers beside those of the controls.

# %%
M = len(seeds)
pairs = [(a, b) for a in range(M) for b in range(a + 1, M)]
cosines = markov_cores.weight_cosines(models["paper"], untrained["paper"])
weight_cos, weight_cos_init, weight_cos_own_init = cosines["trained"], cosines["init"], cosines["own_init"]
compared = {}
for name, (chain, _model) in ensembles.items():
    ranks_used = markov_cores.fit_ranks(results[name], None if name == chain else expected_rank[chain])
    compared[name] = markov_cores.compare_seeds(results[name], ranks_used)
print(f"max |cos| of weights: trained {np.abs(subspaces.off_diagonal(weight_cos)).max():.4f}, "
      f"at initialisation {np.abs(subspaces.off_diagonal(weight_cos_init)).max():.4f}; each trained model against "
      f"its own initialisation {np.abs(weight_cos_own_init).round(4)}")
table([{"ensemble": name, "smallest canonical correlation": subspaces.off_diagonal(cmp["cca_min"]).min(),
        "projector overlaps": subspaces.off_diagonal(cmp["overlap"])} for name, cmp in compared.items()],
      caption="Each ensemble's seeds compared pairwise (overlaps in pair order "
              + ", ".join(f"{seeds[a]}–{seeds[b]}" for a, b in pairs) + ")", digits=4)

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Do the seeds agree? Top left: |cos| between the seeds' weights; top right: the overlap of their core projectors; bottom: the smallest top-r canonical correlation of their core coordinates. Low weight cosines beside high core overlaps mean different weights carrying the same core.", "name": "fig-01-seeds"}}
labels = [str(s) for s in seeds]
fig, axes = panel_grid(3, ncols=2, panel=(5, 4.2))
plots.heatmap(axes[0], np.abs(weight_cos), labels, "|cos| of weights (paper chain)")
plots.heatmap(axes[1], compared["paper"]["overlap"], labels, "core projector overlap")
plots.heatmap(axes[2], compared["paper"]["cca_min"], labels, "min top-r canonical correlation")
for ax in axes:
    ax.set(xlabel="seed", ylabel="seed")
figures.save(fig, "model_comparison")
plt.show()

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Each ensemble's headline numbers (blue: trained on a chain, grey: controls): the smallest canonical correlation between seeds, the largest error of the fitted operator's eigenvalues, and the smallest ratio of the core's R\u00b2 to the oracle's.", "name": "fig-01-controls"}}
names = list(ensembles)
fig, axes = panel_grid(3, ncols=2, panel=(5, 3.6))
for ax, (title, ylabel, values) in zip(axes, [
        ("min top-r canonical correlation", "canonical correlation",
         [subspaces.off_diagonal(compared[n]["cca_min"]).min() for n in names]),
        ("max |eig(A) − eig(T)|", "eigenvalue error", [max(identified[n]["err"]) for n in names]),
        ("min R²_core / R²_oracle", "R² ratio", [identified[n]["r2_ratio"].min() for n in names])]):
    ax.bar(range(len(names)), values, color=["C0" if n in chains else "0.6" for n in names])
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right")
    ax.set(title=title, xlabel="ensemble", ylabel=ylabel)
    ax.grid(axis="x", visible=False)
figures.save(fig, "controls")
plt.show()

# %% [markdown]
# ## Claims
#
# Each row is measured above. Targets follow the paper ({cite}`schiffman2026cores`); rows ending in
# `_deficient` are the second chain, the book's own. Every claim about the trained models holds for
# every seed (or every pair of seeds) the profile trains, and is tested against the same statistic on
# a case without the effect; it passes only when the trained models meet the bound and that case
# does not.
#
# - **The models learned the chain** (`model_accuracy`, a precondition): held-out accuracy within 0.01
#   of the Bayes accuracy, against the untrained and shuffled-target controls.
# - **Extract** (`core_rank`): the energy rank equals $\operatorname{rank}(T - \mathbf{1}\pi^\top)$,
#   against the controls' energy ranks. On the paper's chain the rank cannot exceed $K - 1$, which the
#   controls reach too, so the row is expected to be uninformative; the second chain's is the
#   informative one.
# - **Validate** (`keep_only_ratio`, `remove_only_accuracy`): keep-only at the core rank keeps the
#   model's accuracy, and removing the core leaves at most the stationary guess + 0.05, each against
#   the controls ablated the same way at their own energy rank. A control that never learned the chain
#   has little accuracy to lose, so a removal leaves it low whatever its core carried: the removal row
#   is uninformative whenever a control meets the bound, which is on the accuracy left, not on the loss.
# - **Different weights, different subspaces** (`weight_cosine_max`, `projector_overlap`): small weight
#   cosines between seeds, against the seeds' initial weights (and, as a case the bound must reject,
#   each trained model against its own initialisation); core overlaps at the level of chance (below the
#   99.9th percentile of random subspaces of the same ranks), against the controls' cores.
# - **The same computation** (`cca_min`, `cca_mean`, `eig_max_error`, `r2_core_over_oracle`): the
#   seeds' core coordinates are linear images of one another, and the operator fitted on them has the
#   chain's eigenvalues and explains the next step as well as the exact code, each against the
#   controls fitted at $\operatorname{rank}(T - \mathbf{1}\pi^\top)$.
#
# The claims that the models *differ* and that removing the core leaves chance are about models that
# learned the chain: they are undecided when some seed did not (held-out accuracy closer to the
# stationary guess than to the Bayes accuracy). A failing row is shown as failing, with its measured
# value; the second chain's rows borrow the paper's bars, which the paper sets on its cyclic chain.

# %%
findings = markov_cores.Findings(seeds=seeds, chains=chains, results=results, validation=validation,
                                 identified=identified, compared=compared, cosines=cosines, merged=merged)
claims.add(*markov_cores.claims(findings))
claims.write()
claims.table()
