"""A chapter page as the reader meets it: under its title, the chapters it builds on and how long it took to
run; exercises and solutions with ids of their own; no sphinx-thebe files while Thebe is off.
"""

import json
from pathlib import Path

from docutils import nodes
from myst_nb.sphinx_ import NbMetadataCollector

from build_book import front_matter


def drop_thebe(app, pagename, templatename, context, doctree):
    """Thebe is off (`launch_buttons.thebe: false` in _config.yml), but jupyter-book always loads sphinx-thebe, which
    adds its script, its inline settings (twice: the second copy's `const`s are a JavaScript error) and its styles
    to every page. Remove them. Runs last, after every extension has added its files for the page."""
    if (app.config.html_theme_options.get("launch_buttons") or {}).get("thebe"):
        return

    def thebe(asset) -> bool:
        text = asset if isinstance(asset, str) else f"{asset.filename or ''} {asset.attributes.get('body', '')}"
        return "thebe" in text.lower()

    for key in ("script_files", "css_files"):
        assets = context.get(key)
        if isinstance(assets, list):
            assets[:] = [asset for asset in assets if not thebe(asset)]  # in place: Sphinx keeps using these lists


def _minutes(seconds: float) -> str:
    minutes = round(seconds / 60)
    return "under a minute" if minutes < 1 else "about 1 minute" if minutes == 1 else f"about {minutes} minutes"


def page_metadata(srcdir: Path, docname: str) -> dict:
    """A page's front matter: the YAML block of its .md, or the metadata of its .ipynb (the student site's pages,
    which keep the front matter there)."""
    markdown, notebook = srcdir / f"{docname}.md", srcdir / f"{docname}.ipynb"
    if markdown.exists():
        return front_matter(markdown)
    return dict(json.loads(notebook.read_text(encoding="utf-8"))["metadata"]) if notebook.exists() else {}


def chapter_facts(app, doctree, docname):
    """Under a chapter's title: the chapters it builds on (its front matter's `builds_on`) and how long it took to
    run in this build, so a reader knows what to read first and what running it costs."""
    builds_on = page_metadata(Path(app.srcdir), docname).get("builds_on")
    data = NbMetadataCollector.get_exec_data(app.env, docname)
    seconds = data.get("runtime") if data and data.get("succeeded") else None
    title = next(iter(doctree.findall(nodes.title)), None)
    if title is None or (builds_on is None and seconds is None):
        return
    facts = nodes.paragraph(classes=["chapter-facts"])
    if builds_on is not None:
        facts += nodes.strong(text="Builds on: ")
        for index, name in enumerate(builds_on):
            target = f"book/{name}"
            if index:
                facts += nodes.Text(", ")
            facts += nodes.reference(text=app.env.titles[target].astext(),
                                     refuri=app.builder.get_relative_uri(docname, target), internal=True)
        if not builds_on:
            facts += nodes.Text("Python, and a little linear algebra and probability")
        facts += nodes.Text(". ")
    if seconds is not None:
        facts += nodes.strong(text="Running it: ")
        facts += nodes.Text(f"{_minutes(seconds)} on two CPU cores, where this copy was built.")
    title.parent.insert(title.parent.index(title) + 1, facts)


def unique_exercise_ids(app, doctree, docname):
    """sphinx-exercise gives the content of every exercise the id "exercise-content" and of every solution
    "solution-content"; a page with several of them then repeats an id, which HTML forbids and which leaves links
    and assistive technology to the first one only. Number them, keeping the old id as a class for styling."""
    for shared in ("exercise-content", "solution-content"):
        sections = [node for node in doctree.findall(nodes.section) if node["ids"] == [shared]]
        for number, section in enumerate(sections, start=1):
            section["ids"] = [f"{shared}-{number}"]
            section["classes"].append(shared)
