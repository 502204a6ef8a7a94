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
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import torch

from corekit import scaling, shard_records
from corekit.curves import GROKKING_THRESHOLD, first_step_reaching, grokking_step
from corekit.device import default_device
from corekit.inputs import Need, distinct, heads_divide, require
from corekit.inputs import fits as fits_in_memory
from corekit.models import BatchedTransformer, TransformerConfig
from corekit.tasks.modular import check_modulus, modular_addition
from corekit.train import Dataset, History, steps_per_epoch, train_ensemble
from corekit.verdicts import Claim, Null, Spec, at_least, at_most, decide, declared, equal_to, interval_contains, reported


@dataclass(frozen=True)
class RunSpec:
    """One run of the grid: modulus p, weight decay ω, seed and batch size (0 = full batch)."""

    p: int
    weight_decay: float
    seed: int
    batch_size: int = 0


#: Evaluations each run's curves keep (:func:`run_shard`): enough for a figure, few enough for a shard's record.
RECORD_POINTS = 300

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


def shard_name(specs: Sequence[RunSpec], settings: SweepSettings) -> str:
    """Return the name of a shard's checkpoint folder and record: modulus, batch size and the hash of its specs and settings."""
    return f"p{specs[0].p}_b{specs[0].batch_size}_{_shard_key(specs, settings)}"


def _thin(steps: list[int], curves: list[list[float]], keep: Iterable[float | None],
          n: int = RECORD_POINTS) -> tuple[list[int], list[list[float]]]:
    """Return at most about ``n`` evaluations of a run's curves (S,): evenly spaced, with the first, the last, each
    step in ``keep`` and the one before it (the crossings a figure marks)."""
    if len(steps) <= n:
        return list(steps), [list(c) for c in curves]
    at = {int(i) for i in np.linspace(0, len(steps) - 1, n).round()}
    where = {step: i for i, step in enumerate(steps)}
    for t in keep:
        if t is not None and t in where:
            at |= {where[t], max(where[t] - 1, 0)}
    idx = sorted(at)
    return [steps[i] for i in idx], [[c[i] for i in idx] for c in curves]


def run_shard(specs: Sequence[RunSpec], settings: SweepSettings, device: str = "auto",
              checkpoint_dir: str | None = None, threads: int | None = None,
              progress: bool = True, checkpoint_every: int = 1000, record_to: str | None = None) -> list[RunResult]:
    """Return the results of runs sharing one p and batch size, trained as one batched program.

    With ``checkpoint_dir`` the shard checkpoints every ``checkpoint_every`` steps under a folder
    named by its specs and settings, and a repeated call resumes (or, once finished, only re-reads)
    it; an unreadable checkpoint is named in a warning and its shard trained again from step 0. Each run's
    curves keep at most about :data:`RECORD_POINTS` evaluations (its crossings among them). With ``record_to``
    the finished shard's record (:mod:`corekit.shard_records`: its results, its training time summed over the
    segments it took) is written into that folder.
    """
    if not specs or len({(s.p, s.batch_size) for s in specs}) != 1:
        raise ValueError("a shard needs at least one run, all with the same p and batch_size")
    if threads is not None:
        torch.set_num_threads(threads)
    batch_size = specs[0].batch_size
    model, train, test = shard_problem(specs, settings, device)
    folder = None if checkpoint_dir is None else Path(checkpoint_dir).expanduser().resolve() / shard_name(specs, settings)
    started = time.perf_counter()
    history = train_ensemble(
        model, train, test, steps=settings.max_steps, batch_size=batch_size or None, lr=settings.lr,
        betas=tuple(settings.betas), weight_decay=[s.weight_decay for s in specs], drop_last=settings.drop_last,
        eval_every=settings.eval_every,
        eval_train_size=len(train), checkpoint_dir=None if folder is None else str(folder),
        checkpoint_every=checkpoint_every,
        stop=StopAfterGrokking(settings.threshold, settings.margin), progress=progress,
        dense_eval=None if settings.refine_level is None else EvaluateNearCrossings(settings.threshold,
                                                                                    settings.refine_level))
    segments = shard_records.add_segment(folder, time.perf_counter() - started, history.steps[-1])
    t_train, t_test = grokking_times(history, settings.threshold)
    train_acc, test_acc = history.curve("train_acc"), history.curve("test_acc")
    results = []
    for m, spec in enumerate(specs):
        grokked = t_test[m] is not None and t_train[m] is not None
        steps, (train_m, test_m) = _thin(list(history.steps), [train_acc[:, m].tolist(), test_acc[:, m].tolist()],
                                         (t_train[m], t_test[m]))
        results.append(RunResult(
            p=spec.p, weight_decay=spec.weight_decay, seed=spec.seed, batch_size=spec.batch_size,
            t_train=t_train[m], t_test=t_test[m], tau=(t_test[m] - t_train[m]) if grokked else None,
            censored=not grokked, steps_run=history.steps[-1], steps=steps, train_acc=train_m, test_acc=test_m))
    if record_to is not None:
        shard_records.write(record_to, shard_name(specs, settings), _shard_key(specs, settings),
                            {"label": shard_label(specs), "specs": [asdict(s) for s in specs],
                             "settings": asdict(settings), "results": [asdict(r) for r in results]},
                            runtime_s=sum(seg["seconds"] for seg in segments), segments=len(segments))
    return results


