"""The pages' Markdown helpers: tables that render, and lists that read as English."""

import pytest

from minformers.support.markdown import listed, table


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
