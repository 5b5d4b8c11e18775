"""Does the machine factor predict how long pages take? (tools/build_clock.py)

1. The factor's own spread: the calibration REPEATS times in a row, each time from a fresh process.
2. The SLOWEST pages of the last full build (`_build/timings.json`: run `make test` or `make book` first), each
   executed twice: as usual, and restricted to one core (`taskset -c 0`: a slower machine), each run just after a
   calibration under the same restriction. A page finds the checkpoints that earlier pages of that build had saved
   before it started (told apart by the files' times), and none of its own, so it does the work it did in the
   build. If the factor predicts page times, a page's reference seconds (seconds / factor) agree both ways: the
   ratio one core / usual should be within 25% of 1.

    .venv/bin/python benchmarks/bench_clock.py [--pages 6] [--repeats 5]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "_build"
ONE_CORE = ["taskset", "-c", "0"]


def calibrate(restriction: list[str]) -> dict:
    command = [*restriction, sys.executable, str(ROOT / "tools" / "build_clock.py"), "--json"]
    return json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)


def execute(page: str) -> None:
    """Run book/<page>.md top to bottom from book/, as the build does; print the seconds it took (child process)."""
    import jupytext
    from nbclient import NotebookClient

    notebook = jupytext.read(ROOT / f"{page}.md")
    started = time.perf_counter()
    NotebookClient(notebook, timeout=1200, resources={"metadata": {"path": str(ROOT / "book")}}).execute()
    print(time.perf_counter() - started)


def checkpoints_before(started: float, folder: Path) -> Path:
    """A fresh folder holding (as links) the checkpoints of the last build that were saved before `started`."""
    scratch = BUILD / "bench_clock" / "checkpoints"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    for path in folder.iterdir():
        if path.is_file() and not path.name.startswith(".") and path.stat().st_mtime < started:
            os.link(path, scratch / path.name)
    return scratch


def time_page(page: str, started: float, restriction: list[str]) -> float:
    environment = {**os.environ, "MINFORMERS_BUILD": "1",
                   "MINFORMERS_CHECKPOINTS": str(checkpoints_before(started, BUILD / "checkpoints"))}
    command = [*restriction, sys.executable, __file__, "--execute", page]
    result = subprocess.run(command, capture_output=True, text=True, env=environment)
    if result.returncode != 0:
        raise RuntimeError(f"{page} failed under {restriction or 'no restriction'}:\n{result.stderr[-3000:]}")
    return float(result.stdout.split()[-1])


def spread(repeats: int) -> None:
    clocks = [calibrate([]) for _ in range(repeats)]
    factors = [clock["factor"] for clock in clocks]
    print(f"The factor over {repeats} calibrations, each a fresh process: "
          + ", ".join(f"{factor:.3f}" for factor in factors))
    median = statistics.median(factors)
    print(f"median {median:.3f}, range {min(factors):.3f} to {max(factors):.3f} "
          f"({(max(factors) - min(factors)) / median:.1%} of the median)")
    for name in clocks[0]["parts"]:
        seconds = [clock["parts"][name] for clock in clocks]
        print(f"  {name:<14} {statistics.median(seconds):6.2f} s (range {min(seconds):.2f} to {max(seconds):.2f})")


def prediction(count: int) -> None:
    timings = BUILD / "timings.json"
    if not timings.exists() or not (BUILD / "checkpoints").is_dir():
        raise SystemExit("no full build to take the slowest pages from: run `make test` (or `make book`) first")
    pages = json.loads(timings.read_text())["pages"]
    slowest = sorted(pages, key=lambda name: -pages[name]["seconds"])[:count]
    print(f"\n{'page':<32} {'usual s':>8} {'factor':>7} {'ref s':>7} {'1 core s':>9} {'factor':>7} {'ref s':>7}"
          f" {'ratio':>6}")
    ratios = []
    for page in slowest:
        started = pages[page]["finished"] - pages[page]["seconds"]
        row = []
        for restriction in ([], ONE_CORE):
            factor = calibrate(restriction)["factor"]
            seconds = time_page(page, started, restriction)
            row.append((seconds, factor, seconds / factor))
        ratios.append(row[1][2] / row[0][2])
        cells = " ".join(f"{s:8.1f} {f:7.2f} {r:7.1f}" for s, f, r in row)
        print(f"{page.removeprefix('book/'):<32} {cells}  {ratios[-1]:6.2f}", flush=True)
    worst = max(ratios, key=lambda ratio: abs(ratio - 1))
    print(f"reference seconds on one core against as usual: ratios {min(ratios):.2f} to {max(ratios):.2f}; "
          f"the farthest from 1 is {worst:.2f} ({abs(worst - 1):.0%} off; the goal is within 25%)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="calibrations for the factor's spread")
    parser.add_argument("--pages", type=int, default=6, help="how many of the slowest pages to time")
    parser.add_argument("--execute", help=argparse.SUPPRESS)  # the child process that runs one page
    arguments = parser.parse_args()
    if arguments.execute:
        execute(arguments.execute)
        return
    spread(arguments.repeats)
    prediction(arguments.pages)


if __name__ == "__main__":
    main()
