"""How much of the code a reader sees is the lesson (STYLE.md 10 and 11), measured; `make lint` prints it.

    python tools/code_measures.py

Pages: a shown cell (not folded by a tag) is at most MAX_CELL_LINES lines, and at least LESSON_SHARE of a page's
shown lines are the lesson's own code: the model, the loss, a data step, a measurement and its print. The rest is
plumbing, recognised by what a statement calls: figure drawing, table or Markdown building, worker pools, imports.
Lib: a model file spends at most CHECK_SHARE of its code on checking arguments (`raise` statements, the `if` that
leads to one, `require_*` calls and the `_require_*` helpers), and the attention function a page lists stays short.
"""

import ast
import sys
from pathlib import Path

import jupytext

from notebooks import chapters

LIB = Path(__file__).resolve().parent.parent / "lib" / "minformers"
MAX_CELL_LINES = 20
LESSON_SHARE = 0.70
CHECK_SHARE = 0.25
MODEL_FILES = ("attention.py", "blocks.py", "gpt.py", "llama.py", "bert.py", "electra.py", "encoder_decoder.py")
FOLDING_TAGS = {"hide-input", "hide-cell", "remove-input", "remove-cell"}

# A statement is plumbing when it calls one of these anywhere, builds or extends a table under one of TABLE_NAMES,
# slices or searches a worker pool's results by hand, or prints a verdict that branches on the numbers (prose
# written by code belongs in a folded cell).
TABLE_NAMES = {"rows", "row", "header", "headers", "columns", "cells"}
FIGURE_OBJECTS = {"plt", "ax", "axes", "axis", "fig", "figure", "panel", "left", "right", "colorbar"}
PLUMBING_CALLS = {
    # figures
    "figure", "subplots", "label", "legend_below", "place_legend", "legend_outside", "use_style", "savefig",
    # tables and printed Markdown
    "table", "Markdown", "display", "glue", "listed",
    # worker pools
    "map_in_workers", "map_groups_in_workers", "Pool", "ProcessPoolExecutor",
}  # fmt: skip


def called_names(node: ast.AST):
    """(object, name) of every call in a statement: ("ax", "plot") for ax.plot(...), (None, "table") for table(...)."""
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            function = call.func
            if isinstance(function, ast.Attribute):
                owner = function.value
                while isinstance(owner, ast.Attribute | ast.Subscript | ast.Call):
                    owner = owner.value if not isinstance(owner, ast.Call) else owner.func
                yield (owner.id if isinstance(owner, ast.Name) else None), function.attr
            elif isinstance(function, ast.Name):
                yield None, function.id


def builds_a_table(statement: ast.stmt) -> bool:
    targets = getattr(statement, "targets", None) or [getattr(statement, "target", None)]
    if any(isinstance(target, ast.Name) and target.id in TABLE_NAMES for target in targets):
        return True
    return any(owner in TABLE_NAMES for owner, _ in called_names(statement))


def picks_from_results(statement: ast.stmt) -> bool:
    """results[3:6], or next(r for r in results if ...)."""
    for node in ast.walk(statement):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
            if isinstance(node.value, ast.Name) and "result" in node.value.id:
                return True
        if isinstance(node, ast.comprehension) and isinstance(node.iter, ast.Name) and "result" in node.iter.id:
            if node.ifs:
                return True
    return False


def writes_a_verdict(statement: ast.stmt) -> bool:
    return any(name == "print" for _, name in called_names(statement)) and any(
        isinstance(node, ast.IfExp) for node in ast.walk(statement))


def is_plumbing(statement: ast.stmt) -> bool:
    if isinstance(statement, ast.Import | ast.ImportFrom) or builds_a_table(statement) or picks_from_results(statement):
        return True
    if writes_a_verdict(statement):
        return True
    return any(owner in FIGURE_OBJECTS or name in PLUMBING_CALLS for owner, name in called_names(statement))


def statement_lines(statements: list[ast.stmt]) -> tuple[set[int], set[int]]:
    """(all, plumbing) line numbers of statements; a compound statement counts line by line through its body."""
    every, plumbing = set(), set()
    for statement in statements:
        bodies = [getattr(statement, field, None) for field in ("body", "orelse", "finalbody")]
        bodies = [body for body in bodies if body]
        if isinstance(statement, ast.FunctionDef | ast.ClassDef) or not bodies:
            lines = set(range(statement.lineno, statement.end_lineno + 1))
            every |= lines
            if is_plumbing(statement):
                plumbing |= lines
            continue
        inner_every, inner_plumbing = set(), set()
        for body in bodies:
            body_every, body_plumbing = statement_lines(body)
            inner_every |= body_every
            inner_plumbing |= body_plumbing
        header = set(range(statement.lineno, statement.end_lineno + 1)) - inner_every
        every |= header | inner_every
        # A loop or with block is plumbing when its body is (a loop that only adds rows to a table).
        plumbing |= inner_plumbing | (header if inner_plumbing == inner_every else set())
    return every, plumbing


