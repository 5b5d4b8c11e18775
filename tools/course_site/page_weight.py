"""What a page loads, kept light. A reader's first page loaded 3.9 MB (the landing page) to 4.5 MB (a chapter)
before these two changes, 2.6 MB of it scripts that most pages do not need:

- pydata-sphinx-theme loads Font Awesome twice: its stylesheet draws the icons from the web fonts, and a 1.5 MB
  script (`scripts/fontawesome.js`, for icons a site adds itself, which this one does not) draws them again. The
  script goes from every page once the site is written.
- MathJax (1.2 MB) loads on every page; a page with no formula does without it.
"""

import re
from pathlib import Path

from docutils import nodes

FONTAWESOME_SCRIPT = re.compile(r'[ \t]*<script defer src="[^"]*_static/scripts/fontawesome\.js[^"]*"></script>\n?')


def drop_fontawesome_script(app, exception):
    """Remove the Font Awesome script's tag from every page written (the theme's template writes it; no setting
    turns it off)."""
    if exception is not None or app.builder.format != "html":
        return
    for page in Path(app.outdir).rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        lighter = FONTAWESOME_SCRIPT.sub("", text)
        if lighter != text:
            page.write_text(lighter, encoding="utf-8")


def no_mathjax_without_math(app, pagename, templatename, context, doctree):
    """Leave MathJax and its settings off a page whose document holds no formula (cell outputs included: myst-nb
    turns Markdown and LaTeX outputs into the same nodes). Runs last, after Sphinx's mathjax extension has added
    them."""
    if doctree is None or any(doctree.findall(lambda node: isinstance(node, (nodes.math, nodes.math_block)))):
        return
    assets = context.get("script_files")
    if isinstance(assets, list):
        assets[:] = [asset for asset in assets if "mathjax" not in _text(asset).lower()]  # in place, as Sphinx reads


def _text(asset) -> str:
    return asset if isinstance(asset, str) else f"{asset.filename or ''} {asset.attributes.get('body', '')}"
