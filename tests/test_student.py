"""The exercise convention, the student edition (no solution may leak), and the local notebooks."""

import html
import importlib
import inspect
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

from exercises import (
    LISTING,
    ConventionError,
    collapsed,
    exercises,
    hide_listings,
    leak_needles,
    logical_lines,
    read,
    solution_lines,
    student_version,
)
from minformers import checks
from notebooks import chapters
from student import answer_objects

ROOT = Path(__file__).resolve().parent.parent

FIXTURE = Path(__file__).parent / "fixtures" / "exercise_page.md"
STUDENT = ROOT / "_build" / "student"


def test_student_version_keeps_exercises_and_stubs_and_drops_solutions():
    student = student_version(read(FIXTURE))
    text = "\n".join(cell.source for cell in student.cells)
    assert "{exercise} Local and global attention" in text and "{exercise} A written question" in text
    assert 'def my_mask(t, window, global_positions): raise NotImplementedError("a band' in text
    assert "checks.check_local_global_mask(my_mask)" in text
    assert "{solution" not in text
    for line in solution_lines(read(FIXTURE)):
        assert line not in text.splitlines(), line
    assert all(cell.get("outputs", []) == [] for cell in student.cells if cell.cell_type == "code")


def test_solution_lines_cover_code_and_prose():
    lines = solution_lines(read(FIXTURE))
    assert "A distinctive sentence of solution prose that must never reach a student." in lines
    assert "Another distinctive solution sentence: attention is blind to order." in lines
    assert "return near | special[:, None] | special[None, :]" in lines
    assert ":class: dropdown" not in lines


def test_exercises_pair_each_stub_with_its_check():
    found = [(e.function, e.check) for e in exercises(read(FIXTURE))]
    assert found == [("my_mask", "check_local_global_mask"), ("my_positions", "check_sinusoidal_positions")]


@pytest.mark.parametrize(
    "markdown, reason",
    [
        ("```{solution-start} ex\n:class: dropdown\n```\nnever ended", "has no {solution-end}"),
        ("```{solution} ex\nnever closed", "not closed"),
        (":::{admonition} see the {solution} below\n:::", "unrecognised solution markup"),
    ],
)
def test_markup_outside_the_convention_is_an_error(markdown, reason):
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(markdown)])
    with pytest.raises(ConventionError, match=re.escape(reason)):
        student_version(notebook)


def every_chapter_exercise():
    return [(source.stem, exercise) for source in chapters() for exercise in exercises(read(source))]


@pytest.mark.parametrize("chapter, exercise", every_chapter_exercise(), ids=lambda value: str(value)[:40])
def test_every_chapter_stub_fails_its_check(chapter, exercise):
    namespace = {}
    exec(exercise.stub, namespace)
    with pytest.raises(checks.CheckFailed) as failure:
        getattr(checks, exercise.check)(namespace[exercise.function])
    assert failure.value.kind == "not attempted"


def test_every_check_is_used_by_a_chapter():
    used = {exercise.check for _, exercise in every_chapter_exercise()}
    defined = {name for name, _ in inspect.getmembers(checks, inspect.isfunction) if name.startswith("check_")}
    assert defined == used, f"checks no chapter uses: {defined - used}; used but missing: {used - defined}"


class _Text(HTMLParser):
    def __init__(self):
        super().__init__()
        self.parts = []

    def handle_data(self, data):
        self.parts.append(data)


def readable_text(path: Path) -> str:
    """What a person could read in a file: HTML without tags, notebooks' sources and outputs, else the text."""
    raw = path.read_text(errors="ignore")
    if path.suffix == ".html":
        parser = _Text()
        parser.feed(raw)
        return html.unescape("".join(parser.parts))
    if path.suffix == ".ipynb":  # each cell's source and outputs, as the reader sees them
        notebook = json.loads(raw)
        return "\n".join("".join(cell["source"]) + "\n" + json.dumps(cell.get("outputs", []), ensure_ascii=False)
                         .replace("\\n", "\n").replace('\\"', '"') for cell in notebook["cells"])
    return raw


def library_lines() -> set[str]:
    """Lines of the course library, which ships with the student edition, so repeating one reveals nothing."""
    library_files = (ROOT / "lib" / "minformers").rglob("*.py")
    lines = set()
    for path in library_files:
        code = path.read_text()
        lines |= {collapsed(line).removeprefix(">>> ") for line in code.splitlines()} | set(logical_lines(code))
    return lines


