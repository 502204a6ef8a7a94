"""Chapter 09's claims decided on hand-made findings (no training), and its protocol on a few tiny trained models."""
from dataclasses import replace

import numpy as np
import pytest

from corekit.chapters import merging_cores as mc

P = 7
ALPHAS = [0.0, 0.25, 0.5, 0.75, 1.0]

SAME_PAIRS = ["1–2", "1–3", "2–3", "4–5", "4–6", "5–6"]
CONTRAST = ["1–4"]
SAME_ORDERED = [x for k in SAME_PAIRS for x in (k, "–".join(reversed(k.split("–"))))]
IDS = ["naive_barrier", "spawned_pair_connected", "units_matched_barrier", "rebasin_barrier", "rebasin_heads_barrier",
       "activation_matching_barrier", "construction_steps", "core_aligned_connects", "core_alignment_halves_barrier",
       "core_beats_pca", "core_stitch_sufficient", "full_rank_stitch", "same_keys_stitch_better",
       "alignment_preserves_function", "path_ends_are_the_models", "cost_seconds"]


def barriers(**level):
    """{alignment: {pair: barrier}}: every alignment at a level where all claims pass, Procrustes beside PCA ± 0.01."""
    levels = {"naive": 0.9, "units": 0.9, "rebasin": 0.8, "rebasin + heads": 0.6, "activations": 0.85,
              "core, last position": 0.8, "core + heads, last position": 0.5, "core, full": 0.01, "pca, full": 0.6,
              "procrustes, full": 0.6, "random, full": 0.95} | level
    out = {name: {k: v + 0.002 * i for i, k in enumerate(SAME_PAIRS + CONTRAST)} for name, v in levels.items()}
    if "procrustes, full" not in level:
        out["procrustes, full"] = {k: v + (0.01 if i % 2 else -0.01) for i, (k, v) in enumerate(out["pca, full"].items())}
    return out


def stitch(**level):
    """{subspace: {ordered pair: share}} with every ordered pair of the pairs above at the given level."""
    levels = {"core": 0.995, "pca": 0.9, "random": 0.3, "full": 0.8} | level
    ordered = SAME_ORDERED + ["1–4", "4–1"]
    return {kind: {k: v for k in ordered} for kind, v in levels.items()}


def findings(**change):
    base = mc.Findings(barriers=barriers(), same_pairs=SAME_PAIRS, contrast_pairs=CONTRAST, spawn_barrier=0.0,
                       spawn_accuracy=1.0, parent_seed=1, spawn_epoch=500, stitch=stitch(), same_ordered=SAME_ORDERED,
                       gap=mc.KeySetGap(0.3, (0.2, 0.4), 0.01, 0.0), function_error=1e-7, path_end_error=0.0,
                       train_seconds=10.0, align_seconds=0.5, stitch_seconds=0.01, n_boot=500)
    return replace(base, **change)


def by_id(f):
    return {c.id: c for c in mc.claims(f)}


def test_the_claims_are_the_declared_ones_in_order_each_with_its_kind_and_all_pass_on_fair_findings():
    out = mc.claims(findings())
    assert [c.id for c in out] == IDS == [s.id for s in mc.CLAIMS]
    assert {c.kind for c in out} == {"extension", "check"}       # the paper has no merging claim: all are the book's
    assert {c.id for c in out if c.kind == "check"} == {"alignment_preserves_function", "path_ends_are_the_models"}
    assert {c.id: c.verdict for c in out if c.verdict != "reported"} == dict.fromkeys(
        ["naive_barrier", "spawned_pair_connected", "core_aligned_connects", "core_alignment_halves_barrier",
         "core_beats_pca", "core_stitch_sufficient", "same_keys_stitch_better", "alignment_preserves_function",
         "path_ends_are_the_models"], "pass")
    claims_ = by_id(findings())
    assert claims_["full_rank_stitch"].measured == {k: 0.8 for k in SAME_ORDERED}
    assert claims_["construction_steps"].measured["naive"] == {"same keys": 0.905, "different keys": 0.912}
    assert claims_["cost_seconds"].measured == {"training (all seeds)": 10.0, "every alignment of a pair": 0.5,
                                                "stitching, 4 subspaces": 0.01}
    assert claims_["core_alignment_halves_barrier"].models["n"] == 6


def test_too_few_pairs_sharing_their_key_set_leave_the_claims_over_them_undecided():
    out = by_id(findings(same_pairs=SAME_PAIRS[:2], same_ordered=SAME_ORDERED[:4]))
    for claim_id in ("naive_barrier", "core_aligned_connects", "core_alignment_halves_barrier", "core_beats_pca",
                     "core_stitch_sufficient", "same_keys_stitch_better"):
        assert out[claim_id].verdict == "undecided", claim_id
        assert "only 2 pair(s) of models share their key set, 6 are needed" in out[claim_id].reason
    assert out["spawned_pair_connected"].verdict == "pass"


