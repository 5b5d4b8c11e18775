"""Sphinx extension: records each page's execution time and offers its executed notebook for download.

Loaded through `sphinx.local_extensions` in _config.yml. It writes `_build/timings.json`:

    {"book/attention": {"seconds": 31.2, "succeeded": true, "error": null}, ...}

tools/build_book.py reads that file to print the timing table and enforce each page's budget.
"""

import json
import shutil
from pathlib import Path

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


def setup(app):
    # Priority 500 runs before sphinx-book-theme builds its header buttons (501).
    app.connect("html-page-context", offer_notebook_download, priority=500)
    app.connect("build-finished", write_timings)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
