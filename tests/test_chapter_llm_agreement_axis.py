"""corekit.chapters.llm_agreement_axis on a tiny random transformer: the sufficient rank against the model's own AUROC, the
position-mean ablations against a hand-built edit, the generation counts, the authors' last-layer recipe against a
hand-computed core, and the authors' steering against a step-by-step hook."""
from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
from test_llm import tiny  # noqa: E402

from corekit import lm as llm  # noqa: E402
from corekit import stats
from corekit.chapters.llm_agreement_axis import Generation, newest_position_generation, sufficient_rank  # noqa: E402
from corekit.number_axis import find_axis, measure, sweep  # noqa: E402
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


class _NoVerbs:
    """A stand-in for spaCy that finds no verb (the steering test compares tokens, not verb numbers)."""

    def __call__(self, text):
        return []


def test_post_norm_recipe_takes_the_last_axis_from_the_final_norm_output(measured):
    """With the authors' last-layer recipe the axis at L is the rank-1 core of (Cov x, u uᵀ) for x the final RMS norm's
    output, computed here by hand in float64: a linear margin head has the constant gradient u, so q ∝ Cov(x) u;
    every other layer is the block-output recipe's."""
    ours, theirs = find_axis(measured), find_axis(measured, last_layer="post_norm")
    L = measured.n_layers
    torch.testing.assert_close(theirs.q[:L], ours.q[:L])
    norm = measured.lm.model.base_model.norm
    h = measured.train.last.h[L].double()
    x = h / torch.sqrt((h**2).mean(-1, keepdim=True) + norm.variance_epsilon) * norm.weight.double()
    head = margin_head(measured.lm)
    u = (head.sign.double()[:, None] * head.weight.double()).sum(0)
    xc = x - x.mean(0)
    direction = (xc.T @ xc) @ u
    cos = torch.nn.functional.cosine_similarity(theirs.q[L, :, 0].double(), direction, dim=0)
    assert abs(float(cos)) == pytest.approx(1.0, abs=1e-6)
    torch.testing.assert_close(theirs.core.mean[L], x.mean(0), atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="last_layer must be one of"):
        find_axis(measured, last_layer="pre_norm")


def test_newest_position_generation_matches_a_step_by_step_hook(measured):
    """The batched steering equals, prompt by prompt, the authors' algorithm written out with a forward hook on the block:
    at every step m0 unedited, the slope from a probe at s = 0.2, s = clip((∓1 − m0)/slope, ±50), the newest position
    reflected with strength s, one token drawn from that prompt's own generator (seed + i)."""
    lm, axis, layer = measured.lm, find_axis(measured), 2
    test = agreement.split(24, 24, seed=3)[1]
    prompts = [next(t for t in test if t.prompt == p) for p in measured.test.batch.prompts[:5]]
    plain = Generation("sampled", layer, [""] * 5, [""] * 5, [s.label for s in prompts], [None] * 5, 5, 0)
    q, mu = axis.q[layer, :, 0].double(), axis.core.mean[layer].double()
    ids = margin_head(lm).ids

    def copula(logits):
        return float(torch.logsumexp(logits[ids[:2]], 0) - torch.logsumexp(logits[ids[2:]], 0))

    want = []
    for i, s in enumerate(prompts):
        tokens = lm.tokenizer(s.prompt, return_tensors="pt")["input_ids"]
        g = torch.Generator().manual_seed(7 + i)
        strength = {"s": 0.0}

        def hook(module, args, output):
            h = output[0] if isinstance(output, tuple) else output
            h = h.clone()
            x = h[0, -1].double() - mu
            h[0, -1] = (h[0, -1].double() - 2 * strength["s"] * (x @ q) * q).to(h.dtype)
            return (h,) + tuple(output[1:]) if isinstance(output, tuple) else h

        handle = lm.blocks[layer - 1].register_forward_hook(hook)
        try:
            out = []
            for _ in range(3):
                def logits(sv):
                    strength["s"] = sv
                    with torch.no_grad():
                        return lm.model(input_ids=tokens).logits[0, -1].double()
                m0 = copula(logits(0.0))
                slope = (copula(logits(0.2)) - m0) / 0.2
                sv = float(np.clip(((-1.0 if m0 > 0 else 1.0) - m0) / slope, -50, 50)) if abs(slope) > 1e-8 else 0.0
                nxt = llm.sample_tokens(logits(sv)[None], [g])
                out.append(int(nxt[0]))
                tokens = torch.cat([tokens, nxt[None]], 1)
        finally:
            handle.remove()
        want.append(out)
    got = newest_position_generation(measured, axis, layer, prompts, 3, _NoVerbs(), plain, seed=7)
    assert got.flipped == [lm.tokenizer.decode(w, skip_special_tokens=True) for w in want]
    assert got.mode == "newest_position" and got.right == sum(n == s.label for n, s in zip(plain.number_plain, prompts))
    with pytest.raises(ValueError, match="plain must be the sampled Generation"):
        newest_position_generation(measured, axis, layer, prompts[:2], 3, _NoVerbs(), plain)


