"""Grokking-time sweeps: grid checks, sharding, τ and censoring, early stop, checkpoints, local vs Ray execution,
and the claims decided on hand-made sweeps (every rule that does not pass, and one case where all pass)."""

import dataclasses
import functools
import json
import os
import re
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from corekit import scaling
from corekit.chapters.grokking_scaling_law import (
    CLAIMS,
    EvaluateNearCrossings,
    Findings,
    RunResult,
    RunSpec,
    StopAfterGrokking,
    SweepSettings,
    claims,
    exponent_interval,
    far_moduli,
    fit_sweeps,
    grid,
    grokking_times,
    log_law_r2_inside,
    no_fit_interval,
    point_taus,
    power_law_exponent,
    run_both_sweeps,
    run_sweep,
    shard_problem,
    shards,
    times_per_point,
    two_point_exponent,
)
from corekit.models import BatchedTransformer, TransformerConfig
from corekit.tasks.modular import modular_addition
from corekit.train import Dataset, History, train_ensemble

TINY = SweepSettings(TransformerConfig(vocab=1, n_ctx=1, d_model=16, n_heads=2, d_mlp=32, norm="pre"), lr=1e-2,
                     max_steps=200, margin=20, eval_every=10)


def test_grid_checks_its_values():
    specs = grid([5, 7], [0.5, 1], [0, 1])
    assert len(specs) == 8 and specs[0] == RunSpec(5, 0.5, 0, 0)
    with pytest.raises(ValueError, match="p must be prime"):
        grid([9], [1.0], [0])
    with pytest.raises(ValueError, match="weight_decays must be positive"):
        grid([5], [0.0], [0])
    with pytest.raises(ValueError, match="non-empty"):
        grid([], [1.0], [0])
    with pytest.raises(ValueError, match="max_steps must be a positive integer"):
        SweepSettings(max_steps=0)


def test_shards_group_by_modulus_and_batch_size():
    specs = grid([5, 7], [0.5, 1.0], [0, 1, 2]) + grid([7], [1.0], [0], batch_size=16)
    parts = shards(specs)
    assert [(s[0].p, s[0].batch_size, len(s)) for s in parts] == [(5, 0, 6), (7, 0, 6), (7, 16, 1)]
    assert [len(s) for s in shards(specs, max_models=4)] == [4, 2, 4, 2, 1]


def _history(train, test, steps):
    h = History(steps=list(steps))
    h.train_acc = [list(r) for r in np.array(train).T]
    h.test_acc = [list(r) for r in np.array(test).T]
    return h


def test_grokking_times_and_stop_rule():
    steps = [0, 10, 20, 30, 40]
    h = _history(train=[[0.1, 0.995, 1, 1, 1], [0.2, 0.5, 0.99, 1, 1]],
                 test=[[0.0, 0.1, 0.2, 0.99, 1.0], [0.0, 0.0, 0.1, 0.2, 0.3]], steps=steps)
    t_train, t_test = grokking_times(h, 0.99)
    assert t_train == [10.0, 20.0] and t_test == [30.0, None]
    assert not StopAfterGrokking(0.99, 10)(h)                   # model 1 has not grokked
    h2 = _history(train=[[1] * 5, [1] * 5], test=[[0, 0, 0.99, 1, 1], [0, 0.99, 1, 1, 1]], steps=steps)
    assert StopAfterGrokking(0.99, 20)(h2) and not StopAfterGrokking(0.99, 30)(h2)


def test_train_ensemble_stops_when_asked():
    model = BatchedTransformer(TransformerConfig(vocab=5, n_ctx=3, d_model=8, n_heads=2, d_mlp=8), [0])
    data = Dataset(torch.randint(0, 5, (16, 3)), torch.randint(0, 5, (16,)))
    h = train_ensemble(model, data, data, steps=100, eval_every=10, progress=False,
                       stop=lambda hist: hist.steps[-1] >= 30)
    assert h.steps[-1] == 30


def _records(results):
    return [(r.spec, r.t_train, r.t_test, r.tau, r.censored, r.steps, r.test_acc) for r in results]


def test_a_run_does_not_depend_on_its_shard():
    specs = grid([5, 7], [0.5, 2.0], [0, 1])
    together = run_sweep(specs, TINY, device="cpu", progress=False)
    apart = run_sweep(specs, TINY, device="cpu", max_models=1, progress=False)
    assert _records(together) == _records(apart)
    assert all(r.t_train is not None for r in together)        # the tiny models fit their training pairs
    for r in together:
        assert r.censored == (r.tau is None)
        assert r.tau is None or r.tau == r.t_test - r.t_train
    taus = point_taus(together, "weight_decay")
    assert sorted(taus) == [0.5, 2.0]


def test_modular_tokens_with_and_without_the_equals_token():
    task = modular_addition(5, 0.5, seed=0)
    with_eq, pair = task.tokens(), task.tokens(equals=False)
    assert with_eq.shape == (25, 3) and pair.shape == (25, 2)
    assert torch.equal(with_eq[:, :2], pair) and bool((with_eq[:, 2] == 5).all())
    assert torch.equal((pair[:, 0] + pair[:, 1]) % 5, task.labels)


