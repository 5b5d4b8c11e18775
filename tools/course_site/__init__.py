"""The course's Sphinx extension: what the site needs beyond Jupyter Book. Loaded through
`sphinx.local_extensions` in _config.yml, one module per job:

- `timings`: each page's execution time, in `_build/timings.json`, which tools/build_book.py reads to print the
  timing table and enforce each page's budget; the build clock's readings between pages;
- `notebooks`: the executed notebook of each page in the download menu, with a first cell that installs the
  course library where it is missing; the lib's wheel and the notebook requirements at <site>/course/; the
  Colab button pointed at the published notebook (Colab opens only .ipynb files, and the chapters are MyST .md);
  that notebook in plain Markdown, without solutions, each stream once and no `needs_background`;
  no launch buttons when `repository.url` in _config.yml is empty, so that one setting turns them on and off;
- `alt_text`: an alt text for every figure a code cell draws;
- `chapter_page`: under each chapter's title, the chapters it builds on and how long it took to run; numbered
  ids for the exercises' and solutions' content sections, which sphinx-exercise gives one shared id; none of
  sphinx-thebe's scripts and styles, which load on every page though Thebe is off;
- `page_weight`: no Font Awesome script (the theme's stylesheet already draws its icons) and no MathJax on a page
  without a formula.
"""

from course_site.alt_text import describe_cell_figures
from course_site.chapter_page import chapter_facts, drop_thebe, unique_exercise_ids
from course_site.notebooks import (
    build_course_files,
    colab_opens_the_published_notebook,
    install_cell_first,
    launch_buttons_need_a_repository,
    offer_notebook_download,
)
from course_site.page_weight import drop_fontawesome_script, no_mathjax_without_math
from course_site.readable_notebook import readable_download
from course_site.timings import time_the_machine, write_timings


def setup(app):
    app.add_config_value("site_branch", "gh-pages", "html")  # where the built site is published (Colab reads it)
    app.connect("config-inited", launch_buttons_need_a_repository)
    app.connect("builder-inited", build_course_files)
    # Priority 500 runs before sphinx-book-theme builds its header buttons (501).
    app.connect("html-page-context", offer_notebook_download, priority=500)
    app.connect("html-page-context", colab_opens_the_published_notebook, priority=502)
    app.connect("html-page-context", readable_download, priority=502)
    app.connect("html-page-context", install_cell_first, priority=502)
    app.connect("html-page-context", drop_thebe, priority=999)
    app.connect("html-page-context", no_mathjax_without_math, priority=999)
    app.connect("doctree-resolved", describe_cell_figures)
    app.connect("doctree-resolved", unique_exercise_ids)
    app.connect("doctree-resolved", chapter_facts)
    app.connect("source-read", time_the_machine)
    app.connect("build-finished", write_timings)
    app.connect("build-finished", drop_fontawesome_script)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
