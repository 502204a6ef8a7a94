"""corekit: the library behind the book on algorithmic cores (ACE) and empirical-NTK features.

Modules are imported on use (``from corekit import ace``) so that the ``corekit`` command starts fast.
"""
__version__ = "0.1.0"
