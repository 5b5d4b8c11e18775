"""Build the student edition in _build/student/: the chapters without solutions, a student site, and the lib.

    python tools/student.py        # after `make book`, whose executed notebooks it reuses (nothing re-runs)

_build/student/
    README.md                 how to install, run the notebooks and check an exercise
    requirements.txt, pyproject.toml, lib/minformers/      the course library, with the exercise checks
    notebooks/<chapter>.ipynb solutions replaced by their stubs, solution dropdowns removed, outputs cleared
    html/                     the student site: the built pages' outputs and figures, without solutions
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import yaml

from exercises import exercises, hide_listings, read, student_version
from notebooks import chapters
from screen import blocked_by

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "_build"
STUDENT = BUILD / "student"
README = """# {title}: student edition

The chapters of the course as notebooks, with the exercises left for you to do.

## Set up (Python 3.11)

    python3.11 -m venv .venv
    .venv/bin/pip install -r requirements.txt
    .venv/bin/pip install --no-deps -e .
    .venv/bin/jupyter lab notebooks/

## Exercises

Each auto-checked exercise has a cell that raises `NotImplementedError`: replace it with your function, then run
the check cell below it. The check tests your function on ordinary and edge cases and tells you the first case
that fails, what was expected and what your function returned. Calling the library's own solution is refused.

The pages, with their figures and without solutions, are in html/index.html.
"""


# Blocked functions whose listing is not an exercise's answer, so the student edition keeps it: the chunked-attention
# exercise blocks these because they compute whole attention, which is not the online softmax it asks for.
NOT_ANSWERS = {"sliding_window_attention", "local_global_attention"}


def answer_objects(notebook) -> dict[str, str]:
    """{lib object whose listing would give an exercise away: the function the exercise asks for}. An exercise's
    answers are the functions its check blocks; a method's whole class counts too (a listing of `Adam` shows
    `Adam.update`)."""
    answers = {}
    for exercise in exercises(notebook):
        for function in blocked_by(exercise.check)[0]:
            if function.__name__ not in NOT_ANSWERS:
                answers |= dict.fromkeys({function.__qualname__, function.__qualname__.split(".")[0]},
                                         exercise.function)
    return answers


def edition(name: str, keep_outputs: bool = False) -> nbformat.NotebookNode:
    """A chapter's student version: solutions out, and the listings that would give its exercises away."""
    notebook = read(executed(name))
    return hide_listings(student_version(notebook, keep_outputs), answer_objects(notebook))


def notebook_names() -> list[str]:
    """The notebook pages of _toc.yml, as docnames such as 'book/attention'."""
    return [str(source.relative_to(ROOT).with_suffix("")) for source in chapters()]


def executed(name: str) -> Path:
    path = BUILD / "jupyter_execute" / f"{name}.ipynb"
    if not path.exists():
        sys.exit(f"{path} is missing: run `make book` first (the student edition reuses its outputs)")
    return path


def write_notebooks(names: list[str]) -> None:
    for name in names:
        nbformat.write(edition(name), STUDENT / "notebooks" / f"{Path(name).name}.ipynb")


def write_library() -> None:
    for item in ("requirements.txt", "pyproject.toml"):
        shutil.copy2(ROOT / item, STUDENT / item)
    shutil.copytree(ROOT / "lib", STUDENT / "lib", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))


def with_glue(notebook: nbformat.NotebookNode, path: Path) -> nbformat.NotebookNode:
    """The notebook with the values its prose pastes ({glue} roles) back among its outputs. myst-nb keeps them beside
    the executed notebook (`<name>.glue.json`), not in it, and a site built with execution off reads them only from
    the cells' outputs: they go, under their own mime prefix, into the last code cell. `path` is the .glue.json."""
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    if not path.exists() or not code:
        return notebook
    for output in json.loads(path.read_text()).values():
        prefix = output["metadata"]["scrapbook"].get("mime_prefix", "")
        output["data"] = {prefix + kind: value for kind, value in output["data"].items()}
        code[-1].outputs.append(nbformat.from_dict(output))
    return notebook


def build_site(names: list[str]) -> None:
    """Build the student site from the executed notebooks, stripped, with execution off.

    It has the same table of contents as the book; pages without code are copied as they are.
    """
    source = BUILD / "student-site"
    shutil.rmtree(source, ignore_errors=True)
    shutil.copytree(ROOT / "book", source / "book", ignore=shutil.ignore_patterns("*.md"))
    (source / "lib").symlink_to(ROOT / "lib")  # the pages include lib code by relative path
    for page in (ROOT / "book").glob("*.md"):
        name = str(page.relative_to(ROOT).with_suffix(""))
        if name in names:
            glued = with_glue(edition(name, keep_outputs=True), BUILD / "jupyter_execute" / f"{name}.glue.json")
            nbformat.write(glued, source / f"{name}.ipynb")
        else:
            shutil.copy2(page, source / f"{name}.md")
    shutil.copy2(ROOT / "_toc.yml", source / "_toc.yml")
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["title"] += " (student edition)"
    config["execute"]["execute_notebooks"] = "off"
    config["sphinx"]["local_extensions"] = {"course_site": str(ROOT / "tools")}
    (source / "_config.yml").write_text(yaml.safe_dump(config))

    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    result = subprocess.run([str(jupyter_book), "build", "--all", "-W", "-n", "--keep-going", str(source)])
    if result.returncode != 0:
        sys.exit(f"the student site failed to build (exit {result.returncode})")
    shutil.copytree(source / "_build" / "html", STUDENT / "html")


def main() -> None:
    shutil.rmtree(STUDENT, ignore_errors=True)
    (STUDENT / "notebooks").mkdir(parents=True)
    names = notebook_names()
    write_notebooks(names)
    write_library()
    build_site(names)
    title = yaml.safe_load((ROOT / "_config.yml").read_text())["title"]
    (STUDENT / "README.md").write_text(README.format(title=title))
    files = sorted(str(path.relative_to(STUDENT)) for path in (STUDENT / "notebooks").iterdir())
    print(json.dumps({"student edition": str(STUDENT), "notebooks": files}, indent=2))


if __name__ == "__main__":
    main()
