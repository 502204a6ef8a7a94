"""The workloads of ``benchmarks/peers.py``: one job done by the authors' code and by corekit, on the same inputs.

The authors' code is never part of this project: it is loaded at run time from their clones, through the
loaders of the oracle scripts (``scripts/oracle/mi_ntk_06.py`` executes the definition cells of the eNTK
authors' transformer notebook and imports their ``ntk`` module; ``ma`` is imported from the same clone;
``scripts/oracle/cores_02.py`` maps corekit weights into the ACE authors' ``TwoLayerTransformer``). A
:class:`Workload` holds one callable per side (the reference side first: "authors", or "baseline" for the
project's own b1/b4 baselines; then "ours"; then any variant of ours), the untimed setup already done, and a
``compare`` that says whether the sides' outputs agree and within which tolerance.
"""
from __future__ import annotations

import functools
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
import yaml
from torch import Tensor

ROOT = Path(__file__).resolve().parents[1]
for _folder in (ROOT / "scripts" / "oracle", Path(__file__).resolve().parent):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

import cores_02  # noqa: E402  (scripts/oracle: the ACE authors' weight layout)
import mi_ntk_06  # noqa: E402  (scripts/oracle: the eNTK authors' notebook definitions, trainer, kernels)

from corekit import entk  # noqa: E402
from corekit.chapters import entk_mlp_modular, entk_transformer_modular, grokking_cores  # noqa: E402
from corekit.models import BatchedQuadraticMLP, BatchedTransformer, TransformerConfig, load_lin_weights  # noqa: E402
from corekit.tasks.modular import modular_addition  # noqa: E402
from corekit.train import Dataset, train_ensemble  # noqa: E402

CPU = torch.device("cpu")
NTK_REPO, ACE_REPO = "jylin04/mi-ntk", "joshseth/cores"
#: Relative eigenvalue tolerance (|Δλ| / λ_1) where one side works in float32 and the other in float64 or float32: a
#: float32 ``eigh`` of an n × n matrix is backward stable to about n · ε₃₂ · ‖K‖ (841 · 6e-8 ≈ 5e-5), and the
#: kernel's own float32 entries (sums over up to 16,384 parameters) carry a few units of 1e-6 of λ_1.
EIG_TOL = 1e-4


@dataclass
class Timed:
    """A side's output with the seconds it measured itself (its own untimed warm-up left out)."""

    output: object
    seconds: float


@dataclass
class Workload:
    """One job, ready to time: ``sides`` {name: () -> output} (the reference side first, then "ours", then
    variants), ``compare`` (outputs by side) -> {"agree": bool | None, ...}, ``info`` for the record."""

    name: str
    what: str
    sides: dict[str, Callable[[], object]]
    compare: Callable[[dict[str, object]], dict]
    info: dict = field(default_factory=dict)
    keep: list = field(default_factory=list)          # objects that must live as long as the workload (temp dirs)


def commit(repo: Path) -> str:
    """Return the clone's HEAD commit (``git -C repo rev-parse HEAD``)."""
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def paper_profile(chapter: str) -> dict:
    """Return the chapter's paper profile (``notebooks/params/paper/CHAPTER.yaml``)."""
    return yaml.safe_load((ROOT / "notebooks" / "params" / "paper" / f"{chapter}.yaml").read_text())


def eig_agreement(theirs: dict[str, Tensor], ours: dict[str, Tensor], tol: float = EIG_TOL) -> dict:
    """Return the largest |λ_authors − λ_ours| / λ_1 over every kernel (name → descending eigenvalues (k,))."""
    worst, where, n = 0.0, None, 0
    for name, a in theirs.items():
        a, b = a.detach().double().cpu(), ours[name].detach().double().cpu()
        n = max(n, len(a))
        err = float((a - b).abs().max() / b[0].abs())
        if err >= worst:
            worst, where = err, name
    return {"agree": worst <= tol, "metric": "max |λ_authors − λ_ours| / λ_1 over the eigenvalues compared",
            "value": worst, "worst_kernel": where, "tolerance": tol,
            "why": "float32 on the authors' side, and on corekit's where the chapter's call uses it (eigh backward "
                   "error ≈ n·ε₃₂·λ_1, at most 5e-5 for n ≤ 841 on each side; float32 kernel entries a few 1e-6 of "
                   "λ_1)"}


#: What a record's span-overlap figure is.
SPAN_WHAT = "‖V_authorsᵀ V_ours‖² / j over the leading j eigenvectors up to the last gap > 1e-3 λ_1 (informative)"


def span_overlap(values: Tensor, A: Tensor, B: Tensor, gap: float = 1e-3) -> tuple[float, int]:
    """Return (‖AᵀB‖_F² / j, j) for the leading j columns of orthonormal A, B (n, k), j the last place where the
    descending ``values`` drop by more than ``gap`` · λ_1 (so that no degenerate group, nor the numerically
    null space, is cut): 1 when the two spans agree. Informative only."""
    values = values.detach().double().cpu()
    drops = (values[:-1] - values[1:]) > gap * values[0]
    j = int(drops.nonzero().max()) + 1 if bool(drops.any()) else len(values)
    A, B = A.detach().double().cpu()[:, :j], B.detach().double().cpu()[:, :j]
    return float((A.T @ B).square().sum() / j), j


