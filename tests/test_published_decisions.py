"""The published runs against the rules their verdicts follow: an undecided claim over models names every model that
fails it (the reason holds for the seed that would fail it), and chapter 03's p law is decided where its run reaches
three moduli past 3 p_c. Read from results/ (a stale run, shown with a warning, keeps its old claims, which are
checked as recorded)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from corekit.chapters import grokking_cores
from corekit.runs import publish
from corekit.runs.notebooks import Notebook

REPO = Path(__file__).resolve().parents[1]

PUBLISHED = sorted(p.parent.name for p in (REPO / "results").glob("*/metrics.json"))


def _current(name: str) -> dict | None:
    """Return the published run's metrics: what the book shows, current or stale (a stale run is shown with a warning
    and its recorded verdicts must follow the same rules); None when there is no published run."""
    run = publish.published_run(REPO, name)
    return None if run is None else run.metrics


@pytest.mark.parametrize("name", PUBLISHED)
def test_an_undecided_claim_names_every_model_that_fails_it(name):
    metrics = _current(name)
    if metrics is None:
        pytest.skip(f"{name}: no published run")
    for claim in metrics["claims"]:
        if claim["verdict"] != "undecided" or not claim.get("models"):
            continue
        undecided_part = re.split(r" \(\d+ of \d+ models satisfy", claim["reason"])[0]   # "Undecided: <regime> for seed 0; …"
        for model in claim["models"]["failing"]:
            assert re.search(rf"\b{re.escape(model)}\b", undecided_part), \
                f"{name} {claim['id']}: {model} fails it, but the undecided reason does not name it: " + claim["reason"]


def test_chapter_03_decides_the_p_law_when_three_moduli_lie_past_3_p_c():
    metrics = _current("03_grokking_scaling_law")
    if metrics is None:
        pytest.skip("03 has no published run")
    claims = {c["id"]: c for c in metrics["claims"]}
    p_c = claims["log_law_p_c"]["measured"][0]
    far = [p for p in metrics["parameters"]["p_values"] if p >= 3 * p_c]
    if len(far) >= 3:
        assert claims["p_exponent"]["verdict"] in ("pass", "fail", "uninformative"), claims["p_exponent"]["reason"]
        assert claims["p_exponent"].get("interval") is not None
    for tested in ("collapse_omega", "collapse_p_far", "omega_exponent", "log_law_vs_power_law_aic"):
        assert claims[tested]["verdict"] != "reported", tested
    for reported in ("times_per_modulus", "probe_paper_lr", "p_exponent_of_log_law", "collapse_max_min"):
        assert claims[reported]["verdict"] == "reported", reported


def test_chapter_02_at_p_53_is_undecided_only_inside_a_regime_its_numbers_show():
    """02's published cpu run is at the paper's p 53; each undecided claim's reason quotes the statistic of its regime
    (an untrained model's R² at the same fit rank, or fit ranks beside p − 1) and every model that fails the claim is in
    it by those numbers, not by the wording alone."""
    metrics = _current("02_grokking_cores")
    if metrics is None:
        pytest.skip("02 has no published run")
    if metrics.get("profile") == "cpu":
        assert metrics["parameters"]["p"] == 53, "02's cpu profile is the paper's modulus at a smaller width"
    p = metrics["parameters"]["p"]
    seeds = [f"seed {s}" for s in metrics["parameters"]["seeds"]]
    stale = publish.stale_reason(Notebook(REPO, "02_grokking_cores"), metrics) is not None
    for claim in metrics["claims"]:
        if claim["verdict"] != "undecided":
            continue
        reason, failing = claim["reason"], (claim.get("models") or {}).get("failing", [])
        untrained = re.search(r"an untrained model that already gives R² > ([\d.]+) at the same fit rank \(\[([^\]]*)\]\)",
                              reason)
        exact = re.search(r"fit rank within 2 of p − 1", reason)
        setting = re.search(r"at its own setting, and this run's setting differs \((.*?)\); the paper profile", reason)
        assert untrained or exact or setting, f"02 {claim['id']}: a regime this test does not know: {reason}"
        if setting:
            assert setting.group(1) == "; ".join(grokking_cores.setting_differences(metrics["parameters"])), reason
            if not stale:                      # a stale run keeps the rule it was decided by (a later one may differ)
                assert claim["id"].removesuffix("_authors") in grokking_cores.AT_PAPER_SETTING, reason
        if untrained:
            level, values = float(untrained.group(1)), [float(v) for v in untrained.group(2).split(",")]
            for model in failing:
                assert values[seeds.index(model)] > level, f"02 {claim['id']}: {model}'s untrained R² is not above " \
                                                           f"{level}: {reason}"
        if exact:
            ranks = re.search(r"Fit rank \[([^\]]*)\] before, \[([^\]]*)\] at grokking, \[([^\]]*)\] at the end", reason)
            assert ranks, reason
            stages = [[int(r) for r in group.split(",")] for group in ranks.groups()]
            for model in failing:
                assert any(p - 1 - stage[seeds.index(model)] <= 2 for stage in stages), \
                    f"02 {claim['id']}: {model}'s fit ranks lie far from p − 1 = {p - 1}: {reason}"
