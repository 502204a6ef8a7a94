"""Every run ends in verdicts: a null that could not be measured is recorded, not dropped (no crash), and a claim over
models covers those that passed their precondition (issue 68)."""
import math

from corekit.verdicts import Null, Spec, at_least, decide

SPEC = Spec("x", "paper", "a statistic", at_least(0.9))


def test_a_null_that_could_not_be_measured_is_recorded_as_such_not_dropped():
    claim = decide(SPEC, 0.5, null=Null("the memorising checkpoint", None))    # 08's G08: was "has no null"
    assert claim.verdict == "fail" and claim.nulls[0]["measured"] is False and claim.nulls[0]["value"] is None
    over = Spec("y", "paper", "a statistic", at_least(0.9), covers="the seeds")
    claim = decide(over, {"seed 0": 0.5}, null=Null("a control", {"seed 0": None}))
    assert claim.nulls[0]["measured"] is False
    assert decide(SPEC, math.nan, null=Null("a control", 0.1)).verdict == "fail"      # a NaN is measured, and fails
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
