"""Every check works across the sandbox: its arguments (tensors, generators, tokenizers, dicts) reach the learner's
function, and its answers (tensors, tuples, numbers, a peak of memory measured inside) come back.

A made-up chapter holds one exercise per check, with tests/test_checks.py's correct answers as the chapter's own
code; graded with those answers, every exercise passes, and with the stubs, none does.
"""

import ast
import csv
from pathlib import Path

import nbformat
import pytest

from book_helpers import page
from exercises import read, student_version
from grade import grade
from test_checks import CHECKS

pytestmark = pytest.mark.slow


def answers_source() -> str:
    """test_checks.py's imports and answer functions (not its tests, whose check calls would read as exercises)."""
    source = (Path(__file__).parent / "test_checks.py").read_text()
    kept = [node for node in ast.parse(source).body
            if isinstance(node, ast.Import | ast.ImportFrom)
            or (isinstance(node, ast.FunctionDef) and not node.name.startswith("test_")
                and "checks.check_" not in ast.get_source_segment(source, node))]
    return "\n\n".join(ast.get_source_segment(source, node) for node in kept)


def chapter() -> str:
    """One exercise per check: the answer is test_checks.py's correct function, given the learner's name."""
    text = page(answers_source())
    for name, (check, correct, _) in CHECKS.items():
        stub = f'def my_{name}(*args): raise NotImplementedError("write my_{name}")'
        text += (f"\n```{{code-cell}} ipython3\n:tags: [solution]\n:stub: '{stub}'\n\n"
                 f"my_{name} = {correct.__name__}\n```\n\n"
                 f"```{{code-cell}} ipython3\nchecks.{check.__name__}(my_{name})\n```\n")
    return text


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    chapters, submissions, out = (tmp_path_factory.mktemp(name) for name in ("chapters", "submissions", "grades"))
    (chapters / "every_check.md").write_text(chapter())
    for student, notebook in (("answers", read(chapters / "every_check.md")),
                              ("stubs", student_version(read(chapters / "every_check.md")))):
        (submissions / student).mkdir()
        nbformat.write(notebook, submissions / student / "every_check.ipynb")
    grade(submissions, chapters, out, cell_timeout=60, seed=7)
    with open(out / "grades.csv") as file:
        return {row.pop("student"): row for row in csv.DictReader(file)}, out


def test_every_correct_answer_passes_through_the_sandbox(graded):
    rows, out = graded
    failed = {column: status for column, status in rows["answers"].items() if column != "passed" and status != "pass"}
    assert failed == {}, (out / "feedback" / "answers.md").read_text()


def test_no_stub_passes(graded):
    rows, _ = graded
    assert set(rows["stubs"].values()) == {"not attempted", "0"}
