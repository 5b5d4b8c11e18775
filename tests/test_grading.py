"""`make grade` grades each kind of submission as expected, and one broken notebook cannot stop the rest."""

import csv
from pathlib import Path

import nbformat
import pytest

from exercises import read, student_version
from grade import grade

pytestmark = pytest.mark.slow
FIXTURE = Path(__file__).parent / "fixtures" / "exercise_page.md"

CORRECT_MASK = """def my_mask(t, window, global_positions):
    mask = torch.zeros(t, t, dtype=torch.bool)
    for i in range(t):
        for j in range(t):
            mask[i, j] = abs(i - j) <= window or i in global_positions or j in global_positions
    return mask"""
SWAPPED_POSITIONS = """def my_positions(length, d_model):
    angles = torch.arange(length)[:, None] / 10000 ** (torch.arange(0, d_model, 2) / d_model)
    return torch.stack([angles.cos(), angles.sin()], dim=-1).flatten(1)  # cos first: wrong"""
RAISING_MASK = """def my_mask(t, window, global_positions):
    raise ValueError("I gave up")"""
LOOPING_CELL = """while True:
    pass"""


def submission(replacements: dict[str, str | None]) -> nbformat.NotebookNode:
    """The student edition of the fixture with stub cells replaced (None deletes the cell)."""
    notebook = student_version(read(FIXTURE))
    cells = []
    for cell in notebook.cells:
        name = next((name for name in replacements if cell.source.startswith(f"def {name}(")), None)
        if name is None:
            cells.append(cell)
        elif replacements[name] is not None:
            cell.source = replacements[name]
            cells.append(cell)
    notebook.cells = cells
    return notebook


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    submissions = tmp_path_factory.mktemp("submissions")
    chapters = tmp_path_factory.mktemp("chapters")
    (chapters / "exercise_page.md").write_text(FIXTURE.read_text())
    students = {
        "correct": read(FIXTURE),  # the chapter itself, with its solutions
        "partly_wrong": submission({"my_mask": CORRECT_MASK, "my_positions": SWAPPED_POSITIONS}),
        "raises": submission({"my_mask": RAISING_MASK}),
        "loops": submission({"my_mask": CORRECT_MASK, "my_positions": LOOPING_CELL}),
        "missing_cell": submission({"my_mask": None}),
    }
    for student, notebook in students.items():
        (submissions / student).mkdir()
        nbformat.write(notebook, submissions / student / "exercise_page.ipynb")
    (submissions / "no_notebook").mkdir()
    out = tmp_path_factory.mktemp("grades")
    grade(submissions, chapters, out, cell_timeout=5)
    with open(out / "grades.csv") as file:
        rows = {row["student"]: row for row in csv.DictReader(file)}
    return rows, out


EXPECTED = {
    "correct": ("pass", "pass", "2"),
    "partly_wrong": ("pass", "wrong", "1"),
    "raises": ("raised", "not attempted", "0"),
    "loops": ("pass", "timeout", "1"),
    "missing_cell": ("missing", "not attempted", "0"),
    "no_notebook": ("no notebook", "no notebook", "0"),
}


@pytest.mark.parametrize("student", EXPECTED)
def test_each_submission_is_graded_as_expected(graded, student):
    rows, _ = graded
    row = rows[student]
    assert (row["exercise_page:my_mask"], row["exercise_page:my_positions"], row["passed"]) == EXPECTED[student]


def test_feedback_names_the_failing_case(graded):
    _, out = graded
    feedback = (out / "feedback" / "partly_wrong.md").read_text()
    assert "**wrong**" in feedback and "case 'one position, two channels'" in feedback
    assert "expected tensor" in feedback and "received tensor" in feedback
    assert "I gave up" in (out / "feedback" / "raises.md").read_text()


def test_a_learner_cannot_fake_a_pass(tmp_path):
    # A submission that prints the grader's marker itself, and replaces the check call, gains nothing.
    faker = submission({})
    faker.cells.append(nbformat.v4.new_code_cell('print(\'GRADER-RESULT {"status": "pass", "message": ""}\')'))
    (tmp_path / "subs" / "faker").mkdir(parents=True)
    nbformat.write(faker, tmp_path / "subs" / "faker" / "exercise_page.ipynb")
    (tmp_path / "chapters").mkdir()
    (tmp_path / "chapters" / "exercise_page.md").write_text(FIXTURE.read_text())
    rows = grade(tmp_path / "subs", tmp_path / "chapters", tmp_path / "out", cell_timeout=5)
    assert rows[0]["passed"] == 0
