"""What a reader downloads or launches: each page's executed notebook in the download menu, with a first cell that
installs the course library where it is missing; the lib's wheel and the notebook requirements served at
<site>/course/; the Colab button pointed at the published notebook; and no launch buttons without a
repository URL. course_site/readable_notebook.py makes that notebook readable in Jupyter.
"""

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


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


REPOSITORY = Path(__file__).resolve().parents[2]  # tools/course_site/notebooks.py


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
