"""Each chapter's rules on its parameters beyond the parameters cell's, looked up by notebook name.

A chapter module (``corekit.chapters.NAME`` for notebook ``NN_NAME``) may define ``check_inputs(params)``: it takes the
notebook's parameter values as a dict (every parameter: profile, ``-p`` and defaults) and raises
:class:`corekit.inputs.ParameterError` with one line naming the parameter, its value and what is accepted (the
vocabulary is :mod:`corekit.inputs`). ``corekit run`` calls it before a kernel starts (:func:`chapter_check`); the
notebook calls it again in its first cell after the parameters, so that papermill, nbmake and Jupyter runs stop there
too.
"""
from __future__ import annotations

from typing import Callable

from corekit.runs.notebooks import chapter_module


def chapter_check(notebook: str) -> Callable[[dict], None] | None:
    """Return the ``check_inputs`` of notebook ``NN_NAME``'s chapter module ``corekit.chapters.NAME``, None when it has
    none."""
    module = chapter_module(notebook)
    return getattr(module, "check_inputs", None) if module is not None else None