class Context:
    """The authors' clones (None: absent) and the untimed setup the workloads share, each built once."""

    def __init__(self, ntk_repo: Path | None, ace_repo: Path | None, args):
        self.ntk_repo, self.ace_repo, self.args = ntk_repo, ace_repo, args

    @staticmethod
    def ntk_problem(repo: Path | None) -> str | None:
        """Return why ``repo`` is not a usable clone of jylin04/mi-ntk, or None."""
        if repo is None:
            return "no --authors-repo-ntk given"
        missing = [f for f in (mi_ntk_06.NOTEBOOK, "ntk.py", "ma.py") if not (repo / f).is_file()]
        return f"{repo} lacks {missing}: not a clone of {NTK_REPO}" if missing else None

    @staticmethod
    def ace_problem(repo: Path | None) -> str | None:
        """Return why ``repo`` is not a usable clone of joshseth/cores, or None."""
        if repo is None:
            return "no --authors-repo-ace given"
        path = repo / "src" / "cores" / "modular_addition_analysis.py"
        return None if path.is_file() else f"{repo} lacks src/cores/modular_addition_analysis.py: not a clone of {ACE_REPO}"

    @functools.cached_property
    def ntk_ns(self) -> dict:
        """The eNTK authors' notebook definitions and ``ntk`` module (mi_ntk_06's loader)."""
        return mi_ntk_06.authors_namespace(self.ntk_repo)

    @functools.cached_property
    def ma(self):
        """The eNTK authors' ``ma`` module (the MLP, its data and train/test), from the same clone."""
        _ = self.ntk_ns                                # puts the clone on sys.path
        import ma  # noqa: PLC0415
        return ma

    @functools.cached_property
    def ace(self):
        """The ACE authors' analysis module and models module, from their clone."""
        sys.path.insert(0, str(self.ace_repo / "src"))
        from cores import models, modular_addition_analysis  # noqa: PLC0415
        return modular_addition_analysis, models

    # ---------------------------------------------------------------- 05: the MLP

    @functools.cached_property
    def mlp05_settings(self) -> dict:
        """The 05 paper profile: the authors' HyperParams (p 29, width 512, alpha 0.7, lr 0.05, 500 epochs) and AdamW."""
        return paper_profile("05_entk_mlp_modular")

    def authors_mlp_run(self, epochs: int, log_every: int = 10, seed: int = 0) -> dict:
        """Return the authors' 05 run (their cells 16-22 through their ``ma`` functions, without the in-loop eNTK)."""
        from torch.utils.data import DataLoader, TensorDataset  # noqa: PLC0415
        ma, s = self.ma, self.mlp05_settings
        torch.manual_seed(seed)                                                        # cell 16
        X, Y, y_idx, _ = ma.build_mod_arith_data(s["p"], device=CPU)                   # cell 17
        perm = torch.randperm(X.shape[0], device=CPU)
        n_train = int(X.shape[0] * s["train_frac"])
        idx_tr, idx_te = perm[:n_train], perm[n_train:]
        train_loader = DataLoader(TensorDataset(X[idx_tr], Y[idx_tr]), batch_size=n_train, shuffle=True)   # cell 18
        test_loader = DataLoader(TensorDataset(X[idx_te], Y[idx_te]), batch_size=len(idx_te), shuffle=False)
        model = ma.ModularArithmeticMLP(p=s["p"], n_hidden=s["width"], device=CPU)     # cell 19
        init = {k: v.detach().clone() for k, v in model.state_dict().items()}
        opt = torch.optim.AdamW(model.parameters(), lr=s["lr"])
        log = {"epoch": [], "train_loss": [], "test_loss": [], "test_acc": [], "train_acc": []}
        for epoch in range(epochs):                                                    # cell 22
            loss = ma.train(model, train_loader, opt, CPU)
            if epoch % log_every == 0:
                log["epoch"].append(epoch)
                log["train_loss"].append(loss)
                log["test_loss"].append(F.mse_loss(model(X[idx_te]), Y[idx_te]).item())
                log["test_acc"].append(ma.test(model, test_loader, CPU))
                log["train_acc"].append(ma.test(model, train_loader, CPU))
        return dict(model=model.eval(), init=init, log=log, X=X, labels=y_idx, idx_tr=idx_tr, idx_te=idx_te)

    @functools.cached_property
    def mlp05(self) -> dict:
        """The authors' 05 model trained once for the profile's epochs (untimed), and corekit's copy of it."""
        run = self.authors_mlp_run(self.mlp05_settings["epochs"])
        run["ours"] = self.ours_mlp(run["model"].state_dict())
        with torch.no_grad():
            gap = float((run["ours"](run["X"])[0] - run["model"](run["X"])).abs().max())
        if gap > 1e-5:
            raise SystemExit(f"corekit's MLP does not reproduce the authors' outputs on their weights (max diff {gap:.1e})")
        return run

    def ours_mlp(self, state: dict) -> BatchedQuadraticMLP:
        """Return corekit's quadratic MLP holding the authors' weights (``net.0.weight`` (width, 2p), ``net.3.weight``)."""
        s = self.mlp05_settings
        model = BatchedQuadraticMLP(2 * s["p"], s["width"], s["p"], seeds=[0])
        with torch.no_grad():
            model.params["W_1"][0].copy_(state["net.0.weight"].T)
            model.params["W_2"][0].copy_(state["net.3.weight"].T)
        return model.eval()

    @functools.cached_property
    def kernel05(self) -> Tensor:
        """The 05 kernel of the trained model over all p² inputs (corekit, class mean summed over W_1, W_2, float64)."""
        fm = entk.functional_mlp(self.mlp05["ours"]).to(torch.float64)
        return entk.total(entk.kernels(fm, self.mlp05["X"].double(), mode="class_mean"))

    # ---------------------------------------------------------------- 06: the transformer

    @functools.cached_property
    def state06(self) -> tuple[dict, str]:
        """Seed 2's weights: the oracle's (after the authors' 4,000 epochs) when present, else the authors' draw."""
        path = ROOT / "results" / "oracle" / "weights" / "06_seed2.pt"
        if path.is_file():
            return torch.load(path, weights_only=True), f"{path.relative_to(ROOT)} (the authors' seed 2 after 4,000 epochs)"
        p = self.ntk_ns["params"]
        torch.manual_seed(2)
        model = self.ntk_ns["MATransformer"](p.p + 1, p.d_model, p.n_heads, p.d_mlp)
        return {k: v.detach().clone() for k, v in model.state_dict().items()}, "the authors' initial draw for seed 2"