def read_records(parts: Sequence[Sequence[RunSpec]], settings: SweepSettings,
                 records: str | None) -> dict[int, list[RunResult]]:
    """Return {index in ``parts``: results} for the shards whose finished record (of the same key) is in ``records``."""
    out = {}
    for i, part in enumerate(parts):
        record = shard_records.read(records, shard_name(part, settings), _shard_key(part, settings))
        if record is not None:
            out[i] = [RunResult(**r) for r in record["results"]]
    return out


def run_sweep(specs: Sequence[RunSpec], settings: SweepSettings, *, executor: str = "local",
              device: str = "auto", max_models: int | None = None, checkpoint_dir: str | None = None,
              checkpoint_every: int = 1000, ray_address: str | None = None, progress: bool = True,
              records: str | None = None) -> list[RunResult]:
    """Return one RunResult per spec (in the order given), the shards run here or as Ray tasks.

    A shard whose finished record (:func:`run_shard`'s ``record_to``, of the same key) is in ``records`` is
    re-read from it, not trained.

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
    done = read_records(parts, settings, records)
    if progress and done:
        print(f"{len(done)} of {len(parts)} shards re-read from their records in {records}", flush=True)
    todo = [part for i, part in enumerate(parts) if i not in done]
    if executor == "local":
        trained = [run_shard(part, settings, device, folder, progress=progress, checkpoint_every=checkpoint_every)
                   for part in todo]
    else:
        trained = _run_on_ray(todo, settings, folder, checkpoint_every, ray_address, progress) if todo else []
    by_spec = {r.spec: r for part in list(done.values()) + trained for r in part}
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


@dataclass(frozen=True)
class SweepPlan:
    """The runs a parameter set asks for: each sweep's specs and settings, and the learning-rate probe's."""

    p_specs: list[RunSpec]
    omega_specs: list[RunSpec]
    probe_specs: list[RunSpec]
    p_settings: SweepSettings
    omega_settings: SweepSettings
    probe_settings: SweepSettings

    def programs(self, max_models: int | None = None) -> list[tuple[list[RunSpec], SweepSettings]]:
        """Return every shard the plan trains, with its settings, in the order :func:`run_plan` trains them."""
        if self.omega_settings == self.p_settings:
            sweeps = [(list(dict.fromkeys(self.p_specs + self.omega_specs)), self.p_settings)]
        else:
            sweeps = [(self.p_specs, self.p_settings), (self.omega_specs, self.omega_settings)]
        if self.probe_settings != self.p_settings:
            sweeps.append((self.probe_specs, self.probe_settings))
        return [(part, settings) for specs, settings in sweeps for part in shards(specs, max_models)]


def sweep_plan(params: dict) -> SweepPlan:
    """Return the plan of chapter 03's notebook parameters ``params``: the p sweep, the ω sweep and the probe."""
    omega_pairs = len(modular_addition(params["omega_p"], params["train_frac"], seed=params["data_seed"]).train_idx)
    omega_epoch_steps = steps_per_epoch(omega_pairs, params["omega_batch_size"], params["drop_last"])
    model = TransformerConfig(vocab=1, n_ctx=1, d_model=params["d_model"], n_heads=params["n_heads"],
                              d_mlp=params["d_mlp"], n_layers=1, norm=params["norm"], dropout=params["dropout"],
                              causal=params["causal"], qkv_bias=params["qkv_bias"], init=params["init"],
                              embedding_dropout=params["embedding_dropout"])            # vocab, n_ctx: per p
    p_settings = SweepSettings(model=model, equals_token=params["equals_token"], drop_last=params["drop_last"],
                               lr=params["lr"], betas=tuple(params["betas"]), train_frac=params["train_frac"],
                               data_seed=params["data_seed"], max_steps=params["p_max_epochs"],
                               margin=params["margin"], eval_every=params["eval_every"])
    return SweepPlan(
        p_specs=grid(params["p_values"], [params["sweep_weight_decay"]], params["seeds"]),
        omega_specs=grid([params["omega_p"]], params["weight_decays"], params["seeds"],
                         batch_size=params["omega_batch_size"]),
        probe_specs=grid(params["probe_p_values"], [params["sweep_weight_decay"]], params["probe_seeds"]),
        p_settings=p_settings,
        omega_settings=replace(p_settings, max_steps=params["omega_max_epochs"] * omega_epoch_steps),
        probe_settings=replace(p_settings, lr=params["probe_lr"]))


