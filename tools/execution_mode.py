"""Sphinx extension: which pages a build executes, as tools/build_book.py asks through the environment, and in
what order: the table of contents' (Sphinx alone reads pages alphabetically). A page that trains a model later
pages load, such as the GPT page, then runs before them, as a reader meets them, and pays for the training itself.

Loaded through `sphinx.local_extensions` in _config.yml. With neither variable set, _config.yml's
`execute_notebooks: force` stands and every page is executed: `make test` and CI always build that way.

- MINFORMERS_EXECUTION_CACHE=<folder> (`make book`): myst-nb's cache mode, with its jupyter-cache in that folder. A
  page is executed again only when its code changed; build_book.py names the folder after the lib's source digest,
  so a change to the lib starts an empty cache and every page runs again.
- MINFORMERS_ONLY_PAGE=<docname> (`make page`): only that page is executed, with no limit per cell; the others are
  rendered without outputs (and without the values their {glue} roles would paste).
"""

import os
from pathlib import Path

import yaml


def choose_execution(app, config):
    cache = os.environ.get("MINFORMERS_EXECUTION_CACHE")
    if cache:
        config.nb_execution_mode = "cache"
        config.nb_execution_cache_path = cache
    only = os.environ.get("MINFORMERS_ONLY_PAGE")
    if only:
        others = sorted(set(_pages(Path(app.srcdir))) - {only})
        config.nb_execution_excludepatterns = [f"{name}.md" for name in others]
        # A page run alone may train a checkpoint an earlier page would have made (the shared encoder takes longer
        # than one cell's usual limit); build_book.py still holds the page to its budget.
        config.nb_execution_timeout = -1
        # The other pages are not executed, so their {glue} roles find nothing to paste and would fail the build;
        # build_book.py checks the executed page's own roles instead (missing_glue).
        config.suppress_warnings = [*config.suppress_warnings, "mystnb.glue"]


def _pages(root: Path):
    """Docnames of the MyST files under `root`, outside hidden and underscore folders (.venv, _build, _static)."""
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = [name for name in subfolders if not name.startswith((".", "_"))]
        for name in files:
            if name.endswith(".md"):
                yield (Path(folder) / name).relative_to(root).with_suffix("").as_posix()


def toc_files(entry) -> list[str]:
    """Every `file` (and the `root`) of a _toc.yml, in reading order, however deep its parts and sections nest."""
    if isinstance(entry, list):
        return [name for item in entry for name in toc_files(item)]
    if not isinstance(entry, dict):
        return []
    own = [entry[key] for key in ("root", "file") if key in entry]
    return own + [name for key in ("parts", "chapters", "sections") for name in toc_files(entry.get(key, []))]


def read_in_toc_order(app, env, docnames: list[str]) -> None:
    """Sphinx's hook for reordering the pages it is about to read (and so execute), in place; pages outside the
    table of contents keep their order, after it."""
    toc = Path(app.srcdir) / "_toc.yml"
    if not toc.exists():
        return
    position = {name: index for index, name in enumerate(toc_files(yaml.safe_load(toc.read_text())))}
    docnames.sort(key=lambda name: position.get(name, len(position)))


def setup(app):
    app.connect("config-inited", choose_execution)
    app.connect("env-before-read-docs", read_in_toc_order)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
