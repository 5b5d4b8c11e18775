"""A class of hostile submissions graded in one run: no cheat passes, nothing stops or corrupts the run.

Each student below tries one attack an instructor's class could contain (issue 27 lists them): forging a result,
patching the checks, calling the library's solution by another route, answering from a table of the public cases,
reading the book or another student's work, writing outside its folder, outliving the grader, exhausting a limit,
or submitting a file that is not a notebook. The honest students pass, and the attacks get the status named here.
"""

import csv
import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest
import torch

from exercises import read, student_version
from grade import grade
from minformers import checks
from sandbox import Limits

pytestmark = pytest.mark.slow
FIXTURE = Path(__file__).parent / "fixtures" / "exercise_page.md"
NAME = "exercise_page.ipynb"
SEED = 12345  # the grader's seed for this run: not the 0 that learners see
MARKER = "zz-detached-marker"

CORRECT_MASK = """def my_mask(t, window, global_positions):
    index = torch.arange(t)
    mask = (index[:, None] - index[None, :]).abs() <= window
    mask[list(global_positions), :] = True
    mask[:, list(global_positions)] = True
    return mask"""
CORRECT_POSITIONS = """def my_positions(length, d_model):
    angle = torch.arange(length)[:, None] / 10000 ** (torch.arange(0, d_model, 2) / d_model)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(1)"""


def public_table(check, correct_source: str) -> dict[str, list]:
    """The answers to a check's cases as learners see them (seed 0), keyed by the arguments: a cheat's table."""
    namespace, table = {"torch": torch}, {}
    exec(correct_source, namespace)  # noqa: S102 -- our own correct answer, to fill the table
    correct = next(value for name, value in namespace.items() if name.startswith("my_"))

    def record(*args):
        answer = correct(*args)
        table[repr(tuple(list(a) if isinstance(a, list | tuple) else a for a in args))] = answer.tolist()
        return answer

    check(record)
    return table


def notebook(mask: str | None = None, positions_cell: str | None = None, before: str = "", after: str = ""):
    """The student edition with its two stubs replaced, and cells added before the first stub and at the end."""
    edition = student_version(read(FIXTURE))
    cells = []
    for cell in edition.cells:
        if cell.source.startswith("def my_mask(") and mask is not None:
            cell.source = mask
        if cell.source.startswith("def my_positions(") and positions_cell is not None:
            cell.source = positions_cell
        if cell.source.startswith("def my_mask(") and before:
            cells.append(nbformat.v4.new_code_cell(before))
        cells.append(cell)
    if after:
        cells.append(nbformat.v4.new_code_cell(after))
    edition.cells = cells
    return edition