def run_plan(plan: SweepPlan, **options) -> tuple[list[RunResult], list[RunResult], list[RunResult], list[RunResult]]:
    """Return (the p sweep's results, the ω sweep's, every distinct result once, the probe's); ``options`` go to
    :func:`run_sweep`. The probe at the sweep's own learning rate is the sweep's runs at its moduli and seeds."""
    p_runs, omega_runs, results = run_both_sweeps(plan.p_specs, plan.omega_specs, plan.p_settings,
                                                  plan.omega_settings, **options)
    if plan.probe_settings != plan.p_settings:
        probe_runs = run_sweep(plan.probe_specs, plan.probe_settings, **options)
    else:
        wanted = set(plan.probe_specs)
        probe_runs = [r for r in p_runs if r.spec in wanted]
    return p_runs, omega_runs, results, probe_runs


def records_summary(plan: SweepPlan, records: str | None, max_models: int | None = None) -> dict:
    """Return what the plan's shards took from ``records``: shards, how many were re-read, their training seconds
    summed over their segments, the segments, and the commits (with dirty flags) that trained them."""
    programs = plan.programs(max_models)
    found = [shard_records.read(records, shard_name(specs, s), _shard_key(specs, s)) for specs, s in programs]
    found = [r for r in found if r is not None]
    return {"shards": len(programs), "re_read": len(found),
            "training_s": round(sum(r["runtime_s"] for r in found), 1),
            "segments": sum(r["segments"] for r in found),
            "commits": sorted({f"{(r['run']['commit'] or '?')[:7]}{' (dirty)' if r['run']['dirty'] else ''}"
                               for r in found})}


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


# --------------------------------------------------------------------------------------------
# Input checks


