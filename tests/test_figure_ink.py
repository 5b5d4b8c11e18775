"""Figures keep their ink on both of the site's themes: white pages, and sphinx-book-theme's dark #121212.

Figures have transparent backgrounds, so every mark is drawn on both pages. The plotting module's INK, COLORS and
colormaps are chosen for that (their contrasts are checked here), and the pages use only those: no black, no
literal colour, no matplotlib colormap by name (checked statically, cell by cell). After the book build, every
figure of the site is laid on the dark page and searched for marks that vanish there.
"""

import ast
import os
import re
from pathlib import Path

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt

from minformers.support import plotting
from minformers.support.plotting import COLORS, DARK_PAGE, DIVERGING, INK, LIGHT_PAGE, SEQUENTIAL, contrast

ROOT = Path(__file__).resolve().parent.parent
SITE = Path(os.environ.get("MINFORMERS_SITE", ROOT / "_build" / "html")).resolve()

# keywords that take a colour; a page passes them INK, COLORS[i], "C0".."C7", or one of these
COLOUR_KEYWORDS = {"color", "c", "colors", "facecolor", "edgecolor", "facecolors", "edgecolors", "markerfacecolor",
                   "markeredgecolor", "mfc", "mec", "ecolor"}
ALLOWED = {"none", "white"}  # no colour at all, and white text or edges on a coloured bar
# a colour inside any string, wherever it is written (a variable, a dict): hex, Tableau and xkcd names
COLOUR_STRING = re.compile(r"^(#[0-9a-fA-F]{3,8}|tab:\w+|xkcd:.+)$")
# Axes methods whose positional strings are format strings, "[marker][line][colour]" such as "k--" or "o-"
FORMAT_METHODS = {"plot", "semilogx", "semilogy", "loglog", "errorbar"}
COLOUR_LETTERS = set("bgrcmykw")  # no marker or line style uses these letters
# a figure may hold fewer vanishing pixels than one tick mark covers (3.5 by 0.8 points at the site's 192 dots
# per inch: about 9 by 2 pixels, 20): room for antialiased edges where marks meet, never a whole mark
MAX_VANISHING_PIXELS = 20
VANISHING_CONTRAST = 1.5  # below this against the page, a mark is hard to see at all


def test_ink_and_colours_have_their_contrast():
    assert contrast(INK, LIGHT_PAGE) >= 4.5, "figure text needs 4.5:1 on the light page (WCAG AA)"
    assert contrast(INK, DARK_PAGE) >= 3.0
    assert {colour: round(contrast(colour, DARK_PAGE), 2) for colour in COLORS if contrast(colour, DARK_PAGE) < 3} == {}
    # the numbers plotting.py's comments state
    assert round(contrast(INK, LIGHT_PAGE), 2) == 4.54 and round(contrast(INK, DARK_PAGE), 2) == 4.12
    assert round(min(contrast(colour, DARK_PAGE) for colour in COLORS), 1) == 4.8


def test_contrast_holds_hand_computed_values():
    assert contrast("black", "white") == pytest.approx(21.0)
    assert contrast("#121212", "#121212") == 1.0
    assert contrast("white", "#767676") == contrast("#767676", "white")
    # #777777: each channel 0.4667 -> linear 0.1845, so (1 + 0.05) / (0.1845 + 0.05) = 4.48, just short of 4.5
    assert contrast("#777777", "white") == pytest.approx(4.48, abs=0.005)


def test_the_colormaps_keep_their_ends_visible_and_their_meaning():
    assert round(contrast(SEQUENTIAL(0.0), DARK_PAGE), 2) == 2.13
    assert [round(contrast(DIVERGING(end), DARK_PAGE), 2) for end in (0.0, 1.0)] == [2.69, 3.13]
    # still viridis's order (blue-purple to yellow) and RdBu's (red below zero, near white at zero, blue above)
    assert np.allclose(SEQUENTIAL(1.0), matplotlib.colormaps["viridis"](1.0))
    red, middle, blue = DIVERGING(0.0), DIVERGING(0.5), DIVERGING(1.0)
    assert red[0] > red[2] and blue[2] > blue[0]
    assert np.allclose(middle, matplotlib.colormaps["RdBu"](0.5), atol=0.01)
    assert matplotlib.colormaps[plotting.STYLE["image.cmap"]] == SEQUENTIAL
    fig, ax = plotting.figure(width=3, height=2)  # a map drawn without a cmap, such as optimizers' contours
    assert ax.imshow(np.eye(3)).get_cmap() == SEQUENTIAL
    plt.close(fig)


# ---- the pages' code: no literal colours


