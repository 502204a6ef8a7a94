"""The errors the ``corekit`` command reports as one line, with their exit statuses."""
from __future__ import annotations


class CorekitError(Exception):
    """A bad request (unknown name, missing file): printed as one message, exit status 2."""

    exit_code = 2


class ExecutionFailed(CorekitError):
    """A notebook that raised or wrote no metrics: exit status 1."""

    exit_code = 1


class Interrupted(CorekitError):
    """A run stopped by Ctrl-C (SIGINT): exit status 130, as a shell reports it."""

    exit_code = 130


class Problems(CorekitError):
    """Several bad files or values found at once: one ``corekit: error: ...`` line each, exit status 2."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = list(problems)


def syntax_error(path: object, err: SyntaxError, line: int | None = None, what: str = "does not compile") -> CorekitError:
    """Return the one-line error for the Python source ``path`` that does not parse: its file, its ``line`` (default:
    the error's own), what Python says and the line itself, shortened."""
    line = line if line is not None else err.lineno
    text = (err.text or "").strip()
    shown = f": {text[:80] + ('…' if len(text) > 80 else '')!r}" if text else ""
    return CorekitError(f"{path}{f', line {line}' if line else ''}: {what} ({err.msg}){shown}; fix that line")
