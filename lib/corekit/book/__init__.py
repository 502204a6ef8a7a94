"""The book machinery, beside the science modules of ``corekit``: from a command line to an executed run and a site.

====================  ================================================================================
:mod:`.cli`           the ``corekit`` command (run, book, list): parses a request, resolves it once
:mod:`.execute`       runs one notebook through papermill into a private folder and swaps its outputs in
:mod:`.notebooks`     the book's root, its notebooks and table of contents
:mod:`.parameters`    a notebook's parameters cell, its profiles, the effective parameters of a run
:mod:`.paramspec`     what each parameter accepts, checked by ``corekit run`` and inside the notebook
:mod:`.source_hash`   the hash of a notebook, the library modules it imports and its parameters
:mod:`.runinfo`       the run record: versions, device, threads, git commit, model files and hashes
:mod:`.site`          staging executed notebooks into a Jupyter Book and building the HTML
:mod:`.portable`      repository-relative paths in everything a run publishes (no machine's paths)
:mod:`.publish`       the published edition: results/, the run record on each page, the results page
====================  ================================================================================

None of these modules is in a notebook's source hash: they decide where a run's outputs go and whether
a value is accepted, never what a run computes.
"""
