"""The pages as their own clock: how much slower than the reference machine this build ran the pages that did not
change, as the machine factor of a full build.

The build clock's workload (tools/build_clock.py) is about 5 s of work shaped like the pages'; timed 15 times over a
build it still scatters (one reading a standard deviation of about 0.2), and its median moved by 25% between builds
whose pages took the same time. Three CI builds of 2026-11-28/29 (dcb5b45, 62631f9, 505cd5a) took 1,953, 1,963 and
1,955 s of page time, their unchanged pages within 5% of each other at the median, while the workload read 1.86,
2.01 and 1.61: at 1.61 the pages that train no shared model averaged 26.3 reference-seconds, over their 25, with
every page as fast as in the build that read 2.01.

So a full build times the machine by its own pages. REFERENCE_PAGES records, for each page, its reference seconds
and a digest of its source. Each page whose source is unchanged since then ran `seconds / reference seconds` times
slower than the reference machine; the build's factor is the median of those ratios, over at least MIN_PAGES pages
(fewer, and the build falls back on the workload's readings). A changed page is measured, not measuring: its
reference seconds are its seconds over the factor its unchanged neighbours give.

The digest is of the page's code cells alone. A lib change that slowed every page alike would move the factor, not the
pages' reference seconds; the build prints the workload's reading beside the pages' factor, so such a change shows
as a gap between the two.

The first record (2026-11-29) came from those three builds, each taken at the median of their 45 workload readings
together, 1.80: their pages took the same seconds within 0.6% in all, so one speed fits the three. To record again
(after a session that changed many pages, from its clean build):

    python tools/page_clock.py --record _build/timings.json [MORE_TIMINGS ...]

Each page's reference seconds are then the median, over the given builds that ran its current source, of its
seconds over that build's factor. An edit that changes a page's code but not its work (a colour, a label) keeps
its reference seconds: `python tools/page_clock.py --same-work book/NAME ...`, said in the commit that makes it.
"""

import argparse
import hashlib
import json
import re
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE_PAGES = ROOT / "tools" / "reference_pages.json"
MIN_PAGES = 10  # unchanged pages needed; the median of 30 is within about 3% (the pages scatter by about 10%)


def source_digest(source: Path) -> str:
    """A digest of the page's code cells: an edit to its prose leaves its work, and its place in the clock, as
    they were."""
    cells = re.findall(r"^```\{code-cell\}.*?^```", source.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)
    return hashlib.sha256("\n".join(cells).encode()).hexdigest()[:16]


def ratios(root: Path, pages: dict, reference: dict) -> dict[str, float]:
    """page -> seconds / reference seconds, for the pages of `pages` (timings.json records) that this build ran to
    the end (not taken from a cache) and whose source is the one `reference` recorded."""
    out = {}
    for page, record in pages.items():
        recorded = reference.get(page)
        ran = record.get("succeeded") and record.get("seconds") and record.get("method") != "cache"
        if ran and recorded and recorded["source"] == source_digest(root / f"{page}.md"):
            out[page] = record["seconds"] / recorded["reference_seconds"]
    return out


def clock(root: Path, pages: dict, workload: dict, reference_file: Path = REFERENCE_PAGES) -> dict:
    """The build's clock: the median ratio of its unchanged pages, with `workload` (the build clock's reading)
    kept beside it; `workload` itself if fewer than MIN_PAGES pages are unchanged."""
    reference = json.loads(reference_file.read_text())["pages"] if reference_file.exists() else {}
    unchanged = ratios(root, pages, reference)
    if len(unchanged) < MIN_PAGES:
        return {**workload, "unchanged_pages": len(unchanged)}
    return {**workload, "factor": statistics.median(unchanged.values()), "unchanged_pages": len(unchanged),
            "workload": workload["factor"]}


def describe(clock: dict) -> str:
    if "workload" not in clock:
        return (f"{clock['unchanged_pages']} pages unchanged since {REFERENCE_PAGES.name}, fewer than {MIN_PAGES}: "
                f"the factor is the workload's ({clock['factor']:.2f}); record the pages again "
                f"(python tools/page_clock.py --record _build/timings.json)")
    return (f"the build's machine factor is {clock['factor']:.2f}, the median of its {clock['unchanged_pages']} "
            f"unchanged pages' seconds over their reference seconds (the workload read {clock['workload']:.2f})")


def record(root: Path, builds: list[dict], reference_file: Path = REFERENCE_PAGES) -> dict:
    """Write each page's reference seconds (the median over `builds`, timings.json contents, of its seconds over
    that build's factor, from the builds that ran its current source) and source digest to `reference_file`."""
    estimates = {}
    for build in builds:
        for page, data in build["pages"].items():
            digest = source_digest(root / f"{page}.md")
            if data["succeeded"] and data["seconds"] and data.get("source", digest) == digest:
                estimates.setdefault(page, []).append(data["seconds"] / build["clock"]["factor"])
    pages = {page: {"reference_seconds": round(statistics.median(values), 2),
                    "source": source_digest(root / f"{page}.md")} for page, values in sorted(estimates.items())}
    reference_file.write_text(json.dumps({"pages": pages}, indent=2) + "\n")
    return pages


def same_work(root: Path, pages: list[str], reference_file: Path = REFERENCE_PAGES) -> None:
    """Record the current code of `pages` (say book/gpt) with their reference seconds unchanged: for an edit that
    does not change a page's work (a colour, a label), which the commit that makes it should say."""
    recorded = json.loads(reference_file.read_text())
    for page in pages:
        recorded["pages"][page]["source"] = source_digest(root / f"{page}.md")
    reference_file.write_text(json.dumps(recorded, indent=2) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--record", nargs="+", type=Path, metavar="TIMINGS",
                        help="timings.json of full builds whose pages to record")
    action.add_argument("--same-work", nargs="+", metavar="PAGE",
                        help="pages (book/NAME) whose code changed without changing their work")
    arguments = parser.parse_args()
    if arguments.same_work:
        same_work(ROOT, arguments.same_work)
        print(f"recorded the current code of {len(arguments.same_work)} pages, their reference seconds unchanged")
    else:
        recorded = record(ROOT, [json.loads(path.read_text()) for path in arguments.record])
        print(f"recorded {len(recorded)} pages in {REFERENCE_PAGES}")
