# ---
# jupyter:
#   corekit:
#     headline_caption: Grokking time against weight decay and modulus, with the fitted
#       laws.
#     headline_figure: tau_fits
#     paper: ACE
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
# # The inverse scaling law of grokking time
#
# **Question.** Grokking is the delay between fitting the training pairs and generalising
# ({cite}`power2022grokking`). The ACE paper ({cite}`schiffman2026cores`) ties that delay to
# functional redundancy: weight decay $\omega$ is the pressure that compresses the memorising
# solution into a core, and the number of equivalent Fourier modes the core can use grows with the
# modulus $p$, so the delay should shrink with both, $\tau_\text{grok} \propto 1/(\omega p)$. The paper
# fits an exponent of $-1.02$ for $\tau$ against $\omega$. Does the law hold, and how sure are we?
#
# **Method.** For each run, $\tau$ = (its grokking step, `corekit.curves.grokking_step`: the first
# evaluated step with test accuracy $\ge 0.99$) − (the first evaluated step with training accuracy
# $\ge 0.99$), in optimizer steps. Two sweeps: $p$ at fixed
# $\omega$ (`p_values`, `sweep_weight_decay`, full batch) and $\omega$ at fixed $p$ (`weight_decays`,
# `omega_p`, `omega_batch_size`), each point over `seeds`. Every run of the same $p$ and batch size
# trains in one batched program (`corekit.chapters.grokking_scaling_law`); a program stops `margin` steps after its last model
# groks, and a run still below 0.99 test accuracy at its budget (`p_max_epochs`, `omega_max_epochs`) is
# **censored**: counted and shown, but not in the fits; the ω exponent is also fitted with every censored run entered at its lower
# bound (steps run − step it fitted the training set), so a reader sees what leaving them out does.
# Fits use each point's geometric mean of $\tau$ over its grokked seeds; confidence intervals
# resample the seeds of every point (bootstrap, `n_boot` draws), so every point needs several seeds.
#
# **Profiles.** `notebooks/params/paper/03_grokking_scaling_law.yaml` is the authors' sweep, each
# value with its source: the `nn.TransformerEncoderLayer` block of chapter 02 with one layer, seven
# moduli at ω = 1 full batch for at most 30,000 epochs, six weight decays 0.3–3 at p = 53 with batch
# 512 for at most 20,000 epochs, 12 seeds, τ evaluated every step; `executor = "ray"` runs the shards
# as Ray tasks on a cluster (one shard per GPU). The quick defaults are a reduced sweep for a CPU: a
# 4× narrower pre-LayerNorm model with the $[a, b, =]$ input, a larger learning rate, four seeds,
# three moduli 31–43 and three weight decays spanning only a factor 2 at p = 31 (the cheapest
# modulus to train: 12 models at p = 53 alone took most of a 5-minute run), evaluated every 20 steps
# (the narrow models without LayerNorm did not grok within 4000 steps at p = 31 in our trials, and
# below ω = 1 grokking takes longer than a CPU run should). A factor-2 range of ω and three close
# moduli test the direction of the law more than its exponent; a two-parameter law through three
# points fits them almost whatever they are, so `log_law_r2` says little at this size.
# The `cpu` profile (`notebooks/params/cpu/03_grokking_scaling_law.yaml`), which the published run
# uses, keeps the authors' one-layer block, optimiser and all six of the paper's weight decays (a 10×
# range of $\omega$) and takes the paper's seven moduli 31–101 with 113 added (so that at least
# three lie past $3 p_c$, where τ ∝ 1/p is claimed), with eight seeds a point. It
# changes three things, measured on 2 cores: d_model 64 instead of 128, a learning rate of 3e-3
# instead of 1e-3 (grokking about three times sooner, as in chapter 02), and the $\omega$ sweep at
# $p = 31$ instead of 53, whose 480 training pairs make the paper's batch of 512 a full batch; one
# seed grokked there at steps 1,700, 950 and 500 for $\omega$ = 0.5, 1 and 2, so the slowest point
# ($\omega = 0.3$) takes a few thousand steps. $\tau$ is evaluated every 2 steps (≤ 1 % of the fastest τ,
# about 220 steps). Because its learning rate is not the paper's, the profile runs two of its moduli
# (`probe_p_values`: 53 and 89) again at the paper's 1e-3 (`probe_lr`) with four seeds (`probe_seeds`), to
# tell a trend of the law from a trend of the learning rate.

