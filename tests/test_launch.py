"""What the launch buttons rely on outside the course's .venv: Binder's build files and the packages a Colab
notebook's first cell installs. (The buttons themselves are checked in a built book: tests/test_book_build.py.)"""

import ast
import subprocess
import sys
from pathlib import Path

import jupytext
import pytest

from book_helpers import fresh_environment, where_minformers_is

ROOT = Path(__file__).resolve().parent.parent
# A notebook host (Colab) has these already; cycler comes with matplotlib.
HOST_PROVIDED = {"torch", "numpy", "matplotlib", "IPython", "cycler", "matplotlib_inline"}  # ipykernel needs the last


def pins(path: Path) -> dict[str, str]:
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return dict(line.lower().split("==") for line in lines if "==" in line)


def top_level_imports(source: str) -> set[str]:
    # Notebook magics and shell lines are not Python.
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    names = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_the_notebook_requirements_are_pinned_as_in_the_lock():
    notebook, lock = pins(ROOT / "requirements-notebook.txt"), pins(ROOT / "requirements.txt")
    assert notebook, "requirements-notebook.txt lists no packages"
    for package, version in notebook.items():
        assert lock.get(package) == version, f"{package}=={version} is not what requirements.txt pins"


def test_every_package_the_chapters_import_is_installed_by_a_launched_notebook():
    """A launched notebook has only the host's packages and requirements-notebook.txt: any other third-party
    import in the lib or a chapter would fail there, on the first run of that cell."""
    sources = [path.read_text() for path in (ROOT / "lib" / "minformers").glob("*.py")]
    for chapter in (ROOT / "book").glob("*.md"):
        notebook = jupytext.read(chapter)
        if "kernelspec" in notebook.metadata:  # a chapter; the other pages' code blocks are shell or text
            sources += [cell.source for cell in notebook.cells if cell.cell_type == "code"]
    imported = set().union(*(top_level_imports(source) for source in sources))
    third_party = imported - set(sys.stdlib_module_names) - {"minformers"}
    missing = third_party - HOST_PROVIDED - set(pins(ROOT / "requirements-notebook.txt"))
    assert not missing, f"imported but not in requirements-notebook.txt: {sorted(missing)}"


def test_binder_installs_the_lock_with_cpu_torch():
    requirements = (ROOT / "binder" / "requirements.txt").read_text()
    assert "-r ../requirements.txt" in requirements
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in requirements
    assert (ROOT / "binder" / "runtime.txt").read_text().strip() == "python-3.11"


@pytest.mark.slow
def test_binder_post_build_installs_the_library_and_opens_md_as_notebooks(tmp_path):
    """Run binder/postBuild as repo2docker does: from the repository root, with NB_PYTHON_PREFIX set."""
    environment = fresh_environment(tmp_path)
    result = subprocess.run(["bash", "binder/postBuild"], cwd=ROOT, env=environment, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    overrides = tmp_path / "env" / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    assert "Jupytext Notebook" in overrides.read_text()
    assert where_minformers_is(environment, tmp_path).is_relative_to(ROOT / "lib")


@pytest.mark.slow
@pytest.mark.parametrize("where", ["beside the notebook", "on the site"])
def test_a_downloaded_notebooks_first_cell_installs_the_course(tmp_path, where):
    """The cell tools/course_site puts first in each downloadable notebook, run in a fresh environment: with the
    course files saved beside the notebook, and with them fetched from the site's address (a file:// URL here)."""
    from course_site.notebooks import INSTALL_CELL, write_course_files

    files = tmp_path / "course"
    wheel = write_course_files(ROOT, files).name
    notebook_folder = files if where == "beside the notebook" else tmp_path
    cell = INSTALL_CELL.format(site=f"{files.as_uri()}/" if where == "on the site" else None, wheel=wheel)
    environment = fresh_environment(tmp_path)
    location = where_minformers_is(environment, notebook_folder, setup=cell)
    assert location.is_relative_to(tmp_path / "env"), location  # installed from the wheel, not the repository


def test_the_first_cell_says_what_to_download_when_it_has_no_source(tmp_path):
    from course_site.notebooks import INSTALL_CELL

    cell = INSTALL_CELL.format(site=None, wheel="minformers-0.1.0-py3-none-any.whl")
    result = subprocess.run(["python", "-c", cell], cwd=tmp_path, env=fresh_environment(tmp_path),
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert "save minformers-0.1.0-py3-none-any.whl and requirements-notebook.txt" in result.stderr