def test_random_directions_are_seeded_unit_vectors_spread_evenly_over_the_sphere():
    from corekit.chapters.llm_agreement_axis import random_directions
    R = random_directions(5, 4000, seed=1)
    assert R.shape == (4000, 5) and R.dtype == torch.float64
    torch.testing.assert_close(R.norm(dim=1), torch.ones(4000, dtype=torch.float64))
    torch.testing.assert_close(random_directions(5, 4000, seed=1), R)
    np.testing.assert_allclose((R.T @ R / 4000).numpy(), np.eye(5) / 5, atol=0.02)   # E[r rᵀ] = I / d on the sphere


def test_random_null_against_hand_computed_edits_and_scikit_learn(measured):
    """At the last position, each random direction's flip margins equal a hand-written edit h − 2 r rᵀ(h − μ) applied at
    the layer; its coordinate AUROC and margin R² equal scikit-learn's on rᵀ(h − μ) signed on the training prompts."""
    from sklearn.linear_model import LinearRegression
    from sklearn.metrics import r2_score, roc_auc_score

    from corekit.chapters.llm_agreement_axis import random_null
    axis = find_axis(measured)
    s = sweep(measured, axis, [2], "last")
    null = random_null(measured, axis, s, k=3, seed=5)
    head, mu = margin_head(measured.lm), axis.core.mean[2].double()
    y_train, y_test = measured.train.y, measured.test.y
    for j, r in enumerate(null.directions.double()):
        r = r.to(mu)

        def edit(h, r=r):
            x = h.double()
            return (x - 2 * ((x - mu) @ r)[..., None] * r).to(h.dtype)
        flipped = llm.last_token(measured.test.prefix, head, layer=2, edit=edit).value
        assert null.auroc["flip"][j] == pytest.approx(roc_auc_score(y_test, flipped.cpu().numpy()), abs=1e-9)
        assert null.flip_rate[j] == pytest.approx(stats.flip_rate(measured.test.last.value, flipped, y_test)[0])
        z_tr = ((measured.train.last.h[2].double() - mu) @ r).cpu().numpy()
        z_te = ((measured.test.last.h[2].double() - mu) @ r).cpu().numpy()
        sign = 1.0 if roc_auc_score(y_train, z_tr) >= 0.5 else -1.0
        assert null.coordinate_auroc[j] == pytest.approx(roc_auc_score(y_test, sign * z_te), abs=1e-9)
        fit = LinearRegression().fit(z_tr[:, None], measured.train.last.value.cpu().numpy())
        assert null.margin_r2[j] == pytest.approx(
            r2_score(measured.test.last.value.cpu().numpy(), fit.predict(z_te[:, None])), abs=1e-6)


def test_sufficient_rank_with_a_full_basis_is_the_identity(measured):
    axis = find_axis(measured)
    D = measured.lm.d_model
    basis = torch.linalg.qr(torch.randn(D, D, dtype=torch.float64, generator=torch.Generator().manual_seed(0)))[0]
    rc = sufficient_rank(measured, axis, 2, [1, D], basis=basis)
    assert rc.auroc[-1] == pytest.approx(measured.base_auroc, abs=1e-9)
    with pytest.raises(ValueError, match="basis must be"):
        sufficient_rank(measured, axis, 2, [1, D], basis=basis[:, :2])


def test_authors_layer_and_largest_difference_by_hand():
    from corekit.chapters.llm_agreement_axis import authors_layer, largest_difference
    assert authors_layer(np.array([0.0, 0.5, 0.2, 0.2, 0.3])) == 2        # layer 0 is never edited; ties: the first
    auroc = {"keep_only": np.array([0.9, 0.8, 0.7]), "remove": np.array([0.5, 0.4, 0.3]),
             "flip": np.array([0.2, 0.1, 0.0])}
    rows = [{"layer": 1, "keep_only": 0.81, "remove": 0.4, "flip": 0.1},
            {"layer": 2, "keep_only": 0.7, "remove": 0.35, "flip": 0.0}]
    assert largest_difference(auroc, rows) == pytest.approx(0.05)           # |0.3 − 0.35| at layer 2


def test_authors_comparison_against_sweeps_and_scikit_learn(measured):
    """Each recipe's layer is the lowest flip AUROC of layers 1 … L (a loop), the block-output recipe's last layer its
    own sweep; max_diff is the largest offset planted in a record; the well-formed base AUROC is scikit-learn's."""
    from sklearn.metrics import roc_auc_score

    from corekit.chapters.llm_agreement_axis import authors_comparison
    L = measured.n_layers
    pn = sweep(measured, find_axis(measured, last_layer="post_norm"), range(L + 1), "last")
    bo = sweep(measured, find_axis(measured), [L], "last")
    offsets = {"keep_only": 0.01, "remove": -0.03, "flip": 0.02}
    rows = [{"layer": k, **{kind: float(pn.auroc[kind][k]) + (offsets[kind] if k == 1 else 0.0) for kind in offsets}}
            for k in range(L + 1)]
    well_formed = [i % 3 != 0 for i in range(len(measured.test.y))]
    c = authors_comparison(measured, {"layer_sweep": rows}, well_formed)
    assert c.max_diff == pytest.approx(0.03, abs=1e-12)
    for recipe, flip in (("post_norm", list(pn.auroc["flip"])), ("block_output", list(pn.auroc["flip"][:L]) +
                                                                 [bo.auroc["flip"][0]])):
        best = min(range(1, L + 1), key=lambda k: (flip[k], k))
        assert c.layers[recipe] == best
        torch.testing.assert_close(c.z_test[recipe], c.axes[recipe].z_test[best])
    assert c.layer == c.layers["post_norm"] and c.at_layer["flip"] == float(pn.auroc["flip"][c.layer])
    assert c.last["block_output"]["keep_only"] == float(bo.auroc["keep_only"][0])
    y, value = measured.test.y, measured.test.last.value.cpu().numpy()
    mask = np.array(well_formed)
    assert c.base_well_formed == pytest.approx(roc_auc_score(y[mask], value[mask]), abs=1e-12)
    assert c.n_well_formed == mask.sum() and c.base == measured.base_auroc
    assert c.core_auroc["post_norm"] == pytest.approx(
        roc_auc_score(y, c.axes["post_norm"].z_test[L].cpu().numpy()), abs=1e-12)


