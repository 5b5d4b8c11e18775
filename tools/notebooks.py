"""Write an .ipynb copy of every chapter in the table of contents, for learners who run them in Jupyter.

    python tools/notebooks.py OUTPUT_DIR

The copies have no outputs: run them top to bottom in Jupyter. They import `minformers` from the project's
.venv, so start Jupyter from there (`.venv/bin/jupyter lab OUTPUT_DIR`).
"""

import sys
from pathlib import Path

import jupytext
import yaml

from build_book import front_matter

ROOT = Path(__file__).resolve().parent.parent


def is_notebook(source: Path) -> bool:
    """A page is a notebook when its front matter names a kernel; other pages are plain MyST text."""
    return "kernelspec" in front_matter(source)


def chapters() -> list[Path]:
    """The notebook pages listed in _toc.yml, in reading order."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    names = [toc["root"]] + [chapter["file"] for part in toc.get("parts", []) for chapter in part["chapters"]]
    return [ROOT / f"{name}.md" for name in names if is_notebook(ROOT / f"{name}.md")]


def main(output: Path) -> None:
    output.mkdir(parents=True, exist_ok=True)
    for source in chapters():
        target = output / f"{source.stem}.ipynb"
        jupytext.write(jupytext.read(source), target)
        print(f"wrote {target}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
