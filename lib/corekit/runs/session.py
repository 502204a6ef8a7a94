"""A notebook's first lines, once for every chapter: the figure style, the claims, the checks, the device.

Every notebook starts ``claims, figures, dev = setup("NN_name", globals())`` right after its parameters cell. This
module is in each notebook's source hash (:mod:`corekit.runs.source_hash`): the thread count it sets can change a
number in the last bits, so a change here marks the published runs stale.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import torch

    from corekit.plots import Figures
    from corekit.runs.claims import Claims


class Session(NamedTuple):
    """What a notebook's first cell hands to the rest of the notebook."""

    claims: Claims
    figures: Figures
    device: torch.device


def setup(notebook: str, namespace: dict) -> Session:
    """Return (claims, figures, device) of the run of ``notebook`` whose globals are ``namespace``.

    In order: the book's figure style; every parameter checked against its declaration
    (:class:`corekit.runs.claims.Claims`); a name papermill injected that the notebook does not declare refused, then
    the chapter's rules among its values (its chapter module's ``check_inputs``); the ``device`` parameter resolved ("auto": CUDA
    when present) and recorded in the run's parameters; torch and the BLAS libraries limited to the thread count of
    :func:`corekit.device.cpu_threads` (the ``cpu_threads`` parameter when above 0, else the cores free now), which
    the run record keeps. Prints one line: the device and that thread count.
    """
    from corekit import plots
    from corekit.device import cpu_threads, default_device, use_cpu_threads
    from corekit.runs import checks
    from corekit.runs.claims import Claims
    from corekit.runs.parameters import check_namespace

    plots.use_style()
    claims = Claims(notebook, namespace=namespace)
    figures = plots.Figures(namespace.get("output_dir") or "", notebook)
    values = check_namespace(notebook, namespace)
    check = checks.chapter_check(notebook)
    if check is not None:
        check(values)
    device = default_device(namespace.get("device"))
    threads = use_cpu_threads(cpu_threads(namespace.get("cpu_threads", 0)))
    claims.resolve(device=str(device))
    print(f"{notebook}: computing on {device}" + (f" with {threads} CPU thread{'s' * (threads != 1)}"
                                                   if device.type == "cpu" else ""))
    return Session(claims, figures, device)