def test_recipe_spearman_and_cross_model_nulls_against_scipy():
    from types import SimpleNamespace

    from scipy.stats import spearmanr

    from corekit.chapters.llm_agreement_axis import LAST_LAYER_RECIPES, cross_model_nulls, recipe_spearman
    g = torch.Generator().manual_seed(0)
    z = {name: torch.randn(12, generator=g, dtype=torch.float64) for name in "abc"}
    a = SimpleNamespace(z_test={r: z["a"] for r in LAST_LAYER_RECIPES})
    b = SimpleNamespace(z_test={"block_output": z["b"], "post_norm": z["c"]})
    rho = recipe_spearman(a, b)
    assert rho["block_output"] == pytest.approx(spearmanr(z["a"], z["b"])[0])
    assert rho["post_norm"] == pytest.approx(spearmanr(z["a"], z["c"])[0])
    random_z = {name: torch.randn(4, 12, generator=g, dtype=torch.float64) for name in "abc"}
    got = cross_model_nulls(["a", "b", "c"], z, random_z, n_boot=50, seed=3)
    rng = np.random.default_rng(3)
    assert list(got) == ["a ~ b", "a ~ c", "b ~ c"]
    for pair in got:                                                       # one generator, pair after pair
        x, y = (z[n].numpy() for n in pair.split(" ~ "))
        shuffled = [spearmanr(x, y[rng.permutation(12)])[0] for _ in range(50)]
        assert got[pair]["shuffled"] == pytest.approx(np.percentile(shuffled, 99))
        ra, rb = (random_z[n].numpy() for n in pair.split(" ~ "))
        assert got[pair]["random"] == pytest.approx(max(spearmanr(u, v)[0] for u, v in zip(ra, rb)))


def test_model_nulls_draws_each_null_from_its_own_seed(measured):
    """The random directions are those of seeds s (both scopes), s + 1 (one per layer), s + 2 (the basis: a full one
    keeps the model's AUROC) and s + 3 (generation); the steering is scored against the given plain run."""
    from corekit.chapters.llm_agreement_axis import flip_generation, model_nulls, random_directions
    axis, D = find_axis(measured), measured.lm.d_model
    last, subject = sweep(measured, axis, [2], "last"), sweep(measured, axis, [2], "from_subject")
    test = agreement.split(24, 24, seed=3)[1]
    prompts = [next(t for t in test if t.prompt == p) for p in measured.test.batch.prompts[:2]]
    plain = Generation("sampled", 2, ["", ""], ["", ""], [s.label for s in prompts], [None] * 2, 2, 0)
    n = model_nulls(measured, axis, last, subject, prompts, 2, _NoVerbs(), plain, [1, D], n_random=2,
                    n_random_subject=1, seed=4, generation_seed=0)
    torch.testing.assert_close(n.last.directions, random_directions(D, 2, 4))
    torch.testing.assert_close(n.subject.directions, random_directions(D, 1, 4))
    assert (n.last.scope, n.subject.scope, n.last.layer) == ("last", "from_subject", 2)
    assert 0 <= n.layer <= measured.n_layers
    assert n.rank.auroc[-1] == pytest.approx(measured.base_auroc, abs=1e-9)
    assert n.generation.plain == plain.plain and n.steering.plain == plain.plain
    assert n.generation.right == 0 and n.steering.right == 2                # flip_generation rescores plain; steering not
    r0 = random_directions(D, 1, 7)[0]
    assert n.generation.flipped == flip_generation(measured, axis, subject, prompts, 2, _NoVerbs(), sample=True,
                                                   direction=r0, plain=plain).flipped


