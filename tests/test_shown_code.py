"""The code a reader sees on a page is the lesson; plumbing is folded away.

A cell is shown unless a tag folds its code (`hide-input`, `hide-cell`) or removes it (`remove-input`,
`remove-cell`). Folded code is one click away on the site and runs as usual in Jupyter. Four rules:
- a shown cell computes one thing in at most MAX_CELL_LINES lines: a longer one is split where its ideas split, its
  plumbing (table rows, worker pools, picking results) moved to a recipe the page calls in one line, or folded when
  it is a figure's layout or a verdict written out as Markdown;
- at least LESSON_SHARE of a page's shown lines are the lesson's own code (tools/code_measures.py says what counts);
- its lines fit the site's code column (MAX_SHOWN_WIDTH), so the reader never scrolls sideways to finish one;
- a cell that only imports is folded: the names it brings in are read where they are used.
"""

import ast
import re
from pathlib import Path

import pytest

from code_measures import LESSON_SHARE, MAX_CELL_LINES, page_measures, shown_cells
from notebooks import chapters

MAX_SHOWN_WIDTH = 88  # characters: the code column holds 87 at a 1,400 px window (measured in Chromium)
def only_imports(code: str) -> bool:
    try:
        statements = ast.parse(code).body
    except SyntaxError:  # IPython magics: not plain imports
        return False
    return bool(statements) and all(isinstance(statement, ast.Import | ast.ImportFrom) for statement in statements)


@pytest.mark.parametrize("source", chapters(), ids=lambda path: path.stem)
def test_shown_cells_are_short(source):
    long = [f"cell {index}: {len(code.splitlines())} lines, from {code.splitlines()[0]!r}"
            for index, code in shown_cells(source) if len(code.splitlines()) > MAX_CELL_LINES]
    assert not long, f"shown cells over {MAX_CELL_LINES} lines: split them, or move their plumbing to a recipe"


@pytest.mark.parametrize("source", chapters(), ids=lambda path: path.stem)
def test_most_of_the_shown_code_is_the_lesson(source):
    measures = page_measures(source)
    assert measures["share"] >= LESSON_SHARE, f"{measures['lesson']} of {measures['shown']} shown lines are the lesson"


@pytest.mark.parametrize("source", chapters(), ids=lambda path: path.stem)
def test_shown_lines_fit_the_code_column(source):
    wide = [f"cell {index}: {line.strip()[:50]!r}... ({len(line)} characters)"
            for index, code in shown_cells(source) for line in code.splitlines() if len(line) > MAX_SHOWN_WIDTH]
    assert not wide, f"shown lines over {MAX_SHOWN_WIDTH} characters: `ruff format --line-length {MAX_SHOWN_WIDTH}`"


@pytest.mark.parametrize("source", chapters(), ids=lambda path: path.stem)
def test_cells_that_only_import_are_folded(source):
    unfolded = [index for index, code in shown_cells(source) if only_imports(code)]
    assert not unfolded, f"cells {unfolded} only import: tag them hide-input"


def test_the_rules_can_fail():
    assert only_imports("import math\nfrom pathlib import Path\n")
    assert not only_imports("import math\nx = math.pi\n") and not only_imports("!pip install x")


LISTING = re.compile(r"```\{literalinclude\} (\S+)\n:pyobject: (\S+)")


def listed_lines(chapter: Path):
    """(object, line) for each line of each lib object a chapter lists with {literalinclude} and :pyobject:."""
    for path, name in LISTING.findall(chapter.read_text()):
        source = (chapter.parent / path).resolve().read_text()
        body = ast.parse(source).body
        for part in name.split("."):
            node = next(node for node in body if getattr(node, "name", None) == part)
            body = getattr(node, "body", [])
        first = node.lineno - len(node.decorator_list)
        for line in source.splitlines()[first - 1 : node.end_lineno]:
            yield name, line


@pytest.mark.parametrize("source", chapters(), ids=lambda path: path.stem)
def test_listed_lib_code_fits_the_code_column(source):
    """The lib's own width (lib/ruff.toml) keeps its code to the column; this catches the comments, strings and
    doctests a formatter does not break."""
    wide = [f"{name}: {line.strip()[:50]!r}... ({len(line)})" for name, line in listed_lines(source)
            if len(line) > MAX_SHOWN_WIDTH]
    assert not wide, f"listed lines over {MAX_SHOWN_WIDTH} characters"


def test_listings_are_found():
    assert sum(1 for source in chapters() for _ in listed_lines(source)) > 500


@pytest.mark.parametrize("source", chapters(), ids=lambda path: path.stem)
def test_the_seed_line_prints_once(source):
    """seed_everything prints its line and returns a dict; a cell ending in the bare call shows the dict too."""
    calls = re.findall(r"^seed_everything\(.*\).*$", source.read_text(), re.MULTILINE)
    assert all(call.endswith(";") for call in calls), calls
