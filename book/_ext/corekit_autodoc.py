"""Sphinx extension for the API pages: module constants that are paths show their name, not this machine's path."""
from __future__ import annotations

from pathlib import PurePath

from sphinx.application import Sphinx
from sphinx.ext.autodoc import DataDocumenter


class PathHidingDataDocumenter(DataDocumenter):
    """Document a module constant as usual, but without the value when it is a file-system path."""

    def should_suppress_value_header(self) -> bool:
        """Return True for a path value (it would print the building machine's folders)."""
        return isinstance(self.object, PurePath) or super().should_suppress_value_header()


def setup(app: Sphinx) -> dict:
    """Return the extension's metadata after replacing autodoc's data documenter."""
    app.setup_extension("sphinx.ext.autodoc")
    app.add_autodocumenter(PathHidingDataDocumenter, override=True)
    return {"parallel_read_safe": True}