def test_authors_sentences_comparisons_loads_each_recorded_model_on_the_first_n_of_each_half(monkeypatch):
    """Models missing from the record are skipped; each other model is loaded (with the device and dtype given) and
    measured on the first n_authors sentences of each half; its base AUROC is scikit-learn's on those margins."""
    from types import SimpleNamespace

    from sklearn.metrics import roc_auc_score

    import corekit.chapters.llm_agreement_axis as chapter
    loaded = []

    def fake_load(name, device, dtype):
        loaded.append((name, device, dtype))
        return tiny("llama")

    monkeypatch.setattr(chapter, "load", fake_load)
    train, test = agreement.split(12, 12, seed=5)
    their = SimpleNamespace(train=train, test=test, clean=lambda te: [i % 2 == 0 for i in range(len(te))])
    rows = [{"layer": k, "keep_only": 0.5, "remove": 0.5, "flip": 0.5} for k in range(3)]
    authors = {"models": {"tiny": {"layer_sweep": rows}}}
    got = chapter.authors_sentences_comparisons(["absent", "tiny"], authors, their, 8, batch_size=4, device="cpu",
                                                dtype="float32")
    assert list(got) == ["tiny"] and loaded == [("tiny", "cpu", "float32")]
    c = got["tiny"]
    assert c.measured.test.batch.prompts == [s.prompt for s in test[:8]] and len(c.measured.train.y) == 8
    y, value = np.array(agreement.labels(test[:8])), c.measured.test.last.value.cpu().numpy()
    assert c.base == pytest.approx(roc_auc_score(y, value), abs=1e-12) and c.n_well_formed == 4
    everything = chapter.authors_sentences_comparisons(["tiny"], authors, their, None, batch_size=4)
    assert len(everything["tiny"].measured.test.y) == 12


def test_authors_note_rate_and_undecided_generation_by_hand():
    from corekit.chapters.llm_agreement_axis import authors_note, generation_undecided, rate_or_none
    authors = {"n_samples": 500, "models": {"m": {"chosen_layer": 7, "n_layers": 9, "margin_fit": {"r2": 0.8},
                                                  "flip_auroc": 0.1}}}
    assert authors_note(authors, "m", "chosen_layer") == " (authors' code on their sentences, n = 500: 7 of 9)"
    assert authors_note(authors, "m", "margin_r2").endswith(": 0.8 (fitted and scored on their test half))")
    assert authors_note(authors, "m", "flip_auroc").endswith("n = 500: 0.1)")
    assert authors_note(authors, "other", "flip_auroc") == "" and authors_note(None, "m", "flip_auroc") == ""
    assert rate_or_none(Generation("greedy", 1, [], [], [], [], right=3, switched=2)) == 0.6667
    assert rate_or_none(Generation("greedy", 1, [], [], [], [], right=0, switched=0)) is None
    few = Generation("sampled", 1, [], [], [], [], right=10, switched=9)             # Wilson high end ≥ 0.8
    assert stats.wilson_interval(9, 10)[1] >= 0.8
    assert generation_undecided(few, 64).startswith("only 10 of the 64 prompts give a scorable continuation")
    assert generation_undecided(Generation("sampled", 1, [], [], [], [], right=10, switched=0), 64) is None
    assert generation_undecided(Generation("sampled", 1, [], [], [], [], right=100, switched=90), 400) is None


def test_spread_layers_by_hand():
    from corekit.chapters.llm_agreement_axis import spread_layers
    assert spread_layers(18, 2, 16) == [9, 16, 18]
    assert spread_layers(30, 4, 22) == [8, 15, 22, 30]                      # 7.5 and 22.5 round to even
    assert spread_layers(3, None, 2) == [0, 1, 2, 3]


def test_spearman_pairs_against_scipy_and_a_bootstrap_loop():
    from scipy.stats import spearmanr

    from corekit.chapters.llm_agreement_axis import spearman_pairs
    g = np.random.default_rng(1)
    z = {name: torch.as_tensor(g.normal(size=15)) for name in ("a", "b", "c")}
    names, rho, pairs = spearman_pairs(z, n_boot=40, seed=2)
    assert names == ["a", "b", "c"] and list(pairs) == ["a ~ b", "a ~ c", "b ~ c"]
    np.testing.assert_allclose(rho, spearmanr(np.stack([z[n].numpy() for n in names], axis=1))[0], atol=1e-12)
    for pair, got in pairs.items():
        x, y = (z[n].numpy() for n in pair.split(" ~ "))
        rng = np.random.default_rng(2)                                      # the same seed for every pair
        draws = [spearmanr(x[idx], y[idx])[0] for idx in rng.integers(0, 15, size=(40, 15))]
        assert got["rho"] == round(spearmanr(x, y)[0], 4)
        assert got["ci95"] == pytest.approx([round(v, 4) for v in np.quantile(draws, [0.025, 0.975])], abs=1.01e-4)


# --------------------------------------------------------------------------------------------
# claims(): hand-made findings, no model

PAIR = "gpt2 ~ gpt2-medium"


def _null(scope, k, keep=0.6, remove=0.95, flip=0.9, rate=0.05, coordinate=0.6, r2=0.1, z=None):
    from corekit.chapters.llm_agreement_axis import RandomNull
    last = scope == "last"
    return RandomNull(scope, 5, torch.zeros(k, 8), {"keep_only": np.full(k, keep), "remove": np.full(k, remove),
                                                     "flip": np.full(k, flip)}, np.full(k, rate),
                      z_test=(z if z is not None else torch.zeros(k, 4)) if last else None,
                      coordinate_auroc=np.full(k, coordinate) if last else None, margin_r2=np.full(k, r2) if last else None)


