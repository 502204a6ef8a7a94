"""Fixtures shared by the command-line tests."""
import pytest

from corekit.runs import execute


@pytest.fixture
def no_kernel(monkeypatch):
    """Fail the test if corekit gets as far as starting a kernel."""
    def refuse(*args, **kwargs):
        raise AssertionError("a kernel was started for a refused request")
    monkeypatch.setattr(execute, "run_papermill", refuse)
