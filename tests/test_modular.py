"""The modular-addition task: its datasets are the split's pairs, and a modulus is checked once where it enters."""
import pytest
import torch

from corekit.primes import is_prime, nearest_primes
from corekit.tasks.modular import check_modulus, modular_addition


@pytest.mark.parametrize("split", ["torch", "python", "numpy"])
@pytest.mark.parametrize("equals", [True, False])
def test_datasets_are_the_split_pairs_with_their_sums(split, equals):
    task = modular_addition(7, 0.6, seed=3, split=split)
    train, test = task.datasets(equals=equals)
    assert train.x.shape == (len(task.train_idx), 3 if equals else 2) and test.y.shape == (len(task.test_idx), 1)
    for data in (train, test):
        a, b = data.x[:, 0], data.x[:, 1]
        assert torch.equal(data.y[:, 0], (a + b) % 7)
        if equals:
            assert (data.x[:, 2] == 7).all()
    pairs = {tuple(r) for r in torch.cat([train.x, test.x])[:, :2].tolist()}
    assert len(pairs) == 49                                    # every pair exactly once across the two sets


def test_a_composite_modulus_is_refused_naming_the_nearest_primes():
    with pytest.raises(ValueError, match=r"got 25; nearest primes: 23, 29"):
        check_modulus(25)
    assert [n for n in range(30) if is_prime(n)] == [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]
    assert nearest_primes(2) == "3"