def _model(name, z_diff):
    """One model's hand-made readings, steps and nulls: L = 6, the layer chosen 5, every claim passing."""
    from types import SimpleNamespace

    from corekit.chapters.llm_agreement_axis import MarginFit, MeanDifferenceNull, Nulls, RankCurve
    from corekit.number_axis import Sweep
    value, y = torch.tensor([2.0, 1.0, -1.0, -2.0]), np.array([1, 1, 0, 0])
    measured = SimpleNamespace(name=name, lm=SimpleNamespace(weights=f"{name} weights", source=f"hub:{name}"), n_layers=6,
                               base_auroc=1.0, test=SimpleNamespace(last=SimpleNamespace(value=value), y=y))
    axis = SimpleNamespace(auroc=np.full(7, 0.995))

    def ablated(layers):
        return {"keep_only": np.full(len(layers), 0.99), "remove": np.full(len(layers), 0.5),
                "flip": np.full(len(layers), 0.1)}
    last = Sweep("last", list(range(7)), np.zeros(7), 5, {"flip": -value.repeat(7, 1)}, ablated(range(7)), {})
    subject = Sweep("from_subject", [3, 5, 6], np.zeros(3), 5, {"flip": -value.repeat(3, 1)}, ablated([3, 5, 6]), {})
    rank = RankCurve(5, [1, 2, 4], np.array([0.99, 0.99, 1.0]), 0.02, 1)
    rank_last = RankCurve(6, [1, 2, 4], np.array([0.99, 0.99, 1.0]), 0.02, 1)
    fit = MarginFit(5, (1.0, 0.0, 0.8), (1.0, 0.0, 0.79), [0.8] * 7, torch.zeros(4), 0.5)
    gens = {mode: Generation(mode, 5, [], [], [], [], right=120, switched=110) for mode in ("sampled", "greedy")}
    gens["authors"] = Generation("newest_position", 5, [], [], [], [], right=120, switched=105)
    low = Generation("sampled", 5, [], [], [], [], right=110, switched=3)
    diff = MeanDifferenceNull(torch.zeros(7, 8), _null("last", 1, z=z_diff), _null("from_subject", 1), 2, low, low)
    nulls = Nulls(_null("last", 3), _null("from_subject", 2), 1, RankCurve(5, [1, 2, 4], np.full(3, 0.6), 0.02, -1),
                  low, low, diff)
    return measured, axis, last, subject, rank, rank_last, fit, gens, nulls


def _findings(models=("gpt2", "gpt2-medium"), authors=False, n_authors=None):
    from types import SimpleNamespace

    from corekit.chapters.llm_agreement_axis import Findings
    parts = {name: _model(name, torch.tensor([[1.0, 2.0, 3.0, 4.0]]) * (-1) ** i) for i, name in enumerate(models)}
    fields = ("measured", "axes", "last", "subject", "ranks", "ranks_last", "fits")
    steps = {f: {name: p[i] for name, p in parts.items()} for i, f in enumerate(fields)}
    generations = {(name, mode): g for name, p in parts.items() for mode, g in p[7].items()}
    extra = {}
    if authors:
        rec = {"base_auroc": 1.0, "chosen_layer": 5, "n_layers": 6, "keep_only_auroc": 0.99, "remove_auroc": 0.5,
               "flip_auroc": 0.1, "margin_fit": {"r2": 0.8}}
        record = {"n_samples": 20, "models": {name: rec for name in models}, "cross_model_spearman": {PAIR: 0.9}}
        their = SimpleNamespace(train=[None] * 10, test=[None] * 10, kinds=["ok"] * 20, flawed=lambda: 3,
                                counts=lambda: {"ok": 17, "there": 3})
        g = torch.Generator().manual_seed(0)
        z = torch.randn(10, generator=g, dtype=torch.float64)
        comparison = {name: SimpleNamespace(
            max_diff=0.001, base=1.0, layer=5, at_layer={"keep_only": 0.99, "remove": 0.5, "flip": 0.1},
            last={"post_norm": {"keep_only": 0.9, "remove": 0.5, "flip": 0.1},
                  "block_output": {"keep_only": 0.8, "remove": 0.5, "flip": 0.2}},
            core_auroc={"post_norm": 0.9, "block_output": 0.8}, measured=SimpleNamespace(n_layers=6),
            base_well_formed=1.0, n_well_formed=8, z_test={"post_norm": z * (1 + i), "block_output": z}, layers={})
            for i, name in enumerate(models)}
        record["cross_model_spearman"] = {f"{models[0]} ~ {models[1]}": 1.0} if len(models) > 1 else {}
        extra = dict(authors=record, their=their, comparison=comparison, n_authors=n_authors)
    pairs = {f"{models[0]} ~ {models[1]}": {"rho": 0.9, "ci95": [0.85, 0.95]}} if len(models) > 1 else {}
    return Findings(models=list(models), **steps, generations=generations, nulls={n: p[8] for n, p in parts.items()},
                    n_prompts=400, generation_seed=0, pairs=pairs,
                    spearman_nulls={k: {"shuffled": 0.1, "random": 0.2} for k in pairs}, n_boot=50, **extra)