# ==================================================================== the workloads


#: The chapter's log-match rule (notebook 06): their logged epochs through at most epoch 60, up to the last at which
#: our float32 run is within ``ROUNDING_TOL`` of its float64 rerun; agreement within ``LOG_TOL`` there.
LOG_MATCH_THROUGH, ROUNDING_TOL, LOG_TOL = 60, 1e-5, 1e-4


def log_match(run, seeds: list[int], logs: dict, settings: dict) -> dict:
    """Return {seed: {"through", "gap", "float32_vs_float64_at_60"}}: chapter 06's ``training_log_match`` for each seed
    of ``run`` (our float32 run) against the authors' ``logs``, with the float64 rerun made here (untimed)."""
    loss = np.asarray(run.history.epoch_train_loss)
    last = min(LOG_MATCH_THROUGH, len(loss) - 1)                     # a run shorter than 61 epochs: its last epoch
    exact = np.asarray(entk_transformer_modular.train_authors(seeds=seeds, epochs=last + 1, device=CPU,
                                                              dtype=torch.float64, **settings).history.epoch_train_loss)
    out = {}
    for i, seed in enumerate(seeds):
        logged = [e for e in logs[seed]["epoch"] if e <= last]
        horizon = entk_transformer_modular.rounding_horizon(loss[:, i], exact[:, i], logged, ROUNDING_TOL)
        through = logged[0] if horizon is None else horizon
        out[seed] = {"through": through, "gap": entk_transformer_modular.log_gap(loss[:, i], logs[seed], through),
                     f"gap_through_{last}": entk_transformer_modular.log_gap(loss[:, i], logs[seed], last),
                     f"float32_vs_float64_at_{last}": float(abs(loss[last, i] - exact[last, i]))}
    return out


LOG_MATCH_WHY = ("float32 on both sides, the same weights and batches, only the summation order differs. As chapter "
                 "06's training_log_match: their logged epochs up to the last (≤ 60) at which our run is within 1e-5 "
                 "of its float64 rerun (made untimed), within 1e-4 there; past it float32 rounding alone moves a run "
                 "by more than the tolerance (e.g. 2.7e-4 at epoch 40 for seed 3, which separates the authors' own "
                 "code on two machines by as much)")


def w06_training(ctx: Context) -> Workload:
    """06 training of seed 2: the authors' notebook loop (cells 11-26) vs ``train_authors`` with the paper profile."""
    epochs, seed = ctx.args.epochs_06, 2
    prof = paper_profile("06_entk_transformer_modular")
    settings = {k: prof[k] for k in entk_transformer_modular.AUTHORS_SETTINGS}
    if not all(entk_transformer_modular.matches_authors(settings).values()):
        raise SystemExit("the 06 paper profile no longer holds the authors' settings")
    ns = ctx.ntk_ns

    def authors():
        _, log, _ = mi_ntk_06.train_authors(ns, seed, epochs)
        return log

    def ours():
        return entk_transformer_modular.train_authors(seeds=[seed], epochs=epochs, device=CPU, **settings)

    def compare(out: dict) -> dict:
        log, run = out["authors"], out["ours"]
        loss = np.asarray(run.history.epoch_train_loss)[:, 0]
        match = log_match(run, [seed], {seed: log}, settings)[seed]
        ours_acc = run.after_epochs("test_acc", log["epoch"])[:, 0]
        return {"agree": match["gap"] <= LOG_TOL,
                "metric": f"max |epoch train loss ours − authors| over their logged epochs 0-{match['through']} (the "
                          "rounding horizon)", "value": match["gap"], "tolerance": LOG_TOL, "why": LOG_MATCH_WHY,
                **match,
                "whole_run_loss_max_abs_diff": entk_transformer_modular.log_gap(loss, log, through_epoch=epochs),
                "final_logged_train_loss": {"authors": log["train_loss"][-1], "ours": float(loss[log["epoch"][-1]])},
                "test_acc_max_abs_diff": float(np.abs(ours_acc - np.asarray(log["test_acc"]) / 100).max())}

    return Workload("06_training", f"06 training, seed 2, {epochs} epochs of the authors' recipe (p 29, d_model 64, "
                    "batch 64, AdamW lr 3e-4 wd 1; test and train accuracy logged every 20 epochs)",
                    {"authors": authors, "ours": ours}, compare,
                    {"sizes": {"epochs": epochs, "seed": seed, **settings},
                     "precision": {"authors": "float32", "ours": "float32"},
                     "same_work": "both evaluate the test and train sets after every logged epoch (every 20), as "
                                  "the authors do; ours also snapshots the weights there (the chapter's call); the "
                                  "authors' in-loop eNTK of cell 26 is left out, as in the oracle"})