def check_inputs(params: dict) -> None:
    """Check chapter 03's parameters: distinct seeds, ray_address only with Ray, the size of the largest shard's batch."""
    nb = "03_grokking_scaling_law"
    heads_divide(nb, params)
    distinct(nb, "seeds", params["seeds"], "distinct seeds (the bootstrap resamples them)")
    distinct(nb, "p_values", params["p_values"], "distinct moduli (each is one point of the p sweep)")
    distinct(nb, "probe_p_values", params["probe_p_values"], "two distinct moduli")
    distinct(nb, "probe_seeds", params["probe_seeds"], "distinct seeds")
    require(set(params["probe_seeds"]) <= set(params["seeds"]), nb, "probe_seeds", params["probe_seeds"],
            f"seeds of the sweep (seeds = {params['seeds']}), so the probe repeats runs of the sweep at another rate")
    require(set(params["probe_p_values"]) <= set(params["p_values"]), nb, "probe_p_values", params["probe_p_values"],
            f"moduli of the p sweep (p_values = {params['p_values']}), so the probe compares the same points")
    require(not params.get("ray_address") or params["executor"] == "ray", nb, "ray_address", params.get("ray_address"),
            "an empty string unless executor is 'ray' (the local executor does not use Ray)")
    n_seeds, frac = len(params["seeds"]), params["train_frac"]
    cap = params["max_models_per_shard"] or None
    n_ctx = 3 if params["equals_token"] else 2
    shards_ = [(min(n_seeds, cap or n_seeds), int(frac * p * p), "p_values") for p in params["p_values"]]
    omega_pairs = int(frac * params["omega_p"] ** 2)
    batch = params["omega_batch_size"] if 0 < params["omega_batch_size"] < omega_pairs else omega_pairs
    models = len(params["weight_decays"]) * n_seeds
    shards_.append((min(models, cap or models), batch, "omega_p"))
    models, batch, parameter = max(shards_, key=lambda shard: shard[0] * shard[1])
    hidden = models * batch * n_ctx * params["d_mlp"]
    fits_in_memory(nb, params, [Need("the MLP activations of a batch of the largest shard", 4 * hidden, hidden, parameter)])


# --------------------------------------------------------------------------------------------
# Claims

#: The chapter's claims, declared before any run, in the order the notebook records them.
CLAIMS: tuple[Spec, ...] = (
    Spec("omega_exponent", "paper", "power-law exponent of τ in ω", equal_to(-1, 0.15), paper=-1.02),
    Spec("p_exponent", "paper", "power-law exponent of τ in p over the moduli ≥ 3 p_c", interval_contains(-1),
         paper="≈ −1 (τ ∝ 1/p)"),
    Spec("p_exponent_all_moduli", "paper", "power-law exponent of τ in p over every modulus [estimate, low, high]"),
    Spec("p_exponent_of_log_law", "check", "power-law exponent of the fitted log law over the moduli ≥ 3 p_c "
                                           "(a property of the fit: −1 for any data once p ≫ p_c)",
         paper="→ −1 for p ≫ p_c"),
    Spec("collapse_omega", "paper", "max / min over the points of the ω sweep of the geometric mean of τ·ω·p",
         at_most(1.5), paper="τ ∝ 1/(ωp): one level"),
    Spec("collapse_p_far", "paper", "max / min over the points of the moduli ≥ 3 p_c of the geometric mean of τ·ω·p",
         at_most(1.5), paper="τ ∝ 1/(ωp): one level"),
    Spec("collapse_max_min", "paper", "max / min of the geometric mean of τ·ω·p over every point of both sweeps"),
    Spec("collapse_cv", "paper", "CV of τ·ω·p over grokked runs"),
    Spec("log_law_r2", "paper", "R² of τ(p) = −Ω log(1 − p_c/p) with 0 < p_c < min p", at_least(0.9),
         paper="the authors' fit (grok_sweep.py)"),
    Spec("log_law_p_c", "paper", "p_c of τ(p) = −Ω log(1 − p_c/p) [estimate, low, high]"),
    Spec("log_law_vs_power_law_aic", "extension", "AIC(log law) − AIC(power law) in log τ at the fitted moduli",
         at_most(0)),
    Spec("aic_power_from_log_law", "check",
         "share of data sets drawn from the fitted log law on which the log law wins the AIC"),
    Spec("times_per_modulus", "extension", "geometric means [t_train, t_test, τ] per modulus"),
    Spec("probe_paper_lr", "extension", "[t_train, t_test, τ] at the probe's learning rate on its two moduli, and the "
                                        "exponent of τ between them at both learning rates"),
    Spec("censored_runs", "precondition", "runs censored (no grokking within the step budget)"),
    Spec("omega_exponent_censored_bound", "extension",
         "ω exponent with censored runs at their lower bound instead of left out"),
    Spec("bootstrap_failed_resamples", "check", "bootstrap resamples that left too few points to fit (excluded from "
                                                "the intervals)"),
    Spec("tau_resolution", "check", "largest eval_every / τ over grokked runs", paper="τ measured every step"),
)
_SPEC = declared(CLAIMS)
#: The share of data sets drawn from the fitted log law at or above which a positive AIC difference cannot reject it
#: (the mirror of the power-law null's 5th percentile).
LOG_LAW_TAIL = 0.05
#: What a run that decides the p claims needs, named in their undecided reasons.
PAPER_PROFILE = ("the paper profile (notebooks/params/paper/03_grokking_scaling_law.yaml: moduli 31–101, the ω sweep "
                 "at p 53) runs more moduli, about 40 single-thread CPU-hours or ≤ 10 min on one H200")


