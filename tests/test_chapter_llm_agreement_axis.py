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
from corekit.chapters.llm_agreement_axis import Generation, find_axis, measure, newest_position_generation, sufficient_rank, sweep  # noqa: E402
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
