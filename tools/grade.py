"""Grade submitted notebooks: run each in a sandbox, then check every exercise's function from outside it.

    python tools/grade.py SUBMISSIONS [--chapters book] [--out _build/grades] [--cell-timeout 60]
                                      [--notebook-timeout 600] [--memory-gb 4] [--seed N]

SUBMISSIONS holds one folder per student, each with notebooks named as in the student edition
(e.g. alice/attention.ipynb). Each notebook runs in its own sandbox (tools/sandbox.py: bubblewrap, no network,
no view of the book, of other students or of the output folder, limits on memory, processor time, processes and
file size), with the learner's own check cells removed. The grader then runs each exercise's check in its own
process: the check draws its cases (the random ones from a seed drawn for this run, so they cannot be known in
advance), and every call of the learner's function is sent into the sandbox, which answers with plain data
(tools/harness.py). The verdict is the check's, computed here, so nothing a submission does in its own process
can change it.

Writes OUT/grades.csv (one row per student, one column per exercise, then the number passed; written by this
process alone, after the last student, with each student's row kept in OUT/rows/ as soon as it is graded) and
OUT/feedback/<student>.md (each exercise's result with its message).
Before a pass counts, the submission's source is read (tools/screen.py): a function that reaches the library's
solution through any chain of names is `calls reference`, and a notebook that rewrites code at run time is
`needs review`.
Statuses: pass, wrong, raised, not attempted, calls reference, needs review, missing (the function is not
defined), timeout, no notebook, unreadable (not a notebook this grader can run), memory limit, cpu limit, file
limit, process limit, output limit, crashed (the sandbox ended without saying why).
With GRADE_DEBUG=1 in the environment, what the sandboxed notebooks print goes to the grader's terminal.
"""

import argparse
import contextlib
import csv
import io
import json
import secrets
import sys
from pathlib import Path

import nbformat

from exercises import Exercise
from minformers import checks
from sandbox import Limits, check_available
from screen import parse_cells, reaches, screen_rewrites
from session import RemoteFunction, Session, Stopped
from submissions import Chapter, Unreadable, chapters_to_grade, load_submission, near_misses, without_checks

ROOT = Path(__file__).resolve().parent.parent
# What an exception says when the learner's function ran into one of the sandbox's limits: {status: its signs}.
LIMIT_ERRORS = {"memory limit": ("MemoryError", "can't allocate memory", "not enough memory"),
                "file limit": ("File too large",),
                "process limit": ("Resource temporarily unavailable",)}


def check_exercise(session: Session, exercise: Exercise) -> dict:
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the check's own "ok: ..." line
            getattr(checks, exercise.check)(RemoteFunction(session, exercise.function))
        return {"status": "pass", "message": ""}
    except checks.CheckFailed as failure:
        message = str(failure)
        for status, signs in LIMIT_ERRORS.items() if failure.kind == "raised" else {}:
            if any(sign in message for sign in signs):
                return {"status": status, "message": f"{message}\n({limit_said(status, session.limits)})"}
        return {"status": failure.kind, "message": message}
    except Stopped as stop:
        return {"status": stop.status, "message": stop.message}


def limit_said(status: str, limits: Limits) -> str:
    return {"memory limit": f"the limit is {limits.memory_bytes / 2**30:g} GB of memory",
            "file limit": f"the limit is {limits.file_bytes >> 20} MB per file",
            "process limit": f"the limit is {limits.processes} processes"}[status]


def grade_notebook(path: Path, chapter: Chapter, limits: Limits, cell_timeout: int,
                   notebook_timeout: int) -> dict[str, dict]:
    """{function: {"status", "message"}} for one submitted notebook."""
    listed = chapter.exercises
    try:
        notebook = load_submission(path)
    except Unreadable as error:
        return {e.function: {"status": "unreadable", "message": str(error)} for e in listed}
    for cell in notebook.cells:
        cell.source = without_checks(cell.source)
    try:
        session = Session(notebook, limits, cell_timeout, notebook_timeout)
    except Stopped as stop:
        return {e.function: {"status": stop.status, "message": stop.message} for e in listed}
    try:
        results = {}
        for exercise in listed:
            results[exercise.function] = check_exercise(session, exercise)
            if session.process.poll() is not None:  # stopped: what is left cannot be called
                stopped = results[exercise.function]
                for rest in listed[len(results):]:
                    results[rest.function] = {"status": stopped["status"],
                                              "message": f"not checked: the notebook stopped ({stopped['message']})"}
                break
    finally:
        session.close()
    return read_source(notebook, chapter, results)


