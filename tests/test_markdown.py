"""The pages' Markdown helpers: tables that render, and lists that read as English."""

import pytest
from torch import nn

from minformers.support.markdown import listed, parts_table, table


def test_a_table_has_a_header_a_rule_and_one_line_per_row():
    lines = table(["a", "b"], [(1, 2.5), ["x", None]]).data.splitlines()
    assert lines == ["| a | b |", "| --- | --- |", "| 1 | 2.5 |", "| x | None |"]
    assert table(["only a header"], []).data == "| only a header |\n| --- |"


def test_a_row_of_the_wrong_width_is_named():
    with pytest.raises(ValueError, match=r"must have 2 cells, as the header, got \(1, 2, 3\)"):
        table(["a", "b"], [(1, 2, 3)])


@pytest.mark.parametrize("items, conjunction, expected", [
    ([], "and", ""),
    ([0.5], "and", "0.5"),
    (["a", "b"], "and", "a and b"),
    (["a", "b", "c", "d"], "or", "a, b, c or d"),
])
def test_listed_reads_as_a_sentence(items, conjunction, expected):
    assert listed(items, conjunction) == expected


def test_parts_table_names_each_part_and_counts_its_parameters():
    model = nn.Sequential()
    model.add_module("embed", nn.Embedding(10, 4))
    model.add_module("blocks", nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)]))
    model.add_module("head", nn.Linear(4, 2, bias=False))
    model.head.weight.requires_grad_(False)
    lines = parts_table(model).data.splitlines()
    assert lines == [
        "| part | module | parameters |",
        "| --- | --- | --- |",
        "| `embed` | Embedding(10, 4) | 40 |",
        "| `blocks` | 2 x Linear | 40 |",
        "| `head` | Linear(in_features=4, out_features=2, bias=False) | 8 |",
    ]
    parts = [("embed", model.embed), ("head", model.head)]
    lines = parts_table(parts, settings=False, frozen_apart=True).data.splitlines()
    assert lines == [
        "| part | module | trained parameters | frozen parameters |",
        "| --- | --- | --- | --- |",
        "| `embed` | Embedding | 40 | 0 |",
        "| `head` | Linear | 0 | 8 |",
    ]


def test_a_table_shows_once_in_a_notebook_wherever_it_is_built():
    """A table built before a print, shown through display(), or left as the cell's value: each appears once."""
    import nbclient
    import nbformat

    cells = ["from minformers.support.markdown import table\nfrom IPython.display import display",
             "built = table(['a'], [[1]])\nprint('after')", "display(table(['b'], [[2]]))", "table(['c'], [[3]])"]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell) for cell in cells])
    nbclient.NotebookClient(notebook, kernel_name="python3", timeout=60).execute()
    for cell, header in zip(notebook.cells[1:], "abc", strict=True):
        shown = [out["data"]["text/markdown"] for out in cell.outputs if "text/markdown" in out.get("data", {})]
        assert shown == [f"| {header} |\n| --- |\n| {'abc'.index(header) + 1} |"]