def w06_training_profile_seeds(ctx: Context) -> Workload:
    """06 training of every seed of the paper profile: the authors' loop once per seed vs one ``train_authors`` call."""
    epochs = ctx.args.epochs_06
    prof = paper_profile("06_entk_transformer_modular")
    seeds = list(prof["seeds"]) + list(prof["extra_seeds"])
    settings = {k: prof[k] for k in entk_transformer_modular.AUTHORS_SETTINGS}
    ns = ctx.ntk_ns

    def authors():
        return {seed: mi_ntk_06.train_authors(ns, seed, epochs)[1] for seed in seeds}

    def ours():
        return entk_transformer_modular.train_authors(seeds=seeds, epochs=epochs, device=CPU, **settings)

    def compare(out: dict) -> dict:
        match = log_match(out["ours"], seeds, out["authors"], settings)
        worst = max(match, key=lambda seed: match[seed]["gap"])
        return {"agree": match[worst]["gap"] <= LOG_TOL,
                "metric": "max over seeds of max |epoch train loss ours − authors| over their logged epochs up to each "
                          "seed's rounding horizon", "value": match[worst]["gap"], "seed": worst, "tolerance": LOG_TOL,
                "why": LOG_MATCH_WHY, "per_seed": {str(seed): m for seed, m in match.items()}}

    return Workload("06_training_profile_seeds", f"06 training of the paper profile's {len(seeds)} seeds, {epochs} "
                    "epochs of the authors' recipe each: the authors' notebook loop run once per seed vs the chapter's "
                    "one call, the models batched",
                    {"authors": authors, "ours": ours}, compare,
                    {"sizes": {"epochs": epochs, "seeds": seeds, **settings},
                     "precision": {"authors": "float32", "ours": "float32"},
                     "same_work": "the chapter's training as it runs (every seed of the profile in one call); the "
                                  "authors train one seed per run of their notebook. Both evaluate after every "
                                  "logged epoch"})


def w06_kernels_eig(ctx: Context) -> Workload:
    """06: the 9 per-parameter pair-mean kernels over all p² inputs and the top 40 eigenpairs of each."""
    ns, top_k = ctx.ntk_ns, 40
    hp = ns["params"]
    p, C = hp.p, hp.p + 1
    state, source = ctx.state06
    theirs_model = ns["MATransformer"](p + 1, hp.d_model, hp.n_heads, hp.d_mlp)
    theirs_model.load_state_dict(state)
    theirs_model.eval()
    X = torch.tensor(ns["gen_total_data"](p)[0])
    ours_model = BatchedTransformer(TransformerConfig.entk_authors(p), seeds=[0])
    load_lin_weights(ours_model, 0, state)
    tokens = modular_addition(p, 0.5, 0, split="python").tokens()
    if not torch.equal(X, tokens):
        raise SystemExit("the authors' inputs and corekit's tokens differ")

    def authors():
        kernels = mi_ntk_06.authors_kernels(ns, theirs_model, X, C)
        return {mi_ntk_06.SHORT[n]: ns["ntk"].eig_decompose(K.clone(), topk=top_k) for n, K in kernels.items()}

    def ours():
        return entk_transformer_modular.parameter_eigenpairs(ours_model, 0, tokens, top_k)

    def compare(out: dict) -> dict:
        theirs = {n: v for n, (v, _) in out["authors"].items()}
        mine = {(n[2:] if n.startswith("0.") else n): e for n, e in out["ours"].items()}
        result = eig_agreement(theirs, {n: e.values for n, e in mine.items()})
        spans = {n: span_overlap(mine[n].values, out["authors"][n][1], mine[n].vectors) for n in theirs}
        worst = min(spans, key=lambda n: spans[n][0])
        result["span_overlap_min"] = {"value": spans[worst][0], "kernel": worst, "leading_vectors": spans[worst][1],
                                      "what": SPAN_WHAT}
        return result

    return Workload("06_kernels_eig", "06 per-parameter kernels (mean over all 30 × 30 output pairs) of the 9 weight "
                    "tensors over all 841 inputs, and the top-40 eigenpairs of each",
                    {"authors": authors, "ours": ours}, compare,
                    {"sizes": {"N": p * p, "parameters": 9, "top_k": top_k, "outputs": C}, "weights": source,
                     "precision": {"authors": "float32 kernels and eigh (their ntk.eig_decompose, ridge 1e-8)",
                                   "ours": "float32 kernels and eigensolves (parameter_eigenpairs' default, the "
                                           "authors' precision; scipy syevr for the top 40 only)"},
                     "same_work": "the authors' kernels as the oracle computes them (their empirical_ntk_by_layer of the "
                                  "summed output / C², the same matrix as their K[:, :, :C, :C].mean((2, 3)), which "
                                  "would need 2.4 GB per parameter); subspace overlaps are not timed"})


