"""A checkpoint is resumed only by the run that wrote it: everything that shapes the saved state is in its key."""
import warnings

import pytest
import torch

from corekit.models import BatchedTransformer, TransformerConfig
from corekit.train import CHECKPOINT_FORMAT, TrainOptions, train_ensemble

CFG = TransformerConfig(vocab=5, n_ctx=6, d_model=16, n_heads=2, d_mlp=32, dropout=0.1)


def _data(n=64, seed=0):
    from corekit.train import Dataset
    gen = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 5, (n, 6), generator=gen)
    return Dataset(x, x.cumsum(1) % 5)


def _train(tmp_path, steps, **kwargs):
    kw = dict(batch_size=16, lr=3e-3, eval_every=5, checkpoint_every=10, progress=False, checkpoint_dir=tmp_path)
    return train_ensemble(BatchedTransformer(CFG, seeds=[0, 1]), _data(), _data(seed=1), steps=steps, **{**kw, **kwargs})


@pytest.mark.parametrize("change", [{"snapshot_steps": [5, 10]}, {"eval_steps": [3]}, {"eval_train_size": 8},
                                    {"eval_every": 10}])
def test_a_run_with_another_schedule_trains_over_the_checkpoint_instead_of_resuming_it(tmp_path, change):
    _train(tmp_path, 20, snapshot_steps=[10, 20])                      # another run's checkpoint at step 20
    with pytest.warns(UserWarning, match="another run's"):
        hist = _train(tmp_path, 30, **change)                          # before: resumed, then KeyError / wrong curves
    fresh = _train(tmp_path / "fresh", 30, **change)
    assert hist.steps == fresh.steps and hist.test_loss == fresh.test_loss
    assert sorted(hist.snapshots) == sorted(fresh.snapshots)


def test_the_same_run_resumes_and_a_longer_budget_continues_it(tmp_path):
    whole = _train(tmp_path / "whole", 30, snapshot_steps=[10, 25])
    _train(tmp_path, 20, snapshot_steps=[10, 25])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resumed = _train(tmp_path, 30, snapshot_steps=[10, 25])
    assert set(resumed.snapshots) == {10, 25}
    for step in (10, 25):
        for name, value in whole.snapshots[step].items():
            assert torch.equal(resumed.snapshots[step][name], value), (step, name)


def test_another_test_set_is_another_run(tmp_path):
    train_ensemble(BatchedTransformer(CFG, seeds=[0]), _data(), _data(seed=1), steps=10, checkpoint_dir=tmp_path,
                   progress=False)
    with pytest.warns(UserWarning, match="another run's"):
        train_ensemble(BatchedTransformer(CFG, seeds=[0]), _data(), _data(seed=2), steps=10, checkpoint_dir=tmp_path,
                       progress=False)


def test_a_checkpoint_of_an_older_format_or_with_tensors_that_do_not_fit_is_named_and_retrained(tmp_path):
    _train(tmp_path, 10)
    state = torch.load(tmp_path / "last.pt", weights_only=True)
    torch.save({**state, "format": CHECKPOINT_FORMAT - 1}, tmp_path / "last.pt")
    with pytest.warns(UserWarning, match="unreadable .*format"):
        old = _train(tmp_path, 20)
    bad = {**state, "model": {k: v[:1] for k, v in state["model"].items()}}           # the key matches, the shapes don't
    torch.save(bad, tmp_path / "last.pt")
    with pytest.warns(UserWarning, match="unreadable"):
        broken = _train(tmp_path, 20)
    fresh = _train(tmp_path / "fresh", 20)
    assert old.test_loss == fresh.test_loss == broken.test_loss


def test_options_as_a_dataclass_or_as_keywords_train_the_same(tmp_path):
    kw = dict(steps=12, batch_size=16, lr=3e-3, eval_every=4, progress=False)
    a = train_ensemble(BatchedTransformer(CFG, seeds=[0]), _data(), _data(seed=1), **kw)
    b = train_ensemble(BatchedTransformer(CFG, seeds=[0]), _data(), _data(seed=1), TrainOptions(**kw))
    assert a.test_loss == b.test_loss
    with pytest.raises(TypeError, match="not both"):
        train_ensemble(BatchedTransformer(CFG, seeds=[0]), _data(), None, TrainOptions(**kw), lr=1e-3)