# %% tags=["parameters"]
p_values: list[int] = [31, 37, 43]  # length: 2 or more; range: [3, inf); primes
sweep_weight_decay: float = 1.0  # range: (0, inf)
p_max_epochs: int = 3000  # range: [1, inf); the p sweep trains full batch, one step per epoch
weight_decays: list[float] = [1.0, 1.5, 2.0]  # length: 2 or more; range: (0, inf)
omega_p: int = 31  # range: [3, inf); a prime
omega_batch_size: int = 0  # range: [0, inf); 0 (or at least the training pairs): full batch
omega_max_epochs: int = 3000  # range: [1, inf)
drop_last: bool = True  # False: an epoch also trains on the shorter last batch (torch's DataLoader default)
seeds: list[int] = [0, 1, 2, 3]  # length: 4 or more; range: [0, inf)
train_frac: float = 0.5  # range: (0, 1)
d_model: int = 32  # range: [1, inf)
n_heads: int = 4  # range: [1, inf)
d_mlp: int = 128  # range: [1, inf)
norm: str = "pre"  # one of: pre, post, none
dropout: float = 0.0  # range: [0, 1)
embedding_dropout: bool = True  # False: dropout only inside the blocks (nn.TransformerEncoderLayer, the authors' model)
causal: bool = True  # False: every position attends to every other (nn.TransformerEncoder without a mask)
qkv_bias: bool = False  # query, key and value biases (nn.MultiheadAttention has them)
init: str = "fan_in"  # one of: fan_in, nanda, torch
equals_token: bool = True  # True: input a, b and an equals token; False: just a, b (the authors' format)
lr: float = 3e-3  # range: (0, inf)
probe_lr: float = 2e-3  # range: (0, inf); a second learning rate for two moduli of the p sweep (cpu, paper: the paper's 1e-3)
probe_p_values: list[int] = [31, 37]  # length: 2; range: [3, inf); primes; moduli of the p sweep run again at probe_lr
probe_seeds: list[int] = [0, 1]  # length: 2 or more; range: [0, inf); seeds (of seeds) the probe runs
betas: list[float] = [0.9, 0.98]  # length: 2; range: [0, 1)
margin: int = 100  # range: [1, inf); steps a shard runs on after its last model groks
eval_every: int = 20  # range: [1, inf); steps between evaluations (τ is resolved to this)
n_boot: int = 1000  # range: [10, inf)
executor: str = "local"  # one of: local, ray
ray_address: str = ""  # with executor ray: empty starts Ray on this machine; "auto" joins the cluster `ray start --head` began; or host:port
checkpoint_dir: str = ""  # path; writes: folder; empty: no checkpoints
checkpoint_every: int = 1000  # range: [1, inf); steps between a shard's checkpoints
shard_records: str = ""  # path; empty: none; else a folder of finished shards' records (scripts/train-shards.py), re-read instead of trained again
max_models_per_shard: int = 0  # range: [0, inf); 0: no limit; smaller shards spread a sweep over more GPUs
data_seed: int = 0  # range: [0, inf)
device: str = "auto"
cpu_threads: int = 0  # range: [0, inf); CPU threads (0: as many as cores are free when the run starts)
output_dir: str = ""  # path; empty: the claims table and figures stay in the executed notebook only; else NAME.metrics.json and figures/NAME/ go there

# %%
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import display

from corekit import scaling
from corekit.chapters import grokking_scaling_law
from corekit.chapters.grokking_scaling_law import draw_tau_panel, fit_sweeps, results_table
from corekit.plots import panel_grid
from corekit.runs.session import setup
from corekit.tables import table