def shown_cells(source: Path):
    """(index, code) of each code cell of a chapter whose code is on the page."""
    for index, cell in enumerate(jupytext.read(source).cells):
        if cell.cell_type == "code" and not FOLDING_TAGS & set(cell.metadata.get("tags", [])):
            yield index, cell.source


def page_measures(source: Path) -> dict:
    shown = lesson = 0
    cells = [code for _, code in shown_cells(source)]
    for code in cells:
        try:
            tree = ast.parse(code)
        except SyntaxError:  # IPython magics: counted as plumbing
            shown += len([line for line in code.splitlines() if line.strip()])
            continue
        every, plumbing = statement_lines(tree.body)
        shown += len(every)
        lesson += len(every - plumbing)
    long = [len(code.splitlines()) for code in cells if len(code.splitlines()) > MAX_CELL_LINES]
    return {"shown": shown, "lesson": lesson, "share": lesson / shown if shown else 1.0, "long cells": long}


def code_lines(tree: ast.Module, source: str) -> set[int]:
    """Lines holding code: not blank, not a comment, not a docstring."""
    docstrings = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            docstrings |= set(range(body[0].lineno, body[0].end_lineno + 1))
    return {number for number, line in enumerate(source.splitlines(), 1)
            if line.strip() and not line.strip().startswith("#")} - docstrings


def check_lines(tree: ast.Module) -> set[int]:
    """Lines that check arguments: raises and the ifs that lead only to them, require_* calls and definitions."""
    lines = set()

    def span(node):
        return set(range(node.lineno, node.end_lineno + 1))

    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name.lstrip("_").startswith("require_"):
            lines |= span(node)
        elif isinstance(node, ast.If) and all(isinstance(part, ast.Raise) for part in node.body) and not node.orelse:
            lines |= span(node)
        elif isinstance(node, ast.Raise | ast.Assert):
            lines |= span(node)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            function = node.value.func
            name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
            if name.lstrip("_").startswith("require_"):
                lines |= span(node)
    return lines


def lib_measures(path: Path) -> dict:
    source = path.read_text()
    tree = ast.parse(source)
    code = code_lines(tree, source)
    checks = check_lines(tree) & code
    return {"lines": len(source.splitlines()), "code": len(code), "checks": len(checks),
            "share": len(checks) / len(code) if code else 0.0}


def function_code_lines(path: Path, name: str) -> int:
    source = path.read_text()
    tree = ast.parse(source)
    function = next(node for node in tree.body if getattr(node, "name", None) == name)
    return len(code_lines(tree, source) & set(range(function.lineno, function.end_lineno + 1)))


def stranded_comment_lines(path: Path) -> list[int]:
    """Line numbers of comment lines holding one or two words after a long comment line: a sentence a formatter
    wrapped, whose tail now reads as a comment of its own."""
    lines = path.read_text().splitlines()
    return [number + 1 for number in range(1, len(lines))
            if lines[number].strip().startswith("#") and lines[number - 1].strip().startswith("#")
            and len(lines[number].strip()[1:].split()) <= 2 and len(lines[number - 1]) > 60
            and any(character.isalpha() for character in lines[number - 1])]


def report() -> tuple[list[str], list[str]]:
    """(lines to print, targets missed)."""
    lines, missed = ["shown code per page (lesson share, target >= 70%; cells over 20 lines)"], []
    for source in chapters():
        measures = page_measures(source)
        mark = "" if measures["share"] >= LESSON_SHARE and not measures["long cells"] else "  <- over a target"
        lines.append(f"  {source.stem:31s}{measures['lesson']:4d} of {measures['shown']:4d} lines "
                     f"{measures['share']:5.0%}  long cells {measures['long cells'] or '-'}{mark}")
        if mark:
            missed.append(source.stem)
    lines.append("argument checks per model file (target: at most a quarter of the code)")
    for name in MODEL_FILES:
        measures = lib_measures(LIB / name)
        lines.append(f"  {name:31s}{measures['checks']:4d} of {measures['code']:4d} code lines "
                     f"{measures['share']:5.0%}  ({measures['lines']} lines in all)")
        if measures["share"] > CHECK_SHARE:
            missed.append(name)
    for name, limit in (("gpt.py", 190), ("train.py", 270)):
        count = lib_measures(LIB / name)["lines"]
        lines.append(f"  {name} {count} lines (target {limit})")
        if count > limit:
            missed.append(name)
    paths = sorted(LIB.rglob("*.py"))
    stranded = {path.relative_to(LIB): found for path in paths if (found := stranded_comment_lines(path))}
    lines.append(f"  comments wrapped to one or two words: {sum(map(len, stranded.values()))} (target 0)"
                 + "".join(f"\n    {path}: lines {found}" for path, found in stranded.items()))
    if stranded:
        missed.append("wrapped comments")
    attention = function_code_lines(LIB / "attention.py", "scaled_dot_product_attention")
    lines.append(f"  scaled_dot_product_attention: {attention} lines of code (target about 10)")
    return lines, missed


if __name__ == "__main__":
    printed, missed = report()
    print("\n".join(printed))
    print(f"{len(missed)} over a target: {', '.join(missed) or 'none'}")
    sys.exit(0)
