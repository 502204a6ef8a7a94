"""The papers' headline statements, declared once, with the claims of the book's runs that test them.

A statement is what a paper asserts, in one sentence, with where it says so and its number. ``decide`` names the
claims that decide it (a ``*`` in a claim id stands for any model name, e.g. ``core_auroc[*]``), ``shown`` the
claims reported beside it, ``checks`` the claims that test it but cannot fail by construction (any random
initialisation satisfies them): they are shown and never counted. ``bearing`` names the parameters whose difference
from the chapter's paper profile changes the statement's setting (None: every difference does); ``always_differs``
what even the paper profile does not have. The book's own hypotheses are :data:`OWN`, declared the same way.
"""
from __future__ import annotations

from dataclasses import dataclass

ACE = "ACE (Schiffman 2026)"
ENTK = "eNTK (Lin et al. 2025)"
BOOK = "this book"


@dataclass(frozen=True)
class Statement:
    """One headline statement of a paper (or of the book), the claims that test it and what bears on its setting."""
    id: str
    paper: str
    chapter: str
    text: str
    reference: str | None
    paper_value: str
    decide: tuple[str, ...] = ()
    shown: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()
    bearing: tuple[str, ...] | None = None
    always_differs: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    needs: str | None = None
    note: str | None = None

    def claim_patterns(self) -> tuple[str, ...]:
        """Return every claim id pattern the statement names (deciding, shown and checks)."""
        return self.decide + self.shown + self.checks


#: What chapter 07's paper profile still lacks (the offline corpus, tagger and weights of this machine).
GEMMA_07 = ("the shipped corpus (stories.jsonl), not TinyStories", "spaCy's labels, not Stanza's",
            "Gemma-3-270M as Q4_K_M GGUF dequantised to float32, not the released weights")
#: Chapter 07's parameters that bear on its statements (the rest say how the kernel is computed, not what).
BEARING_07 = ("context_tokens", "n_per_class", "layer", "top_k", "continuation", "min_support", "split_seeds")
NEEDS_07 = ("a run at the paper's setting: TinyStories labelled by Stanza and the released Gemma-3-270M weights "
            "(a model hub), on a GPU")
NEEDS_04 = "the paper's six models (gpt2 to Qwen2.5-32B) from a model hub, on GPUs (the paper profile)"
NEEDS_02 = "chapter 02's paper profile (d_model 128, d_mlp 512): about 2–2.5 h on two idle cores"