def test_without_a_pair_sharing_its_key_set_the_contrast_is_measured_and_named_and_nothing_is_decided():
    out = by_id(findings(same_pairs=[], same_ordered=[], gap=None))
    assert list(out["naive_barrier"].measured) == CONTRAST and out["naive_barrier"].verdict == "undecided"
    assert "contrast pairs" in out["spawned_pair_connected"].nulls[0]["what"]
    assert "only 0 pair(s)" in out["same_keys_stitch_better"].reason


def test_one_pair_gives_core_beats_pca_no_interval():
    out = by_id(findings(same_pairs=SAME_PAIRS[:1], min_same_key_pairs=1))
    assert out["core_beats_pca"].verdict == "undecided" and "one pair gives no interval" in out["core_beats_pca"].reason
    assert out["core_aligned_connects"].verdict == "pass"


def test_the_spawned_pair_is_undecided_when_its_continuations_do_not_generalise():
    claim = by_id(findings(spawn_accuracy=0.5))["spawned_pair_connected"]
    assert claim.verdict == "undecided" and "continuations reach held-out accuracy 0.5000" in claim.reason


def test_a_run_where_fewer_than_two_models_learn_the_task_leaves_every_claim_over_models_undecided():
    why = "fewer than two models reach held-out accuracy 0.99 (seeds [1, 2]: [0.31, 0.995])"
    out = by_id(findings(shortfall=why))
    for claim_id in ("naive_barrier", "spawned_pair_connected", "core_aligned_connects",
                     "core_alignment_halves_barrier", "core_beats_pca", "core_stitch_sufficient",
                     "same_keys_stitch_better"):
        assert out[claim_id].verdict == "undecided" and why in out[claim_id].reason, claim_id
    assert out["alignment_preserves_function"].verdict == "pass"             # a check on the code holds on any model


def test_the_key_set_gap_is_undecided_without_both_kinds_of_pair():
    claim = by_id(findings(gap=None))["same_keys_stitch_better"]
    assert claim.verdict == "undecided" and "every pair of models shares its key set" in claim.reason


@pytest.mark.parametrize("change, claim_id, reason", [
    (dict(barriers=barriers(naive=0.1)), "naive_barrier", "0 of 6 models satisfy ≥ 0.2"),
    (dict(spawn_barrier=0.1), "spawned_pair_connected", "does not satisfy ≤ 0.05"),
    (dict(barriers=barriers(**{"core, full": 0.2})), "core_aligned_connects", "0 of 6 models satisfy ≤ 0.05"),
    (dict(barriers=barriers(**{"core, full": 0.45})), "core_alignment_halves_barrier", "0 of 6 models satisfy ≤ 0.5"),
    (dict(barriers=barriers(**{"core, full": 0.6})), "core_beats_pca", "does not satisfy interval above 0"),
    (dict(stitch=stitch(core=0.9)), "core_stitch_sufficient", "0 of 12 models satisfy ≥ 0.99"),
    (dict(gap=mc.KeySetGap(0.01, (-0.1, 0.1), 0.0, 0.0)), "same_keys_stitch_better", "does not satisfy ≥ 0.05"),
    (dict(function_error=1e-3), "alignment_preserves_function", "does not satisfy ≤ 0.0001"),
    (dict(path_end_error=1e-3), "path_ends_are_the_models", "does not satisfy ≤ 1e-06"),
])
def test_each_claim_fails_when_its_value_misses_the_bound(change, claim_id, reason):
    claim = by_id(findings(**change))[claim_id]
    assert claim.verdict == "fail" and reason in claim.reason


