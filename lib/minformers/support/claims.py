"""Claims as data: what a page sets out to show, the rule that decides it, and what the
run found.

A page declares each claim before its experiment runs: an id, the statement (the
seed's or the paper's, cited), the quantity that decides it, the rule, and the scale
the paper needed. After the run, ``Page.record`` computes nothing new: it takes the
status the rule gave and the numbers behind it, prints one line, hands the status and
the numbers to the page's prose (myst-nb's ``glue``), and writes them to the build's
ledger (``_build/claims/<id>.json``), which tools/claims.py compares with the statuses
committed in book/claims.json. A learner's notebook never fails on a status: only the
build's comparison does.

A check is not a claim: an equality the page shows (ours against Hugging Face's, a
formula against autograd) must hold, so ``Page.check`` raises when it does not.

    >>> page = Page("doctest")
    >>> page.check("logits, ours against theirs", 3e-7, tolerance=1e-5)
    logits, ours against theirs: differ by at most 3.0e-07 (tolerance 1e-05)
    >>> by_interval(0.02, 0.09), by_interval(-0.01, 0.05), by_interval(-0.2, -0.1)
    ('shown', 'not shown at this scale', 'contradicted')
"""

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

SHOWN = "shown"
NOT_SHOWN = "not shown at this scale"
CONTRADICTED = "contradicted"
NOT_TESTED = "not tested"
STATUSES = (SHOWN, NOT_SHOWN, CONTRADICTED, NOT_TESTED)

LIB = Path(__file__).resolve().parents[1]


def ledger_folder() -> Path:
    """Where runs record their claims: $MINFORMERS_CLAIMS (the book's build sets it), or
    _build/claims/ beside the lib, as the shared checkpoints are (support/checkpoints)."""
    return Path(
        os.environ.get("MINFORMERS_CLAIMS", LIB.parents[1] / "_build" / "claims")
    )


@dataclass(frozen=True)
class Claim:
    """One claim a page tests, fixed before its run."""

    id: str  # stable and unique in the book, e.g. "lora-forgets-less"
    page: str  # the page that tests it, e.g. "posttraining_lora"
    statement: str  # the claim in our words, naming whose it is (paper or seed)
    quantity: str  # what is measured to decide it
    rule: str  # how the quantity decides the status, written before the run
    scale: str  # what the paper needed to see it (model size, tokens, compute)
    timed: bool = False  # decided by wall-clock time: recorded, never gated by CI


def by_interval(low: float, high: float, direction: int = 1) -> str:
    """The status a 95% interval gives when the claim expects the quantity's sign to
    be ``direction`` (+1: above 0, -1: below 0): shown when the whole interval lies on
    that side, contradicted when it lies wholly on the other, else not shown."""
    if direction not in (1, -1):
        raise ValueError(f"direction must be 1 or -1, got {direction!r}")
    if low > high:
        raise ValueError(f"the interval's low end {low} is above its high end {high}")
    low, high = sorted((direction * low, direction * high))
    if low > 0:
        return SHOWN
    if high < 0:
        return CONTRADICTED
    return NOT_SHOWN


def _glue(name: str, value) -> None:
    """myst-nb's glue, quietly: the page's prose reads ``{glue:text}`name```. Outside a
    notebook there is nothing to glue into."""
    try:
        from IPython import get_ipython
        from myst_nb import glue
    except ImportError:
        return
    if get_ipython() is not None:
        # a NumPy or torch scalar as a plain number: the prose reads 0.5, not np.float64(0.5)
        glue(name, value.item() if hasattr(value, "item") else value, display=False)


