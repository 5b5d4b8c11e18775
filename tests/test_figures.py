"""Figures are drawn for the page they appear on: no wider than its column, labels of at least 9 points, and
each one numbered and captioned.

The site shows a figure at the width it was drawn (`plotting.figure` refuses anything wider than the column,
and tests/test_site.py checks the built pages), so a font size in points is its size on the page. These tests
keep every figure on that path: drawn through `figure`, with no font set below the minimum.
"""

import ast
import re
from pathlib import Path

import jupytext
import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from minformers.support import plotting
from notebooks import chapters

ROOT = Path(__file__).resolve().parent.parent

NAMED_SIZES = {"xx-small", "x-small", "small", "smaller"}  # below font.size, which is near the minimum


def test_a_figure_wider_than_the_column_or_too_many_panels_is_refused():
    with pytest.raises(ValueError, match="wider than the page's column"):
        plotting.figure(width=plotting.COLUMN_INCHES + 0.5)
    with pytest.raises(ValueError, match="too narrow to read"):
        plotting.figure(1, plotting.MAX_COLUMNS + 1)
    fig, axes = plotting.figure(2, 2)
    assert tuple(fig.get_size_inches()) == (plotting.COLUMN_INCHES, 6.8)
    assert fig.dpi == plotting.DPI


def test_the_style_sets_no_font_below_the_minimum():
    sizes = {key: value for key, value in plotting.STYLE.items() if key.endswith(("size", "fontsize"))}
    assert sizes, "the style names its font sizes"
    assert all(value >= plotting.MIN_FONT_POINTS for value in sizes.values()), sizes


def font_sizes_set(code: str):
    """(line, value) of each `fontsize=` / `size=` keyword given a literal in the code."""
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.keyword) and node.arg in {"fontsize", "labelsize", "size"}:
            if isinstance(node.value, ast.Constant):
                yield node.lineno, node.value.value


def too_small(value) -> bool:
    return value in NAMED_SIZES if isinstance(value, str) else value < plotting.MIN_FONT_POINTS


def figure_cells(source: Path):
    """(index, cell) of each code cell that draws a figure: one that calls `figure()` or `plt.show()`, or one
    that says it draws (figure metadata) through a page's own helper, such as optimizers' `draw_paths`."""
    for index, cell in enumerate(jupytext.read(source).cells):
        draws = re.search(r"\bfigure\(|plt\.show\(\)", cell.source)
        if cell.cell_type == "code" and (draws or "figure" in cell.metadata.get("mystnb", {})):
            yield index, cell


def code_cells(source: Path):
    return [(index, cell.source) for index, cell in enumerate(jupytext.read(source).cells)
            if cell.cell_type == "code" and not cell.source.lstrip().startswith(("%", "!"))]


@pytest.mark.parametrize("source", chapters(), ids=lambda path: path.stem)
def test_chapters_draw_through_the_book_figure_and_set_no_small_font(source):
    problems = []
    for index, code in code_cells(source):
        if re.search(r"plt\.(subplots|figure)\(|figsize=", code):
            problems.append(f"cell {index} makes a figure without plotting.figure")
        problems += [f"cell {index}, line {line}: font size {value!r}" for line, value in font_sizes_set(code)
                     if too_small(value)]
    assert not problems, problems


def test_the_lib_sets_no_small_font():
    problems = [f"{path.name}:{line}: {value!r}" for path in (ROOT / "lib" / "minformers").rglob("*.py")
                for line, value in font_sizes_set(path.read_text()) if too_small(value)]
    assert not problems, problems


@pytest.mark.parametrize("source", chapters(), ids=lambda path: path.stem)
def test_every_figure_is_numbered_and_captioned(source):
    """A cell that draws a figure names it and captions it (`mystnb: {figure: {name, caption}}`), shows nothing
    else (myst-nb wraps every displayed output of the cell in that figure) and folds its code: the figure is what
    the reader came for, and the computation it plots sits in the cell above. Solutions are exempt."""
    problems = []
    for index, cell in figure_cells(source):
        if "solution" in cell.metadata.get("tags", []):
            continue
        options = cell.metadata.get("mystnb", {}).get("figure", {})
        if not (options.get("caption") and str(options.get("name", "")).startswith("fig-")):
            problems.append(f"cell {index}: no caption or no fig- name")
        if re.search(r"\bdisplay\(", cell.source):
            problems.append(f"cell {index}: displays something besides its figure")
        if "hide-input" not in cell.metadata.get("tags", []):
            problems.append(f"cell {index}: the drawing code is shown (tag it hide-input)")
    assert not problems, problems


def test_the_book_has_its_figures():
    """The rules above judge only the cells `figure_cells` finds, so they would pass on a detector that found
    none: the book had 59 figure cells when this was written; the floor of 50 leaves room to remove a few."""
    found = sum(len(list(figure_cells(source))) for source in chapters())
    assert found >= 50, f"only {found} figure cells found in the book"


def test_figure_names_are_unique_across_the_book():
    names = [cell.metadata["mystnb"]["figure"]["name"] for source in chapters() for _, cell in figure_cells(source)
             if "figure" in cell.metadata.get("mystnb", {})]
    assert len(names) == len(set(names)), sorted(name for name in names if names.count(name) > 1)


def test_the_rules_can_fail():
    assert [value for _, value in font_sizes_set("ax.legend(fontsize=7)\nax.set_title('x', size='small')")] == [
        7, "small"]
    assert too_small(7) and too_small("small") and not too_small(9) and not too_small("large")


def drawn(fig):
    fig.draw_without_rendering()
    return fig