def test_the_authors_model_and_input_format_reach_the_shard():
    settings = dataclasses.replace(TINY, model=dataclasses.replace(TINY.model, norm="post", dropout=0.1, causal=False,
                                                                   qkv_bias=True, init="torch"), equals_token=False)
    model, train, test = shard_problem(grid([5], [1.0], [0, 1]), settings, device="cpu")
    assert train.x.shape[1] == 2 and model.config.vocab == 5 and model.config.n_ctx == 2
    assert (model.config.norm, model.config.dropout, model.config.causal, model.config.qkv_bias, model.config.init) \
        == ("post", 0.1, False, True, "torch")
    together = run_sweep(grid([5], [0.5, 2.0], [0, 1]), settings, device="cpu", progress=False)
    apart = run_sweep(grid([5], [0.5, 2.0], [0, 1]), settings, device="cpu", max_models=1, progress=False)
    assert _records(together) == _records(apart)                # dropout too depends only on each run's seed


def test_censored_runs_enter_at_their_lower_bound_only_when_asked():
    def run(w, seed, t_train, tau):
        return RunResult(p=5, weight_decay=w, seed=seed, batch_size=0, t_train=t_train, t_test=None if tau is None
                         else t_train + tau, tau=tau, censored=tau is None, steps_run=400, steps=[], train_acc=[],
                         test_acc=[])
    results = [run(1.0, 0, 10.0, 90.0), run(1.0, 1, 30.0, None), run(2.0, 0, None, None)]
    assert results[1].tau_lower_bound == 370.0 and results[2].tau_lower_bound == 400.0
    assert results[0].tau_lower_bound == 90.0
    dropped, bounded = point_taus(results, "weight_decay"), point_taus(results, "weight_decay", censored_as_bound=True)
    assert dropped[1.0].tolist() == [90.0] and dropped[2.0].tolist() == []
    assert bounded[1.0].tolist() == [90.0, 370.0] and bounded[2.0].tolist() == [400.0]


def test_checkpointed_sweep_resumes_to_the_same_records(tmp_path):
    specs = grid([5], [1.0], [0, 1])
    first = run_sweep(specs, TINY, device="cpu", checkpoint_dir=str(tmp_path), progress=False)
    assert any(tmp_path.rglob("last.pt"))
    again = run_sweep(specs, TINY, device="cpu", checkpoint_dir=str(tmp_path), progress=False)
    assert _records(first) == _records(again)


def _one_thread_sweep(specs, settings):
    """Return the local executor's results on one thread, as every Ray worker runs."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return run_sweep(specs, settings, device="cpu", progress=False)
    finally:
        torch.set_num_threads(threads)


def test_ray_shards_merge_to_the_single_process_result(tmp_path, capsys):
    ray = pytest.importorskip("ray")
    specs = grid([5, 7], [0.5, 2.0], [0, 1])
    local = _one_thread_sweep(specs, TINY)
    try:                                                        # a new instance: corekit shipped in runtime_env
        remote = run_sweep(specs, TINY, executor="ray", max_models=3, checkpoint_dir=str(tmp_path),
                           checkpoint_every=50)
        imported = ray.get(ray.remote(lambda: __import__("corekit").__file__).remote())
        assert "py_modules_files" in imported                   # workers import the shipped package, not their own
    finally:
        ray.shutdown()
    assert _records(remote) == _records(local)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("shard ")]
    assert len(lines) == 4 and {line.split(" done")[0] for line in lines} == {f"shard {i}/4" for i in range(1, 5)}
    assert len(list(tmp_path.rglob("last.pt"))) == 4          # one per split shard, under the absolute folder


def _kill_a_shard_worker_after_its_first_checkpoint(folder: Path, killed: list, timeout: float = 120.0) -> None:
    """SIGKILL the first Ray worker found running ``run_shard`` once a checkpoint exists under ``folder``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not killed:
        if any(folder.rglob("last.pt")):
            for proc in Path("/proc").iterdir():
                try:
                    title = (proc / "cmdline").read_bytes()
                except OSError:
                    continue
                if proc.name.isdigit() and title.startswith(b"ray::run_shard"):
                    os.kill(int(proc.name), signal.SIGKILL)
                    killed.append(int(proc.name))
                    return
        time.sleep(0.02)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the worker through /proc")
