"""Helpers for tests that build throwaway books or execute pages outside the book."""

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import jupytext
import nbclient
import yaml

ROOT = Path(__file__).resolve().parent.parent
PAGE_HEADER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
{extra}---
"""


def page(*cells: str, front_matter: str = "") -> str:
    """A MyST notebook with a title and the given code cells."""
    body = "".join(f"\n```{{code-cell}} ipython3\n{cell}\n```\n" for cell in cells)
    return PAGE_HEADER.format(extra=front_matter) + "\n# A test page\n" + body


def write_book(root: Path, pages: dict[str, str]) -> Path:
    """A book at `root` with the course's real _config.yml (execution and warning settings) and `pages`."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config.pop("bibtex_bibfiles", None)  # a throwaway book cites nothing
    config["sphinx"]["config"].pop("bibtex_reference_style", None)
    config["sphinx"]["local_extensions"] = {name: str(ROOT / "tools") for name in config["sphinx"]["local_extensions"]}
    (root / "_config.yml").write_text(yaml.safe_dump(config))
    shutil.copytree(ROOT / "book" / "_static", root / "book" / "_static")  # the config's stylesheet and favicon
    names = list(pages)
    toc = {"format": "jb-book", "root": names[0]}
    if names[1:]:
        toc["chapters"] = [{"file": name} for name in names[1:]]
    (root / "_toc.yml").write_text(yaml.safe_dump(toc))
    for name, text in pages.items():
        (root / f"{name}.md").write_text(text)
    return root


def build(root: Path, *options: str, factor: float | None = 1.0) -> subprocess.CompletedProcess:
    """Run the build driver on `root`. The machine factor is taken as `factor` (the calibration would add about 15 s
    to every throwaway build); `factor=None` measures it, as a real build does."""
    given = [] if factor is None else ["--factor", str(factor)]
    return subprocess.run(
        [sys.executable, str(ROOT / "tools" / "build_book.py"), *given, *options, str(root)],
        capture_output=True, text=True,
    )


def execute(path: Path, cwd: Path, timeout: int = 120):
    """Execute a MyST notebook from `cwd`, as a learner's Jupyter would, and return the executed notebook."""
    notebook = jupytext.read(path)
    nbclient.NotebookClient(notebook, timeout=timeout, resources={"metadata": {"path": str(cwd)}}).execute()
    return notebook


def text_outputs(notebook) -> list[str]:
    """Every text output of every code cell, in order (stream text and plain-text results)."""
    texts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if "text" in output:
                texts.append(output["text"])
            elif "text/plain" in output.get("data", {}):
                texts.append(output["data"]["text/plain"])
    return texts


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