claims, figures, dev = setup("03_grokking_scaling_law", globals())
plan = grokking_scaling_law.sweep_plan(globals())      # each sweep's runs (p, ω, seed) and settings, and the probe's
p_settings, omega_settings = plan.p_settings, plan.omega_settings

# %% [markdown]
# ## Running both sweeps
#
# A run that appears in both sweeps (the point $p$ = `omega_p`, $\omega$ = `sweep_weight_decay` at
# the same batch size and step budget) is trained once and used in both.

# %%
run_options = dict(executor=executor, ray_address=ray_address or None, device=str(dev), max_models=max_models_per_shard or None,
                   checkpoint_dir=checkpoint_dir or None, checkpoint_every=checkpoint_every, records=shard_records or None)
p_runs, omega_runs, results, probe_runs = grokking_scaling_law.run_plan(plan, **run_options)
if shard_records:
    trained = grokking_scaling_law.records_summary(plan, shard_records, max_models_per_shard or None)
    claims.record_training(**trained)
    print(f"{trained['re_read']} of {trained['shards']} shards re-read from their records: {trained['training_s']:,.0f} s "
          f"of training in {trained['segments']} segment(s), at commit(s) {', '.join(trained['commits']) or '-'}")
censored = [r for r in results if r.censored]
rows = results_table(results)
print(f"{len(results)} runs, {len(censored)} censored (no grokking within the step budget: "
      f"{p_settings.max_steps} steps for the p sweep, {omega_settings.max_steps} for the ω sweep)")
table([{"p": row["p"], "ω": f"{row['weight_decay']:g}", "seed": row["seed"], "t_train": row["t_train"],
        "t_test": row["t_test"], "τ": row["tau"]} for row in rows],
      caption="Every run: the steps at which it fits the training set (t_train) and the test set (t_test), "
              "and τ = t_test − t_train (a dash: censored)", digits=0)

# %% [markdown]
# ## What a run looks like
#
# Training and test accuracy of the first seed at each weight decay of the $\omega$ sweep
# ({numref}`fig-03-accuracy`). The dots mark the steps where each reaches 0.99; their difference is
# $\tau$. If $\tau \propto 1/\omega$, the gap between the two dots of a colour narrows as $\omega$
# grows; a curve without a second dot did not grok within its budget.

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Training (dotted) and held-out (solid) accuracy for each weight decay \u03c9 of the \u03c9 sweep, with the steps where each reaches 0.99 (dots); grokking time \u03c4 is the gap between them.", "name": "fig-03-accuracy"}}
fig, ax = plt.subplots(figsize=(8, 3.6))
for i, w in enumerate(weight_decays):
    r = next(r for r in omega_runs if r.weight_decay == w)
    ax.plot(r.steps, r.train_acc, color=f"C{i}", lw=1, ls=":")
    ax.plot(r.steps, r.test_acc, color=f"C{i}", label=f"ω = {w:g} (test; dotted: train)")
    for t in (r.t_train, r.t_test):
        if t is not None:
            ax.plot([t], [0.99], "o", color=f"C{i}", ms=4)
ax.set(xlabel="step", ylabel="accuracy", title=f"a + b mod {omega_p}, seed {seeds[0]}")
ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1))
figures.save(fig, "accuracy_curves")
plt.show()

# %% [markdown]
# ## τ against ω and against p
#
# Each grey dot is a run, each black dot a point's geometric mean; the line is the least-squares
# power law on the means, the band its 95% bootstrap interval over seeds. A red triangle is a
# censored run, drawn at the lower bound its budget gives (steps run − step it fitted the training set). Against $p$ we fit both a
# power law and $\tau(p) = -\Omega \log(1 - p_c/p)$, which behaves as $\Omega p_c / p$ for
# $p \gg p_c$ and diverges as $p \to p_c$ (below $p_c$ there are too few modes to grok).
# {numref}`fig-03-tau` shows both sweeps with their fits.