def code_cells(page: Path):
    """(first line, code) of each code cell of a MyST page, the line counted in the page; a cell's options and
    IPython lines (%magic, !shell) become blank lines, so line numbers stay the page's."""
    lines = page.read_text().splitlines()
    index = 0
    while index < len(lines):
        fence = re.match(r"^(`{3,})\{code-cell\}", lines[index])
        index += 1
        if not fence:
            continue
        start, body = index, []
        options_end = None  # the line that closes a "---" options block opening the cell
        if index < len(lines) and lines[index].strip() == "---":
            options_end = next(end for end in range(index + 1, len(lines)) if lines[end].strip() == "---")
        while index < len(lines) and lines[index].rstrip() != fence.group(1):
            line = lines[index]
            blank = (options_end is not None and index <= options_end) or line.startswith(":")
            body.append("" if blank or line.lstrip().startswith(("%", "!")) else line)
            index += 1
        yield start + 1, "\n".join(body)


def literal_strings(node) -> list[ast.Constant]:
    """String constants a colour argument can take: the value itself, either branch of `a if x else b`, or the
    items of a list or tuple. f-strings such as f"C{i}" are built from the palette's names and pass."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node]
    if isinstance(node, ast.IfExp):
        return literal_strings(node.body) + literal_strings(node.orelse)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [constant for item in node.elts for constant in literal_strings(item)]
    return []


def is_palette(value: str) -> bool:
    return value in ALLOWED or re.fullmatch(r"C\d", value) is not None


def is_rgb_tuple(node) -> bool:
    return (isinstance(node, (ast.Tuple, ast.List)) and len(node.elts) in (3, 4)
            and all(isinstance(item, ast.Constant) and isinstance(item.value, (int, float)) for item in node.elts))


def colour_literals(code: str) -> list[tuple[int, str]]:
    """(line, what) of each literal colour or colormap in the code, in the order written.

    >>> colour_literals('ax.plot(x, y, "k--")\\nax.axhline(0, color=INK)')
    [(1, "format string 'k--' names a colour")]
    """
    found = {}  # (line, column) of the literal -> what it is; a parent's reading of it comes first (ast.walk)
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.keyword) and node.arg in COLOUR_KEYWORDS:
            for constant in literal_strings(node.value):
                if not is_palette(constant.value):
                    found.setdefault((constant.lineno, constant.col_offset), f"{node.arg}={constant.value!r}")
            if is_rgb_tuple(node.value):
                found.setdefault((node.value.lineno, node.value.col_offset), f"{node.arg}= an RGB tuple")
        elif isinstance(node, ast.keyword) and node.arg == "cmap":
            for constant in literal_strings(node.value):
                found.setdefault((constant.lineno, constant.col_offset),
                                 f"cmap={constant.value!r} (use plotting.SEQUENTIAL or DIVERGING)")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and COLOUR_STRING.match(node.value):
            found.setdefault((node.lineno, node.col_offset), f"colour {node.value!r}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "get_cmap" and node.args:
                for constant in literal_strings(node.args[0]):
                    found.setdefault((constant.lineno, constant.col_offset),
                                     f"get_cmap({constant.value!r}) (use plotting's colormaps)")
            if node.func.attr in FORMAT_METHODS:
                formats = [arg for arg in node.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
                formats += [item.value for item in node.keywords if item.arg == "fmt"]
                for arg in formats:
                    if isinstance(arg, ast.Constant) and set(re.sub(r"C\d", "", str(arg.value))) & COLOUR_LETTERS:
                        found.setdefault((arg.lineno, arg.col_offset), f"format string {arg.value!r} names a colour")
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and (
                node.value.attr == "colormaps"):
            for constant in literal_strings(node.slice):
                found.setdefault((constant.lineno, constant.col_offset),
                                 f"colormaps[{constant.value!r}] (use plotting's colormaps)")
    return [(line, what) for (line, _), what in sorted(found.items())]


def test_the_checker_finds_each_kind_of_literal_colour():
    bad = "\n".join([
        'ax.plot(x, y, "k--")',
        'ax.plot(x, y, "o-", color="black")',
        'ax.axhline(0, color="0.55")',
        'ax.bar(x, y, color="C0" if a else "tab:orange", edgecolor="#000")',
        'ax.scatter(x, y, c=(0, 0, 0))',
        'ax.imshow(w, cmap="Blues")',
        'shade = plt.get_cmap("viridis")(0.5)',
        'colour = "#4a90d9"',
        'ax.errorbar(x, y, fmt="r.")',
        'ax.contour(x, y, z, colors=["grey"])',
        'm = matplotlib.colormaps["RdBu"]',
    ])
    assert [line for line, _ in colour_literals(bad)] == [1, 2, 3, 4, 4, 5, 6, 7, 8, 9, 10, 11]
    good = "\n".join([
        'ax.plot(x, y, "o-", color=f"C{i}", label="k")',
        'ax.plot(x, y, "--", color=COLORS[3])',
        'ax.axhline(0, color=INK, linestyle=":")',
        'ax.bar(x, y, color="C0" if a else "C1", edgecolor="white")',
        'ax.scatter(x, y, facecolors="none", edgecolors="C3")',
        'ax.imshow(w, cmap=SEQUENTIAL)',
        'ax.plot(x, y, "C2s-")',
        'styles = {"GPT": ("C2", "^")}',
    ])
    assert colour_literals(good) == []


def test_the_cell_reader_keeps_page_lines(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n```{code-cell} ipython3\n---\ntags: [hide-input]\n---\n%matplotlib inline\n"
                    'ax.plot(x, y, "k--")\n```\n\ntext\n\n```{code-cell} ipython3\n:tags: [x]\nprint(1)\n```\n')
    cells = list(code_cells(page))
    assert [start for start, _ in cells] == [4, 14]
    problems = [start + line - 1 for start, code in cells for line, _ in colour_literals(code)]
    assert problems == [8]  # the line of "k--" in the page


@pytest.mark.parametrize("page", sorted((ROOT / "book").glob("*.md")), ids=lambda path: path.stem)
def test_pages_draw_with_the_palette_only(page):
    problems = [f"{page.name}:{start + line - 1}: {what}" for start, code in code_cells(page)
                for line, what in colour_literals(code)]
    assert not problems, ("use INK for reference lines and neutral marks, 'C0'..'C7' or COLORS otherwise, and "
                          f"plotting.SEQUENTIAL or DIVERGING for maps: {problems}")


# ---- the built figures: nothing vanishes on the dark page


def vanishing_pixels(png: Path) -> int:
    """How many pixels of an image (alpha >= 0.5) are of a colour with contrast below VANISHING_CONTRAST on the
    dark page: the marks a reader in dark mode cannot see. A pixel is judged by its own colour (a PNG's alpha is not
    premultiplied), not as laid on the page: the antialiased edge of a thin line of any colour is fainter than the
    line, and judged as laid, the 0.6-point contours of SEQUENTIAL's darkest blue (2.1:1) were flagged by their edges
    (optimizers, 5,888 pixels in the first build with this scan) while their cores read."""
    image = plt.imread(png)[..., :4].astype(float)  # RGB(A), 0-1
    alpha = image[..., 3:] if image.shape[-1] == 4 else np.ones(image.shape[:-1] + (1,))
    page = np.array(matplotlib.colors.to_rgb(DARK_PAGE))
    shown = image[..., :3]
    lighter = np.maximum(plotting.luminance(shown), plotting.luminance(page))
    darker = np.minimum(plotting.luminance(shown), plotting.luminance(page))
    return int((((lighter + 0.05) / (darker + 0.05) < VANISHING_CONTRAST) & (alpha[..., 0] >= 0.5)).sum())


def draw(path: Path, cmap=None, color=INK, values=None) -> Path:
    """A small figure as the book draws it: a line in `color` and, given a colormap, a heatmap."""
    fig, ax = plotting.figure(width=3, height=2)
    ax.plot([0, 1], [0, 1], color=color)
    if cmap is not None:
        ax.imshow(values, cmap=cmap, extent=(0, 1, 0, 1))
    fig.savefig(path)
    plt.close(fig)
    return path


def test_the_scan_finds_black_and_dark_map_ends_and_passes_the_books_maps(tmp_path):
    ramp = np.linspace(-1, 1, 64).reshape(8, 8)
    assert vanishing_pixels(draw(tmp_path / "black.png", color="black")) > MAX_VANISHING_PIXELS
    assert vanishing_pixels(draw(tmp_path / "viridis.png", cmap="viridis", values=ramp)) > MAX_VANISHING_PIXELS
    assert vanishing_pixels(draw(tmp_path / "rdbu.png", cmap="RdBu", values=ramp)) > MAX_VANISHING_PIXELS
    for name, cmap in [("sequential", SEQUENTIAL), ("diverging", DIVERGING)]:
        assert vanishing_pixels(draw(tmp_path / f"{name}.png", cmap=cmap, values=ramp)) == 0, name
    for index, colour in enumerate(COLORS):
        assert vanishing_pixels(draw(tmp_path / f"C{index}.png", color=f"C{index}")) == 0, colour


@pytest.mark.book
def test_built_figures_keep_their_ink_on_the_dark_page():
    images = sorted((SITE / "_images").glob("*.png"))
    if not (SITE / "index.html").exists():
        pytest.fail(f"no built site at {SITE}: run `make book` first (or set MINFORMERS_SITE)")
    # the site had 69 figures when this was written; the floor keeps the scan from passing on an empty folder
    assert len(images) >= 50, f"only {len(images)} figures under {SITE / '_images'}: is the site complete?"
    names = {}  # image -> where readers see it: page and figure number
    for html in SITE.rglob("*.html"):
        page = html.relative_to(SITE).with_suffix("").as_posix()
        for found in re.finditer(r'src="[^"]*_images/([^"/]+\.png)"[^>]*>(.{0,400}?caption-number">([^<]+)<)?',
                                 html.read_text(), re.S):
            names.setdefault(found.group(1), f"{page}, {(found.group(3) or 'figure').strip()}")
    flagged = {f"{names.get(png.name, 'on no page')} ({png.name[:12]})": count
               for png in images if (count := vanishing_pixels(png)) > MAX_VANISHING_PIXELS}
    assert not flagged, f"pixels that vanish on {DARK_PAGE}, by figure: {flagged}"