@pytest.mark.parametrize("change, claim_id, null", [
    (dict(spawn_barrier=0.3), "naive_barrier", "the pair that shares its history"),
    (dict(barriers=barriers(naive=0.04)), "spawned_pair_connected", "the independently trained pairs"),
    (dict(barriers=barriers(**{"random, full": 0.02})), "core_aligned_connects", "a random rotation"),
    (dict(barriers=barriers(**{"pca, full": 0.02})), "core_aligned_connects", "principal components"),
    (dict(barriers=barriers(**{"procrustes, full": 0.02})), "core_aligned_connects", "Procrustes map"),
    (dict(barriers=barriers(**{"pca, full": 0.3})), "core_alignment_halves_barrier", "principal components"),
    (dict(barriers=barriers(**{"procrustes, full": 0.3})), "core_alignment_halves_barrier", "Procrustes map"),
    (dict(barriers=barriers(**{"random, full": 0.3})), "core_alignment_halves_barrier", "a random rotation"),
    (dict(barriers=barriers(**{"procrustes, full": 0.9})), "core_beats_pca", "whole-stream Procrustes"),
    (dict(stitch=stitch(pca=0.995)), "core_stitch_sufficient", "principal components"),
    (dict(stitch=stitch(random=0.995)), "core_stitch_sufficient", "random subspaces"),
    (dict(gap=mc.KeySetGap(0.3, (0.2, 0.4), 0.29, 0.0)), "same_keys_stitch_better", "principal components"),
    (dict(gap=mc.KeySetGap(0.3, (0.2, 0.4), 0.0, 0.1)), "same_keys_stitch_better", "key sets shuffled"),
])
def test_each_claim_is_uninformative_when_a_null_passes_too(change, claim_id, null):
    claim = by_id(findings(**change))[claim_id]
    assert claim.verdict == "uninformative" and null in claim.reason


def test_the_protocol_runs_end_to_end_on_tiny_models_and_its_findings_decide_every_claim():
    kw = dict(d_model=16, n_heads=2, d_mlp=32, batch_size=32, log_every_epochs=2, snapshot_every_epochs=4)
    models = mc.train_models(P, [0, 1, 2], 10, 0.0, **kw)
    assert models.members == [0, 1, 2] and models.label(0, 2) == "0–2" and len(models.keys) == 3
    assert models.generalised == [0, 1, 2] and models.shortfall is None
    short = mc.train_models(P, [0, 1], 4, 1.1, **kw | {"snapshot_every_epochs": 2})
    assert short.generalised == [] and short.members == [0, 1]               # every model takes part, claims undecided
    assert "fewer than two models reach held-out accuracy 1.1" in short.shortfall
    spawned = mc.spawn_pair(models, 4, 10, ALPHAS, batch_size=32, lr=3e-4, weight_decay=1.0, betas=(0.9, 0.999),
                            log_every_epochs=2)
    assert spawned.parent_seed == 0 and spawned.path.shape == (len(ALPHAS),) and spawned.barrier >= 0
    pairs = mc.choose_pairs(models, 1)
    assert len(pairs.compared) >= 1 and set(pairs.labels) == {(i, j) for i in range(3) for j in range(3) if i != j}
    paths = mc.compare_paths(models, pairs, ALPHAS, 0.99, 2)
    assert set(paths.barriers) == set(mc.ALIGNMENTS) and paths.function_error < 1e-3 and paths.end_error < 1e-6
    stitching = mc.stitch_models(models, 0.99)
    assert len(stitching.scores["core"]) == 6 and set(stitching.shares()) == set(mc.STITCHES)
    f = mc.Findings(barriers=paths.barriers, same_pairs=pairs.same_labels, contrast_pairs=pairs.contrast_labels,
                    spawn_barrier=spawned.barrier, spawn_accuracy=float(spawned.accuracy.min()), parent_seed=0,
                    spawn_epoch=4, stitch=stitching.shares(), same_ordered=stitching.same_labels,
                    gap=mc.key_set_gap(stitching, models, 50), function_error=paths.function_error,
                    path_end_error=paths.end_error, train_seconds=models.seconds, align_seconds=paths.seconds,
                    stitch_seconds=stitching.seconds, n_boot=50)
    out = mc.claims(f)
    assert [c.id for c in out] == IDS and out[-3].verdict == "pass"


def test_key_set_gap_counts_the_shuffles_behind_its_null():
    from types import SimpleNamespace
    keys = {0: (1, 2), 1: (1, 2), 2: (3, 4), 3: (3, 4)}
    ordered = [(i, j) for i in keys for j in keys if i != j]
    core = {k: (0.9 if keys[k[0]] == keys[k[1]] else 0.2) + 0.01 * k[0] for k in ordered}
    stitching = SimpleNamespace(scores={"core": core, "pca": {k: 0.5 for k in ordered}},
                                same={k: keys[k[0]] == keys[k[1]] for k in ordered})
    gap = mc.key_set_gap(stitching, SimpleNamespace(members=list(keys), keys=keys), n_boot=20, shuffles=30)
    same = [v for k, v in core.items() if stitching.same[k]]
    other = [v for k, v in core.items() if not stitching.same[k]]
    assert gap.shuffles == 30                           # every shuffle of two pairs of keys leaves both kinds
    assert gap.difference == pytest.approx(np.mean(same) - np.mean(other), abs=1e-12)
    assert gap.pca_difference == pytest.approx(0.0, abs=1e-12) and gap.shuffled_difference < gap.difference
