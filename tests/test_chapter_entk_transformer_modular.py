"""Chapter 06's measurement (corekit.chapters.entk_transformer_modular) against a dense reference: autograd Jacobians
of the summed output for one parameter, numpy eigh, QR-orthonormalised blocks and centred Fourier features."""
import numpy as np
import pytest
import torch
from entk_reference import CFG, P, reference_kernel, reference_overlap

from corekit import entk, recipes
from corekit.chapters import entk_transformer_modular
from corekit.models import BatchedTransformer
from corekit.tasks.modular import modular_addition


def test_paper_blocks_follow_the_number_of_keys():
    assert entk_transformer_modular.paper_blocks(2) == [[0, 1, 2, 3, 4], [5, 6, 7, 8]]
    assert entk_transformer_modular.paper_blocks(3) == [list(range(7)), list(range(7, 13))]
    with pytest.raises(ValueError, match="top_k must be at least 4K"):
        entk_transformer_modular.paper_blocks(3, top_k=12)
    with pytest.raises(ValueError, match="n_keys"):
        entk_transformer_modular.paper_blocks(0)


@pytest.mark.parametrize("name", ["W_E", "0.W_Q", "0.W_O", "0.W_in", "0.W_out", "W_U"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_block_scores_match_a_dense_reference(name, dtype):
    """float64 to 1e-8; float32 (the default, the authors' precision): eigenvalues within 4·N·ε₃₂·λ_1 of the float64
    reference and scores within 1e-4 (the blocks' subspaces move by about N·ε₃₂·λ_1 / gap)."""
    torch.manual_seed(0)
    model = BatchedTransformer(CFG, seeds=[3]).double()
    tokens = modular_addition(P, 0.5, 0).tokens()
    keys = [1, 3]
    eig = entk.parameter_eigenpairs(model, 0, tokens, top_k=9, names=[name], dtype=dtype)
    K = reference_kernel(model, name, tokens)
    ref = np.linalg.eigvalsh(K)[::-1][:9]
    atol = 1e-10 * np.abs(K).max() if dtype == torch.float64 else 4 * len(K) * float(torch.finfo(dtype).eps) * ref[0]
    score_atol = 1e-6 if dtype == torch.float64 else 1e-4
    np.testing.assert_allclose(eig[name].values.double().numpy(), ref, rtol=1e-8, atol=atol)
    w, V = np.linalg.eigh(K)
    V = V[:, ::-1]
    scores = entk_transformer_modular.score_blocks(eig, P, keys)
    for family in ("sum", "input"):
        want = [reference_overlap(V[:, 0:5], P, keys, family), reference_overlap(V[:, 5:9], P, keys, family)]
        np.testing.assert_allclose(scores.scores[name][family], want, atol=score_atol)
    ones = np.ones((P * P, 1)) / P
    np.testing.assert_allclose(scores.constant[name], [float(np.square(V[:, :5].T @ ones).sum()),
                                                       float(np.square(V[:, 5:9].T @ ones).sum())], atol=score_atol)


def test_holding_picks_the_block_that_carries_the_family():
    eigs = {"W_U": None}
    scores = entk_transformer_modular.BlockScores([1, 2], entk_transformer_modular.paper_blocks(2), {"W_U": {"sum": [0.1, 0.97],
                                                                                    "input": [0.9, 0.2]}},
                                     {"W_U": [0.0, 0.0]}, eigs)
    assert scores.holding("W_U", "sum") == (1, 0.97)
    assert scores.holding("W_U", "input") == (0, 0.9)
    with pytest.raises(ValueError, match="family one of"):
        scores.holding("W_U", "diff")


def test_measure_finds_keys_and_shortens_names():
    model = BatchedTransformer(CFG, seeds=[1])
    tokens = modular_addition(P, 0.5, 0).tokens()
    result = entk_transformer_modular.measure(model, 0, tokens, P, top_k=9, keys=[1, 2])
    assert set(result.table()) == {"W_E", "W_pos", "W_Q", "W_K", "W_V", "W_O", "W_in", "W_out", "W_U"}
    assert result.keys == [1, 2]
    assert all(0.0 <= v <= 1.0 + 1e-9 for row in result.table().values() for vs in row.values() for v in vs)










def test_log_gap_is_the_largest_early_difference():
    epoch_loss = np.array([1.0, 0.9, 0.8, 0.7, 0.6, 0.5])
    log = {"epoch": [0, 2, 4, 5], "train_loss": [1.1, 0.75, 0.0, 9.0]}     # epoch 5 lies past ``through_epoch``
    assert entk_transformer_modular.log_gap(epoch_loss, log, through_epoch=4) == pytest.approx(max(0.1, 0.05, 0.6))
    assert entk_transformer_modular.log_gap(epoch_loss, log, through_epoch=0) == pytest.approx(0.1)
    assert entk_transformer_modular.log_gap(epoch_loss[:5], log, through_epoch=4) == pytest.approx(0.6)  # a short run




def test_rounding_horizon_is_the_last_logged_epoch_within_tolerance_of_the_float64_run():
    exact = np.array([3.0, 2.9, 2.8, 2.7, 2.6, 2.5, 2.4])
    run = exact + np.array([1e-7, 5e-6, 2e-6, 3e-5, 1e-6, 9e-6, 1e-3])     # epoch 3 (not logged) is off; 6 is off
    assert entk_transformer_modular.rounding_horizon(run, exact, [0, 2, 4, 5, 6], 1e-5) == 5
    assert entk_transformer_modular.rounding_horizon(run, exact, [0, 3, 4], 1e-5) == 0      # stops at the first miss
    assert entk_transformer_modular.rounding_horizon(run, exact, [3, 4], 1e-5) is None
    assert entk_transformer_modular.rounding_horizon(run, exact, [0, 1, 2, 3, 4, 5, 6], 1.0) == 6
    with pytest.raises(ValueError, match="tol must be positive"):
        entk_transformer_modular.rounding_horizon(run, exact, [0], 0.0)
    with pytest.raises(ValueError, match="epochs must be ascending"):
        entk_transformer_modular.rounding_horizon(run, exact, [2, 0], 1e-5)
    with pytest.raises(ValueError, match="exact_loss must be"):
        entk_transformer_modular.rounding_horizon(run, exact[:3], [0, 4], 1e-5)






# --------------------------------------------------------------------------------------------
# claims(): every rule on hand-made findings (no training)

PARAMS = ("W_E", "W_pos", "W_Q", "W_K", "W_V", "W_O", "W_in", "W_out", "W_U")


def _scores(value=0.97, sum_value=None, **per_param):
    """BlockScores of one model, keys [1, 12]: every parameter's better block at ``value`` (the sum family at
    ``sum_value`` when given), ``per_param`` {param: (sum, input)} overriding."""
    table = {name: {"sum": [sum_value if sum_value is not None else value, 0.1], "input": [0.1, value]}
             for name in PARAMS}
    for name, (s, i) in per_param.items():
        table[name] = {"sum": [s, 0.0], "input": [0.0, i]}
    return entk_transformer_modular.BlockScores([1, 12], entk_transformer_modular.paper_blocks(2), table,
                                                {n: [0.0, 0.0] for n in PARAMS}, {})


def _authors_run(seed):
    """The authors' record of one seed, as results/oracle/06.json holds it."""
    return {"keys": [1, 12], "final_test_acc": 1.0, "first_epoch_test_acc_50": 900, "first_epoch_test_acc_99": 2000,
            "authors": {n: {"sum": [0.99, 0.1], "input": [0.1, 0.98]} for n in PARAMS}}


def _findings(**over):
    """Findings of seeds 2, 3 (studied in full) and 4 (extra, did not generalise), at the authors' settings, on which
    every claim passes; ``over`` replaces fields."""
    base = dict(
        all_seeds=[2, 3, 4], seeds=[2, 3], epochs=4000, p=29, test_acc=[1.0, 1.0, 0.4], test_acc_init=[0.03, 0.03, 0.03],
        keys=[[1, 12], [1, 12], [1, 12]], results=[_scores(), _scores(), _scores(0.5)],
        results_init=[_scores(0.1, sum_value=0.0)] * 3,
        grouped=[{"sum": [0.9, 0.1], "input": [0.1, 0.95]}] * 3, grouped_init=[{"sum": [0.1, 0.1], "input": [0.2, 0.1]}] * 3,
        random_block=[{"sum": 0.011, "input": 0.011}] * 3, null_samples=200, key_share=[0.97, 0.97, 0.3],
        null_share=[0.17, 0.18, 0.2], checkpoint_sum=[0.9, 0.88, None], checkpoint_epochs=[1860, 1880, None],
        peak_epochs=[140.0, 160.0], test_rise_epochs=[900.0, 1000.0], dynamics_every_epochs=20,
        milestones=[{0.5: 880.0, 0.99: 1860.0}, {0.5: 860.0, 0.99: 1880.0}],
        authors={"epochs": 4000, "seeds": {"2": _authors_run(2), "3": _authors_run(3)}}, differs=(),
        log_gap={2: 2e-7, 3: 3e-7}, null_gap={2: 5e-3, 3: 6e-3}, horizon={2: 20, 3: 20}, through={2: 20, 3: 20})
    return entk_transformer_modular.Findings(**{**base, **over})


def _by_id(findings):
    return {c.id: c for c in entk_transformer_modular.claims(findings)}


def test_claims_all_pass_with_the_declared_ids_in_order_and_kinds():
    found = entk_transformer_modular.claims(_findings())
    declared = {s.id: s for s in entk_transformer_modular.CLAIMS}
    assert [c.id for c in found] == [s.id for s in entk_transformer_modular.CLAIMS]
    assert all(c.kind == declared[c.id].kind for c in found)
    assert {c.id: c.verdict for c in found if c.verdict != "pass"} == {"grokking_epochs_seed2": "reported",
                                                                       "grokking_epochs_seed3": "reported"}
    claim = {c.id: c for c in found}["unembed_sum_alignment"]
    assert claim.measured == {"2": 0.97, "3": 0.97} and claim.models["n"] == 2
    assert "not covered, as they did not generalise: seeds 4" in claim.target
    assert claim.authors == {"2": 0.99, "3": 0.99}
    assert {c.kind for c in found if c.id.startswith("training_log_match")} == {"check"}
    assert {c.kind for c in found if c.id.startswith("final_test_accuracy")} == {"precondition"}


def test_block_claims_fail_on_a_generaliser_below_the_bar():
    claims = _by_id(_findings(results=[_scores(), _scores(W_Q=(0.1, 0.05)), _scores(0.5)]))
    assert claims["attention_W_Q_input_alignment"].verdict == "fail"
    assert "1 of 2 models satisfy ≥ 0.9; not 3 (0.05)" in claims["attention_W_Q_input_alignment"].reason
    assert claims["attention_W_K_input_alignment"].verdict == "pass"


def test_block_claims_are_uninformative_when_the_initial_model_or_a_random_block_passes():
    claims = _by_id(_findings(results_init=[_scores(0.96, sum_value=0.0)] * 3))
    assert claims["mlp_in_input_alignment"].verdict == "uninformative"
    assert "the same models at initialisation" in claims["mlp_in_input_alignment"].reason
    claims = _by_id(_findings(random_block=[{"sum": 0.011, "input": 0.96}] * 3))
    assert claims["attention_summed_input_alignment"].verdict == "uninformative"
    assert "random block" in claims["attention_summed_input_alignment"].reason
    assert claims["unembed_input_alignment_seed2"].verdict == "uninformative"


def test_claims_over_models_are_undecided_when_no_model_generalises():
    claims = _by_id(_findings(test_acc=[0.5, 0.6, 0.4]))
    for name in ("unembed_sum_alignment", "attention_summed_input_alignment", "key_frequency_sparsity",
                 "alignment_at_init"):
        assert claims[name].verdict == "undecided", name
        assert "no model of this run generalised" in claims[name].reason
    assert claims["final_test_accuracy_seed2"].verdict == "fail"
    assert "does not satisfy ≥ 0.99" in claims["final_test_accuracy_seed2"].reason
    for seed in (2, 3):                       # G06: the seeds' own claims were "fail" on models that never generalised
        for name in ("unembed_sum_alignment", "unembed_input_alignment", "alignment_peak_epoch"):
            claim = claims[f"{name}_seed{seed}"]
            assert claim.verdict == "undecided" and f"seed {seed} did not generalise" in claim.reason, (name, seed)


def test_final_accuracy_is_uninformative_when_the_initial_model_passes():
    claim = _by_id(_findings(test_acc_init=[0.995, 0.03, 0.03]))["final_test_accuracy_seed2"]
    assert claim.verdict == "uninformative" and "the same model at initialisation gives 0.995" in claim.reason


def test_sparsity_is_tested_against_the_models_that_did_not_generalise():
    claims = _by_id(_findings())
    nulls = claims["key_frequency_sparsity"].nulls
    assert [n["value"] for n in nulls][1] == {"4": 0.3}
    claim = _by_id(_findings(key_share=[0.97, 0.97, 0.92]))["key_frequency_sparsity"]
    assert claim.verdict == "uninformative" and "did not generalise" in claim.reason and "0.92" in claim.reason
    claim = _by_id(_findings(test_acc=[1.0, 1.0, 1.0]))["key_frequency_sparsity"]
    assert claim.verdict == "undecided" and "every model generalised" in claim.reason
    claim = _by_id(_findings(key_share=[0.97, 0.7, 0.3]))["key_frequency_sparsity"]
    assert claim.verdict == "fail" and "not 3 (0.7)" in claim.reason


def test_alignment_at_init_is_tested_against_the_generalising_checkpoint():
    claims = _by_id(_findings())
    assert claims["alignment_at_init"].nulls[0]["value"] == {"2": round(0.9 / 0.97, 4), "3": round(0.88 / 0.97, 4)}
    claim = _by_id(_findings(checkpoint_sum=[0.9, 0.2, None]))["alignment_at_init"]
    assert claim.verdict == "uninformative" and "generalising checkpoint" in claim.reason and "3: 0.2062" in claim.reason
    claim = _by_id(_findings(results_init=[_scores(0.1, sum_value=0.5)] * 3))["alignment_at_init"]
    assert claim.verdict == "fail" and "≤ 0.3" in claim.reason
    claim = _by_id(_findings(checkpoint_sum=[0.9, None, None]))["alignment_at_init"]
    assert claim.verdict == "undecided" and "generalising checkpoint, the null, is missing" in claim.reason


def test_seed_claims_against_the_authors_record():
    claims = _by_id(_findings(keys=[[1, 12], [1, 5], [1, 12]]))
    assert claims["key_frequencies_seed3"].verdict == "fail" and claims["key_frequencies_seed3"].measured == 2
    assert claims["key_frequencies_seed2"].paper == [1, 12] and claims["key_frequencies_seed3"].paper is None
    claims = _by_id(_findings(authors=None, differs=["lr"]))
    for name in ("key_frequencies_seed2", "training_log_match_seed3"):
        assert claims[name].verdict == "undecided", name
        assert "this run's lr differ from the authors' run" in claims[name].reason
    assert claims["alignment_peak_epoch_seed2"].verdict == "undecided"
    assert "this run's lr differ" in claims["alignment_peak_epoch_seed2"].reason
    claims = _by_id(_findings(authors={"epochs": 4000, "seeds": {"2": _authors_run(2)}}))
    assert claims["training_log_match_seed3"].verdict == "undecided"
    assert "holds no run of seed 3" in claims["training_log_match_seed3"].reason
    assert claims["training_log_match_seed2"].verdict == "pass"


def test_unembedding_rows_of_a_seed_fail_below_the_bar():
    claims = _by_id(_findings(results=[_scores(), _scores(W_U=(0.9, 0.97)), _scores(0.5)]))
    assert claims["unembed_sum_alignment_seed3"].verdict == "fail"
    assert claims["unembed_sum_alignment_seed2"].verdict == "pass"
    assert claims["unembed_sum_alignment_seed2"].paper == round(3.965 / 4, 4)


def test_peak_epoch_fails_is_uninformative_or_undecided_at_coarse_snapshots():
    claims = _by_id(_findings(peak_epochs=[140.0, 0.0]))
    assert claims["alignment_peak_epoch_seed3"].verdict == "fail"
    assert "measured 0 does not satisfy in [90, 210]" in claims["alignment_peak_epoch_seed3"].reason
    claims = _by_id(_findings(test_rise_epochs=[160.0, 1000.0]))
    assert claims["alignment_peak_epoch_seed2"].verdict == "uninformative"
    assert "held-out accuracy rises fastest" in claims["alignment_peak_epoch_seed2"].reason
    claims = _by_id(_findings(dynamics_every_epochs=100, peak_epochs=[200.0, 0.0]))
    for seed in (2, 3):
        claim = claims[f"alignment_peak_epoch_seed{seed}"]
        assert claim.verdict == "undecided" and "snapshots every 100 epochs" in claim.reason


def test_training_log_match_fails_is_uninformative_or_undecided_past_the_rounding_horizon():
    claims = _by_id(_findings(log_gap={2: 2e-3, 3: 3e-7}))
    assert claims["training_log_match_seed2"].verdict == "fail"
    claims = _by_id(_findings(null_gap={2: 5e-3, 3: 5e-5}))
    assert claims["training_log_match_seed3"].verdict == "uninformative"
    assert "corekit's batch order" in claims["training_log_match_seed3"].reason
    claims = _by_id(_findings(horizon={2: None, 3: 20}))
    assert claims["training_log_match_seed2"].verdict == "undecided"
    assert "already at epoch 0" in claims["training_log_match_seed2"].reason


def test_a_seed_the_profiles_do_not_study_gets_its_own_claims():
    found = entk_transformer_modular.claims(_findings(all_seeds=[5, 3, 4], seeds=[5, 3], authors=None, differs=[]))
    ids = [c.id for c in found]
    assert "final_test_accuracy_seed5" in ids and "unembed_sum_alignment_seed5" in ids
    kinds = {c.id: c.kind for c in found}
    assert kinds["unembed_sum_alignment_seed5"] == "extension" and kinds["unembed_sum_alignment_seed3"] == "paper"
    assert "holds no run of seed 5" in {c.id: c for c in found}["key_frequencies_seed5"].reason


def test_authors_record_applies_at_their_settings_only():
    record = {"epochs": 4000, "seeds": {}}
    settings = dict(recipes.AUTHORS_SETTINGS)
    assert entk_transformer_modular.authors_record(record, settings, 4000) == (record, [])
    assert entk_transformer_modular.authors_record(record, settings, 3000) == (None, ["epochs"])
    assert entk_transformer_modular.authors_record(record, dict(settings, lr=1e-3), 4000) == (None, ["lr"])
    assert entk_transformer_modular.authors_record(None, settings, 4000) == (None, [])


def test_checkpoint_alignment_reads_the_first_logged_epoch_at_the_level():
    """The checkpoint is the first logged epoch whose curve is ≥ level (here training accuracy ≥ 0.3), and its
    alignment is W_U's better block on that snapshot (the measure() statistic on the saved state)."""
    kw = dict(d_model=16, n_heads=2, d_mlp=32, batch_size=8, lr=1e-2, log_every_epochs=2)
    run = recipes.train_authors(P, [2], 12, **kw)
    train_acc = run.after_epochs("train_acc", run.log_epochs)[:, 0]
    epochs = entk_transformer_modular.first_logged_epochs(run, "train_acc", level=0.3)
    want = next(e for e, a in zip(run.log_epochs, train_acc) if a >= 0.3)
    assert 0 < want < run.log_epochs[-1] and epochs == [want]                # reached after a while, not at once
    got_epochs, values = entk_transformer_modular.checkpoint_alignment(run, run.tokens, P, [[1, 2]], top_k=9,
                                                                       name="train_acc", level=0.3)
    state = run.history.snapshots[(want + 1) * run.steps_per_epoch]
    ref = entk_transformer_modular.measure(run.model, 0, run.tokens, P, top_k=9, keys=[1, 2], state=state)
    assert got_epochs == [want] and values[0] == pytest.approx(ref.holding("W_U", "sum")[1], abs=1e-6)
    final = entk_transformer_modular.measure(run.model, 0, run.tokens, P, top_k=9, keys=[1, 2])
    assert values[0] != pytest.approx(final.holding("W_U", "sum")[1], abs=1e-6)    # the checkpoint, not the end
    assert entk_transformer_modular.first_logged_epochs(run, level=0.99) == [None]   # held-out accuracy: never
    assert entk_transformer_modular.checkpoint_alignment(run, run.tokens, P, [[1, 2]], top_k=9) == ([None], [None])
