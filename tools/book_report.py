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
- serves a wheel of the lib and the notebook requirements at <site>/course/ (`build_course_files`), and gives
  every downloadable notebook a first cell that installs them where the library is missing
  (`install_cell_first`);
- points the Colab button at the page's executed notebook on the published site's branch, since Colab opens only
  .ipynb files and the chapters are MyST .md (`colab_opens_the_published_notebook`);
- drops sphinx-thebe's scripts and styles, which load on every page though Thebe is off (`drop_thebe`);
- writes under each chapter's title the chapters it builds on and how long it took to run (`chapter_facts`);
- numbers the exercises' and solutions' content sections, which sphinx-exercise gives one shared id
  (`unique_exercise_ids`).
"""

import ast
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from docutils import nodes
from myst_nb.sphinx_ import NbMetadataCollector

from build_book import front_matter


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


def install_cell_first(app, pagename, templatename, context, doctree):
    """Give the downloadable notebook a first cell that installs the course library where it is missing
    (INSTALL_CELL), so it runs outside the course too. Runs after sphinx-book-theme (501), which copies the
    notebook again when launch buttons are configured."""
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    if not target.exists():
        return
    notebook = json.loads(target.read_text())
    if notebook["cells"] and notebook["cells"][0].get("id") == "install-the-course":
        return
    install = {"id": "install-the-course", "cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
               "source": install_cell(app)}
    notebook["cells"].insert(0, install)
    target.write_text(json.dumps(notebook, indent=1) + "\n")


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
            "method": data.get("method"),  # "force", or "cache" in a --reuse build (the seconds are then recorded ones)
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


# What a notebook downloaded from the site needs outside the course's .venv: a wheel of the lib and the pinned
# packages a notebook host lacks. The build writes both to <root>/_build/course-files/course/ and serves them at
# <site>/course/; the landing page links them.
COURSE_FILES = Path("_build") / "course-files"
REPOSITORY = Path(__file__).resolve().parent.parent

INSTALL_CELL = """\
# Outside the course's own environment (Colab, a fresh Jupyter) this installs the course library first: the wheel
# and requirements from the course site's front page, taken from beside this notebook if you saved them there.
import glob
import importlib
import importlib.util
import subprocess
import sys

if importlib.util.find_spec("minformers") is None:
    here = sorted(glob.glob("minformers-*.whl"))
    site = {site!r}  # the site's course/ folder, when the book was built knowing its address
    if here:
        wheel, requirements = here[-1], "requirements-notebook.txt"
    elif site:
        wheel, requirements = site + {wheel!r}, site + "requirements-notebook.txt"
    else:
        raise RuntimeError("this notebook needs the course library: save {wheel} and requirements-notebook.txt "
                           "from the course site's front page beside it, then run this cell again")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", wheel, "-r", requirements], check=True)
    importlib.invalidate_caches()  # the new package is importable without a restart
"""


def build_course_files(app):
    """Write the course files into COURSE_FILES/course/, which the site serves at <site>/course/ (html_extra_path)."""
    served = Path(app.srcdir) / COURSE_FILES / "course"
    shutil.rmtree(served, ignore_errors=True)
    write_course_files(REPOSITORY, served)  # the repository's lib, also for books built elsewhere (the student site)
    app.config.html_extra_path = [*app.config.html_extra_path, str(served.parent)]


def write_course_files(root: Path, folder: Path) -> Path:
    """Write the wheel of `root`'s lib and its requirements-notebook.txt into `folder`; return the wheel."""
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as copy:  # pip builds in the tree it is given: not in ours
        shutil.copy2(root / "pyproject.toml", copy)
        shutil.copytree(root / "lib", Path(copy) / "lib", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                        "--wheel-dir", str(folder), copy], check=True)
    shutil.copy2(root / "requirements-notebook.txt", folder)
    return next(folder.glob("minformers-*.whl"))


def course_site(app) -> str | None:
    """Where the published site serves the course files: html_baseurl's course/ folder, else for a GitHub
    repository its published branch's, else unknown (a downloaded notebook then looks beside itself only)."""
    base = (app.config.html_baseurl or "").strip().rstrip("/")
    if base:
        return f"{base}/course/"
    url = (app.config.html_theme_options.get("repository_url") or "").strip().rstrip("/")
    if "github.com/" in url:
        org, repo = url.split("github.com/")[1].split("/")[:2]
        return f"https://raw.githubusercontent.com/{org}/{repo}/{app.config.site_branch}/course/"
    return None


def install_cell(app) -> str:
    wheel = next((Path(app.srcdir) / COURSE_FILES / "course").glob("minformers-*.whl")).name
    return INSTALL_CELL.format(site=course_site(app), wheel=wheel)


def _buttons(items: list):
    """Every button in sphinx-book-theme's header buttons, groups opened."""
    for item in items:
        yield item
        yield from _buttons(item.get("buttons", []))


def colab_opens_the_published_notebook(app, pagename, templatename, context, doctree):
    """Colab opens only .ipynb files from GitHub, and the chapters are MyST .md. The executed notebook of every page
    is part of the built site (_sources/<page>.ipynb), so once the site is published to the `site_branch` branch
    (see the README), the Colab button opens that notebook, whose first cell installs the course library from the
    published site. Runs after sphinx-book-theme (501), which builds the button."""
    url = (app.config.html_theme_options.get("repository_url") or "").strip().rstrip("/")
    colab = [button for button in _buttons(context.get("header_buttons", [])) if button.get("text") == "Colab"]
    if not url or not colab:
        return
    org, repo = url.split("github.com/")[1].split("/")[:2]
    for button in colab:
        button["url"] = (f"{app.config.html_theme_options['launch_buttons']['colab_url'].rstrip('/')}/github/"
                         f"{org}/{repo}/blob/{app.config.site_branch}/_sources/{pagename}.ipynb")


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


def setup(app):
    app.add_config_value("site_branch", "gh-pages", "html")  # where the built site is published (Colab reads it)
    app.connect("config-inited", launch_buttons_need_a_repository)
    app.connect("builder-inited", build_course_files)
    # Priority 500 runs before sphinx-book-theme builds its header buttons (501).
    app.connect("html-page-context", offer_notebook_download, priority=500)
    app.connect("html-page-context", colab_opens_the_published_notebook, priority=502)
    app.connect("html-page-context", install_cell_first, priority=502)
    app.connect("html-page-context", drop_thebe, priority=999)
    app.connect("doctree-resolved", describe_cell_figures)
    app.connect("doctree-resolved", unique_exercise_ids)
    app.connect("doctree-resolved", chapter_facts)
    app.connect("build-finished", write_timings)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