# %%
sweep_fits = fit_sweeps(omega_runs, p_runs, n_boot)
omega_points, p_points, fits, exponents = sweep_fits.omega_points, sweep_fits.p_points, sweep_fits.fits, sweep_fits.exponents
log_fit, p_c_interval, laws = sweep_fits.log_fit, sweep_fits.p_c_interval, sweep_fits.laws
if sweep_fits.log_error is not None:
    print("τ(p) = −Ω log(1 − p_c/p) did not converge:", sweep_fits.log_error)
display(table([{"fit": f"exponent of τ in {name}",
                "estimate [interval]": exponents[name].summary() if name in exponents
                else "fewer than two points with a grokked run, no fit"} for name in ("ω", "p")]
              + ([{"fit": "p_c of −Ω log(1 − p_c/p)", "estimate [interval]": p_c_interval.summary()}]
                 if log_fit is not None else []),
              caption="The fits on each sweep's geometric means, with bootstrap intervals over the seeds"))
if log_fit is not None:
    display(table([{"law": law, "AIC": laws[f"aic_{key}"], "leave-one-out error": laws[f"loo_{key}"]}
                   for law, key in (("power law", "power"), ("−Ω log(1 − p_c/p)", "log"))],
                  caption="The two laws of τ(p) side by side (lower is better for both columns)"))

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Grokking time \u03c4 against weight decay \u03c9 (left) and modulus p (right), every seed in grey and geometric means in black, with the power-law fit and its bootstrap band (blue) and, for p, the log law \u2212\u03a9 log(1 \u2212 p_c/p) (orange, dashed); open triangles are runs that had not grokked by the end (\u03c4 above the point).", "name": "fig-03-tau"}}
fig, axes = panel_grid(2, ncols=2, panel=(5.5, 4))
for ax, points, runs, name, key in ((axes[0], omega_points, omega_runs, "ω", "weight_decay"),
                                    (axes[1], p_points, p_runs, "p", "p")):
    draw_tau_panel(ax, points, runs, key, name, fits.get(name), exponents.get(name), n_boot)
if log_fit is not None:
    xs = np.linspace(min(p_points), max(p_points), 50)
    axes[1].plot(xs, log_fit.predict(xs), color="C1", ls="--",
                 label=f"−Ω log(1 − p_c/p): p_c = {log_fit.params['p_c']:.1f}, R² = {log_fit.r2:.2f}")
axes[0].set_title(f"τ vs weight decay (p = {omega_p})")
axes[1].set_title(f"τ vs modulus (ω = {sweep_weight_decay:g})")
for ax in axes:
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2))
figures.save(fig, "tau_fits")
plt.show()

# %% [markdown]
# ## Memorising and generalising, per modulus
#
# $\tau$ is a difference of two times, $t_\text{test} - t_\text{train}$, and either can carry its trend
# in $p$. {numref}`fig-03-times` shows both, per modulus (geometric means over the grokked seeds,
# `grokking_scaling_law.times_per_point`), with the moduli at least $3 p_c$ shaded. The same two
# times at a second learning rate (`probe_lr`: the paper's 1e-3 in the cpu and paper profiles) on two
# moduli of the sweep (`probe_p_values`) say whether the trend belongs to the law or to the profile's
# learning rate: at both learning rates, the exponent of $\tau$ between the two moduli
# (`grokking_scaling_law.two_point_exponent`).

# %%
p_times = grokking_scaling_law.times_per_point(p_runs)
probe_times = grokking_scaling_law.times_per_point(probe_runs)
p_c_all = log_fit.params["p_c"] if log_fit is not None else float("nan")
far = grokking_scaling_law.far_moduli(p_points, p_c_all)
probe_k = {f"lr {rate:g}": grokking_scaling_law.two_point_exponent(rows_, probe_p_values)
           for rate, rows_ in ((lr, p_times), (probe_lr, probe_times))}