@dataclass(frozen=True)
class Findings:
    """What chapter 03's claims are decided on: the fits of both sweeps (:func:`fit_sweeps`), every distinct run of both
    sweeps (``results``), the p sweep's runs and the probe's runs (at ``probe_lr``), and the parameters the claims
    name; ``n_draws`` data sets are drawn from each fitted law for the comparison of the two laws."""

    fits: SweepFits
    results: Sequence[RunResult]
    p_runs: Sequence[RunResult]
    probe_runs: Sequence[RunResult]
    omega_p: int
    sweep_weight_decay: float
    lr: float
    probe_lr: float
    probe_p_values: Sequence[int]
    eval_every: int
    n_boot: int
    n_draws: int = 200


def _steps(t: float | None) -> str:
    """Return a step count for a sentence of reason ("none grokked" for None)."""
    return "none grokked" if t is None else f"{t:.0f}"


def _rounded(interval: scaling.Interval, digits: int = 3) -> tuple[float, float]:
    """Return (low, high) of ``interval``, rounded."""
    return round(interval.low, digits), round(interval.high, digits)


def _log_law_exponent(fit: scaling.Fit | None, moduli: Sequence[float]) -> float:
    """Return the power-law exponent of the fitted log law itself over ``moduli`` (NaN without a fit or two moduli)."""
    if fit is None or fit.params["Omega"] <= 0 or len(moduli) < 2:
        return float("nan")
    xs = np.asarray(moduli, dtype=float)
    return scaling.power_law_fit(xs, fit.predict(xs)).params["k"]


def _pooled(points: dict) -> dict:
    """Return ``points`` {key: τ (n,)} with every point given all the points' τ: τ with no dependence on the key."""
    everything = np.concatenate([np.asarray(v, dtype=float) for v in points.values()])
    return {k: everything for k in points}


