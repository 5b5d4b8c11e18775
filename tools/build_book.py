"""Build the book, print each page's execution time, and fail on any error or blown budget.

    python tools/build_book.py [BOOK_ROOT]                 every page executed, from clean (make test, CI)
    python tools/build_book.py --reuse [BOOK_ROOT]         pages unchanged since the last such build reuse their
                                                           outputs (make book)
    python tools/build_book.py --page NAME [BOOK_ROOT]     only book/NAME.md executed, the site in _build/page/
                                                           (make page PAGE=NAME)

Runs `jupyter-book build --all -W -n --keep-going`, so every page is read again and any failing cell or Sphinx warning
fails the build. Then it reads `_build/timings.json` (written by tools/book_report.py) and checks:
- each page against its budget: 120 s, or the `mystnb: {execution_timeout: N}` in its front matter (N <= 300);
- the whole book against 30 minutes.

With --reuse, a page is executed again only when its code or the lib changed (tools/execution_mode.py): its outputs
and its recorded time come from a jupyter-cache kept per lib digest, and the checkpoints that pages share are kept.
With --page, the page trains whatever earlier pages' checkpoints it needs and finds absent, as it does when a
learner runs it alone, so its cells have no time limit (tools/execution_mode.py); its budget still applies.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

DEFAULT_PAGE_BUDGET = 120.0  # seconds, the course's rule for one page
MAX_PAGE_BUDGET = 300.0  # the most a page may declare (the scaling-laws page needs it)
BOOK_BUDGET = 30 * 60.0  # the whole book, from clean
BOOK_TARGET = 20 * 60.0  # what we aim for; exceeding it only warns


def front_matter(source: Path) -> dict:
    """The YAML block between the first two `---` lines of a MyST notebook, or {}."""
    text = source.read_text(encoding="utf-8")
    if not text.startswith("---"):
        return {}
    _, block, _ = text.split("---", 2)
    return yaml.safe_load(block) or {}


def page_budget(source: Path) -> float:
    declared = (front_matter(source).get("mystnb") or {}).get("execution_timeout")
    if declared is None:
        return DEFAULT_PAGE_BUDGET
    if not 0 < float(declared) <= MAX_PAGE_BUDGET:
        raise ValueError(f"{source}: execution_timeout={declared} must be in (0, {MAX_PAGE_BUDGET:.0f}] s")
    return float(declared)


def check_timings(root: Path, timings: dict) -> tuple[list[str], str]:
    """Return (problems, printable table) for the pages in `timings`, slowest first."""
    problems, rows = [], []
    total = 0.0
    for page, record in sorted(timings.items(), key=lambda item: -(item[1]["seconds"] or 0.0)):
        seconds = record["seconds"] or 0.0
        budget = page_budget(root / f"{page}.md")
        total += seconds
        status = "ok"
        if not record["succeeded"]:
            status = "FAILED"
            problems.append(f"{page}: execution failed")
        elif seconds > budget:
            status = "OVER BUDGET"
            problems.append(f"{page}: took {seconds:.1f} s, over its budget of {budget:.0f} s")
        rows.append(f"{page:<40} {seconds:>8.1f} {budget:>8.0f}   {status}")
    if total > BOOK_BUDGET:
        problems.append(f"the book took {total:.0f} s to execute, over its budget of {BOOK_BUDGET:.0f} s")
    header = f"{'page':<40} {'seconds':>8} {'budget':>8}   status"
    footer = f"{'total':<40} {total:>8.1f} {BOOK_BUDGET:>8.0f}"
    if total > BOOK_TARGET:
        footer += f"   (over the {BOOK_TARGET:.0f} s target)"
    return problems, "\n".join([header, *rows, footer])


def execution_cache(root: Path) -> Path:
    """The jupyter-cache for --reuse builds: one per lib digest, older ones removed (their outputs are stale)."""
    from minformers.train import lib_source_digest

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


def build(root: Path, reuse: bool = False, page: str | None = None) -> int:
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    environment = {**os.environ, "MINFORMERS_BUILD": "1"}  # training loops print a line per evaluation, not a bar
    output = root
    if page:
        environment["MINFORMERS_ONLY_PAGE"] = page = page_docname(root, page)
        output = root / "_build" / "page"
    elif reuse:
        environment["MINFORMERS_EXECUTION_CACHE"] = str(execution_cache(root))
    else:
        # Pages share trained models through _build/checkpoints within one build; a new build retrains them all.
        shutil.rmtree(root / "_build" / "checkpoints", ignore_errors=True)
    started = time.perf_counter()
    command = [str(jupyter_book), "build", "--all", "-W", "-n", "--keep-going", "--path-output", str(output),
               str(root)]
    result = subprocess.run(command, env=environment)
    wall = time.perf_counter() - started

    timings_file = output / "_build" / "timings.json"
    if not timings_file.exists():
        print(f"\nbuild failed before any page was timed (exit {result.returncode})", file=sys.stderr)
        return result.returncode or 1
    timings = json.loads(timings_file.read_text())
    if page:
        timings = {page: timings.get(page, {"seconds": None, "succeeded": False})}  # absent: it never finished
    problems, table = check_timings(root, timings)
    if page and any("over its budget" in problem for problem in problems):
        problems.append("a page run alone also trains what earlier pages would have (their checkpoints are kept): "
                        "run it again to time it alone")
    print(f"\nExecution time per page (also in {timings_file}):\n{table}\nbuild wall time: {wall:.0f} s")

    if result.returncode != 0:
        problems.insert(0, f"jupyter-book exited with {result.returncode} (a cell failed or Sphinx warned)")
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
    arguments = parser.parse_args()
    sys.exit(build(arguments.root.resolve(), reuse=arguments.reuse, page=arguments.page))
