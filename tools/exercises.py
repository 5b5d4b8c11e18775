"""The exercise convention, read from a chapter: what is a solution, what replaces it, and what checks it.

A chapter marks its exercises like this (see book/contributing.md):

    ```{exercise} Title                      the task, shown to everyone
    :label: ex-name
    ```
    ```{solution-start} ex-name              a dropdown, closed until clicked; removed in the student edition
    :class: dropdown
    ```
    prose, and code cells tagged `solution`; a cell the learner must write also carries
    `stub: 'def f(...): raise NotImplementedError("hint")'`, which replaces it in the student edition
    ```{solution-end}
    ```
    ```{code-cell}                           outside the dropdown: checks.check_<name>(f)
    ```

A written exercise may use a plain ```{solution} ex-name``` block instead. Any other solution markup is an
error, so that nothing can slip into the student edition unrecognised.
"""

import copy
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

import jupytext
import nbformat

SOLUTION_TAG = "solution"
CHECK_CALL = re.compile(r"checks\.(check_\w+)\((\w+)\)")
STUB_DEFINES = re.compile(r"def (\w+)\(")


class ConventionError(ValueError):
    """A chapter's solution markup does not follow the exercise convention."""


@dataclass(frozen=True)
class Exercise:
    function: str  # the name the learner defines, e.g. my_local_global_mask
    stub: str  # the one-line stub left in its place
    check: str  # the minformers.checks function that grades it


def read(path: Path) -> nbformat.NotebookNode:
    """A chapter as a notebook, from its MyST markdown source or from an .ipynb."""
    return nbformat.read(path, as_version=4) if path.suffix == ".ipynb" else jupytext.read(path)


def is_solution(cell) -> bool:
    return cell.cell_type == "code" and SOLUTION_TAG in cell.metadata.get("tags", [])


def _fence(line: str) -> str:
    """The backticks or colons that open a directive line, e.g. '```' for '```{solution} ex'."""
    return re.match(r"\s*(`{3,}|:{3,})", line).group(1)


def split_markdown(text: str, state: str) -> tuple[list[str], list[str], str]:
    """Split one markdown cell into (kept lines, solution lines), carrying the parser state across cells.

    States: "outside"; "gated" (between solution-start and solution-end, where code cells are solution too);
    and the fences of the directives themselves ("start", "end", "block"), which close on their fence line.
    """
    kept, removed = [], []
    closing = None
    for line in text.splitlines():
        stripped = line.strip()
        if state == "outside" and re.match(r"(`{3,}|:{3,})\{solution-start\}", stripped):
            state, closing = "start", _fence(line)
        elif state == "outside" and re.match(r"(`{3,}|:{3,})\{solution\}", stripped):
            state, closing = "block", _fence(line)
        elif state == "gated" and re.match(r"(`{3,}|:{3,})\{solution-end\}", stripped):
            state, closing = "end", _fence(line)
        elif state in ("start", "end", "block") and stripped == closing:
            state = {"start": "gated", "end": "outside", "block": "outside"}[state]
        elif state == "outside":
            if "{solution" in stripped:
                raise ConventionError(f"unrecognised solution markup: {stripped!r}")
            kept.append(line)
        elif state == "gated" or (state == "block" and not stripped.startswith(":")):
            removed.append(line)  # the solution's own text (a block's :option: lines are markup)
    if state in ("start", "end", "block"):
        raise ConventionError(f"a solution directive is not closed (state {state})")
    return kept, removed, state


def student_version(notebook, keep_outputs: bool = False) -> nbformat.NotebookNode:
    """A copy with every solution removed: stubbed cells become their stubs, other solution cells vanish.

    Outputs are cleared, except (with `keep_outputs`) those of cells that are neither solutions nor checks,
    so a student site keeps its figures while its check cells show nothing.
    """
    student = copy.deepcopy(notebook)
    cells, state = [], "outside"
    for cell in student.cells:
        if cell.cell_type == "markdown":
            kept, _, state = split_markdown(cell.source, state)
            if any(line.strip() for line in kept):
                cell.source = "\n".join(kept).strip("\n")
                cells.append(cell)
            continue
        if cell.cell_type != "code":
            cells.append(cell)
            continue
        if is_solution(cell) or state == "gated":
            if "stub" not in cell.metadata:
                continue
            cell.source = cell.metadata.pop("stub")
            cell.metadata["tags"] = [tag for tag in cell.metadata.get("tags", []) if tag != SOLUTION_TAG]
            cell.outputs, cell.execution_count = [], None
        elif not keep_outputs or CHECK_CALL.search(cell.source):
            cell.outputs, cell.execution_count = [], None
        cells.append(cell)
    _check_closed(state)
    student.cells = cells
    return student


def _check_closed(state: str) -> None:
    if state != "outside":
        raise ConventionError("a {solution-start} has no {solution-end} after it")


