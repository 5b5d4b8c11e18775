"""What the launch buttons rely on outside the course's .venv: Binder's build files and the packages a Colab
notebook's first cell installs. (The buttons themselves are checked in a built book: tests/test_book_build.py.)"""

import ast
import os
import subprocess
import sys
import venv
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parent.parent
# A notebook host (Colab) has these already; cycler comes with matplotlib.
HOST_PROVIDED = {"torch", "numpy", "matplotlib", "IPython", "cycler"}


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


def fresh_environment(tmp_path: Path) -> dict[str, str]:
    """Environment variables for a new virtual environment that sees the lock's packages (the .venv's
    site-packages on PYTHONPATH, whose .pth files, the editable minformers among them, are not read) but has no
    minformers: what a Binder image or a Colab runtime has before the course's own install step."""
    prefix = tmp_path / "env"
    venv.create(prefix, with_pip=True)
    site = subprocess.run([sys.executable, "-c", "import site; print(site.getsitepackages()[0])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    return {**os.environ, "NB_PYTHON_PREFIX": str(prefix), "PATH": f"{prefix / 'bin'}:{os.environ['PATH']}",
            "PYTHONPATH": site}


def where_minformers_is(environment: dict[str, str], cwd: Path, setup: str = "") -> Path:
    result = subprocess.run(["python", "-c", setup + "\nimport minformers; print(minformers.__file__)"],
                            cwd=cwd, env=environment, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return Path(result.stdout.strip().splitlines()[-1])


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
def test_a_colab_notebooks_first_cell_installs_the_course(tmp_path):
    """The cell tools/book_report.py puts first in each published notebook, run in a fresh environment against
    this repository (cloned from disk, so its committed state on branch main)."""
    sys.path.insert(0, str(ROOT / "tools"))
    from book_report import INSTALL_CELL

    branch = subprocess.run(["git", "branch", "--show-current"], cwd=ROOT, capture_output=True, text=True).stdout
    cell = INSTALL_CELL.format(branch=branch.strip() or "main", url=f"file://{ROOT}")
    location = where_minformers_is(fresh_environment(tmp_path), tmp_path, setup=cell)
    assert location == tmp_path / "course" / "lib" / "minformers" / "__init__.py"
