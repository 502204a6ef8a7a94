"""A pytest plugin that fails the session when a test module skipped every case it ran: such a file tests nothing, and
"N skipped" in the summary hides it (tests/test_profile_checks.py skipped all its cases for months this way).

A module is judged only when the session ran it whole: at least one of its cases ran, none was deselected (``-m``,
``-k``, ``--deselect``, ``--lf``), no argument named a case inside it (``FILE::TEST``), and the session was not
stopped early (``-x``, ``--maxfail``, ``--sw``, Ctrl-C). An expected failure (xfail) counts as run. A module skipped
whole while it is imported (``pytest.importorskip`` at module level) collects no case and is not judged.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest


def module_of(nodeid: str) -> str:
    """Return the module part of a node id ("tests/test_x.py" of "tests/test_x.py::test_y[1]")."""
    return nodeid.split("::", 1)[0]


def skip_reason(report: pytest.TestReport) -> str:
    """Return the reason a skipped case gave."""
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return reason.removeprefix("Skipped: ")


class AllSkippedModules:
    """Collects each case's outcome by module; at the end, fails the session for every module judged (see the module's
    docstring) whose cases all skipped, naming it with its count and most frequent skip reason."""

    def __init__(self) -> None:
        self.ran: dict[str, dict[str, bool]] = {}        # module -> {node id: ran (False: skipped)}
        self.reasons: dict[str, Counter] = {}            # module -> skip reasons
        self.deselected: set[str] = set()                # modules with a deselected case
        self.offenders: list[tuple[str, int, str]] = []  # (module, cases, most frequent reason)

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        """Remember the modules that lost a case to deselection: they did not run whole."""
        self.deselected.update(module_of(item.nodeid) for item in items)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Record whether the case ran (passed, failed or xfailed in any phase) or skipped (in setup or call)."""
        cases = self.ran.setdefault(module_of(report.nodeid), {})
        if report.skipped and not hasattr(report, "wasxfail"):
            cases[report.nodeid] = False
            self.reasons.setdefault(module_of(report.nodeid), Counter())[skip_reason(report)] += 1
        else:
            cases.setdefault(report.nodeid, True)

    @staticmethod
    def named_in_part(config: pytest.Config) -> set[str]:
        """Return the modules (as node ids) that an argument ``FILE::TEST`` asked for only in part."""
        modules = set()
        for arg in config.args:
            if "::" not in arg:
                continue
            path = (config.invocation_params.dir / module_of(arg)).resolve()
            try:
                modules.add(path.relative_to(config.rootpath.resolve()).as_posix())
            except ValueError:
                modules.add(Path(module_of(arg)).as_posix())
        return modules

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Find the modules judged whose cases all skipped; turn a passing exit status into a failing one."""
        if session.shouldfail or session.shouldstop or exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            return
        partial = self.deselected | self.named_in_part(session.config)
        self.offenders = [(module, len(cases), self.reasons[module].most_common(1)[0][0])
                          for module, cases in sorted(self.ran.items())
                          if module not in partial and cases and not any(cases.values())]
        if self.offenders and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter) -> None:
        """Name each module that skipped every case, with why, under a red heading."""
        if not self.offenders:
            return
        terminalreporter.write_sep("=", "test modules that skipped every case", red=True, bold=True)
        for module, count, reason in self.offenders:
            terminalreporter.write_line(f"{module}: all {count} case{'s' if count != 1 else ''} skipped "
                                        f"(e.g. {reason!r}), so it tests nothing here")
        terminalreporter.write_line("Make such a module run its cases on this machine, or remove it. The session fails "
                                    "for it (tests/skipped_modules.py; a module deselected in part by -m/-k, or named as "
                                    "FILE::TEST, is not judged).")