def _exponent_claims(f: Findings, far: list[float], p_c: float) -> list[Claim]:
    """Return the claims on the exponents of τ in ω and in p (tested and reported), in declared order."""
    sf, no_fit = f.fits, no_fit_interval(f.n_boot)
    omega_k, p_k = sf.exponents.get("ω", no_fit), sf.exponents.get("p", no_fit)
    censored = sum(r.censored for r in f.results)
    omegas = list(sf.omega_points)
    omega_null = exponent_interval(scaling.permuted_points(sf.omega_points, seed=0), f.n_boot)
    fitted = "ω" in sf.exponents and math.isfinite(omega_k.low) and math.isfinite(omega_k.high)
    out = [decide(_SPEC["omega_exponent"], round(omega_k.estimate, 3), interval=_rounded(omega_k),
                  undecided=None if fitted else f"no power law in ω could be fitted ({censored} runs censored: fewer "
                                                "than two weight decays have a grokked run); longer runs "
                                                "(omega_max_epochs) decide it",
                  statistic=f"power-law exponent of τ in ω ({omega_k.describe()} of the seeds beside it)",
                  null=Null("the same fit with τ permuted among the ω sweep's runs", round(omega_null.estimate, 3),
                            interval=_rounded(omega_null)),
                  why=f"interval [{omega_k.low:.3f}, {omega_k.high:.3f}] over ω = {min(omegas):g}–{max(omegas):g} at "
                      f"p = {f.omega_p}, {censored} runs censored")]
    p_far = {x: sf.p_points[x] for x in far}
    enough = len(far) >= 3 and scaling.fittable(p_far)
    p_test_k = exponent_interval(p_far, f.n_boot) if enough else no_fit
    p_null = exponent_interval(scaling.permuted_points(p_far, seed=0), f.n_boot) if enough else no_fit
    moduli = ", ".join(f"{x:g}" for x in sf.p_points)
    undecided = (None if enough else
                 f"{len(far)} moduli reach 3 p_c = {3 * p_c:.0f} ({', '.join(f'{x:g}' for x in far)}) but fewer than "
                 "two of them have a grokked run, so no power law can be fitted over them; longer runs "
                 "(p_max_epochs) decide it"
                 if len(far) >= 3 else
                 "the log law did not converge, so p_c and the moduli with p ≫ p_c are unknown; " + PAPER_PROFILE
                 if sf.log_error is not None else
                 f"no log law was fitted (it needs three moduli, two of them with a grokked run; run: {moduli}), so "
                 "p_c and the moduli with p ≫ p_c are unknown; " + PAPER_PROFILE
                 if sf.log_fit is None else
                 f"only {len(far)} of the moduli run ({moduli}) reach 3 p_c = {3 * p_c:.0f} (p_c {p_c:.1f} from the "
                 "log-law fit), and τ ∝ 1/p is claimed for p ≫ p_c; three or more such moduli let the claim be tested")
    p_times = times_per_point(f.p_runs)
    out.append(decide(
        _SPEC["p_exponent"], round(p_test_k.estimate, 3), interval=_rounded(p_test_k),
        statistic=f"power-law exponent of τ in p over the moduli ≥ 3 p_c ({p_test_k.describe()} of the seeds)",
        null=Null("the same fit with τ permuted among the runs of those moduli (no dependence on p)",
                  round(p_null.estimate, 3), interval=_rounded(p_null)),
        undecided=undecided,
        why=f"fitted over p = {', '.join(f'{x:g}' for x in far)} (3 p_c = {3 * p_c:.1f}); over all moduli "
            f"{p_k.summary()}; from p {p_times[0]['p']} to {p_times[-1]['p']} t_train goes "
            f"{_steps(p_times[0]['t_train'])} → {_steps(p_times[-1]['t_train'])} steps and t_test "
            f"{_steps(p_times[0]['t_test'])} → {_steps(p_times[-1]['t_test'])}"))
    out.append(reported(_SPEC["p_exponent_all_moduli"], [round(v, 3) for v in (p_k.estimate, p_k.low, p_k.high)],
                        statistic=f"power-law exponent of τ in p over every modulus [estimate, low, high] "
                                  f"({p_k.describe()})"))
    out.append(reported(_SPEC["p_exponent_of_log_law"], round(_log_law_exponent(sf.log_fit, far), 3)))
    return out


def _collapse_claims(f: Findings, far: list[float]) -> list[Claim]:
    """Return the claims on the collapse of τ·ω·p (the ω sweep, the moduli ≥ 3 p_c, every point, every run)."""
    grokked = [r for r in f.results if not r.censored and r.tau > 0]
    by_point: dict[tuple[float, float], list[float]] = {}
    for r in grokked:
        by_point.setdefault((float(r.p), float(r.weight_decay)), []).append(r.tau)
    points = {k: np.asarray(v, dtype=float) for k, v in by_point.items()}
    subsets = {"omega": ("the ω sweep", {k: v for k, v in points.items() if k[0] == f.omega_p}),
               "p_far": ("the moduli ≥ 3 p_c", {k: v for k, v in points.items()
                                                if k[0] in far and k[1] == f.sweep_weight_decay})}
    out = []
    for name, (where, subset) in subsets.items():
        enough = len(subset) >= 2
        value = scaling.collapse_ratio(subset) if enough else float("nan")
        shuffled = scaling.collapse_ratio(scaling.permuted_points(subset, seed=0)) if enough else float("nan")
        flat = scaling.collapse_ratio(_pooled(subset)) if enough else float("nan")
        out.append(decide(
            _SPEC[f"collapse_{name}"], round(value, 3),
            statistic=f"max / min over the points of {where} of the geometric mean of τ·ω·p",
            null=[Null(f"the same with τ permuted among the runs of {where} (no dependence on ω or p)",
                       round(shuffled, 3)),
                  Null(f"τ with no dependence on ω or p (every point of {where} given all its runs' τ): the spread "
                       "of ω·p itself", round(flat, 3))],
            undecided=None if enough else f"fewer than two points in {where}",
            why="per-point geometric means of τωp: " + ", ".join(
                f"(p {k[0]:g}, ω {k[1]:g}) {np.exp(np.log(v).mean()) * k[0] * k[1]:.0f}" for k, v in subset.items())))
    products = scaling.collapse_values([r.p for r in grokked], [r.weight_decay for r in grokked],
                                       [r.tau for r in grokked])
    out.append(reported(_SPEC["collapse_max_min"], round(scaling.collapse_ratio(points), 3) if len(points) >= 2
                        else None))
    out.append(reported(_SPEC["collapse_cv"], round(scaling.coefficient_of_variation(products), 3)
                        if len(products) >= 2 else float("nan")))
    return out


