"""corekit.number_axis on a tiny random transformer: the sufficient rank against the model's own AUROC, the
position-mean ablations against a hand-built edit, and the generation counts."""
from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
from test_llm import tiny  # noqa: E402

from corekit import lm as llm  # noqa: E402
from corekit import stats
from corekit.number_axis import Generation, find_axis, measure, sufficient_rank, sweep  # noqa: E402
from corekit.tasks import agreement  # noqa: E402
from corekit.tasks.agreement import margin_head  # noqa: E402


@pytest.fixture(scope="module")
def measured():
    train, test = agreement.split(24, 24, seed=3)
    return measure(tiny("llama"), "tiny", train, test, batch_size=8)


def test_keep_only_at_full_rank_recovers_the_model_and_fixes_the_sufficient_rank(measured):
    axis = find_axis(measured)
    D = measured.lm.d_model
    rc = sufficient_rank(measured, axis, 2, [1, 4, D])
    assert rc.auroc[-1] == pytest.approx(measured.base_auroc, abs=1e-9)   # keep-only of everything is the identity
    first = next(r for r, a in zip(rc.ranks, rc.auroc) if a >= measured.base_auroc - 0.02)
    assert rc.sufficient == first
    with pytest.raises(ValueError, match="ranks must lie in"):
        sufficient_rank(measured, axis, 2, [0, 1])


def test_from_subject_flip_reflects_each_position_about_its_own_training_mean(measured):
    """The sweep's held-out flip margins equal a hand-written hook, prompt by prompt: h_t − 2 q qᵀ(h_t − μ_class(t))
    from the subject on, with the class means averaged by hand from residuals() of the training prompts."""
    axis, layer = find_axis(measured), 2
    s = sweep(measured, axis, [layer], "from_subject")
    train = measured.train.batch
    n = llm.n_offsets(train)
    h = llm.residuals(measured.lm, train, [layer])[0].double()
    classes = llm.position_classes(train, n)
    means = torch.stack([h[classes == c].mean(0) for c in range(n + 1)])
    torch.testing.assert_close(s.centres[layer], means, atol=1e-5, rtol=1e-5)
    q = axis.q[layer, :, 0]
    want = []
    for prompt in measured.test.batch.prompts:
        sentence = next(t for t in agreement.split(24, 24, seed=3)[1] if t.prompt == prompt)
        one = llm.encode(measured.lm, [prompt], [sentence.subject_char])
        cls = llm.position_classes(one, n)[0]

        def edit(x, cls=cls):
            out = x.clone()
            for t, c in enumerate(cls.tolist()):
                if c >= 0:
                    out[0, t] = x[0, t] - 2 * q.to(x.dtype) * (q.to(x.dtype) @ (x[0, t] - means[c].to(x.dtype)))
            return out
        with llm.residual_hooks(measured.lm, write={layer: edit}):
            want.append(llm.readouts(measured.lm, one, margin_head(measured.lm))[0])
    torch.testing.assert_close(s.margins["flip"][0], torch.stack(want), atol=1e-4, rtol=1e-4)


def test_generation_rate_and_interval():
    gen = Generation("greedy", 1, [], [], [], [], right=120, switched=100)
    assert gen.rate == pytest.approx(100 / 120)
    assert gen.interval == stats.wilson_interval(100, 120)
    assert np.isnan(Generation("greedy", 1, [], [], [], [], right=0, switched=0).rate)
