"""What a student submits, read before anything runs: each chapter's auto-checked exercises, the submitted
notebook (or why it cannot be graded), and notebooks saved under another name."""

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from exercises import CHECK_CALL, Exercise, exercises, read, student_version
from screen import blocked_by, blocked_names

MAX_NOTEBOOK_BYTES = 64 << 20


class Unreadable(ValueError):
    """A submitted file that is not a notebook the grader can run; the message says why, for the student."""


@dataclass(frozen=True)
class Chapter:
    exercises: list[Exercise]
    trusted: set[str]  # the student edition's code cells, stripped: the course's code, not the learner's
    blocked: dict[str, set[str]]  # {function: the names its check's blocked references go by}


def chapters_to_grade(chapters: Path) -> dict[str, Chapter]:
    """Each chapter with auto-checked exercises, keyed by the notebook name a student submits."""
    found = {}
    for source in sorted(chapters.glob("*.md")):
        notebook = read(source)
        listed = exercises(notebook)
        if listed:
            trusted = {without_checks(cell.source).strip() for cell in student_version(notebook).cells
                       if cell.cell_type == "code"}
            blocked = {e.function: blocked_names(*blocked_by(e.check)) for e in listed}
            found[f"{source.stem}.ipynb"] = Chapter(listed, trusted, blocked)
    return found


def without_checks(source: str) -> str:
    """A cell without its check calls: the learner's own are not trusted, and the grader runs the checks itself."""
    return "\n".join(line for line in source.splitlines() if not CHECK_CALL.search(line))


def load_submission(path: Path) -> nbformat.NotebookNode:
    """The submitted notebook as nbformat 4, or Unreadable saying what is wrong with the file."""
    if path.is_symlink():
        raise Unreadable(f"{path.name} is a symbolic link: submit the notebook file itself")
    if path.is_dir():
        raise Unreadable(f"{path.name} is a folder, not a notebook")
    size = path.stat().st_size
    if size == 0:
        raise Unreadable(f"{path.name} is empty")
    if size > MAX_NOTEBOOK_BYTES:
        raise Unreadable(f"{path.name} is {size >> 20} MB: clear its outputs (Edit > Clear Outputs) and submit again")
    try:
        data = json.loads(path.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise Unreadable(f"{path.name} is not a notebook saved by Jupyter: it is not valid JSON ({error})") from None
    version = data.get("nbformat") if isinstance(data, dict) else None
    if version not in (3, 4):
        raise Unreadable(f"{path.name} says it is nbformat {version}: this grader reads versions 3 and 4")
    try:
        notebook = nbformat.reads(json.dumps(data), as_version=4)
        nbformat.validate(notebook)
    except Exception as error:  # nbformat raises several kinds for a malformed notebook
        raise Unreadable(f"{path.name} is not a valid notebook: {str(error).splitlines()[0]}") from None
    language = notebook.metadata.get("kernelspec", {}).get("language") or notebook.metadata.get(
        "language_info", {}).get("name", "python")
    if str(language).lower() != "python":
        raise Unreadable(f"{path.name} is a {language} notebook: the exercises are written in Python")
    return notebook


def _plain_stem(name: str) -> str:
    """'Activations (1)', 'activations-copy', 'Copy of activations' -> 'activations'."""
    stem = name.lower().removeprefix("copy of ").strip()
    return re.sub(r"(\s*\(\d+\)|[\s_-]*copy(\s*\d+)?|-\d+)$", "", stem).strip()


def near_misses(student: Path, name: str) -> list[str]:
    """Notebooks in the student's folder (or below it) that look like `name` saved under another name."""
    wanted, found = _plain_stem(Path(name).stem), []
    for folder, _, files in os.walk(student):  # never follows symbolic links
        for file in files:
            if file.endswith(".ipynb") and _plain_stem(Path(file).stem) == wanted:
                found.append(str((Path(folder) / file).relative_to(student)))
    return sorted(found)
