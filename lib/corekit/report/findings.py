"""Each chapter's strongest finding in one sentence, computed from its run's claims (None when they are missing)."""
from __future__ import annotations

from typing import Callable


def _claims(claims: list[dict]) -> dict[str, dict]:
    """Return {claim id: claim}."""
    return {c["id"]: c for c in claims}


def _n(x: object) -> str:
    """Return a number with four significant digits."""
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def _null(claim: dict, starts: str):
    """Return the value of the claim's null whose description starts with ``starts``, else None."""
    return next((n.get("value") for n in claim.get("null") or [] if str(n.get("what", "")).startswith(starts)), None)


def markov(c: dict[str, dict]) -> str:
    """01: the cores align and recover the spectrum; the orthogonality is there before training."""
    cca, eig, init = c["cca_min"]["measured"], c["eig_max_error"]["measured"], c["weight_cosine_init"]["measured"]
    return (f"The three models' cores are linear images of one another (smallest canonical correlation "
            f"{_n(min(cca.values()))}) and each recovers the chain's spectrum (largest eigenvalue error "
            f"{_n(max(eig.values()))}); their near-orthogonal weights are a premise, not a finding: the untrained "
            f"models' weights are as far apart (cosine {_n(init)}).")


def grokking(c: dict[str, dict]) -> str:
    """02: the core at grokking is compact; its necessary rank grows afterwards, with weight decay or without."""
    rank, growth = c["rank_at_grok"]["measured"], c["necessary_rank_growth"]["measured"]
    wd0 = _null(c["necessary_rank_growth"], "the same seed in the ω → 0 branch")
    sufficient = c["sufficient_rank_growth"]["measured"]
    joined = lambda values: ", ".join(_n(v) for v in values.values())  # noqa: E731
    return (f"The core at grokking is compact (energy rank {joined(rank)} over the seeds, the paper ≈ 15) and its "
            f"necessary rank then grows {joined(growth)}-fold (the paper ≈ 4)"
            + (f", but the ω → 0 branch's grows too ({joined(wd0)}-fold)" if isinstance(wd0, dict) else "")
            + f"; its sufficient rank changes {joined(sufficient)}-fold (the paper: it stays flat).")


def scaling(c: dict[str, dict]) -> str:
    """03: the exponents of τ in ω and p against the paper's −1, and how memorisation moves with p."""
    times = c["times_per_modulus"]["measured"]
    first, last = next(iter(times)), list(times)[-1]
    said = {"pass": "as the paper says", "uninformative": "as the paper says, but so does its null",
            "fail": "not as the paper says"}
    omega, p_exp = c["omega_exponent"], c["p_exponent"]
    return (f"Grokking's delay scales as ω^{_n(omega['measured'])} (the paper: −1.02; "
            f"{said.get(omega['verdict'], omega['verdict'])}) and as p^{_n(p_exp['measured'])} over the larger moduli "
            f"(the paper: −1; {said.get(p_exp['verdict'], p_exp['verdict'])}); from {first} to {last} the training "
            f"set is fitted at step {times[first][0]} → {times[last][0]} while the test set "
            f"is at step {times[first][1]} → {times[last][1]}.")


def agreement(c: dict[str, dict]) -> str:
    """04: the difference of class means does what the ACE axis does."""
    parts = []
    for key in (k for k in c if k.startswith("core_auroc[")):
        model = key[len("core_auroc["):-1]
        means = _null(c[key], "the difference-of-means")
        if means is not None:
            parts.append(f"{model}: {_n(means)} against the axis's {_n(c[key]['measured'])}")
    return ("The plain difference of the two classes' means separates number as well as the ACE axis or better "
            f"(held-out AUROC, {'; '.join(parts)}).") if parts else None


def mlp(c: dict[str, dict]) -> str:
    """05: the second cliff is the learned one."""
    return (f"The second cliff of the MLP's eNTK is the learned one: it aligns with the sum and difference features "
            f"({_n(c['cliff2_alignment_sum']['measured'])} and {_n(c['cliff2_alignment_diff']['measured'])} of their "
            f"maximum), while the first cliff is there at initialisation.")


def transformer(c: dict[str, dict]) -> str:
    """06: the unembedding aligns, the attention's query and key do not."""
    q = c["attention_W_Q_input_alignment"]["measured"]
    return (f"On the paper's seed 2 the unembedding's kernel aligns with the sum features "
            f"({_n(c['unembed_sum_alignment_seed2']['measured'])}), but the attention's query kernel does not "
            f"(largest over the seeds {_n(max(q.values()))}).")


def gemma(c: dict[str, dict]) -> str:
    """07: the eNTK beats PCA, by less than the paper's margin."""
    pos = c["pos_macro_auroc_diff"]
    low, high = pos.get("interval") or (None, None)
    return (f"The eNTK's directions beat PCA's on word classes by {_n(pos['measured'])} macro AUROC (95 % interval "
            f"{_n(low)}–{_n(high)}; the paper {_n(pos.get('paper'))}) and on morphology by "
            f"{_n(c['morph_macro_auroc_diff']['measured'])}.")


def two_lenses(c: dict[str, dict]) -> str:
    """08: the two lenses coincide at the unembedding, as do their controls."""
    claim = c["lenses_coincide_at_unembedding"]
    same = claim["measured"]
    passing = [n["what"] for n in claim.get("null") or [] if n.get("passes")]
    control = f", but so do {' and '.join(passing)}: where both read the logits, agreement tests neither" \
        if passing else ""
    return (f"The two lenses find the same subspace at the unembedding (overlap ≥ {_n(min(same.values()))} on every "
            f"seed){control}.")


def merging(c: dict[str, dict]) -> str:
    """09: aligning the cores connects two models."""
    naive, aligned = c["naive_barrier"]["measured"], c["core_aligned_connects"]["measured"]
    pca = c["core_beats_pca"]
    return (f"Averaging two independently trained models breaks them (barrier ≥ {_n(min(naive.values()))}); aligning "
            f"their cores first connects them (barrier ≤ {_n(max(aligned.values()))}), and aligning as many principal "
            f"components does nearly as well (its barrier {_n(pca['measured'])} higher on average).")


FINDINGS: dict[str, Callable[[dict[str, dict]], str | None]] = {
    "01_markov_cores": markov, "02_grokking_cores": grokking, "03_grokking_scaling_law": scaling,
    "04_llm_agreement_axis": agreement, "05_entk_mlp_modular": mlp, "06_entk_transformer_modular": transformer,
    "07_entk_gemma_grammar": gemma, "08_two_lenses": two_lenses, "09_merging_cores": merging,
}


def finding(chapter: str, claims: list[dict]) -> str | None:
    """Return the chapter's strongest finding in one sentence, None when its run lacks a claim it reads."""
    make = FINDINGS.get(chapter)
    if make is None:
        return None
    try:
        return make(_claims(claims))
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
