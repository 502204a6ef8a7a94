"""One matplotlib style for the whole book, and the figure types several chapters share.

Figures have opaque white backgrounds so they stay readable in a dark-mode browser. :class:`Figures`
saves them as PNG files into ``OUTPUT_DIR/figures/NAME/`` when a notebook's ``output_dir`` is set, and
nowhere otherwise (the executed notebook shows them).
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Sequence

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np

STYLE = {
    "figure.facecolor": "white",
    "axes.facecolor": "white",
    "savefig.facecolor": "white",
    "savefig.transparent": False,
    "savefig.bbox": "tight",
    "figure.dpi": 150,
    "savefig.dpi": 150,
    "figure.figsize": (6.0, 3.6),
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 8,
    "legend.frameon": False,
    "font.size": 10,
    "axes.prop_cycle": mpl.cycler(color=["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00",
                                         "#56B4E9", "#F0E442", "#000000"]),
}


def use_style() -> None:
    """Apply the book's matplotlib style (opaque backgrounds, colour-blind-safe cycle)."""
    mpl.rcParams.update(STYLE)
    try:  # inline figures in a notebook get the same opaque background
        from IPython import get_ipython
        shell = get_ipython()
        if shell is not None:
            shell.run_line_magic("config", "InlineBackend.print_figure_kwargs = {'facecolor': 'white', "
                                           "'bbox_inches': 'tight'}")
    except ImportError:
        pass


#: The figures saved in this process: folder → {file name: sha256 of the file as saved}.
_SAVED: dict[Path, dict[str, str]] = {}


def saved_figures(folder: str | Path) -> dict[str, str]:
    """Return {file name: sha256} of the figures :meth:`Figures.save` wrote into ``folder`` in this process."""
    return dict(_SAVED.get(Path(folder).expanduser().resolve(), {}))


class Figures:
    """Where a notebook's figures go: ``OUTPUT_DIR/figures/NOTEBOOK/NAME.png``, or nowhere when ``output_dir`` is empty."""

    def __init__(self, output_dir: str | Path, notebook: str):
        self.folder = Path(output_dir).expanduser().resolve() / "figures" / notebook if output_dir else None

    def save(self, fig: plt.Figure, name: str) -> Path | None:
        """Return the path ``fig`` was saved to as ``NAME.png`` (None when the notebook has no output folder); its
        sha256 is kept for the run's metrics (:func:`saved_figures`)."""
        if self.folder is None:
            return None
        path = self.folder / f"{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, facecolor="white", transparent=False)
        _SAVED.setdefault(self.folder, {})[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
        return path


def heatmap(ax: plt.Axes, matrix: np.ndarray, labels: Sequence[str], title: str,
            vmin: float = 0.0, vmax: float = 1.0, cmap: str = "viridis", fmt: str = "{:.2f}") -> None:
    """Draw an annotated square matrix with row and column ``labels``."""
    matrix = np.asarray(matrix, dtype=float)
    im = ax.imshow(matrix, vmin=vmin, vmax=vmax, cmap=cmap)
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right")
    ax.set_yticks(range(len(labels)), labels)
    ax.grid(False)
    for i in range(matrix.shape[0]):
        for j in range(matrix.shape[1]):
            value = matrix[i, j]
            colour = "white" if (value - vmin) < 0.5 * (vmax - vmin) else "black"
            ax.text(j, i, fmt.format(value), ha="center", va="center", fontsize=8, color=colour)
    ax.set_title(title)
    ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)


def complex_plane(ax: plt.Axes, reference: np.ndarray | None = None, unit_circle: bool = True) -> None:
    """Prepare ``ax`` as the complex plane (equal axes, unit circle) with optional reference eigenvalues."""
    if unit_circle:
        t = np.linspace(0, 2 * np.pi, 256)
        ax.plot(np.cos(t), np.sin(t), color="0.6", lw=0.8, zorder=0)
    if reference is not None:
        reference = np.asarray(reference)
        ax.scatter(reference.real, reference.imag, s=160, facecolors="none", edgecolors="black", lw=1.5,
                   label="reference", zorder=3)
    ax.axhline(0, color="0.8", lw=0.6)
    ax.axvline(0, color="0.8", lw=0.6)
    ax.set_aspect("equal")
    ax.set_xlabel("Re λ")
    ax.set_ylabel("Im λ")


def panel_grid(n: int, ncols: int = 2, panel: tuple[float, float] = (5.0, 3.4), **kwargs) -> tuple[plt.Figure, np.ndarray]:
    """Return (figure, axes of shape (n,)) with ``n`` panels laid out ``ncols`` to a row, unused slots removed.

    Legible at the book's text width: a figure of many panels grows downwards, not sideways. ``kwargs`` go to
    matplotlib's ``subplots`` (``sharex``, ``sharey``, ...); the layout is constrained.
    """
    if n < 1:
        raise ValueError(f"n: expected at least one panel, got {n}")
    ncols = max(1, min(ncols, n))
    nrows = -(-n // ncols)
    kwargs.setdefault("layout", "constrained")
    fig, axes = plt.subplots(nrows, ncols, figsize=(panel[0] * ncols, panel[1] * nrows), squeeze=False, **kwargs)
    for ax in axes.flat[n:]:
        ax.remove()
    return fig, axes.flat[:n]


def integer_ticks(ax: plt.Axes, axis: str = "x") -> None:
    """Put ticks of ``axis`` ("x", "y" or "both") on integers only: for axes that count layers or ranks."""
    from matplotlib.ticker import MaxNLocator
    for name in ("x", "y") if axis == "both" else (axis,):
        getattr(ax, f"{name}axis").set_major_locator(MaxNLocator(integer=True))
