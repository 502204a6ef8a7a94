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
