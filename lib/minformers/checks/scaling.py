"""Checks for the scaling part: the compute-optimal split of a budget.

>>> def even_split(E, A, alpha, B, beta, compute):  # ignores the fitted law
...     return (compute / 6) ** 0.5, (compute / 6) ** 0.5
>>> check_compute_optimal(even_split)
Traceback (most recent call last):
minformers.checks.CheckFailed: check_compute_optimal, case 'Hoffmann et al.'s fit ...
...
"""

import math
from collections.abc import Callable

import torch

from minformers import scaling
from minformers.checks import (
    Case,
    run_check,
    seeded_random,
)


def _compute_optimal_reference(
    E: float, A: float, alpha: float, B: float, beta: float, compute: float
):
    n, d = scaling.JointLaw(E=E, A=A, alpha=alpha, B=B, beta=beta).compute_optimal(
        compute
    )
    return torch.tensor([math.log10(n), math.log10(d)], dtype=torch.float64)


def check_compute_optimal(learner: Callable) -> None:
    """Exercise: `learner(E, A, alpha, B, beta, compute)` returns (N, D), the parameters
    and tokens that minimise L = E + A / N^alpha + B / D^beta under 6ND = compute, as
    scaling.JointLaw.compute_optimal. Compared in log10, to 1e-6 (N and D span many
    orders of magnitude)."""

    def in_log10(*args):
        n, d = learner(*args)
        return torch.tensor(
            [math.log10(float(n)), math.log10(float(d))], dtype=torch.float64
        )

    cases = [
        Case(
            "Hoffmann et al.'s fit at Chinchilla's budget, 5.76e23 FLOPs",
            (1.69, 406.4, 0.34, 410.7, 0.28, 5.76e23),
        ),
        Case(
            "equal exponents and scales: N* = D* = sqrt(C / 6)",
            (1.0, 100.0, 0.3, 100.0, 0.3, 6e12),
        ),
        Case(
            "data matter more (beta < alpha): D* grows faster",
            (2.0, 50.0, 0.5, 80.0, 0.2, 1e15),
        ),
        Case("a CPU-sized budget", (0.5, 3.0, 0.25, 40.0, 0.35, 1e11)),
    ]
    draw = seeded_random()
    for _ in range(2):
        law = (
            draw.uniform(0.5, 3),
            draw.uniform(10, 500),
            draw.uniform(0.2, 0.5),
            draw.uniform(10, 500),
            draw.uniform(0.2, 0.5),
            10 ** draw.uniform(10, 24),
        )
        cases.append(Case(f"random law and budget {law[-1]:.3g} FLOPs", law))
    run_check(
        "check_compute_optimal",
        in_log10,
        _compute_optimal_reference,
        cases,
        blocked_functions=[scaling.JointLaw.compute_optimal],
        atol=1e-6,
    )
