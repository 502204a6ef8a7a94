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
# trains in one batched program (`corekit.sweep`); a program stops `margin` steps after its last model
# groks, and a run still below 0.99 test accuracy at `max_steps` is **censored**: counted and shown,
# but not in the fits. Fits use each point's geometric mean of $\tau$ over its grokked seeds;
# confidence intervals resample the seeds of every point (bootstrap, `n_boot` draws).
#
# The quick defaults are a reduced sweep for a CPU: a 4× narrower pre-LayerNorm model, a larger
# learning rate, two seeds, three moduli and three weight decays (the narrow models without
# LayerNorm did not grok within 4000 steps at p = 31 in our trials, and below ω = 1 grokking takes
# longer than a CPU run should). `notebooks/params/paper/03_grokking_scaling_law.yaml`
# holds the paper's sweep (d_model 128, lr 1e-3, seven moduli, six weight decays at batch 512, 12
# seeds); `executor = "ray"` runs the shards as Ray tasks on a cluster (one shard per GPU).

# %% tags=["parameters"]
p_values = [31, 43, 53]  # length: 2 or more; range: [3, inf); primes
sweep_weight_decay = 1.0  # range: (0, inf)
weight_decays = [1.0, 1.5, 2.0]  # length: 2 or more; range: (0, inf)
omega_p = 53  # range: [3, inf); a prime
omega_batch_size = 0  # range: [0, inf); 0: full batch
seeds = [0, 1]  # length: 1 or more; range: [0, inf)
train_frac = 0.5  # range: (0, 1)
d_model = 32  # range: [1, inf)
n_heads = 4  # range: [1, inf)
d_mlp = 128  # range: [1, inf)
norm = "pre"  # one of: pre, post, none
lr = 3e-3  # range: (0, inf)
betas = [0.9, 0.98]  # length: 2; range: [0, 1)
max_steps = 4000  # range: [1, inf)
margin = 100  # range: [1, inf)
eval_every = 20  # range: [1, inf)
n_boot = 1000  # range: [10, inf)
executor = "local"  # one of: local, ray
checkpoint_dir = ""  # path; empty: no checkpoints
checkpoint_every = 1000  # range: [1, inf); steps between a shard's checkpoints
max_models_per_shard = 0  # range: [0, inf); 0: no limit; smaller shards spread a sweep over more GPUs
data_seed = 0  # range: [0, inf)
device = "auto"

# %%
import numpy as np
import matplotlib.pyplot as plt
from matplotlib import ticker

from corekit import plots, scaling
from corekit.claims import Claims
from corekit.device import default_device
from corekit.sweep import SweepSettings, grid, point_taus, results_table, run_sweep

plots.use_style()
dev = default_device(device)
settings = SweepSettings(d_model=d_model, n_heads=n_heads, d_mlp=d_mlp, n_layers=1, norm=norm, lr=lr,
                         betas=tuple(betas), train_frac=train_frac, data_seed=data_seed, max_steps=max_steps,
                         margin=margin, eval_every=eval_every)
p_specs = grid(p_values, [sweep_weight_decay], seeds)
omega_specs = grid([omega_p], weight_decays, seeds, batch_size=omega_batch_size)
claims = Claims("03_grokking_scaling_law", resolved={"device": str(dev)})

# %% [markdown]
# ## Running both sweeps
#
# A run that appears in both sweeps (the point $p$ = `omega_p`, $\omega$ = `sweep_weight_decay` at
# the same batch size) is trained once and used in both.

# %%
specs = list(dict.fromkeys(p_specs + omega_specs))
results = run_sweep(specs, settings, executor=executor, device=str(dev), max_models=max_models_per_shard or None,
                    checkpoint_dir=checkpoint_dir or None, checkpoint_every=checkpoint_every)
