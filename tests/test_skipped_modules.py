"""The session check of tests/skipped_modules.py, run on throwaway test files with pytester: a module that skips
every case it ran fails the session; deselection, FILE::TEST arguments, xfail and module-level skips do not."""
import pytest
from skipped_modules import AllSkippedModules

pytest_plugins = ["pytester"]

ALL_SKIPPED = """
import pytest

@pytest.mark.parametrize("n", [1, 2])
def test_skips(n):
    pytest.skip("the model is not here")
"""
SOME_SKIPPED = """
import pytest

def test_runs():
    assert True

@pytest.mark.slow
def test_skips():
    pytest.skip("no GPU")
"""


@pytest.fixture
def run(pytester):
    """Return a function running pytest in-process on the files given, with the plugin, and returning the result."""
    pytester.makeini("[pytest]\nmarkers =\n    slow: a slow case\n")

    def run_with(*args, **files):
        pytester.makepyfile(**files)
        return pytester.runpytest(*args, plugins=[AllSkippedModules()])
    return run_with


def test_a_module_that_skips_every_case_fails_the_session(run):
    result = run(test_all=ALL_SKIPPED, test_some=SOME_SKIPPED)
    result.assert_outcomes(passed=1, skipped=3)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*test modules that skipped every case*",
                                 "test_all.py: all 2 cases skipped (e.g. 'the model is not here'), so it tests nothing here"])
    assert "test_some.py:" not in result.stdout.str()


def test_a_skip_in_a_fixture_counts_as_a_skip(run):
    source = ("import pytest\n\n@pytest.fixture\ndef gpu():\n    pytest.skip('needs a CUDA GPU')\n\n"
              "def test_one(gpu):\n    pass\n")
    result = run(test_fixture=source)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["test_fixture.py: all 1 case skipped (e.g. 'needs a CUDA GPU')*"])


def test_a_failure_elsewhere_keeps_its_status_and_the_module_is_still_named(run):
    result = run(test_all=ALL_SKIPPED, test_fails="def test_fails():\n    assert False\n")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["test_all.py: all 2 cases skipped*"])


def test_modules_that_run_a_case_pass(run):
    xfail = "import pytest\n\n@pytest.mark.xfail(reason='known')\ndef test_x():\n    assert False\n"
    result = run(test_some=SOME_SKIPPED, test_xfail=xfail)
    result.assert_outcomes(passed=1, skipped=1, xfailed=1)
    assert result.ret == pytest.ExitCode.OK
    assert "skipped every case" not in result.stdout.str()


HEAVY = "import pytest\n\npytestmark = pytest.mark.slow\n" + ALL_SKIPPED


@pytest.mark.parametrize("args, passed", [(("-m", "not slow"), 1), (("-m", "slow"), 0), (("-k", "not runs"), 0),
                                          (("--deselect", "test_some.py::test_runs"), 0)],
                         ids=["m-whole-module", "m-part", "k-part", "deselect-part"])
def test_deselected_modules_are_not_judged(run, args, passed):
    """A module whose cases -m, -k or --deselect deselected, whole or in part, passes even when what is left skips."""
    result = run(*args, test_some=SOME_SKIPPED, **({"test_heavy": HEAVY} if passed else {}))
    result.assert_outcomes(passed=passed, skipped=1 - passed)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert "skipped every case" not in result.stdout.str()


def test_a_module_that_keeps_every_case_under_k_is_judged(run):
    result = run("-k", "not runs", test_some=SOME_SKIPPED, test_heavy=HEAVY)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["test_heavy.py: all 2 cases skipped*"])
    assert "test_some.py:" not in result.stdout.str()


def test_a_case_named_on_the_command_line_may_skip(run):
    result = run("test_some.py::test_skips", test_some=SOME_SKIPPED)
    result.assert_outcomes(skipped=1)
    assert result.ret == pytest.ExitCode.OK


def test_a_module_skipped_while_imported_is_not_judged(run):
    source = "import pytest\n\npytest.importorskip('no_such_module_here')\n\ndef test_x():\n    pass\n"
    result = run(test_import=source, test_some=SOME_SKIPPED)
    assert result.ret == pytest.ExitCode.OK


def test_a_session_stopped_early_is_not_judged(run):
    source = "import pytest\n\ndef test_a():\n    pytest.skip('later')\n\ndef test_b():\n    assert False\n"
    result = run("-x", test_a=source, test_b=ALL_SKIPPED)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "skipped every case" not in result.stdout.str()
