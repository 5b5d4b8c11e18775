"""Execute one chapter and print how long each code cell took, slowest first: where a page's budget goes.

    python tools/profile_page.py book/bert.md [--top N] [--save executed.ipynb]

The page runs as the book build runs it (MINFORMERS_BUILD=1, from book/), but checkpoints are not cleared, so
delete _build/checkpoints first to time training from scratch.
"""

import argparse
import os
import time
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent


class TimedClient(NotebookClient):
    """Records the wall time of every code cell it executes."""

    def __init__(self, notebook, **kwargs):
        super().__init__(notebook, **kwargs)
        self.cell_seconds: list[tuple[float, int, str]] = []

    async def async_execute_cell(self, cell, cell_index, *args, **kwargs):
        started = time.perf_counter()
        result = await super().async_execute_cell(cell, cell_index, *args, **kwargs)
        if cell.cell_type == "code":
            first_line = next((line for line in cell.source.splitlines() if line.strip()), "")
            self.cell_seconds.append((time.perf_counter() - started, cell_index, first_line))
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("page", type=Path)
    parser.add_argument("--top", type=int, default=12, help="how many of the slowest cells to list")
    parser.add_argument("--save", type=Path, help="also write the executed notebook here, to read its outputs")
    arguments = parser.parse_args()
    os.environ["MINFORMERS_BUILD"] = "1"
    notebook = jupytext.read(arguments.page)
    client = TimedClient(notebook, timeout=600, resources={"metadata": {"path": str(arguments.page.parent)}})
    started = time.perf_counter()
    try:
        client.execute()
    finally:  # the outputs up to a failing cell are what one needs to read
        if arguments.save:
            nbformat.write(notebook, arguments.save)
    total = time.perf_counter() - started
    print(f"{arguments.page}: {total:.1f} s in all, {len(client.cell_seconds)} code cells")
    for seconds, index, first_line in sorted(client.cell_seconds, reverse=True)[: arguments.top]:
        print(f"{seconds:7.2f} s  cell {index:3d}  {first_line[:80]}")


if __name__ == "__main__":
    main()
