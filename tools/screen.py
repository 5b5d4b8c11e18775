"""Read a submission's code before its results count: what a value check cannot see.

The grader compares a learner's function's answers with the reference's, outside the submission's process. Two
ways to pass that remain are read here, in the submitted source, where no run-time trick can hide them:

1. **The function reaches the library's solution**: its code, or any global name it uses followed back to every
   cell that binds or changes that name, names a blocked reference (`local_global_mask`, `RMSNorm`, `AdamW`,
   `autograd`...). This catches an alias saved before the check, a second copy of the module, the reference's
   `__code__` in a new function, however many names it passes through.
2. **The notebook rewrites code at run time**, which would make the source above mean something else: `exec`,
   `eval`, `setattr`, assigning to a module's attribute (`torch.tanh = ...`), dunder attributes (`__code__`,
   `__dict__`), `__torch_function__` overrides, IPython's event hooks, private or operator-level torch APIs
   (`torch._C`, `torch.ops`), and imports outside a list of what the exercises need.

Only cells the learner wrote or changed are read for (2): the chapter's own cells are the course's code. A
function flagged under (1) is `calls reference`; a notebook flagged under (2) is `needs review`, with the line, so an
instructor can read it and decide.
"""

import ast
import contextlib
import io
import re
from dataclasses import dataclass

ALLOWED_MODULES = {
    "abc", "bisect", "collections", "contextlib", "copy", "dataclasses", "decimal", "enum", "fractions",
    "functools", "heapq", "itertools", "json", "math", "matplotlib", "minformers", "numpy", "pprint", "random",
    "re", "statistics", "string", "textwrap", "time", "torch", "tqdm", "typing", "unicodedata", "warnings",
}
FORBIDDEN_NAMES = {
    "exec", "eval", "compile", "__import__", "globals", "locals", "vars", "setattr", "delattr", "open", "input",
    "breakpoint", "get_ipython", "attrgetter", "methodcaller", "__builtins__",
}
ALLOWED_DUNDERS = {"__init__", "__name__", "__doc__", "__len__", "__getitem__", "__iter__", "__call__", "__repr__"}
FORBIDDEN_METHODS = {"__torch_function__", "__torch_dispatch__", "__del__"}
FORBIDDEN_MODULE_ATTRIBUTES = {"ops", "library", "overrides", "hub"}  # routes below the Python API
SAFE_MAGICS = {"matplotlib", "config", "precision"}
TIMING_MAGICS = {"time", "timeit"}
# Names that reach a derivative through autograd under another name, blocked with autograd itself.
AUTOGRAD_ROUTES = {"autograd", "func", "jacobian", "jacrev", "jacfwd", "jvp", "vjp", "hessian"}


@dataclass(frozen=True)
class Finding:
    cell: int  # numbered from 1 among the notebook's code cells
    line: int
    what: str

    def __str__(self) -> str:
        return f"cell {self.cell}, line {self.line}: {self.what}"


def python_source(source: str) -> tuple[str, list[tuple[int, str]]]:
    """The cell as plain Python, and the IPython commands (%, !) it uses that the grader does not allow."""
    lines, refused = [], []
    for number, line in enumerate(source.splitlines(), start=1):
        stripped = line.lstrip()
        command = re.match(r"(%%?|!)(\w*)\s*((?:-\w+\s+\S+\s+)*)(.*)", stripped) if stripped[:1] in "%!" else None
        if command is None:
            lines.append(line)
            continue
        sign, name, _, rest = command.groups()
        indent = line[: len(line) - len(stripped)]
        if sign.startswith("%") and name in TIMING_MAGICS:
            lines.append(indent + (rest if sign == "%" else "pass"))  # the timed statement is read like any other
        elif sign.startswith("%") and name in SAFE_MAGICS:
            lines.append(indent + "pass")
        else:
            refused.append((number, f"the IPython command `{stripped.split()[0]}`"))
            lines.append(indent + "pass")
    return "\n".join(lines), refused


def _root(node) -> str | None:
    """The name an attribute chain starts from: `torch.nn.functional.relu` -> 'torch'."""
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def module_names(trees: list[ast.AST]) -> set[str]:
    """Names bound to modules by the notebook's imports (`torch`, `F`, `np`, `checks`...)."""
    names = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                names |= {alias.asname or alias.name for alias in node.names}
    return names