def w05_training(ctx: Context) -> Workload:
    """05 MLP training: the authors' loop over their ``ma`` functions vs ``train_onehot_mse`` (the chapter's call)."""
    s = ctx.mlp05_settings
    epochs, log_every = s["epochs"], 10
    ref = ctx.authors_mlp_run(1)                   # the authors' split and initial weights (same seed, same draws)
    X, y, tr, te = ref["X"], ref["labels"], ref["idx_tr"], ref["idx_te"]

    def authors():
        return ctx.authors_mlp_run(epochs, log_every)["log"]

    def ours_run(eval_every: int, snapshots: bool):
        model = ctx.ours_mlp(ref["init"]).train()
        return entk_mlp_modular.train_onehot_mse(
            model, X[tr], y[tr], X[te], y[te], steps=epochs, lr=s["lr"], weight_decay=s["weight_decay"],
            betas=tuple(s["betas"]), eval_every=eval_every,
            snapshot_steps=range(0, epochs + 1, eval_every) if snapshots else (), progress=False)

    def compare(out: dict) -> dict:
        log = out["authors"]
        result = {}
        for side in ("ours", "ours_matched"):
            h = out[side]
            at = {step: i for i, step in enumerate(h.steps)}
            ours_loss = np.asarray([h.train_loss[at[e]][0] for e in log["epoch"]])
            rel = np.abs(ours_loss - np.asarray(log["train_loss"])) / np.asarray(log["train_loss"])
            result[side] = {"loss_rel_max": float(rel.max()), "loss_rel_max_first_100_epochs":
                            float(rel[np.asarray(log["epoch"]) < 100].max())}
        h = out["ours"]
        at = {step: i for i, step in enumerate(h.steps)}
        acc = np.asarray([h.test_acc[at[e + 1]][0] for e in log["epoch"]])
        result["final_test_acc"] = {"authors": log["test_acc"][-1] / 100, "ours": float(acc[-1])}
        result["test_acc_max_abs_diff"] = float(np.abs(acc - np.asarray(log["test_acc"]) / 100).max())
        value = result["ours"]["loss_rel_max"]
        return {"agree": value <= 1e-4 and result["test_acc_max_abs_diff"] <= 2 / len(te),
                "metric": "max relative |train loss ours − authors| at their logged epochs (every 10)", "value": value,
                "tolerance": 1e-4, "test_acc_tolerance": "two test pairs (2 / 253)",
                "why": "float32 on both sides from the same weights and split: the shuffled full batch changes only "
                       "the summation order (rounding ~1e-7 a step), which AdamW at lr 0.05 carries through 500 steps; "
                       "1e-4 leaves room for that growth, a real difference in the recipe shows at 1e-2 or more",
                **result}

    return Workload("05_training", f"05 MLP training (p 29, width 512, 70 % of pairs, full batch AdamW lr 0.05, "
                    f"{epochs} epochs) from the authors' initial weights and split",
                    {"authors": authors, "ours": lambda: ours_run(s["eval_every"], True),
                     "ours_matched": lambda: ours_run(log_every, False)}, compare,
                    {"sizes": {"p": s["p"], "width": s["width"], "train_pairs": len(tr), "epochs": epochs},
                     "precision": {"authors": "float32", "ours": "float32"},
                     "same_work": "authors: their loop logging every 10 epochs (train/test loss and accuracy), without "
                                  "the in-loop eNTK; ours: the chapter's call with the paper profile (train_onehot_mse, "
                                  "gradients by hand; test evaluation and a weight snapshot after every epoch); "
                                  "ours_matched: the same trainer evaluating every "
                                  "10 epochs without snapshots, the authors' cadence (timed, not in the ratio)"})


def w05_kernel_eig96(ctx: Context) -> Workload:
    """05: the class-mean kernel (W_1 + W_2) of the first 96 inputs and all its eigenpairs."""
    run, n = ctx.mlp05, 96
    ntk = ctx.ntk_ns["ntk"]
    X96 = run["X"][:n]
    model = run["model"]

    def authors():                                 # their cell 22's kernel and eig_decompose(topk=200), on 96 inputs
        per = ntk.empirical_ntk_by_layer(model, X96, X96)
        K = per["net.0"].diagonal(dim1=2, dim2=3).mean(-1) + per["net.3"].diagonal(dim1=2, dim2=3).mean(-1)
        return ntk.eig_decompose(K, topk=200)

    def ours():
        return entk_mlp_modular.mlp_spectrum(run["ours"], X96, n)

    def compare(out: dict) -> dict:
        return eig_agreement({"K": out["authors"][0]}, {"K": out["ours"].values})

    return Workload("05_kernel_eig96", "05 class-mean eNTK (diagonal class blocks averaged, W_1 + W_2) of the trained "
                    "MLP on the first 96 inputs, and all 96 eigenpairs",
                    {"authors": authors, "ours": ours}, compare,
                    {"sizes": {"N": n, "classes": 29, "width": 512, "k": n},
                     "weights": "the authors' 05 model after 500 epochs (trained untimed by their code)",
                     "precision": {"authors": "float32 (N, N, C, C) kernel then eigh", "ours": "float64 (mlp_spectrum)"},
                     "same_work": "the authors form every class pair's block and keep the diagonal (their code); "
                                  "corekit forms the class mean directly"})


