"""corekit: the library behind the book on algorithmic cores (ACE) and empirical-NTK features.

Three wings and the run machinery:

- networks and their data: :mod:`.models`, :mod:`.train`, :mod:`.recipes` (the papers' training recipes),
  :mod:`.tasks`, :mod:`.lm`, :mod:`.curves`;
- the two methods and their measuring tools: :mod:`.ace`, :mod:`.entk`, :mod:`.subspaces` (subspace geometry),
  :mod:`.merging` (barriers, symmetries, Re-Basin, stitching), :mod:`.fourier` (Z_p features), :mod:`.probes`,
  :mod:`.stats`, :mod:`.scaling`, :mod:`.oracle`;
- the chapters: :mod:`.chapters`, one module per notebook, named after it, importing the two wings above;
- the run machinery: :mod:`.runs` (the ``corekit`` command, runs, claims, the published edition), which nothing
  above imports. :mod:`.runinfo`, :mod:`.device` and :mod:`.plots` serve all of them.

Modules are imported on use (``from corekit import ace``) so that the ``corekit`` command starts fast.
"""
__version__ = "0.1.0"