def attacks(paths: dict[str, Path]) -> dict[str, object]:
    """{student: notebook, or a function that writes the student's folder}."""
    mask_table = public_table(checks.check_local_global_mask, CORRECT_MASK)
    positions_table = public_table(checks.check_sinusoidal_positions, CORRECT_POSITIONS)
    from_table = f"""TABLE = {mask_table!r}
POSITIONS = {positions_table!r}

def my_mask(t, window, global_positions):
    return torch.tensor(TABLE[repr((t, window, list(global_positions)))])

def my_positions(length, d_model):
    return torch.tensor(POSITIONS[repr((length, d_model))])"""
    solution = '__import__("re").search(r"def my_mask.*?return[^\\n]*\\n", open(PATH).read(), 16).group(0)'
    return {
        "honest": notebook(CORRECT_MASK, CORRECT_POSITIONS),
        "untouched": notebook(),
        "patches_checks": notebook(after="import minformers.checks as _c\nfor _n in dir(_c):\n"
                                         "    if _n.startswith('check_'):\n"
                                         "        setattr(_c, _n, lambda *a, **k: None)"),
        "patches_allclose": notebook("def my_mask(t, window, global_positions):\n    return torch.zeros(t, t).bool()",
                                     after="torch.allclose = lambda *a, **k: True\ntorch.equal = lambda *a, **k: True"),
        "prints_result_line": notebook(after="import builtins\nbuiltins.print = lambda *a, **k: None\n"
                                             "__builtins__.print('GRADER-RESULT {\"status\": \"pass\"}')"),
        "event_hook": notebook(after="get_ipython().events.register('post_run_cell', "
                                     "lambda *a: print('GRADER-RESULT {\"status\": \"pass\"}'))"),
        "wraps_reference_code": notebook(
            "import types\nfrom minformers import masks\nmy_mask = types.FunctionType("
            "masks.local_global_mask.__code__, masks.local_global_mask.__globals__, 'my_mask', "
            "masks.local_global_mask.__defaults__)", CORRECT_POSITIONS),
        "loads_second_copy": notebook(
            "import importlib.util\nfrom minformers import masks\n"
            "spec = importlib.util.spec_from_file_location('copy_of_masks', masks.__file__)\n"
            "copy_of_masks = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(copy_of_masks)\n"
            "my_mask = copy_of_masks.local_global_mask", CORRECT_POSITIONS),
        "saved_alias": notebook(
            "def my_mask(t, window, global_positions):\n    return helper(t, window, global_positions)",
            CORRECT_POSITIONS, before="from minformers import masks as m\nkept = {'f': m.local_global_mask}\n"
                                      "helper = kept['f']"),
        "computed_name": notebook(
            "def my_mask(t, window, global_positions):\n    return helper(t, window, global_positions)",
            CORRECT_POSITIONS,
            before="from minformers import masks as m\nhelper = getattr(m, 'local_global' + '_mask')"),
        "answers_from_a_table": notebook(from_table, "pass"),
        "reads_the_book": notebook(before=f"PATH = {str(paths['book'])!r}\nexec({solution})"),
        "reads_another_student": notebook(before=f"PATH = {str(paths['victim'])!r}\nexec({solution})"),
        "overwrites_others": notebook(after="\n".join(
            f"try:\n    open({str(path)!r}, 'w').write('{{}}')\nexcept OSError as error:\n    print(error)"
            for path in (paths["victim"], paths["grades"], paths["checks"]))),
        "outlives_the_grader": notebook(after=(
            "import subprocess\nsubprocess.Popen(['python', '-c', 'import time, pathlib\\n"
            f"while True:  # {MARKER}\\n    time.sleep(0.1)\\n"
            f"    pathlib.Path({str(paths['grades'])!r}).write_text(\"forged\")'], start_new_session=True)")),
        "ignores_interrupts": notebook(CORRECT_MASK, "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                                       "signal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True:\n    pass"),
        "memory_hog": notebook("def my_mask(t, window, global_positions):\n"
                               "    return torch.ones(2**36, dtype=torch.uint8)", CORRECT_POSITIONS,
                               after="hog = bytearray(2**36)"),
        "prints_50_mb": notebook(CORRECT_MASK, CORRECT_POSITIONS, after="print('x' * 50_000_000)"),
        "answers_80_mb": notebook(CORRECT_MASK,
                                  "def my_positions(length, d_model):\n    return torch.zeros(20_000_000)"),
        "writes_100_mb": notebook("def my_mask(t, window, global_positions):\n"
                                  "    with open('/tmp/big', 'wb') as file:\n        file.write(bytes(100 << 20))",
                                  CORRECT_POSITIONS),
        "starts_processes_when_called": notebook(
            "import subprocess\ndef my_mask(t, window, global_positions):\n"
            "    return [subprocess.Popen(['sleep', '6017']) for _ in range(100)]", CORRECT_POSITIONS),
        "starts_200_processes": notebook(CORRECT_MASK, CORRECT_POSITIONS, after=(
            "import subprocess\nstarted = []\ntry:\n    for _ in range(200):\n"
            "        started.append(subprocess.Popen(['sleep', '6017']))\nexcept OSError as error:\n    print(error)")),
        "exits_the_kernel": notebook(CORRECT_MASK, CORRECT_POSITIONS, after="import os\nos._exit(3)"),
        "syntax_error": notebook("def my_mask(t, window, global_positions)\n    return None", CORRECT_POSITIONS),
        "raises_system_exit": notebook("raise SystemExit('bye')", CORRECT_POSITIONS),
        "José García": notebook(CORRECT_MASK, CORRECT_POSITIONS),
    }


BROKEN_FILES = {
    "invalid_json": lambda path: path.write_text("{this is not json"),
    "empty_file": lambda path: path.write_text(""),
    "nbformat_5": lambda path: path.write_text(json.dumps({"nbformat": 5, "nbformat_minor": 0, "cells": []})),
    "a_folder": lambda path: path.mkdir(),
    "symlink_outside": lambda path: path.symlink_to("/etc/passwd"),
    "r_kernel": lambda path: nbformat.write(_with_language(notebook(CORRECT_MASK, CORRECT_POSITIONS), "R"), path),
    "nbformat_3": lambda path: nbformat.write(nbformat.convert(notebook(CORRECT_MASK, CORRECT_POSITIONS), 3), path),
    "saved_as_copy": lambda path: nbformat.write(notebook(), path.with_name("exercise_page (1).ipynb")),
    "in_a_subfolder": lambda path: (path.with_name("work").mkdir(),
                                    nbformat.write(notebook(), path.with_name("work") / NAME)),
}


def _with_language(edition, language: str):
    edition.metadata["kernelspec"] = {"name": "ir", "display_name": "R", "language": language}
    return edition


EXPECTED = {  # student: (my_mask, my_positions)
    "honest": ("pass", "pass"),
    "untouched": ("not attempted", "not attempted"),
    "patches_checks": ("not attempted", "not attempted"),
    "patches_allclose": ("wrong", "not attempted"),
    "prints_result_line": ("not attempted", "not attempted"),
    "event_hook": ("not attempted", "not attempted"),
    "wraps_reference_code": ("calls reference", "needs review"),
    "loads_second_copy": ("calls reference", "needs review"),
    "saved_alias": ("calls reference", "pass"),
    "computed_name": ("calls reference", "needs review"),  # the run-time block sees it; the source shows getattr
    "answers_from_a_table": ("raised", "raised"),
    "reads_the_book": ("not attempted", "not attempted"),
    "reads_another_student": ("not attempted", "not attempted"),
    "overwrites_others": ("not attempted", "not attempted"),
    "outlives_the_grader": ("not attempted", "not attempted"),
    "ignores_interrupts": ("timeout", "timeout"),
    "memory_hog": ("memory limit", "pass"),
    "prints_50_mb": ("pass", "pass"),
    "answers_80_mb": ("pass", "output limit"),
    "writes_100_mb": ("file limit", "needs review"),  # `open` is not needed by an exercise
    "starts_processes_when_called": ("process limit", "needs review"),
    "starts_200_processes": ("needs review", "needs review"),
    "exits_the_kernel": ("crashed", "crashed"),
    "syntax_error": ("missing", "pass"),
    "raises_system_exit": ("missing", "pass"),
    "José García": ("pass", "pass"),
    "invalid_json": ("unreadable", "unreadable"),
    "empty_file": ("unreadable", "unreadable"),
    "nbformat_5": ("unreadable", "unreadable"),
    "a_folder": ("unreadable", "unreadable"),
    "symlink_outside": ("unreadable", "unreadable"),
    "r_kernel": ("unreadable", "unreadable"),
    "nbformat_3": ("pass", "pass"),
    "saved_as_copy": ("no notebook", "no notebook"),
    "in_a_subfolder": ("no notebook", "no notebook"),
    "zz_victim": ("pass", "pass"),  # graded after the students who tried to overwrite or read it
}


def snapshot(folder: Path) -> dict[str, str]:
    return {str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(folder.rglob("*")) if path.is_file() and not path.is_symlink()}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    submissions, chapters, out = (tmp_path_factory.mktemp(name) for name in ("submissions", "chapters", "grades"))
    shutil.copy(FIXTURE, chapters / "exercise_page.md")
    paths = {"book": chapters / "exercise_page.md", "victim": submissions / "zz_victim" / NAME,
             "grades": out / "grades.csv", "checks": Path(checks.__file__)}
    for student, made in attacks(paths).items():
        (submissions / student).mkdir()
        nbformat.write(made, submissions / student / NAME)
    for student, write in BROKEN_FILES.items():
        (submissions / student).mkdir()
        write(submissions / student / NAME)
    (submissions / "zz_victim").mkdir()
    nbformat.write(read(FIXTURE), paths["victim"])
    before = snapshot(submissions), snapshot(paths["checks"].parent)
    rows = grade(submissions, chapters, out, cell_timeout=10, notebook_timeout=40, seed=SEED,
                 limits=Limits(memory_bytes=3 << 30, cpu_seconds=120))
    after = snapshot(submissions), snapshot(paths["checks"].parent)
    running = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout.splitlines()
    # The attacks sleep for an odd 6017 s, so a "sleep 600" elsewhere on the machine is not taken for theirs.
    leftovers = [line for line in running if MARKER in line or line.startswith("sleep 6017")]
    return {row["student"]: row for row in rows}, out, before, after, leftovers


@pytest.mark.parametrize("student", EXPECTED)
def test_each_submission_gets_its_status(graded, student):
    rows, out, *_ = graded
    statuses = rows[student]["exercise_page:my_mask"], rows[student]["exercise_page:my_positions"]
    feedback = (out / "feedback" / f"{student}.md").read_text()
    assert statuses == EXPECTED[student], feedback


def test_no_cheat_passes_anything(graded):
    rows, *_ = graded
    honest = {"honest", "José García", "nbformat_3", "zz_victim"}
    passing = {student for student, row in rows.items() if row["passed"] and student not in honest}
    # the exceptions pass the exercise they did not cheat on: a syntax error or an exit in the other one, a limit
    # hit in the other one, or a harmless print
    assert passing == {"saved_alias", "memory_hog", "prints_50_mb", "answers_80_mb", "syntax_error",
                       "raises_system_exit"}
    assert all(rows[student]["passed"] == 2 for student in honest)


def test_feedback_says_what_went_wrong(graded):
    _, out, *_ = graded
    said = {student: (out / "feedback" / f"{student}.md").read_text() for student in EXPECTED}
    assert "local_global_mask" in said["saved_alias"] and "write the computation yourself" in said["saved_alias"]
    assert "getattr" in said["computed_name"]
    assert "not valid JSON" in said["invalid_json"] and "is empty" in said["empty_file"]
    assert "nbformat 5" in said["nbformat_5"] and "is a folder" in said["a_folder"]
    assert "symbolic link" in said["symlink_outside"] and "R notebook" in said["r_kernel"]
    assert "exercise_page (1).ipynb" in said["saved_as_copy"] and "work/exercise_page.ipynb" in said["in_a_subfolder"]
    assert "SyntaxError" in said["syntax_error"] and "SystemExit" in said["raises_system_exit"]
    assert "ran past 40 s" in said["ignores_interrupts"] and "limit is 3 GB" in said["memory_hog"]


def test_nothing_is_written_outside_the_students_folder(graded):
    rows, out, before, after, _ = graded
    assert before == after  # no submission changed, and no file of the course's checks
    with open(out / "grades.csv") as file:
        assert {row["student"] for row in csv.DictReader(file)} == set(rows)


def test_no_process_outlives_grading(graded):
    *_, leftovers = graded
    assert leftovers == []


def test_the_graders_seed_does_not_outlive_grading(graded):
    assert checks.SEED == 0  # checks run afterwards in this process draw the learners' cases again
