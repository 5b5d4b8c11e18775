"""The grader's reading of a submission's source (tools/screen.py): routes to the solution and run-time rewriting
are found, and the book's own solutions are not flagged."""

from pathlib import Path

import pytest
import torch

from exercises import exercises, read, student_version
from minformers import checks, llama, optimizers
from screen import blocked_by, blocked_names, parse_cells, python_source, reaches, screen_rewrites
from submissions import without_checks

ROOT = Path(__file__).resolve().parent.parent

CHAPTER_IMPORTS = "import torch\nimport torch.nn.functional as F\n\nfrom minformers import activations, checks, llama"


def found(cells: list[str], function: str, check: str):
    """(where the function reaches a blocked reference, the run-time rewriting) for learner cells after the imports."""
    sources = [CHAPTER_IMPORTS, *cells]
    trees, _ = parse_cells(sources)
    return reaches(trees, function, blocked_names(*blocked_by(check))), screen_rewrites(sources, {CHAPTER_IMPORTS})


ROUTES = {  # name: (learner cells, function, check, the names the grader may give as the route)
    "autograd saved before the check": (
        ["slope = torch.autograd.grad",
         "def my_swish_derivative(x, beta):\n    x = x.clone().requires_grad_()\n"
         "    return slope(x * torch.sigmoid(beta * x), x, torch.ones_like(x))[0]"],
        "my_swish_derivative", "check_swish_derivative", {"autograd", "grad"}),
    "backward through an alias": (
        ["def my_swish_derivative(x, beta):\n    y = activations.swish(x.requires_grad_(), beta)\n"
         "    run = y.sum().backward\n    run()\n    return x.grad"],
        "my_swish_derivative", "check_swish_derivative", {"backward", "grad"}),
    "torch.func": (
        ["from torch import func as f\ndef my_swish_derivative(x, beta):\n"
         "    return f.vmap(f.grad(lambda v: v * torch.sigmoid(beta * v)))(x)"],
        "my_swish_derivative", "check_swish_derivative", {"func", "grad"}),
    "AdamW kept in a dict": (
        ["OPTIMIZERS = {}", "OPTIMIZERS['adamw'] = torch.optim.AdamW",
         "def my_adamw_step(theta, grad, exp_avg, exp_avg_sq, t, lr, betas, eps, weight_decay):\n"
         "    return OPTIMIZERS['adamw']"],
        "my_adamw_step", "check_adamw_step", {"AdamW"}),
    "the course's RMSNorm through a helper": (
        ["def helper(x, weight, eps):\n    norm = llama.RMSNorm(x.shape[-1], eps)\n    return norm(x) * weight",
         "def my_rms_norm(x, weight, eps):\n    return helper(x, weight, eps)"],
        "my_rms_norm", "check_rms_norm", {"RMSNorm"}),
    "the solution's name in a string": (
        ["def my_rms_norm(x, weight, eps):\n    return getattr(torch.nn.functional, 'rms_norm')(x, (x.shape[-1],), "
         "weight, eps)"],
        "my_rms_norm", "check_rms_norm", {"rms_norm"}),
}


@pytest.mark.parametrize("route", ROUTES)
def test_a_route_to_the_solution_is_found(route):
    cells, function, check, names = ROUTES[route]
    reached, _ = found(cells, function, check)
    assert reached is not None and reached.what.split("`")[1] in names


REWRITES = {  # name: (learner cell, what the grader must name)
    "torch's operator table": (
        "def my_rms_norm(x, w, eps):\n    return torch.ops.aten.rms_norm(x, [x.shape[-1]], w, eps)", "torch.ops"),
    "HF's top-p warper": ("from transformers import TopPLogitsWarper", "imports `transformers`"),
    "patching a library": ("torch.allclose = lambda *args, **kwargs: True", "changes `torch.allclose`"),
    "a second copy of a module": ("import importlib.util", "imports `importlib.util`"),
    "a function's code swapped": ("def f():\n    pass\nf.__code__ = print.__code__", "uses `__code__`"),
    "exec": ("exec('import os')", "uses `exec`"),
    "an IPython hook": ("get_ipython().events.register('post_run_cell', print)", "uses `get_ipython`"),
    "torch function override": ("class T(torch.Tensor):\n    def __torch_function__(cls, *a):\n        pass",
                                "defines `__torch_function__`"),
    "a shell command": ("!cat /etc/passwd", "the IPython command `!cat`"),
    "a private torch API": ("torch._C._set_grad_enabled(True)", "torch._C"),
}


@pytest.mark.parametrize("rewrite", REWRITES)
def test_run_time_rewriting_is_named(rewrite):
    cell, said = REWRITES[rewrite]
    _, rewriting = found([cell], "my_rms_norm", "check_rms_norm")
    assert any(said in str(finding) for finding in rewriting), rewriting


def test_ordinary_learner_code_is_not_flagged():
    cells = ["%matplotlib inline\nimport math\nfrom collections import Counter",
             "%timeit -n 3 torch.ones(3).sum()",
             "def my_rms_norm(x, weight, eps):\n    grad = None  # a local that shares a blocked name\n"
             "    scale = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)\n    return x * scale * weight",
             "x = torch.randn(4, 8)\nprint(torch.allclose(my_rms_norm(x, torch.ones(8), 1e-6), "
             "llama.RMSNorm(8, 1e-6)(x)))"]  # comparing with the library in a scratch cell is fine
    reached, rewriting = found(cells, "my_rms_norm", "check_rms_norm")
    assert reached is None and rewriting == []


def test_timed_statements_are_read():
    python, refused = python_source("%time torch.allclose = None\n%%timeit\n!ls")
    assert "torch.allclose = None" in python and refused == [(3, "the IPython command `!ls`")]


def test_the_books_solutions_are_not_flagged():
    flagged = []
    for chapter in sorted((ROOT / "book").glob("*.md")):
        notebook = read(chapter)
        listed = exercises(notebook)
        if not listed:
            continue
        trusted = {without_checks(cell.source).strip() for cell in student_version(notebook).cells
                   if cell.cell_type == "code"}
        sources = [without_checks(cell.source) for cell in notebook.cells if cell.cell_type == "code"]
        flagged += [(chapter.stem, str(finding)) for finding in screen_rewrites(sources, trusted)]
        trees, _ = parse_cells(sources)
        for exercise in listed:
            reached = reaches(trees, exercise.function, blocked_names(*blocked_by(exercise.check)))
            if reached:
                flagged.append((chapter.stem, exercise.function, str(reached)))
    assert flagged == []


def test_blocked_names_cover_methods_and_attributes():
    names = blocked_names([llama.RMSNorm.forward, optimizers.Adam.update], [(torch.autograd, "grad")])
    assert {"RMSNorm", "Adam", "grad", "autograd", "func"} <= names
    assert checks.blocked_now == ([], [])  # nothing is left blocked after blocked_by's probe
