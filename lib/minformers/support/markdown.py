"""Markdown for the results a page prints: tables, and lists inside a sentence, so that a
page's code says what it shows rather than how Markdown spells it.

    >>> print(table(["model", "loss"], [("GPT", "3.10"), ("BERT", 2.5)]).data)
    | model | loss |
    | --- | --- |
    | GPT | 3.10 |
    | BERT | 2.5 |
    >>> listed(["BERT", "RoBERTa", "ALBERT"])
    'BERT, RoBERTa and ALBERT'
"""

from collections.abc import Iterable, Sequence

from IPython import get_ipython
from IPython.display import Markdown, display
from torch import nn


class Table(Markdown):
    """A Markdown table that showed itself when ``table`` built it, so showing it again
    (as a cell's last value, or through ``display``) shows nothing more."""

    def _ipython_display_(self) -> None:
        pass


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> Table:
    """A Markdown table: the header, then one line per row, each cell as str() gives
    it (format numbers before). In a notebook it is shown where it is built, whatever
    the cell does after: a table built and not shown would be a result the page
    lost."""
    lines = [list(header), ["---"] * len(header)]
    for row in rows:
        if len(row) != len(header):
            raise ValueError(
                f"each row must have {len(header)} cells, as the header, got {row!r}"
            )
        lines.append(row)
    text = "\n".join("| " + " | ".join(map(str, line)) + " |" for line in lines)
    if get_ipython() is not None:
        display(Markdown(text))
    return Table(text)


def listed(items: Iterable[object], conjunction: str = "and") -> str:
    """Items as a sentence lists them: "a", "a and b", "a, b and c".

    >>> listed([]), listed(["x"]), listed(["x", "y"], "or")
    ('', 'x', 'x or y')
    """
    items = [str(item) for item in items]
    if len(items) < 2:
        return "".join(items)
    return f"{', '.join(items[:-1])} {conjunction} {items[-1]}"


def parts_table(
    parts: nn.Module | Iterable[tuple[str, nn.Module]],
    settings: bool = True,
    frozen_apart: bool = False,
) -> Table:
    """A model's parts, one row each, in place of its repr of 50 lines: the part's name,
    its module and its parameter count. ``parts`` is a module, whose direct children are
    the rows, or (name, module) pairs.

    A stack of blocks reads as `2 x TransformerBlock`; another module as its class and,
    with ``settings``, the settings its repr shows. With ``frozen_apart`` the parameters
    are counted in two columns, those that train and those frozen.

    >>> print(parts_table(nn.Sequential(nn.Linear(2, 3), nn.ReLU())).data)
    | part | module | parameters |
    | --- | --- | --- |
    | `0` | Linear(in_features=2, out_features=3, bias=True) | 9 |
    | `1` | ReLU() | 0 |
    """
    if isinstance(parts, nn.Module):
        parts = parts.named_children()
    rows = []
    for name, part in parts:
        if isinstance(part, nn.ModuleList):
            module = f"{len(part)} x {type(part[0]).__name__}"
        elif settings:
            module = f"{type(part).__name__}({part.extra_repr()})"
        else:
            module = type(part).__name__
        total = sum(parameter.numel() for parameter in part.parameters())
        if frozen_apart:
            trained = sum(p.numel() for p in part.parameters() if p.requires_grad)
            rows.append((f"`{name}`", module, f"{trained:,}", f"{total - trained:,}"))
        else:
            rows.append((f"`{name}`", module, f"{total:,}"))
    counts = (
        ["trained parameters", "frozen parameters"] if frozen_apart else ["parameters"]
    )
    return table(["part", "module", *counts], rows)