def test_a_shard_whose_worker_is_killed_is_named_and_retried_once_from_its_checkpoint(tmp_path, capsys):
    ray = pytest.importorskip("ray")
    long = dataclasses.replace(TINY, max_steps=3000, margin=3000, eval_every=50)   # long enough to be caught
    specs = grid([5, 7], [1.0], [0, 1])
    local = _one_thread_sweep(specs, long)
    killed: list[int] = []
    killer = threading.Thread(target=_kill_a_shard_worker_after_its_first_checkpoint, args=(tmp_path, killed))
    killer.start()
    try:
        remote = run_sweep(specs, long, executor="ray", checkpoint_dir=str(tmp_path), checkpoint_every=100)
    finally:
        killer.join()
        ray.shutdown()
    assert killed, "no shard worker was found to kill"
    out = capsys.readouterr().out
    retried = [line for line in out.splitlines() if line.startswith("shard ") and " died " in line]
    assert len(retried) == 1, out
    assert re.fullmatch(r"shard [12]/2 \(p=[57], batch full, weight decay 1, seeds 0, 1\) died "
                        r"\(WorkerCrashedError\); retrying it once, from its last checkpoint", retried[0]), retried
    assert len([line for line in out.splitlines() if line.startswith("shard ") and " done:" in line]) == 2
    assert _records(remote) == _records(local)                 # the retried shard resumed to the same result


def test_ray_address_without_the_ray_executor_is_refused_by_name():
    with pytest.raises(ValueError, match="ray_address is only used with executor='ray'"):
        run_sweep(grid([5], [1.0], [0]), TINY, ray_address="auto")


def test_a_corrupt_checkpoint_is_named_and_its_shard_retrained(tmp_path):
    specs = grid([5], [1.0], [0, 1])
    first = run_sweep(specs, TINY, device="cpu", checkpoint_dir=str(tmp_path), checkpoint_every=50, progress=False)
    (ckpt,) = tmp_path.rglob("last.pt")
    ckpt.write_bytes(ckpt.read_bytes()[:200])                   # truncated, e.g. a full disk
    with pytest.warns(UserWarning, match=f"checkpoint {ckpt} is unreadable .*training from step 0"):
        again = run_sweep(specs, TINY, device="cpu", checkpoint_dir=str(tmp_path), checkpoint_every=50,
                          progress=False)
    assert _records(again) == _records(first)