by_spec = {r.spec: r for r in results}
p_runs, omega_runs = [by_spec[s] for s in p_specs], [by_spec[s] for s in omega_specs]
censored = [r for r in results if r.censored]
rows = results_table(results)
print(f"{len(results)} runs, {len(censored)} censored (no grokking within {max_steps} steps)")
print(f"{'p':>4} {'ω':>5} {'seed':>4} {'t_train':>8} {'t_test':>8} {'τ':>8}")
for row in rows:
    fmt = lambda v: "—" if v is None else f"{v:.0f}"  # noqa: E731
    print(f"{row['p']:>4} {row['weight_decay']:>5g} {row['seed']:>4} {fmt(row['t_train']):>8} "
          f"{fmt(row['t_test']):>8} {fmt(row['tau']):>8}")

# %% [markdown]
# ## What a run looks like
#
# Training and test accuracy of the first seed at each weight decay of the $\omega$ sweep: the
# training set is fitted early, the test accuracy jumps later, and the jump comes sooner under
# stronger weight decay. The dots mark the two steps whose difference is $\tau$.

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=(8, 3.6))
for i, w in enumerate(weight_decays):
    r = next(r for r in omega_runs if r.weight_decay == w)
    ax.plot(r.steps, r.train_acc, color=f"C{i}", lw=1, ls=":")
    ax.plot(r.steps, r.test_acc, color=f"C{i}", label=f"ω = {w:g} (test; dotted: train)")
    for t in (r.t_train, r.t_test):
        if t is not None:
            ax.plot([t], [0.99], "o", color=f"C{i}", ms=4)
ax.set(xlabel="step", ylabel="accuracy", title=f"a + b mod {omega_p}, seed {seeds[0]}")
ax.legend()
plots.savefig(fig, "accuracy_curves")
plt.show()

# %% [markdown]
# ## τ against ω and against p
#
# Each grey dot is a run, each black dot a point's geometric mean; the line is the least-squares
# power law on the means, the band its 95% bootstrap interval over seeds. A red triangle is a
# censored run, drawn at the lower bound its budget gives (steps run − step it fitted the training set). Against $p$ we fit both a
# power law and $\tau(p) = -\Omega \log(1 - p_c/p)$, which behaves as $\Omega p_c / p$ for
# $p \gg p_c$ and diverges as $p \to p_c$ (below $p_c$ there are too few modes to grok).

# %%
omega_points, p_points = point_taus(omega_runs, "weight_decay"), point_taus(p_runs, "p")
exponent = lambda x, g: scaling.power_law_fit(x, g).params["k"]  # noqa: E731
fits, exponents = {}, {}
for name, points in (("ω", omega_points), ("p", p_points)):
    if scaling.fittable(points):
        fits[name] = scaling.power_law_fit(*scaling.geometric_means(points))
        exponents[name] = scaling.bootstrap(points, exponent, n_boot=n_boot)
        print(f"{name} exponent: {exponents[name].describe()}")
    else:
        print(f"{name} sweep: fewer than two points with a grokked run, no fit")
log_fit = None
if scaling.fittable(p_points) and len(p_points) >= 3:
    try:
        log_fit = scaling.log_law_fit(*scaling.geometric_means(p_points))
    except RuntimeError as err:                       # no convergence: reported, not hidden
        print("τ(p) = −Ω log(1 − p_c/p) did not converge:", err)

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
for ax, points, runs, name, key in ((axes[0], omega_points, omega_runs, "ω", "weight_decay"),
                                    (axes[1], p_points, p_runs, "p", "p")):
    for x, taus in points.items():
        ax.scatter([x] * len(taus), taus, color="0.6", s=12)
    lower = [(getattr(r, key), r.steps_run - r.t_train) for r in runs if r.censored and r.t_train is not None]
    if lower:
        ax.scatter(*zip(*lower), marker="^", facecolor="none", edgecolor="C3", s=30, label="censored (τ > shown)")
    ax.set(xscale="log", yscale="log", xlabel=name, ylabel="τ (steps)")
    ax.set_xticks(list(points))
    ax.xaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    if name not in fits:
        continue
    xg, gm = scaling.geometric_means(points)
    ax.scatter(xg, gm, color="black", s=24, zorder=3, label="geometric mean")
    xs = np.geomspace(min(points), max(points), 50)
    k = exponents[name]
    ax.plot(xs, fits[name].predict(xs), color="C0", label=f"power law: k = {k.estimate:.2f} [{k.low:.2f}, {k.high:.2f}]")
    band = scaling.power_law_band(points, xs, n_boot)
    ax.fill_between(xs, band.low, band.high, color="C0", alpha=0.2, lw=0)