display(table([{"lr": f"{rate:g}", "p": row["p"], "t_train": row["t_train"], "t_test": row["t_test"], "τ": row["tau"],
                "τ·ω·p": None if row["tau"] is None else row["tau"] * sweep_weight_decay * row["p"],
                "grokked": f"{row['grokked']} of {row['runs']}"}
               for rate, rows_ in ((lr, p_times), (probe_lr, probe_times)) for row in rows_
               if rate == lr or row["p"] in probe_p_values],
              caption=f"Per modulus (ω = {sweep_weight_decay:g}): geometric means of the steps to fit the training "
                      f"pairs and the test pairs, and of τ; the sweep at lr {lr:g} and the probe at lr {probe_lr:g}",
              digits=0))
print(f"moduli ≥ 3 p_c = {3 * p_c_all:.1f} (p_c {p_c_all:.1f} from the log law on all moduli): {far}; exponent of τ "
      "between the probe's moduli: " + ", ".join(f"{k}: {v if v is None else round(v, 3)}" for k, v in probe_k.items()))

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Steps to fit the training pairs (t_train), the test pairs (t_test) and their difference \u03c4 against the modulus (geometric means over the grokked seeds), at the sweep's learning rate (filled) and at the probe's learning rate on its two moduli (open); the shaded moduli are at least 3 p_c.", "name": "fig-03-times"}}
fig, ax = plt.subplots(figsize=(7, 3.8))
for column, colour in (("t_train", "C2"), ("t_test", "C0"), ("tau", "black")):
    for rows_, fill, rate in ((p_times, True, lr), (probe_times, False, probe_lr)):
        xy = [(row["p"], row[column]) for row in rows_ if row[column] is not None]
        if xy:
            ax.plot(*zip(*xy), "o-" if fill else "o--", color=colour, mfc=colour if fill else "none",
                    label=f"{'τ' if column == 'tau' else column}, lr {rate:g}")
if far:
    ax.axvspan(min(far) * 0.97, max(p_points) * 1.03, color="0.9", zorder=0, label="p ≥ 3 p_c")
ax.set(xscale="log", yscale="log", xlabel="p", ylabel="steps", title=f"a + b mod p, ω = {sweep_weight_decay:g}")
ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
figures.save(fig, "times_per_modulus")
plt.show()

# %% [markdown]
# ## Collapse
#
# If $\tau \propto 1/(\omega p)$, the product $\tau\,\omega\,p$ is the same constant at every point of
# both sweeps. Its coefficient of variation over all grokked runs measures how far that is from true;
# {numref}`fig-03-collapse` plots the product for every grokked run of both sweeps.

# %%
grokked = [r for r in results if not r.censored and r.tau > 0]
products = scaling.collapse_values([r.p for r in grokked], [r.weight_decay for r in grokked], [r.tau for r in grokked])
collapse_cv = scaling.coefficient_of_variation(products) if len(products) >= 2 else float("nan")

# %% tags=["hide-input"] mystnb={"figure": {"caption": "\u03c4\u00b7\u03c9\u00b7p for every run of both sweeps: if \u03c4 \u221d 1/(\u03c9 p), the points fall on one level (the dashed mean; the coefficient of variation in the legend says how far they scatter).", "name": "fig-03-collapse"}}
fig, ax = plt.subplots(figsize=(8, 3.4))
for runs, name, color in ((p_runs, "p sweep", "C0"), (omega_runs, "ω sweep", "C1")):
    runs = [r for r in runs if not r.censored and r.tau > 0]
    label = [f"p={r.p}" if name == "p sweep" else f"ω={r.weight_decay:g}" for r in runs]
    ax.scatter(label, [r.tau * r.weight_decay * r.p for r in runs], color=color, s=14, label=name)
ax.axhline(products.mean(), color="black", lw=1, ls="--", label=f"mean (CV = {collapse_cv:.2f})")
ax.set(xlabel="point of the sweep", ylabel="τ · ω · p", title="collapse of both sweeps", ylim=(0, None))
ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1))
figures.save(fig, "collapse")
plt.show()

