"""Fixtures shared by the command-line tests, and the check that no test module skips every case it runs."""
import os

import pytest
from skipped_modules import AllSkippedModules

from corekit.device import cpu_threads, use_cpu_threads
from corekit.runs import execute


def pytest_configure(config):
    """Fail the session when a test module it ran whole skipped every case (tests/skipped_modules.py); in a
    pytest-xdist worker, compute on one thread (the workers share the cores: corekit.device.cpu_threads)."""
    config.pluginmanager.register(AllSkippedModules(), "corekit-all-skipped-modules")
    if os.environ.get("PYTEST_XDIST_WORKER"):
        use_cpu_threads(cpu_threads())


@pytest.fixture
def no_kernel(monkeypatch):
    """Fail the test if corekit gets as far as starting a kernel."""
    def refuse(*args, **kwargs):
        raise AssertionError("a kernel was started for a refused request")
    monkeypatch.setattr(execute, "run_papermill", refuse)