def read_source(notebook: nbformat.NotebookNode, chapter: Chapter, results: dict[str, dict]) -> dict[str, dict]:
    """Passes that the submission's source does not support become `calls reference` or `needs review`."""
    sources = [cell.source for cell in notebook.cells if cell.cell_type == "code"]
    rewriting = screen_rewrites(sources, chapter.trusted)
    trees, _ = parse_cells(sources)
    for function, result in results.items():
        if result["status"] != "pass":
            continue
        found = reaches(trees, function, chapter.blocked[function])
        if found:
            results[function] = {"status": "calls reference", "message": (
                f"{function} reaches the library's own solution ({found}): write the computation yourself")}
        elif rewriting:
            listed = "\n".join(f"  {finding}" for finding in rewriting[:5])
            results[function] = {"status": "needs review", "message": (
                "the values were right, but the notebook does something the grader cannot read past, so an "
                f"instructor will read it:\n{listed}")}
    return results


def grade_student(student: Path, chapters: dict[str, Chapter], limits: Limits, cell_timeout: int,
                  notebook_timeout: int) -> dict[str, dict]:
    """{column: result} for one student; nothing a submission does can stop the others being graded."""
    results = {}
    for name, chapter in chapters.items():
        path, listed = student / name, chapter.exercises
        try:
            if path.exists() or path.is_symlink():
                by_function = grade_notebook(path, chapter, limits, cell_timeout, notebook_timeout)
            else:
                misses = near_misses(student, name)
                hint = f": found {', '.join(misses)}; name it {name}, at the top of your folder" if misses else ""
                by_function = {e.function: {"status": "no notebook", "message": f"{name} not submitted{hint}"}
                               for e in listed}
        except Exception as error:  # noqa: BLE001 -- a fault in grading one notebook must not lose the rest
            by_function = {e.function: {"status": "crashed", "message": f"the grader failed on {name}: {error!r}"}
                           for e in listed}
        for exercise in listed:
            results[f"{Path(name).stem}:{exercise.function}"] = by_function[exercise.function]
    return results


def feedback(student: str, results: dict[str, dict]) -> str:
    lines = [f"# Feedback for {student}\n"]
    for column, result in results.items():
        chapter, function = column.split(":")
        lines.append(f"## {chapter}.ipynb: {function}\n\n**{result['status']}**\n")
        if result["message"]:
            lines.append(f"```\n{result['message']}\n```\n")
    return "\n".join(lines)


def grade(submissions: Path, chapters: Path, out: Path, cell_timeout: int = 60, notebook_timeout: int = 600,
          limits: Limits | None = None, seed: int | None = None) -> list[dict]:
    check_available()
    limits = limits or Limits()
    to_grade = chapters_to_grade(chapters)
    columns = [f"{Path(name).stem}:{e.function}" for name, chapter in to_grade.items() for e in chapter.exercises]
    for folder in ("feedback", "rows"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    rows = []
    with checks.cases_from(secrets.randbelow(2**31) if seed is None else seed):
        for student in sorted(path for path in submissions.iterdir() if path.is_dir()):
            results = grade_student(student, to_grade, limits, cell_timeout, notebook_timeout)
            row = {"student": student.name, **{column: results[column]["status"] for column in columns}}
            row["passed"] = sum(row[column] == "pass" for column in columns)
            rows.append(row)
            (out / "feedback" / f"{student.name}.md").write_text(feedback(student.name, results))
            (out / "rows" / f"{student.name}.json").write_text(json.dumps(row))
            print(f"{student.name}: {row['passed']}/{len(columns)} passed", flush=True)
    partial = out / "grades.csv.partial"
    with open(partial, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=["student", *columns, "passed"])
        writer.writeheader()
        writer.writerows(rows)
    partial.replace(out / "grades.csv")
    print(f"wrote {out / 'grades.csv'} and {out / 'feedback'}/")
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("submissions", type=Path)
    parser.add_argument("--chapters", type=Path, default=ROOT / "book")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "grades")
    parser.add_argument("--cell-timeout", type=int, default=60)
    parser.add_argument("--notebook-timeout", type=int, default=600)
    parser.add_argument("--memory-gb", type=float, default=4)
    parser.add_argument("--seed", type=int, help="the checks' random cases (default: drawn anew for each run)")
    args = parser.parse_args(argv)
    if not args.submissions.is_dir():
        parser.error(f"SUBMISSIONS must be a folder with one subfolder per student: {args.submissions}")
    limits = Limits(memory_bytes=int(args.memory_gb * (1 << 30)), cpu_seconds=args.notebook_timeout + 300)
    grade(args.submissions, args.chapters, args.out, args.cell_timeout, args.notebook_timeout, limits, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