def test_a_legend_over_the_data_is_moved_off_the_panel():
    """Three waves fill a lone panel: no place inside is free, so `label` puts the legend to its right. Beside
    another panel it goes below, under the x label: to its right it would take half the panel's width."""
    x = np.linspace(0, 1, 200)
    fig, ax = plotting.figure(height=3)
    for phase in (0, 2, 4):
        ax.plot(x, np.sin(12 * x + phase), label=f"a wave, phase {phase}")
    plotting.label(ax, "Waves", "x", "y")
    legend = drawn(fig).axes[0].get_legend().get_window_extent()
    assert legend.x0 >= ax.bbox.x1, (legend, ax.bbox)

    fig, (left, right) = plotting.figure(1, 2, height=3)
    for phase in (0, 2, 4):
        left.plot(x, np.sin(12 * x + phase), label=f"a wave, phase {phase}")
    plotting.label(left, "Waves", "x", "y")
    drawn(fig)
    legend = left.get_legend().get_window_extent()
    assert legend.y1 <= left.xaxis.label.get_window_extent().y0, "the legend is not below the x label"
    assert legend.x1 <= right.bbox.x0 + 1 and not plotting.legend_covers_data(left)


def test_a_legend_in_empty_space_stays_where_it_is_free():
    """Data in the lower half only: the legend stays in the panel, at the first of matplotlib's places (upper
    right) that covers nothing."""
    fig, ax = plotting.figure(height=3)
    ax.plot([0, 1], [0.0, 0.2], label="low")
    ax.plot([0, 1], [0.1, 0.0], label="lower")
    ax.set_ylim(0, 1)
    plotting.label(ax, "Low lines", "x", "y")
    drawn(fig)
    box = ax.get_legend().get_window_extent()
    assert ax.bbox.x0 < box.x0 and box.x1 < ax.bbox.x1 and box.y0 > (ax.bbox.y0 + ax.bbox.y1) / 2, (box, ax.bbox)
    assert box.x0 > (ax.bbox.x0 + ax.bbox.x1) / 2, "not upper right, the first place tried"
    assert not plotting.legend_covers_data(ax)


@pytest.mark.parametrize("draw, covered", [
    (lambda ax: ax.axhline(0.5), True),  # a line through the box, no point of it inside
    (lambda ax: ax.plot([0.5], [0.5], "o"), True),
    (lambda ax: ax.plot([0.05], [0.05], "o"), False),
    (lambda ax: ax.scatter([0.5], [0.5]), True),
    (lambda ax: ax.scatter([0.95], [0.05]), False),
    (lambda ax: ax.bar([0.5], [0.6], width=0.1), True),
    (lambda ax: ax.fill_between([0, 1], [0.3, 0.3], [0.7, 0.7]), True),
    (lambda ax: ax.fill_between([0, 1], [0, 0], [0.1, 0.1]), False),
], ids=["line across", "marker", "marker away", "point", "point away", "bar", "area", "area away"])
def test_legend_covers_data_sees_lines_points_bars_and_areas(draw, covered):
    fig, ax = plotting.figure(height=3)
    draw(ax)
    ax.plot([], [], label="a legend in the middle")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.legend(loc="center")
    assert plotting.legend_covers_data(ax) == covered


PANEL_WORD = re.compile(r"\b(?P<side>left|right|top|bottom|upper|lower)(?:-hand)? panel", re.IGNORECASE)
def figure_layouts(source: Path) -> list[tuple[int, int, int]]:
    """(cell index, rows, columns) of each `figure(...)` a page draws, as its arguments say: `figure(2, 1)`,
    `figure(ncols=2)`, `figure()` (one panel)."""
    layouts = []
    for index, code in code_cells(source):
        try:
            tree = ast.parse(code)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "figure":
                given = dict(zip(("nrows", "ncols"), node.args, strict=False))
                given |= {keyword.arg: keyword.value for keyword in node.keywords}
                rows, cols = (given.get(name, ast.Constant(1)) for name in ("nrows", "ncols"))
                layouts.append((index, getattr(rows, "value", 1), getattr(cols, "value", 1)))
    return layouts


def panels_misnamed(source: Path) -> list[str]:
    """Prose that names a panel the figures beside it do not have: "right panel" where the figure before and the
    one after both stack their panels in one column, "top panel" where both have one row. A panel "of the ...
    figure" is looked for in every figure of the page."""
    layouts = figure_layouts(source)
    problems = []
    for index, cell in enumerate(jupytext.read(source).cells):
        if cell.cell_type != "markdown":
            continue
        before = [layout for layout in layouts if layout[0] < index][-1:]
        after = [layout for layout in layouts if layout[0] > index][:1]
        for match in PANEL_WORD.finditer(cell.source):
            across = match["side"].lower() in ("left", "right")
            # "the bottom panel of the sentiment figure" names a figure elsewhere on the page
            named_elsewhere = cell.source[match.end():].startswith(" of the")
            nearby = layouts if named_elsewhere else before + after
            if not any((cols if across else rows) > 1 for _, rows, cols in nearby):
                problems.append(f"cell {index}: {match[0]!r}, but the figures beside it have no such panel")
    return problems


@pytest.mark.parametrize("source", chapters(), ids=lambda path: path.stem)
def test_prose_names_only_panels_the_figures_have(source):
    assert not panels_misnamed(source)


def test_a_misnamed_panel_is_found(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# P\n\nThe right panel shows it.\n\n```{code-cell} ipython3\nfig, axes = figure(2, 1)\n```\n")
    assert panels_misnamed(page) == ["cell 0: 'right panel', but the figures beside it have no such panel"]
    page.write_text("# P\n\nThe bottom panel shows it.\n\n```{code-cell} ipython3\nfig, axes = figure(2, 1)\n```\n")
    assert panels_misnamed(page) == []
