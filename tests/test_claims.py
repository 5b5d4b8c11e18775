"""Claims as data: a page's checks raise when an equality fails, its claims record their status for the build's
ledger, and tools/claims.py fails a build whose statuses differ from book/claims.json."""

import json
import re
import sys
from pathlib import Path

import pytest

from minformers.support.claims import (
    CONTRADICTED,
    NOT_SHOWN,
    NOT_TESTED,
    SHOWN,
    Page,
    by_interval,
    committed,
    ledger,
    measured,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import claims as claims_tool  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIELDS = {"statement": "S", "quantity": "Q", "rule": "R", "scale": "big"}


def test_a_check_passes_within_its_tolerance_and_fails_naming_page_check_and_gap(capsys):
    page = Page("posttraining_lora")
    page.check("logits, ours against PEFT's", 2e-6, tolerance=1e-5)
    assert "differ by at most 2.0e-06 (tolerance 1e-05)" in capsys.readouterr().out
    with pytest.raises(AssertionError, match=r"posttraining_lora: logits, ours against PEFT's: differ by 8, over"):
        page.check("logits, ours against PEFT's", 8.0, tolerance=1e-5)
    with pytest.raises(AssertionError, match="nan"):
        page.check("a gap that is not a number", float("nan"), tolerance=1.0)


def test_a_check_reads_a_gap_still_in_the_autograd_graph_without_a_warning(recwarn):
    import torch

    weight = torch.ones(2, requires_grad=True)
    Page("transformer_translation").check("a loss", (weight * 1e-7).sum(), tolerance=1e-5)
    assert not [warning for warning in recwarn if "requires_grad" in str(warning.message)]


@pytest.mark.parametrize(("low", "high", "direction", "status"), [
    (0.01, 0.2, 1, SHOWN), (-0.01, 0.2, 1, NOT_SHOWN), (-0.3, -0.1, 1, CONTRADICTED),
    (-0.3, -0.1, -1, SHOWN), (0.1, 0.3, -1, CONTRADICTED), (0.0, 0.3, 1, NOT_SHOWN)])
def test_by_interval_reads_the_side_of_zero_the_claim_expects(low, high, direction, status):
    assert by_interval(low, high, direction) == status


def test_by_interval_rejects_a_reversed_interval():
    with pytest.raises(ValueError, match="above its high end"):
        by_interval(0.3, 0.1)


def test_a_recorded_claim_reaches_the_ledger_with_its_numbers(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MINFORMERS_CLAIMS", str(tmp_path / "claims"))
    page = Page("p")
    claim = page.claim("p-effect", **FIELDS)
    page.record(claim, NOT_SHOWN, difference=0.01, low=-0.02, high=0.04)
    assert "claim p-effect: not shown at this scale" in capsys.readouterr().out
    entry = measured()["p-effect"]
    assert entry["page"] == "p" and entry["status"] == NOT_SHOWN and entry["numbers"]["low"] == -0.02
    with pytest.raises(ValueError, match="twice"):
        page.claim("p-effect", **FIELDS)
    with pytest.raises(ValueError, match="status must be one of"):
        page.record(claim, "probably")
    with pytest.raises(ValueError, match="not a claim of q"):
        Page("q").record(claim, SHOWN)


def test_the_build_fails_on_a_changed_missing_or_uncommitted_status():
    expected = {
        "a": {"page": "one", "statement": "A", "status": SHOWN},
        "b": {"page": "two", "statement": "B", "status": NOT_SHOWN},
        "c": {"page": None, "statement": "C", "status": NOT_TESTED, "why": "no page"},
        "t": {"page": "two", "statement": "T", "status": SHOWN, "timed": True},
    }
    found = {"a": {"page": "one", "status": SHOWN}, "b": {"page": "two", "status": NOT_SHOWN},
             "t": {"page": "two", "status": NOT_SHOWN, "timed": True}}
    assert claims_tool.compare(expected, found) == []  # a timed claim's status is not gated
    changed = {**found, "a": {"page": "one", "status": CONTRADICTED}}
    assert claims_tool.compare(expected, changed) == [
        "one: claim a is 'contradicted', committed as 'shown' (tools/claims.py --accept takes the new status, with a "
        "reason)"]
    missing = {key: value for key, value in found.items() if key != "b"}
    assert claims_tool.compare(expected, missing) == [
        "two: claim b was not recorded (expected: not shown at this scale)"]
    assert claims_tool.compare(expected, missing, pages={"one"}) == []  # one page run alone
    extra = {**found, "d": {"page": "one", "status": SHOWN}}
    assert claims_tool.compare(expected, extra)[0].startswith("one: claim d is not in book/claims.json")


def test_accept_takes_the_recorded_statuses_and_keeps_the_untested():
    expected = {"a": {"page": "one", "statement": "A", "status": SHOWN},
                "c": {"page": None, "statement": "C", "status": NOT_TESTED, "why": "no page"}}
    found = {"a": {"page": "one", "statement": "A, reworded", "status": NOT_SHOWN}}
    merged = claims_tool.accept(expected, found)
    assert merged["a"] == {"page": "one", "statement": "A, reworded", "status": NOT_SHOWN}
    assert merged["c"] == expected["c"]
    assert claims_tool.counts(merged) == "0 shown, 1 not shown at this scale, 0 contradicted, 1 not tested"


def test_accepting_one_page_leaves_the_others_and_drops_its_renamed_claims(tmp_path):
    expected = {"old": {"page": "one", "statement": "Old", "status": SHOWN},
                "b": {"page": "two", "statement": "B", "status": SHOWN}}
    found = {"new": {"page": "one", "statement": "New", "status": SHOWN},
             "b": {"page": "two", "statement": "B", "status": CONTRADICTED}}  # page two's run is not taken
    assert claims_tool.accept(expected, found, {"one"}) == {
        "b": expected["b"], "new": {"page": "one", "statement": "New", "status": SHOWN}}
    for claim_id, entry in found.items():
        (tmp_path / f"{claim_id}.json").write_text(json.dumps({"id": claim_id, **entry}))
    claims_tool.forget(tmp_path, "one")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["b.json"]


def test_the_committed_ledger_is_well_formed():
    claims = committed(ROOT / "book" / "claims.json")
    pages = {path.stem for path in (ROOT / "book").glob("*.md")}
    for claim_id, entry in claims.items():
        assert entry["status"] in (SHOWN, NOT_SHOWN, CONTRADICTED, NOT_TESTED), claim_id
        assert entry["statement"].strip(), claim_id
        if entry["status"] == NOT_TESTED:
            assert entry.get("why"), f"{claim_id}: a claim left untested says why"
        else:
            assert entry["page"] in pages, f"{claim_id}: its page {entry['page']} is not in book/"
            text = (ROOT / "book" / f"{entry['page']}.md").read_text()
            assert f'"{claim_id}"' in text, f"{claim_id}: declared on its page {entry['page']}"


def test_the_ledger_page_lists_every_claim_by_status(tmp_path):
    path = tmp_path / "claims.json"
    path.write_text(json.dumps({"claims": {
        "a": {"page": "one", "statement": "A holds.", "status": SHOWN},
        "c": {"page": None, "statement": "C holds.", "status": NOT_TESTED, "why": "needs 7 B parameters"}}}))
    (tmp_path / "found").mkdir()
    (tmp_path / "found" / "a.json").write_text(json.dumps(
        {"id": "a", "page": "one", "status": SHOWN, "numbers": {"difference": 0.0312}}))
    text = ledger(path, tmp_path / "found").data
    assert "**Shown** (1)" in text and "- {doc}`one`: A holds. *difference 0.0312*" in text
    assert "**Not tested** (1)" in text and "- C holds. *needs 7 B parameters*" in text
    assert "**Contradicted** (0)" in text


def test_the_notes_map_in_contributing_names_only_claims_of_the_ledger():
    """contributing.md maps the notes' claims to chapters; where a run decides one, its last column names the claim
    (in backticks) rather than typing a status, so a claim renamed or dropped must not leave a dangling name."""
    claims = committed(ROOT / "book" / "claims.json")
    text = (ROOT / "book" / "contributing.md").read_text()
    rows = [line for line in text.split("## The source notes' claims")[1].splitlines() if line.startswith("| ")]
    named = {name for row in rows for name in re.findall(r"`([a-z0-9]+(?:-[a-z0-9]+)+)`", row.split("|")[-2])}
    assert len(named) > 30, "the map names the ledger's claims"
    dangling = sorted(named - set(claims))
    assert not dangling, f"named in contributing.md but not in book/claims.json: {dangling}"