class _Payload:
    """A pickle that runs code when loaded without weights_only: it creates a file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_a_checkpoint_cannot_run_code(tmp_path):
    specs = grid([5], [1.0], [0])
    run_sweep(specs, TINY, device="cpu", checkpoint_dir=str(tmp_path), progress=False)
    (ckpt,) = tmp_path.rglob("last.pt")
    marker = tmp_path / "code_ran"
    torch.save({"key": _Payload(marker)}, ckpt)
    with pytest.warns(UserWarning, match="is unreadable"):
        run_sweep(specs, TINY, device="cpu", checkpoint_dir=str(tmp_path), progress=False)
    assert not marker.exists()


def test_a_relative_checkpoint_folder_is_the_callers(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_sweep(grid([5], [1.0], [0]), TINY, device="cpu", checkpoint_dir="ckpt", progress=False)
    assert list((tmp_path / "ckpt").rglob("last.pt"))
    with pytest.raises(ValueError, match="checkpoint_every must be a positive integer"):
        run_sweep(grid([5], [1.0], [0]), TINY, checkpoint_every=0)
    with pytest.raises(ValueError, match="max_models must be a positive integer"):
        run_sweep(grid([5], [1.0], [0]), TINY, max_models=0)


def test_coarse_evaluation_with_refinement_finds_the_per_step_grokking_times():
    """Evaluated every 10 steps, and at every step from an accuracy of 0.3 to its crossing, each run's t_train, t_test
    and τ are those of per-step evaluation (p 17, both runs grok), from fewer evaluations."""
    settings = SweepSettings(TransformerConfig(vocab=1, n_ctx=1, d_model=32, n_heads=4, d_mlp=128, norm="pre"), lr=1e-2,
                             train_frac=0.8, max_steps=400, margin=20, eval_every=1)
    specs = grid([17], [2.0], [0, 1])
    per_step = run_sweep(specs, settings, device="cpu", progress=False)
    refined = run_sweep(specs, dataclasses.replace(settings, eval_every=10, refine_level=0.3), device="cpu",
                        progress=False)
    assert all(r.tau is not None for r in per_step)
    assert [(r.t_train, r.t_test, r.tau) for r in refined] == [(r.t_train, r.t_test, r.tau) for r in per_step]
    assert len(refined[0].steps) < len(per_step[0].steps)
    for dense, coarse in zip(per_step, refined):                 # every evaluation refined made is per-step's
        at = {s: (a, b) for s, a, b in zip(dense.steps, dense.train_acc, dense.test_acc)}
        assert all(at[s] == (a, b) for s, a, b in zip(coarse.steps, coarse.train_acc, coarse.test_acc) if s in at)
    with pytest.raises(ValueError, match="refine_level must be None or in"):
        dataclasses.replace(settings, refine_level=1.5)


def test_a_retraced_window_repeats_the_same_steps_with_minibatches_and_dropout():
    """dense_eval turning True goes back to the previous evaluation and retraces: the same batches, dropout masks and
    optimizer state, so the curves at every step and the final parameters are those of evaluating every step."""
    cfg = TransformerConfig(vocab=5, n_ctx=3, d_model=8, n_heads=2, d_mlp=16, dropout=0.1)
    data = Dataset(torch.randint(0, 5, (40, 3), generator=torch.Generator().manual_seed(0)),
                   torch.randint(0, 5, (40,), generator=torch.Generator().manual_seed(1)))
    kwargs = dict(steps=60, batch_size=16, drop_last=False, lr=1e-2, progress=False)
    every = BatchedTransformer(cfg, [0, 1])
    ref = train_ensemble(every, data, data, eval_every=1, **kwargs)
    calls = []

    def window(history):                                         # dense over steps 23..31 only
        calls.append(history.steps[-1])
        return 23 <= history.steps[-1] <= 31

    coarse = BatchedTransformer(cfg, [0, 1])
    hist = train_ensemble(coarse, data, data, eval_every=10, dense_eval=window, snapshot_steps=[25], **kwargs)
    assert hist.steps == [0, 10, 20] + list(range(21, 33)) + [40, 50, 60]
    assert calls[:5] == [0, 10, 20, 25, 21]                     # dense at 25 (a snapshot): 21.. retraced from 20
    for name in ("train_loss", "train_acc", "test_loss", "test_acc"):
        assert getattr(hist, name) == [getattr(ref, name)[s] for s in hist.steps]
    assert hist.epoch_train_loss == ref.epoch_train_loss and sorted(hist.snapshots) == [25]
    for a, b in zip(every.parameters(), coarse.parameters()):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="checkpoint_every .* must be a multiple of eval_every"):
        train_ensemble(coarse, data, steps=1, eval_every=3, checkpoint_every=10, dense_eval=window, progress=False)


def test_near_crossing_rule_resolves_a_crossing_only_after_a_step_by_step_evaluation():
    rule = EvaluateNearCrossings(0.99, 0.5)
    h = _history(train=[[0.1, 0.4]], test=[[0.0, 0.0]], steps=[0, 10])
    assert not rule(h)
    h = _history(train=[[0.1, 0.4, 0.995]], test=[[0.0, 0.0, 0.0]], steps=[0, 10, 20])
    assert rule(h)                                              # crossed after a gap: retrace
    h = _history(train=[[0.1, 0.4] + [0.7] * 9 + [0.995]], test=[[0.0] * 12], steps=[0, 10] + list(range(11, 21)))
    assert not rule(h)                                          # crossed at a step after the step before: resolved
    h = _history(train=[[0.1, 0.4] + [0.7] * 9 + [0.995], [0.1] * 12], test=[[0.0] * 12, [0.0] * 11 + [0.6]],
                 steps=[0, 10] + list(range(11, 21)))
    assert EvaluateNearCrossings(0.99, 0.5)(h)                  # another model's test accuracy is near


def test_unknown_executor_is_a_clear_error():
    with pytest.raises(ValueError, match="executor must be"):
        run_sweep(grid([5], [1.0], [0]), TINY, executor="slurm")


def _run(p, w, seed, tau, t_train=10.0, steps_run=5000):
    """A hand-made RunResult: censored when tau is None."""
    return RunResult(p=p, weight_decay=w, seed=seed, batch_size=0, t_train=t_train,
                     t_test=None if tau is None else t_train + tau, tau=tau, censored=tau is None, steps_run=steps_run,
                     steps=[], train_acc=[], test_acc=[])


def test_run_both_sweeps_trains_a_shared_run_once_when_the_settings_agree(monkeypatch):
    import corekit.chapters.grokking_scaling_law as chapter
    calls = []

    def fake_run_sweep(specs, settings, **options):
        calls.append((list(specs), settings, options))
        return [_run(s.p, s.weight_decay, s.seed, 100.0) for s in specs]

    monkeypatch.setattr(chapter, "run_sweep", fake_run_sweep)
    p_specs, omega_specs = grid([5, 7], [1.0], [0]), grid([5], [1.0, 2.0], [0])   # (5, 1.0, 0) in both
    p_runs, omega_runs, results = run_both_sweeps(p_specs, omega_specs, TINY, TINY, device="cpu")
    assert len(calls) == 1 and calls[0][0] == [RunSpec(5, 1.0, 0), RunSpec(7, 1.0, 0), RunSpec(5, 2.0, 0)]
    assert calls[0][2] == {"device": "cpu"}
    assert [r.spec for r in p_runs] == p_specs and [r.spec for r in omega_runs] == omega_specs
    assert p_runs[0] is omega_runs[0] and len(results) == 3
    calls.clear()
    other = dataclasses.replace(TINY, max_steps=400)
    p_runs, omega_runs, results = run_both_sweeps(p_specs, omega_specs, TINY, other)
    assert [(c[0], c[1]) for c in calls] == [(p_specs, TINY), (omega_specs, other)]
    assert p_runs[0] is not omega_runs[0] and len(results) == 4


def test_exponent_intervals_and_log_law_r2_by_hand():
    x, tau = np.array([2.0, 4.0, 8.0]), np.array([50.0, 26.0, 12.0])
    assert power_law_exponent(x, tau) == pytest.approx(np.polyfit(np.log(x), np.log(tau), 1)[0], rel=1e-12)
    nan = no_fit_interval(30)
    assert np.isnan([nan.estimate, nan.low, nan.high]).all() and (nan.n_boot, nan.failed) == (30, 30)
    lone = exponent_interval({1.0: np.array([5.0]), 2.0: np.array([])}, 30)     # one grokked point: no fit
    assert np.isnan([lone.estimate, lone.low, lone.high]).all() and lone.failed == 30
    points = {1.0: np.array([100.0, 120.0]), 2.0: np.array([50.0, 55.0]), 4.0: np.array([24.0, 26.0])}
    gm = np.array([np.sqrt(100 * 120), np.sqrt(50 * 55), np.sqrt(24 * 26)])
    k = exponent_interval(points, 50)
    assert k.estimate == pytest.approx(np.polyfit(np.log([1, 2, 4]), np.log(gm), 1)[0], rel=1e-12)
    assert k.low <= k.estimate <= k.high and k.failed == 0
    p = np.array([11.0, 13.0, 17.0, 23.0])
    assert log_law_r2_inside(p, -300 * np.log1p(-7 / p)) == 1.0              # exact log law, p_c = 7 inside (0, 11)
    assert log_law_r2_inside(p, 1000 / p) is None                            # a pure 1/p law pins p_c at 0
    assert log_law_r2_inside(p[:1], p[:1]) is None                           # too few points: the fit refuses


def test_fit_sweeps_against_numpy_and_the_exact_log_law():
    omega_runs = [_run(31, w, s, 200 / w * f) for w in (1.0, 2.0, 4.0) for s, f in ((0, 0.9), (1, 1.1))]
    omega_runs.append(_run(31, 4.0, 2, None, t_train=100.0, steps_run=400))   # censored: 300 as a lower bound
    ps = (11, 13, 17, 23)
    p_runs = [_run(p, 1.0, s, float(-300 * np.log1p(-7 / p))) for p in ps for s in (0, 1)]
    f = fit_sweeps(omega_runs, p_runs, n_boot=20)
    assert list(f.omega_points) == [1.0, 2.0, 4.0] and f.omega_points[4.0].tolist() == pytest.approx([45.0, 55.0])
    gm = np.array([np.exp(np.log([180.0, 220.0]).mean()) / w for w in (1, 2, 4)])
    assert f.fits["ω"].params["k"] == pytest.approx(np.polyfit(np.log([1, 2, 4]), np.log(gm), 1)[0], rel=1e-12)
    assert f.exponents["ω"].estimate == pytest.approx(f.fits["ω"].params["k"], rel=1e-12)
    bound_gm = gm.copy()
    bound_gm[2] = np.exp(np.log([45.0, 55.0, 300.0]).mean())
    assert f.omega_k_bound == pytest.approx(np.polyfit(np.log([1, 2, 4]), np.log(bound_gm), 1)[0], rel=1e-12)
    assert f.log_fit.params["p_c"] == pytest.approx(7.0, rel=1e-4) and f.log_error is None
    assert f.p_c_interval.estimate == pytest.approx(7.0, rel=1e-4) and set(f.laws) >= {"aic_log", "aic_power"}
    two = fit_sweeps(omega_runs, p_runs[:4], n_boot=20)                        # two moduli: no log law
    assert two.log_fit is None and two.p_c_interval is None and two.laws is None and "p" in two.fits


def _result(p, seed, t_train, t_test):
    """A RunResult at modulus p (ω 1) that fitted its training pairs at t_train and its test pairs at t_test (None: censored)."""
    done = t_test is not None
    return RunResult(p=p, weight_decay=1.0, seed=seed, batch_size=0, t_train=t_train, t_test=t_test,
                     tau=t_test - t_train if done else None, censored=not done, steps_run=1000, steps=[0], train_acc=[0.0],
                     test_acc=[0.0])


def test_far_moduli_times_per_point_and_two_point_exponent_by_hand():
    assert far_moduli([31, 43, 61, 79, 89], 24.0) == [79.0, 89.0]          # 3 p_c = 72
    assert far_moduli([31, 79], float("nan")) == [] and far_moduli([31, 79], -1.0) == []
    runs = [_result(31, 0, 100, 900), _result(31, 1, 100, 500), _result(31, 2, 80, None),
            _result(61, 0, 200, 400), _result(61, 1, 200, 300)]
    rows = times_per_point(runs)
    assert [row["p"] for row in rows] == [31, 61] and rows[0]["grokked"] == 2 and rows[0]["runs"] == 3
    assert rows[0]["t_train"] == pytest.approx(100) and rows[0]["t_test"] == pytest.approx(np.sqrt(900 * 500))
    assert rows[0]["tau"] == pytest.approx(np.sqrt(800 * 400)) and rows[1]["tau"] == pytest.approx(np.sqrt(200 * 100))
    assert two_point_exponent(rows, [31, 61]) == pytest.approx(np.log(np.sqrt(200 * 100) / np.sqrt(800 * 400))
                                                               / np.log(61 / 31))
    assert two_point_exponent(times_per_point(runs[2:3] + runs[3:]), [31, 61]) is None   # p 31: none grokked
    with pytest.raises(ValueError, match="two moduli"):
        two_point_exponent(rows, [31])


# --------------------------------------------------------------------------------------------
# Claims on hand-made sweeps (no training): τ from a law, times a fixed factor per (point, seed)


def _wobble(x: float, seed: int, sigma: float) -> float:
    """A deterministic factor exp(σ sin(...)) per (point, seed): the seeds' scatter of a hand-made sweep."""
    return float(np.exp(sigma * np.sin(12.9898 * x + 78.233 * seed)))