def _law_claims(f: Findings) -> list[Claim]:
    """Return the claims on τ(p) = −Ω log(1 − p_c/p): its R², its p_c, and its comparison with the power law."""
    sf = f.fits
    min_p = min(sf.p_points)
    log_fit = sf.log_fit
    log_r2, p_c = (log_fit.r2, log_fit.params["p_c"]) if log_fit is not None else (float("nan"), float("nan"))
    gm_p = scaling.geometric_means(sf.p_points) if scaling.fittable(sf.p_points) else (np.array([]), np.array([]))
    try:
        shuffled_fit = scaling.log_law_fit(*scaling.geometric_means(scaling.permuted_points(sf.p_points, seed=0)))
    except (RuntimeError, ValueError):
        shuffled_fit = None
    r2_power = log_law_r2_inside(gm_p[0], sf.fits["p"].predict(gm_p[0])) if "p" in sf.fits and len(gm_p[0]) >= 3 \
        else None
    r2_shuffled = (round(shuffled_fit.r2, 3) if shuffled_fit is not None
                   and 1e-3 * min_p < shuffled_fit.params["p_c"] < (1 - 1e-3) * min_p else None)
    too_few = (f"only {len(gm_p[0])} moduli have a grokked run, and a law of two parameters fits two points exactly "
               "(three or more moduli with grokked runs let it be tested)") if len(gm_p[0]) < 3 else None
    out = [decide(_SPEC["log_law_r2"], round(log_r2, 3) if log_fit is not None and log_law_r2_inside(*gm_p) is not None
                  else None,
                  statistic=f"R² of τ(p) = −Ω log(1 − p_c/p) with 0 < p_c < min p = {min_p}",
                  null=[Null("a plain power law through the same moduli (no pole)", r2_power),
                        Null("τ permuted among the moduli", r2_shuffled)],
                  undecided=too_few,
                  why=f"R² {log_r2:.3f} with p_c {p_c:.3g} over p = {min_p}–{max(sf.p_points)}")]
    interval = sf.p_c_interval
    out.append(reported(_SPEC["log_law_p_c"], [round(v, 2) for v in (interval.estimate, interval.low, interval.high)]
                        if interval else None,
                        statistic=f"p_c [estimate, low, high] ({interval.describe() if interval else 'no fit'})"))
    nan = np.array([float("nan")])
    aic_diff = scaling.aic_difference(*gm_p) if len(gm_p[0]) >= 2 else float("nan")
    power_draws = scaling.power_law_aic_null(*gm_p, n_draws=f.n_draws) if len(gm_p[0]) >= 3 else nan
    log_draws = scaling.log_law_aic_null(*gm_p, n_draws=f.n_draws) if len(gm_p[0]) >= 3 and log_fit is not None else nan
    log_finite = log_draws[np.isfinite(log_draws)]
    aic_null = float(np.nanpercentile(power_draws, 5)) if np.isfinite(power_draws).any() else float("nan")
    log_wins = float(np.mean(log_finite <= 0)) if len(log_finite) else float("nan")
    as_large = float(np.mean(log_finite >= aic_diff)) if len(log_finite) and math.isfinite(aic_diff) else float("nan")
    cannot_reject = (f"data drawn from the fitted log law itself give a difference of at least {aic_diff:.3g} in "
                     f"{as_large:.0%} of {len(log_finite)} draws (≥ {LOG_LAW_TAIL:.0%}), so the power law's lead does "
                     "not reject the log law; more moduli, near p_c and well past it, where the two laws part, would "
                     "decide it") if aic_diff > 0 and as_large >= LOG_LAW_TAIL else None
    out.append(decide(
        _SPEC["log_law_vs_power_law_aic"], round(aic_diff, 3),
        null=Null(f"5th percentile over {f.n_draws} data sets drawn from the fitted power law with the data's scatter",
                  round(aic_null, 3)),
        undecided=too_few or cannot_reject,
        why=(f"AIC {sf.laws['aic_log']:.3g} (log law) against {sf.laws['aic_power']:.3g} (power law); on "
             f"{f.n_draws} data sets drawn from the fitted log law the log law wins {log_wins:.0%} of the time (the "
             f"comparison's power); {int(np.isnan(power_draws).sum())} of the power-law draws had no log-law fit")
        if sf.laws else "no log-law fit"))
    out.append(reported(_SPEC["aic_power_from_log_law"], round(log_wins, 3),
                        statistic=f"share of {f.n_draws} data sets drawn from the fitted log law on which the log law "
                                  "wins the AIC"))
    return out