class Page:
    """The claims and checks of one page, named by its file in book/ (no .md)."""

    def __init__(self, name: str):
        self.name = name
        self.claims: dict[str, Claim] = {}

    def check(self, what: str, gap: float, tolerance: float) -> None:
        """Assert that a shown equality holds: ``gap`` (the largest absolute
        difference) within ``tolerance``, and print it. The message of a failure names
        the page, the check and the gap."""
        # a tensor still in the autograd graph (a loss, say) is read as a plain number
        gap = float(gap.detach() if hasattr(gap, "detach") else gap)
        if not gap <= tolerance:  # a NaN gap fails too
            raise AssertionError(
                f"{self.name}: {what}: differ by {gap:.3g}, over the tolerance of "
                f"{tolerance:.0e}"
            )
        print(f"{what}: differ by at most {gap:.1e} (tolerance {tolerance:.0e})")

    def glue(self, **values) -> None:
        """Hand numbers to the page's prose, which shows them with
        ``{glue:text}`name:format```: the prose is fixed, the numbers come from the run."""
        for name, value in values.items():
            _glue(name, value)

    def claim(self, id: str, **fields) -> Claim:
        """Declare a claim of this page (fields of ``Claim``), before its run."""
        if id in self.claims:
            raise ValueError(f"{self.name} declares the claim {id!r} twice")
        claim = Claim(id=id, page=self.name, **fields)
        self.claims[id] = claim
        return claim

    def record(self, claim: Claim, status: str, **numbers) -> None:
        """The run's status for ``claim`` and the numbers that decided it: printed,
        glued for the prose (as ``<id>`` for the status and ``<id>-<name>`` for each
        number) and written to the build's ledger."""
        if claim.id not in self.claims:
            raise ValueError(f"{claim.id!r} is not a claim of {self.name}")
        if status not in STATUSES[:3]:
            raise ValueError(f"status must be one of {STATUSES[:3]}, got {status!r}")
        print(f"claim {claim.id}: {status}")
        _glue(claim.id, status)
        for name, value in numbers.items():
            _glue(f"{claim.id}-{name}", value)
        folder = ledger_folder()
        folder.mkdir(parents=True, exist_ok=True)
        entry = {**asdict(claim), "status": status, "numbers": numbers}
        if claim.timed:
            entry["machine"] = os.uname().nodename
        text = json.dumps(entry, indent=2, default=float, ensure_ascii=False)
        (folder / f"{claim.id}.json").write_text(text + "\n")


def measured(folder: Path | None = None) -> dict[str, dict]:
    """The build's ledger (``ledger_folder()`` unless given): claim id -> what
    ``Page.record`` wrote ({} before any run)."""
    folder = ledger_folder() if folder is None else folder
    if not folder.is_dir():
        return {}
    entries = (json.loads(path.read_text()) for path in sorted(folder.glob("*.json")))
    return {entry["id"]: entry for entry in entries}


def committed(path: Path) -> dict[str, dict]:
    """book/claims.json: claim id -> its page, statement and expected status (and, for
    a claim the course does not test, why)."""
    return json.loads(path.read_text())["claims"]


def _numbers(numbers: dict) -> str:
    """{'difference': 0.0312, 'runs': 3} -> 'difference 0.0312, runs 3'."""
    return ", ".join(
        f"{name} {value:.3g}" if isinstance(value, float) else f"{name} {value}"
        for name, value in numbers.items()
    )


def ledger(path: Path, folder: Path | None = None):
    """Every claim of book/claims.json (``path``), grouped by status as Markdown: its
    page, statement and, where this build recorded it, the numbers that decided it.
    A status comes from the build's ledger where the claim was recorded, else from the
    committed file (CI holds the two equal)."""
    from IPython.display import Markdown

    expected, found = committed(path), measured(folder)
    lines = []
    for status in STATUSES:
        rows = []
        for claim_id, entry in expected.items():
            record = found.get(claim_id, {})
            if record.get("status", entry["status"]) != status:
                continue
            where = f"{{doc}}`{entry['page']}`: " if entry.get("page") else ""
            detail = entry.get("why") or _numbers(record.get("numbers", {}))
            rows.append(
                f"- {where}{entry['statement']}" + (f" *{detail}*" if detail else "")
            )
        lines += [f"**{status.capitalize()}** ({len(rows)})", "", *rows, ""]
    return Markdown("\n".join(lines))