def _log_law(p_c):
    return lambda p: float(-300 * np.log1p(-p_c / p))


#: Hand-made sweeps: the p sweep's τ(p) and moduli, the ω sweep's τ(ω) and weight decays, the scatter, the seeds.
SWEEPS = {
    "all pass": dict(p_tau=_log_law(20), ps=(21, 22, 23, 25, 28, 32, 40, 1000, 2000, 4000, 8000), sigma=0.1),
    "steep": dict(p_tau=lambda p: 1e6 * p ** -2.0, ps=(31, 37, 43, 53, 61, 67, 79, 89, 97, 101, 113), sigma=0.05),
    "shallow": dict(p_tau=lambda p: 1e4 * p ** -0.5, ps=(31, 37, 43, 53, 61), sigma=0.05),
    "noisy far moduli": dict(p_tau=_log_law(20), ps=(21, 22, 23, 25, 28, 32, 40, 80, 160, 320), sigma=0.5),
    "one far modulus": dict(p_tau=_log_law(20), ps=(21, 25, 30, 45, 70)),
    "two moduli": dict(p_tau=_log_law(20), ps=(21, 25)),
    "four moduli, power law": dict(p_tau=lambda p: 1e6 * p ** -1.5, ps=(31, 37, 43, 53), sigma=0.2),
    "noisy log law": dict(p_tau=_log_law(20), ps=(21, 25, 30, 70, 90, 110), sigma=1.0),
    "ω exponent −0.3": dict(p_tau=_log_law(20), ps=(21, 25, 30, 70, 90, 110), omega_tau=lambda w: 2000 * w ** -0.3),
    "ω within 1.4×": dict(p_tau=_log_law(20), ps=(21, 25, 30, 70, 90, 110), ws=(1.0, 1.2, 1.4)),
    "one seed, two ω": dict(p_tau=_log_law(20), ps=(21, 25, 30, 70, 90, 110), ws=(1.0, 2.0), seeds=1),
}


