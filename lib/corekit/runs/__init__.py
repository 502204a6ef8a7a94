"""The run machinery, behind one wall: from a command line to an executed, recorded and published run.

Nothing outside this package imports it (``tests/test_imports.py``); it imports the science freely. A notebook uses
two of its modules, :mod:`.session` (its first cell) and :mod:`.claims` (its claims), and those two are in the
notebook's source hash; the others decide where a run's outputs go and whether a value is accepted, never what a run
computes, and are left out of it (:data:`.source_hash.NOT_HASHED`).

====================  ================================================================================
:mod:`.session`       a notebook's first cell: figure style, claims, parameter checks, device, threads
:mod:`.claims`        the notebook's half of the run record: claims as tests with nulls, the metrics file
:mod:`.cli`           the ``corekit`` command (run, book, list): parses a request, resolves it once
:mod:`.execute`       runs one notebook through papermill into a private folder and swaps its outputs in
:mod:`.owned`         what a command may delete or replace: only what it made, never through a link
:mod:`.notebooks`     the book's root, its notebooks, their table of contents and what each chapter declares
:mod:`.parameters`    a notebook's parameters cell, its profiles, the effective parameters of a run
:mod:`.paramspec`     what each parameter accepts, checked by ``corekit run`` and inside the notebook
:mod:`.checks`        each chapter's rules among its parameters, checked before a kernel starts
:mod:`.source_hash`   the hash of a notebook, the library modules it imports and its parameters
:mod:`.site`          staging executed notebooks into a Jupyter Book and building the HTML
:mod:`.portable`      repository-relative paths in everything a run publishes (no machine's paths)
:mod:`.publish`       the published edition: results/, the run record on each page, the results page
:mod:`.errors`        the one-line errors of the ``corekit`` command
====================  ================================================================================

The run record's environment (versions, device, commit, model hashes) is :mod:`corekit.runinfo`, below both the
machinery and the language models that record their weights with it.
"""