def test_no_solution_text_appears_in_another_chapters_student_version_or_the_library():
    """The fast half of the leak test, on the sources: it catches in seconds what the book test below finds in
    the built edition after the whole build (a solution line that is also a substring of other shown text)."""
    needles = leak_needles(chapters(), library_lines())
    shown = {source.stem: collapsed("\n".join(cell.source for cell in student_version(read(source)).cells))
             for source in chapters()}
    shown["lib"] = collapsed("\n".join(path.read_text() for path in (ROOT / "lib" / "minformers").rglob("*.py")))
    leaks = [f"{origin} -> {where}: {needle!r}" for needle, origin in needles.items()
             for where, text in shown.items() if needle in text]
    assert not leaks, "\n".join(leaks[:20])


@pytest.mark.book
def test_no_solution_leaks_into_the_student_edition():
    if not STUDENT.exists():
        pytest.fail("no _build/student: run `make student` before the book tests")
    needles = leak_needles(chapters(), library_lines())
    assert len(needles) >= 10, "the scan found almost no solution lines: is the convention being read?"
    files = [path for path in STUDENT.rglob("*") if path.is_file() and path.suffix not in {".png", ".woff2"}]
    assert any(path.suffix == ".ipynb" for path in files) and any(path.suffix == ".html" for path in files)
    leaks = []
    for path in files:
        text = collapsed(readable_text(path))
        leaks += [f"{path.relative_to(STUDENT)}: {needle}" for needle in needles if needle in text]
    assert not leaks, "\n".join(leaks[:20])


@pytest.mark.book
def test_student_notebooks_keep_every_exercise_as_a_stub():
    for source in chapters():
        notebook = nbformat.read(STUDENT / "notebooks" / f"{source.stem}.ipynb", as_version=4)
        code = [cell.source for cell in notebook.cells if cell.cell_type == "code"]
        for exercise in exercises(read(source)):
            assert exercise.stub in code
        assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code")


def answer_listings(source: Path) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """A chapter's answer objects, and what its page lists: (module, object) of each `literalinclude` with
    `:pyobject:`."""
    notebook = read(source)
    shown = []
    for cell in notebook.cells:
        for match in LISTING.finditer(cell.source) if cell.cell_type == "markdown" else []:
            module = re.search(r"minformers/([\w/]+)\.py", match.group(0))
            name = re.search(r":pyobject:\s*(\S+)", match["options"])
            if module and name:
                shown.append((module.group(1).replace("/", "."), name.group(1)))
    return answer_objects(notebook), shown


def test_the_student_version_leaves_out_each_listing_of_an_answer():
    hidden = 0
    for source in chapters():
        answers, shown = answer_listings(source)
        edition = hide_listings(student_version(read(source)), answers)
        text = "\n".join(cell.source for cell in edition.cells if cell.cell_type == "markdown")
        for _, name in shown:
            gives_away = name in answers
            assert (f":pyobject: {name}\n" in text) != gives_away, f"{source.stem}: {name}"
            hidden += gives_away
    assert hidden >= 15  # the answers a page lists: next_token_targets, BM25.scores, language_model_loss, ...


@pytest.mark.book
def test_the_student_site_does_not_list_an_answer():
    shown_anyway = []
    for source in chapters():
        answers, shown = answer_listings(source)
        page = readable_text(STUDENT / "html" / "book" / f"{source.stem}.html")
        for module, name in shown:
            if name not in answers:
                continue
            listed = importlib.import_module(f"minformers.{module}")
            for part in name.split("."):
                listed = getattr(listed, part)
            # most of its lines: one line, a signature say, may be shared with a listing that stays
            lines = [line.strip() for line in inspect.getsource(listed).splitlines() if len(line.strip()) >= 25]
            on_page = sum(line in page for line in lines)
            if on_page > len(lines) / 2:
                shown_anyway.append(f"{source.stem}: {name}, {on_page} of {len(lines)} lines")
    assert shown_anyway == []


@pytest.mark.book
def test_the_student_site_says_what_each_chapter_builds_on():
    """Its pages are notebooks, which keep the chapter's front matter in their metadata (tools/course_site)."""
    # the ledger of claims (book/claims.md) is a reference page, not a chapter: it builds on none
    missing = [source.stem for source in chapters() if source.stem != "claims"
               and "Builds on:" not in readable_text(STUDENT / "html" / "book" / f"{source.stem}.html")]
    assert not missing, f"student pages with no 'Builds on' line: {missing}"