def w05_top200_eig(ctx: Context) -> Workload:
    """05: top-200 eigenpairs of the full 841 × 841 kernel, given the kernel."""
    K64 = ctx.kernel05
    K32 = K64.float()
    ntk = ctx.ntk_ns["ntk"]

    def authors():
        return ntk.eig_decompose(K32.clone(), topk=200)

    def ours():
        return entk.top_eigenpairs(K64, 200)

    def compare(out: dict) -> dict:
        result = eig_agreement({"K": out["authors"][0]}, {"K": out["ours"].values})
        value, j = span_overlap(out["ours"].values, out["authors"][1], out["ours"].vectors)
        result["span_overlap"] = {"value": value, "leading_vectors": j,
                                  "what": SPAN_WHAT}
        return result

    return Workload("05_top200_eig", "05 top-200 eigenpairs of the 841 × 841 class-mean kernel of the trained MLP "
                    "(the kernel given; only the eigensolver timed)",
                    {"authors": authors, "ours": ours}, compare,
                    {"sizes": {"N": K64.shape[0], "k": 200},
                     "precision": {"authors": "float32 (their ntk.eig_decompose: ridge, torch.linalg.eigh, flip)",
                                   "ours": "float64 (entk.top_eigenpairs → dense_eigenpairs: symmetrise, eigh, "
                                           "residuals ‖Kv − λv‖)"},
                     "same_work": "the same kernel (corekit's, float64), given to the authors in their float32"})


