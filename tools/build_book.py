"""Build the book, print each page's execution time in seconds and in reference seconds, and fail on any error or
blown budget.

    python tools/build_book.py [BOOK_ROOT]                 every page executed, from clean (make test, CI)
    python tools/build_book.py --reuse [BOOK_ROOT]         pages unchanged since the last such build reuse their
                                                           outputs (make book)
    python tools/build_book.py --page NAME [BOOK_ROOT]     only book/NAME.md executed, the site in _build/page/
                                                           (make page PAGE=NAME; --output DIR puts it elsewhere)

It runs `jupyter-book build --all -W -n --keep-going`, so every page is read again and any failing cell or Sphinx
warning fails the build, and takes the machine factor (how much slower than the reference machine this one runs the
pages): in a full build, the median of the unchanged pages' seconds over their recorded reference seconds
(tools/page_clock.py); otherwise, or with too few unchanged pages, a fixed workload's readings before, during and
after the build (tools/build_clock.py). Then it reads `_build/timings.json` (written by tools/course_site/timings.py),
adds each page's reference seconds (seconds / factor) and checks them, so that a budget means the same on a fast
machine and a slow one:
- each page against its budget: 60, or 150 for a page that trains a model later pages load (front matter
  `trains_shared_model: <which>`);
- the pages that train no shared model against 25 on average;
- the whole book against 22 reference-minutes (aiming at 18).
A page that needs more gets less work or shares a model; no page can declare a bigger budget.

With --reuse, a page is executed again only when its code or the lib changed (tools/execution_mode.py): its outputs
and its recorded time come from a jupyter-cache kept per lib digest, and the checkpoints that pages share are kept.
With --page, the page trains whatever earlier pages' checkpoints it needs and finds absent, as it does when a
learner runs it alone, so its cells have no time limit (tools/execution_mode.py); its budget still applies.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

import build_clock
import claims
import page_clock

PAGE_BUDGET = 60.0  # reference seconds, the course's rule for one page
SHARED_MODEL_BUDGET = 150.0  # a page that trains a model later pages load, and so pays for their training
AVERAGE_BUDGET = 25.0  # the mean of the other pages
BOOK_BUDGET = 22 * 60.0  # the whole book, from clean
BOOK_TARGET = 18 * 60.0  # what we aim for; exceeding it only warns


def front_matter(source: Path) -> dict:
    """The YAML block between the first two `---` lines of a MyST notebook, or {}."""
    text = source.read_text(encoding="utf-8")
    if not text.startswith("---"):
        return {}
    _, block, _ = text.split("---", 2)
    return yaml.safe_load(block) or {}


def page_budget(source: Path) -> float:
    """The page's budget in reference seconds: 150 if it trains a shared model, else 60."""
    matter = front_matter(source)
    if "execution_timeout" in (matter.get("mystnb") or {}):
        raise ValueError(f"{source}: a page cannot set its own execution_timeout; budgets are {PAGE_BUDGET:.0f} "
                         f"reference-seconds, or {SHARED_MODEL_BUDGET:.0f} with `trains_shared_model: <which>`")
    return SHARED_MODEL_BUDGET if matter.get("trains_shared_model") else PAGE_BUDGET


