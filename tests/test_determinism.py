"""Two runs of a seeded page print identical numbers (the book's pages all start with seed_everything)."""

from pathlib import Path

import pytest

from book_helpers import execute, text_outputs

pytestmark = pytest.mark.slow
PROBE = Path(__file__).parent / "fixtures" / "determinism_page.md"


def test_a_seeded_page_prints_identical_numbers_twice(tmp_path):
    first = text_outputs(execute(PROBE, cwd=tmp_path))
    second = text_outputs(execute(PROBE, cwd=tmp_path))
    assert any("checksum of the weights" in text for text in first), first  # the page really ran
    # Joined: how a cell's printed lines are cut into output blocks depends on timing (a busy machine flushes more
    # often), not on the numbers.
    assert "".join(first) == "".join(second)
