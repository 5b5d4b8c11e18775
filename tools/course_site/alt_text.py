"""An alt text for every figure a code cell draws: the titles the cell gives its plots, read from its source
(`label(ax, title, xlabel, ylabel)`, `ax.set_title`, `plt.title`, `fig.suptitle`), or, for a cell with no
literal title, the section it is in. To write one by hand, give the cell `mystnb: {image: {alt: "..."}}`
in its metadata: an alt text set there is kept.
"""

import ast
import re

from docutils import nodes

TITLE_ARGUMENT = {"label": 1, "set_title": 0, "title": 0, "suptitle": 0}  # where each call takes its title


def _literal_text(node) -> str | None:
    """A string literal's text; None for anything else, f-strings included: their values are known only when the
    cell runs, and an alt text read aloud with gaps in it says less than one without that part."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def figure_titles(source: str) -> list[str]:
    """The titles a code cell gives its plots, in order, from its source. A `label` call whose title is not a
    literal is described by its axes alone; other titles that are not literals are skipped.

    >>> figure_titles('label(ax, "Loss", "step", "nats")\\nlabel(ax, f"Width {w}", "x", "y")\\nax.set_title(name)')
    ['Loss (nats against step)', 'y against x']
    """
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    titles = []
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        name = getattr(call.func, "attr", None) or getattr(call.func, "id", None)
        position = TITLE_ARGUMENT.get(name)
        if position is None or len(call.args) <= position:
            continue
        title = _literal_text(call.args[position])
        axes = None
        if name == "label" and len(call.args) >= 4:
            x_label, y_label = (_literal_text(argument) for argument in call.args[2:4])
            axes = f"{y_label} against {x_label}" if x_label and y_label else None
        if title and axes:
            title += f" ({axes})"
        title = title or axes
        if title:
            titles.append((call.lineno, call.col_offset, re.sub(r"[$\\{}]", "", title)))  # TeX marks read badly aloud
    return [title for _, _, title in sorted(titles)]


def describe_cell_figures(app, doctree, docname):
    """Give each image a code cell produced an alt text, unless its metadata already set one (see the docstring
    at the top). Without this, the HTML alt text of a cell's figure is its file name."""
    for image in doctree.findall(nodes.image):
        if image.get("alt"):
            continue
        cell = image.parent
        while cell is not None and cell.get("nb_element") != "cell_code":
            cell = cell.parent
        if cell is None:
            continue  # not a cell's output: an author's own figure, which needs its own :alt:
        sources = [block.astext() for block in cell.findall(nodes.literal_block)
                   if "cell_input" in block.parent.get("classes", [])]
        titles = figure_titles("\n".join(sources))
        if titles:
            image["alt"] = "Figure: " + "; ".join(titles)
            continue
        section = cell.parent
        while section is not None and not isinstance(section, nodes.section):
            section = section.parent
        where = f" in the section \u201c{section[0].astext()}\u201d" if section is not None else ""
        image["alt"] = f"Figure drawn by the code cell above{where}"