def check_timings(root: Path, pages: dict) -> tuple[list[str], str]:
    """Return (problems, printable table) for `pages` (name -> timings.json record), slowest first."""
    problems, rows, ordinary = [], [], []
    seconds_total = reference_total = 0.0
    for page, record in sorted(pages.items(), key=lambda item: -(item[1]["seconds"] or 0.0)):
        seconds, reference = record["seconds"] or 0.0, record["reference_seconds"] or 0.0
        budget = page_budget(root / f"{page}.md")
        seconds_total, reference_total = seconds_total + seconds, reference_total + reference
        if budget == PAGE_BUDGET:
            ordinary.append(reference)
        status = "ok"
        if not record["succeeded"]:
            status = "FAILED"
            problems.append(f"{page}: execution failed")
        elif reference > budget:
            status = "OVER BUDGET"
            problems.append(f"{page}: took {reference:.1f} reference-seconds ({seconds:.1f} s), over its budget of "
                            f"{budget:.0f}")
        rows.append(f"{page:<40} {seconds:>8.1f} {reference:>10.1f} {budget:>8.0f}   {status}")
    average = sum(ordinary) / len(ordinary) if ordinary else 0.0
    if len(ordinary) > 1 and average > AVERAGE_BUDGET:
        problems.append(f"the pages that train no shared model took {average:.1f} reference-seconds on average, "
                        f"over {AVERAGE_BUDGET:.0f}")
    if reference_total > BOOK_BUDGET:
        problems.append(f"the book took {reference_total / 60:.1f} reference-minutes to execute, over its budget of "
                        f"{BOOK_BUDGET / 60:.0f}")
    header = f"{'page':<40} {'seconds':>8} {'reference':>10} {'budget':>8}   status"
    footer = f"{'total':<40} {seconds_total:>8.1f} {reference_total:>10.1f} {BOOK_BUDGET:>8.0f}"
    if reference_total > BOOK_TARGET:
        footer += f"   (over the {BOOK_TARGET:.0f} reference-seconds target)"
    if ordinary:
        footer += f"\n{'mean of the pages that train no shared model':<49} {average:>10.1f} {AVERAGE_BUDGET:>8.0f}"
    return problems, "\n".join([header, *rows, footer])


def normalise(timings_file: Path, clock: dict) -> dict:
    """Write `clock` and each page's reference seconds (its seconds / the factor) into timings.json; return its
    pages."""
    timings = json.loads(timings_file.read_text())
    for record in timings["pages"].values():
        seconds = record["seconds"]
        record["reference_seconds"] = None if seconds is None else seconds / clock["factor"]
    timings["clock"] = clock
    timings_file.write_text(json.dumps(timings, indent=2) + "\n")
    return timings["pages"]


def execution_cache(root: Path) -> Path:
    """The jupyter-cache for --reuse builds: one per lib digest, older ones removed (their outputs are stale)."""
    from minformers.support.checkpoints import lib_source_digest

    caches = root / "_build" / ".jupyter_cache"
    current = caches / f"lib-{lib_source_digest()[:16]}"
    for stale in caches.glob("lib-*"):
        if stale != current:
            shutil.rmtree(stale)
    return current


def page_docname(root: Path, name: str) -> str:
    """'bert', 'book/bert' or 'book/bert.md' -> 'book/bert', for a page that exists."""
    docname = name.removesuffix(".md")
    if not docname.startswith("book/") and (root / "book" / f"{docname}.md").exists():
        docname = f"book/{docname}"
    if not (root / f"{docname}.md").exists():
        pages = sorted(path.stem for path in (root / "book").glob("*.md"))
        raise SystemExit(f"no page {name!r}: PAGE must be one of {', '.join(pages)}")
    return docname


GLUE_ROLE = re.compile(r"\{glue(?::\w+)?\}`(?P<key>[^`:]+)")


def missing_glue(root: Path, output: Path, page: str) -> list[str]:
    """The keys the page's {glue} roles paste that its run did not glue: in a full build Sphinx reports them, but a
    page built alone has that warning off (tools/execution_mode.py)."""
    used = {match["key"] for match in GLUE_ROLE.finditer((root / f"{page}.md").read_text(encoding="utf-8"))}
    glue_file = output / "_build" / "jupyter_execute" / f"{page}.glue.json"
    glued = set(json.loads(glue_file.read_text())) if glue_file.exists() else set()
    return [f"{page}: nothing was glued as {key!r}, which its prose pastes" for key in sorted(used - glued)]


def check_claims(root: Path, page: str | None) -> list[str]:
    """The claims the pages recorded (in _build/claims) against the committed book/claims.json, if the book has one
    (tools/claims.py): problems for a whole book; for one page, its differences are printed as notes, since a page
    run alone is work in progress."""
    if not (root / claims.COMMITTED_NAME).exists():
        return []
    expected, found = claims.committed(root / claims.COMMITTED_NAME), claims.measured(root / claims.LEDGER_NAME)
    problems = claims.compare(expected, found, {Path(page).name} if page else None)
    print(f"\nclaims: {len(found)} recorded; committed: {claims.counts(expected)}")
    if page:
        for problem in problems:
            print(f"note: {problem}")
        return []
    return problems


