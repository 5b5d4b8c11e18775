"""One plotting style for the whole book, readable in the site's light and dark themes
and at its column width.

Backgrounds are transparent, so the page colour shows through; text, axes, lines and the
colormaps' ends use mid tones that keep enough contrast on white and on the dark theme's
near-black (``contrast`` measures it; tests/test_figure_ink.py checks it).

A figure is drawn at most as wide as the site's text column (COLUMN_INCHES at DPI dots
per inch is the column's width in CSS pixels), so the site shows it at its drawn size
and a 9-point label reads as 9 points. Notebooks show it at twice the pixels and half
the size ("retina"), so it stays sharp when enlarged.

    >>> fig, ax = figure(height=3.5)
    >>> lines = ax.plot([0, 100, 200], [4.2, 2.9, 2.5], label="train")
    >>> label(ax, "Training loss", "step", "cross-entropy (nats)").get_title()
    'Training loss'
"""

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from cycler import cycler
from matplotlib.collections import PathCollection
from matplotlib.colors import ListedColormap, to_rgb
from matplotlib.transforms import offset_copy

# CSS pixels per inch: at this resolution a point on the figure is a point on the page
DPI = 96
# the site's text column, as tests/test_browser.py measures it: 676 CSS px in a
# 1,280 px window, 772 at 1,400
COLUMN_INCHES = 7.0
# panels side by side; more make each too narrow to label at MIN_FONT_POINTS
MAX_COLUMNS = 3
MIN_FONT_POINTS = 9

# the page behind a figure: white in the site's light theme, and the background of
# sphinx-book-theme's dark one
LIGHT_PAGE = "#ffffff"
DARK_PAGE = "#121212"


def contrast(colour, background) -> float:
    """WCAG 2 contrast ratio of two colours, from 1:1 (the same) to 21:1 (black on
    white); text needs 4.5:1, other marks 3:1.

    >>> round(contrast("#767676", "white"), 2), round(contrast("black", "white"), 1)
    (4.54, 21.0)
    """
    lighter, darker = sorted(
        (float(luminance(to_rgb(colour))), float(luminance(to_rgb(background)))),
        reverse=True,
    )
    return (lighter + 0.05) / (darker + 0.05)


def luminance(rgb) -> np.ndarray:
    """WCAG relative luminance of sRGB colours, channels in 0-1 on the last axis (a
    colour or an image): the channels made linear, weighted by the eye's sensitivity.

    >>> luminance([1.0, 1.0, 1.0]).round(4), luminance([0.0, 0.0, 1.0]).round(4)
    (np.float64(1.0), np.float64(0.0722))
    """
    channels = np.asarray(rgb, dtype=float)
    linear = np.where(
        channels <= 0.04045, channels / 12.92, ((channels + 0.055) / 1.055) ** 2.4
    )
    return linear @ np.array([0.2126, 0.7152, 0.0722])


# Mid grey for text, axes and reference lines. No grey reaches the 4.5:1 that text needs
# on both pages (the best, #797979, reaches 4.3:1 on each); this one reaches it on the
# light page: contrast() gives 4.54:1 on white and 4.12:1 on #121212.
INK = "#767676"
# Mid-tone hues, each with contrast >= 2.9:1 on white and >= 4.8:1 on #121212 (neither
# pastel nor dark).
COLORS = [
    "#4a90d9",
    "#e07b1a",
    "#3d9e58",
    "#e0504f",
    "#a071cf",
    "#b8931a",
    "#2e9f98",
    "#d0609c",
]


def _cut(name: str, low: float, high: float, new_name: str) -> ListedColormap:
    """Matplotlib's colormap ``name`` between fractions ``low`` and ``high`` of its
    range, stretched over the whole range of a map registered as ``new_name`` (the
    style's default map must be a registered name)."""
    cmap = ListedColormap(
        mpl.colormaps[name](np.linspace(low, high, 256)), name=new_name
    )
    if new_name not in mpl.colormaps:
        mpl.colormaps.register(cmap)
    return cmap


# Heatmaps of values from low to high (attention weights, masks) and the default map.
# Viridis less its darkest fifth, whose near-black purple vanishes on the dark page:
# its darkest colour has contrast 2.13:1 on #121212 (its yellow top, 1.26:1 on white,
# is viridis's own).
SEQUENTIAL = _cut("viridis", 0.2, 1.0, "minformers_sequential")
# Signed values centred on zero (white there): RdBu's middle 80%, so that both ends are
# mid-tones, with contrast 2.69:1 (red) and 3.13:1 (blue) on #121212.
DIVERGING = _cut("RdBu", 0.1, 0.9, "minformers_diverging")

STYLE = {
    "figure.facecolor": "none",
    "axes.facecolor": "none",
    "savefig.transparent": True,
    "figure.dpi": DPI,
    "font.size": 10,
    "axes.titlesize": 11,
    "figure.titlesize": 12,
    "axes.labelsize": 10,
    "xtick.labelsize": MIN_FONT_POINTS,
    "ytick.labelsize": MIN_FONT_POINTS,
    "legend.fontsize": MIN_FONT_POINTS,
    "legend.title_fontsize": MIN_FONT_POINTS,
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
    "lines.linewidth": 1.8,
    "legend.frameon": False,
    "image.cmap": SEQUENTIAL.name,  # for maps drawn without a cmap (contours, imshow)
}