PER_MODEL = ["weights", "base_auroc", "chosen_layer", "core_auroc", "keep_only_auroc", "remove_auroc", "flip_auroc",
             "flip_rate", "sufficient_rank", "chosen_layer|from subject", "keep_only_auroc|from subject",
             "remove_auroc|from subject", "flip_auroc|from subject", "flip_rate|from subject", "margin_r2",
             "margin_r2_normalised", "at_layer_L", "generation_flip_rate", "generation_flip_rate_greedy",
             "generation_flip_rate_authors_steering"]
AUTHORS = ["authors_sentences_same_numbers", "authors_sentences_ablations", "authors_sentences_last_layer",
           "authors_sentences_base_auroc_well_formed"]


def _id(template, model):
    stem, _, scope = template.partition("|")
    return f"{stem}[{model}, {scope}]" if scope else f"{stem}[{model}]"


def _by_id(found):
    return {c.id: c for c in found}


def test_claims_all_pass_on_hand_made_findings_with_the_declared_ids_kinds_and_order():
    from corekit.chapters.llm_agreement_axis import CLAIMS, claims
    found = claims(_findings(authors=True))
    models = ["gpt2", "gpt2-medium"]
    want = ([_id(t, m) for m in models for t in PER_MODEL] + ["cross_model_spearman", "authors_sentences_flawed"]
            + [_id(t, m) for m in models for t in AUTHORS] + ["cross_model_spearman_authors_sentences"])
    assert [c.id for c in found] == want
    kinds = {spec.id: spec.kind for spec in CLAIMS}
    for c in found:
        template = c.id.replace("[gpt2-medium", "[{model}").replace("[gpt2", "[{model}")
        assert c.kind == kinds[template], c.id
    assert {c.verdict for c in found} == {"pass", "reported"}, [(c.id, c.verdict, c.reason) for c in found
                                                                 if c.verdict not in ("pass", "reported")]
    by = _by_id(found)
    assert by["chosen_layer[gpt2]"].target.endswith("≥ 4")                     # 2L/3 with L = 6
    assert by["core_auroc[gpt2]"].target.endswith("≥ 0.98")                    # the model's own AUROC − 0.02
    assert [n["what"] for n in by["flip_auroc[gpt2]"].as_dict()["null"]][1].startswith("the difference-of-means")
    at_l = by["at_layer_L[gpt2]"].measured
    assert at_l["layer"] == 6 and at_l["flip_rate"] == 1.0 and at_l["from_subject"]["flip"] == 0.1
    assert at_l["sufficient_rank"] == 1 and at_l["margin_r2"] == 0.8
    assert by["weights[gpt2]"].measured == "gpt2 weights"


def test_claims_of_one_model_have_no_cross_model_row():
    from corekit.chapters.llm_agreement_axis import claims
    assert [c.id for c in claims(_findings(models=("gpt2",)))] == [_id(t, "gpt2") for t in PER_MODEL]


def _set(attr_path, value):
    """Return a mutation of gpt2's hand-made findings: set the attribute (or item) at ``attr_path``."""
    def mutate(f):
        obj = f
        *head, tail = attr_path
        for key in head:
            obj = obj[key] if isinstance(obj, dict) else getattr(obj, key)
        if isinstance(obj, dict):
            obj[tail] = value
        elif isinstance(obj, np.ndarray):
            obj[tail] = value
        else:
            setattr(obj, tail, value)
    return mutate


G = "gpt2"
FAILS = [   # (claim, mutation that makes the measured value miss its bound)
    ("chosen_layer[gpt2]", _set(("last", G, "layer"), 3)),
    ("core_auroc[gpt2]", _set(("axes", G, "auroc", 5), 0.95)),
    ("keep_only_auroc[gpt2]", _set(("last", G, "auroc", "keep_only", 5), 0.95)),
    ("remove_auroc[gpt2]", _set(("last", G, "auroc", "remove", 5), 0.7)),
    ("flip_auroc[gpt2]", _set(("last", G, "auroc", "flip", 5), 0.4)),
    ("flip_rate[gpt2]", _set(("last", G, "margins", "flip"), torch.tensor([[2.0, 1.0, -1.0, -2.0]] * 7))),
    ("sufficient_rank[gpt2]", _set(("ranks", G, "sufficient"), 2)),
    ("keep_only_auroc[gpt2, from subject]", _set(("subject", G, "auroc", "keep_only", 1), 0.9)),
    ("remove_auroc[gpt2, from subject]", _set(("subject", G, "auroc", "remove", 1), 0.7)),
    ("flip_auroc[gpt2, from subject]", _set(("subject", G, "auroc", "flip", 1), 0.5)),
    ("flip_rate[gpt2, from subject]", _set(("subject", G, "margins", "flip"), torch.tensor([[1.0, 1.0, -1.0, -2.0]] * 3))),
    ("margin_r2[gpt2]", _set(("fits", G, "z"), (1.0, 0.0, 0.3))),
    ("generation_flip_rate[gpt2]", _set(("generations", (G, "sampled"), "switched"), 60)),
    ("generation_flip_rate_authors_steering[gpt2]", _set(("generations", (G, "authors"), "switched"), 40)),
    ("cross_model_spearman", _set(("pairs", PAIR, "rho"), 0.7)),
]


