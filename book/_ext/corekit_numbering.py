"""Sphinx extension: figures and tables numbered per page, prefixed on a chapter by its number ("Fig. 2.3").

Sphinx numbers figures across the whole book when the table of contents is not numbered ("Fig. 46" in chapter
08). After Sphinx assigns its numbers, each page's figures are renumbered from 1 in page order; on a chapter
notebook (``notebooks/NN_name``) the number carries the chapter's ``NN``, which matches its file and title.
"""
from __future__ import annotations

import re

from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment

CHAPTER = re.compile(r"(?:^|/)notebooks/(\d+)_[^/]+$")


def chapter_number(docname: str) -> int | None:
    """Return the chapter number of a notebook page (``notebooks/02_x`` → 2), None for any other page."""
    match = CHAPTER.search(docname)
    return int(match.group(1)) if match else None


def renumber(app: Sphinx, env: BuildEnvironment) -> list[str]:
    """Renumber every page's figures (and tables, code blocks) from 1; return the pages whose numbers changed."""
    changed = []
    for docname, by_type in env.toc_fignumbers.items():
        prefix = () if chapter_number(docname) is None else (chapter_number(docname),)
        for figtype, numbers in by_type.items():
            order = sorted(numbers, key=lambda target: numbers[target])
            new = {target: prefix + (i,) for i, target in enumerate(order, start=1)}
            if new != numbers:
                by_type[figtype] = new
                changed.append(docname)
    return sorted(set(changed))


def setup(app: Sphinx) -> dict:
    """Return the extension's metadata after hooking the renumbering in after Sphinx's own numbering."""
    app.connect("env-get-updated", renumber, priority=900)
    return {"parallel_read_safe": True}