def _figures(f: Findings) -> list[Claim]:
    """Return the reported figures: times per modulus, the probe at the second learning rate, censored runs, the
    ω exponent with censored runs as bounds, failed resamples and the resolution of τ."""
    p_times, probe_times = times_per_point(f.p_runs), times_per_point(f.probe_runs)
    probe_k = {f"lr {rate:g}": two_point_exponent(rows, f.probe_p_values)
               for rate, rows in ((f.lr, p_times), (f.probe_lr, probe_times))}
    columns = ("t_train", "t_test", "tau")
    rounded = {row_set: {f"p {row['p']}": [None if row[k] is None else round(row[k]) for k in columns] for row in rows}
               for row_set, rows in (("sweep", p_times), ("probe", probe_times))}
    no_fit = no_fit_interval(f.n_boot)
    omega_k, p_k = f.fits.exponents.get("ω", no_fit), f.fits.exponents.get("p", no_fit)
    taus = [r.tau for r in f.results if not r.censored and r.tau > 0]
    return [
        reported(_SPEC["times_per_modulus"], rounded["sweep"],
                 statistic=f"geometric means [t_train, t_test, τ] per modulus at lr {f.lr:g}"),
        reported(_SPEC["probe_paper_lr"], {**rounded["probe"], **{f"exponent, {k}": None if v is None else round(v, 3)
                                                                  for k, v in probe_k.items()}},
                 statistic=f"[t_train, t_test, τ] at lr {f.probe_lr:g} on p = {list(f.probe_p_values)}, and the "
                           f"exponent of τ between those moduli at lr {f.lr:g} and {f.probe_lr:g}"),
        reported(_SPEC["censored_runs"], sum(r.censored for r in f.results),
                 statistic=f"runs censored, of {len(f.results)}"),
        reported(_SPEC["omega_exponent_censored_bound"], round(f.fits.omega_k_bound, 3)),
        reported(_SPEC["bootstrap_failed_resamples"], {"ω": omega_k.failed, "p": p_k.failed},
                 statistic=f"resamples of {f.n_boot} that left too few points to fit (excluded from the intervals)"),
        reported(_SPEC["tau_resolution"], round(f.eval_every / min(taus), 4) if taus else None),
    ]


def claims(findings: Findings) -> list[Claim]:
    """Return chapter 03's claims decided on ``findings``, in the order of :data:`CLAIMS`: the exponents of τ in ω and
    p (the p exponent over the moduli ≥ 3 p_c of the log law fitted on every modulus), the collapse of τ·ω·p, the log
    law's fit and its comparison with a power law, and the reported figures."""
    log_fit = findings.fits.log_fit
    p_c = log_fit.params["p_c"] if log_fit is not None else float("nan")
    far = far_moduli(findings.fits.p_points, p_c)
    return [*_exponent_claims(findings, far, p_c), *_collapse_claims(findings, far), *_law_claims(findings),
            *_figures(findings)]