def rewrites(tree: ast.AST, modules: set[str]) -> list[tuple[int, str]]:
    """Lines of one learner cell that can change what code means at run time, with why."""
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            if isinstance(node, ast.ImportFrom) and node.level:
                found.append((line, "a relative import"))
            for name in names:
                if name.split(".")[0] not in ALLOWED_MODULES:
                    found.append((line, f"imports `{name}`, which the exercises do not need"))
            if isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names):
                found.append((line, f"`from {node.module} import *` (the grader cannot tell what it binds)"))
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            found.append((line, f"uses `{node.id}`"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
            if len(node.args) < 2 or not isinstance(node.args[1], ast.Constant):
                found.append((line, "uses `getattr` with a computed name"))
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("__") and node.attr.endswith("__") and node.attr not in ALLOWED_DUNDERS:
                found.append((line, f"uses `{node.attr}`"))
            elif _root(node) in modules and (node.attr.startswith("_") or node.attr in FORBIDDEN_MODULE_ATTRIBUTES):
                found.append((line, f"uses `{ast.unparse(node)}`, below the library's public API"))
        elif isinstance(node, ast.FunctionDef) and node.name in FORBIDDEN_METHODS:
            found.append((line, f"defines `{node.name}`, which intercepts torch or runs at unexpected times"))
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute | ast.Subscript) and _root(target) in modules:
                    found.append((line, f"changes `{ast.unparse(target)}`, part of a library"))
    return found


def _binds(statement: ast.stmt, modules: set[str]) -> set[str]:
    """Global names a top-level statement binds or changes: a definition, an assignment, `x[...] = `, `x.f(...)`.
    A library module is changed only by assigning to it (read by `rewrites`), not by calling its functions."""
    names = set()
    if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        names.add(statement.name)
    for node in ast.walk(statement) if not isinstance(statement, ast.FunctionDef | ast.ClassDef) else []:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
        elif isinstance(node, ast.Attribute | ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(_root(node))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _root(node.func) not in modules:
            names.add(_root(node.func))  # `table.update(...)` changes `table`
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
    for node in ast.walk(statement):  # `global x` inside a function: calling it changes x
        if isinstance(node, ast.Global):
            names |= set(node.names)
    return names - {None}


def _local_names(statement: ast.stmt) -> set[str]:
    """Names local to the functions, lambdas and comprehensions in a statement (their arguments and assignments)."""
    names = set()
    for node in ast.walk(statement):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            arguments = node.args
            names |= {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                                      arguments.vararg, arguments.kwarg] if a is not None}
            body = node.body if isinstance(node.body, list) else [node.body]
            globals_declared = {n for b in body for g in ast.walk(b) if isinstance(g, ast.Global) for n in g.names}
            names |= {n.id for b in body for n in ast.walk(b)
                      if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)} - globals_declared
        elif isinstance(node, ast.comprehension):
            names |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
    return names


def _named(node) -> str | None:
    """The name a node mentions, for matching against blocked references."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.alias):
        return node.name.split(".")[-1]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def reaches(trees: list[tuple[int, ast.AST]], function: str, blocked: set[str]) -> Finding | None:
    """Where `function`, or anything it uses through global names, names a blocked reference."""
    statements = [(cell, statement) for cell, tree in trees for statement in getattr(tree, "body", [])]
    modules = module_names([tree for _, tree in trees])
    seen, pending, read = set(), [function], set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        for index, (cell, statement) in enumerate(statements):
            if index in read or name not in _binds(statement, modules):
                continue
            read.add(index)
            local = _local_names(statement)
            for node in ast.walk(statement):
                if isinstance(node, ast.Name) and node.id in local:
                    continue  # a local variable that happens to share a name, e.g. AdamW's `grad`
                if _named(node) in blocked:
                    return Finding(cell, getattr(node, "lineno", statement.lineno), f"uses `{_named(node)}`")
                if isinstance(node, ast.Name):
                    pending.append(node.id)
    return None


def blocked_names(functions: list, attributes: list[tuple[object, str]]) -> set[str]:
    """The names a check's blocked references go by: functions, their classes, and module attributes."""
    names = set()
    for function in functions:
        owner, _, name = function.__qualname__.rpartition(".")
        names.add(owner.split(".")[0] if owner else name)
    for owner, name in attributes:
        names.add(owner.__name__ if isinstance(owner, type) else name)
    if "grad" in names or "backward" in names:
        names |= AUTOGRAD_ROUTES
    return names


def blocked_by(check: str) -> tuple[list, list]:
    """What a check makes unavailable while the learner's function runs, found by calling it with a stub."""
    from minformers import checks  # here: the rest of this module reads source and needs no torch

    seen = []

    def stub(*args, **kwargs):
        seen.append(checks.blocked_now)
        raise NotImplementedError

    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(checks.CheckFailed):
        getattr(checks, check)(stub)
    return seen[0] if seen else ([], [])


def parse_cells(sources: list[str]) -> tuple[list[tuple[int, ast.AST]], list[Finding]]:
    """Each code cell parsed (cells that do not parse are left out: they never ran), and refused IPython commands."""
    trees, findings = [], []
    for number, source in enumerate(sources, start=1):
        python, refused = python_source(source)
        findings += [Finding(number, line, what) for line, what in refused]
        try:
            trees.append((number, ast.parse(python)))
        except SyntaxError:
            continue
    return trees, findings


def screen_rewrites(sources: list[str], trusted: set[str]) -> list[Finding]:
    """Run-time rewriting in the cells that are not the chapter's own (`trusted`, compared stripped)."""
    trees, findings = parse_cells(sources)
    modules = module_names([tree for _, tree in trees])
    for number, tree in trees:
        if sources[number - 1].strip() not in trusted:
            findings += [Finding(number, line, what) for line, what in rewrites(tree, modules)]
    return sorted(findings, key=lambda finding: (finding.cell, finding.line))
