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
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

from channel import ChannelClosed, ChannelTimeout, MessageTooLarge, receive, send
from exercises import CHECK_CALL, Exercise, exercises, read, student_version
from minformers import checks, data, train
from sandbox import Limits, check_available, ended_by, kill, start
from screen import blocked_by, blocked_names, parse_cells, reaches, screen_rewrites

ROOT = Path(__file__).resolve().parent.parent
HARNESS = Path(__file__).resolve().parent
MAX_NOTEBOOK_BYTES = 64 << 20
MAX_ANSWER_BYTES = 64 << 20
# What an exception says when the learner's function ran into one of the sandbox's limits: {status: its signs}.
LIMIT_ERRORS = {"memory limit": ("MemoryError", "can't allocate memory", "not enough memory"),
                "file limit": ("File too large",),
                "process limit": ("Resource temporarily unavailable",)}


class Unreadable(ValueError):
    """A submitted file that is not a notebook the grader can run; the message says why, for the student."""


class Stopped(BaseException):  # noqa: N818 -- not an Exception, so that a check's `except Exception` lets it through
    """The learner's function could not be called at all: {status, message} for every exercise it stops."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status, self.message = status, message


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


def course_caches() -> tuple[dict[Path, str], dict[str, str]]:
    """The course's data cache and the book's checkpoints, read-only in the sandbox: the chapters load their data
    and trained models from them, as when the book is built, instead of downloading (the sandbox has no network)
    or training again. `make book` fills both."""
    data_cache = data.cache_dir()
    checkpoints = train.checkpoint_path("any", {}).parent
    binds = {path: str(path) for path in (data_cache, checkpoints) if path.is_dir()}
    return binds, {"MINFORMERS_CACHE": str(data_cache)}


class Session:
    """One submitted notebook running in its sandbox, answering calls of its functions."""

    def __init__(self, notebook: nbformat.NotebookNode, limits: Limits, cell_timeout: int, notebook_timeout: int):
        self.limits, self.cell_timeout = limits, cell_timeout
        self.folder = Path(tempfile.mkdtemp(prefix="grade-"))
        self.folder.chmod(0o755)
        nbformat.write(notebook, self.folder / "submission.ipynb")
        (self.folder / "submission.ipynb").chmod(0o644)
        request_read, self.request = os.pipe()
        self.response, response_write = os.pipe()
        command = ["python", "/grader/harness.py", "/submission/submission.ipynb",
                   str(request_read), str(response_write), str(cell_timeout)]
        caches, environment = course_caches()
        self.process = start(command, limits, {HARNESS: "/grader", self.folder: "/submission", **caches},
                             (request_read, response_write), environment)
        os.close(request_read)
        os.close(response_write)
        self.problems = self._wait_ready(time.monotonic() + notebook_timeout, notebook_timeout)

    def _stopped(self, error: BaseException, what: str) -> Stopped:
        """Kill the sandbox and say why it stopped, as a status."""
        if isinstance(error, ChannelTimeout):
            kill(self.process)
            return Stopped("timeout", f"{what} ran past the time allowed")
        if isinstance(error, MessageTooLarge):
            kill(self.process)
            return Stopped("output limit", f"{what} answered with {error}")
        with contextlib.suppress(subprocess.TimeoutExpired):  # it closed the channel: let it finish exiting
            self.process.wait(timeout=5)
        kill(self.process)
        limit = ended_by(self.process.returncode, self.limits)
        if limit:
            return Stopped(limit.split(":")[0], f"{what}: {limit}")
        return Stopped("crashed", f"{what}: the notebook's process ended (exit status {self.process.returncode})")

    def _wait_ready(self, deadline: float, notebook_timeout: int) -> list[dict]:
        running = 0
        while True:
            try:
                message = receive(self.response, trusted=False, deadline=deadline, max_bytes=1 << 20)
            except (ChannelTimeout, ChannelClosed, MessageTooLarge) as error:
                stop = self._stopped(error, f"cell {running}")
                if stop.status == "timeout":
                    stop.message = f"the notebook ran past {notebook_timeout} s (cell {running} was running)"
                raise stop from None
            if not isinstance(message, dict):
                raise self._stopped(ChannelClosed(), "the notebook sent the grader something it did not ask for")
            if message.get("op") == "cell":
                running = message.get("number")
            elif message.get("op") == "ready":
                return list(message.get("problems", []))

    def call(self, function: str, op: str, args: tuple, kwargs: dict):
        blocked_functions, blocked_attributes = checks.blocked_now
        request = {"op": op, "function": function, "args": args, "kwargs": kwargs, "timeout": self.cell_timeout,
                   "blocked_functions": [f"{f.__module__}:{f.__qualname__}" for f in blocked_functions],
                   "blocked_attributes": [(_name_of(owner), name) for owner, name in blocked_attributes]}
        try:
            send(self.request, request)
            answer = receive(self.response, trusted=False, deadline=time.monotonic() + self.cell_timeout + 30,
                             max_bytes=MAX_ANSWER_BYTES)
        except (ChannelTimeout, ChannelClosed, MessageTooLarge, BrokenPipeError) as error:
            raise self._stopped(error, f"{function}") from None
        except Exception as error:  # an answer that is not plain data: refused by weights_only loading
            raise Stopped("wrong", f"{function} returned something that is not data: {error}") from None
        return _outcome(function, answer, self)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            send(self.request, {"op": "stop"})
        kill(self.process)
        for fd in (self.request, self.response):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self.folder, ignore_errors=True)


def _name_of(owner) -> str:
    if isinstance(owner, type):
        return f"{owner.__module__}:{owner.__qualname__}"
    return f"{owner.__name__}:"


def _outcome(function: str, answer, session: Session):
    """The value the learner's function returned, or its exception raised again here, for the check to judge."""
    outcome = answer.get("outcome") if isinstance(answer, dict) else None
    if outcome == "value":
        value = answer["value"]
        if isinstance(value, dict) and list(value) == ["unsupported type"]:  # shown by its type name, as in-process
            return type(str(value["unsupported type"]), (), {})()
        return value
    if outcome == "missing":
        raise Stopped(*_missing(function, session.problems))
    if outcome == "timeout":
        raise Stopped("timeout", f"{function} ran longer than {session.cell_timeout} s")
    if outcome == "raised":
        if answer.get("not attempted"):
            raise NotImplementedError(answer.get("message", ""))
        if answer.get("calls reference"):
            raise LookupError(checks._BLOCKED)
        raise type(str(answer.get("type", "Exception")), (Exception,), {})(answer.get("message", ""))
    if outcome == "harness error":  # the grader's own agent failed: a bug to report, not the learner's fault
        raise Stopped("crashed", f"the grader could not call {function}: {answer.get('message')}")
    raise Stopped("crashed", f"the notebook's answer for {function} was not understood")


def _missing(function: str, problems: list[dict]) -> tuple[str, str]:
    """Why `function` is not defined, from what went wrong in the notebook's cells."""
    if any(problem["kind"] == "timeout" for problem in problems):
        first = next(problem for problem in problems if problem["kind"] == "timeout")
        return "timeout", f"{function} is not defined: cell {first['cell']} ran past the time allowed"
    said = "; ".join(f"cell {p['cell']}: {p['message']}" for p in problems if p["kind"] in ("syntax error", "exit"))
    return "missing", f"{function} is not defined" + (f" ({said})" if said else "")


class RemoteFunction:
    """Stands in for a learner's function in a check: each call runs the real one in the sandbox."""

    def __init__(self, session: Session, name: str):
        self.session, self.name = session, name

    def __call__(self, *args, **kwargs):
        return self.session.call(self.name, "call", args, kwargs)

    def peak_tensor_bytes(self, *args) -> int:
        return self.session.call(self.name, "peak", args, {})


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
