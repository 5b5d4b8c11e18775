"""One plotting style for the whole book, readable in the site's light and dark themes.

Backgrounds are transparent, so the page colour shows through; text, axes and lines use mid tones
that keep enough contrast on white and on near-black.

    >>> fig, ax = figure(width=6, height=3.5)
    >>> lines = ax.plot([0, 100, 200], [4.2, 2.9, 2.5], label="train")
    >>> label(ax, "Training loss", "step", "cross-entropy (nats)").get_title()
    'Training loss'
"""

import matplotlib as mpl
import matplotlib.pyplot as plt
from cycler import cycler

INK = "#868686"  # mid grey: WCAG contrast 3.6:1 on white and 5.2:1 on #111111, so it reads on both
# Mid-tone hues, each with contrast >= 2.9:1 on white and >= 4.8:1 on #111111 (neither pastel nor dark).
COLORS = ["#4a90d9", "#e07b1a", "#3d9e58", "#e0504f", "#a071cf", "#b8931a", "#2e9f98", "#d0609c"]

STYLE = {
    "figure.facecolor": "none",
    "axes.facecolor": "none",
    "savefig.transparent": True,
    "figure.dpi": 110,
    "font.size": 11,
    "axes.titlesize": 13,
    "axes.labelsize": 11,
    "xtick.labelsize": 10,
    "ytick.labelsize": 10,
    "legend.fontsize": 10,
    "text.color": INK,
    "axes.labelcolor": INK,
    "axes.titlecolor": INK,
    "axes.edgecolor": INK,
    "xtick.color": INK,
    "ytick.color": INK,
    "axes.grid": True,
    "grid.color": INK,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.prop_cycle": cycler(color=COLORS),
    "lines.linewidth": 2.0,
    "legend.frameon": False,
    "image.cmap": "viridis",  # perceptually uniform, and readable on both backgrounds
}


def use_style() -> None:
    """Apply the book's style to every figure created afterwards."""
    mpl.rcParams.update(STYLE)


def figure(nrows: int = 1, ncols: int = 1, width: float = 6.4, height: float = 4.0):
    """New figure in the book's style; ``width`` and ``height`` in inches for the whole figure.

    Returns (fig, axes) as ``plt.subplots`` does: a single Axes for 1 x 1, else an array of them.
    """
    use_style()
    return plt.subplots(nrows, ncols, figsize=(width, height), layout="constrained")


def label(ax, title: str, xlabel: str, ylabel: str):
    """Set title and axis labels together (so none is forgotten); add a legend if anything is labelled."""
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if ax.get_legend_handles_labels()[1]:
        ax.legend()
    return ax
