"""The quadratic MLP of the eNTK chapter, its full-batch MSE trainer, and the curve helpers."""
import math

import numpy as np
import pytest
import torch

from corekit.curves import first_step_reaching, grid_spacing, grokking_step, moving_average, snapshot_schedule, steepest_rise
from corekit.models import BatchedQuadraticMLP
from corekit.tasks.modular import modular_addition
from corekit.train import train_mse


def test_forward_is_the_papers_formula_and_seeds_are_independent_of_the_ensemble():
    a, b = BatchedQuadraticMLP(10, 16, 5, seeds=[3, 9]), BatchedQuadraticMLP(10, 16, 5, seeds=[9])
    torch.testing.assert_close(a.p("W_1")[1], b.p("W_1")[0])
    x = torch.randn(4, 10)
    W1, W2 = a.p("W_1")[0], a.p("W_2")[0]
    torch.testing.assert_close(a(x)[0], ((x @ W1 / math.sqrt(10)) ** 2) @ W2 / 16)
    assert float(W1.std()) == pytest.approx(1.0, abs=0.15)                  # N(0, 1) initialisation


def test_train_mse_follows_torch_adamw_on_a_lone_model():
    task = modular_addition(5, 0.6, seed=0)
    x, y = task.one_hot().double(), task.labels
    model = BatchedQuadraticMLP(10, 8, 5, seeds=[1]).double()
    W1 = model.p("W_1")[0].detach().clone().requires_grad_()
    W2 = model.p("W_2")[0].detach().clone().requires_grad_()
    opt = torch.optim.AdamW([W1, W2], lr=0.01, weight_decay=0.1)
    xt, target = x[task.train_idx], torch.nn.functional.one_hot(y[task.train_idx], 5).double()
    for _ in range(5):
        loss = ((((xt @ W1 / math.sqrt(10)) ** 2) @ W2 / 8 - target) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    history = train_mse(model, x[task.train_idx], y[task.train_idx], x[task.test_idx], y[task.test_idx], steps=5,
                        lr=0.01, weight_decay=0.1, eval_every=2, snapshot_steps=[0, 3], progress=False)
    torch.testing.assert_close(model.p("W_1")[0], W1.detach())
    torch.testing.assert_close(model.p("W_2")[0], W2.detach())
    assert history.steps == [0, 2, 3, 4, 5]
    assert history.curve("test_acc").shape == (5, 1)
    assert sorted(history.snapshots) == [0, 3]


@pytest.mark.parametrize("steps, eval_every", [(7, 1), (9, 4), (0, 1)])
def test_train_mse_curves_are_evaluations_of_the_saved_parameters(steps, eval_every):
    """Training metrics come from the next epoch's forward pass: the same numbers as evaluating each snapshot."""
    task = modular_addition(7, 0.5, seed=0)
    x, y = task.one_hot(), task.labels
    model = BatchedQuadraticMLP(14, 16, 7, seeds=[0, 3])
    evaluated = sorted({0, steps, *range(eval_every, steps + 1, eval_every)})
    history = train_mse(model, x[task.train_idx], y[task.train_idx], x[task.test_idx], y[task.test_idx], steps=steps,
                        lr=0.01, weight_decay=[0.1, 1.0], eval_every=eval_every, snapshot_steps=evaluated,
                        progress=False)
    assert history.steps == evaluated
    for i, step in enumerate(history.steps):
        lone = BatchedQuadraticMLP(14, 16, 7, seeds=[0, 3])
        lone.load_state_dict(history.snapshots[step])
        with torch.no_grad():
            for split, idx in (("train", task.train_idx), ("test", task.test_idx)):
                out = lone(x[idx])
                target = torch.nn.functional.one_hot(y[idx], 7).float()
                assert getattr(history, f"{split}_loss")[i] == (out - target).square().mean(dim=(1, 2)).tolist()
                assert getattr(history, f"{split}_acc")[i] == (out.argmax(-1) == y[idx]).float().mean(-1).tolist()


def test_train_mse_rejects_mismatched_inputs():
    model = BatchedQuadraticMLP(4, 3, 2, seeds=[0])
    with pytest.raises(ValueError, match="x must be"):
        train_mse(model, torch.zeros(5, 4), torch.zeros(4, dtype=torch.long), steps=1, progress=False)
    with pytest.raises(ValueError, match="width must be a positive integer"):
        BatchedQuadraticMLP(4, 0, 2, seeds=[0])


def test_curve_helpers():
    steps = np.array([0, 10, 20, 40, 80])
    curve = np.array([0.0, 0.0, 0.1, 0.9, 1.0])
    step, rate = steepest_rise(steps, curve)
    assert step in (20, 40) and rate > 0
    assert first_step_reaching(steps, curve, 0.5) == 40
    assert first_step_reaching(steps, curve, 2.0) is None
    np.testing.assert_allclose(moving_average([0, 3, 6, 9], 3), [1, 3, 6, 8])
    with pytest.raises(ValueError, match="window must be a positive odd integer"):
        moving_average([1, 2], 2)


def test_grokking_step_is_the_first_step_at_the_threshold_and_differs_from_the_steepest_rise():
    steps = [0, 100, 200, 300, 400, 500]
    accuracy = [0.01, 0.02, 0.60, 0.985, 0.99, 1.0]          # steepest rise at 100–200, grokked at 400
    assert grokking_step(steps, accuracy) == 400
    assert grokking_step(steps, accuracy, threshold=0.5) == 200
    assert grokking_step(steps, [0.1] * 6) is None
    assert steepest_rise(steps, accuracy)[0] != grokking_step(steps, accuracy)
    ensemble = np.array([accuracy, [0.01, 0.5, 0.9, 0.99, 0.995, 1.0]])  # an ensemble groks with its slowest model
    assert grokking_step(steps, ensemble.min(0)) == 400


def test_snapshot_schedule_is_log_spaced_plus_dense_on_the_candidates():
    candidates = list(range(0, 1001, 10))
    got = snapshot_schedule(candidates, n_log=5, dense=(400, 600), n_dense=11)
    # geomspace(10, 1000, 5) = 10, 31.6, 100, 316.2, 1000 → nearest candidates 10, 30, 100, 320, 1000
    assert got == sorted({0, 1000, 10, 30, 100, 320, *range(400, 601, 20)})
    assert snapshot_schedule([0, 5, 7], n_log=0, dense=(6, 6), n_dense=1) == [0, 5, 7]
    with pytest.raises(ValueError, match="dense must be a range"):
        snapshot_schedule(candidates, 3, (600, 400), 3)


def test_grid_spacing_is_the_larger_neighbouring_gap():
    steps = [0, 10, 20, 40, 80]
    assert grid_spacing(steps, 38) == 40                                    # nearest 40: gaps 20 and 40
    assert grid_spacing(steps, 0) == 10
    assert grid_spacing(steps, 100) == 40


def test_largest_drop_is_the_first_of_the_largest_decreases():
    from corekit.curves import largest_drop
    assert largest_drop([5, 5, 3, 4, 2, 2]) == 2          # drops 2 (1→2) and 2 (3→4): the first wins
    assert largest_drop([1, 2, 3, 0]) == 3
    curve = np.random.default_rng(0).normal(size=40)
    assert largest_drop(curve) == max(range(1, 40), key=lambda j: (curve[j - 1] - curve[j], -j))
    with pytest.raises(ValueError):
        largest_drop([1.0])
