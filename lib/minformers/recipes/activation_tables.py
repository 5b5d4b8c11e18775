"""The activations page's tables: the notes' claims, the audit of each claim, the
printed slopes beside the true ones, and the corrections, as Markdown.

The checks themselves live in `minformers.activations`; this module only lays out
their results, and reads which claims failed from an audit.

    >>> from minformers.activations import TABLE
    >>> print(formula_table(TABLE[:1]).data.splitlines()[2])
    | sigmoid | $\\frac{1}{1 + e^{-x}}$ | $\\sigma(x)\\,(1 - \\sigma(x))$ | $(0, 1)$ |
"""

from collections.abc import Iterable, Mapping, Sequence

import torch
from IPython.display import Markdown

from minformers.activations import HOLDS, Activation
from minformers.support.markdown import table

# One audited claim set: a row of the table and one of its entries from
# `activations.audit` (one parameter setting).
Audited = tuple[Activation, dict]


def setting_label(setting: Mapping[str, float]) -> str:
    """A parameter setting as the tables print it: {"alpha": 0.01} -> "alpha = 0.01",
    and "-" for a function without parameters."""
    return ", ".join(f"{name} = {value:g}" for name, value in setting.items()) or "-"


def formula_table(rows: Iterable[Activation]) -> Markdown:
    """The notes' table as they state it: formula, derivative and range per row."""
    header = ["function", "$f(x)$", "$f'(x)$ as stated", "range as stated"]
    return table(
        header,
        [
            (
                row.name,
                f"${row.formula}$",
                f"${row.derivative_formula}$",
                f"${row.range_formula}$",
            )
            for row in rows
        ],
    )


def failed_claims(audited: Iterable[Audited]) -> list[tuple[str, str, str]]:
    """(function, claim, setting) of every claim that fails: a formula or a derivative
    off by more than ``HOLDS`` on the grid, or a range that the grid does not match."""
    wrong = []
    for row, entry in audited:
        for claim in _problems(entry):
            wrong.append((row.name, claim, setting_label(entry["setting"])))
    return wrong


def audit_table(audited: Iterable[Audited]) -> Markdown:
    """One line per row and setting: the two errors, the stated and measured ranges,
    and the verdict."""
    header = [
        "function",
        "setting",
        "max \\|f - torch\\|",
        "max \\|f' - autograd\\|",
        "range stated",
        "range measured",
        "verdict",
    ]
    lines = []
    for row, entry in audited:
        problems = _problems(entry)
        lines.append(
            (
                row.name,
                setting_label(entry["setting"]),
                f"{entry['formula_error']:.0e}",
                f"{entry['derivative_error']:.1e}",
                entry["stated"],
                entry["measured"],
                f"**wrong: {', '.join(problems)}**" if problems else "holds",
            )
        )
    return table(header, lines)


def slope_table(points: torch.Tensor, slopes: Mapping[str, torch.Tensor]) -> Markdown:
    """Each derivative's values at ``points``, one line per derivative."""
    header = ["$f'(x)$"] + [f"$x = {x:g}$" for x in points.tolist()]
    return table(
        header,
        [
            [name] + [f"{value:+.3f}" for value in values.tolist()]
            for name, values in slopes.items()
        ],
    )


def corrections_table(corrections: Mapping[str, Activation]) -> Markdown:
    """The corrected rows: what was wrong, and the corrected derivative and range."""
    header = ["function", "what was wrong", "corrected $f'(x)$", "corrected range"]
    return table(
        header,
        [
            (name, row.note, f"${row.derivative_formula}$", f"${row.range_formula}$")
            for name, row in corrections.items()
        ],
    )


def _problems(entry: dict) -> Sequence[str]:
    claims = {
        "formula": entry["formula_error"] <= HOLDS,
        "derivative": entry["derivative_error"] <= HOLDS,
        "range": entry["range_holds"],
    }
    return [claim for claim, holds in claims.items() if not holds]
