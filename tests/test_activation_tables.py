"""The activations page's tables: each holds the values it lays out, and the failed claims read from an audit are
the four the notes get wrong (Swish's and GELU's derivative and range), and none once corrected."""

import torch

from minformers import activations
from minformers.activations import CORRECTIONS, TABLE, corrected_table
from minformers.recipes.activation_tables import (
    audit_table,
    corrections_table,
    failed_claims,
    formula_table,
    setting_label,
    slope_table,
)

GRID = torch.linspace(-8, 8, 1601, dtype=torch.float64)


def audited(rows):
    return [(row, entry) for row in rows for entry in activations.audit(row, GRID)]


def test_setting_label():
    assert setting_label({"alpha": 0.01}) == "alpha = 0.01"
    assert setting_label({"beta": 2.0, "alpha": 0.5}) == "beta = 2, alpha = 0.5"
    assert setting_label({}) == "-"


def test_failed_claims_are_the_notes_mistakes():
    assert failed_claims(audited(TABLE)) == [
        ("Swish", "derivative", "-"),
        ("Swish", "range", "-"),
        ("GELU", "derivative", "-"),
        ("GELU", "range", "-"),
    ]
    assert failed_claims(audited(corrected_table())) == []


def test_audit_table_has_a_line_per_setting_and_its_verdict():
    lines = audit_table(audited(TABLE)).data.splitlines()
    assert len(lines) == 2 + sum(len(row.settings) for row in TABLE)
    by_name = {line.split(" | ")[0].lstrip("| "): line for line in lines[2:]}
    assert by_name["Swish"].endswith("| **wrong: derivative, range** |")
    assert by_name["sigmoid"].endswith("| (0, 1) | (0, 1) | holds |")


def test_slope_table_values():
    points = torch.tensor([-1.0, 2.0])
    markdown = slope_table(points, {"ReLU": activations.relu_derivative(points)}).data
    assert markdown.splitlines() == [
        "| $f'(x)$ | $x = -1$ | $x = 2$ |",
        "| --- | --- | --- |",
        "| ReLU | +0.000 | +1.000 |",
    ]


def test_formula_and_corrections_tables():
    assert formula_table(TABLE[:1]).data.splitlines()[2] == (
        r"| sigmoid | $\frac{1}{1 + e^{-x}}$ | $\sigma(x)\,(1 - \sigma(x))$ | $(0, 1)$ |"
    )
    lines = corrections_table(CORRECTIONS).data.splitlines()
    assert [line.split(" | ")[0] for line in lines[2:]] == [f"| {name}" for name in CORRECTIONS]
    assert CORRECTIONS["Swish"].note in lines[2 + list(CORRECTIONS).index("Swish")]
