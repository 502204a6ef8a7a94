"""Grokking-time sweeps: a grid of (modulus, weight decay, seed) runs trained as a few batched programs.

Every run of the grid that shares a modulus p and a batch size trains in one
:func:`~corekit.train.train_ensemble` program (one model per (ω, seed)); a shard stops a fixed margin
after its last model groks, or at the step budget, and a run that has not grokked by then is
*censored*. :func:`run_sweep` runs the shards in this process or, with ``executor="ray"``, as Ray
tasks (one shard per GPU when the cluster has GPUs), and returns the same records either way.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import torch

from corekit import scaling
from corekit.curves import GROKKING_THRESHOLD, first_step_reaching, grokking_step
from corekit.device import default_device
from corekit.models import BatchedTransformer, TransformerConfig
from corekit.tasks.modular import check_modulus, modular_addition
from corekit.train import Dataset, History, train_ensemble


@dataclass(frozen=True)
class RunSpec:
    """One run of the grid: modulus p, weight decay ω, seed and batch size (0 = full batch)."""

    p: int
    weight_decay: float
    seed: int
    batch_size: int = 0


#: The model :class:`SweepSettings` trains by default (vocab, n_ctx and n_out are set per modulus, see ``model``).
SWEEP_MODEL = TransformerConfig(vocab=1, n_ctx=1, d_model=128, n_heads=4, d_mlp=512, n_layers=1, norm="none")


@dataclass(frozen=True)
class SweepSettings:
    """What every run of a sweep shares: the model, the optimizer, the split and the step budget.

    ``model`` is every run's :class:`~corekit.models.TransformerConfig` but for its vocabulary, context and
    output size, which :func:`shard_problem` sets per modulus (what ``model`` holds there is not used);
    ``equals_token`` feeds [a, b, =] (False: [a, b], the ACE authors' format); ``drop_last`` is
    :func:`~corekit.train.train_ensemble`'s.
    ``refine_level`` None evaluates every ``eval_every`` steps, so t_train and t_test are resolved to that;
    a level in (0, ``threshold``] finds them at their step without evaluating every step
    (:class:`EvaluateNearCrossings`).
    """

    model: TransformerConfig = SWEEP_MODEL
    equals_token: bool = True
    drop_last: bool = True
    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.98)
    train_frac: float = 0.5
    data_seed: int = 0
    max_steps: int = 50_000
    margin: int = 500
    eval_every: int = 50
    threshold: float = GROKKING_THRESHOLD
    refine_level: float | None = None

    def __post_init__(self):
        for name in ("max_steps", "margin", "eval_every"):
            if int(getattr(self, name)) != getattr(self, name) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {self.threshold!r}")
        if self.refine_level is not None and not 0.0 < self.refine_level <= self.threshold:
            raise ValueError(f"refine_level must be None or in (0, threshold={self.threshold}], got {self.refine_level!r}")


@dataclass
class RunResult:
    """A run's grokking record: steps to fit the training set and the test set, τ, and its curves.

    ``tau`` = ``t_test`` − ``t_train`` in optimizer steps; None when the run is censored (test accuracy
    never reached the threshold within ``steps_run``). ``steps`` (S,), ``train_acc`` and ``test_acc``
    (S,) are its evaluation curves.
    """

    p: int
    weight_decay: float
    seed: int
    batch_size: int
    t_train: float | None
    t_test: float | None
    tau: float | None
    censored: bool
    steps_run: int
    steps: list[int] = field(repr=False)
    train_acc: list[float] = field(repr=False)
    test_acc: list[float] = field(repr=False)

    @property
    def tau_lower_bound(self) -> float:
        """Return τ, or for a censored run the least τ its budget allows: steps run − t_train (t_train 0 if never fitted)."""
        if not self.censored:
            return self.tau
        return self.steps_run - (self.t_train or 0.0)

    @property
    def spec(self) -> RunSpec:
        """Return the grid point this run belongs to."""
        return RunSpec(self.p, self.weight_decay, self.seed, self.batch_size)


def grid(p_values: Iterable[int], weight_decays: Iterable[float], seeds: Iterable[int],
         batch_size: int = 0) -> list[RunSpec]:
    """Return every (p, ω, seed) combination as RunSpecs, checking the values."""
    p_values, weight_decays, seeds = list(p_values), [float(w) for w in weight_decays], list(seeds)
    if not p_values or not weight_decays or not seeds:
        raise ValueError(f"p_values, weight_decays and seeds must be non-empty lists, got {p_values!r}, "
                         f"{weight_decays!r}, {seeds!r}")
    for p in p_values:
        check_modulus(p)
    if any(w <= 0 for w in weight_decays):
        raise ValueError(f"weight_decays must be positive (τ ∝ 1/ω needs ω > 0), got {weight_decays}")
    if any(int(s) != s or s < 0 for s in seeds):
        raise ValueError(f"seeds must be non-negative integers, got {seeds}")
    if int(batch_size) != batch_size or batch_size < 0:
        raise ValueError(f"batch_size must be a non-negative integer (0 = full batch), got {batch_size!r}")
    return [RunSpec(int(p), w, int(s), int(batch_size)) for p in p_values for w in weight_decays for s in seeds]


def shards(specs: Sequence[RunSpec], max_models: int | None = None) -> list[list[RunSpec]]:
    """Return the runs grouped into batched programs: one per (p, batch size), split to ≤ ``max_models`` runs."""
    groups: dict[tuple[int, int], list[RunSpec]] = {}
    for spec in dict.fromkeys(specs):
        groups.setdefault((spec.p, spec.batch_size), []).append(spec)
    out = []
    for group in groups.values():
        size = max_models or len(group)
        out += [group[i:i + size] for i in range(0, len(group), size)]
    return out


def grokking_times(history: History, threshold: float = GROKKING_THRESHOLD) -> tuple[list[float | None], list[float | None]]:
    """Return per model (t_train, t_test): the first evaluated steps with train / test accuracy ≥ threshold (None: never);
    t_test is :func:`corekit.curves.grokking_step`."""
    train, test = history.curve("train_acc"), history.curve("test_acc")          # (S, M)
    t_train = [first_step_reaching(history.steps, train[:, m].tolist(), threshold) for m in range(train.shape[1])]
    t_test = [grokking_step(history.steps, test[:, m].tolist(), threshold) for m in range(test.shape[1])]
    return t_train, t_test


class StopAfterGrokking:
    """Stop rule for :func:`corekit.train.train_ensemble`: True once every model has held test accuracy ≥ threshold.

    "Held" means for ``margin`` steps.
    """

    def __init__(self, threshold: float, margin: int):
        self.threshold, self.margin = threshold, margin

    def __call__(self, history: History) -> bool:
        _, t_test = grokking_times(history, self.threshold)
        return all(t is not None and history.steps[-1] - t >= self.margin for t in t_test)


class EvaluateNearCrossings:
    """``dense_eval`` rule for :func:`corekit.train.train_ensemble`: True while a crossing is near and not yet resolved.

    A model's train or test accuracy crosses ``threshold`` at its first evaluated step at or above it; the
    crossing is *resolved* when the evaluation before that one was the step before (or it is step 0). The
    rule returns True while some model's latest accuracy is ≥ ``level`` on a curve whose crossing is not
    resolved, so the trainer evaluates every step there and retraces the coarse window that led in: the
    crossing found is the one evaluation at every step finds, unless an accuracy below ``level`` at both
    ends of a coarse window rose to ``threshold`` and fell back below ``level`` inside it.
    """

    def __init__(self, threshold: float, level: float):
        if not 0.0 < level <= threshold <= 1.0:
            raise ValueError(f"need 0 < level <= threshold <= 1, got level={level!r}, threshold={threshold!r}")
        self.threshold, self.level = threshold, level
        self._seen, self._last_step, self._resolved = 0, None, None

    def __call__(self, history: History) -> bool:
        n = len(history.steps)
        if self._resolved is None or n < self._seen or history.steps[self._seen - 1] != self._last_step:
            self._seen, self._resolved = 0, np.zeros((2, len(history.test_acc[0])), dtype=bool)  # a retrace: recount
        for i in range(self._seen, n):
            if i == 0 or history.steps[i] - history.steps[i - 1] == 1:    # after a gap: unresolved until retraced
                self._resolved |= np.array([history.train_acc[i], history.test_acc[i]]) >= self.threshold
        self._seen, self._last_step = n, history.steps[-1]
        latest = np.array([history.train_acc[-1], history.test_acc[-1]])
        return bool(((latest >= self.level) & ~self._resolved).any())


def _shard_key(specs: Sequence[RunSpec], settings: SweepSettings) -> str:
    """Return a short hash naming a shard's checkpoint folder (``refine_level`` enters only when set)."""
    fields = {k: v for k, v in asdict(settings).items() if not (k == "refine_level" and v is None)}
    text = json.dumps({"specs": [asdict(s) for s in specs], "settings": fields}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def shard_problem(specs: Sequence[RunSpec], settings: SweepSettings,
                  device: str = "auto") -> tuple[BatchedTransformer, Dataset, Dataset]:
    """Return (the shard's untrained ensemble on ``device``, its training pairs, its test pairs) for runs of one p."""
    p = specs[0].p
    task = modular_addition(p, settings.train_frac, seed=settings.data_seed)
    x, y = task.tokens(settings.equals_token), task.labels
    train, test = Dataset(x[task.train_idx], y[task.train_idx]), Dataset(x[task.test_idx], y[task.test_idx])
    config = replace(settings.model, vocab=p + int(settings.equals_token), n_ctx=x.shape[1], n_out=p)
    return BatchedTransformer(config, [s.seed for s in specs]).to(default_device(device)), train, test


def run_shard(specs: Sequence[RunSpec], settings: SweepSettings, device: str = "auto",
              checkpoint_dir: str | None = None, threads: int | None = None,
              progress: bool = True, checkpoint_every: int = 1000) -> list[RunResult]:
    """Return the results of runs sharing one p and batch size, trained as one batched program.

    With ``checkpoint_dir`` the shard checkpoints every ``checkpoint_every`` steps under a folder
    named by its specs and settings, and a repeated call resumes (or, once finished, only re-reads)
    it; an unreadable checkpoint is named in a warning and its shard trained again from step 0.
    """
    if not specs or len({(s.p, s.batch_size) for s in specs}) != 1:
        raise ValueError("a shard needs at least one run, all with the same p and batch_size")
    if threads is not None:
        torch.set_num_threads(threads)
    p, batch_size = specs[0].p, specs[0].batch_size
    model, train, test = shard_problem(specs, settings, device)
    folder = None if checkpoint_dir is None else str(Path(checkpoint_dir).expanduser().resolve()
                                                     / f"p{p}_b{batch_size}_{_shard_key(specs, settings)}")
    history = train_ensemble(
        model, train, test, steps=settings.max_steps, batch_size=batch_size or None, lr=settings.lr,
        betas=tuple(settings.betas), weight_decay=[s.weight_decay for s in specs], drop_last=settings.drop_last,
        eval_every=settings.eval_every,
        eval_train_size=len(train), checkpoint_dir=folder, checkpoint_every=checkpoint_every,
        stop=StopAfterGrokking(settings.threshold, settings.margin), progress=progress,
        dense_eval=None if settings.refine_level is None else EvaluateNearCrossings(settings.threshold,
                                                                                    settings.refine_level))
    t_train, t_test = grokking_times(history, settings.threshold)
    train_acc, test_acc = history.curve("train_acc"), history.curve("test_acc")
    results = []
    for m, spec in enumerate(specs):
        grokked = t_test[m] is not None and t_train[m] is not None
        results.append(RunResult(
            p=spec.p, weight_decay=spec.weight_decay, seed=spec.seed, batch_size=spec.batch_size,
            t_train=t_train[m], t_test=t_test[m], tau=(t_test[m] - t_train[m]) if grokked else None,
            censored=not grokked, steps_run=history.steps[-1], steps=list(history.steps),
            train_acc=train_acc[:, m].tolist(), test_acc=test_acc[:, m].tolist()))
    return results


def run_sweep(specs: Sequence[RunSpec], settings: SweepSettings, *, executor: str = "local",
              device: str = "auto", max_models: int | None = None, checkpoint_dir: str | None = None,
              checkpoint_every: int = 1000, ray_address: str | None = None, progress: bool = True) -> list[RunResult]:
    """Return one RunResult per spec (in the order given), the shards run here or as Ray tasks.

    ``executor="local"`` runs the shards one after the other on ``device``. ``executor="ray"``
    submits each shard as a Ray task (``num_gpus=1`` on a cluster with GPUs, else one CPU and one
    thread each), connecting to ``ray_address`` or starting a local instance; the records are merged
    back into grid order, so figures and claims do not depend on where the shards ran.
    ``max_models`` splits a shard into programs of at most that many models (more, smaller tasks).
    ``checkpoint_dir`` is made absolute here, so every worker writes to the same place.
    """
    if executor not in ("local", "ray"):
        raise ValueError(f"executor must be 'local' or 'ray', got {executor!r}")
    if ray_address and executor != "ray":
        raise ValueError(f"ray_address is only used with executor='ray', got ray_address={ray_address!r} "
                         f"with executor={executor!r}")
    if max_models is not None and (int(max_models) != max_models or max_models < 1):
        raise ValueError(f"max_models must be a positive integer or None, got {max_models!r}")
    if int(checkpoint_every) != checkpoint_every or checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be a positive integer, got {checkpoint_every!r}")
    parts = shards(specs, max_models)
    folder = None if checkpoint_dir is None else str(Path(checkpoint_dir).expanduser().resolve())
    if executor == "local":
        done = [run_shard(part, settings, device, folder, progress=progress, checkpoint_every=checkpoint_every)
                for part in parts]
    else:
        done = _run_on_ray(parts, settings, folder, checkpoint_every, ray_address, progress)
    by_spec = {r.spec: r for part in done for r in part}
    return [by_spec[s] for s in specs]


def _run_on_ray(parts: list[list[RunSpec]], settings: SweepSettings, checkpoint_dir: str | None,
                checkpoint_every: int, ray_address: str | None, progress: bool) -> list[list[RunResult]]:
    """Return the shards' results (in ``parts`` order), each shard one Ray task, a line per finished shard.

    A new Ray instance gets this copy of ``corekit`` in its ``runtime_env`` (``py_modules``), so
    cluster workers run the same library as the driver without installing it. A shard whose worker or
    node dies is named and submitted once more (it resumes from its checkpoint when ``checkpoint_dir``
    is set); a second death stops the sweep with an error that names the shard.
    """
    try:
        import ray
        from ray.exceptions import NodeDiedError, WorkerCrashedError
    except ImportError as err:
        raise ImportError("executor='ray' needs Ray: pip install 'corekit[scale]'") from err
    if not ray.is_initialized():
        ray.init(address=ray_address, include_dashboard=False, log_to_driver=False,
                 runtime_env={"py_modules": [str(Path(__file__).resolve().parents[1])]})   # corekit/
    gpus = ray.cluster_resources().get("GPU", 0)
    task = ray.remote(run_shard).options(num_gpus=1 if gpus else 0, num_cpus=1, max_retries=0)
    device = "cuda" if gpus else "cpu"

    def submit(i: int):
        return task.remote(parts[i], settings, device, checkpoint_dir, None if gpus else 1, False, checkpoint_every)

    index = {submit(i): i for i in range(len(parts))}
    retried: set[int] = set()
    results: list[list[RunResult] | None] = [None] * len(parts)
    while index:
        (ready,), _ = ray.wait(list(index), num_returns=1)
        i = index.pop(ready)
        try:
            results[i] = ray.get(ready)
        except (WorkerCrashedError, NodeDiedError) as err:
            name = f"shard {i + 1}/{len(parts)} ({shard_label(parts[i])})"
            if i in retried:
                raise RuntimeError(f"{name} died twice; the sweep stops: {type(err).__name__}") from err
            retried.add(i)
            print(f"{name} died ({type(err).__name__}); retrying it once"
                  + (", from its last checkpoint" if checkpoint_dir else ""), flush=True)
            index[submit(i)] = i
            continue
        if progress:
            print(shard_line(len(parts) - len(index), len(parts), parts[i], results[i]), flush=True)
    return results


def shard_label(specs: Sequence[RunSpec]) -> str:
    """Return what names a shard: its modulus, batch size, weight decays and seeds."""
    decays = sorted({s.weight_decay for s in specs})
    seeds = sorted({s.seed for s in specs})
    return (f"p={specs[0].p}, batch {specs[0].batch_size or 'full'}, weight decay {', '.join(f'{w:g}' for w in decays)}, "
            f"seeds {', '.join(map(str, seeds))}")


def shard_line(done: int, total: int, specs: Sequence[RunSpec], results: Sequence[RunResult]) -> str:
    """Return the progress line of a finished shard: count, modulus, batch size, models, steps, censored runs."""
    censored = sum(r.censored for r in results)
    return (f"shard {done}/{total} done: p={specs[0].p}, batch {specs[0].batch_size or 'full'}, "
            f"{len(specs)} models, {max(r.steps_run for r in results)} steps, {censored} censored")


def results_table(results: Sequence[RunResult]) -> list[dict]:
    """Return the results as plain rows (no curves), e.g. for a DataFrame or a JSON file."""
    keys = ("p", "weight_decay", "seed", "batch_size", "t_train", "t_test", "tau", "censored", "steps_run")
    return [{k: getattr(r, k) for k in keys} for r in results]


def point_taus(results: Sequence[RunResult], key: str, censored_as_bound: bool = False) -> dict[float, np.ndarray]:
    """Return {value of ``key`` ("p" or "weight_decay"): τ of the uncensored runs (n,)}, sorted by value.

    With ``censored_as_bound`` a censored run enters at its :attr:`RunResult.tau_lower_bound` instead of being left out.
    """
    if key not in ("p", "weight_decay"):
        raise ValueError(f"key must be 'p' or 'weight_decay', got {key!r}")
    out: dict[float, list[float]] = {}
    for r in results:
        out.setdefault(getattr(r, key), [])
        if not r.censored and r.tau is not None and math.isfinite(r.tau):
            out[getattr(r, key)].append(r.tau)
        elif r.censored and censored_as_bound:
            out[getattr(r, key)].append(r.tau_lower_bound)
    return {k: np.asarray(v, dtype=float) for k, v in sorted(out.items())}


def run_both_sweeps(p_specs: Sequence[RunSpec], omega_specs: Sequence[RunSpec], p_settings: SweepSettings,
                    omega_settings: SweepSettings, **options) -> tuple[list[RunResult], list[RunResult], list[RunResult]]:
    """Return (p sweep's results, ω sweep's results, every distinct result once), a run in both trained once when the
    settings agree; ``options`` go to :func:`run_sweep`."""
    if omega_settings == p_settings:
        by_spec = {r.spec: r for r in run_sweep(list(dict.fromkeys(list(p_specs) + list(omega_specs))), p_settings,
                                                **options)}
        p_runs, omega_runs = [by_spec[s] for s in p_specs], [by_spec[s] for s in omega_specs]
    else:
        p_runs, omega_runs = run_sweep(p_specs, p_settings, **options), run_sweep(omega_specs, omega_settings, **options)
    return p_runs, omega_runs, list({id(r): r for r in p_runs + omega_runs}.values())


def far_moduli(p_values: Iterable[float], p_c: float, factor: float = 3.0) -> list[float]:
    """Return the moduli at least ``factor`` × p_c (sorted), where τ(p) = −Ω log(1 − p_c/p) is within a few per cent
    of Ω p_c/p and the paper's τ ∝ 1/p applies; none when p_c is not a finite positive number."""
    if not (isinstance(p_c, (int, float)) and math.isfinite(p_c) and p_c > 0):
        return []
    return sorted(float(x) for x in p_values if x >= factor * p_c)


def times_per_point(runs: Sequence[RunResult], key: str = "p") -> list[dict]:
    """Return one row per value of ``key`` over ``runs``: the geometric means of t_train, t_test and τ over the grokked
    runs, and how many of the point's runs grokked (rows sorted by the value)."""
    gm = lambda v: float(np.exp(np.log(np.asarray(v, dtype=float)).mean())) if v else None  # noqa: E731
    rows = []
    for x in sorted({getattr(r, key) for r in runs}):
        done = [r for r in runs if getattr(r, key) == x and not r.censored and r.tau > 0]
        rows.append({key: x, "t_train": gm([r.t_train for r in done]), "t_test": gm([r.t_test for r in done]),
                     "tau": gm([r.tau for r in done]), "grokked": len(done),
                     "runs": sum(getattr(r, key) == x for r in runs)})
    return rows


def two_point_exponent(rows: Sequence[dict], moduli: Sequence[float], column: str = "tau") -> float | None:
    """Return the power-law exponent of ``column`` between the two ``moduli`` from :func:`times_per_point` rows
    (log ratio over log ratio), None when either point has no grokked run."""
    if len(moduli) != 2:
        raise ValueError(f"two moduli needed, got {list(moduli)!r}")
    by_p = {row["p"]: row[column] for row in rows}
    lo, hi = (by_p.get(x) for x in moduli)
    if lo is None or hi is None or lo <= 0 or hi <= 0:
        return None
    return float(np.log(hi / lo) / np.log(moduli[1] / moduli[0]))


def power_law_exponent(x, tau) -> float:
    """Return the exponent k of the least-squares power law τ ≈ c x^k through x (n,) and τ (n,)."""
    return scaling.power_law_fit(x, tau).params["k"]


def no_fit_interval(n_boot: int) -> scaling.Interval:
    """Return the Interval of a statistic that could not be fitted: NaN estimate and bounds, all ``n_boot`` failed."""
    return scaling.Interval(*[float("nan")] * 3, n_boot=n_boot, failed=n_boot)


def exponent_interval(points: dict[float, np.ndarray], n_boot: int) -> scaling.Interval:
    """Return the bootstrap interval of the power-law exponent over ``points`` {x: τ (n,)} (no fit when not fittable)."""
    return (scaling.bootstrap(points, power_law_exponent, n_boot=n_boot) if scaling.fittable(points)
            else no_fit_interval(n_boot))


def log_law_r2_inside(p, tau) -> float | None:
    """Return the log law's R² (3 decimals) on moduli p (n,) and τ (n,), None when it fails or pins p_c at an end of
    (0, min p)."""
    try:
        fit = scaling.log_law_fit(p, tau)
    except (RuntimeError, ValueError):
        return None
    return round(fit.r2, 3) if 1e-3 * min(p) < fit.params["p_c"] < (1 - 1e-3) * min(p) else None


@dataclass
class SweepFits:
    """The fits of both sweeps: each sweep's points {x: τ (n,)}, the power-law fits and bootstrap exponent intervals
    {"ω" or "p": ...} of the fittable ones, the ω exponent with censored runs at their lower bound, and over p the log
    law −Ω log(1 − p_c/p) (None: too few points, or ``log_error`` when it did not converge), its p_c interval and its
    comparison with the power law (:func:`corekit.scaling.compare_laws`)."""

    omega_points: dict[float, np.ndarray]
    p_points: dict[float, np.ndarray]
    fits: dict[str, scaling.Fit]
    exponents: dict[str, scaling.Interval]
    omega_k_bound: float
    log_fit: scaling.Fit | None
    log_error: str | None
    p_c_interval: scaling.Interval | None
    laws: dict[str, float] | None


def fit_sweeps(omega_runs: Sequence[RunResult], p_runs: Sequence[RunResult], n_boot: int) -> SweepFits:
    """Return :class:`SweepFits` of the ω and p sweeps, every bootstrap over ``n_boot`` seed resamples."""
    omega_points, p_points = point_taus(omega_runs, "weight_decay"), point_taus(p_runs, "p")
    fits, exponents = {}, {}
    for name, points in (("ω", omega_points), ("p", p_points)):
        if scaling.fittable(points):
            fits[name] = scaling.power_law_fit(*scaling.geometric_means(points))
            exponents[name] = scaling.bootstrap(points, power_law_exponent, n_boot=n_boot)
    omega_bound_points = point_taus(omega_runs, "weight_decay", censored_as_bound=True)
    omega_k_bound = scaling.power_law_fit(*scaling.geometric_means(omega_bound_points)).params["k"] \
        if scaling.fittable(omega_bound_points) else float("nan")
    log_fit, log_error = None, None
    if scaling.fittable(p_points) and len(p_points) >= 3:
        try:
            log_fit = scaling.log_law_fit(*scaling.geometric_means(p_points))
        except RuntimeError as err:                       # no convergence: reported, not hidden
            log_error = str(err)
    p_c_interval, laws = None, None
    if log_fit is not None:
        p_c_interval = scaling.bootstrap(p_points, lambda x, g: scaling.log_law_fit(x, g).params["p_c"], n_boot=n_boot)
        laws = scaling.compare_laws(*scaling.geometric_means(p_points))
    return SweepFits(omega_points, p_points, fits, exponents, omega_k_bound, log_fit, log_error, p_c_interval, laws)


def draw_tau_panel(ax, points: dict[float, np.ndarray], runs: Sequence[RunResult], key: str, name: str,
                   fit=None, exponent=None, n_boot: int = 1000) -> None:
    """Draw one panel of τ against ``key`` on ``ax``: every seed (grey), the censored runs' lower bounds (open
    triangles) and, given the power-law ``fit`` with its ``exponent`` interval, the geometric means and the fit with
    its bootstrap band (:func:`corekit.scaling.power_law_band`, ``n_boot`` resamples), on log axes ticked at the
    swept values."""
    from matplotlib import ticker

    for x, taus in points.items():
        ax.scatter([x] * len(taus), taus, color="0.6", s=12)
    lower = [(getattr(r, key), r.tau_lower_bound) for r in runs if r.censored]
    if lower:
        ax.scatter(*zip(*lower), marker="^", facecolor="none", edgecolor="C3", s=30, label="censored (τ > shown)")
    ax.set(xscale="log", yscale="log", xlabel=name, ylabel="τ (steps)")
    ax.set_xticks(list(points))
    ax.xaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    if fit is None:
        return
    xg, gm = scaling.geometric_means(points)
    ax.scatter(xg, gm, color="black", s=24, zorder=3, label="geometric mean")
    xs = np.geomspace(min(points), max(points), 50)
    ax.plot(xs, fit.predict(xs), color="C0",
            label=f"power law: k = {exponent.estimate:.2f} [{exponent.low:.2f}, {exponent.high:.2f}]")
    band = scaling.power_law_band(points, xs, n_boot)
    ax.fill_between(xs, band.low, band.high, color="C0", alpha=0.2, lw=0)