# %% [markdown]
# ## Claims
#
# `grokking_scaling_law.claims` decides every claim on what the steps above returned. The paper
# states the law $\tau \propto 1/(\omega p)$ for grokking in general, not for its one setting, so the
# exponents and the collapse are tested against the law (−1, one level) at any profile; the paper's own
# fit at p 53, −1.02, stands beside the ω exponent. Exponents are point estimates on the geometric
# means, with 95% bootstrap intervals over the seeds. Every tested claim carries a null computed in
# this run, a case without the effect that the bound must reject:
#
# - `omega_exponent` (paper): τ ∝ 1/ω, the exponent within −1 ± 0.15, with its interval beside it.
#   Null: the same fit after permuting the runs' τ among the weight decays (τ with no dependence on ω).
# - `p_exponent` (paper): τ ∝ 1/p holds only for $p \gg p_c$ (the log law
#   $-\Omega \log(1 - p_c/p)$ is steeper near $p_c$), so the exponent is fitted on the moduli at least
#   $3 p_c$ ($p_c$ from the log law fitted on all moduli) and its interval must contain −1. Null: the
#   same fit with τ permuted among those moduli. With fewer than three such moduli the claim is
#   undecided. `p_exponent_of_log_law` reports the exponent the fitted log law itself has over the same
#   moduli ($-x / ((1 - x)(-\log(1 - x)))$ with $x = p_c/p$): a property of the fit, −1 for any data
#   once $p \gg p_c$, so it is not a test.
# - `collapse_omega` and `collapse_p_far` (paper): if τ ∝ 1/(ωp), the per-point geometric means of τωp
#   agree within a factor 1.5 (max/min), tested over the ω sweep and over the moduli ≥ 3 $p_c$
#   separately (moduli near $p_c$ are expected to lie above the level). Two nulls: τ permuted among the
#   runs the collapse covers, and τ with no dependence on ω or p at all (every point given all the
#   runs' τ), whose τωp spreads exactly as ω·p does. A sweep whose ω·p spans less than a factor 1.5
#   cannot tell a collapse from no dependence, and its pass is uninformative. `collapse_max_min` over
#   every point and `collapse_cv` over every run are reported.
# - `log_law_r2` (paper: the authors fit this law): the R² (in τ space) of the log law with $p_c$
#   strictly inside $(0, \min p)$ (a $p_c$ pinned at either end counts as no fit). Two parameters
#   through a few decreasing points fit almost any decreasing τ(p), so its nulls are a plain power law
#   through the same moduli (no pole) and τ permuted among the moduli.
# - `log_law_vs_power_law_aic` (the book's comparison): AIC(log law) − AIC(power law), both scored at
#   the fitted moduli only (all above the fitted $p_c$, so the difference is finite for a law with a
#   pole); ≤ 0 favours the log law. Its null is the 5th percentile of the same difference over 200 data
#   sets drawn from the fitted power law with the data's scatter (if the log law wins that often on
#   data without a pole, a pass means nothing). The other way round, 200 data sets drawn from the
#   fitted log law say what a positive difference means: if at least 5% of them give one as large, the
#   power law's lead does not reject the log law and the claim is undecided; `aic_power_from_log_law`
#   is the share of them on which the log law wins. With fewer than three moduli both laws fit exactly
#   and both law claims are undecided.
#
# `censored_runs` counts the runs that did not grok within their budget (they are left out of the fits),
# and `tau_resolution` is the largest `eval_every` / τ over the grokked runs: how finely τ was measured.

# %%
findings = grokking_scaling_law.Findings(
    fits=sweep_fits, results=results, p_runs=p_runs, probe_runs=probe_runs, omega_p=omega_p,
    sweep_weight_decay=sweep_weight_decay, lr=lr, probe_lr=probe_lr, probe_p_values=probe_p_values,
    eval_every=eval_every, n_boot=n_boot)
claims.add(*grokking_scaling_law.claims(findings))
claims.write()
claims.table()