def use_style() -> None:
    """Apply the book's style to every figure created afterwards
    (and sharp figures in Jupyter)."""
    mpl.rcParams.update(STYLE)
    try:
        from IPython import get_ipython
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:  # plain Python: nothing is displayed inline
        return
    if get_ipython() is not None:
        set_matplotlib_formats("retina")


def figure(
    nrows: int = 1,
    ncols: int = 1,
    height: float | None = None,
    width: float = COLUMN_INCHES,
):
    """New figure in the book's style, ``width`` and ``height`` in inches for
    the whole figure.

    The width is at most the column's; the height defaults to 3.4 inches a row.
    Returns (fig, axes) as ``plt.subplots`` does: one Axes for 1 x 1, else an array.
    """
    if width > COLUMN_INCHES:
        raise ValueError(
            f"width {width} in is wider than the page's column ({COLUMN_INCHES} in): "
            "the site would shrink the figure and its labels; use more rows instead"
        )
    if ncols > MAX_COLUMNS:
        raise ValueError(
            f"{ncols} panels side by side are too narrow to read; use at most "
            f"{MAX_COLUMNS} a row"
        )
    use_style()
    height = 3.4 * nrows if height is None else height
    return plt.subplots(nrows, ncols, figsize=(width, height), layout="constrained")


def label(ax, title: str, xlabel: str, ylabel: str):
    """Set title and axis labels together (so none is forgotten); add a legend if
    anything is labelled, off the data (``place_legend``)."""
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if ax.get_legend_handles_labels()[1]:
        place_legend(ax)
    return ax


# Matplotlib's places for a legend in a panel, in the order loc="best" tries them
LEGEND_PLACES = (
    "upper right",
    "upper left",
    "lower left",
    "lower right",
    "right",
    "center left",
    "center right",
    "lower center",
    "upper center",
    "center",
)


def place_legend(ax):
    """The panel's legend in the first of matplotlib's places where it covers nothing
    drawn so far; if there is none, off the panel (``legend_off_the_data``).
    Matplotlib's loc="best" takes the place that covers the fewest points, which may
    still cover many.

    The place is chosen in the figure's layout when the legend is placed: draw the data
    first, and place the legend yourself if the layout changes much afterwards (a colour
    bar or another panel's long tick labels in the same column narrow this panel)."""
    legend = ax.legend()
    ax.figure.draw_without_rendering()  # lays the figure out, as it will be drawn
    for place in LEGEND_PLACES:
        legend.set_loc(place)
        if not covers_data(ax, legend.get_window_extent()):
            return legend
    return legend_off_the_data(ax)


def legend_outside(ax):
    """The panel's legend to its right, off the data (constrained layout narrows the
    panel to make room)."""
    return ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)


def legend_below(ax, ncols: int = 1):
    """The panel's legend under its x-axis label, off the data (constrained layout
    shortens the panel to make room): for a panel with others beside it, which a
    legend to its right would narrow."""
    if ax.get_legend() is not None:
        ax.get_legend().remove()
    ax.figure.draw_without_rendering()
    # the ticks and the x label below the panel, in points: the same at any panel size
    below = (ax.bbox.y0 - ax.get_tightbbox().y0) * 72 / ax.figure.dpi
    return ax.legend(
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        bbox_transform=offset_copy(
            ax.transAxes, ax.figure, y=-below - 4, units="points"
        ),
        borderaxespad=0.0,
        ncols=ncols,
    )


def legend_off_the_data(ax):
    """The panel's legend to its right if it is the only panel of its row, else below
    it (to its right, it would take a third or half of a narrow panel's width)."""
    grid = ax.get_subplotspec()
    beside_others = grid is not None and grid.get_gridspec().ncols > 1
    return legend_below(ax) if beside_others else legend_outside(ax)


def legend_covers_data(ax) -> bool:
    """Whether the panel's legend, where the figure's layout puts it, lies over any of
    its lines, markers, points, areas or bars.

    >>> fig, ax = figure()
    >>> lines = ax.plot([0, 1], [0, 1], label="diagonal")
    >>> legend_covers_data(ax), legend_covers_data(ax.legend(loc="center").axes)
    (False, True)
    """
    legend = ax.get_legend()
    if legend is None:
        return False
    ax.figure.draw_without_rendering()
    return covers_data(ax, legend.get_window_extent())


def covers_data(ax, box) -> bool:
    """Whether ``box`` (in display pixels; a legend's includes its padding) lies over
    what the panel draws: lines (their segments, not only their points), markers,
    scatter points, areas (fill_between, filled contours) and bars."""
    for line in ax.get_lines():
        path = line.get_transform().transform_path(line.get_path())
        drawn = line.get_linestyle() not in ("None", "")
        if drawn and path.intersects_bbox(box, filled=False):
            return True
        if line.get_marker() not in ("None", "", None, " "):
            reach = line.get_markersize() / 2 * ax.figure.dpi / 72
            if box.padded(reach).count_contains(path.vertices):
                return True
    for collection in ax.collections:
        if isinstance(collection, PathCollection):  # scatter: a marker at each offset
            points = collection.get_offset_transform().transform(
                collection.get_offsets()
            )
            if box.count_contains(points):
                return True
            continue
        # lines (vlines, contours) or areas (fill_between, filled contours)
        filled = bool(np.any(collection.get_facecolor()[:, 3]))
        transform = collection.get_transform()
        if any(
            transform.transform_path(path).intersects_bbox(box, filled=filled)
            for path in collection.get_paths()
        ):
            return True
    return any(box.overlaps(patch.get_window_extent()) for patch in ax.patches)