def ace_checkpoints(ctx: Context):
    """Return (export, [3 epochs], where from): the --ace-checkpoints file, or a short 02 run made once and cached."""
    if ctx.args.ace_checkpoints:
        export = grokking_cores.load_checkpoints(ctx.args.ace_checkpoints)
        epochs = sorted(export.epochs)
        return export, [epochs[0], epochs[len(epochs) // 2], epochs[-1]], str(ctx.args.ace_checkpoints)
    E = ctx.args.ace_epochs
    path = ROOT / "_build" / "peers" / f"02_checkpoints_cpu_profile_{E}_epochs.pt"
    picks = [E // 3, 2 * E // 3, E]
    if not path.is_file():
        prof = yaml.safe_load((ROOT / "notebooks" / "params" / "cpu" / "02_grokking_cores.yaml").read_text())
        task = modular_addition(prof["p"], prof["train_frac"], prof["data_seed"], split=prof["split"])
        train_set, test_set = task.datasets(prof["equals_token"])
        config = TransformerConfig(vocab=prof["p"], n_ctx=2, d_model=prof["d_model"], n_heads=prof["n_heads"],
                                   d_mlp=prof["d_mlp"], n_layers=prof["n_layers"], norm=prof["norm"],
                                   dropout=prof["dropout"], causal=prof["causal"], qkv_bias=prof["qkv_bias"],
                                   init=prof["init"], n_out=prof["p"], embedding_dropout=prof["embedding_dropout"])
        seeds, S, fork = prof["seeds"], len(prof["seeds"]), E // 2 + 1
        model = BatchedTransformer(config, seeds + seeds)
        print(f"02: training the checkpoints once ({2 * S} models, {E} epochs of the cpu profile, fork at {fork}) "
              f"into {path.relative_to(ROOT)}", flush=True)
        history = train_ensemble(model, train_set, test_set, steps=E, batch_size=prof["batch_size"], lr=prof["lr"],
                                 betas=tuple(prof["betas"]), drop_last=prof["drop_last"],
                                 weight_decay={0: prof["weight_decay"], fork: [prof["weight_decay"]] * S + [0.0] * S},
                                 optimizer_reset={fork: [False] * S + [True] * S}, eval_every=E,
                                 snapshot_steps=picks, progress=False)
        grokking_cores.export_checkpoints(path, config, seeds + seeds, history.snapshots, picks, 1, p=prof["p"],
                                          split=prof["split"], data_seed=prof["data_seed"], train_frac=prof["train_frac"])
    export = grokking_cores.load_checkpoints(path)
    return export, [float(e) for e in picks], (f"{path.relative_to(ROOT)}: the cpu profile's models (p 31, d_model 64) "
                                              f"after {', '.join(str(e) for e in picks)} epochs, fork (wd → 0) at {E // 2 + 1}")


def w02_ace_analysis(ctx: Context) -> Workload:
    """02: the authors' ``analyze_epoch`` vs ``last_token_summary(analysis="authors")``, 3 checkpoints × 6 models."""
    from torch.utils.data import DataLoader  # noqa: PLC0415
    analysis, models = ctx.ace
    export, epochs, source = ace_checkpoints(ctx)
    config, p = export.config.as_dict(), export.p
    if not (config["causal"] and config["norm"] == "post" and config["qkv_bias"] and config["bias"]) or \
            export.split != "numpy" or export.data_seed != 42:
        raise SystemExit("the 02 checkpoints must use the authors' block and split (see scripts/oracle/cores_02.py)")
    # the oracle's one adaptation: their load_model builds TwoLayerTransformer with its default d_ff and heads
    analysis.TwoLayerTransformer = functools.partial(models.TwoLayerTransformer, d_ff=config["d_mlp"],
                                                     n_head=config["n_heads"])
    test_loader = DataLoader(models.ModAddDataset(p=p, train=False), batch_size=512, shuffle=False)
    tmp = tempfile.TemporaryDirectory()
    M = len(export.seeds)
    for e in epochs:
        payload = {"model_state_dicts": [cores_02.authors_state(export.epochs[e], m, config) for m in range(M)]}
        torch.save(payload, Path(tmp.name) / f"epoch_{int(round(e)):06d}.pt")
    task = modular_addition(p, export.train_frac, export.data_seed, split=export.split)
    tokens = task.tokens(equals=False)
    data = (tokens[task.train_idx], tokens[task.test_idx], task.labels[task.test_idx], tokens, task.labels)
    model = export.model()

    def authors():
        return [[analysis.analyze_epoch(Path(tmp.name), ep=int(round(e)), m_ix=m, test_loader=test_loader, device=CPU,
                                        vocab_size=p, d_model=config["d_model"]) for m in range(M)] for e in epochs]

    def ours():
        rows = []
        for e in epochs:
            model.load_state_dict(export.epochs[e])
            rows.append(grokking_cores.last_token_summary(model, *data, analysis="authors"))
        return rows

    def compare(out: dict) -> dict:
        exact = ("necessary", "necessary_strict", "sufficient", "sufficient_strict", "modes")
        keys = {"necessary": "r_nec", "necessary_strict": "r_nec_strict", "sufficient": "r_suf",
                "sufficient_strict": "r_suf_strict"}
        mismatches, r2_gap, circle_gap = {k: 0 for k in exact}, 0.0, 0.0
        for theirs_row, ours_row in zip(out["authors"], out["ours"]):
            for m, theirs in enumerate(theirs_row):
                for k in exact:
                    a = int(np.asarray(theirs["present"]).sum()) if k == "modes" else int(theirs[keys[k]])
                    mismatches[k] += a != int(ours_row[k][m])
                r2_gap = max(r2_gap, abs(float(theirs["r2"]) - float(ours_row["r2"][m])))
                circle_gap = max(circle_gap, abs(float(theirs["frac_near"]) - float(ours_row["circle"][m])))
        return {"agree": not any(mismatches.values()) and r2_gap <= 1e-5 and circle_gap == 0,
                "metric": "ranks and modes equal; |R² ours − authors|; |unit-circle fraction ours − authors|",
                "mismatches": mismatches, "of": len(epochs) * M, "r2_max_abs_diff": r2_gap,
                "circle_max_abs_diff": circle_gap, "tolerance": {"ranks, modes, circle": 0, "r2": 1e-5},
                "why": "ranks, modes and the circle fraction are discrete; R² is a float32-state least-squares "
                       "fit (the oracle records 1.1e-7)"}

    return Workload("02_ace_analysis", f"02 ACE analysis of the authors (analyze_epoch: extraction, rank scans by "
                    f"ablation, shift-operator fit) on {len(epochs)} checkpoints × {M} models",
                    {"authors": authors, "ours": ours}, compare,
                    {"sizes": {"p": p, "d_model": config["d_model"], "d_mlp": config["d_mlp"], "models": M,
                               "checkpoints": epochs, "test_pairs": len(task.test_idx)}, "weights": source,
                     "precision": {"authors": "float32 model; their numpy/torch analysis", "ours": "float32 model states; "
                                   "corekit's ace in its own precision"},
                     "same_work": "each side loads each model's weights (the authors from their checkpoint files, "
                                  "written untimed beforehand) and runs the whole analysis"},
                    keep=[tmp])


# ==================================================================== the project's own baselines, interleaved


def wb1(ctx: Context) -> Workload:
    """b1: M lone nn.Modules stepped one after another vs ``train_ensemble`` (benchmarks/b1_batched_training.py)."""
    import b1_batched_training as b1  # noqa: PLC0415
    M, steps, p = ctx.args.b1_models, ctx.args.b1_steps, 113
    d_model, n_heads, d_mlp = 128, 4, 512
    task = modular_addition(p, 0.3, seed=0)
    x, y = task.tokens()[task.train_idx], task.labels[task.train_idx]
    lone = [b1.LoneTransformer(p + 1, p, d_model, n_heads, d_mlp, 3) for _ in range(M)]
    optims = [torch.optim.AdamW(m.parameters(), lr=1e-3, betas=(0.9, 0.98), weight_decay=1.0) for m in lone]
    config = TransformerConfig(vocab=p + 1, n_ctx=3, d_model=d_model, n_heads=n_heads, d_mlp=d_mlp, norm="none", n_out=p)
    model = BatchedTransformer(config, seeds=list(range(M)))
    kwargs = dict(lr=1e-3, betas=(0.9, 0.98), weight_decay=1.0, eval_every=10 ** 9, progress=False)

    def baseline():                                # b1's own loop: one untimed warm-up round, then `steps` rounds
        return Timed(None, b1.time_loop(lone, optims, x, y, steps, CPU))

    def ours():                                    # as b1 times it: one untimed warm-up step, then `steps` steps
        train_ensemble(model, Dataset(x, y), steps=1, **kwargs)
        start = time.perf_counter()
        train_ensemble(model, Dataset(x, y), steps=steps, **kwargs)
        return Timed(None, time.perf_counter() - start)

    return Workload("b1_batched_training", f"b1: {M} grokking transformers (p 113, d_model 128), {steps} full-batch "
                    "AdamW steps: a loop of lone nn.Modules vs one batched train_ensemble",
                    {"baseline": baseline, "ours": ours},
                    lambda out: {"agree": None, "why": "not compared: the baseline's models are drawn differently; b1 "
                                 "measures throughput"},
                    {"sizes": {"models": M, "steps": steps, "p": p, "d_model": d_model, "d_mlp": d_mlp},
                     "precision": {"baseline": "float32", "ours": "float32"},
                     "same_work": "b1's workload; each call times `steps` steps after one untimed warm-up step"})


def wb4(ctx: Context) -> Workload:
    """b4: top-25 eNTK eigenpairs, dense kernel + eigh vs matrix-free Lanczos (benchmarks/b4_lanczos.py)."""
    import argparse  # noqa: PLC0415

    import b4_lanczos as b4  # noqa: PLC0415
    from common import grokking_transformer  # noqa: PLC0415
    sizes, model, tokens = grokking_transformer(argparse.Namespace(small=True, full=False, p=ctx.args.b4_p), CPU,
                                                b4.SMALL, b4.FULL)
    k, chunk, block_size, tol = 25, 256, 4, 1e-4
    fm = entk.functional_transformer(model).to(torch.float32, CPU)
    N = len(tokens)
    b4.dense_baseline(fm, tokens[:16], 4, chunk)                                   # b4's warm-up of both paths
    entk.lanczos(entk.kernel_matvec(fm, fm.params, tokens[:16], mode="pair_mean"), 16, 4, block_size=4, max_steps=2,
                 device=CPU)

    def baseline():                                # kernel + float32 eigh timed; its float64 reference is untimed
        ref, t_kernel, t_eigh = b4.dense_baseline(fm, tokens, k, chunk)
        return Timed(ref, t_kernel + t_eigh)

    def ours():
        matvec = entk.kernel_matvec(fm, fm.params, tokens, mode="pair_mean")
        return entk.lanczos(matvec, N, k, block_size=block_size, tol=tol, device=CPU)

    def compare(out: dict) -> dict:
        ref, mine = out["baseline"], out["ours"]
        rel = lambda n: float(((mine.values[:n] - ref.values[:n]).abs() / ref.values[:n].abs()).max())  # noqa: E731
        return {"agree": rel(10) <= 1e-4, "metric": "max relative eigenvalue error of the top 10 vs float64 eigh of "
                "the baseline's kernel", "value": rel(10), "top25": rel(k), "tolerance": 1e-4,
                "why": "b4's target: Lanczos stops at residual ≤ 1e-4 · λ_1", "matvecs": mine.n_matvecs}

    return Workload("b4_lanczos", f"b4: top-{k} eigenpairs of the pair-mean eNTK of the grokking transformer "
                    f"(p {sizes['p']}, N {N}): dense kernel + float32 eigh vs block Lanczos on kernel-vector products",
                    {"baseline": baseline, "ours": ours}, compare,
                    {"sizes": {**sizes, "N": N, "k": k, "block_size": block_size, "tol": tol},
                     "precision": {"baseline": "float32 kernel and eigh", "ours": "float32 products, float64 basis"},
                     "same_work": "b4's workload; the baseline's time is its kernel + eigh as b4 reports it"})


#: name → (the clone it needs: "ntk", "ace" or None, builder), in the order they run.
WORKLOADS: dict[str, tuple[str | None, Callable[[Context], Workload]]] = {
    "06_training": ("ntk", w06_training),
    "06_training_profile_seeds": ("ntk", w06_training_profile_seeds),
    "06_kernels_eig": ("ntk", w06_kernels_eig),
    "05_training": ("ntk", w05_training),
    "05_kernel_eig96": ("ntk", w05_kernel_eig96),
    "05_top200_eig": ("ntk", w05_top200_eig),
    "02_ace_analysis": ("ace", w02_ace_analysis),
    "b1_batched_training": (None, wb1),
    "b4_lanczos": (None, wb4),
}
INTERLEAVED = ("b1_batched_training", "b4_lanczos")


def summary(times: list[float]) -> dict:
    """Return {"min", "median", "runs"} of a side's seconds."""
    return {"min": round(min(times), 4), "median": round(statistics.median(times), 4), "runs": [round(t, 4) for t in times]}
