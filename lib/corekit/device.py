"""Device selection: CUDA when present, the CPU otherwise, with a clear error for a missing GPU."""
from __future__ import annotations

import torch


def default_device(requested: str | None = None) -> torch.device:
    """Return ``requested`` as a torch.device ("cpu", "cuda", "cuda:1", "auto"/None = best available)."""
    if requested in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(requested)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {requested!r}") from err
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {requested!r} was asked for but this machine has no CUDA GPU; "
                             "use device='cpu' or 'auto'")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"device {requested!r} does not exist: {torch.cuda.device_count()} GPU(s) present")
    return device