def build(root: Path, reuse: bool = False, page: str | None = None, factor: float | None = None,
          output: Path | None = None) -> int:
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    before = build_clock.given(factor) if factor else build_clock.measure()
    print(f"before the build, {build_clock.describe(before)}", flush=True)
    environment = {**os.environ, "MINFORMERS_BUILD": "1"}  # training loops print a line per evaluation, not a bar
    environment["MINFORMERS_CLAIMS"] = str(root / claims.LEDGER_NAME)  # where the pages record their claims
    if page:
        environment["MINFORMERS_ONLY_PAGE"] = page = page_docname(root, page)
        output = output or root / "_build" / "page"
        claims.forget(root / claims.LEDGER_NAME, Path(page).name)  # a claim renamed since the last run must not linger
    elif reuse:
        environment["MINFORMERS_EXECUTION_CACHE"] = str(execution_cache(root))
    else:
        # Pages share trained models through _build/checkpoints within one build; a new build retrains them all, and
        # records every claim afresh.
        shutil.rmtree(root / "_build" / "checkpoints", ignore_errors=True)
        shutil.rmtree(root / claims.LEDGER_NAME, ignore_errors=True)
    output = output if page else root
    probes = output / "_build" / "clock_probes.txt"
    probes.unlink(missing_ok=True)
    if not factor and not page and not reuse:  # a whole book executed: the clock is also read between its pages
        environment[build_clock.PROBES] = str(probes)
    started = time.perf_counter()
    command = [str(jupyter_book), "build", "--all", "-W", "-n", "--keep-going", "--path-output", str(output),
               str(root)]
    result = subprocess.run(command, env=environment)
    wall = time.perf_counter() - started

    timings_file = output / "_build" / "timings.json"
    if not timings_file.exists():
        print(f"\nbuild failed before any page was timed (exit {result.returncode})", file=sys.stderr)
        return result.returncode or 1
    # Timed again after the build: a machine's speed drifts over the build's minutes (other tenants of the host),
    # and the median of both calibrations' repeats follows the build better than either alone.
    after = build_clock.given(factor) if factor else build_clock.measure()
    clock = build_clock.combine(before, after, build_clock.probed(probes))
    print(f"after the build, {build_clock.describe(after)}\n{build_clock.describe(clock)}")
    if not factor and not page:  # the pages time the machine themselves (tools/page_clock.py)
        clock = page_clock.clock(root, json.loads(timings_file.read_text())["pages"], clock)
        print(page_clock.describe(clock))
    pages = normalise(timings_file, clock)
    if page:  # absent: it never finished
        pages = {page: pages.get(page, {"seconds": None, "reference_seconds": None, "succeeded": False})}
    problems, table = check_timings(root, pages)
    if page and any("over its budget" in problem for problem in problems):
        problems.append("a page run alone also trains what earlier pages would have (their checkpoints are kept): "
                        "run it again to time it alone")
    print(f"\nExecution time per page, in seconds and in reference seconds (seconds / {clock['factor']:.2f}; also in "
          f"{timings_file}):\n{table}\nbuild wall time: {wall:.0f} s")

    if result.returncode != 0:
        problems.insert(0, f"jupyter-book exited with {result.returncode} (a cell failed or Sphinx warned)")
    problems += check_claims(root, page)
    if page:
        problems += missing_glue(root, output, page)
    for problem in problems:
        print(f"ERROR: {problem}", file=sys.stderr)
    if problems:
        return 1
    site = output / "_build" / "html" / (f"{page}.html" if page else "index.html")
    print(f"\nThe site is at {site.resolve()}" + (" (only this page was executed)" if page else ""))
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--reuse", action="store_true", help="reuse outputs of pages whose code and lib are unchanged")
    parser.add_argument("--page", help="execute only this page (e.g. bert); the site around it goes to _build/page")
    parser.add_argument("--factor", type=float, help="take this machine factor instead of measuring it (tests)")
    parser.add_argument("--output", type=Path, help="with --page: build the site here, not in _build/page (to run "
                                                    "several pages side by side)")
    arguments = parser.parse_args()
    sys.exit(build(arguments.root.resolve(), reuse=arguments.reuse, page=arguments.page, factor=arguments.factor,
                   output=arguments.output and arguments.output.resolve()))