@functools.lru_cache(maxsize=None)
def _findings(name: str) -> Findings:
    """Return the Findings of the hand-made sweep ``name`` (fits over 30 resamples, 40 draws of each law)."""
    case = {"omega_tau": lambda w: 2000 / w, "ws": (1.0, 2.0, 4.0), "sigma": 0.2, "seeds": 4, **SWEEPS[name]}
    seeds = range(case["seeds"])
    omega_runs = [_run(31, w, s, case["omega_tau"](w) * _wobble(w, s, case["sigma"])) for w in case["ws"] for s in seeds]
    p_runs = [_run(p, 1.0, s, case["p_tau"](p) * _wobble(p, s, case["sigma"])) for p in case["ps"] for s in seeds]
    return Findings(fits=fit_sweeps(omega_runs, p_runs, n_boot=30), results=p_runs + omega_runs, p_runs=p_runs,
                    probe_runs=[r for r in p_runs if r.p in case["ps"][:2]], omega_p=31, sweep_weight_decay=1.0,
                    lr=3e-3, probe_lr=1e-3, probe_p_values=list(case["ps"][:2]), eval_every=2, n_boot=30, n_draws=40)


def _decided(findings: Findings) -> dict:
    """Return {id: claim} of ``claims(findings)``, checking the ids are the declared ones in order, with their kinds."""
    out = claims(findings)
    assert [c.id for c in out] == [spec.id for spec in CLAIMS]
    assert [c.kind for c in out] == [spec.kind for spec in CLAIMS]
    assert all((c.verdict == "reported") == (spec.bound is None) for c, spec in zip(out, CLAIMS))
    return {c.id: c for c in out}


def _verdict(findings: Findings, claim_id: str, verdict: str, *reason: str):
    """Assert claim ``claim_id`` of ``findings`` has ``verdict`` and a reason holding every ``reason`` text; return it."""
    claim = _decided(findings)[claim_id]
    assert claim.verdict == verdict, (claim.verdict, claim.reason)
    assert all(text in (claim.reason or "") for text in reason), claim.reason
    return claim