STATEMENTS: tuple[Statement, ...] = (
    # ---------------------------------------------------------------- ACE: Markov chains (chapter 01)
    Statement("A1", ACE, "01_markov_cores",
              "Independently trained transformers reach near-optimal accuracy with near-orthogonal weights.",
              "§3", "largest weight cosine ≈ 0 (authors' runs 0.029–0.052)",
              decide=("weight_cosine_max",)),
    Statement("A2", ACE, "01_markov_cores",
              "ACE isolates a 3-dimensional core in every model that is necessary and sufficient for the task.",
              "§3", "core rank 3; keep-only accuracy ≈ the model's; removing the core leaves chance (0.25)",
              decide=("core_rank", "keep_only_ratio", "remove_only_accuracy")),
    Statement("A3", ACE, "01_markov_cores",
              "The models' cores lie in nearly orthogonal subspaces.",
              "§3", "projector overlap 0.02–0.04 (random subspaces: 0.047)",
              decide=("projector_overlap",), shown=("projector_overlap_random",)),
    Statement("A4", ACE, "01_markov_cores",
              "Yet the cores align statistically: their coordinates are linear images of one another.",
              "§3", "canonical correlations 0.92–0.999, mean ≈ 0.99",
              decide=("cca_min", "cca_mean")),
    Statement("A5", ACE, "01_markov_cores",
              "A linear operator fitted in each core recovers the chain's transition spectrum eig(T).",
              "§3", "max |eig(A) − eig(T)| ≤ 0.02; R²_core / R²_oracle > 0.98",
              decide=("eig_max_error", "r2_core_over_oracle")),
    # ---------------------------------------------------------------- ACE: grokking (chapters 02, 03)
    Statement("A6", ACE, "02_grokking_cores",
              "Modular-addition cores crystallize at grokking, at a compact energy rank.",
              "§4", "energy rank ≈ 15 at grokking (p = 53)",
              decide=("crystallization", "rank_at_grok", "crystallization_authors", "rank_at_grok_authors"),
              bearing=("d_model", "d_mlp", "p", "weight_decay", "lr", "epochs"), needs=NEEDS_02),
    Statement("A7", ACE, "02_grokking_cores",
              "At grokking the core's shift operator becomes a rotation: its eigenvalues lock onto the unit circle.",
              "§4", "unit-circle fraction ≈ 1 at grokking, lower before; operator R² ≈ 1 after, low before",
              decide=("unit_circle_fraction_at_grok", "unit_circle_fraction_before", "operator_r2_before",
                      "operator_r2_after", "unit_circle_fraction_at_grok_authors",
                      "unit_circle_fraction_before_authors", "operator_r2_before_authors",
                      "operator_r2_after_authors"),
              bearing=("d_model", "d_mlp", "p", "weight_decay", "lr", "epochs"), needs=NEEDS_02),
    Statement("A8", ACE, "02_grokking_cores",
              "Under continued weight decay the core inflates: its necessary dimensions grow while its sufficient "
              "dimensions stay flat.",
              "§4", "necessary rank 15 → 60 (× 4); sufficient rank flat (× 1)",
              decide=("necessary_rank_growth", "sufficient_rank_growth", "necessary_rank_growth_authors",
                      "sufficient_rank_growth_authors"),
              bearing=("d_model", "d_mlp", "p", "weight_decay", "lr", "epochs"), needs=NEEDS_02),
    Statement("A9", ACE, "02_grokking_cores",
              "Weight decay spreads the solution over every equivalent Fourier mode.",
              "§4", "27 modes at the end (all ⌊p/2⌋ + 1)",
              decide=("modes_final", "modes_final_authors"),
              bearing=("d_model", "d_mlp", "p", "weight_decay", "lr", "epochs"), needs=NEEDS_02),
    Statement("A10", ACE, "02_grokking_cores",
              "Without weight decay there is no inflation.",
              "§4", "the ω = 0 branch's necessary rank stays flat",
              decide=("wd0_necessary_rank_growth", "wd0_necessary_rank_growth_authors"),
              bearing=("d_model", "d_mlp", "p", "lr", "epochs", "fork_epoch")),
    Statement("A11", ACE, "03_grokking_scaling_law",
              "The time to grok falls as the inverse of the weight decay: τ_grok ∝ 1/ω.",
              None, "exponent of τ in ω: −1.02",
              decide=("omega_exponent", "collapse_omega"),
              bearing=("d_model", "d_mlp", "lr", "weight_decays", "omega_p", "omega_batch_size", "seeds")),
    Statement("A12", ACE, "03_grokking_scaling_law",
              "The time to grok falls as the inverse of the modulus: τ_grok ∝ 1/p, so τ·ω·p is one constant.",
              None, "exponent of τ in p ≈ −1; τ·ω·p collapses to one level",
              decide=("p_exponent", "collapse_p_far", "log_law_r2"),
              shown=("p_exponent_all_moduli", "collapse_max_min", "collapse_cv", "log_law_p_c"),
              bearing=("d_model", "d_mlp", "lr", "p_values", "sweep_weight_decay", "seeds")),
    # ---------------------------------------------------------------- ACE: language models (chapter 04)
    Statement("A13", ACE, "04_llm_agreement_axis",
              "Subject–verb agreement runs through a one-dimensional causal axis in the late layers of every model, "
              "whose dimension does not grow with model size.",
              None, "sufficient rank 1 in six models (117M–32B), in late layers",
              decide=("sufficient_rank[*]", "chosen_layer[*]", "core_auroc[*]"), bearing=("models",),
              needs=NEEDS_04),
    Statement("A14", ACE, "04_llm_agreement_axis",
              "The axis is necessary and sufficient for agreement.",
              None, "keep-only AUROC ≈ the model's; removing the axis leaves chance (0.5)",
              decide=("keep_only_auroc[*]", "remove_auroc[*]"), shown=("at_layer_L[*]",), bearing=("models",),
              needs=NEEDS_04),
    Statement("A15", ACE, "04_llm_agreement_axis",
              "The projection on the axis predicts the singular–plural logit margin.",
              None, "the margin is a linear function of the core coordinate",
              decide=("margin_r2[*]",), bearing=("models",), needs=NEEDS_04),
    Statement("A16", ACE, "04_llm_agreement_axis",
              "Flipping the axis inverts grammatical number, through open-ended generation.",
              None, "the flipped core reverses the margin and the verbs generated",
              decide=("flip_auroc[*]", "flip_rate[*]", "generation_flip_rate[*]",
                      "generation_flip_rate_authors_steering[*]"),
              shown=("generation_flip_rate_greedy[*]",), bearing=("models",), needs=NEEDS_04),
    Statement("A17", ACE, "04_llm_agreement_axis",
              "Core coordinates agree across models.",
              None, "Spearman ρ up to 0.93 between models",
              decide=("cross_model_spearman",), bearing=("models",), needs=NEEDS_04),
    # ---------------------------------------------------------------- eNTK: MLP (chapter 05)
    Statement("E1", ENTK, "05_entk_mlp_modular",
              "The MLP's eNTK spectrum has a first cliff of size 4⌊p/2⌋ spanned by the Fourier features of a and b.",
              "§4", "first cliff 56 eigenvalues (p = 29); alignment with the a, b features ≈ 0.985",
              decide=("cliff1_size", "cliff1_alignment_ab")),
    Statement("E2", ENTK, "05_entk_mlp_modular",
              "A second cliff spans the sum and difference features cos ω(a ± b).",
              "§4", "second cliff 56; alignment 26.47/28 (a + b) and 25.21/28 (a − b)",
              decide=("cliff2_size", "cliff2_alignment_sum", "cliff2_alignment_diff")),
    Statement("E3", ENTK, "05_entk_mlp_modular",
              "The second cliff's alignment is weak at initialisation and rises in training, fastest near grokking.",
              "§4", "weak at initialisation; its derivative peaks near the grokking onset",
              decide=("alignment_peak_near_grok",), checks=("alignment_at_init",),
              note="alignment_at_init is a check: any random initialisation satisfies it, so it cannot fail."),
    # ---------------------------------------------------------------- eNTK: transformer (chapter 06)
    Statement("E4", ENTK, "06_entk_transformer_modular",
              "The transformer uses a sparse, seed-dependent set of key frequencies.",
              "§4", "a few key frequencies carry the embedding's Fourier power",
              decide=("key_frequency_sparsity",), models=("2", "3")),
    Statement("E5a", ENTK, "06_entk_transformer_modular",
              "The MLP's input kernel aligns with the input features cos ω_k a + cos ω_k b.",
              "§4, Table 2", "aligned",
              decide=("mlp_in_input_alignment",), models=("2", "3"),
              note="E5 of the audit split in two: its MLP half and its attention half have different verdicts."),
    Statement("E5b", ENTK, "06_entk_transformer_modular",
              "The attention's input kernels (W_Q, W_K, W_V) align with the input features.",
              "§4, Table 2", "aligned",
              decide=("attention_W_Q_input_alignment", "attention_W_K_input_alignment",
                      "attention_W_V_input_alignment"), models=("2", "3"),
              note="E5 of the audit split in two: its MLP half and its attention half have different verdicts."),
    Statement("E6", ENTK, "06_entk_transformer_modular",
              "The MLP-output and unembedding kernels align with the sum features cos ω_k(a + b).",
              "§4, Table 2", "W_U 0.9912 (sum) and 0.985 (input), seed 2",
              decide=("unembed_sum_alignment_seed2", "unembed_input_alignment_seed2", "unembed_sum_alignment_seed3",
                      "unembed_input_alignment_seed3", "mlp_out_sum_alignment", "mlp_out_input_alignment"),
              models=("2", "3")),
    Statement("E7", ENTK, "06_entk_transformer_modular",
              "The alignment rises in training, its derivative peaking near grokking.",
              "§4, Fig. 3", "peak at epoch 150 (the figure's dashed line)",
              decide=("alignment_peak_epoch_seed2",), shown=("grokking_epochs_seed2", "grokking_epochs_seed3"),
              checks=("alignment_at_init",),
              note="alignment_at_init is a check: any random initialisation satisfies it, so it cannot fail."),
    # ---------------------------------------------------------------- eNTK: Gemma (chapter 07)
    Statement("E8", ENTK, "07_entk_gemma_grammar",
              "At layer 16 the eNTK's directions separate word classes better than PCA's 25 directions.",
              "Table 3", "macro AUROC 0.827 against 0.745; 7 of 8 classes",
              decide=("pos_macro_auroc_diff", "pos_macro_ap", "pos_macro_auroc_diff_paper", "pos_macro_auroc_entk",
                      "pos_macro_auroc_pca", "pos_classes_entk_wins"),
              shown=("best_layer", "layer_chosen_on_train"), bearing=BEARING_07, always_differs=GEMMA_07, needs=NEEDS_07),
    Statement("E9", ENTK, "07_entk_gemma_grammar",
              "… and morphological features better than PCA, on all but one.",
              None, "macro AUROC 0.783 against 0.743; all but one label",
              decide=("morph_macro_auroc_diff", "morph_macro_auroc_diff_paper", "morph_macro_auroc_entk",
                      "morph_macro_auroc_pca", "morph_features_entk_wins"),
              bearing=BEARING_07, always_differs=GEMMA_07, needs=NEEDS_07),
    Statement("E10", ENTK, "07_entk_gemma_grammar",
              "The top-activating examples of the eigendirections read as grammatical features.",
              None, "qualitative (examples)", bearing=BEARING_07, always_differs=GEMMA_07,
              note="Qualitative: the chapter shows the examples; no claim tests them."),
)

