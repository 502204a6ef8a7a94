"""A model that has not learned passes none of its chapter's claims about learned structure (issue 35).

Chapters 01 and 05 run on their quick profile twice: as they are, and with ``-p lr 1e-9``, which leaves every
model at its initialisation. The second run must finish, record the same claim ids as the first, show accuracy at
chance, and give every claim that is not a numerical check or provenance the verdict fail, uninformative,
undecided or reported. Chapter 01 runs on smaller sizes than its quick profile (the same for both runs) to keep the
test to a few minutes on two cores.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from tinyrepo import REPO, corekit

from corekit.runs import paramspec
from corekit.runs.parameters import declared
from corekit.tasks import markov

pytestmark = pytest.mark.notebook

TIMEOUT_S = 1200
UNTRAINED = ("-p", "lr", "1e-9")
#: Chapter 01 at a smaller size than its quick profile (the ids do not depend on the sizes).
SIZES = {"01_markov_cores": ("-p", "n_train", "256", "-p", "n_test", "256", "-p", "seq_len", "16", "-p", "epochs", "1"),
         "05_entk_mlp_modular": ()}
#: Verdicts a claim about learned structure may have on a model that learned nothing.
NOT_PASSED = {"fail", "uninformative", "undecided", "reported"}


def run(name: str, out: Path, *args: str) -> dict:
    """Return the metrics of `corekit run NAME ARGS` into ``out`` (which must succeed)."""
    done = corekit("run", name, *SIZES[name], *args, "--out", str(out), timeout=TIMEOUT_S)
    assert done.returncode == 0, f"corekit run {name} {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return json.loads((out / f"{name}.metrics.json").read_text())


def claim(metrics: dict, id: str) -> dict:
    """Return the claim ``id`` of a metrics record."""
    return next(c for c in metrics["claims"] if c["id"] == id)


@pytest.mark.parametrize("name", ["01_markov_cores", "05_entk_mlp_modular"])
def test_lr_1e_9_is_accepted(name):
    parameter = declared(name, REPO)["lr"]
    rule = paramspec.accepts(parameter.default, parameter.help)
    paramspec.check_parameter("lr", parameter.help, rule, 1e-9, Path.cwd())


@pytest.mark.parametrize("name", ["01_markov_cores", "05_entk_mlp_modular"])
def test_an_untrained_model_passes_no_claim_about_learned_structure(name, tmp_path):
    default = run(name, tmp_path / "default")
    untrained = run(name, tmp_path / "untrained", *UNTRAINED)
    assert [c["id"] for c in untrained["claims"]] == [c["id"] for c in default["claims"]]
    passed = [c["id"] for c in untrained["claims"] if c["verdict"] not in NOT_PASSED and not c.get("no_null")]
    assert not passed, f"{name} with lr 1e-9 passes {passed}"
    if name == "01_markov_cores":
        for chain, suffix in (("transition", ""), ("transition_deficient", "_deficient")):
            T = markov.validate_transition(untrained["parameters"][chain])
            chance, bayes = markov.stationary_guess_accuracy(T), markov.bayes_accuracy(T)
            accuracy = claim(untrained, f"model_accuracy{suffix}")["measured"]
            assert all(a < (chance + bayes) / 2 for a in accuracy.values()), (chain, accuracy, chance, bayes)
    else:
        p = untrained["parameters"]["p"]
        assert claim(untrained, "final_test_accuracy")["measured"] <= 3 / p      # chance is 1/p