def _without_power_law_mimicry(findings: Findings) -> Findings:
    """Return ``findings`` with the p sweep's power law replaced by a shallow one (τ ∝ p^−0.5) the log law cannot fit."""
    shallow = scaling.power_law_fit([10.0, 100.0], [100.0, np.sqrt(10) * 10])
    return dataclasses.replace(findings, fits=dataclasses.replace(findings.fits, fits={**findings.fits.fits, "p": shallow}))


def test_every_tested_claim_passes_on_a_log_law_with_a_pole_and_far_moduli():
    """τ = −300 log(1 − 20/p) with moduli near p_c and ≥ 50 p_c, τ ∝ 1/ω: every tested claim passes against its nulls
    (the log law's R² once the power law through the moduli is one it cannot fit), and the figures are reported."""
    found = _decided(_without_power_law_mimicry(_findings("all pass")))
    assert {c.id: c.verdict for c in found.values() if c.verdict != "reported"} == {
        spec.id: "pass" for spec in CLAIMS if spec.bound is not None}
    assert found["omega_exponent"].measured == pytest.approx(-1, abs=0.02)
    assert found["collapse_omega"].nulls[1]["value"] == pytest.approx(4.0)      # τ without ω: ω·p spans 1–4
    assert found["collapse_p_far"].nulls[1]["value"] == pytest.approx(8.0)      # moduli 1000–8000
    assert found["log_law_r2"].nulls[0]["value"] is None                         # p_c pinned: no log-law fit
    assert found["log_law_p_c"].measured[0] == pytest.approx(20, rel=0.02)
    assert found["censored_runs"].measured == 0 and found["tau_resolution"].measured > 0
    assert found["aic_power_from_log_law"].measured == pytest.approx(1.0)


def test_the_log_law_fits_the_power_law_through_its_moduli_too_so_its_r2_is_uninformative():
    _verdict(_findings("all pass"), "log_law_r2", "uninformative", "a plain power law through the same moduli (no pole)")


def test_a_shallow_omega_law_fails_the_exponent_and_the_omega_collapse():
    found = _findings("ω exponent −0.3")
    _verdict(found, "omega_exponent", "fail", "does not satisfy = -1 ± 0.15", "at p = 31")
    _verdict(found, "collapse_omega", "fail", "does not satisfy ≤ 1.5", "(p 31, ω 4)")


def test_a_permutation_that_leaves_the_runs_in_place_makes_the_omega_claims_uninformative():
    """One run at each of two weight decays: the seeded permutation keeps them where they are, so the permuted null is
    the data and passes with them."""
    found = _findings("one seed, two ω")
    _verdict(found, "omega_exponent", "uninformative", "the same fit with τ permuted among the ω sweep's runs")
    _verdict(found, "collapse_omega", "uninformative", "τ permuted among the runs of the ω sweep")


def test_a_collapse_over_weight_decays_within_the_bound_is_uninformative():
    """ω from 1 to 1.4: τ that does not depend on ω at all spreads τ·ω·p by 1.4 ≤ 1.5, and passes the bound."""
    claim = _verdict(_findings("ω within 1.4×"), "collapse_omega", "uninformative",
                     "every point of the ω sweep given all its runs' τ")
    assert claim.nulls[1] == {"what": claim.nulls[1]["what"], "value": pytest.approx(1.4), "passes": True}


def test_the_p_exponent_is_undecided_without_a_log_law_or_three_far_moduli():
    _verdict(_findings("two moduli"), "p_exponent", "undecided", "no log law was fitted", "run: 21, 25")
    _verdict(_findings("one far modulus"), "p_exponent", "undecided", "only 1 of the moduli run", "reach 3 p_c")
    found = _findings("one far modulus")
    failed = dataclasses.replace(found, fits=dataclasses.replace(found.fits, log_fit=None, log_error="no convergence"))
    _verdict(failed, "p_exponent", "undecided", "the log law did not converge")


def test_the_p_exponent_is_undecided_when_too_few_far_moduli_grokked():
    found = _findings("all pass")
    far = [x for x in found.fits.p_points if x >= 1000]
    points = {x: (np.zeros_like(t) if x in far[1:] else t) for x, t in found.fits.p_points.items()}
    found = dataclasses.replace(found, fits=dataclasses.replace(found.fits, p_points=points))
    _verdict(found, "p_exponent", "undecided", "4 moduli reach 3 p_c", "fewer than two of them have a grokked run")


def test_a_steep_p_law_fails_the_p_exponent_and_its_collapse_is_uninformative():
    found = _findings("steep")
    _verdict(found, "p_exponent", "fail", "does not satisfy interval contains -1")
    _verdict(found, "collapse_p_far", "uninformative", "every point of the moduli ≥ 3 p_c given all its runs' τ")


def test_noisy_far_moduli_make_the_p_exponent_uninformative():
    _verdict(_findings("noisy far moduli"), "p_exponent", "uninformative",
             "the same fit with τ permuted among the runs of those moduli")


def test_the_far_collapse_is_undecided_with_fewer_than_two_far_moduli():
    _verdict(_findings("one far modulus"), "collapse_p_far", "undecided", "fewer than two points in the moduli ≥ 3 p_c")