#: The book's own hypotheses (chapters 08 and 09, and the claims over more models than a paper shows).
OWN: tuple[Statement, ...] = (
    Statement("B1", BOOK, "01_markov_cores",
              "A rank-deficient chain gives a core of its own rank, and the cores still align.",
              None, "—",
              decide=("core_rank_deficient", "cca_min_deficient", "eig_max_error_deficient",
                      "r2_core_over_oracle_deficient", "keep_only_ratio_deficient",
                      "remove_only_accuracy_deficient")),
    Statement("B2", BOOK, "03_grokking_scaling_law",
              "A log law τ = −Ω log(1 − p_c/p) describes the p sweep better than a power law.",
              None, "—", decide=("log_law_vs_power_law_aic",)),
    Statement("B3", BOOK, "06_entk_transformer_modular",
              "The unembedding's alignment holds on every model that generalises, not only the paper's two.",
              None, "—", decide=("unembed_sum_alignment", "unembed_input_alignment",
                                 "attention_W_O_input_alignment", "attention_summed_input_alignment")),
    Statement("B4", BOOK, "08_two_lenses",
              "ACE's core and the eNTK's top eigenvectors find the same subspace at the unembedding.",
              None, "—", decide=("lenses_coincide_at_unembedding", "lenses_gain_over_init",
                                 "unembedding_kernel_is_closest", "ace_core_is_fourier",
                                 "lenses_coincide_at_unembedding_grok", "lenses_gain_over_init_grok",
                                 "unembedding_layer_is_closest_grok")),
    Statement("B5", BOOK, "08_two_lenses",
              "Each lens's subspace is what the model needs: keeping it suffices, removing it breaks the task.",
              None, "—", decide=("ace_subspace_sufficient", "ace_subspace_necessary", "entk_subspace_sufficient",
                                 "entk_subspace_necessary")),
    Statement("B6", BOOK, "08_two_lenses",
              "In training, the eNTK's alignment rises before ACE's core settles, and the core settles at grokking.",
              None, "—", decide=("entk_rises_before_core_settles", "core_settles_at_grokking")),
    Statement("B7", BOOK, "08_two_lenses",
              "On Gemma-3-270M the ACE agreement axis lies in the eNTK's top directions.",
              None, "—", decide=("ace_axis_separates_number", "entk_separates_number", "ace_axis_in_entk_span")),
    Statement("B8", BOOK, "09_merging_cores",
              "Two independently trained transformers cannot be averaged as they are, but can once their cores "
              "are aligned.",
              None, "—", decide=("naive_barrier", "spawned_pair_connected", "core_aligned_connects",
                                 "core_alignment_halves_barrier", "core_beats_pca")),
    Statement("B9", BOOK, "09_merging_cores",
              "One model's core can be stitched into another's in place of its own.",
              None, "—", decide=("core_stitch_sufficient", "same_keys_stitch_better")),
)
