"""Sphinx extension: records each page's execution time, offers its executed notebook for download, and keeps
the site usable as readers use it.

Loaded through `sphinx.local_extensions` in _config.yml. It writes `_build/timings.json`:

    {"book/attention": {"seconds": 31.2, "succeeded": true, "error": null}, ...}

tools/build_book.py reads that file to print the timing table and enforce each page's budget.

It also:
- gives every figure a code cell draws an alt text (`describe_cell_figures`): the titles the cell gives its plots,
  read from its source (`label(ax, title, xlabel, ylabel)`, `ax.set_title`, `plt.title`, `fig.suptitle`), or,
  for a cell with no literal title, the section it is in. To write one by hand, give the cell
  `mystnb: {image: {alt: "..."}}` in its metadata: an alt text set there is kept;
- removes the launch buttons (Binder, Colab, JupyterHub) when `repository.url` in _config.yml is empty, so
  that one setting turns them on and off (`launch_buttons_need_a_repository`);
- drops repeated inline scripts, whose second copy would be a JavaScript error (`drop_repeated_scripts`).
"""

import ast
import json
import re
import shutil
from pathlib import Path

from docutils import nodes
from myst_nb.sphinx_ import NbMetadataCollector


def executed_notebook(app, pagename: str) -> Path:
    """Where myst-nb writes the executed copy of a page: _build/jupyter_execute/<page>.ipynb."""
    return Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"


def offer_notebook_download(app, pagename, templatename, context, doctree):
    """Copy the executed notebook next to the page's sources so the theme's download menu links it.

    sphinx-book-theme adds a ".ipynb" entry to its download menu when `ipynb_source` is set, but sets it
    itself only when launch buttons are configured. We set it for every executed page.
    """
    notebook = executed_notebook(app, pagename)
    if not notebook.exists():
        return
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(notebook, target)
    context["ipynb_source"] = f"{pagename}.ipynb"


def write_timings(app, exception):
    if app.builder.name != "html":
        return
    timings = {}
    for docname in sorted(app.env.found_docs):
        data = NbMetadataCollector.get_exec_data(app.env, docname)
        if data is None:
            continue  # a page with no code cells is not executed
        timings[docname] = {
            "seconds": data.get("runtime"),
            "succeeded": data.get("succeeded"),
            "error": data.get("error"),
        }
    path = Path(app.outdir).parent / "timings.json"
    path.write_text(json.dumps(timings, indent=2) + "\n")


def launch_buttons_need_a_repository(app, config):
    """Launch buttons are built from `repository.url` in _config.yml: none without it.

    With launch buttons configured and no repository URL, sphinx-book-theme fails while writing a page. Colab opens
    GitHub repositories only, so its button is dropped for any other host rather than warn (and fail the build).
    """
    options = config.html_theme_options
    url = (options.get("repository_url") or "").strip()
    if not url:
        options.pop("launch_buttons", None)
        return
    buttons = options.get("launch_buttons") or {}
    if buttons.get("colab_url") and "github.com/" not in url:
        options["launch_buttons"] = {**buttons, "colab_url": ""}


def drop_repeated_scripts(app, pagename, templatename, context, doctree):
    """Keep one copy of each script. sphinx-thebe's inline settings reach every page twice in a jupyter-book build
    (once with the file name None, once with ""), and the second copy of their `const` declarations is a
    JavaScript error on every page. Runs last, after every extension has added its scripts for the page."""
    scripts = context.get("script_files")
    if not isinstance(scripts, list):
        return
    seen, unique = set(), []
    for script in scripts:
        if isinstance(script, str):
            key = (script,)
        else:
            key = (script.filename or "", script.priority, tuple(sorted(script.attributes.items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique  # in place: Sphinx keeps using this list for the page


TITLE_ARGUMENT = {"label": 1, "set_title": 0, "title": 0, "suptitle": 0}  # where each call takes its title


def _literal_text(node) -> str | None:
    """A string literal's text; an f-string's with "..." for each value it fills in; None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(part.value if isinstance(part, ast.Constant) else "..." for part in node.values)
    return None


def figure_titles(source: str) -> list[str]:
    """The titles a code cell gives its plots, in order, from its source; titles that are not literals are skipped.

    >>> figure_titles('label(ax, "Loss", "step", "nats")\\nfig.suptitle(f"Width {w}")\\nax.set_title(name)')
    ['Loss (nats against step)', 'Width ...']
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
        if not title:
            continue
        if name == "label" and len(call.args) >= 4:
            x_label, y_label = (_literal_text(argument) for argument in call.args[2:4])
            if x_label and y_label:
                title += f" ({y_label} against {x_label})"
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


def setup(app):
    app.connect("config-inited", launch_buttons_need_a_repository)
    # Priority 500 runs before sphinx-book-theme builds its header buttons (501).
    app.connect("html-page-context", offer_notebook_download, priority=500)
    app.connect("html-page-context", drop_repeated_scripts, priority=999)
    app.connect("doctree-resolved", describe_cell_figures)
    app.connect("build-finished", write_timings)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