def test_the_log_law_fails_on_a_shallow_power_law_and_is_undecided_on_two_moduli():
    assert _verdict(_findings("shallow"), "log_law_r2", "fail", "Fails").measured is None     # p_c pinned at 0
    _verdict(_findings("two moduli"), "log_law_r2", "undecided", "only 2 moduli have a grokked run")


def test_the_comparison_of_the_laws_fails_passes_without_power_or_cannot_reject_the_log_law():
    _verdict(_findings("steep"), "log_law_vs_power_law_aic", "fail", "does not satisfy ≤ 0", "the comparison's power")
    _verdict(_findings("noisy log law"), "log_law_vs_power_law_aic", "uninformative",
             "5th percentile over 40 data sets drawn from the fitted power law")
    claim = _verdict(_findings("four moduli, power law"), "log_law_vs_power_law_aic", "undecided",
                     "data drawn from the fitted log law itself give a difference of at least")
    assert claim.measured > 0
    _verdict(_findings("two moduli"), "log_law_vs_power_law_aic", "undecided", "a law of two parameters fits two points")


def test_a_causal_and_an_unmasked_one_layer_block_compute_the_same_last_position_and_its_gradients():
    """03's paper profile is causal (the authors' grok_sweep.py passes a causal src_mask); read and trained at the
    last position, one layer computes the same function either way, by autograd and by corekit.postln alike."""
    from corekit import postln
    from corekit.train import losses
    settings = {causal: dataclasses.replace(TINY, model=dataclasses.replace(
        TINY.model, norm="post", dropout=0.1, causal=causal, qkv_bias=True, init="torch"), equals_token=False)
        for causal in (True, False)}
    models = {c: shard_problem(grid([7], [1.0], [0, 1]), s, device="cpu") for c, s in settings.items()}
    (masked, train, _), (unmasked, _, _) = models[True], models[False]
    assert masked.config.causal and not unmasked.config.causal
    unmasked.load_state_dict(masked.state_dict())
    for m in (masked, unmasked):
        m.eval()
    torch.testing.assert_close(masked(train.x, last=1), unmasked(train.x, last=1), rtol=1e-6, atol=1e-7)
    masks = masked.dropout_state()                         # every forward below draws the same dropout masks
    grads = {}
    for name, m in (("masked", masked), ("unmasked", unmasked)):
        m.train()
        for way in ("autograd", "postln"):
            m.load_dropout_state(masks)
            m.zero_grad(set_to_none=False)
            if way == "autograd":
                losses(m(train.x, last=1), train.y).sum().backward()
            else:
                postln.loss_and_grads(m, train.x, train.y)
            grads[name, way] = {k: v.grad.clone() for k, v in m.named_parameters()}
    for way in ("autograd", "postln"):
        for k, g in grads["masked", way].items():
            torch.testing.assert_close(grads["unmasked", way][k], g, rtol=1e-5, atol=1e-6, msg=f"{way} {k}")
    for k in grads["masked", "autograd"]:                   # and the two ways agree with each other
        torch.testing.assert_close(grads["masked", "postln"][k], grads["masked", "autograd"][k], rtol=1e-4, atol=1e-5)


def test_a_finished_shards_record_is_re_read_instead_of_trained_and_only_for_its_own_key(tmp_path, monkeypatch):
    from corekit import shard_records
    from corekit.chapters import grokking_scaling_law as chapter
    specs = grid([5], [0.5, 2.0], [0, 1])
    trained = chapter.run_shard(specs, TINY, "cpu", str(tmp_path / "ckpt"), progress=False, record_to=str(tmp_path))
    (record,) = tmp_path.glob("p5_b0_*.json")
    saved = json.loads(record.read_text())
    assert saved["runtime_s"] > 0 and saved["segments"] == 1 and saved["run"]["torch"] == torch.__version__

    def no_training(*args, **kwargs):
        raise AssertionError("a shard with a record was trained again")
    monkeypatch.setattr(chapter, "train_ensemble", no_training)
    again = run_sweep(specs, TINY, device="cpu", progress=False, records=str(tmp_path))
    assert _records(again) == _records(trained)
    other = dataclasses.replace(TINY, lr=2e-2)                              # another key: not this record
    assert chapter.read_records([specs], other, str(tmp_path)) == {}
    with pytest.raises(FileExistsError, match="not this shard's record"):
        shard_records.write(tmp_path, record.stem, "another-key", {}, runtime_s=1.0)


def test_a_runs_curves_keep_their_crossings_when_thinned():
    from corekit.chapters.grokking_scaling_law import _thin
    steps = list(range(0, 5000))
    curve = [float(s >= 3217) for s in steps]
    kept, (thin,) = _thin(steps, [curve], (3217, None), n=50)
    assert len(kept) <= 52 and kept[0] == 0 and kept[-1] == 4999 and {3216, 3217} <= set(kept)
    assert thin[kept.index(3217)] == 1.0 and thin[kept.index(3216)] == 0.0