@pytest.mark.parametrize("claim,mutate", FAILS, ids=[c for c, _ in FAILS])
def test_each_claim_fails_when_its_value_misses_the_bound(claim, mutate):
    from corekit.chapters.llm_agreement_axis import claims
    f = _findings()
    mutate(f)
    got = _by_id(claims(f))[claim]
    assert got.verdict == "fail" and got.reason.startswith("Fails: measured"), got.reason


def _diff(path, value):
    return _set(("nulls", G, "mean_difference", *path), value)


def _random(path, value):
    return _set(("nulls", G, *path), value)


UNINFORMATIVE = [   # (claim, mutation that makes one null pass the bound, the null's words in the reason)
    ("chosen_layer[gpt2]", _random(("layer",), 5), "random unit direction at every layer"),
    ("chosen_layer[gpt2]", _diff(("layer",), 5), "difference-of-means direction at every layer"),
    ("core_auroc[gpt2]", _random(("last", "coordinate_auroc"), np.full(3, 0.99)), "random unit directions at layer 5"),
    ("core_auroc[gpt2]", _diff(("last", "coordinate_auroc"), np.array([0.99])), "difference-of-means direction"),
    ("keep_only_auroc[gpt2]", _random(("last", "auroc", "keep_only"), np.full(3, 0.99)), "random unit directions"),
    ("keep_only_auroc[gpt2]", _diff(("last", "auroc", "keep_only"), np.array([0.99])), "difference-of-means"),
    ("remove_auroc[gpt2]", _random(("last", "auroc", "remove"), np.full(3, 0.5)), "smallest of 3 random"),
    ("remove_auroc[gpt2]", _diff(("last", "auroc", "remove"), np.array([0.5])), "difference-of-means"),
    ("flip_auroc[gpt2]", _random(("last", "auroc", "flip"), np.full(3, 0.2)), "smallest of 3 random"),
    ("flip_auroc[gpt2]", _diff(("last", "auroc", "flip"), np.array([0.2])), "difference-of-means"),
    ("flip_rate[gpt2]", _random(("last", "flip_rate"), np.full(3, 0.9)), "largest of 3 random"),
    ("flip_rate[gpt2]", _diff(("last", "flip_rate"), np.array([0.9])), "difference-of-means"),
    ("sufficient_rank[gpt2]", _random(("rank", "sufficient"), 1), "random nested subspaces"),
    ("sufficient_rank[gpt2]", _diff(("last", "auroc", "keep_only"), np.array([0.99])), "as a 1-D core"),
    ("keep_only_auroc[gpt2, from subject]", _random(("subject", "auroc", "keep_only"), np.full(2, 0.99)), "from the subject"),
    ("keep_only_auroc[gpt2, from subject]", _diff(("subject", "auroc", "keep_only"), np.array([0.99])), "difference-of-means"),
    ("remove_auroc[gpt2, from subject]", _random(("subject", "auroc", "remove"), np.full(2, 0.5)), "smallest of 2"),
    ("remove_auroc[gpt2, from subject]", _diff(("subject", "auroc", "remove"), np.array([0.5])), "difference-of-means"),
    ("flip_auroc[gpt2, from subject]", _random(("subject", "auroc", "flip"), np.full(2, 0.1)), "smallest of 2"),
    ("flip_auroc[gpt2, from subject]", _diff(("subject", "auroc", "flip"), np.array([0.1])), "difference-of-means"),
    ("flip_rate[gpt2, from subject]", _random(("subject", "flip_rate"), np.full(2, 0.9)), "largest of 2"),
    ("flip_rate[gpt2, from subject]", _diff(("subject", "flip_rate"), np.array([0.9])), "difference-of-means"),
    ("margin_r2[gpt2]", _random(("last", "margin_r2"), np.full(3, 0.6)), "random unit directions"),
    ("margin_r2[gpt2]", _diff(("last", "margin_r2"), np.array([0.6])), "difference-of-means"),
    ("generation_flip_rate[gpt2]", _random(("generation", "switched"), 100), "along a random unit direction"),
    ("generation_flip_rate[gpt2]", _diff(("generation", "switched"), 100), "along the difference-of-means"),
    ("generation_flip_rate_authors_steering[gpt2]", _random(("steering", "switched"), 100), "random unit direction"),
    ("generation_flip_rate_authors_steering[gpt2]", _diff(("steering", "switched"), 100), "difference-of-means"),
    ("cross_model_spearman", _set(("spearman_nulls", PAIR, "shuffled"), 0.85), "prompts shuffled"),
    ("cross_model_spearman", _set(("spearman_nulls", PAIR, "random"), 0.85), "random unit directions in both"),
    ("cross_model_spearman", _set(("nulls", "gpt2-medium", "mean_difference", "last", "z_test"),
                                  torch.tensor([[1.0, 2.0, 3.0, 4.0]])), "difference-of-means directions of both"),
]


@pytest.mark.parametrize("claim,mutate,words", UNINFORMATIVE,
                         ids=[f"{c}-{i}" for i, (c, _, _) in enumerate(UNINFORMATIVE)])
def test_each_claim_is_uninformative_when_a_null_passes_too(claim, mutate, words):
    from corekit.chapters.llm_agreement_axis import claims
    f = _findings()
    mutate(f)
    got = _by_id(claims(f))[claim]
    assert got.verdict == "uninformative", (got.verdict, got.reason)
    assert got.reason.startswith("Uninformative:") and words in got.reason, got.reason


