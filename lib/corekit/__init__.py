"""corekit: the library behind the book on algorithmic cores (ACE) and empirical-NTK features."""
from corekit.device import default_device

__all__ = ["default_device"]
__version__ = "0.1.0"
