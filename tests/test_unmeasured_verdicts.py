"""Every run ends in verdicts: a statistic or a null that could not be measured gives an undecided claim with its
reason, never a crash, a fail on nothing, or a null silently dropped (issue 68)."""
import math

from corekit.verdicts import Null, Spec, at_least, decide, interval_contains

SPEC = Spec("x", "paper", "a statistic", at_least(0.9))


def test_a_statistic_that_could_not_be_measured_is_undecided_not_failed():
    claim = decide(SPEC, None, null=Null("a control", 0.1))
    assert claim.verdict == "undecided" and "could not be measured" in claim.reason
    assert decide(SPEC, math.nan, null=Null("a control", 0.1)).verdict == "fail"      # a NaN is measured, and fails
    ci = Spec("e", "paper", "an exponent", interval_contains(-1.0))
    claim = decide(ci, None, null=Null("permuted", 0.0, interval=(-0.5, 0.1)), interval=(math.nan, math.nan))
    assert claim.verdict == "undecided"                            # G03: was "fail" with no measured value


def test_a_null_that_could_not_be_measured_is_recorded_and_leaves_a_would_be_pass_undecided():
    claim = decide(SPEC, 0.95, null=Null("the memorising checkpoint", None))
    assert claim.verdict == "undecided" and "null could not be measured" in claim.reason
    assert claim.nulls[0]["measured"] is False and claim.nulls[0]["value"] is None
    over = Spec("y", "paper", "a statistic", at_least(0.9), covers="the seeds")
    claim = decide(over, {"seed 0": 0.95}, null=Null("a control", {"seed 0": None}))
    assert claim.verdict == "undecided"


def test_a_measured_fail_still_fails_and_a_measured_null_still_decides():
    assert decide(SPEC, 0.5, null=Null("a control", None)).verdict == "fail"
    assert decide(SPEC, 0.95, null=[Null("a", None), Null("b", 0.1)]).verdict == "pass"
    assert decide(SPEC, 0.95, null=[Null("a", None), Null("b", 0.95)]).verdict == "uninformative"


def test_a_claim_over_models_covers_the_models_that_passed_their_precondition():
    from corekit.verdicts import decide_over
    over = Spec("z", "paper", "a statistic", at_least(0.9), covers="the seeds")
    values = {"seed 0": 0.95, "seed 1": 0.2}                          # seed 1 never trained
    null = Null("untrained", {"seed 0": 0.1, "seed 1": 0.1})
    claim = decide_over(over, values, ["seed 0"], unqualified="seed 1 did not train", null=null)
    assert claim.verdict == "pass" and claim.measured == {"seed 0": 0.95} and "without seed 1" in claim.target
    assert claim.nulls[0]["value"] == {"seed 0": 0.1}
    failing = decide_over(over, {"seed 0": 0.5, "seed 1": 0.2}, ["seed 0"], unqualified="seed 1 did not train",
                          null=null)
    assert failing.verdict == "fail"                                  # a qualified model that fails still fails
    none = decide_over(over, values, [], unqualified="no seed trained", null=null)
    assert none.verdict == "undecided" and "no seed trained" in none.reason