if log_fit is not None:
    xs = np.linspace(min(p_points), max(p_points), 50)
    axes[1].plot(xs, log_fit.predict(xs), color="C1", ls="--",
                 label=f"−Ω log(1 − p_c/p): p_c = {log_fit.params['p_c']:.1f}, R² = {log_fit.r2:.2f}")
axes[0].set_title(f"τ vs weight decay (p = {omega_p})")
axes[1].set_title(f"τ vs modulus (ω = {sweep_weight_decay:g})")
for ax in axes:
    ax.legend()
plots.savefig(fig, "tau_fits")
plt.show()

# %% [markdown]
# ## Collapse
#
# If $\tau \propto 1/(\omega p)$, the product $\tau\,\omega\,p$ is the same constant at every point of
# both sweeps. Its coefficient of variation over all grokked runs measures how far that is from true.

# %%
grokked = [r for r in results if not r.censored and r.tau > 0]
products = scaling.collapse_values([r.p for r in grokked], [r.weight_decay for r in grokked], [r.tau for r in grokked])
collapse_cv = scaling.coefficient_of_variation(products) if len(products) >= 2 else float("nan")

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=(8, 3.4))
for runs, name, color in ((p_runs, "p sweep", "C0"), (omega_runs, "ω sweep", "C1")):
    runs = [r for r in runs if not r.censored and r.tau > 0]
    label = [f"p={r.p}" if name == "p sweep" else f"ω={r.weight_decay:g}" for r in runs]
    ax.scatter(label, [r.tau * r.weight_decay * r.p for r in runs], color=color, s=14, label=name)
ax.axhline(products.mean(), color="black", lw=1, ls="--", label=f"mean (CV = {collapse_cv:.2f})")
ax.set(ylabel="τ · ω · p", title="collapse of both sweeps", ylim=(0, None))
ax.legend()
plots.savefig(fig, "collapse")
plt.show()

# %% [markdown]
# ## Claims
#
# Exponents are point estimates on the geometric means with 95% bootstrap intervals over seeds.
# `p_fit_r2` is the R² (in log space) of the power law of $\tau$ against $p$; the paper's $p$ range
# is 31–101 and its $\omega$ range 0.3–3, so the quick profile's narrower sweep tests the direction
# of the law more than its exponent.

# %%
no_fit = scaling.Interval(*[float("nan")] * 3, n_boot=n_boot, failed=n_boot)
omega_k, p_k = exponents.get("ω", no_fit), exponents.get("p", no_fit)
p_r2 = fits["p"].r2 if "p" in fits else float("nan")
claims.add("omega_exponent", round(omega_k.estimate, 3), paper=-1.02, target="−1 ± 0.15",
           passed=bool(abs(omega_k.estimate + 1) <= 0.15))
claims.add("omega_exponent_ci", [round(omega_k.low, 3), round(omega_k.high, 3)], paper="reported",
           target=f"reported: {omega_k.describe()} of the seeds")
claims.add("p_fit_r2", round(p_r2, 3), paper="reported", target="≥ 0.9 (power law, log space)", passed=bool(p_r2 >= 0.9))
claims.add("p_exponent", [round(v, 3) for v in (p_k.estimate, p_k.low, p_k.high)], paper="≈ −1 (τ ∝ 1/p)",
           target=f"reported: estimate and {p_k.describe()} of the seeds")
claims.add("bootstrap_failed_resamples", {"ω": omega_k.failed, "p": p_k.failed}, paper="reported",
           target=f"reported: resamples of {n_boot} that left too few points to fit (excluded from the intervals)")
claims.add("collapse_cv", round(collapse_cv, 3), paper="reported", target="reported: CV of τ·ω·p over grokked runs")
claims.add("censored_runs", len(censored), paper="reported", target=f"reported: of {len(results)} runs")
claims.write()
claims.table()
