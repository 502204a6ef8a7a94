"""Sphinx extension: a "Get the code" line at the end of every page.

It says how to get and build the book (``git clone`` of the repository named by ``repository.url`` in
``_config.yml``, linked when set, then ``make book``) and, on a chapter, the ``corekit run`` line that reproduces its
run (``corekit_run_commands``: {page: command}, which ``corekit book`` writes into the staged configuration).
"""
from __future__ import annotations

import html

from sphinx.application import Sphinx


def repository_name(url: str) -> str:
    """Return the folder ``git clone URL`` makes ("https://host/owner/name.git" → "name")."""
    name = url.rstrip("/").rsplit("/", 1)[-1]
    return name[:-4] if name.endswith(".git") else name


def get_code_html(url: str, command: str | None) -> str:
    """Return the "Get the code" paragraph for a repository at ``url`` ("" when none is published) and a chapter's
    ``command`` (None on any other page)."""
    if url:
        clone = (f'<a class="reference external" href="{html.escape(url, quote=True)}">the repository</a>: '
                 f"<code>git clone {html.escape(url)} &amp;&amp; cd {html.escape(repository_name(url))}</code>, then ")
    else:
        clone = "clone this book's repository (its address is not published with this build), then, in it, "
    line = (f"<strong>Get the code</strong>: {clone}<code>make book</code> (installs everything into "
            "<code>.venv</code> and builds this book from the published runs)")
    if command:
        line += f"; this chapter's run: <code>.venv/bin/{html.escape(command)}</code>"
    return f'<p class="corekit-get-code">{line}.</p>'


def add_get_code(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Append the "Get the code" line to the body of every page made from a source (not the index or search)."""
    if doctree is None or "body" not in context:
        return
    url = str((app.config.html_theme_options or {}).get("repository_url") or "")
    context["body"] += get_code_html(url, (app.config.corekit_run_commands or {}).get(pagename))


def setup(app: Sphinx) -> dict:
    """Return the extension's metadata after registering its configuration value and hooking it into each page."""
    app.add_config_value("corekit_run_commands", {}, "html")
    app.connect("html-page-context", add_get_code)
    return {"parallel_read_safe": True}
