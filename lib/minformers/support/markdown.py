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

from IPython.display import Markdown


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> Markdown:
    """A Markdown table: the header, then one line per row, each cell as str() gives
    it (format numbers before)."""
    lines = [list(header), ["---"] * len(header)]
    for row in rows:
        if len(row) != len(header):
            raise ValueError(
                f"each row must have {len(header)} cells, as the header, got {row!r}"
            )
        lines.append(row)
    return Markdown(
        "\n".join("| " + " | ".join(map(str, line)) + " |" for line in lines)
    )


def listed(items: Iterable[object], conjunction: str = "and") -> str:
    """Items as a sentence lists them: "a", "a and b", "a, b and c".

    >>> listed([]), listed(["x"]), listed(["x", "y"], "or")
    ('', 'x', 'x or y')
    """
    items = [str(item) for item in items]
    if len(items) < 2:
        return "".join(items)
    return f"{', '.join(items[:-1])} {conjunction} {items[-1]}"
