"""The course's ledger of claims: the statuses a build measured against those committed in book/claims.json.

    python tools/claims.py              compare the build's ledger (_build/claims/) with book/claims.json
    python tools/claims.py --accept     write the ledger's statuses into book/claims.json (the pages run so far)
    python tools/claims.py --accept --page NAME    ... of that page only (repeatable), dropping its claims not recorded

Each page records its claims as it runs (lib/minformers/support/claims.py). A full build fails when a status differs
from the committed one, when a committed claim of a page that ran was not recorded, or when a recorded claim is not
committed, so that a change which makes an effect vanish cannot land unnoticed. Claims decided by wall-clock time
(`timed`) are recorded but never gated: machines of one kind differ in speed, while every other claim's numbers are
seeded and repeat exactly. `--accept` is how a deliberate change of status lands: run the page, accept, and say why
in the commit.
"""

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from minformers.support.claims import NOT_TESTED, STATUSES, committed, measured

ROOT = Path(__file__).resolve().parent.parent
COMMITTED_NAME, LEDGER_NAME = "book/claims.json", "_build/claims"  # under a book's root
COMMITTED = ROOT / COMMITTED_NAME


def compare(expected: dict, found: dict, pages: set[str] | None = None) -> list[str]:
    """Problems between the committed claims and a build's ledger, for the claims of `pages` (None: every page)."""
    problems = []
    for claim_id, entry in sorted(expected.items()):
        if entry["status"] == NOT_TESTED or (pages is not None and entry["page"] not in pages):
            continue
        if claim_id not in found:
            problems.append(f"{entry['page']}: claim {claim_id} was not recorded (expected: {entry['status']})")
        elif found[claim_id]["status"] != entry["status"] and not found[claim_id].get("timed"):
            problems.append(f"{entry['page']}: claim {claim_id} is {found[claim_id]['status']!r}, committed as "
                            f"{entry['status']!r} (tools/claims.py --accept takes the new status, with a reason)")
    for claim_id, entry in sorted(found.items()):
        if claim_id not in expected and (pages is None or entry["page"] in pages):
            problems.append(f"{entry['page']}: claim {claim_id} is not in book/claims.json (tools/claims.py --accept)")
    return problems


def counts(expected: dict) -> str:
    """'12 shown, 7 not shown at this scale, 1 contradicted, 9 not tested'."""
    tally = Counter(entry["status"] for entry in expected.values())
    return ", ".join(f"{tally[status]} {status}" for status in STATUSES)


def forget(folder: Path, page: str) -> None:
    """Remove one page's claims from a build's ledger, before the page runs again alone."""
    for claim_id, entry in measured(folder).items():
        if entry["page"] == page:
            (folder / f"{claim_id}.json").unlink()


def accept(expected: dict, found: dict, pages: set[str] | None = None) -> dict:
    """The committed claims with the ledger's page, statement and status taken for every recorded claim (of `pages`
    only, if given: a claim of theirs that the ledger no longer holds was renamed or removed, and goes)."""
    if pages is not None:
        found = {claim_id: entry for claim_id, entry in found.items() if entry["page"] in pages}
        expected = {claim_id: entry for claim_id, entry in expected.items()
                    if entry["page"] not in pages or entry["status"] == NOT_TESTED}
    merged = dict(expected)
    for claim_id, entry in found.items():
        merged[claim_id] = {"page": entry["page"], "statement": entry["statement"], "status": entry["status"]}
        if entry.get("timed"):
            merged[claim_id]["timed"] = True
    return dict(sorted(merged.items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accept", action="store_true", help="write the recorded statuses into book/claims.json")
    parser.add_argument("--page", action="append", help="compare or accept only this page's claims (repeatable)")
    arguments = parser.parse_args()
    expected, found = committed(COMMITTED), measured(ROOT / LEDGER_NAME)
    if arguments.accept:
        merged = accept(expected, found, set(arguments.page) if arguments.page else None)
        COMMITTED.write_text(json.dumps({"claims": merged}, indent=2, ensure_ascii=False) + "\n")
        print(f"book/claims.json: {len(merged)} claims ({counts(merged)})")
        return 0
    problems = compare(expected, found, set(arguments.page) if arguments.page else None)
    for problem in problems:
        print(f"ERROR: {problem}", file=sys.stderr)
    print(f"claims: {len(found)} recorded; committed: {counts(expected)}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