LISTING = re.compile(r"^(?P<fence>`{3,}|:{3,})\{literalinclude\}[^\n]*\n(?P<options>(?:[ \t]*:[\w-]+:[^\n]*\n)*)"
                     r"(?P=fence)[ \t]*$", re.MULTILINE)


def hide_listings(notebook, answers: dict[str, str]) -> nbformat.NotebookNode:
    """Replace each listing (`literalinclude` with `:pyobject:`) of an object in `answers`, {object: the function
    an exercise asks for}, by a note: in the student edition the page must not show what an exercise asks for."""

    def hidden(match: re.Match) -> str:
        shown = re.search(r":pyobject:\s*(\S+)", match["options"])
        if shown is None or shown.group(1) not in answers:
            return match.group(0)
        return (f"*This edition leaves out the library's listing of `{shown.group(1)}`: writing it is the exercise "
                f"`{answers[shown.group(1)]}`.*")

    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            cell.source = LISTING.sub(hidden, cell.source)
    return notebook


def collapsed(text: str) -> str:
    """``text`` with each run of whitespace as one space: how the leak scan compares text."""
    return " ".join(text.split())


def logical_lines(code: str) -> list[str]:
    """The lines of ``code``, whitespace collapsed, with a statement that runs over several lines (inside brackets,
    a string or after a backslash) joined into one: where a formatter breaks a line does not change what it says."""
    physical = code.splitlines()
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):  # IPython magics, shell lines
        return [collapsed(line) for line in physical if line.strip()]
    continued, depth = set(), 0  # rows (from 1) whose statement goes on to the next row
    for token in tokens:
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        elif token.type == tokenize.NL and depth > 0:
            continued.add(token.start[0])
        continued.update(range(token.start[0], token.end[0]))  # a string over several rows
    continued.update(row for row, line in enumerate(physical, 1) if line.rstrip().endswith("\\"))
    lines, statement = [], []
    for row, line in enumerate(physical, 1):
        statement.append(line)
        if row not in continued:
            lines.append(collapsed(" ".join(statement)))
            statement = []
    lines.append(collapsed(" ".join(statement)))
    return [line for line in lines if line]


def solution_lines(notebook) -> list[str]:
    """Every line of every solution in a chapter, code (as logical lines) and prose, blank lines left out."""
    lines, state = [], "outside"
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            _, removed, state = split_markdown(cell.source, state)
            lines += [collapsed(line) for line in removed]
        elif is_solution(cell) or (cell.cell_type == "code" and state == "gated"):
            lines += logical_lines(cell.source)
    _check_closed(state)
    return [line for line in lines if line]


def exercises(notebook) -> list[Exercise]:
    """The auto-checked exercises: each stubbed solution cell, paired with the check call that follows it."""
    found, pending = [], []
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        if is_solution(cell) and "stub" in cell.metadata:
            defined = STUB_DEFINES.search(cell.metadata["stub"])
            if not defined:
                raise ConventionError(f"a stub must define a function: {cell.metadata['stub']!r}")
            pending.append((defined.group(1), cell.metadata["stub"]))
        for check, function in CHECK_CALL.findall(cell.source):
            stub = dict(pending).get(function)
            if stub is None:
                raise ConventionError(f"{check}({function}) comes before, or without, a stub defining {function}")
            found.append(Exercise(function, stub, check))
            pending = [(name, text) for name, text in pending if name != function]
    if pending:
        raise ConventionError(f"stubbed functions with no check cell after them: {[name for name, _ in pending]}")
    return found


def fragments(line: str) -> list[str]:
    """The parts of a solution line a leak would reproduce verbatim: the whole line, or for prose with math,
    each stretch of plain text (math is rendered differently on the site, so it is matched without it)."""
    if "$" not in line:
        return [line]
    return [part.strip() for part in re.split(r"\$[^$]*\$", line) if len(part.strip()) >= 25]


def leak_needles(chapters: list[Path], library: set[str]) -> dict[str, str]:
    """Solution text that must not appear in the student edition: {fragment: the chapter it comes from}.

    Not leaks: a line the chapter also shows outside its solutions (`with torch.no_grad():`), a line of the course
    library (it ships with the edition on purpose), a line inside a stub (the function's signature, meant to be
    seen), and a fragment too short to identify anything (a lone `return x` occurs in any code base).
    """
    needles = {}
    for source in chapters:
        chapter = read(source)
        shown = {line for cell in student_version(chapter).cells for line in logical_lines(cell.source)}
        stubs = [collapsed(exercise.stub) for exercise in exercises(chapter)]
        for line in solution_lines(chapter):
            if line in shown or line in library or any(line in stub for stub in stubs):
                continue
            needles |= {fragment: source.stem for fragment in fragments(line) if len(fragment) >= 12}
    return needles
