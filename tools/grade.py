"""Grade submitted notebooks: run each one, then run every exercise's check on the learner's function.

    python tools/grade.py SUBMISSIONS [--chapters book] [--out _build/grades] [--cell-timeout 60]

SUBMISSIONS holds one folder per student, each with notebooks named as in the student edition
(e.g. alice/attention.ipynb). Each notebook runs in its own kernel, from its own folder; a cell that fails
does not stop the rest, and a cell that runs longer than --cell-timeout is interrupted. The learner's own check
cells are not trusted: they are removed, and the grader appends its own after the last cell.

Writes OUT/grades.csv (one row per student, one column per exercise, then the number passed) and
OUT/feedback/<student>.md (each exercise's result with the check's message).
Statuses: pass, wrong, raised, not attempted, calls reference, missing (the function is not defined),
timeout, no notebook.
"""

import argparse
import csv
import json
import sys
from pathlib import Path

import nbclient
import nbformat

from exercises import CHECK_CALL, Exercise, exercises, read

ROOT = Path(__file__).resolve().parent.parent
RESULT_MARKER = "GRADER-RESULT "
GRADER_CELL = """
try:
    from minformers import checks as _grader_checks
    _grader_checks.{check}({function})
    _grader_result = {{"status": "pass", "message": ""}}
except NameError as _grader_error:
    _grader_result = {{"status": "missing", "message": f"{function} is not defined ({{_grader_error}})"}}
except AssertionError as _grader_error:
    _grader_result = {{"status": getattr(_grader_error, "kind", "wrong"), "message": str(_grader_error)}}
print({marker!r} + __import__("json").dumps(_grader_result))
"""


def chapter_exercises(chapters: Path) -> dict[str, list[Exercise]]:
    """Each chapter's auto-checked exercises, keyed by the notebook name a student submits."""
    found = {}
    for source in sorted(chapters.glob("*.md")):
        listed = exercises(read(source))
        if listed:
            found[f"{source.stem}.ipynb"] = listed
    return found


def result_of(cell) -> dict:
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error" and output.get("ename") == "KeyboardInterrupt":
            return {"status": "timeout", "message": "the check was interrupted: the function ran too long"}
        for line in output.get("text", "").splitlines():
            if line.startswith(RESULT_MARKER):
                return json.loads(line[len(RESULT_MARKER) :])
    return {"status": "missing", "message": "the grader's check did not run"}


def grade_notebook(path: Path, listed: list[Exercise], cell_timeout: int) -> dict[str, dict]:
    """{function: {"status", "message"}} for one submitted notebook."""
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        lines = cell.get("source", "").splitlines()
        cell.source = "\n".join(line for line in lines if not CHECK_CALL.search(line))
    first_grader_cell = len(notebook.cells)
    for exercise in listed:
        source = GRADER_CELL.format(check=exercise.check, function=exercise.function, marker=RESULT_MARKER)
        notebook.cells.append(nbformat.v4.new_code_cell(source))
    client = nbclient.NotebookClient(
        notebook,
        timeout=cell_timeout,
        allow_errors=True,  # a failing cell must not stop the rest of the submission
        interrupt_on_timeout=True,  # nor a cell that never ends
        resources={"metadata": {"path": str(path.parent)}},
    )
    try:
        client.execute()
    except Exception as error:  # the kernel died or could not start: nothing in this notebook can be graded
        return {e.function: {"status": "raised", "message": f"the notebook could not run: {error}"} for e in listed}
    timed_out = [
        index
        for index, cell in enumerate(notebook.cells[:first_grader_cell])
        if any(output.get("ename") == "KeyboardInterrupt" for output in cell.get("outputs", []))
    ]
    results = {}
    for offset, exercise in enumerate(listed):
        result = result_of(notebook.cells[first_grader_cell + offset])
        if result["status"] == "missing" and timed_out:
            result = {"status": "timeout", "message": f"cell {timed_out[0] + 1} ran longer than {cell_timeout} s"}
        results[exercise.function] = result
    return results


def grade(submissions: Path, chapters: Path, out: Path, cell_timeout: int) -> list[dict]:
    exercises_by_notebook = chapter_exercises(chapters)
    columns = [f"{Path(name).stem}:{e.function}" for name, listed in exercises_by_notebook.items() for e in listed]
    rows = []
    (out / "feedback").mkdir(parents=True, exist_ok=True)
    for student in sorted(path for path in submissions.iterdir() if path.is_dir()):
        row, feedback = {"student": student.name}, [f"# Feedback for {student.name}\n"]
        for name, listed in exercises_by_notebook.items():
            path = student / name
            if path.exists():
                results = grade_notebook(path, listed, cell_timeout)
            else:
                results = {e.function: {"status": "no notebook", "message": f"{name} not submitted"} for e in listed}
            for exercise in listed:
                result = results[exercise.function]
                row[f"{Path(name).stem}:{exercise.function}"] = result["status"]
                feedback.append(f"## {name}: {exercise.function}\n\n**{result['status']}**\n")
                if result["message"]:
                    feedback.append(f"```\n{result['message']}\n```\n")
        row["passed"] = sum(row[column] == "pass" for column in columns)
        rows.append(row)
        (out / "feedback" / f"{student.name}.md").write_text("\n".join(feedback))
        print(f"{student.name}: {row['passed']}/{len(columns)} passed", flush=True)
    with open(out / "grades.csv", "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=["student", *columns, "passed"])
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {out / 'grades.csv'} and {out / 'feedback'}/")
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("submissions", type=Path)
    parser.add_argument("--chapters", type=Path, default=ROOT / "book")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "grades")
    parser.add_argument("--cell-timeout", type=int, default=60)
    args = parser.parse_args(argv)
    if not args.submissions.is_dir():
        parser.error(f"SUBMISSIONS must be a folder with one subfolder per student: {args.submissions}")
    grade(args.submissions, args.chapters, args.out, args.cell_timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
