"""Fixtures shared by the command-line tests, and the check that no test module skips every case it runs."""
import pytest
from skipped_modules import AllSkippedModules

from corekit.runs import execute


def pytest_configure(config):
    """Fail the session when a test module it ran whole skipped every case (tests/skipped_modules.py)."""
    config.pluginmanager.register(AllSkippedModules(), "corekit-all-skipped-modules")


@pytest.fixture
def no_kernel(monkeypatch):
    """Fail the test if corekit gets as far as starting a kernel."""
    def refuse(*args, **kwargs):
        raise AssertionError("a kernel was started for a refused request")
    monkeypatch.setattr(execute, "run_papermill", refuse)