@pytest.mark.parametrize("claim,mode", [("generation_flip_rate[gpt2]", "sampled"),
                                        ("generation_flip_rate_authors_steering[gpt2]", "authors")])
def test_a_generation_claim_on_too_few_scorable_continuations_is_undecided(claim, mode):
    from corekit.chapters.llm_agreement_axis import claims
    f = _findings()
    f.generations[G, mode].right, f.generations[G, mode].switched = 20, 17
    got = _by_id(claims(f))[claim]
    assert got.verdict == "undecided" and "only 20 of the 400 prompts give a scorable continuation" in got.reason
    f.generations[G, mode].switched = 2                                      # the interval lies below 0.8: decided
    assert _by_id(claims(f))[claim].verdict == "fail"


def test_the_cross_model_claim_on_models_the_paper_did_not_use_is_undecided_and_names_them():
    from corekit.chapters.llm_agreement_axis import claims
    got = _by_id(claims(_findings(models=("gpt2", "gemma-3-270m"))))["cross_model_spearman"]
    assert got.verdict == "undecided"
    assert "gemma-3-270m is not among them" in got.reason and "the paper profile" in got.reason
    assert "gpt2, " in got.reason                                           # it lists the paper's models


def test_the_claims_on_the_authors_sentences_are_undecided_on_a_subset_and_fail_on_a_difference():
    from corekit.chapters.llm_agreement_axis import claims
    subset = _by_id(claims(_findings(authors=True, n_authors=5)))
    for claim in ("authors_sentences_same_numbers[gpt2]", "cross_model_spearman_authors_sentences"):
        assert subset[claim].verdict == "undecided" and "n_authors = 5: a subset of their split" in subset[claim].reason
    f = _findings(authors=True)
    f.comparison[G].max_diff = 0.05
    f.authors["cross_model_spearman"][PAIR] = 0.5
    by = _by_id(claims(f))
    assert by["authors_sentences_same_numbers[gpt2]"].verdict == "fail"
    assert by["cross_model_spearman_authors_sentences"].verdict == "fail"
    assert by["authors_sentences_flawed"].measured == {"flawed": 3, "of": 20, "ok": 17, "there": 3}


def test_mean_difference_directions_and_the_layer_rule_below_the_last(measured):
    """The difference-of-means direction is the unit plural − singular training mean at every layer; a sweep with
    before_last never chooses layer L, and the mean-difference null edits along that direction."""
    from corekit.chapters.llm_agreement_axis import directions_null, mean_difference_directions
    d = mean_difference_directions(measured)
    h, y = measured.train.last.h.double(), measured.train.y == 1
    want = h[:, torch.as_tensor(y)].mean(1) - h[:, torch.as_tensor(~y)].mean(1)
    torch.testing.assert_close(d, want / want.norm(dim=-1, keepdim=True))
    axis, L = find_axis(measured), measured.n_layers
    s = sweep(measured, axis, range(L + 1), "last", before_last=True)
    assert s.layer < L and s.layer == int(np.argmin(s.flip_train_auroc[:L]))
    assert s.value("flip", L) == float(s.auroc["flip"][L])
    null = directions_null(measured, axis, s, d[s.layer][None])
    assert null.auroc["flip"].shape == (1,) and null.margin_r2.shape == (1,)


@pytest.mark.parametrize("dtype, refused", [("auto", True), ("float32", True), ("bfloat16", False)])
def test_check_inputs_sizes_the_weights_at_the_dtype_they_load_in(monkeypatch, dtype, refused):
    from corekit import inputs
    from corekit.chapters import llm_agreement_axis as ch
    n = inputs.LANGUAGE_MODELS["gemma-3-270m"][0]
    monkeypatch.setattr(inputs, "memory_limit", lambda device: (3 * n, "a 3-bytes-a-weight machine"))
    params = {"models": ["gemma-3-270m"], "dtype": dtype, "device": "cpu", "n_train": 120, "n_test": 120}
    if refused:
        with pytest.raises(inputs.ParameterError, match="models"):
            ch.check_inputs(params)
    else:
        ch.check_inputs(params)


def test_the_cross_model_claim_quotes_the_authors_value_of_its_own_worst_pair():
    from dataclasses import replace

    from corekit.chapters.llm_agreement_axis import claims
    f = _findings(models=("gpt2", "gpt2-medium", "gpt2-large"), authors=True)
    worst = "gpt2-medium ~ gpt2-large"
    pairs = {"gpt2 ~ gpt2-medium": {"rho": 0.95, "ci95": [0.9, 0.97]}, worst: {"rho": 0.85, "ci95": [0.8, 0.9]}}
    f.authors["cross_model_spearman"] = {"gpt2 ~ gpt2-medium": 0.111, worst: 0.777}
    f = replace(f, pairs=pairs, spearman_nulls={k: {"shuffled": 0.1, "random": 0.2} for k in pairs})
    got = _by_id(claims(f))["cross_model_spearman"]
    text = got.target + (got.reason or "")
    assert f"({worst})" in text and "this pair: 0.777" in text and "0.111" not in text
